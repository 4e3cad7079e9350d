// SPDX-License-Identifier: GPL-2.0

//! The VA block allocator's API for tests and benchmarks only, compiled only
//! with KUnit: allocating with nodes reserved under the caller's lock
//! ([`VaAllocator::alloc`], upstream `get_va_block`) and failures injected
//! into that reservation, upstream's reserve/unreserve pair, the tree-node
//! counters, upstream's errnos and hint-span check, and the invariant check.
//! The driver itself allocates through `ContextVm::alloc`, which reserves
//! nodes with the range's lock dropped.
//!
//! n is the number of blocks in the range.

use super::{
    spare::{SPARE_BLOCK_NODES, SPARE_SIZE_NODES},
    tree::{aligned_size, size_key, SizeNodes, State},
    AllocOutcome, VaAllocError, VaAllocator, VaRequest, VaReservations,
};
use crate::asic::VaSpan;
use kernel::prelude::*;

impl VaAllocError {
    /// The errno upstream returns in the same case: `get_va_block` reports every
    /// failure as address 0, which its callers turn into `ENOMEM` (mem:1178-1182).
    /// O(1).
    pub(crate) fn upstream_errno(self) -> Error {
        ENOMEM
    }
}

/// Tree-node memory counters of one allocator ([`VaAllocator::node_stats`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct NodeStats {
    /// Node reservations allocated for the allocator: those of its construction
    /// plus [`VaReservations::NODES`] for every [`VaAllocator::alloc_with`].
    pub(crate) fresh: usize,
    /// Nodes freed since construction because the spare cache was full.
    pub(crate) freed: usize,
    /// Spare block-tree nodes in the cache now.
    pub(crate) spare_block_nodes: usize,
    /// Spare size-tree nodes in the cache now.
    pub(crate) spare_size_nodes: usize,
}

impl VaAllocator {
    /// The part of the range only hints can reach: the hint-reserved span clipped
    /// to the range and rounded out to whole pages. O(1).
    pub(crate) fn hint_only_span(&self) -> Option<VaSpan> {
        self.hint_only
    }

    /// Allocate a block (upstream `get_va_block`) from the spare cache, or, when
    /// it does not cover the request, with nodes reserved by [`Self::prepare`]
    /// with `GFP_KERNEL` (under the caller's lock, if it holds one). O(log n).
    ///
    /// Returns the block's start. See [`Self::alloc_with`] for the placement and
    /// the errors; `NoMemory` if the reservation fails, and then nothing changes.
    pub(crate) fn alloc(&mut self, req: VaRequest) -> Result<u64, VaAllocError> {
        self.alloc_or_reserve(req, || Self::prepare(GFP_KERNEL))
    }

    /// [`Self::alloc`] with `reserve` in place of [`Self::prepare`]; it is called
    /// only on a cache miss (tests inject failures and count calls with it).
    /// O(log n).
    pub(super) fn alloc_or_reserve(
        &mut self,
        req: VaRequest,
        reserve: impl FnOnce() -> Result<VaReservations>,
    ) -> Result<u64, VaAllocError> {
        match self.alloc_cached(req) {
            Ok(start) => Ok(start),
            Err(AllocOutcome::Failed(e)) => Err(e),
            Err(AllocOutcome::NeedNodes) => {
                let res = reserve().map_err(|_| VaAllocError::NoMemory)?;
                self.alloc_with(req, res)
            }
        }
    }

    /// Reserve a block with no hint (upstream `hl_reserve_va_block`): `alloc`
    /// with the alignment raised to the page size. O(log n).
    pub(crate) fn reserve(&mut self, size: u64, align: u64) -> Result<u64, VaAllocError> {
        self.alloc(VaRequest::new(size).with_align(align))
    }

    /// Give back a block from [`Self::reserve`] (upstream `hl_unreserve_va_block`):
    /// the same as [`Self::free`], including for a block that ends on the range's
    /// last byte. O(log n).
    pub(crate) fn unreserve(&mut self, start: u64, size: u64) -> Result {
        self.free(start, size)
    }

    /// The tree-node memory counters: reservations allocated, nodes freed for
    /// want of room in the spare cache, and the cache's content. O(1).
    pub(crate) fn node_stats(&self) -> NodeStats {
        NodeStats {
            fresh: self.spare.fresh,
            freed: self.spare.freed,
            spare_block_nodes: self.spare.blocks.len(),
            spare_size_nodes: self.spare.sizes.len(),
        }
    }

    /// Whether `[addr, addr + size)` overlaps the hint-reserved span as configured
    /// (upstream `is_hint_crossing_range`, with a full 64-bit size). O(1).
    pub(crate) fn is_hint_crossing_range(&self, addr: u64, size: u64) -> bool {
        self.hint_reserved.is_some_and(|r| r.overlaps(addr, size))
    }

    /// Check every invariant of the type; for tests and debugging. O(n log n).
    pub(crate) fn check_invariants(&self) -> bool {
        let mut expect = self.span.start;
        let mut free = 0usize;
        let mut allocs = 0usize;
        let mut linked = 0usize;
        let mut linked_extra = 0usize;
        let mut prev_free = false;
        // End of the allocation whose segments are being walked.
        let mut open: Option<u64> = None;
        for (&start, b) in self.blocks.iter() {
            if start != expect || b.end <= start || b.end > self.span.end {
                return false;
            }
            if (b.end - self.span.start) % self.page_size != 0 {
                return false;
            }
            if let Some(h) = self.hint_only {
                if (start < h.start && h.start < b.end) || (start < h.end && h.end < b.end) {
                    return false;
                }
            }
            let ok = match &b.state {
                State::Free(held) => {
                    linked += 1;
                    if held.is_none() && self.trees.extra.is_some() {
                        linked_extra += 1;
                    }
                    open.is_none()
                        && !self.in_hint_only(start)
                        && self.is_linked(start, b.end, held.is_some())
                }
                State::FreeHintOnly(n) => {
                    open.is_none() && self.in_hint_only(start) && self.nodes_complete(n)
                }
                State::Allocated { nodes, alloc_end } => {
                    allocs += 1;
                    // Parked: its page-class entry is still in the tree.
                    linked += usize::from(nodes.base.is_none());
                    let ok = open.is_none() && self.allocation_ok(start, b.end, nodes, *alloc_end);
                    open = Some(*alloc_end);
                    ok
                }
                State::Continued(n) => {
                    open.is_some_and(|e| b.end <= e)
                        && self.is_edge(start)
                        && self.nodes_complete(n)
                }
            };
            if !ok {
                return false;
            }
            if open == Some(b.end) {
                open = None;
            }
            let is_free = b.state.is_free();
            if is_free {
                free += 1;
                if prev_free && !self.is_edge(start) {
                    return false;
                }
            }
            prev_free = is_free;
            expect = b.end;
        }
        expect == self.span.end
            && self.spare.blocks.len() <= SPARE_BLOCK_NODES
            && self.spare.sizes.len() <= SPARE_SIZE_NODES
            && open.is_none()
            && free == self.free_blocks
            && allocs == self.allocations
            && self.trees.base.iter().count() == linked
            && self
                .trees
                .extra
                .as_ref()
                .is_none_or(|x| x.tree.iter().count() == linked_extra)
    }

    /// Whether `addr` lies inside the hint-only span. O(1).
    fn in_hint_only(&self, addr: u64) -> bool {
        self.hint_only
            .is_some_and(|h| h.start <= addr && addr < h.end)
    }

    /// Whether `addr` is an edge of the hint-only span. O(1).
    fn is_edge(&self, addr: u64) -> bool {
        self.hint_only
            .is_some_and(|h| addr == h.start || addr == h.end)
    }

    /// Whether the free block `[start, end)` is in every size tree.
    /// `held`: whether the block holds its extra-class node, which it must
    /// exactly when the extra class exists and the block has no aligned piece.
    /// O(log n).
    fn is_linked(&self, start: u64, end: u64, held: bool) -> bool {
        self.trees.base.get(&size_key(end - start, start)).is_some()
            && match self.trees.extra.as_ref() {
                None => !held,
                Some(x) => match aligned_size(start, end, x.align) {
                    0 => held,
                    usable => !held && x.tree.get(&size_key(usable, start)).is_some(),
                },
            }
    }

    /// Whether the first segment `[start, end)` of the allocation ending at
    /// `alloc_end` holds `nodes` as it should: one node per class, or with its
    /// page-class entry parked in the page-class tree (see `best_fit`), which
    /// only a single-segment allocation outside the hint-only span does.
    /// O(log n).
    fn allocation_ok(&self, start: u64, end: u64, nodes: &SizeNodes, alloc_end: u64) -> bool {
        alloc_end >= end
            && if nodes.base.is_none() {
                alloc_end == end
                    && !self.in_hint_only(start)
                    && self.trees.base.get(&size_key(end - start, start)).is_some()
                    && nodes.extra.is_some() == self.trees.extra.is_some()
            } else {
                self.nodes_complete(nodes)
            }
    }

    /// Whether `n` holds one node per class. O(1).
    fn nodes_complete(&self, n: &SizeNodes) -> bool {
        n.base.is_some() && n.extra.is_some() == self.trees.extra.is_some()
    }
}
