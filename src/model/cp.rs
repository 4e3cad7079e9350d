// SPDX-License-Identifier: GPL-2.0

//! The QMANs' command processors at work: what [`Gaudi2::step`] runs.
//!
//! A stream with work fetches the BD at its fetch index from the host PQ
//! (16 bytes: `ptr`, `len`, `ctl`, include/common/qman_if.h:17-21) and runs
//! the CB `[ptr, ptr + len)` packet by packet (`super::packets`): CB
//! fetches with the QMAN's read ASID, `LIN_DMA` data with the DMA core's
//! read and write ASIDs (`gaudi2_mmu_shared_prepare`, gaudi2/gaudi2.c:
//! 8100-8117), everything through the MMUs (`super::bus`). When the CB is
//! done the PQC increments SOB `COMP_OFFSET` (the BD's `ctl` bits 27:16):
//! an LBW write of `PQC_LBW_WDATA` to `PQC_LBW_BASE + 4 x COMP_OFFSET`
//! (`gaudi2_init_qman_pqc`, gaudi2/gaudi2.c:5417-5445), which reaches the
//! sync manager (`super::sm`) as a register write.
//!
//! Work is sliced: one call runs at most [`BUDGET`] units (a packet, or
//! [`DMA_CHUNK`] bytes of a `LIN_DMA`, a buffer on the stack), so a CB of any length or a 4 GiB
//! DMA never holds the caller for long; the job's position is kept. A
//! `FENCE` whose counter is short parks the stream until a
//! `CP_FENCE_RDATA` write. A packet the model cannot run, or a fault of an
//! access, halts the stream (until `GLBL_CFG1` is written) and is reported
//! on the event queue (`GAUDI2_EVENT_PDMA*_QM`; a fault also as the MMU's
//! event).

use super::events;
use super::packets::{self, LinDma, Packet, PacketError};
use super::qman::{Job, QMANS, STREAMS};
use super::regs;
use super::{Env, Gaudi2};

/// Work units one [`Gaudi2::step`] runs.
pub const BUDGET: u32 = 64;
/// Bytes of a `LIN_DMA` per unit.
pub const DMA_CHUNK: usize = 1024;

/// How running a unit of a job ended.
enum Unit {
    /// Go on.
    More,
    /// The CB is done.
    Done,
    /// Parked at a fence.
    Fenced,
    /// An error: halt the stream.
    Error,
}

impl Gaudi2 {
    /// Engine work is queued: the KDMA's transfer, or a stream of an
    /// enabled QMAN with BDs or a CB left, not parked at a fence.
    /// O(QMANS x STREAMS).
    pub fn pending(&self) -> bool {
        self.kdma.busy()
            || self.sm_pending()
            || self.qmans.iter().any(|m| {
                m.streams
                    .iter()
                    .enumerate()
                    .any(|(q, s)| m.enabled(q) && s.busy() && !s.fenced)
            })
    }

    /// Run at most [`BUDGET`] units of queued engine work; true while more
    /// is left. O(BUDGET x (packet + a 4 KiB copy)).
    pub fn step(&mut self, env: &mut dyn Env) -> bool {
        self.kdma_step(env);
        self.sm_run(env);
        let mut budget = BUDGET;
        'outer: while budget > 0 {
            let mut ran = false;
            for m in 0..QMANS {
                for q in 0..STREAMS {
                    if budget == 0 {
                        break 'outer;
                    }
                    if self.runnable(m, q) {
                        self.unit(env, m, q);
                        budget -= 1;
                        ran = true;
                    }
                }
            }
            if !ran {
                break;
            }
        }
        self.pending()
    }

    fn runnable(&self, m: usize, q: usize) -> bool {
        self.qmans.get(m).is_some_and(|qm| {
            qm.enabled(q) && qm.streams.get(q).is_some_and(|s| s.busy() && !s.fenced)
        })
    }

    /// One unit of stream `q` of QMAN `m`: fetch a BD, or run a packet or
    /// a DMA chunk of its CB.
    fn unit(&mut self, env: &mut dyn Env, m: usize, q: usize) {
        let Some(job) = self.stream(m, q).and_then(|s| s.job) else {
            self.fetch_bd(env, m, q);
            return;
        };
        let end = self.packet(env, m, q, job);
        let Some(s) = self.qmans.get_mut(m).and_then(|x| x.streams.get_mut(q)) else {
            return;
        };
        match end {
            Unit::More => {}
            Unit::Fenced => s.fenced = true,
            Unit::Error => {
                s.halted = true;
                let event = regs::EVENT_QM.get(m).copied().unwrap_or(0);
                self.post_event(env, event);
            }
            Unit::Done => {
                s.job = None;
                self.complete(env, m, q, job.ctl);
            }
        }
    }

    fn stream(&self, m: usize, q: usize) -> Option<&super::qman::Stream> {
        self.qmans.get(m).and_then(|x| x.streams.get(q))
    }

    /// Fetch the BD at the fetch index of stream `q` of QMAN `m`.
    fn fetch_bd(&mut self, env: &mut dyn Env, m: usize, q: usize) {
        let Some(s) = self.stream(m, q).copied() else {
            return;
        };
        let asid = self.asids(m).0;
        let slot = u64::from(s.ci % s.entries()) * 16;
        let mut bd = [0u8; 16];
        let read = match s.pq_base.checked_add(slot) {
            Some(at) => self.engine_read(env, asid, at, &mut bd).is_ok(),
            None => false,
        };
        let Some(st) = self.qmans.get_mut(m).and_then(|x| x.streams.get_mut(q)) else {
            return;
        };
        if !read {
            st.halted = true;
            return;
        }
        st.ci = (st.ci + 1) % st.entries().saturating_mul(2);
        st.job = Some(Job {
            cb: packets::le64(&bd, 0),
            len: packets::le32(&bd, 8),
            ctl: packets::le32(&bd, 12),
            pc: 0,
            dma_done: 0,
        });
    }

    /// The QMAN's read ASID and the DMA core's read and write ASIDs.
    fn asids(&self, m: usize) -> (u16, u16, u16) {
        let Some(x) = self.qmans.get(m) else {
            return (0, 0, 0);
        };
        let rd = |v: u32| ((v >> 16) & 0x3FF) as u16;
        let wr = |v: u32| (v & 0x3FF) as u16;
        (rd(x.qm_asid), rd(x.core_asid), wr(x.core_asid))
    }

    /// Run the packet at the job's `pc` (or a chunk of its `LIN_DMA`).
    fn packet(&mut self, env: &mut dyn Env, m: usize, q: usize, job: Job) -> Unit {
        let left = u64::from(job.len.saturating_sub(job.pc));
        if left == 0 {
            return Unit::Done;
        }
        let (qm_asid, _, _) = self.asids(m);
        let mut buf = [0u8; 24];
        let n = usize::try_from(left.min(24)).unwrap_or(24);
        let at = job.cb.wrapping_add(u64::from(job.pc));
        let Some(window) = buf.get_mut(..n) else {
            return Unit::Error;
        };
        if self.engine_read(env, qm_asid, at, window).is_err() {
            return Unit::Error;
        }
        let (packet, size) = match packets::decode(buf.get(..n).unwrap_or(&[]), left) {
            Ok(p) => p,
            // The DMA core refuses a LIN_DMA whose size is no whole number
            // of its swap words: its own error event, then the QMAN's.
            Err(PacketError::SwapSize { .. }) => {
                let qm = regs::EVENT_QM.get(m).copied().unwrap_or(0);
                self.post_event_data(env, events::dma_core(qm), [events::DMA_CORE_WRONG_CFG, 0]);
                return Unit::Error;
            }
            Err(_) => return Unit::Error,
        };
        self.stats.packets = self.stats.packets.wrapping_add(1);
        let next = |s: &mut super::qman::Stream| {
            if let Some(j) = s.job.as_mut() {
                j.pc = j.pc.saturating_add(size as u32);
                j.dma_done = 0;
            }
        };
        let unit = match packet {
            Packet::Stop => return Unit::Done,
            Packet::LinDma(d) => return self.lin_dma(env, m, q, job, d, size as u32),
            Packet::Fence { id, target, dec } => self.fence(m, q, id, target, dec),
            p => self.exec(env, m, q, job, p),
        };
        if matches!(unit, Unit::More) {
            if let Some(s) = self.qmans.get_mut(m).and_then(|x| x.streams.get_mut(q)) {
                next(s);
            }
        }
        unit
    }
}

impl Gaudi2 {
    /// `FENCE`: counter `id` of the stream's CP reached `target`? Then take
    /// `dec` off it and go on; else park. O(1).
    fn fence(&mut self, m: usize, q: usize, id: u32, target: u32, dec: u32) -> Unit {
        let Some(s) = self.qmans.get_mut(m).and_then(|x| x.streams.get_mut(q)) else {
            return Unit::Error;
        };
        let Some(c) = s.fence.get_mut(id as usize) else {
            return Unit::Error;
        };
        if *c >= target {
            *c = c.saturating_sub(dec);
            Unit::More
        } else {
            Unit::Fenced
        }
    }

    /// The register and message packets.
    fn exec(&mut self, env: &mut dyn Env, m: usize, q: usize, job: Job, p: Packet) -> Unit {
        let base = regs::QM_BASES.get(m).copied().unwrap_or(0);
        let (qm_asid, _, _) = self.asids(m);
        // A CB reaches no register (security: upstream's range registers
        // and protection bits keep the QMANs, MMUs and the driver's sync
        // objects from users; which ones users may write comes with the
        // sync manager, issue 32): a WREG or a message into the register
        // space is an address-decode error (RAZWI), as on the simulated
        // device. The PQC's and the monitors' own LBW writes are not CB
        // packets and still reach the sync manager.
        let cfg =
            |a: u64| (regs::CFG_BASE..regs::CFG_BASE.saturating_add(regs::CFG_SIZE)).contains(&a);
        let refused = match p {
            Packet::Wreg32 { offset, .. } | Packet::WregBulk { offset, .. } => Some(
                regs::CFG_BASE
                    .wrapping_add(u64::from(base))
                    .wrapping_add(u64::from(offset)),
            ),
            Packet::MsgLong { addr, .. } => cfg(addr).then_some(addr),
            Packet::MsgShort {
                base: b, offset, ..
            } => self
                .stream(m, q)
                .and_then(|s| s.msg_base.get(b as usize).copied())
                .map(|a| a.wrapping_add(u64::from(offset)))
                .filter(|&a| cfg(a)),
            _ => None,
        };
        if let Some(addr) = refused {
            self.razwi(env, addr);
            return Unit::Error;
        }
        let ok = match p {
            Packet::Nop
            | Packet::Stop
            | Packet::Fence { .. }
            | Packet::LinDma(_)
            | Packet::Wreg32 { .. } => true,
            Packet::WregBulk { offset, count } => {
                self.wreg_bulk(env, qm_asid, job, base, offset, count)
            }
            Packet::MsgLong { value, addr } => self
                .engine_write(env, qm_asid, addr, &value.to_le_bytes())
                .is_ok(),
            Packet::MsgShort {
                value,
                base: b,
                offset,
            } => {
                let msg = self
                    .stream(m, q)
                    .and_then(|s| s.msg_base.get(b as usize).copied())
                    .and_then(|a| a.checked_add(u64::from(offset)));
                msg.is_some_and(|a| {
                    self.engine_write(env, qm_asid, a, &value.to_le_bytes())
                        .is_ok()
                })
            }
        };
        if ok {
            Unit::More
        } else {
            Unit::Error
        }
    }

    /// `WREG_BULK`: `count` u64s after the header, each to the register at
    /// `base + offset + 4 i` (its low 32 bits).
    fn wreg_bulk(
        &mut self,
        env: &mut dyn Env,
        asid: u16,
        job: Job,
        base: u32,
        offset: u32,
        count: u32,
    ) -> bool {
        for i in 0..u64::from(count) {
            let at = job
                .cb
                .wrapping_add(u64::from(job.pc))
                .wrapping_add(8 + 8 * i);
            let mut v = [0u8; 8];
            let reg = u32::try_from(i * 4)
                .ok()
                .and_then(|o| base.checked_add(offset)?.checked_add(o));
            let (Some(reg), Ok(())) = (reg, self.engine_read(env, asid, at, &mut v)) else {
                return false;
            };
            self.reg_write(env, reg, packets::le32(&v, 0));
        }
        true
    }

    /// One chunk of a `LIN_DMA` of `size` packet bytes: at most
    /// [`DMA_CHUNK`] bytes from where the job left it.
    fn lin_dma(
        &mut self,
        env: &mut dyn Env,
        m: usize,
        q: usize,
        job: Job,
        d: LinDma,
        size: u32,
    ) -> Unit {
        let (_, rd, wr) = self.asids(m);
        let done = job.dma_done;
        let n = (d.tsize - done.min(d.tsize)).min(DMA_CHUNK as u32);
        let mut buf = [0u8; DMA_CHUNK];
        let Some(chunk) = buf.get_mut(..n as usize) else {
            return Unit::Error;
        };
        if d.memset {
            let fill = d.src.to_le_bytes();
            for (i, b) in chunk.iter_mut().enumerate() {
                *b = fill.get((done as usize + i) % 8).copied().unwrap_or(0);
            }
        } else if self
            .engine_read(env, rd, d.src.wrapping_add(u64::from(done)), chunk)
            .is_err()
        {
            return Unit::Error;
        }
        d.swap.apply(chunk);
        if self
            .engine_write(env, wr, d.dst.wrapping_add(u64::from(done)), chunk)
            .is_err()
        {
            return Unit::Error;
        }
        let Some(j) = self
            .qmans
            .get_mut(m)
            .and_then(|x| x.streams.get_mut(q))
            .and_then(|s| s.job.as_mut())
        else {
            return Unit::Error;
        };
        j.dma_done = done + n;
        if j.dma_done >= d.tsize {
            j.pc = j.pc.saturating_add(size);
            j.dma_done = 0;
        }
        Unit::More
    }

    /// The CB of a BD with `ctl` is done: the PQC increments SOB
    /// `COMP_OFFSET` (when `PQC_CFG` enables it; the CI moved on at the
    /// fetch). An LBW write that fails is the PQC's problem only: dropped.
    fn complete(&mut self, env: &mut dyn Env, m: usize, q: usize, ctl: u32) {
        let Some(x) = self.qmans.get(m) else {
            return;
        };
        let Some(s) = x.streams.get(q).copied() else {
            return;
        };
        if x.pqc_cfg & 1 != 0 {
            let sob = (ctl & regs::BD_CTL_COMP_OFFSET_MASK) >> regs::BD_CTL_COMP_OFFSET_SHIFT;
            let at = s.pqc_base.wrapping_add(u64::from(sob) * 4);
            let _ = self.engine_write(env, 0, at, &s.pqc_wdata.to_le_bytes());
        }
    }
}
