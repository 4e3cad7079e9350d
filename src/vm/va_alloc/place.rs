// SPDX-License-Identifier: GPL-2.0

//! The decision step of the VA block allocator: where a request goes, found
//! without changing any block, so that a failed request changes nothing and
//! the commit step ([`super::commit`]) has no failure path; and the allocate
//! entry that dispatches to it or to page-class best fit
//! ([`super::best_fit`]). Best fit in the 2 MiB class takes the block it found
//! out of its size tree, through its search cursor, but only once the tree
//! nodes the commit needs are in hand.
//!
//! n is the number of blocks in the range.

use super::{
    spare::{Piece, VaReservations},
    tree::{align_up, key_parts, size_key, Placement, Run, SizeKey, SizeNodes, SizeTree},
    AllocOutcome, VaAllocError, VaAllocator, VaRequest,
};
use kernel::rbtree::CursorMut;

/// The alignment class of a request.
#[derive(Clone, Copy)]
struct Class {
    /// The alignment (the page size for the page class).
    align: u64,
    /// Whether it is the extra class.
    extra: bool,
}

/// Where a request goes, as [`VaAllocator::target`] decides it.
enum Target {
    /// At its hint: the placement, found without changing anything.
    At(Placement),
    /// By best fit ([`VaAllocator::take_best_fit`]): `size` bytes (whole
    /// pages) of `class`.
    BestFit {
        /// The size, rounded up to whole pages.
        size: u64,
        /// The alignment class.
        class: Class,
    },
}

impl VaAllocator {
    /// `size` rounded up to whole pages; `None` for 0 or on overflow. O(1).
    #[inline(always)]
    pub(super) fn round_size(&self, size: u64) -> Option<u64> {
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

    /// Allocate `req`: decide where it goes, then commit it with the pieces
    /// it needs, from `fresh` first, then from the spare cache
    /// ([`super::spare::SpareCache::take_pieces`]). Page-class best fit
    /// commits where it finds its block ([`Self::alloc_page_best_fit`]); a
    /// hint or the extra class go through [`Self::commit`]. O(log n)
    /// (amortised for best fit).
    ///
    /// On failure no block changed and `fresh` went to the spare cache: the
    /// request's error, or `NeedNodes` when the cache does not cover the
    /// pieces (never with `fresh`).
    #[inline(always)]
    pub(super) fn allocate(
        &mut self,
        req: &VaRequest,
        fresh: Option<VaReservations>,
    ) -> Result<u64, AllocOutcome> {
        let target = match self.target(req) {
            Ok(t) => t,
            Err(e) => {
                self.spare.stash_fresh(fresh);
                return Err(e.into());
            }
        };
        match target {
            Target::BestFit { size, class } if !class.extra => {
                self.alloc_page_best_fit(size, fresh)
            }
            other => self.alloc_placed(other, fresh),
        }
    }

    /// [`Self::allocate`] at a hint or by best fit in the extra class: the
    /// placement, its pieces, then [`Self::commit`]. Out of line, so that the
    /// page-class best fit, the common case, stays short. O(log n).
    #[inline(never)]
    fn alloc_placed(
        &mut self,
        target: Target,
        fresh: Option<VaReservations>,
    ) -> Result<u64, AllocOutcome> {
        let (p, head, tail) = match target {
            Target::At(p) => {
                let classes = self.classes();
                let (head, tail) = self
                    .spare
                    .take_pieces(&p, fresh, classes)
                    .ok_or(AllocOutcome::NeedNodes)?;
                (p, head, tail)
            }
            Target::BestFit { size, class } => self.take_best_fit(size, class, fresh)?,
        };
        let start = p.start;
        self.commit(p, head, tail);
        Ok(start)
    }

    /// Where `req` goes, without changing anything: at its hint, or by best fit
    /// ([`Self::take_best_fit`]). O(log n) for a hint, O(1) otherwise.
    #[inline(always)]
    fn target(&self, req: &VaRequest) -> Result<Target, VaAllocError> {
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
                Ok(p) => return Ok(Target::At(p)),
                Err(e) if req.force_hint => return Err(e),
                Err(_) => {}
            }
        }
        Ok(Target::BestFit { size, class })
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
                    taken: SizeNodes::NONE,
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

    /// Best fit for `size` bytes of `class`, with the pieces
    /// [`Self::commit`] needs for it: from `fresh` first, then from the spare
    /// cache ([`super::spare::SpareCache::take_pieces`]). O(log n): one lower-bound search in
    /// the class's size tree; once the pieces are in hand, the node found is
    /// removed through the search's cursor (O(1) amortised: `rb_erase` and the
    /// cursor's two neighbours) and handed to the commit in
    /// [`Placement::taken`], so that the commit does not search that tree
    /// again.
    ///
    /// The size trees hold only `Free` blocks, and a key gives the block's end
    /// (start plus length, or aligned start plus usable size), so the block
    /// tree is not searched.
    ///
    /// `NoSpace` if no free block fits, `NeedNodes` if the spare cache does not
    /// cover the pieces (never with `fresh`); either way nothing changed but
    /// `fresh` going to the spare cache.
    #[inline(always)]
    fn take_best_fit(
        &mut self,
        size: u64,
        class: Class,
        fresh: Option<VaReservations>,
    ) -> Result<(Placement, Option<Piece>, Option<Piece>), AllocOutcome> {
        let classes = self.classes();
        let Self { trees, spare, .. } = self;
        let tree = match (class.extra, trees.extra.as_mut()) {
            (false, _) => Some((&mut trees.base, None)),
            (true, Some(x)) => Some((&mut x.tree, Some(x.align))),
            (true, None) => None,
        };
        let Some((cur, mut p)) = tree.and_then(|(t, align)| lower_bound_fit(t, size, align)) else {
            spare.stash_fresh(fresh);
            return Err(VaAllocError::NoSpace.into());
        };
        let (head, tail) = spare
            .take_pieces(&p, fresh, classes)
            .ok_or(AllocOutcome::NeedNodes)?;
        let (_, node) = cur.remove_current();
        let node = Some(node.into_reservation());
        if class.extra {
            p.taken.extra = node;
        } else {
            p.taken.base = node;
        }
        Ok((p, head, tail))
    }

    /// `(start, end, is_free)` of the block holding `addr`. O(log n).
    pub(super) fn block_containing(&self, addr: u64) -> Option<(u64, u64, bool)> {
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
    pub(super) fn block_before(&self, key: u64) -> Option<(u64, u64, bool)> {
        let c = self.blocks.cursor_lower_bound(&key)?;
        let (&k, b) = c.peek_prev()?;
        Some((k, b.end, b.state.is_free()))
    }
}

/// Best fit for `size` bytes in the size tree `tree` of blocks aligned to
/// `align` (`None`: the page class, whose keys are block starts): the cursor
/// on the smallest usable size `>= size`, ties to the lowest address, and the
/// placement at the block's aligned start (nothing taken yet). `None` if no
/// block fits. O(log n): one lower-bound search.
#[inline(always)]
fn lower_bound_fit(
    tree: &mut SizeTree,
    size: u64,
    align: Option<u64>,
) -> Option<(CursorMut<'_, SizeKey, ()>, Placement)> {
    let cur = tree.cursor_lower_bound_mut(&size_key(size, 0))?;
    let (usable, key) = key_parts(*cur.current().0);
    let start = match align {
        Some(a) => align_up(key, a)?,
        None => key,
    };
    let block_end = start.checked_add(usable)?;
    let end = start.checked_add(size)?;
    (end <= block_end).then(|| {
        (
            cur,
            Placement {
                start,
                end,
                run: Run::new(key, block_end),
                taken: SizeNodes::NONE,
            },
        )
    })
}
