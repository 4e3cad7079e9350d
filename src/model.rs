// SPDX-License-Identifier: GPL-2.0

//! The Gaudi2 model core: the device as the driver sees it through its
//! registers, written against a small environment trait ([`Env`]) and
//! nothing else.
//!
//! Kernel-free on purpose: only `core` (no `kernel::`, no `alloc`, no `std`,
//! no `unsafe`), no path into the driver (every path here is `super::` or
//! `self::`, never `crate::`), so the same files compile into the kernel
//! module (`mod model;` in `src/hlrs.rs`, host 1: the in-module simulation)
//! and into the userspace server `src/user/gaudi2-model` (host 2, which
//! includes these files by `#[path]`). State is fixed-size, as hardware
//! has: a register file of bounded capacity, per-MMU hop-0 registers and
//! translation caches of fixed sizes; nothing allocates.
//!
//! Everything the driver writes (a register value, a PQ entry, a packet in
//! a command buffer, a PTE) is untrusted input: the model never panics on
//! it (no failing indexing, checked arithmetic), and a bad value ends as a
//! device-side error (a fault captured in the MMU's registers, an event
//! queue entry) as on hardware.
//!
//! Addresses: `reg` is upstream's `mm*` register address, the BAR0 offset
//! minus 0x400_0000 (`rmmio = BAR0 + CFG_BASE - STM_FLASH_BASE_ADDR`,
//! gaudi2/gaudi2.c:2961-2973). Registers are 32-bit; a 64-bit access is two
//! 32-bit ones. A register write completes synchronously (an MMU
//! invalidation is done when the write returns, so the driver's first poll
//! sees it done), except engine work, which [`Gaudi2::step`] runs.
//!
//! The pieces:
//!
//! - [`regs`]: the register map, from upstream's `asic_reg/*.h` (file:line);
//! - [`regfile`]: the fixed-size store of registers the model keeps but
//!   does not interpret (read back as written);
//! - [`boot`]: the PSOC scratchpads and boot status of a device whose
//!   firmware already booted;
//! - [`walker`], [`stlb`], [`mmu`]: the page walk and PTE format, the
//!   translation cache, and the MMU/STLB register blocks (hop 0 per ASID,
//!   invalidations, fault capture);
//! - [`cpucp`]: the CPU-CP stand-in (queue handshake, CPU PQ packets, the
//!   event queue);
//! - [`packets`], [`cp`], [`qman`]: the command buffer packets, the command
//!   processors (4 upper, 1 lower per QMAN) that run them, every user QMAN
//!   (PDMA, EDMA, MME, TPC) that fetches them;
//! - [`engine`]: one engine's command processor running a job to its end
//!   (host 1's engines, each a thread of its own);
//! - [`dma_core`], [`kdma`]: the DMA cores' context registers and the
//!   transfers a `COMMIT` starts (the driver's KDMA, the users' PDMA and
//!   EDMA cores);
//! - [`sm`]: the four dcores' sync managers (SOBs, long SOBs, monitors,
//!   the completion queues, the CQ's MSI-X), fired through a port each
//!   host implements (host 2's: `sm_port`);
//! - [`security`]: what a user CB may write in the register space.

// Host 1 (the in-module simulation, src/hw/sim) moves onto this model piece
// by piece: until it uses all of it, the kernel build sees unused items
// here. The userspace server (host 2) exports the API, which is why its
// items are `pub` although `mod model` is private to the kernel crate.
#![allow(dead_code, unreachable_pub)]

mod boot;
pub mod bus;
pub mod cp;
pub mod cpu_if;
pub mod cpucp;
pub mod dma_core;
pub mod engine;
pub mod events;
pub mod kdma;
pub mod mmu;
pub mod packets;
pub mod qman;
mod regfile;
pub mod regs;
pub mod security;
pub mod sm;
mod sm_port;
pub mod stlb;
pub mod walker;

// Part of the API; the kernel crate does not name it yet (see the allow above).
#[allow(unused_imports)]
pub use bus::EngineFault;
use mmu::{Effect, Mmu, MMUS};
use regfile::RegFile;
use walker::HbmScrambler;

/// Set the low (`high` false) or high half of the 64-bit `v` to `val`: the
/// `_LO`/`_HI` (`L`/`H`) register pairs of an address. O(1).
fn half(v: &mut u64, high: bool, val: u32) {
    *v = if high {
        (*v & 0xFFFF_FFFF) | u64::from(val) << 32
    } else {
        (*v & !0xFFFF_FFFF) | u64::from(val)
    };
}

/// A device access to an address nothing answers: host memory the driver
/// did not map for the device, DRAM or SRAM past its end. The model turns
/// it into a device-side fault, never into a read of other memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BusFault {
    /// The first address of the access.
    pub addr: u64,
}

/// What the model needs of the world it runs in (one implementation per
/// host).
pub trait Env {
    /// Device DMA from a bus address (host memory, through the IOMMU or the
    /// DMA regions QEMU handed over). Err: nothing mapped there.
    fn dma_read(&mut self, addr: u64, buf: &mut [u8]) -> Result<(), BusFault>;
    /// Device DMA to a bus address. Err: nothing mapped there.
    fn dma_write(&mut self, addr: u64, data: &[u8]) -> Result<(), BusFault>;
    /// Device DRAM by device physical address (`DRAM_PHYS_BASE` upward).
    fn dram_read(&mut self, pa: u64, buf: &mut [u8]) -> Result<(), BusFault>;
    /// Device DRAM write by device physical address.
    fn dram_write(&mut self, pa: u64, data: &[u8]) -> Result<(), BusFault>;
    /// Device SRAM by device address (`SRAM_BASE_ADDR` upward).
    fn sram_read(&mut self, pa: u64, buf: &mut [u8]) -> Result<(), BusFault>;
    /// Device SRAM write by device address.
    fn sram_write(&mut self, pa: u64, data: &[u8]) -> Result<(), BusFault>;
    /// Raise MSI-X vector `vector` (0..128).
    fn msix(&mut self, vector: u16);
    /// Monotonic nanoseconds.
    fn now_ns(&mut self) -> u64;
}

/// What a model is built with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    /// Bytes of device DRAM (reported by CPU-CP `INFO_GET`, the end of
    /// the DRAM the engines reach).
    pub dram_bytes: u64,
    /// Bytes of SRAM (at most [`regs::SRAM_SIZE`]).
    pub sram_bytes: u64,
    /// Working HBM stacks (5 or 6): the HMMUs' address scrambling.
    pub hbms: u32,
}

impl Config {
    /// A Gaudi2 with `dram_bytes` of DRAM, full SRAM and 6 HBMs.
    pub const fn with_dram(dram_bytes: u64) -> Self {
        Self {
            dram_bytes,
            sram_bytes: regs::SRAM_SIZE,
            hbms: 6,
        }
    }
}

impl Default for Config {
    /// Upstream's HL-225: 96 GiB of HBM (6 stacks), 48 MiB of SRAM.
    fn default() -> Self {
        Self::with_dram(96 << 30)
    }
}

/// Counters of what the device saw, for `--stats` and the benchmarks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Register reads.
    pub reg_reads: u64,
    /// Register writes.
    pub reg_writes: u64,
    /// Register writes the register file did not keep: no room left, or an
    /// engine's write of a register the driver never wrote.
    pub regfile_dropped: u64,
    /// Doorbells rung (QMAN PQ_PI and CPU PQ PI writes).
    pub doorbells: u64,
    /// Bytes the device read by DMA from host memory.
    pub dma_read_bytes: u64,
    /// Bytes the device wrote by DMA to host memory.
    pub dma_write_bytes: u64,
    /// Device-side faults (MMU page faults, bus faults).
    pub faults: u64,
    /// MSI-X vectors raised.
    pub msix: u64,
    /// Translations served by an STLB.
    pub stlb_hits: u64,
    /// Translations that needed a page walk.
    pub stlb_misses: u64,
    /// MMU cache invalidations (full and range).
    pub invalidations: u64,
    /// CPU-CP packets answered.
    pub cpucp_packets: u64,
    /// Command-buffer packets executed.
    pub packets: u64,
    /// Sync manager monitors fired.
    pub monitors_fired: u64,
    /// Monitor firings dropped because the sync manager's FIFO was full.
    pub sm_dropped: u64,
    /// User monitors' messages refused: a register no user may write.
    pub sm_refused: u64,
    /// Events the event queue had no room for (full, or not set up).
    pub eq_dropped: u64,
}

/// One Gaudi2: fixed-size register state, about 440 KiB (17 MMUs with
/// their STLBs and hop-0 tables; 39 QMANs of 5 CPs with their CB frame
/// stacks; 4 dcores' sync managers of 8,192 SOBs, 2,048 monitors and 64
/// CQs each, about 290 KiB; the register file); a host keeps it on the
/// heap (a kernel stack could not hold a temporary of it).
pub struct Gaudi2 {
    cfg: Config,
    stats: Stats,
    boot: boot::Boot,
    cpu_if: cpu_if::CpuIf,
    mmus: [Mmu; MMUS],
    scrambler: HbmScrambler,
    qmans: [qman::Qman; qman::QMANS],
    sm: sm::SyncManager,
    kdma: kdma::Kdma,
    /// The KDMA's accesses in flight bypass the MMUs (DRAM physical).
    bypass: bool,
    regfile: RegFile,
    /// Nesting of LBW writes: bounded by [`bus::MAX_LBW_DEPTH`] (a
    /// monitor's write no longer nests: it queues, see [`sm`]).
    lbw_depth: u8,
}

impl Gaudi2 {
    /// A device as after power-up and firmware boot (boot status
    /// registers set, MMUs disabled, queues idle). O(size of the state).
    pub fn new(cfg: &Config) -> Self {
        Self {
            cfg: *cfg,
            stats: Stats::default(),
            boot: boot::Boot::new(),
            cpu_if: cpu_if::CpuIf::new(),
            mmus: [const { Mmu::new() }; MMUS],
            scrambler: HbmScrambler::new(cfg.hbms),
            qmans: [const { qman::Qman::new() }; qman::QMANS],
            sm: sm::SyncManager::IDLE,
            kdma: kdma::Kdma::new(),
            bypass: false,
            regfile: RegFile::new(),
            lbw_depth: 0,
        }
    }

    /// QMAN `m` (`m` = its first queue id / 4): its CPs' state, for a
    /// host's diagnostics. O(1).
    pub fn qman(&self, m: usize) -> Option<&qman::Qman> {
        self.qmans.get(m)
    }

    /// The configuration the model was built with.
    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// Read the 32-bit register `reg` (upstream's `mm*` address). A
    /// register the model does not interpret reads as last written (0 if
    /// never). O(1) expected (the register file's probe).
    pub fn reg_read(&mut self, env: &mut dyn Env, reg: u32) -> u32 {
        let _ = env;
        self.stats.reg_reads = self.stats.reg_reads.wrapping_add(1);
        let v = if let Some((i, off)) = mmu::decode(reg) {
            self.mmus.get(i).and_then(|m| m.read(off))
        } else if let Some((i, off)) = qman::decode(reg) {
            self.qmans.get(i).and_then(|m| m.read(off))
        } else {
            self.sm
                .read(reg)
                .or_else(|| self.kdma.read(reg))
                .or_else(|| self.boot.read(reg))
                .or_else(|| self.cpu_if.read(reg))
        };
        v.unwrap_or_else(|| self.regfile.get(reg))
    }

    /// Write the 32-bit register `reg`. Completes synchronously except
    /// engine work (a doorbell queues it for [`Self::step`]). O(1) expected
    /// for plain registers; an invalidation is O(STLB entries), a SOB write
    /// O(monitors armed on its group) plus at most [`sm::FIRE_BUDGET`]
    /// monitor firings (the rest is [`Self::step`]'s), a CPU PQ doorbell
    /// O(packets answered).
    pub fn reg_write(&mut self, env: &mut dyn Env, reg: u32, val: u32) {
        self.stats.reg_writes = self.stats.reg_writes.wrapping_add(1);
        if let Some((i, off)) = mmu::decode(reg) {
            match self.mmus.get_mut(i).map(|m| m.write(off, val)) {
                Some(Effect::Done) => {}
                Some(Effect::Invalidated) => {
                    self.stats.invalidations = self.stats.invalidations.wrapping_add(1);
                }
                Some(Effect::NotMine) | None => self.store(reg, val),
            }
        } else if let Some((i, off)) = qman::decode(reg) {
            match self.qmans.get_mut(i).map(|m| m.write(off, val)) {
                Some(qman::Effect::Doorbell) => {
                    self.stats.doorbells = self.stats.doorbells.wrapping_add(1);
                }
                Some(qman::Effect::Fence) => self.unfence(i),
                Some(qman::Effect::Commit) => {}
                Some(qman::Effect::CommitRefused) => {
                    self.core_error(env, kdma::Core::Qman(i), events::DMA_CORE_WRONG_CFG);
                }
                Some(qman::Effect::Done) => {}
                Some(qman::Effect::NotMine) | None => self.store(reg, val),
            }
        } else if self.sm.write(reg, val) {
            self.sm_run(env);
        } else if let Some(w) = self.kdma.write(reg, val) {
            if w == dma_core::Wrote::Refused {
                self.core_error(env, kdma::Core::Kdma, events::DMA_CORE_WRONG_CFG);
            }
        } else if reg == regs::CPU_IF_PF_PQ_PI {
            self.cpu_pq_doorbell(env, val);
        } else if !self.boot.write(reg, val) && !self.cpu_if.write(reg, val) {
            self.store(reg, val);
        }
    }

    /// Keep `reg` = `val` in the register file (counted as dropped when it
    /// cannot be). An engine's LBW write (a CB's message, a monitor's, the
    /// KDMA's: `lbw_depth` > 0) only changes a register the driver wrote
    /// before, or writes a 0 (what an unwritten register reads): a user's
    /// messages to registers the model does not interpret (the `ARB_*`,
    /// `CQ_*` and `ARC_*` ones upstream leaves unsecured, about 165 per
    /// QMAN) could otherwise fill the file and drop the driver's own later
    /// writes. O(1) expected.
    fn store(&mut self, reg: u32, val: u32) {
        let kept = if self.lbw_depth > 0 {
            self.regfile.update(reg, val) || val == 0
        } else {
            self.regfile.set(reg, val)
        };
        if !kept {
            self.stats.regfile_dropped = self.stats.regfile_dropped.wrapping_add(1);
        }
    }

    /// A fence counter of QMAN `m` grew: its parked CPs look again.
    /// O(CPS).
    fn unfence(&mut self, m: usize) {
        if let Some(x) = self.qmans.get_mut(m) {
            x.streams.iter_mut().for_each(|s| s.cp.fenced = false);
            x.lower.fenced = false;
        }
    }

    /// The counters so far. O(1).
    pub fn stats(&self) -> Stats {
        let (fired, dropped, refused) = self.sm.counts();
        Stats {
            monitors_fired: fired,
            sm_dropped: dropped,
            sm_refused: refused,
            eq_dropped: self.cpu_if.eq_dropped,
            ..self.stats
        }
    }
}
