// SPDX-License-Identifier: GPL-2.0

//! The trees of the VA block allocator ([`super::VaAllocator`]): the block
//! tree, which holds every block by start address, and the size trees, one per
//! alignment class, which hold the searchable free blocks by `(usable size,
//! start)`. Also the per-block size-tree nodes and their key arithmetic.
//!
//! n is the number of blocks in the range.

use crate::asic::VaSpan;
use core::mem;
use kernel::{
    alloc::Flags,
    prelude::*,
    rbtree::{RBTree, RBTreeNode, RBTreeNodeReservation},
};

/// Key of the size trees: the usable size for the tree's alignment class in
/// the high 64 bits, the block start in the low 64 ([`size_key`]), so that one
/// integer comparison orders by size, then address.
pub(super) type SizeKey = u128;
/// A size tree: the searchable free blocks of one alignment class.
pub(super) type SizeTree = RBTree<SizeKey, ()>;
/// Memory for one size-tree node.
pub(super) type SizeNodeRes = RBTreeNodeReservation<SizeKey, ()>;
/// Memory for one node of the block tree.
pub(super) type BlockNodeRes = RBTreeNodeReservation<u64, Block>;

/// The size-tree nodes one block owns, one per alignment class.
///
/// `None` only where the allocator has no extra class; a block missing a node
/// (which the invariants rule out) would only be left out of that size tree.
pub(super) struct SizeNodes {
    /// The page class's node.
    pub(super) base: Option<SizeNodeRes>,
    /// The extra class's node.
    pub(super) extra: Option<SizeNodeRes>,
}

impl SizeNodes {
    /// No nodes.
    pub(super) const NONE: Self = Self {
        base: None,
        extra: None,
    };

    /// Fresh nodes for the page class and, if `extra`, the extra class: one or
    /// two `kmalloc`s, O(1).
    pub(super) fn new(flags: Flags, extra: bool) -> Result<Self> {
        Ok(Self {
            base: Some(RBTreeNodeReservation::new(flags)?),
            extra: if extra {
                Some(RBTreeNodeReservation::new(flags)?)
            } else {
                None
            },
        })
    }
}

/// What a block is.
pub(super) enum State {
    /// Free and outside the hint-only span: linked in the page-class tree and,
    /// when it holds a piece aligned to the extra class, in that class's tree;
    /// otherwise it holds the extra-class node here.
    Free(Option<SizeNodeRes>),
    /// Free and inside the hint-only span: reachable by hint only, so not in the
    /// size trees; holds its size-tree nodes.
    FreeHintOnly(SizeNodes),
    /// The first (usually only) segment of the allocation `[start, alloc_end)`,
    /// with its size-tree nodes; `nodes.base` is `None` while its page-class
    /// entry is parked in the page-class tree (see `super::best_fit`).
    Allocated { nodes: SizeNodes, alloc_end: u64 },
    /// A further segment of the allocation that starts in the block before: an
    /// allocation made by hint across an edge of the hint-only span.
    Continued(SizeNodes),
}

impl State {
    /// Whether the block is free (searchable or hint-only). O(1).
    pub(super) fn is_free(&self) -> bool {
        matches!(self, Self::Free(_) | Self::FreeHintOnly(_))
    }

    /// A free state holding no node, to put in a block while its state is
    /// moved out.
    pub(super) const VACANT: Self = Self::Free(None);

    /// Put `new` in `slot`, which normally holds [`Self::VACANT`] (its state was
    /// moved out to be changed). Dropping a vacant state frees nothing, so it
    /// is skipped: a plain assignment calls the enum's out-of-line drop glue,
    /// one call per block update on the hot paths. Anything else that was in
    /// `slot` is dropped as usual. O(1).
    #[inline(always)]
    pub(super) fn fill(slot: &mut Self, new: Self) {
        let old = mem::replace(slot, new);
        if let Self::Free(None) = old {
            // Holds no node: nothing to free.
            mem::forget(old);
        } else {
            drop(old);
        }
    }
}

/// One block `[start, end)`; the start is its key in the block tree.
pub(super) struct Block {
    /// The block's end (exclusive).
    pub(super) end: u64,
    /// Free or allocated, with the size-tree nodes it holds.
    pub(super) state: State,
}

/// The second alignment class and its size tree.
pub(super) struct ExtraClass {
    /// The class's alignment, a power of two above the page size.
    pub(super) align: u64,
    /// The free blocks holding an aligned address, by `(usable size, start)`.
    pub(super) tree: SizeTree,
}

/// The size trees: where best fit searches.
///
/// Kept apart from the block tree so that a cursor on the block tree and these
/// trees can be used at the same time.
pub(super) struct SizeTrees {
    /// Searchable free blocks by `(length, start)`: the page class.
    pub(super) base: SizeTree,
    /// The extra alignment class, if any.
    pub(super) extra: Option<ExtraClass>,
}

impl SizeTrees {
    /// Link the free block `[start, end)`: into the page-class tree, and into
    /// the extra class's tree when it holds an aligned piece. Returns the
    /// extra-class node it did not link, which the block keeps. O(log n).
    #[inline(always)]
    pub(super) fn link(&mut self, start: u64, end: u64, nodes: SizeNodes) -> Option<SizeNodeRes> {
        if let Some(r) = nodes.base {
            self.base
                .insert(r.into_node(size_key(end.saturating_sub(start), start), ()));
        }
        match (self.extra.as_mut(), nodes.extra) {
            (Some(x), Some(r)) => {
                let usable = aligned_size(start, end, x.align);
                if usable == 0 {
                    return Some(r);
                }
                x.tree.insert(r.into_node(size_key(usable, start), ()));
                None
            }
            (_, r) => r,
        }
    }

    /// Unlink the free block `[start, end)`, which holds `held` (its
    /// [`State::Free`] node), keeping the nodes. `taken` are the nodes already
    /// taken out of their trees (best fit removes the one it found through its
    /// search cursor): a tree whose node is there is not searched. O(log n):
    /// one search per size tree still holding the block, none for an exact
    /// fit found by best fit.
    #[inline(always)]
    pub(super) fn unlink(
        &mut self,
        start: u64,
        end: u64,
        held: Option<SizeNodeRes>,
        taken: SizeNodes,
    ) -> SizeNodes {
        let base = match taken.base {
            Some(r) => Some(r),
            None => self
                .base
                .remove_node(&size_key(end.saturating_sub(start), start))
                .map(RBTreeNode::into_reservation),
        };
        let extra = extra_node(held.or(taken.extra), self.extra.as_mut(), start, end);
        SizeNodes { base, extra }
    }

    /// The state of the free block `[start, end)`, linking it unless it lies in
    /// `hint_only`. O(log n).
    #[inline(always)]
    pub(super) fn free_state(
        &mut self,
        hint_only: Option<VaSpan>,
        start: u64,
        end: u64,
        nodes: SizeNodes,
    ) -> State {
        if hint_only.is_some_and(|h| h.start <= start && start < h.end) {
            State::FreeHintOnly(nodes)
        } else {
            State::Free(self.link(start, end, nodes))
        }
    }

    /// Unlink the free neighbour `(start, end, state)` of a block being freed
    /// and merge its nodes with the block's `nodes`: `[kept, surplus]` as
    /// [`merge_sizes`] gives them. O(log n).
    #[inline(always)]
    pub(super) fn absorb(
        &mut self,
        nodes: SizeNodes,
        (start, end, state): (u64, u64, State),
    ) -> [SizeNodes; 2] {
        // A free block's state always yields its nodes.
        let other = self
            .take_free(start, end, state, SizeNodes::NONE)
            .unwrap_or(SizeNodes::NONE);
        merge_sizes(nodes, other)
    }

    /// The size-tree nodes of the free block `[start, end)` whose state was
    /// `state`, unlinking it (`taken`: its nodes already out of their trees,
    /// see [`Self::unlink`]); `Err(state)` if it was not free. O(log n).
    #[inline(always)]
    pub(super) fn take_free(
        &mut self,
        start: u64,
        end: u64,
        state: State,
        taken: SizeNodes,
    ) -> Result<SizeNodes, State> {
        match state {
            State::Free(held) => Ok(self.unlink(start, end, held, taken)),
            State::FreeHintOnly(nodes) => Ok(nodes),
            other => Err(other),
        }
    }
}

/// The extra-class node of the free block `[start, end)`: `held` if it holds
/// it (or it was already taken out), else taken out of the tree of `extra`.
/// `None` without an extra class. O(log n) when the tree is searched, O(1)
/// otherwise.
#[inline(always)]
pub(super) fn extra_node(
    held: Option<SizeNodeRes>,
    extra: Option<&mut ExtraClass>,
    start: u64,
    end: u64,
) -> Option<SizeNodeRes> {
    match (held, extra) {
        (Some(r), _) => Some(r),
        (None, Some(x)) => x
            .tree
            .remove_node(&size_key(aligned_size(start, end, x.align), start))
            .map(RBTreeNode::into_reservation),
        (None, None) => None,
    }
}

/// The size-tree key of a block of usable size `size` at `start`. O(1).
#[inline(always)]
pub(super) const fn size_key(size: u64, start: u64) -> SizeKey {
    ((size as u128) << 64) | start as u128
}

/// The usable size and the start of a size-tree key. O(1).
#[inline(always)]
pub(super) const fn key_parts(key: SizeKey) -> (u64, u64) {
    ((key >> 64) as u64, key as u64)
}

/// `x` rounded up to `align` (a power of two), or `None` on overflow. O(1).
#[inline(always)]
pub(super) fn align_up(x: u64, align: u64) -> Option<u64> {
    let mask = align.checked_sub(1)?;
    Some(x.checked_add(mask)? & !mask)
}

/// What `[start, end)` offers an allocation aligned to `align` (a power of two):
/// `end - align_up(start)`, or 0 when nothing aligned fits. O(1).
#[inline(always)]
pub(super) fn aligned_size(start: u64, end: u64, align: u64) -> u64 {
    match align_up(start, align) {
        Some(a) if a < end => end - a,
        _ => 0,
    }
}

/// `(start, end, state)` of the block seen through a cursor when it is free,
/// with its state moved out (`State::VACANT` left behind); `None` when there is
/// no block or it is not free. O(1).
#[inline(always)]
pub(super) fn take_free_block(entry: Option<(&u64, &mut Block)>) -> Option<(u64, u64, State)> {
    let (&start, b) = entry?;
    b.state
        .is_free()
        .then(|| (start, b.end, mem::replace(&mut b.state, State::VACANT)))
}

/// The size-tree nodes of two blocks merged into one: `[kept, surplus]`, one
/// node per class kept (those of `a` first). O(1).
pub(super) fn merge_sizes(a: SizeNodes, b: SizeNodes) -> [SizeNodes; 2] {
    let (base, base_rest) = match (a.base, b.base) {
        (Some(x), rest) => (Some(x), rest),
        (None, x) => (x, None),
    };
    let (extra, extra_rest) = match (a.extra, b.extra) {
        (Some(x), rest) => (Some(x), rest),
        (None, x) => (x, None),
    };
    [
        SizeNodes { base, extra },
        SizeNodes {
            base: base_rest,
            extra: extra_rest,
        },
    ]
}

/// Largest number of blocks an allocation can cover: the hint-only span has two
/// edges, so a free run is at most three blocks long.
pub(super) const MAX_RUN: usize = 3;

/// The free blocks an allocation takes, in address order (read-only plan).
pub(super) struct Run {
    /// The starts of the blocks, `len` of them.
    pub(super) keys: [u64; MAX_RUN],
    /// Number of blocks.
    pub(super) len: usize,
    /// The start of the first block.
    pub(super) first: u64,
    /// The start of the last block.
    pub(super) last: u64,
    /// The end of the last block.
    pub(super) last_end: u64,
}

impl Run {
    /// The run of the one block `[start, end)`. O(1).
    pub(super) fn new(start: u64, end: u64) -> Self {
        Self {
            keys: [start; MAX_RUN],
            len: 1,
            first: start,
            last: start,
            last_end: end,
        }
    }

    /// Append the block `[start, end)`; `false` if the run is full. O(1).
    pub(super) fn push(&mut self, start: u64, end: u64) -> bool {
        match self.keys.get_mut(self.len) {
            Some(k) => {
                *k = start;
                self.len += 1;
                self.last = start;
                self.last_end = end;
                true
            }
            None => false,
        }
    }
}

/// Where an allocation goes: `[start, end)` inside the free blocks of `run`.
pub(super) struct Placement {
    /// The allocation's start.
    pub(super) start: u64,
    /// The allocation's end (exclusive).
    pub(super) end: u64,
    /// The free blocks it takes.
    pub(super) run: Run,
    /// The size-tree nodes of the run's first block already taken out of
    /// their trees: the one best fit found, removed through its search cursor;
    /// none for a placement at a hint.
    pub(super) taken: SizeNodes,
}
