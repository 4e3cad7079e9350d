// SPDX-License-Identifier: GPL-2.0

//! [`SmallArray`]: an array of up to `N` elements kept inline, of more in a
//! `KVVec`: the per-page arrays of a host mapping (its pinned pages and their
//! bus addresses) cost no allocation for a small buffer. A MAP+UNMAP of a
//! 4 KiB buffer used to pay two `kvmalloc`s and two `kvfree`s for them.

use kernel::{alloc::Flags, prelude::*};

/// Up to `N` elements of `T` inline, more on the heap. The length is fixed
/// by [`SmallArray::with_capacity`]'s choice of storage: pushes past the
/// capacity are refused, never grown into.
///
/// # Invariants
///
/// `Inline { len, .. }` has `len <= N`; `Heap` is used only when the capacity
/// asked for was more than `N`.
pub(crate) enum SmallArray<T: Copy, const N: usize> {
    /// `items[..len]` are the elements; the rest hold the fill value.
    Inline {
        /// The elements, then fill.
        items: [T; N],
        /// How many are elements.
        len: usize,
    },
    /// More than `N` elements' room.
    Heap(KVVec<T>),
}

impl<T: Copy, const N: usize> SmallArray<T, N> {
    /// Room for `cap` elements: inline (no allocation) when `cap <= N`,
    /// otherwise one `KVVec` allocation with `flags`. `fill` stands in the
    /// unused inline slots. O(N) or one allocation.
    pub(crate) fn with_capacity(cap: usize, fill: T, flags: Flags) -> Result<Self> {
        if cap <= N {
            return Ok(Self::new(fill));
        }
        Ok(Self::Heap(KVVec::with_capacity(cap, flags)?))
    }

    /// Empty, inline, with `fill` in every slot. No allocation. O(N).
    pub(crate) fn new(fill: T) -> Self {
        Self::Inline {
            items: [fill; N],
            len: 0,
        }
    }

    /// Append `v` if there is room (`Err(v)` otherwise). O(1).
    pub(crate) fn push_within_capacity(&mut self, v: T) -> Result<(), T> {
        match self {
            Self::Inline { items, len } => match items.get_mut(*len) {
                Some(slot) => {
                    *slot = v;
                    *len += 1;
                    Ok(())
                }
                None => Err(v),
            },
            Self::Heap(vec) => vec.push_within_capacity(v).map_err(|e| e.0),
        }
    }

    /// The elements. O(1).
    pub(crate) fn as_slice(&self) -> &[T] {
        match self {
            Self::Inline { items, len } => items.get(..*len).unwrap_or(&[]),
            Self::Heap(vec) => vec,
        }
    }

    /// The elements, writable. O(1).
    pub(crate) fn as_mut_slice(&mut self) -> &mut [T] {
        match self {
            Self::Inline { items, len } => items.get_mut(..*len).unwrap_or(&mut []),
            Self::Heap(vec) => vec,
        }
    }

    /// Element `i`, `None` past the end. O(1).
    pub(crate) fn at(&self, i: usize) -> Option<T> {
        self.as_slice().get(i).copied()
    }

    /// Keep the first `n` elements (all of them if there are fewer). O(1).
    pub(crate) fn truncate(&mut self, n: usize) {
        match self {
            Self::Inline { len, .. } => *len = (*len).min(n),
            Self::Heap(vec) => vec.truncate(n),
        }
    }

    /// Whether the elements are inline (tests).
    #[cfg(CONFIG_KUNIT)]
    pub(crate) fn is_inline(&self) -> bool {
        matches!(self, Self::Inline { .. })
    }
}

impl<T: Copy, const N: usize> core::ops::Deref for SmallArray<T, N> {
    type Target = [T];

    fn deref(&self) -> &[T] {
        self.as_slice()
    }
}

impl<T: Copy, const N: usize> core::ops::DerefMut for SmallArray<T, N> {
    fn deref_mut(&mut self) -> &mut [T] {
        self.as_mut_slice()
    }
}

#[kunit_tests(hlrs_small_array)]
mod tests {
    use super::*;

    #[test]
    fn up_to_n_elements_stay_inline_and_more_go_to_the_heap() -> Result {
        let mut a = SmallArray::<u64, 4>::with_capacity(4, 0, GFP_KERNEL)?;
        assert!(a.is_inline());
        for v in 1..=4 {
            assert_eq!(a.push_within_capacity(v), Ok(()));
        }
        // Full: refused, not grown.
        assert_eq!(a.push_within_capacity(5), Err(5));
        assert_eq!(a.as_slice(), &[1, 2, 3, 4]);
        assert_eq!((a.len(), a.at(3), a.at(4)), (4, Some(4), None));
        a.truncate(2);
        assert_eq!(a.as_slice(), &[1, 2]);
        if let Some(x) = a.as_mut_slice().get_mut(1) {
            *x = 7;
        }
        assert_eq!(a.as_slice(), &[1, 7]);

        let mut b = SmallArray::<u64, 4>::with_capacity(5, 0, GFP_KERNEL)?;
        assert!(!b.is_inline());
        for v in 1..=5 {
            assert_eq!(b.push_within_capacity(v), Ok(()));
        }
        assert_eq!(b.push_within_capacity(6), Err(6));
        assert_eq!((b.len(), b.at(4)), (5, Some(5)));
        b.truncate(1);
        assert_eq!(b.as_slice(), &[1]);
        Ok(())
    }
}
