// SPDX-License-Identifier: GPL-2.0

//! MAP and UNMAP of device memory (upstream `map_device_va`, `unmap_device_va`,
//! `map_phys_pg_pack`, `unmap_phys_pg_pack`, common/memory.c:942-1406) and the
//! mapping part of context teardown (`hl_vm_ctx_fini`, memory.c:2748-2786).
//!
//! Lock order: the table at the crate root (`hlrs.rs`). The handle table is held only to look up a handle
//! and change its mapping count; a VA range only inside its allocator calls;
//! the context's page-table lock across the mapping of one pack; the mapping
//! table only to insert, move or remove records.
//!
//! **Release only after invalidation.** A mapping's backing (pinned host pages,
//! or its DRAM pack with the handle's mapping count) and its VA are [`Held`]
//! from before its first PTE is written; the hops its unmap empties are
//! [`DetachedHops`]. Both go back only against the proof of an MMU cache
//! invalidation covering the mapping ([`Invalidated`]): after UNMAP, after a
//! MAP that failed part-way or whose invalidation failed, and at teardown. When
//! that invalidation fails, the mapping is **quarantined**: it keeps its VA,
//! its pin or its handle's mapping count (so FREE is refused) and its hops,
//! until a later invalidation of everything of its MMU succeeds (tried after
//! every later MAP or UNMAP of the context, at the latest at teardown; if even
//! teardown's fails, the device keeps the context's memory until the next open
//! succeeds in invalidating, see `HlDevice::open_compute`).
//!
//! Upstream releases first in every one of those places: it unpins and frees
//! hops while stale TLB entries may still point at them (memory.c:1195-1210,
//! 1361-1385; mmu/mmu_v2.c frees emptied hops before the invalidation).
//!
//! **VA reuse waits for the CSs in flight.** The VA of a mapping given back
//! while CSs of the context are in flight is held (see
//! [`super::va_quarantine`]) until every CS numbered before the
//! invalidation has ended: an engine still running one faults at its next
//! access instead of reaching whatever the process maps at that VA next.
//!
//! Moving a mapping between the table, the quarantine and an operation in
//! flight moves its tree node ([`OneMapping`]), so no path after the MAP's
//! own reservations allocates.

use crate::{
    ffi::{pin::PinnedUserPages, sched},
    hw::backend::{map_host_pages, map_kernel_pages, HostDma, MmuKind},
    mmu::{
        invalidate::{invalidate_all, invalidate_range, Invalidated, MmuArea},
        page_table::DetachedHops,
        walk::{Translation, WalkFault},
    },
    uapi::{HL_MEM_FORCE_HINT, HL_MEM_SHARED},
    vm::{
        check_flags,
        command_buffer::CommandBuffer,
        context_vm::ContextVm,
        device_vm::DeviceVm,
        mapping_table::{release_mapping_count, Backing, Mapping, MappingReservation, OneMapping},
        op_profile::{Op, OpTimer, Phase},
        va_range::VaRangeType,
        va_request,
    },
};
use kernel::{
    page::PAGE_SIZE,
    prelude::*,
    rbtree::{RBTree, RBTreeNodeReservation},
    sync::{atomic::Relaxed, Arc}, //
};

impl ContextVm {
    /// Map every page of `backing` at consecutive VAs from `va` in the page
    /// table of range `kind` (see [`crate::mmu::context_mmu::ContextMmu::map`]), under the context's
    /// page-table lock.
    fn map_backing(
        &self,
        dev: &DeviceVm,
        kind: VaRangeType,
        va: u64,
        backing: &Backing,
        detached: &mut DetachedHops,
    ) -> Result<(), (Error, bool)> {
        self.mmu
            .lock()
            .map(&dev.mmu, kind.mmu(), va, backing, detached)
    }

    /// Unmap every page of a mapping (see [`crate::mmu::context_mmu::ContextMmu::unmap`]); returns
    /// how many PTEs are left.
    fn unmap_backing(
        &self,
        dev: &DeviceVm,
        kind: VaRangeType,
        va: u64,
        backing: &Backing,
        detached: &mut DetachedHops,
    ) -> usize {
        self.mmu
            .lock()
            .unmap(&dev.mmu, kind.mmu(), va, backing, detached)
    }

    /// Unmap every live mapping (the first part of `hl_vm_ctx_fini`) into the
    /// quarantine; the emptied hops are parked in their tables. Nothing is
    /// released here: see [`Self::settle_quarantine`]. Returns how many there
    /// were. Allocates nothing; yields once per mapping. O(n log n + pages).
    pub(crate) fn unmap_all(&self) -> usize {
        let dev = &*self.dev;
        // The whole tree leaves the table at once: no node is allocated, and
        // no user call can reach a mapping any more (the file is gone).
        let mut live = core::mem::take(&mut self.mappings.lock().by_va);
        let mut n = 0;
        let mut cursor = live.cursor_front_mut();
        while let Some(mut c) = cursor {
            n += 1;
            sched::cond_resched();
            let mut detached = DetachedHops::new();
            let (uva, m) = c.current_mut();
            let uva = *uva;
            if let Some(b) = m.held.get() {
                if self.unmap_backing(dev, m.kind, m.va, b, &mut detached) > 0 {
                    hl_err!("teardown: PTEs of {:#x} could not all be cleared\n", uva);
                    m.ptes_left = true;
                }
            }
            self.park_hops(m.kind, detached);
            let mut t = self.mappings.lock();
            t.forget_pin(m);
            let (next, node) = c.remove_current();
            t.quarantine.insert(node);
            drop(t);
            cursor = next;
        }
        n
    }

    /// Park detached hops in the table of range `kind` until a later
    /// invalidation covers them. No allocation.
    fn park_hops(&self, kind: VaRangeType, hops: DetachedHops) {
        self.mmu.lock().park(kind.mmu(), hops);
    }

    /// Clear both hop 0s and detach every other hop (`hl_mmu_ctx_fini`); the
    /// hops go back with the teardown's invalidation. Quarantined mappings
    /// whose PTEs could not be cleared become releasable once their tree's
    /// hop 0 is clear. Returns how many hops were still linked.
    pub(crate) fn teardown_mmu(&self) -> usize {
        let dev = &*self.dev;
        let mut left = 0;
        for (mmu_kind, kinds) in [
            (MmuKind::Dram, [VaRangeType::Dram, VaRangeType::Dram]),
            (MmuKind::Host, [VaRangeType::Host, VaRangeType::HostHuge]),
        ] {
            let (n, cleared) = self.mmu.lock().teardown(&dev.mmu, mmu_kind);
            left += n;
            if cleared {
                let mut t = self.mappings.lock();
                for (_, m) in t.quarantine.iter_mut() {
                    if kinds.contains(&m.kind) {
                        m.ptes_left = false;
                    }
                }
            }
        }
        left
    }

    /// Invalidate the MMU caches of everything quarantined or parked, and give
    /// back what the invalidation covers (see the module doc). Nothing to do
    /// (no invalidation) unless `force` or something is quarantined or parked.
    /// Returns whether nothing is left in quarantine. Allocates nothing.
    /// O(q log q) in the quarantine.
    pub(crate) fn settle_quarantine(&self, force: bool) -> bool {
        let dev = &*self.dev;
        // VA held for CSs that have ended since goes back first.
        self.va_quarantine.reap(&self.ranges);
        if !force && self.quarantined.load(Relaxed) == 0 {
            return true;
        }
        let mut settled = true;
        for (mmu_kind, ranges) in [
            (MmuKind::Dram, [VaRangeType::Dram, VaRangeType::Dram]),
            (MmuKind::Host, [VaRangeType::Host, VaRangeType::HostHuge]),
        ] {
            let waiting = {
                let t = self.mappings.lock();
                t.quarantine.iter().any(|(_, m)| ranges.contains(&m.kind))
            } || self.mmu.lock().has_stale(mmu_kind);
            if !waiting && !force {
                continue;
            }
            let proof = match invalidate_all(dev.backend(), mmu_kind) {
                Ok(p) => p,
                Err(_) => {
                    settled &= !waiting;
                    continue;
                }
            };
            self.mmu.lock().release_stale(&dev.mmu, mmu_kind, &proof);
            // A CS in flight now may have used the old translations until
            // this invalidation: the VA waits for it.
            let until = self.va_quarantine.hold_through();
            // Out of the table, released without its lock (the releases take
            // the VA range and handle locks); what stays goes back.
            let mut q = core::mem::take(&mut self.mappings.lock().quarantine);
            let mut kept = RBTree::new();
            let mut cursor = q.cursor_front_mut();
            while let Some(c) = cursor {
                let key = *c.current().0;
                let (next, node) = c.remove_current();
                cursor = next;
                let mut one = OneMapping {
                    tree: RBTree::new(),
                    key,
                };
                one.tree.insert(node);
                release_or_keep(self, dev, one, (&proof, until), &mut kept);
            }
            let mut t = self.mappings.lock();
            t.requarantine(kept);
            settled &= !t.quarantine.iter().any(|(_, m)| ranges.contains(&m.kind));
        }
        if settled {
            self.quarantined.store(0, Relaxed);
        }
        settled
    }

    /// The page-walk oracle on this context's tables: DRAM VAs through the
    /// DMMU tree (device memory, scrambled), any other VA through the PMMU
    /// tree (host-resident tables). O(hops).
    ///
    /// The context's page-table lock is held for the whole walk, so a
    /// concurrent UNMAP cannot detach a hop under it (hops go back to their
    /// pool only after an invalidation, and are read from their real memory).
    pub(crate) fn translate(&self, va: u64) -> Result<Translation, WalkFault> {
        let kind = match self.range_type(va, 1) {
            Some(VaRangeType::Dram) => MmuKind::Dram,
            _ => MmuKind::Host,
        };
        self.mmu.lock().translate(&self.dev.mmu, kind, va)
    }

    /// Number of live mappings. O(n): debugfs and tests.
    pub(crate) fn mapping_count(&self) -> usize {
        self.mappings.lock().len()
    }

    /// Number of quarantined mappings. O(n): debugfs and tests.
    pub(crate) fn quarantine_count(&self) -> usize {
        self.mappings.lock().quarantined_len()
    }
}

/// Release `one` against `proof` if it covers it (its VA held until every
/// CS up to `until` has ended, see [`super::va_quarantine`]); otherwise move
/// its node to `kept`. No allocation but the VA quarantine's (amortised).
fn release_or_keep(
    vm: &ContextVm,
    dev: &DeviceVm,
    mut one: OneMapping,
    (proof, until): (&Invalidated, Option<u64>),
    kept: &mut RBTree<u64, Mapping>,
) {
    let va = (&vm.ranges, &vm.va_quarantine);
    let released = one
        .get_mut()
        .is_some_and(|m| m.releasable(proof) && m.release(va, dev, proof, until));
    if released {
        // Emptied by its release: the node serves a later MAP.
        if let Some(node) = one.tree.remove_node(&one.key) {
            vm.mappings.lock().keep_node(node.into_reservation());
        }
    } else if let Some(node) = one.tree.remove_node(&one.key) {
        kept.insert(node);
    }
}

/// Invalidate the range of a mapping whose PTEs were cleared (or could not
/// be: `ptes_left`) and give it and its emptied hops back; when the
/// invalidation fails (or PTEs were left), quarantine both instead. Returns
/// the invalidation's result. No allocation.
fn settle(
    vm: &ContextVm,
    one: OneMapping,
    detached: DetachedHops,
    timer: &mut OpTimer<'_>,
) -> Result {
    let dev = &*vm.dev;
    let Some((area, kind, ptes_left)) = one.get().map(|m| (m.area(), m.kind, m.ptes_left)) else {
        return Err(EINVAL);
    };
    let inv = if ptes_left {
        Err(EIO)
    } else {
        invalidate_range(dev.backend(), area)
    };
    timer.lap(Phase::Invalidate);
    match inv {
        Ok(proof) => {
            // Every CS numbered by now may still hold a walk of the old
            // PTEs in its next access: the VA waits for them.
            let until = vm.va_quarantine.hold_through();
            let recycled = vm
                .mmu
                .lock()
                .recycle(&dev.mmu, kind.mmu(), detached, &proof);
            if let Err(kept) = recycled {
                vm.quarantined.add(1, Relaxed);
                vm.park_hops(kind, kept);
            }
            let mut kept = RBTree::new();
            release_or_keep(vm, dev, one, (&proof, until), &mut kept);
            let n = vm.mappings.lock().requarantine(kept);
            vm.quarantined.add(n, Relaxed);
            timer.lap(Phase::Release);
            Ok(())
        }
        Err(e) => {
            hl_err!(
                "ASID {}: MMU invalidation of {:#x}+{:#x} failed; mapping quarantined\n",
                area.asid,
                area.start,
                area.end.saturating_sub(area.start)
            );
            vm.quarantined.add(1, Relaxed);
            vm.park_hops(kind, detached);
            vm.mappings.lock().quarantine(one);
            Err(e)
        }
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
/// fails. On any error nothing stays mapped; what PTEs pointed at stays held
/// (the handle counted as mapped) until an invalidation succeeds.
pub(crate) fn map_device_va(vm: &ContextVm, handle: u64, hint: u64, flags: u32) -> Result<u64> {
    let dev = &*vm.dev;
    check_flags(flags)?;
    let mut timer = OpTimer::start(&dev.profile, Op::MapDevice);
    let handle = handle as u32;
    let pack = {
        let mut table = dev.handles.lock();
        let e = table.get_mut(handle).ok_or(EINVAL)?;
        if e.pack.asid != vm.asid && e.pack.flags & HL_MEM_SHARED == 0 {
            return Err(EPERM);
        }
        // Counted while the table is locked, so a concurrent FREE cannot win.
        e.mapping_cnt += 1;
        e.pack.clone()
    };
    timer.lap(Phase::Handle);
    let size = pack.total_size;
    // The DRAM range's page is not a power of two: the page is the alignment.
    let placed = MappingReservation::new(false, &vm.mappings).and_then(|res| {
        let req = va_request(size, 0, hint, flags);
        Ok((res, vm.alloc(VaRangeType::Dram, req).map_err(Error::from)?))
    });
    let (res, va) = match placed {
        Ok(p) => p,
        Err(e) => {
            release_mapping_count(dev, handle, &pack);
            return Err(e);
        }
    };
    timer.lap(Phase::Va);
    let backing = Backing::Dram { handle, pack };
    let at = VaPlace {
        kind: VaRangeType::Dram,
        va,
        size,
    };
    insert_mapping(vm, at, va, backing, res, timer)
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
/// no other thread can name the VA: UNMAP finds only published mappings.
///
/// From here on the backing and the VA are [`Held`]: on failure the PTEs
/// written are cleared again (upstream leaves them after a failed
/// invalidation) and everything is given back only after an invalidation of
/// the range succeeded, or quarantined.
fn insert_mapping(
    vm: &ContextVm,
    at: VaPlace,
    user_va: u64,
    backing: Backing,
    res: MappingReservation,
    mut timer: OpTimer<'_>,
) -> Result<u64> {
    let VaPlace { kind, va, size } = at;
    let dev = &*vm.dev;
    let MappingReservation { node, pin_node } = res;
    let mut one = OneMapping {
        tree: RBTree::new(),
        key: user_va,
    };
    one.tree
        .insert(node.into_node(user_va, Mapping::new(backing, kind, vm.asid, va, size)));
    let mut detached = DetachedHops::new();
    let mapped = match one.get().and_then(Mapping::backing) {
        Some(b) => vm.map_backing(dev, kind, va, b, &mut detached),
        None => Err((EINVAL, false)),
    };
    timer.lap(Phase::Pte);
    if let Err((e, left)) = mapped {
        if let Some(m) = one.get_mut() {
            m.ptes_left = left;
        }
        let _ = settle(vm, one, detached, &mut OpTimer::off(Op::UnmapHost));
        return Err(e);
    }
    let area = MmuArea::new(kind.mmu(), vm.asid, va, size);
    if let Err(e) = invalidate_range(dev.backend(), area) {
        // Unlike upstream, no PTE stays behind; nothing goes back before an
        // invalidation succeeds.
        let left = match one.get().and_then(Mapping::backing) {
            Some(b) => vm.unmap_backing(dev, kind, va, b, &mut detached),
            None => 0,
        };
        if let Some(m) = one.get_mut() {
            m.ptes_left = left > 0;
        }
        let _ = settle(vm, one, detached, &mut OpTimer::off(Op::UnmapHost));
        return Err(e);
    }
    timer.lap(Phase::Invalidate);
    if let Err(one) = vm.mappings.lock().publish(one, pin_node) {
        // Only a host mapping without its index node (a bug): undo.
        let mut detached = DetachedHops::new();
        if let Some(m) = one.get() {
            if let Some(b) = m.backing() {
                vm.unmap_backing(dev, kind, va, b, &mut detached);
            }
        }
        let _ = settle(vm, one, detached, &mut OpTimer::off(Op::UnmapHost));
        return Err(EINVAL);
    }
    vm.settle_quarantine(false);
    timer.lap(Phase::Publish);
    timer.done();
    Ok(user_va)
}

/// UNMAP (`unmap_device_va`): `va` must be exactly a VA that MAP returned.
/// `EINVAL` for an unknown (or interior) VA or a mapping with live dma-buf
/// exports. If the MMU cache invalidation fails the mapping is gone for the
/// user but quarantined (VA, pin or handle mapping count, hops all kept), and
/// the error is returned.
pub(crate) fn unmap_device_va(vm: &ContextVm, va: u64) -> Result {
    // The VA quarantine is bounded: a full one waits for CSs to end first
    // (`EINTR` on a signal, nothing unmapped).
    vm.va_quarantine.wait_for_room(&vm.ranges)?;
    unmap_va(vm, va, false)
}

/// UNMAP of `va` if it maps a command buffer (`cb`) or not (`!cb`): a CB's
/// mapping is the driver's, never the user's to UNMAP. O(log n + pages).
fn unmap_va(vm: &ContextVm, va: u64, cb: bool) -> Result {
    let dev = &*vm.dev;
    let mut timer = OpTimer::start(&dev.profile, Op::UnmapHost);
    // The mapping and its userptr index entry leave together.
    let mut one = vm.mappings.lock().take_if(va, |e| {
        let is_cb = matches!(e.backing(), Some(Backing::Cb { .. }));
        if e.export_cnt > 0 || is_cb != cb {
            Err(EINVAL)
        } else {
            Ok(())
        }
    })?;
    if one.get().is_some_and(|m| m.kind == VaRangeType::Dram) {
        timer.set_op(Op::UnmapDevice);
    }
    timer.lap(Phase::Publish);
    let mut detached = DetachedHops::new();
    let left = match one.get() {
        Some(m) => m
            .backing()
            .map_or(0, |b| vm.unmap_backing(dev, m.kind, m.va, b, &mut detached)),
        None => 0,
    };
    if left > 0 {
        hl_err!("UNMAP: {} PTE(s) of {:#x} could not be cleared\n", left, va);
        if let Some(m) = one.get_mut() {
            m.ptes_left = true;
        }
    }
    timer.lap(Phase::Pte);
    settle(vm, one, detached, &mut timer)?;
    vm.settle_quarantine(false);
    timer.lap(Phase::Release);
    timer.done();
    Ok(())
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
/// VA allocator's errnos. A fatal signal stops the MAP (`EINTR`) between
/// chunks of the pin and between leaf hops of the mapping.
pub(crate) fn map_host_va(
    vm: &ContextVm,
    addr: u64,
    size: u64,
    hint: u64,
    flags: u32,
) -> Result<u64> {
    let dev = &*vm.dev;
    check_flags(flags)?;
    // Refused before any page is pinned.
    if flags & HL_MEM_FORCE_HINT != 0 && addr % PAGE_SIZE as u64 != 0 {
        return Err(EINVAL);
    }
    let mut timer = OpTimer::start(&dev.profile, Op::MapHost);
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
    let res = MappingReservation::new(true, &vm.mappings)?;
    let req = va_request(bytes, align, hint, flags);
    let va = vm.alloc(kind, req).map_err(Error::from)?;
    timer.lap(Phase::Va);
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
    insert_mapping(vm, at, va + offset, backing, res, timer)
}

/// `HL_CB_FLAGS_MAP` (upstream `cb_map_mem`): map the pages of `cb`
/// contiguously in the HOST range, 4 KiB pages, through the same path as
/// host MAPs (so the page-walk oracle translates it and nothing is released
/// before an invalidation covering it succeeded); records and returns the
/// VA. `EINVAL` if already mapped; the VA allocator's and the MMU's errnos.
/// O(pages + log n).
pub(crate) fn map_cb_va(vm: &ContextVm, cb: &Arc<CommandBuffer>) -> Result<u64> {
    let dev = &*vm.dev;
    if cb.device_va().is_some() {
        return Err(EINVAL);
    }
    let dma = map_kernel_pages(dev.mmu.backend_arc(), cb.page_refs()?)?;
    let size = dma.len() as u64 * PAGE_SIZE as u64;
    let res = MappingReservation::new(false, &vm.mappings)?;
    let req = va_request(size, PAGE_SIZE as u64, 0, 0);
    let kind = VaRangeType::Host;
    let va = vm.alloc(kind, req).map_err(Error::from)?;
    let backing = Backing::Cb {
        cb: cb.clone(),
        dma,
    };
    let at = VaPlace { kind, va, size };
    let va = insert_mapping(vm, at, va, backing, res, OpTimer::off(Op::MapHost))?;
    cb.set_device_va(va);
    Ok(va)
}

/// Unmap the device mapping of `cb`, if it has one (its DESTROY): as UNMAP,
/// the CB stays held by the mapping until an invalidation covering the
/// unmap succeeded (quarantined otherwise, and the error returned). O(log n
/// + pages).
pub(crate) fn unmap_cb_va(vm: &ContextVm, cb: &CommandBuffer) -> Result {
    let Some(va) = cb.device_va() else {
        return Ok(());
    };
    cb.set_device_va(0);
    unmap_va(vm, va, true)
}

/// Every `page_size` page of a pinned buffer mapped for the device's DMA
/// (`dma_map_host_va`), unmapped when the result is dropped. O(npages),
/// yielding once per 512 pages.
fn host_dma_addrs(dev: &DeviceVm, pinned: &PinnedUserPages, page_size: u64) -> Result<HostDma> {
    map_host_pages(dev.mmu.backend_arc(), pinned, page_size)
}

#[kunit_tests(hlrs_mapping)]
mod tests {
    use super::*;
    use crate::vm::page_pack::PhysPgPack;
    use crate::vm::test_vm::{TestContext, TestDevice};
    use crate::{
        asic::AsicProperties,
        uapi::HL_MEM_CONTIGUOUS,
        vm::device_memory::{alloc_device_memory, free_device_memory},
    };
    use crate::{asic::MmuGeometry, mmu::walk::translate};

    const PAGE: u64 = 0x3000_0000;

    #[test]
    fn every_mapped_byte_translates_to_its_dram_page() -> Result {
        let (d, ctx) = setup()?;
        for flags in [0, HL_MEM_CONTIGUOUS] {
            let h = alloc_device_memory(ctx.vm(), 5 * PAGE, flags)?;
            let va = map_device_va(ctx.vm(), u64::from(h), 0, 0)?;
            assert_eq!(va, d.asic.dram_va.start);
            let pack = d.vm.handles.lock().get(h).ok_or(EINVAL)?.pack.clone();
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
            unmap_device_va(ctx.vm(), va)?;
            for i in 0..5 {
                assert_eq!(oracle(&d, &ctx, va + i * PAGE), None);
            }
            assert_eq!(ctx.vm().mmu.lock().dmmu.hops_in_use(), 0);
            free_device_memory(ctx.vm(), u64::from(h))?;
        }
        assert!(ctx.vm().is_pristine());
        Ok(())
    }

    #[test]
    fn hints_and_their_errors() -> Result {
        let (d, ctx) = setup()?;
        let h = u64::from(alloc_device_memory(ctx.vm(), PAGE, 0)?);
        let hint = d.asic.dram_va.start + 7 * PAGE;
        assert_eq!(map_device_va(ctx.vm(), h, hint, 0)?, hint);
        // Occupied: elsewhere without FORCE_HINT, EADDRINUSE with it.
        assert_eq!(map_device_va(ctx.vm(), h, hint, 0)?, d.asic.dram_va.start);
        assert_eq!(
            map_device_va(ctx.vm(), h, hint, HL_MEM_FORCE_HINT),
            Err(EADDRINUSE)
        );
        // Misaligned: ignored, or EINVAL when forced; hint 0 forced: EINVAL.
        assert_eq!(
            map_device_va(ctx.vm(), h, hint + 4096, 0)?,
            d.asic.dram_va.start + PAGE
        );
        assert_eq!(
            map_device_va(ctx.vm(), h, hint + 4096, HL_MEM_FORCE_HINT),
            Err(EINVAL)
        );
        assert_eq!(
            map_device_va(ctx.vm(), h, 0, HL_MEM_FORCE_HINT),
            Err(EINVAL)
        );
        assert_eq!(
            d.vm.handles.lock().get(h as u32).map(|e| e.mapping_cnt),
            Some(3)
        );
        Ok(())
    }

    #[test]
    fn free_is_refused_while_mapped_and_unmap_needs_the_exact_va() -> Result {
        let (_d, ctx) = setup()?;
        let h = u64::from(alloc_device_memory(ctx.vm(), 2 * PAGE, 0)?);
        let a = map_device_va(ctx.vm(), h, 0, 0)?;
        let b = map_device_va(ctx.vm(), h, 0, 0)?;
        assert_eq!(b, a + 2 * PAGE);
        assert_eq!(free_device_memory(ctx.vm(), h), Err(EINVAL));
        assert_eq!(unmap_device_va(ctx.vm(), a + PAGE), Err(EINVAL));
        assert_eq!(unmap_device_va(ctx.vm(), a + 1), Err(EINVAL));
        assert_eq!(unmap_device_va(ctx.vm(), 0), Err(EINVAL));
        unmap_device_va(ctx.vm(), a)?;
        assert_eq!(unmap_device_va(ctx.vm(), a), Err(EINVAL));
        assert_eq!(free_device_memory(ctx.vm(), h), Err(EINVAL));
        unmap_device_va(ctx.vm(), b)?;
        free_device_memory(ctx.vm(), h)?;
        // Unknown handle, and the low 32 bits rule.
        assert_eq!(map_device_va(ctx.vm(), h, 0, 0), Err(EINVAL));
        let h = u64::from(alloc_device_memory(ctx.vm(), 1, 0)?);
        let va = map_device_va(ctx.vm(), (7 << 32) | h, 0, 0)?;
        // VA reuse: best fit gives the first VA back.
        assert_eq!(va, a);
        Ok(())
    }

    #[test]
    fn rollback_after_a_failure_at_every_pte_write() -> Result {
        let (d, ctx) = setup()?;
        // Every MAP builds its whole chain (no emptied hop left linked).
        ctx.vm().mmu.lock().dmmu.set_idle_limit(0);
        let h = u64::from(alloc_device_memory(ctx.vm(), 3 * PAGE, 0)?);
        let before = d.sim.pte_writes();
        let va = map_device_va(ctx.vm(), h, 0, 0)?;
        let writes = d.sim.pte_writes() - before;
        unmap_device_va(ctx.vm(), va)?;
        assert!(writes >= 3);
        let slots = d.mmu.dr_hops.lock().free_slots();
        for k in 1..=writes {
            d.sim.inject_pte_write_failure(k);
            assert_eq!(map_device_va(ctx.vm(), h, 0, 0), Err(EIO));
            d.sim.inject_pte_write_failure(0);
            for i in 0..3 {
                assert_eq!(oracle(&d, &ctx, va + i * PAGE), None);
            }
            assert_eq!(ctx.vm().mmu.lock().dmmu.hops_in_use(), 0);
            assert_eq!(d.mmu.dr_hops.lock().free_slots(), slots);
            assert!(ctx.vm().is_pristine());
            assert_eq!(ctx.vm().mapping_count(), 0);
            assert_eq!(
                d.vm.handles.lock().get(h as u32).map(|e| e.mapping_cnt),
                Some(0)
            );
        }
        free_device_memory(ctx.vm(), h)?;
        Ok(())
    }

    /// The handle's mapping count, as FREE sees it.
    fn mapping_cnt(d: &TestDevice, h: u64) -> Option<u32> {
        d.vm.handles.lock().get(h as u32).map(|e| e.mapping_cnt)
    }

    #[test]
    fn unmap_whose_invalidation_fails_keeps_the_dram_mapped_until_a_later_one() -> Result {
        let (d, ctx) = setup()?;
        // Every emptied hop detached (none left linked): they park too.
        ctx.vm().mmu.lock().dmmu.set_idle_limit(0);
        let h = u64::from(alloc_device_memory(ctx.vm(), 2 * PAGE, 0)?);
        let va = map_device_va(ctx.vm(), h, 0, 0)?;
        let slots = d.mmu.dr_hops.lock().free_slots();
        d.sim.inject_invalidation_failure();
        assert_eq!(unmap_device_va(ctx.vm(), va), Err(EIO));
        // Gone for the user and for the walk...
        assert_eq!(oracle(&d, &ctx, va), None);
        assert_eq!(unmap_device_va(ctx.vm(), va), Err(EINVAL));
        assert_eq!(ctx.vm().mapping_count(), 0);
        // ...but the handle stays mapped (FREE refused), the VA allocated and
        // the emptied hops out of the pool.
        assert_eq!(ctx.vm().quarantine_count(), 1);
        assert_eq!(mapping_cnt(&d, h), Some(1));
        assert_eq!(free_device_memory(ctx.vm(), h), Err(EINVAL));
        assert_eq!(d.mmu.dr_hops.lock().free_slots(), slots);
        assert_eq!(ctx.vm().mmu.lock().dmmu.stale_count(), 3);
        let other = map_device_va(ctx.vm(), h, 0, 0)?;
        assert_ne!(other, va);
        // That MAP's success tried a full invalidation, which released the
        // quarantine exactly once: count, VA and hops.
        assert_eq!(ctx.vm().quarantine_count(), 0);
        assert_eq!(ctx.vm().mmu.lock().dmmu.stale_count(), 0);
        assert_eq!(mapping_cnt(&d, h), Some(1));
        unmap_device_va(ctx.vm(), other)?;
        assert_eq!(mapping_cnt(&d, h), Some(0));
        assert!(ctx.vm().is_pristine());
        assert_eq!(map_device_va(ctx.vm(), h, 0, 0)?, va);
        Ok(())
    }

    #[test]
    fn map_whose_invalidation_fails_releases_nothing_before_a_later_one() -> Result {
        let (d, ctx) = setup()?;
        let h = u64::from(alloc_device_memory(ctx.vm(), 2 * PAGE, 0)?);
        // The MAP's own invalidation and the one after its rollback fail.
        d.sim.inject_invalidation_failures(2);
        assert_eq!(map_device_va(ctx.vm(), h, 0, 0), Err(EIO));
        // No PTE stays (upstream leaves them), but nothing went back.
        assert_eq!(oracle(&d, &ctx, d.asic.dram_va.start), None);
        assert_eq!(ctx.vm().mapping_count(), 0);
        assert_eq!(ctx.vm().quarantine_count(), 1);
        assert_eq!(mapping_cnt(&d, h), Some(1));
        assert_eq!(free_device_memory(ctx.vm(), h), Err(EINVAL));
        assert!(!ctx.vm().is_pristine());
        // One failure only: the rollback's invalidation succeeds and releases.
        d.sim.inject_invalidation_failure();
        assert_eq!(map_device_va(ctx.vm(), h, 0, 0), Err(EIO));
        assert_eq!(ctx.vm().quarantine_count(), 1);
        assert_eq!(mapping_cnt(&d, h), Some(1));
        // A successful UNMAP of something else settles the quarantine.
        let h2 = u64::from(alloc_device_memory(ctx.vm(), PAGE, 0)?);
        let va2 = map_device_va(ctx.vm(), h2, 0, 0)?;
        assert_eq!(ctx.vm().quarantine_count(), 0);
        assert_eq!(mapping_cnt(&d, h), Some(0));
        unmap_device_va(ctx.vm(), va2)?;
        free_device_memory(ctx.vm(), h)?;
        free_device_memory(ctx.vm(), h2)?;
        assert!(ctx.vm().is_pristine());
        assert_eq!(d.vm.pool.lock().free_pages(), 127);
        Ok(())
    }

    #[test]
    fn a_quarantined_mapping_waits_while_invalidations_keep_failing() -> Result {
        let (d, ctx) = setup()?;
        let h = u64::from(alloc_device_memory(ctx.vm(), PAGE, 0)?);
        let h2 = u64::from(alloc_device_memory(ctx.vm(), PAGE, 0)?);
        let va = map_device_va(ctx.vm(), h, 0, 0)?;
        let va2 = map_device_va(ctx.vm(), h2, 0, 0)?;
        d.sim.inject_invalidation_failure();
        assert_eq!(unmap_device_va(ctx.vm(), va), Err(EIO));
        // Every later invalidation fails too: UNMAP of the other mapping
        // quarantines it as well; neither goes back.
        d.sim.inject_invalidation_failures(u64::MAX);
        assert_eq!(unmap_device_va(ctx.vm(), va2), Err(EIO));
        assert_eq!(ctx.vm().quarantine_count(), 2);
        assert_eq!(
            (mapping_cnt(&d, h), mapping_cnt(&d, h2)),
            (Some(1), Some(1))
        );
        d.sim.inject_invalidation_failures(0);
        assert!(ctx.vm().settle_quarantine(false));
        assert_eq!(
            (mapping_cnt(&d, h), mapping_cnt(&d, h2)),
            (Some(0), Some(0))
        );
        assert!(ctx.vm().is_pristine());
        Ok(())
    }

    #[test]
    fn failed_pte_clears_are_never_released_before_teardown_unlinks_them() -> Result {
        let (d, ctx) = setup()?;
        let h = u64::from(alloc_device_memory(ctx.vm(), 3 * PAGE, 0)?);
        let va = map_device_va(ctx.vm(), h, 0, 0)?;
        // The first leaf clear fails; the invalidation then succeeds, but a
        // PTE still points at the first DRAM page: nothing may go back.
        d.sim.inject_pte_write_failure(1);
        assert!(unmap_device_va(ctx.vm(), va).is_err());
        d.sim.inject_pte_write_failure(0);
        assert!(oracle(&d, &ctx, va).is_some());
        assert_eq!(ctx.vm().quarantine_count(), 1);
        assert_eq!(mapping_cnt(&d, h), Some(1));
        assert!(!ctx.vm().settle_quarantine(true));
        assert_eq!(mapping_cnt(&d, h), Some(1));
        // Teardown clears hop 0, and then the pages go back.
        let free = d.vm.pool.lock().free_pages();
        drop(ctx);
        assert_eq!(d.vm.pool.lock().free_pages(), free + 3);
        assert!(!d.release_parked());
        Ok(())
    }

    #[test]
    fn teardown_of_many_mappings_yields_and_releases_everything() -> Result {
        // 10,000 unless the module was loaded with `kunit_mappings=`: the
        // teardown yields once per mapping from the second one on, and every
        // count below holds at any scale; 100,000 cost 25-50 s of every
        // `make test` and showed nothing more (docs/testing.md).
        let n = crate::module_parameters::kunit_mappings.value();
        let (d, ctx) = setup()?;
        let slots = d.mmu.dr_hops.lock().free_slots();
        let h = alloc_device_memory(ctx.vm(), PAGE, 0)?;
        let pack = d.vm.handles.lock().get(h).ok_or(EINVAL)?.pack.clone();
        let vm = ctx.vm();
        let t0 = kernel::time::Instant::<kernel::time::Monotonic>::now();
        // MAP's steps without its per-call invalidation and locking of the
        // handle table (10,000 MAP ioctls take minutes on the emulated
        // debug kernel): VA, PTEs, published record, counted handle.
        for _ in 0..n {
            let kind = VaRangeType::Dram;
            let va = vm
                .alloc(kind, va_request(PAGE, 0, 0, 0))
                .map_err(Error::from)?;
            let backing = Backing::Dram {
                handle: h,
                pack: pack.clone(),
            };
            let m = Mapping::new(backing, kind, ctx.asid(), va, PAGE);
            let mut one = OneMapping {
                tree: RBTree::new(),
                key: va,
            };
            one.tree
                .insert(RBTreeNodeReservation::new(GFP_KERNEL)?.into_node(va, m));
            let mut detached = DetachedHops::new();
            let b = one.get().and_then(Mapping::backing).ok_or(EINVAL)?;
            vm.map_backing(&d.vm, kind, va, b, &mut detached)
                .map_err(|(e, _)| e)?;
            vm.mappings.lock().publish(one, None).map_err(|_| EINVAL)?;
        }
        if let Some(e) = d.vm.handles.lock().get_mut(h) {
            e.mapping_cnt += u32::try_from(n).map_err(|_| EINVAL)?;
        }
        let map_ns = t0.elapsed().as_nanos();
        assert_eq!(vm.mapping_count() as u64, n);
        drop(pack);
        let (count, _) = d.sim.invalidation_log();
        let t1 = kernel::time::Instant::<kernel::time::Monotonic>::now();
        // The soft-lockup detector (2 x 3 s in the test kernel) reports a
        // teardown that never yields; the run fails on any report.
        drop(ctx);
        let teardown_ns = t1.elapsed().as_nanos();
        pr_info!(
            "{} DRAM mappings: mapped in {} ms, torn down in {} ms\n",
            n,
            map_ns / 1_000_000,
            teardown_ns / 1_000_000
        );
        assert_eq!(d.sim.invalidation_log().0, count + 2);
        assert_eq!(d.mmu.dr_hops.lock().free_slots(), slots);
        assert_eq!(d.vm.pool.lock().free_pages(), 127);
        assert_eq!(d.vm.dram_used(), 0);
        Ok(())
    }

    #[test]
    fn foreign_handles_need_shared() -> Result {
        let (d, ctx) = setup()?;
        for (flags, want) in [(0u32, Err(EPERM)), (HL_MEM_SHARED, Ok(()))] {
            let pack = Arc::new(
                PhysPgPack::alloc(&d.vm.pool, &d.vm.asic, 0, flags, 1, true)?,
                GFP_KERNEL,
            )?;
            let fh =
                d.vm.handles
                    .lock()
                    .insert(pack, crate::vm::handles::HandleReservation::new()?)?;
            let r = map_device_va(ctx.vm(), u64::from(fh), 0, 0)
                .map(|va| unmap_device_va(ctx.vm(), va));
            assert_eq!(r.map(|_| ()), want);
            drop(d.vm.handles.lock().remove_if(fh, |_| Ok(()))?);
        }
        Ok(())
    }

    #[test]
    fn teardown_with_mappings_left_behind() -> Result {
        let (d, ctx) = setup()?;
        let slots = d.mmu.dr_hops.lock().free_slots();
        for n in 1..=3u64 {
            let h = alloc_device_memory(ctx.vm(), n * PAGE, 0)?;
            map_device_va(ctx.vm(), u64::from(h), 0, 0)?;
        }
        let (count, _) = d.sim.invalidation_log();
        let hop0 = ctx.vm().mmu.lock().dmmu.hop0();
        drop(ctx);
        // One full invalidation per MMU (as upstream: USERPTR and PHYS_PACK),
        // every hop and page back, hop 0 clear.
        let (after, last) = d.sim.invalidation_log();
        assert_eq!(after, count + 2);
        // Also with nothing mapped: the hop 0s were cleared.
        let ctx = TestContext::new(&d)?;
        let (count, _) = d.sim.invalidation_log();
        drop(ctx);
        assert_eq!(d.sim.invalidation_log().0, count + 2);
        assert_eq!(last.map(|i| i.asid), Some(None));
        assert_eq!(d.mmu.dr_hops.lock().free_slots(), slots);
        assert_eq!(d.vm.pool.lock().free_pages(), 127);
        assert_eq!(d.vm.dram_used(), 0);
        let read = |a: u64| d.backend().read_pte(a);
        assert!(translate(
            &MmuGeometry::DMMU,
            &read,
            hop0,
            d.asic.dram_va.start,
            Some(&d.mmu.scrambler)
        )
        .is_err());
        Ok(())
    }

    #[test]
    fn bench_map_64_gib() -> Result {
        let (d, ctx) = setup()?;
        let size = 64u64 << 30;
        let h = u64::from(alloc_device_memory(ctx.vm(), size, 0)?);
        let w0 = d.sim.pte_writes();
        let t0 = kernel::time::Instant::<kernel::time::Monotonic>::now();
        let va = map_device_va(ctx.vm(), h, 0, 0)?;
        let map_ns = t0.elapsed().as_nanos();
        let w1 = d.sim.pte_writes();
        let t1 = kernel::time::Instant::<kernel::time::Monotonic>::now();
        unmap_device_va(ctx.vm(), va)?;
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
        assert_eq!(ctx.vm().mmu.lock().dmmu.hops_in_use(), 0);
        Ok(())
    }

    #[test]
    fn a_cb_maps_to_its_pages_and_goes_only_after_an_invalidation() -> Result {
        use crate::vm::command_buffer::{cb_create, cb_get, live_cbs};
        let (d, ctx) = setup()?;
        let vm = ctx.vm();
        let live0 = live_cbs();
        let cb = cb_get(&vm.cbs, cb_create(&vm.cbs, 5000)?)?;
        let va = map_cb_va(vm, &cb)?;
        assert_eq!(cb.device_va(), Some(va));
        assert_eq!(map_cb_va(vm, &cb), Err(EINVAL));
        let phys = cb.page_phys()?;
        assert_eq!(phys.len(), 2);
        for (i, pa) in phys.iter().enumerate() {
            assert_eq!(oracle(&d, &ctx, va + i as u64 * 4096 + 8), Some(pa + 8));
        }
        assert_eq!(oracle(&d, &ctx, va + 8192), None);
        // The driver's mapping: not the user's to UNMAP.
        assert_eq!(unmap_device_va(vm, va), Err(EINVAL));
        // Its unmap's invalidation fails: gone for the walk, quarantined, and
        // the CB kept alive by it.
        d.sim.inject_invalidation_failure();
        assert_eq!(unmap_cb_va(vm, &cb), Err(EIO));
        assert_eq!(cb.device_va(), None);
        assert_eq!(oracle(&d, &ctx, va), None);
        drop(cb);
        assert_eq!(vm.quarantine_count(), 1);
        assert_eq!(live_cbs(), live0 + 1);
        // A later MAP's successful invalidation releases it.
        let other = cb_get(&vm.cbs, cb_create(&vm.cbs, 1)?)?;
        map_cb_va(vm, &other)?;
        assert_eq!(vm.quarantine_count(), 0);
        assert_eq!(vm.cbs.lock().clear(), 2);
        assert_eq!(live_cbs(), live0 + 1);
        unmap_cb_va(vm, &other)?;
        drop(other);
        assert_eq!(live_cbs(), live0);
        Ok(())
    }

    fn setup() -> Result<(Arc<TestDevice>, TestContext)> {
        let d = TestDevice::new(AsicProperties::gaudi2(6, 0)?)?;
        let ctx = TestContext::new(&d)?;
        Ok((d, ctx))
    }

    /// The page-walk oracle on the context's DMMU tree.
    fn oracle(_d: &TestDevice, ctx: &TestContext, va: u64) -> Option<u64> {
        ctx.vm().translate(va).ok().map(|t| t.pa)
    }
}
