// SPDX-License-Identifier: GPL-2.0

//! The device's handle table: handle -> physical page pack (upstream
//! `hl_vm.phys_pg_pack_handles`, an IDR under a spinlock allocating with
//! GFP_ATOMIC).
//!
//! Handles are the lowest free integer >= 1, as upstream's `idr_alloc(.., 1, 0)`
//! (a FREE of handle 1 makes the next ALLOC return 1 again); 0 is never a
//! handle. The table lives under a mutex, and every tree node an insertion or a
//! removal needs is reserved before the lock is taken (each entry carries the
//! node its id will need in the free-id set), so nothing is allocated while
//! the table is locked and removal cannot fail.
//!
//! Complexity: insert, lookup and remove are O(log n) in the number of live
//! handles; [`HandleTable::take_owned_by`] (teardown) is O(n).

use crate::vm::page_pack::PhysPgPack;
use kernel::{
    prelude::*,
    rbtree::{RBTree, RBTreeNodeReservation},
    sync::Arc, //
};

/// One live handle.
pub(crate) struct HandleEntry {
    /// The allocation.
    pub(crate) pack: Arc<PhysPgPack>,
    /// Live mappings of the handle (`mapping_cnt`); FREE is refused while > 0.
    pub(crate) mapping_cnt: u32,
    /// The node this id will take in the free-id set when it is released.
    free_node: RBTreeNodeReservation<u32, ()>,
}

/// The tree nodes one insertion needs, allocated before the table is locked.
pub(crate) struct HandleReservation {
    entry: RBTreeNodeReservation<u32, HandleEntry>,
    free_node: RBTreeNodeReservation<u32, ()>,
}

impl HandleReservation {
    /// Allocate the nodes (may sleep).
    pub(crate) fn new() -> Result<Self> {
        Ok(Self {
            entry: RBTreeNodeReservation::new(GFP_KERNEL)?,
            free_node: RBTreeNodeReservation::new(GFP_KERNEL)?,
        })
    }
}

/// The table.
///
/// # Invariants
///
/// Every id in `entries` or `free_ids` is in `1..next`; no id is in both;
/// every id in `1..next` is in one of them.
pub(crate) struct HandleTable {
    entries: RBTree<u32, HandleEntry>,
    free_ids: RBTree<u32, ()>,
    next: u32,
}

impl HandleTable {
    /// An empty table.
    pub(crate) fn new() -> Self {
        Self {
            entries: RBTree::new(),
            free_ids: RBTree::new(),
            next: 1,
        }
    }

    /// Store `pack` under the lowest free handle. `ENOMEM` when all 2^32 - 1
    /// handles are in use (upstream reports `EFAULT`). O(log n), no allocation.
    pub(crate) fn insert(&mut self, pack: Arc<PhysPgPack>, res: HandleReservation) -> Result<u32> {
        let id = match self.free_ids.cursor_front_mut() {
            Some(cursor) => {
                let (id, ()) = cursor.current();
                let id = *id;
                // Frees a node: no allocation.
                let _ = cursor.remove_current();
                id
            }
            None => {
                let id = self.next;
                self.next = self.next.checked_add(1).ok_or(ENOMEM)?;
                id
            }
        };
        let entry = HandleEntry {
            pack,
            mapping_cnt: 0,
            free_node: res.free_node,
        };
        self.entries.insert(res.entry.into_node(id, entry));
        Ok(id)
    }

    /// The entry of `handle`. O(log n).
    pub(crate) fn get(&self, handle: u32) -> Option<&HandleEntry> {
        self.entries.get(&handle)
    }

    /// The entry of `handle`, mutable (mapping count). O(log n).
    pub(crate) fn get_mut(&mut self, handle: u32) -> Option<&mut HandleEntry> {
        self.entries.get_mut(&handle)
    }

    /// Remove `handle` if `check` accepts its entry; the id becomes free.
    /// `EINVAL` for an unknown handle; `check`'s error otherwise. O(log n).
    pub(crate) fn remove_if(
        &mut self,
        handle: u32,
        check: impl FnOnce(&HandleEntry) -> Result,
    ) -> Result<Arc<PhysPgPack>> {
        check(self.entries.get(&handle).ok_or(EINVAL)?)?;
        let entry = self.entries.remove(&handle).ok_or(EINVAL)?;
        self.free_ids.insert(entry.free_node.into_node(handle, ()));
        Ok(entry.pack)
    }

    /// Remove every handle owned by `asid` into `out` (context teardown), most
    /// recent first. O(n).
    pub(crate) fn take_owned_by(
        &mut self,
        asid: u32,
        out: &mut KVec<(u32, Arc<PhysPgPack>)>,
    ) -> Result {
        let mut ids = KVec::new();
        for (id, e) in self.entries.iter() {
            if e.pack.asid == asid {
                ids.push(*id, GFP_KERNEL)?;
            }
        }
        out.reserve(ids.len(), GFP_KERNEL)?;
        for id in ids.iter().rev() {
            if let Ok(pack) = self.remove_if(*id, |_| Ok(())) {
                out.push_within_capacity((*id, pack)).map_err(|_| ENOMEM)?;
            }
        }
        Ok(())
    }

    /// Number of live handles. O(n): debugfs and tests.
    pub(crate) fn len(&self) -> usize {
        self.entries.iter().count()
    }

    /// Visit every live handle in increasing order (debugfs).
    pub(crate) fn for_each(&self, mut f: impl FnMut(u32, &HandleEntry)) {
        for (id, e) in self.entries.iter() {
            f(*id, e);
        }
    }
}
