// SPDX-License-Identifier: GPL-2.0

//! An eventfd a process registered (`HL_INFO_REGISTER_EVENTFD`): a counted
//! reference to its context (`eventfd_ctx_fdget`), signalled when the
//! device raises a notifier event (`eventfd_signal`), put when dropped.

use core::ptr::NonNull;
use kernel::{bindings, error::from_err_ptr, prelude::*};

/// A reference to an eventfd's context.
///
/// # Invariants
///
/// `0` came from a successful `eventfd_ctx_fdget` and is put exactly once,
/// by `Drop`.
pub(crate) struct EventFd(NonNull<bindings::eventfd_ctx>);

// SAFETY: an eventfd context is reference counted and may be signalled and
// put from any thread.
unsafe impl Send for EventFd {}
// SAFETY: signalling takes the eventfd's own lock.
unsafe impl Sync for EventFd {}

impl EventFd {
    /// The eventfd behind the caller's file descriptor `fd`: `EBADF` if
    /// `fd` is not open, `EINVAL` if it is not an eventfd.
    pub(crate) fn from_fd(fd: i32) -> Result<Self> {
        // SAFETY: no preconditions; the result is checked for an error
        // pointer.
        let ctx = from_err_ptr(unsafe { bindings::eventfd_ctx_fdget(fd) })?;
        // INVARIANT: a context reference from `eventfd_ctx_fdget`.
        NonNull::new(ctx).map(Self).ok_or(EINVAL)
    }

    /// Add 1 to the eventfd's counter and wake its readers
    /// (`eventfd_signal`). Does not sleep.
    pub(crate) fn signal(&self) {
        // SAFETY: by the invariant the context is alive while `self` is.
        unsafe { bindings::eventfd_signal_mask(self.0.as_ptr(), 0) };
    }
}

impl Drop for EventFd {
    fn drop(&mut self) {
        // SAFETY: by the invariant the reference is ours, put once, here.
        unsafe { bindings::eventfd_ctx_put(self.0.as_ptr()) };
    }
}
