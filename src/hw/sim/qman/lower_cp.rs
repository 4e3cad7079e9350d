// SPDX-License-Identifier: GPL-2.0

//! The lower CP of a simulated QMAN (CP 4): what a `CP_DMA` with
//! `upper_cp` clear hands its CB to, as on silicon and on the PCI device
//! (`crate::model::cp`).
//!
//! **One per engine and context.** A kernel thread of the context
//! (`hlrs-l<engine>-<pid>`), made with the engine's first stream worker,
//! runs the CBs the engine's four streams hand it, one after the other in
//! the order they were handed, with the lower CP's registers (its fence
//! counters, message bases, predicates and scalars:
//! [`crate::model::engine::execute_lower`]) and its own buffers. The
//! stream that handed a CB goes on at once; only when the lower CP's queue
//! holds [`LOWER_FIFO`] CBs does a hand wait for room (a full FIFO parks
//! the upper CP on its `CP_DMA`, as `crate::model::cp` does).
//!
//! **A stream's job completes after what it handed.** Each stream's
//! [`Handoff`] counts the CBs its running job handed that have not ended;
//! the job is reported done only once they all have, so a completion never
//! overtakes the work it stands for (as the model core's QMANs). A handed
//! CB that fails (a fault, a bad packet) cancels its job: the job and its
//! other handed CBs stop at their next packet, and the job ends with that
//! CB's error. A job that faults itself cancels its handed CBs the same
//! way and ends with its own error. A halted job's handed CBs stop at their
//! next packet too (they poll the same job's halt), and those still queued
//! behind another stream's CB are taken out of the queue by the job's
//! settle (which polls its halt every [`POLL_MS`]), so a halt never waits
//! for another stream's CB.
//!
//! Difference from the model core's stepped lower CP: there, an error of
//! the lower CP halts it, and its release drops every stream's queued CBs;
//! here only the failing job's CBs are dropped, and the other streams'
//! handed CBs run on.
//!
//! **References.** A queued CB holds its job (and so the CS's flight, its
//! context's tracker, the context's workers and this thread): a cycle
//! while the CB is queued. It never outlives the context's close, which
//! halts and drains every CS before it stops the workers
//! ([`super::worker::Workers::stop_all`]), and the thread drops a CB's job
//! before it reports the CB's end.
//!
//! Lock order (the crate root's 12c): a hand takes the [`LowerBody`]'s
//! `feed`, then with it the [`Handoff`]'s `state`; everything else takes
//! each alone (the close's stop takes `feed` under the context's
//! `SimQueues::workers`), and neither is held across a CB's execution.

use super::{Engine, HwJob, Scratch};
use crate::{
    ffi::{kthread::KThread, kthread::ThreadBody, sched::cond_resched},
    hw::sim::{
        cp::LowerCp,
        cpu_budget::CpuBudget,
        job::{JobEnd, JobOwner, Stop},
    },
};
use kernel::{
    new_condvar, new_mutex,
    prelude::*,
    sync::{
        atomic::{Atomic, Relaxed},
        Arc, CondVar, Mutex,
    },
    time::msecs_to_jiffies,
};

/// CBs the lower CP's queue holds (the model core's `qman::LOWER_FIFO`).
pub(crate) const LOWER_FIFO: usize = crate::model::qman::LOWER_FIFO;
/// How often a hand waiting for room polls its job's halt, in ms.
const POLL_MS: u32 = 10;

/// What a stream's running job handed to the lower CP.
#[pin_data]
pub(crate) struct Handoff {
    #[pin]
    state: Mutex<HandoffState>,
    /// Notified when a handed CB ends.
    #[pin]
    ended: CondVar,
    /// The running job is cancelled: a CB it handed failed, or it faulted
    /// itself (read without the lock by the halt checks of the job and of
    /// its handed CBs).
    failed: Atomic<bool>,
}

struct HandoffState {
    /// Handed CBs not ended yet.
    outstanding: u32,
    /// The first that failed, and how.
    failure: Option<JobEnd>,
}

impl Handoff {
    /// Nothing handed.
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            state <- new_mutex!(HandoffState {
                outstanding: 0,
                failure: None,
            }),
            ended <- new_condvar!("Handoff::ended"),
            failed: Atomic::new(false),
        })
    }

    /// Whether the running job is cancelled (a CB it handed failed, or it
    /// faulted). O(1), lock-free.
    pub(crate) fn failed(&self) -> bool {
        self.failed.load(Relaxed)
    }

    /// Cancel the running job's handed CBs: they stop at their next
    /// packet. O(1).
    pub(crate) fn cancel(&self) {
        self.failed.store(true, Relaxed);
    }

    /// Wait up to `ms` for every CB the job handed to have ended: whether
    /// they all have. Sleeps; O(1).
    fn settled(&self, ms: u32) -> bool {
        let mut st = self.state.lock();
        if st.outstanding > 0 {
            let _ = self
                .ended
                .wait_interruptible_timeout(&mut st, msecs_to_jiffies(ms));
        }
        st.outstanding == 0
    }

    /// Once every handed CB ended: the first failure, and a fresh start for
    /// the stream's next job. O(1).
    fn take(&self) -> Option<JobEnd> {
        let mut st = self.state.lock();
        self.failed.store(false, Relaxed);
        st.failure.take()
    }

    /// A handed CB ended with `end`. O(1).
    fn end(&self, end: JobEnd) {
        let mut st = self.state.lock();
        st.outstanding = st.outstanding.saturating_sub(1);
        if end != JobEnd::Done && st.failure.is_none() {
            st.failure = Some(end);
            self.failed.store(true, Relaxed);
        }
        drop(st);
        self.ended.notify_all();
    }
}

/// A CB in the lower CP's queue: where it is, the job that handed it
/// (whose ASID it runs with and whose halt stops it) and that job's
/// stream's [`Handoff`].
struct Handed {
    cb: (u64, u32),
    job: Arc<HwJob>,
    from: Arc<Handoff>,
}

/// The lower CP's queue: a ring of [`LOWER_FIFO`] CBs.
struct Feed {
    ring: [Option<Handed>; LOWER_FIFO],
    head: usize,
    len: usize,
    /// Set by [`LowerBody::stop`]: the thread ends once the queue is empty.
    stop: bool,
}

/// What the lower CP's thread runs.
#[pin_data]
pub(crate) struct LowerBody {
    engine: Arc<Engine>,
    /// Its buffers: only its thread takes the lock.
    #[pin]
    scratch: Mutex<Scratch>,
    budget: Arc<CpuBudget>,
    #[pin]
    feed: Mutex<Feed>,
    /// Notified when a CB is queued or the thread must stop.
    #[pin]
    more: CondVar,
    /// Notified when a CB leaves the queue.
    #[pin]
    room: CondVar,
}

/// The lower CP's thread of one engine and context.
pub(crate) type LowerWorker = KThread<LowerBody>;

impl LowerBody {
    /// The lower CP of `engine` with its own buffers (`ENOMEM`).
    pub(crate) fn new(engine: Arc<Engine>, budget: Arc<CpuBudget>) -> Result<Arc<Self>> {
        let dma = engine.has_dma();
        Arc::pin_init(
            try_pin_init!(Self {
                engine,
                scratch <- new_mutex!(Scratch::new(dma)?),
                budget,
                feed <- new_mutex!(Feed {
                    ring: [const { None }; LOWER_FIFO],
                    head: 0,
                    len: 0,
                    stop: false,
                }),
                more <- new_condvar!("LowerBody::more"),
                room <- new_condvar!("LowerBody::room"),
            }),
            GFP_KERNEL,
        )
    }

    /// Queue the CB `cb` handed by `job` (its stream's `from`), waiting
    /// while the queue is full; `Err` if `job` is halted (or a CB it handed
    /// failed) first. Sleeps; O(1) per wake.
    pub(crate) fn hand(
        &self,
        cb: (u64, u32),
        job: &Arc<HwJob>,
        from: &Arc<Handoff>,
        halted: &dyn Fn() -> Option<Stop>,
    ) -> Result<(), Stop> {
        let mut feed = self.feed.lock();
        while feed.len >= LOWER_FIFO {
            if let Some(stop) = halted() {
                return Err(stop);
            }
            let _ = self
                .room
                .wait_interruptible_timeout(&mut feed, msecs_to_jiffies(POLL_MS));
        }
        let at = (feed.head + feed.len) % LOWER_FIFO;
        if let Some(slot) = feed.ring.get_mut(at) {
            from.state.lock().outstanding += 1;
            *slot = Some(Handed {
                cb,
                job: job.clone(),
                from: from.clone(),
            });
            feed.len += 1;
        }
        drop(feed);
        self.more.notify_all();
        Ok(())
    }

    /// Take the CBs `from`'s job handed that are still queued out of the
    /// queue, and end each as stopped: what a halted or cancelled job's
    /// settle does, so it never waits behind another stream's CB.
    /// O([`LOWER_FIFO`]).
    fn drop_queued(&self, from: &Arc<Handoff>) {
        let mut out: [Option<Handed>; LOWER_FIFO] = [const { None }; LOWER_FIFO];
        let mut feed = self.feed.lock();
        let (head, len) = (feed.head, feed.len);
        let mut kept = 0;
        for i in 0..len {
            let at = (head + i) % LOWER_FIFO;
            let h = feed.ring.get_mut(at).and_then(Option::take);
            match h {
                Some(h) if Arc::ptr_eq(&h.from, from) => {
                    if let Some(o) = out.get_mut(i) {
                        *o = Some(h);
                    }
                }
                h => {
                    let to = (head + kept) % LOWER_FIFO;
                    if let Some(slot) = feed.ring.get_mut(to) {
                        *slot = h;
                    }
                    kept += 1;
                }
            }
        }
        feed.len = kept;
        drop(feed);
        if out.iter().any(Option::is_some) {
            self.room.notify_all();
        }
        for h in out.into_iter().flatten() {
            let Handed { job, from, .. } = h;
            drop(job);
            from.end(JobEnd::Stopped(Stop::Halted));
        }
    }

    /// Tell the thread to end once its queue is empty. O(1).
    pub(crate) fn stop(&self) {
        self.feed.lock().stop = true;
        self.more.notify_all();
    }

    /// The next CB, sleeping while there is none; `None` once told to stop
    /// with an empty queue.
    fn next(&self) -> Option<Handed> {
        let mut feed = self.feed.lock();
        loop {
            if feed.len > 0 {
                let head = feed.head;
                let h = feed.ring.get_mut(head).and_then(Option::take);
                feed.head = (head + 1) % LOWER_FIFO;
                feed.len -= 1;
                if let Some(h) = h {
                    drop(feed);
                    self.room.notify_all();
                    return Some(h);
                }
                continue;
            }
            if feed.stop {
                return None;
            }
            let _ = self.more.wait_interruptible(&mut feed);
        }
    }
}

/// A handed CB's owner: its job, and the job's cancellation.
struct LowerOwner<'a> {
    job: &'a HwJob,
    from: &'a Handoff,
}

impl JobOwner for LowerOwner<'_> {
    fn stop(&self) -> Option<Stop> {
        self.job
            .stop()
            .or_else(|| self.from.failed().then_some(Stop::Halted))
    }

    /// A handed CB's end goes to its job's [`Handoff`], not to the driver.
    fn done(&self, _engine: u16, _end: JobEnd) {}
}

impl ThreadBody for LowerBody {
    /// Run the handed CBs in order until told to stop. O(CBs x CB).
    fn run(&self) {
        while let Some(Handed { cb, job, from }) = self.next() {
            let owner = LowerOwner {
                job: &job,
                from: &from,
            };
            let end = self
                .engine
                .run_lower((&job, &owner), cb, &self.budget, &self.scratch);
            drop(job);
            from.end(end);
            cond_resched();
        }
    }
}

/// A stream's running job's way to its QMAN's lower CP: what the stream's
/// worker gives the CP ([`super::Engine::run`]).
pub(crate) struct StreamHand<'a> {
    /// The engine's lower CP.
    pub(crate) lower: &'a LowerBody,
    /// The stream's record of what its job handed.
    pub(crate) handoff: &'a Arc<Handoff>,
    /// The running job.
    pub(crate) job: Arc<HwJob>,
}

impl LowerCp for StreamHand<'_> {
    fn hand(&self, cb: (u64, u32), halted: &dyn Fn() -> Option<Stop>) -> Result<(), Stop> {
        self.lower.hand(cb, &self.job, self.handoff, halted)
    }

    fn failed(&self) -> bool {
        self.handoff.failed()
    }

    fn cancel(&self) {
        self.handoff.cancel();
    }

    /// Wait for the job's handed CBs, polling its halt and cancellation
    /// every [`POLL_MS`]: once either is set, its CBs still queued are
    /// taken out (the one running stops at its next packet).
    fn settle(&self) -> Option<JobEnd> {
        while !self.handoff.settled(POLL_MS) {
            if self.job.stop().is_some() || self.handoff.failed() {
                self.lower.drop_queued(self.handoff);
            }
        }
        self.handoff.take()
    }
}

#[kunit_tests(hlrs_sim_lower_cp)]
mod tests {
    use super::*;
    use crate::hw::sim::fault::EngineFault;

    #[test]
    fn a_handoff_keeps_the_first_failure_until_settled() -> Result {
        let h = Arc::pin_init(Handoff::new(), GFP_KERNEL)?;
        h.state.lock().outstanding = 3;
        let fault = JobEnd::Fault(EngineFault::Backing { addr: 8, engine: 1 });
        h.end(JobEnd::Done);
        assert!(!h.failed());
        h.end(fault);
        assert!(h.failed());
        h.end(JobEnd::Stopped(Stop::Halted));
        // All three ended: the first failure, and a fresh start.
        assert!(h.settled(0));
        assert_eq!(h.take(), Some(fault));
        assert!(!h.failed());
        assert_eq!(h.take(), None);
        // A cancel without a failure: nothing to report.
        h.cancel();
        assert!(h.failed());
        assert_eq!(h.take(), None);
        assert!(!h.failed());
        Ok(())
    }
}
