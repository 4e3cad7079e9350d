// SPDX-License-Identifier: GPL-2.0

//! The commit step of the VA block allocator: carving a placement found by
//! [`super::place`] out of its free blocks, and freeing an allocation with the
//! merges of its free neighbours. No failure paths from here on: the tree
//! nodes needed are in hand before a commit starts, and a free only gives
//! nodes back.
//!
//! n is the number of blocks in the range.

use super::{
    spare::{Piece, SpareCache},
    tree::{take_free_block, Block, BlockNodeRes, Placement, Run, SizeNodes, SizeTrees, State},
    VaAllocator,
};
use crate::asic::VaSpan;
use core::mem;
use kernel::rbtree::{CursorMut, RBTreeNode};

impl VaAllocator {
    /// Move the extra-class node to the spare cache if the allocator has no
    /// extra class. O(1).
    fn own(&mut self, mut nodes: SizeNodes) -> SizeNodes {
        if self.trees.extra.is_none() {
            if let Some(r) = nodes.extra.take() {
                self.spare.stash_size(r);
            }
        }
        nodes
    }

    /// The state of the free block `[start, end)`, linking it if it is searchable.
    /// O(log n).
    #[inline(always)]
    pub(super) fn free_state(&mut self, start: u64, end: u64, nodes: SizeNodes) -> State {
        self.trees.free_state(self.hint_only, start, end, nodes)
    }

    /// Carve the allocation `p` out of its free blocks. O(log n): one search in
    /// the block tree per block of the run, the size-tree updates, and one
    /// insertion per piece cut off.
    ///
    /// The run's blocks become the allocation's segments (their nodes stay in
    /// place); a free front part keeps the first block's node and the allocated
    /// segment gets `head`; a free tail part gets `tail`.
    /// [`super::spare::SpareCache::take_pieces`] gives exactly the pieces
    /// needed; one that is not goes to the spare cache.
    #[inline(always)]
    pub(super) fn commit(&mut self, p: Placement, head: Option<Piece>, tail: Option<Piece>) {
        let Placement {
            start,
            end,
            run,
            mut taken,
        } = p;
        let cut_tail = run.last_end > end;
        for (i, &key) in run.keys.iter().take(run.len).enumerate() {
            let Some(b) = self.blocks.get_mut(&key) else {
                continue;
            };
            let old = mem::replace(&mut b.state, State::VACANT);
            // The run holds free blocks only, whose state always yields nodes;
            // `taken` belongs to the first.
            let taken = mem::replace(&mut taken, SizeNodes::NONE);
            let nodes = self
                .trees
                .take_free(key, b.end, old, taken)
                .unwrap_or(SizeNodes::NONE);
            let state = if i == 0 {
                State::Allocated {
                    nodes,
                    alloc_end: end,
                }
            } else {
                State::Continued(nodes)
            };
            State::fill(&mut b.state, state);
            if cut_tail && i + 1 == run.len && tail.is_some() {
                b.end = end;
            }
        }
        self.free_blocks = self.free_blocks.saturating_sub(run.len);
        self.allocations += 1;

        match tail {
            Some(tail) if cut_tail => self.cut_tail(&run, end, tail),
            Some(unused) => self.spare.stash_piece(unused),
            None => {}
        }
        match head {
            Some(head) if run.first < start => self.cut_head(&run, start, end, head),
            Some(unused) => self.spare.stash_piece(unused),
            None => {}
        }
    }

    /// Insert the free tail `[end, run.last_end)`, which [`Self::commit`] cut
    /// off the allocation's last segment, with the nodes of `tail`. O(log n).
    pub(super) fn cut_tail(&mut self, run: &Run, end: u64, tail: Piece) {
        let nodes = self.own(tail.sizes);
        let state = self.free_state(end, run.last_end, nodes);
        self.blocks.insert(tail.node.into_node(
            end,
            Block {
                end: run.last_end,
                state,
            },
        ));
        self.free_blocks += 1;
    }

    /// Give the free front `[run.first, start)` of the allocation `[start, end)`
    /// back to the first block and move the allocated segment to a block of its
    /// own, with the nodes of `head`. O(log n).
    fn cut_head(&mut self, run: &Run, start: u64, end: u64, head: Piece) {
        let sizes = self.own(head.sizes);
        let Some(b) = self.blocks.get_mut(&run.first) else {
            self.spare.stash_piece(Piece {
                node: head.node,
                sizes,
            });
            return;
        };
        let segment_end = b.end;
        let nodes = match mem::replace(&mut b.state, State::VACANT) {
            State::Allocated { nodes, .. } => nodes,
            other => {
                b.state = other;
                self.spare.stash_piece(Piece {
                    node: head.node,
                    sizes,
                });
                return;
            }
        };
        b.end = start;
        let state = self
            .trees
            .free_state(self.hint_only, run.first, start, nodes);
        State::fill(&mut b.state, state);
        self.blocks.insert(head.node.into_node(
            start,
            Block {
                end: segment_end,
                state: State::Allocated {
                    nodes: sizes,
                    alloc_end: end,
                },
            },
        ));
        self.free_blocks += 1;
    }

    /// Free the allocation `[start, alloc_end)` segment by segment if the block
    /// at `start` is exactly that allocation; `false`, and nothing changes,
    /// otherwise. O(log n).
    #[inline(always)]
    pub(super) fn release(&mut self, start: u64, alloc_end: u64) -> bool {
        let mut key = start;
        let mut first = Some(alloc_end);
        while let Some(segment_end) = self.free_segment(key, first) {
            if first.take().is_some() {
                self.allocations = self.allocations.saturating_sub(1);
            }
            if segment_end >= alloc_end || segment_end <= key {
                break;
            }
            key = segment_end;
        }
        first.is_none()
    }

    /// Make the allocated block at `key` free and merge it with free neighbours
    /// that are not behind an edge of the hint-only span; the nodes a merge
    /// makes surplus go to the spare cache. Returns the block's end before the
    /// merge.
    ///
    /// With `alloc_end`, the block must be the first segment of an allocation
    /// ending there, else a further segment; otherwise it returns `None` and
    /// nothing changes.
    ///
    /// O(log n): one search in the block tree (the neighbours are reached and
    /// removed through its cursor) and the size-tree updates: none for a
    /// segment that parked its page-class entry and merges with nothing (the
    /// common case of an exact fit freed, see `best_fit`), the insertion of its
    /// page-class entry otherwise, plus the removals and insertions of the
    /// merges ([`merge_free`], out of line: the hot path stays short).
    #[inline(always)]
    fn free_segment(&mut self, key: u64, alloc_end: Option<u64>) -> Option<u64> {
        let hint_only = self.hint_only;
        let is_edge = |a: u64| hint_only.is_some_and(|h| a == h.start || a == h.end);
        let mut cur = self.blocks.cursor_lower_bound_mut(&key)?;
        let (&k, b) = cur.current_mut();
        let segment_end = b.end;
        if k != key {
            return None;
        }
        let nodes = take_segment(b, alloc_end)?;
        let is_free = |e: Option<(&u64, &Block)>| e.is_some_and(|(_, b)| b.state.is_free());
        let merges = (!is_edge(segment_end) && is_free(cur.peek_next()))
            || (!is_edge(key) && is_free(cur.peek_prev()))
            || hint_only.is_some_and(|h| h.start <= key && key < h.end);
        if merges {
            let merged = merge_free(cur, &mut self.trees, hint_only, nodes, (key, segment_end))
                .stash(&mut self.spare);
            self.free_blocks = (self.free_blocks + 1).saturating_sub(merged);
        } else {
            // A parked entry is already the free block's entry.
            let state = State::Free(self.trees.link(key, segment_end, nodes));
            let (_, b) = cur.current_mut();
            State::fill(&mut b.state, state);
            self.free_blocks += 1;
        }
        Some(segment_end)
    }
}

/// Free the segment `[key, segment_end)` under `cur`, whose size-tree nodes
/// are `nodes`, merging it with its free neighbours that are not behind an
/// edge of `hint_only` (or making it a hint-only free block): the slow path of
/// [`VaAllocator::free_segment`]. Returns what the merges make surplus, for
/// the spare cache. O(log n): the parked entry's removal, one removal per
/// merged neighbour, the insertion of the merged block, all in the size
/// trees; the block-tree nodes are removed through `cur`.
#[inline(never)]
fn merge_free(
    mut cur: CursorMut<'_, u64, Block>,
    trees: &mut SizeTrees,
    hint_only: Option<VaSpan>,
    mut nodes: SizeNodes,
    (key, segment_end): (u64, u64),
) -> Surplus {
    let is_edge = |a: u64| hint_only.is_some_and(|h| a == h.start || a == h.end);
    // Merged or hint-only, the block's entry changes: a parked one goes.
    nodes = trees.unpark(nodes, key, segment_end);
    let mut surplus = Surplus::NONE;
    let mut end = segment_end;
    if !is_edge(segment_end) {
        if let Some(next) = take_free_block(cur.peek_next_mut()) {
            end = next.1;
            let [keep, rest] = trees.absorb(nodes, next);
            nodes = keep;
            surplus.sizes[0] = rest;
            surplus.blocks[0] = cur.remove_next().map(RBTreeNode::into_reservation);
            surplus.merged += 1;
        }
    }
    let mut start = key;
    if !is_edge(key) {
        if let Some(prev) = take_free_block(cur.peek_prev_mut()) {
            start = prev.0;
            let [keep, rest] = trees.absorb(nodes, prev);
            nodes = keep;
            surplus.sizes[1] = rest;
            surplus.merged += 1;
        }
    }
    let state = trees.free_state(hint_only, start, end, nodes);
    if start == key {
        let (_, b) = cur.current_mut();
        b.end = end;
        State::fill(&mut b.state, state);
    } else {
        if let Some((_, p)) = cur.peek_prev_mut() {
            p.end = end;
            State::fill(&mut p.state, state);
        }
        let (_, node) = cur.remove_current();
        surplus.blocks[1] = Some(node.into_reservation());
    }
    surplus
}

/// The size-tree nodes of the block `b` if it is the segment
/// [`VaAllocator::free_segment`] looks for, leaving `State::VACANT` in their
/// place: with `alloc_end`, the first segment of an allocation ending there,
/// else a further segment. `None`, and `b` unchanged, otherwise. O(1).
#[inline(always)]
fn take_segment(b: &mut Block, alloc_end: Option<u64>) -> Option<SizeNodes> {
    let is_segment = match (&b.state, alloc_end) {
        (State::Allocated { alloc_end: e, .. }, Some(want)) => *e == want,
        (State::Continued(_), None) => true,
        _ => false,
    };
    if !is_segment {
        return None;
    }
    match mem::replace(&mut b.state, State::VACANT) {
        State::Allocated { nodes, .. } | State::Continued(nodes) => Some(nodes),
        other => {
            b.state = other;
            None
        }
    }
}

/// What the merges of a freed segment make surplus, for the spare cache once
/// the block-tree cursor is gone: a block-tree node and a set of size-tree
/// nodes per merge.
struct Surplus {
    /// The block-tree nodes of the next block and of the freed one.
    blocks: [Option<BlockNodeRes>; 2],
    /// The size-tree nodes of the merges with the next and the previous block.
    sizes: [SizeNodes; 2],
    /// Number of merges.
    merged: usize,
}

impl Surplus {
    /// Nothing surplus.
    const NONE: Self = Self {
        blocks: [None, None],
        sizes: [SizeNodes::NONE, SizeNodes::NONE],
        merged: 0,
    };

    /// Give the nodes to `spare`, which keeps what it has room for. Returns
    /// the number of merges. O(1).
    #[inline(always)]
    fn stash(self, spare: &mut SpareCache) -> usize {
        if self.merged > 0 {
            for r in self.blocks.into_iter().flatten() {
                spare.stash_block(r);
            }
            for n in self.sizes {
                spare.stash_sizes(n);
            }
        }
        self.merged
    }
}
