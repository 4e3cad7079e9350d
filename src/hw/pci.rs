// SPDX-License-Identifier: GPL-2.0

//! A Gaudi2 on the PCI bus (1da3:1020): the second implementation of the
//! sealed [`Backend`], doing what upstream does on silicon.
//!
//! | operation | on the PCI device | upstream |
//! |---|---|---|
//! | `write_pte` / `read_pte` | `writeq` / `readq` at `BAR4 + addr - DRAM_PHYS_BASE` | `gaudi2_write_pte` / `gaudi2_read_pte`, gaudi2/gaudi2.c:11882-11903 |
//! | `set_hop0` | the STLB's `ASID`, `HOP0_PA*`, `BUSY` + poll, on the PMMU or every HMMU ([`mmu`]) | `gaudi2_mmu_update_asid_hop0_addr`, :5998-6028 |
//! | `invalidate_range` / `invalidate_all` | register write + poll, 20 ms ([`mmu`]) | `gaudi2_mmu_invalidate_cache(_range)`, :6198-6273 |
//! | `dma_map_host` / `dma_map_kernel` / `dma_unmap_host` | the DMA API for the PCI function ([`dma`]) | `dma_map_sgtable`, common/memory.c |
//! | `sram_read` / `sram_write` / `scrub_sram` | BAR0 + `0xD00_0000` | the SRAM PCI region, gaudi2/gaudi2.c:3853-3857 |
//! | `dram_read` / `dram_write` / `scrub_dram` | BAR4 | the DRAM PCI region, :3862-3866; upstream scrubs with its EDMAs |
//! | `block_pfn` | BAR0's physical address + the block's offset | `gaudi2_block_mmap`, :11605-11635 |
//! | `status` | the driver's: operational until a register reads all ones or the driver unbinds ([`regs`]) | `hl_device_status` |
//! | `release_sram` | SRAM zeroed through BAR0 for the next context, as upstream's reset upon device release leaves it | `hl_device_release` |
//! | `release_dram`, `release_registers` | nothing: memory keeps what it held (upstream scrubs only with `memory_scrub`, which `memory_scrub=1` does here too, through [`Backend::scrub_sram`] / [`Backend::scrub_dram`]); HW-block registers stay as the user left them (upstream's compute reset at release, not done here, would reset them) | `hl_device_release`, `gaudi2_scrub_device_mem` |
//! | `dram_host_page` | `EOPNOTSUPP`: device DRAM has no `struct page` | — |
//! | `peer_to_peer` / `map_for_importer` | `pci_p2pdma_distance` decides; a non-P2P attachment's map is refused with `EPERM`, a P2P one gets BAR4's pieces mapped with `dma_map_resource`, split at the importer's segment size (on a kernel without `CONFIG_PCI_P2PDMA`, the test kernel, no importer is P2P) | `hl_dmabuf_attach` / `hl_map_dmabuf` / `alloc_sgt_from_device_pages`, common/memory.c:1534-1745 |
//! | `is_idle` | true: HW_IDLE combines it with the engines' busy mask (jobs on the PQs, [`queues`]) | `gaudi2_is_device_idle` |
//! | CPU-CP packets ([`crate::hw::cpucp::CpuCp`]) | the CPU PQ in coherent DMA memory, doorbell, fence polled ([`cpu_queue`]) | `hl_fw_send_cpu_message`, common/firmware_if.c:404-540 |
//!
//! Engines (command submission) are [`queues`]: PQs and doorbells, MSI-X
//! completion, the event queue's errors.
//!
//! Bring-up is [`probe`] (BARs, DMA, MSI-X, the boot check, MMU init);
//! [`PciGaudi2::mmu_enable`] finishes MMU init once the driver's MMU owner
//! has committed every ASID's hop 0; [`PciGaudi2::detach`] is the driver's
//! unbind.

pub(crate) mod cpu_queue;
pub(crate) mod dma;
pub(crate) mod kdma;
pub(crate) mod mmu;
pub(crate) mod probe;
pub(crate) mod queues;
pub(crate) mod regs;
pub(crate) mod user_state;

use crate::asic::{
    gaudi2_regs::{RMMIO_OFFSET, SRAM_BAR_OFFSET},
    user_block, MAX_ASID, NUM_USER_MAPPED_BLOCKS, SRAM_BASE_ADDR, SRAM_SIZE,
};
use crate::ffi::{
    dma::{DmaDirection, Importer, ImporterSgt},
    host_page::HostPage,
    memcg::MemCgroup,
    pci::p2p_reachable,
    pci_dma::DmaStreams,
    pin::PinnedUserPages,
    sched,
};
use crate::hw::backend::{Backend, BusAddrs, DeviceStatus, DramPieces, MmuKind, Sealed};
use kernel::{
    alloc::KVVec,
    page::PAGE_SIZE,
    pci,
    prelude::*,
    sync::{
        aref::ARef,
        atomic::{Atomic, Relaxed},
        Arc, Mutex,
    },
};
use regs::{Life, Mmio};

/// A Gaudi2 on the PCI bus, as the driver drives it.
///
/// # Invariants
///
/// `dram_base < dram_end`, and `[dram_base, dram_end)` lies inside BAR4's
/// window; `streams` is the DMA table of the function whose BARs `mmio`
/// maps.
#[pin_data]
pub(crate) struct PciGaudi2 {
    /// The BARs, liveness and access counts.
    pub(crate) mmio: Mmio,
    /// Host pages mapped for the device.
    streams: Arc<DmaStreams>,
    /// Serializes the MMU register sequences (a leaf lock).
    #[pin]
    mmu_regs: Mutex<()>,
    /// Working HBMs (the HMMUs' address scrambling).
    pub(crate) hbms: u32,
    /// The HMMUs in use, bit `dcore * 4 + hmmu`.
    hmmu_mask: u32,
    /// Device DRAM, `[dram_base, dram_end)`; BAR4 is the window at `dram_base`.
    dram_base: u64,
    dram_end: u64,
    /// The physical addresses of BAR0 (HW-block mappings) and BAR4 (DRAM
    /// exported peer to peer).
    bar0_start: u64,
    bar4_start: u64,
    /// The PCI function (peer-to-peer distances).
    pdev: ARef<pci::Device>,
    /// The CPU queues (CPU-CP), `None` before probe set them up and after
    /// unbind; held across one packet (upstream `send_cpu_message_lock`,
    /// a leaf lock taken alone).
    #[pin]
    cpu_q: Mutex<Option<cpu_queue::CpuQueue>>,
    /// Invalidations left to skip (debugfs `skip_invalidations`), and
    /// skipped.
    skip_inv: Atomic<u64>,
    skipped_inv: Atomic<u64>,
    /// The user HW blocks mapped since the last release, bit `id` (of 453):
    /// what [`Backend::release_registers`] resets. A leaf lock.
    #[pin]
    mapped_blocks: Mutex<[u64; MAPPED_BLOCK_WORDS]>,
    /// The KDMA's bounce buffer (`kdma.rs`), `None` before probe made it
    /// and after unbind; held across one read (a leaf lock).
    #[pin]
    kdma: Mutex<Option<crate::ffi::cpu_dma::CpuDma>>,
}

/// Words of [`PciGaudi2::mapped_blocks`].
const MAPPED_BLOCK_WORDS: usize = NUM_USER_MAPPED_BLOCKS.div_ceil(64);

/// The user HW blocks whose bits `words` sets: (id, first register,
/// bytes). O(words + blocks set).
fn mapped_blocks(words: &[u64; MAPPED_BLOCK_WORDS]) -> impl Iterator<Item = (u32, u32, u32)> + '_ {
    words.iter().enumerate().flat_map(|(w, &bits)| {
        (0..64u32)
            .filter(move |b| bits & (1u64 << b) != 0)
            .filter_map(move |b| {
                let id = u32::try_from(w).ok()?.checked_mul(64)?.checked_add(b)?;
                let block = user_block(u64::from(id))?;
                let base = u32::try_from(block.address).ok()?;
                Some((id, base, u32::try_from(block.size).ok()?))
            })
    })
}

impl PciGaudi2 {
    /// The user HW blocks mapped since the last release (their count) and
    /// each non-zero register of them, `f(id, offset, value)`, read through
    /// BAR0 (debugfs `hw_blocks`: what userspace wrote, the driver reads).
    /// O(registers of those blocks) register reads.
    pub(crate) fn mapped_block_registers(&self, mut f: impl FnMut(u32, u32, u32)) -> usize {
        let words = *self.mapped_blocks.lock();
        let mut n = 0;
        for (id, base, size) in mapped_blocks(&words) {
            n += 1;
            for off in (0..size).step_by(4) {
                let Some(reg) = base.checked_add(off) else {
                    break;
                };
                match self.mmio.rreg_user(reg) {
                    Ok(0) => {}
                    Ok(v) => f(id, off, v),
                    Err(_) => return n,
                }
            }
        }
        n
    }

    /// Make the next `n` MMU cache invalidations be skipped (0: none;
    /// `u64::MAX`: until changed): each answers `Ok` without a register
    /// write, so the device keeps translations it should drop (tests of
    /// what a missed invalidation lets an engine reach; debugfs
    /// `skip_invalidations`, as on a simulated device). O(1).
    pub(crate) fn skip_invalidations(&self, n: u64) {
        self.skip_inv.store(n, Relaxed);
    }

    /// How many of the next invalidations will be skipped, and how many were.
    pub(crate) fn invalidation_skips(&self) -> (u64, u64) {
        (self.skip_inv.load(Relaxed), self.skipped_inv.load(Relaxed))
    }

    /// Whether this invalidation is skipped (counted). O(1).
    fn take_skip(&self) -> bool {
        let mut left = self.skip_inv.load(Relaxed);
        loop {
            if left == 0 {
                return false;
            }
            let next = if left == u64::MAX { left } else { left - 1 };
            match self.skip_inv.cmpxchg(left, next, Relaxed) {
                Ok(_) => break,
                Err(now) => left = now,
            }
        }
        self.skipped_inv.add(1, Relaxed);
        pr_warn!("PCI Gaudi2: an MMU cache invalidation skipped (debugfs skip_invalidations)\n");
        true
    }

    /// The device's counters, as `name value` lines (debugfs `pci`, the
    /// PCI guest test). O(1).
    pub(crate) fn show_counters(&self, f: &mut kernel::fmt::Formatter<'_>) -> kernel::fmt::Result {
        let c = &self.mmio.counters;
        let life = match self.mmio.life() {
            Life::Alive => "alive",
            Life::Dead => "dead",
            Life::Gone => "gone",
        };
        writeln!(f, "state {}", life)?;
        for (name, v) in [
            ("reg_reads", &c.reg_reads),
            ("reg_writes", &c.reg_writes),
            ("pte_writes", &c.pte_writes),
            ("pte_reads", &c.pte_reads),
            ("hop0_commits", &c.hop0_commits),
            ("range_invalidations", &c.range_invalidations),
            ("full_invalidations", &c.full_invalidations),
            ("poll_timeouts", &c.poll_timeouts),
            ("kdma_timeouts", &c.kdma_timeouts),
            ("dma_maps", &c.dma_maps),
            ("dma_unmaps", &c.dma_unmaps),
            ("cs_jobs", &c.cs_jobs),
            ("doorbells", &c.doorbells),
            ("cq_interrupts", &c.cq_interrupts),
            ("cq_entries", &c.cq_entries),
            ("cs_done", &c.cs_done),
            ("cs_halted", &c.cs_halted),
            ("cs_failed", &c.cs_failed),
            ("eq_events", &c.eq_events),
            ("dma_core_errors", &c.dma_core_errors),
        ] {
            writeln!(f, "{} {}", name, v.load(Relaxed))?;
        }
        writeln!(f, "dma_mapped_pages {}", self.streams.mapped_pages())
    }

    /// The driver is being unbound: the device is gone from now on, and
    /// every host page still mapped for it is unmapped (the bus master is
    /// turned off right after). What the memory code still holds is
    /// released by its own teardown, whose invalidations then succeed: no
    /// engine can use a translation of a device that cannot reach memory.
    pub(crate) fn detach(&self) {
        self.mmio.set_gone();
        self.free_cpu_queues();
        drop(self.kdma.lock().take());
        let left = self.streams.close();
        if left > 0 {
            pr_info!(
                "PCI Gaudi2: {} host mapping(s) of open contexts unmapped at removal\n",
                left
            );
        }
    }

    /// `EINVAL` unless `[addr, addr + len)` is in DRAM.
    fn check_dram(&self, addr: u64, len: usize) -> Result {
        let end = addr.checked_add(len as u64).ok_or(EINVAL)?;
        if addr < self.dram_base || end > self.dram_end {
            return Err(EINVAL);
        }
        Ok(())
    }

    /// BAR0 offset of SRAM `[addr, addr + len)`; `EINVAL` outside SRAM.
    fn sram_offset(addr: u64, len: usize) -> Result<u64> {
        let len = u64::try_from(len).map_err(|_| EINVAL)?;
        let span = crate::asic::VaSpan::new(SRAM_BASE_ADDR, SRAM_BASE_ADDR + SRAM_SIZE);
        if len == 0 || !span.contains_area(addr, len) {
            return Err(EINVAL);
        }
        Ok(SRAM_BAR_OFFSET + (addr - SRAM_BASE_ADDR))
    }

    /// `ENODEV` unless the device is alive.
    fn alive(&self) -> Result {
        match self.mmio.life() {
            Life::Alive => Ok(()),
            _ => Err(ENODEV),
        }
    }
}

impl Sealed for PciGaudi2 {}

impl Backend for PciGaudi2 {
    /// A device that is dead or gone keeps no page tables anyone reads:
    /// the write is dropped (a teardown then clears its tables quietly; a
    /// MAP fails at its invalidation).
    fn write_pte(&self, addr: u64, value: u64) -> Result {
        if self.mmio.life() != Life::Alive {
            return Ok(());
        }
        self.mmio.write_pte(self.dram_base, addr, value)
    }

    fn read_pte(&self, addr: u64) -> Result<u64> {
        self.alive()?;
        self.mmio.read_pte(self.dram_base, addr)
    }

    fn set_hop0(&self, kind: MmuKind, asid: u32, addr: u64) -> Result {
        if addr % PAGE_SIZE as u64 != 0 || asid >= MAX_ASID {
            return Err(EINVAL);
        }
        self.commit_hop0(kind, asid, addr)
    }

    fn invalidate_range(&self, kind: MmuKind, asid: u32, va: u64, size: u64) -> Result {
        if self.take_skip() {
            return Ok(());
        }
        self.invalidate_range_regs(kind, asid, va, size)
    }

    fn invalidate_all(&self, kind: MmuKind) -> Result {
        if self.take_skip() {
            return Ok(());
        }
        self.invalidate_all_regs(kind)
    }

    fn status(&self) -> DeviceStatus {
        match self.mmio.life() {
            Life::Alive => DeviceStatus::Operational,
            Life::Dead | Life::Gone => DeviceStatus::Malfunction,
        }
    }

    fn is_idle(&self) -> bool {
        true
    }

    fn dma_map_host(&self, pinned: &PinnedUserPages, page_size: u64) -> Result<BusAddrs> {
        self.alive()?;
        self.map_pinned(pinned, page_size)
    }

    fn dma_map_kernel(&self, pages: KVVec<HostPage>) -> Result<BusAddrs> {
        self.alive()?;
        self.map_kernel(pages)
    }

    fn dma_unmap_host(&self, addrs: &[u64], page_size: u64) {
        self.unmap_bus(addrs, page_size)
    }

    fn peer_to_peer(&self, importer: &Importer<'_>) -> bool {
        p2p_reachable(&self.pdev, importer)
    }

    /// `hl_map_dmabuf`: `EPERM` unless the attachment is peer to peer; then
    /// each DRAM piece's BAR4 range, split at the importer's segment size
    /// (4 KiB multiples), mapped for it with `dma_map_resource`.
    /// O(pieces + bytes / segment).
    fn map_for_importer(
        &self,
        importer: &Importer<'_>,
        dir: DmaDirection,
        pieces: DramPieces<'_>,
    ) -> Result<ImporterSgt> {
        if !importer.peer2peer() {
            return Err(EPERM);
        }
        self.alive()?;
        let seg = importer.max_seg_size() / PAGE_SIZE as u64 * PAGE_SIZE as u64;
        if seg == 0 {
            return Err(EINVAL);
        }
        let mut bars = KVec::new();
        for (pa, len) in pieces {
            self.check_dram(pa, usize::try_from(len).map_err(|_| EINVAL)?)?;
            let mut at = self
                .bar4_start
                .checked_add(pa - self.dram_base)
                .ok_or(EINVAL)?;
            let mut left = len;
            while left > 0 {
                let n = left.min(seg);
                bars.push((at, n), GFP_KERNEL)?;
                at = at.checked_add(n).ok_or(EINVAL)?;
                left -= n;
            }
        }
        ImporterSgt::map_resources(importer, dir, &bars)
    }

    fn dram_host_page(&self, _pa: u64) -> Result<HostPage> {
        Err(EOPNOTSUPP)
    }

    fn host_phys(&self, bus: u64) -> Option<u64> {
        self.streams.iova_to_phys(bus)
    }

    fn dram_read(&self, addr: u64, buf: &mut [u8]) -> Result {
        self.check_dram(addr, buf.len())?;
        self.alive()?;
        self.mmio.dram_read(self.dram_base, addr, buf)
    }

    fn dram_write(&self, addr: u64, data: &[u8]) -> Result {
        self.check_dram(addr, data.len())?;
        self.alive()?;
        self.mmio.dram_write(self.dram_base, addr, data)
    }

    /// Through BAR4, 8 bytes at a time (upstream memsets with its EDMAs).
    fn scrub_dram(&self, from: u64, val: u64) -> Result {
        if from % 8 != 0 || from < self.dram_base || from >= self.dram_end {
            return Err(EINVAL);
        }
        self.alive()?;
        self.mmio
            .dram_fill(self.dram_base, from, self.dram_end - from, val)
    }

    fn release_dram(&self, _pa: u64, _len: u64) {}

    fn set_memory_owner(&self, _owner: Option<MemCgroup>) {}

    fn sram_read(&self, addr: u64, buf: &mut [u8]) -> Result {
        let off = Self::sram_offset(addr, buf.len())?;
        self.alive()?;
        self.mmio.bar0_read(off, buf)
    }

    fn sram_write(&self, addr: u64, data: &[u8]) -> Result {
        let off = Self::sram_offset(addr, data.len())?;
        self.alive()?;
        self.mmio.bar0_write(off, data)
    }

    fn release_sram(&self) -> usize {
        // Nothing of one context is left for the next: SRAM is zeroed
        // through BAR0 (upstream's reset upon device release leaves it
        // so; the model maps SRAM as shared memory, so this is plain
        // stores, no register traffic). Written chunks are not tracked on
        // silicon: 0.
        self.scrub_sram(0);
        0
    }

    fn scrub_sram(&self, val: u64) {
        if self.alive().is_err() {
            return;
        }
        if let Err(e) = self.mmio.bar0_fill(SRAM_BAR_OFFSET, SRAM_SIZE, val) {
            pr_err!("PCI Gaudi2: scrubbing SRAM failed ({:?})\n", e);
        }
    }

    /// `gaudi2_block_mmap`: `pci_resource_start(BAR0) + CFG_BASE + address -
    /// STM_FLASH_BASE_ADDR`; `EINVAL` for an unknown id or a size other
    /// than the block's.
    fn block_pfn(&self, id: u32, size: u64) -> Result<u64> {
        let b = user_block(u64::from(id)).ok_or(EINVAL)?;
        if size != b.size {
            return Err(EINVAL);
        }
        self.alive()?;
        let at = self
            .bar0_start
            .checked_add(RMMIO_OFFSET)
            .and_then(|a| a.checked_add(b.address))
            .ok_or(EINVAL)?;
        // Its registers are reset at the release.
        if let Some(w) = self.mapped_blocks.lock().get_mut(id as usize / 64) {
            *w |= 1u64 << (id % 64);
        }
        Ok(at >> kernel::page::PAGE_SHIFT)
    }

    /// Upstream resets a Gaudi2 when its user releases it
    /// (`reset_upon_device_release`, common/habanalabs_drv.c:373): the next
    /// user finds the HW blocks' registers at their reset values. This
    /// driver has no reset; it writes 0 (the model's reset value) to every
    /// register of each block mapped since the last release, through BAR0.
    /// O(registers of those blocks) register writes.
    fn release_registers(&self) -> usize {
        let words = core::mem::replace(&mut *self.mapped_blocks.lock(), [0; MAPPED_BLOCK_WORDS]);
        let mut n = 0;
        for (_, base, size) in mapped_blocks(&words) {
            n += 1;
            if self.alive().is_err() {
                continue;
            }
            for off in (0..size).step_by(4) {
                if let Some(reg) = base.checked_add(off) {
                    let _ = self.mmio.wreg(reg, 0);
                }
            }
            sched::cond_resched();
        }
        n
    }
}
