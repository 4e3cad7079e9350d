// SPDX-License-Identifier: GPL-2.0

//! The DRAM page pool of one device (upstream `hl_vm.dram_pg_pool`, a genalloc
//! pool over `[dram_user_base_address, dram_end_address)`; common/memory.c:2833-2903).
//!
//! Gaudi2 allocates DRAM in whole DRAM pages of 16 x HBMs x 8 MiB (768 or
//! 640 MiB, not a power of two), so a 96 GiB device has at most 127 user pages
//! and an 80 GiB one 127 as well: the pool is a bitmap of at most
//! [`MAX_PAGES`] bits held in one `u128`, and every operation is a handful of
//! word operations — O(k) for k requested pages, independent of how
//! fragmented the pool is (upstream walks genalloc's chunk bitmaps in 8 MiB
//! units, O(P) per allocation, and takes one kref per page).
//!
//! The pool keeps no per-page reference count: its lifetime is the device's
//! (`HlDevice` is reference counted and every allocation belongs to a context
//! that holds the device), and the device checks at removal that every page
//! came back, which is what upstream's `hl_vm_fini` warns about.

use crate::hw::backend::Backend;
use kernel::{
    new_mutex,
    prelude::*,
    sync::{lock::mutex::MutexGuard, Arc, Mutex},
};

/// The pool as page packs share it: the page bitmap under its lock, and the
/// hardware whose DRAM it hands out, told when pages come back so that
/// nothing of their contents reaches the next user
/// ([`Backend::release_dram`]).
#[pin_data]
pub(crate) struct SharedPool {
    #[pin]
    pages: Mutex<DramPool>,
    backend: Arc<dyn Backend>,
}

impl SharedPool {
    /// `pool` over the DRAM of `backend`.
    pub(crate) fn new(pool: DramPool, backend: Arc<dyn Backend>) -> impl PinInit<Self> {
        pin_init!(Self {
            pages <- new_mutex!(pool),
            backend,
        })
    }

    /// The page bitmap, locked (a leaf lock). O(1).
    pub(crate) fn lock(&self) -> MutexGuard<'_, DramPool> {
        self.pages.lock()
    }

    /// The pages `[pa, pa + len)` are about to go back to the pool: their
    /// contents go first (called with the pool unlocked). O(backed chunks).
    pub(crate) fn release_contents(&self, pa: u64, len: u64) {
        self.backend.release_dram(pa, len);
    }
}

/// Most DRAM pages a pool can manage (one bit each in a `u128`).
pub(crate) const MAX_PAGES: u64 = 128;

/// Pages taken from the pool: either one contiguous run or single pages.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum PoolPages {
    /// `count` consecutive pages starting at page `first`.
    Contiguous {
        /// First page index.
        first: u64,
        /// Number of pages.
        count: u64,
    },
    /// A set of pages, one bit per page index.
    Scattered(u128),
}

/// The DRAM page pool.
///
/// # Invariants
///
/// `pages <= MAX_PAGES`; no bit at or above `pages` is set in `used`;
/// `free == pages - used.count_ones()`.
#[derive(Debug)]
pub(crate) struct DramPool {
    base: u64,
    page_size: u64,
    pages: u64,
    used: u128,
    free: u64,
}

impl DramPool {
    /// A pool of `pages` pages of `page_size` bytes starting at `base`
    /// (`hl_vm_init`). `EINVAL` for more than [`MAX_PAGES`] pages, none, or a
    /// zero page size.
    pub(crate) fn new(base: u64, page_size: u64, pages: u64) -> Result<Self> {
        if pages == 0 || pages > MAX_PAGES || page_size == 0 {
            return Err(EINVAL);
        }
        base.checked_add(page_size.checked_mul(pages).ok_or(EINVAL)?)
            .ok_or(EINVAL)?;
        Ok(Self {
            base,
            page_size,
            pages,
            used: 0,
            free: pages,
        })
    }

    /// Bytes of one page.
    pub(crate) fn page_size(&self) -> u64 {
        self.page_size
    }

    /// Total pages.
    pub(crate) fn pages(&self) -> u64 {
        self.pages
    }

    /// Free pages. O(1).
    pub(crate) fn free_pages(&self) -> u64 {
        self.free
    }

    /// Physical address of page `index`.
    pub(crate) fn page_addr(&self, index: u64) -> u64 {
        self.base + index * self.page_size
    }

    /// Page index of a physical address inside the pool.
    pub(crate) fn page_index(&self, addr: u64) -> Option<u64> {
        let off = addr.checked_sub(self.base)?;
        let i = off.checked_div(self.page_size)?;
        (off.checked_rem(self.page_size)? == 0 && i < self.pages).then_some(i)
    }

    fn all(&self) -> u128 {
        if self.pages == MAX_PAGES {
            u128::MAX
        } else {
            (1u128 << self.pages) - 1
        }
    }

    /// Take `count` consecutive pages, the lowest run that fits (first fit, as
    /// genalloc does for a non-power-of-two page size). `ENOMEM` if no run is
    /// long enough. O(count) word operations.
    pub(crate) fn alloc_contiguous(&mut self, count: u64) -> Result<PoolPages> {
        if count == 0 || count > self.free {
            return Err(ENOMEM);
        }
        // Bit i of `runs` ends up set iff pages i .. i + count are all free.
        let free_mask = !self.used & self.all();
        let mut runs = free_mask;
        let mut shift = 1u64;
        while shift < count {
            // Double the verified run length each step: O(log count).
            let step = core::cmp::min(shift, count - shift);
            runs &= runs.checked_shr(step as u32).unwrap_or(0);
            shift += step;
        }
        if runs == 0 {
            return Err(ENOMEM);
        }
        let first = u64::from(runs.trailing_zeros());
        let mask = Self::run_mask(first, count);
        self.used |= mask;
        self.free -= count;
        Ok(PoolPages::Contiguous { first, count })
    }

    /// Take `count` pages anywhere, lowest first. `ENOMEM` (and nothing taken) if
    /// fewer are free. O(count).
    pub(crate) fn alloc_scattered(&mut self, count: u64) -> Result<PoolPages> {
        if count == 0 || count > self.free {
            return Err(ENOMEM);
        }
        let mut avail = !self.used & self.all();
        let mut taken = 0u128;
        for _ in 0..count {
            let lowest = avail & avail.wrapping_neg();
            taken |= lowest;
            avail &= !lowest;
        }
        self.used |= taken;
        self.free -= count;
        Ok(PoolPages::Scattered(taken))
    }

    /// Give pages back (`free_phys_pg_pack`). `EINVAL` and no change if any of
    /// them is not allocated (a double free). O(1).
    pub(crate) fn free(&mut self, pages: &PoolPages) -> Result {
        let mask = match *pages {
            PoolPages::Contiguous { first, count } => {
                if count == 0 || first.checked_add(count).is_none_or(|end| end > self.pages) {
                    return Err(EINVAL);
                }
                Self::run_mask(first, count)
            }
            PoolPages::Scattered(mask) => mask,
        };
        if mask & !self.used != 0 || mask & !self.all() != 0 {
            return Err(EINVAL);
        }
        self.used &= !mask;
        self.free += u64::from(mask.count_ones());
        Ok(())
    }

    /// Bits `first .. first + count`; callers guarantee `first + count <= 128`.
    fn run_mask(first: u64, count: u64) -> u128 {
        let ones = if count >= MAX_PAGES {
            u128::MAX
        } else {
            (1u128 << count) - 1
        };
        ones.checked_shl(first as u32).unwrap_or(0)
    }

    /// Whether page `index` is allocated.
    pub(crate) fn is_used(&self, index: u64) -> bool {
        index < self.pages && self.used & (1u128 << index) != 0
    }
}

#[kunit_tests(hlrs_dram_pool)]
mod tests {
    use super::*;

    const BASE: u64 = 0x1001_0000_3000_0000;
    const PAGE: u64 = 0x3000_0000;

    #[test]
    fn construction_is_checked() {
        assert!(DramPool::new(BASE, PAGE, 0).is_err());
        assert!(DramPool::new(BASE, PAGE, 129).is_err());
        assert!(DramPool::new(BASE, 0, 4).is_err());
        assert!(DramPool::new(u64::MAX - PAGE, PAGE, 2).is_err());
        assert!(DramPool::new(BASE, PAGE, 128).is_ok());
    }

    #[test]
    fn contiguous_runs_are_first_fit() -> Result {
        let mut p = DramPool::new(BASE, PAGE, 127)?;
        assert_eq!(
            p.alloc_contiguous(3)?,
            PoolPages::Contiguous { first: 0, count: 3 }
        );
        let b = p.alloc_contiguous(2)?;
        assert_eq!(b, PoolPages::Contiguous { first: 3, count: 2 });
        let c = p.alloc_contiguous(4)?;
        p.free(&b)?;
        // The 2-page hole at 3 is the lowest run that fits one page or two...
        assert_eq!(
            p.alloc_contiguous(2)?,
            PoolPages::Contiguous { first: 3, count: 2 }
        );
        // ...but not three: that goes after `c`.
        assert_eq!(
            p.alloc_contiguous(3)?,
            PoolPages::Contiguous { first: 9, count: 3 }
        );
        p.free(&c)?;
        assert_eq!(p.free_pages(), 127 - 8);
        Ok(())
    }

    #[test]
    fn exhaustion_takes_nothing() -> Result {
        let mut p = DramPool::new(BASE, PAGE, 127)?;
        let all = p.alloc_contiguous(127)?;
        assert_eq!(p.alloc_contiguous(1), Err(ENOMEM));
        assert_eq!(p.alloc_scattered(1), Err(ENOMEM));
        p.free(&all)?;
        assert_eq!(p.alloc_contiguous(128), Err(ENOMEM));
        assert_eq!(p.free_pages(), 127);
        // Fragmented: 127 single pages, every other one freed: 63 free, no run of 2.
        p.alloc_scattered(127)?;
        for i in (1..127).step_by(2) {
            p.free(&PoolPages::Contiguous { first: i, count: 1 })?;
        }
        assert_eq!(p.free_pages(), 63);
        assert_eq!(p.alloc_contiguous(2), Err(ENOMEM));
        assert_eq!(p.free_pages(), 63);
        assert_eq!(p.alloc_scattered(64), Err(ENOMEM));
        p.alloc_scattered(63)?;
        assert_eq!(p.free_pages(), 0);
        Ok(())
    }

    #[test]
    fn scattered_pages_are_lowest_first() -> Result {
        let mut p = DramPool::new(BASE, PAGE, 10)?;
        let a = p.alloc_contiguous(2)?;
        let b = p.alloc_scattered(3)?;
        assert_eq!(b, PoolPages::Scattered(0b11100));
        p.free(&a)?;
        assert_eq!(p.alloc_scattered(3)?, PoolPages::Scattered(0b100011));
        Ok(())
    }

    #[test]
    fn double_free_is_refused_without_change() -> Result {
        let mut p = DramPool::new(BASE, PAGE, 8)?;
        let a = p.alloc_contiguous(2)?;
        p.free(&a)?;
        assert_eq!(p.free(&a), Err(EINVAL));
        assert_eq!(
            p.free(&PoolPages::Contiguous { first: 7, count: 2 }),
            Err(EINVAL)
        );
        assert_eq!(
            p.free(&PoolPages::Contiguous {
                first: u64::MAX,
                count: 2
            }),
            Err(EINVAL)
        );
        assert_eq!(p.free(&PoolPages::Scattered(1 << 9)), Err(EINVAL));
        assert_eq!(p.free_pages(), 8);
        Ok(())
    }

    #[test]
    fn full_128_page_pool_works() -> Result {
        let mut p = DramPool::new(BASE, PAGE, 128)?;
        let a = p.alloc_contiguous(128)?;
        assert!(p.is_used(127));
        p.free(&a)?;
        let b = p.alloc_scattered(128)?;
        assert_eq!(b, PoolPages::Scattered(u128::MAX));
        p.free(&b)?;
        assert_eq!(p.free_pages(), 128);
        Ok(())
    }

    #[test]
    fn addresses_and_indices() -> Result {
        let p = DramPool::new(BASE, PAGE, 127)?;
        assert_eq!(p.page_addr(2), BASE + 2 * PAGE);
        assert_eq!(p.page_index(BASE + 2 * PAGE), Some(2));
        assert_eq!(p.page_index(BASE + 2 * PAGE + 1), None);
        assert_eq!(p.page_index(BASE - 1), None);
        assert_eq!(p.page_index(BASE + 127 * PAGE), None);
        Ok(())
    }
}
