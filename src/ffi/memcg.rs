// SPDX-License-Identifier: GPL-2.0

//! [`MemCgroup`]: a counted reference to a memory cgroup, and
//! [`MemCgroup::charge`], the remote charging scope (`set_active_memcg`)
//! under which `__GFP_ACCOUNT` allocations are charged to it.
//!
//! The simulated Gaudi2 backs the DRAM its engines write with host pages,
//! allocated in the engines' worker threads (which belong to no user's
//! cgroup). The memory cgroup of the process that opened the device is
//! captured at open and those allocations are charged to it, as a kernel
//! allocation made on that process's behalf (vhost does the same for its
//! workers).

use core::ptr::NonNull;

/// The C `struct mem_cgroup`, only ever behind a pointer.
#[repr(C)]
pub(crate) struct RawMemCgroup {
    _opaque: [u8; 0],
}

#[allow(improper_ctypes)]
extern "C" {
    // Prototypes in `ffi/helpers.h`, bodies in `ffi/helpers.c`.
    /// `get_mem_cgroup_from_mm(current->mm)`: a reference, or NULL without
    /// memory cgroups.
    fn hlrs_memcg_of_current() -> *mut RawMemCgroup;
    /// `mem_cgroup_put(memcg)`.
    fn hlrs_memcg_put(memcg: *mut RawMemCgroup);
    /// `set_active_memcg(memcg)`: the previous one.
    fn hlrs_set_active_memcg(memcg: *mut RawMemCgroup) -> *mut RawMemCgroup;
}

/// One reference to a memory cgroup.
///
/// # Invariants
///
/// `memcg` points to a live memory cgroup on which this value owns one
/// reference.
pub(crate) struct MemCgroup {
    memcg: NonNull<RawMemCgroup>,
}

// SAFETY: a css reference may be moved to and dropped on any thread.
unsafe impl Send for MemCgroup {}
// SAFETY: `&MemCgroup` only allows opening a charging scope, which does not
// change the cgroup.
unsafe impl Sync for MemCgroup {}

impl MemCgroup {
    /// The memory cgroup of the calling process, or `None` when the kernel
    /// has no memory cgroups (or a kernel thread calls). O(1).
    pub(crate) fn of_current() -> Option<Self> {
        // SAFETY: no preconditions; the result is a new reference or null.
        let p = unsafe { hlrs_memcg_of_current() };
        // INVARIANT: a reference `get_mem_cgroup_from_mm` took for us.
        NonNull::new(p).map(|memcg| Self { memcg })
    }

    /// Run `f` with `__GFP_ACCOUNT` allocations of the calling thread
    /// charged to this cgroup (the remote charging scope). O(f).
    pub(crate) fn charge<R>(&self, f: impl FnOnce() -> R) -> R {
        // SAFETY: `self` holds a reference for the whole scope (invariant),
        // which `set_active_memcg` requires; the scope is closed below on
        // the same thread, restoring the previous one (scopes nest).
        let old = unsafe { hlrs_set_active_memcg(self.memcg.as_ptr()) };
        let r = f();
        // SAFETY: closes the scope opened above with what it replaced.
        unsafe { hlrs_set_active_memcg(old) };
        r
    }
}

impl Drop for MemCgroup {
    fn drop(&mut self) {
        // SAFETY: the reference is ours (invariant) and given up here.
        unsafe { hlrs_memcg_put(self.memcg.as_ptr()) };
    }
}
