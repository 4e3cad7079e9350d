// SPDX-License-Identifier: GPL-2.0

//! A workqueue of the module's own (`alloc_workqueue` / `destroy_workqueue`),
//! which the `kernel` crate of 7.3 cannot create: the simulated engines run
//! their jobs on one, so that dropping it waits for every work item still
//! running, before the module's code can go away.

use core::ptr::NonNull;
use kernel::{bindings, prelude::*, workqueue::Queue};

extern "C" {
    // Prototype in `ffi/helpers.h`, body in `ffi/helpers.c`.
    fn hlrs_alloc_workqueue(name: *const c_char) -> *mut bindings::workqueue_struct;
}

/// An unbound workqueue (no rescuer thread: nothing in memory reclaim waits
/// for its work), destroyed (after its work items finished) when dropped.
///
/// # Invariants
///
/// `0` came from `alloc_workqueue` and is destroyed only by `Drop`.
pub(crate) struct OwnedQueue(NonNull<bindings::workqueue_struct>);

// SAFETY: a workqueue may be used and destroyed from any thread.
unsafe impl Send for OwnedQueue {}
// SAFETY: every operation on a workqueue is thread-safe.
unsafe impl Sync for OwnedQueue {}

impl OwnedQueue {
    /// A new workqueue named `name` (`WQ_UNBOUND`); `ENOMEM`
    /// if the kernel cannot make one.
    pub(crate) fn new(name: &'static CStr) -> Result<Self> {
        // SAFETY: `name` is a NUL-terminated string that outlives the queue
        // (`'static`); the result is checked for null.
        let wq = unsafe { hlrs_alloc_workqueue(name.as_char_ptr()) };
        // INVARIANT: a non-null result of `alloc_workqueue`.
        NonNull::new(wq).map(Self).ok_or(ENOMEM)
    }

    /// The queue, to enqueue work items on.
    pub(crate) fn queue(&self) -> &Queue {
        // SAFETY: by the invariant the workqueue is valid until `Drop`, which
        // cannot run while `self` is borrowed.
        unsafe { Queue::from_raw(self.0.as_ptr()) }
    }
}

impl Drop for OwnedQueue {
    fn drop(&mut self) {
        // SAFETY: by the invariant the queue is valid and destroyed once,
        // here; `destroy_workqueue` drains it (waits for every queued and
        // running work item) first.
        unsafe { bindings::destroy_workqueue(self.0.as_ptr()) };
    }
}
