// SPDX-License-Identifier: GPL-2.0

//! One stream's command processor running a job to its end: how a QMAN
//! stream of host 1 (the in-module simulation, one kernel thread per
//! stream and context) executes a CB. Host 2 steps the same packets per
//! stream in slices, round robin over every CP (`super::cp`).
//!
//! A job is `size` bytes of packets at the device address `base` (host VA,
//! DRAM VA or SRAM, any alignment), read through the host's [`EngineBus`]
//! (the engine's side of the MMUs, with the queue's ASID). The CB is
//! fetched in windows that never cross a 4 KiB page of the CB unless a
//! packet does (so a packet runs before a fault on a later page of its CB,
//! as the CP fetches ahead no further than the page): the header, then
//! exactly the packet it announces. Each packet is decoded
//! (`super::packets`) and executed before the next is read.
//!
//! The packets every engine runs: `NOP`, `MSG_LONG` (the u32 written at
//! its address) and `LIN_DMA` (copy, memset, byte swaps). With a sync
//! manager behind the host ([`EngineBus::sync_manager`]) also, as
//! `super::cp` runs them: `MSG_SHORT` (to `CP_MSG_BASE[base] + offset`),
//! `WREG_32` and `WREG_BULK` (to the QMAN's block), `MSG_PROT` (as
//! `MSG_LONG`), `STOP` (every frame ends), `FENCE` (the host sleeps until the
//! counter reaches the target: [`EngineBus::fence`]), `ARB_POINT` (orders
//! nothing), `CP_DMA` and `CB_LIST` (calls, [`DEPTH`] frames deep, a call
//! that is its frame's last packet a tail call) and `LOAD_AND_EXE`
//! (predicates and scalars, kept in the CP's registers across jobs:
//! [`EngineBus::cp_regs`]) and `WAIT` (a `NOP`: no cycles to wait, as in
//! `super::cp`); a packet whose `pred` names a clear predicate is skipped.
//! Every other opcode is refused as undefined before more than its header
//! is fetched.
//!
//! **The lower CP.** A `CP_DMA` with `upper_cp` clear on an upper CP
//! hands its CB to the QMAN's lower CP ([`EngineBus::hand_to_lower`]), as
//! on silicon and in `super::cp`: the host queues it for its lower CP,
//! which runs it ([`execute_lower`]) with its own fence counters
//! (libhlthunk's `cmdq_fence`), message bases, predicates and scalars,
//! while the stream goes on. A host without a lower CP of its own has the
//! stream call the CB instead, the frame running as the lower CP.
//!
//! A `LIN_DMA` moves its bytes through the host's bounce buffer, one chunk
//! at a time: read, swapped, written, so a transfer of up to 4 GiB - 1
//! costs no more memory than one chunk. Between chunks, and before every
//! packet, the job asks the host whether to stop ([`EngineBus::stop`]).
//!
//! **Reschedule points** ([`EngineBus::point`]): every [`RESCHED_PACKETS`]
//! packets and between the chunks of a DMA: a CB of any length (and any
//! chain of calls) never runs for more than one chunk of copying or 64
//! packets without one.
//!
//! A job ends at the first fault (the pieces before it were done), at the
//! first packet it cannot execute, when told to stop, or after its last
//! packet; [`JobEnd`] says which.

use super::dma_core::Transfer;
use super::packets::{self, op, LinDma, Packet, PacketError};

/// Packets between two reschedule points of a job: a CB of millions of
/// NOPs or MSG_LONGs gives the CPU up as often as a DMA does.
pub const RESCHED_PACKETS: u32 = 64;
/// CB frames a CP nests (`CP_DMA`, `CB_LIST`), as the stepped CPs'
/// (`super::qman::DEPTH`); a call deeper is refused.
pub const DEPTH: usize = super::qman::DEPTH;
/// Bytes of a CB fetch window: one page.
pub const CB_WINDOW: usize = 4096;
const CB_WINDOW_U64: u64 = CB_WINDOW as u64;

/// What an engine reaches memory and its host through.
pub trait EngineBus {
    /// How an access fails.
    type Fault: Copy;
    /// Why the host stops a job.
    type Stop: Copy;

    /// Read `buf.len()` bytes at the device address `addr`.
    fn read(&mut self, addr: u64, buf: &mut [u8]) -> Result<(), Self::Fault>;
    /// Write `data` at `addr`.
    fn write(&mut self, addr: u64, data: &[u8]) -> Result<(), Self::Fault>;
    /// The fault of an address no access can reach (one that wraps).
    fn decode_fault(&self, addr: u64) -> Self::Fault;
    /// Whether the job must stop now. Polled before every packet and
    /// between the chunks of a DMA.
    fn stop(&mut self) -> Option<Self::Stop>;
    /// A reschedule point: the host may charge time or yield here.
    fn point(&mut self);
    /// Whether a DMA core is behind the QMAN (PDMA, EDMA). Without one
    /// (the MME and TPC QMANs) a `LIN_DMA` is refused as undefined, as the
    /// QMAN model of host 2 refuses it (`super::cp`).
    fn dma_core(&self) -> bool {
        true
    }
    /// Whether the host has a sync manager and the CP's registers behind
    /// it: then the sync manager's packets run and the `pred` field counts
    /// (else they are refused as undefined). O(1).
    fn sync_manager(&self) -> bool {
        false
    }
    /// `CP_MSG_BASE[base]` of the executing CP (a `MSG_SHORT`'s base):
    /// the stream's, or with `lower` the QMAN's lower CP's. O(1).
    fn msg_base(&mut self, _lower: bool, _base: u32) -> u64 {
        0
    }
    /// The executing QMAN's block address (a `WREG_32`'s base). O(1).
    fn qman_block(&self) -> u64 {
        0
    }
    /// `FENCE`: wait until fence counter `id` of the executing CP (the
    /// stream's, or with `lower` the lower CP's) reaches `target`, then
    /// take `dec` off it (the host sleeps meanwhile and polls
    /// [`Self::stop`]). `Err`: stopped first. O(wakes).
    fn fence(&mut self, _lower: bool, _fence: (u32, u32, u32)) -> Result<(), Self::Stop> {
        Ok(())
    }
    /// The predicates and scalars of the stream's CP, or with `lower` of
    /// the lower CP, at a job's start. O(1).
    fn cp_regs(&mut self, _lower: bool) -> CpRegs {
        CpRegs::IDLE
    }
    /// The same at a job's end. O(1).
    fn set_cp_regs(&mut self, _lower: bool, _regs: CpRegs) {}
    /// A `CP_DMA` with `upper_cp` clear on an upper CP: hand the CB
    /// `[cb, cb + len)` to the QMAN's lower CP, which runs it as its own
    /// work while the stream goes on (`Ok(true)`, as on silicon); the host
    /// sleeps while the lower CP's queue is full. `Ok(false)`: the host has
    /// no lower CP of its own, and the stream calls the CB as a frame of
    /// the lower CP. `Err`: stopped first.
    fn hand_to_lower(&mut self, _cb: u64, _len: u32) -> Result<bool, Self::Stop> {
        Ok(false)
    }
    /// A DMA core's transfer that this job's last register write committed
    /// (a CB's message to the core's `COMMIT`), taken from the core: a
    /// host that has no engine of its own for the DMA cores runs it on the
    /// engine that wrote, after the packet ([`transfer`]). `None`: nothing
    /// committed, or the host steps the cores itself. O(1).
    fn take_commit(&mut self) -> Option<Transfer> {
        None
    }
}

/// How a job ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JobEnd<F, S> {
    /// Every packet executed.
    Done,
    /// An access faulted (fetching the CB or executing a packet).
    Fault(F),
    /// The packet at `addr` cannot be executed.
    BadPacket {
        /// Its device address.
        addr: u64,
        /// Why.
        error: PacketError,
    },
    /// The host said to stop.
    Stopped(S),
}

/// Bytes of the packet whose first 8 bytes are `head`, if an engine runs
/// it (see the module doc; `sync`: the host has a sync manager). O(1).
pub fn packet_size(head: &[u8], sync: bool) -> Result<u64, PacketError> {
    let opcode = packets::opcode(packets::le32(head, 4));
    let head: &[u8; 8] = head
        .get(..8)
        .and_then(|h| h.try_into().ok())
        .ok_or(PacketError::Truncated { opcode, need: 8 })?;
    match opcode {
        op::NOP | op::MSG_LONG | op::LIN_DMA => packets::packet_size(head),
        op::MSG_SHORT
        | op::FENCE
        | op::STOP
        | op::MSG_PROT
        | op::WREG_BULK
        | op::WREG_32
        | op::ARB_POINT
        | op::CP_DMA
        | op::CB_LIST
        | op::LOAD_AND_EXE
        | op::WAIT
            if sync =>
        {
            packets::packet_size(head)
        }
        opcode => Err(PacketError::Undefined { opcode }),
    }
}

/// Decode the packet at the start of `bytes` (its first bytes, up to 24;
/// `have` bytes of CB left from its start) if an engine runs it; returns
/// it and its size. O(1).
pub fn decode(bytes: &[u8], have: u64, sync: bool) -> Result<(Packet, u64), PacketError> {
    packet_size(bytes, sync)?;
    packets::decode(bytes, have)
}

/// The CB of a job as the CP fetches it: a window of up to one page.
struct CbReader<'a> {
    /// Device address of the CB.
    base: u64,
    /// Bytes of the CB.
    size: u32,
    /// Offset in the CB of the window's first byte, and its length.
    win: (u32, usize),
    buf: &'a mut [u8],
}

impl CbReader<'_> {
    /// `n` bytes at offset `at` of the CB (`at + n <= size`), from the
    /// window or after a fetch of the rest of their page. O(n) amortized.
    fn bytes<B: EngineBus>(&mut self, bus: &mut B, at: u32, n: usize) -> Result<&[u8], B::Fault> {
        let decode = bus.decode_fault(self.base);
        let (start, len) = self.win;
        let inside = at >= start && ((at - start) as usize).saturating_add(n) <= len;
        if !inside {
            let addr = self.base.checked_add(u64::from(at)).ok_or(decode)?;
            let page_left = (CB_WINDOW_U64 - addr % CB_WINDOW_U64) as usize;
            let left = self.size.saturating_sub(at) as usize;
            let len = page_left.max(n).min(left).min(self.buf.len());
            let dst = self.buf.get_mut(..len).ok_or(decode)?;
            self.win = (at, 0);
            bus.read(addr, dst)?;
            self.win = (at, len);
        }
        let off = at.saturating_sub(self.win.0) as usize;
        self.buf.get(off..off.saturating_add(n)).ok_or(decode)
    }
}

/// One CB a CP runs: its device address, bytes, the offset of the next
/// packet, and whether it runs as the QMAN's lower CP (handed to it by a
/// `CP_DMA` with `upper_cp` clear, and what it calls).
#[derive(Clone, Copy, Debug, Default)]
struct Frame {
    cb: u64,
    len: u32,
    pc: u32,
    lower: bool,
}

/// What a packet asks of the job's CP.
enum Flow {
    /// Done: on to the next packet.
    Next,
    /// Call the CB `[cb, cb + len)` (`CP_DMA`, a `CB_LIST` entry), on the
    /// lower CP for a `CP_DMA` with `upper_cp` clear.
    Call { cb: u64, len: u32, upper: bool },
    /// `STOP`: every frame ends.
    Stop,
}

/// Run the job of `size` bytes of CB at `base` on `bus`, with `window` (at
/// least [`CB_WINDOW`] bytes) for the CB and `data` (a whole number of
/// u64s) as the DMA bounce buffer: fetch, decode and execute its packets
/// in order, the CBs it calls ([`DEPTH`] deep) in theirs. O(packets run +
/// bytes moved).
pub fn execute<B: EngineBus>(
    bus: &mut B,
    bufs: (&mut [u8], &mut [u8]),
    cb: (u64, u32),
) -> JobEnd<B::Fault, B::Stop> {
    execute_as(bus, bufs, cb, false)
}

/// [`execute`] on the QMAN's lower CP: the job is a CB an upper CP handed
/// to it ([`EngineBus::hand_to_lower`]), run with the lower CP's fence
/// counters, message bases, predicates and scalars, its own `CP_DMA`s
/// calls. O(packets run + bytes moved).
pub fn execute_lower<B: EngineBus>(
    bus: &mut B,
    bufs: (&mut [u8], &mut [u8]),
    cb: (u64, u32),
) -> JobEnd<B::Fault, B::Stop> {
    execute_as(bus, bufs, cb, true)
}

fn execute_as<B: EngineBus>(
    bus: &mut B,
    (window, data): (&mut [u8], &mut [u8]),
    (base, size): (u64, u32),
    lower: bool,
) -> JobEnd<B::Fault, B::Stop> {
    let sync = bus.sync_manager();
    let mut regs = RegsCache::default();
    let mut cp = Cp {
        frames: [Frame::default(); DEPTH],
        depth: 1,
        reader: CbReader {
            base,
            size,
            win: (0, 0),
            buf: window,
        },
        count: 0,
        sync,
    };
    if let Some(f) = cp.frames.first_mut() {
        *f = Frame {
            cb: base,
            len: size,
            pc: 0,
            lower,
        };
    }
    let end = cp.run(bus, data, &mut regs);
    regs.store(bus);
    end
}

/// A job's view of its CPs' predicates and scalars ([`CpRegs`]): the
/// stream's and the lower CP's, read from the host at their first use
/// (most CBs name no predicate and load nothing, and cost the host no
/// access) and written back at the job's end only if a `LOAD_AND_EXE`
/// changed them.
#[derive(Default)]
struct RegsCache {
    upper: Option<CpRegs>,
    lower: Option<CpRegs>,
    /// Changed: `(upper, lower)`.
    dirty: (bool, bool),
}

impl RegsCache {
    /// The registers of the stream's CP, or with `lower` the lower CP's.
    /// O(1) (a host read the first time).
    fn get<B: EngineBus>(&mut self, bus: &mut B, lower: bool) -> &mut CpRegs {
        let slot = if lower {
            &mut self.lower
        } else {
            &mut self.upper
        };
        slot.get_or_insert_with(|| bus.cp_regs(lower))
    }

    /// The same, to change. O(1).
    fn get_mut<B: EngineBus>(&mut self, bus: &mut B, lower: bool) -> &mut CpRegs {
        if lower {
            self.dirty.1 = true;
        } else {
            self.dirty.0 = true;
        }
        self.get(bus, lower)
    }

    /// Whether predicate `p` of that CP holds (P0 always does, without a
    /// read). O(1).
    fn holds<B: EngineBus>(&mut self, bus: &mut B, lower: bool, p: u32) -> bool {
        p == 0 || self.get(bus, lower).holds(p)
    }

    /// Write back what changed. O(1).
    fn store<B: EngineBus>(self, bus: &mut B) {
        for (regs, dirty, lower) in [
            (self.upper, self.dirty.0, false),
            (self.lower, self.dirty.1, true),
        ] {
            if let (Some(r), true) = (regs, dirty) {
                bus.set_cp_regs(lower, r);
            }
        }
    }
}

/// The CB frames of a job's CP (the CP's own registers are the caller's).
struct Cp<'w> {
    frames: [Frame; DEPTH],
    /// Frames in use; `frames[depth - 1]` runs.
    depth: usize,
    /// The running frame's fetch window.
    reader: CbReader<'w>,
    /// Packets run, for the reschedule points.
    count: u32,
    /// The host has a sync manager (see [`EngineBus::sync_manager`]).
    sync: bool,
}

impl Cp<'_> {
    /// Run the frames to their end. O(packets run + bytes moved).
    fn run<B: EngineBus>(
        &mut self,
        bus: &mut B,
        data: &mut [u8],
        regs: &mut RegsCache,
    ) -> JobEnd<B::Fault, B::Stop> {
        loop {
            let Some(top) = self
                .depth
                .checked_sub(1)
                .and_then(|i| self.frames.get(i))
                .copied()
            else {
                return JobEnd::Done;
            };
            if top.pc >= top.len {
                // The frame returns to the packet after its call.
                self.depth -= 1;
                self.refetch();
                continue;
            }
            if let Some(stop) = bus.stop() {
                return JobEnd::Stopped(stop);
            }
            self.count = self.count.wrapping_add(1);
            if self.count % RESCHED_PACKETS == 0 {
                bus.point();
            }
            let (flow, len) = match self.packet(bus, data, regs, top) {
                Ok(x) => x,
                Err(end) => return end,
            };
            match flow {
                Flow::Next => self.advance(len),
                Flow::Stop => self.depth = 0,
                Flow::Call { cb, len: n, upper } => {
                    if !top.lower && !upper {
                        match bus.hand_to_lower(cb, n) {
                            Ok(true) => {
                                self.advance(len);
                                continue;
                            }
                            Ok(false) => {}
                            Err(stop) => return JobEnd::Stopped(stop),
                        }
                    }
                    // The lower CP's calls stay on it.
                    let lower = top.lower || !upper;
                    if let Err(error) = self.call(top, len, (cb, n, lower)) {
                        let addr = top.cb.wrapping_add(u64::from(top.pc));
                        return JobEnd::BadPacket { addr, error };
                    }
                }
            }
        }
    }

    /// Move the running frame past a packet of `len` bytes. O(1).
    fn advance(&mut self, len: u32) {
        if let Some(f) = self
            .depth
            .checked_sub(1)
            .and_then(|i| self.frames.get_mut(i))
        {
            f.pc = f.pc.saturating_add(len);
        }
    }

    /// Point the fetch window at the running frame (nothing fetched yet).
    /// O(1).
    fn refetch(&mut self) {
        if let Some(f) = self.depth.checked_sub(1).and_then(|i| self.frames.get(i)) {
            self.reader.base = f.cb;
            self.reader.size = f.len;
            self.reader.win = (0, 0);
        }
    }

    /// Call `[cb, cb + n)` from the packet of `len` bytes at `top`'s `pc`:
    /// in place of `top` when that packet is its last (a tail call, so
    /// chains of any length run in one frame), else on top of it; a call
    /// past [`DEPTH`] frames is refused. O(1).
    fn call(
        &mut self,
        top: Frame,
        len: u32,
        (cb, n, lower): (u64, u32, bool),
    ) -> Result<(), PacketError> {
        let next = Frame {
            cb,
            len: n,
            pc: 0,
            lower,
        };
        if top.pc.saturating_add(len) >= top.len {
            if let Some(f) = self
                .depth
                .checked_sub(1)
                .and_then(|i| self.frames.get_mut(i))
            {
                *f = next;
            }
        } else {
            let too_deep = PacketError::Undefined { opcode: op::CP_DMA };
            let slot = self.frames.get_mut(self.depth).ok_or(too_deep)?;
            *slot = next;
            self.advance(len);
            self.depth += 1;
        }
        self.refetch();
        Ok(())
    }

    /// Fetch, decode and run the packet at `top`'s `pc`: what it asks of
    /// the CP, and its size. O(a packet + its bytes moved).
    fn packet<B: EngineBus>(
        &mut self,
        bus: &mut B,
        data: &mut [u8],
        regs: &mut RegsCache,
        top: Frame,
    ) -> Result<(Flow, u32), JobEnd<B::Fault, B::Stop>> {
        let (pc, sync) = (top.pc, self.sync);
        // The header, then exactly the packet it announces: nothing past
        // the packet is fetched.
        let left = (top.len - pc) as usize;
        let head = self
            .reader
            .bytes(bus, pc, left.min(8))
            .map_err(JobEnd::Fault)?;
        let bulk = packets::opcode(packets::le32(head, 4)) == op::WREG_BULK;
        let want = packet_size(head, sync)
            .ok()
            .and_then(|n| usize::try_from(n).ok())
            .unwrap_or(8);
        // A `WREG_BULK`'s values (up to 512 KiB of them) are read one by
        // one as they are written: its fetch stops at 24 bytes (what a
        // decode looks at).
        let want = if bulk { want.min(24) } else { want };
        let bytes = self
            .reader
            .bytes(bus, pc, want.min(left))
            .map_err(JobEnd::Fault)?;
        let addr = top.cb.wrapping_add(u64::from(pc));
        let ctl = packets::le32(bytes, 4);
        let (packet, len) =
            decode(bytes, left as u64, sync).map_err(|error| JobEnd::BadPacket { addr, error })?;
        // `len` <= `top.len - pc`.
        let len = u32::try_from(len).unwrap_or(u32::MAX);
        if sync && !regs.holds(bus, top.lower, packets::pred(ctl)) {
            return Ok((Flow::Next, len));
        }
        let bad = |error| JobEnd::BadPacket { addr, error };
        let flow = match packet {
            Packet::LinDma(_) if !bus.dma_core() => {
                return Err(bad(PacketError::Undefined {
                    opcode: op::LIN_DMA,
                }));
            }
            Packet::LinDma(d) => lin_dma(bus, data, &d).map(|()| Flow::Next)?,
            Packet::Fence { id, target, dec } => {
                bus.fence(top.lower, (id, target, dec))
                    .map_err(JobEnd::Stopped)?;
                Flow::Next
            }
            Packet::CpDma { tsize, src, upper } => Flow::Call {
                cb: src,
                len: tsize,
                upper,
            },
            Packet::CbList { index, table } => {
                cb_list(bus, (regs, top.lower), (index, table), bad)?
            }
            Packet::LoadAndExe { cfg, src } => {
                // Only a load changes the CP's registers.
                let r = if cfg & packets::LAE_LOAD != 0 {
                    regs.get_mut(bus, top.lower)
                } else {
                    regs.get(bus, top.lower)
                };
                load_and_exe(bus, (r, top.lower), (cfg, src), bad)?;
                Flow::Next
            }
            Packet::WregBulk { offset, count } => {
                wreg_bulk(bus, addr, (offset, count))?;
                Flow::Next
            }
            Packet::Stop => Flow::Stop,
            p => {
                message(bus, top.lower, p)?;
                Flow::Next
            }
        };
        commits(bus, data).map(|()| (flow, len))
    }
}

/// A CP's registers a job reads and changes besides its frames: the
/// predicates (bit `p` predicate `p`, P0 always set) and the scalar
/// registers R0..R3 (`LOAD_AND_EXE`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CpRegs {
    /// The predicates.
    pub pred: u32,
    /// R0..R3.
    pub scalars: [u32; 4],
}

impl CpRegs {
    /// An idle CP's: P0 alone, the scalars 0.
    pub const IDLE: Self = Self {
        pred: 1,
        scalars: [0; 4],
    };

    /// Whether predicate `p` holds (P0 always does). O(1).
    fn holds(&self, p: u32) -> bool {
        p == 0 || (p < 32 && self.pred & (1 << p) != 0)
    }
}

/// The register and message packets (`MSG_LONG`, `MSG_SHORT`, `WREG_32`;
/// `NOP` and `ARB_POINT` do nothing here). O(1).
fn message<B: EngineBus>(
    bus: &mut B,
    lower: bool,
    p: Packet,
) -> Result<(), JobEnd<B::Fault, B::Stop>> {
    let (at, value) = match p {
        Packet::MsgLong { value, addr } => (addr, value),
        Packet::MsgShort {
            value,
            base,
            offset,
        } => (
            bus.msg_base(lower, base).wrapping_add(u64::from(offset)),
            value,
        ),
        Packet::Wreg32 { offset, value } => {
            (bus.qman_block().wrapping_add(u64::from(offset)), value)
        }
        _ => return Ok(()),
    };
    bus.write(at, &value.to_le_bytes()).map_err(JobEnd::Fault)
}

/// `WREG_BULK` at `at`: `count` registers of the QMAN's block from
/// `offset`, each the low u32 of the u64 at `at + 8 + 8 i`, read as it is
/// written (a stop is honoured, and the CPU given up, every
/// [`RESCHED_PACKETS`] values). O(count).
fn wreg_bulk<B: EngineBus>(
    bus: &mut B,
    at: u64,
    (offset, count): (u32, u32),
) -> Result<(), JobEnd<B::Fault, B::Stop>> {
    let block = bus.qman_block().wrapping_add(u64::from(offset));
    for i in 0..u64::from(count) {
        if i > 0 && i % u64::from(RESCHED_PACKETS) == 0 {
            if let Some(stop) = bus.stop() {
                return Err(JobEnd::Stopped(stop));
            }
            bus.point();
        }
        let mut v = [0u8; 8];
        bus.read(at.wrapping_add(8 + 8 * i), &mut v)
            .map_err(JobEnd::Fault)?;
        let value = packets::le32(&v, 0);
        bus.write(block.wrapping_add(4 * i), &value.to_le_bytes())
            .map_err(JobEnd::Fault)?;
    }
    Ok(())
}

/// `CB_LIST`: the `CP_DMA` at entry `*index` of `table`, run in its place
/// (skipped if its predicate is clear). O(two reads).
fn cb_list<B: EngineBus>(
    bus: &mut B,
    (regs, lower): (&mut RegsCache, bool),
    (index, table): (u64, u64),
    bad: impl Fn(PacketError) -> JobEnd<B::Fault, B::Stop>,
) -> Result<Flow, JobEnd<B::Fault, B::Stop>> {
    let mut i = [0u8; 4];
    bus.read(index, &mut i).map_err(JobEnd::Fault)?;
    let at = u64::from(u32::from_le_bytes(i))
        .checked_mul(packets::CB_LIST_ENTRY)
        .and_then(|o| table.checked_add(o))
        .ok_or_else(|| JobEnd::Fault(bus.decode_fault(table)))?;
    let mut entry = [0u8; 16];
    bus.read(at, &mut entry).map_err(JobEnd::Fault)?;
    match packets::decode(&entry, packets::CB_LIST_ENTRY) {
        Ok((Packet::CpDma { tsize, src, upper }, _)) => {
            if regs.holds(bus, lower, packets::pred(packets::le32(&entry, 4))) {
                Ok(Flow::Call {
                    cb: src,
                    len: tsize,
                    upper,
                })
            } else {
                Ok(Flow::Next)
            }
        }
        _ => Err(bad(PacketError::Undefined {
            opcode: op::CB_LIST,
        })),
    }
}

/// `LOAD_AND_EXE` with `cfg` from `src` (layouts: `super::cp`'s module
/// doc). O(a 128-byte read + a packet).
fn load_and_exe<B: EngineBus>(
    bus: &mut B,
    (regs, lower): (&mut CpRegs, bool),
    (cfg, src): (u32, u64),
    bad: impl Fn(PacketError) -> JobEnd<B::Fault, B::Stop>,
) -> Result<(), JobEnd<B::Fault, B::Stop>> {
    if cfg & packets::LAE_LOAD != 0 {
        let mut b = [0u8; 128];
        let win = b
            .get_mut(..packets::lae_load_len(cfg))
            .ok_or_else(|| JobEnd::Fault(bus.decode_fault(src)))?;
        bus.read(src, win).map_err(JobEnd::Fault)?;
        packets::lae_load(cfg, &b, (&mut regs.pred, &mut regs.scalars));
    }
    if cfg & packets::LAE_EXE == 0 {
        return Ok(());
    }
    let undefined = PacketError::Undefined {
        opcode: op::LOAD_AND_EXE,
    };
    let (p, ctl) = packets::lae_exe(regs.scalars, cfg & packets::LAE_ETYPE != 0)
        .ok_or_else(|| bad(undefined))?;
    if regs.holds(packets::pred(ctl)) {
        message(bus, lower, p)?;
    }
    Ok(())
}

/// The DMA core's transfer a register write of the last packet committed,
/// run by this engine ([`EngineBus::take_commit`]). A fault ends the
/// transfer without its completion write, not the job: as on a host that
/// runs the cores on their own, the job that committed it goes on. A
/// transfer whose completion commits another is a loop a user may build:
/// each one is a reschedule point, and a stop ends it. O(bytes).
fn commits<B: EngineBus>(bus: &mut B, data: &mut [u8]) -> Result<(), JobEnd<B::Fault, B::Stop>> {
    while let Some(t) = bus.take_commit() {
        if let Some(stop) = bus.stop() {
            return Err(JobEnd::Stopped(stop));
        }
        bus.point();
        if let Err(JobEnd::Stopped(s)) = transfer(bus, data, &t) {
            return Err(JobEnd::Stopped(s));
        }
    }
    Ok(())
}

/// A DMA core's committed transfer `t` (`super::dma_core`), run by the
/// engine whose write committed it: the linear copy or memset as a
/// `LIN_DMA` through the same bus, then its completion write, if any.
/// O(tsize).
fn transfer<B: EngineBus>(
    bus: &mut B,
    buf: &mut [u8],
    t: &Transfer,
) -> Result<(), JobEnd<B::Fault, B::Stop>> {
    let d = LinDma {
        tsize: t.tsize,
        src: t.src,
        dst: t.dst,
        swap: packets::Swap::None,
        memset: t.memset(),
    };
    if d.tsize > 0 {
        lin_dma(bus, buf, &d)?;
    }
    if let Some((addr, data)) = t.completion() {
        bus.write(addr, &data.to_le_bytes())
            .map_err(JobEnd::Fault)?;
    }
    Ok(())
}

/// One `LIN_DMA`, in chunks of the bounce buffer `buf`. O(tsize).
fn lin_dma<B: EngineBus>(
    bus: &mut B,
    buf: &mut [u8],
    d: &LinDma,
) -> Result<(), JobEnd<B::Fault, B::Stop>> {
    let total = u64::from(d.tsize);
    let chunk = buf.len() as u64;
    let wraps = |bus: &B, addr| JobEnd::Fault(bus.decode_fault(addr));
    if chunk == 0 {
        return Err(wraps(bus, d.dst));
    }
    if d.memset {
        // The chunk is a whole number of u64s: every chunk starts the
        // pattern over.
        let value = d.src.to_le_bytes();
        for (b, v) in buf.iter_mut().zip(value.iter().cycle()) {
            *b = *v;
        }
    }
    let mut done = 0u64;
    while done < total {
        if done > 0 {
            if let Some(stop) = bus.stop() {
                return Err(JobEnd::Stopped(stop));
            }
            bus.point();
        }
        let n = (total - done).min(chunk) as usize;
        let dst = d.dst.checked_add(done).ok_or(wraps(bus, d.dst))?;
        let piece = buf.get_mut(..n).ok_or(wraps(bus, d.dst))?;
        if !d.memset {
            let src = d.src.checked_add(done).ok_or(wraps(bus, d.src))?;
            bus.read(src, piece).map_err(JobEnd::Fault)?;
            d.swap.apply(piece);
        }
        bus.write(dst, piece).map_err(JobEnd::Fault)?;
        done += n as u64;
    }
    Ok(())
}
