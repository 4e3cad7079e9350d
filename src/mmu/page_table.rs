// SPDX-License-Identifier: GPL-2.0

//! Hop tables: the page-table tree of one context in one MMU
//! (upstream `common/mmu/mmu_v2.c` for the device-resident DMMU tables and
//! `mmu_v2_hr.c` for the host-resident PMMU tables).
//!
//! A tree starts at the context's hop 0 (one per ASID, never freed). Each hop
//! is a 4 KiB table of 512 PTEs; a hop other than hop 0 counts its valid
//! entries and is freed when the count drops to zero. The driver keeps a host
//! shadow of every hop and walks only the shadows; every PTE write goes to the
//! hop's real memory through [`HopMemory`] (for the DMMU: device DRAM, through
//! the backend) and then to the shadow.
//!
//! Differences from upstream: new hops are filled first and linked into the
//! tree last, bottom-up, so a concurrent hardware walk never sees a half-built
//! chain (upstream links top-down after the leaf); a hop's shadow and counter
//! are found in a tree keyed by its address, O(log n), instead of a fixed
//! 128-bucket hash (habanalabs.h:107); and a failed PTE write leaves the tree
//! exactly as it was; a hop emptied by an unmap is detached (unlinked, out of
//! the tree) and goes back to its pool only after an MMU cache invalidation
//! covering the unmapped VA succeeded ([`DetachedHops`]); upstream frees it
//! at once, so another context could get it while the MMU's walk cache still
//! points at it.

use crate::{
    asic::{MmuGeometry, HOP_PTES},
    hw::backend::MmuKind,
    mmu::{
        hop_pool::{HopMemory, ZERO_PTES},
        invalidate::{Invalidated, MmuArea},
        pte::Pte,
    },
};
use kernel::{
    prelude::*,
    rbtree::{RBTree, RBTreeNode, RBTreeNodeReservation}, //
};

/// One hop: the host shadow of its 512 PTEs and how many are valid.
pub(crate) struct Hop {
    shadow: KBox<[u64; HOP_PTES as usize]>,
    num_ptes: u32,
}

/// Zero the non-zero entries of `hop`'s real memory and give the hop back to
/// `mem` (hops are all-zero while free). O(512), no allocation.
fn scrub_and_free(mem: &mut dyn HopMemory, phys: u64, hop: &Hop) {
    for (i, v) in hop.shadow.iter().enumerate() {
        if *v != 0 && mem.write_pte(phys + i as u64 * 8, 0).is_err() {
            hl_err!("MMU: could not clear a PTE of a freed hop\n");
        }
    }
    mem.free_hop(phys);
}

/// Zero the non-zero entries of `hop` at `phys`, in memory and shadow;
/// whether all of them could be. O(512), no allocation.
fn zero_hop(mem: &mut dyn HopMemory, phys: u64, hop: &mut Hop) -> bool {
    let mut zero = true;
    for (i, v) in hop.shadow.iter_mut().enumerate() {
        if *v != 0 {
            if mem.write_pte(phys + i as u64 * 8, 0).is_ok() {
                *v = 0;
            } else {
                zero = false;
            }
        }
    }
    hop.num_ptes = 0;
    zero
}

/// Hops taken out of a tree that the MMU may still reach through cached
/// upper-level entries: their slots go back to the pool only against an
/// invalidation covering `area` (the VAs whose unmap detached them).
///
/// Moving a hop in or out moves its tree node: no allocation.
///
/// # Invariants
///
/// Every hop in `hops` is unreachable from its tree's hop 0; `area` is `Some`
/// when `hops` is not empty and covers a VA of every hop's last unmapped entry.
pub(crate) struct DetachedHops {
    hops: RBTree<u64, Hop>,
    area: Option<MmuArea>,
}

impl DetachedHops {
    /// None.
    pub(crate) fn new() -> Self {
        Self {
            hops: RBTree::new(),
            area: None,
        }
    }

    fn add_area(&mut self, area: MmuArea) {
        self.area = Some(self.area.map_or(area, |a| a.join(area)));
    }

    fn detach(&mut self, node: RBTreeNode<u64, Hop>, area: MmuArea) {
        self.hops.insert(node);
        self.add_area(area);
    }

    /// Whether no hop is held.
    pub(crate) fn is_empty(&self) -> bool {
        self.area.is_none()
    }

    /// Number of hops held. O(n): tests and debugfs.
    pub(crate) fn len(&self) -> usize {
        self.hops.iter().count()
    }

    /// What an invalidation must cover to release them.
    pub(crate) fn area(&self) -> Option<MmuArea> {
        self.area
    }

    /// Take over `other`'s hops. O(k log n) for k hops, no allocation.
    pub(crate) fn absorb(&mut self, mut other: DetachedHops) {
        if let Some(a) = other.area.take() {
            self.add_area(a);
        }
        let mut cursor = other.hops.cursor_front_mut();
        while let Some(c) = cursor {
            let (next, node) = c.remove_current();
            self.hops.insert(node);
            cursor = next;
        }
    }

    /// Take over `other`'s hops, which were emptied by unmapping VAs that
    /// `area` covers in the address space invalidations use (the DMMU tree
    /// is keyed by scrambled VAs; invalidations name the VAs the user sees).
    /// O(k log n), no allocation.
    pub(crate) fn absorb_for(&mut self, mut other: DetachedHops, area: MmuArea) {
        if other.area.take().is_some() {
            self.add_area(area);
            self.absorb(other);
        }
    }

    /// Scrub every hop and give its slot back, if `proof` covers `area`;
    /// otherwise `Err(self)` unchanged. Returns how many went back. O(k x 512).
    pub(crate) fn release(
        mut self,
        mem: &mut dyn HopMemory,
        proof: &Invalidated,
    ) -> Result<usize, Self> {
        match self.area {
            None => return Ok(0),
            Some(a) if !proof.covers(&a) => return Err(self),
            Some(_) => {}
        }
        self.area = None;
        let mut n = 0;
        let mut cursor = self.hops.cursor_front_mut();
        while let Some(c) = cursor {
            let (next, node) = c.remove_current();
            let (phys, hop) = node.to_key_value();
            scrub_and_free(mem, phys, &hop);
            n += 1;
            cursor = next;
        }
        Ok(n)
    }
}

impl Drop for DetachedHops {
    fn drop(&mut self) {
        if let Some(a) = self.area {
            // Their slots stay taken for good (their shadows go): a leak, never
            // a reuse the MMU could still walk into.
            hl_err!(
                "MMU: detached hops of ASID {} dropped without an invalidation; slots leaked\n",
                a.asid
            );
        }
    }
}

/// Emptied hops a tree leaves linked, empty, for the next map below them
/// (the last one a MAP+UNMAP cycle empties: the next MAP there writes one PTE
/// instead of a chain of links, and the UNMAP clears one).
pub(crate) const IDLE_HOPS: usize = 8;

/// Emptied hops a tree keeps for its next maps instead of giving them back
/// (per tree: a MAP+UNMAP cycle at a fresh VA frees and needs up to
/// `num_hops - 1` of them).
pub(crate) const SPARE_HOPS: usize = 8;

/// The page-table tree of one context in one MMU.
///
/// # Invariants
///
/// `hops` holds hop 0 and every hop reachable from it, keyed by physical
/// address; each shadow equals the hop's real memory; `num_ptes` of a hop other
/// than hop 0 is its number of non-zero entries and is never 0 for a hop in
/// the tree. `spare` holds at most [`SPARE_HOPS`] hops that are unreachable
/// (unlinked, and covered by a successful invalidation since), all-zero in
/// shadow and memory, still taken from their pool.
pub(crate) struct PageTable {
    geo: MmuGeometry,
    kind: MmuKind,
    asid: u32,
    hop0: u64,
    hops: RBTree<u64, Hop>,
    /// Hops of quarantined unmaps (their invalidation failed), until a later
    /// invalidation covers them.
    stale: DetachedHops,
    /// Emptied, invalidated hops kept for the next new hops: a MAP reuses
    /// them with no allocation (shadow, tree node, hop slot or page) and an
    /// UNMAP gives them back with no free.
    spare: RBTree<u64, Hop>,
    spare_len: usize,
    /// Torn down: hops given back from now on go to their pool.
    torn_down: bool,
    /// Hops an unmap emptied and left linked (at most `idle_limit`); a map
    /// that writes into one takes it off the list.
    idle: [u64; IDLE_HOPS],
    idle_len: usize,
    idle_limit: usize,
    /// The hops down to the leaf hop of the last map or unmap.
    last_walk: Option<LastWalk>,
    /// Whether walks are remembered (KUnit turns it off to measure).
    remember_walks: bool,
}

/// The chain of hops from hop 0 to one leaf hop, as the last map or unmap
/// walked it: the next one under the same leaf hop (a MAP+UNMAP cycle at one
/// VA, the pages of a small buffer) skips the walk, one tree lookup per
/// level. Forgotten whenever a link is cleared or a hop leaves the tree, so
/// it never names a hop that is not linked where it says.
#[derive(Clone, Copy)]
struct LastWalk {
    /// Level of the leaf hop.
    leaf: usize,
    /// The VA bits above the leaf hop's index ([`walk_key`]).
    key: u64,
    /// `path[l]` is the hop at level `l`, for `l <= leaf`.
    path: [u64; 6],
}

/// A walk to a mapped page: the `(hop, index)` at each level down to the
/// leaf, the leaf level, and the page's address.
type FoundPage = ([(u64, u64); 6], usize, u64);

/// What identifies the leaf hop of `va` at level `leaf` (the VA bits that
/// index the levels above it); `None` for level 0. O(1).
fn walk_key(geo: &MmuGeometry, va: u64, leaf: usize) -> Option<u64> {
    let shift = *geo.hop_shifts.get(leaf.checked_sub(1)?)?;
    va.checked_shr(shift)
}

impl PageTable {
    /// A tree of `kind` for `asid` with an empty hop 0 at `hop0`, whose real
    /// memory is cleared.
    pub(crate) fn new(
        geo: MmuGeometry,
        kind: MmuKind,
        asid: u32,
        hop0: u64,
        mem: &mut dyn HopMemory,
    ) -> Result<Self> {
        let mut hops = RBTree::new();
        let shadow = KBox::new([0u64; HOP_PTES as usize], GFP_KERNEL_ACCOUNT)?;
        hops.insert(RBTreeNodeReservation::new(GFP_KERNEL_ACCOUNT)?.into_node(
            hop0,
            Hop {
                shadow,
                num_ptes: 0,
            },
        ));
        for i in 0..HOP_PTES {
            mem.write_pte(hop0 + i * 8, 0)?;
        }
        Ok(Self {
            geo,
            kind,
            asid,
            hop0,
            hops,
            stale: DetachedHops::new(),
            spare: RBTree::new(),
            spare_len: 0,
            torn_down: false,
            idle: [0; IDLE_HOPS],
            idle_len: 0,
            idle_limit: IDLE_HOPS,
            last_walk: None,
            remember_walks: true,
        })
    }

    /// Give back the detached `hops` if `proof` covers them (otherwise
    /// `Err(hops)` unchanged): emptied ones are kept as spares up to
    /// [`SPARE_HOPS`], the others scrubbed and freed. Returns how many left
    /// the caller. O(k log k), no allocation.
    pub(crate) fn recycle(
        &mut self,
        mem: &mut dyn HopMemory,
        mut hops: DetachedHops,
        proof: &Invalidated,
    ) -> Result<usize, DetachedHops> {
        match hops.area {
            None => return Ok(0),
            Some(a) if !proof.covers(&a) => return Err(hops),
            Some(_) => {}
        }
        hops.area = None;
        let mut n = 0;
        let mut cursor = hops.hops.cursor_front_mut();
        while let Some(c) = cursor {
            // An emptied hop is all-zero (the invariant of `num_ptes`).
            let empty = c.current().1.num_ptes == 0;
            let (next, node) = c.remove_current();
            if self.spare_len < SPARE_HOPS && empty && !self.torn_down {
                self.spare.insert(node);
                self.spare_len += 1;
            } else {
                let (phys, hop) = node.to_key_value();
                scrub_and_free(mem, phys, &hop);
            }
            n += 1;
            cursor = next;
        }
        Ok(n)
    }

    /// Give the spare hops back to their pool (teardown). O(k).
    fn drain_spares(&mut self, mem: &mut dyn HopMemory) {
        let mut cursor = self.spare.cursor_front_mut();
        while let Some(c) = cursor {
            let (next, node) = c.remove_current();
            mem.free_hop(node.to_key_value().0);
            cursor = next;
        }
        self.spare_len = 0;
    }

    /// Leave at most `n` (up to [`IDLE_HOPS`]) emptied hops linked; 0: every
    /// emptied hop is detached at once, as upstream frees it (tests of that
    /// path). Takes effect for later unmaps.
    #[cfg(CONFIG_KUNIT)]
    pub(crate) fn set_idle_limit(&mut self, n: usize) {
        self.idle_limit = n.min(IDLE_HOPS);
    }

    /// Keep the emptied `hop` linked, if the list has room. O(1).
    fn keep_idle(&mut self, hop: u64) -> bool {
        if self.torn_down || self.idle_len >= self.idle_limit {
            return false;
        }
        match self.idle.get_mut(self.idle_len) {
            Some(slot) => {
                *slot = hop;
                self.idle_len += 1;
                true
            }
            None => false,
        }
    }

    /// `hop` is in use again: off the idle list. O(IDLE_HOPS).
    fn unidle(&mut self, hop: u64) {
        let live = self.idle.get(..self.idle_len).unwrap_or(&[]);
        if let Some(i) = live.iter().position(|&h| h == hop) {
            self.idle_len -= 1;
            self.idle.swap(i, self.idle_len);
        }
    }

    /// Empty hops left linked. O(1): tests and debugfs.
    pub(crate) fn idle_count(&self) -> usize {
        self.idle_len
    }

    /// Hops besides hop 0 on the way to a mapped page (the others are empty
    /// hops left linked, and the links to them). O(hops x 512): debugfs and
    /// tests.
    pub(crate) fn hops_in_use(&self) -> usize {
        fn walk(t: &PageTable, hop: u64, depth: usize, n: &mut usize) -> bool {
            let Some(h) = t.hops.get(&hop) else {
                return false;
            };
            let mut live = false;
            for &e in h.shadow.iter() {
                match Pte::decode(e) {
                    Pte::Page(_) => live = true,
                    Pte::Hop(next) if depth < 6 => live |= walk(t, next, depth + 1, n),
                    _ => {}
                }
            }
            if live && hop != t.hop0 {
                *n += 1;
            }
            live
        }
        let mut n = 0;
        walk(self, self.hop0, 0, &mut n);
        n
    }

    /// Spare hops kept. O(1): tests and debugfs.
    pub(crate) fn spare_count(&self) -> usize {
        self.spare_len
    }

    /// Which MMU the tree is for.
    pub(crate) fn mmu_kind(&self) -> MmuKind {
        self.kind
    }

    /// The ASID the tree translates for.
    pub(crate) fn asid(&self) -> u32 {
        self.asid
    }

    /// Keep `hops` until [`Self::release_stale`] gets a covering proof
    /// (quarantine). O(k log n), no allocation.
    pub(crate) fn park(&mut self, hops: DetachedHops) {
        self.stale.absorb(hops);
    }

    /// What an invalidation must cover to release the parked hops.
    pub(crate) fn stale_area(&self) -> Option<MmuArea> {
        self.stale.area()
    }

    /// Parked hops. O(n): tests and debugfs.
    pub(crate) fn stale_count(&self) -> usize {
        self.stale.len()
    }

    /// Give the parked hops back if `proof` covers them; returns how many.
    pub(crate) fn release_stale(&mut self, mem: &mut dyn HopMemory, proof: &Invalidated) -> usize {
        let stale = core::mem::replace(&mut self.stale, DetachedHops::new());
        match self.recycle(mem, stale, proof) {
            Ok(n) => n,
            Err(kept) => {
                self.stale = kept;
                0
            }
        }
    }

    /// Physical address of hop 0.
    pub(crate) fn hop0(&self) -> u64 {
        self.hop0
    }

    /// Hops in the tree besides hop 0.
    pub(crate) fn hop_count(&self) -> usize {
        self.hops.iter().count().saturating_sub(1)
    }

    /// The remembered chain to the leaf hop of `va` at level `leaf`, if the
    /// last walk went there. O(1).
    fn cached_path(&self, va: u64, leaf: usize) -> Option<[u64; 6]> {
        let w = self.last_walk?;
        (w.leaf == leaf && Some(w.key) == walk_key(&self.geo, va, leaf)).then_some(w.path)
    }

    /// Remember `path` as the chain to the leaf hop of `va` at `leaf`. O(1).
    fn remember(&mut self, va: u64, leaf: usize, path: [u64; 6]) {
        self.last_walk = walk_key(&self.geo, va, leaf)
            .filter(|_| self.remember_walks)
            .map(|key| LastWalk { leaf, key, path });
    }

    /// Remember walks or not (the building-block benchmark measures both).
    #[cfg(CONFIG_KUNIT)]
    pub(crate) fn set_remember_walks(&mut self, on: bool) {
        self.remember_walks = on;
        self.last_walk = None;
    }

    fn entry(&self, hop: u64, idx: u64) -> Option<u64> {
        self.hops
            .get(&hop)?
            .shadow
            .get(usize::try_from(idx).ok()?)
            .copied()
    }

    /// Write one PTE: real memory first, then the shadow.
    fn write(&mut self, mem: &mut dyn HopMemory, hop: u64, idx: u64, value: u64) -> Result {
        mem.write_pte(hop + idx * 8, value)?;
        let slot = self
            .hops
            .get_mut(&hop)
            .and_then(|h| h.shadow.get_mut(usize::try_from(idx).ok()?))
            .ok_or(EINVAL)?;
        *slot = value;
        Ok(())
    }

    fn adjust(&mut self, hop: u64, delta: i32) {
        if hop == self.hop0 {
            return;
        }
        let mut revived = false;
        if let Some(h) = self.hops.get_mut(&hop) {
            revived = h.num_ptes == 0 && delta > 0;
            h.num_ptes = h.num_ptes.saturating_add_signed(delta);
        }
        if revived {
            self.unidle(hop);
        }
    }

    /// Take a hop out of the tree and zero what is non-zero in its real
    /// memory: kept as a spare if there is room, else given back at once.
    /// Only for new hops on a failed map, which were never linked (the
    /// hardware cannot have walked them).
    fn release_hop(&mut self, mem: &mut dyn HopMemory, hop: u64) {
        self.last_walk = None;
        let Some(node) = self.hops.remove_node(&hop) else {
            return;
        };
        if self.spare_len >= SPARE_HOPS || self.torn_down {
            scrub_and_free(mem, hop, &node.to_key_value().1);
            return;
        }
        // Among the spares once zero again in memory and shadow.
        self.spare.insert(node);
        if self
            .spare
            .get_mut(&hop)
            .is_some_and(|h| zero_hop(mem, hop, h))
        {
            self.spare_len += 1;
        } else if let Some(n) = self.spare.remove_node(&hop) {
            scrub_and_free(mem, hop, &n.to_key_value().1);
        }
    }

    /// Map the page at `pa` at `va` with its leaf at hop `leaf` (`map` of
    /// mmu_v2.c:130-221). `EINVAL` if `va` is already mapped (also by a larger
    /// page), `ENOMEM` when out of hops; on any error the tree is unchanged.
    /// O(hops) plus one tree lookup per level.
    pub(crate) fn map(&mut self, mem: &mut dyn HopMemory, va: u64, pa: u64, leaf: usize) -> Result {
        if leaf >= self.geo.num_hops {
            return Err(EINVAL);
        }
        let (path, new_from) = match self.cached_path(va, leaf) {
            // Every hop of the chain is linked: nothing to allocate.
            Some(path) => (path, None),
            None => self.path_to_leaf(mem, va, leaf)?,
        };
        let leaf_hop = *path.get(leaf).ok_or(EINVAL)?;
        let leaf_idx = self.geo.pte_index(leaf, va).ok_or(EINVAL)?;
        if new_from.is_none() && self.entry(leaf_hop, leaf_idx) != Some(0) {
            return Err(EINVAL);
        }
        self.write_bottom_up(mem, va, pa, leaf, &path, new_from)?;
        self.adjust(leaf_hop, 1);
        if let Some(first) = new_from {
            for lvl in first..=leaf {
                let parent = *path.get(lvl - 1).ok_or(EINVAL)?;
                self.adjust(parent, 1);
            }
        }
        self.remember(va, leaf, path);
        Ok(())
    }

    /// The hops from hop 0 down to the leaf hop of `va` at level `leaf`:
    /// existing ones followed, missing ones allocated (in the tree, not
    /// linked yet). Returns the path and the first level whose hop is new,
    /// if any. On failure the new hops are given back. O(levels).
    fn path_to_leaf(
        &mut self,
        mem: &mut dyn HopMemory,
        va: u64,
        leaf: usize,
    ) -> Result<([u64; 6], Option<usize>)> {
        let mut path = [0u64; 6];
        *path.get_mut(0).ok_or(EINVAL)? = self.hop0;
        // The first level whose hop is new (not yet linked), if any.
        let mut new_from = None;
        for lvl in 0..leaf {
            let idx = self.geo.pte_index(lvl, va).ok_or(EINVAL)?;
            let here = *path.get(lvl).ok_or(EINVAL)?;
            let next = if new_from.is_some() {
                None
            } else {
                match Pte::decode(self.entry(here, idx).ok_or(EINVAL)?) {
                    Pte::Hop(next) => Some(next),
                    Pte::Page(_) => return Err(EINVAL),
                    Pte::None => {
                        new_from = Some(lvl + 1);
                        None
                    }
                }
            };
            let next = match next {
                Some(n) => n,
                None => match self.new_hop(mem) {
                    Ok(n) => n,
                    Err(e) => {
                        self.drop_new_hops(mem, &path, new_from, lvl + 1);
                        return Err(e);
                    }
                },
            };
            *path.get_mut(lvl + 1).ok_or(EINVAL)? = next;
        }
        Ok((path, new_from))
    }

    /// Write the leaf PTE of `va` (-> `pa`) and then every new hop's entry in
    /// its parent, bottom-up: the link of the topmost new hop into the
    /// existing tree comes last. On a failed write, what was written is
    /// cleared again in reverse and the new hops are given back. O(levels),
    /// no allocation (at most one write per level is remembered).
    fn write_bottom_up(
        &mut self,
        mem: &mut dyn HopMemory,
        va: u64,
        pa: u64,
        leaf: usize,
        path: &[u64; 6],
        new_from: Option<usize>,
    ) -> Result {
        let leaf_hop = *path.get(leaf).ok_or(EINVAL)?;
        let leaf_idx = self.geo.pte_index(leaf, va).ok_or(EINVAL)?;
        let mut written = [(0u64, 0u64); 6];
        let mut n = 0usize;
        let mut result = self.write(mem, leaf_hop, leaf_idx, Pte::Page(pa).encode());
        if result.is_ok() {
            if let Some(w) = written.get_mut(n) {
                *w = (leaf_hop, leaf_idx);
                n += 1;
            }
            if let Some(first) = new_from {
                for lvl in (first..=leaf).rev() {
                    let (Some(&parent), Some(&child), Some(idx)) = (
                        path.get(lvl - 1),
                        path.get(lvl),
                        self.geo.pte_index(lvl - 1, va),
                    ) else {
                        result = Err(EINVAL);
                        break;
                    };
                    result = self.write(mem, parent, idx, Pte::Hop(child).encode());
                    if result.is_err() {
                        break;
                    }
                    if let Some(w) = written.get_mut(n) {
                        *w = (parent, idx);
                        n += 1;
                    }
                }
            }
        }
        if let Err(e) = result {
            // Undo in reverse; the new hops are then unreachable and released.
            for &(hop, idx) in written.iter().take(n).rev() {
                if self.write(mem, hop, idx, 0).is_err() {
                    hl_err!(
                        "MMU: map rollback could not clear a PTE at {:#x}\n",
                        hop + idx * 8
                    );
                }
            }
            self.drop_new_hops(mem, path, new_from, leaf + 1);
            return Err(e);
        }
        Ok(())
    }

    /// A zeroed hop in the tree (not linked yet): a spare if there is one
    /// (O(log k), no allocation), otherwise a newly allocated one.
    fn new_hop(&mut self, mem: &mut dyn HopMemory) -> Result<u64> {
        if let Some(c) = self.spare.cursor_front_mut() {
            let phys = *c.current().0;
            let (_, node) = c.remove_current();
            self.spare_len = self.spare_len.saturating_sub(1);
            self.hops.insert(node);
            return Ok(phys);
        }
        // Charged to the caller's memory cgroup, as the hop slot it shadows.
        let shadow = KBox::new([0u64; HOP_PTES as usize], GFP_KERNEL_ACCOUNT)?;
        let node = RBTreeNodeReservation::new(GFP_KERNEL_ACCOUNT)?;
        let phys = mem.alloc_hop()?;
        self.hops.insert(node.into_node(
            phys,
            Hop {
                shadow,
                num_ptes: 0,
            },
        ));
        Ok(phys)
    }

    /// Release the new hops `path[first..end]` after a failed map.
    fn drop_new_hops(
        &mut self,
        mem: &mut dyn HopMemory,
        path: &[u64; 6],
        first: Option<usize>,
        end: usize,
    ) {
        if let Some(first) = first {
            for lvl in first..end {
                if let Some(&hop) = path.get(lvl) {
                    self.release_hop(mem, hop);
                }
            }
        }
    }

    /// Unmap the page at `va` (`unmap` of mmu_v2.c:58-128): clear its leaf, then
    /// unlink every hop that became empty, bottom-up, into `detached` (they go
    /// back to the pool after an invalidation covering `va`), except that the
    /// first emptied hop stays linked while the idle list has room (upstream
    /// frees every emptied hop, and the next MAP there allocates, zeroes and
    /// links a new chain). Returns the
    /// leaf's physical address. `EINVAL` if nothing is mapped there; a failed
    /// PTE write leaves the tree as it was (or, past the leaf, an empty hop
    /// that stays linked until teardown). O(hops) tree lookups, no allocation.
    pub(crate) fn unmap(
        &mut self,
        mem: &mut dyn HopMemory,
        va: u64,
        detached: &mut DetachedHops,
    ) -> Result<u64> {
        let (path, leaf, pa) = match self.cached_leaf(va) {
            Some(found) => found,
            None => self.walk_to_page(va)?,
        };
        let (leaf_hop, leaf_idx) = *path.get(leaf).ok_or(EINVAL)?;
        self.write(mem, leaf_hop, leaf_idx, 0)?;
        self.adjust(leaf_hop, -1);
        let mut lvl = leaf;
        while lvl > 0 {
            let (h, _) = *path.get(lvl).ok_or(EINVAL)?;
            if self.hops.get(&h).is_none_or(|x| x.num_ptes != 0) || self.keep_idle(h) {
                break;
            }
            // A link goes: the remembered chain may run through it.
            self.last_walk = None;
            let (parent, idx) = *path.get(lvl - 1).ok_or(EINVAL)?;
            if self.write(mem, parent, idx, 0).is_err() {
                break;
            }
            if let Some(node) = self.hops.remove_node(&h) {
                detached.detach(node, MmuArea::new(self.kind, self.asid, va, 1));
            }
            self.adjust(parent, -1);
            lvl -= 1;
        }
        if lvl == leaf {
            // No link cleared: the chain stays for the next map there.
            let mut hops = [0u64; 6];
            for (h, (hop, _)) in hops.iter_mut().zip(path.iter()).take(leaf + 1) {
                *h = *hop;
            }
            self.remember(va, leaf, hops);
        }
        Ok(pa)
    }

    /// The walk of [`Self::unmap`] from the remembered chain, if the last
    /// walk went to the leaf hop of `va` and `va` is a page there: the
    /// `(hop, index)` of each level, the leaf level and the page. O(1) tree
    /// lookups.
    fn cached_leaf(&self, va: u64) -> Option<FoundPage> {
        let w = self.last_walk?;
        if Some(w.key) != walk_key(&self.geo, va, w.leaf) {
            return None;
        }
        let mut out = [(0u64, 0u64); 6];
        for (lvl, (o, hop)) in out.iter_mut().zip(w.path).enumerate().take(w.leaf + 1) {
            *o = (hop, self.geo.pte_index(lvl, va)?);
        }
        let (leaf_hop, leaf_idx) = *out.get(w.leaf)?;
        match Pte::decode(self.entry(leaf_hop, leaf_idx)?) {
            Pte::Page(pa) => Some((out, w.leaf, pa)),
            _ => None,
        }
    }

    /// Walk from hop 0 to the page mapping `va`: the `(hop, index)` of each
    /// level, the leaf level and the page. `EINVAL` if nothing maps `va`.
    /// O(levels) tree lookups.
    fn walk_to_page(&self, va: u64) -> Result<FoundPage> {
        let mut path = [(0u64, 0u64); 6];
        let mut hop = self.hop0;
        for lvl in 0..self.geo.num_hops {
            let idx = self.geo.pte_index(lvl, va).ok_or(EINVAL)?;
            *path.get_mut(lvl).ok_or(EINVAL)? = (hop, idx);
            match Pte::decode(self.entry(hop, idx).ok_or(EINVAL)?) {
                Pte::None => return Err(EINVAL),
                Pte::Page(pa) => return Ok((path, lvl, pa)),
                Pte::Hop(next) => hop = next,
            }
        }
        Err(EINVAL)
    }

    /// The leaf hop of an existing chain for `va` at level `leaf`, and the
    /// index of `va` in it; `EINVAL` if a level on the way is not a hop.
    /// O(leaf) tree lookups.
    fn leaf_of(&self, va: u64, leaf: usize) -> Result<(u64, usize)> {
        let mut hop = self.hop0;
        for lvl in 0..leaf {
            let idx = self.geo.pte_index(lvl, va).ok_or(EINVAL)?;
            match Pte::decode(self.entry(hop, idx).ok_or(EINVAL)?) {
                Pte::Hop(next) => hop = next,
                _ => return Err(EINVAL),
            }
        }
        let idx = self.geo.pte_index(leaf, va).ok_or(EINVAL)?;
        Ok((hop, usize::try_from(idx).map_err(|_| EINVAL)?))
    }

    /// Map the pages that follow the mapped page at `va` in its leaf hop (level
    /// `leaf`): the k-th next entry gets `pa_of(k)` (k from 0), for as many
    /// entries as the hop has left, at most `max`. Returns how many were
    /// mapped. Every one of those entries must be empty (`EINVAL` otherwise);
    /// on any error nothing changed.
    ///
    /// The shadow is filled first and the real memory written in one
    /// [`HopMemory::write_ptes`]; a failed write is undone in both (the
    /// entries were empty). Together with [`PageTable::map`] for the first page
    /// of each hop, a MAP of n pages costs n PTE writes but only n / 512 walks
    /// and hop lookups, instead of a walk, four tree lookups and a lock per
    /// page. O(log h + k).
    pub(crate) fn map_following(
        &mut self,
        mem: &mut dyn HopMemory,
        va: u64,
        leaf: usize,
        max: u64,
        pa_of: &mut dyn FnMut(u64) -> Option<u64>,
    ) -> Result<u64> {
        if max == 0 {
            // A run of one page (a 4 KiB MAP): no second walk.
            return Ok(0);
        }
        let (hop, idx) = self.leaf_of(va, leaf)?;
        let room = (HOP_PTES as usize).saturating_sub(idx + 1);
        let k = usize::try_from(max).unwrap_or(usize::MAX).min(room);
        if k == 0 {
            return Ok(0);
        }
        let h = self.hops.get_mut(&hop).ok_or(EINVAL)?;
        let run = h.shadow.get_mut(idx + 1..idx + 1 + k).ok_or(EINVAL)?;
        if run.iter().any(|&v| v != 0) {
            return Err(EINVAL);
        }
        for (j, slot) in (0u64..).zip(run.iter_mut()) {
            match pa_of(j) {
                Some(pa) => *slot = Pte::Page(pa).encode(),
                None => {
                    run.fill(0);
                    return Err(EINVAL);
                }
            }
        }
        let addr = hop + (idx as u64 + 1) * 8;
        if let Err(e) = mem.write_ptes(addr, run) {
            run.fill(0);
            if mem
                .write_ptes(addr, ZERO_PTES.get(..k).ok_or(EINVAL)?)
                .is_err()
            {
                hl_err!("MMU: map rollback could not clear PTEs at {:#x}\n", addr);
            }
            return Err(e);
        }
        h.num_ptes = h.num_ptes.saturating_add(k as u32);
        Ok(k as u64)
    }

    /// Unmap the pages that follow the mapped page at `va` in its leaf hop, up
    /// to `max` of them, leaving `va`'s own entry (the caller unmaps it with
    /// [`PageTable::unmap`], which frees the hop chain once it is empty, so
    /// this never empties a hop). Only when `va` is mapped by a leaf of `span`
    /// bytes and every one of those entries is a page; otherwise `Ok(0)` and
    /// nothing changed (the caller goes page by page). A failed write is undone
    /// from the shadow. O(log h + k).
    pub(crate) fn unmap_following(
        &mut self,
        mem: &mut dyn HopMemory,
        va: u64,
        span: u64,
        max: u64,
    ) -> Result<u64> {
        let Some(leaf) = self.geo.leaf_hop(span).filter(|_| max > 0) else {
            return Ok(0);
        };
        let Ok((hop, idx)) = self.leaf_of(va, leaf) else {
            return Ok(0);
        };
        let room = (HOP_PTES as usize).saturating_sub(idx + 1);
        let k = usize::try_from(max).unwrap_or(usize::MAX).min(room);
        let h = self.hops.get_mut(&hop).ok_or(EINVAL)?;
        let Some(run) = h.shadow.get_mut(idx..idx + 1 + k) else {
            return Ok(0);
        };
        if k == 0 || run.iter().any(|&v| !matches!(Pte::decode(v), Pte::Page(_))) {
            return Ok(0);
        }
        let Some(following) = run.get_mut(1..) else {
            return Ok(0);
        };
        let addr = hop + (idx as u64 + 1) * 8;
        if let Err(e) = mem.write_ptes(addr, ZERO_PTES.get(..k).ok_or(EINVAL)?) {
            if mem.write_ptes(addr, following).is_err() {
                hl_err!(
                    "MMU: unmap rollback could not restore PTEs at {:#x}\n",
                    addr
                );
            }
            return Err(e);
        }
        following.fill(0);
        h.num_ptes = h.num_ptes.saturating_sub(k as u32);
        Ok(k as u64)
    }

    /// Clear hop 0, then detach every other hop into `detached` (context
    /// teardown, `hl_mmu_ctx_fini`): they and the parked hops go back once an
    /// invalidation of everything of this MMU succeeded. Returns how many hops
    /// were still linked (upstream reports them with `dev_err`) and whether
    /// every entry of hop 0 could be cleared; if not, nothing is detached
    /// (the hardware could still walk into those hops).
    ///
    /// Cannot fail half-way and allocates nothing: hops leave the tree
    /// through a cursor. O(h) in the hops, yielding every 512.
    pub(crate) fn teardown(
        &mut self,
        mem: &mut dyn HopMemory,
        detached: &mut DetachedHops,
    ) -> (usize, bool) {
        let hop0 = self.hop0;
        self.last_walk = None;
        // Unlinked and invalidated already: back to the pool at once.
        self.torn_down = true;
        self.idle_len = 0;
        self.drain_spares(mem);
        let mut cleared = true;
        for i in 0..HOP_PTES {
            if self.entry(hop0, i).is_some_and(|v| v != 0) && self.write(mem, hop0, i, 0).is_err() {
                hl_err!("MMU: teardown could not clear entry {} of hop 0\n", i);
                cleared = false;
            }
        }
        detached.absorb(core::mem::replace(&mut self.stale, DetachedHops::new()));
        if !cleared {
            return (self.hop_count(), false);
        }
        let everything = MmuArea::everything(self.kind, self.asid);
        let mut left = 0;
        let mut cursor = self.hops.cursor_front_mut();
        while let Some(c) = cursor {
            if *c.current().0 == hop0 {
                cursor = c.move_next();
                continue;
            }
            let (next, node) = c.remove_current();
            detached.detach(node, everything);
            left += 1;
            if left % HOP_PTES as usize == 0 {
                crate::ffi::sched::cond_resched();
            }
            cursor = next;
        }
        (left, true)
    }
}

#[kunit_tests(hlrs_page_table)]
mod tests {
    use super::*;
    use crate::mmu::hop_pool::{DrHops, HrHops};
    use crate::mmu::{device_mmu::TestMmu, invalidate::invalidate_all, walk::translate};

    /// Invalidate everything of `kind` and give the detached hops back.
    fn flush(
        d: &TestMmu,
        mem: &mut dyn HopMemory,
        det: DetachedHops,
        kind: MmuKind,
    ) -> Result<usize> {
        let proof = invalidate_all(d.backend(), kind)?;
        det.release(mem, &proof).map_err(|_| EINVAL)
    }

    const GIB: u64 = 1 << 30;

    /// The DMMU hop memory of `d`.
    fn dr_mem(d: &TestMmu) -> DrHops<'_> {
        DrHops {
            pool: &d.mmu.dr_hops,
            backend: d.backend(),
        }
    }

    #[test]
    fn map_unmap_round_trip_with_the_oracle() -> Result {
        let (d, mut t) = setup()?;
        let mut mem = dr_mem(&d);
        let free0 = d.mmu.dr_hops.lock().free_slots();
        let base_va = 0x1001_0020_0000_0000u64;
        for i in 0..8u64 {
            t.map(
                &mut mem,
                base_va + i * GIB,
                0x1001_0000_4000_0000 + i * GIB,
                3,
            )?;
        }
        // One hop per level below hop 0 for neighbouring 1 GiB leaves.
        assert_eq!(t.hop_count(), 3);
        assert_eq!(d.mmu.dr_hops.lock().free_slots(), free0 - 3);
        let read = |a: u64| d.backend().read_pte(a);
        for i in 0..8u64 {
            for off in [0u64, 4096, GIB - 1] {
                let tr = translate(
                    &MmuGeometry::DMMU,
                    &read,
                    t.hop0(),
                    base_va + i * GIB + off,
                    None,
                );
                assert_eq!(tr.map(|x| x.pa), Ok(0x1001_0000_4000_0000 + i * GIB + off));
            }
        }
        // Mapping an occupied VA fails and changes nothing.
        assert_eq!(
            t.map(&mut mem, base_va, 0x1001_0000_4000_0000, 3),
            Err(EINVAL)
        );
        assert_eq!(t.hop_count(), 3);
        let mut det = DetachedHops::new();
        for i in 0..8u64 {
            assert_eq!(
                t.unmap(&mut mem, base_va + i * GIB, &mut det)?,
                0x1001_0000_4000_0000 + i * GIB
            );
        }
        // Every hop left the tree when its count reached zero, and went back
        // to the pool after the invalidation.
        assert_eq!(t.hop_count(), 0);
        assert_eq!(det.len(), 3);
        assert_eq!(d.mmu.dr_hops.lock().free_slots(), free0 - 3);
        assert_eq!(flush(&d, &mut mem, det, MmuKind::Dram)?, 3);
        assert_eq!(d.mmu.dr_hops.lock().free_slots(), free0);
        let mut det = DetachedHops::new();
        assert_eq!(t.unmap(&mut mem, base_va, &mut det), Err(EINVAL));
        let tr = translate(&MmuGeometry::DMMU, &read, t.hop0(), base_va, None);
        assert_eq!(
            tr.map(|x| x.pa),
            Err(crate::mmu::walk::WalkFault::NotPresent(0))
        );
        Ok(())
    }

    #[test]
    fn distant_vas_use_separate_hops_and_free_them() -> Result {
        let (d, mut t) = setup()?;
        let mut mem = dr_mem(&d);
        let a = 0x1001_0020_0000_0000u64;
        let b = a + (512 * GIB); // another hop-2 entry
        let c = a + (1u64 << 48); // another hop-1 entry
        for va in [a, b, c] {
            t.map(&mut mem, va, 0x1001_0000_4000_0000, 3)?;
        }
        // hop 1; two hop 2s (a and b share one); three hop 3s.
        assert_eq!(t.hop_count(), 1 + 2 + 3);
        let mut det = DetachedHops::new();
        t.unmap(&mut mem, b, &mut det)?;
        assert_eq!(t.hop_count(), 1 + 2 + 2);
        t.unmap(&mut mem, c, &mut det)?;
        assert_eq!(t.hop_count(), 1 + 1 + 1);
        t.unmap(&mut mem, a, &mut det)?;
        assert_eq!(t.hop_count(), 0);
        assert_eq!(flush(&d, &mut mem, det, MmuKind::Dram)?, 6);
        Ok(())
    }

    #[test]
    fn failed_pte_writes_leave_nothing_behind() -> Result {
        let (d, mut t) = setup()?;
        let base_va = 0x1001_0020_0000_0000u64;
        let read = |a: u64| d.backend().read_pte(a);
        // A fresh map writes 4 PTEs (leaf + 3 links): fail each one in turn.
        for k in 1..=4u64 {
            let mut mem = dr_mem(&d);
            // The new hops go back (to the tree's spares or the pool).
            let free0 = d.mmu.dr_hops.lock().free_slots() + t.spare_count();
            d.sim.inject_pte_write_failure(k);
            assert_eq!(t.map(&mut mem, base_va, 0x1001_0000_4000_0000, 3), Err(EIO));
            d.sim.inject_pte_write_failure(0);
            assert_eq!(t.hop_count(), 0);
            assert_eq!(d.mmu.dr_hops.lock().free_slots() + t.spare_count(), free0);
            let tr = translate(&MmuGeometry::DMMU, &read, t.hop0(), base_va, None);
            assert!(tr.is_err());
        }
        // And the same map then works.
        let mut mem = dr_mem(&d);
        t.map(&mut mem, base_va, 0x1001_0000_4000_0000, 3)?;
        let mut det = DetachedHops::new();
        t.unmap(&mut mem, base_va, &mut det)?;
        flush(&d, &mut mem, det, MmuKind::Dram)?;
        Ok(())
    }

    #[test]
    fn emptied_hops_are_reused_only_after_an_invalidation() -> Result {
        let (d, mut t) = setup()?;
        let mut mem = dr_mem(&d);
        let free0 = d.mmu.dr_hops.lock().free_slots();
        let va = 0x1001_0020_0000_0000u64;
        let pa = 0x1001_0000_4000_0000u64;
        t.map(&mut mem, va, pa, 3)?;
        let mut det = DetachedHops::new();
        t.unmap(&mut mem, va, &mut det)?;
        // The three emptied hops are out of the tree but not in the pool.
        assert_eq!((t.hop_count(), det.len()), (0, 3));
        assert_eq!(d.mmu.dr_hops.lock().free_slots(), free0 - 3);
        // A failed invalidation, or one of another range or MMU, keeps them.
        d.sim.inject_invalidation_failure();
        assert!(invalidate_all(d.backend(), MmuKind::Dram).is_err());
        let elsewhere = MmuArea::new(MmuKind::Dram, 1, va + GIB, GIB);
        let p = crate::mmu::invalidate::invalidate_range(d.backend(), elsewhere)?;
        let det = det.release(&mut mem, &p).err().ok_or(EINVAL)?;
        let p = invalidate_all(d.backend(), MmuKind::Host)?;
        let det = det.release(&mut mem, &p).err().ok_or(EINVAL)?;
        // A new map meanwhile gets other hops.
        t.map(&mut mem, va, pa, 3)?;
        assert_eq!(d.mmu.dr_hops.lock().free_slots(), free0 - 6);
        // Parked in the tree (quarantine), they stay out of the pool through
        // the tree's teardown, until the teardown's own invalidation.
        t.park(det);
        assert_eq!(t.stale_count(), 3);
        let p = invalidate_all(d.backend(), MmuKind::Host)?;
        assert_eq!(t.release_stale(&mut mem, &p), 0);
        let mut all = DetachedHops::new();
        assert_eq!(t.teardown(&mut mem, &mut all), (3, true));
        assert_eq!((t.stale_count(), all.len()), (0, 6));
        assert_eq!(d.mmu.dr_hops.lock().free_slots(), free0 - 6);
        // A range invalidation does not cover a whole teardown.
        let p = crate::mmu::invalidate::invalidate_range(
            d.backend(),
            MmuArea::new(MmuKind::Dram, 1, va, GIB),
        )?;
        let all = all.release(&mut mem, &p).err().ok_or(EINVAL)?;
        assert_eq!(flush(&d, &mut mem, all, MmuKind::Dram)?, 6);
        assert_eq!(d.mmu.dr_hops.lock().free_slots(), free0);
        Ok(())
    }

    #[test]
    fn recycled_hops_are_spares_for_the_next_map_until_teardown() -> Result {
        let (d, mut t) = setup()?;
        let mut mem = dr_mem(&d);
        let free0 = d.mmu.dr_hops.lock().free_slots();
        let va = 0x1001_0020_0000_0000u64;
        let pa = 0x1001_0000_4000_0000u64;
        t.map(&mut mem, va, pa, 3)?;
        let mut det = DetachedHops::new();
        t.unmap(&mut mem, va, &mut det)?;
        // Not covered: nothing moves.
        let p = invalidate_all(d.backend(), MmuKind::Host)?;
        let det = t.recycle(&mut mem, det, &p).err().ok_or(EINVAL)?;
        assert_eq!(t.spare_count(), 0);
        let p = invalidate_all(d.backend(), MmuKind::Dram)?;
        assert_eq!(t.recycle(&mut mem, det, &p).map_err(|_| EINVAL)?, 3);
        // Kept by the tree, out of the pool, all-zero in device memory.
        assert_eq!(t.spare_count(), 3);
        assert_eq!(d.mmu.dr_hops.lock().free_slots(), free0 - 3);
        // The next map (elsewhere) takes them: no slot from the pool.
        let va2 = va + 7 * (1u64 << 48);
        t.map(&mut mem, va2, pa, 3)?;
        assert_eq!((t.spare_count(), t.hop_count()), (0, 3));
        assert_eq!(d.mmu.dr_hops.lock().free_slots(), free0 - 3);
        let read = |a: u64| d.backend().read_pte(a);
        let w =
            translate(&MmuGeometry::DMMU, &read, t.hop0(), va2 + 5, None).map_err(|_| EINVAL)?;
        assert_eq!(w.pa, pa + 5);
        assert!(translate(&MmuGeometry::DMMU, &read, t.hop0(), va, None).is_err());
        // At most SPARE_HOPS are kept; the rest go back to the pool.
        let mut det = DetachedHops::new();
        for i in 0..4u64 {
            t.map(&mut mem, va + i * (1u64 << 48), pa, 3)?;
        }
        for i in 0..4u64 {
            t.unmap(&mut mem, va + i * (1u64 << 48), &mut det)?;
        }
        t.unmap(&mut mem, va2, &mut det)?;
        assert_eq!(det.len(), 11);
        let p = invalidate_all(d.backend(), MmuKind::Dram)?;
        assert_eq!(t.recycle(&mut mem, det, &p).map_err(|_| EINVAL)?, 11);
        assert_eq!(t.spare_count(), SPARE_HOPS);
        assert_eq!(d.mmu.dr_hops.lock().free_slots(), free0 - SPARE_HOPS);
        // Teardown gives the spares back, and keeps none afterwards.
        let mut all = DetachedHops::new();
        assert_eq!(t.teardown(&mut mem, &mut all), (0, true));
        assert_eq!(t.spare_count(), 0);
        assert_eq!(d.mmu.dr_hops.lock().free_slots(), free0);
        Ok(())
    }

    #[test]
    fn the_remembered_walk_never_outlives_its_hops() -> Result {
        let (d, mut t) = setup()?;
        let mut mem = dr_mem(&d);
        let read = |a: u64| d.backend().read_pte(a);
        let at = |t: &PageTable, va: u64| {
            translate(&MmuGeometry::DMMU, &read, t.hop0(), va, None)
                .ok()
                .map(|w| w.pa)
        };
        let va = 0x1001_0020_0000_0000u64;
        let pa = 0x1001_0000_4000_0000u64;
        // Two pages under one leaf hop: the second map and both unmaps go
        // by the remembered chain.
        t.map(&mut mem, va, pa, 3)?;
        t.map(&mut mem, va + GIB, pa + GIB, 3)?;
        assert_eq!(
            (at(&t, va + 1), at(&t, va + GIB + 1)),
            (Some(pa + 1), Some(pa + GIB + 1))
        );
        // A second map of a mapped page is refused by that path too.
        assert_eq!(t.map(&mut mem, va + GIB, pa, 3), Err(EINVAL));
        let mut det = DetachedHops::new();
        assert_eq!(t.unmap(&mut mem, va + GIB, &mut det)?, pa + GIB);
        assert_eq!(t.unmap(&mut mem, va + GIB, &mut det), Err(EINVAL));
        // The last page: the chain is detached (no idle hops here), and
        // the invalidated hops become spares.
        assert_eq!(t.unmap(&mut mem, va, &mut det)?, pa);
        assert_eq!(flush_into_spares(&d, &mut t, &mut mem, det)?, 3);
        // Another chain is built from the same hop slots...
        let va2 = va + 5 * (1u64 << 48);
        t.map(&mut mem, va2, pa, 3)?;
        // ...so a map at the first VA must walk again and build its own.
        t.map(&mut mem, va, pa + GIB, 3)?;
        assert_eq!(
            (at(&t, va2 + 7), at(&t, va + 7)),
            (Some(pa + 7), Some(pa + GIB + 7))
        );
        assert_eq!(at(&t, va2 + GIB), None);
        let mut det = DetachedHops::new();
        t.unmap(&mut mem, va, &mut det)?;
        t.unmap(&mut mem, va2, &mut det)?;
        assert_eq!((at(&t, va), at(&t, va2)), (None, None));
        assert_eq!(t.hop_count(), 0);
        flush(&d, &mut mem, det, MmuKind::Dram)?;
        Ok(())
    }

    /// Invalidate everything of the DMMU and give `det` back to `t`.
    fn flush_into_spares(
        d: &TestMmu,
        t: &mut PageTable,
        mem: &mut dyn HopMemory,
        det: DetachedHops,
    ) -> Result<usize> {
        let p = invalidate_all(d.backend(), MmuKind::Dram)?;
        t.recycle(mem, det, &p).map_err(|_| EINVAL)
    }

    #[test]
    fn emptied_hops_stay_linked_for_the_next_map_up_to_the_limit() -> Result {
        let (d, mut t) = setup()?;
        t.set_idle_limit(2);
        let mut mem = dr_mem(&d);
        let read = |a: u64| d.backend().read_pte(a);
        let va = 0x1001_0020_0000_0000u64;
        let pa = 0x1001_0000_4000_0000u64;
        let before = d.sim.pte_writes();
        t.map(&mut mem, va, pa, 3)?;
        assert_eq!(d.sim.pte_writes() - before, 4);
        let mut det = DetachedHops::new();
        let before = d.sim.pte_writes();
        t.unmap(&mut mem, va, &mut det)?;
        // Only the leaf PTE is cleared; its hop stays linked, empty.
        assert_eq!(d.sim.pte_writes() - before, 1);
        assert_eq!(
            (det.len(), t.idle_count(), t.hop_count(), t.hops_in_use()),
            (0, 1, 3, 0)
        );
        assert!(translate(&MmuGeometry::DMMU, &read, t.hop0(), va, None).is_err());
        // The next map there writes one PTE and takes the hop off the list.
        let before = d.sim.pte_writes();
        t.map(&mut mem, va + GIB, pa, 3)?;
        assert_eq!(d.sim.pte_writes() - before, 1);
        assert_eq!((t.idle_count(), t.hops_in_use()), (0, 3));
        let w = translate(&MmuGeometry::DMMU, &read, t.hop0(), va + GIB + 7, None)
            .map_err(|_| EINVAL)?;
        assert_eq!(w.pa, pa + 7);
        t.unmap(&mut mem, va + GIB, &mut det)?;
        // Past the limit, emptied hops are detached as upstream frees them.
        for i in 1..=3u64 {
            t.map(&mut mem, va + (i << 48), pa, 3)?;
        }
        for i in 1..=3u64 {
            t.unmap(&mut mem, va + (i << 48), &mut det)?;
        }
        assert_eq!(t.idle_count(), 2);
        // Two chains of hop 2 + hop 3 each.
        assert_eq!(det.len(), 4);
        assert_eq!(t.hops_in_use(), 0);
        // Teardown takes the linked empty hops with the rest.
        let mut all = DetachedHops::new();
        assert_eq!(t.teardown(&mut mem, &mut all), (5, true));
        assert_eq!(t.idle_count(), 0);
        all.absorb(det);
        flush(&d, &mut mem, all, MmuKind::Dram)?;
        Ok(())
    }

    #[test]
    fn out_of_hops_is_enomem_without_leaks() -> Result {
        let (d, mut t) = setup()?;
        let mut mem = dr_mem(&d);
        // Use up all hop slots but two.
        let mut taken = KVec::new();
        while d.mmu.dr_hops.lock().free_slots() > 2 {
            taken.push(d.mmu.dr_hops.lock().alloc().ok_or(ENOMEM)?, GFP_KERNEL)?;
        }
        assert_eq!(
            t.map(&mut mem, 0x1001_0020_0000_0000, 0x1001_0000_4000_0000, 3),
            Err(ENOMEM)
        );
        assert_eq!(t.hop_count(), 0);
        assert_eq!(d.mmu.dr_hops.lock().free_slots() + t.spare_count(), 2);
        for h in taken.iter() {
            d.mmu.dr_hops.lock().free(*h);
        }
        Ok(())
    }

    #[test]
    fn teardown_frees_hops_left_behind() -> Result {
        let (d, mut t) = setup()?;
        let mut mem = dr_mem(&d);
        let free0 = d.mmu.dr_hops.lock().free_slots();
        t.map(&mut mem, 0x1001_0020_0000_0000, 0x1001_0000_4000_0000, 3)?;
        t.map(&mut mem, 0x1002_0020_0000_0000, 0x1001_0000_4000_0000, 3)?;
        let mut det = DetachedHops::new();
        assert_eq!(t.teardown(&mut mem, &mut det), (5, true));
        assert_eq!(t.hop_count(), 0);
        // Hop 0 is clear in device memory before any hop goes back.
        for i in 0..HOP_PTES {
            assert_eq!(d.backend().read_pte(t.hop0() + i * 8)?, 0);
        }
        assert_eq!(d.mmu.dr_hops.lock().free_slots(), free0 - 5);
        assert_eq!(flush(&d, &mut mem, det, MmuKind::Dram)?, 5);
        assert_eq!(d.mmu.dr_hops.lock().free_slots(), free0);
        Ok(())
    }

    #[test]
    fn host_resident_pmmu_with_4k_and_2m_leaves() -> Result {
        let d = TestMmu::new()?;
        let hop0 = d.mmu.hr_hops.lock().hop0(1).ok_or(EINVAL)?;
        let mut mem = HrHops {
            pool: &d.mmu.hr_hops,
        };
        let mut t = PageTable::new(MmuGeometry::PMMU, MmuKind::Host, 1, hop0, &mut mem)?;
        t.set_idle_limit(0);
        let g = MmuGeometry::PMMU;
        let (l4k, l2m) = (
            g.leaf_hop(4096).ok_or(EINVAL)?,
            g.leaf_hop(2 << 20).ok_or(EINVAL)?,
        );
        assert_eq!((l4k, l2m), (5, 4));
        let va = 0xFFF0_0000_0020_0000u64;
        for i in 0..4u64 {
            t.map(&mut mem, va + i * 4096, 0x1234_5000 + i * 0x1000, l4k)?;
        }
        t.map(&mut mem, va + (2 << 20), 0x4000_0000, l2m)?;
        // hop 1..4 shared, one hop 5 for the 4 KiB leaves.
        assert_eq!(t.hop_count(), 5);
        let read = |a: u64| d.mmu.hr_hops.lock().read(a);
        for i in 0..4u64 {
            let tr = translate(&g, &read, hop0, va + i * 4096 + 7, None).map_err(|_| EINVAL)?;
            assert_eq!((tr.pa, tr.leaf), (0x1234_5007 + i * 0x1000, 5));
        }
        let tr =
            translate(&g, &read, hop0, va + (2 << 20) + 0x12_3456, None).map_err(|_| EINVAL)?;
        assert_eq!((tr.pa, tr.leaf), (0x4012_3456, 4));
        // A 4 KiB page inside the 2 MiB leaf is already mapped.
        assert_eq!(
            t.map(&mut mem, va + (2 << 20) + 4096, 0x1000, l4k),
            Err(EINVAL)
        );
        let mut det = DetachedHops::new();
        for i in 0..4u64 {
            t.unmap(&mut mem, va + i * 4096, &mut det)?;
        }
        t.unmap(&mut mem, va + (2 << 20), &mut det)?;
        assert_eq!(t.hop_count(), 0);
        assert_eq!(d.mmu.hr_hops.lock().in_use(), 5);
        flush(&d, &mut mem, det, MmuKind::Host)?;
        assert_eq!(d.mmu.hr_hops.lock().in_use(), 0);
        // Many hop-5 tables at once, all given back (the free list never needs
        // to allocate on release).
        for i in 0..6u64 {
            t.map(&mut mem, va + i * (2 << 20), 0x1000, l4k)?;
        }
        assert_eq!(d.mmu.hr_hops.lock().in_use(), 4 + 6);
        let mut det = DetachedHops::new();
        for i in 0..6u64 {
            t.unmap(&mut mem, va + i * (2 << 20), &mut det)?;
        }
        flush(&d, &mut mem, det, MmuKind::Host)?;
        assert_eq!(d.mmu.hr_hops.lock().in_use(), 0);
        assert!(translate(&g, &read, hop0, va, None).is_err());
        Ok(())
    }

    /// Host-resident hops whose batched writes fail after writing `prefix`
    /// entries (while `fail` is set).
    struct FailingBatches<'a> {
        inner: HrHops<'a>,
        fail: bool,
        prefix: usize,
    }

    impl HopMemory for FailingBatches<'_> {
        fn alloc_hop(&mut self) -> Result<u64> {
            self.inner.alloc_hop()
        }
        fn free_hop(&mut self, phys: u64) {
            self.inner.free_hop(phys)
        }
        fn write_pte(&mut self, addr: u64, value: u64) -> Result {
            self.inner.write_pte(addr, value)
        }
        fn write_ptes(&mut self, addr: u64, values: &[u64]) -> Result {
            if self.fail {
                let n = self.prefix.min(values.len());
                self.inner
                    .write_ptes(addr, values.get(..n).ok_or(EINVAL)?)?;
                return Err(EIO);
            }
            self.inner.write_ptes(addr, values)
        }
    }

    #[test]
    fn batched_runs_map_like_single_pages_and_undo_failed_writes() -> Result {
        let d = TestMmu::new()?;
        let hop0 = d.mmu.hr_hops.lock().hop0(1).ok_or(EINVAL)?;
        let mut mem = FailingBatches {
            inner: HrHops {
                pool: &d.mmu.hr_hops,
            },
            fail: false,
            prefix: 0,
        };
        let mut t = PageTable::new(MmuGeometry::PMMU, MmuKind::Host, 1, hop0, &mut mem)?;
        t.set_idle_limit(0);
        let g = MmuGeometry::PMMU;
        let l4k = g.leaf_hop(4096).ok_or(EINVAL)?;
        let read = |a: u64| d.mmu.hr_hops.lock().read(a);
        let pa = |i: u64| 0x8000_0000 + i * 0x3000;
        let tr = |va: u64| translate(&g, &read, hop0, va, None).map(|x| x.pa).ok();
        // The first page at index 300 of its leaf hop: 211 entries follow it.
        let va = 0xFFF0_0000_0020_0000u64 + 300 * 4096;
        t.map(&mut mem, va, pa(0), l4k)?;
        // A page address missing at k = 5: nothing of the run is mapped.
        let mut gap = |j: u64| (j != 5).then(|| pa(j + 1));
        assert_eq!(
            t.map_following(&mut mem, va, l4k, 1000, &mut gap),
            Err(EINVAL)
        );
        assert_eq!(tr(va + 4096), None);
        // A write that fails after 7 entries: they are cleared again.
        mem.fail = true;
        mem.prefix = 7;
        let mut all = |j: u64| Some(pa(j + 1));
        assert_eq!(t.map_following(&mut mem, va, l4k, 1000, &mut all), Err(EIO));
        mem.fail = false;
        for i in 1..10 {
            assert_eq!(tr(va + i * 4096), None);
        }
        // Then the run maps to the end of the hop, like 211 single maps.
        assert_eq!(t.map_following(&mut mem, va, l4k, 1000, &mut all)?, 211);
        for i in 0..212u64 {
            assert_eq!(tr(va + i * 4096 + 9), Some(pa(i) + 9));
        }
        assert_eq!(tr(va + 212 * 4096), None);
        // Occupied entries are refused; a run limited by `max` stops there.
        assert_eq!(t.map_following(&mut mem, va, l4k, 3, &mut all), Err(EINVAL));
        // Unmapping the followers: refused for the wrong page size (nothing
        // done), restored when the write fails, then done in one batch.
        assert_eq!(t.unmap_following(&mut mem, va, 2 << 20, 1000)?, 0);
        mem.fail = true;
        assert_eq!(t.unmap_following(&mut mem, va, 4096, 211), Err(EIO));
        mem.fail = false;
        for i in 0..212u64 {
            assert_eq!(tr(va + i * 4096), Some(pa(i)));
        }
        assert_eq!(t.unmap_following(&mut mem, va, 4096, 100)?, 100);
        assert_eq!(tr(va + 100 * 4096), None);
        assert_eq!(tr(va + 101 * 4096), Some(pa(101)));
        // A run with a hole in it is left to the page-by-page path.
        assert_eq!(t.unmap_following(&mut mem, va, 4096, 111)?, 0);
        let mut det = DetachedHops::new();
        for i in 101..212u64 {
            t.unmap(&mut mem, va + i * 4096, &mut det)?;
        }
        t.unmap(&mut mem, va, &mut det)?;
        assert_eq!(t.hop_count(), 0);
        flush(&d, &mut mem, det, MmuKind::Host)?;
        assert_eq!(d.mmu.hr_hops.lock().in_use(), 0);
        Ok(())
    }

    fn setup() -> Result<(TestMmu, PageTable)> {
        let d = TestMmu::new()?;
        let hop0 = d.mmu.dr_hops.lock().hop0(1).ok_or(EINVAL)?;
        let mut mem = dr_mem(&d);
        let mut t = PageTable::new(MmuGeometry::DMMU, MmuKind::Dram, 1, hop0, &mut mem)?;
        // These tests follow each emptied hop out of the tree; the idle hops
        // left linked have their own test.
        t.set_idle_limit(0);
        Ok((d, t))
    }
}
