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
//! ALLOC and FREE in a steady state allocate nothing: a FREE keeps its
//! entry's tree node as a spare (up to [`SPARES`](crate::vm::spares::SPARES)) and its page pack's
//! allocation ([`VacantPack`]), and an insertion
//! that reuses a free id keeps that id's node, so the next ALLOC takes both
//! from the table ([`HandleTable::insert_recycled`]); three allocations and
//! three frees fewer per ALLOC+FREE pair than allocating them each time.
//!
//! Complexity: insert, lookup and remove are O(log n) in the number of live
//! handles; [`HandleTable::remove_owned_by`] (teardown) is O(n) and, like
//! every removal, allocates nothing and cannot fail.

use crate::{
    asic::MAX_ASID,
    vm::{
        page_pack::{PhysPgPack, VacantPack},
        spares::Spares,
    },
};
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
    /// The node this id will take in the free-id set when it is released
    /// (`Some` while the entry is in the table).
    free_node: Option<RBTreeNodeReservation<u32, ()>>,
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
/// entries whose pack belongs to ASID `a`. Every entry's `free_node` is
/// `Some`.
pub(crate) struct HandleTable {
    entries: RBTree<u32, HandleEntry>,
    free_ids: RBTree<u32, ()>,
    next: u32,
    owned: [u32; MAX_ASID as usize],
    spare_entries: Spares<RBTreeNodeReservation<u32, HandleEntry>>,
    spare_ids: Spares<RBTreeNodeReservation<u32, ()>>,
    spare_pack: Option<VacantPack>,
}

impl HandleTable {
    /// An empty table.
    pub(crate) fn new() -> Self {
        Self {
            entries: RBTree::new(),
            free_ids: RBTree::new(),
            next: 1,
            owned: [0; MAX_ASID as usize],
            spare_entries: Spares::new(),
            spare_ids: Spares::new(),
            spare_pack: None,
        }
    }

    /// The pack allocation a FREE left, if any (for the next ALLOC). O(1).
    pub(crate) fn take_spare_pack(&mut self) -> Option<VacantPack> {
        self.spare_pack.take()
    }

    /// Keep `pack`'s allocation for the next ALLOC (one is kept). O(1).
    pub(crate) fn put_spare_pack(&mut self, pack: VacantPack) {
        if self.spare_pack.is_none() {
            self.spare_pack = Some(pack);
        }
    }

    /// Store `pack` under the lowest free handle with the table's spare
    /// nodes, if it has what the insertion needs; otherwise `Err(pack)`
    /// (reserve with [`HandleReservation::new`] and use [`Self::insert`]).
    /// O(log n + SPARES), no allocation.
    pub(crate) fn insert_recycled(
        &mut self,
        pack: Arc<PhysPgPack>,
    ) -> Result<u32, Arc<PhysPgPack>> {
        // A new id needs a spare id node; a reused one brings its own.
        let needs_id_node = self.free_ids.is_empty();
        if (needs_id_node && (!self.spare_ids.has() || self.next == u32::MAX))
            || !self.spare_entries.has()
        {
            return Err(pack);
        }
        let Some(entry) = self.spare_entries.take() else {
            return Err(pack);
        };
        // A reused id brings its node: the spare id node stays then.
        let free_node = if needs_id_node {
            self.spare_ids.take()
        } else {
            None
        };
        Ok(self.insert_with(pack, entry, free_node))
    }

    /// Store `pack` under the lowest free handle. `ENOMEM` when all 2^32 - 1
    /// handles are in use (upstream reports `EFAULT`). O(log n), no allocation.
    pub(crate) fn insert(&mut self, pack: Arc<PhysPgPack>, res: HandleReservation) -> Result<u32> {
        if self.free_ids.is_empty() && self.next == u32::MAX {
            return Err(ENOMEM);
        }
        Ok(self.insert_with(pack, res.entry, Some(res.free_node)))
    }

    /// The insertion, with an id left (checked by the callers): a reused
    /// id's node becomes the entry's free node and `free_node` a spare, or a
    /// new id takes `free_node` (`Some` then: checked by the callers).
    /// O(log n).
    fn insert_with(
        &mut self,
        pack: Arc<PhysPgPack>,
        entry: RBTreeNodeReservation<u32, HandleEntry>,
        free_node: Option<RBTreeNodeReservation<u32, ()>>,
    ) -> u32 {
        let (id, free_node) = match self.free_ids.cursor_front_mut() {
            Some(cursor) => {
                let id = *cursor.current().0;
                let (_, node) = cursor.remove_current();
                if let Some(f) = free_node {
                    self.spare_ids.put(f);
                }
                (id, Some(node.into_reservation()))
            }
            None => {
                let id = self.next;
                self.next = self.next.saturating_add(1);
                (id, free_node)
            }
        };
        self.count_owner(pack.asid, true);
        let e = HandleEntry {
            pack,
            mapping_cnt: 0,
            free_node,
        };
        self.entries.insert(entry.into_node(id, e));
        id
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
        let e = self.entries.get_mut(&handle).ok_or(EINVAL)?;
        check(e)?;
        let pack = e.pack.clone();
        if let Some(f) = e.free_node.take() {
            self.free_ids.insert(f.into_node(handle, ()));
        }
        self.count_owner(pack.asid, false);
        // The entry's node stays allocated as a spare for the next ALLOC.
        if let Some(node) = self.entries.remove_node(&handle) {
            self.spare_entries.put(node.into_reservation());
        }
        Ok(pack)
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
            let (id, mut entry) = node.to_key_value();
            if let Some(f) = entry.free_node.take() {
                self.free_ids.insert(f.into_node(id, ()));
            }
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
