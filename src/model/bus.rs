// SPDX-License-Identifier: GPL-2.0

//! Engine memory access: how the device's engines (the QMANs' fetches, the
//! DMA cores) reach memory, decoded by address as Gaudi2's fabric does:
//!
//! - host physical `[HOST_PHYS_BASE_0, + HOST_PHYS_SIZE_0)`
//!   (include/gaudi2/gaudi2.h:48-49): a bus address, no MMU (upstream gives
//!   the QMANs and the CPU queues bus addresses, gaudi2/gaudi2.c:5319-5323,
//!   5385-5387);
//! - the host VA space `[VA_HOST_SPACE_PAGE_START, VA_HOST_SPACE_HPAGE_END)`
//!   (gaudi2/gaudi2P.h:131-135): through the PMMU (tables in host memory,
//!   read by DMA) to a bus address;
//! - the DRAM space `[DRAM_PHYS_BASE, VA_HBM_SPACE_END)`: through the
//!   engines' HMMU when it translates (the VA scrambled, the page found
//!   descrambled, tables in DRAM), else a DRAM physical address;
//! - SRAM `[SRAM_BASE_ADDR, + sram_bytes)`: physical;
//! - the register space `[CFG_BASE, + CFG_SIZE)`: an LBW access, 32-bit
//!   words only (how a `MSG_LONG` increments a SOB);
//! - anything else: an address-decode error (upstream's RAZWI).
//!
//! A host address goes to the [`Env`], which refuses what the driver did
//! not map for the device: a device-side fault, never a read of other
//! memory. Every fault is counted and captured in the MMU's capture
//! registers (page faults in the MMU that walked, bus errors of host
//! accesses in the PMMU's access-error capture) and reported on the event
//! queue (`super::cpucp`).
//!
//! An access is split at every 4 KiB boundary of its address (no page is
//! smaller): each piece is translated and copied on its own, and an access
//! stops at the first piece that faults. O(pieces x (STLB entries + hops)).

use super::events;
use super::mmu::{ENGINE_HMMU, PMMU};
use super::regs;
use super::security;
use super::stlb::{Miss, Side};
use super::walker::WalkStop;
use super::{Env, Gaudi2};

/// `HOST_PHYS_SIZE_0` (include/gaudi2/gaudi2.h:49): host bus addresses
/// from 0 (`HOST_PHYS_BASE_0`, :48).
pub const HOST_PHYS_END: u64 = 0x0100_0000_0000_0000;
/// LBW writes an LBW write may nest: a safety bound on the model's
/// recursion. A monitor's message no longer nests (it queues, see
/// `super::sm`); an engine's LBW write that fires monitors nests once.
pub const MAX_LBW_DEPTH: u8 = 4;
/// `VA_HOST_SPACE_PAGE_START` (gaudi2/gaudi2P.h:131).
pub const VA_HOST_START: u64 = 0xFFF0_0000_0000_0000;
/// `VA_HOST_SPACE_HPAGE_END` (gaudi2/gaudi2P.h:135).
pub const VA_HOST_END: u64 = 0xFFF1_0000_0000_0000;

/// Why an engine access failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EngineFault {
    /// MMU `mmu` (0: the PMMU, 1..: HMMUs) found no page for `va` (as the
    /// MMU saw it: scrambled for an HMMU).
    Page {
        /// The MMU.
        mmu: usize,
        /// The VA.
        va: u64,
    },
    /// The bus refused the access at `addr` (host memory the driver did
    /// not map, DRAM or SRAM past its end) for the engine address `va`.
    Bus {
        /// The address the engine issued.
        va: u64,
        /// The address the bus refused.
        addr: u64,
    },
    /// No target decodes `addr` (a RAZWI on upstream's terms).
    Decode {
        /// The address the engine issued.
        addr: u64,
    },
}

/// Where a piece of an access lands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Target {
    Host(u64),
    Dram(u64),
    Sram(u64),
    Cfg(u32),
}

/// One piece's data: what to read into or write from.
enum Op<'a> {
    Read(&'a mut [u8]),
    Write(&'a [u8]),
}

impl Gaudi2 {
    /// An engine read of `buf.len()` bytes at `addr` with `asid`'s
    /// translation; a fault is captured and reported as on hardware.
    /// O(pieces x (STLB entries + hops)).
    pub fn engine_read(
        &mut self,
        env: &mut dyn Env,
        asid: u16,
        addr: u64,
        buf: &mut [u8],
    ) -> Result<(), EngineFault> {
        let mut pos = 0usize;
        while let Some(rest) = buf.get_mut(pos..).filter(|r| !r.is_empty()) {
            let at = addr
                .checked_add(pos as u64)
                .ok_or(EngineFault::Decode { addr })?;
            let n = piece_len(at, rest.len());
            let piece = rest.get_mut(..n).ok_or(EngineFault::Decode { addr: at })?;
            self.piece(env, asid, at, Op::Read(piece))
                .inspect_err(|f| self.fault(env, *f, false))?;
            pos = pos.saturating_add(n);
        }
        Ok(())
    }

    /// An engine write of `data` at `addr` with `asid`'s translation.
    /// O(pieces x (STLB entries + hops)).
    pub fn engine_write(
        &mut self,
        env: &mut dyn Env,
        asid: u16,
        addr: u64,
        data: &[u8],
    ) -> Result<(), EngineFault> {
        let mut pos = 0usize;
        while let Some(rest) = data.get(pos..).filter(|r| !r.is_empty()) {
            let at = addr
                .checked_add(pos as u64)
                .ok_or(EngineFault::Decode { addr })?;
            let n = piece_len(at, rest.len());
            let piece = rest.get(..n).ok_or(EngineFault::Decode { addr: at })?;
            self.piece(env, asid, at, Op::Write(piece))
                .inspect_err(|f| self.fault(env, *f, true))?;
            pos = pos.saturating_add(n);
        }
        Ok(())
    }

    /// A user engine's read: a CP's fetch of a user CB (its packets, a
    /// `CB_LIST` table, a `LOAD_AND_EXE` source) or a `LIN_DMA`'s source.
    /// As [`Self::engine_read`], but as a non-secured initiator
    /// ([`user_closed`]): the first address it may not reach is a fault,
    /// reported before anything is read. O(the engine read + its words in
    /// the register space).
    pub fn user_read(
        &mut self,
        env: &mut dyn Env,
        asid: u16,
        addr: u64,
        buf: &mut [u8],
    ) -> Result<(), EngineFault> {
        self.user_access(env, addr, buf.len(), false)?;
        self.engine_read(env, asid, addr, buf)
    }

    /// A user engine's write (a `LIN_DMA`'s destination, a CP's message):
    /// as [`Self::engine_write`], a non-secured initiator's as
    /// [`Self::user_read`]. O(the engine write + its words in the register
    /// space).
    pub fn user_write(
        &mut self,
        env: &mut dyn Env,
        asid: u16,
        addr: u64,
        data: &[u8],
    ) -> Result<(), EngineFault> {
        self.user_access(env, addr, data.len(), true)?;
        self.engine_write(env, asid, addr, data)
    }

    /// [`user_closed`] for `[addr, addr + len)`, the fault counted and
    /// reported as any. O(words in the register space).
    fn user_access(
        &mut self,
        env: &mut dyn Env,
        addr: u64,
        len: usize,
        write: bool,
    ) -> Result<(), EngineFault> {
        match user_closed(addr, len as u64, self.pmmu_on()) {
            Some(f) => {
                self.fault(env, f, write);
                Err(f)
            }
            None => Ok(()),
        }
    }

    /// Whether the PMMU translates (the driver's MMU init is done): then a
    /// non-secured initiator's host accesses are VAs ([`user_closed`]).
    /// O(1).
    pub fn pmmu_on(&self) -> bool {
        self.mmus.get(PMMU).is_some_and(|m| m.translates())
    }

    /// Translate and touch one piece (inside one 4 KiB page).
    fn piece(
        &mut self,
        env: &mut dyn Env,
        asid: u16,
        va: u64,
        op: Op<'_>,
    ) -> Result<(), EngineFault> {
        let target = self.resolve(env, asid, va)?;
        let bus = |addr| EngineFault::Bus { va, addr };
        let len = match &op {
            Op::Read(b) => b.len(),
            Op::Write(d) => d.len(),
        } as u64;
        match (target, op) {
            (Target::Host(a), Op::Read(b)) => {
                env.dma_read(a, b).map_err(|e| bus(e.addr))?;
                self.stats.dma_read_bytes = self.stats.dma_read_bytes.wrapping_add(len);
            }
            (Target::Host(a), Op::Write(d)) => {
                env.dma_write(a, d).map_err(|e| bus(e.addr))?;
                self.stats.dma_write_bytes = self.stats.dma_write_bytes.wrapping_add(len);
            }
            (Target::Dram(a), op) => {
                self.in_memory(a, len, regs::DRAM_PHYS_BASE, self.cfg.dram_bytes)
                    .ok_or(bus(a))?;
                match op {
                    Op::Read(b) => env.dram_read(a, b),
                    Op::Write(d) => env.dram_write(a, d),
                }
                .map_err(|e| bus(e.addr))?;
            }
            (Target::Sram(a), op) => {
                self.in_memory(a, len, regs::SRAM_BASE_ADDR, self.cfg.sram_bytes)
                    .ok_or(bus(a))?;
                match op {
                    Op::Read(b) => env.sram_read(a, b),
                    Op::Write(d) => env.sram_write(a, d),
                }
                .map_err(|e| bus(e.addr))?;
            }
            (Target::Cfg(reg), op) => self
                .lbw(env, reg, op)
                .ok_or(EngineFault::Decode { addr: va })?,
        }
        Ok(())
    }

    /// `Some` if `[a, a + len)` lies in `[base, base + size)`.
    fn in_memory(&self, a: u64, len: u64, base: u64, size: u64) -> Option<()> {
        let end = a.checked_add(len)?;
        (a >= base && end <= base.checked_add(size)?).then_some(())
    }

    /// An LBW access of whole aligned 32-bit words at register `reg`,
    /// refused past [`MAX_LBW_DEPTH`] nested LBW writes (a safety bound:
    /// chains of monitors go through the sync manager's FIFO instead).
    fn lbw(&mut self, env: &mut dyn Env, reg: u32, op: Op<'_>) -> Option<()> {
        if reg % 4 != 0 || self.lbw_depth >= MAX_LBW_DEPTH {
            return None;
        }
        self.lbw_depth += 1;
        let r = self.lbw_words(env, reg, op);
        self.lbw_depth -= 1;
        r
    }

    fn lbw_words(&mut self, env: &mut dyn Env, reg: u32, op: Op<'_>) -> Option<()> {
        match op {
            Op::Read(b) => {
                if b.len() % 4 != 0 {
                    return None;
                }
                let mut r = reg;
                for w in b.chunks_exact_mut(4) {
                    w.copy_from_slice(&self.reg_read(env, r).to_le_bytes());
                    r = r.checked_add(4)?;
                }
            }
            Op::Write(d) => {
                if d.len() % 4 != 0 {
                    return None;
                }
                let mut r = reg;
                for w in d.chunks_exact(4) {
                    let v = <[u8; 4]>::try_from(w).map_or(0, u32::from_le_bytes);
                    self.reg_write(env, r, v);
                    r = r.checked_add(4)?;
                }
            }
        }
        Some(())
    }

    /// Where `va` goes for `asid`: the address decode, then the MMU.
    fn resolve(&mut self, env: &mut dyn Env, asid: u16, va: u64) -> Result<Target, EngineFault> {
        match space(va, self.cfg.sram_bytes) {
            Space::HostBus => Ok(Target::Host(va)),
            Space::HostVa => self.translate(env, PMMU, asid, va).map(Target::Host),
            Space::Dram if self.bypass => Ok(Target::Dram(va)),
            Space::Dram => self.translate(env, ENGINE_HMMU, asid, va).map(Target::Dram),
            Space::Sram => Ok(Target::Sram(va)),
            Space::Cfg(reg) => Ok(Target::Cfg(reg)),
            Space::None => Err(EngineFault::Decode { addr: va }),
        }
    }
}

/// What an engine address decodes to before any MMU, as Gaudi2's fabric
/// decodes it (see the module doc).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Space {
    /// A host bus address, no MMU.
    HostBus,
    /// The host VA space: the PMMU.
    HostVa,
    /// The DRAM space: the HMMUs.
    Dram,
    /// SRAM, physical.
    Sram,
    /// The register space: this register (an LBW access).
    Cfg(u32),
    /// Nothing: an address-decode error (RAZWI).
    None,
}

/// The decode of `va` on a device with `sram_bytes` of SRAM. O(1).
pub fn space(va: u64, sram_bytes: u64) -> Space {
    let cfg_end = regs::CFG_BASE.saturating_add(regs::CFG_SIZE);
    let sram_end = regs::SRAM_BASE_ADDR.saturating_add(sram_bytes);
    if va < HOST_PHYS_END {
        Space::HostBus
    } else if (VA_HOST_START..VA_HOST_END).contains(&va) {
        Space::HostVa
    } else if (regs::DRAM_PHYS_BASE..regs::VA_HBM_SPACE_END).contains(&va) {
        Space::Dram
    } else if (regs::SRAM_BASE_ADDR..sram_end).contains(&va) {
        Space::Sram
    } else if (regs::CFG_BASE..cfg_end).contains(&va) {
        u32::try_from(va - regs::CFG_BASE).map_or(Space::None, Space::Cfg)
    } else {
        Space::None
    }
}

impl Gaudi2 {
    /// `va` through MMU `mmu` for `asid`: the STLB, or a walk and a fill.
    /// An HMMU that does not translate passes DRAM addresses through; the
    /// host VA space without a translating PMMU decodes to nothing.
    /// O(STLB entries + hops).
    fn translate(
        &mut self,
        env: &mut dyn Env,
        mmu: usize,
        asid: u16,
        va: u64,
    ) -> Result<u64, EngineFault> {
        let hmmu = mmu != PMMU;
        let Gaudi2 {
            mmus,
            scrambler,
            stats,
            ..
        } = self;
        let m = mmus.get_mut(mmu).ok_or(EngineFault::Decode { addr: va })?;
        if !m.translates() {
            return if hmmu {
                Ok(va)
            } else {
                Err(EngineFault::Decode { addr: va })
            };
        }
        let side = if hmmu { Side::Dram } else { Side::Host };
        let hop0 = m.hop0(asid);
        let mut dma = 0u64;
        let mut read = |a: u64| {
            let mut b = [0u8; 8];
            let r = if a % 8 != 0 {
                return None;
            } else if hmmu {
                env.dram_read(a, &mut b)
            } else {
                dma = dma.wrapping_add(8);
                env.dma_read(a, &mut b)
            };
            r.ok().map(|()| u64::from_le_bytes(b))
        };
        let t = m
            .stlb
            .translate((side, scrambler), u32::from(asid), va, hop0, &mut read);
        stats.dma_read_bytes = stats.dma_read_bytes.wrapping_add(dma);
        match t {
            Ok(t) if t.hit => stats.stlb_hits = stats.stlb_hits.wrapping_add(1),
            _ => stats.stlb_misses = stats.stlb_misses.wrapping_add(1),
        }
        let key = if hmmu { scrambler.scramble(va) } else { va };
        t.map(|t| t.addr).map_err(|miss| match miss {
            Miss::Walk(WalkStop::Unreadable(addr)) if !hmmu => EngineFault::Bus { va, addr },
            _ => EngineFault::Page { mmu, va: key },
        })
    }

    /// A CB packet addressed the register space (`addr`): a RAZWI,
    /// counted and reported as any decode error. O(1).
    pub(super) fn razwi(&mut self, env: &mut dyn Env, addr: u64) {
        self.fault(env, EngineFault::Decode { addr }, true);
    }

    /// Count, capture and report a fault: a page fault in the capture
    /// registers of the MMU that walked, a bus error in the access-error
    /// capture of the PMMU (host) or the engines' HMMU (device memory),
    /// then an event queue entry (MSI-X 0; a RAZWI's with its address and
    /// whether the access was a `write` as the entry's data). O(1).
    fn fault(&mut self, env: &mut dyn Env, f: EngineFault, write: bool) {
        self.stats.faults = self.stats.faults.wrapping_add(1);
        let mut data = [0; 2];
        let event = match f {
            EngineFault::Page { mmu, va } => {
                if let Some(m) = self.mmus.get_mut(mmu) {
                    m.capture_page_fault(va);
                }
                events::mmu_page_fault(mmu)
            }
            EngineFault::Bus { va, addr } => {
                let mmu = if addr < HOST_PHYS_END {
                    PMMU
                } else {
                    ENGINE_HMMU
                };
                if let Some(m) = self.mmus.get_mut(mmu) {
                    m.capture_access_error(va);
                }
                events::mmu_page_fault(mmu)
            }
            EngineFault::Decode { addr } => {
                data = [addr, u64::from(write)];
                events::RAZWI
            }
        };
        self.post_event_data(env, event, data);
    }
}

/// Where a non-secured initiator (a user CB's CP, its DMA core's data, a
/// user monitor or CQ) may not go in `[addr, addr + len)`, as the fault
/// it meets first, or `None`:
///
/// - with the PMMU on (`pmmu_on`), a host bus address: upstream gives
///   non-secured accesses the context's ASID with the MMU on
///   (`QM_AXUSER_NONSECURED_HB_MMU_BP` 0, `gaudi2_mmu_prepare`,
///   gaudi2/gaudi2.c:7937-7995), and no context's tables map a bus
///   address: a PMMU page fault. Only the driver's own initiators (the PQ
///   fetch, the PQC, the KDMA, its monitors) reach the bus addresses it
///   gives them. With the MMU off (upstream's `mmu_disable`) every
///   address is physical;
/// - a word of the register space a user CB may not write
///   ([`security::user_writable`], upstream's protection bits, for reads
///   as for writes): a RAZWI.
///
/// O(words of the access in the register space).
pub fn user_closed(addr: u64, len: u64, pmmu_on: bool) -> Option<EngineFault> {
    let end = addr.saturating_add(len);
    if pmmu_on && addr < HOST_PHYS_END {
        return Some(EngineFault::Page {
            mmu: PMMU,
            va: addr,
        });
    }
    let cfg_end = regs::CFG_BASE.saturating_add(regs::CFG_SIZE);
    let mut at = addr.max(regs::CFG_BASE);
    while at < end.min(cfg_end) {
        if !regs::cfg_reg(at).is_some_and(|reg| security::user_writable(reg & !3)) {
            return Some(EngineFault::Decode { addr: at });
        }
        at = (at | 3).saturating_add(1);
    }
    None
}

/// Bytes of an access of `len` at `at` up to the next 4 KiB boundary.
fn piece_len(at: u64, len: usize) -> usize {
    let room = 0x1000 - (at & 0xFFF);
    usize::try_from(room).map_or(len, |r| r.min(len))
}
