// SPDX-License-Identifier: GPL-2.0

//! The QMANs' command processors at work: what [`Gaudi2::step`] runs.
//!
//! **Upper CPs.** A stream with work fetches the BD at its fetch index
//! from the host PQ (16 bytes: `ptr`, `len`, `ctl`,
//! include/common/qman_if.h:17-21) and its CP runs the CB `[ptr, ptr +
//! len)` packet by packet (`super::packets`): CB fetches and messages
//! with the QMAN's read ASID, `LIN_DMA` data with the DMA core's read and
//! write ASIDs (`gaudi2_mmu_shared_prepare`, gaudi2/gaudi2.c:8100-8117),
//! everything through the MMUs (`super::bus`). When the CB is done the
//! PQC increments SOB `COMP_OFFSET` (the BD's `ctl` bits 27:16): an LBW
//! write of `PQC_LBW_WDATA` to `PQC_LBW_BASE + 4 x COMP_OFFSET`
//! (`gaudi2_init_qman_pqc`, gaudi2/gaudi2.c:5417-5445).
//!
//! **Nesting.** A CP runs a stack of CB frames ([`DEPTH`] of them): a
//! `CP_DMA` with `upper_cp` set (or any `CP_DMA` the lower CP runs) calls
//! its CB, which returns to the packet after the call when its last byte
//! ran. A call that is the last packet of its frame replaces that frame (a
//! tail call), so `CB_LIST` chains of any length run in one frame; a call
//! past [`DEPTH`] frames is a QMAN error. `STOP` ends every frame of the
//! CP.
//!
//! **Lower CP** (CP 4). A `CP_DMA` with `upper_cp` clear on an upper CP
//! queues its CB for the QMAN's lower CP (a FIFO of [`qman::LOWER_FIFO`] CBs; a
//! full FIFO parks the upper CP on that packet until there is room), and
//! the upper CP goes on. The lower CP runs the queued CBs in order as its
//! own work, with its own fence counters, message bases, predicates and
//! scalars. Silicon: the upper CP forwards the CB to its lower CP's queue
//! and goes on; upstream documents neither the queue's depth nor whether
//! the PQC's completion waits for the lower CP (libhlthunk's tests order
//! the two themselves, with a FENCE on CP 4, `gaudi2_get_fence_addr`'s
//! `cmdq_fence`). The model completes a BD only after the CBs its stream
//! handed to the lower CP are done, so a completion never overtakes the
//! work it stands for; the depth of its queue is its own choice.
//!
//! **Predicates and scalars** (`LOAD_AND_EXE`, layouts of libhlthunk's
//! `packet_load_and_exe` and its tests `test_cs_load_predicates`,
//! `test_cs_load_scalars_exe_*`): `load` with `dst` 0 loads predicates
//! P1..P31 from `src_addr`, with `pmap` 1 as one u32 bitmap (bit p = Pp),
//! with `pmap` 0 as 32 u32s (Pp = bit 0 of u32 p, 128 bytes); P0 is not
//! loaded and always true. `load` with `dst` 1 loads the scalar registers
//! R0..R3 (16 bytes). `exe` executes the scalars as a packet: `etype` 0
//! the packet at R0 (16 bytes: a `MSG_LONG`; or 8: R0-R1), `etype` 1 the
//! 8-byte packet in R2-R3 (a `MSG_SHORT`). What the scalars may hold:
//! `NOP`, `ARB_POINT`, `WREG_32`, `MSG_LONG`, `MSG_PROT`, `MSG_SHORT`;
//! anything else is a QMAN error. A packet with a `pred` field (see
//! `super::packets::pred`) naming a clear predicate is skipped.
//!
//! **CB_LIST** (`test_cs_cb_list`): reads the u32 index at `index_addr`,
//! then the 16-byte entry at `table_addr + 16 x index`, which must be a
//! `CP_DMA`, run as if it stood in the CB instead of the `CB_LIST`.
//!
//! **Register space.** A `WREG_32`/`WREG_BULK` (to the QMAN's block +
//! offset), a `MSG_LONG`/`MSG_PROT` or a `MSG_SHORT` addressing the
//! register space reaches the register when
//! [`super::security::user_writable`] allows it, else it is a RAZWI
//! (refused, nothing written) and a QMAN error.
//!
//! **Engines.** MME and TPC QMANs run every packet a DMA QMAN runs except
//! `LIN_DMA`: no DMA core sits behind them (upstream's `LIN_DMA` is a DMA
//! core's command, gaudi2_packets.h:144-161; an MME or TPC has none), so it
//! is refused as undefined: a QMAN error.
//!
//! **Scheduling.** Work is sliced: one call runs at most [`BUDGET`] units
//! (a packet, a frame's return, a BD fetch or completion, or [`DMA_CHUNK`]
//! bytes of a `LIN_DMA`), round robin over every CP of every QMAN, so a CB
//! of any length or a 4 GiB DMA never holds the caller for long. A `FENCE`
//! whose counter is short parks its CP only (until a `CP_FENCE_RDATA`
//! write); the other streams and the lower CP run on. The arbitration
//! registers and `ARB_POINT` order nothing. A packet the model cannot run,
//! or a fault of an access, halts the CP (until `GLBL_CFG1` is written) and
//! is reported on the event queue (the QMAN's `regs::EVENT_QM`; a fault
//! also as the MMU's event); an error of the lower CP halts the stream
//! whose CB it ran too.

use super::events;
use super::packets::{self, LinDma, Packet, PacketError};
use super::qman::{self, Frame, Handed, Kind, CPS, DEPTH, LOWER, QMANS};
use super::regs;
use super::{Env, Gaudi2};

/// Work units one [`Gaudi2::step`] runs.
pub const BUDGET: u32 = 64;
/// Bytes of a `LIN_DMA` per unit.
pub const DMA_CHUNK: usize = 1024;

/// What a packet asks of its CP.
enum Flow {
    /// Done: move on by this many bytes.
    Next(u32),
    /// Not done (a DMA chunk, or the lower CP's queue is full): the same
    /// packet again next time.
    Stay,
    /// Move on by `size` and call the CB `[cb, cb + len)`.
    Call { cb: u64, len: u32, size: u32 },
    /// `STOP`: every frame ends.
    Stop,
    /// Parked at a fence.
    Fenced,
    /// An error: halt the CP.
    Error,
}

impl Gaudi2 {
    /// Engine work is queued: the KDMA's transfer, or a CP with work that
    /// is not parked (at a fence, or stalled on a full lower-CP queue).
    /// O(QMANS x CPS).
    pub fn pending(&self) -> bool {
        self.dma_cores_busy()
            || self.sm_pending()
            || (0..QMANS).any(|m| {
                self.qmans.get(m).is_some_and(qman::Qman::may_run)
                    && (0..CPS).any(|c| self.runnable(m, c))
            })
    }

    /// Run at most [`BUDGET`] units of queued engine work; true while more
    /// is left. O(BUDGET x (packet + a 1 KiB copy) + QMANS x CPS).
    pub fn step(&mut self, env: &mut dyn Env) -> bool {
        self.dma_cores_step(env);
        self.sm_run(env);
        let mut budget = BUDGET;
        'outer: while budget > 0 {
            let mut ran = false;
            for m in 0..QMANS {
                if !self.qmans.get(m).is_some_and(qman::Qman::may_run) {
                    continue;
                }
                for c in 0..CPS {
                    if budget == 0 {
                        break 'outer;
                    }
                    if self.runnable(m, c) {
                        self.unit(env, m, c);
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

    /// Whether CP `c` of QMAN `m` can run a unit now. O(1).
    fn runnable(&self, m: usize, c: usize) -> bool {
        let Some(x) = self.qmans.get(m) else {
            return false;
        };
        if c == LOWER {
            return !x.lower.fenced && x.lower_busy();
        }
        x.enabled(c)
            && x.streams.get(c).is_some_and(|s| {
                !s.cp.halted
                    && !s.cp.fenced
                    && !s.cp.stalled
                    && (s.cp.depth > 0
                        || s.bd.is_some_and(|_| s.handed == 0)
                        || (s.bd.is_none() && s.ci != s.pi))
            })
    }

    /// One unit of CP `c` of QMAN `m`. O(a packet or a DMA chunk).
    fn unit(&mut self, env: &mut dyn Env, m: usize, c: usize) {
        let Some(x) = self.qmans.get_mut(m) else {
            return;
        };
        let Some(cp) = x.cp(c) else {
            return;
        };
        let Some(frame) = cp.top().copied() else {
            if c == LOWER {
                if let Some(e) = x.take() {
                    x.lower_from = e.from;
                    push(&mut x.lower, e.cb, e.len);
                }
            } else if let Some(ctl) = x.streams.get(c).and_then(|s| s.bd) {
                if let Some(s) = x.streams.get_mut(c) {
                    s.bd = None;
                }
                self.complete(env, m, c, ctl);
            } else {
                self.fetch_bd(env, m, c);
            }
            return;
        };
        if frame.pc >= frame.len {
            self.ret(env, m, c, false);
            return;
        }
        let flow = self.packet(env, m, c, frame);
        let Some(cp) = self.qmans.get_mut(m).and_then(|x| x.cp_mut(c)) else {
            return;
        };
        match flow {
            Flow::Next(size) => {
                if let Some(f) = cp.top_mut() {
                    f.pc = f.pc.saturating_add(size);
                }
                cp.dma_done = 0;
            }
            Flow::Stay => {}
            Flow::Fenced => cp.fenced = true,
            Flow::Stop => self.ret(env, m, c, true),
            Flow::Call { cb, len, size } => {
                let tail = frame.pc.saturating_add(size) >= frame.len;
                if tail {
                    if let Some(f) = cp.top_mut() {
                        *f = Frame { cb, len, pc: 0 };
                    }
                    cp.dma_done = 0;
                } else if usize::from(cp.depth) < DEPTH {
                    if let Some(f) = cp.top_mut() {
                        f.pc = f.pc.saturating_add(size);
                    }
                    push(cp, cb, len);
                } else {
                    self.error(env, m, c);
                }
            }
            Flow::Error => self.error(env, m, c),
        }
    }

    /// The top frame of CP `c` ended (`all`: every frame, a `STOP`). When
    /// the CP has no frame left: the lower CP's CB is done for the stream
    /// that handed it; a stream's BD completes unless the lower CP still
    /// has CBs of it. O(1).
    fn ret(&mut self, env: &mut dyn Env, m: usize, c: usize, all: bool) {
        let Some(x) = self.qmans.get_mut(m) else {
            return;
        };
        let Some(cp) = x.cp_mut(c) else {
            return;
        };
        cp.depth = if all { 0 } else { cp.depth.saturating_sub(1) };
        cp.dma_done = 0;
        if cp.depth > 0 {
            return;
        }
        if c == LOWER {
            if let Some(s) = x.streams.get_mut(usize::from(x.lower_from)) {
                s.handed = s.handed.saturating_sub(1);
            }
            return;
        }
        let Some(s) = x.streams.get_mut(c) else {
            return;
        };
        if s.handed == 0 {
            if let Some(ctl) = s.bd.take() {
                self.complete(env, m, c, ctl);
            }
        }
    }

    /// Halt CP `c` of QMAN `m` on an error and report it (the lower CP's
    /// error halts the stream whose CB it ran too). O(1).
    fn error(&mut self, env: &mut dyn Env, m: usize, c: usize) {
        let Some(x) = self.qmans.get_mut(m) else {
            return;
        };
        if let Some(cp) = x.cp_mut(c) {
            cp.halted = true;
        }
        if c == LOWER {
            if let Some(s) = x.streams.get_mut(usize::from(x.lower_from)) {
                s.cp.halted = true;
            }
        }
        let event = regs::EVENT_QM.get(m).copied().unwrap_or(0);
        self.post_event(env, event);
    }

    /// Fetch the BD at the fetch index of stream `q` of QMAN `m`. O(a
    /// 16-byte read).
    fn fetch_bd(&mut self, env: &mut dyn Env, m: usize, q: usize) {
        let Some(s) = self.qmans.get(m).and_then(|x| x.streams.get(q)) else {
            return;
        };
        let (pq_base, slot) = (s.pq_base, u64::from(s.ci % s.entries()) * 16);
        let asid = self.asids(m).0;
        let mut bd = [0u8; 16];
        let read = match pq_base.checked_add(slot) {
            Some(at) => self.engine_read(env, asid, at, &mut bd).is_ok(),
            None => false,
        };
        let Some(st) = self.qmans.get_mut(m).and_then(|x| x.streams.get_mut(q)) else {
            return;
        };
        if !read {
            st.cp.halted = true;
            return;
        }
        st.ci = (st.ci + 1) % st.entries().saturating_mul(2);
        st.bd = Some(packets::le32(&bd, 12));
        push(&mut st.cp, packets::le64(&bd, 0), packets::le32(&bd, 8));
    }

    /// The QMAN's read ASID and the DMA core's read and write ASIDs.
    fn asids(&self, m: usize) -> (u16, u16, u16) {
        let Some(x) = self.qmans.get(m) else {
            return (0, 0, 0);
        };
        let rd = |v: u32| ((v >> 16) & 0x3FF) as u16;
        let wr = |v: u32| (v & 0x3FF) as u16;
        (rd(x.qm_asid), rd(x.core.asid_reg()), wr(x.core.asid_reg()))
    }

    /// CP `c` of QMAN `m`, read-only.
    fn cp_of(&self, m: usize, c: usize) -> Option<&qman::Cp> {
        self.qmans.get(m).and_then(|x| x.cp(c))
    }

    /// Run the packet at `frame`'s `pc` (or a chunk of its `LIN_DMA`).
    /// O(a packet or a DMA chunk).
    fn packet(&mut self, env: &mut dyn Env, m: usize, c: usize, frame: Frame) -> Flow {
        let left = u64::from(frame.len.saturating_sub(frame.pc));
        let (qm_asid, _, _) = self.asids(m);
        let mut buf = [0u8; 24];
        let n = usize::try_from(left.min(24)).unwrap_or(24);
        let at = frame.cb.wrapping_add(u64::from(frame.pc));
        let Some(window) = buf.get_mut(..n) else {
            return Flow::Error;
        };
        if self.user_read(env, qm_asid, at, window).is_err() {
            return Flow::Error;
        }
        let (packet, size) = match packets::decode(buf.get(..n).unwrap_or(&[]), left) {
            Ok(p) => p,
            // The DMA core refuses a LIN_DMA whose size is no whole number
            // of its swap words: its own error event, then the QMAN's.
            Err(PacketError::SwapSize { .. }) if qman::kind(m) == Kind::Dma => {
                let qm = regs::EVENT_QM.get(m).copied().unwrap_or(0);
                self.post_event_data(env, events::dma_core(qm), [events::DMA_CORE_WRONG_CFG, 0]);
                return Flow::Error;
            }
            Err(_) => return Flow::Error,
        };
        let size = u32::try_from(size).unwrap_or(u32::MAX);
        self.stats.packets = self.stats.packets.wrapping_add(1);
        if !self.predicate(m, c, packets::le32(&buf, 4)) {
            return Flow::Next(size);
        }
        match packet {
            Packet::Stop => Flow::Stop,
            Packet::LinDma(d) if qman::kind(m) == Kind::Dma => self.lin_dma(env, m, c, d, size),
            Packet::LinDma(_) => Flow::Error,
            Packet::Fence { id, target, dec } => self.fence(m, c, id, target, dec, size),
            Packet::CpDma { tsize, src, upper } => self.cp_dma(m, c, (src, tsize, upper), size),
            Packet::CbList { index, table } => self.cb_list(env, m, c, index, table, size),
            Packet::LoadAndExe { cfg, src } => self.load_and_exe(env, m, c, cfg, src, size),
            p => {
                if self.exec(env, m, c, at, p) {
                    Flow::Next(size)
                } else {
                    Flow::Error
                }
            }
        }
    }

    /// Whether the packet with `ctl` runs on CP `c`: its `pred` names a
    /// set predicate (P0 always is). O(1).
    fn predicate(&self, m: usize, c: usize, ctl: u32) -> bool {
        let p = packets::pred(ctl);
        p == 0 || self.cp_of(m, c).is_some_and(|cp| cp.pred & (1 << p) != 0)
    }
}

/// Push the frame `[cb, cb + len)` on `cp` (the caller checked the room;
/// a full stack keeps its frames). O(1).
fn push(cp: &mut qman::Cp, cb: u64, len: u32) {
    if let Some(f) = cp.frames.get_mut(usize::from(cp.depth)) {
        *f = Frame { cb, len, pc: 0 };
        cp.depth += 1;
    }
    cp.dma_done = 0;
}

impl Gaudi2 {
    /// `FENCE`: counter `id` of CP `c` reached `target`? Then take `dec`
    /// off it and go on; else park. O(1).
    fn fence(&mut self, m: usize, c: usize, id: u32, target: u32, dec: u32, size: u32) -> Flow {
        let Some(cp) = self.qmans.get_mut(m).and_then(|x| x.cp_mut(c)) else {
            return Flow::Error;
        };
        let Some(v) = cp.fence.get_mut(id as usize) else {
            return Flow::Error;
        };
        if *v >= target {
            *v = v.saturating_sub(dec);
            Flow::Next(size)
        } else {
            Flow::Fenced
        }
    }

    /// `CP_DMA` of `(src, tsize, upper)`: a call, or the CB queued for the
    /// lower CP (stalling while its queue is full). O(1).
    fn cp_dma(
        &mut self,
        m: usize,
        c: usize,
        (src, tsize, upper): (u64, u32, bool),
        size: u32,
    ) -> Flow {
        if upper || c == LOWER {
            return Flow::Call {
                cb: src,
                len: tsize,
                size,
            };
        }
        let Some(x) = self.qmans.get_mut(m) else {
            return Flow::Error;
        };
        let from = u8::try_from(c).unwrap_or(0);
        if x.hand(Handed {
            cb: src,
            len: tsize,
            from,
        }) {
            Flow::Next(size)
        } else {
            if let Some(cp) = x.cp_mut(c) {
                cp.stalled = true;
            }
            Flow::Stay
        }
    }

    /// `CB_LIST`: the `CP_DMA` at entry `*index` of `table`, in its place.
    /// O(two reads).
    fn cb_list(
        &mut self,
        env: &mut dyn Env,
        m: usize,
        c: usize,
        index: u64,
        table: u64,
        size: u32,
    ) -> Flow {
        let (asid, _, _) = self.asids(m);
        let mut i = [0u8; 4];
        if self.user_read(env, asid, index, &mut i).is_err() {
            return Flow::Error;
        }
        let Some(at) = u64::from(u32::from_le_bytes(i))
            .checked_mul(packets::CB_LIST_ENTRY)
            .and_then(|o| table.checked_add(o))
        else {
            return Flow::Error;
        };
        let mut entry = [0u8; 16];
        if self.user_read(env, asid, at, &mut entry).is_err() {
            return Flow::Error;
        }
        match packets::decode(&entry, packets::CB_LIST_ENTRY) {
            Ok((Packet::CpDma { tsize, src, upper }, _)) => {
                if self.predicate(m, c, packets::le32(&entry, 4)) {
                    self.cp_dma(m, c, (src, tsize, upper), size)
                } else {
                    Flow::Next(size)
                }
            }
            _ => Flow::Error,
        }
    }

    /// `LOAD_AND_EXE` with `cfg` from `src` (see the module doc). O(a
    /// 128-byte read + a packet).
    fn load_and_exe(
        &mut self,
        env: &mut dyn Env,
        m: usize,
        c: usize,
        cfg: u32,
        src: u64,
        size: u32,
    ) -> Flow {
        let (asid, _, _) = self.asids(m);
        if cfg & packets::LAE_LOAD != 0 {
            let mut b = [0u8; 128];
            let Some(win) = b.get_mut(..packets::lae_load_len(cfg)) else {
                return Flow::Error;
            };
            if self.user_read(env, asid, src, win).is_err() {
                return Flow::Error;
            }
            let Some(cp) = self.qmans.get_mut(m).and_then(|x| x.cp_mut(c)) else {
                return Flow::Error;
            };
            packets::lae_load(cfg, &b, (&mut cp.pred, &mut cp.scalars));
        }
        if cfg & packets::LAE_EXE != 0 && !self.exe(env, m, c, cfg & packets::LAE_ETYPE != 0) {
            return Flow::Error;
        }
        Flow::Next(size)
    }

    /// Execute the scalars of CP `c` as a packet: R0.. (`upper` false) or
    /// R2-R3. True when it ran (or its predicate skipped it). O(a packet).
    fn exe(&mut self, env: &mut dyn Env, m: usize, c: usize, upper: bool) -> bool {
        let Some(cp) = self.cp_of(m, c) else {
            return false;
        };
        let Some((p, ctl)) = packets::lae_exe(cp.scalars, upper) else {
            return false;
        };
        !self.predicate(m, c, ctl) || self.exec(env, m, c, 0, p)
    }

    /// The register and message packets of CP `c`; `at` is the packet's
    /// address (a `WREG_BULK`'s values follow it). True when done. O(1),
    /// a `WREG_BULK` O(its values).
    fn exec(&mut self, env: &mut dyn Env, m: usize, c: usize, at: u64, p: Packet) -> bool {
        let base = qman::base(m).unwrap_or(0);
        let block = |offset: u32| {
            regs::CFG_BASE
                .wrapping_add(u64::from(base))
                .wrapping_add(u64::from(offset))
        };
        match p {
            Packet::Wreg32 { offset, value } => self.message(env, m, block(offset), value),
            Packet::WregBulk { offset, count } => {
                let (asid, _, _) = self.asids(m);
                (0..u64::from(count)).all(|i| {
                    let mut v = [0u8; 8];
                    let from = at.wrapping_add(8 + 8 * i);
                    self.user_read(env, asid, from, &mut v).is_ok()
                        && self.message(
                            env,
                            m,
                            block(offset).wrapping_add(4 * i),
                            packets::le32(&v, 0),
                        )
                })
            }
            Packet::MsgLong { value, addr } => self.message(env, m, addr, value),
            Packet::MsgShort {
                value,
                base: b,
                offset,
            } => {
                let msg = self
                    .cp_of(m, c)
                    .and_then(|cp| cp.msg_base.get(b as usize).copied())
                    .map(|a| a.wrapping_add(u64::from(offset)));
                msg.is_some_and(|a| self.message(env, m, a, value))
            }
            _ => true,
        }
    }

    /// A u32 write of a CP's packet at `addr`, a non-secured initiator's
    /// ([`super::bus::user_closed`]: into the register space only where
    /// [`super::security::user_writable`] allows, else a RAZWI and nothing
    /// written; no host bus address with the PMMU on), elsewhere through
    /// the MMUs. True when done. O(an engine write).
    fn message(&mut self, env: &mut dyn Env, m: usize, addr: u64, value: u32) -> bool {
        let (asid, _, _) = self.asids(m);
        self.user_write(env, asid, addr, &value.to_le_bytes())
            .is_ok()
    }

    /// One chunk of a `LIN_DMA` of `size` packet bytes: at most
    /// [`DMA_CHUNK`] bytes from where the CP left it. O(DMA_CHUNK).
    fn lin_dma(&mut self, env: &mut dyn Env, m: usize, c: usize, d: LinDma, size: u32) -> Flow {
        let (_, rd, wr) = self.asids(m);
        let done = self.cp_of(m, c).map_or(0, |cp| cp.dma_done);
        let n = (d.tsize - done.min(d.tsize)).min(DMA_CHUNK as u32);
        let mut buf = [0u8; DMA_CHUNK];
        let Some(chunk) = buf.get_mut(..n as usize) else {
            return Flow::Error;
        };
        if d.memset {
            let fill = d.src.to_le_bytes();
            for (i, b) in chunk.iter_mut().enumerate() {
                *b = fill.get((done as usize + i) % 8).copied().unwrap_or(0);
            }
        } else if self
            .user_read(env, rd, d.src.wrapping_add(u64::from(done)), chunk)
            .is_err()
        {
            return Flow::Error;
        }
        d.swap.apply(chunk);
        if self
            .user_write(env, wr, d.dst.wrapping_add(u64::from(done)), chunk)
            .is_err()
        {
            return Flow::Error;
        }
        let Some(cp) = self.qmans.get_mut(m).and_then(|x| x.cp_mut(c)) else {
            return Flow::Error;
        };
        cp.dma_done = done + n;
        if cp.dma_done >= d.tsize {
            Flow::Next(size)
        } else {
            Flow::Stay
        }
    }

    /// The CB of a BD with `ctl` is done: the PQC increments SOB
    /// `COMP_OFFSET` (when `PQC_CFG` enables it; the CI moved on at the
    /// fetch). An LBW write that fails is the PQC's problem only: dropped.
    /// O(an engine write).
    fn complete(&mut self, env: &mut dyn Env, m: usize, q: usize, ctl: u32) {
        let Some(x) = self.qmans.get(m) else {
            return;
        };
        let Some(s) = x.streams.get(q) else {
            return;
        };
        if x.pqc_cfg & 1 != 0 {
            let sob = (ctl & regs::BD_CTL_COMP_OFFSET_MASK) >> regs::BD_CTL_COMP_OFFSET_SHIFT;
            let at = s.pqc_base.wrapping_add(u64::from(sob) * 4);
            let data = s.pqc_wdata.to_le_bytes();
            let _ = self.engine_write(env, 0, at, &data);
        }
    }
}
