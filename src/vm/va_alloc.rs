// SPDX-License-Identifier: GPL-2.0

//! The VA block allocator of one VA range (upstream `struct hl_va_range` with
//! `get_va_block`, `add_va_block`, `hl_reserve_va_block` and
//! `hl_unreserve_va_block`, common/memory.c:398-821).
//!
//! One [`VaAllocator`] manages one range of device virtual addresses: HOST
//! (4 KiB pages), HOST_HUGE (2 MiB pages) or DRAM (Gaudi2's page of
//! 16 x HBMs x 8 MiB, e.g. 0x3000_0000, which is not a power of two). Every block
//! it hands out is a whole number of pages from the range start.
//!
//! # Design
//!
//! Binder's two-tree best-fit allocator (`drivers/android/binder/range_alloc/tree.rs`)
//! extended with alignment classes, hints and the hint-reserved span:
//!
//! - `blocks`: an [`RBTree`] keyed by start address holding **every** block, free
//!   and allocated, so that they tile the range. Free neighbours are merged.
//! - One size tree per alignment class, keyed `(usable size, start)` (packed
//!   into one `u128`, size in the high half) and holding the searchable free
//!   blocks. The usable size is what is left after aligning the block start to
//!   the class (`valid_size` upstream). The page-size class always exists; at
//!   most one larger power-of-two class (2 MiB in the 4 KiB host range) may be
//!   added. Best fit is then one `cursor_lower_bound` on `(size, 0)`: the
//!   smallest usable size `>= size`, ties to the lowest address, exactly
//!   upstream's choice. The extra class's tree holds only the free blocks that
//!   contain an aligned address (usable size > 0): the others could never be
//!   its answer, since a request is at least one page. Such a block keeps its
//!   extra-class node in its state instead, so small free blocks, the common
//!   case, cost no extra-class tree update when they are allocated or freed.
//! - A size-tree key gives the block's end (start plus length, or aligned
//!   start plus usable size), so best fit does not search the block tree to
//!   place a request; the free merges with its neighbours through one
//!   block-tree cursor. Best fit takes the node it found out of its tree
//!   through the cursor of its search, never through a second search.
//! - **Parked entries** ([`best_fit`]): an allocation that fills a free block
//!   exactly leaves the block's page-class entry `(length, start)` linked in
//!   the size tree and holds no page-class node; freed without a merge, the
//!   free block's entry is already in place. So a repeated allocate+free of
//!   exact fits does no size-tree update at all. While the block is
//!   allocated the entry is *stale*: best fit, which looks its candidate's
//!   block up anyway to allocate it, removes a stale entry through its cursor,
//!   gives its node back to the allocation and takes the next entry in size
//!   order, so the placement is unchanged.
//! - The hint-reserved span (`hints_*_reserved_va_range`), rounded out to whole
//!   pages and called the *hint-only span* here, splits free blocks at its two
//!   edges. Free blocks inside it are kept out of the size trees, so a no-hint
//!   allocation can never land there; a hint still reaches them. An allocation
//!   made by hint across an edge is stored as one segment per side and freed as
//!   a unit.
//! - Every allocated block keeps the size-tree nodes it needs once it is free,
//!   so [`VaAllocator::free`] never allocates and cannot fail for lack of memory;
//!   it does not depend on the spare cache below (an allocation with a parked
//!   entry has its node in the size tree). A request is decided without
//!   touching the blocks and then committed by code with no failure path, so a
//!   failed call changes no block (best fit may have removed stale entries on
//!   the way, which only gives their nodes back to their allocations).
//! - A bounded **spare cache** of tree nodes: nodes that a free, a merge,
//!   [`VaAllocator::clear`] or an allocation's unused reservations give back are
//!   kept, as empty node memory
//!   ([`RBTreeNode::into_reservation`](kernel::rbtree::RBTreeNode::into_reservation)),
//!   in two stacks (block-tree nodes, size-tree nodes) whose capacity is
//!   reserved at construction, so caching never allocates; what does not fit
//!   is freed. An allocation is served from the cache when it covers the nodes
//!   the chosen placement needs ([`VaAllocator::alloc_cached`]); otherwise it reports
//!   [`AllocOutcome::NeedNodes`] without changing anything, and the caller
//!   reserves the worst case with [`VaAllocator::prepare`] (after dropping its
//!   lock) and retries with [`VaAllocator::alloc_with`], which tops the cache up
//!   with what it did not use (Binder's "need alloc, retry" pattern). In a
//!   repeated allocate+free cycle the free gives back the pieces (see below) its
//!   allocation took, so after the first round the cycle does no `kmalloc` or
//!   `kfree`; an exact fit needs no piece at all.
//!
//! # Complexity compared with upstream
//!
//! n is the number of blocks in the range.
//!
//! | operation | upstream (sorted list of free blocks) | here |
//! |---|---|---|
//! | allocate, no hint | O(n) scan for best fit, O(n) more to re-insert the front part | O(log n) amortised, also with the 2 MiB class. Page class, exact fit: one page-class search and one block-tree search, no tree update (the entry is parked; plus one removal in the 2 MiB tree for a block that holds an aligned address); a cut also removes the entry through the search's cursor and inserts the tail (one insertion per tree). Each stale entry met costs one block-tree search and an O(1) amortised removal, and each is met once: O((k + 1) log n) for a request that meets k of them |
//! | allocate with hint | O(n) scan until the hint's block | O(log n) |
//! | free | O(n) overlap scan and insertion | O(log n): one block-tree search (the neighbours through its cursor); no size-tree update for a parked exact fit that merges nothing, else one insertion per size tree that takes the block, one removal per merged neighbour (and one for a parked entry) |
//! | bad-free detection | overlap with free blocks only; allocations are not recorded | exact: start and size must match one allocation |
//! | [`VaAllocator::clear`] | O(n) | O(n log n), and it reports leaked allocations |
//! | tree-node memory per allocate+free | list entries are `kmalloc`ed and `kfree`d as blocks split and merge | none in steady state: taking from or giving to the spare cache is O(1); on a cache miss one [`VaAllocator::prepare`] (six `kmalloc`s, O(1)) and a second O(log n) placement |
//!
//! Memory: one `blocks` node per block plus one size-tree node per class for
//! every block (linked while free and searchable, or parked, held by the block
//! otherwise). An
//! allocation needs at most two *pieces* (a `blocks` node and one size-tree node
//! per class each): one for an allocated part cut off behind a free front, one
//! for a free tail. [`VaAllocator::prepare`] reserves that worst case, two
//! `blocks` nodes and four size-tree nodes (six small `kmalloc`s). A free gives
//! back at most two pieces (a merge on each side).
//!
//! The spare cache holds at most `SPARE_PIECES` (4) pieces: 4 `blocks` nodes
//! and 8 size-tree nodes, enough for two worst-case allocations. A `blocks` node
//! is 72 bytes (`rb_node` 24, key 8, `Block` 40) and a size-tree node 48 bytes
//! (`rb_node` 24, `u128` key 16, padded to the key's 16-byte alignment), i.e.
//! `kmalloc-96` and `kmalloc-64` objects, so a full
//! cache holds 4 x 96 + 8 x 64 = 896 bytes, plus its two stacks of pointers
//! (32 and 64 bytes) allocated once at construction: about 1 KiB per VA range
//! at most, 3 KiB per context.
//!
//! # Cost of the hot path
//!
//! Measured under QEMU TCG on the production-configured kernel (`make
//! bench`, Rust at `-O2`), warm, one allocate+free of a random size class at
//! 100 / 1,000 / 10,000 / 100,000 live blocks, the lock held across the batch
//! (2026-12-04, during issue 23):
//!
//! | part | ns |
//! |---|---|
//! | the whole pair (exact fits, parked) | 467 / 535 / 664 / 943 |
//! | `drm_mm` best fit, the same | 498 / 648 / 829 / 1,326 |
//! | page-class lower-bound search | 71 / 104 / 147 / 233 |
//! | block-tree search | 34 / 45 / 76 / 115 |
//! | block-tree cursor and both neighbours (the free) | 65 / 88 / 128 / 172 |
//! | what parking saves: removing the entry and inserting it back | 181 / 309 / 413 / 562 |
//!
//! So a pair is three searches (best fit, the block to allocate, the block to
//! free), two neighbour steps and about 300 ns of its own code; each call
//! through `ContextVm` adds a mutex lock and unlock (about 75 ns a pair, as
//! for `drm_mm`). Under TCG every out-of-line call and every jump to another
//! page of code costs a lookup of the translated block, so the hot paths are
//! kept short: page-class best fit and a free that merges nothing are inlined
//! into [`VaAllocator::alloc_cached`] and [`VaAllocator::free`] (`#[inline(always)]`),
//! while hints, the 2 MiB class and merges go to out-of-line functions
//! (`alloc_placed`, `merge_free`), and a block's new state is written without
//! the enum's out-of-line drop of the vacant one (`State::fill`).

//! # Differences from upstream, on purpose
//!
//! - A hint whose `[hint, hint + size)` ends exactly on the last byte of a free
//!   block is honoured (upstream tests `hint + size <= inclusive end`: off by one,
//!   spec 7.3 item 14).
//! - A no-hint allocation avoids the hint-reserved span by splitting free blocks
//!   at its edges, so the free part beside the span stays usable. Upstream skips a
//!   whole block when the candidate at its aligned start overlaps the span, and it
//!   does not apply the span at all when a non-zero hint could not be honoured; here
//!   a hint that falls back to best fit also avoids the span.
//! - The best-fit candidates are therefore the free blocks cut at the span edges;
//!   otherwise the choice (smallest usable size, lowest address) is upstream's.
//! - Sizes are rounded up to whole pages for every page size (upstream rounds only
//!   the non-power-of-two DRAM page), with checked arithmetic. Sizes are `u64`
//!   everywhere (upstream cuts the overlap checks to `u32`, spec 7.4 item 24).
//! - Only the alignment classes given at construction are served; other
//!   alignments are rejected rather than searched in O(n).
//! - Allocated blocks are recorded: a free must name exactly one allocation.
//! - Failures are distinct errors ([`VaAllocError`]) instead of "0 means no VA".
//! - No VA is ever lost on an allocation failure (upstream loses the range when
//!   re-inserting the front part fails, spec 7.3 item 11).
//!
//! # Errors
//!
//! | case | [`VaAllocError`] | errno here | upstream |
//! |---|---|---|---|
//! | size 0, or rounding the size up to pages overflows | `InvalidSize` | `EINVAL` | no check (callers never pass 0; an overflowing DRAM rounding wraps) |
//! | alignment not 0 or a power of two, or not an alignment class of the range | `InvalidAlign` | `EINVAL` | no check (any alignment, O(n) search) |
//! | `force_hint` with hint 0 | `NoHint` | `EINVAL` | `ENOMEM` (mem:693-702) |
//! | `force_hint` with a misaligned hint | `MisalignedHint` | `EINVAL` | `ENOMEM` (mem:628-634) |
//! | `force_hint`, `[hint, hint + size)` not inside the range or wrapping | `HintOutOfRange` | `EINVAL` | `ENOMEM` (no block matches) |
//! | `force_hint`, `[hint, hint + size)` not entirely free | `HintInUse` | `EADDRINUSE` | `ENOMEM` (mem:693-702) |
//! | no free block can hold the request | `NoSpace` | `ENOMEM` | `ENOMEM` (mem:687-691) |
//! | reserving tree nodes failed | `NoMemory` | `ENOMEM` | `ENOMEM` |
//! | free/unreserve that is not exactly one allocation | (kernel `Error`) | `EINVAL` | `EINVAL` only when it overlaps a free block or (unreserve) lies in no range; otherwise accepted |
//!
//! Without `force_hint` a misaligned, out-of-range or occupied hint is ignored and
//! the request is placed by best fit, as upstream does. [`VaAllocError::to_errno`]
//! gives the errno of this table, [`VaAllocError::upstream_errno`] upstream's.
//!
//! # Layout
//!
//! - this file: the allocator's public face (its types, construction, the
//!   allocate and free entry points, the views debugfs uses);
//! - [`tree`]: the block tree, the size trees and the size-tree nodes each
//!   block owns;
//! - [`place`]: the decision step, read-only (hints, best fit in the 2 MiB
//!   class), and the allocate entry that dispatches;
//! - [`best_fit`]: best fit in the page class, committed where it is found,
//!   and the parked size-tree entries;
//! - [`commit`]: the commit step, with no failure paths (carving an
//!   allocation out, freeing one with its merges);
//! - [`spare`]: the spare cache of tree nodes;
//! - `test_api`: what only tests and the benchmarks in `crate::bench` use
//!   ([`VaAllocator::alloc`], [`VaAllocator::check_invariants`], ...),
//!   compiled only with KUnit;
//! - `tests`: the KUnit suite `hlrs_va_alloc`.

mod best_fit;
mod commit;
mod place;
mod spare;
#[cfg(CONFIG_KUNIT)]
pub(crate) mod test_api;
#[cfg(CONFIG_KUNIT)]
mod tests;
mod tree;

pub(crate) use self::spare::VaReservations;
use self::{
    spare::{Piece, SpareCache},
    tree::{align_up, Block, ExtraClass, SizeNodes, SizeTrees, State},
};
use crate::asic::VaSpan;
use kernel::{
    alloc::Flags,
    prelude::*,
    rbtree::{RBTree, RBTreeNodeReservation},
};

/// Why an allocation failed. See the table in the module documentation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum VaAllocError {
    /// The size is 0, or rounding it up to whole pages overflows `u64`.
    InvalidSize,
    /// The alignment is neither 0 nor a power of two, or, raised to the page
    /// size, it is not one of the range's alignment classes.
    InvalidAlign,
    /// `force_hint` without a hint (hint 0).
    NoHint,
    /// `force_hint` with a hint that is not aligned.
    MisalignedHint,
    /// `force_hint` with a hint whose `[hint, hint + size)` is not inside the
    /// range (or wraps around).
    HintOutOfRange,
    /// `force_hint` with a hint whose `[hint, hint + size)` is not entirely free.
    HintInUse,
    /// No free block can hold the request.
    NoSpace,
    /// Reserving tree nodes failed (only from the calls that allocate them).
    NoMemory,
}

impl VaAllocError {
    /// The errno this driver returns for the error. O(1).
    pub(crate) fn to_errno(self) -> Error {
        match self {
            Self::InvalidSize
            | Self::InvalidAlign
            | Self::NoHint
            | Self::MisalignedHint
            | Self::HintOutOfRange => EINVAL,
            Self::HintInUse => EADDRINUSE,
            Self::NoSpace | Self::NoMemory => ENOMEM,
        }
    }
}

impl From<VaAllocError> for Error {
    /// The errno of [`VaAllocError::to_errno`]. O(1).
    fn from(e: VaAllocError) -> Self {
        e.to_errno()
    }
}

/// Why [`VaAllocator::alloc_cached`] did not allocate. Either way nothing changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AllocOutcome {
    /// The request cannot be served now: the error [`VaAllocator::alloc_with`]
    /// would return too.
    Failed(VaAllocError),
    /// The request fits, but the spare cache does not hold the tree nodes its
    /// placement needs: reserve them with [`VaAllocator::prepare`] (after
    /// dropping the allocator's lock) and call [`VaAllocator::alloc_with`].
    NeedNodes,
}

impl From<VaAllocError> for AllocOutcome {
    /// [`AllocOutcome::Failed`]. O(1).
    fn from(e: VaAllocError) -> Self {
        Self::Failed(e)
    }
}

/// How to build a [`VaAllocator`]: upstream `va_range_init`'s arguments plus the
/// ASIC's hint rules.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct VaAllocConfig {
    /// The VA range. With a power-of-two page size it is shrunk to whole pages.
    pub(crate) span: VaSpan,
    /// The range's page size; every block is a whole number of pages.
    pub(crate) page_size: u64,
    /// A second alignment class served in O(log n), e.g. 2 MiB in the 4 KiB host
    /// range: a power of two larger than the page size, which must be a power of
    /// two too.
    pub(crate) extra_align: Option<u64>,
    /// The span kept for hint addresses (`hints_*_reserved_va_range`), if any.
    pub(crate) hint_reserved: Option<VaSpan>,
    /// Address bits ignored when the alignment of a hint is checked against a
    /// non-power-of-two page size (upstream `dram_hints_align_mask`; Gaudi2:
    /// `crate::asic::DRAM_HINTS_ALIGN_MASK`, so only the low 48 bits are
    /// checked). Unused for power-of-two page sizes.
    pub(crate) hint_ignored_bits: u64,
}

impl VaAllocConfig {
    /// A range of `page_size` pages with no extra class, no hint-reserved span
    /// and no ignored hint bits. O(1).
    pub(crate) const fn new(span: VaSpan, page_size: u64) -> Self {
        Self {
            span,
            page_size,
            extra_align: None,
            hint_reserved: None,
            hint_ignored_bits: 0,
        }
    }

    /// The same with a second alignment class. O(1).
    pub(crate) const fn with_extra_align(mut self, align: u64) -> Self {
        self.extra_align = Some(align);
        self
    }

    /// The same with a hint-reserved span. O(1).
    pub(crate) const fn with_hint_reserved(mut self, span: VaSpan) -> Self {
        self.hint_reserved = Some(span);
        self
    }

    /// The same with address bits ignored by the hint alignment check. O(1).
    pub(crate) const fn with_hint_ignored_bits(mut self, bits: u64) -> Self {
        self.hint_ignored_bits = bits;
        self
    }
}

/// One allocation request (upstream `get_va_block`'s arguments).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct VaRequest {
    /// Bytes wanted; rounded up to whole pages.
    pub(crate) size: u64,
    /// Alignment: 0 or a power of two, raised to the page size. It must then be
    /// the page size or the range's extra class. Ignored for a non-power-of-two
    /// page size, whose blocks are always aligned to whole pages from the range
    /// start (as upstream ignores it there).
    pub(crate) align: u64,
    /// The wanted start address, or 0 for none.
    pub(crate) hint: u64,
    /// Fail unless the block is placed exactly at `hint` (`HL_MEM_FORCE_HINT`).
    pub(crate) force_hint: bool,
}

impl VaRequest {
    /// `size` bytes anywhere, page aligned. O(1).
    pub(crate) const fn new(size: u64) -> Self {
        Self {
            size,
            align: 0,
            hint: 0,
            force_hint: false,
        }
    }

    /// The same with an alignment. O(1).
    pub(crate) const fn with_align(mut self, align: u64) -> Self {
        self.align = align;
        self
    }

    /// The same, preferably at `hint`. O(1).
    pub(crate) const fn with_hint(mut self, hint: u64) -> Self {
        self.hint = hint;
        self.force_hint = false;
        self
    }

    /// The same, at `hint` or not at all. O(1).
    pub(crate) const fn with_forced_hint(mut self, hint: u64) -> Self {
        self.hint = hint;
        self.force_hint = true;
        self
    }
}

/// The hint-reserved span `r` clipped to `span` and rounded out to whole pages
/// from `span.start`, or `None` when it misses the range. O(1).
fn hint_only_span(span: VaSpan, page: u64, r: VaSpan) -> Result<Option<VaSpan>> {
    let lo = r.start.max(span.start);
    let hi = r.end.min(span.end);
    if lo >= hi {
        return Ok(None);
    }
    let lo = (lo - span.start) / page * page;
    let hi = (hi - span.start)
        .div_ceil(page)
        .checked_mul(page)
        .ok_or(EINVAL)?;
    Ok(Some(VaSpan::new(
        span.start.checked_add(lo).ok_or(EINVAL)?,
        span.start.checked_add(hi).ok_or(EINVAL)?,
    )))
}

/// The VA block allocator of one VA range. See the module documentation.
///
/// The caller serialises access (upstream: `va_range->lock`), e.g. with a
/// `kernel::sync::Mutex`; [`VaAllocator::prepare`] needs no access.
///
/// # Invariants
///
/// - `blocks` tiles `span`: its keys are block starts, the first is `span.start`,
///   every block ends where the next starts, the last ends at `span.end`, and
///   `start < end` for every block.
/// - Every block boundary is a whole number of pages from `span.start`.
/// - No block crosses an edge of `hint_only` (it lies entirely inside or outside).
/// - A free block is `FreeHintOnly` exactly when it lies inside `hint_only`. Each
///   `Free` block has one node in `trees.base`, keyed `(length, start)`. With an
///   extra class, a `Free` block whose `aligned_size(.., align)` is not 0 has
///   one node in `trees.extra`, keyed `(aligned_size(.., align), start)`, and
///   holds none in its state; one whose `aligned_size` is 0 holds its
///   extra-class node in its state (`Free(Some(_))`). Without an extra class,
///   `Free` holds nothing. The size trees hold nothing else, except parked
///   entries: an `Allocated` block whose `nodes.base` is `None` is a whole
///   allocation of one segment outside `hint_only`, and `trees.base` holds its
///   entry `(length, start)` (see [`best_fit`]).
/// - Two free blocks are adjacent only at an edge of `hint_only`: free space is
///   otherwise always merged.
/// - An allocation `[s, e)` is an `Allocated { alloc_end: e }` block at `s`,
///   followed by `Continued` blocks up to `e`; its segments meet only at edges of
///   `hint_only`.
/// - Every block holds or has linked (or parked) one size-tree node per
///   class, ready for when it is free (or merged).
/// - `free_blocks` is the number of free blocks in `blocks`, `allocations` the
///   number of `Allocated` blocks.
/// - `spare` never grows past the capacity reserved at construction (see
///   [`SpareCache`]'s invariants).
pub(crate) struct VaAllocator {
    /// The range, whole pages.
    span: VaSpan,
    /// The page size.
    page_size: u64,
    /// Whether `page_size` is a power of two.
    pow2: bool,
    /// Hint bits ignored by the alignment check (non-power-of-two pages only).
    hint_ignored_bits: u64,
    /// The hint-reserved span as configured (for [`Self::hint_reserved`] and the
    /// tests' [`Self::is_hint_crossing_range`]).
    hint_reserved: Option<VaSpan>,
    /// The hint-reserved span clipped to the range and rounded out to whole pages.
    hint_only: Option<VaSpan>,
    /// Every block, free or allocated, by start address.
    blocks: RBTree<u64, Block>,
    /// The size trees of the searchable free blocks.
    trees: SizeTrees,
    /// Number of allocations.
    allocations: usize,
    /// Number of free blocks in `blocks`.
    free_blocks: usize,
    /// Spare tree nodes (the spare cache), with the counters of
    /// [`test_api::NodeStats`] in KUnit builds.
    spare: SpareCache,
}

impl VaAllocator {
    /// A new allocator with the whole range free (upstream `va_range_init`). O(1).
    ///
    /// With a power-of-two page size the start is rounded up and the end down to
    /// whole pages. With another page size the range must be a whole number of
    /// pages and its start must pass the hint alignment check (the range start is
    /// a valid hint), else `EINVAL`. Also `EINVAL` for a page size of 0, an empty
    /// range and an extra alignment that is not a power of two above a
    /// power-of-two page size. `ENOMEM` if the tree nodes or the (empty) spare
    /// cache cannot be allocated.
    pub(crate) fn new(cfg: &VaAllocConfig) -> Result<Self> {
        let page = cfg.page_size;
        if page == 0 {
            return Err(EINVAL);
        }
        let pow2 = page.is_power_of_two();
        let (start, end) = if pow2 {
            (
                align_up(cfg.span.start, page).ok_or(EINVAL)?,
                cfg.span.end & !(page - 1),
            )
        } else {
            let len = cfg.span.end.checked_sub(cfg.span.start).ok_or(EINVAL)?;
            if len % page != 0 || (cfg.span.start & !cfg.hint_ignored_bits) % page != 0 {
                return Err(EINVAL);
            }
            (cfg.span.start, cfg.span.end)
        };
        if start >= end {
            return Err(EINVAL);
        }
        let extra = match cfg.extra_align {
            None => None,
            Some(align) if pow2 && align.is_power_of_two() && align > page => Some(ExtraClass {
                align,
                tree: RBTree::new(),
            }),
            Some(_) => return Err(EINVAL),
        };
        let span = VaSpan::new(start, end);
        let hint_only = match cfg.hint_reserved {
            Some(r) => hint_only_span(span, page, r)?,
            None => None,
        };
        let mut this = Self {
            span,
            page_size: page,
            pow2,
            hint_ignored_bits: cfg.hint_ignored_bits,
            hint_reserved: cfg.hint_reserved,
            hint_only,
            blocks: RBTree::new(),
            trees: SizeTrees {
                base: RBTree::new(),
                extra,
            },
            allocations: 0,
            free_blocks: 0,
            spare: SpareCache::new()?,
        };
        // The free range, cut at the edges of the hint-only span.
        let pieces = match hint_only {
            Some(h) => [(start, h.start), (h.start, h.end), (h.end, end)],
            None => [(start, end), (end, end), (end, end)],
        };
        let has_extra = this.trees.extra.is_some();
        for (s, e) in pieces {
            if s < e {
                let node = RBTreeNodeReservation::new(GFP_KERNEL)?;
                let nodes = SizeNodes::new(GFP_KERNEL, has_extra)?;
                let state = this.free_state(s, e, nodes);
                this.blocks
                    .insert(node.into_node(s, Block { end: e, state }));
                this.free_blocks += 1;
                this.spare.count_fresh(this.classes() + 1);
            }
        }
        Ok(this)
    }

    /// The range (whole pages). O(1).
    pub(crate) fn span(&self) -> VaSpan {
        self.span
    }

    /// The page size. O(1).
    pub(crate) fn page_size(&self) -> u64 {
        self.page_size
    }

    /// The hint-reserved span as configured. O(1).
    pub(crate) fn hint_reserved(&self) -> Option<VaSpan> {
        self.hint_reserved
    }

    /// Reserve the tree nodes any one allocation may need: two block-tree nodes
    /// and their size-tree nodes for two alignment classes
    /// ([`VaReservations::NODES`] small `kmalloc`s). O(1).
    ///
    /// Needs no access to the allocator, so it can run before the caller takes
    /// the allocator's lock. `ENOMEM` if the memory cannot be allocated.
    pub(crate) fn prepare(flags: Flags) -> Result<VaReservations> {
        Ok(VaReservations {
            head: Piece::new(flags)?,
            tail: Piece::new(flags)?,
        })
    }

    /// Allocate a block with tree nodes from the spare cache only; never
    /// allocates or frees memory. O(log n).
    ///
    /// The placement and the errors are those of [`Self::alloc_with`], as
    /// [`AllocOutcome::Failed`]. If the request fits but the cache does not hold
    /// the nodes its placement needs, [`AllocOutcome::NeedNodes`]: nothing
    /// changed, and the caller reserves nodes with [`Self::prepare`] (dropping
    /// its lock meanwhile if it likes) and calls [`Self::alloc_with`], which
    /// places the request afresh. An exact fit needs no node, a cut one piece
    /// (two for an allocated part behind a free front).
    pub(crate) fn alloc_cached(&mut self, req: VaRequest) -> Result<u64, AllocOutcome> {
        self.allocate(&req, None)
    }

    /// Allocate a block using nodes reserved by [`Self::prepare`]; never
    /// allocates memory. O(log n).
    ///
    /// The size is rounded up to whole pages. A hint that is aligned and whose
    /// whole `[hint, hint + size)` is free (including when it ends exactly at the
    /// end of a free block) is honoured exactly. Otherwise, without
    /// `force_hint`, the block goes where best fit puts it: at the aligned start
    /// of the free block with the smallest usable size, ties to the lowest
    /// address, never inside the hint-only span. With `force_hint` anything but
    /// the hint fails. The errors are listed in the module documentation. On
    /// failure the block state does not change.
    ///
    /// The nodes of `res` the allocation does not use (all of them on failure)
    /// go to the spare cache while it has room, and are freed otherwise.
    pub(crate) fn alloc_with(
        &mut self,
        req: VaRequest,
        res: VaReservations,
    ) -> Result<u64, VaAllocError> {
        self.spare.count_fresh(VaReservations::NODES);
        // Two fresh pieces cover any placement, so `NeedNodes` cannot happen.
        self.allocate(&req, Some(res)).map_err(|o| match o {
            AllocOutcome::Failed(e) => e,
            AllocOutcome::NeedNodes => VaAllocError::NoMemory,
        })
    }

    /// Free the allocation at `start` (upstream `add_va_block`); it merges with
    /// its free neighbours. O(log n); never allocates memory and never fails for
    /// lack of it: the allocation carries the size-tree nodes its free block
    /// needs, and a merge only gives nodes back (to the spare cache, or freed
    /// when it is full).
    ///
    /// `size` is rounded up to whole pages like the request was, so the
    /// requested or the rounded size both work. `EINVAL`, and nothing changes,
    /// unless `[start, start + size)` is exactly one allocation: a double free,
    /// a wrong size, a part of or more than an allocation, free space or an
    /// address outside the range all fail.
    pub(crate) fn free(&mut self, start: u64, size: u64) -> Result {
        let size = self.round_size(size).ok_or(EINVAL)?;
        let end = start.checked_add(size).ok_or(EINVAL)?;
        if self.release(start, end) {
            Ok(())
        } else {
            Err(EINVAL)
        }
    }

    /// Free every allocation, leaving the range as [`Self::new`] made it (upstream
    /// `clear_va_list_locked` drops the list instead). Returns how many
    /// allocations were still live, for teardown warnings. O(n log n); never
    /// allocates memory. The nodes it gives back refill the spare cache.
    pub(crate) fn clear(&mut self) -> usize {
        let mut count = 0;
        let mut key = self.span.start;
        while let Some(b) = self.blocks.get(&key) {
            let mut next = b.end;
            if let State::Allocated { alloc_end, .. } = b.state {
                if self.release(key, alloc_end) {
                    count += 1;
                }
                // The freed space may have merged with the free block after it.
                if let Some((_, end, _)) = self.block_containing(key) {
                    next = end;
                }
            }
            if next <= key {
                break;
            }
            key = next;
        }
        count
    }

    /// Whether the whole range is free again, as after [`Self::new`]: teardown
    /// checks this (upstream `va_range_fini` does not). O(1).
    pub(crate) fn is_pristine(&self) -> bool {
        self.allocations == 0
    }

    /// Number of allocations. O(1).
    pub(crate) fn allocated_blocks(&self) -> usize {
        self.allocations
    }

    /// Number of free blocks as upstream counts them: free space on both sides
    /// of an edge of the hint-only span is one block. O(log n).
    pub(crate) fn free_blocks(&self) -> usize {
        let mut n = self.free_blocks;
        if let Some(h) = self.hint_only {
            for edge in [h.start, h.end] {
                let after = self.blocks.get(&edge).is_some_and(|b| b.state.is_free());
                if after && matches!(self.block_before(edge), Some((_, _, true))) {
                    n = n.saturating_sub(1);
                }
            }
        }
        n
    }

    /// Call `f(start, end, is_free)` for every block in address order, as
    /// upstream's list would show them (`print_va_list_locked`, for debugfs):
    /// maximal free blocks and whole allocations, `end` exclusive. O(n).
    pub(crate) fn for_each_block(&self, mut f: impl FnMut(u64, u64, bool)) {
        let mut run: Option<(u64, u64)> = None;
        for (&start, b) in self.blocks.iter() {
            match &b.state {
                State::Free(_) | State::FreeHintOnly(_) => {
                    run = match run {
                        Some((s, e)) if e == start => Some((s, b.end)),
                        other => {
                            if let Some((s, e)) = other {
                                f(s, e, true);
                            }
                            Some((start, b.end))
                        }
                    };
                }
                State::Allocated { alloc_end, .. } => {
                    if let Some((s, e)) = run.take() {
                        f(s, e, true);
                    }
                    f(start, *alloc_end, false);
                }
                State::Continued(_) => {}
            }
        }
        if let Some((s, e)) = run {
            f(s, e, true);
        }
    }

    /// Number of alignment classes: size-tree nodes per block. O(1).
    #[inline(always)]
    fn classes(&self) -> usize {
        1 + usize::from(self.trees.extra.is_some())
    }
}
