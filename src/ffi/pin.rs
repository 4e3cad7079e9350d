// SPDX-License-Identifier: GPL-2.0

//! Pinning of user pages (upstream `hl_pin_host_memory` / `get_user_memory` /
//! `hl_unpin_host_memory`, common/memory.c:2315-2460): the only `unsafe` of
//! the host-memory path.
//!
//! Pages are pinned with `FOLL_WRITE | FOLL_LONGTERM` (as upstream) and
//! accounted against the process's `RLIMIT_MEMLOCK` with `account_locked_vm`
//! (which lets `CAP_IPC_LOCK` through); upstream does not account them, so a
//! process could pin all of RAM. A partial pin is undone and reported as
//! `ENOMEM`, as upstream does; unpinning marks the pages dirty.

use kernel::{bindings, mm::Mm, page::PAGE_SIZE, prelude::*, sync::aref::ARef};

#[allow(improper_ctypes)]
extern "C" {
    /// `page_to_phys`, from `ffi/helpers.c`.
    fn hlrs_page_to_phys(page: *mut bindings::page) -> u64;
}

/// Pinned pages of one user buffer.
///
/// # Invariants
///
/// `pages` holds `pages.len()` pages pinned by `pin_user_pages_fast` and
/// accounted to `mm`'s `locked_vm`; both are undone exactly once, in `Drop`.
pub(crate) struct PinnedUserPages {
    pages: KVVec<*mut bindings::page>,
    mm: ARef<Mm>,
    /// User address as given.
    pub(crate) addr: u64,
    /// Size in bytes as given.
    pub(crate) size: u64,
    /// Offset of `addr` in its first page.
    pub(crate) offset: u64,
    /// Pid of the process that pinned the pages.
    pub(crate) pid: i32,
}

// SAFETY: the page pointers are only used to unpin and to compute physical
// addresses, both allowed from any thread; `Mm` is thread safe.
unsafe impl Send for PinnedUserPages {}
// SAFETY: see above; `&self` only reads the array.
unsafe impl Sync for PinnedUserPages {}

impl PinnedUserPages {
    /// Pin `[addr, addr + size)` of the current process.
    ///
    /// `EINVAL` for a zero size or a range that wraps (also after rounding to
    /// pages); `ENOMEM` past `RLIMIT_MEMLOCK`, or when only part could be
    /// pinned; the pinning error otherwise (`EFAULT` for memory that is not
    /// mapped writable, or a kernel address). Nothing stays pinned on error.
    pub(crate) fn pin(addr: u64, size: u64) -> Result<Self> {
        let page = PAGE_SIZE as u64;
        if size == 0 {
            return Err(EINVAL);
        }
        let end = addr.checked_add(size).ok_or(EINVAL)?;
        let end = end.checked_add(page - 1).ok_or(EINVAL)? / page * page;
        let start = addr / page * page;
        let npages = (end - start) / page;
        let n = c_int::try_from(npages).map_err(|_| ENOMEM)?;
        let nr = usize::try_from(npages).map_err(|_| ENOMEM)?;

        let task = kernel::current!();
        let mm: ARef<Mm> = ARef::from(&**task.mm().ok_or(EFAULT)?);
        let pid = task.pid();
        // Sized by the user's request: no allocation-failure splat if it is absurd.
        let mut pages = KVVec::from_elem(core::ptr::null_mut(), nr, GFP_KERNEL | __GFP_NOWARN)?;
        // SAFETY: `mm` is the current process's mm, kept alive by `ARef`.
        let rc = unsafe { bindings::account_locked_vm(mm.as_raw(), npages as c_ulong, true) };
        if rc != 0 {
            return Err(Error::from_errno(rc));
        }
        let flags = bindings::FOLL_WRITE | bindings::FOLL_LONGTERM;
        // SAFETY: `pages` holds `n` writable pointers; the kernel checks the user range.
        let pinned = unsafe {
            bindings::pin_user_pages_fast(start as c_ulong, n, flags, pages.as_mut_ptr())
        };
        let got = usize::try_from(pinned).unwrap_or(0).min(nr);
        pages.truncate(got);
        if pinned < 0 || got != nr {
            if got > 0 {
                // SAFETY: these `got` pages were pinned above and are released once.
                unsafe { bindings::unpin_user_pages(pages.as_mut_ptr(), got as c_ulong) };
            }
            // SAFETY: undo the accounting made above on the same mm.
            unsafe { bindings::account_locked_vm(mm.as_raw(), npages as c_ulong, false) };
            return Err(if pinned < 0 {
                Error::from_errno(pinned)
            } else {
                ENOMEM
            });
        }
        // INVARIANT: all `nr` pages are pinned and accounted to `mm`.
        Ok(Self {
            pages,
            mm,
            addr,
            size,
            offset: addr - start,
            pid,
        })
    }

    /// Number of pinned pages.
    pub(crate) fn npages(&self) -> usize {
        self.pages.len()
    }

    /// Whether the buffer can be mapped with `huge`-byte pages: its user address
    /// is `huge`-aligned, it covers whole huge pages, and each huge page is
    /// physically contiguous and aligned (upstream checks the same on the DMA
    /// segments, common/memory.c:864-884). O(npages).
    pub(crate) fn fits_huge_pages(&self, huge: u64) -> bool {
        let page = PAGE_SIZE as u64;
        let per = usize::try_from(huge / page).unwrap_or(0);
        if per <= 1
            || self.offset != 0
            || self.addr.checked_rem(huge) != Some(0)
            || self.pages.len().checked_rem(per) != Some(0)
        {
            return false;
        }
        (0..self.pages.len()).all(|i| {
            let k = i.checked_rem(per).unwrap_or(0);
            let (Some(first), Some(this)) = (self.phys(i - k), self.phys(i)) else {
                return false;
            };
            first.checked_rem(huge) == Some(0) && this == first + k as u64 * page
        })
    }

    /// Physical (device) address of pinned page `i`; the simulated Gaudi2 has
    /// no IOMMU, so this is what a DMA mapping would return.
    pub(crate) fn phys(&self, i: usize) -> Option<u64> {
        let p = *self.pages.get(i)?;
        // SAFETY: `p` is a page pinned by us for the lifetime of `self`.
        Some(unsafe { hlrs_page_to_phys(p) })
    }
}

impl Drop for PinnedUserPages {
    fn drop(&mut self) {
        let n = self.pages.len();
        // SAFETY: by the type invariant these pages are pinned by us and released
        // exactly once here; the accounting is undone on the same mm.
        unsafe {
            bindings::unpin_user_pages_dirty_lock(self.pages.as_mut_ptr(), n as c_ulong, true);
            bindings::account_locked_vm(self.mm.as_raw(), n as c_ulong, false);
        }
    }
}
