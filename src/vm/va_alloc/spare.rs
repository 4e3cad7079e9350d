// SPDX-License-Identifier: GPL-2.0

//! The spare cache of the VA block allocator: tree-node memory that frees,
//! merges, [`super::VaAllocator::clear`] and unused reservations give back,
//! kept for the next allocations so that a repeated allocate+free cycle does
//! no `kmalloc` or `kfree` (see the module documentation of [`super`]).
//!
//! Every operation here is O(1) and never allocates: the cache's two stacks
//! get their capacity at construction and are only pushed within it.

use super::tree::{BlockNodeRes, Placement, SizeNodeRes, SizeNodes};
use kernel::{alloc::Flags, prelude::*, rbtree::RBTreeNodeReservation};

/// Tree nodes reserved for one allocation by [`VaAllocator::prepare`].
///
/// Obtained before taking the lock that protects the allocator and consumed by
/// [`VaAllocator::alloc_with`], which keeps what the allocation does not need in
/// its spare cache (as far as there is room). Dropped unused, it frees them.
pub(crate) struct VaReservations {
    /// For the allocated block when it does not start at its free block's start.
    pub(super) head: Piece,
    /// For the free rest behind the allocated block.
    pub(super) tail: Piece,
}

impl VaReservations {
    /// Number of tree nodes one reservation holds: two pieces of a block-tree
    /// node and two size-tree nodes.
    pub(crate) const NODES: usize = 6;
}

/// Capacity of the spare cache in pieces (a block-tree node and one size-tree
/// node per alignment class each): two worst-case allocations. An allocation
/// takes at most two pieces and a free gives back at most two.
const SPARE_PIECES: usize = 4;
/// Spare block-tree nodes kept at most.
pub(super) const SPARE_BLOCK_NODES: usize = SPARE_PIECES;
/// Spare size-tree nodes kept at most (two alignment classes at most).
pub(super) const SPARE_SIZE_NODES: usize = 2 * SPARE_PIECES;

/// The memory for the tree nodes one allocation may need: one block-tree node
/// and its size-tree nodes for each of the two pieces a cut may create.
pub(super) struct Piece {
    /// The block-tree node.
    pub(super) node: BlockNodeRes,
    /// A size-tree node per alignment class.
    pub(super) sizes: SizeNodes,
}

impl Piece {
    /// A fresh piece with size-tree nodes for two classes: three `kmalloc`s
    /// with `flags`, O(1).
    pub(super) fn new(flags: Flags) -> Result<Self> {
        Ok(Self {
            node: RBTreeNodeReservation::new(flags)?,
            sizes: SizeNodes::new(flags, true)?,
        })
    }
}

/// The bounded spare cache of tree nodes, as empty node memory in two stacks.
///
/// # Invariants
///
/// `blocks` and `sizes` never grow past the capacity reserved at construction
/// (`SPARE_BLOCK_NODES`, `SPARE_SIZE_NODES`): they are only pushed with
/// `push_within_capacity`.
pub(super) struct SpareCache {
    /// Spare block-tree nodes, at most `SPARE_BLOCK_NODES`.
    pub(super) blocks: KVec<BlockNodeRes>,
    /// Spare size-tree nodes of any class, at most `SPARE_SIZE_NODES`.
    pub(super) sizes: KVec<SizeNodeRes>,
    /// Node reservations allocated for the allocator ([`super::test_api::NodeStats::fresh`];
    /// counted for the tests only).
    #[cfg(CONFIG_KUNIT)]
    pub(super) fresh: usize,
    /// Nodes freed because the cache was full ([`super::test_api::NodeStats::freed`];
    /// counted for the tests only).
    #[cfg(CONFIG_KUNIT)]
    pub(super) freed: usize,
}

impl SpareCache {
    /// An empty cache with its capacity reserved (two `kmalloc`s). O(1).
    pub(super) fn new() -> Result<Self> {
        Ok(Self {
            blocks: KVec::with_capacity(SPARE_BLOCK_NODES, GFP_KERNEL)?,
            sizes: KVec::with_capacity(SPARE_SIZE_NODES, GFP_KERNEL)?,
            #[cfg(CONFIG_KUNIT)]
            fresh: 0,
            #[cfg(CONFIG_KUNIT)]
            freed: 0,
        })
    }

    /// Count `n` node reservations allocated for the allocator (tests read the
    /// count through [`super::VaAllocator::node_stats`]). O(1).
    #[inline(always)]
    pub(super) fn count_fresh(&mut self, n: usize) {
        #[cfg(CONFIG_KUNIT)]
        {
            self.fresh = self.fresh.saturating_add(n);
        }
        #[cfg(not(CONFIG_KUNIT))]
        let _ = n;
    }

    /// Count a node freed because the cache was full. O(1).
    #[inline(always)]
    fn count_freed(&mut self) {
        #[cfg(CONFIG_KUNIT)]
        {
            self.freed = self.freed.saturating_add(1);
        }
    }

    /// The pieces placement `p` needs, `(head, tail)`, each `Some` exactly when
    /// [`super::VaAllocator::commit`] uses it: from `fresh` first, then from
    /// the spare cache; what is left of `fresh` goes to the cache. `None` if
    /// the cache does not cover them (never with `fresh`), and then nothing
    /// changed. `classes` is the allocator's number of alignment classes. O(1).
    #[inline(always)]
    pub(super) fn take_pieces(
        &mut self,
        p: &Placement,
        fresh: Option<VaReservations>,
        classes: usize,
    ) -> Option<(Option<Piece>, Option<Piece>)> {
        let need_head = p.run.first < p.start;
        let need_tail = p.run.last_end > p.end;
        if !need_head && !need_tail && fresh.is_none() {
            // An exact fit: no piece, nothing to stash.
            return Some((None, None));
        }
        let (mut a, mut b) = match fresh {
            Some(r) => (Some(r.head), Some(r.tail)),
            None => (None, None),
        };
        let want = usize::from(need_head) + usize::from(need_tail);
        let have = usize::from(a.is_some()) + usize::from(b.is_some());
        let from_cache = want.saturating_sub(have);
        if self.blocks.len() < from_cache || self.sizes.len() < from_cache * classes {
            return None;
        }
        let mut next = |this: &mut Self| {
            a.take()
                .or_else(|| b.take())
                .or_else(|| this.pop_piece(classes))
        };
        let head = if need_head { Some(next(self)?) } else { None };
        let tail = if need_tail { Some(next(self)?) } else { None };
        for piece in [a, b].into_iter().flatten() {
            self.stash_piece(piece);
        }
        Some((head, tail))
    }

    /// Keep the nodes of `fresh`, if any, as far as the cache has room: a
    /// request refused before it took anything gives them back. O(1).
    #[inline(always)]
    pub(super) fn stash_fresh(&mut self, fresh: Option<VaReservations>) {
        if let Some(r) = fresh {
            self.stash_piece(r.head);
            self.stash_piece(r.tail);
        }
    }

    /// One piece from the spare cache: a block-tree node and a size-tree node
    /// per class (`classes` of them: 1, or 2 with the extra class). O(1).
    fn pop_piece(&mut self, classes: usize) -> Option<Piece> {
        if self.blocks.is_empty() || self.sizes.len() < classes {
            return None;
        }
        let node = self.blocks.pop()?;
        let base = self.sizes.pop();
        let extra = if classes > 1 { self.sizes.pop() } else { None };
        Some(Piece {
            node,
            sizes: SizeNodes { base, extra },
        })
    }

    /// Keep the nodes of `p` in the spare cache as far as it has room. O(1).
    pub(super) fn stash_piece(&mut self, p: Piece) {
        self.stash_block(p.node);
        self.stash_sizes(p.sizes);
    }

    /// Keep a block-tree node in the spare cache, or free it when it is full.
    /// O(1).
    pub(super) fn stash_block(&mut self, r: BlockNodeRes) {
        if self.blocks.push_within_capacity(r).is_err() {
            self.count_freed();
        }
    }

    /// Keep a size-tree node in the spare cache, or free it when it is full.
    /// O(1).
    pub(super) fn stash_size(&mut self, r: SizeNodeRes) {
        if self.sizes.push_within_capacity(r).is_err() {
            self.count_freed();
        }
    }

    /// Keep the size-tree nodes of `n` in the spare cache as far as it has room.
    /// O(1).
    pub(super) fn stash_sizes(&mut self, n: SizeNodes) {
        for r in [n.base, n.extra].into_iter().flatten() {
            self.stash_size(r);
        }
    }
}
