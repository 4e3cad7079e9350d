// SPDX-License-Identifier: GPL-2.0

//! Every user QMAN of Gaudi2 and its command processors' registers: what
//! `gaudi2_init_qman` and friends program (gaudi2/gaudi2.c:5395-5612) and
//! what a doorbell starts.
//!
//! The QMANs, indexed by their first queue id / 4 (`enum gaudi2_queue_id`,
//! include/uapi/drm/habanalabs_accel.h:200-353), bases `mm*_QM_BASE` of
//! asic_reg/gaudi2_blocks_linux_driver.h: PDMA0 0x4C8_A000 (qid 0), PDMA1
//! 0x4C9_A000 (4), then per dcore `d` (block `0x400_0000 + d x 0x20_0000`,
//! `DCORE_OFFSET`) in queue-id order: EDMA0 (block plus 0x1C_A000), EDMA1
//! (plus 0x1D_A000), the MME (plus 0xC_A000), TPC `t` (plus 0xA000 +
//! t x 0x1_0000, `DCORE_TPC_OFFSET`), t 0..6 and DCORE0's TPC6. See
//! [`base`], [`decode`], and `super::regs::EVENT_QM` for the error events.
//!
//! Per QMAN: 4 streams (upper CPs 0..3, each with its PQ) and the lower CP
//! (CP 4), each CP with its message bases, fence counters, predicates and
//! scalar registers (`super::cp`). Per stream `q`: `PQ_BASE` (a host bus
//! address), `PQ_SIZE` (log2 of the entries), `PQ_PI` (the doorbell:
//! `gaudi2_ring_doorbell`, gaudi2/gaudi2.c:7038-7060), `PQ_CI`; the PQC's
//! SOB base and increment. A stream fetches and runs work only when its
//! `PQF_EN` bit of `GLBL_CFG0` is set; the `CP_EN` bits (13:9) are kept
//! but not checked (upstream sets them with the `PQF_EN` bits,
//! `QMAN_ENABLE`, gaudi2/gaudi2_masks.h:48-64), so the lower CP runs what
//! the upper CPs hand it.
//!
//! The PI runs modulo twice the entries, as upstream's
//! (`hl_queue_inc_ptr`), the entry being `PI mod entries`. A PI write only
//! queues work: [`super::Gaudi2::step`] fetches the BDs and runs their CBs.
//! Other registers of the blocks (the `ARB_*` arbitration registers among
//! them: accepted and read back, ordering nothing) are kept by the
//! register file.

use super::dma_core::{DmaCore, Wrote};
use super::half;
use super::regs::{self, qm};

/// QMANs the model runs: every user QMAN (queue ids 0..156, 4 per QMAN).
pub const QMANS: usize = 39;
/// Streams (PQs) per QMAN (`NUM_OF_PQ_PER_QMAN`).
pub const STREAMS: usize = 4;
/// CPs per QMAN, the streams' and the lower CP (`NUM_OF_CP_PER_QMAN`).
pub const CPS: usize = 5;
/// The lower CP's index.
pub const LOWER: usize = 4;
/// CB frames a CP nests (`CP_DMA` to the upper CP, `CB_LIST`); a call
/// deeper is a QMAN error.
pub const DEPTH: usize = 8;
/// CBs the lower CP queues from the upper CPs (`CP_DMA` with
/// `upper_cp = 0`); a full queue stalls the upper CP that hands one more.
pub const LOWER_FIFO: usize = 4;

/// What engine a QMAN feeds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A PDMA or an EDMA: a DMA core runs `LIN_DMA`.
    Dma,
    /// An MME: no engine behind the model's QMAN.
    Mme,
    /// A TPC: no engine behind the model's QMAN.
    Tpc,
}

/// The block base of QMAN `m` (`m` = its first queue id / 4). O(1).
pub const fn base(m: usize) -> Option<u32> {
    match m {
        0 => Some(regs::PDMA0_QM_BASE),
        1 => Some(regs::PDMA1_QM_BASE),
        2..=11 => Some(dcore_qm(0, m - 2)),
        12..=38 => {
            let r = m - 12;
            Some(dcore_qm(1 + (r / 9) as u32, r % 9))
        }
        _ => None,
    }
}

/// QMAN `i` of dcore `d` in queue-id order: EDMA0, EDMA1, MME, TPC0..
const fn dcore_qm(d: u32, i: usize) -> u32 {
    let dcore = d * regs::DCORE_OFFSET;
    match i {
        0 => regs::DCORE0_EDMA0_QM_BASE + dcore,
        1 => regs::DCORE0_EDMA0_QM_BASE + regs::DCORE_EDMA_OFFSET + dcore,
        2 => regs::DCORE0_MME_QM_BASE + dcore,
        t => regs::DCORE0_TPC0_QM_BASE + (t as u32 - 3) * regs::DCORE_TPC_OFFSET + dcore,
    }
}

/// The engine QMAN `m` feeds. O(1).
pub const fn kind(m: usize) -> Kind {
    let i = if m < 2 {
        return Kind::Dma;
    } else if m < 12 {
        m - 2
    } else {
        (m - 12) % 9
    };
    match i {
        0 | 1 => Kind::Dma,
        2 => Kind::Mme,
        _ => Kind::Tpc,
    }
}

/// The QMAN index and offset of `reg` in a QMAN block, or in the DMA
/// core's block of a DMA QMAN (offsets from [`regs::PDMA_CORE_OFFSET`]). Block arithmetic: every QMAN block starts
/// 0xA000 into a 64 KiB engine block (its dcore's 64 KiB block number
/// names the engine: TPC 0..6, MME 0xC, EDMA 0x1C/0x1D; PDMA0/1 at
/// 0x4C8_0000 / 0x4C9_0000). O(1).
pub fn decode(reg: u32) -> Option<(usize, u32)> {
    const PDMA_SPAN: u32 = 0x1_0000;
    let (m, off) = if (regs::PDMA0_QM_BASE..regs::PDMA1_QM_BASE + PDMA_SPAN).contains(&reg) {
        let rel = reg - regs::PDMA0_QM_BASE;
        ((rel / PDMA_SPAN) as usize, rel % PDMA_SPAN)
    } else {
        let rel = reg.checked_sub(regs::DCORE0_BASE)?;
        let d = rel / regs::DCORE_OFFSET;
        if d >= regs::DCORES {
            return None;
        }
        let within = rel % regs::DCORE_OFFSET;
        let (sub, off) = (within / 0x1_0000, (within % 0x1_0000).checked_sub(0xA000)?);
        let i = match sub {
            0x1C => 0,
            0x1D => 1,
            0xC => 2,
            t @ 0..=6 if t < 6 || d == 0 => 3 + t as usize,
            _ => return None,
        };
        let m = if d == 0 {
            2 + i
        } else {
            12 + 9 * (d as usize - 1) + i
        };
        (m, off)
    };
    let core = (regs::PDMA_CORE_OFFSET..regs::PDMA_CORE_OFFSET + regs::QM_SPAN).contains(&off);
    (off < regs::QM_SPAN || core && kind(m) == Kind::Dma).then_some((m, off))
}

/// One CB frame of a CP: the CB and how far it ran.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Frame {
    /// The CB's device address.
    pub cb: u64,
    /// Bytes of the CB.
    pub len: u32,
    /// Bytes of the CB done.
    pub pc: u32,
}

/// One command processor (an upper CP of a stream or the lower CP).
#[derive(Clone, Copy, Debug)]
pub struct Cp {
    /// `CP_MSG_BASE0..3` of this CP.
    pub msg_base: [u64; 4],
    /// `CP_FENCE0..3_CNT` of this CP.
    pub fence: [u32; 4],
    /// The CB frames, `frames[depth - 1]` running.
    pub frames: [Frame; DEPTH],
    /// Frames in use (0: idle).
    pub depth: u8,
    /// Bytes of the `LIN_DMA` at the top frame's `pc` done.
    pub dma_done: u32,
    /// The predicates, bit `p` predicate `p` (bit 0 always set).
    pub pred: u32,
    /// The scalar registers R0..R3 (`LOAD_AND_EXE` with `dst` 1).
    pub scalars: [u32; 4],
    /// Waiting at a `FENCE` whose counter is short.
    pub fenced: bool,
    /// Waiting at a `CP_DMA` for room in the lower CP's queue.
    pub stalled: bool,
    /// Stopped by an error until `GLBL_CFG1` is written.
    pub halted: bool,
}

impl Cp {
    /// An idle CP. O(DEPTH).
    pub const fn new() -> Self {
        Self {
            msg_base: [0; 4],
            fence: [0; 4],
            frames: [Frame {
                cb: 0,
                len: 0,
                pc: 0,
            }; DEPTH],
            depth: 0,
            dma_done: 0,
            pred: 1,
            scalars: [0; 4],
            fenced: false,
            stalled: false,
            halted: false,
        }
    }

    /// The frame running. O(1).
    pub fn top(&self) -> Option<&Frame> {
        self.frames.get(usize::from(self.depth).checked_sub(1)?)
    }

    /// The frame running, to move it on. O(1).
    pub fn top_mut(&mut self) -> Option<&mut Frame> {
        self.frames.get_mut(usize::from(self.depth).checked_sub(1)?)
    }

    /// Drop every frame. O(1).
    pub fn drop_work(&mut self) {
        self.depth = 0;
        self.dma_done = 0;
        self.fenced = false;
        self.stalled = false;
        self.halted = false;
    }
}

impl Default for Cp {
    fn default() -> Self {
        Self::new()
    }
}

/// One stream: its PQ and its (upper) CP.
#[derive(Clone, Copy, Debug, Default)]
pub struct Stream {
    /// `PQ_BASE_LO/HI`.
    pub pq_base: u64,
    /// `PQ_SIZE`: log2 of the entries.
    pub pq_size: u32,
    /// `PQ_PI`.
    pub pi: u32,
    /// The fetch index.
    pub ci: u32,
    /// `PQC_LBW_BASE_LO/HI`.
    pub pqc_base: u64,
    /// `PQC_LBW_WDATA`: what the PQC writes.
    pub pqc_wdata: u32,
    /// The `ctl` of the BD whose CB is in progress (its `COMP_OFFSET` names
    /// the SOB the PQC increments).
    pub bd: Option<u32>,
    /// CBs this stream handed to the lower CP not done yet: the BD
    /// completes after them.
    pub handed: u8,
    /// The stream's CP.
    pub cp: Cp,
    /// Stopped by the driver (`GLBL_CFG1`'s `PQF_STOP` or `CP_STOP` bit of
    /// the stream) until a write clears the bit.
    pub stopped: bool,
}

impl Stream {
    /// An idle stream. O(DEPTH).
    pub const fn new() -> Self {
        Self {
            pq_base: 0,
            pq_size: 0,
            pi: 0,
            ci: 0,
            pqc_base: 0,
            pqc_wdata: 0,
            bd: None,
            handed: 0,
            cp: Cp::new(),
            stopped: false,
        }
    }

    /// Entries of the PQ (`1 << PQ_SIZE`, at most 2^16).
    pub fn entries(&self) -> u32 {
        1u32.checked_shl(self.pq_size.min(16)).unwrap_or(1)
    }

    /// Whether the stream has work to do (now or once the lower CP did
    /// what it handed there).
    pub fn busy(&self) -> bool {
        !self.cp.halted && (self.bd.is_some() || self.ci != self.pi)
    }
}

/// A CB queued for the lower CP.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Handed {
    /// The CB.
    pub cb: u64,
    /// Its bytes.
    pub len: u32,
    /// The stream that handed it.
    pub from: u8,
}

/// One QMAN (with its DMA core's ASIDs when it is a DMA's).
#[derive(Clone, Copy, Debug)]
pub struct Qman {
    /// `GLBL_CFG0`.
    pub cfg0: u32,
    /// `PQC_CFG`.
    pub pqc_cfg: u32,
    /// `AXUSER_NONSECURED_HB_ASID` of the QMAN (CB fetches, messages).
    pub qm_asid: u32,
    /// The DMA core (DMA QMANs only): its ASIDs (`LIN_DMA` data) and its
    /// context registers, a user's transfer (`super::dma_core`).
    pub core: DmaCore,
    /// The streams.
    pub streams: [Stream; STREAMS],
    /// The lower CP.
    pub lower: Cp,
    /// The stream whose CB the lower CP runs.
    pub lower_from: u8,
    /// CBs queued for the lower CP, oldest first.
    pub fifo: [Handed; LOWER_FIFO],
    /// Entries of `fifo` in use.
    pub fifo_len: u8,
}

/// What a register write asks of the device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Effect {
    /// Not this block's: keep it in the register file.
    NotMine,
    /// Done.
    Done,
    /// A doorbell: work may be queued.
    Doorbell,
    /// A fence counter grew: a fenced CP may go on.
    Fence,
    /// A `COMMIT` started the DMA core's transfer.
    Commit,
    /// A `COMMIT` the model does not execute: the DMA core's error.
    CommitRefused,
}

/// Which register of a per-CP array starting at `first` with `n` entries
/// `off` is.
fn per(off: u32, first: u32, n: usize) -> Option<usize> {
    let rel = off.checked_sub(first)?;
    let i = usize::try_from(rel / 4).ok()?;
    (rel % 4 == 0 && i < n).then_some(i)
}

/// The message base `n` and whether the high half, of a `CP_MSG_BASE`
/// register offset, and the CP.
fn msg_base(off: u32) -> Option<(usize, bool, usize)> {
    let rel = off.checked_sub(qm::CP_MSG_BASE0_LO)?;
    let (n, within) = (rel / 0x28, rel % 0x28);
    let (high, cp) = if within >= 0x14 {
        (true, (within - 0x14) / 4)
    } else {
        (false, within / 4)
    };
    (n < 4 && within % 4 == 0 && (cp as usize) < CPS).then_some((n as usize, high, cp as usize))
}

impl Qman {
    /// An idle QMAN. O(CPS x DEPTH).
    pub const fn new() -> Self {
        Self {
            cfg0: 0,
            pqc_cfg: 0,
            qm_asid: 0,
            core: DmaCore::new(),
            streams: [const { Stream::new() }; STREAMS],
            lower: Cp::new(),
            lower_from: 0,
            fifo: [Handed {
                cb: 0,
                len: 0,
                from: 0,
            }; LOWER_FIFO],
            fifo_len: 0,
        }
    }

    /// CP `c` (0..4 the streams', [`LOWER`] the lower). O(1).
    pub fn cp(&self, c: usize) -> Option<&Cp> {
        if c == LOWER {
            Some(&self.lower)
        } else {
            self.streams.get(c).map(|s| &s.cp)
        }
    }

    /// CP `c`, to change it. O(1).
    pub fn cp_mut(&mut self, c: usize) -> Option<&mut Cp> {
        if c == LOWER {
            Some(&mut self.lower)
        } else {
            self.streams.get_mut(c).map(|s| &mut s.cp)
        }
    }

    /// Whether any CP of the QMAN may have work: a stream enabled, or the
    /// lower CP busy. O(1).
    pub fn may_run(&self) -> bool {
        self.cfg0 & 0xF != 0 || self.lower_busy()
    }

    /// Whether the lower CP has work (a CB running or queued). O(1).
    pub fn lower_busy(&self) -> bool {
        !self.lower.halted && (self.lower.depth > 0 || self.fifo_len > 0)
    }

    /// The register at `off` if the model gives it meaning. O(1).
    pub fn read(&self, off: u32) -> Option<u32> {
        let s = &self.streams;
        match off {
            qm::GLBL_CFG0 => return Some(self.cfg0),
            qm::GLBL_STS0 => {
                // Idle bits: PQF and CP of a stream with no work, CQF
                // always, the lower CP's (bit 13) when it has none.
                let idle = s.iter().enumerate().fold(0x1F0u32, |acc, (q, st)| {
                    if st.busy() {
                        acc
                    } else {
                        acc | 1 << q | 1 << (9 + q)
                    }
                });
                return Some(idle | u32::from(!self.lower_busy()) << 13);
            }
            qm::PQC_CFG => return Some(self.pqc_cfg),
            qm::AXUSER_HB_ASID => return Some(self.qm_asid),
            o if o >= regs::PDMA_CORE_OFFSET => {
                return self.core.read(o - regs::PDMA_CORE_OFFSET);
            }
            _ => {}
        }
        let st = |first| per(off, first, STREAMS).and_then(|q| s.get(q));
        if let Some(x) = st(qm::PQ_BASE_LO) {
            return Some(x.pq_base as u32);
        }
        if let Some(x) = st(qm::PQ_BASE_HI) {
            return Some((x.pq_base >> 32) as u32);
        }
        if let Some(x) = st(qm::PQ_SIZE) {
            return Some(x.pq_size);
        }
        if let Some(x) = st(qm::PQ_PI) {
            return Some(x.pi);
        }
        if let Some(x) = st(qm::PQ_CI) {
            return Some(x.ci);
        }
        let cp = |first| per(off, first, CPS).and_then(|c| self.cp(c));
        if let Some(x) = cp(qm::GLBL_ERR_STS) {
            return Some(u32::from(x.halted));
        }
        let inst = |x: &Cp| x.top().map_or(0, |f| f.cb.wrapping_add(u64::from(f.pc)));
        if let Some(x) = cp(qm::CP_CURRENT_INST_LO) {
            return Some(inst(x) as u32);
        }
        if let Some(x) = cp(qm::CP_CURRENT_INST_HI) {
            return Some((inst(x) >> 32) as u32);
        }
        for n in 0..4u32 {
            if let Some(x) = cp(qm::CP_FENCE0_CNT + 0x14 * n) {
                return x.fence.get(n as usize).copied();
            }
        }
        if let Some(x) = cp(qm::CP_PRED) {
            return Some(x.pred);
        }
        None
    }

    /// Write the register at `off`. O(1), `GLBL_CFG1` O(CPS x LOWER_FIFO).
    pub fn write(&mut self, off: u32, val: u32) -> Effect {
        match off {
            qm::GLBL_CFG0 => self.cfg0 = val,
            qm::GLBL_CFG1 => {
                self.cfg1(val);
                return Effect::NotMine;
            }
            qm::PQC_CFG => self.pqc_cfg = val,
            qm::AXUSER_HB_ASID => self.qm_asid = val,
            o if o >= regs::PDMA_CORE_OFFSET => {
                return match self.core.write(o - regs::PDMA_CORE_OFFSET, val) {
                    Some(Wrote::Stored) => Effect::Done,
                    Some(Wrote::Started) => Effect::Commit,
                    Some(Wrote::Refused) => Effect::CommitRefused,
                    None => Effect::NotMine,
                };
            }
            _ => return self.write_per(off, val),
        }
        Effect::Done
    }

    /// The per-stream and per-CP registers.
    fn write_per(&mut self, off: u32, val: u32) -> Effect {
        let at = |first| per(off, first, STREAMS);
        let s = &mut self.streams;
        if let Some(x) = at(qm::PQ_BASE_LO).and_then(|q| s.get_mut(q)) {
            half(&mut x.pq_base, false, val);
        } else if let Some(x) = at(qm::PQ_BASE_HI).and_then(|q| s.get_mut(q)) {
            half(&mut x.pq_base, true, val);
        } else if let Some(x) = at(qm::PQ_SIZE).and_then(|q| s.get_mut(q)) {
            x.pq_size = val;
        } else if let Some(x) = at(qm::PQ_PI).and_then(|q| s.get_mut(q)) {
            x.pi = val % x.entries().saturating_mul(2);
            return Effect::Doorbell;
        } else if let Some(x) = at(qm::PQ_CI).and_then(|q| s.get_mut(q)) {
            x.ci = val % x.entries().saturating_mul(2);
        } else if let Some(x) = at(qm::PQC_LBW_BASE_LO).and_then(|q| s.get_mut(q)) {
            half(&mut x.pqc_base, false, val);
        } else if let Some(x) = at(qm::PQC_LBW_BASE_HI).and_then(|q| s.get_mut(q)) {
            half(&mut x.pqc_base, true, val);
        } else if let Some(x) = at(qm::PQC_LBW_WDATA).and_then(|q| s.get_mut(q)) {
            x.pqc_wdata = val;
        } else if let Some(x) = per(off, qm::CP_PRED, CPS).and_then(|c| self.cp_mut(c)) {
            // The CP's predicates (what `LOAD_AND_EXE` loads); predicate 0
            // always holds.
            x.pred = val | 1;
        } else if let Some((n, high, c)) = msg_base(off) {
            match self.cp_mut(c).and_then(|x| x.msg_base.get_mut(n)) {
                Some(b) => half(b, high, val),
                None => return Effect::NotMine,
            }
        } else {
            for n in 0..4u32 {
                let c = |first| per(off, first, CPS);
                if let Some(x) = c(qm::CP_FENCE0_RDATA + 0x14 * n).and_then(|c| self.cp_mut(c)) {
                    if let Some(v) = x.fence.get_mut(n as usize) {
                        *v = v.saturating_add(val);
                    }
                    return Effect::Fence;
                }
                if let Some(x) = c(qm::CP_FENCE0_CNT + 0x14 * n).and_then(|c| self.cp_mut(c)) {
                    if let Some(v) = x.fence.get_mut(n as usize) {
                        *v = val;
                    }
                    return Effect::Fence;
                }
            }
            return Effect::NotMine;
        }
        Effect::Done
    }

    /// Whether stream `q` may fetch and run (its `PQF_EN` bit is set and
    /// the driver did not stop it).
    pub fn enabled(&self, q: usize) -> bool {
        q < STREAMS && self.cfg0 & (1 << q) != 0 && self.streams.get(q).is_some_and(|s| !s.stopped)
    }

    /// A `GLBL_CFG1` write (asic_reg/pdma0_qm_masks.h:34-45): per stream
    /// `q`, `PQF_STOP` (bit q) or `CP_STOP` (bit 9 + q) stops it until a
    /// write clears them; `PQF_FLUSH` (bit 16 + q) or `CP_FLUSH` (bit
    /// 25 + q) drops its CB in progress and every BD fetched or not (CI
    /// = PI), its fence wait, its error halt and the CBs it handed to the
    /// lower CP (queued or running). This is upstream's stop-then-flush of
    /// `gaudi2_stop_qmans` / `gaudi2_flush_qmans` (gaudi2/gaudi2.c:
    /// 4198-4210), per stream. A write without the stream's flush bits
    /// releases an error halt: the failing CB is dropped and the stream
    /// goes on with its next BD (upstream resets the device after a QMAN
    /// error instead; the driver here reports the failing job and keeps
    /// the others). A halted lower CP is released likewise, dropping its
    /// CB and its queue. O(STREAMS x LOWER_FIFO).
    fn cfg1(&mut self, val: u32) {
        if self.lower.halted {
            self.lower.drop_work();
            self.fifo_len = 0;
            self.streams.iter_mut().for_each(|s| s.handed = 0);
            self.room();
        }
        for q in 0..STREAMS {
            let Some(s) = self.streams.get_mut(q) else {
                continue;
            };
            s.stopped = val & (1 << q | 1 << (9 + q)) != 0;
            let flush = val & (1 << (16 + q) | 1 << (25 + q)) != 0;
            if flush {
                s.ci = s.pi;
            }
            if flush || s.cp.halted {
                s.cp.drop_work();
                s.bd = None;
                if s.handed > 0 {
                    s.handed = 0;
                    self.drop_handed(q as u8);
                }
            }
        }
    }

    /// Drop the CBs stream `from` handed to the lower CP. O(LOWER_FIFO).
    fn drop_handed(&mut self, from: u8) {
        let mut kept = 0usize;
        for i in 0..usize::from(self.fifo_len) {
            let Some(e) = self.fifo.get(i).copied() else {
                break;
            };
            if e.from != from {
                if let Some(slot) = self.fifo.get_mut(kept) {
                    *slot = e;
                }
                kept += 1;
            }
        }
        self.fifo_len = kept as u8;
        self.room();
        if self.lower_from == from && self.lower.depth > 0 {
            self.lower.drop_work();
        }
    }

    /// Queue `e` for the lower CP; false when the queue is full. O(1).
    pub fn hand(&mut self, e: Handed) -> bool {
        let Some(slot) = self.fifo.get_mut(usize::from(self.fifo_len)) else {
            return false;
        };
        *slot = e;
        self.fifo_len += 1;
        if let Some(s) = self.streams.get_mut(usize::from(e.from)) {
            s.handed = s.handed.saturating_add(1);
        }
        true
    }

    /// Take the oldest CB queued for the lower CP. O(LOWER_FIFO).
    pub fn take(&mut self) -> Option<Handed> {
        if self.fifo_len == 0 {
            return None;
        }
        let e = self.fifo.first().copied()?;
        self.fifo.copy_within(1.., 0);
        self.fifo_len -= 1;
        self.room();
        Some(e)
    }

    /// The lower CP's queue has room: the upper CPs stalled on it retry.
    /// O(STREAMS).
    fn room(&mut self) {
        self.streams.iter_mut().for_each(|s| s.cp.stalled = false);
    }
}

impl Default for Qman {
    fn default() -> Self {
        Self::new()
    }
}
