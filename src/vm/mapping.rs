// SPDX-License-Identifier: GPL-2.0

//! MAP and UNMAP of device memory (upstream `map_device_va`, `unmap_device_va`,
//! `map_phys_pg_pack`, `unmap_phys_pg_pack`, common/memory.c:942-1406) and the
//! mapping part of context teardown (`hl_vm_ctx_fini`, memory.c:2748-2786).
//!
//! Lock order: see `mmu.rs`. The handle table is held only to look up a handle
//! and change its mapping count; a VA range only inside its allocator calls;
//! the context's page-table lock across the mapping of one pack; the mapping
//! table only to insert or remove one record.
//!
//! Differences from upstream: a failure after the PTEs were written (the MMU
//! cache invalidation) unmaps them again before the VA is given back (upstream
//! leaves stale PTEs, memory.c:1195-1210); an UNMAP whose invalidation fails
//! keeps the VA out of the free list (quarantined until teardown) instead of
//! handing it out again while stale TLB entries may cover it
//! (memory.c:1361-1385); hint failures have distinct errnos.

use crate::{
    asic::MmuGeometry,
    backend::MmuKind,
    context::Context,
    device::HlDevice,
    ffi::pin::PinnedUserPages,
    mmu::{
        page_table::{DrHops, HopMemory, HrHops},
        walk::{translate, Translation, WalkFault},
    },
    uapi::{HL_MEM_FORCE_HINT, HL_MEM_SHARED},
    vm::{
        check_flags,
        map_profile::{Phase, PhaseTimer},
        page_pack::PhysPgPack,
        userptr::{UserptrIndex, UserptrReservation},
        va_range::{ContextVm, VaRangeType},
        va_request,
    },
};
use kernel::{
    page::PAGE_SIZE,
    prelude::*,
    rbtree::{RBTree, RBTreeNodeReservation},
    sync::Arc, //
};

/// What a mapping maps.
pub(crate) enum Backing {
    /// Device DRAM of a handle.
    Dram {
        /// The handle that was mapped.
        handle: u32,
        /// Its pages.
        pack: Arc<PhysPgPack>,
    },
    /// Pinned host memory (`HL_MEM_USERPTR`); unpinned when dropped.
    Host {
        /// The pinned pages.
        pinned: PinnedUserPages,
        /// Device address of every mapped page, from the backend (8 bytes per
        /// page; upstream keeps a DMA-mapped sg_table).
        dma: KVVec<u64>,
        /// MMU page size used: 4 KiB, or 2 MiB for huge pages.
        page_size: u64,
    },
}

impl Backing {
    /// Page size and number of pages as mapped.
    fn geometry(&self) -> (u64, u64) {
        match self {
            Self::Dram { pack, .. } => (pack.page_size, pack.npages),
            Self::Host { dma, page_size, .. } => (*page_size, dma.len() as u64),
        }
    }

    /// Physical address of mapped page `i`.
    fn page_addr(&self, i: u64) -> Option<u64> {
        match self {
            Self::Dram { pack, .. } => pack.page_addr(i),
            Self::Host { dma, .. } => dma.get(usize::try_from(i).ok()?).copied(),
        }
    }
}

/// One live mapping (upstream `struct hl_vm_hash_node`), keyed by the VA
/// returned to the user (the range VA plus a host buffer's in-page offset).
pub(crate) struct Mapping {
    /// What is mapped.
    pub(crate) backing: Backing,
    /// The VA range the mapping lives in.
    pub(crate) kind: VaRangeType,
    /// First VA of the mapping in its range (page aligned).
    pub(crate) va: u64,
    /// Bytes of VA.
    pub(crate) size: u64,
    /// Live dma-bufs exported from this mapping; UNMAP is refused while > 0.
    pub(crate) export_cnt: u32,
}

/// The live mappings of a context and its userptr index, under one lock
/// (`ContextVm::mappings`; upstream has `mem_hash_lock` for the one and
/// `userptr_lock` for the other).
///
/// # Invariants
///
/// For every host mapping in `by_va` the index holds one pin of its
/// `(addr, size)`, and the index holds nothing else: a host mapping and its
/// index entry are published and withdrawn in one critical section, so no
/// reader or UNMAP ever sees one without the other.
pub(crate) struct MappingTable {
    by_va: RBTree<u64, Mapping>,
    userptrs: UserptrIndex,
}

/// The tree nodes publishing one mapping needs, reserved before the lock.
pub(crate) struct MappingReservation {
    node: RBTreeNodeReservation<u64, Mapping>,
    pin_node: Option<UserptrReservation>,
}

impl MappingReservation {
    /// Reserve the nodes for a mapping (with `host`: and its index entry).
    pub(crate) fn new(host: bool) -> Result<Self> {
        Ok(Self {
            node: RBTreeNodeReservation::new(GFP_KERNEL)?,
            pin_node: if host {
                Some(RBTreeNodeReservation::new(GFP_KERNEL)?)
            } else {
                None
            },
        })
    }
}

impl MappingTable {
    /// No mappings.
    pub(crate) fn new() -> Self {
        Self {
            by_va: RBTree::new(),
            userptrs: UserptrIndex::new(),
        }
    }

    /// Publish `m` under `user_va`, with its index entry when it maps host
    /// memory. `EINVAL` (and nothing changes) when a host mapping comes
    /// without the index node. O(log n), no allocation.
    fn insert(&mut self, user_va: u64, m: Mapping, res: MappingReservation) -> Result {
        if let Backing::Host { pinned, .. } = &m.backing {
            let pin_node = res.pin_node.ok_or(EINVAL)?;
            self.userptrs.insert(pinned.addr, pinned.size, pin_node);
        }
        self.by_va.insert(res.node.into_node(user_va, m));
        Ok(())
    }

    /// Withdraw the mapping of `user_va` and its index entry, if `check`
    /// accepts it. `EINVAL` for an unknown VA. O(log n), no allocation.
    fn remove_if(
        &mut self,
        user_va: u64,
        check: impl FnOnce(&Mapping) -> Result,
    ) -> Result<Mapping> {
        check(self.by_va.get(&user_va).ok_or(EINVAL)?)?;
        let m = self.by_va.remove(&user_va).ok_or(EINVAL)?;
        self.forget_pin(&m);
        Ok(m)
    }

    /// Withdraw the mapping with the lowest VA (teardown). O(log n).
    fn pop_first(&mut self) -> Option<(u64, Mapping)> {
        let (_, node) = self.by_va.cursor_front_mut()?.remove_current();
        let (uva, m) = node.to_key_value();
        self.forget_pin(&m);
        Some((uva, m))
    }

    fn forget_pin(&mut self, m: &Mapping) {
        if let Backing::Host { pinned, .. } = &m.backing {
            if !self.userptrs.remove(pinned.addr, pinned.size) {
                pr_err!(
                    "userptr index: {:#x}+{:#x} was not indexed\n",
                    pinned.addr,
                    pinned.size
                );
            }
        }
    }

    /// Every mapping in VA order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&u64, &Mapping)> {
        self.by_va.iter()
    }

    /// The mapping published under `user_va`, mutable (export counts). O(log n).
    pub(crate) fn get_mut(&mut self, user_va: u64) -> Option<&mut Mapping> {
        self.by_va.get_mut(&user_va)
    }

    /// The userptr index (`hl_userptr_is_pinned`).
    pub(crate) fn userptrs(&self) -> &UserptrIndex {
        &self.userptrs
    }

    /// Number of mappings. O(n): debugfs and tests.
    pub(crate) fn len(&self) -> usize {
        self.by_va.iter().count()
    }
}

impl ContextVm {
    /// Map every page of `backing` at consecutive VAs from `va`
    /// (`map_phys_pg_pack`). DRAM: one 1 GiB DMMU leaf per DRAM page, through
    /// the scrambler. Host: PMMU leaves of the buffer's page size (the largest
    /// the geometry allows: hop 4 for 2 MiB, hop 5 for 4 KiB). On a failure
    /// part-way, exactly the pages already mapped are unmapped again and the
    /// error returned: no PTE and no hop is left. O(npages x hops).
    pub(crate) fn map_backing(
        &self,
        dev: &HlDevice,
        kind: VaRangeType,
        va: u64,
        backing: &Backing,
    ) -> Result {
        let (page_size, npages) = backing.geometry();
        let mut mmu = self.mmu.lock();
        let (geo, tree, mut dr, mut hr, scr) = match kind {
            VaRangeType::Dram => (
                MmuGeometry::DMMU,
                &mut mmu.dmmu,
                Some(DrHops {
                    pool: &dev.dr_hops,
                    backend: dev.backend(),
                }),
                None,
                Some(&dev.scrambler),
            ),
            _ => (
                MmuGeometry::PMMU,
                &mut mmu.pmmu,
                None,
                Some(HrHops { pool: &dev.hr_hops }),
                None,
            ),
        };
        let mem: &mut dyn HopMemory = match (dr.as_mut(), hr.as_mut()) {
            (Some(d), _) => d,
            (_, Some(h)) => h,
            _ => return Err(EINVAL),
        };
        let leaf_size = if kind == VaRangeType::Dram {
            dev.asic.dmmu_page_size
        } else {
            page_size
        };
        let leaf = geo.leaf_hop(leaf_size).ok_or(EINVAL)?;
        let s = |a: u64| scr.map_or(a, |x| x.scramble(a));
        // Without scrambling (the PMMU), consecutive pages are consecutive
        // entries of a leaf hop: the first page of each hop goes through the
        // walk, the rest of the hop in one batch (`map_following`).
        let batch = scr.is_none() && page_size == leaf_size;
        let mut i = 0;
        while i < npages {
            let page_va = va + i * page_size;
            let mut r = backing
                .page_addr(i)
                .ok_or(EINVAL)
                .and_then(|pa| tree.map(mem, s(page_va), s(pa), leaf))
                .map(|()| 1);
            if batch && r.is_ok() {
                let mut next = |j: u64| backing.page_addr(i + 1 + j);
                r = tree
                    .map_following(mem, page_va, leaf, npages - i - 1, &mut next)
                    .map(|k| k + 1);
                if r.is_err() {
                    // Page i itself is mapped: roll it back with the rest.
                    i += 1;
                }
            }
            match r {
                Ok(done) => i += done,
                Err(e) => {
                    for j in (0..i).rev() {
                        if tree.unmap(mem, s(va + j * page_size)).is_err() {
                            pr_err!("MAP rollback: could not unmap page {} at {:#x}\n", j, va);
                        }
                    }
                    return Err(e);
                }
            }
        }
        Ok(())
    }

    /// Unmap every page of a mapping (`unmap_phys_pg_pack`). Per-page errors
    /// are counted and reported, and the loop carries on.
    pub(crate) fn unmap_backing(
        &self,
        dev: &HlDevice,
        kind: VaRangeType,
        va: u64,
        backing: &Backing,
    ) -> usize {
        let (page_size, npages) = backing.geometry();
        let mut mmu = self.mmu.lock();
        if kind == VaRangeType::Dram {
            let mut mem = DrHops {
                pool: &dev.dr_hops,
                backend: dev.backend(),
            };
            let s = &dev.scrambler;
            (0..npages)
                .filter(|i| {
                    mmu.dmmu
                        .unmap(&mut mem, s.scramble(va + i * page_size))
                        .is_err()
                })
                .count()
        } else {
            // Each leaf hop's run of pages in one batch, then the run's first
            // page through `unmap`, which frees the hops that became empty.
            let mut mem = HrHops { pool: &dev.hr_hops };
            let (mut i, mut failed) = (0, 0);
            while i < npages {
                let page_va = va + i * page_size;
                let rest = mmu
                    .pmmu
                    .unmap_following(&mut mem, page_va, page_size, npages - i - 1)
                    .unwrap_or(0);
                if mmu.pmmu.unmap(&mut mem, page_va).is_err() {
                    failed += 1;
                }
                i += 1 + rest;
            }
            failed
        }
    }

    /// Unmap every mapping left behind, with one MMU invalidation at the end
    /// (the first part of `hl_vm_ctx_fini`). Returns how many there were.
    pub(crate) fn unmap_all(&self, dev: &HlDevice) -> usize {
        let mut n = 0;
        loop {
            let taken = self.mappings.lock().pop_first();
            let Some((uva, m)) = taken else { break };
            n += 1;
            if self.unmap_backing(dev, m.kind, m.va, &m.backing) > 0 {
                pr_err!("teardown: PTEs of {:#x} could not all be cleared\n", uva);
            }
            if let Backing::Dram { handle, .. } = m.backing {
                release_mapping_count(dev, handle);
            }
            // A host buffer is unpinned when `m` is dropped here.
        }
        if n > 0
            && (dev.backend().invalidate_all(MmuKind::Dram).is_err()
                || dev.backend().invalidate_all(MmuKind::Host).is_err())
        {
            pr_err!("teardown: MMU cache invalidation failed\n");
        }
        n
    }

    /// Free the page tables' hops (`hl_mmu_ctx_fini`); returns how many were left.
    pub(crate) fn teardown_mmu(&self, dev: &HlDevice) -> usize {
        let mut dr = DrHops {
            pool: &dev.dr_hops,
            backend: dev.backend(),
        };
        let mut hr = HrHops { pool: &dev.hr_hops };
        let mut mmu = self.mmu.lock();
        mmu.dmmu.teardown(&mut dr) + mmu.pmmu.teardown(&mut hr)
    }

    /// The page-walk oracle on this context's tables: DRAM VAs through the
    /// DMMU tree (device memory, scrambled), any other VA through the PMMU
    /// tree (host-resident tables). O(hops).
    ///
    /// The context's page-table lock is held for the whole walk, so a
    /// concurrent UNMAP cannot free a hop under it (the hop tables are read
    /// from their real memory, which UNMAP scrubs and gives back).
    pub(crate) fn translate(&self, dev: &HlDevice, va: u64) -> Result<Translation, WalkFault> {
        let mmu = self.mmu.lock();
        if self.range_type(va, 1) == Some(VaRangeType::Dram) {
            let read = |a: u64| dev.backend().read_pte(a);
            translate(
                &MmuGeometry::DMMU,
                &read,
                mmu.dmmu.hop0(),
                va,
                Some(&dev.scrambler),
            )
        } else {
            let read = |a: u64| dev.hr_hops.lock().read(a);
            translate(&MmuGeometry::PMMU, &read, mmu.pmmu.hop0(), va, None)
        }
    }

    /// Number of live mappings. O(n): debugfs and tests.
    pub(crate) fn mapping_count(&self) -> usize {
        self.mappings.lock().len()
    }
}

fn release_mapping_count(dev: &HlDevice, handle: u32) {
    if let Some(e) = dev.handles.lock().get_mut(handle) {
        e.mapping_cnt = e.mapping_cnt.saturating_sub(1);
    }
}

/// MAP of a device handle (`map_device_va`, device path): returns the VA.
///
/// Only the low 32 bits of `handle` count, as upstream. Errors: `EINVAL` for an
/// unknown handle; `EPERM` for another context's handle that was not
/// allocated `HL_MEM_SHARED`; the VA allocator's errno for the hint rules
/// (`EINVAL` malformed or misaligned forced hint, `EADDRINUSE` occupied forced
/// hint, `ENOMEM` no space; upstream says `ENOMEM` for all of them); `ENOMEM`
/// when out of hops; the backend's errno when a PTE write or the invalidation
/// fails. On any error nothing stays mapped, allocated or counted.
pub(crate) fn map_device_va(ctx: &Context, handle: u64, hint: u64, flags: u32) -> Result<u64> {
    let dev = ctx.device();
    check_flags(flags)?;
    let handle = handle as u32;
    let pack = {
        let mut table = dev.handles.lock();
        let e = table.get_mut(handle).ok_or(EINVAL)?;
        if e.pack.asid != ctx.asid() && e.pack.flags & HL_MEM_SHARED == 0 {
            return Err(EPERM);
        }
        // Counted while the table is locked, so a concurrent FREE cannot win.
        e.mapping_cnt += 1;
        e.pack.clone()
    };
    let result = map_pack_at(ctx, handle, &pack, hint, flags);
    if result.is_err() {
        release_mapping_count(dev, handle);
    }
    result
}

fn map_pack_at(
    ctx: &Context,
    handle: u32,
    pack: &Arc<PhysPgPack>,
    hint: u64,
    flags: u32,
) -> Result<u64> {
    let vm = ctx.vm();
    let size = pack.total_size;
    let res = MappingReservation::new(false)?;
    // The DRAM range's page is not a power of two: the page is the alignment.
    let req = va_request(size, 0, hint, flags);
    let va = vm.alloc(VaRangeType::Dram, req).map_err(Error::from)?;
    let backing = Backing::Dram {
        handle,
        pack: pack.clone(),
    };
    let at = VaPlace {
        kind: VaRangeType::Dram,
        va,
        size,
    };
    insert_mapping(ctx, at, va, backing, res, PhaseTimer::start(None))
}

/// Where a new mapping goes: `size` bytes at `va`, allocated in range `kind`.
struct VaPlace {
    kind: VaRangeType,
    va: u64,
    size: u64,
}

/// Map `backing` at `va` (already allocated in range `kind`), invalidate the
/// MMU caches of exactly that range, and publish the mapping under `user_va`
/// (with its userptr index entry, in the same critical section). Until then
/// no other thread can name the VA: UNMAP finds only published mappings. On
/// failure nothing stays mapped and the VA is given back.
fn insert_mapping(
    ctx: &Context,
    at: VaPlace,
    user_va: u64,
    backing: Backing,
    res: MappingReservation,
    mut timer: PhaseTimer<'_>,
) -> Result<u64> {
    let VaPlace { kind, va, size } = at;
    let dev = ctx.device();
    let vm = ctx.vm();
    // `va` is exactly the allocation made by the caller: giving it back cannot
    // fail (`VaAllocator::free` refuses only what is not an allocation).
    let undo_va = |what: &str| {
        if vm.free(kind, va, size).is_err() {
            pr_err!("MAP: VA {:#x} was not an allocation ({})\n", va, what);
        }
    };
    if let Err(e) = vm.map_backing(dev, kind, va, &backing) {
        undo_va("a mapping failure");
        return Err(e);
    }
    if let Err(e) = dev
        .backend()
        .invalidate_range(kind.mmu(), ctx.asid(), va, size)
    {
        // Unlike upstream, no PTE stays behind.
        vm.unmap_backing(dev, kind, va, &backing);
        undo_va("an invalidation failure");
        return Err(e);
    }
    timer.lap(Phase::Pte);
    let mapping = Mapping {
        backing,
        kind,
        va,
        size,
        export_cnt: 0,
    };
    vm.mappings.lock().insert(user_va, mapping, res)?;
    timer.lap(Phase::Account);
    timer.done();
    Ok(user_va)
}

/// UNMAP (`unmap_device_va`): `va` must be exactly a VA that MAP returned.
/// `EINVAL` for an unknown (or interior) VA or a mapping with live dma-buf
/// exports. If the MMU cache invalidation fails the mapping is gone but its
/// VA is kept out of the free list, and the error is returned.
pub(crate) fn unmap_device_va(ctx: &Context, va: u64) -> Result {
    let dev = ctx.device();
    let vm = ctx.vm();
    // The mapping and its userptr index entry leave together.
    let m = vm.mappings.lock().remove_if(va, |e| {
        if e.export_cnt > 0 {
            Err(EINVAL)
        } else {
            Ok(())
        }
    })?;
    if vm.unmap_backing(dev, m.kind, m.va, &m.backing) > 0 {
        pr_err!("UNMAP: PTEs of {:#x} could not all be cleared\n", va);
    }
    let inv = dev
        .backend()
        .invalidate_range(m.kind.mmu(), ctx.asid(), m.va, m.size);
    match inv {
        Ok(()) => {
            // The VA of a published mapping is an allocation: this cannot fail.
            if vm.free(m.kind, m.va, m.size).is_err() {
                pr_err!("UNMAP: VA {:#x} was not an allocation\n", va);
            }
        }
        Err(_) => pr_err!("UNMAP: invalidation failed; VA {:#x} is quarantined\n", va),
    }
    if let Backing::Dram { handle, .. } = &m.backing {
        release_mapping_count(dev, *handle);
    }
    // A host buffer is unpinned here, when `m` goes out of scope.
    inv
}

/// MAP of host memory (`HL_MEM_USERPTR`; `map_device_va`, host path): pin
/// `[addr, addr + size)`, map it in the HOST range (4 KiB pages; 2 MiB VA
/// alignment when the host address is 2 MiB aligned) or, when every 2 MiB
/// piece is physically contiguous and aligned, in the HOST_HUGE range with
/// 2 MiB pages. Returns the VA plus the buffer's offset in its first page.
///
/// Hint rules as upstream: the hint (offset 8 of the union) is honoured when
/// aligned and free; with `HL_MEM_FORCE_HINT` a host address that is not page
/// aligned is `EINVAL` (memory.c:1161-1169); the other hint failures are the
/// VA allocator's errnos.
pub(crate) fn map_host_va(
    ctx: &Context,
    addr: u64,
    size: u64,
    hint: u64,
    flags: u32,
) -> Result<u64> {
    let dev = ctx.device();
    check_flags(flags)?;
    // Refused before any page is pinned.
    if flags & HL_MEM_FORCE_HINT != 0 && addr % PAGE_SIZE as u64 != 0 {
        return Err(EINVAL);
    }
    let mut timer = PhaseTimer::start(Some(&dev.host_map_profile));
    let pinned = PinnedUserPages::pin(addr, size)?;
    timer.lap(Phase::Pin);
    let huge = dev.asic.host_huge_page_size;
    let (kind, page_size, align) = if pinned.fits_huge_pages(huge) {
        (VaRangeType::HostHuge, huge, huge)
    } else if addr.checked_rem(huge) == Some(0) {
        (VaRangeType::Host, dev.asic.host_page_size, huge)
    } else {
        (
            VaRangeType::Host,
            dev.asic.host_page_size,
            dev.asic.host_page_size,
        )
    };
    let bytes = pinned.npages() as u64 * PAGE_SIZE as u64;
    let dma = host_dma_addrs(dev, &pinned, page_size)?;
    timer.lap(Phase::Lookup);
    let res = MappingReservation::new(true)?;
    let req = va_request(bytes, align, hint, flags);
    let va = ctx.vm().alloc(kind, req).map_err(Error::from)?;
    timer.lap(Phase::Account);
    let offset = pinned.offset;
    let backing = Backing::Host {
        pinned,
        dma,
        page_size,
    };
    let at = VaPlace {
        kind,
        va,
        size: bytes,
    };
    insert_mapping(ctx, at, va + offset, backing, res, timer)
}

/// The device address of every `page_size` page of a pinned buffer, through
/// the backend (`dma_map_host_va`). O(npages).
fn host_dma_addrs(dev: &HlDevice, pinned: &PinnedUserPages, page_size: u64) -> Result<KVVec<u64>> {
    let per = usize::try_from(page_size / PAGE_SIZE as u64)
        .map_err(|_| EINVAL)?
        .max(1);
    let n = pinned.npages() / per;
    let mut dma = KVVec::with_capacity(n, GFP_KERNEL | __GFP_NOWARN)?;
    for i in 0..n {
        let phys = pinned.phys(i * per).ok_or(EINVAL)?;
        dma.push_within_capacity(dev.backend().host_dma_addr(phys)?)
            .map_err(|_| ENOMEM)?;
    }
    Ok(dma)
}

#[kunit_tests(hlrs_mapping)]
mod tests {
    use super::*;
    use crate::{
        asic::AsicProperties,
        uapi::HL_MEM_CONTIGUOUS,
        vm::device_memory::{alloc_device_memory, free_device_memory},
    };

    const PAGE: u64 = 0x3000_0000;

    #[test]
    fn every_mapped_byte_translates_to_its_dram_page() -> Result {
        let (d, ctx) = setup()?;
        for flags in [0, HL_MEM_CONTIGUOUS] {
            let h = alloc_device_memory(&ctx, 5 * PAGE, flags)?;
            let va = map_device_va(&ctx, u64::from(h), 0, 0)?;
            assert_eq!(va, d.asic.dram_va.start);
            let pack = d.handles.lock().get(h).ok_or(EINVAL)?.pack.clone();
            for i in 0..5 {
                let pa = pack.page_addr(i).ok_or(EINVAL)?;
                for off in [0, 1, 4096, PAGE / 2, PAGE - 1] {
                    assert_eq!(oracle(&d, &ctx, va + i * PAGE + off), Some(pa + off));
                }
            }
            // Past the end of the mapping nothing translates.
            assert_eq!(oracle(&d, &ctx, va + 5 * PAGE), None);
            // Exactly the mapped range was invalidated.
            let (_, last) = d.sim.invalidation_log();
            assert_eq!(last.map(|i| (i.va, i.size)), Some((va, 5 * PAGE)));
            unmap_device_va(&ctx, va)?;
            for i in 0..5 {
                assert_eq!(oracle(&d, &ctx, va + i * PAGE), None);
            }
            assert_eq!(ctx.vm().mmu.lock().dmmu.hop_count(), 0);
            free_device_memory(&ctx, u64::from(h))?;
        }
        assert!(ctx.vm().is_pristine());
        Ok(())
    }

    #[test]
    fn hints_and_their_errors() -> Result {
        let (d, ctx) = setup()?;
        let h = u64::from(alloc_device_memory(&ctx, PAGE, 0)?);
        let hint = d.asic.dram_va.start + 7 * PAGE;
        assert_eq!(map_device_va(&ctx, h, hint, 0)?, hint);
        // Occupied: elsewhere without FORCE_HINT, EADDRINUSE with it.
        assert_eq!(map_device_va(&ctx, h, hint, 0)?, d.asic.dram_va.start);
        assert_eq!(
            map_device_va(&ctx, h, hint, HL_MEM_FORCE_HINT),
            Err(EADDRINUSE)
        );
        // Misaligned: ignored, or EINVAL when forced; hint 0 forced: EINVAL.
        assert_eq!(
            map_device_va(&ctx, h, hint + 4096, 0)?,
            d.asic.dram_va.start + PAGE
        );
        assert_eq!(
            map_device_va(&ctx, h, hint + 4096, HL_MEM_FORCE_HINT),
            Err(EINVAL)
        );
        assert_eq!(map_device_va(&ctx, h, 0, HL_MEM_FORCE_HINT), Err(EINVAL));
        assert_eq!(
            d.handles.lock().get(h as u32).map(|e| e.mapping_cnt),
            Some(3)
        );
        Ok(())
    }

    #[test]
    fn free_is_refused_while_mapped_and_unmap_needs_the_exact_va() -> Result {
        let (_d, ctx) = setup()?;
        let h = u64::from(alloc_device_memory(&ctx, 2 * PAGE, 0)?);
        let a = map_device_va(&ctx, h, 0, 0)?;
        let b = map_device_va(&ctx, h, 0, 0)?;
        assert_eq!(b, a + 2 * PAGE);
        assert_eq!(free_device_memory(&ctx, h), Err(EINVAL));
        assert_eq!(unmap_device_va(&ctx, a + PAGE), Err(EINVAL));
        assert_eq!(unmap_device_va(&ctx, a + 1), Err(EINVAL));
        assert_eq!(unmap_device_va(&ctx, 0), Err(EINVAL));
        unmap_device_va(&ctx, a)?;
        assert_eq!(unmap_device_va(&ctx, a), Err(EINVAL));
        assert_eq!(free_device_memory(&ctx, h), Err(EINVAL));
        unmap_device_va(&ctx, b)?;
        free_device_memory(&ctx, h)?;
        // Unknown handle, and the low 32 bits rule.
        assert_eq!(map_device_va(&ctx, h, 0, 0), Err(EINVAL));
        let h = u64::from(alloc_device_memory(&ctx, 1, 0)?);
        let va = map_device_va(&ctx, (7 << 32) | h, 0, 0)?;
        // VA reuse: best fit gives the first VA back.
        assert_eq!(va, a);
        Ok(())
    }

    #[test]
    fn rollback_after_a_failure_at_every_pte_write() -> Result {
        let (d, ctx) = setup()?;
        let h = u64::from(alloc_device_memory(&ctx, 3 * PAGE, 0)?);
        let before = d.sim.pte_writes();
        let va = map_device_va(&ctx, h, 0, 0)?;
        let writes = d.sim.pte_writes() - before;
        unmap_device_va(&ctx, va)?;
        assert!(writes >= 3);
        let slots = d.dr_hops.lock().free_slots();
        for k in 1..=writes {
            d.sim.inject_pte_write_failure(k);
            assert_eq!(map_device_va(&ctx, h, 0, 0), Err(EIO));
            d.sim.inject_pte_write_failure(0);
            for i in 0..3 {
                assert_eq!(oracle(&d, &ctx, va + i * PAGE), None);
            }
            assert_eq!(ctx.vm().mmu.lock().dmmu.hop_count(), 0);
            assert_eq!(d.dr_hops.lock().free_slots(), slots);
            assert!(ctx.vm().is_pristine());
            assert_eq!(ctx.vm().mapping_count(), 0);
            assert_eq!(
                d.handles.lock().get(h as u32).map(|e| e.mapping_cnt),
                Some(0)
            );
        }
        free_device_memory(&ctx, h)?;
        Ok(())
    }

    #[test]
    fn invalidation_failures() -> Result {
        let (d, ctx) = setup()?;
        let h = u64::from(alloc_device_memory(&ctx, 2 * PAGE, 0)?);
        // After MAP: the PTEs are removed again (upstream leaves them).
        d.sim.inject_invalidation_failure();
        assert_eq!(map_device_va(&ctx, h, 0, 0), Err(EIO));
        assert_eq!(oracle(&d, &ctx, d.asic.dram_va.start), None);
        assert!(ctx.vm().is_pristine());
        // After UNMAP: the mapping is gone, its VA quarantined.
        let va = map_device_va(&ctx, h, 0, 0)?;
        d.sim.inject_invalidation_failure();
        assert_eq!(unmap_device_va(&ctx, va), Err(EIO));
        assert_eq!(oracle(&d, &ctx, va), None);
        assert!(!ctx.vm().is_pristine());
        assert_ne!(map_device_va(&ctx, h, 0, 0)?, va);
        Ok(())
    }

    #[test]
    fn foreign_handles_need_shared() -> Result {
        let (d, ctx) = setup()?;
        for (flags, want) in [(0u32, Err(EPERM)), (HL_MEM_SHARED, Ok(()))] {
            let pack = Arc::new(PhysPgPack::alloc(&d, 0, flags, 1, true)?, GFP_KERNEL)?;
            let fh = d
                .handles
                .lock()
                .insert(pack, crate::vm::handles::HandleReservation::new()?)?;
            let r = map_device_va(&ctx, u64::from(fh), 0, 0).map(|va| unmap_device_va(&ctx, va));
            assert_eq!(r.map(|_| ()), want);
            drop(d.handles.lock().remove_if(fh, |_| Ok(()))?);
        }
        Ok(())
    }

    #[test]
    fn teardown_with_mappings_left_behind() -> Result {
        let (d, ctx) = setup()?;
        let slots = d.dr_hops.lock().free_slots();
        for n in 1..=3u64 {
            let h = alloc_device_memory(&ctx, n * PAGE, 0)?;
            map_device_va(&ctx, u64::from(h), 0, 0)?;
        }
        let (count, _) = d.sim.invalidation_log();
        let hop0 = ctx.vm().mmu.lock().dmmu.hop0();
        drop(ctx);
        // One full invalidation per MMU (as upstream: USERPTR and PHYS_PACK),
        // every hop and page back, hop 0 clear.
        let (after, last) = d.sim.invalidation_log();
        assert_eq!(after, count + 2);
        assert_eq!(last.map(|i| i.asid), Some(None));
        assert_eq!(d.dr_hops.lock().free_slots(), slots);
        assert_eq!(d.pool.lock().free_pages(), 127);
        assert_eq!(d.dram_used(), 0);
        let read = |a: u64| d.backend().read_pte(a);
        assert!(translate(
            &MmuGeometry::DMMU,
            &read,
            hop0,
            d.asic.dram_va.start,
            Some(&d.scrambler)
        )
        .is_err());
        Ok(())
    }

    #[test]
    fn bench_map_64_gib() -> Result {
        let (d, ctx) = setup()?;
        let size = 64u64 << 30;
        let h = u64::from(alloc_device_memory(&ctx, size, 0)?);
        let w0 = d.sim.pte_writes();
        let t0 = kernel::time::Instant::<kernel::time::Monotonic>::now();
        let va = map_device_va(&ctx, h, 0, 0)?;
        let map_ns = t0.elapsed().as_nanos();
        let w1 = d.sim.pte_writes();
        let t1 = kernel::time::Instant::<kernel::time::Monotonic>::now();
        unmap_device_va(&ctx, va)?;
        let unmap_ns = t1.elapsed().as_nanos();
        pr_info!(
            "bench map 64 GiB ({} DRAM pages): map {} us with {} PTE writes, unmap {} us with {} PTE writes\n",
            size.div_ceil(PAGE),
            map_ns / 1000,
            w1 - w0,
            unmap_ns / 1000,
            d.sim.pte_writes() - w1
        );
        pr_info!("@@BENCH kmap.map_64g {} ns\n", map_ns);
        pr_info!("@@BENCH kmap.unmap_64g {} ns\n", unmap_ns);
        pr_info!("@@BENCH kmap.map_64g.pte_writes {} writes\n", w1 - w0);
        assert_eq!(ctx.vm().mmu.lock().dmmu.hop_count(), 0);
        Ok(())
    }

    fn setup() -> Result<(Arc<HlDevice>, Context)> {
        let d = Arc::pin_init(HlDevice::new(0, AsicProperties::gaudi2(6, 0)?), GFP_KERNEL)?;
        let ctx = Context::new(d.clone(), 1)?;
        Ok((d, ctx))
    }

    /// The page-walk oracle on the context's DMMU tree.
    fn oracle(d: &HlDevice, ctx: &Context, va: u64) -> Option<u64> {
        ctx.vm().translate(d, va).ok().map(|t| t.pa)
    }
}
