// SPDX-License-Identifier: GPL-2.0

//! Kernel threads that run a body until it returns, placed in their
//! creator's cgroups (`kthread_create`, `cgroup_attach_task_all`,
//! `kthread_stop_put`; the `kernel` crate of 7.3 has none of them), and the
//! run-time cap of a command submission and the engines' CPU share, module
//! parameters root may change at run time
//! (`/sys/module/habanalabs_rs/parameters/{cs_max_run_s,engine_cpu_pct}`).
//!
//! A [`KThread`] owns its thread: the thread runs [`ThreadBody::run`] on a
//! body the owner shares with it, and the owner's [`KThread::stop`] (or drop)
//! waits until the thread has ended, so the body, held by the owner until
//! then, outlives every use the thread makes of it. The body is told to end
//! by its own means (a flag under its lock, say) before `stop`: `stop` only
//! waits.
//!
//! **Cgroups.** [`KThread::spawn`] can move the new thread into every cgroup
//! of the calling task (as vhost did before its workers became user
//! threads), so its CPU time is counted there and `cpu.weight` applies
//! (`cpu.stat`). A caller in the same cgroups as `kthreadd` (the root ones)
//! moves nothing. (On 7.3 CFS bandwidth throttles a task only on its return
//! to user space, so `cpu.max` does not bound a kernel thread: the engines
//! do not use this, see `hw/sim/qman/worker.rs`.)

use kernel::{prelude::*, sync::Arc};

/// A `struct task_struct`, only passed by pointer to `ffi/engines.c`.
#[repr(C)]
struct Task {
    _opaque: [u8; 0],
}

extern "C" {
    // Prototypes in `ffi/engines.h`, bodies in `ffi/engines.c`.
    fn hlrs_cs_max_run_s() -> u32;
    fn hlrs_engine_cpu_pct() -> u32;
    fn hlrs_current_runtime_ns() -> u64;
    #[cfg(CONFIG_KUNIT)]
    fn hlrs_set_cs_max_run_s(s: u32) -> u32;
    fn hlrs_kthread_create(
        f: unsafe extern "C" fn(*mut c_void) -> c_int,
        data: *mut c_void,
        name: *const c_char,
        err: *mut c_int,
    ) -> *mut Task;
    fn hlrs_kthread_wake(t: *mut Task);
    fn hlrs_kthread_stop_put(t: *mut Task) -> c_int;
    fn hlrs_kthread_is_current(t: *mut Task) -> bool;
    fn hlrs_kthread_follow_cgroups(t: *mut Task) -> c_int;
}

/// The module parameter `cs_max_run_s`: the longest a CS runs on the
/// engines, in seconds (0: no cap). Read at each submission. O(1).
pub(crate) fn cs_max_run_s() -> u32 {
    // SAFETY: reads a module parameter (READ_ONCE); no preconditions.
    unsafe { hlrs_cs_max_run_s() }
}

/// The module parameter `engine_cpu_pct`: the host CPU a context's
/// engines may use together, in percent of one CPU (0: no bound). Read at
/// each reschedule point of an engine. O(1).
pub(crate) fn engine_cpu_pct() -> u32 {
    // SAFETY: reads a module parameter (READ_ONCE); no preconditions.
    unsafe { hlrs_engine_cpu_pct() }
}

/// The CPU time the calling thread has run, in ns (its scheduler's
/// `sum_exec_runtime`: behind by at most a tick). O(1).
pub(crate) fn current_runtime_ns() -> u64 {
    // SAFETY: reads a counter of the current task; no preconditions.
    unsafe { hlrs_current_runtime_ns() }
}

/// Set `cs_max_run_s` (KUnit: a test shortens the cap and puts it back);
/// returns the old value. O(1).
#[cfg(CONFIG_KUNIT)]
pub(crate) fn set_cs_max_run_s(s: u32) -> u32 {
    // SAFETY: writes a module parameter (xchg); no preconditions.
    unsafe { hlrs_set_cs_max_run_s(s) }
}

/// What a [`KThread`] runs: from its start until `run` returns.
pub(crate) trait ThreadBody: Send + Sync + 'static {
    /// The thread's work; the thread ends when it returns.
    fn run(&self);
}

/// A kernel thread running a `T`, stopped (waited for) when dropped.
///
/// # Invariants
///
/// `task` is a thread from `kthread_create` on which the owner holds a task
/// reference, started (woken) once, not yet stopped; its data pointer is
/// `body`'s, which lives at least until the thread ended (`stop`).
pub(crate) struct KThread<T: ThreadBody> {
    task: *mut Task,
    body: Arc<T>,
}

// SAFETY: the task pointer is only passed to functions callable from any
// task (wake, stop, compare), and `T` is `Send + Sync`.
unsafe impl<T: ThreadBody> Send for KThread<T> {}
// SAFETY: `&KThread` only compares the task pointer.
unsafe impl<T: ThreadBody> Sync for KThread<T> {}

/// The thread function: runs the body.
///
/// # Safety
///
/// `data` is the pointer of an `Arc<T>` that outlives the thread.
unsafe extern "C" fn trampoline<T: ThreadBody>(data: *mut c_void) -> c_int {
    // SAFETY: `data` came from `Arc::as_ptr` of the body the owner holds
    // until the thread has ended (`KThread`'s invariant).
    let body = unsafe { &*data.cast::<T>() };
    body.run();
    0
}

impl<T: ThreadBody> KThread<T> {
    /// Create a thread named `name` (at most 15 bytes show in `comm`)
    /// running `body`, in the caller's cgroups if `follow_cgroups` (else in
    /// `kthreadd`'s), and start it. Errors:
    /// `kthread_create`'s (`ENOMEM`, `EINTR` for a caller being killed),
    /// `cgroup_attach_task_all`'s (then the thread is stopped again, its
    /// body never run). Sleeps; O(1) besides the kernel's work.
    pub(crate) fn spawn(name: &CStr, body: Arc<T>, follow_cgroups: bool) -> Result<Self> {
        let data = Arc::as_ptr(&body).cast_mut().cast::<c_void>();
        let mut err: c_int = 0;
        // `data` stays valid until the thread ended: it is held in `body`
        // below, which `stop` drops only after the thread ended.
        let f: unsafe extern "C" fn(*mut c_void) -> c_int = trampoline::<T>;
        let name = name.as_char_ptr();
        // `f` matches `int (*)(void *)`; `name` is NUL-terminated; `err` is
        // a valid out pointer.
        // SAFETY: the arguments are as `kthread_create` needs (just above).
        let task = unsafe { hlrs_kthread_create(f, data, name, &mut err) };
        if task.is_null() {
            return Err(Error::from_errno(err));
        }
        if follow_cgroups {
            // SAFETY: `task` is a live thread we hold a reference on.
            let attached = unsafe { hlrs_kthread_follow_cgroups(task) };
            if attached != 0 {
                // Never woken: `kthread_stop` ends it before its function runs.
                // SAFETY: a thread from `kthread_create` with our reference.
                unsafe { hlrs_kthread_stop_put(task) };
                return Err(Error::from_errno(attached));
            }
        }
        // SAFETY: a created, not yet woken thread.
        unsafe { hlrs_kthread_wake(task) };
        // INVARIANT: created, referenced, started once, `body` held.
        Ok(Self { task, body })
    }

    /// The body the thread runs. O(1).
    pub(crate) fn body(&self) -> &Arc<T> {
        &self.body
    }

    /// Whether the calling task is this thread. O(1).
    pub(crate) fn is_current(&self) -> bool {
        // SAFETY: only compares the pointer with `current`.
        unsafe { hlrs_kthread_is_current(self.task) }
    }

    /// Wait until the thread has ended (its body must have been told to
    /// return) and release it; the same as dropping it. Sleeps until the
    /// body returns. Must not be called by the thread itself (it would wait
    /// for itself): then the thread and its body are leaked instead, with
    /// an error in the log.
    pub(crate) fn stop(self) {
        drop(self);
    }
}

impl<T: ThreadBody> Drop for KThread<T> {
    fn drop(&mut self) {
        if self.is_current() {
            // The body is running on this very stack: keep it (and the
            // thread) alive for ever rather than wait for ourselves.
            hl_err!("an engine thread was asked to wait for itself; leaked\n");
            core::mem::forget(self.body.clone());
            return;
        }
        // Its body returns (or has returned) by the owner's means;
        // `kthread_stop` waits for the thread's end, after which `body` may go.
        // SAFETY: a started thread with our reference (invariant), stopped once.
        unsafe { hlrs_kthread_stop_put(self.task) };
    }
}
