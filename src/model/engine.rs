// SPDX-License-Identifier: GPL-2.0

//! One engine's command processor running a job to its end: how a QMAN
//! stream of host 1 (the in-module simulation, one kernel thread per
//! engine and context) executes a CB. Host 2 steps the same packets per
//! stream in slices (`super::cp`).
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
//! The packets an engine runs without a sync manager: `NOP`, `MSG_LONG`
//! (the u32 written at its address) and `LIN_DMA` (copy, memset, byte
//! swaps). Every other opcode is refused as undefined before more than its
//! header is fetched; the sync manager's packets come with it (issue 32).
//!
//! A `LIN_DMA` moves its bytes through the host's bounce buffer, one chunk
//! at a time: read, swapped, written, so a transfer of up to 4 GiB - 1
//! costs no more memory than one chunk. Between chunks, and before every
//! packet, the job asks the host whether to stop ([`EngineBus::stop`]).
//!
//! **Reschedule points** ([`EngineBus::point`]): every [`RESCHED_PACKETS`]
//! packets and between the chunks of a DMA: a CB of any length never runs
//! for more than one chunk of copying or 64 packets without one.
//!
//! A job ends at the first fault (the pieces before it were done), at the
//! first packet it cannot execute, when told to stop, or after its last
//! packet; [`JobEnd`] says which. It waits for nothing but memory.

use super::packets::{self, op, LinDma, Packet, PacketError};

/// Packets between two reschedule points of a job: a CB of millions of
/// NOPs or MSG_LONGs gives the CPU up as often as a DMA does.
pub const RESCHED_PACKETS: u32 = 64;
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
/// it (see the module doc). O(1).
pub fn packet_size(head: &[u8]) -> Result<u64, PacketError> {
    let opcode = packets::opcode(packets::le32(head, 4));
    let head: &[u8; 8] = head
        .get(..8)
        .and_then(|h| h.try_into().ok())
        .ok_or(PacketError::Truncated { opcode, need: 8 })?;
    match opcode {
        op::NOP | op::MSG_LONG | op::LIN_DMA => packets::packet_size(head),
        opcode => Err(PacketError::Undefined { opcode }),
    }
}

/// Decode the packet at the start of `bytes` (the rest of the CB) if an
/// engine runs it; returns it and its size. O(1).
pub fn decode(bytes: &[u8]) -> Result<(Packet, u64), PacketError> {
    packet_size(bytes)?;
    packets::decode(bytes, bytes.len() as u64)
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

/// Run the job of `size` bytes of CB at `base` on `bus`, with `window` (at
/// least [`CB_WINDOW`] bytes) for the CB and `data` (a whole number of
/// u64s) as the DMA bounce buffer: fetch, decode and execute its packets
/// in order. O(size + bytes moved).
pub fn execute<B: EngineBus>(
    bus: &mut B,
    (window, data): (&mut [u8], &mut [u8]),
    (base, size): (u64, u32),
) -> JobEnd<B::Fault, B::Stop> {
    let mut reader = CbReader {
        base,
        size,
        win: (0, 0),
        buf: window,
    };
    let mut pc = 0u32;
    let mut count = 0u32;
    while pc < size {
        if let Some(stop) = bus.stop() {
            return JobEnd::Stopped(stop);
        }
        count = count.wrapping_add(1);
        if count % RESCHED_PACKETS == 0 {
            bus.point();
        }
        // The header, then exactly the packet it announces: nothing past
        // the packet is fetched.
        let left = (size - pc) as usize;
        let want = match reader.bytes(bus, pc, left.min(8)) {
            Ok(h) => packet_size(h)
                .ok()
                .and_then(|n| usize::try_from(n).ok())
                .unwrap_or(8),
            Err(f) => return JobEnd::Fault(f),
        };
        let bytes = match reader.bytes(bus, pc, want.min(left)) {
            Ok(b) => b,
            Err(f) => return JobEnd::Fault(f),
        };
        let addr = base.wrapping_add(u64::from(pc));
        let (packet, len) = match decode(bytes) {
            Ok(p) => p,
            Err(error) => return JobEnd::BadPacket { addr, error },
        };
        let r = match packet {
            Packet::LinDma(_) if !bus.dma_core() => {
                let error = PacketError::Undefined {
                    opcode: op::LIN_DMA,
                };
                return JobEnd::BadPacket { addr, error };
            }
            Packet::MsgLong { value, addr } => {
                bus.write(addr, &value.to_le_bytes()).map_err(JobEnd::Fault)
            }
            Packet::LinDma(d) => lin_dma(bus, data, &d),
            // `decode` refuses every other packet but NOP.
            _ => Ok(()),
        };
        if let Err(end) = r {
            return end;
        }
        // `len` <= `want` <= `size - pc`.
        pc = pc.saturating_add(u32::try_from(len).unwrap_or(u32::MAX));
    }
    JobEnd::Done
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
