// SPDX-License-Identifier: GPL-2.0

//! The simulated Gaudi2: the [`Backend`] used when there is no hardware.
//!
//! Device DRAM is sparse: only 4 KiB chunks that were written are backed by
//! host memory (a tree of pages keyed by chunk index), so a simulated 96 GiB
//! Gaudi2 costs nothing until it is used; unwritten DRAM reads as zeros.
//! Since DRAM is host memory, dma-buf importers are served those pages (the
//! "host pages" flavour of [`Backend`], see `crate::hw::backend`): mapping an
//! export for an importer, or touching a CPU mapping of it, populates the
//! chunks of the range that were never written (zeroed pages). Page-table
//! entries live in that same DRAM, exactly where a real Gaudi2 keeps its
//! device-resident (HMMU) tables.
//!
//! SRAM (48 MiB at `SRAM_BASE_ADDR`) is sparse the same way, in a tree of
//! its own keyed by the chunk's offset from the SRAM base; it is zeroed (its
//! chunks freed) when the compute context goes, like the HW-block registers
//! ([`Backend::release_sram`]).
//!
//! The engines' side of the MMUs is a hardware model of its own, which
//! shares no code with the driver's page tables:
//!
//! - [`crate::model::walker`] (the model core's): the page walk
//!   from each ASID's hop 0 (set by the driver through
//!   [`Backend::set_hop0`]), PTEs decoded from Gaudi2's format, and the
//!   HMMUs' HBM scrambling;
//! - [`stlb`]: the translation cache, filled only by walks and emptied only
//!   by [`Backend::invalidate_range`] / [`Backend::invalidate_all`] (and
//!   eviction);
//! - [`iommu`]: the host pages the device may reach by bus address
//!   ([`Backend::dma_map_host`], [`Backend::dma_map_kernel`]), where the PMMU
//!   reads its host-resident tables and engines their host buffers;
//! - [`engine_mem`]: engine reads and writes through all of it, and
//!   [`fault`]: what they can end in.
//!
//! The engines that use it to run user command buffers: [`qman`] (queues,
//! engines and the threads they run on), [`cp`] (the command processor: a
//! job's packets fetched, decoded and executed), [`packets`] (the packet
//! formats), [`job`] (what a job tells its owner).
//!
//! MMU cache invalidations are logged so tests can check that exactly the
//! touched range was invalidated. Fault injection: failing PTE writes,
//! failing or skipped invalidations, failing chunk allocations.
//!
//! Lock order (the crate root's table): the STLB's lock is taken alone (by an
//! engine's access piece or an invalidation) and holds only the leaves below
//! it; every other lock here is a leaf.

pub(crate) mod cfg_space;
pub(crate) mod cp;
pub(crate) mod cpu_budget;
pub(crate) mod engine_mem;
pub(crate) mod fault;
pub(crate) mod host_backing;
pub(crate) mod iommu;
pub(crate) mod job;
pub(crate) mod packets;
pub(crate) mod qman;
pub(crate) mod stlb;
pub(crate) mod sync_manager;

use crate::asic::{AsicProperties, MAX_ASID, SRAM_BASE_ADDR, SRAM_SIZE};
use crate::hw::backend::{Backend, BusAddrs, DeviceStatus, MmuKind};
use crate::model::walker::HbmScrambler;
use crate::{
    ffi::{
        dma::{DmaDirection, Importer, ImporterSgt},
        dma_pages::DmaPages,
        host_page::HostPage,
        memcg::MemCgroup,
        pin::PinnedUserPages,
    },
    hw::backend::DramPieces,
};
use kernel::{
    alloc::KVVec,
    new_mutex,
    prelude::*,
    sync::{
        atomic::{Atomic, Relaxed},
        Mutex,
    }, //
};

use host_backing::{Fill, SparseMem, CHUNK, CHUNK_U64};

/// One recorded MMU cache invalidation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Invalidation {
    /// Which MMU.
    pub(crate) kind: MmuKind,
    /// The ASID, or `None` for a full invalidation.
    pub(crate) asid: Option<u32>,
    /// First VA (0 for a full invalidation).
    pub(crate) va: u64,
    /// Size in bytes (0 for a full invalidation).
    pub(crate) size: u64,
}

/// Counters and the last event of the invalidation engine.
#[derive(Debug, Default)]
pub(crate) struct InvalidationLog {
    /// Number of invalidations since the device was created (skipped ones
    /// included).
    pub(crate) count: u64,
    /// The most recent one.
    pub(crate) last: Option<Invalidation>,
    /// How many were skipped on purpose (fault injection).
    pub(crate) skipped: u64,
}

/// A simulated Gaudi2.
///
/// # Invariants
///
/// Every chunk of `dram` is the chunk index of an address inside
/// `[dram_base, dram_end)`.
#[pin_data]
pub(crate) struct SimGaudi2 {
    dram_base: u64,
    dram_end: u64,
    #[pin]
    dram: Mutex<SparseMem>,
    /// SRAM chunks written since the last compute context went, keyed by
    /// `(addr - SRAM_BASE_ADDR) / CHUNK`.
    #[pin]
    sram: Mutex<SparseMem>,
    #[pin]
    invalidations: Mutex<InvalidationLog>,
    /// The MMUs' STLB; held across each engine access piece.
    #[pin]
    stlb: Mutex<stlb::Stlb>,
    /// The host pages the device may reach by DMA (its IOMMU's map).
    #[pin]
    dma_pages: Mutex<DmaPages>,
    /// Engine faults and uses of stale translations.
    #[pin]
    faults: Mutex<fault::FaultLog>,
    /// The HMMUs' HBM address scrambling.
    scrambler: HbmScrambler,
    /// The hop-0 address of each ASID, PMMU then DMMU (0: not set).
    hop0: [[Atomic<u64>; MAX_ASID as usize]; 2],
    /// PTE writes since creation (statistics).
    pte_writes: Atomic<u64>,
    /// Fault injection: when non-zero, the PTE write that brings it to zero fails.
    fail_pte_write_in: Atomic<u64>,
    /// Fault injection: how many of the next invalidations fail.
    fail_invalidation: Atomic<u64>,
    /// Fault injection: how many of the next invalidations are skipped
    /// (answered `Ok`, the STLB left as it was).
    skip_invalidation: Atomic<u64>,
    /// Fault injection: when non-zero, the chunk allocation for an importer
    /// or a CPU mapping that brings it to zero fails.
    fail_host_page_in: Atomic<u64>,
    /// The value never-written DRAM at and above chunk `dram_fill_from`
    /// reads as (the last scrub's, `memory_scrub_val`; 0 until then).
    /// Both change only under `dram`'s lock.
    dram_fill: Atomic<u64>,
    dram_fill_from: Atomic<u64>,
    /// The value never-written SRAM reads as (the last scrub's; 0 until
    /// then). Changes only under `sram`'s lock.
    sram_fill: Atomic<u64>,
    /// The registers behind the user-mappable HW blocks.
    #[pin]
    pub(crate) cfg_space: cfg_space::CfgSpace,
    /// The sync manager and the QMANs' CP registers.
    #[pin]
    pub(crate) sync: sync_manager::SimSync,
}

impl SimGaudi2 {
    /// A simulated device with the DRAM geometry of `asic`, operational and idle.
    pub(crate) fn new(asic: &AsicProperties) -> impl PinInit<Self, Error> {
        let (dram_base, dram_end) = (asic.dram_base, asic.dram_end());
        let scrambler = HbmScrambler::new(asic.hbms);
        let user_from = asic.dram_user_base / CHUNK_U64;
        try_pin_init!(Self {
            dram_base,
            dram_end,
            // User DRAM (what ALLOC hands out) is bounded and charged; the
            // page tables below it are the driver's.
            dram <- new_mutex!(SparseMem::new(user_from, true)),
            // SRAM (48 MiB, dropped when its context goes) is neither.
            sram <- new_mutex!(SparseMem::new(u64::MAX, false)),
            invalidations <- new_mutex!(InvalidationLog::default()),
            stlb <- new_mutex!(stlb::new()?),
            dma_pages <- new_mutex!(DmaPages::new()),
            faults <- new_mutex!(fault::FaultLog::default()),
            scrambler,
            hop0: core::array::from_fn(|_| core::array::from_fn(|_| Atomic::new(0))),
            pte_writes: Atomic::new(0),
            fail_pte_write_in: Atomic::new(0),
            fail_invalidation: Atomic::new(0),
            skip_invalidation: Atomic::new(0),
            fail_host_page_in: Atomic::new(0),
            dram_fill: Atomic::new(0),
            dram_fill_from: Atomic::new(u64::MAX),
            sram_fill: Atomic::new(0),
            cfg_space <- cfg_space::CfgSpace::new(),
            sync <- sync_manager::SimSync::new(),
        })
    }

    /// A copy of the invalidation counters (tests, debugfs).
    pub(crate) fn invalidation_log(&self) -> (u64, Option<Invalidation>) {
        let log = self.invalidations.lock();
        (log.count, log.last)
    }

    /// PTE writes since the device was created.
    pub(crate) fn pte_writes(&self) -> u64 {
        self.pte_writes.load(Relaxed)
    }

    /// Make the `n`-th PTE write from now fail with `EIO` (0: never). Tests only.
    pub(crate) fn inject_pte_write_failure(&self, n: u64) {
        self.fail_pte_write_in.store(n, Relaxed);
    }

    /// Make the next MMU cache invalidation fail with `EIO`. Tests only.
    pub(crate) fn inject_invalidation_failure(&self) {
        self.inject_invalidation_failures(1);
    }

    /// Make the next `n` MMU cache invalidations fail with `EIO` (0: none;
    /// `u64::MAX`: until changed). Tests and debugfs only.
    pub(crate) fn inject_invalidation_failures(&self, n: u64) {
        self.fail_invalidation.store(n, Relaxed);
    }

    /// How many of the next invalidations will fail.
    pub(crate) fn invalidation_failures_left(&self) -> u64 {
        self.fail_invalidation.load(Relaxed)
    }

    fn take_invalidation_failure(&self) -> Result {
        let left = self.fail_invalidation.load(Relaxed);
        if left != 0 {
            if left != u64::MAX {
                self.fail_invalidation.store(left - 1, Relaxed);
            }
            // So that the driver's report that follows reads as provoked.
            pr_info!("simulated Gaudi2: MMU invalidation failed on purpose (fault injection)\n");
            return Err(EIO);
        }
        Ok(())
    }

    /// Make the next `n` MMU cache invalidations be skipped (0: none;
    /// `u64::MAX`: until changed): each answers `Ok` and is logged, but the
    /// STLB keeps the entries it should drop (marked stale, so that their
    /// uses are counted). Tests and debugfs only.
    pub(crate) fn skip_invalidations(&self, n: u64) {
        self.skip_invalidation.store(n, Relaxed);
    }

    /// How many of the next invalidations will be skipped, and how many were.
    pub(crate) fn invalidation_skips(&self) -> (u64, u64) {
        let left = self.skip_invalidation.load(Relaxed);
        (left, self.invalidations.lock().skipped)
    }

    fn take_invalidation_skip(&self) -> bool {
        let left = self.skip_invalidation.load(Relaxed);
        if left == 0 {
            return false;
        }
        if left != u64::MAX {
            self.skip_invalidation.store(left - 1, Relaxed);
        }
        pr_info!("simulated Gaudi2: MMU invalidation skipped on purpose (fault injection)\n");
        true
    }

    /// The STLB's statistics, and its valid and stale entries (tests,
    /// debugfs, bench). O(entries).
    pub(crate) fn stlb_stats(&self) -> (stlb::StlbStats, (usize, usize)) {
        let s = self.stlb.lock();
        (s.stats(), s.occupancy())
    }

    /// The engine faults so far (tests, debugfs, the fault report). O(1).
    pub(crate) fn engine_faults(&self) -> fault::FaultLog {
        *self.faults.lock()
    }

    /// The hop-0 address of `asid` in the MMU of `kind`, if the driver set
    /// one. O(1).
    pub(crate) fn hop0(&self, kind: MmuKind, asid: u32) -> Option<u64> {
        let k = usize::from(kind == MmuKind::Dram);
        let a = usize::try_from(asid).ok()?;
        let at = self.hop0.get(k)?.get(a)?.load(Relaxed);
        (at != 0).then_some(at)
    }

    /// Make the `n`-th chunk that [`Backend::dram_host_page`] allocates from
    /// now fail with `ENOMEM` (0: never). Tests only.
    pub(crate) fn inject_host_page_failure(&self, n: u64) {
        self.fail_host_page_in.store(n, Relaxed);
    }

    fn take_host_page_failure(&self) -> Result {
        let left = self.fail_host_page_in.load(Relaxed);
        if left != 0 {
            self.fail_host_page_in.store(left - 1, Relaxed);
            if left == 1 {
                return Err(ENOMEM);
            }
        }
        Ok(())
    }

    /// References to the host page backing the DRAM chunk at `pa`, or `None`
    /// if it is not backed. Tests only.
    #[cfg(CONFIG_KUNIT)]
    pub(crate) fn chunk_refs(&self, pa: u64) -> Option<u32> {
        self.dram
            .lock()
            .get(pa / CHUNK_U64)
            .map(HostPage::ref_count)
    }

    /// What never-written DRAM reads as; call with `dram`'s lock held.
    fn dram_fill(&self) -> Fill {
        Some((
            self.dram_fill_from.load(Relaxed),
            self.dram_fill.load(Relaxed),
        ))
    }

    /// Give back the DRAM chunks `[first, end)` (see
    /// [`SparseMem::drop_range`]), a batch at a time with the lock released
    /// in between: a released pack can be many GiB. O(backed chunks in the
    /// range x log n).
    fn drop_chunks(&self, first: u64, end: u64, fill: Fill) -> Result {
        let mut from = first;
        loop {
            let next = self.dram.lock().drop_range(from, end, fill, 1024)?;
            match next {
                Some(at) => from = at,
                None => return Ok(()),
            }
            crate::ffi::sched::cond_resched();
        }
    }

    /// Number of 4 KiB chunks of host memory backing the simulated DRAM.
    /// O(n) in the backed chunks: for tests and debugfs only.
    pub(crate) fn backed_chunks(&self) -> usize {
        self.dram.lock().len()
    }

    /// Bytes of host memory behind this device's user DRAM (counted against
    /// the module-wide limit). O(1).
    pub(crate) fn dram_host_bytes(&self) -> u64 {
        self.dram.lock().counted().saturating_mul(CHUNK_U64)
    }

    /// Number of 4 KiB chunks of host memory backing the simulated SRAM.
    /// O(n) in the backed chunks: for tests and debugfs only.
    pub(crate) fn backed_sram_chunks(&self) -> usize {
        self.sram.lock().len()
    }

    /// The offset in SRAM of `[addr, addr + len)`, which must lie inside it.
    fn sram_offset(addr: u64, len: usize) -> Result<u64> {
        let len = u64::try_from(len).map_err(|_| EINVAL)?;
        let span = crate::asic::VaSpan::new(SRAM_BASE_ADDR, SRAM_BASE_ADDR + SRAM_SIZE);
        if len == 0 || !span.contains_area(addr, len) {
            return Err(EINVAL);
        }
        Ok(addr - SRAM_BASE_ADDR)
    }

    /// Check that `[addr, addr + len)` is inside DRAM.
    fn check(&self, addr: u64, len: usize) -> Result {
        let len = u64::try_from(len).map_err(|_| EINVAL)?;
        let end = addr.checked_add(len).ok_or(EINVAL)?;
        if addr < self.dram_base || end > self.dram_end {
            return Err(EINVAL);
        }
        Ok(())
    }

    fn log(&self, inv: Invalidation, skipped: bool) {
        let mut log = self.invalidations.lock();
        log.count += 1;
        log.last = Some(inv);
        if skipped {
            log.skipped += 1;
        }
    }

    /// The STLB side of an invalidation of `[va, va + size)` of `asid` (all
    /// ASIDs if `None`) in the MMU of `kind`: drop the entries, or, when
    /// skipped, mark them stale. Waits for the access piece in flight.
    /// Returns how many entries it concerned. O(entries).
    fn invalidate_stlb(&self, kind: MmuKind, range: Option<(u32, u64, u64)>, skip: bool) -> u64 {
        // Upstream does a full invalidation for a PMMU range at VA 0 (range
        // invalidation does not support it); the HMMUs get the range
        // scrambled: its first byte and its last, both in the space.
        let range = match (kind, range) {
            (_, Some((_, _, 0))) => return 0,
            (MmuKind::Host, Some((_, 0, _))) | (_, None) => None,
            (MmuKind::Host, Some((asid, va, size))) => Some((asid, va, va.saturating_add(size))),
            (MmuKind::Dram, Some((asid, va, size))) => {
                let last = va.saturating_add(size - 1);
                let end = self.scrambler.scramble(last).saturating_add(1);
                Some((asid, self.scrambler.scramble(va), end))
            }
        };
        let side = stlb::side(kind);
        let mut stlb = self.stlb.lock();
        match (range, skip) {
            (None, false) => stlb.invalidate_all(side),
            (None, true) => stlb.skip_all(side),
            (Some((asid, start, end)), false) => {
                stlb.invalidate_range(side, Some(asid), start, end)
            }
            (Some((asid, start, end)), true) => stlb.skip_range(side, asid, start, end),
        }
    }
}

impl crate::hw::backend::Sealed for SimGaudi2 {}

impl Backend for SimGaudi2 {
    fn write_pte(&self, addr: u64, value: u64) -> Result {
        if addr % 8 != 0 {
            return Err(EINVAL);
        }
        let left = self.fail_pte_write_in.load(Relaxed);
        if left != 0 {
            self.fail_pte_write_in.store(left - 1, Relaxed);
            if left == 1 {
                pr_info!("simulated Gaudi2: PTE write failed on purpose (fault injection)\n");
                return Err(EIO);
            }
        }
        self.pte_writes.add(1, Relaxed);
        self.check(addr, 8)?;
        // One lookup when the hop's chunk is backed (always, once written).
        let (chunk, off) = (addr / CHUNK_U64, (addr % CHUNK_U64) as usize);
        let mut dram = self.dram.lock();
        if let Some(page) = dram.get(chunk) {
            return page.write_u64s(off, &[value]);
        }
        let fill = self.dram_fill();
        dram.write(addr, &value.to_le_bytes(), fill)
    }

    fn read_pte(&self, addr: u64) -> Result<u64> {
        if addr % 8 != 0 {
            return Err(EINVAL);
        }
        self.check(addr, 8)?;
        let (chunk, off) = (addr / CHUNK_U64, (addr % CHUNK_U64) as usize);
        let dram = self.dram.lock();
        if let Some(page) = dram.get(chunk) {
            return page.read_u64(off);
        }
        let mut b = [0u8; 8];
        dram.read(addr, &mut b, self.dram_fill())?;
        Ok(u64::from_le_bytes(b))
    }

    fn set_hop0(&self, kind: MmuKind, asid: u32, addr: u64) -> Result {
        let k = usize::from(kind == MmuKind::Dram);
        let a = usize::try_from(asid).map_err(|_| EINVAL)?;
        let slot = self.hop0.get(k).and_then(|h| h.get(a)).ok_or(EINVAL)?;
        if addr == 0 || addr % 4096 != 0 {
            return Err(EINVAL);
        }
        slot.store(addr, Relaxed);
        Ok(())
    }

    fn invalidate_range(&self, kind: MmuKind, asid: u32, va: u64, size: u64) -> Result {
        self.take_invalidation_failure()?;
        let skip = self.take_invalidation_skip();
        self.invalidate_stlb(kind, Some((asid, va, size)), skip);
        let inv = Invalidation {
            kind,
            asid: Some(asid),
            va,
            size,
        };
        self.log(inv, skip);
        Ok(())
    }

    fn invalidate_all(&self, kind: MmuKind) -> Result {
        self.take_invalidation_failure()?;
        let skip = self.take_invalidation_skip();
        self.invalidate_stlb(kind, None, skip);
        let inv = Invalidation {
            kind,
            asid: None,
            va: 0,
            size: 0,
        };
        self.log(inv, skip);
        Ok(())
    }

    /// The simulation never fails: the device status is the driver's
    /// (`DeviceCs`).
    fn status(&self) -> DeviceStatus {
        DeviceStatus::Operational
    }

    fn is_idle(&self) -> bool {
        // No engines run on the simulation.
        true
    }

    fn dma_map_host(&self, pinned: &PinnedUserPages, page_size: u64) -> Result<BusAddrs> {
        self.map_pinned(pinned, page_size)
    }

    fn dma_map_kernel(&self, pages: KVVec<HostPage>) -> Result<BusAddrs> {
        self.map_kernel(&pages)
    }

    fn dma_unmap_host(&self, addrs: &[u64], page_size: u64) {
        self.unmap_bus(addrs, page_size)
    }

    fn peer_to_peer(&self, _importer: &Importer<'_>) -> bool {
        // Simulated DRAM is host memory: importers get its pages, never a
        // peer-to-peer window.
        false
    }

    fn map_for_importer(
        &self,
        importer: &Importer<'_>,
        dir: DmaDirection,
        pieces: DramPieces<'_>,
    ) -> Result<ImporterSgt> {
        let n = usize::try_from(pieces.bytes() / CHUNK_U64).map_err(|_| ENOMEM)?;
        let mut pages = KVVec::with_capacity(n, GFP_KERNEL)?;
        for (pa, len) in pieces {
            if pa % CHUNK_U64 != 0 || len % CHUNK_U64 != 0 {
                return Err(EINVAL);
            }
            let end = pa.checked_add(len).ok_or(EINVAL)?;
            let mut at = pa;
            while at < end {
                if pages.len() % 512 == 511 {
                    // Once per 2 MiB: an export can be many GiB.
                    crate::ffi::sched::cond_resched();
                }
                pages
                    .push_within_capacity(self.dram_host_page(at)?)
                    .map_err(|_| EINVAL)?;
                at = at.checked_add(CHUNK_U64).ok_or(EINVAL)?;
            }
        }
        ImporterSgt::map_host_pages(importer, dir, pages)
    }

    fn dram_host_page(&self, pa: u64) -> Result<HostPage> {
        if pa % CHUNK_U64 != 0 {
            return Err(EINVAL);
        }
        self.check(pa, CHUNK)?;
        let chunk = pa / CHUNK_U64;
        let mut dram = self.dram.lock();
        if dram.get(chunk).is_none() {
            self.take_host_page_failure()?;
        }
        let fill = self.dram_fill();
        Ok(dram.chunk_or_insert(chunk, fill)?.clone())
    }

    fn host_phys(&self, bus: u64) -> Option<u64> {
        // The simulated IOMMU maps every page at its physical address.
        Some(bus)
    }

    fn dram_read(&self, addr: u64, buf: &mut [u8]) -> Result {
        self.check(addr, buf.len())?;
        self.dram.lock().read(addr, buf, self.dram_fill())
    }

    fn sram_read(&self, addr: u64, buf: &mut [u8]) -> Result {
        let at = Self::sram_offset(addr, buf.len())?;
        let sram = self.sram.lock();
        sram.read(at, buf, Some((0, self.sram_fill.load(Relaxed))))
    }

    fn sram_write(&self, addr: u64, data: &[u8]) -> Result {
        let at = Self::sram_offset(addr, data.len())?;
        let mut sram = self.sram.lock();
        sram.write(at, data, Some((0, self.sram_fill.load(Relaxed))))
    }

    fn release_sram(&self) -> usize {
        let mut sram = self.sram.lock();
        sram.clear()
    }

    fn block_pfn(&self, id: u32, size: u64) -> Result<u64> {
        self.cfg_space.block_pfn(id, size)
    }

    fn release_registers(&self) -> usize {
        self.cfg_space.release_all()
    }

    fn dram_write(&self, addr: u64, data: &[u8]) -> Result {
        self.check(addr, data.len())?;
        // A sleeping lock: allocating under it is allowed.
        let mut dram = self.dram.lock();
        let fill = self.dram_fill();
        dram.write(addr, data, fill)
    }

    fn scrub_dram(&self, from: u64, val: u64) -> Result {
        if from % CHUNK_U64 != 0 || from < self.dram_base || from >= self.dram_end {
            return Err(EINVAL);
        }
        let first = from / CHUNK_U64;
        // Chunks only the tree holds are dropped (they read as the pattern
        // from now on); chunks an importer or a CPU mapping also holds are
        // overwritten in place, so what they see stays the device's DRAM.
        self.drop_chunks(first, u64::MAX, Some((first, val)))?;
        let _dram = self.dram.lock();
        self.dram_fill.store(val, Relaxed);
        self.dram_fill_from.store(first, Relaxed);
        Ok(())
    }

    fn release_dram(&self, pa: u64, len: u64) {
        // No user chunk backed on any device: nothing to give back (the
        // common case of an ALLOC+FREE of memory no engine wrote), one
        // atomic read.
        if host_backing::usage().0 == 0 {
            return;
        }
        let (first, end) = (pa / CHUNK_U64, pa.saturating_add(len) / CHUNK_U64);
        if let Err(e) = self.drop_chunks(first, end, self.dram_fill()) {
            pr_err!(
                "simulated DRAM: released pages could not be cleared ({:?})\n",
                e
            );
        }
    }

    fn scrub_sram(&self, val: u64) {
        let mut sram = self.sram.lock();
        sram.clear();
        self.sram_fill.store(val, Relaxed);
    }

    fn set_memory_owner(&self, owner: Option<MemCgroup>) {
        // The old owner's reference is dropped outside the lock.
        let old = self.dram.lock().set_owner(owner);
        drop(old);
    }
}

#[kunit_tests(hlrs_sim)]
mod tests {
    use super::*;
    use kernel::sync::Arc;

    fn sim() -> Result<Arc<SimGaudi2>> {
        let asic = AsicProperties::gaudi2(6, 0)?;
        Arc::pin_init(SimGaudi2::new(&asic), GFP_KERNEL)
    }

    #[test]
    fn untouched_dram_reads_zero_and_costs_nothing() -> Result {
        let s = sim()?;
        let mut b = [0xffu8; 64];
        s.dram_read(0x1001_0010_0000_0000, &mut b)?;
        assert!(b.iter().all(|&x| x == 0));
        assert_eq!(s.backed_chunks(), 0);
        Ok(())
    }

    #[test]
    fn writes_across_chunks_read_back() -> Result {
        let s = sim()?;
        let addr = 0x1001_0000_3000_0000 + 4096 - 3;
        s.dram_write(addr, &[1, 2, 3, 4, 5, 6])?;
        let mut b = [0u8; 8];
        s.dram_read(addr - 1, &mut b)?;
        assert_eq!(b, [0, 1, 2, 3, 4, 5, 6, 0]);
        assert_eq!(s.backed_chunks(), 2);
        Ok(())
    }

    #[test]
    fn out_of_range_accesses_fail() -> Result {
        let s = sim()?;
        let mut b = [0u8; 8];
        assert_eq!(s.dram_read(0x1000_0000_0000_0000, &mut b), Err(EINVAL));
        let end = 0x1001_0000_0000_0000 + (96u64 << 30);
        assert_eq!(s.dram_read(end - 4, &mut b), Err(EINVAL));
        assert_eq!(s.dram_write(u64::MAX - 2, &b), Err(EINVAL));
        assert!(s.dram_read(end - 8, &mut b).is_ok());
        assert_eq!(s.backed_chunks(), 0);
        Ok(())
    }

    #[test]
    fn ptes_and_invalidations() -> Result {
        let s = sim()?;
        let at = 0x1001_0000_2FC0_0000;
        s.write_pte(at, 0x1234_5000 | 0x801)?;
        assert_eq!(s.read_pte(at)?, 0x1234_5801);
        assert_eq!(s.write_pte(at + 4, 1), Err(EINVAL));
        s.invalidate_range(MmuKind::Dram, 1, 0x1000, 0x2000)?;
        let (n, last) = s.invalidation_log();
        assert_eq!(n, 1);
        assert_eq!(
            last,
            Some(Invalidation {
                kind: MmuKind::Dram,
                asid: Some(1),
                va: 0x1000,
                size: 0x2000
            })
        );
        s.invalidate_all(MmuKind::Host)?;
        let (n, last) = s.invalidation_log();
        assert_eq!(n, 2);
        assert_eq!(last.map(|i| (i.kind, i.asid)), Some((MmuKind::Host, None)));
        Ok(())
    }

    #[test]
    fn scrub_fills_user_dram_and_keeps_the_tables() -> Result {
        let s = sim()?;
        let user = 0x1001_0000_3000_0000u64;
        let pgt = user - 4096;
        s.dram_write(pgt, &[7; 8])?;
        s.dram_write(user + 4096 + 3, &[9; 2])?;
        // A chunk someone else also holds (an importer, a CPU mapping).
        let shared = s.dram_host_page(user + 8 * 4096)?;
        s.dram_write(user + 8 * 4096, &[5; 8])?;
        assert_eq!(s.backed_chunks(), 3);
        assert_eq!(s.scrub_dram(user + 1, 1), Err(EINVAL));
        assert_eq!(s.scrub_dram(0x1000, 1), Err(EINVAL));
        s.scrub_dram(user, 0x1122_3344_5566_7788)?;
        // The tables below the user base are untouched; the unshared chunk
        // is gone and reads as the pattern, at any offset.
        assert_eq!(s.backed_chunks(), 2);
        let mut b = [0u8; 8];
        s.dram_read(pgt, &mut b)?;
        assert_eq!(b, [7; 8]);
        s.dram_read(user + 4096, &mut b)?;
        assert_eq!(u64::from_le_bytes(b), 0x1122_3344_5566_7788);
        let mut odd = [0u8; 3];
        s.dram_read(user + 5 * 4096 + 4093, &mut odd)?;
        assert_eq!(odd, [0x33, 0x22, 0x11]);
        // The shared chunk was overwritten in place: its holder sees it.
        let mut held = [0u8; 8];
        shared.read(0, &mut held)?;
        assert_eq!(u64::from_le_bytes(held), 0x1122_3344_5566_7788);
        // A chunk backed after the scrub starts as the pattern.
        s.dram_write(user + 4096 * 20 + 1, &[0])?;
        s.dram_read(user + 4096 * 20, &mut b)?;
        assert_eq!(b, [0x88, 0, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11]);
        // Scrubbing with 0 gives zeros back and frees the unshared chunks.
        s.scrub_dram(user, 0)?;
        assert_eq!(s.backed_chunks(), 2);
        s.dram_read(user + 4096, &mut b)?;
        assert_eq!(b, [0; 8]);
        shared.read(0, &mut held)?;
        assert_eq!(held, [0; 8]);
        Ok(())
    }

    #[test]
    fn released_dram_goes_back_to_the_host_and_reads_as_never_written() -> Result {
        let s = sim()?;
        let user = 0x1001_0000_3000_0000u64;
        s.dram_write(user - 4096, &[7; 8])?;
        s.dram_write(user + 5, &[1; 8])?;
        s.dram_write(user + 3 * 4096, &[2; 8])?;
        // Writing what unwritten DRAM reads as backs nothing.
        s.dram_write(user + 10 * 4096, &[0; 4096])?;
        let shared = s.dram_host_page(user + 20 * 4096)?;
        shared.write(0, &[3; 8])?;
        assert_eq!((s.backed_chunks(), s.dram_host_bytes()), (4, 3 * 4096));
        s.release_dram(user, 1 << 20);
        // The page tables below the user base stay; the unshared chunks
        // went; the shared one was zeroed in place for its holder.
        let mut b = [0xffu8; 8];
        s.dram_read(user - 4096, &mut b)?;
        assert_eq!(b, [7; 8]);
        s.dram_read(user + 5, &mut b)?;
        assert_eq!(b, [0; 8]);
        shared.read(0, &mut b)?;
        assert_eq!(b, [0; 8]);
        assert_eq!((s.backed_chunks(), s.dram_host_bytes()), (2, 4096));
        drop(shared);
        s.release_dram(user, 1 << 20);
        assert_eq!((s.backed_chunks(), s.dram_host_bytes()), (1, 0));
        Ok(())
    }

    #[test]
    fn the_host_memory_limit_refuses_new_chunks_and_frees_with_the_device() -> Result {
        let s = sim()?;
        let user = 0x1001_0000_3000_0000u64;
        let (used, limit, refused) = host_backing::usage();
        host_backing::set_limit_bytes(used + 2 * 4096);
        s.dram_write(user, &[1; 8])?;
        s.dram_write(user + 4096, &[1; 8])?;
        let r = s.dram_write(user + 2 * 4096, &[1; 8]);
        let full = host_backing::usage();
        host_backing::set_limit_bytes(limit);
        assert_eq!(r, Err(ENOSPC));
        assert_eq!((full.0, full.2), (used + 2 * 4096, refused + 1));
        // Chunks already backed take writes; the page tables are not counted.
        s.dram_write(user + 4090, &[2; 6])?;
        s.dram_write(user - 4096, &[2; 8])?;
        drop(s);
        assert_eq!(host_backing::usage().0, used);
        Ok(())
    }

    #[test]
    fn sram_is_sparse_round_trips_and_resets() -> Result {
        let s = sim()?;
        let top = SRAM_BASE_ADDR + SRAM_SIZE;
        let mut b = [0xffu8; 8];
        s.sram_read(top - 8, &mut b)?;
        assert_eq!(b, [0; 8]);
        assert_eq!(s.backed_sram_chunks(), 0);
        s.sram_write(SRAM_BASE_ADDR + 4094, &[1, 2, 3, 4])?;
        s.sram_write(top - 8, &0x1122_3344_5566_7788u64.to_le_bytes())?;
        s.sram_read(SRAM_BASE_ADDR + 4093, &mut b)?;
        assert_eq!(b, [0, 1, 2, 3, 4, 0, 0, 0]);
        s.sram_read(top - 8, &mut b)?;
        assert_eq!(u64::from_le_bytes(b), 0x1122_3344_5566_7788);
        assert_eq!(s.backed_sram_chunks(), 3);
        // Outside SRAM, across its end, empty or wrapping: refused.
        assert_eq!(s.sram_read(top - 4, &mut b), Err(EINVAL));
        assert_eq!(s.sram_read(SRAM_BASE_ADDR - 8, &mut b), Err(EINVAL));
        assert_eq!(s.sram_write(u64::MAX - 2, &b), Err(EINVAL));
        assert_eq!(s.sram_write(SRAM_BASE_ADDR, &[]), Err(EINVAL));
        // DRAM is another memory.
        s.dram_read(0x1001_0000_3000_0000, &mut b)?;
        assert_eq!(b, [0; 8]);
        assert_eq!(s.release_sram(), 3);
        s.sram_read(top - 8, &mut b)?;
        assert_eq!(b, [0; 8]);
        assert_eq!(s.backed_sram_chunks(), 0);
        Ok(())
    }
}
