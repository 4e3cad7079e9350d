// SPDX-License-Identifier: GPL-2.0

//! Scheduler hints for polling loops. (The simulated engines ran on a
//! workqueue of the module until they became threads of their contexts,
//! `ffi/kthread.rs`.)

extern "C" {
    // kernel/sched/core.c, exported (not in the `kernel` crate's bindings).
    fn single_task_running() -> bool;
}

/// Whether the current task is the only one runnable on its CPU
/// (`single_task_running()`, what KVM's halt polling checks): a poll
/// loop stops when it is not, so that it never keeps the task it waits for
/// (an engine's worker, a waiter) off the CPU. O(1).
pub(crate) fn alone_on_cpu() -> bool {
    // SAFETY: no preconditions; it reads the current CPU's run queue
    // length (racy by design, a hint).
    unsafe { single_task_running() }
}
