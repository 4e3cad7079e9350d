// SPDX-License-Identifier: GPL-2.0

//! The pinned host buffers of a context, by host range (upstream's userptr
//! list with `hl_userptr_is_pinned` and `hl_userptr_delete_list`,
//! common/memory.c:2462-2510).
//!
//! Upstream walks a list to answer "is `[addr, addr + size)` pinned?" (O(n),
//! with a `u32` size compare); here a tree keyed by `(addr, size)` answers in
//! O(log n) with full 64-bit sizes. The command-submission path that would use
//! it is not part of this driver; it lives inside the context's mapping table
//! (`mapping.rs`), which adds and removes an entry in the same critical
//! section as the host mapping it belongs to, and debugfs reads it.

use crate::vm::spares::Spares;
use kernel::{
    prelude::*,
    rbtree::{RBTree, RBTreeNodeReservation}, //
};

/// The tree node one insertion needs, allocated before the index is locked.
pub(crate) type UserptrReservation = RBTreeNodeReservation<(u64, u64), u32>;

/// Host ranges pinned by a context, with how many mappings pin each.
pub(crate) struct UserptrIndex {
    by_range: RBTree<(u64, u64), u32>,
    /// Nodes of removed ranges (and unused reservations), for the next
    /// insertions.
    spare: Spares<UserptrReservation>,
}

impl UserptrIndex {
    /// An empty index.
    pub(crate) fn new() -> Self {
        Self {
            by_range: RBTree::new(),
            spare: Spares::new(),
        }
    }

    /// A node kept from an earlier removal, if any. O(1).
    pub(crate) fn take_spare(&mut self) -> Option<UserptrReservation> {
        self.spare.take()
    }

    /// Record one more pin of `[addr, addr + size)`. O(log n), no allocation
    /// (the node is `res`, kept as a spare when the range is already known).
    pub(crate) fn insert(&mut self, addr: u64, size: u64, res: UserptrReservation) {
        if let Some(n) = self.by_range.get_mut(&(addr, size)) {
            *n += 1;
            self.spare.put(res);
        } else {
            self.by_range.insert(res.into_node((addr, size), 1));
        }
    }

    /// Forget one pin of the range; `false` if it was not pinned (which the
    /// mapping table, the only caller, never lets happen). O(log n), no
    /// allocation.
    pub(crate) fn remove(&mut self, addr: u64, size: u64) -> bool {
        let Some(n) = self.by_range.get_mut(&(addr, size)) else {
            return false;
        };
        *n = n.saturating_sub(1);
        if *n == 0 {
            if let Some(node) = self.by_range.remove_node(&(addr, size)) {
                self.spare.put(node.into_reservation());
            }
        }
        true
    }

    /// Number of pins (a range pinned twice counts twice). O(n): debugfs and
    /// tests.
    pub(crate) fn pins(&self) -> u32 {
        self.by_range.values().copied().sum()
    }

    /// `hl_userptr_is_pinned`: whether exactly this range is pinned. O(log n).
    pub(crate) fn is_pinned(&self, addr: u64, size: u64) -> bool {
        self.by_range.get(&(addr, size)).is_some()
    }
}

#[kunit_tests(hlrs_userptr)]
mod tests {
    use super::*;

    #[test]
    fn pins_are_counted_per_exact_range() -> Result {
        let mut ix = UserptrIndex::new();
        ix.insert(0x1000, 10, RBTreeNodeReservation::new(GFP_KERNEL)?);
        ix.insert(0x1000, 10, RBTreeNodeReservation::new(GFP_KERNEL)?);
        ix.insert(0x1000, 1 << 33, RBTreeNodeReservation::new(GFP_KERNEL)?);
        assert!(ix.is_pinned(0x1000, 10));
        // Sizes are compared in full (upstream cuts them to u32).
        assert!(ix.is_pinned(0x1000, 1 << 33));
        assert!(!ix.is_pinned(0x1000, 0));
        assert!(!ix.is_pinned(0x1001, 10));
        assert_eq!(ix.pins(), 3);
        assert!(ix.remove(0x1000, 10));
        assert!(ix.is_pinned(0x1000, 10));
        assert!(ix.remove(0x1000, 10));
        assert!(!ix.is_pinned(0x1000, 10));
        assert!(!ix.remove(0x1000, 10));
        assert_eq!(ix.pins(), 1);
        assert!(ix.remove(0x1000, 1 << 33));
        assert!(!ix.is_pinned(0x1000, 1 << 33));
        assert_eq!(ix.pins(), 0);
        Ok(())
    }
}
