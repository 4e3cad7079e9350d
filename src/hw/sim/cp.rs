// SPDX-License-Identifier: GPL-2.0

//! The command processor of a simulated engine's QMAN: how one job runs.
//!
//! A job is `cb_size` bytes of packets at the device address `cb` (host
//! VA, DRAM VA or SRAM, any alignment), read through the engine's side of
//! the MMUs ([`SimGaudi2::engine_read`]) with the queue's ASID. The CB is
//! fetched in windows that never cross a 4 KiB page of the CB unless a
//! packet does (so a packet runs before a fault on a later page of its CB,
//! as the CP fetches ahead no further than the page), and each packet is
//! decoded ([`super::packets`]) and executed before the next is read.
//!
//! A `LIN_DMA` moves its bytes through the engine's bounce buffer
//! ([`DMA_CHUNK`] bytes, allocated once per engine), one chunk at a time:
//! read, swapped, written. So a transfer of up to 4 GiB - 1 costs no more
//! memory than one chunk. Between chunks, and before every packet, the job
//! asks its owner whether to stop ([`JobOwner::stop`]): a CS aborted by a
//! fault on another engine, timed out or closed stops within a chunk.
//!
//! **Reschedule points.** A job reaches a reschedule point
//! ([`Pace::point`]) every [`RESCHED_PACKETS`] packets, between the chunks
//! of a DMA and at its end: a CB of any length, or a `LIN_DMA` or memset of
//! 4 GiB, never runs for more than 64 KiB of copying or 64 packets without
//! one. There the engine charges its time to its context's CPU budget
//! (`super::cpu_budget`) and sleeps off a debt, or yields the CPU
//! (`cond_resched`) to whoever waits for it, preemptible kernel or not.
//!
//! A job ends at the first fault (the pieces before it were done), at the
//! first packet it cannot execute, when told to stop, or after its last
//! packet; [`JobEnd`] says which. It never waits for anything but memory.

use super::cpu_budget::Pace;
use super::{
    engine_mem::EngineAccess,
    fault::EngineFault,
    job::{JobEnd, JobOwner},
    packets::{self, LinDma, Packet, PacketError},
    SimGaudi2,
};
use kernel::{alloc::KVVec, prelude::*};

/// Bytes a `LIN_DMA` moves per step (the bounce buffer).
pub(crate) const DMA_CHUNK: usize = 64 * 1024;
/// Packets between two reschedule points of a job: a CB of millions of
/// NOPs or MSG_LONGs gives the CPU up as often as a DMA does (every 64
/// KiB), so a preempted or throttled engine stops soon even on a kernel
/// without preemption.
pub(crate) const RESCHED_PACKETS: u32 = 64;
/// Bytes of the CB fetch window: one page.
const CB_WINDOW: usize = 4096;
const CB_WINDOW_U64: u64 = CB_WINDOW as u64;

/// The buffers an engine executes with, allocated once.
pub(crate) struct Scratch {
    /// The CB fetch window.
    cb: KVVec<u8>,
    /// The `LIN_DMA` bounce buffer.
    data: KVVec<u8>,
}

impl Scratch {
    /// Both buffers, zeroed. O(68 KiB).
    pub(crate) fn new() -> Result<Self> {
        Ok(Self {
            cb: KVVec::from_elem(0u8, CB_WINDOW, GFP_KERNEL)?,
            data: KVVec::from_elem(0u8, DMA_CHUNK, GFP_KERNEL)?,
        })
    }
}

/// The CB of a job as the CP fetches it: a window of up to one page.
struct CbReader<'a> {
    sim: &'a SimGaudi2,
    who: EngineAccess,
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
    fn bytes(&mut self, at: u32, n: usize) -> Result<&[u8], EngineFault> {
        let decode = EngineFault::Decode {
            addr: self.base,
            engine: self.who.engine,
        };
        let (start, len) = self.win;
        let inside = at >= start && ((at - start) as usize).saturating_add(n) <= len;
        if !inside {
            let addr = self.base.checked_add(u64::from(at)).ok_or(decode)?;
            let page_left = (CB_WINDOW_U64 - addr % CB_WINDOW_U64) as usize;
            let left = self.size.saturating_sub(at) as usize;
            let len = page_left.max(n).min(left).min(self.buf.len());
            let dst = self.buf.get_mut(..len).ok_or(decode)?;
            self.win = (at, 0);
            self.sim.engine_read(self.who, addr, dst)?;
            self.win = (at, len);
        }
        let off = at.saturating_sub(self.win.0) as usize;
        self.buf.get(off..off.saturating_add(n)).ok_or(decode)
    }
}

/// Run the job of `size` bytes of CB at `base` for `owner`, as engine
/// `who` with `scratch`: fetch, decode and execute its packets in order.
/// O(size + bytes moved).
pub(crate) fn execute(
    sim: &SimGaudi2,
    scratch: &mut Scratch,
    who: EngineAccess,
    (base, size): (u64, u32),
    owner: &dyn JobOwner,
    pace: &mut Pace<'_>,
) -> JobEnd {
    let Scratch { cb, data } = scratch;
    let mut reader = CbReader {
        sim,
        who,
        base,
        size,
        win: (0, 0),
        buf: cb,
    };
    let mut pc = 0u32;
    let mut packets = 0u32;
    while pc < size {
        if let Some(stop) = owner.stop() {
            return JobEnd::Stopped(stop);
        }
        packets = packets.wrapping_add(1);
        if packets % RESCHED_PACKETS == 0 {
            pace.point();
        }
        // The header, then exactly the packet it announces: nothing past
        // the packet is fetched.
        let left = (size - pc) as usize;
        let head = match reader.bytes(pc, left.min(8)) {
            Ok(h) => <[u8; 8]>::try_from(h).ok(),
            Err(f) => return JobEnd::Fault(f),
        };
        let want = head.and_then(|h| packets::packet_size(h).ok()).unwrap_or(8);
        let bytes = match reader.bytes(pc, want.min(left)) {
            Ok(b) => b,
            Err(f) => return JobEnd::Fault(f),
        };
        let addr = base.wrapping_add(u64::from(pc));
        let opcode = packets::opcode_of(bytes);
        let (packet, len) = match packets::decode(bytes) {
            Ok(p) => p,
            Err(error) => return JobEnd::BadPacket { addr, error },
        };
        let r = match packet {
            Packet::Nop => Ok(()),
            Packet::MsgLong { value, addr } => sim
                .engine_write(who, addr, &value.to_le_bytes())
                .map_err(JobEnd::Fault),
            Packet::LinDma(d) => lin_dma(sim, data, who, &d, (owner, &mut *pace)),
            // `decode` refuses the packets the simulated engines do not run.
            _ => Err(JobEnd::BadPacket {
                addr,
                error: PacketError::Unsupported { opcode },
            }),
        };
        if let Err(end) = r {
            return end;
        }
        // `len` <= `want` <= `size - pc`.
        pc += len as u32;
    }
    JobEnd::Done
}

/// One `LIN_DMA`, in chunks of the bounce buffer `buf`. O(tsize).
fn lin_dma(
    sim: &SimGaudi2,
    buf: &mut [u8],
    who: EngineAccess,
    d: &LinDma,
    (owner, pace): (&dyn JobOwner, &mut Pace<'_>),
) -> Result<(), JobEnd> {
    let total = u64::from(d.tsize);
    let chunk = buf.len() as u64;
    let wraps = |addr| {
        JobEnd::Fault(EngineFault::Decode {
            addr,
            engine: who.engine,
        })
    };
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
            if let Some(stop) = owner.stop() {
                return Err(JobEnd::Stopped(stop));
            }
            pace.point();
        }
        let n = (total - done).min(chunk) as usize;
        let piece = buf.get_mut(..n).ok_or(wraps(d.dst))?;
        let dst = d.dst.checked_add(done).ok_or(wraps(d.dst))?;
        if !d.memset {
            let src = d.src.checked_add(done).ok_or(wraps(d.src))?;
            sim.engine_read(who, src, piece).map_err(JobEnd::Fault)?;
            d.swap.apply(piece);
        }
        sim.engine_write(who, dst, piece).map_err(JobEnd::Fault)?;
        done += n as u64;
    }
    Ok(())
}

#[kunit_tests(hlrs_cp)]
mod tests {
    use super::*;
    use crate::hw::sim::cpu_budget::CpuBudget;

    /// `execute` with no CPU bound.
    fn run(
        sim: &SimGaudi2,
        s: &mut Scratch,
        who: EngineAccess,
        cb: (u64, u32),
        owner: &dyn JobOwner,
    ) -> JobEnd {
        let unbounded = || 0;
        match kernel::sync::Arc::pin_init(CpuBudget::new(unbounded), GFP_KERNEL) {
            Ok(budget) => execute(sim, s, who, cb, owner, &mut Pace::new(&budget)),
            // No budget: an end no test expects.
            Err(_) => JobEnd::Fault(EngineFault::Backing { addr: 0, engine: 0 }),
        }
    }
    use crate::{
        asic::{AsicProperties, SRAM_BASE_ADDR, SRAM_SIZE},
        hw::{
            backend::{Backend, MmuKind},
            sim::{
                job::Stop,
                packets::{
                    build::{lin_dma as dma, msg_long, nop},
                    PacketError,
                },
            },
        },
        uapi::PACKET_MSG_LONG,
    };
    use kernel::sync::{
        atomic::{Atomic, Relaxed},
        Arc,
    };

    const SRAM: u64 = SRAM_BASE_ADDR;

    #[test]
    fn a_cb_runs_its_packets_in_order() -> Result {
        let (sim, mut s) = setup()?;
        let who = EngineAccess::new(45, 1);
        sim.sram_write(SRAM + 0x1000, &[7u8; 300])?;
        let cb = cb_at(
            &sim,
            SRAM + 0x8000 - 12,
            &[
                &nop(true, false),
                &msg_long(SRAM + 0x2000, 0x0403_0201),
                &dma(SRAM + 0x1000, SRAM + 0x2004, 300, 0, false),
                &dma(SRAM + 0x2000, SRAM + 0x3000, 304, 1, false),
            ],
        )?;
        let owner = Owner::new(u32::MAX);
        assert_eq!(run(&sim, &mut s, who, cb, &owner), JobEnd::Done);
        let mut b = [0u8; 8];
        sim.sram_read(SRAM + 0x3000, &mut b)?;
        assert_eq!(b, [2, 1, 4, 3, 7, 7, 7, 7]);
        // One check per packet.
        assert_eq!(owner.checks.load(Relaxed), 4);
        Ok(())
    }

    #[test]
    fn a_cb_stops_at_its_first_bad_packet_or_fault() -> Result {
        let (sim, mut s) = setup()?;
        let who = EngineAccess::new(0, 1);
        let owner = Owner::new(u32::MAX);
        // Cut short: a MSG_LONG of which 12 bytes are in the CB.
        let (at, _) = cb_at(&sim, SRAM, &[&nop(false, false), &msg_long(SRAM, 1)])?;
        let end = run(&sim, &mut s, who, (at, 20), &owner);
        let error = PacketError::Truncated {
            opcode: PACKET_MSG_LONG,
            need: 16,
        };
        assert_eq!(
            end,
            JobEnd::BadPacket {
                addr: at + 8,
                error
            }
        );
        // The last packet of SRAM runs; the fetch past its end (DRAM space,
        // through the DMMU, where ASID 1 has no tables) faults.
        let top = SRAM + SRAM_SIZE;
        let cb = cb_at(&sim, top - 16, &[&msg_long(SRAM + 0x100, 0xAB)])?;
        let end = run(&sim, &mut s, who, (cb.0, 24), &owner);
        assert!(matches!(end, JobEnd::Fault(EngineFault::Page { va, .. }) if va == top));
        let mut v = [0u8; 4];
        sim.sram_read(SRAM + 0x100, &mut v)?;
        assert_eq!(v, [0xAB, 0, 0, 0]);
        // An ASID without tables: the CB fetch through the DMMU faults.
        let through = who.through(MmuKind::Dram);
        let end = run(&sim, &mut s, through, cb, &owner);
        assert!(matches!(
            end,
            JobEnd::Fault(EngineFault::Page { asid: 1, .. })
        ));
        Ok(())
    }

    #[test]
    fn a_dma_stops_between_chunks_when_told() -> Result {
        let (sim, mut s) = setup()?;
        let who = EngineAccess::new(1, 1);
        let size = 4 * DMA_CHUNK as u32;
        let cb = cb_at(
            &sim,
            SRAM,
            &[&dma(0x5a5a_5a5a_5a5a_5a5a, SRAM + 0x10_0000, size, 0, true)],
        )?;
        // The packet's check, then one before each chunk but the first: the
        // third check stops it after two chunks.
        let owner = Owner::new(3);
        assert_eq!(
            run(&sim, &mut s, who, cb, &owner),
            JobEnd::Stopped(Stop::Halted)
        );
        let mut b = [0u8; 2];
        sim.sram_read(SRAM + 0x10_0000 + 2 * DMA_CHUNK as u64 - 1, &mut b)?;
        assert_eq!(b, [0x5a, 0]);
        Ok(())
    }

    /// An owner that says stop at its `n`-th check.
    struct Owner {
        checks: Atomic<u32>,
        stop_at: u32,
    }

    impl Owner {
        fn new(stop_at: u32) -> Self {
            Self {
                checks: Atomic::new(0),
                stop_at,
            }
        }
    }

    impl JobOwner for Owner {
        fn stop(&self) -> Option<Stop> {
            let n = self.checks.fetch_add(1, Relaxed) + 1;
            (n >= self.stop_at).then_some(Stop::Halted)
        }

        fn done(&self, _engine: u16, _end: JobEnd) {}
    }

    fn setup() -> Result<(Arc<SimGaudi2>, Scratch)> {
        let asic = AsicProperties::gaudi2(6, 0)?;
        Ok((
            Arc::pin_init(SimGaudi2::new(&asic), GFP_KERNEL)?,
            Scratch::new()?,
        ))
    }

    /// Write the packets at `at` in SRAM: the CB's address and size.
    fn cb_at(sim: &SimGaudi2, at: u64, packets: &[&[u8]]) -> Result<(u64, u32)> {
        let mut off = 0;
        for p in packets {
            sim.sram_write(at + off, p)?;
            off += p.len() as u64;
        }
        Ok((at, off as u32))
    }
}
