// SPDX-License-Identifier: GPL-2.0

//! The kernel's `drm_mm` range allocator (`include/drm/drm_mm.h`,
//! `drivers/gpu/drm/drm_mm.c`) behind a small safe type, for the VA allocator
//! benchmark ([`crate::bench::va_allocators`]): all its `unsafe` is here.
//!
//! `drm_mm`'s contract, as the wrapper keeps it:
//!
//! - the `struct drm_mm` is zeroed before `drm_mm_init` and never moves
//!   afterwards (its list heads point at themselves): it lives in its own
//!   pinned heap allocation;
//! - a `struct drm_mm_node` is zeroed before its first insert and never moves
//!   while inserted: the nodes are one array allocated at construction and
//!   never resized, each slot inserted at most once at a time;
//! - only an inserted node is removed;
//! - `drm_mm_takedown` runs on an empty allocator: `Drop` removes every
//!   inserted node first.
//!
//! Holes are kept in two rb-trees (by size, by address), so an insert in
//! `DRM_MM_INSERT_BEST` mode and a remove are O(log n) in the number of nodes.
//! Among holes of the best size `best_hole` takes the one inserted last in the
//! size tree (equal sizes go right, and it walks right while the hole fits),
//! not the lowest address.

use kernel::{bindings, prelude::*, types::Opaque};

/// A `drm_mm` range allocator over `[start, start + size)` with a fixed number
/// of node slots, allocating in best-fit mode (`DRM_MM_INSERT_BEST`).
///
/// # Invariants
///
/// - `mm` was zeroed and then initialised by `drm_mm_init`; it is pinned in its
///   own heap allocation, so it does not move until `Drop` took it down.
/// - `nodes` is allocated with all its slots, zeroed, at construction and never
///   pushed to or shrunk afterwards, so no node moves while inserted.
/// - `inserted[i]` is true exactly when `nodes[i]` is inserted in `mm`;
///   `inserted.len() == nodes.len()`.
/// - `free` holds every slot that is not inserted exactly once, and its
///   capacity is `nodes.len()`, so pushing a slot back never allocates.
/// - `live` is the number of inserted nodes.
pub(crate) struct DrmMm {
    mm: Pin<KBox<Opaque<bindings::drm_mm>>>,
    nodes: KVVec<Opaque<bindings::drm_mm_node>>,
    inserted: KVVec<bool>,
    free: KVVec<usize>,
    live: usize,
}

// SAFETY: a `drm_mm` has no affinity to a thread: every call on it takes
// `&mut self`, so callers serialise them (the benchmark holds a mutex); the
// raw pointers inside the C structs only point into memory `DrmMm` owns.
unsafe impl Send for DrmMm {}

impl DrmMm {
    /// An empty allocator over `[start, start + size)` with `capacity` node
    /// slots (`drm_mm_init`). O(capacity): the slots are zeroed here.
    ///
    /// `EINVAL` for an empty range, one that wraps, or no slot; `ENOMEM` if the
    /// memory cannot be allocated.
    pub(crate) fn new(start: u64, size: u64, capacity: usize) -> Result<Self> {
        if size == 0 || capacity == 0 || start.checked_add(size).is_none() {
            return Err(EINVAL);
        }
        let mut nodes = KVVec::with_capacity(capacity, GFP_KERNEL)?;
        for _ in 0..capacity {
            nodes.push(Opaque::zeroed(), GFP_KERNEL)?;
        }
        let inserted = KVVec::from_elem(false, capacity, GFP_KERNEL)?;
        let mut free = KVVec::with_capacity(capacity, GFP_KERNEL)?;
        // Slot 0 on top of the stack first.
        for slot in (0..capacity).rev() {
            free.push(slot, GFP_KERNEL)?;
        }
        let mm = KBox::pin(Opaque::<bindings::drm_mm>::zeroed(), GFP_KERNEL)?;
        // SAFETY: `mm` is zeroed, as `drm_mm_init` requires, and pinned in its
        // heap allocation, so it will not move while initialised; `start + size`
        // does not wrap (checked above).
        unsafe { bindings::drm_mm_init(mm.get(), start, size) };
        Ok(Self {
            mm,
            nodes,
            inserted,
            free,
            live: 0,
        })
    }

    /// Insert a node of `size` bytes in the smallest hole that holds it, at the
    /// bottom of that hole (`drm_mm_insert_node_in_range` with
    /// `DRM_MM_INSERT_BEST`, no alignment, the whole range). O(log n).
    ///
    /// Returns the node's slot (for [`Self::remove`]) and start. `ENOSPC` when
    /// no hole is large enough (`drm_mm`'s error), `ENOMEM` when every slot is
    /// in use; nothing changes then.
    pub(crate) fn insert_best(&mut self, size: u64) -> Result<(usize, u64)> {
        let slot = self.free.pop().ok_or(ENOMEM)?;
        let (Some(node), Some(flag)) = (self.nodes.get(slot), self.inserted.get_mut(slot)) else {
            // Cannot happen (every free slot indexes both arrays); keep the slot.
            self.put_slot(slot);
            return Err(EINVAL);
        };
        let node = node.get();
        // `node` is not inserted (it was on the free stack): zeroed at
        // construction or removed since, which `drm_mm_remove_node` documents
        // as enough for a new insert; `nodes` is never resized, so it stays put.
        // SAFETY: `mm` is initialised and pinned (type invariant); `node` is a
        // free, unmoving slot (above); `&mut self` serialises calls on `mm`.
        let rc = unsafe {
            bindings::drm_mm_insert_node_in_range(
                self.mm.get(),
                node,
                size,
                0,
                0,
                0,
                u64::MAX,
                bindings::drm_mm_insert_mode_DRM_MM_INSERT_BEST,
            )
        };
        if rc != 0 {
            // A failed insert leaves the node untouched.
            self.put_slot(slot);
            return Err(Error::from_errno(rc));
        }
        *flag = true;
        self.live += 1;
        // SAFETY: `node` points into `nodes`, which is alive; nothing else
        // writes it while `&mut self` is held.
        let start = unsafe { (*node).start };
        Ok((slot, start))
    }

    /// Remove the node in `slot` (`drm_mm_remove_node`), merging its space with
    /// the holes around it. O(log n). `EINVAL` if `slot` holds no inserted node.
    pub(crate) fn remove(&mut self, slot: usize) -> Result {
        let (Some(node), Some(flag)) = (self.nodes.get(slot), self.inserted.get_mut(slot)) else {
            return Err(EINVAL);
        };
        if !*flag {
            return Err(EINVAL);
        }
        // SAFETY: the node is inserted in `mm` (`inserted[slot]`, type
        // invariant), which is initialised and pinned; `&mut self` serialises
        // every call on `mm`.
        unsafe { bindings::drm_mm_remove_node(node.get()) };
        *flag = false;
        self.live -= 1;
        self.put_slot(slot);
        Ok(())
    }

    /// Put a slot back on the free stack. O(1), never allocates: `free` has
    /// room for every slot (type invariant).
    fn put_slot(&mut self, slot: usize) {
        if self.free.push_within_capacity(slot).is_err() {
            pr_err!("drm_mm bench: slot stack full\n");
        }
    }

    /// Number of inserted nodes. O(1).
    pub(crate) fn live(&self) -> usize {
        self.live
    }
}

impl Drop for DrmMm {
    /// Remove every inserted node, then `drm_mm_takedown` on the now empty
    /// allocator. O(capacity + n log n).
    fn drop(&mut self) {
        for (node, flag) in self.nodes.iter().zip(self.inserted.iter_mut()) {
            if *flag {
                // SAFETY: the node is inserted in `mm` (type invariant), which is
                // initialised and pinned; `&mut self` is exclusive.
                unsafe { bindings::drm_mm_remove_node(node.get()) };
                *flag = false;
            }
        }
        self.live = 0;
        // SAFETY: `mm` is initialised and pinned, and now empty, as
        // `drm_mm_takedown` requires; it is not used again (it is dropped next,
        // and `drm_mm` owns no memory of its own to free).
        unsafe { bindings::drm_mm_takedown(self.mm.get()) };
    }
}
