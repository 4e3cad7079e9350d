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
//!   start plus usable size), so best fit does not search the block tree; the
//!   free merges with its neighbours through one block-tree cursor.
//! - The hint-reserved span (`hints_*_reserved_va_range`), rounded out to whole
//!   pages and called the *hint-only span* here, splits free blocks at its two
//!   edges. Free blocks inside it are kept out of the size trees, so a no-hint
//!   allocation can never land there; a hint still reaches them. An allocation
//!   made by hint across an edge is stored as one segment per side and freed as
//!   a unit.
//! - Every allocated block keeps the size-tree nodes it needs once it is free,
//!   so [`VaAllocator::free`] never allocates and cannot fail for lack of memory;
//!   it does not depend on the spare cache below. A request is decided without
//!   touching the state and then committed by code with no failure path, so a
//!   failed call changes nothing.
//! - A bounded **spare cache** of tree nodes: nodes that a free, a merge,
//!   [`VaAllocator::clear`] or an allocation's unused reservations give back are
//!   kept, as empty node memory ([`RBTreeNode::into_reservation`]), in two stacks
//!   (block-tree nodes, size-tree nodes) whose capacity is reserved at
//!   construction, so caching never allocates; what does not fit is freed. An
//!   allocation is served from the cache when it covers the nodes the chosen
//!   placement needs ([`VaAllocator::alloc_cached`]); otherwise it reports
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
//! | allocate, no hint | O(n) scan for best fit, O(n) more to re-insert the front part | O(log n), also with the 2 MiB class: an exact fit is one search and one removal in the page-class tree and one block-tree search (plus one removal in the 2 MiB tree for a block that holds an aligned address) |
//! | allocate with hint | O(n) scan until the hint's block | O(log n) |
//! | free | O(n) overlap scan and insertion | O(log n): one block-tree search (the neighbours through its cursor), one insertion per size tree that takes the block, one removal per merged neighbour |
//! | bad-free detection | overlap with free blocks only; allocations are not recorded | exact: start and size must match one allocation |
//! | [`VaAllocator::clear`] | O(n) | O(n log n), and it reports leaked allocations |
//! | tree-node memory per allocate+free | list entries are `kmalloc`ed and `kfree`d as blocks split and merge | none in steady state: taking from or giving to the spare cache is O(1); on a cache miss one [`VaAllocator::prepare`] (six `kmalloc`s, O(1)) and a second O(log n) placement |
//!
//! Memory: one `blocks` node per block plus one size-tree node per class for
//! every block (linked while free and searchable, held spare otherwise). An
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
//! The kernel builds Rust with `opt-level=s` (`CONFIG_CC_OPTIMIZE_FOR_SIZE`):
//! left to the compiler, the decide and commit steps were separate calls that
//! moved the 72-byte `Placement` and the pieces through `memcpy`, and an
//! allocate+free pair, lock aside, cost 2.2 us under QEMU TCG at 100 live
//! blocks (`drm_mm`: about 1.0 us), of which the tree searches were about
//! 0.5 us; inlined, it costs 1.05 us. The steps of [`VaAllocator::alloc_cached`],
//! [`VaAllocator::alloc_with`] and [`VaAllocator::free`] are therefore
//! `#[inline(always)]` (each has one to five call sites).
//!
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
type SizeKey = u128;
/// A size tree: the searchable free blocks of one alignment class.
type SizeTree = RBTree<SizeKey, ()>;
/// Memory for one size-tree node.
type SizeNodeRes = RBTreeNodeReservation<SizeKey, ()>;
/// Memory for one node of the block tree.
type BlockNodeRes = RBTreeNodeReservation<u64, Block>;

/// Largest number of blocks an allocation can cover: the hint-only span has two
/// edges, so a free run is at most three blocks long.
const MAX_RUN: usize = 3;

/// Capacity of the spare cache in pieces (a block-tree node and one size-tree
/// node per alignment class each): two worst-case allocations. An allocation
/// takes at most two pieces and a free gives back at most two.
const SPARE_PIECES: usize = 4;
/// Spare block-tree nodes kept at most.
const SPARE_BLOCK_NODES: usize = SPARE_PIECES;
/// Spare size-tree nodes kept at most (two alignment classes at most).
const SPARE_SIZE_NODES: usize = 2 * SPARE_PIECES;

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

    /// The errno upstream returns in the same case: `get_va_block` reports every
    /// failure as address 0, which its callers turn into `ENOMEM` (mem:1178-1182).
    /// O(1).
    pub(crate) fn upstream_errno(self) -> Error {
        ENOMEM
    }
}

impl From<VaAllocError> for Error {
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
    fn from(e: VaAllocError) -> Self {
        Self::Failed(e)
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
    /// and no ignored hint bits.
    pub(crate) const fn new(span: VaSpan, page_size: u64) -> Self {
        Self {
            span,
            page_size,
            extra_align: None,
            hint_reserved: None,
            hint_ignored_bits: 0,
        }
    }

    /// The same with a second alignment class.
    pub(crate) const fn with_extra_align(mut self, align: u64) -> Self {
        self.extra_align = Some(align);
        self
    }

    /// The same with a hint-reserved span.
    pub(crate) const fn with_hint_reserved(mut self, span: VaSpan) -> Self {
        self.hint_reserved = Some(span);
        self
    }

    /// The same with address bits ignored by the hint alignment check.
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
    /// `size` bytes anywhere, page aligned.
    pub(crate) const fn new(size: u64) -> Self {
        Self {
            size,
            align: 0,
            hint: 0,
            force_hint: false,
        }
    }

    /// The same with an alignment.
    pub(crate) const fn with_align(mut self, align: u64) -> Self {
        self.align = align;
        self
    }

    /// The same, preferably at `hint`.
    pub(crate) const fn with_hint(mut self, hint: u64) -> Self {
        self.hint = hint;
        self.force_hint = false;
        self
    }

    /// The same, at `hint` or not at all.
    pub(crate) const fn with_forced_hint(mut self, hint: u64) -> Self {
        self.hint = hint;
        self.force_hint = true;
        self
    }
}

/// The size-tree nodes one block owns, one per alignment class.
///
/// `None` only where the allocator has no extra class; a block missing a node
/// (which the invariants rule out) would only be left out of that size tree.
struct SizeNodes {
    base: Option<SizeNodeRes>,
    extra: Option<SizeNodeRes>,
}

impl SizeNodes {
    /// No nodes.
    const NONE: Self = Self {
        base: None,
        extra: None,
    };

    /// Fresh nodes for the page class and, if `extra`, the extra class.
    fn new(flags: Flags, extra: bool) -> Result<Self> {
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

/// The memory for the tree nodes one allocation may need: one block-tree node
/// and its size-tree nodes for each of the two pieces a cut may create.
struct Piece {
    node: BlockNodeRes,
    sizes: SizeNodes,
}

impl Piece {
    fn new(flags: Flags) -> Result<Self> {
        Ok(Self {
            node: RBTreeNodeReservation::new(flags)?,
            sizes: SizeNodes::new(flags, true)?,
        })
    }
}

/// Tree nodes reserved for one allocation by [`VaAllocator::prepare`].
///
/// Obtained before taking the lock that protects the allocator and consumed by
/// [`VaAllocator::alloc_with`], which keeps what the allocation does not need in
/// its spare cache (as far as there is room). Dropped unused, it frees them.
pub(crate) struct VaReservations {
    /// For the allocated block when it does not start at its free block's start.
    head: Piece,
    /// For the free rest behind the allocated block.
    tail: Piece,
}

impl VaReservations {
    /// Number of tree nodes one reservation holds: two pieces of a block-tree
    /// node and two size-tree nodes.
    pub(crate) const NODES: usize = 6;
}

/// What a block is.
enum State {
    /// Free and outside the hint-only span: linked in the page-class tree and,
    /// when it holds a piece aligned to the extra class, in that class's tree;
    /// otherwise it holds the extra-class node here.
    Free(Option<SizeNodeRes>),
    /// Free and inside the hint-only span: reachable by hint only, so not in the
    /// size trees; holds its size-tree nodes.
    FreeHintOnly(SizeNodes),
    /// The first (usually only) segment of the allocation `[start, alloc_end)`.
    Allocated { nodes: SizeNodes, alloc_end: u64 },
    /// A further segment of the allocation that starts in the block before: an
    /// allocation made by hint across an edge of the hint-only span.
    Continued(SizeNodes),
}

impl State {
    fn is_free(&self) -> bool {
        matches!(self, Self::Free(_) | Self::FreeHintOnly(_))
    }

    /// A free state holding no node, to put in a block while its state is
    /// moved out.
    const VACANT: Self = Self::Free(None);
}

/// One block `[start, end)`; the start is its key in the block tree.
struct Block {
    end: u64,
    state: State,
}

/// The second alignment class and its size tree.
struct ExtraClass {
    align: u64,
    tree: SizeTree,
}

/// The size trees: where best fit searches.
///
/// Kept apart from the block tree so that a cursor on the block tree and these
/// trees can be used at the same time.
struct SizeTrees {
    /// Searchable free blocks by `(length, start)`: the page class.
    base: SizeTree,
    /// The extra alignment class, if any.
    extra: Option<ExtraClass>,
}

impl SizeTrees {
    /// Link the free block `[start, end)`: into the page-class tree, and into
    /// the extra class's tree when it holds an aligned piece. Returns the
    /// extra-class node it did not link, which the block keeps. O(log n).
    #[inline(always)]
    fn link(&mut self, start: u64, end: u64, nodes: SizeNodes) -> Option<SizeNodeRes> {
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
    /// [`State::Free`] node), keeping the nodes. O(log n).
    #[inline(always)]
    fn unlink(&mut self, start: u64, end: u64, held: Option<SizeNodeRes>) -> SizeNodes {
        let base = self
            .base
            .remove_node(&size_key(end.saturating_sub(start), start))
            .map(RBTreeNode::into_reservation);
        let extra = match (held, self.extra.as_mut()) {
            (Some(r), _) => Some(r),
            (None, Some(x)) => x
                .tree
                .remove_node(&size_key(aligned_size(start, end, x.align), start))
                .map(RBTreeNode::into_reservation),
            (None, None) => None,
        };
        SizeNodes { base, extra }
    }

    /// The state of the free block `[start, end)`, linking it unless it lies in
    /// `hint_only`. O(log n).
    #[inline(always)]
    fn free_state(
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
    fn absorb(
        &mut self,
        nodes: SizeNodes,
        (start, end, state): (u64, u64, State),
    ) -> [SizeNodes; 2] {
        // A free block's state always yields its nodes.
        let other = self.take_free(start, end, state).unwrap_or(SizeNodes::NONE);
        merge_sizes(nodes, other)
    }

    /// The size-tree nodes of the free block `[start, end)` whose state was
    /// `state`, unlinking it; `Err(state)` if it was not free. O(log n).
    #[inline(always)]
    fn take_free(&mut self, start: u64, end: u64, state: State) -> Result<SizeNodes, State> {
        match state {
            State::Free(held) => Ok(self.unlink(start, end, held)),
            State::FreeHintOnly(nodes) => Ok(nodes),
            other => Err(other),
        }
    }
}

/// The alignment class of a request.
#[derive(Clone, Copy)]
struct Class {
    /// The alignment (the page size for the page class).
    align: u64,
    /// Whether it is the extra class.
    extra: bool,
}

/// The free blocks an allocation takes, in address order (read-only plan).
struct Run {
    keys: [u64; MAX_RUN],
    len: usize,
    first: u64,
    last: u64,
    last_end: u64,
}

impl Run {
    fn new(start: u64, end: u64) -> Self {
        Self {
            keys: [start; MAX_RUN],
            len: 1,
            first: start,
            last: start,
            last_end: end,
        }
    }

    /// Append the block `[start, end)`; `false` if the run is full.
    fn push(&mut self, start: u64, end: u64) -> bool {
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
struct Placement {
    start: u64,
    end: u64,
    run: Run,
}

/// The size-tree key of a block of usable size `size` at `start`. O(1).
#[inline(always)]
const fn size_key(size: u64, start: u64) -> SizeKey {
    ((size as u128) << 64) | start as u128
}

/// The usable size and the start of a size-tree key. O(1).
#[inline(always)]
const fn key_parts(key: SizeKey) -> (u64, u64) {
    ((key >> 64) as u64, key as u64)
}

/// `x` rounded up to `align` (a power of two), or `None` on overflow. O(1).
#[inline(always)]
fn align_up(x: u64, align: u64) -> Option<u64> {
    let mask = align.checked_sub(1)?;
    Some(x.checked_add(mask)? & !mask)
}

/// What `[start, end)` offers an allocation aligned to `align` (a power of two):
/// `end - align_up(start)`, or 0 when nothing aligned fits. O(1).
#[inline(always)]
fn aligned_size(start: u64, end: u64, align: u64) -> u64 {
    match align_up(start, align) {
        Some(a) if a < end => end - a,
        _ => 0,
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
///   `Free` holds nothing. The size trees hold nothing else.
/// - Two free blocks are adjacent only at an edge of `hint_only`: free space is
///   otherwise always merged.
/// - An allocation `[s, e)` is an `Allocated { alloc_end: e }` block at `s`,
///   followed by `Continued` blocks up to `e`; its segments meet only at edges of
///   `hint_only`.
/// - Every block holds or has linked one size-tree node per class, ready for
///   when it is free (or merged).
/// - `free_blocks` is the number of free blocks in `blocks`, `allocations` the
///   number of `Allocated` blocks.
/// - `spare_blocks` and `spare_sizes` never grow past the capacity reserved at
///   construction (`SPARE_BLOCK_NODES`, `SPARE_SIZE_NODES`): they are only
///   pushed with `push_within_capacity`.
pub(crate) struct VaAllocator {
    /// The range, whole pages.
    span: VaSpan,
    /// The page size.
    page_size: u64,
    /// Whether `page_size` is a power of two.
    pow2: bool,
    /// Hint bits ignored by the alignment check (non-power-of-two pages only).
    hint_ignored_bits: u64,
    /// The hint-reserved span as configured (for [`Self::is_hint_crossing_range`]).
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
    /// Spare block-tree nodes (the spare cache), at most `SPARE_BLOCK_NODES`.
    spare_blocks: KVec<BlockNodeRes>,
    /// Spare size-tree nodes of any class, at most `SPARE_SIZE_NODES`.
    spare_sizes: KVec<SizeNodeRes>,
    /// Node reservations allocated for this allocator ([`NodeStats::fresh`]).
    fresh_nodes: usize,
    /// Nodes freed because the spare cache was full ([`NodeStats::freed`]).
    freed_nodes: usize,
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
            spare_blocks: KVec::with_capacity(SPARE_BLOCK_NODES, GFP_KERNEL)?,
            spare_sizes: KVec::with_capacity(SPARE_SIZE_NODES, GFP_KERNEL)?,
            fresh_nodes: 0,
            freed_nodes: 0,
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
                this.fresh_nodes += this.classes() + 1;
            }
        }
        Ok(this)
    }

    /// The range (whole pages).
    pub(crate) fn span(&self) -> VaSpan {
        self.span
    }

    /// The page size.
    pub(crate) fn page_size(&self) -> u64 {
        self.page_size
    }

    /// The hint-reserved span as configured.
    pub(crate) fn hint_reserved(&self) -> Option<VaSpan> {
        self.hint_reserved
    }

    /// The part of the range only hints can reach: the hint-reserved span clipped
    /// to the range and rounded out to whole pages.
    pub(crate) fn hint_only_span(&self) -> Option<VaSpan> {
        self.hint_only
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
    fn alloc_or_reserve(
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
        let p = self.place(&req)?;
        let (head, tail) = self.take_pieces(&p, None).ok_or(AllocOutcome::NeedNodes)?;
        let start = p.start;
        self.commit(p, head, tail);
        Ok(start)
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
        self.fresh_nodes = self.fresh_nodes.saturating_add(VaReservations::NODES);
        let p = match self.place(&req) {
            Ok(p) => p,
            Err(e) => {
                self.stash_piece(res.head);
                self.stash_piece(res.tail);
                return Err(e);
            }
        };
        let start = p.start;
        // Two fresh pieces cover any placement, so this cannot fail.
        let (head, tail) = self
            .take_pieces(&p, Some(res))
            .ok_or(VaAllocError::NoMemory)?;
        self.commit(p, head, tail);
        Ok(start)
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

    /// The tree-node memory counters: reservations allocated, nodes freed for
    /// want of room in the spare cache, and the cache's content. O(1).
    pub(crate) fn node_stats(&self) -> NodeStats {
        NodeStats {
            fresh: self.fresh_nodes,
            freed: self.freed_nodes,
            spare_block_nodes: self.spare_blocks.len(),
            spare_size_nodes: self.spare_sizes.len(),
        }
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
                    let ok = open.is_none() && *alloc_end >= b.end && self.nodes_complete(nodes);
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
            && self.spare_blocks.len() <= SPARE_BLOCK_NODES
            && self.spare_sizes.len() <= SPARE_SIZE_NODES
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

    // Decision: read-only.

    /// `size` rounded up to whole pages; `None` for 0 or on overflow. O(1).
    #[inline(always)]
    fn round_size(&self, size: u64) -> Option<u64> {
        if size == 0 {
            return None;
        }
        if self.pow2 {
            align_up(size, self.page_size)
        } else {
            size.div_ceil(self.page_size).checked_mul(self.page_size)
        }
    }

    /// The alignment class serving `align`. O(1).
    #[inline(always)]
    fn class(&self, align: u64) -> Result<Class, VaAllocError> {
        let page = Class {
            align: self.page_size,
            extra: false,
        };
        if !self.pow2 {
            return Ok(page);
        }
        if align != 0 && !align.is_power_of_two() {
            return Err(VaAllocError::InvalidAlign);
        }
        let align = align.max(self.page_size);
        if align == self.page_size {
            Ok(page)
        } else if self.trees.extra.as_ref().is_some_and(|x| x.align == align) {
            Ok(Class { align, extra: true })
        } else {
            Err(VaAllocError::InvalidAlign)
        }
    }

    /// Whether `hint` is aligned for `class` (upstream mem:621-640). O(1).
    ///
    /// Power-of-two pages: a multiple of the class alignment. Other pages: the
    /// hint without the ignored bits is a multiple of the page size, as upstream
    /// checks; a hint inside the range that passes but is not a whole number of
    /// pages from the range start (possible only in a range that crosses a
    /// boundary of the ignored bits) also counts as misaligned.
    #[inline(always)]
    fn hint_aligned(&self, hint: u64, class: Class) -> bool {
        if self.pow2 {
            hint & (class.align - 1) == 0
        } else {
            (hint & !self.hint_ignored_bits) % self.page_size == 0
                && (hint < self.span.start
                    || hint >= self.span.end
                    || (hint - self.span.start) % self.page_size == 0)
        }
    }

    /// Where `req` goes, without changing anything. O(log n).
    #[inline(always)]
    fn place(&self, req: &VaRequest) -> Result<Placement, VaAllocError> {
        let size = self.round_size(req.size).ok_or(VaAllocError::InvalidSize)?;
        let class = self.class(req.align)?;
        let mut hint = req.hint;
        if hint != 0 && !self.hint_aligned(hint, class) {
            if req.force_hint {
                return Err(VaAllocError::MisalignedHint);
            }
            hint = 0;
        }
        if hint == 0 {
            if req.force_hint {
                return Err(VaAllocError::NoHint);
            }
        } else {
            match self.place_at(hint, size) {
                Ok(p) => return Ok(p),
                Err(e) if req.force_hint => return Err(e),
                Err(_) => {}
            }
        }
        self.best_fit(size, class).ok_or(VaAllocError::NoSpace)
    }

    /// `[hint, hint + size)` if it is all free. O(log n): the free blocks it may
    /// cover are at most [`MAX_RUN`].
    fn place_at(&self, hint: u64, size: u64) -> Result<Placement, VaAllocError> {
        let end = hint.checked_add(size).ok_or(VaAllocError::HintOutOfRange)?;
        if !self.span.contains_area(hint, size) {
            return Err(VaAllocError::HintOutOfRange);
        }
        let (first, mut block_end, mut free) = self
            .block_containing(hint)
            .ok_or(VaAllocError::HintOutOfRange)?;
        let mut run = Run::new(first, block_end);
        loop {
            if !free {
                return Err(VaAllocError::HintInUse);
            }
            if block_end >= end {
                return Ok(Placement {
                    start: hint,
                    end,
                    run,
                });
            }
            let next = block_end;
            let b = self.blocks.get(&next).ok_or(VaAllocError::HintOutOfRange)?;
            if !run.push(next, b.end) {
                return Err(VaAllocError::HintInUse);
            }
            block_end = b.end;
            free = b.state.is_free();
        }
    }

    /// Best fit for `size` bytes of `class`: one lower-bound search in the class's
    /// size tree. O(log n).
    ///
    /// The size trees hold only `Free` blocks, and a key gives the block's end
    /// (start plus length, or aligned start plus usable size), so the block
    /// tree is not searched.
    #[inline(always)]
    fn best_fit(&self, size: u64, class: Class) -> Option<Placement> {
        let (start, key, block_end) = if class.extra {
            let x = self.trees.extra.as_ref()?;
            let c = x.tree.cursor_lower_bound(&size_key(size, 0))?;
            let (usable, key) = key_parts(*c.current().0);
            let start = align_up(key, x.align)?;
            (start, key, start.checked_add(usable)?)
        } else {
            let c = self.trees.base.cursor_lower_bound(&size_key(size, 0))?;
            let (len, key) = key_parts(*c.current().0);
            (key, key, key.checked_add(len)?)
        };
        let end = start.checked_add(size)?;
        (end <= block_end).then(|| Placement {
            start,
            end,
            run: Run::new(key, block_end),
        })
    }

    /// `(start, end, is_free)` of the block holding `addr`. O(log n).
    fn block_containing(&self, addr: u64) -> Option<(u64, u64, bool)> {
        let (start, end, free) = match self.blocks.cursor_lower_bound(&addr) {
            Some(c) => {
                let (&k, b) = c.current();
                if k == addr {
                    (k, b.end, b.state.is_free())
                } else {
                    let (&k, b) = c.peek_prev()?;
                    (k, b.end, b.state.is_free())
                }
            }
            None => {
                let c = self.blocks.cursor_back()?;
                let (&k, b) = c.current();
                (k, b.end, b.state.is_free())
            }
        };
        (start <= addr && addr < end).then_some((start, end, free))
    }

    /// `(start, end, is_free)` of the block before the one starting at `key`.
    /// O(log n).
    fn block_before(&self, key: u64) -> Option<(u64, u64, bool)> {
        let c = self.blocks.cursor_lower_bound(&key)?;
        let (&k, b) = c.peek_prev()?;
        Some((k, b.end, b.state.is_free()))
    }

    /// Whether `addr` lies inside the hint-only span.
    fn in_hint_only(&self, addr: u64) -> bool {
        self.hint_only
            .is_some_and(|h| h.start <= addr && addr < h.end)
    }

    /// Whether `addr` is an edge of the hint-only span.
    fn is_edge(&self, addr: u64) -> bool {
        self.hint_only
            .is_some_and(|h| addr == h.start || addr == h.end)
    }

    /// Whether the free block `[start, end)` is in every size tree.
    /// `held`: whether the block holds its extra-class node, which it must
    /// exactly when the extra class exists and the block has no aligned piece.
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

    /// Whether `n` holds one node per class.
    fn nodes_complete(&self, n: &SizeNodes) -> bool {
        n.base.is_some() && n.extra.is_some() == self.trees.extra.is_some()
    }

    /// Number of alignment classes: size-tree nodes per block. O(1).
    #[inline(always)]
    fn classes(&self) -> usize {
        1 + usize::from(self.trees.extra.is_some())
    }

    // The spare cache. O(1) each; never allocates.

    /// The pieces placement `p` needs, `(head, tail)`, each `Some` exactly when
    /// [`Self::commit`] uses it: from `fresh` first, then from the spare cache;
    /// what is left of `fresh` goes to the cache. `None` if the cache does not
    /// cover them (never with `fresh`), and then nothing changed.
    #[inline(always)]
    fn take_pieces(
        &mut self,
        p: &Placement,
        fresh: Option<VaReservations>,
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
        if self.spare_blocks.len() < from_cache
            || self.spare_sizes.len() < from_cache * self.classes()
        {
            return None;
        }
        let mut next = |this: &mut Self| a.take().or_else(|| b.take()).or_else(|| this.pop_piece());
        let head = if need_head { Some(next(self)?) } else { None };
        let tail = if need_tail { Some(next(self)?) } else { None };
        for piece in [a, b].into_iter().flatten() {
            self.stash_piece(piece);
        }
        Some((head, tail))
    }

    /// One piece from the spare cache: a block-tree node and a size-tree node
    /// per class.
    fn pop_piece(&mut self) -> Option<Piece> {
        if self.spare_blocks.is_empty() || self.spare_sizes.len() < self.classes() {
            return None;
        }
        let node = self.spare_blocks.pop()?;
        let base = self.spare_sizes.pop();
        let extra = if self.trees.extra.is_some() {
            self.spare_sizes.pop()
        } else {
            None
        };
        Some(Piece {
            node,
            sizes: SizeNodes { base, extra },
        })
    }

    /// Keep the nodes of `p` in the spare cache as far as it has room.
    fn stash_piece(&mut self, p: Piece) {
        self.spare_block(p.node);
        self.spare_nodes(p.sizes);
    }

    /// Keep a block-tree node in the spare cache, or free it when it is full.
    fn spare_block(&mut self, r: BlockNodeRes) {
        if self.spare_blocks.push_within_capacity(r).is_err() {
            self.freed_nodes = self.freed_nodes.saturating_add(1);
        }
    }

    /// Keep a size-tree node in the spare cache, or free it when it is full.
    fn spare_size(&mut self, r: SizeNodeRes) {
        if self.spare_sizes.push_within_capacity(r).is_err() {
            self.freed_nodes = self.freed_nodes.saturating_add(1);
        }
    }

    /// Keep the size-tree nodes of `n` in the spare cache as far as it has room.
    fn spare_nodes(&mut self, n: SizeNodes) {
        for r in [n.base, n.extra].into_iter().flatten() {
            self.spare_size(r);
        }
    }

    // Commit: no failure paths from here on.

    /// Move the extra-class node to the spare cache if the allocator has no
    /// extra class.
    fn own(&mut self, mut nodes: SizeNodes) -> SizeNodes {
        if self.trees.extra.is_none() {
            if let Some(r) = nodes.extra.take() {
                self.spare_size(r);
            }
        }
        nodes
    }

    /// The state of the free block `[start, end)`, linking it if it is searchable.
    /// O(log n).
    #[inline(always)]
    fn free_state(&mut self, start: u64, end: u64, nodes: SizeNodes) -> State {
        self.trees.free_state(self.hint_only, start, end, nodes)
    }

    /// Carve the allocation `p` out of its free blocks. O(log n): one search in
    /// the block tree per block of the run, the size-tree updates, and one
    /// insertion per piece cut off.
    ///
    /// The run's blocks become the allocation's segments (their nodes stay in
    /// place); a free front part keeps the first block's node and the allocated
    /// segment gets `head`; a free tail part gets `tail`. [`Self::take_pieces`]
    /// gives exactly the pieces needed; one that is not goes to the spare cache.
    #[inline(always)]
    fn commit(&mut self, p: Placement, head: Option<Piece>, tail: Option<Piece>) {
        let Placement { start, end, run } = p;
        let cut_tail = run.last_end > end;
        for (i, &key) in run.keys.iter().take(run.len).enumerate() {
            let Some(b) = self.blocks.get_mut(&key) else {
                continue;
            };
            let old = mem::replace(&mut b.state, State::VACANT);
            // The run holds free blocks only, whose state always yields nodes.
            let nodes = self
                .trees
                .take_free(key, b.end, old)
                .unwrap_or(SizeNodes::NONE);
            b.state = if i == 0 {
                State::Allocated {
                    nodes,
                    alloc_end: end,
                }
            } else {
                State::Continued(nodes)
            };
            if cut_tail && i + 1 == run.len && tail.is_some() {
                b.end = end;
            }
        }
        self.free_blocks = self.free_blocks.saturating_sub(run.len);
        self.allocations += 1;

        match tail {
            Some(tail) if cut_tail => self.cut_tail(&run, end, tail),
            Some(unused) => self.stash_piece(unused),
            None => {}
        }
        match head {
            Some(head) if run.first < start => self.cut_head(&run, start, end, head),
            Some(unused) => self.stash_piece(unused),
            None => {}
        }
    }

    /// Insert the free tail `[end, run.last_end)`, which [`Self::commit`] cut
    /// off the allocation's last segment, with the nodes of `tail`. O(log n).
    fn cut_tail(&mut self, run: &Run, end: u64, tail: Piece) {
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
            self.stash_piece(Piece {
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
                self.stash_piece(Piece {
                    node: head.node,
                    sizes,
                });
                return;
            }
        };
        b.end = start;
        b.state = self
            .trees
            .free_state(self.hint_only, run.first, start, nodes);
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
    fn release(&mut self, start: u64, alloc_end: u64) -> bool {
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
    /// removed through its cursor) and the size-tree updates.
    #[inline(always)]
    fn free_segment(&mut self, key: u64, alloc_end: Option<u64>) -> Option<u64> {
        let hint_only = self.hint_only;
        let is_edge = |a: u64| hint_only.is_some_and(|h| a == h.start || a == h.end);
        let mut cur = self.blocks.cursor_lower_bound_mut(&key)?;
        let (&k, b) = cur.current_mut();
        let segment_end = b.end;
        let is_segment = k == key
            && match (&b.state, alloc_end) {
                (State::Allocated { alloc_end: e, .. }, Some(want)) => *e == want,
                (State::Continued(_), None) => true,
                _ => false,
            };
        if !is_segment {
            return None;
        }
        let mut nodes = match mem::replace(&mut b.state, State::VACANT) {
            State::Allocated { nodes, .. } | State::Continued(nodes) => nodes,
            other => {
                b.state = other;
                return None;
            }
        };
        // What the merges make surplus, for the spare cache once the cursor is
        // gone: a block-tree node and a set of size-tree nodes per merge.
        let mut surplus_blocks: [Option<BlockNodeRes>; 2] = [None, None];
        let mut surplus_sizes = [SizeNodes::NONE, SizeNodes::NONE];
        let mut merged = 0usize;

        let mut end = segment_end;
        if !is_edge(segment_end) {
            if let Some(next) = take_free_block(cur.peek_next_mut()) {
                end = next.1;
                let [keep, rest] = self.trees.absorb(nodes, next);
                nodes = keep;
                surplus_sizes[0] = rest;
                surplus_blocks[0] = cur.remove_next().map(RBTreeNode::into_reservation);
                merged += 1;
            }
        }

        let mut start = key;
        if !is_edge(key) {
            if let Some(prev) = take_free_block(cur.peek_prev_mut()) {
                start = prev.0;
                let [keep, rest] = self.trees.absorb(nodes, prev);
                nodes = keep;
                surplus_sizes[1] = rest;
                merged += 1;
            }
        }

        let state = self.trees.free_state(hint_only, start, end, nodes);
        if start == key {
            let (_, b) = cur.current_mut();
            b.end = end;
            b.state = state;
        } else {
            if let Some((_, p)) = cur.peek_prev_mut() {
                p.end = end;
                p.state = state;
            }
            let (_, node) = cur.remove_current();
            surplus_blocks[1] = Some(node.into_reservation());
        }

        self.free_blocks = (self.free_blocks + 1).saturating_sub(merged);
        if merged > 0 {
            for r in surplus_blocks.into_iter().flatten() {
                self.spare_block(r);
            }
            for n in surplus_sizes {
                self.spare_nodes(n);
            }
        }
        Some(segment_end)
    }
}

/// `(start, end, state)` of the block seen through a cursor when it is free,
/// with its state moved out (`State::VACANT` left behind); `None` when there is
/// no block or it is not free. O(1).
#[inline(always)]
fn take_free_block(entry: Option<(&u64, &mut Block)>) -> Option<(u64, u64, State)> {
    let (&start, b) = entry?;
    b.state
        .is_free()
        .then(|| (start, b.end, mem::replace(&mut b.state, State::VACANT)))
}

/// The size-tree nodes of two blocks merged into one: `[kept, surplus]`, one
/// node per class kept (those of `a` first). O(1).
fn merge_sizes(a: SizeNodes, b: SizeNodes) -> [SizeNodes; 2] {
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

#[kunit_tests(hlrs_va_alloc)]
mod tests {
    use super::*;
    use crate::asic::{AsicProperties, HINTS_DRAM_RESERVED, HINTS_HOST_RESERVED};

    const K4: u64 = 1 << 12;
    const M2: u64 = 1 << 21;
    const G1: u64 = 1 << 30;
    const HOST: u64 = 0xFFF0_0000_0000_0000;
    const DRAM_PAGE: u64 = 0x3000_0000;
    const DRAM_START: u64 = 0x1001_0018_0000_0000;
    /// `crate::asic::DRAM_HINTS_ALIGN_MASK` (not referenced: it is still marked
    /// dead code there).
    const LOW48_IGNORED: u64 = !0xFFFF_FFFF_FFFF;

    #[test]
    fn construction_rounds_and_validates() -> Result {
        let a = VaAllocator::new(&VaAllocConfig::new(VaSpan::new(0x1001, 0x5fff), K4))?;
        assert_eq!(a.span(), VaSpan::new(0x2000, 0x5000));
        assert_eq!(a.page_size(), K4);
        assert!(a.is_pristine());
        assert_eq!(a.free_blocks(), 1);
        assert_eq!(a.allocated_blocks(), 0);
        assert!(a.check_invariants());

        let new = |start: u64, end: u64, page: u64| {
            VaAllocator::new(&VaAllocConfig::new(VaSpan::new(start, end), page)).err()
        };
        // Empty after rounding, empty, reversed, page 0.
        assert_eq!(new(0x1001, 0x1fff, K4), Some(EINVAL));
        assert_eq!(new(0x2000, 0x2000, K4), Some(EINVAL));
        assert_eq!(new(0x3000, 0x2000, K4), Some(EINVAL));
        assert_eq!(new(0x2000, 0x3000, 0), Some(EINVAL));
        // Rounding the start up near the top of the address space does not wrap.
        assert_eq!(new(u64::MAX - 0x1000, u64::MAX, K4), Some(EINVAL));
        // A non-power-of-two page: whole pages only, and the start must be a
        // valid hint.
        let dram = |len: u64, ignored: u64| {
            VaAllocator::new(
                &VaAllocConfig::new(VaSpan::new(DRAM_START, DRAM_START + len), DRAM_PAGE)
                    .with_hint_ignored_bits(ignored),
            )
            .err()
        };
        assert_eq!(dram(10 * DRAM_PAGE, LOW48_IGNORED), None);
        assert_eq!(dram(10 * DRAM_PAGE + K4, LOW48_IGNORED), Some(EINVAL));
        // DRAM_START is a whole number of pages only in its low 48 bits.
        assert_eq!(dram(10 * DRAM_PAGE, 0), Some(EINVAL));
        assert_eq!(
            new(DRAM_START + K4, DRAM_START + K4 + DRAM_PAGE, DRAM_PAGE),
            Some(EINVAL)
        );
        // The extra class: a power of two above a power-of-two page.
        let extra = |page: u64, align: u64| {
            VaAllocator::new(
                &VaAllocConfig::new(VaSpan::new(0, 64 * DRAM_PAGE), page).with_extra_align(align),
            )
            .err()
        };
        assert_eq!(extra(K4, M2), None);
        assert_eq!(extra(K4, 3 * M2), Some(EINVAL));
        assert_eq!(extra(K4, K4), Some(EINVAL));
        assert_eq!(extra(M2, K4), Some(EINVAL));
        assert_eq!(extra(DRAM_PAGE, 2 * G1), Some(EINVAL));
        Ok(())
    }

    // Helpers live after the first test so that their asserts report to KUnit.

    /// A 4 KiB-page range of `pages` pages at HOST.
    fn host(pages: u64) -> Result<VaAllocator> {
        VaAllocator::new(&VaAllocConfig::new(
            VaSpan::new(HOST, HOST + pages * K4),
            K4,
        ))
    }

    /// The same with the 2 MiB class.
    fn host_2m(pages: u64) -> Result<VaAllocator> {
        VaAllocator::new(
            &VaAllocConfig::new(VaSpan::new(HOST, HOST + pages * K4), K4).with_extra_align(M2),
        )
    }

    /// A small Gaudi2-like DRAM range of `pages` pages.
    fn dram(pages: u64) -> Result<VaAllocator> {
        VaAllocator::new(
            &VaAllocConfig::new(
                VaSpan::new(DRAM_START, DRAM_START + pages * DRAM_PAGE),
                DRAM_PAGE,
            )
            .with_hint_ignored_bits(LOW48_IGNORED),
        )
    }

    /// `a`'s blocks as `(start, end, is_free)`.
    fn dump(a: &VaAllocator) -> Result<KVec<(u64, u64, bool)>> {
        let mut v = KVec::new();
        let mut err = Ok(());
        a.for_each_block(|s, e, f| {
            if err.is_ok() {
                err = v.push((s, e, f), GFP_KERNEL);
            }
        });
        err?;
        Ok(v)
    }

    /// Allocate `pages` pages of `a` with no hint.
    fn pages(a: &mut VaAllocator, pages: u64) -> Result<u64> {
        Ok(a.alloc(VaRequest::new(pages * a.page_size()))?)
    }

    #[test]
    fn host_range_basics_and_alignment() -> Result {
        let mut a = host_2m(1024)?;
        // One byte takes a whole page; allocations follow each other.
        assert_eq!(a.alloc(VaRequest::new(1)), Ok(HOST));
        assert_eq!(a.alloc(VaRequest::new(K4 + 1)), Ok(HOST + K4));
        assert_eq!(a.alloc(VaRequest::new(K4)), Ok(HOST + 3 * K4));
        // Alignments at or below the page size mean the page size.
        assert_eq!(
            a.alloc(VaRequest::new(K4).with_align(512)),
            Ok(HOST + 4 * K4)
        );
        assert_eq!(
            a.alloc(VaRequest::new(K4).with_align(K4)),
            Ok(HOST + 5 * K4)
        );
        // The 2 MiB class starts at the next 2 MiB boundary...
        assert_eq!(a.alloc(VaRequest::new(K4).with_align(M2)), Ok(HOST + M2));
        // ...and the hole in front of it stays usable.
        assert_eq!(a.alloc(VaRequest::new(K4)), Ok(HOST + 6 * K4));
        assert_eq!(
            a.alloc(VaRequest::new(M2).with_align(M2)),
            Err(VaAllocError::NoSpace)
        );
        // Alignments that are not classes of the range.
        for align in [3, 8 * K4, G1, u64::MAX] {
            assert_eq!(
                a.alloc(VaRequest::new(K4).with_align(align)),
                Err(VaAllocError::InvalidAlign)
            );
        }
        let mut b = host(1024)?;
        assert_eq!(
            b.alloc(VaRequest::new(K4).with_align(M2)),
            Err(VaAllocError::InvalidAlign)
        );
        assert_eq!(a.allocated_blocks(), 7);
        assert!(a.check_invariants());
        assert_eq!(a.clear(), 7);
        assert!(a.is_pristine());
        assert!(a.check_invariants());
        Ok(())
    }

    #[test]
    fn two_mib_class_has_its_own_best_fit() -> Result {
        let mut a = host_2m(2048)?;
        // Free holes A = [2M - 4K, 4M - 4K) (2 MiB long, 2 MiB - 4 KiB usable at
        // 2 MiB alignment) and B = [5M, 8M) (3 MiB long, 2 MiB usable).
        assert_eq!(
            a.alloc(VaRequest::new(M2 - K4).with_forced_hint(HOST)),
            Ok(HOST)
        );
        let x2 = HOST + 2 * M2 - K4;
        assert_eq!(
            a.alloc(VaRequest::new(M2 / 2 + K4).with_forced_hint(x2)),
            Ok(x2)
        );
        // 2 MiB at 2 MiB alignment only fits in B; at page alignment A is best.
        let b = a.alloc(VaRequest::new(M2).with_align(M2))?;
        assert_eq!(b, HOST + 3 * M2);
        a.free(b, M2)?;
        assert_eq!(a.alloc(VaRequest::new(M2)), Ok(HOST + M2 - K4));
        // B is still the only block with 2 MiB usable at 2 MiB alignment.
        assert_eq!(
            a.alloc(VaRequest::new(M2).with_align(M2)),
            Ok(HOST + 3 * M2)
        );
        assert!(a.check_invariants());
        Ok(())
    }

    #[test]
    fn gaudi2_dram_range() -> Result {
        let p = AsicProperties::gaudi2(6, 0)?;
        assert_eq!(p.dram_va.start, DRAM_START);
        assert_eq!(p.dram_page_size, DRAM_PAGE);
        let mut a = VaAllocator::new(
            &VaAllocConfig::new(p.dram_va, p.dram_page_size)
                .with_hint_reserved(HINTS_DRAM_RESERVED)
                .with_hint_ignored_bits(LOW48_IGNORED),
        )?;
        assert_eq!(a.span(), p.dram_va);
        // The first block is the range start; later ones follow directly.
        assert_eq!(a.alloc(VaRequest::new(1)), Ok(DRAM_START));
        assert_eq!(
            a.alloc(VaRequest::new(DRAM_PAGE)),
            Ok(DRAM_START + DRAM_PAGE)
        );
        assert_eq!(
            a.alloc(VaRequest::new(2 * DRAM_PAGE + 1)),
            Ok(DRAM_START + 2 * DRAM_PAGE)
        );
        // The alignment argument does not apply to a non-power-of-two page.
        assert_eq!(
            a.alloc(VaRequest::new(DRAM_PAGE).with_align(G1)),
            Ok(DRAM_START + 5 * DRAM_PAGE)
        );
        assert_eq!(
            a.alloc(VaRequest::new(DRAM_PAGE).with_align(3)),
            Ok(DRAM_START + 6 * DRAM_PAGE)
        );
        // Freeing takes the requested or the rounded size.
        a.free(DRAM_START, 1)?;
        a.free(DRAM_START + 2 * DRAM_PAGE, 3 * DRAM_PAGE)?;
        assert_eq!(a.alloc(VaRequest::new(DRAM_PAGE)), Ok(DRAM_START));
        assert!(a.check_invariants());
        assert_eq!(a.clear(), 4);
        assert_eq!(
            dump(&a)?.as_slice(),
            &[(p.dram_va.start, p.dram_va.end, true)]
        );
        Ok(())
    }

    #[test]
    fn best_fit_picks_the_smallest_hole() -> Result {
        let mut a = host(64)?;
        // Blocks of 1, 1, 1, 3, 1, 2, 1 pages; then holes of 1, 3 and 2 pages.
        let mut starts = [0u64; 7];
        for (s, n) in starts.iter_mut().zip([1, 1, 1, 3, 1, 2, 1]) {
            *s = pages(&mut a, n)?;
        }
        a.free(starts[1], K4)?;
        a.free(starts[3], 3 * K4)?;
        a.free(starts[5], 2 * K4)?;
        assert_eq!(pages(&mut a, 2)?, HOST + 7 * K4);
        assert_eq!(pages(&mut a, 1)?, HOST + K4);
        assert_eq!(pages(&mut a, 3)?, HOST + 3 * K4);
        assert_eq!(pages(&mut a, 1)?, HOST + 10 * K4);
        assert!(a.check_invariants());
        Ok(())
    }

    #[test]
    fn best_fit_tie_goes_to_the_lowest_address() -> Result {
        let mut a = host(64)?;
        let mut starts = [0u64; 5];
        for (s, n) in starts.iter_mut().zip([1, 2, 1, 2, 1]) {
            *s = pages(&mut a, n)?;
        }
        a.free(starts[3], 2 * K4)?;
        a.free(starts[1], 2 * K4)?;
        assert_eq!(pages(&mut a, 2)?, HOST + K4);
        assert_eq!(pages(&mut a, 2)?, HOST + 4 * K4);
        assert_eq!(pages(&mut a, 2)?, HOST + 7 * K4);
        assert!(a.check_invariants());
        Ok(())
    }

    #[test]
    fn va_is_reused_after_free() -> Result {
        let mut a = host(64)?;
        let x = pages(&mut a, 3)?;
        let y = pages(&mut a, 5)?;
        assert_eq!(y, x + 3 * K4);
        a.free(x, 3 * K4)?;
        assert_eq!(pages(&mut a, 3)?, x);
        let mut d = dram(16)?;
        let x = pages(&mut d, 2)?;
        pages(&mut d, 1)?;
        d.free(x, 2 * DRAM_PAGE)?;
        assert_eq!(pages(&mut d, 2)?, x);
        Ok(())
    }

    #[test]
    fn freeing_everything_merges_back_in_any_order() -> Result {
        let sizes = [1u64, 3, 2, 5, 1, 4, 2, 7];
        let orders: [[usize; 8]; 5] = [
            [0, 1, 2, 3, 4, 5, 6, 7],
            [7, 6, 5, 4, 3, 2, 1, 0],
            [0, 2, 4, 6, 1, 3, 5, 7],
            [3, 4, 2, 5, 1, 6, 0, 7],
            [7, 0, 6, 1, 5, 2, 4, 3],
        ];
        for order in orders {
            let mut a = VaAllocator::new(
                &VaAllocConfig::new(VaSpan::new(HOST, HOST + 64 * K4), K4)
                    .with_extra_align(M2)
                    .with_hint_reserved(VaSpan::new(HOST + 10 * K4 + 5, HOST + 12 * K4)),
            )?;
            let first = dump(&a)?;
            let mut starts = [0u64; 8];
            for (s, &n) in starts.iter_mut().zip(sizes.iter()) {
                *s = pages(&mut a, n)?;
            }
            // Nothing went into the reserved span's pages [10, 12).
            for (&s, &n) in starts.iter().zip(sizes.iter()) {
                assert!(!a.is_hint_crossing_range(s, n * K4));
            }
            for i in order {
                let (Some(&s), Some(&n)) = (starts.get(i), sizes.get(i)) else {
                    return Err(EINVAL);
                };
                a.free(s, n * K4)?;
                assert!(a.check_invariants());
            }
            assert!(a.is_pristine());
            assert_eq!(a.free_blocks(), 1);
            assert_eq!(dump(&a)?.as_slice(), first.as_slice());
            assert_eq!(pages(&mut a, 1)?, HOST);
        }
        Ok(())
    }

    #[test]
    fn hints_are_honoured() -> Result {
        let mut a = host(64)?;
        let h = HOST + 10 * K4;
        assert_eq!(a.alloc(VaRequest::new(2 * K4).with_hint(h)), Ok(h));
        let h2 = HOST + 20 * K4;
        assert_eq!(a.alloc(VaRequest::new(K4).with_forced_hint(h2)), Ok(h2));
        // A hint at the start of a free block.
        assert_eq!(
            a.alloc(VaRequest::new(K4).with_forced_hint(HOST + 12 * K4)),
            Ok(HOST + 12 * K4)
        );
        assert!(a.check_invariants());
        Ok(())
    }

    #[test]
    fn hint_ending_at_the_end_of_a_free_block_is_honoured() -> Result {
        // Upstream refuses these (behaviour 28): the fit test is off by one.
        let mut a = host(64)?;
        assert_eq!(pages(&mut a, 1)?, HOST);
        // The last two pages of the range: the free block [1, 64) starts below.
        let h = HOST + 62 * K4;
        assert_eq!(a.alloc(VaRequest::new(2 * K4).with_hint(h)), Ok(h));
        // The last page before an allocated block, forced.
        assert_eq!(
            a.alloc(VaRequest::new(K4).with_forced_hint(HOST + 20 * K4)),
            Ok(HOST + 20 * K4)
        );
        let h = HOST + 18 * K4;
        assert_eq!(a.alloc(VaRequest::new(2 * K4).with_forced_hint(h)), Ok(h));
        // DRAM: the last page of the range.
        let mut d = dram(8)?;
        pages(&mut d, 1)?;
        let h = DRAM_START + 7 * DRAM_PAGE;
        assert_eq!(
            d.alloc(VaRequest::new(DRAM_PAGE).with_forced_hint(h)),
            Ok(h)
        );
        assert!(a.check_invariants() && d.check_invariants());
        Ok(())
    }

    #[test]
    fn misaligned_hints_are_ignored_or_rejected_when_forced() -> Result {
        let mut a = host_2m(1024)?;
        let before = dump(&a)?;
        for (hint, align) in [(HOST + 10 * K4 + 1, 0), (HOST + K4, M2), (HOST + 0x800, K4)] {
            let req = VaRequest::new(K4).with_align(align);
            assert_eq!(
                a.alloc(req.with_forced_hint(hint)),
                Err(VaAllocError::MisalignedHint)
            );
            assert_eq!(dump(&a)?.as_slice(), before.as_slice());
        }
        // Without force the hint is ignored: best fit.
        assert_eq!(
            a.alloc(VaRequest::new(K4).with_hint(HOST + 10 * K4 + 1)),
            Ok(HOST)
        );
        assert_eq!(
            a.alloc(VaRequest::new(K4).with_align(M2).with_hint(HOST + 3 * K4)),
            Ok(HOST + M2)
        );
        assert!(a.check_invariants());
        Ok(())
    }

    #[test]
    fn unusable_forced_hints_fail_with_distinct_errors() -> Result {
        let mut a = host(64)?;
        let x = pages(&mut a, 4)?;
        let before = dump(&a)?;
        let forced = |h: u64| VaRequest::new(2 * K4).with_forced_hint(h);
        // Occupied, entirely and in part.
        assert_eq!(a.alloc(forced(x)), Err(VaAllocError::HintInUse));
        assert_eq!(a.alloc(forced(x + 2 * K4)), Err(VaAllocError::HintInUse));
        assert_eq!(
            a.alloc(VaRequest::new(8 * K4).with_forced_hint(x + 3 * K4)),
            Err(VaAllocError::HintInUse)
        );
        assert_eq!(VaAllocError::HintInUse.to_errno(), EADDRINUSE);
        // Hint 0.
        assert_eq!(a.alloc(forced(0)), Err(VaAllocError::NoHint));
        // Outside the range, or running past its end.
        assert_eq!(
            a.alloc(forced(HOST - 4 * K4)),
            Err(VaAllocError::HintOutOfRange)
        );
        assert_eq!(
            a.alloc(forced(HOST + 63 * K4)),
            Err(VaAllocError::HintOutOfRange)
        );
        assert_eq!(
            a.alloc(forced(HOST + 64 * K4)),
            Err(VaAllocError::HintOutOfRange)
        );
        assert_eq!(dump(&a)?.as_slice(), before.as_slice());
        assert!(a.check_invariants());
        // Without force each of them falls back to best fit.
        assert_eq!(a.alloc(VaRequest::new(2 * K4).with_hint(x)), Ok(x + 4 * K4));
        assert_eq!(
            a.alloc(VaRequest::new(2 * K4).with_hint(HOST + 63 * K4)),
            Ok(x + 6 * K4)
        );
        Ok(())
    }

    #[test]
    fn dram_hint_alignment_checks_only_the_low_48_bits() -> Result {
        let mut a = dram(16)?;
        let h = DRAM_START + 5 * DRAM_PAGE;
        // The full address is not a multiple of the page, its low 48 bits are.
        assert!(h % DRAM_PAGE != 0);
        assert!((h & !LOW48_IGNORED) % DRAM_PAGE == 0);
        assert_eq!(
            a.alloc(VaRequest::new(DRAM_PAGE).with_forced_hint(h)),
            Ok(h)
        );
        // Misaligned low bits.
        assert_eq!(
            a.alloc(VaRequest::new(DRAM_PAGE).with_forced_hint(h + 2 * DRAM_PAGE + K4)),
            Err(VaAllocError::MisalignedHint)
        );
        // Aligned low bits, other high bits: aligned, but outside the range.
        let far = (h + 2 * DRAM_PAGE) ^ (1 << 62);
        assert_eq!(
            a.alloc(VaRequest::new(DRAM_PAGE).with_forced_hint(far)),
            Err(VaAllocError::HintOutOfRange)
        );
        assert_eq!(
            a.alloc(VaRequest::new(DRAM_PAGE).with_hint(far)),
            Ok(DRAM_START)
        );
        assert!(a.check_invariants());
        Ok(())
    }

    #[test]
    fn no_hint_allocations_avoid_the_reserved_span() -> Result {
        // The real Gaudi2 DRAM range: the reserved span covers pages
        // [109098, 152790) once rounded out to whole pages.
        let p = AsicProperties::gaudi2(6, 0)?;
        let mut a = VaAllocator::new(
            &VaAllocConfig::new(p.dram_va, p.dram_page_size)
                .with_hint_reserved(HINTS_DRAM_RESERVED)
                .with_hint_ignored_bits(LOW48_IGNORED),
        )?;
        let page = |n: u64| DRAM_START + n * DRAM_PAGE;
        let (lo, hi) = (109_098, 152_790);
        assert_eq!(a.hint_only_span(), Some(VaSpan::new(page(lo), page(hi))));
        assert!(a.is_hint_crossing_range(page(lo), DRAM_PAGE));
        assert!(!a.is_hint_crossing_range(page(lo - 1), DRAM_PAGE));
        assert!(a.is_hint_crossing_range(page(hi - 1), DRAM_PAGE));
        assert!(!a.is_hint_crossing_range(page(hi), DRAM_PAGE));
        // All but two pages below the span in one (forced) block.
        assert_eq!(
            a.alloc(VaRequest::new((lo - 2) * DRAM_PAGE).with_forced_hint(DRAM_START)),
            Ok(DRAM_START)
        );
        // Three pages do not fit below: they go above the span, not into it.
        assert_eq!(a.alloc(VaRequest::new(3 * DRAM_PAGE)), Ok(page(hi)));
        // Two pages fit exactly below it.
        assert_eq!(a.alloc(VaRequest::new(2 * DRAM_PAGE)), Ok(page(lo - 2)));
        // A hint inside the span is honoured, with and without force.
        assert_eq!(
            a.alloc(VaRequest::new(DRAM_PAGE).with_hint(page(lo + 10))),
            Ok(page(lo + 10))
        );
        assert_eq!(
            a.alloc(VaRequest::new(DRAM_PAGE).with_forced_hint(page(lo))),
            Ok(page(lo))
        );
        // A hint across the span's start edge, and its free.
        a.free(page(lo), DRAM_PAGE)?;
        a.free(page(lo - 2), 2 * DRAM_PAGE)?;
        let before = dump(&a)?;
        assert_eq!(
            a.alloc(VaRequest::new(3 * DRAM_PAGE).with_forced_hint(page(lo - 1))),
            Ok(page(lo - 1))
        );
        assert!(a.check_invariants());
        a.free(page(lo - 1), 3 * DRAM_PAGE)?;
        assert_eq!(dump(&a)?.as_slice(), before.as_slice());
        assert!(a.check_invariants());
        // A hint across both edges, as one allocation.
        let mut s = VaAllocator::new(
            &VaAllocConfig::new(VaSpan::new(HOST, HOST + 10 * K4), K4)
                .with_hint_reserved(VaSpan::new(HOST + 4 * K4 + 1, HOST + 6 * K4 - 1)),
        )?;
        assert_eq!(
            s.alloc(VaRequest::new(4 * K4).with_forced_hint(HOST + 3 * K4)),
            Ok(HOST + 3 * K4)
        );
        assert!(s.check_invariants());
        assert_eq!(dump(&s)?.len(), 3);
        assert_eq!(s.free(HOST + 4 * K4, 3 * K4), Err(EINVAL));
        s.free(HOST + 3 * K4, 4 * K4)?;
        assert!(s.is_pristine() && s.check_invariants());
        // Filling the range by best fit leaves the span's pages [4, 6) free.
        for i in [0, 1, 2, 3, 6, 7, 8, 9] {
            assert_eq!(pages(&mut s, 1)?, HOST + i * K4);
        }
        assert_eq!(s.alloc(VaRequest::new(K4)), Err(VaAllocError::NoSpace));
        assert_eq!(s.free_blocks(), 1);
        assert_eq!(
            s.alloc(VaRequest::new(2 * K4).with_hint(HOST + 4 * K4)),
            Ok(HOST + 4 * K4)
        );
        assert!(s.check_invariants());
        Ok(())
    }

    #[test]
    fn bad_frees_fail_without_changing_anything() -> Result {
        let mut a = host(64)?;
        let x = pages(&mut a, 4)?;
        let y = pages(&mut a, 2)?;
        let before = dump(&a)?;
        for (s, n) in [
            (x, 3 * K4),
            (x, 5 * K4),
            (x, 6 * K4),
            (x + K4, 3 * K4),
            (x + K4, K4),
            (HOST + 10 * K4, K4),
            (HOST - K4, K4),
            (HOST + 64 * K4, K4),
            (0, K4),
            (x, 0),
            (u64::MAX - 10, 20),
            (!(K4 - 1), K4),
            (x, u64::MAX),
        ] {
            assert_eq!(a.free(s, n), Err(EINVAL));
            assert_eq!(a.unreserve(s, n), Err(EINVAL));
        }
        assert_eq!(dump(&a)?.as_slice(), before.as_slice());
        assert_eq!(a.allocated_blocks(), 2);
        assert!(a.check_invariants());
        a.free(x, 4 * K4)?;
        // Double free.
        assert_eq!(a.free(x, 4 * K4), Err(EINVAL));
        // The requested size rounds to the allocation's size.
        a.free(y, K4 + 1)?;
        assert!(a.is_pristine() && a.check_invariants());
        Ok(())
    }

    #[test]
    fn overflowing_sizes_and_hints_fail_cleanly() -> Result {
        let mut a = host_2m(64)?;
        let before = dump(&a)?;
        for size in [0, u64::MAX, u64::MAX - K4 + 2] {
            assert_eq!(
                a.alloc(VaRequest::new(size)),
                Err(VaAllocError::InvalidSize)
            );
        }
        // Rounds to the largest page multiple without wrapping: just too big.
        assert_eq!(
            a.alloc(VaRequest::new(u64::MAX - K4 + 1)),
            Err(VaAllocError::NoSpace)
        );
        assert_eq!(
            a.alloc(VaRequest::new(!(M2 - 1)).with_align(M2)),
            Err(VaAllocError::NoSpace)
        );
        let top = !(K4 - 1);
        assert_eq!(
            a.alloc(VaRequest::new(2 * K4).with_forced_hint(top)),
            Err(VaAllocError::HintOutOfRange)
        );
        assert_eq!(
            a.alloc(VaRequest::new(u64::MAX - K4 + 1).with_forced_hint(HOST)),
            Err(VaAllocError::HintOutOfRange)
        );
        assert_eq!(dump(&a)?.as_slice(), before.as_slice());
        assert_eq!(a.alloc(VaRequest::new(2 * K4).with_hint(top)), Ok(HOST));
        assert!(!a.is_hint_crossing_range(u64::MAX - 5, u64::MAX));
        let mut d = dram(4)?;
        assert_eq!(
            d.alloc(VaRequest::new(u64::MAX)),
            Err(VaAllocError::InvalidSize)
        );
        assert_eq!(
            d.alloc(VaRequest::new(u64::MAX - DRAM_PAGE)),
            Err(VaAllocError::NoSpace)
        );
        assert_eq!(d.free(DRAM_START, u64::MAX), Err(EINVAL));
        assert!(a.check_invariants() && d.check_invariants());
        Ok(())
    }

    #[test]
    fn exhaustion_is_enomem() -> Result {
        let mut a = host(8)?;
        for i in 0..8 {
            assert_eq!(pages(&mut a, 1)?, HOST + i * K4);
        }
        assert_eq!(a.alloc(VaRequest::new(K4)), Err(VaAllocError::NoSpace));
        assert_eq!(VaAllocError::NoSpace.to_errno(), ENOMEM);
        a.free(HOST + 2 * K4, K4)?;
        a.free(HOST + 4 * K4, K4)?;
        // Two free pages, but not next to each other.
        assert_eq!(a.alloc(VaRequest::new(2 * K4)), Err(VaAllocError::NoSpace));
        a.free(HOST + 3 * K4, K4)?;
        assert_eq!(pages(&mut a, 3)?, HOST + 2 * K4);
        assert_eq!(a.free_blocks(), 0);
        assert!(a.check_invariants());
        Ok(())
    }

    #[test]
    fn sizes_of_4_gib_and_more_work() -> Result {
        let p = AsicProperties::gaudi2(6, 0)?;
        let mut a = VaAllocator::new(
            &VaAllocConfig::new(p.host_va, p.host_page_size)
                .with_extra_align(p.host_huge_page_size)
                .with_hint_reserved(HINTS_HOST_RESERVED),
        )?;
        let g4 = 4 * G1;
        // The command-buffer pool: 4 GiB at 2 MiB alignment.
        assert_eq!(a.reserve(g4, M2), Ok(HOST));
        assert_eq!(a.alloc(VaRequest::new(g4 + K4)), Ok(HOST + g4));
        assert_eq!(pages(&mut a, 1)?, HOST + 2 * g4 + K4);
        a.free(HOST + g4, g4 + K4)?;
        assert_eq!(a.alloc(VaRequest::new(g4 + K4)), Ok(HOST + g4));
        assert_eq!(a.alloc(VaRequest::new(1 << 40)), Ok(HOST + 2 * g4 + 2 * K4));
        // 4 GiB + 1 below the reserved span overlaps it (upstream: 1 byte, no).
        let r = HINTS_HOST_RESERVED;
        assert!(a.is_hint_crossing_range(r.start - g4, g4 + 1));
        assert!(!a.is_hint_crossing_range(r.start - g4, g4));
        // A 4 GiB block forced to end at the span start, then more by best fit.
        assert_eq!(
            a.alloc(VaRequest::new(g4).with_forced_hint(r.start - g4)),
            Ok(r.start - g4)
        );
        assert!(a.check_invariants());
        assert_eq!(a.clear(), 5);
        assert!(a.is_pristine());
        Ok(())
    }

    #[test]
    fn reserve_and_unreserve_up_to_the_last_byte() -> Result {
        let mut a = host_2m(1024)?;
        assert_eq!(a.reserve(M2, M2), Ok(HOST));
        // The rest of the range: it ends on the range's last byte.
        assert_eq!(a.reserve(M2, 0), Ok(HOST + M2));
        assert_eq!(a.reserve(K4, 0), Err(VaAllocError::NoSpace));
        assert_eq!(a.reserve(K4, 3), Err(VaAllocError::InvalidAlign));
        // Upstream refuses this unreserve (off by one at the range end).
        a.unreserve(HOST + M2, M2)?;
        assert_eq!(a.unreserve(HOST + M2, M2), Err(EINVAL));
        a.unreserve(HOST, M2)?;
        assert!(a.is_pristine() && a.check_invariants());
        Ok(())
    }

    #[test]
    fn errors_map_to_distinct_errnos() {
        use VaAllocError::*;
        for e in [
            InvalidSize,
            InvalidAlign,
            NoHint,
            MisalignedHint,
            HintOutOfRange,
        ] {
            assert_eq!(e.to_errno(), EINVAL);
            assert_eq!(Error::from(e), EINVAL);
        }
        assert_eq!(HintInUse.to_errno(), EADDRINUSE);
        assert_eq!(NoSpace.to_errno(), ENOMEM);
        assert_eq!(NoMemory.to_errno(), ENOMEM);
        for e in [
            InvalidSize,
            InvalidAlign,
            NoHint,
            MisalignedHint,
            HintOutOfRange,
            HintInUse,
            NoSpace,
            NoMemory,
        ] {
            assert_eq!(e.upstream_errno(), ENOMEM);
        }
    }

    #[test]
    fn prepared_nodes_are_enough_and_failures_change_nothing() -> Result {
        let mut a = VaAllocator::new(
            &VaAllocConfig::new(VaSpan::new(HOST, HOST + 1024 * K4), K4)
                .with_extra_align(M2)
                .with_hint_reserved(VaSpan::new(HOST + 600 * K4, HOST + 700 * K4)),
        )?;
        // Best fit prefers the smaller free block above the span.
        assert_eq!(pages(&mut a, 1)?, HOST + 700 * K4);
        a.free(HOST + 700 * K4, K4)?;
        assert_eq!(a.alloc(VaRequest::new(K4).with_forced_hint(HOST)), Ok(HOST));
        // The worst case for nodes: a free front and a free tail, in one block.
        let res = VaAllocator::prepare(GFP_KERNEL)?;
        assert_eq!(
            a.alloc_with(VaRequest::new(K4).with_align(M2), res),
            Ok(HOST + M2)
        );
        // Across both span edges with a free front and tail.
        let res = VaAllocator::prepare(GFP_KERNEL)?;
        let h = HOST + 590 * K4;
        assert_eq!(
            a.alloc_with(VaRequest::new(120 * K4).with_forced_hint(h), res),
            Ok(h)
        );
        assert!(a.check_invariants());
        let before = dump(&a)?;
        let res = VaAllocator::prepare(GFP_KERNEL)?;
        assert_eq!(
            a.alloc_with(VaRequest::new(K4).with_forced_hint(h), res),
            Err(VaAllocError::HintInUse)
        );
        assert_eq!(dump(&a)?.as_slice(), before.as_slice());
        assert_eq!(a.free_blocks(), 3);
        assert_eq!(a.allocated_blocks(), 3);
        a.free(h, 120 * K4)?;
        a.free(HOST + M2, K4)?;
        a.free(HOST, K4)?;
        assert!(a.is_pristine() && a.check_invariants());
        Ok(())
    }

    /// Tree nodes held in `a`'s trees: a block-tree node and one size-tree node
    /// per class for every block (linked in a size tree or held by the block).
    fn nodes_in_trees(a: &VaAllocator) -> usize {
        a.blocks.iter().count() * (1 + a.classes())
    }

    /// Every node `a` was given is in its trees, in its spare cache or counted
    /// as freed: no node is lost or freed uncounted.
    fn nodes_accounted(a: &VaAllocator) -> bool {
        let s = a.node_stats();
        s.fresh == s.freed + s.spare_block_nodes + s.spare_size_nodes + nodes_in_trees(a)
    }

    #[test]
    fn steady_state_cycles_do_not_allocate() -> Result {
        let mut a = VaAllocator::new(
            &VaAllocConfig::new(VaSpan::new(HOST, HOST + 4096 * K4), K4)
                .with_extra_align(M2)
                .with_hint_reserved(VaSpan::new(HOST + 3000 * K4, HOST + 3500 * K4)),
        )?;
        // Live blocks with one-page holes between them, as in the benchmark
        // (best fit puts them above the span, at page 3500).
        for i in 0..16 {
            assert_eq!(pages(&mut a, 1)?, HOST + (3500 + i) * K4);
        }
        for i in (0..16).step_by(2) {
            a.free(HOST + (3500 + i) * K4, K4)?;
        }
        let mut reserved = 0u32;
        let mut d = dram(16)?;
        let mut p = host(64)?;
        // An exact fit in a hole (no node), a cut off a free block (one piece),
        // a 2 MiB aligned page with a free front and tail (two pieces), a hint
        // across the span's start edge and one inside the span (two pieces);
        // then a DRAM range and a range without the extra class.
        let cases = [
            (0, VaRequest::new(K4)),
            (0, VaRequest::new(3 * K4)),
            (0, VaRequest::new(2 * K4).with_align(M2)),
            (0, VaRequest::new(4 * K4).with_forced_hint(HOST + 2998 * K4)),
            (0, VaRequest::new(K4).with_hint(HOST + 3200 * K4)),
            (
                1,
                VaRequest::new(DRAM_PAGE).with_forced_hint(DRAM_START + 5 * DRAM_PAGE),
            ),
            (1, VaRequest::new(2 * DRAM_PAGE)),
            (2, VaRequest::new(K4).with_forced_hint(HOST + 7 * K4)),
            (2, VaRequest::new(K4)),
        ];
        for (which, req) in cases {
            let x = match which {
                0 => &mut a,
                1 => &mut d,
                _ => &mut p,
            };
            // The first cycle may miss the cache; its free fills it.
            let s = x.alloc(req)?;
            x.free(s, req.size)?;
            let stats = x.node_stats();
            let shape = dump(x)?;
            for _ in 0..50 {
                let got = x.alloc_or_reserve(req, || {
                    reserved += 1;
                    Err(ENOMEM)
                });
                assert_eq!(got, Ok(s));
                assert!(x.check_invariants());
                x.free(s, req.size)?;
            }
            // No reservation, nothing freed, the same cache and blocks.
            assert_eq!(x.node_stats(), stats);
            assert_eq!(dump(x)?.as_slice(), shape.as_slice());
            assert!(nodes_accounted(x));
        }
        assert_eq!(reserved, 0);
        Ok(())
    }

    #[test]
    fn spare_cache_is_bounded_and_every_node_is_accounted_for() -> Result {
        // The node sizes the module documentation quotes.
        assert_eq!(core::mem::size_of::<Block>(), 40);
        assert_eq!(core::mem::size_of::<SizeKey>(), 16);
        assert_eq!(core::mem::size_of::<kernel::bindings::rb_node>(), 24);
        let mut a = host_2m(1024)?;
        let empty = NodeStats {
            fresh: 3,
            freed: 0,
            spare_block_nodes: 0,
            spare_size_nodes: 0,
        };
        assert_eq!(a.node_stats(), empty);
        // 64 one-page blocks: every other allocation misses the cache and leaves
        // one piece of its reservation there for the next.
        let mut starts = KVec::new();
        for _ in 0..64 {
            starts.push(pages(&mut a, 1)?, GFP_KERNEL)?;
            assert!(nodes_accounted(&a));
        }
        assert_eq!(a.node_stats().fresh, 3 + 32 * VaReservations::NODES);
        assert_eq!(a.node_stats().freed, 0);
        // Freeing every other block merges nothing; freeing the rest merges on
        // both sides every time: 64 pieces come back, the cache keeps 4.
        for s in starts.iter().step_by(2) {
            a.free(*s, K4)?;
        }
        assert_eq!(a.node_stats().spare_block_nodes, 0);
        for s in starts.iter().skip(1).step_by(2) {
            a.free(*s, K4)?;
            assert!(a.check_invariants() && nodes_accounted(&a));
        }
        let st = a.node_stats();
        assert_eq!(st.spare_block_nodes, SPARE_BLOCK_NODES);
        assert_eq!(st.spare_size_nodes, SPARE_SIZE_NODES);
        assert_eq!(st.freed, 64 * 3 - SPARE_BLOCK_NODES - SPARE_SIZE_NODES);
        assert!(a.is_pristine() && a.check_invariants());
        // `clear` gives nodes back within the bound too.
        for i in 1..=8 {
            a.alloc(VaRequest::new(3 * K4).with_forced_hint(HOST + i * 10 * K4))?;
        }
        assert_eq!(a.clear(), 8);
        assert_eq!(a.node_stats().spare_block_nodes, SPARE_BLOCK_NODES);
        assert_eq!(a.node_stats().spare_size_nodes, SPARE_SIZE_NODES);
        assert!(a.is_pristine() && a.check_invariants() && nodes_accounted(&a));
        // Without the extra class the extra-class nodes of a reservation are
        // cached or freed, never held by a block.
        let mut b = host(64)?;
        for _ in 0..6 {
            let res = VaAllocator::prepare(GFP_KERNEL)?;
            b.alloc_with(VaRequest::new(K4), res)?;
            assert!(b.check_invariants() && nodes_accounted(&b));
        }
        assert_eq!(b.node_stats().spare_block_nodes, SPARE_BLOCK_NODES);
        assert_eq!(b.node_stats().spare_size_nodes, SPARE_SIZE_NODES);
        assert_eq!(b.clear(), 6);
        assert!(b.is_pristine() && b.check_invariants() && nodes_accounted(&b));
        Ok(())
    }

    #[test]
    fn cache_misses_and_failed_reservations_change_nothing() -> Result {
        use VaAllocError::*;
        let fail = || Err(ENOMEM);
        let mut a = host_2m(1024)?;
        let before = dump(&a)?;
        let stats = a.node_stats();
        // The cache starts empty: a cut needs a piece.
        assert_eq!(
            a.alloc_cached(VaRequest::new(K4)),
            Err(AllocOutcome::NeedNodes)
        );
        assert_eq!(a.alloc_or_reserve(VaRequest::new(K4), fail), Err(NoMemory));
        // A request that cannot be served fails as such, whatever the cache holds.
        assert_eq!(
            a.alloc_cached(VaRequest::new(0)),
            Err(AllocOutcome::Failed(InvalidSize))
        );
        assert_eq!(
            a.alloc_cached(VaRequest::new(K4).with_align(3)),
            Err(AllocOutcome::Failed(InvalidAlign))
        );
        assert_eq!(
            a.alloc_cached(VaRequest::new(K4).with_forced_hint(HOST + 1024 * K4)),
            Err(AllocOutcome::Failed(HintOutOfRange))
        );
        assert_eq!(
            a.alloc_or_reserve(VaRequest::new(2048 * K4), fail),
            Err(NoSpace)
        );
        assert_eq!(dump(&a)?.as_slice(), before.as_slice());
        assert_eq!(a.node_stats(), stats);
        // An exact fit needs no node: served without a reservation.
        assert_eq!(
            a.alloc_or_reserve(VaRequest::new(1024 * K4), fail),
            Ok(HOST)
        );
        a.free(HOST, 1024 * K4)?;
        assert_eq!(a.node_stats(), stats);
        // A miss reserves; the piece it does not use stays in the cache.
        assert_eq!(a.alloc(VaRequest::new(K4)), Ok(HOST));
        assert_eq!(a.node_stats().spare_block_nodes, 1);
        assert_eq!(a.node_stats().spare_size_nodes, 2);
        // One piece is not enough for a 2 MiB aligned page with a free front.
        let before = dump(&a)?;
        let stats = a.node_stats();
        let m2 = VaRequest::new(K4).with_align(M2);
        assert_eq!(a.alloc_cached(m2), Err(AllocOutcome::NeedNodes));
        assert_eq!(a.alloc_or_reserve(m2, fail), Err(NoMemory));
        assert_eq!(dump(&a)?.as_slice(), before.as_slice());
        assert_eq!(a.node_stats(), stats);
        assert!(a.check_invariants() && nodes_accounted(&a));
        // It is enough for a plain cut.
        assert_eq!(a.alloc_or_reserve(VaRequest::new(K4), fail), Ok(HOST + K4));
        // A failed `alloc_with` changes no block; its nodes go to the cache
        // within its bound, the rest is freed.
        let before = dump(&a)?;
        for _ in 0..3 {
            let res = VaAllocator::prepare(GFP_KERNEL)?;
            assert_eq!(
                a.alloc_with(VaRequest::new(K4).with_forced_hint(HOST), res),
                Err(HintInUse)
            );
            assert_eq!(dump(&a)?.as_slice(), before.as_slice());
            assert!(a.check_invariants() && nodes_accounted(&a));
        }
        let st = a.node_stats();
        assert_eq!(st.spare_block_nodes, SPARE_BLOCK_NODES);
        assert_eq!(st.spare_size_nodes, SPARE_SIZE_NODES);
        assert_eq!(st.freed, 3 * VaReservations::NODES - 12);
        // The ContextVm flow: a miss, then `alloc_with` places the request
        // afresh; here the state did not change in between, so the same block.
        let mut b = host_2m(1024)?;
        assert_eq!(b.alloc_cached(m2), Err(AllocOutcome::NeedNodes));
        let res = VaAllocator::prepare(GFP_KERNEL)?;
        assert_eq!(b.alloc_with(m2, res), Ok(HOST));
        assert!(b.check_invariants() && nodes_accounted(&b));
        Ok(())
    }

    #[test]
    fn dump_shows_whole_allocations_and_merged_free_blocks() -> Result {
        let mut a = VaAllocator::new(
            &VaAllocConfig::new(VaSpan::new(HOST, HOST + 16 * K4), K4)
                .with_hint_reserved(VaSpan::new(HOST + 8 * K4, HOST + 12 * K4)),
        )?;
        // The span splits the free space internally, but it shows as one block.
        assert_eq!(dump(&a)?.as_slice(), &[(HOST, HOST + 16 * K4, true)]);
        assert_eq!(a.free_blocks(), 1);
        a.alloc(VaRequest::new(2 * K4).with_forced_hint(HOST))?;
        a.alloc(VaRequest::new(2 * K4).with_forced_hint(HOST + 7 * K4))?;
        assert_eq!(
            dump(&a)?.as_slice(),
            &[
                (HOST, HOST + 2 * K4, false),
                (HOST + 2 * K4, HOST + 7 * K4, true),
                (HOST + 7 * K4, HOST + 9 * K4, false),
                (HOST + 9 * K4, HOST + 16 * K4, true),
            ]
        );
        assert_eq!(a.free_blocks(), 2);
        assert_eq!(a.allocated_blocks(), 2);
        assert!(a.check_invariants());
        Ok(())
    }

    /// A deliberately simple reference: a sorted list of maximal free blocks and
    /// allocations, searched linearly.
    struct Model {
        span: VaSpan,
        page: u64,
        pow2: bool,
        extra: Option<u64>,
        ignored: u64,
        hint_only: Option<VaSpan>,
        blocks: KVec<(u64, u64, bool)>,
    }

    impl Model {
        fn new(cfg: &VaAllocConfig, span: VaSpan) -> Result<Self> {
            let page = cfg.page_size;
            let hint_only = cfg.hint_reserved.and_then(|r| {
                let lo = r.start.max(span.start);
                let hi = r.end.min(span.end);
                (lo < hi).then(|| {
                    VaSpan::new(
                        span.start + (lo - span.start) / page * page,
                        span.start + (hi - span.start).div_ceil(page) * page,
                    )
                })
            });
            let mut blocks = KVec::new();
            blocks.push((span.start, span.end, true), GFP_KERNEL)?;
            Ok(Self {
                span,
                page,
                pow2: page.is_power_of_two(),
                extra: cfg.extra_align,
                ignored: cfg.hint_ignored_bits,
                hint_only,
                blocks,
            })
        }

        fn round(&self, size: u64) -> Option<u64> {
            if size == 0 {
                None
            } else if self.pow2 {
                size.checked_next_multiple_of(self.page)
            } else {
                size.div_ceil(self.page).checked_mul(self.page)
            }
        }

        fn alloc(&mut self, req: VaRequest) -> Result<Result<u64, VaAllocError>> {
            let Some(size) = self.round(req.size) else {
                return Ok(Err(VaAllocError::InvalidSize));
            };
            let align = if self.pow2 {
                if req.align != 0 && !req.align.is_power_of_two() {
                    return Ok(Err(VaAllocError::InvalidAlign));
                }
                let al = req.align.max(self.page);
                if al != self.page && Some(al) != self.extra {
                    return Ok(Err(VaAllocError::InvalidAlign));
                }
                al
            } else {
                self.page
            };
            let aligned = if self.pow2 {
                req.hint % align == 0
            } else {
                (req.hint & !self.ignored) % self.page == 0
                    && (!(self.span.start..self.span.end).contains(&req.hint)
                        || (req.hint - self.span.start) % self.page == 0)
            };
            let mut hint = req.hint;
            if hint != 0 && !aligned {
                if req.force_hint {
                    return Ok(Err(VaAllocError::MisalignedHint));
                }
                hint = 0;
            }
            if hint == 0 && req.force_hint {
                return Ok(Err(VaAllocError::NoHint));
            }
            let mut chosen = None;
            if hint != 0 {
                match hint.checked_add(size) {
                    Some(he) if hint >= self.span.start && he <= self.span.end => {
                        if self
                            .blocks
                            .iter()
                            .any(|&(s, e, free)| free && s <= hint && he <= e)
                        {
                            chosen = Some(hint);
                        } else if req.force_hint {
                            return Ok(Err(VaAllocError::HintInUse));
                        }
                    }
                    _ => {
                        if req.force_hint {
                            return Ok(Err(VaAllocError::HintOutOfRange));
                        }
                    }
                }
            }
            if chosen.is_none() {
                // Linear best fit over the free blocks cut at the span.
                let mut best: Option<(u64, u64)> = None;
                for &(s, e, free) in self.blocks.iter() {
                    if !free {
                        continue;
                    }
                    let pieces = match self.hint_only {
                        Some(h) => [(s, e.min(h.start)), (s.max(h.end), e)],
                        None => [(s, e), (0, 0)],
                    };
                    for (ps, pe) in pieces {
                        if ps >= pe {
                            continue;
                        }
                        let a = if self.pow2 {
                            match ps.checked_next_multiple_of(align) {
                                Some(a) => a,
                                None => continue,
                            }
                        } else {
                            ps
                        };
                        if a >= pe || pe - a < size {
                            continue;
                        }
                        if best.is_none_or(|(v, _)| pe - a < v) {
                            best = Some((pe - a, a));
                        }
                    }
                }
                chosen = best.map(|(_, a)| a);
            }
            let Some(a) = chosen else {
                return Ok(Err(VaAllocError::NoSpace));
            };
            let ae = a + size;
            let mut out = KVec::with_capacity(self.blocks.len() + 2, GFP_KERNEL)?;
            for &(s, e, free) in self.blocks.iter() {
                if free && s <= a && ae <= e {
                    if s < a {
                        out.push((s, a, true), GFP_KERNEL)?;
                    }
                    out.push((a, ae, false), GFP_KERNEL)?;
                    if ae < e {
                        out.push((ae, e, true), GFP_KERNEL)?;
                    }
                } else {
                    out.push((s, e, free), GFP_KERNEL)?;
                }
            }
            self.blocks = out;
            Ok(Ok(a))
        }

        fn free(&mut self, start: u64, size: u64) -> Result<Result> {
            let Some(end) = self.round(size).and_then(|n| start.checked_add(n)) else {
                return Ok(Err(EINVAL));
            };
            let Some(idx) = self
                .blocks
                .iter()
                .position(|&(s, e, free)| !free && s == start && e == end)
            else {
                return Ok(Err(EINVAL));
            };
            let mut out: KVec<(u64, u64, bool)> =
                KVec::with_capacity(self.blocks.len(), GFP_KERNEL)?;
            for (i, &(s, e, free)) in self.blocks.iter().enumerate() {
                let free = free || i == idx;
                let merged = match out.last_mut() {
                    Some(last) if free && last.2 && last.1 == s => {
                        last.1 = e;
                        true
                    }
                    _ => false,
                };
                if !merged {
                    out.push((s, e, free), GFP_KERNEL)?;
                }
            }
            self.blocks = out;
            Ok(Ok(()))
        }

        fn clear(&mut self) -> Result<usize> {
            let n = self.blocks.iter().filter(|b| !b.2).count();
            self.blocks.clear();
            self.blocks
                .push((self.span.start, self.span.end, true), GFP_KERNEL)?;
            Ok(n)
        }

        /// The `k`-th allocation (modulo their number), if any.
        fn nth_allocation(&self, k: u64) -> Option<(u64, u64)> {
            let n = self.blocks.iter().filter(|b| !b.2).count();
            if n == 0 {
                return None;
            }
            let k = usize::try_from(k % n as u64).ok()?;
            self.blocks
                .iter()
                .filter(|b| !b.2)
                .nth(k)
                .map(|&(s, e, _)| (s, e))
        }
    }

    /// xorshift64: a tiny deterministic PRNG.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            let mut x = self.0;
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            self.0 = x;
            x
        }

        fn below(&mut self, n: u64) -> u64 {
            if n == 0 {
                0
            } else {
                self.next() % n
            }
        }
    }

    /// Outcome counters, to show the random runs reach every path.
    #[derive(Default)]
    struct Stats {
        ok: u32,
        by_hint: u32,
        no_space: u32,
        in_use: u32,
        misaligned: u32,
        out_of_range: u32,
        freed: u32,
        bad_free: u32,
        crossing: u32,
        cache_hits: u32,
        cache_misses: u32,
    }

    /// `ops` random operations on an allocator and the model, compared after
    /// every step.
    fn differential(cfg: &VaAllocConfig, seed: u64, ops: u32) -> Result<Stats> {
        let mut a = VaAllocator::new(cfg)?;
        let mut m = Model::new(cfg, a.span())?;
        let mut rng = Rng(seed);
        let mut st = Stats::default();
        let span = a.span();
        let page = a.page_size();
        let npages = span.len() / page;
        for op in 0..ops {
            let r = rng.below(100);
            let what;
            if r < 52 {
                let size = match rng.below(20) {
                    0 => 0,
                    1 => u64::MAX - rng.below(3) * page,
                    2 => (1 + rng.below(npages)) * page,
                    3..=5 => (1 + rng.below(16)) * page - rng.below(page),
                    _ => (1 + rng.below(8)) * page,
                };
                let align = match (cfg.extra_align, rng.below(20)) {
                    (_, 0..=11) => 0,
                    (_, 12..=14) => page,
                    (Some(x), 15..=17) => x,
                    (_, 18) => 3,
                    _ => page * 2,
                };
                let aligned = |n: u64| span.start + n * page;
                let hint = match rng.below(12) {
                    0..=4 => 0,
                    5..=7 => aligned(rng.below(npages)),
                    8 => aligned(rng.below(npages)) + 1 + rng.below(page - 1),
                    9 => match (m.hint_only, cfg.extra_align) {
                        (Some(h), _) if rng.below(2) == 0 => {
                            h.start + rng.below(h.len() / page) * page
                        }
                        (_, Some(x)) => span.start + rng.below(span.len() / x) * x,
                        _ => aligned(npages - 1 - rng.below(4)),
                    },
                    10 => match rng.below(4) {
                        0 => span.start.wrapping_sub(page),
                        1 => span.end,
                        2 => !(page - 1),
                        _ => aligned(rng.below(npages)) ^ (1 << 62),
                    },
                    _ => match m.nth_allocation(rng.next()) {
                        Some((s, _)) => s,
                        None => 0,
                    },
                };
                let req = VaRequest {
                    size,
                    align,
                    hint,
                    force_hint: rng.below(3) == 0,
                };
                // The three ways in: `alloc`, `alloc_with` with fresh nodes, and
                // the ContextVm flow (`alloc_cached`, and on a miss `alloc_with`).
                let fresh = a.node_stats().fresh;
                let got = match op % 3 {
                    0 => a.alloc(req),
                    1 => a.alloc_with(req, VaAllocator::prepare(GFP_KERNEL)?),
                    _ => match a.alloc_cached(req) {
                        Ok(s) => Ok(s),
                        Err(AllocOutcome::Failed(e)) => Err(e),
                        Err(AllocOutcome::NeedNodes) => {
                            a.alloc_with(req, VaAllocator::prepare(GFP_KERNEL)?)
                        }
                    },
                };
                // Served from the cache, or reserved on a miss.
                if op % 3 != 1 {
                    if a.node_stats().fresh != fresh {
                        st.cache_misses += 1;
                    } else if got.is_ok() {
                        st.cache_hits += 1;
                    }
                }
                let want = m.alloc(req)?;
                if got != want {
                    pr_err!("op {}: {:?}: got {:?}, model {:?}\n", op, req, got, want);
                    return Err(EINVAL);
                }
                match got {
                    Ok(s) => {
                        st.ok += 1;
                        if hint != 0 && s == hint {
                            st.by_hint += 1;
                        }
                        let rounded = m.round(size).ok_or(EINVAL)?;
                        if a.is_hint_crossing_range(s, rounded) {
                            st.crossing += 1;
                            // Only a hint reaches the reserved span.
                            assert_eq!(s, hint);
                        }
                    }
                    Err(VaAllocError::NoSpace) => st.no_space += 1,
                    Err(VaAllocError::HintInUse) => st.in_use += 1,
                    Err(VaAllocError::MisalignedHint) => st.misaligned += 1,
                    Err(VaAllocError::HintOutOfRange) => st.out_of_range += 1,
                    Err(_) => {}
                }
                what = "alloc";
            } else if r < 90 {
                let Some((s, e)) = m.nth_allocation(rng.next()) else {
                    continue;
                };
                // The requested size of an allocation may be below the rounded one.
                let size = if rng.below(4) == 0 {
                    e - s - rng.below(page)
                } else {
                    e - s
                };
                let got = a.free(s, size);
                let want = m.free(s, size)?;
                if got != want || got.is_err() {
                    pr_err!("op {}: free({:#x}, {:#x}): {:?}\n", op, s, size, got);
                    return Err(EINVAL);
                }
                st.freed += 1;
                what = "free";
            } else if r < 99 {
                let (s, size) = match (m.nth_allocation(rng.next()), rng.below(5)) {
                    (Some((s, e)), 0) => (s, e - s + page),
                    (Some((s, e)), 1) => (s + page, e - s - page),
                    (Some((s, e)), 2) => (s, (e - s) * 2),
                    (Some((s, _)), 3) => (s.wrapping_sub(page), page),
                    _ => (span.start + rng.below(npages) * page, page),
                };
                let got = a.free(s, size);
                let want = m.free(s, size)?;
                if got != want {
                    pr_err!("op {}: bad free({:#x}, {:#x}): {:?}\n", op, s, size, got);
                    return Err(EINVAL);
                }
                if got.is_err() {
                    st.bad_free += 1;
                }
                what = "bad free";
            } else {
                let got = a.clear();
                let want = m.clear()?;
                if got != want {
                    pr_err!("op {}: clear: {} vs {}\n", op, got, want);
                    return Err(EINVAL);
                }
                what = "clear";
            }
            let d = dump(&a)?;
            let free = m.blocks.iter().filter(|b| b.2).count();
            let allocated = m.blocks.len() - free;
            if d.as_slice() != m.blocks.as_slice()
                || !a.check_invariants()
                || !nodes_accounted(&a)
                || a.free_blocks() != free
                || a.allocated_blocks() != allocated
                || a.is_pristine() != (allocated == 0)
            {
                pr_err!("op {} ({}): allocator and model differ\n", op, what);
                return Err(EINVAL);
            }
        }
        a.clear();
        assert!(a.is_pristine() && a.check_invariants());
        Ok(st)
    }

    #[test]
    fn random_ops_match_the_model_in_a_host_range() -> Result {
        // 4096 pages of 4 KiB with the 2 MiB class and a span that is not page
        // aligned at either end.
        let cfg = VaAllocConfig::new(VaSpan::new(HOST, HOST + 4096 * K4), K4)
            .with_extra_align(M2)
            .with_hint_reserved(VaSpan::new(HOST + 3000 * K4 + 100, HOST + 3500 * K4 - 100));
        let st = differential(&cfg, 0x9E37_79B9_7F4A_7C15, 2500)?;
        assert!(st.ok > 0 && st.by_hint > 0 && st.no_space > 0 && st.in_use > 0);
        assert!(st.misaligned > 0 && st.out_of_range > 0 && st.freed > 0 && st.bad_free > 0);
        assert!(st.crossing > 0);
        assert!(st.cache_hits > 0 && st.cache_misses > 0);
        Ok(())
    }

    #[test]
    fn random_ops_match_the_model_in_a_dram_range() -> Result {
        let cfg = VaAllocConfig::new(
            VaSpan::new(DRAM_START, DRAM_START + 256 * DRAM_PAGE),
            DRAM_PAGE,
        )
        .with_hint_ignored_bits(LOW48_IGNORED)
        .with_hint_reserved(VaSpan::new(
            DRAM_START + 100 * DRAM_PAGE + 0x1234,
            DRAM_START + 140 * DRAM_PAGE - 0x10,
        ));
        let st = differential(&cfg, 0x2545_F491_4F6C_DD1D, 2500)?;
        assert!(st.ok > 0 && st.by_hint > 0 && st.no_space > 0 && st.in_use > 0);
        assert!(st.misaligned > 0 && st.out_of_range > 0 && st.freed > 0 && st.bad_free > 0);
        assert!(st.crossing > 0);
        assert!(st.cache_hits > 0 && st.cache_misses > 0);
        Ok(())
    }

    #[test]
    fn random_ops_match_the_model_in_a_plain_range() -> Result {
        let cfg = VaAllocConfig::new(VaSpan::new(HOST + 0x123, HOST + 512 * M2), M2);
        let st = differential(&cfg, 0xD1B5_4A32_D192_ED03, 2000)?;
        assert!(st.ok > 0 && st.by_hint > 0 && st.no_space > 0 && st.in_use > 0);
        assert!(st.misaligned > 0 && st.out_of_range > 0 && st.freed > 0 && st.bad_free > 0);
        assert!(st.cache_hits > 0 && st.cache_misses > 0);
        Ok(())
    }
}
