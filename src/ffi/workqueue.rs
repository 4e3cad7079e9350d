// SPDX-License-Identifier: GPL-2.0

//! The module's own workqueue (`alloc_workqueue` / `destroy_workqueue`,
//! which the `kernel` crate of 7.3 cannot call), on which the simulated
//! engines run their jobs.
//!
//! It lives from module load to module unload ([`ModuleQueue`], owned by
//! the module and dropped after every device): a device's engines may be
//! freed from one of their own work items (the last reference to a device's
//! engines can be a job's), so a device cannot destroy a queue of its own;
//! the unload destroys this one once no device is left, and
//! `destroy_workqueue` waits for every work item still running (the tail of
//! one that dropped the last job), so no engine code runs after it.

use kernel::{
    bindings,
    prelude::*,
    sync::atomic::{Acquire, Atomic, Release},
    workqueue::Queue,
};

extern "C" {
    // Prototype in `ffi/helpers.h`, body in `ffi/helpers.c`.
    fn hlrs_alloc_workqueue(name: *const c_char) -> *mut bindings::workqueue_struct;
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

/// The engines' workqueue while the module is loaded (null before and after).
static ENGINES: Atomic<*mut bindings::workqueue_struct> = Atomic::new(core::ptr::null_mut());

/// Owner of the module's workqueue: created by the module's init before any
/// device, destroyed when dropped, after every device.
///
/// # Invariants
///
/// While it exists, [`ENGINES`] holds a workqueue from `alloc_workqueue`,
/// destroyed only by `Drop`.
pub(crate) struct ModuleQueue(());

impl ModuleQueue {
    /// Create the unbound workqueue `name` (no rescuer: nothing in memory
    /// reclaim waits for an engine). `ENOMEM` if the kernel cannot.
    pub(crate) fn create(name: &'static CStr) -> Result<Self> {
        // SAFETY: `name` is a NUL-terminated string that outlives the queue.
        let wq = unsafe { hlrs_alloc_workqueue(name.as_char_ptr()) };
        if wq.is_null() {
            return Err(ENOMEM);
        }
        // INVARIANT: a workqueue from `alloc_workqueue`, published.
        ENGINES.store(wq, Release);
        Ok(Self(()))
    }
}

impl Drop for ModuleQueue {
    fn drop(&mut self) {
        let wq = ENGINES.xchg(core::ptr::null_mut(), Acquire);
        if !wq.is_null() {
            // SAFETY: by the invariant `wq` came from `alloc_workqueue` and
            // is destroyed once, here; `destroy_workqueue` drains it first.
            unsafe { bindings::destroy_workqueue(wq) };
        }
    }
}

/// The engines' workqueue, `None` outside the module's lifetime (never
/// while a device exists).
pub(crate) fn engines_queue() -> Option<&'static Queue> {
    let wq = ENGINES.load(Acquire);
    if wq.is_null() {
        return None;
    }
    // Destroyed only at module unload, after every device (its only users):
    // `'static` stands for "the module's life".
    // SAFETY: a non-null pointer is a live workqueue (`ModuleQueue`'s invariant).
    Some(unsafe { Queue::from_raw(wq) })
}
