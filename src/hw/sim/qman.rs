// SPDX-License-Identifier: GPL-2.0

//! The queues and engines of the simulated Gaudi2 that run user command
//! buffers: its DMA engines, each behind a QMAN of four streams.
//!
//! **Queues are streams, engines execute.** A queue id (upstream
//! `GAUDI2_QUEUE_ID_*`, `include/uapi/drm/habanalabs_accel.h`) is stream
//! `id % 4` of one engine's QMAN. The simulation enables the queues a
//! Gaudi2 without binning enables for a user's DMA (`gaudi2_is_queue_enabled`,
//! gaudi2/gaudi2.c:6866): PDMA_0_0, PDMA_0_1 and PDMA_1_0 (the PDMA streams
//! the driver does not keep for itself), and the four streams of each of
//! the eight DCORE EDMAs (HW_IP_INFO's `edma_enabled_mask` 0xFF), and the
//! MME and TPC QMANs' streams (no compute engine behind them: their
//! packets run as on any QMAN, `LIN_DMA` refused). The rotator and NIC
//! queues exist in the uAPI but have no engine here: they count as
//! disabled.
//!
//! **Execution.** Each stream is an in-order executor, as a QMAN's upper
//! CP is: the jobs of a context for one queue go to that context's worker
//! thread for the queue ([`worker`]), which runs them one after the other,
//! so queues (the four streams of one engine among them) run in parallel
//! with each other and with the submitter, and a `FENCE` holds its own
//! stream only. A job is executed by the command processor ([`super::cp`])
//! with the stream's buffers ([`Engine::run`]) and reported to its owner
//! with its sink ([`crate::hw::engines::EngineSink`]), with no lock of the
//! engine held; a job halted ([`queues`]) stops at [`JobOwner::stop`],
//! polled between packets and DMA chunks and while a `FENCE` sleeps. An
//! engine is busy (HW_IDLE) while one of its streams runs a job or has one
//! queued.
//!
//! **Threads of the context.** The workers are kernel threads created on a
//! context's first job for each queue ([`crate::ffi::kthread`]), each with
//! its buffers (68 KiB), ending when the context closes (see [`worker`] on
//! why they are not moved into the submitter's cgroups on 7.3); each
//! engine used also gets its lower CP's thread ([`lower_cp`]).
//!
//! **Bounds.** Like a QMAN's PQ of `HL_QUEUE_LENGTH` entries, a stream
//! takes at most [`QUEUE_LENGTH`] jobs that have not ended; a batch that
//! would overflow one is refused whole with `EAGAIN` ([`worker::Workers::submit`]).
//!
//! **Lifetime.** A worker holds a reference to its engine; the context's
//! close stops its workers (waiting for their ends) after its last CS
//! ended, so no engine code runs for a closed context, nor after the
//! unload (which waits for every file's release).
//!
//! Lock order (the crate root's table): `Qman::submit` then a worker's
//! `Feed` (`Engine::fifo` in the table); a worker's `scratch` is held
//! across a job's execution (and so over the sync manager's, the STLB's
//! and the memories' locks), never with the other two, and released before
//! the job waits for the CBs it handed to its QMAN's lower CP
//! ([`lower_cp`]), its last reschedule point and [`JobOwner::done`].

use super::{
    cp::{self, LowerCp, Scratch},
    cpu_budget::{CpuBudget, Pace},
    engine_mem::EngineAccess,
    job::{JobEnd, JobOwner, Stop},
    SimGaudi2,
};
use crate::{
    hw::engines::{EngineEvent, EngineJob, EngineSink},
    uapi::*,
};
use kernel::{
    list::{impl_list_arc_safe, impl_list_item, ListArc, ListLinks},
    new_mutex,
    prelude::*,
    sync::{
        atomic::{Atomic, Relaxed},
        Arc, Mutex,
    },
};

pub(crate) mod lower_cp;
pub(crate) mod queues;
pub(crate) mod worker;

/// Jobs a stream takes that have not ended (upstream `HL_QUEUE_LENGTH`).
pub(crate) const QUEUE_LENGTH: u32 = 4096;

#[cfg(CONFIG_KUNIT)]
use crate::hw::engines::EDMA_QUEUES;
#[cfg(CONFIG_KUNIT)]
use crate::hw::engines::ENGINE_IDS;
pub(crate) use crate::hw::engines::{engine_has_dma, engine_id, queue_engine, ENGINES, STREAMS};

/// One job on its way to an engine: a CB, the ASID it runs with, and the
/// driver's sink its end is reported to.
#[pin_data]
pub(crate) struct HwJob {
    /// The engine index and stream of its queue.
    pub(crate) slot: (usize, usize),
    /// The ASID the queue runs with.
    pub(crate) asid: u32,
    /// Device address of the CB.
    pub(crate) cb: u64,
    /// Bytes of packets in the CB.
    pub(crate) cb_size: u32,
    /// The driver's completion tag.
    tag: u64,
    /// Where its end is reported.
    sink: Arc<dyn EngineSink>,
    /// The halt epochs of its context's queues, and its queue's epoch when
    /// it was queued: a later epoch halts it.
    halts: Arc<queues::HaltEpochs>,
    epoch: u32,
    #[pin]
    links: ListLinks,
}

impl_list_arc_safe! {
    impl ListArcSafe<0> for HwJob { untracked; }
}
impl_list_item! {
    impl ListItem<0> for HwJob { using ListLinks { self.links }; }
}

impl HwJob {
    /// The simulation's job of `job`, running with `asid`, halted by a
    /// later epoch of `halts`; `EINVAL` for a queue the simulation does not
    /// enable, `ENOMEM`. O(1).
    pub(crate) fn new(
        job: &EngineJob,
        asid: u32,
        halts: &Arc<queues::HaltEpochs>,
    ) -> Result<ListArc<Self>> {
        let slot = queue_engine(job.queue).ok_or(EINVAL)?;
        let epoch = halts.epoch(slot);
        ListArc::pin_init(
            try_pin_init!(Self {
                slot,
                asid,
                cb: job.cb,
                cb_size: job.cb_size,
                tag: job.tag,
                sink: job.sink.clone(),
                halts: halts.clone(),
                epoch,
                links <- ListLinks::new(),
            }),
            GFP_KERNEL,
        )
    }
}

impl JobOwner for HwJob {
    /// Halted: its queue's epoch moved on since it was queued. O(1), no lock.
    fn stop(&self) -> Option<Stop> {
        (self.halts.epoch(self.slot) != self.epoch).then_some(Stop::Halted)
    }

    fn done(&self, engine: u16, end: JobEnd) {
        let event = match end {
            JobEnd::Done => EngineEvent::Done,
            JobEnd::Stopped(_) => EngineEvent::Halted,
            JobEnd::Fault(f) => EngineEvent::Fault(f),
            JobEnd::BadPacket { addr, error } => EngineEvent::BadPacket { addr, error },
        };
        self.sink.event(engine, self.tag, event);
    }
}

/// One engine: its jobs' accounting. Its jobs come from the worker threads
/// of the contexts' streams ([`worker`]), each with its own buffers.
pub(crate) struct Engine {
    /// The upstream engine id.
    pub(crate) id: u16,
    /// A DMA core is behind its QMAN (PDMA, EDMA; not MME, TPC).
    dma: bool,
    sim: Arc<SimGaudi2>,
    /// Jobs of each stream queued or running (not ended).
    pub(crate) streams: [Atomic<u32>; STREAMS],
}

impl Engine {
    fn new(id: u16, dma: bool, sim: Arc<SimGaudi2>) -> Result<Arc<Self>> {
        Ok(Arc::new(
            Self {
                id,
                dma,
                sim,
                streams: core::array::from_fn(|_| Atomic::new(0)),
            },
            GFP_KERNEL,
        )?)
    }

    /// Run `job` with its stream's buffers `scratch` (locked for the run
    /// only), then report it to its owner (after its stream's count
    /// dropped: a WAIT_CS that returns for the last job finds the engine
    /// idle). O(job). The engine's time is charged to `budget`, its
    /// context's.
    pub(crate) fn run(
        &self,
        job: ListArc<HwJob>,
        (budget, scratch): (&CpuBudget, &Mutex<Scratch>),
        lower: Option<&dyn LowerCp>,
    ) {
        let mut pace = Pace::new(budget);
        let cb = (job.cb, job.cb_size);
        let end = self.execute((&job, &*job, cb), (lower, false), scratch, &mut pace);
        // The CBs it handed to the lower CP end first: its completion
        // covers them. A job that faulted cancels them and reports its own
        // error; else the first of them to fail is its error (the job
        // itself then stopped at its next packet).
        let end = match lower {
            None => end,
            Some(l) => {
                let own = matches!(end, JobEnd::Fault(_) | JobEnd::BadPacket { .. });
                if own {
                    l.cancel();
                }
                match l.settle() {
                    Some(handed) if !own => handed,
                    _ => end,
                }
            }
        };
        // The job's last slice is charged before it is reported.
        pace.point();
        if let Some(n) = self.streams.get(job.slot.1) {
            n.fetch_sub(1, Relaxed);
        }
        job.done(self.id, end);
    }

    /// Run the CB `cb` that `job` handed to the QMAN's lower CP, with the
    /// lower CP's `scratch`, stopping when `owner` says (the job's halt or
    /// cancellation): how it ended. O(the CB + bytes moved).
    pub(crate) fn run_lower(
        &self,
        (job, owner): (&HwJob, &dyn JobOwner),
        cb: (u64, u32),
        budget: &CpuBudget,
        scratch: &Mutex<Scratch>,
    ) -> JobEnd {
        let mut pace = Pace::new(budget);
        let end = self.execute((job, owner, cb), (None, true), scratch, &mut pace);
        pace.point();
        end
    }

    /// Execute the CB `cb` of `job` for `owner` with `scratch` (locked for
    /// the execution only): on the stream's upper CP handing to `lower`,
    /// or with `lower_cp` on the QMAN's lower CP. O(the CB + bytes moved).
    fn execute(
        &self,
        (job, owner, cb): (&HwJob, &dyn JobOwner, (u64, u32)),
        lower: (Option<&dyn LowerCp>, bool),
        scratch: &Mutex<Scratch>,
        pace: &mut Pace<'_>,
    ) -> JobEnd {
        let who = EngineAccess::new(self.id, job.asid);
        let mut s = scratch.lock();
        cp::execute(
            &self.sim,
            (&mut s, self.dma),
            (who, job.slot),
            (cb, owner),
            lower,
            pace,
        )
    }

    /// Whether a DMA core is behind the engine's QMAN. O(1).
    pub(crate) fn has_dma(&self) -> bool {
        self.dma
    }

    /// Whether the engine runs a job or has one queued. O(1).
    fn busy(&self) -> bool {
        self.streams.iter().any(|n| n.load(Relaxed) > 0)
    }
}

/// The device's executing engines.
#[pin_data]
pub(crate) struct Qman {
    engines: KVec<Arc<Engine>>,
    /// Serialises submissions, so that a batch's room check holds until
    /// its jobs are queued.
    #[pin]
    submit: Mutex<()>,
}

impl Qman {
    /// The engines of `sim`, idle (the buffers come with the streams'
    /// workers). O(engines).
    pub(crate) fn new(sim: &Arc<SimGaudi2>) -> Result<Arc<Self>> {
        let mut engines = KVec::with_capacity(ENGINES, GFP_KERNEL)?;
        for (e, id) in ENGINE_IDS.into_iter().enumerate() {
            engines.push(Engine::new(id, engine_has_dma(e), sim.clone())?, GFP_KERNEL)?;
        }
        Arc::pin_init(
            pin_init!(Self {
                engines,
                submit <- new_mutex!(()),
            }),
            GFP_KERNEL,
        )
    }

    /// The engine of index `e`. O(1).
    pub(crate) fn engine(&self, e: usize) -> Option<&Arc<Engine>> {
        self.engines.get(e)
    }

    /// Serialise a batch's room check and queueing ([`worker::Workers::submit`]).
    fn serialise(&self) -> kernel::sync::MutexGuard<'_, ()> {
        self.submit.lock()
    }

    /// The busy engines as upstream's HW_IDLE mask (bit = engine id), in
    /// `HL_BUSY_ENGINES_MASK_EXT_SIZE` words. O(engines).
    pub(crate) fn busy_mask(&self) -> [u64; HL_BUSY_ENGINES_MASK_EXT_SIZE] {
        let mut mask = [0u64; HL_BUSY_ENGINES_MASK_EXT_SIZE];
        for e in self.engines.iter().filter(|e| e.busy()) {
            let id = usize::from(e.id);
            if let Some(w) = mask.get_mut(id / 64) {
                *w |= 1 << (id % 64);
            }
        }
        mask
    }
}

#[kunit_tests(hlrs_qman)]
mod tests {
    use super::*;

    #[test]
    fn queue_ids_map_to_engines_as_upstream() {
        assert_eq!(queue_engine(GAUDI2_QUEUE_ID_PDMA_0_0), Some((0, 0)));
        assert_eq!(queue_engine(GAUDI2_QUEUE_ID_PDMA_0_1), Some((0, 1)));
        assert_eq!(queue_engine(GAUDI2_QUEUE_ID_PDMA_1_0), Some((1, 0)));
        // The PDMA streams the driver keeps, the NICs, rotators, CPU and
        // beyond: disabled.
        for q in [2, 3, 5, 6, 7, 156, 200, 252, 259, 260, 261, u32::MAX] {
            assert_eq!(queue_engine(q), None);
        }
        // Every EDMA, MME and TPC stream: engine q / 4.
        for q in 8..156 {
            assert_eq!(queue_engine(q), Some(((q / 4) as usize, (q % 4) as usize)));
        }
        for (d, base) in EDMA_QUEUES.iter().enumerate() {
            let e = (base / 4) as usize;
            assert_eq!(engine_id(e), Some(11 * d as u16));
            assert_eq!(engine_id(e + 1), Some(11 * d as u16 + 1));
            assert!(engine_has_dma(e) && engine_has_dma(e + 1) && !engine_has_dma(e + 2));
        }
        assert_eq!(&ENGINE_IDS[..12], &[45, 46, 0, 1, 2, 3, 4, 5, 6, 7, 8, 44]);
        assert_eq!(&ENGINE_IDS[12..21], &[11, 12, 13, 14, 15, 16, 17, 18, 19]);
        assert_eq!(ENGINE_IDS[38], 41);
        assert!(engine_has_dma(0) && engine_has_dma(1));
        assert_eq!(engine_id(ENGINES), None);
    }
}
