// SPDX-License-Identifier: GPL-2.0

//! The pages behind vmalloc memory (`vmalloc_to_page`), for mapping a
//! command buffer into the device MMU.

use kernel::{alloc::VVec, bindings, page::PAGE_SIZE};

#[allow(improper_ctypes)]
extern "C" {
    // Prototype in `ffi/helpers.h`, body in `ffi/helpers.c`.
    fn hlrs_page_to_phys(page: *mut bindings::page) -> u64;
}

/// Physical address of page `i` of the memory of `v` (whose allocation is
/// page aligned and a page multiple: a `VVec` allocated with its full
/// capacity), or `None` past it. O(1).
pub(crate) fn vmalloc_page_phys<T>(v: &VVec<T>, i: usize) -> Option<u64> {
    let bytes = v.capacity().checked_mul(core::mem::size_of::<T>())?;
    let off = i.checked_mul(PAGE_SIZE)?;
    if off >= bytes {
        return None;
    }
    // SAFETY: `off < bytes`: inside the live vmalloc allocation of `v`.
    let page = unsafe { bindings::vmalloc_to_page(v.as_ptr().cast::<u8>().add(off).cast()) };
    if page.is_null() {
        return None;
    }
    // SAFETY: `page` is a live page of the allocation, borrowed from `v`.
    Some(unsafe { hlrs_page_to_phys(page) })
}
