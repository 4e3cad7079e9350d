// SPDX-License-Identifier: GPL-2.0

//! The pages behind vmalloc memory (`vmalloc_to_page`), for mapping a
//! command buffer into the device MMU.

use super::host_page::HostPage;
use kernel::{alloc::VVec, bindings, page::PAGE_SIZE};

#[allow(improper_ctypes)]
extern "C" {
    // Prototypes in `ffi/helpers.h`, bodies in `ffi/helpers.c`.
    fn hlrs_get_page(page: *mut bindings::page);
}

/// The page behind page `i` of the memory of `v` (whose
/// allocation is page aligned and a page multiple: a `VVec` allocated with
/// its full capacity), or null past it. O(1).
fn vmalloc_page<T>(v: &VVec<T>, i: usize) -> *mut bindings::page {
    let Some(bytes) = v.capacity().checked_mul(core::mem::size_of::<T>()) else {
        return core::ptr::null_mut();
    };
    match i.checked_mul(PAGE_SIZE) {
        // SAFETY: `off < bytes`: inside the live vmalloc allocation of `v`.
        Some(off) if off < bytes => unsafe {
            bindings::vmalloc_to_page(v.as_ptr().cast::<u8>().add(off).cast())
        },
        _ => core::ptr::null_mut(),
    }
}

/// A new reference to page `i` of the memory of `v` (whose allocation is
/// page aligned and a page multiple: a `VVec` allocated with its full
/// capacity), or `None` past it: the page outlives `v` while it is held
/// (`vfree` only drops the allocation's own reference). O(1).
pub(crate) fn vmalloc_page_ref<T>(v: &VVec<T>, i: usize) -> Option<HostPage> {
    let page = vmalloc_page(v, i);
    if page.is_null() {
        return None;
    }
    // SAFETY: `page` is a live order-0 page of the allocation (vmalloc maps
    // order-0 pages, splitting larger ones), borrowed from `v`.
    unsafe { hlrs_get_page(page) };
    // SAFETY: the reference just taken, on an order-0 page, given away.
    unsafe { HostPage::from_raw(page) }
}
