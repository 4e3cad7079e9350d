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
//! The table also counts the handles each ASID owns, so that a context can be
//! checked to leave nothing behind and a recycled ASID to start with nothing,
//! in O(1).
//!
//! Complexity: insert, lookup and remove are O(log n) in the number of live
//! handles; [`HandleTable::remove_owned_by`] (teardown) is O(n) and, like
//! every removal, allocates nothing and cannot fail.

use crate::{asic::MAX_ASID, vm::page_pack::PhysPgPack};
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
/// every id in `1..next` is in one of them. `owned[a]` is the number of
/// entries whose pack belongs to ASID `a`.
pub(crate) struct HandleTable {
    entries: RBTree<u32, HandleEntry>,
    free_ids: RBTree<u32, ()>,
    next: u32,
    owned: [u32; MAX_ASID as usize],
}

impl HandleTable {
    /// An empty table.
    pub(crate) fn new() -> Self {
        Self {
            entries: RBTree::new(),
            free_ids: RBTree::new(),
            next: 1,
            owned: [0; MAX_ASID as usize],
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
        self.count_owner(pack.asid, true);
        let entry = HandleEntry {
            pack,
            mapping_cnt: 0,
            free_node: res.free_node,
        };
        self.entries.insert(res.entry.into_node(id, entry));
        Ok(id)
    }

    /// Keep `owned` current. Packs of an ASID outside the table (none exist:
    /// every pack is made for a context or the kernel) are not counted.
    fn count_owner(&mut self, asid: u32, add: bool) {
        if let Some(n) = usize::try_from(asid)
            .ok()
            .and_then(|a| self.owned.get_mut(a))
        {
            *n = if add {
                n.saturating_add(1)
            } else {
                n.saturating_sub(1)
            };
        }
    }

    /// Number of handles `asid` owns. O(1).
    pub(crate) fn owned_by(&self, asid: u32) -> u32 {
        usize::try_from(asid)
            .ok()
            .and_then(|a| self.owned.get(a))
            .copied()
            .unwrap_or(0)
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
        self.count_owner(entry.pack.asid, false);
        Ok(entry.pack)
    }

    /// Remove every handle `owner` accepts (context teardown: those of one
    /// ASID; device removal: all), handing each id and pack to `release`,
    /// which runs with the table locked (it may take the DRAM pool's lock,
    /// which nests inside: see `device.rs`). Returns how many were removed.
    ///
    /// Allocates nothing and cannot fail: entries leave through a tree cursor
    /// and every id goes back to the free-id set on the node its entry carried
    /// since ALLOC. O(n) in the live handles (all of them are visited).
    pub(crate) fn remove_owned_by(
        &mut self,
        owner: impl Fn(u32) -> bool,
        mut release: impl FnMut(u32, Arc<PhysPgPack>),
    ) -> usize {
        let mut removed = 0;
        let mut cursor = self.entries.cursor_front_mut();
        while let Some(c) = cursor {
            if !owner(c.current().1.pack.asid) {
                cursor = c.move_next();
                continue;
            }
            let (next, node) = c.remove_current();
            let (id, entry) = node.to_key_value();
            self.free_ids.insert(entry.free_node.into_node(id, ()));
            if let Some(n) = usize::try_from(entry.pack.asid)
                .ok()
                .and_then(|a| self.owned.get_mut(a))
            {
                *n = n.saturating_sub(1);
            }
            release(id, entry.pack);
            removed += 1;
            // After a removal the cursor is on the next entry, or on the
            // previous one when the last was removed (visited again: harmless).
            cursor = next;
        }
        removed
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
