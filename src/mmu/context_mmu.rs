// SPDX-License-Identifier: GPL-2.0

//! The page tables of one context (upstream `hl_mmu_ctx_init`/`_fini`,
//! `hl_mmu_map_page`/`unmap_page` over a run of pages, common/mmu/mmu.c): the
//! DMMU tree (DRAM VAs, device-resident hops, scrambled addresses) and the
//! PMMU tree (host VAs, host-resident hops), with map, unmap, translate and
//! teardown of a run of pages. What a run maps is the caller's
//! ([`MappedPages`]); where hops live is the device's ([`DeviceMmu`]).

use crate::{
    asic::MmuGeometry,
    ffi::sched,
    hw::backend::MmuKind,
    mmu::{
        device_mmu::DeviceMmu,
        hop_pool::HopMemory,
        invalidate::{Invalidated, MmuArea},
        page_table::{DetachedHops, PageTable},
        pte::Scrambler,
        walk::{translate, Translation, WalkFault},
    },
};
use kernel::prelude::*;

/// Pages mapped as one run: their page size and count, and the device
/// address of each (DRAM pages of a pack, or DMA addresses of pinned host
/// pages).
pub(crate) trait MappedPages {
    /// Page size and number of pages as mapped.
    fn geometry(&self) -> (u64, u64);
    /// Device address of page `i`; `None` past the end. O(1).
    fn page_addr(&self, i: u64) -> Option<u64>;
}

/// The two page tables of one context.
pub(crate) struct ContextMmu {
    /// DMMU tree (DRAM VAs), device resident with a host shadow (upstream v2).
    pub(crate) dmmu: PageTable,
    /// PMMU tree (host VAs), host resident (upstream v2_hr).
    pub(crate) pmmu: PageTable,
}

/// How the tree of one MMU holds a run: the geometry, the scrambler (DMMU
/// only) and the leaf level for pages of `page_size`.
struct RunLayout<'a> {
    scrambler: Option<&'a Scrambler>,
    /// `None` when the geometry has no leaf of that size.
    leaf: Option<usize>,
    /// Consecutive pages are consecutive entries of a leaf hop (no
    /// scrambling, leaves of the page size): mapped and unmapped in batches.
    batch: bool,
}

impl<'a> RunLayout<'a> {
    fn new(dev: &'a DeviceMmu, kind: MmuKind, page_size: u64) -> Self {
        let (geo, scrambler, leaf_size) = match kind {
            MmuKind::Dram => (MmuGeometry::DMMU, Some(&dev.scrambler), dev.dmmu_page_size),
            MmuKind::Host => (MmuGeometry::PMMU, None, page_size),
        };
        Self {
            scrambler,
            leaf: geo.leaf_hop(leaf_size),
            batch: scrambler.is_none() && page_size == leaf_size,
        }
    }

    /// A VA or PA as the tree holds it (the DMMU scrambles).
    fn s(&self, a: u64) -> u64 {
        self.scrambler.map_or(a, |x| x.scramble(a))
    }
}

impl ContextMmu {
    /// The two empty page tables of a new context with `asid`
    /// (`hl_mmu_ctx_init`), each on the ASID's hop 0, cleared in its real
    /// memory. `EINVAL` for an ASID out of range.
    pub(crate) fn new(dev: &DeviceMmu, asid: u32) -> Result<Self> {
        let hop0 = dev.dr_hops.lock().hop0(asid).ok_or(EINVAL)?;
        let dmmu = PageTable::new(
            MmuGeometry::DMMU,
            MmuKind::Dram,
            asid,
            hop0,
            dev.hops(MmuKind::Dram).mem(),
        )?;
        let hr_hop0 = dev.hr_hops.lock().hop0(asid).ok_or(EINVAL)?;
        let pmmu = PageTable::new(
            MmuGeometry::PMMU,
            MmuKind::Host,
            asid,
            hr_hop0,
            dev.hops(MmuKind::Host).mem(),
        )?;
        Ok(Self { dmmu, pmmu })
    }

    /// The tree of one MMU. O(1).
    pub(crate) fn table(&mut self, kind: MmuKind) -> &mut PageTable {
        match kind {
            MmuKind::Dram => &mut self.dmmu,
            MmuKind::Host => &mut self.pmmu,
        }
    }

    /// Map every page of `pages` at consecutive VAs from `va` in the tree of
    /// `kind` (`map_phys_pg_pack`). DRAM: one 1 GiB DMMU leaf per DRAM page,
    /// through the scrambler. Host: PMMU leaves of the run's page size (the
    /// largest the geometry allows: hop 4 for 2 MiB, hop 5 for 4 KiB).
    ///
    /// On a failure part-way (also `EINTR` for a fatal signal, checked once
    /// per leaf hop), exactly the pages already mapped are unmapped again, the
    /// hops that emptied go to `detached`, and the error is returned; the
    /// caller releases nothing before an invalidation. Returns whether some
    /// PTE of the rollback could not be cleared with the error.
    /// O(npages x hops), yielding once per leaf hop.
    pub(crate) fn map(
        &mut self,
        dev: &DeviceMmu,
        kind: MmuKind,
        va: u64,
        pages: &dyn MappedPages,
        detached: &mut DetachedHops,
    ) -> Result<(), (Error, bool)> {
        let (page_size, npages) = pages.geometry();
        let layout = RunLayout::new(dev, kind, page_size);
        let leaf = layout.leaf.ok_or((EINVAL, false))?;
        let tree = self.table(kind);
        let mut hops = dev.hops(kind);
        let mem = hops.mem();
        let mut i = 0;
        while i < npages {
            if i > 0 {
                sched::cond_resched();
            }
            let page_va = va + i * page_size;
            let mut r = if sched::fatal_signal_pending() {
                Err(EINTR)
            } else {
                pages
                    .page_addr(i)
                    .ok_or(EINVAL)
                    .and_then(|pa| tree.map(mem, layout.s(page_va), layout.s(pa), leaf))
                    .map(|()| 1)
            };
            // Without scrambling, the first page of each leaf hop goes
            // through the walk, the rest of the hop in one batch.
            if layout.batch && r.is_ok() {
                let mut next = |j: u64| pages.page_addr(i + 1 + j);
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
                    let left = unmap_run(tree, mem, &layout, va, page_size, i, detached);
                    if left > 0 {
                        hl_err!(
                            "MAP rollback: {} PTE(s) at {:#x} could not be cleared\n",
                            left,
                            va
                        );
                    }
                    return Err((e, left > 0));
                }
            }
        }
        Ok(())
    }

    /// Unmap every page of a run mapped at `va` in the tree of `kind`
    /// (`unmap_phys_pg_pack`); the hops that emptied go to `detached`.
    /// Per-page errors are counted and the loop carries on; a page already
    /// unmapped counts as cleared (a retry after a partial failure). Returns
    /// how many PTEs are left. O(npages x hops), yielding once per leaf hop.
    pub(crate) fn unmap(
        &mut self,
        dev: &DeviceMmu,
        kind: MmuKind,
        va: u64,
        pages: &dyn MappedPages,
        detached: &mut DetachedHops,
    ) -> usize {
        let (page_size, npages) = pages.geometry();
        let layout = RunLayout::new(dev, kind, page_size);
        let mut hops = dev.hops(kind);
        unmap_run(
            self.table(kind),
            hops.mem(),
            &layout,
            va,
            page_size,
            npages,
            detached,
        )
    }

    /// Park detached hops in the tree of `kind` until a later invalidation
    /// covers them. No allocation.
    pub(crate) fn park(&mut self, kind: MmuKind, hops: DetachedHops) {
        if !hops.is_empty() {
            self.table(kind).park(hops);
        }
    }

    /// Whether the tree of `kind` has parked hops waiting for an
    /// invalidation.
    pub(crate) fn has_stale(&self, kind: MmuKind) -> bool {
        match kind {
            MmuKind::Dram => self.dmmu.stale_area().is_some(),
            MmuKind::Host => self.pmmu.stale_area().is_some(),
        }
    }

    /// Give back `hops`, detached from the tree of `kind`, if `proof` covers
    /// them (kept as the tree's spares or freed, see
    /// [`PageTable::recycle`]); `Err(hops)` otherwise.
    pub(crate) fn recycle(
        &mut self,
        dev: &DeviceMmu,
        kind: MmuKind,
        hops: DetachedHops,
        proof: &Invalidated,
    ) -> Result<usize, DetachedHops> {
        let mut mem = dev.hops(kind);
        self.table(kind).recycle(mem.mem(), hops, proof)
    }

    /// Give back the parked hops of the tree of `kind` that `proof` covers.
    pub(crate) fn release_stale(&mut self, dev: &DeviceMmu, kind: MmuKind, proof: &Invalidated) {
        let mut hops = dev.hops(kind);
        self.table(kind).release_stale(hops.mem(), proof);
    }

    /// Clear the hop 0 of the tree of `kind` and detach every other hop
    /// (`hl_mmu_ctx_fini`); the hops are parked until the teardown's
    /// invalidation. Returns how many hops were still linked and whether hop
    /// 0 is clear (no PTE of the tree is reachable any more).
    pub(crate) fn teardown(&mut self, dev: &DeviceMmu, kind: MmuKind) -> (usize, bool) {
        let mut hops = dev.hops(kind);
        let tree = self.table(kind);
        let mut detached = DetachedHops::new();
        let (n, cleared) = tree.teardown(hops.mem(), &mut detached);
        tree.park(detached);
        (n, cleared)
    }

    /// The page-walk oracle on the tree of `kind`, reading the hops from
    /// their real memory as the hardware does (DMMU: device DRAM through the
    /// backend, scrambled; PMMU: the host-resident hops). O(hops).
    pub(crate) fn translate(
        &self,
        dev: &DeviceMmu,
        kind: MmuKind,
        va: u64,
    ) -> Result<Translation, WalkFault> {
        match kind {
            MmuKind::Dram => {
                let read = |a: u64| dev.backend().read_pte(a);
                let scr = Some(&dev.scrambler);
                translate(&MmuGeometry::DMMU, &read, self.dmmu.hop0(), va, scr)
            }
            MmuKind::Host => {
                let read = |a: u64| dev.hr_hops.lock().read(a);
                translate(&MmuGeometry::PMMU, &read, self.pmmu.hop0(), va, None)
            }
        }
    }
}

/// Unmap pages `0..n` of a run at `va` from `tree`, with the runs of a leaf
/// hop in one batch when the layout allows; emptied hops go to `detached`. A
/// page already unmapped counts as cleared. Returns how many PTEs are left.
/// Yields once per leaf hop (per page without batches). O(n x hops).
fn unmap_run(
    tree: &mut PageTable,
    mem: &mut dyn HopMemory,
    layout: &RunLayout<'_>,
    va: u64,
    page_size: u64,
    n: u64,
    detached: &mut DetachedHops,
) -> usize {
    // The tree detaches hops under the VAs it is keyed by (scrambled for the
    // DMMU); the invalidation that frees them names `[va, + n pages)`.
    let mut emptied = DetachedHops::new();
    let (mut i, mut left) = (0, 0);
    while i < n {
        if i > 0 {
            sched::cond_resched();
        }
        let page_va = va + i * page_size;
        // The rest of the page's leaf hop first, then the page itself through
        // `unmap`, which detaches the hops that became empty.
        let rest = if layout.batch {
            tree.unmap_following(mem, page_va, page_size, n - i - 1)
                .unwrap_or(0)
        } else {
            0
        };
        match tree.unmap(mem, layout.s(page_va), &mut emptied) {
            Ok(_) => {}
            Err(e) if e == EINVAL => {}
            Err(_) => left += 1,
        }
        i += 1 + rest;
    }
    let size = n.saturating_mul(page_size);
    detached.absorb_for(
        emptied,
        MmuArea::new(tree.mmu_kind(), tree.asid(), va, size),
    );
    left
}
