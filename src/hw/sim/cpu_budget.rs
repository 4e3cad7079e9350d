// SPDX-License-Identifier: GPL-2.0

//! The host CPU time the simulated engines of one context may use
//! ([`CpuBudget`]), and the reschedule points where an engine pays for it
//! ([`Pace`]).
//!
//! An engine's work is the host's CPU time: a memset of 4 GiB keeps a CPU
//! busy for seconds, and a context with jobs on ten engines could keep ten
//! CPUs busy. The engines run in kernel threads of their context (see
//! `qman::worker`), which the scheduler's CPU controller cannot hold to the
//! submitter's `cpu.max` on 7.3 (CFS bandwidth throttles a task on its
//! return to user space, which a kernel thread never makes). So the engines
//! hold themselves to a budget: all engines of one context together use at
//! most `engine_cpu_pct` percent of one CPU (module parameter, default 100,
//! writable at run time), as a token bucket refilled at that rate and
//! holding at most [`BURST_NS`] of credit. At each reschedule point (every
//! 64 KiB of DMA, every 64 packets, the end of a job) an engine charges the
//! time since its last point; when the context's credit is negative, the
//! engine sleeps until the debt is paid (at most [`MAX_SLEEP_NS`] at a
//! time, so a stop or a close is seen soon).
//!
//! The time charged is the CPU time the engine's thread ran between points
//! (the scheduler's `sum_exec_runtime`, behind by at most a tick, so a
//! debt is seen a tick late at worst): time it waited for a CPU or a lock
//! is not charged; the bucket refills with wall time.
//!
//! Lock order: the bucket's lock is a leaf, taken at a reschedule point
//! with no other lock of the engine held but the worker's `scratch` (the
//! crate root's row 12).

use crate::ffi::{clock::ktime_ns, kthread::current_runtime_ns};
use kernel::{
    new_mutex,
    prelude::*,
    sync::Mutex,
    time::{delay::fsleep, Delta},
};

/// Most credit a context's engines can save up: 50 ms of CPU.
pub(crate) const BURST_NS: i64 = 50_000_000;
/// Longest one sleep at a reschedule point.
pub(crate) const MAX_SLEEP_NS: i64 = 100_000_000;

/// Credit in ns of CPU (negative: debt) and when it was last refilled.
struct Bucket {
    credit: i64,
    refilled: i64,
}

/// The CPU budget of one context's engines.
#[pin_data]
pub(crate) struct CpuBudget {
    #[pin]
    bucket: Mutex<Bucket>,
    /// Where the percentage comes from (the module parameter; tests give
    /// their own).
    pct: fn() -> u32,
}

impl CpuBudget {
    /// A full bucket; `pct` gives the share of one CPU at each charge.
    pub(crate) fn new(pct: fn() -> u32) -> impl PinInit<Self> {
        pin_init!(Self {
            bucket <- new_mutex!(Bucket {
                credit: BURST_NS,
                refilled: ktime_ns(),
            }),
            pct,
        })
    }

    /// Charge `used` ns of CPU at time `now`: the ns to sleep before going
    /// on (0 within budget). A share of 0 means no bound. O(1).
    pub(crate) fn charge(&self, now: i64, used: i64) -> i64 {
        let pct = i64::from((self.pct)());
        if pct == 0 {
            return 0;
        }
        let mut b = self.bucket.lock();
        let earned = now.saturating_sub(b.refilled).max(0).saturating_mul(pct) / 100;
        b.credit = b
            .credit
            .saturating_add(earned)
            .min(BURST_NS)
            .saturating_sub(used.max(0));
        b.refilled = now;
        if b.credit >= 0 {
            return 0;
        }
        // The debt is paid back at `pct` percent of the time that passes.
        (b.credit.saturating_neg().saturating_mul(100) / pct).min(MAX_SLEEP_NS)
    }
}

/// One engine's running slice between two reschedule points.
pub(crate) struct Pace<'a> {
    budget: &'a CpuBudget,
    /// The thread's CPU time (ns) at the slice's start.
    since: u64,
}

impl<'a> Pace<'a> {
    /// A slice starting now.
    pub(crate) fn new(budget: &'a CpuBudget) -> Self {
        Self {
            budget,
            since: current_runtime_ns(),
        }
    }

    /// A reschedule point: charge the slice, sleep off a debt or give the
    /// CPU to whoever waits for it, and start a new slice. O(1) plus the
    /// sleep.
    pub(crate) fn point(&mut self) {
        let ran = current_runtime_ns();
        let used = i64::try_from(ran.saturating_sub(self.since)).unwrap_or(i64::MAX);
        self.since = ran;
        let sleep = self.budget.charge(ktime_ns(), used);
        if sleep > 0 {
            fsleep(Delta::from_nanos(sleep));
        } else {
            crate::ffi::sched::cond_resched();
        }
    }
}

#[kunit_tests(hlrs_cpu_budget)]
mod tests {
    use super::*;
    use kernel::sync::Arc;

    fn half() -> u32 {
        50
    }

    fn none() -> u32 {
        0
    }

    #[test]
    fn a_budget_refills_at_its_share_and_charges_debts_as_sleep() -> Result {
        let b = Arc::pin_init(CpuBudget::new(half), GFP_KERNEL)?;
        let t0 = b.bucket.lock().refilled;
        // The burst is spent first: no sleep.
        assert_eq!(b.charge(t0, BURST_NS), 0);
        // 10 ms more of CPU with no time passed: a 10 ms debt, paid back
        // at half a CPU: 20 ms of sleep.
        assert_eq!(b.charge(t0, 10_000_000), 20_000_000);
        // 20 ms later the debt is paid (10 ms earned at 50%).
        assert_eq!(b.charge(t0 + 20_000_000, 0), 0);
        // Credit never exceeds the burst, however long the engines idled.
        assert_eq!(b.charge(t0 + 10_000_000_000, BURST_NS), 0);
        assert!(b.charge(t0 + 10_000_000_000, 1) > 0);
        // A huge debt sleeps at most MAX_SLEEP_NS at a time.
        assert_eq!(b.charge(t0 + 10_000_000_000, 1 << 40), MAX_SLEEP_NS);
        // A share of 0: no bound.
        let free = Arc::pin_init(CpuBudget::new(none), GFP_KERNEL)?;
        assert_eq!(free.charge(t0, 1 << 40), 0);
        Ok(())
    }
}
