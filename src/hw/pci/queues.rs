// SPDX-License-Identifier: GPL-2.0

//! Command submission on the PCI Gaudi2: the engine boundary
//! ([`crate::hw::engines`]) implemented as upstream drives the QMANs on
//! silicon. [`PciEngines`] (device-wide) and [`PciQueues`] (the one
//! compute context's view).
//!
//! **Setup** ([`PciEngines::new`], at probe; `gaudi2_init_pdma`,
//! `gaudi2_init_qman_pqc`, `gaudi2_init_qman_cp`, `gaudi2_init_sm`,
//! gaudi2/gaudi2.c:5395-5612, 5754-5795): per enabled queue (PDMA_0_0,
//! PDMA_0_1, PDMA_1_0: `PDMA0/1_QMAN_ENABLE`; the four streams of each of
//! the 8 DCORE EDMAs, the 4 MMEs and the 25 TPCs, [`engines::queue_engine`],
//! 151 queues) a PQ of `HL_QUEUE_LENGTH`
//! 16-byte BDs in coherent DMA memory (`PQ_BASE`, `PQ_SIZE`, PI = CI = 0),
//! its PQC pointed at the DCORE0 SOBs (`PQC_LBW_BASE`, `WDATA` = +1), its
//! CP message bases at the monitors' payloads and the SOBs; CQ 0 of the
//! sync manager in coherent memory with its LBW write at the virtual MSI-X
//! doorbell (a coherent page, named to the firmware by
//! `CPUCP_PACKET_ENABLE_PCI_ACCESS`) carrying vector 21; the completion
//! monitors configured to write the CQ and interrupt.
//!
//! **A job** ([`AsidQueues::submit`]) takes a completion slot `s` (one of
//! [`SLOTS`] SOB/monitor pairs, DCORE0's reserved range): SOB `s` = 0,
//! monitor `s` armed for "SOB `s` equal to 1" (its CQ payload "ready |
//! shadow index `s`" is written once at init, where upstream's
//! `gaudi2_arm_cq_monitor`, gaudi2/gaudi2.c:7233-7259, writes it at every
//! arm: two register writes per job instead of five), then the BD (`ptr` = CB, `len`, `ctl` = `COMP_OFFSET` `s`) at the PQ's
//! PI. After every job of the batch, one `PQ_PI` write per queue (the
//! doorbell, `gaudi2_ring_doorbell`). Upstream counts a whole CS on one
//! SOB (`seq & 63`); one slot per job gives the driver's per-job events,
//! with [`SLOTS`] jobs in flight per device (`EAGAIN` past it, counted as
//! a full queue, as upstream's `max_pending_cs`; a CS of more jobs than
//! [`SLOTS`] could never be queued and is `EINVAL`, see [`PciQueues`]).
//!
//! **Completion** (no polling): the QMAN runs the CB, its PQC increments
//! SOB `s`, monitor `s` fires, writes the CQ entry and raises MSI-X 21.
//! Its threaded handler ([`PciEngines::run`] through
//! [`crate::ffi::irq::ThreadedIrq`]) consumes the ready entries
//! (`hl_irq_handler_cq`, common/irq.c:130-190) and reports `Done` to each
//! slot's sink.
//!
//! **Halt** ([`AsidQueues::halt`], the driver's TDR, an aborted CS, the
//! close): per queue, `GLBL_CFG1` = stop | flush of its stream, then 0
//! (the stream restarts empty: the device's CI jumps to the PI), its
//! sync-stream monitor disarmed and its fence 2 cleared (a halted WAIT CS,
//! [`crate::cs::sync_stream`], leaves nothing behind), a read
//! back of `GLBL_STS0` (the writes reached the device), the CQ drained
//! (a job that completed before the halt reports `Done`), then `Halted`
//! for every job still on the queue. It takes the engines' spinlock, never
//! sleeps, and works on a dead or unbound device (its register writes
//! fail; the jobs end `Halted` all the same).
//!
//! **Events.** Every slot is in exactly one place: free, on its queue's
//! FIFO (in flight, in PQ order), or on the reap ring (ended, its event
//! decided); sinks are called from the reap ring one at a time with no lock
//! held.
//!
//! **Errors** (MSI-X 0, the event queue; `gaudi2_handle_eqe`,
//! gaudi2/gaudi2.c:10178-10460): an MMU page-fault event reads that MMU's
//! capture registers (`PAGE_ERROR_CAPTURE` / `ACCESS_ERROR_CAPTURE`, the
//! HMMU's address descrambled; `gaudi2_handle_page_error`,
//! `gaudi2_handle_access_error`) and releases them; a RAZWI event notes an
//! address-decode error. The QMAN error event that follows names the
//! QMAN: each of its streams whose `GLBL_ERR_STS` is set has its job in
//! progress (the head of its FIFO) reported with the fault noted before,
//! or as a refused packet at `CP_CURRENT_INST` when none was; then
//! `GLBL_CFG1` = 0 releases the stream, which drops that CB and goes on
//! with the next BD (upstream resets the device on a QMAN error; the
//! driver aborts the failing CS, whose other queues it halts itself).
//!
//! Lock order: `PciEngines::state` is a leaf spinlock taken alone (never
//! with `ContextCs::track`'s sinks running); `submit` takes it inside
//! `ContextCs::track`.

use super::{mmu::descramble, regs::bump, PciGaudi2};
use crate::asic::{
    cpucp_if::{op, CpucpPacket},
    gaudi2_regs::{self as r, qm, sm},
    GAUDI2_FIRST_USER_SOB, GAUDI2_RESERVED_MON_NUMBER, GAUDI2_RESERVED_SOB_NUMBER,
};
use crate::ffi::{cpu_dma::CpuDma, irq::IrqThread};
use crate::hw::{
    backend::MmuKind,
    cpucp::CpuCp,
    engines::{
        self, engine_id, queue_engine, AsidQueues, EngineEvent, EngineFault, EngineJob, EngineSink,
        Engines, PacketError, STREAMS,
    },
};
use crate::uapi::*;
use kernel::{
    alloc::KVec,
    device::{Bound, Device},
    new_spinlock,
    prelude::*,
    sync::{Arc, SpinLock},
};

/// Completion slots: SOBs and monitors `0..SLOTS` of DCORE0, upstream's
/// CS-completion objects (`GAUDI2_RESERVED_SOB/MON_CS_COMPLETION_*`,
/// gaudi2/gaudi2P.h:253-269; `GAUDI2_MAX_PENDING_CS`). The objects above
/// them up to 85 / 125 stay unused (upstream's KDMA and decoder ones); from
/// there on they are the sync streams' and the user's.
pub(crate) const SLOTS: usize = 64;
/// `MON_STATUS.PROT`: a status write without `VALID` disarms the monitor.
const MON_STATUS_PROT: u32 = 1 << 9;
/// `CP_FENCE2_CNT_0` of a QMAN block (stream `q` at `+ 4 q`): the counter
/// a WAIT CS's `FENCE` waits on.
const QM_FENCE2_CNT: u32 = 0x308;
/// BDs per PQ (`HL_QUEUE_LENGTH`).
const PQ_ENTRIES: u32 = 4096;
/// log2 of [`PQ_ENTRIES`] (`PQ_SIZE`).
const PQ_SIZE_LOG2: u32 = 12;
/// Bytes of a BD.
const BD_BYTES: usize = 16;
/// Entries of CQ 0 (4 bytes each): more than [`SLOTS`], so it never fills.
const CQ_ENTRIES: u32 = 1024;
/// log2 of the CQ's bytes (`GLBL_CQ_SIZE_LOG2`).
const CQ_SIZE_LOG2: u32 = 12;

/// QMANs ([`r::QM_BASES`]: PDMA0, PDMA1, then per dcore EDMA 0..1, MME,
/// TPC 0..5, DCORE0's TPC 6; one per engine, in the engines' order).
const QMANS: usize = r::QM_BASES.len();
const _: () = assert!(QMANS == engines::ENGINES);
/// Queue slots: `qman x STREAMS + stream` (the enabled ones have a PQ).
const NQ: usize = QMANS * STREAMS;

/// A set of queue slots (a bitmap of [`NQ`] bits). O(1) operations.
#[derive(Clone, Copy, Default, PartialEq, Eq)]
struct QueueSet([u64; NQ.div_ceil(64)]);

impl QueueSet {
    /// Every slot.
    const ALL: Self = Self([u64::MAX; NQ.div_ceil(64)]);

    /// Add slot `i`.
    fn add(&mut self, i: usize) {
        if let Some(w) = self.0.get_mut(i / 64) {
            *w |= 1 << (i % 64);
        }
    }

    /// Whether slot `i` is in the set.
    fn has(&self, i: usize) -> bool {
        self.0.get(i / 64).is_some_and(|w| w & (1 << (i % 64)) != 0)
    }

    /// Whether the set is empty.
    fn is_empty(&self) -> bool {
        self.0.iter().all(|&w| w == 0)
    }
}

/// The queue slot of queue id `queue`, if the device runs it: its QMAN
/// (the order of [`r::QM_BASES`] is [`queue_engine`]'s engine order) and
/// stream. O(1).
fn queue_index(queue: u32) -> Option<usize> {
    let (m, s) = queue_engine(queue)?;
    (m < QMANS).then_some(m * STREAMS + s)
}

/// Whether queue slot `i` is enabled (has a PQ). O(1).
fn enabled(i: usize) -> bool {
    let (m, q) = (i / STREAMS, i % STREAMS);
    m < QMANS && r::qman_enable(m) & (1 << q) != 0
}

/// QMAN base, stream and engine id of queue slot `i`. O(1).
fn slot_regs(i: usize) -> Option<(u32, u32, u16)> {
    let m = i / STREAMS;
    Some((*r::QM_BASES.get(m)?, (i % STREAMS) as u32, engine_id(m)?))
}

/// A fixed-capacity ring of slot ids (allocated once, at probe).
///
/// # Invariants
///
/// `len <= buf.len()`, `head < buf.len()` (or 0 when empty and `buf` is
/// empty).
struct Ring {
    buf: KVec<u16>,
    head: usize,
    len: usize,
}

impl Ring {
    /// A ring of `cap` slot ids. Allocates.
    fn new(cap: usize) -> Result<Self> {
        let mut buf = KVec::with_capacity(cap, GFP_KERNEL)?;
        for _ in 0..cap {
            buf.push(0, GFP_KERNEL)?;
        }
        Ok(Self {
            buf,
            head: 0,
            len: 0,
        })
    }

    /// The buffer index of the `i`-th element from the head. O(1).
    fn at(&self, i: usize) -> Option<usize> {
        self.head.checked_add(i)?.checked_rem(self.buf.len())
    }

    /// Append `v`; false if full. O(1).
    fn push(&mut self, v: u16) -> bool {
        if self.len >= self.buf.len() {
            return false;
        }
        let Some(x) = self.at(self.len).and_then(|at| self.buf.get_mut(at)) else {
            return false;
        };
        *x = v;
        self.len += 1;
        true
    }

    /// The first id, taken. O(1).
    fn pop(&mut self) -> Option<u16> {
        if self.len == 0 {
            return None;
        }
        let v = self.buf.get(self.head).copied()?;
        self.head = self.at(1)?;
        self.len -= 1;
        Some(v)
    }

    /// The last id pushed, taken (undo of a push). O(1).
    fn pop_back(&mut self) -> Option<u16> {
        let last = self.len.checked_sub(1)?;
        let v = self.at(last).and_then(|at| self.buf.get(at)).copied()?;
        self.len = last;
        Some(v)
    }

    /// Take `v` out wherever it is (a completion out of PQ order, which a
    /// well-behaved device never reports). O(len).
    fn remove(&mut self, v: u16) -> bool {
        let Some(i) = (0..self.len).find(|&i| self.at(i).and_then(|a| self.buf.get(a)) == Some(&v))
        else {
            return false;
        };
        for j in i..self.len.saturating_sub(1) {
            let next = self
                .at(j + 1)
                .and_then(|a| self.buf.get(a))
                .copied()
                .unwrap_or(0);
            if let Some(x) = self.at(j).and_then(|a| self.buf.get_mut(a)) {
                *x = next;
            }
        }
        self.len -= 1;
        true
    }
}

/// What a slot holds while its job is in flight or being reported.
struct Slot {
    sink: Option<Arc<dyn EngineSink>>,
    tag: u64,
    engine: u16,
    /// The event decided when it went to the reap ring.
    event: EngineEvent,
}

/// The DMA memory of the engines: PQs, CQ 0 and the MSI-X doorbell page.
struct Buffers {
    /// Per queue slot; `None` for a stream the device keeps (disabled).
    pqs: KVec<Option<CpuDma>>,
    cq: CpuDma,
    msix_db: CpuDma,
}

/// The engines' state, under [`PciEngines::state`].
struct State {
    slots: KVec<Slot>,
    free: Ring,
    /// Per queue slot: its completion slots in PQ order.
    fifo: KVec<Ring>,
    /// Per queue slot: the PI (modulo twice the entries, `hl_queue_inc_ptr`).
    pi: [u32; NQ],
    /// The ASID of the context the engines run for.
    asid: u32,
    /// What an MMU, RAZWI or DMA core event reported (a fault, or a
    /// refused packet), for the QMAN error event that follows it.
    pending: Option<EngineEvent>,
    /// Slots whose event is decided, in order.
    reap: Ring,
    /// The CQ's consumer index.
    cq_ci: u32,
    /// `None` once detached (unbind): every submission fails `ENODEV`.
    bufs: Option<Buffers>,
}

/// The engines' hardware and state, shared by [`PciEngines`], the
/// context's [`PciQueues`] and the completion interrupt's thread.
#[pin_data]
pub(crate) struct EngineCore {
    hw: Arc<PciGaudi2>,
    #[pin]
    state: SpinLock<State>,
}

/// The PCI Gaudi2's engines, device-wide.
pub(crate) struct PciEngines {
    core: Arc<EngineCore>,
}

/// The CQ entry completion slot `s`'s monitor writes: ready, with the
/// slot as its shadow index. O(1).
const fn slot_entry(s: u32) -> u32 {
    r::CQ_ENTRY_READY | r::CQ_ENTRY_SHADOW_INDEX_VALID | s
}

/// `lo`, `hi` halves of a bus address.
fn halves(a: u64) -> (u32, u32) {
    (a as u32, (a >> 32) as u32)
}

impl PciEngines {
    /// The engines' core (the completion interrupt's handler data).
    pub(crate) fn core(&self) -> &Arc<EngineCore> {
        &self.core
    }

    /// The unbind: end every job `Halted` and free the DMA memory; every
    /// later submission fails `ENODEV`. Sleeps (the frees).
    pub(crate) fn detach(&self) {
        self.core.halt_mask(QueueSet::ALL);
        let bufs = self.core.state.lock().bufs.take();
        drop(bufs);
    }

    /// Set the engines up (see the module documentation): DMA memory,
    /// `ENABLE_PCI_ACCESS`, the sync manager's CQ 0 and monitors, the PDMA
    /// QMANs. Probe only; sleeps. `ENOMEM`, `EIO`/`ENODEV` from the device.
    pub(crate) fn new(hw: &Arc<PciGaudi2>, dev: &Device<Bound>) -> Result<Arc<Self>> {
        let st = State::new(dev)?;
        if let Some(bufs) = &st.bufs {
            program(hw, bufs)?;
        }
        let core = Arc::pin_init(
            pin_init!(EngineCore {
                hw: hw.clone(),
                state <- new_spinlock!(st),
            }),
            GFP_KERNEL,
        )?;
        Ok(Arc::new(Self { core }, GFP_KERNEL)?)
    }
}

impl State {
    /// The engines' state with every slot free and the DMA memory
    /// allocated for `dev`. Sleeps. O(SLOTS + queues).
    fn new(dev: &Device<Bound>) -> Result<Self> {
        let mut pqs = KVec::with_capacity(NQ, GFP_KERNEL)?;
        for i in 0..NQ {
            let pq = if enabled(i) {
                Some(CpuDma::new(dev, PQ_ENTRIES as usize * BD_BYTES)?)
            } else {
                None
            };
            pqs.push(pq, GFP_KERNEL)?;
        }
        let mut slots = KVec::with_capacity(SLOTS, GFP_KERNEL)?;
        let mut free = Ring::new(SLOTS)?;
        for s in 0..SLOTS {
            let slot = Slot {
                sink: None,
                tag: 0,
                engine: 0,
                event: EngineEvent::Done,
            };
            slots.push(slot, GFP_KERNEL)?;
            free.push(s as u16);
        }
        let mut fifo = KVec::with_capacity(NQ, GFP_KERNEL)?;
        for i in 0..NQ {
            fifo.push(Ring::new(if enabled(i) { SLOTS } else { 0 })?, GFP_KERNEL)?;
        }
        Ok(Self {
            slots,
            free,
            fifo,
            pi: [0; NQ],
            asid: 0,
            pending: None,
            reap: Ring::new(SLOTS)?,
            cq_ci: 0,
            bufs: Some(Buffers {
                pqs,
                cq: CpuDma::new(dev, CQ_ENTRIES as usize * 4)?,
                msix_db: CpuDma::new(dev, 4096)?,
            }),
        })
    }
}

impl State {
    /// Queue `j` on its PQ (no doorbell): a free completion slot `s`, SOB
    /// `s` = 0, monitor `s` armed for "equal to 1" (its CQ payload was
    /// written at init), the BD at the PI, the PI advanced. All
    /// or nothing: `EINVAL` for a queue the device does not run, `EAGAIN`
    /// without a free slot, `ENODEV` when the device is gone. O(1).
    fn queue_job(&mut self, m: &super::regs::Mmio, j: &EngineJob) -> Result {
        let i = queue_index(j.queue).ok_or(EINVAL)?;
        let has_pq = self
            .bufs
            .as_ref()
            .and_then(|b| b.pqs.get(i))
            .is_some_and(Option::is_some);
        if !has_pq {
            return Err(EINVAL);
        }
        let s = self.free.pop().ok_or(EAGAIN)?;
        let n = u32::from(s);
        let mask = !(1u32 << (n % 8)) & 0xFF;
        let arm = 1 << 17 | 1 << 16 | mask << 8 | (n / 8);
        let pi = self.pi.get(i).copied().unwrap_or(0);
        let mut bd = [0u8; BD_BYTES];
        bd[..8].copy_from_slice(&j.cb.to_le_bytes());
        bd[8..12].copy_from_slice(&j.cb_size.to_le_bytes());
        let ctl = n << r::BD_CTL_COMP_OFFSET_SHIFT | (pi & 0xFFFF);
        bd[12..].copy_from_slice(&ctl.to_le_bytes());
        // The slot's payload (CQ 0, its entry) was written at init and
        // stays: a job resets the SOB and arms the monitor.
        let res = m
            .wreg(sm::SOB_OBJ_0 + 4 * n, 0)
            .and_then(|()| m.wreg(sm::MON_ARM_0 + 4 * n, arm))
            .and_then(|()| {
                let pq = self
                    .bufs
                    .as_ref()
                    .and_then(|b| b.pqs.get(i))
                    .and_then(Option::as_ref)
                    .ok_or(ENODEV)?;
                pq.write((pi % PQ_ENTRIES) as usize * BD_BYTES, &bd)
            });
        if let Err(e) = res {
            let _ = self.free.push(s);
            return Err(e);
        }
        if let Some(slot) = self.slots.get_mut(usize::from(s)) {
            slot.sink = Some(j.sink.clone());
            slot.tag = j.tag;
            slot.engine = slot_regs(i).map_or(0, |x| x.2);
        }
        let _ = self.fifo.get_mut(i).map(|f| f.push(s));
        if let Some(p) = self.pi.get_mut(i) {
            *p = (pi + 1) % (2 * PQ_ENTRIES);
        }
        Ok(())
    }

    /// Undo the last [`Self::queue_job`] of `j`'s queue (before its
    /// doorbell). O(1).
    fn unqueue_job(&mut self, j: &EngineJob) {
        let Some(i) = queue_index(j.queue) else {
            return;
        };
        if let Some(s) = self.fifo.get_mut(i).and_then(Ring::pop_back) {
            if let Some(slot) = self.slots.get_mut(usize::from(s)) {
                slot.sink = None;
            }
            let _ = self.free.push(s);
        }
        if let Some(p) = self.pi.get_mut(i) {
            *p = (*p + 2 * PQ_ENTRIES - 1) % (2 * PQ_ENTRIES);
        }
    }
}

/// Program the device for `bufs` (see the module documentation):
/// `ENABLE_PCI_ACCESS`, the sync manager's CQ 0 and monitors, every
/// QMAN's enabled streams. Sleeps (the CPU-CP packet). O(SLOTS + queues).
fn program(hw: &PciGaudi2, bufs: &Buffers) -> Result {
    // The firmware learns the virtual MSI-X doorbell (gaudi2_late_init).
    let mut pkt = CpucpPacket::new(op::ENABLE_PCI_ACCESS);
    pkt.value = bufs.msix_db.bus();
    hw.send(pkt, None, 0)?;
    let m = &hw.mmio;
    let (cq_lo, cq_hi) = halves(bufs.cq.bus());
    let (db_lo, db_hi) = halves(bufs.msix_db.bus());
    for (reg, val) in [
        (sm::CQ_BASE_ADDR_L_0, cq_lo),
        (sm::CQ_BASE_ADDR_H_0, cq_hi),
        (sm::CQ_SIZE_LOG2_0, CQ_SIZE_LOG2),
        (sm::CQ_PI_0, 0),
        (sm::LBW_ADDR_L_0, db_lo),
        (sm::LBW_ADDR_H_0, db_hi),
        (sm::LBW_DATA_0, r::IRQ_NUM_COMPLETION),
    ] {
        m.wreg(reg, val)?;
    }
    // Each completion slot's monitor writes its own CQ entry (CQ 0, the
    // slot number): written once, so a job costs two register writes and
    // its doorbell.
    for s in 0..SLOTS as u32 {
        m.wreg(sm::MON_CONFIG_0 + 4 * s, sm::MON_CONFIG_CQ_LBW)?;
        m.wreg(sm::MON_PAY_ADDRL_0 + 4 * s, 0)?;
        m.wreg(sm::MON_PAY_ADDRH_0 + 4 * s, 0)?;
        m.wreg(sm::MON_PAY_DATA_0 + 4 * s, slot_entry(s))?;
    }
    let (sob_lo, sob_hi) = halves(r::CFG_BASE + u64::from(sm::SOB_OBJ_0));
    let (mon_lo, mon_hi) = halves(r::CFG_BASE + u64::from(sm::MON_PAY_ADDRL_0));
    for i in (0..NQ).filter(|&i| enabled(i)) {
        let (base, q, _) = slot_regs(i).ok_or(EINVAL)?;
        let pq = bufs.pqs.get(i).and_then(Option::as_ref).ok_or(EINVAL)?;
        let (pq_lo, pq_hi) = halves(pq.bus());
        for (off, val) in [
            (qm::PQ_BASE_LO, pq_lo),
            (qm::PQ_BASE_HI, pq_hi),
            (qm::PQ_SIZE, PQ_SIZE_LOG2),
            (qm::PQ_PI, 0),
            (qm::PQ_CI, 0),
            (qm::PQC_LBW_BASE_LO, sob_lo),
            (qm::PQC_LBW_BASE_HI, sob_hi),
            (qm::PQC_LBW_WDATA, 1 << 31 | 1),
            // The stream's CP: message base 0 the monitors' payloads,
            // base 1 the SOBs (gaudi2_init_qman_cp).
            (qm::CP_MSG_BASE0_LO, mon_lo),
            (qm::CP_MSG_BASE0_LO + 0x14, mon_hi),
            (qm::CP_MSG_BASE0_LO + 0x28, sob_lo),
            (qm::CP_MSG_BASE0_LO + 0x28 + 0x14, sob_hi),
        ] {
            // Per-stream registers, and the stream's own CP, at + 4q.
            m.wreg(base + off + 4 * q, val)?;
        }
    }
    for (qman, &base) in r::QM_BASES.iter().enumerate() {
        // The lower CP (CP 4, what a CP_DMA hands its CB to): the same
        // message bases as the streams' (gaudi2_init_qman_cp sets all five).
        for (off, val) in [
            (qm::CP_MSG_BASE0_LO, mon_lo),
            (qm::CP_MSG_BASE0_LO + 0x14, mon_hi),
            (qm::CP_MSG_BASE0_LO + 0x28, sob_lo),
            (qm::CP_MSG_BASE0_LO + 0x28 + 0x14, sob_hi),
        ] {
            m.wreg(base + off + 4 * 4, val)?;
        }
        m.wreg(base + qm::PQC_CFG, 1)?;
        m.wreg(base + qm::GLBL_CFG1, 0)?;
        m.wreg(base + qm::GLBL_CFG0, r::qman_enable(qman))?;
    }
    Ok(())
}

impl EngineCore {
    /// Move every ready CQ entry's slot to the reap ring as `Done`. Under
    /// the lock; O(entries ready).
    fn drain_cq(&self, st: &mut State) {
        loop {
            let Some(cq) = st.bufs.as_ref().map(|b| &b.cq) else {
                return;
            };
            let off = (st.cq_ci % CQ_ENTRIES) as usize * 4;
            let Ok(entry) = cq.read32(off) else {
                return;
            };
            if entry & r::CQ_ENTRY_READY == 0 {
                return;
            }
            let _ = cq.write(off, &[0; 4]);
            st.cq_ci = (st.cq_ci + 1) % CQ_ENTRIES;
            bump(&self.hw.mmio.counters.cq_entries);
            if entry & r::CQ_ENTRY_SHADOW_INDEX_VALID == 0 {
                continue;
            }
            let s = (entry & r::CQ_ENTRY_SHADOW_INDEX_MASK) as u16;
            // Off the FIFO of its queue (its head, on a device that
            // completes each PQ in order); a slot on no FIFO is a stale or
            // forged entry: ignored.
            let mut found = false;
            for f in st.fifo.iter_mut() {
                if f.buf.get(f.head) == Some(&s) && f.len > 0 {
                    let _ = f.pop();
                    found = true;
                    break;
                }
            }
            if !found {
                found = st.fifo.iter_mut().any(|f| f.remove(s));
            }
            if !found {
                continue;
            }
            if let Some(slot) = st.slots.get_mut(usize::from(s)) {
                slot.event = EngineEvent::Done;
            }
            let _ = st.reap.push(s);
        }
    }

    /// Report the reap ring's events, one at a time, with no lock held.
    /// O(events).
    fn report(&self) {
        loop {
            let (sink, engine, tag, event) = {
                let mut st = self.state.lock();
                let Some(s) = st.reap.pop() else {
                    return;
                };
                let Some(slot) = st.slots.get_mut(usize::from(s)) else {
                    continue;
                };
                let sink = slot.sink.take();
                let out = (sink, slot.engine, slot.tag, slot.event);
                let _ = st.free.push(s);
                out
            };
            if let Some(sink) = sink {
                let c = &self.hw.mmio.counters;
                bump(match event {
                    EngineEvent::Done => &c.cs_done,
                    EngineEvent::Halted => &c.cs_halted,
                    EngineEvent::Fault(_) | EngineEvent::BadPacket { .. } => &c.cs_failed,
                });
                sink.event(engine, tag, event);
            }
        }
    }

    /// Halt and reset the queue slots whose bit is in `mask` that have
    /// jobs: stop and flush each stream, drain the CQ, end what is left on
    /// them `Halted`, then report. Never sleeps. O(jobs on them).
    fn halt_mask(&self, mask: QueueSet) {
        {
            let mut st = self.state.lock();
            let m = &self.hw.mmio;
            for i in 0..NQ {
                if !mask.has(i) || st.fifo.get(i).is_none_or(|f| f.len == 0) {
                    continue;
                }
                let Some((base, q, _)) = slot_regs(i) else {
                    continue;
                };
                // Errors: a dead or unbound device runs nothing any more.
                let _ = m.wreg(base + qm::GLBL_CFG1, r::qm_stop_flush(q));
                let _ = m.wreg(base + qm::GLBL_CFG1, 0);
                // The stream's sync-stream monitor disarmed, then its fence
                // 2 cleared: a halted WAIT CS leaves nothing that releases
                // the next one early (upstream resets the device instead).
                let mon = GAUDI2_RESERVED_MON_NUMBER + i as u32;
                let _ = m.wreg(sm::MON_STATUS_0 + 4 * mon, MON_STATUS_PROT);
                let _ = m.wreg(base + QM_FENCE2_CNT + 4 * q, 0);
                let _ = m.rreg(base + qm::GLBL_STS0);
            }
            self.drain_cq(&mut st);
            for i in 0..NQ {
                if !mask.has(i) {
                    continue;
                }
                while let Some(s) = st.fifo.get_mut(i).and_then(Ring::pop) {
                    if let Some(slot) = st.slots.get_mut(usize::from(s)) {
                        slot.event = EngineEvent::Halted;
                    }
                    let _ = st.reap.push(s);
                }
            }
        }
        self.report();
    }

    /// Jobs in flight on the device. O(queues).
    fn in_flight(&self) -> usize {
        self.state.lock().fifo.iter().map(|f| f.len).sum()
    }
}

impl EngineCore {
    /// The fault an MMU page-fault event of `mmu` (`None`: the PMMU, else
    /// the HMMU sequence) reports, from its capture registers, released
    /// afterwards. `None` if nothing is captured. O(1).
    fn mmu_fault(&self, hmmu: Option<u32>, asid: u32) -> Option<EngineFault> {
        let m = &self.hw.mmio;
        let base = match hmmu {
            None => r::PMMU_MMU_BASE,
            Some(seq) => r::hmmu_bases(seq).0,
        };
        let valid = m.rreg(base + r::MMU_ACCESS_PAGE_ERROR_VALID).ok()?;
        let va_of = |(hi, lo): (u32, u32)| -> Option<u64> {
            let h = m.rreg(base + hi).ok()?;
            let l = m.rreg(base + lo).ok()?;
            Some(u64::from(h) << 32 | u64::from(l))
        };
        let fault = if valid & 1 != 0 {
            let va = va_of(r::MMU_PAGE_ERROR_CAPTURE)?;
            let (mmu, va) = match hmmu {
                None => (MmuKind::Host, va),
                Some(_) => (MmuKind::Dram, descramble(self.hw.hbms, va)),
            };
            Some(EngineFault::Page {
                mmu,
                asid,
                va,
                engine: 0,
            })
        } else if valid & 2 != 0 {
            let va = va_of(r::MMU_ACCESS_ERROR_CAPTURE)?;
            Some(match hmmu {
                // A host access the IOMMU refused (the device does not say
                // which bus address).
                None => EngineFault::Iommu {
                    bus: 0,
                    asid,
                    va,
                    engine: 0,
                },
                Some(_) => EngineFault::Razwi {
                    addr: descramble(self.hw.hbms, va),
                    engine: 0,
                    access: engines::Access::Write,
                },
            })
        } else {
            None
        };
        let _ = m.wreg(base + r::MMU_ACCESS_PAGE_ERROR_VALID, 0);
        fault
    }

    /// One event queue entry, `event` with its first two data words
    /// `data` (see the module documentation). O(streams + the jobs it
    /// ends).
    fn on_event(&self, event: u16, data: [u64; 2]) {
        bump(&self.hw.mmio.counters.eq_events);
        // An MMU, RAZWI or DMA core event notes what happened for the QMAN
        // error event that follows it.
        let hmmu = r::EVENT_HMMU_PAGE_FAULT.iter().position(|&e| e == event);
        let [word0, word1] = data;
        let fault = if event == r::EVENT_PMMU_PAGE_FAULT || hmmu.is_some() {
            let asid = self.state.lock().asid;
            Some(
                self.mmu_fault(hmmu.map(|h| h as u32), asid)
                    .map(EngineEvent::Fault),
            )
        } else if event == r::EVENT_RAZWI {
            // The address the fabric refused, and on which channel.
            let access = if word1 & 1 != 0 {
                engines::Access::Write
            } else {
                engines::Access::Read
            };
            Some(Some(EngineEvent::Fault(EngineFault::Razwi {
                addr: word0,
                engine: 0,
                access,
            })))
        } else if r::EVENT_DMA_CORE.contains(&event) && word1 & r::DMA_CORE_EVENT_CTX != 0 {
            // A transfer a user CB committed by the core's registers ended
            // in an error (the fault event before it was its own): no QMAN
            // error follows, no job fails; the user's completion write
            // never comes, so what waits for it times out.
            // Counted (debugfs `pci`), not logged: a user can make as
            // many as it likes.
            bump(&self.hw.mmio.counters.dma_core_errors);
            Some(None)
        } else if r::EVENT_DMA_CORE.contains(&event) && word0 & r::DMA_CORE_WRONG_CFG != 0 {
            // The DMA core refused a LIN_DMA's configuration (its size is
            // no whole number of its swap words): an engine error.
            Some(Some(EngineEvent::BadPacket {
                addr: 0,
                error: PacketError::SwapSize { tsize: 0 },
            }))
        } else {
            None
        };
        if let Some(f) = fault {
            self.state.lock().pending = f;
            return;
        }
        if event == r::EVENT_KDMA_CORE {
            // The fault before it was the KDMA's (debugfs `dma_size`, whose
            // read times out): no QMAN error follows.
            self.state.lock().pending = None;
            return;
        }
        let Some(qman) = r::EVENT_QM.iter().position(|&e| e == event) else {
            return;
        };
        {
            let mut st = self.state.lock();
            let m = &self.hw.mmio;
            let Some(&base) = r::QM_BASES.get(qman) else {
                return;
            };
            let pending = st.pending.take();
            // What completed before the error is done first.
            self.drain_cq(&mut st);
            for q in 0..STREAMS as u32 {
                let i = qman * STREAMS + q as usize;
                if !enabled(i) || m.rreg(base + qm::GLBL_ERR_STS + 4 * q).unwrap_or(0) == 0 {
                    continue;
                }
                let lo = m.rreg(base + qm::CP_CURRENT_INST_LO + 4 * q).unwrap_or(0);
                let hi = m.rreg(base + qm::CP_CURRENT_INST_HI + 4 * q).unwrap_or(0);
                let addr = u64::from(hi) << 32 | u64::from(lo);
                if let Some(s) = st.fifo.get_mut(i).and_then(Ring::pop) {
                    let engine = slot_regs(i).map_or(0, |x| x.2);
                    let ev = match pending {
                        Some(EngineEvent::Fault(f)) => EngineEvent::Fault(with_engine(f, engine)),
                        Some(EngineEvent::BadPacket { error, .. }) => {
                            EngineEvent::BadPacket { addr, error }
                        }
                        _ => EngineEvent::BadPacket {
                            addr,
                            error: PacketError::Unsupported { opcode: 0 },
                        },
                    };
                    if let Some(slot) = st.slots.get_mut(usize::from(s)) {
                        slot.event = ev;
                    }
                    let _ = st.reap.push(s);
                }
                // Release the stream: the failing CB is dropped, the next
                // BD runs.
                let _ = m.wreg(base + qm::GLBL_CFG1, 0);
            }
        }
        self.report();
    }
}

/// `f` as seen by `engine`. O(1).
fn with_engine(f: EngineFault, engine: u16) -> EngineFault {
    match f {
        EngineFault::Page { mmu, asid, va, .. } => EngineFault::Page {
            mmu,
            asid,
            va,
            engine,
        },
        EngineFault::Iommu { bus, asid, va, .. } => EngineFault::Iommu {
            bus,
            asid,
            va,
            engine,
        },
        EngineFault::Decode { addr, .. } => EngineFault::Decode { addr, engine },
        EngineFault::Razwi { addr, access, .. } => EngineFault::Razwi {
            addr,
            engine,
            access,
        },
        EngineFault::Backing { addr, .. } => EngineFault::Backing { addr, engine },
    }
}

/// The event queue's interrupt (MSI-X 0): the engines' error events.
pub(crate) struct EqIrq {
    core: Arc<EngineCore>,
}

impl EqIrq {
    /// The handler data of `engines`' event queue interrupt. `ENOMEM`.
    pub(crate) fn new(engines: &PciEngines) -> Result<Arc<Self>> {
        Ok(Arc::new(
            Self {
                core: engines.core.clone(),
            },
            GFP_KERNEL,
        )?)
    }
}

impl IrqThread for EqIrq {
    /// Consume the event queue.
    fn run(&self) {
        while let Some((event, data)) = self.core.hw.eq_next() {
            self.core.on_event(event, data);
        }
    }
}

impl IrqThread for EngineCore {
    /// MSI-X 21: consume the CQ and report.
    fn run(&self) {
        bump(&self.hw.mmio.counters.cq_interrupts);
        {
            let mut st = self.state.lock();
            self.drain_cq(&mut st);
        }
        self.report();
    }
}

impl engines::Sealed for PciEngines {}

impl Engines for PciEngines {
    fn busy_mask(&self) -> [u64; HL_BUSY_ENGINES_MASK_EXT_SIZE] {
        let mut mask = [0u64; HL_BUSY_ENGINES_MASK_EXT_SIZE];
        let st = self.core.state.lock();
        for (i, f) in st.fifo.iter().enumerate() {
            if f.len > 0 {
                let id = usize::from(slot_regs(i).map_or(0, |x| x.2));
                if let Some(w) = mask.get_mut(id / 64) {
                    *w |= 1 << (id % 64);
                }
            }
        }
        mask
    }

    fn open(&self, asid: u32) -> Result<Arc<dyn AsidQueues>> {
        // The one compute context's ASID in the QMANs' CB fetches and the
        // DMA cores' reads and writes (`gaudi2_mmu_prepare`,
        // gaudi2/gaudi2.c:8100-8117): RD 25:16, WR 9:0.
        let v = (asid & 0x3FF) << 16 | (asid & 0x3FF);
        // A new context finds the user's synchronisation state reset.
        self.core.hw.restore_user_registers()?;
        self.core.state.lock().asid = asid;
        let m = &self.core.hw.mmio;
        for (qman, &base) in r::QM_BASES.iter().enumerate() {
            m.wreg(base + qm::AXUSER_HB_ASID, v)?;
            if r::qman_has_dma(qman) {
                m.wreg(base + r::PDMA_CORE_OFFSET + r::CORE_AXUSER_HB_ASID, v)?;
            }
        }
        // The sync managers' writes for the user (gaudi2_mmu_prepare,
        // gaudi2/gaudi2.c:7962-7973): DCORE0's user monitors with the
        // context's ASID, every write of DCORE1..3's (all the user's).
        for d in 0..r::DCORES {
            let off = d * r::DCORE_OFFSET;
            m.wreg(sm::GLBL_ASID_NONE_SEC_PRIV + off, asid & 0x3FF)?;
            if d > 0 {
                m.wreg(sm::MSTR_IF_AXUSER_HB_ASID + off, v)?;
                m.wreg(sm::MSTR_IF_AXUSER_HB_MMU_BP + off, 0)?;
            }
        }
        // The DMA cores run again, for this context only.
        self.core.hw.hold_dma_cores(false)?;
        let engines = self.core.clone();
        Ok(Arc::new(PciQueues { engines }, GFP_KERNEL)?)
    }
}

/// The compute context's queues on the PCI device.
pub(crate) struct PciQueues {
    engines: Arc<EngineCore>,
}

impl AsidQueues for PciQueues {
    fn prepare(&self, _queues: &mut dyn Iterator<Item = u32>) -> Result {
        // Nothing to prepare: the PQs exist from probe on (a queue the
        // device does not run is refused by the CS code, after the CS got
        // its number, and by `submit`).
        Ok(())
    }

    fn submit(&self, jobs: &mut KVec<EngineJob>) -> Result {
        let e = &self.engines;
        let m = &e.hw.mmio;
        let mut st = e.state.lock();
        if st.bufs.is_none() {
            return Err(ENODEV);
        }
        if jobs.len() > SLOTS {
            // More jobs than the device ever has in flight: no retry helps.
            return Err(EINVAL);
        }
        if jobs.len() > st.free.len {
            return Err(EAGAIN);
        }
        let mut rung = QueueSet::default();
        for (n, j) in jobs.iter().enumerate() {
            if let Err(err) = st.queue_job(m, j) {
                // Undo this batch: nothing was rung; the jobs queued are
                // the last pushed on their FIFOs, undone in reverse order.
                for j in jobs.iter().take(n).rev() {
                    st.unqueue_job(j);
                }
                return Err(err);
            }
            if let Some(i) = queue_index(j.queue) {
                rung.add(i);
            }
        }
        for i in (0..NQ).filter(|&i| rung.has(i)) {
            let (Some((base, q, _)), Some(&pi)) = (slot_regs(i), st.pi.get(i)) else {
                continue;
            };
            // A doorbell that fails: the device is gone; the jobs end at the
            // halt of the close or the unbind.
            let _ = m.wreg(base + qm::PQ_PI + 4 * q, pi);
            bump(&m.counters.doorbells);
        }
        drop(st);
        for _ in 0..jobs.len() {
            bump(&m.counters.cs_jobs);
        }
        jobs.clear();
        Ok(())
    }

    fn halt(&self, queues: Option<&mut dyn Iterator<Item = u32>>) {
        let mask = match queues {
            None => QueueSet::ALL,
            Some(qs) => qs
                .filter_map(queue_index)
                .fold(QueueSet::default(), |mut m, i| {
                    m.add(i);
                    m
                }),
        };
        if !mask.is_empty() {
            self.engines.halt_mask(mask);
        }
    }

    fn quiesce(&self) {
        // Every job ends at a halt (synchronously); the close halted all of
        // them before. What a submission racing the close queued meanwhile
        // is halted here.
        while self.engines.in_flight() > 0 {
            self.engines.halt_mask(QueueSet::ALL);
        }
        // A transfer a CB committed on a DMA core by its registers, and a
        // chain of monitors, may outlive its CS: they end with the
        // context. A dead device runs nothing any more.
        let _ = self.engines.hw.end_user_context();
    }

    #[cfg(CONFIG_KUNIT)]
    fn threads(&self) -> usize {
        0
    }

    fn sync_streams(&self) -> bool {
        true
    }

    fn reset_sob(&self, sob: u32) -> Result {
        if !(GAUDI2_RESERVED_SOB_NUMBER..GAUDI2_FIRST_USER_SOB).contains(&sob) {
            return Err(EINVAL);
        }
        self.engines.hw.mmio.wreg(sm::SOB_OBJ_0 + 4 * sob, 0)
    }
}

#[kunit_tests(hlrs_pci_queues)]
mod tests {
    use super::*;

    #[test]
    fn a_ring_keeps_order_wraps_and_undoes() -> Result {
        let mut r = Ring::new(3)?;
        assert!(r.push(1) && r.push(2) && r.push(3));
        assert!(!r.push(4));
        assert_eq!(r.pop(), Some(1));
        assert!(r.push(4));
        assert_eq!(r.pop_back(), Some(4));
        assert!(r.remove(3));
        assert!(!r.remove(3));
        assert_eq!((r.pop(), r.pop(), r.len), (Some(2), None, 0));
        let mut empty = Ring::new(0)?;
        assert!(!empty.push(1));
        assert_eq!((empty.pop(), empty.pop_back()), (None, None));
        Ok(())
    }

    #[test]
    fn a_queue_set_holds_every_slot() {
        let mut s = QueueSet::default();
        assert!(s.is_empty() && !s.has(0) && !QueueSet::ALL.is_empty());
        for i in [0, 63, 64, 127, 128, NQ - 1] {
            s.add(i);
            assert!(s.has(i) && QueueSet::ALL.has(i));
        }
        assert!(!s.has(1) && !s.has(NQ) && !s.is_empty());
        s.add(NQ + 500);
        assert!(!s.has(NQ + 500));
    }

    #[test]
    fn queue_slots_are_upstreams_enabled_queues() {
        let enabled_queues = (0..GAUDI2_QUEUE_ID_SIZE)
            .filter_map(queue_index)
            .filter(|&i| enabled(i))
            .count();
        // PDMA_0_0, _0_1, _1_0, and 4 streams of 8 EDMAs, 4 MMEs, 25 TPCs.
        assert_eq!(enabled_queues, 3 + 4 * (8 + 4 + 25));
        assert_eq!(queue_index(GAUDI2_QUEUE_ID_PDMA_1_0), Some(4));
        assert_eq!(queue_index(5), None);
        assert_eq!(slot_regs(4).map(|x| x.2), Some(GAUDI2_ENGINE_ID_PDMA_1));
        assert_eq!(
            queue_index(GAUDI2_QUEUE_ID_DCORE1_EDMA_0_0).and_then(slot_regs),
            Some((
                0x43C_A000,
                0,
                GAUDI2_DCORE0_ENGINE_ID_EDMA_0 + GAUDI2_ENGINE_IDS_PER_DCORE
            ))
        );
        // DCORE0's MME, its TPC 6, DCORE3's TPC 5 (stream 3).
        assert_eq!(
            queue_index(16).and_then(slot_regs),
            Some((0x40C_A000, 0, 2))
        );
        assert_eq!(
            queue_index(44).and_then(slot_regs),
            Some((0x406_A000, 0, 44))
        );
        assert_eq!(
            queue_index(155).and_then(slot_regs),
            Some((0x465_A000, 3, 41))
        );
    }
}
