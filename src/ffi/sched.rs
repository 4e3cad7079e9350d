// SPDX-License-Identifier: GPL-2.0

//! Scheduling points for long loops (the `kernel` crate of 7.3 has neither
//! `cond_resched` nor `fatal_signal_pending`).
//!
//! The page-table loops of MAP, UNMAP and teardown call [`cond_resched`] once
//! per leaf hop (512 pages) or per mapping, under the context's page-table
//! mutex (a sleeping lock), so a 1 GiB host MAP or the teardown of 100,000
//! mappings never runs for seconds without giving the CPU up (upstream sleeps
//! every 32K pages, common/memory.c); MAP stops on [`fatal_signal_pending`]
//! with the normal unwind.

extern "C" {
    // Prototypes in `ffi/helpers.h`, bodies in `ffi/helpers.c`.
    fn hlrs_cond_resched();
    fn hlrs_fatal_signal_pending() -> bool;
}

/// Give the CPU up if another task should run (`cond_resched()`). Must not be
/// called in atomic context (under a spinlock); `might_sleep` checks it on the
/// debug kernel.
pub(crate) fn cond_resched() {
    kernel::task::might_sleep();
    // SAFETY: no preconditions besides process context, which `might_sleep`
    // asserts on debug kernels.
    unsafe { hlrs_cond_resched() }
}

/// Whether the current task has a fatal signal pending
/// (`fatal_signal_pending(current)`).
pub(crate) fn fatal_signal_pending() -> bool {
    // SAFETY: no preconditions.
    unsafe { hlrs_fatal_signal_pending() }
}
