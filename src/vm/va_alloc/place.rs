// SPDX-License-Identifier: GPL-2.0

//! The decision step of the VA block allocator: where a request goes, found
//! without changing anything (read-only), so that a failed request changes
//! nothing and the commit step ([`super::commit`]) has no failure path.
//!
//! n is the number of blocks in the range.

use super::{
    tree::{align_up, key_parts, size_key, Placement, Run},
    VaAllocError, VaAllocator, VaRequest,
};

/// The alignment class of a request.
#[derive(Clone, Copy)]
struct Class {
    /// The alignment (the page size for the page class).
    align: u64,
    /// Whether it is the extra class.
    extra: bool,
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

    /// Where `req` goes, without changing anything. O(log n).
    #[inline(always)]
    pub(super) fn place(&self, req: &VaRequest) -> Result<Placement, VaAllocError> {
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
