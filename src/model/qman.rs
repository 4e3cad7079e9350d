// SPDX-License-Identifier: GPL-2.0

//! The PDMA QMANs (PDMA0 at 0x4C8_A000, PDMA1 at 0x4C9_A000) and their DMA
//! cores' ASID registers: what `gaudi2_init_pdma` and friends program
//! (gaudi2/gaudi2.c:5395-5612) and what a doorbell starts.
//!
//! Per stream `q` (0..4): `PQ_BASE` (a host bus address), `PQ_SIZE` (log2
//! of the entries), `PQ_PI` (the doorbell: `gaudi2_ring_doorbell`,
//! gaudi2/gaudi2.c:7038-7060), `PQ_CI`; the CP's message bases and fence
//! counters; the PQC's SOB base and increment. A stream fetches work only
//! when its `PQF_EN` bit of `GLBL_CFG0` is set (`PDMA0_QMAN_ENABLE` sets
//! streams 0-1, `PDMA1_QMAN_ENABLE` stream 0, gaudi2/gaudi2_masks.h:54-64).
//!
//! The PI runs modulo twice the entries, as upstream's
//! (`hl_queue_inc_ptr`), the entry being `PI mod entries`. A PI write only
//! queues work: [`super::Gaudi2::step`] fetches the BDs and runs their CBs
//! (`super::cp`). Other registers of the blocks are kept by the register
//! file.

use super::half;
use super::regs::{self, qm};

/// QMANs the model runs (`regs::QM_BASES`: PDMA0, PDMA1, the 8 EDMAs).
pub const QMANS: usize = 10;
/// Streams (PQs) per QMAN (`NUM_OF_PQ_PER_QMAN`).
pub const STREAMS: usize = 4;
/// CPs per QMAN, the streams' and the lower CP (`NUM_OF_CP_PER_QMAN`).
pub const CPS: usize = 5;

/// A CB being run by a stream's CP.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Job {
    /// The CB's device address and bytes (the BD's `ptr`, `len`).
    pub cb: u64,
    /// Bytes of the CB.
    pub len: u32,
    /// The BD's `ctl` (its `COMP_OFFSET` names the SOB the PQC increments).
    pub ctl: u32,
    /// Bytes of the CB done.
    pub pc: u32,
    /// Bytes of the `LIN_DMA` at `pc` done (it runs in chunks).
    pub dma_done: u32,
}

/// One stream.
#[derive(Clone, Copy, Debug, Default)]
pub struct Stream {
    /// `PQ_BASE_LO/HI`.
    pub pq_base: u64,
    /// `PQ_SIZE`: log2 of the entries.
    pub pq_size: u32,
    /// `PQ_PI`, `PQ_CI`.
    pub pi: u32,
    /// The fetch index.
    pub ci: u32,
    /// `CP_MSG_BASE0..3` of this stream's CP.
    pub msg_base: [u64; 4],
    /// `CP_FENCE0..3_CNT` of this stream's CP.
    pub fence: [u32; 4],
    /// `PQC_LBW_BASE_LO/HI` and `PQC_LBW_WDATA`.
    pub pqc_base: u64,
    /// What the PQC writes.
    pub pqc_wdata: u32,
    /// The CB in progress.
    pub job: Option<Job>,
    /// Stopped by an error until `GLBL_CFG1` is written.
    pub halted: bool,
    /// Waiting at a `FENCE` whose counter is short.
    pub fenced: bool,
    /// Stopped by the driver (`GLBL_CFG1`'s `PQF_STOP` or `CP_STOP` bit of
    /// the stream) until a write clears the bit.
    pub stopped: bool,
}

impl Stream {
    /// Entries of the PQ (`1 << PQ_SIZE`, at most 2^16).
    pub fn entries(&self) -> u32 {
        1u32.checked_shl(self.pq_size.min(16)).unwrap_or(1)
    }

    /// Whether the stream has work to do now.
    pub fn busy(&self) -> bool {
        !self.halted && (self.job.is_some() || self.ci != self.pi)
    }
}

/// One QMAN with its DMA core's ASIDs.
#[derive(Clone, Copy, Debug, Default)]
pub struct Qman {
    /// `GLBL_CFG0`.
    pub cfg0: u32,
    /// `PQC_CFG`.
    pub pqc_cfg: u32,
    /// `AXUSER_NONSECURED_HB_ASID` of the QMAN (CB fetches) and of the core
    /// (`LIN_DMA` data).
    pub qm_asid: u32,
    /// The DMA core's.
    pub core_asid: u32,
    /// The streams.
    pub streams: [Stream; STREAMS],
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
    /// A fence counter grew: a fenced stream may go on.
    Fence,
}

/// The QMAN index and offset of `reg` in a QMAN block or its core's ASID
/// register. O(QMANS).
pub fn decode(reg: u32) -> Option<(usize, u32)> {
    regs::QM_BASES.iter().enumerate().find_map(|(i, &base)| {
        let off = reg.checked_sub(base)?;
        (off < regs::QM_SPAN || off == regs::PDMA_CORE_OFFSET + regs::CORE_AXUSER_HB_ASID)
            .then_some((i, off))
    })
}

/// The stream `q` and which register of a per-stream array starting at
/// `first` with `n` entries `off` is.
fn per(off: u32, first: u32, n: usize) -> Option<usize> {
    let rel = off.checked_sub(first)?;
    let i = usize::try_from(rel / 4).ok()?;
    (rel % 4 == 0 && i < n).then_some(i)
}

/// The message base `n` and whether the high half, of a `CP_MSG_BASE`
/// register offset (`rel` from `CP_MSG_BASE0_LO`), and the CP.
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
    /// The register at `off` if the model gives it meaning. O(1).
    pub fn read(&self, off: u32) -> Option<u32> {
        let s = &self.streams;
        if off == qm::GLBL_CFG0 {
            return Some(self.cfg0);
        }
        if off == qm::GLBL_STS0 {
            // Idle bits: a stream with no work is idle (PQF and CP).
            let idle = s.iter().enumerate().fold(0x1F0u32, |acc, (q, st)| {
                if st.busy() {
                    acc
                } else {
                    acc | 1 << q | 1 << (9 + q)
                }
            });
            return Some(idle | 1 << 13);
        }
        if off == qm::PQC_CFG {
            return Some(self.pqc_cfg);
        }
        if off == qm::AXUSER_HB_ASID {
            return Some(self.qm_asid);
        }
        if off == regs::PDMA_CORE_OFFSET + regs::CORE_AXUSER_HB_ASID {
            return Some(self.core_asid);
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
        if let Some(x) = st(qm::GLBL_ERR_STS) {
            return Some(u32::from(x.halted));
        }
        let inst = |x: &Stream| x.job.map_or(0, |j| j.cb.wrapping_add(u64::from(j.pc)));
        if let Some(x) = st(qm::CP_CURRENT_INST_LO) {
            return Some(inst(x) as u32);
        }
        if let Some(x) = st(qm::CP_CURRENT_INST_HI) {
            return Some((inst(x) >> 32) as u32);
        }
        for n in 0..4u32 {
            if let Some(x) = per(off, qm::CP_FENCE0_CNT + 0x14 * n, STREAMS).and_then(|q| s.get(q))
            {
                return x.fence.get(n as usize).copied();
            }
        }
        None
    }

    /// Write the register at `off`. O(1).
    pub fn write(&mut self, off: u32, val: u32) -> Effect {
        match off {
            qm::GLBL_CFG0 => self.cfg0 = val,
            qm::GLBL_CFG1 => {
                self.cfg1(val);
                return Effect::NotMine;
            }
            qm::PQC_CFG => self.pqc_cfg = val,
            qm::AXUSER_HB_ASID => self.qm_asid = val,
            o if o == regs::PDMA_CORE_OFFSET + regs::CORE_AXUSER_HB_ASID => self.core_asid = val,
            _ => return self.write_stream(off, val),
        }
        Effect::Done
    }

    /// The per-stream registers.
    fn write_stream(&mut self, off: u32, val: u32) -> Effect {
        let s = &mut self.streams;
        let at = |first| per(off, first, STREAMS);
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
        } else if let Some((n, high, cp)) = msg_base(off) {
            if let Some(b) = s.get_mut(cp).and_then(|x| x.msg_base.get_mut(n)) {
                half(b, high, val);
            } else {
                return Effect::NotMine;
            }
        } else {
            for n in 0..4u32 {
                if let Some(x) = at(qm::CP_FENCE0_RDATA + 0x14 * n).and_then(|q| s.get_mut(q)) {
                    if let Some(c) = x.fence.get_mut(n as usize) {
                        *c = c.saturating_add(val);
                    }
                    return Effect::Fence;
                }
                if let Some(x) = at(qm::CP_FENCE0_CNT + 0x14 * n).and_then(|q| s.get_mut(q)) {
                    if let Some(c) = x.fence.get_mut(n as usize) {
                        *c = val;
                    }
                    return Effect::Fence;
                }
            }
            return Effect::NotMine;
        }
        Effect::Done
    }

    /// Whether stream `q` may fetch (its `PQF_EN` bit is set and the
    /// driver did not stop it).
    pub fn enabled(&self, q: usize) -> bool {
        q < STREAMS && self.cfg0 & (1 << q) != 0 && self.streams.get(q).is_some_and(|s| !s.stopped)
    }

    /// A `GLBL_CFG1` write (asic_reg/pdma0_qm_masks.h:34-45): per stream
    /// `q`, `PQF_STOP` (bit q) or `CP_STOP` (bit 9 + q) stops it until a
    /// write clears them; `PQF_FLUSH` (bit 16 + q) or `CP_FLUSH` (bit
    /// 25 + q) drops its CB in progress and every BD fetched or not (CI
    /// = PI), its fence wait and its error halt. This is upstream's
    /// stop-then-flush of `gaudi2_stop_qmans` / `gaudi2_flush_qmans`
    /// (gaudi2/gaudi2.c:4198-4210), per stream. A write without the
    /// stream's flush bits releases an error halt: the failing CB is
    /// dropped and the stream goes on with its next BD (upstream resets
    /// the device after a QMAN error instead; the driver here reports the
    /// failing job and keeps the others). O(STREAMS).
    fn cfg1(&mut self, val: u32) {
        for (q, s) in self.streams.iter_mut().enumerate() {
            s.stopped = val & (1 << q | 1 << (9 + q)) != 0;
            let flush = val & (1 << (16 + q) | 1 << (25 + q)) != 0;
            if flush {
                s.ci = s.pi;
            }
            if flush || s.halted {
                s.halted = false;
                s.fenced = false;
                s.job = None;
            }
        }
    }
}
