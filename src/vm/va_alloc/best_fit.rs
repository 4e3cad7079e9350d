// SPDX-License-Identifier: GPL-2.0

//! Best fit in the page class, committed where it is found, and the *parked*
//! size-tree entries that let an exact fit and its free skip the size tree.
//!
//! An allocation that fills a free block exactly (the common case of a
//! repeated allocate+free, and of every benchmark pair) leaves the block's
//! page-class entry `(length, start)` linked in the size tree instead of
//! removing it: the entry is *parked*, and the allocated block holds no
//! page-class node (`nodes.base` is `None`). When that allocation is freed
//! without a merge, the free block's entry is already there, with the right
//! key, so the free does no size-tree operation at all; a free that merges
//! first takes the parked entry out ([`VaAllocator::unpark`]).
//!
//! A parked entry is *stale* while its block is allocated: best fit, which
//! looks the block of its candidate up in the block tree anyway (to allocate
//! it), removes a stale entry through its search cursor, gives its node back
//! to the allocation, and goes on with the next entry in size order, so the
//! choice (smallest size, lowest address, among free blocks) is unchanged.
//!
//! n is the number of blocks in the range. Each parked entry is removed at
//! most once, by the one search that meets it (or by its free), and only an
//! allocation parks one, so the skipping is O(log n) amortised per allocation;
//! a single allocation that meets k stale entries costs O((k + 1) log n).

use super::{
    spare::{SpareCache, VaReservations},
    tree::{
        extra_node, key_parts, size_key, Block, ExtraClass, Placement, Run, SizeKey, SizeNodeRes,
        SizeNodes, SizeTrees, State,
    },
    AllocOutcome, VaAllocError, VaAllocator,
};
use core::mem;
use kernel::rbtree::{CursorMut, RBTreeNode};

impl VaAllocator {
    /// Allocate `size` bytes (whole pages) of the page class by best fit, with
    /// the tail piece from `fresh` or the spare cache when the block must be
    /// cut. O(log n) amortised (see the module documentation): one lower-bound
    /// search in the page-class tree and one block-tree search per candidate;
    /// an exact fit parks its entry (no size-tree update), a cut removes the
    /// entry through the search's cursor and inserts the free tail (block tree
    /// and size trees).
    ///
    /// `NoSpace` if no free block fits, `NeedNodes` if the cache does not hold
    /// the tail piece a cut needs (never with `fresh`); either way no block
    /// changed (stale entries met may have been removed, which changes no
    /// block) and `fresh` went to the spare cache.
    #[inline(always)]
    pub(super) fn alloc_page_best_fit(
        &mut self,
        size: u64,
        fresh: Option<VaReservations>,
    ) -> Result<u64, AllocOutcome> {
        let classes = self.classes();
        let bound = size_key(size, 0);
        let Self {
            blocks,
            trees: SizeTrees { base, extra },
            spare,
            ..
        } = self;
        let mut cur = base.cursor_lower_bound_mut(&bound);
        let (p, tail) = loop {
            let Some(c) = cur.take().filter(|c| *c.current().0 >= bound) else {
                spare.stash_fresh(fresh);
                return Err(VaAllocError::NoSpace.into());
            };
            let (len, key) = key_parts(*c.current().0);
            let b = match blocks.get_mut(&key) {
                Some(b) if matches!(b.state, State::Free(_)) => b,
                stale => {
                    cur = reclaim_stale(c, stale, spare);
                    continue;
                }
            };
            let (Some(end), Some(block_end)) = (key.checked_add(size), key.checked_add(len)) else {
                spare.stash_fresh(fresh);
                return Err(VaAllocError::NoSpace.into());
            };
            let p = Placement {
                start: key,
                end,
                run: Run::new(key, block_end),
                taken: SizeNodes::NONE,
            };
            let (_, tail) = spare
                .take_pieces(&p, fresh, classes)
                .ok_or(AllocOutcome::NeedNodes)?;
            let cut = tail.is_some();
            // An exact fit parks its entry; a cut takes it out, as the free
            // tail gets an entry of its own.
            let base_node = if cut {
                Some(c.remove_current().1.into_reservation())
            } else {
                None
            };
            take_block(b, extra.as_mut(), base_node, (key, block_end, end));
            break (p, tail);
        };
        self.free_blocks = self.free_blocks.saturating_sub(1);
        self.allocations += 1;
        if let Some(tail) = tail {
            self.cut_tail(&p.run, p.end, tail);
        }
        Ok(p.start)
    }
}

/// Remove the stale entry under `c` (see the module documentation) and give
/// its node back to the allocation `stale` it belongs to (anything else, which
/// the invariants rule out, goes to the spare cache). Returns the cursor on
/// the next entry in size order (or on the one before it when there is none,
/// which the caller's lower bound rejects). O(1) amortised.
#[inline(always)]
fn reclaim_stale<'a>(
    c: CursorMut<'a, SizeKey, ()>,
    stale: Option<&mut Block>,
    spare: &mut SpareCache,
) -> Option<CursorMut<'a, SizeKey, ()>> {
    let (next, node) = c.remove_current();
    let node = node.into_reservation();
    match stale.map(|b| &mut b.state) {
        Some(State::Allocated { nodes, .. }) if nodes.base.is_none() => nodes.base = Some(node),
        _ => spare.stash_size(node),
    }
    next
}

/// Make the free block `b`, `[start, block_end)`, the allocation
/// `[start, end)`: it holds `base` (`None`: its page-class entry is parked) and its
/// extra-class node, held or taken out of `extra`'s tree. O(log n) when the
/// extra-class node must be taken out of its tree, O(1) otherwise.
#[inline(always)]
fn take_block(
    b: &mut Block,
    extra: Option<&mut ExtraClass>,
    base: Option<SizeNodeRes>,
    (start, block_end, end): (u64, u64, u64),
) {
    let held = match mem::replace(&mut b.state, State::VACANT) {
        State::Free(held) => held,
        other => {
            State::fill(&mut b.state, other);
            return;
        }
    };
    let extra = extra_node(held, extra, start, block_end);
    b.end = end;
    State::fill(
        &mut b.state,
        State::Allocated {
            nodes: SizeNodes { base, extra },
            alloc_end: end,
        },
    );
}

impl SizeTrees {
    /// `nodes` of the allocated segment `[start, end)` with its page-class
    /// node: taken out of the page-class tree if it was parked there, as it
    /// must be before the segment merges with a neighbour or becomes a
    /// hint-only free block. O(log n) for a parked entry (one search), O(1)
    /// otherwise.
    #[inline(always)]
    pub(super) fn unpark(&mut self, mut nodes: SizeNodes, start: u64, end: u64) -> SizeNodes {
        if nodes.base.is_none() {
            nodes.base = self
                .base
                .remove_node(&size_key(end.saturating_sub(start), start))
                .map(RBTreeNode::into_reservation);
        }
        nodes
    }
}
