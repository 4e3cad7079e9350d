// SPDX-License-Identifier: GPL-2.0

//! The simulated engines behind the engine boundary
//! ([`crate::hw::engines`]): [`SimEngines`] (device-wide) and [`SimQueues`]
//! (one context's queues: its worker threads and its queues' halt epochs).
//!
//! **Halt.** Each queue (engine, stream) of a context has a halt epoch; a
//! job remembers its queue's epoch when it is queued, and the command
//! processor asks it before every packet and DMA chunk whether the epoch
//! moved on ([`super::HwJob`]'s `JobOwner::stop`): then it ends, reported
//! `Halted`, within one packet or 64 KiB of DMA (a job asleep in a
//! `FENCE` is woken to ask). A halt is atomic increments, then the halted
//! streams' sync-stream monitors disarmed and fences 2 cleared under the
//! sync manager's locks (leaves for its callers: the driver's timer, an
//! event sink, an abort under the tracker, a close); it never waits for a
//! job. Jobs queued after a halt run.
//!
//! **Quiesce.** The close's [`AsidQueues::quiesce`] ends the context's
//! worker threads once their queues are empty, and waits for them: no
//! engine code runs for the context afterwards.
//!
//! Lock order (the crate root's table): `SimQueues::workers` is taken
//! alone (`prepare`, `quiesce`) or inside `ContextCs::track` (`submit`),
//! and takes `Qman::submit` then a worker's `Feed`.

use super::{worker::Workers, HwJob, Qman, ENGINES, STREAMS};
use crate::{
    asic::{GAUDI2_FIRST_USER_SOB, GAUDI2_RESERVED_SOB_NUMBER},
    hw::{
        engines::{self, queue_engine, AsidQueues, EngineJob, Engines},
        sim::SimGaudi2,
    },
};
use kernel::{
    alloc::KVec,
    list::List,
    new_mutex,
    prelude::*,
    sync::{
        atomic::{Atomic, Relaxed},
        Arc, Mutex,
    },
};

/// The halt epochs of one context's queues, by engine and stream.
pub(crate) struct HaltEpochs([Atomic<u32>; ENGINES * STREAMS]);

impl HaltEpochs {
    /// The epoch of queue `(engine, stream)`. O(1).
    pub(crate) fn epoch(&self, (e, s): (usize, usize)) -> u32 {
        self.0.get(e * STREAMS + s).map_or(0, |a| a.load(Relaxed))
    }

    /// Halt queue `(engine, stream)`: its jobs queued so far end. O(1).
    fn bump(&self, (e, s): (usize, usize)) {
        if let Some(a) = self.0.get(e * STREAMS + s) {
            a.add(1, Relaxed);
        }
    }
}

/// The simulated Gaudi2's engines, device-wide.
pub(crate) struct SimEngines {
    qman: Arc<Qman>,
    sim: Arc<SimGaudi2>,
}

impl SimEngines {
    /// The engines of `sim`, idle. Allocates their buffers. O(engines).
    pub(crate) fn new(sim: &Arc<SimGaudi2>) -> Result<Arc<Self>> {
        let qman = Qman::new(sim)?;
        let sim = sim.clone();
        Ok(Arc::new(Self { qman, sim }, GFP_KERNEL)?)
    }
}

impl engines::Sealed for SimEngines {}

impl Engines for SimEngines {
    fn busy_mask(&self) -> [u64; crate::uapi::HL_BUSY_ENGINES_MASK_EXT_SIZE] {
        self.qman.busy_mask()
    }

    fn open(&self, asid: u32) -> Result<Arc<dyn AsidQueues>> {
        let halts = Arc::new(
            HaltEpochs(core::array::from_fn(|_| Atomic::new(0))),
            GFP_KERNEL,
        )?;
        // A new context finds the user's synchronisation state reset, and
        // the sync managers write for it with its ASID.
        self.sim.sync.reset_user(asid);
        let q = Arc::pin_init(
            pin_init!(SimQueues {
                qman: self.qman.clone(),
                sim: self.sim.clone(),
                asid,
                halts,
                workers <- new_mutex!(Workers::new()),
            }),
            GFP_KERNEL,
        )?;
        Ok(q)
    }
}

/// One context's queues on the simulated engines.
#[pin_data]
pub(crate) struct SimQueues {
    qman: Arc<Qman>,
    sim: Arc<SimGaudi2>,
    asid: u32,
    halts: Arc<HaltEpochs>,
    /// The context's engine threads.
    #[pin]
    workers: Mutex<Workers>,
}

impl AsidQueues for SimQueues {
    fn prepare(&self, queues: &mut dyn Iterator<Item = u32>) -> Result {
        let mut w = self.workers.lock();
        for slot in queues.filter_map(queue_engine) {
            w.ensure(&self.qman, slot)?;
        }
        Ok(())
    }

    fn submit(&self, jobs: &mut KVec<EngineJob>) -> Result {
        let mut batch = List::new();
        for j in jobs.iter() {
            batch.push_back(HwJob::new(j, self.asid, &self.halts)?);
        }
        self.workers.lock().submit(&self.qman, &mut batch)?;
        jobs.clear();
        Ok(())
    }

    fn halt(&self, queues: Option<&mut dyn Iterator<Item = u32>>) {
        // The epochs move on first (jobs stop, and their later writes to
        // the sync manager are refused), then the streams are cleaned.
        let mut halted = [false; ENGINES * STREAMS];
        let mut halt = |(e, s): (usize, usize)| {
            self.halts.bump((e, s));
            if let Some(h) = halted.get_mut(e * STREAMS + s) {
                *h = true;
            }
        };
        match queues {
            Some(qs) => qs.filter_map(queue_engine).for_each(&mut halt),
            None => (0..ENGINES * STREAMS).for_each(|i| halt((i / STREAMS, i % STREAMS))),
        }
        let mut slots = halted
            .iter()
            .enumerate()
            .filter(|(_, &h)| h)
            .map(|(i, _)| (i / STREAMS, i % STREAMS));
        self.sim.sync.halt_streams(&mut slots);
    }

    fn quiesce(&self) {
        self.workers.lock().stop_all();
    }

    #[cfg(CONFIG_KUNIT)]
    fn threads(&self) -> usize {
        self.workers.lock().count()
    }

    fn sync_streams(&self) -> bool {
        true
    }

    fn reset_sob(&self, sob: u32) -> Result {
        if !(GAUDI2_RESERVED_SOB_NUMBER..GAUDI2_FIRST_USER_SOB).contains(&sob) {
            return Err(EINVAL);
        }
        self.sim.sync.reset_sob(sob);
        Ok(())
    }
}
