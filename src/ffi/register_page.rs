// SPDX-License-Identifier: GPL-2.0

//! [`RegisterBlock`]: physically contiguous, zeroed memory that stands for a
//! window of the simulated Gaudi2's configuration space; user mappings reach
//! it with `remap_pfn_range` (by its [`RegisterBlock::pfn`]), the driver with
//! volatile 32-bit accesses (as `readl`/`writel` would on a BAR). A leaf.

use core::ptr::NonNull;
use kernel::{bindings, page::PAGE_SIZE, prelude::*};

#[allow(improper_ctypes)]
extern "C" {
    // Prototypes in `ffi/helpers.h`, bodies in `ffi/helpers.c`.
    /// `virt_to_pfn(addr)` for directly mapped kernel memory.
    fn hlrs_virt_to_pfn(addr: *const c_void) -> c_ulong;
}

/// A window of the simulated configuration space: `size` bytes of zeroed,
/// physically contiguous kernel memory (`alloc_pages_exact`).
///
/// # Invariants
///
/// `ptr` is the start of a live `alloc_pages_exact(size)` allocation owned by
/// this value; `size` is a non-zero multiple of 4.
pub(crate) struct RegisterBlock {
    ptr: NonNull<u32>,
    size: usize,
}

// SAFETY: the memory is plain kernel memory owned by this value; every access
// is a volatile 32-bit access (as to a device register), valid from any thread.
unsafe impl Send for RegisterBlock {}
// SAFETY: as above: `&self` methods only do volatile 32-bit accesses.
unsafe impl Sync for RegisterBlock {}

impl RegisterBlock {
    /// `size` bytes (a non-zero multiple of 4 KiB) of zeroed registers.
    pub(crate) fn new(size: usize) -> Result<Self> {
        if size == 0 || size % PAGE_SIZE != 0 {
            return Err(EINVAL);
        }
        let flags = bindings::GFP_KERNEL | bindings::__GFP_ZERO | bindings::__GFP_NOWARN;
        // SAFETY: no preconditions; the result is checked for null.
        let p = unsafe { bindings::alloc_pages_exact_noprof(size, flags) };
        let ptr = NonNull::new(p.cast::<u32>()).ok_or(ENOMEM)?;
        // INVARIANT: a fresh allocation of `size` bytes, owned from here on.
        Ok(Self { ptr, size })
    }

    /// Size in bytes.
    pub(crate) fn size(&self) -> usize {
        self.size
    }

    /// Page frame number of the first byte (the block is contiguous).
    pub(crate) fn pfn(&self) -> u64 {
        // SAFETY: `ptr` is directly mapped kernel memory (page allocator).
        (unsafe { hlrs_virt_to_pfn(self.ptr.as_ptr().cast()) }) as u64
    }

    /// The 32-bit register at byte offset `off` (4-aligned), or `None` past
    /// the end.
    pub(crate) fn read(&self, off: usize) -> Option<u32> {
        if off % 4 != 0 || off >= self.size {
            return None;
        }
        // SAFETY: `off / 4` is inside the allocation (invariant); a volatile
        // aligned 32-bit read, as from a register that user mappings may write
        // concurrently.
        Some(unsafe { self.ptr.as_ptr().add(off / 4).read_volatile() })
    }

    /// Write the 32-bit register at byte offset `off`; `EINVAL` when it is
    /// not inside the block or not 4-aligned.
    pub(crate) fn write(&self, off: usize, value: u32) -> Result {
        if off % 4 != 0 || off >= self.size {
            return Err(EINVAL);
        }
        // SAFETY: as in `read`: inside the allocation, aligned, volatile.
        unsafe { self.ptr.as_ptr().add(off / 4).write_volatile(value) };
        Ok(())
    }
}

impl Drop for RegisterBlock {
    fn drop(&mut self) {
        // No user mapping of it remains: blocks are dropped when the compute
        // context that mapped them is torn down (every block vma holds a
        // reference to that context, and the mm clears a vma's page-table
        // entries before its `close` gives the reference back) or when the
        // device goes (later still). `remap_pfn_range` took no page
        // references, and `VM_IO | VM_PFNMAP` keeps `get_user_pages` away.
        // SAFETY: by the invariant the allocation is ours and freed once, here.
        unsafe { bindings::free_pages_exact(self.ptr.as_ptr().cast(), self.size) };
    }
}
