// SPDX-License-Identifier: GPL-2.0

//! The monotonic clock in nanoseconds (`ktime_get`), for timestamps and
//! deadlines below the shell (the `kernel` crate's `Instant` keeps its
//! nanoseconds private).

use kernel::bindings;

/// Monotonic time in ns (`ktime_get()`). Never negative.
pub(crate) fn ktime_ns() -> i64 {
    // SAFETY: `ktime_get` has no preconditions (not called from NMI context).
    unsafe { bindings::ktime_get() }
}
