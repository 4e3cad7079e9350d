// SPDX-License-Identifier: GPL-2.0

//! The command processor of a simulated engine's QMAN: the model core's
//! ([`crate::model::engine`]: fetch, decode, `MSG_LONG`, `LIN_DMA`), hosted
//! on an engine thread of this module.
//!
//! What this host adds: the buffers (a 4 KiB CB window and a
//! [`DMA_CHUNK`] bounce buffer, allocated once per engine), the engine's
//! memory ([`SimGaudi2::engine_read`] and `engine_write`, with the queue's
//! ASID), the owner's stop ([`JobOwner::stop`]: a CS aborted by a fault on
//! another engine, timed out or closed stops within a chunk) and the
//! reschedule points ([`Pace::point`]: there the engine charges its time
//! to its context's CPU budget, `super::cpu_budget`, and sleeps off a debt,
//! or yields the CPU). A job reaches one every
//! [`RESCHED_PACKETS`](engine::RESCHED_PACKETS) packets and between the
//! chunks of a DMA: a CB of any length, or a `LIN_DMA` of 4 GiB, never runs
//! for more than 64 KiB of copying or 64 packets without one.

use super::cpu_budget::Pace;
use super::{
    engine_mem::EngineAccess,
    fault::EngineFault,
    job::{JobEnd, JobOwner, Stop},
    packets::refused,
    SimGaudi2,
};
use crate::model::{
    dma_core::Transfer,
    engine::{self, CpRegs, EngineBus},
    qman,
    regs::{cfg_reg, CFG_BASE},
};
use kernel::{alloc::KVVec, prelude::*};

/// Bytes a `LIN_DMA` moves per step (the bounce buffer).
pub(crate) const DMA_CHUNK: usize = 64 * 1024;
/// The bounce buffer of a queue without a DMA core (MME, TPC): its CBs
/// run no `LIN_DMA`, but may commit a DMA core's transfer, which runs on
/// the committing engine (`engine::transfer`).
const CORE_CHUNK: usize = 4096;

/// The buffers an engine executes with, allocated once.
pub(crate) struct Scratch {
    /// The CB fetch window.
    cb: KVVec<u8>,
    /// The `LIN_DMA` bounce buffer.
    data: KVVec<u8>,
}

impl Scratch {
    /// Both buffers, zeroed; a full bounce buffer only with `dma` (a
    /// queue without a DMA core runs no `LIN_DMA`, only the transfers its
    /// CBs commit, in [`CORE_CHUNK`] pieces). O(68 KiB, or 8 KiB).
    pub(crate) fn new(dma: bool) -> Result<Self> {
        Ok(Self {
            cb: KVVec::from_elem(0u8, engine::CB_WINDOW, GFP_KERNEL)?,
            data: KVVec::from_elem(0u8, if dma { DMA_CHUNK } else { CORE_CHUNK }, GFP_KERNEL)?,
        })
    }
}

/// Where a stream's job hands CBs for its QMAN's lower CP
/// (`super::qman::lower_cp`).
pub(crate) trait LowerCp {
    /// Queue `cb` for the lower CP, sleeping while its queue is full;
    /// `Err` if `halted` says so first.
    fn hand(&self, cb: (u64, u32), halted: &dyn Fn() -> Option<Stop>) -> Result<(), Stop>;
    /// Whether the running job is cancelled: a CB it handed failed (or
    /// [`Self::cancel`]). O(1).
    fn failed(&self) -> bool;
    /// Cancel the CBs the running job handed (it faulted itself): they
    /// stop at their next packet. O(1).
    fn cancel(&self);
    /// Wait until every CB the job handed has ended (those still queued
    /// are dropped once the job is halted or cancelled): the first failure.
    fn settle(&self) -> Option<JobEnd>;
}

/// The engine's side of this host, as the model core's CP sees it.
struct Bus<'a, 'b> {
    sim: &'a SimGaudi2,
    who: EngineAccess,
    /// The QMAN (= engine index) and the stream whose CP runs the job.
    slot: (usize, usize),
    owner: &'a dyn JobOwner,
    pace: &'a mut Pace<'b>,
    dma: bool,
    /// The QMAN's lower CP, for a job of an upper CP.
    lower: Option<&'a dyn LowerCp>,
    /// A DMA core's transfer this job's last register write committed, for
    /// the job to run ([`EngineBus::take_commit`]).
    commit: Option<Transfer>,
}

/// Whether a job must stop: its `owner` says so, or a CB it handed to its
/// `lower` CP failed. O(1).
fn halted(owner: &dyn JobOwner, lower: Option<&dyn LowerCp>) -> Option<Stop> {
    owner
        .stop()
        .or_else(|| lower.filter(|l| l.failed()).map(|_| Stop::Halted))
}

impl Bus<'_, '_> {
    /// [`halted`] for this job. O(1).
    fn halted(&self) -> Option<Stop> {
        halted(self.owner, self.lower)
    }

    /// The QMAN and CP a frame runs on: the stream's, or its QMAN's lower
    /// CP. O(1).
    fn cp(&self, lower: bool) -> (usize, usize) {
        (self.slot.0, if lower { qman::LOWER } else { self.slot.1 })
    }

    /// A u32 write into the register space at `reg`: the sync manager's
    /// and the CP's registers a user CB may write (the monitors it fires
    /// drained here, between reschedule points, until none is left or the
    /// job is stopped); `false` for any other register (a RAZWI). O(the
    /// firings).
    fn register_write(&mut self, reg: u32, val: u32) -> bool {
        let sync = &self.sim.sync;
        let mut more = false;
        let mut commit = None;
        let stopped = || self.halted().is_some();
        if !sync.user_write(self.sim, (reg, val), &stopped, (&mut more, &mut commit)) {
            return false;
        }
        if commit.is_some() {
            self.commit = commit;
        }
        while more && self.halted().is_none() {
            self.pace.point();
            more = sync.drain(self.sim);
        }
        true
    }
}

impl EngineBus for Bus<'_, '_> {
    type Fault = EngineFault;
    type Stop = Stop;

    fn read(&mut self, addr: u64, buf: &mut [u8]) -> Result<(), EngineFault> {
        self.sim.engine_read(self.who, addr, buf)
    }

    fn write(&mut self, addr: u64, data: &[u8]) -> Result<(), EngineFault> {
        let reg = cfg_reg(addr);
        let val = data.try_into().ok().map(u32::from_le_bytes);
        if let (Some(reg), Some(val)) = (reg, val) {
            if self.register_write(reg, val) {
                return Ok(());
            }
        }
        // Memory through the MMUs; any other register is a RAZWI there.
        self.sim.engine_write(self.who, addr, data)
    }

    fn decode_fault(&self, addr: u64) -> EngineFault {
        EngineFault::Decode {
            addr,
            engine: self.who.engine,
        }
    }

    fn stop(&mut self) -> Option<Stop> {
        self.halted()
    }

    fn point(&mut self) {
        self.pace.point();
    }

    fn dma_core(&self) -> bool {
        self.dma
    }

    fn sync_manager(&self) -> bool {
        true
    }

    fn msg_base(&mut self, lower: bool, base: u32) -> u64 {
        self.sim.sync.msg_base(self.cp(lower), base)
    }

    fn qman_block(&self) -> u64 {
        CFG_BASE.wrapping_add(u64::from(qman::base(self.slot.0).unwrap_or(0)))
    }

    fn cp_regs(&mut self, lower: bool) -> CpRegs {
        self.sim.sync.cp_regs(self.cp(lower))
    }

    fn set_cp_regs(&mut self, lower: bool, regs: CpRegs) {
        self.sim.sync.set_cp_regs(self.cp(lower), regs);
    }

    fn fence(&mut self, lower: bool, fence: (u32, u32, u32)) -> Result<(), Stop> {
        let (owner, handed) = (self.owner, self.lower);
        self.sim
            .sync
            .fence_wait(self.cp(lower), fence, &mut || halted(owner, handed))
    }

    fn take_commit(&mut self) -> Option<Transfer> {
        self.commit.take()
    }

    fn hand_to_lower(&mut self, cb: u64, len: u32) -> Result<bool, Stop> {
        let Some(lower) = self.lower else {
            return Ok(false);
        };
        let owner = self.owner;
        lower.hand((cb, len), &|| halted(owner, Some(lower)))?;
        Ok(true)
    }
}

/// Run the job of `size` bytes of CB at `base` for `owner`, as engine
/// `who` with `scratch` (`dma`: a DMA core is behind its QMAN): fetch,
/// decode and execute its packets in order (the model core's CP). On the
/// stream's upper CP, handing the CBs of `CP_DMA`s with `upper_cp` clear
/// to `lower` (without one, the stream calls them as frames of the lower
/// CP); with `lower_cp`, the job is a CB handed to the lower CP.
/// O(size + bytes moved).
pub(crate) fn execute(
    sim: &SimGaudi2,
    (scratch, dma): (&mut Scratch, bool),
    (who, slot): (EngineAccess, (usize, usize)),
    (cb, owner): ((u64, u32), &dyn JobOwner),
    (lower, lower_cp): (Option<&dyn LowerCp>, bool),
    pace: &mut Pace<'_>,
) -> JobEnd {
    let mut bus = Bus {
        sim,
        who,
        slot,
        owner,
        pace,
        dma,
        lower,
        commit: None,
    };
    let bufs = (&mut scratch.cb[..], &mut scratch.data[..]);
    let end = if lower_cp {
        engine::execute_lower(&mut bus, bufs, cb)
    } else {
        engine::execute(&mut bus, bufs, cb)
    };
    match end {
        engine::JobEnd::Done => JobEnd::Done,
        engine::JobEnd::Fault(f) => JobEnd::Fault(f),
        engine::JobEnd::Stopped(s) => JobEnd::Stopped(s),
        engine::JobEnd::BadPacket { addr, error } => JobEnd::BadPacket {
            addr,
            error: refused(error),
        },
    }
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
            Ok(budget) => execute(
                sim,
                (s, true),
                (who, (0, 0)),
                (cb, owner),
                (None, false),
                &mut Pace::new(&budget),
            ),
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
            Scratch::new(true)?,
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
