// SPDX-License-Identifier: GPL-2.0

//! The threads that run a context's jobs on the simulated engines: one per
//! queue (engine stream) the context used, created on its first job for
//! that queue, ended when the context closes ([`Workers::stop_all`]).
//!
//! **Why threads of the context.** An engine's work is host CPU time: a
//! LIN_DMA of 4 GiB, or a CB of millions of packets, keeps a CPU busy for
//! seconds, ten engines ten CPUs. On a shared workqueue that time belongs
//! to nobody. Each [`EngineWorker`] is a kernel thread of one context
//! (`hlrs-q<queue>-<pid>`), so its time is visible per context, and it
//! can be moved into the submitter's cgroups ([`KThread::spawn`], as vhost's
//! workers were). That move is off ([`FOLLOW_CGROUPS`]): on 7.3 CFS
//! bandwidth never throttles a kernel thread (task-based throttling acts on
//! the return to user space), so `cpu.max` would not bound the engines and
//! their time would starve the submitter's own threads instead.
//!
//! **Order.** A context's jobs for one queue run in submission order on
//! its one worker, as a stream's CP runs its PQ; the four streams of an
//! engine run side by side, as its QMAN's four upper CPs do (a `FENCE`
//! holds only its own). The compute node has one context at a time, and a
//! context's workers end (after its last CS) before the next open.
//!
//! **Reschedule points.** The engine yields between jobs, between packets
//! (every [`super::super::cp::RESCHED_PACKETS`]) and between DMA chunks, so
//! a throttled or preempted worker stops within 64 KiB of work even on a
//! kernel without preemption.
//!
//! **The lower CPs.** With an engine's first stream worker comes its lower
//! CP's thread (`hlrs-l<engine>-<pid>`, [`super::lower_cp`]): the streams
//! hand it the CBs of their `CP_DMA`s with `upper_cp` clear and go on; a
//! stream's job is reported after the CBs it handed ended. At the close,
//! the streams end first (their queues empty, so nothing is handed any
//! more), then the lower CPs.
//!
//! Lock order: `Qman::submit`, then a worker's [`Feed`] (a leaf: the crate
//! root's `Engine::fifo`); the thread takes its `Feed` alone and runs jobs
//! with none held.

use super::{
    lower_cp::{Handoff, LowerBody, LowerWorker, StreamHand},
    Engine, HwJob, Qman, Scratch, ENGINES, QUEUE_LENGTH, STREAMS,
};
use crate::{
    ffi::{
        kthread::{engine_cpu_pct, KThread, ThreadBody},
        sched::cond_resched,
    },
    hw::sim::cpu_budget::CpuBudget,
};
use kernel::{
    list::List,
    new_condvar, new_mutex,
    prelude::*,
    str::CString,
    sync::{atomic::Relaxed, Arc, CondVar, Mutex},
};

/// Whether workers move into the submitter's cgroups. Not on 7.3: CFS
/// bandwidth throttles a task only when it returns to user space, which a
/// kernel thread never does, so a worker in a group with `cpu.max` would
/// use the group's quota unthrottled and starve the group's user threads
/// (measured: the submitting process froze until its CSs timed out).
const FOLLOW_CGROUPS: bool = false;

/// A worker's queue.
struct Feed {
    jobs: List<HwJob>,
    /// Set by [`Workers::stop_all`]: the thread ends once the queue is empty.
    stop: bool,
}

/// What a worker thread runs: one stream's jobs of one context.
#[pin_data]
pub(crate) struct WorkerBody {
    engine: Arc<Engine>,
    /// The stream's buffers (a 4 KiB CB window, a 64 KiB bounce buffer
    /// behind a DMA core): only its thread takes the lock.
    #[pin]
    scratch: Mutex<Scratch>,
    /// The CPU budget of the context's engines (shared by its workers).
    budget: Arc<CpuBudget>,
    /// The engine's lower CP (this context's), and what the running job
    /// handed it.
    lower: Arc<LowerBody>,
    handoff: Arc<Handoff>,
    #[pin]
    feed: Mutex<Feed>,
    /// Notified when a job is queued or the worker must stop.
    #[pin]
    more: CondVar,
}

impl ThreadBody for WorkerBody {
    /// Run the queued jobs in order, sleeping (interruptibly: a kernel
    /// thread gets no signal, and an idle worker must not look hung) while
    /// there is none, until told to stop. O(jobs x job).
    fn run(&self) {
        loop {
            let job = {
                let mut feed = self.feed.lock();
                loop {
                    if let Some(job) = feed.jobs.pop_front() {
                        break job;
                    }
                    if feed.stop {
                        return;
                    }
                    let _ = self.more.wait_interruptible(&mut feed);
                }
            };
            let hand = StreamHand {
                lower: &self.lower,
                handoff: &self.handoff,
                job: job.clone_arc(),
            };
            self.engine
                .run(job, (&self.budget, &self.scratch), Some(&hand));
            cond_resched();
        }
    }
}

/// One worker thread of a context.
pub(crate) type EngineWorker = KThread<WorkerBody>;

/// A context's worker threads, by queue slot (engine index x
/// [`STREAMS`] + stream).
pub(crate) struct Workers {
    threads: [Option<EngineWorker>; ENGINES * STREAMS],
    /// The lower CP of each engine a stream of which has a worker.
    lowers: [Option<LowerWorker>; ENGINES],
    /// The host CPU all of them may use together (`engine_cpu_pct`),
    /// made with the first worker.
    budget: Option<Arc<CpuBudget>>,
}

impl Workers {
    /// None yet.
    pub(crate) fn new() -> Self {
        Self {
            threads: [const { None }; ENGINES * STREAMS],
            lowers: [const { None }; ENGINES],
            budget: None,
        }
    }

    /// Make sure stream `s` of engine `e` of `qman` has a worker for this
    /// context: create it and its buffers if not (`ENOMEM`,
    /// [`KThread::spawn`]'s `EINTR`). Sleeps when it creates one; O(1)
    /// otherwise.
    pub(crate) fn ensure(&mut self, qman: &Qman, (e, s): (usize, usize)) -> Result {
        if s >= STREAMS {
            return Err(EINVAL);
        }
        let slot = self.threads.get_mut(e * STREAMS + s).ok_or(EINVAL)?;
        if slot.is_some() {
            return Ok(());
        }
        let engine = qman.engine(e).ok_or(EINVAL)?.clone();
        let dma = engine.has_dma();
        let budget = match &self.budget {
            Some(b) => b.clone(),
            None => {
                let b = Arc::pin_init(CpuBudget::new(engine_cpu_pct), GFP_KERNEL)?;
                self.budget.insert(b).clone()
            }
        };
        let pid = kernel::current!().pid();
        let lower_slot = self.lowers.get_mut(e).ok_or(EINVAL)?;
        let lower = match lower_slot {
            Some(l) => l.body().clone(),
            None => {
                let body = LowerBody::new(engine.clone(), budget.clone())?;
                let name = CString::try_from_fmt(fmt!("hlrs-l{}-{}", e, pid))?;
                lower_slot
                    .insert(KThread::spawn(&name, body, FOLLOW_CGROUPS)?)
                    .body()
                    .clone()
            }
        };
        let handoff = Arc::pin_init(Handoff::new(), GFP_KERNEL)?;
        let body = Arc::pin_init(
            try_pin_init!(WorkerBody {
                engine,
                budget,
                lower,
                handoff,
                scratch <- new_mutex!(Scratch::new(dma)?),
                feed <- new_mutex!(Feed {
                    jobs: List::new(),
                    stop: false,
                }),
                more <- new_condvar!("WorkerBody::more"),
            }),
            GFP_KERNEL,
        )?;
        // `comm` keeps 15 bytes: "hlrs-q9-4194304" fits, a longer one is
        // cut.
        let name = CString::try_from_fmt(fmt!("hlrs-q{}-{}", e * STREAMS + s, pid))?;
        *slot = Some(KThread::spawn(&name, body, FOLLOW_CGROUPS)?);
        Ok(())
    }

    /// Queue every job of `batch` on its engine's worker, in order, and
    /// wake the workers: all of them, or none with `EAGAIN` if a stream
    /// would hold more than [`QUEUE_LENGTH`] jobs (`batch` is then left as
    /// it was). The workers are created first if needed ([`Self::ensure`]'s
    /// errors, `batch` untouched). O(jobs).
    pub(crate) fn submit(&mut self, qman: &Qman, batch: &mut List<HwJob>) -> Result {
        let mut need = [0u32; ENGINES * STREAMS];
        for job in batch.iter() {
            let (e, s) = job.slot;
            let n = need.get_mut(e * STREAMS + s).ok_or(EINVAL)?;
            *n = n.saturating_add(1);
        }
        for (i, _) in need.iter().enumerate().filter(|(_, &n)| n > 0) {
            self.ensure(qman, (i / STREAMS, i % STREAMS))?;
        }
        let _serial = qman.serialise();
        for (e, want) in need.chunks(STREAMS).enumerate() {
            let Some(engine) = qman.engine(e) else {
                continue;
            };
            for (queued, n) in engine.streams.iter().zip(want) {
                if queued.load(Relaxed).saturating_add(*n) > QUEUE_LENGTH {
                    return Err(EAGAIN);
                }
            }
        }
        let mut woken = [false; ENGINES * STREAMS];
        while let Some(job) = batch.pop_front() {
            let (e, s) = job.slot;
            let i = e * STREAMS + s;
            let (Some(engine), Some(Some(w))) = (qman.engine(e), self.threads.get(i)) else {
                // Every queue of the batch has a worker (above).
                continue;
            };
            if let Some(n) = engine.streams.get(s) {
                n.add(1, Relaxed);
            }
            w.body().feed.lock().jobs.push_back(job);
            if let Some(flag) = woken.get_mut(i) {
                *flag = true;
            }
        }
        for (w, _) in self.threads.iter().zip(woken).filter(|(_, w)| *w) {
            if let Some(w) = w {
                w.body().more.notify_all();
            }
        }
        Ok(())
    }

    /// Tell every worker to end once its queue is empty, and wait until
    /// each has (the context's CSs have ended: their queues are empty).
    /// Must not be called from a worker. Sleeps; O(engines).
    pub(crate) fn stop_all(&mut self) {
        for w in self.threads.iter().flatten() {
            w.body().feed.lock().stop = true;
            w.body().more.notify_all();
        }
        for slot in self.threads.iter_mut() {
            if let Some(w) = slot.take() {
                w.stop();
            }
        }
        // The streams' jobs waited for what they handed: the lower CPs'
        // queues are empty.
        for l in self.lowers.iter().flatten() {
            l.body().stop();
        }
        for slot in self.lowers.iter_mut() {
            if let Some(l) = slot.take() {
                l.stop();
            }
        }
    }

    /// How many workers the context has (tests). O(engines).
    #[cfg(CONFIG_KUNIT)]
    pub(crate) fn count(&self) -> usize {
        self.threads.iter().flatten().count()
    }
}

impl Drop for Workers {
    fn drop(&mut self) {
        self.stop_all();
    }
}
