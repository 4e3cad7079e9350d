// SPDX-License-Identifier: GPL-2.0

//! The one live mmap of a kernel buffer that userspace maps whole: a
//! timestamp buffer's user part ([`super::ts_buffer`]) or a command buffer
//! ([`super::command_buffer`]) (upstream `hl_mem_mgr_mmap`'s `buf->mmap`,
//! common/memory_mgr.c:233-299).
//!
//! A context keeps such buffers in a [`MmapTable`] (upstream's per-file
//! `hl_mem_mgr` and its IDR): ids from 1, never reused by the file, and a
//! charge per buffer held against a bound. A buffer counts the vmas of its
//! mapping (a partial `munmap` or `mprotect` splits one vma into several, an
//! `mremap` move copies it); a new mmap is refused while any is left. The
//! mmap hook takes a [`MmapClaim`] first and turns it into the first vma's
//! reference only once the mapping succeeded.

use kernel::{
    alloc::Flags,
    prelude::*,
    rbtree::{RBTree, RBTreeNodeReservation},
    sync::{
        atomic::{Atomic, Full, Relaxed},
        Arc, Mutex,
    }, //
};

/// The vmas of a buffer's one live mmap (0: not mapped).
pub(crate) struct VmaCount(Atomic<u32>);

impl VmaCount {
    /// Not mapped. O(1).
    pub(crate) fn new() -> Self {
        Self(Atomic::new(0))
    }
}

/// A buffer with at most one live mmap.
pub(crate) trait OneMmap: Send + Sync {
    /// The buffer's vma count.
    fn vma_count(&self) -> &VmaCount;

    /// Whether the buffer is mapped, and by how many vmas. O(1).
    fn mapped_vmas(&self) -> u32 {
        self.vma_count().0.load(Relaxed)
    }

    /// One more vma of the live mmap (a split-off piece, an `mremap` copy). O(1).
    fn vma_opened(&self) {
        self.vma_count().0.fetch_add(1, Full);
    }

    /// A vma of the live mmap went away; the last one ends the mmap. O(1).
    fn vma_closed(&self) {
        self.vma_count().0.fetch_sub(1, Full);
    }
}

/// A claim on a buffer's one live mmap, taken by [`claim`]. Dropped unused
/// (the mapping failed), it gives the claim back.
pub(crate) struct MmapClaim<T: OneMmap> {
    obj: Arc<T>,
    used: bool,
}

impl<T: OneMmap> core::ops::Deref for MmapClaim<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.obj
    }
}

impl<T: OneMmap> MmapClaim<T> {
    /// The mapping succeeded: a reference for its first vma. O(1).
    pub(crate) fn into_vma_reference(mut self) -> Arc<T> {
        self.used = true;
        self.obj.clone()
    }
}

impl<T: OneMmap> Drop for MmapClaim<T> {
    fn drop(&mut self) {
        if !self.used {
            self.obj.vma_count().0.store(0, Relaxed);
        }
    }
}

/// Claim the one live mmap of `obj`: `EINVAL` if it has one. O(1).
pub(crate) fn claim<T: OneMmap>(obj: Arc<T>) -> Result<MmapClaim<T>> {
    if obj.vma_count().0.cmpxchg(0, 1, Full).is_err() {
        return Err(EINVAL);
    }
    Ok(MmapClaim { obj, used: false })
}

/// The buffers of one kind of one context, by id.
///
/// # Invariants
///
/// `charged` is the sum of the charges of the buffers in the table plus
/// what additions in progress reserved.
pub(crate) struct MmapTable<T> {
    by_id: RBTree<u32, Arc<T>>,
    next_id: u32,
    charged: u64,
}

impl<T: OneMmap> MmapTable<T> {
    /// No buffers. O(1).
    pub(crate) fn new() -> Self {
        Self {
            by_id: RBTree::new(),
            next_id: 1,
            charged: 0,
        }
    }

    /// What the buffers are charged, with additions in progress. O(1).
    pub(crate) fn charged(&self) -> u64 {
        self.charged
    }

    /// Every buffer in id order (debugfs). O(1) to start.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &Arc<T>> {
        self.by_id.values()
    }

    /// Number of buffers. O(n): debugfs and tests.
    pub(crate) fn len(&self) -> usize {
        self.by_id.iter().count()
    }

    /// The buffer `id`. O(log n).
    pub(crate) fn get(&self, id: u32) -> Option<Arc<T>> {
        self.by_id.get(&id).cloned()
    }

    /// Take buffer `id` out, giving back its `charge`. O(log n).
    pub(crate) fn remove(&mut self, id: u32, charge: u64) -> Option<Arc<T>> {
        let obj = self.by_id.remove(&id)?;
        self.charged = self.charged.saturating_sub(charge);
        Some(obj)
    }

    /// Drop every buffer (file close); mapped ones live on until their last
    /// `munmap`. Allocates nothing. Returns how many there were. O(n).
    pub(crate) fn clear(&mut self) -> usize {
        let mut n = 0;
        while let Some(c) = self.by_id.cursor_front_mut() {
            drop(c.remove_current().1);
            n += 1;
        }
        self.charged = 0;
        n
    }
}

/// Add the buffer `make(id)` makes to `table`, charged `charge` against
/// `limit` (`over` past it), its record and table node allocated with
/// `flags`; returns its id. The charge and the id are reserved first, so
/// two additions cannot both pass the bound, and the table lock is not held
/// while `make` allocates. On error the table is as before, except that the
/// id is not handed out again (ids only grow, as upstream's IDR would for a
/// caller that never frees). O(make) + O(log n).
pub(crate) fn add<T: OneMmap>(
    table: &Mutex<MmapTable<T>>,
    (charge, limit, over): (u64, u64, Error),
    flags: Flags,
    make: impl FnOnce(u32) -> Result<T>,
) -> Result<u32> {
    let id = {
        let mut t = table.lock();
        let total = t.charged.checked_add(charge).ok_or(over)?;
        if total > limit {
            return Err(over);
        }
        let id = t.next_id;
        t.next_id = id.checked_add(1).ok_or(ENOMEM)?;
        t.charged = total;
        id
    };
    let made = make(id)
        .and_then(|b| Ok(Arc::new(b, flags)?))
        .and_then(|b| Ok((b, RBTreeNodeReservation::new(flags)?)));
    let mut t = table.lock();
    match made {
        Ok((obj, node)) => {
            t.by_id.insert(node.into_node(id, obj));
            Ok(id)
        }
        Err(e) => {
            t.charged = t.charged.saturating_sub(charge);
            Err(e)
        }
    }
}

/// Claim the one live mmap of the buffer named by the page offset `pgoff`
/// (`hl_mem_mgr_mmap`): `EINVAL` for an unknown id (the low 32 bits, as
/// upstream), a length other than `mapped_len` of the buffer, or a buffer
/// that already has a live mmap. O(log n).
pub(crate) fn claim_mmap<T: OneMmap>(
    table: &Mutex<MmapTable<T>>,
    pgoff: u64,
    len: u64,
    mapped_len: impl FnOnce(&T) -> u64,
) -> Result<MmapClaim<T>> {
    let obj = table.lock().get(pgoff as u32).ok_or(EINVAL)?;
    if len != mapped_len(&obj) {
        return Err(EINVAL);
    }
    claim(obj)
}
