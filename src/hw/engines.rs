// SPDX-License-Identifier: GPL-2.0

//! The engine boundary: what the command-submission code (`cs/`, floor 5)
//! needs of a device's engines, and the only way it reaches them. Every type
//! here is the driver's: no `hw::sim` type is named above floor 3.
//!
//! # The boundary
//!
//! - [`Engines`] (device-wide, sealed like [`super::backend::Backend`]):
//!   which queue ids have an engine ([`queue_engine`]: upstream's queue map
//!   of a Gaudi2 without binning), the busy mask (`HL_INFO_HW_IDLE`), and
//!   [`Engines::open`], which gives a context the queues of its ASID.
//! - [`AsidQueues`] (one context's view of the queues, tagged with its
//!   ASID): [`AsidQueues::prepare`] readies the queues a CS names (may
//!   sleep: the simulation creates its engine threads there), then
//!   [`AsidQueues::submit`] queues a batch of [`EngineJob`]s, all or none,
//!   without waiting for them (on silicon: one PQ entry per job, then one
//!   doorbell per queue); [`AsidQueues::halt`] halts and resets queues of
//!   the ASID (some, or all): every job queued or running on them before
//!   the call ends, reported [`EngineEvent::Halted`]; it does not sleep and
//!   may be called from any thread, an event sink included;
//!   [`AsidQueues::quiesce`] (the close) waits until no job of the ASID is
//!   queued or running and releases what the queues held: when it returns
//!   no engine touches the context's memory any more.
//! - Events come back through the [`EngineSink`] each job carries (the
//!   driver's CS), exactly one per job: [`EngineEvent::Done`],
//!   [`EngineEvent::Halted`], an engine fault ([`EngineFault`]: page
//!   fault, RAZWI, IOMMU refusal, unbacked memory, with what the capture
//!   registers hold) or a refused packet ([`EngineEvent::BadPacket`]:
//!   upstream's undefined opcode, with the packet's address). A sink is
//!   called with none of the engines' locks held and may take the tracker's.
//!
//! **Why two traits, and why not methods on `Backend`.** A context's queues
//! carry per-context state on both hosts (the simulation: its engine threads
//! and its queues' halt epochs; silicon: the ASID written into each PQ
//! entry and the driver's shadow of its jobs on each PQ, which completion
//! interrupts are matched against), so the per-context part is an object the
//! context owns ([`AsidQueues`], dropped at its close); the device-wide part
//! is small and separate from the memory operations of `Backend` because a
//! device may have memory without engines the driver drives (then every CS
//! with jobs is `EOPNOTSUPP`).
//!
//! **What stays in the driver.** The CS timeout (upstream's TDR) is a
//! driver-side timer (the context watchdog of `cs::tracker`): when a CS times out the driver halts and
//! resets its queues through [`AsidQueues::halt`]; the engines never see a
//! deadline. The device status is the driver's (`DeviceCs`), not the
//! engines'. A halt ends every job of the halted queues queued before it,
//! the jobs of later CSs behind the timed-out one on the same queue
//! included (they end ABORTED): upstream resets the whole device after a
//! TDR, which ends every CS.
//!
//! # The two implementations
//!
//! The simulation's (`hw::sim::qman::queues`: engine threads per context,
//! halt epochs) and the PCI device's (`hw::pci::queues`: PQs, doorbells,
//! completion by MSI-X through the sync manager's CQ, errors from the event
//! queue, halt by `GLBL_CFG1` stop and flush).

use crate::{hw::backend::MmuKind, uapi::*};
use kernel::{alloc::KVec, prelude::*, sync::Arc};

/// Which way an access goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Access {
    /// The engine reads.
    Read,
    /// The engine writes.
    Write,
}

/// Why an engine access stopped (what the fault capture registers say).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum EngineFault {
    /// No page at `va` in the tables of `asid` (upstream: an MMU page fault,
    /// `HL_INFO_PAGE_FAULT_EVENT`).
    Page {
        /// The MMU.
        mmu: MmuKind,
        /// The ASID.
        asid: u32,
        /// The address the engine issued.
        va: u64,
        /// The engine.
        engine: u16,
    },
    /// The translation of `va` (or a PMMU hop table on the way) is the bus
    /// address `bus`, which is not DMA-mapped: the IOMMU refused it.
    Iommu {
        /// The bus address refused.
        bus: u64,
        /// The ASID.
        asid: u32,
        /// The address the engine issued.
        va: u64,
        /// The engine.
        engine: u16,
    },
    /// `addr` decodes to no memory (upstream: a RAZWI), where no access
    /// direction is known: an address the command processor computed that
    /// wraps, or a translation without an access.
    Decode {
        /// The address (as issued, or as translated).
        addr: u64,
        /// The engine.
        engine: u16,
    },
    /// An access of `access` at `addr` decodes to no memory (upstream: a
    /// RAZWI, with `HL_RAZWI_READ` or `HL_RAZWI_WRITE`).
    Razwi {
        /// The address (as issued, or as translated).
        addr: u64,
        /// The engine.
        engine: u16,
        /// Read or write.
        access: Access,
    },
    /// The device could not back the memory at `addr` (a host allocation
    /// of the simulation failed).
    Backing {
        /// The address (as translated).
        addr: u64,
        /// The engine.
        engine: u16,
    },
}

/// Why a packet cannot be executed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PacketError {
    /// An opcode the engines do not execute, or no packet has.
    Unsupported {
        /// The opcode field.
        opcode: u32,
    },
    /// The packet needs more bytes than the CB has left.
    Truncated {
        /// The opcode field.
        opcode: u32,
        /// Bytes the packet needs.
        need: usize,
    },
    /// A `LIN_DMA` whose `tsize` is not a whole number of its swap words.
    SwapSize {
        /// The transfer size.
        tsize: u32,
    },
}

impl PacketError {
    /// The opcode of the refused packet.
    pub(crate) fn opcode(&self) -> u32 {
        match *self {
            Self::Unsupported { opcode } | Self::Truncated { opcode, .. } => opcode,
            Self::SwapSize { .. } => PACKET_LIN_DMA,
        }
    }
}

/// How one job ended: the one event each job sends its sink.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum EngineEvent {
    /// Every packet executed (the completion of its tag).
    Done,
    /// Its queue was halted and reset ([`AsidQueues::halt`]) before it ended.
    Halted,
    /// An access faulted (fetching the CB or executing a packet).
    Fault(EngineFault),
    /// The packet at `addr` cannot be executed (upstream: undefined opcode).
    BadPacket {
        /// Its device address.
        addr: u64,
        /// Why.
        error: PacketError,
    },
}

/// Where the events of a job go (the driver's CS).
pub(crate) trait EngineSink: Send + Sync {
    /// Job `tag` ended on engine `engine` (an upstream engine id). Called
    /// once per job submitted, with none of the engines' locks held.
    fn event(&self, engine: u16, tag: u64, event: EngineEvent);
}

/// Where a simulated device's MSI-X vectors go (the driver's user
/// interrupts; on PCI the vectors are real interrupts instead).
pub(crate) trait MsixSink: Send + Sync {
    /// MSI-X `vector` raised. Process context, no lock of the device held.
    /// O(what the sink wakes).
    fn raise(&self, vector: u16);
}

/// One job: a CB on a queue, for the ASID of the [`AsidQueues`] it is
/// submitted to.
pub(crate) struct EngineJob {
    /// The queue id (`GAUDI2_QUEUE_ID_*`), enabled ([`queue_engine`]).
    pub(crate) queue: u32,
    /// Device address of the CB.
    pub(crate) cb: u64,
    /// Bytes of the CB.
    pub(crate) cb_size: u32,
    /// The completion tag its event carries.
    pub(crate) tag: u64,
    /// Where its event goes.
    pub(crate) sink: Arc<dyn EngineSink>,
}

mod private {
    /// Seals [`super::Engines`]: only this crate's hardware implements it.
    pub(crate) trait Sealed {}
}
pub(crate) use private::Sealed;

/// A device's engines, device-wide.
pub(crate) trait Engines: Sealed + Send + Sync {
    /// The busy engines as upstream's HW_IDLE mask (bit = engine id).
    fn busy_mask(&self) -> [u64; HL_BUSY_ENGINES_MASK_EXT_SIZE];

    /// The queues of `asid`, for one context, idle. `ENOMEM`.
    fn open(&self, asid: u32) -> Result<Arc<dyn AsidQueues>>;
}

/// One context's queues (its ASID's).
pub(crate) trait AsidQueues: Send + Sync {
    /// Make `queues` ready for jobs (the simulation: the context's engine
    /// thread of each queue's engine). `ENOMEM`, `EINTR` (a caller being
    /// killed). May sleep.
    fn prepare(&self, queues: &mut dyn Iterator<Item = u32>) -> Result;

    /// Queue every job of `jobs` (in order; all prepared), without waiting
    /// for any: all of them, or none with `EAGAIN` if a queue would hold
    /// more than `HL_QUEUE_LENGTH` jobs not ended, `ENOMEM`, `EINVAL` for a
    /// queue without an engine. `jobs` is emptied on success only. O(jobs).
    fn submit(&self, jobs: &mut KVec<EngineJob>) -> Result;

    /// Halt and reset `queues` (`None`: every queue) of the ASID: every job
    /// queued or running on them before the call ends `Halted` (a running
    /// one at its next packet or DMA chunk). Does not sleep or wait.
    fn halt(&self, queues: Option<&mut dyn Iterator<Item = u32>>);

    /// Wait until no job of the ASID is queued or running, and release what
    /// the queues hold (threads); afterwards no engine touches the ASID's
    /// memory. Jobs queued before still run (halt them first). Sleeps.
    fn quiesce(&self);

    /// Engine threads the queues hold (tests).
    #[cfg(CONFIG_KUNIT)]
    fn threads(&self) -> usize;

    /// Whether the queues run the sync manager's packets, for SIGNAL and
    /// WAIT CSs (`crate::cs::sync_stream`). O(1).
    fn sync_streams(&self) -> bool {
        false
    }

    /// Set DCORE0 sync-stream SOB `sob` to 0 (a stream's switch to its
    /// other SOB). `EINVAL` for a SOB outside the sync streams', `ENODEV`.
    fn reset_sob(&self, _sob: u32) -> Result {
        Err(EOPNOTSUPP)
    }
}

/// The first queue of each DCORE's EDMAs (8 queues each: 2 EDMAs x 4 streams).
pub(crate) const EDMA_QUEUES: [u32; 4] = [
    GAUDI2_QUEUE_ID_DCORE0_EDMA_0_0,
    GAUDI2_QUEUE_ID_DCORE1_EDMA_0_0,
    GAUDI2_QUEUE_ID_DCORE2_EDMA_0_0,
    GAUDI2_QUEUE_ID_DCORE3_EDMA_0_0,
];

/// Streams of a QMAN.
pub(crate) const STREAMS: usize = 4;

/// Engines (QMANs) that run user CBs, one per 4 queue ids up to the NICs:
/// engine `e` serves queues `4e..4e+3` (PDMA 0 and 1, then per dcore EDMA
/// 0, EDMA 1, MME, TPC 0..5, DCORE0's TPC 6 after its TPC 5).
pub(crate) const ENGINES: usize = 39;

/// The upstream engine id (`GAUDI2_ENGINE_ID_*`) of engine `e`: PDMA_0 and
/// _1 (45, 46), then `GAUDI2_DCOREd_ENGINE_ID_{EDMA_0, EDMA_1, MME, TPC_0..5}`
/// (11 d + 0..8) and `GAUDI2_DCORE0_ENGINE_ID_TPC_6` (44).
pub(crate) const ENGINE_IDS: [u16; ENGINES] = {
    let mut ids = [0u16; ENGINES];
    ids[0] = GAUDI2_ENGINE_ID_PDMA_0;
    ids[1] = GAUDI2_ENGINE_ID_PDMA_1;
    let mut e = 2;
    while e < ENGINES {
        ids[e] = match e {
            2..=10 => (e - 2) as u16,
            11 => GAUDI2_DCORE0_ENGINE_ID_TPC_6,
            _ => {
                let (d, i) = (1 + (e - 12) / 9, (e - 12) % 9);
                GAUDI2_DCORE0_ENGINE_ID_EDMA_0 + GAUDI2_ENGINE_IDS_PER_DCORE * d as u16 + i as u16
            }
        };
        e += 1;
    }
    ids
};

/// The upstream engine id of engine `index`. O(1).
pub(crate) fn engine_id(index: usize) -> Option<u16> {
    ENGINE_IDS.get(index).copied()
}

/// Whether engine `e` has a DMA core (PDMA, EDMA) behind its QMAN: the
/// MME and TPC QMANs run every packet but `LIN_DMA`, which needs one. O(1).
pub(crate) fn engine_has_dma(e: usize) -> bool {
    crate::asic::gaudi2_regs::qman_has_dma(e)
}

/// The engine and stream of queue `queue`, if it is enabled for user jobs:
/// PDMA_0_0, PDMA_0_1, PDMA_1_0 (the PDMA streams the driver does not keep;
/// upstream 7.3 refuses PDMA_0_2, _0_3 and _1_1..3 on Gaudi2, where the
/// ARCs own them) and every stream of the EDMA, MME and TPC QMANs
/// (`gaudi2_is_queue_enabled`, gaudi2/gaudi2.c:6866, without binning). The
/// rotator, NIC and CPU queues have no engine here. O(1).
pub(crate) fn queue_engine(queue: u32) -> Option<(usize, usize)> {
    let stream = (queue % STREAMS as u32) as usize;
    match queue {
        GAUDI2_QUEUE_ID_PDMA_0_0 | GAUDI2_QUEUE_ID_PDMA_0_1 => Some((0, stream)),
        GAUDI2_QUEUE_ID_PDMA_1_0 => Some((1, stream)),
        q if (8..ENGINES as u32 * 4).contains(&q) => Some(((q / 4) as usize, stream)),
        _ => None,
    }
}
