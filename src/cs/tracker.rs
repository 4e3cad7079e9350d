// SPDX-License-Identifier: GPL-2.0

//! One context's command submissions in flight (upstream: the CS part of
//! `struct hl_ctx` and `struct hl_cs`, common/command_submission.c).
//!
//! - **Sequence numbers** start at 1 per context (`cs_sequence`). A CS
//!   gets its number before its chunks are validated, so a CS refused by
//!   validation still uses one, and its fence is done at once with
//!   [`CsStatus::NotSubmitted`] (upstream's rollback).
//! - **The window.** The fences of the last [`MAX_PENDING_CS`] sequences
//!   are kept by `seq % 64` (`cs_pending`); a new CS whose slot still holds
//!   an unfinished fence is refused with `EAGAIN` (`max_pending_cs`), so at
//!   most 64 CSs are in flight. WAIT_CS on an older sequence finds it gone
//!   (or its kept outcome, [`OutcomeStore`]); on a future one, `EINVAL`.
//! - **A CS in flight** ([`Flight`]) owns its jobs' completion: each job
//!   that ends reports to it ([`EngineSink::event`]); the first fault or bad
//!   packet aborts the CS (the jobs still running on other engines stop at
//!   their next check) and is captured for INFO; when the last job ends the
//!   CS is finished: removed from the tracker, its outcome kept if it asked
//!   for a timestamp, its fence done.
//! - **Timeout** (upstream's TDR): the timer runs for the oldest CS in
//!   flight only, from when it became the oldest (its submission, or the
//!   end of the one before), as upstream arms it for the first CS of the
//!   mirror list. The timer is the driver's ([`Watchdog`]: the context's
//!   watchdog thread): when it expires the CS is marked TIMEDOUT, the first
//!   timeout captured, and its queues halted and reset through the engine
//!   boundary ([`AsidQueues::halt`]); the CS ends TIMEDOUT when its jobs
//!   have reported their halt, so its fence never completes while an engine
//!   still works for it. The engines see no deadline. The device stays
//!   usable (upstream resets it unless `reset_on_lockup=0`); a CS queued
//!   behind the timed-out one on one of its queues ends ABORTED (the halt
//!   resets the queue, as upstream's reset ends every CS).
//! - **Run-time cap** (`cs_max_run_s`, [`crate::ffi::kthread::cs_max_run_s`]):
//!   besides its timeout, a CS ends TIMEDOUT (the same path, captured and
//!   logged) once it has been in flight that long from its submission,
//!   whether or not it is the oldest and whatever `timeout_locked` says, so
//!   no CS keeps the engines busy for longer.
//! - **Close** ([`ContextCs::stop_and_drain`]): every CS in flight is
//!   aborted and every queue of the context's ASID halted, and the close
//!   waits until every CS in flight finished (its jobs reported), then
//!   until the queues are quiescent ([`AsidQueues::quiesce`]: the engine
//!   threads ended), before the context's memory can go.
//! - **Progress for the VM** ([`crate::vm::va_quarantine`]): the last
//!   sequence given and the lowest one not finished are published to the
//!   context's VM, which keeps an unmapped VA out of reuse until the CSs
//!   that could still reach it have ended.
//!
//! **The TDR timer** (upstream `cs_timedout`), driver-side: a watchdog
//! thread per context (`hlrs-tdr-<pid>`), made with the context's first CS
//! and ended by its close ([`ContextCs::stop_and_drain`]).
//!
//! It sleeps (with the tracker's lock released) until the earliest
//! deadline of the context's CSs in flight: the timer of the oldest one
//! and the run-time cap of each ([`Flight::deadline`]). A CS launched or
//! armed with an earlier deadline wakes it (`ContextCs::tick`). When a
//! deadline passes it times the CS out ([`Flight::time_out`]): TIMEDOUT,
//! captured, logged, and its queues halted and reset through the engine
//! boundary; the engines never check a deadline.
//!
//! **Why a thread and not a kernel timer or delayed work.** What a timeout
//! does sleeps (the captured-errors and notifier mutexes, the log), so a
//! timer callback would have to hand it to process context anyway; the
//! kernel crate of 7.3 has no delayed work with a cancel this module could
//! use without new FFI, and the context already owns kernel threads (its
//! engines') made the same way ([`KThread`]). The thread costs one wake-up
//! per CS whose deadline is earlier than the one it sleeps for (the first
//! CS of an idle context), none for the CSs behind it.
//!
//! The watchdog takes `ContextCs::track` alone and releases
//! it before a CS times out (which takes `DeviceCs::captured` and
//! `DeviceCs::notifier`, and halts with no lock).
//!
//! Lock order (the crate root's table): `ContextCs::track` is taken alone or
//! before the engines' submission locks (a CS is queued under it, so the
//! engines see a context's CSs in sequence order); never inside an engine's
//! locks: jobs report with none held. `ContextCs::restore` and
//! `ContextCs::watch` are taken before `track` (the engine and watchdog
//! threads are created with `track` free, so CSs ending meanwhile are not
//! held up). A halt takes no lock; the watchdog takes `track` alone.

use crate::{
    cs::{
        capture::HW_UNSCRAMBLED_BITS_MASK,
        device_cs::{CsCounters, DeviceCs, DropKind},
        fence::{completion_time, CsStatus, Fence, Finished},
        outcome::OutcomeStore,
        sync_objects::SyncState,
    },
    ffi::{
        clock::ktime_ns,
        kthread::{KThread, ThreadBody},
    },
    hw::{
        backend::MmuKind,
        engines::{AsidQueues, EngineEvent, EngineFault, EngineJob, EngineSink},
    },
    small_array::SmallArray,
    uapi::HlCsChunk,
    vm::context_vm::ContextVm,
};
use kernel::{
    alloc::{KVVec, KVec},
    new_condvar, new_mutex,
    prelude::*,
    sync::{
        atomic::{Acquire, Atomic, Full, Relaxed},
        Arc, CondVar, Mutex, MutexGuard, SetOnce,
    },
    time::{msecs_to_jiffies, Jiffies},
};

/// CSs in flight per context (`GAUDI2_MAX_PENDING_CS`).
pub(crate) const MAX_PENDING_CS: u64 = 64;
const SLOTS: usize = MAX_PENDING_CS as usize;

/// The slot of `seq` in the window.
fn slot(seq: u64) -> usize {
    (seq % MAX_PENDING_CS) as usize
}

/// The tracker's state, under [`ContextCs::track`].
pub(crate) struct Track {
    /// The next sequence number (`cs_sequence`), from 1.
    next_seq: u64,
    /// The fences of the last 64 sequences, by `seq % 64` (`cs_pending`).
    fences: [Option<Arc<Fence>>; SLOTS],
    /// The CSs submitted and not finished, by `seq % 64`.
    flights: [Option<Arc<Flight>>; SLOTS],
    /// How many.
    in_flight: u32,
    /// The CS whose timer runs.
    armed: Option<u64>,
    /// Outcomes kept for late waits.
    outcomes: OutcomeStore,
    /// The deadline the watchdog sleeps until (ktime ns; `i64::MAX`: none).
    pub(crate) tdr_next: i64,
    /// The watchdog must end.
    pub(crate) tdr_stop: bool,
}

/// The command submissions of one context.
#[pin_data]
pub(crate) struct ContextCs {
    /// The device side.
    pub(crate) dev: Arc<DeviceCs>,
    /// The context's VM (its ASID; its mappings for a fault report).
    pub(crate) vm: Arc<ContextVm>,
    /// The context's drops (`ctx->cs_counters`).
    pub(crate) counters: CsCounters,
    /// The context is closing (or the device needs a reset): every job stops.
    stopping: Atomic<bool>,
    #[pin]
    track: Mutex<Track>,
    /// Notified when the last CS in flight finishes.
    #[pin]
    idle: CondVar,
    /// Serialises restore phases (upstream `restore_phase_mutex`).
    #[pin]
    pub(crate) restore: Mutex<()>,
    /// The context's queues (its ASID's); `None` on a device without
    /// engines the driver drives.
    pub(crate) queues: Option<Arc<dyn AsidQueues>>,
    /// The context's watchdog thread (the TDR), made with its first CS
    /// (taken before `track`).
    #[pin]
    pub(crate) watch: Mutex<Option<KThread<Watchdog>>>,
    /// Wakes the watchdog (with `track`): an earlier deadline, or its end.
    #[pin]
    pub(crate) tick: CondVar,
    /// The sync streams of SIGNAL/WAIT CSs (taken before `watch` and
    /// `track`).
    #[pin]
    pub(crate) sync: Mutex<SyncState>,
}

impl ContextCs {
    /// The CS state of a new context on `vm`. O(1) (allocates the outcome store).
    pub(crate) fn new(dev: Arc<DeviceCs>, vm: Arc<ContextVm>) -> Result<Arc<Self>> {
        let outcomes = OutcomeStore::new()?;
        let queues = match dev.engines() {
            Ok(e) => Some(e.open(vm.asid)?),
            Err(_) => None,
        };
        Arc::pin_init(
            pin_init!(Self {
                dev,
                vm,
                counters: CsCounters::new(),
                stopping: Atomic::new(false),
                track <- new_mutex!(Track {
                    next_seq: 1,
                    fences: [const { None }; SLOTS],
                    flights: [const { None }; SLOTS],
                    in_flight: 0,
                    armed: None,
                    outcomes,
                    tdr_next: i64::MAX,
                    tdr_stop: false,
                }),
                idle <- new_condvar!("ContextCs::idle"),
                restore <- new_mutex!(()),
                queues,
                watch <- new_mutex!(None),
                tick <- new_condvar!("ContextCs::tick"),
                sync <- new_mutex!(SyncState::default()),
            }),
            GFP_KERNEL,
        )
    }

    /// The context's ASID. O(1).
    pub(crate) fn asid(&self) -> u32 {
        self.vm.asid
    }

    /// Count a dropped CS in the context's and the device's counters. O(1).
    pub(crate) fn count_drop(&self, kind: DropKind) {
        self.counters.count(kind);
        self.dev.counters.count(kind);
    }

    /// Lock the tracker (submissions hold it until their jobs are queued). O(1).
    pub(crate) fn lock(&self) -> MutexGuard<'_, Track> {
        self.track.lock()
    }

    /// Whether the context's jobs are being stopped. O(1).
    pub(crate) fn stopping(&self) -> bool {
        self.stopping.load(Relaxed)
    }

    /// Give the next sequence number to a new CS (`allocate_cs`): `EAGAIN`
    /// (counted) while the CS 64 sequences back is unfinished. The CS is
    /// not in flight yet: [`Self::launch`] or [`Flight::reject`] follows.
    /// O(1).
    pub(crate) fn allocate(
        self: &Arc<Self>,
        track: &mut Track,
        timestamp: bool,
        (timeout_ms, cap_ms): (Option<u64>, Option<u64>),
    ) -> Result<Arc<Flight>> {
        let seq = track.next_seq;
        let at = slot(seq);
        let busy = track
            .fences
            .get(at)
            .and_then(Option::as_ref)
            .is_some_and(|f| f.poll().is_none());
        if busy {
            self.count_drop(DropKind::MaxCsInFlight);
            return Err(EAGAIN);
        }
        // The slot's fence (of CS seq - 64, finished) is reused if no
        // waiter holds it.
        let fence = match track
            .fences
            .get_mut(at)
            .and_then(Option::take)
            .and_then(Arc::into_unique_or_drop)
        {
            Some(old) => Fence::reuse(old, seq),
            None => Fence::new(seq).inspect_err(|_| self.count_drop(DropKind::OutOfMem))?,
        };
        let flight = Arc::new(
            Flight {
                seq,
                fence: fence.clone(),
                ctx: self.clone(),
                jobs_left: Atomic::new(0),
                state: Atomic::new(RUNNING),
                deadline_ns: Atomic::new(0),
                timeout_ms,
                started_ns: Atomic::new(0),
                cap_ns: cap_ms.map_or(0, ms_to_ns),
                timestamp,
                queues: SetOnce::new(),
            },
            GFP_KERNEL,
        )
        .inspect_err(|_| self.count_drop(DropKind::OutOfMem))?;
        if let Some(f) = track.fences.get_mut(at) {
            *f = Some(fence);
        }
        track.next_seq = seq.saturating_add(1);
        // Not finished from here on, launched or not: the VM holds what it
        // unmaps from now for it.
        self.vm.va_quarantine.numbered(seq);
        Ok(flight)
    }

    /// The oldest CS in flight. O(64).
    pub(crate) fn oldest(track: &Track) -> Option<u64> {
        track.flights.iter().flatten().map(|f| f.seq).min()
    }

    /// Tell the VM the lowest sequence not finished, after a CS left the
    /// tracker without being launched or the oldest in flight retired.
    /// O(64).
    pub(crate) fn publish_oldest(&self, track: &Track) {
        self.vm.va_quarantine.set_oldest(Self::oldest(track));
    }

    /// Put `flight` in flight, and start its timer if it is the oldest;
    /// before its jobs are queued, so that they see the timer. O(1).
    pub(crate) fn launch(&self, track: &mut Track, flight: &Arc<Flight>) {
        if let Some(f) = track.flights.get_mut(slot(flight.seq)) {
            *f = Some(flight.clone());
        }
        track.in_flight = track.in_flight.saturating_add(1);
        flight.started_ns.store(ktime_ns().max(1), Relaxed);
        if track.armed.is_none() {
            self.arm(track, flight);
        }
        self.wake_watchdog(track, flight);
    }

    /// Put `flight` in flight (timed before an engine can take a job) and
    /// queue its `jobs` (`hl_hw_queue_schedule_cs`): `EPERM` (counted) if
    /// the device is not operational; if they cannot all be queued, undone
    /// and the drop counted (`EAGAIN`: a full queue). O(jobs).
    pub(crate) fn launch_jobs(
        &self,
        track: &mut Track,
        flight: &Arc<Flight>,
        queues: &dyn AsidQueues,
        jobs: &mut KVec<EngineJob>,
    ) -> Result {
        if !self.dev.operational() {
            self.count_drop(DropKind::DeviceInReset);
            return Err(EPERM);
        }
        self.launch(track, flight);
        queues.submit(jobs).inspect_err(|e| {
            self.unlaunch(track, flight);
            match *e {
                EAGAIN => self.count_drop(DropKind::QueueFull),
                ENOMEM => self.count_drop(DropKind::OutOfMem),
                _ => {}
            }
        })
    }

    /// Wake the watchdog if `flight`'s deadline comes before the one it
    /// sleeps until. O(1).
    fn wake_watchdog(&self, track: &mut Track, flight: &Flight) {
        if flight.deadline().is_some_and(|d| d < track.tdr_next) {
            track.tdr_next = i64::MIN;
            self.tick.notify_all();
        }
    }

    /// Undo [`Self::launch`] for a CS whose jobs could not be queued (none
    /// ran, and the tracker stayed locked). O(1).
    pub(crate) fn unlaunch(&self, track: &mut Track, flight: &Flight) {
        if let Some(f) = track.flights.get_mut(slot(flight.seq)) {
            *f = None;
        }
        track.in_flight = track.in_flight.saturating_sub(1);
        if track.armed == Some(flight.seq) {
            track.armed = None;
        }
    }

    /// Start `flight`'s timer, if it has one and the device has a timeout.
    fn arm(&self, track: &mut Track, flight: &Flight) {
        track.armed = Some(flight.seq);
        if self.dev.timeout_ms().is_none() {
            return;
        }
        if let Some(ms) = flight.timeout_ms {
            let ns = ms_to_ns(ms);
            flight
                .deadline_ns
                .store(ktime_ns().saturating_add(ns).max(1), Relaxed);
            self.wake_watchdog(track, flight);
        }
    }

    /// A CS finished: out of the tracker, its outcome kept if asked, the
    /// next oldest timed. O(64).
    fn retire(&self, flight: &Flight, finished: Finished) {
        let mut track = self.track.lock();
        if let Some(f) = track.flights.get_mut(slot(flight.seq)) {
            if f.as_ref().is_some_and(|f| f.seq == flight.seq) {
                *f = None;
            }
        }
        track.in_flight = track.in_flight.saturating_sub(1);
        if flight.timestamp {
            track.outcomes.push(flight.seq, finished);
        }
        let oldest = track
            .flights
            .iter()
            .flatten()
            .min_by_key(|f| f.seq)
            .cloned();
        // Whether or not it was the armed (timed) one: CSs end out of order
        // (one armed after an unlaunched one may be younger than another in
        // flight), and a VA held for this CS must be given back once every
        // CS up to it has ended.
        self.vm
            .va_quarantine
            .set_oldest(oldest.as_ref().map(|f| f.seq));
        if track.armed == Some(flight.seq) {
            track.armed = None;
            if let Some(next) = oldest {
                self.arm(&mut track, &next);
            }
        }
        if track.in_flight == 0 {
            self.idle.notify_all();
        }
    }

    /// The fence of `seq` (`hl_ctx_get_fence`): `EINVAL` for a sequence not
    /// given yet, `None` for one that left the window. O(1).
    pub(crate) fn fence(&self, seq: u64) -> Result<Option<Arc<Fence>>> {
        let track = self.track.lock();
        if seq >= track.next_seq {
            return Err(EINVAL);
        }
        if seq.saturating_add(MAX_PENDING_CS) < track.next_seq {
            return Ok(None);
        }
        let f = track.fences.get(slot(seq)).and_then(Option::as_ref);
        Ok(f.filter(|f| f.seq() == seq).cloned())
    }

    /// Take the kept outcome of `seq` (`hl_pop_cs_outcome`). O(256).
    pub(crate) fn pop_outcome(&self, seq: u64) -> Option<Finished> {
        self.track.lock().outcomes.pop(seq)
    }

    /// The CSs in flight, oldest first (debugfs `command_submission` and
    /// `command_submission_jobs`): references taken under the tracker's
    /// lock into room reserved before it. O(64).
    pub(crate) fn flights(&self) -> Result<KVVec<Arc<Flight>>> {
        let mut all = KVVec::with_capacity(SLOTS, GFP_KERNEL)?;
        {
            let track = self.track.lock();
            for f in track.flights.iter().flatten() {
                // Room for every slot was reserved.
                let _ = all.push_within_capacity(f.clone());
            }
        }
        crate::sort::sort_by_key(&mut all, |f| f.seq);
        Ok(all)
    }

    /// CSs in flight (tests). O(1).
    #[cfg(CONFIG_KUNIT)]
    pub(crate) fn in_flight(&self) -> u32 {
        self.track.lock().in_flight
    }

    /// Stop every job of the context: no CS is taken any more, the CSs in
    /// flight end ABORTED, every queue of the ASID is halted. Takes `track`
    /// (so a submission that saw the context running has queued its jobs
    /// before the halt); never waits for an engine. O(64).
    pub(crate) fn abort_all(&self) {
        {
            let track = self.track.lock();
            self.stopping.store(true, Relaxed);
            for f in track.flights.iter().flatten() {
                f.set_state(ABORTED);
            }
        }
        if let Some(q) = &self.queues {
            q.halt(None);
        }
    }

    /// Stop every job of the context and wait (not interruptibly) until no
    /// CS is in flight and the queues are quiescent (close, teardown):
    /// afterwards no engine touches the context's memory. Idempotent. O(64)
    /// besides the wait, which lasts at most a DMA chunk or a packet per
    /// engine.
    pub(crate) fn stop_and_drain(&self) {
        self.abort_all();
        let mut track = self.track.lock();
        while track.in_flight > 0 {
            self.idle.wait(&mut track);
        }
        track.tdr_stop = true;
        self.tick.notify_all();
        drop(track);
        // No job is left: the engine threads end (a submission that took
        // the lock before sees `stopping` after it, and makes none).
        if let Some(q) = &self.queues {
            q.quiesce();
        }
        if let Some(w) = self.watch.lock().take() {
            w.stop();
        }
        // The file's eventfd goes with it.
        self.dev.release_notifier();
    }

    /// Engine threads the context holds (tests). O(engines).
    #[cfg(CONFIG_KUNIT)]
    pub(crate) fn engine_threads(&self) -> usize {
        self.queues.as_ref().map_or(0, |q| q.threads())
    }

    /// The CS in flight whose deadline comes first, and the deadline
    /// (the watchdog). O(64).
    pub(crate) fn next_deadline(track: &Track) -> Option<(i64, Arc<Flight>)> {
        track
            .flights
            .iter()
            .flatten()
            .filter_map(|f| Some((f.deadline()?, f)))
            .min_by_key(|(d, _)| *d)
            .map(|(d, f)| (d, f.clone()))
    }
}

const RUNNING: u32 = 0;
const ABORTED: u32 = 1;
const TIMED_OUT: u32 = 2;

/// One CS from its sequence number to its end (upstream `struct hl_cs`):
/// the owner of its jobs.
pub(crate) struct Flight {
    /// Its sequence number.
    pub(crate) seq: u64,
    /// Its fence.
    pub(crate) fence: Arc<Fence>,
    ctx: Arc<ContextCs>,
    /// Jobs queued and not ended.
    jobs_left: Atomic<u32>,
    /// RUNNING, ABORTED or TIMED_OUT (the first wins).
    state: Atomic<u32>,
    /// When its timer expires (ktime ns); 0: not armed.
    deadline_ns: Atomic<i64>,
    /// Its timeout in ms (`None`: none).
    timeout_ms: Option<u64>,
    /// When it was launched (ktime ns; 0: not yet), for the cap.
    started_ns: Atomic<i64>,
    /// The longest it may be in flight from then (ns; 0: no cap,
    /// `cs_max_run_s`).
    cap_ns: i64,
    /// It asked for a completion time.
    timestamp: bool,
    /// Its jobs' queues, job `i + 1` on `queues[i]` (debugfs); set once
    /// with the jobs.
    queues: SetOnce<SmallArray<u32, JOBS_INLINE>>,
}

/// Jobs of a CS whose queues are kept without an allocation (as many as
/// the chunks a CS reads without one, `submit::INLINE_CHUNKS`).
const JOBS_INLINE: usize = 4;

impl Flight {
    /// The CS will have a job per chunk of `chunks`: set before they are
    /// queued. `ENOMEM` when the queues of more than [`JOBS_INLINE`] jobs
    /// cannot be kept. O(chunks).
    pub(crate) fn expect_jobs(&self, chunks: &[HlCsChunk]) -> Result {
        let mut queues = SmallArray::with_capacity(chunks.len(), 0, GFP_KERNEL)?;
        for c in chunks {
            // Room for every chunk was made.
            let _ = queues.push_within_capacity(c.queue_index);
        }
        self.queues.populate(queues);
        // At most HL_MAX_JOBS_PER_CS chunks (the caller's check).
        self.jobs_left
            .store(u32::try_from(chunks.len()).unwrap_or(u32::MAX), Relaxed);
        Ok(())
    }

    /// Its jobs not ended yet. O(1).
    pub(crate) fn jobs_left(&self) -> u32 {
        self.jobs_left.load(Relaxed)
    }

    /// Its jobs' queues, in job order (empty before [`Self::expect_jobs`]). O(1).
    pub(crate) fn queues(&self) -> &[u32] {
        self.queues.as_ref().map_or(&[], |q| q.as_slice())
    }

    /// Its context's ASID. O(1).
    pub(crate) fn asid(&self) -> u32 {
        self.ctx.asid()
    }

    /// The CS was refused after it got its number: its fence is done at
    /// once, as never submitted (upstream `cs_rollback`). O(waiters).
    pub(crate) fn reject(&self) {
        self.fence.signal(Finished {
            status: CsStatus::NotSubmitted,
            timestamp_ns: 0,
        });
    }

    fn set_state(&self, to: u32) -> bool {
        self.state.cmpxchg(RUNNING, to, Full).is_ok()
    }

    /// The last job ended: retire and signal. O(64 + waiters).
    fn finish(&self) {
        let status = match self.state.load(Acquire) {
            RUNNING => CsStatus::Ok,
            TIMED_OUT => CsStatus::TimedOut,
            _ => CsStatus::Aborted,
        };
        let finished = Finished {
            status,
            timestamp_ns: completion_time(self.timestamp),
        };
        self.ctx.retire(self, finished);
        self.fence.signal(finished);
    }

    /// Report a fault of one of its jobs, as upstream's event handler logs it.
    fn fault(&self, engine: u16, f: &EngineFault) {
        let asid = self.ctx.asid();
        let log = self.ctx.dev.may_log();
        match *f {
            _ if !log => {}
            // As upstream's `gaudi2_handle_page_error` logs them.
            EngineFault::Page {
                mmu: MmuKind::Host,
                va,
                ..
            } => hl_err!(
                "PMMU page fault on va {:#x} (engine {}, ASID {}, CS {})\n",
                va,
                engine,
                asid,
                self.seq
            ),
            EngineFault::Page { va, .. } => {
                let base = va & HW_UNSCRAMBLED_BITS_MASK;
                hl_err!(
                    "HMMU page fault on va range {:#x} - {:#x} (engine {}, ASID {}, CS {})\n",
                    base,
                    base | !HW_UNSCRAMBLED_BITS_MASK,
                    engine,
                    asid,
                    self.seq
                )
            }
            _ => hl_err!(
                "engine {} access error {:?} (ASID {}, CS {})\n",
                engine,
                f,
                asid,
                self.seq
            ),
        }
        if self.ctx.dev.record_fault(f, &self.ctx.vm) {
            self.ctx.abort_all();
        }
    }
}

impl Flight {
    /// When it times out (its timer, if armed) or reaches its cap, whichever
    /// comes first (ktime ns); `None` if neither, or if it is no longer
    /// running. O(1).
    pub(crate) fn deadline(&self) -> Option<i64> {
        if self.state.load(Relaxed) != RUNNING {
            return None;
        }
        let timer = Some(self.deadline_ns.load(Relaxed)).filter(|&d| d != 0);
        let started = self.started_ns.load(Relaxed);
        let cap = (self.cap_ns != 0 && started != 0).then(|| started.saturating_add(self.cap_ns));
        match (timer, cap) {
            (Some(t), Some(c)) => Some(t.min(c)),
            (t, c) => t.or(c),
        }
    }

    /// Its deadline passed at `now` (the watchdog): mark it TIMEDOUT,
    /// capture and log the timeout, and halt and reset its queues; it ends
    /// once its jobs reported. Nothing if it ended or was aborted
    /// meanwhile. O(jobs).
    pub(crate) fn time_out(&self, now: i64) {
        let timer = self.deadline_ns.load(Relaxed);
        if !self.set_state(TIMED_OUT) {
            return;
        }
        let timed_out = timer != 0 && now >= timer;
        if self.ctx.dev.may_log() {
            let ms = match (timed_out, self.timeout_ms) {
                (true, Some(ms)) => ms,
                _ => (self.cap_ns / 1_000_000) as u64,
            };
            let why = if timed_out { "" } else { " (cs_max_run_s)" };
            hl_err!(
                "Command submission {} has not finished in {} ms!{}\n",
                self.seq,
                ms,
                why
            );
        }
        self.ctx.dev.record_timeout(self.seq);
        if let Some(q) = &self.ctx.queues {
            q.halt(Some(&mut self.queues().iter().copied()));
        }
    }
}

impl Flight {
    /// Job `tag` failed: the CS is aborted, and its other jobs still queued
    /// or running stop (their queues are halted and reset). O(jobs).
    fn abort_others(&self, tag: u64) {
        if !self.set_state(ABORTED) || self.jobs_left.load(Acquire) <= 1 {
            return;
        }
        if let Some(q) = &self.ctx.queues {
            let mut others = self
                .queues()
                .iter()
                .enumerate()
                .filter(|(i, _)| *i as u64 != tag)
                .map(|(_, q)| *q);
            q.halt(Some(&mut others));
        }
    }
}

/// Milliseconds as ktime nanoseconds, saturated.
fn ms_to_ns(ms: u64) -> i64 {
    i64::try_from(ms.saturating_mul(1_000_000)).unwrap_or(i64::MAX)
}

impl EngineSink for Flight {
    fn event(&self, engine: u16, tag: u64, event: EngineEvent) {
        match event {
            EngineEvent::Done => {}
            // A halt of a queue this CS did not time out on: a CS behind a
            // timed-out one, or the context's close.
            EngineEvent::Halted => {
                self.set_state(ABORTED);
            }
            EngineEvent::Fault(f) => {
                self.abort_others(tag);
                self.fault(engine, &f);
            }
            EngineEvent::BadPacket { addr, error } => {
                self.abort_others(tag);
                if self.ctx.dev.may_log() {
                    hl_err!(
                        "engine {}: packet at {:#x} refused ({:?}), CS {} aborted\n",
                        engine,
                        addr,
                        error,
                        self.seq
                    );
                }
                self.ctx.dev.record_bad_packet(addr, engine, &error);
            }
        }
        // Full: the states other jobs set are seen by the last one.
        if self.jobs_left.fetch_sub(1, Full) == 1 {
            self.finish();
        }
    }
}

/// What the watchdog thread runs.
pub(crate) struct Watchdog {
    ctx: Arc<ContextCs>,
}

impl Watchdog {
    /// The watchdog of `ctx` (the thread is the caller's to start). O(1).
    pub(crate) fn new(ctx: Arc<ContextCs>) -> Result<Arc<Self>> {
        Ok(Arc::new(Self { ctx }, GFP_KERNEL)?)
    }
}

/// Jiffies until `at` from `now` (at least one). O(1).
fn jiffies_until(at: i64, now: i64) -> Jiffies {
    let ms = at.saturating_sub(now).saturating_add(999_999) / 1_000_000;
    u32::try_from(ms.max(1)).map_or(Jiffies::MAX, msecs_to_jiffies)
}

impl ThreadBody for Watchdog {
    /// Time the context's CSs out as their deadlines pass, until the close
    /// tells it to end. O(64) per wake-up.
    fn run(&self) {
        let ctx = &self.ctx;
        let mut track = ctx.lock();
        loop {
            if track.tdr_stop {
                return;
            }
            let now = ktime_ns();
            match ContextCs::next_deadline(&track) {
                Some((at, f)) if at <= now => {
                    drop(track);
                    f.time_out(now);
                    drop(f);
                    track = ctx.lock();
                }
                Some((at, _)) => {
                    track.tdr_next = at;
                    let _ = ctx
                        .tick
                        .wait_interruptible_timeout(&mut track, jiffies_until(at, now));
                }
                None => {
                    track.tdr_next = i64::MAX;
                    let _ = ctx.tick.wait_interruptible(&mut track);
                }
            }
        }
    }
}

/// Make the queues `chunks` name ready (before the CS gets its number;
/// chunks naming no engine are refused later), and start the context's
/// watchdog if it has none (`watch`, released before the return). `ENOMEM`
/// (counted), `EINTR`. Sleeps when it creates a thread; O(chunks) otherwise.
pub(crate) fn start_threads(
    ctx: &Arc<ContextCs>,
    queues: &Arc<dyn AsidQueues>,
    mut watch: MutexGuard<'_, Option<KThread<Watchdog>>>,
    chunks: &[HlCsChunk],
) -> Result {
    let count = |e: &Error| {
        if *e == ENOMEM {
            ctx.count_drop(DropKind::OutOfMem);
        }
    };
    if watch.is_none() {
        let pid = kernel::current!().pid();
        let name =
            kernel::str::CString::try_from_fmt(fmt!("hlrs-tdr-{}", pid)).inspect_err(count)?;
        let body = Watchdog::new(ctx.clone()).inspect_err(count)?;
        *watch = Some(KThread::spawn(&name, body, false).inspect_err(count)?);
    }
    drop(watch);
    queues
        .prepare(&mut chunks.iter().map(|c| c.queue_index))
        .inspect_err(count)
}

#[kunit_tests(hlrs_tdr)]
mod tests {
    use super::*;

    #[test]
    fn sleeps_round_up_to_a_jiffy_at_least() {
        assert_eq!(jiffies_until(0, 0), msecs_to_jiffies(1));
        assert_eq!(jiffies_until(1, 0), msecs_to_jiffies(1));
        assert_eq!(jiffies_until(1_000_001, 0), msecs_to_jiffies(2));
        assert_eq!(jiffies_until(i64::MAX, 0), Jiffies::MAX);
        assert_eq!(jiffies_until(-5, 0), msecs_to_jiffies(1));
    }
}
