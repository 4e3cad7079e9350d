// SPDX-License-Identifier: GPL-2.0

//! [`HostPage`]: one counted reference to a page of host memory, the unit
//! the simulated Gaudi2 backs its DRAM with.
//!
//! The simulation keeps one reference per backed 4 KiB of DRAM; whoever else
//! needs the page to outlive a change of that tree takes another one with
//! [`HostPage::clone`] (`get_page`): an importer's sg table holds one per
//! entry page while it is mapped, a CPU mapping of an export holds one per
//! page-table entry (the fault handler hands the core a reference). The page
//! goes back to the page allocator with its last reference (`put_page`).

use core::ptr::NonNull;
use kernel::{bindings, page::PAGE_SIZE, prelude::*};

#[allow(improper_ctypes)]
extern "C" {
    // Prototypes in `ffi/helpers.h`, bodies in `ffi/helpers.c`.
    /// `get_page(page)`.
    fn hlrs_get_page(page: *mut bindings::page);
    /// `put_page(page)`.
    fn hlrs_put_page(page: *mut bindings::page);
    /// `page_to_phys(page)`.
    fn hlrs_page_to_phys(page: *mut bindings::page) -> u64;
    /// `page_count(page)`.
    fn hlrs_page_count(page: *mut bindings::page) -> c_int;
}

/// One reference to an order-0 page of host memory.
///
/// The bytes of the page may also be mapped into a process (a CPU mapping of
/// a dma-buf export) or be read by a device (an importer's DMA), which can
/// change them at any time: [`HostPage::read`] and [`HostPage::write`] copy
/// with the C `memcpy` through the page's kernel mapping and never form a
/// Rust reference to the page's bytes.
///
/// # Invariants
///
/// `page` is an order-0 page from the page allocator, and this value owns one
/// reference to it.
#[repr(transparent)]
pub(crate) struct HostPage {
    page: NonNull<bindings::page>,
}

// SAFETY: a page reference may be moved to and dropped on any thread.
unsafe impl Send for HostPage {}
// SAFETY: `&HostPage` allows only copies in and out of the page through
// `memcpy` (see the type's documentation) and taking another reference.
unsafe impl Sync for HostPage {}

impl HostPage {
    /// A new zeroed page (`GFP_KERNEL`), with its one reference.
    pub(crate) fn new_zeroed() -> Result<Self> {
        // SAFETY: no preconditions (`GFP_KERNEL` may sleep; callers are in
        // process context); the result is checked for null.
        let page = unsafe { bindings::alloc_pages(bindings::GFP_KERNEL | bindings::__GFP_ZERO, 0) };
        // INVARIANT: a fresh order-0 page, whose one reference is ours.
        Ok(Self {
            page: NonNull::new(page).ok_or(ENOMEM)?,
        })
    }

    /// A new zeroed page charged to the current memory cgroup
    /// (`GFP_KERNEL_ACCOUNT`), with its one reference.
    pub(crate) fn new_zeroed_accounted() -> Result<Self> {
        let flags = bindings::GFP_KERNEL_ACCOUNT | bindings::__GFP_ZERO;
        // SAFETY: as in `new_zeroed`.
        let page = unsafe { bindings::alloc_pages(flags, 0) };
        // INVARIANT: a fresh order-0 page, whose one reference is ours.
        Ok(Self {
            page: NonNull::new(page).ok_or(ENOMEM)?,
        })
    }

    /// Take over one reference to `page` (`None` for a null pointer).
    ///
    /// # Safety
    ///
    /// `page` is null or an order-0 page of the page allocator on which the
    /// caller owns one reference, which it gives to the result.
    pub(crate) unsafe fn from_raw(page: *mut bindings::page) -> Option<Self> {
        // INVARIANT: the caller's reference to an order-0 page (safety
        // contract).
        NonNull::new(page).map(|page| Self { page })
    }

    /// The physical address of the page. O(1).
    pub(crate) fn phys(&self) -> u64 {
        // SAFETY: the page is live: we own a reference (invariant).
        unsafe { hlrs_page_to_phys(self.page.as_ptr()) }
    }

    /// The little-endian 64-bit word at byte `off` (8-aligned) of the page.
    /// `EINVAL` out of the page or unaligned.
    pub(crate) fn read_u64(&self, off: usize) -> Result<u64> {
        if off % 8 != 0 {
            return Err(EINVAL);
        }
        let mut b = [0u8; 8];
        self.read(off, &mut b)?;
        Ok(u64::from_le_bytes(b))
    }

    /// Store `values` as little-endian 64-bit words from byte `off`
    /// (8-aligned) on, in one mapping of the page. `EINVAL`, nothing
    /// written, if they leave the page or `off` is unaligned. O(n).
    pub(crate) fn write_u64s(&self, off: usize, values: &[u64]) -> Result {
        let len = values.len().checked_mul(8).ok_or(EINVAL)?;
        if off % 8 != 0 || !Self::in_page(off, len) {
            return Err(EINVAL);
        }
        self.with_mapped(|addr| {
            if cfg!(target_endian = "little") {
                // The words are already little-endian in memory: one copy.
                // SAFETY: `[off, off + len)` is inside the mapped page
                // (checked above); `values` is `len` readable bytes.
                unsafe { bindings::memcpy(addr.add(off).cast(), values.as_ptr().cast(), len) };
                return;
            }
            for (i, v) in values.iter().enumerate() {
                let b = v.to_le_bytes();
                // SAFETY: `off + 8 i + 8 <= off + len`, inside the mapped
                // page (checked above); `b` is 8 readable bytes.
                unsafe { bindings::memcpy(addr.add(off + 8 * i).cast(), b.as_ptr().cast(), 8) };
            }
        });
        Ok(())
    }

    /// How many references the page has (`page_count`). O(1).
    pub(crate) fn ref_count(&self) -> u32 {
        // SAFETY: the page is live: we own a reference (invariant).
        let n = unsafe { hlrs_page_count(self.page.as_ptr()) };
        u32::try_from(n).unwrap_or(0)
    }

    /// The page, borrowed (for `super::dma_pages`, which takes references of
    /// its own).
    pub(super) fn as_ptr(&self) -> *mut bindings::page {
        self.page.as_ptr()
    }

    /// Give the reference away as a raw pointer (for a page-table entry the
    /// core maps, which then owns it).
    pub(crate) fn into_raw(self) -> *mut bindings::page {
        let page = self.page.as_ptr();
        core::mem::forget(self);
        page
    }

    /// Run `f` on the page's kernel address, mapped for the duration.
    fn with_mapped<T>(&self, f: impl FnOnce(*mut u8) -> T) -> T {
        // SAFETY: the page is live (invariant); the local mapping is undone
        // below, before returning.
        let addr = unsafe { bindings::kmap_local_page(self.page.as_ptr()) };
        let r = f(addr.cast::<u8>());
        // SAFETY: the mapping made above, undone once.
        unsafe { bindings::kunmap_local(addr) };
        r
    }

    /// Whether `[off, off + len)` lies inside the page.
    fn in_page(off: usize, len: usize) -> bool {
        off.checked_add(len).is_some_and(|end| end <= PAGE_SIZE)
    }

    /// Copy `dst.len()` bytes from offset `off` of the page. `EINVAL` if the
    /// range leaves the page.
    pub(crate) fn read(&self, off: usize, dst: &mut [u8]) -> Result {
        if !Self::in_page(off, dst.len()) {
            return Err(EINVAL);
        }
        self.with_mapped(|addr| {
            // The C `memcpy` does the copy, so a racing user write to the page
            // is the same as one racing `copy_to_user`.
            // SAFETY: `addr + off .. + len` is inside the mapped page (checked
            // above) and `dst` is a writable buffer of `len` bytes.
            unsafe {
                bindings::memcpy(
                    dst.as_mut_ptr().cast(),
                    addr.add(off).cast_const().cast(),
                    dst.len(),
                )
            };
        });
        Ok(())
    }

    /// Copy `src` to offset `off` of the page. `EINVAL` if the range leaves
    /// the page.
    pub(crate) fn write(&self, off: usize, src: &[u8]) -> Result {
        if !Self::in_page(off, src.len()) {
            return Err(EINVAL);
        }
        self.with_mapped(|addr| {
            // SAFETY: as in `read`, with the copy going the other way.
            unsafe { bindings::memcpy(addr.add(off).cast(), src.as_ptr().cast(), src.len()) };
        });
        Ok(())
    }
}

impl Clone for HostPage {
    /// Another reference to the same page (`get_page`).
    fn clone(&self) -> Self {
        // SAFETY: the page is live: we own a reference (invariant).
        unsafe { hlrs_get_page(self.page.as_ptr()) };
        // INVARIANT: the reference just taken.
        Self { page: self.page }
    }
}

impl Drop for HostPage {
    fn drop(&mut self) {
        // SAFETY: the reference this value owns (invariant), given back once.
        unsafe { hlrs_put_page(self.page.as_ptr()) };
    }
}
