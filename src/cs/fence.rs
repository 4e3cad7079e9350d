// SPDX-License-Identifier: GPL-2.0

//! The fence of one command submission (upstream `struct hl_fence`): done
//! once, with the CS's status and completion time, and waited for by
//! WAIT_CS (interruptibly, with a timeout) and by the restore phase.
//!
//! Lock order: the fence's lock is a leaf, taken alone or inside the
//! context's tracker lock (the crate root's table).

use crate::ffi::{clock::ktime_ns, sched::cond_resched, workqueue::alone_on_cpu};
use kernel::{
    new_condvar, new_mutex,
    prelude::*,
    sync::{
        atomic::{Acquire, Atomic, Relaxed, Release},
        Arc, CondVar, CondVarTimeoutResult, Mutex, UniqueArc,
    },
    time::{msecs_to_jiffies, Jiffies},
};

/// How a CS ended (upstream `fence->error`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CsStatus {
    /// Every job ran to its end (error 0).
    Ok,
    /// Refused after it got its sequence number: never ran (`-EBUSY`, which
    /// WAIT_CS reports as completed, as upstream).
    NotSubmitted,
    /// A job faulted or hit a packet it cannot run, or the context closed
    /// (`-EIO`: WAIT_CS says ABORTED).
    Aborted,
    /// It ran past its timeout (`-ETIMEDOUT`: WAIT_CS says TIMEDOUT).
    TimedOut,
}

/// The longest a wait polls the fence before it sleeps (ns): a CS that
/// ends by then (a NOP, a DMA of a few pages) is seen without a sleep and
/// the wake-up that ends it (an IPI to an idle CPU: under TCG 11 us for the
/// engine that signals and 27 us until the waiter runs on the production
/// kernel, milliseconds on the debug kernel, where a NOP CS ends 150-250 us
/// into its wait), as i915 spins on a request before sleeping.
const WAIT_POLL_MAX_NS: i64 = 500_000;
/// The first window after polling was off (ns).
const WAIT_POLL_START_NS: i64 = 10_000;

/// How long waits poll now (ns), adapted as KVM adapts its halt polling
/// (`halt_poll_ns`, grow from 10 us by doubling, shrink to 0): doubled up to
/// [`WAIT_POLL_MAX_NS`] after a wait whose fence was signalled within that
/// bound of the wait's start (whether or not the poll lasted that long),
/// 0 after one whose fence was not. Polling pays only while CSs end quickly and the
/// engine's CPU is free; after a long DMA, or on a loaded host where the
/// engine's (virtual) CPU runs late, waits sleep at once. Shared by every
/// device (a hint, updated without ordering).
static WAIT_POLL_NS: Atomic<i64> = Atomic::new(WAIT_POLL_START_NS);

/// Adapt [`WAIT_POLL_NS`] to a wait whose fence was signalled `took` ns
/// after the wait began (`None`: not done). O(1).
fn adapt_poll(took: Option<i64>) {
    let next = match took {
        Some(ns) if ns <= WAIT_POLL_MAX_NS => WAIT_POLL_NS
            .load(Relaxed)
            .saturating_mul(2)
            .clamp(WAIT_POLL_START_NS, WAIT_POLL_MAX_NS),
        _ => 0,
    };
    WAIT_POLL_NS.store(next, Relaxed);
}

/// Poll `ready` until it answers `true`, `ns` nanoseconds have passed or
/// another task wants the CPU ([`alone_on_cpu`]: it may be the engine's
/// worker the wait is for). Never sleeps. O(ns).
fn poll_for(ns: i64, mut ready: impl FnMut() -> bool) {
    let end = ktime_ns().saturating_add(ns);
    while !ready() && ktime_ns() < end && alone_on_cpu() {
        cond_resched();
        core::hint::spin_loop();
    }
}

/// What a done fence holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Finished {
    /// How the CS ended.
    pub(crate) status: CsStatus,
    /// Completion time (ktime ns) if the CS asked for one
    /// (`HL_CS_FLAGS_TIMESTAMP`), else 0.
    pub(crate) timestamp_ns: i64,
}

/// What a wait for a fence found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Waited {
    /// The fence is done.
    Done(Finished),
    /// Not done when the timeout passed.
    Busy,
    /// A signal came first (`ERESTARTSYS`).
    Interrupted,
}

/// The fence of CS `seq`.
#[pin_data]
pub(crate) struct Fence {
    /// The sequence number (changed only by [`Fence::reuse`], which nobody
    /// else can observe).
    seq: Atomic<u64>,
    #[pin]
    state: Mutex<Option<Finished>>,
    /// `state` is set (polled without its lock).
    finished: Atomic<bool>,
    /// When it was signalled (ktime ns), for the wait's poll window.
    signalled_ns: Atomic<i64>,
    #[pin]
    done: CondVar,
}

impl Fence {
    /// A fence not done yet. O(1).
    pub(crate) fn new(seq: u64) -> Result<Arc<Self>> {
        Arc::pin_init(
            pin_init!(Self {
                seq: Atomic::new(seq),
                state <- new_mutex!(None),
                finished: Atomic::new(false),
                signalled_ns: Atomic::new(0),
                done <- new_condvar!("Fence::done"),
            }),
            GFP_KERNEL,
        )
    }

    /// The sequence number. O(1).
    pub(crate) fn seq(&self) -> u64 {
        self.seq.load(Relaxed)
    }

    /// The fence of a finished CS made the fence of CS `seq`, not done,
    /// instead of a new one (the window's slot of `seq` held it): on the
    /// debug kernel an allocation costs about as much as a null ioctl. Only
    /// for a fence nobody else holds (the caller has it unique), so no
    /// waiter sees the change. O(1).
    pub(crate) fn reuse(this: Pin<UniqueArc<Self>>, seq: u64) -> Arc<Self> {
        this.seq.store(seq, Relaxed);
        *this.state.lock() = None;
        this.finished.store(false, Relaxed);
        this.signalled_ns.store(0, Relaxed);
        this.into()
    }

    /// Mark the fence done with `f` (only the first call counts) and wake
    /// every waiter. O(waiters).
    pub(crate) fn signal(&self, f: Finished) {
        let mut state = self.state.lock();
        if state.is_none() {
            *state = Some(f);
            self.signalled_ns.store(ktime_ns(), Relaxed);
        }
        drop(state);
        self.finished.store(true, Release);
        self.done.notify_all();
    }

    /// The fence's state now (`completion_done`). O(1).
    pub(crate) fn poll(&self) -> Option<Finished> {
        *self.state.lock()
    }

    /// Wait until the fence is done, `timeout_us` microseconds pass (0: do
    /// not wait), or a signal comes: polled for [`WAIT_POLL_NS`] first (at
    /// most [`WAIT_POLL_MAX_NS`]), then asleep. Timeouts count in whole jiffies, rounded up, as
    /// upstream's `usecs_to_jiffies`; a timeout beyond `u32::MAX` ms waits
    /// for ever. O(1) besides the poll and the sleep.
    pub(crate) fn wait(&self, timeout_us: u64) -> Waited {
        if timeout_us == 0 || self.finished.load(Acquire) {
            return self.wait_for(timeout_us);
        }
        let start = ktime_ns();
        let ns = i64::try_from(timeout_us.saturating_mul(1000)).unwrap_or(i64::MAX);
        let window = WAIT_POLL_NS.load(Relaxed).min(ns);
        if window > 0 {
            poll_for(window, || self.finished.load(Acquire));
        }
        let r = self.wait_for(timeout_us);
        // Seen done: `signalled_ns` was stored before `finished`.
        let took = self.signalled_ns.load(Relaxed).saturating_sub(start);
        adapt_poll(matches!(r, Waited::Done(_)).then_some(took));
        r
    }

    /// [`Self::wait`] without the poll.
    fn wait_for(&self, timeout_us: u64) -> Waited {
        let mut state = self.state.lock();
        if let Some(f) = *state {
            return Waited::Done(f);
        }
        if timeout_us == 0 {
            return Waited::Busy;
        }
        let ms = timeout_us.div_ceil(1000);
        let mut left: Jiffies = u32::try_from(ms).map_or(Jiffies::MAX, msecs_to_jiffies);
        loop {
            match self.done.wait_interruptible_timeout(&mut state, left) {
                CondVarTimeoutResult::Timeout => break,
                CondVarTimeoutResult::Signal { .. } => {
                    return match *state {
                        Some(f) => Waited::Done(f),
                        None => Waited::Interrupted,
                    }
                }
                CondVarTimeoutResult::Woken { jiffies } => {
                    if state.is_some() || jiffies == 0 {
                        break;
                    }
                    left = jiffies;
                }
            }
        }
        match *state {
            Some(f) => Waited::Done(f),
            None => Waited::Busy,
        }
    }

    /// Wait, without a timeout and not interruptibly, until the fence is
    /// done (tests). O(1) besides the sleep.
    #[cfg(CONFIG_KUNIT)]
    pub(crate) fn wait_done(&self) -> Finished {
        let mut state = self.state.lock();
        loop {
            if let Some(f) = *state {
                return f;
            }
            self.done.wait(&mut state);
        }
    }
}

/// The completion time of a CS that asked for one (ktime ns), else 0.
pub(crate) fn completion_time(wanted: bool) -> i64 {
    if wanted {
        ktime_ns()
    } else {
        0
    }
}

#[kunit_tests(hlrs_fence)]
mod tests {
    use super::*;

    #[test]
    fn a_fence_is_done_once_and_waits_end() -> Result {
        let f = Fence::new(7)?;
        assert_eq!(f.seq(), 7);
        assert_eq!(f.poll(), None);
        assert_eq!(f.wait(0), Waited::Busy);
        // A short wait times out.
        assert_eq!(f.wait(1500), Waited::Busy);
        let first = Finished {
            status: CsStatus::Aborted,
            timestamp_ns: 5,
        };
        f.signal(first);
        f.signal(Finished {
            status: CsStatus::Ok,
            timestamp_ns: 9,
        });
        assert_eq!(f.poll(), Some(first));
        assert_eq!(f.wait(0), Waited::Done(first));
        assert_eq!(f.wait(u64::MAX), Waited::Done(first));
        assert_eq!(f.wait_done(), first);
        // Reused once nobody else holds it: a new sequence, not done.
        let f = Fence::reuse(Arc::into_unique_or_drop(f).ok_or(EINVAL)?, 71);
        assert_eq!((f.seq(), f.poll(), f.wait(0)), (71, None, Waited::Busy));
        assert_eq!(completion_time(false), 0);
        assert!(completion_time(true) > 0);
        Ok(())
    }
}
