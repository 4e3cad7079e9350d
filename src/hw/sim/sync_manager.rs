// SPDX-License-Identifier: GPL-2.0

//! The simulated Gaudi2's sync manager and its QMANs' CP registers: the
//! model core's [`SyncManager`] (the four dcores' SOBs, monitors and CQs)
//! and [`Qman`] register state (each CP's message bases and fence
//! counters), hosted in the module (host 1). Host 2 (the model process
//! behind QEMU) holds the same two in its `Gaudi2`; both fire monitors
//! with the model core's [`sm::drain`].
//!
//! **What reaches it.** A CB's `MSG_LONG`, `MSG_SHORT` or `WREG_32` that
//! addresses the register space reaches a register when
//! [`security::user_writable`] allows it (the objects and QMAN registers
//! upstream's `gaudi2_security.c` leaves to users), else it is a RAZWI as
//! before ([`SimSync::user_write`]). A write to the sync manager updates it
//! and fires the monitors whose condition now holds; a monitor's message
//! is an LBW write into the register space (a SOB, a monitor, a CP's fence
//! counter) or a write into memory through the MMUs with the monitor's
//! ASID; a CQ's LBW write to `PCIE_MSIX` raises a user interrupt
//! ([`MsixSink`], the driver's user interrupts).
//!
//! **Fences.** A CP's `FENCE` sleeps until its counter reaches the target
//! ([`SimSync::fence_wait`]); every counter write wakes the sleepers. Each
//! stream of a QMAN runs on a thread of its own (`super::qman::worker`),
//! so a fenced stream holds only itself, as on silicon.
//!
//! **What a new context finds** ([`SimSync::reset_user`]): the objects a
//! user CB may write zeroed (DCORE0's from the sync-stream SOB 85 and
//! monitor 125 on, its CQs from 2; all of DCORE1..3's), every CP's fence
//! counters zeroed and its message bases as the driver sets them at init
//! (base 0 the monitors' payloads, base 1 the SOBs).
//!
//! **Bounds.** Monitor firings run [`sm::FIRE_BUDGET`] at a time; the
//! writing engine drains the rest between reschedule points, so a cycle of
//! monitors re-arming each other costs its own context's CPU time and ends
//! with the job (the rest waits for the next write).
//!
//! Lock order (the crate root's table): `SimSync::sm`, then
//! `SimSync::cps` or the memories (a monitor's message through the STLB);
//! `SimSync::cps` alone otherwise (a fence wait sleeps on it); `msix` is a
//! leaf, and interrupts are raised with no lock of here held.

use super::{engine_mem::EngineAccess, SimGaudi2};
use crate::hw::engines::MsixSink;
use crate::model::{
    dma_core::{DmaCore, Transfer},
    engine::CpRegs,
    qman::{self, Effect, Qman, CPS, QMANS},
    regs::{cfg_reg, qm, CFG_BASE},
    security,
    sm::{self, SmPort, SyncManager, DCORES, DCORE_STRIDE, MON_STATUS_PROT},
};
use kernel::{
    alloc::{KVBox, KVVec},
    new_condvar, new_mutex,
    prelude::*,
    sync::{Arc, CondVar, Mutex},
    time::msecs_to_jiffies,
};

/// The engine id a monitor's faulting memory write is reported with (the
/// sync manager is no engine of `GAUDI2_ENGINE_ID_*`).
pub(crate) const SM_ENGINE: u16 = u16::MAX;
/// How often a fence wait checks whether its job was stopped, in ms.
const FENCE_POLL_MS: u32 = 10;

/// The sync manager and the CP registers of one simulated device.
#[pin_data]
pub(crate) struct SimSync {
    #[pin]
    sm: Mutex<KVBox<SyncManager>>,
    /// The QMANs' register state, by QMAN (= engine index).
    #[pin]
    cps: Mutex<KVVec<Qman>>,
    /// Notified on every fence counter write and halt.
    #[pin]
    fenced: CondVar,
    /// Where user interrupts go (the driver's, connected at bring-up).
    #[pin]
    msix: Mutex<Option<Arc<dyn MsixSink>>>,
}

impl SimSync {
    /// Every object zeroed, no monitor armed, the CPs' message bases as
    /// the driver's init sets them. Allocates about 330 KiB. `ENOMEM`.
    /// O(size).
    pub(crate) fn new() -> impl PinInit<Self, Error> {
        try_pin_init!(Self {
            sm <- new_mutex!(KVBox::init(crate::ffi::zeroable::idle_sync_manager(), GFP_KERNEL)?),
            cps <- new_mutex!(idle_cps()?),
            fenced <- new_condvar!("SimSync::fenced"),
            msix <- new_mutex!(None),
        })
    }

    /// Send the user interrupts to `sink` (at the device's bring-up).
    /// O(1).
    pub(crate) fn connect(&self, sink: Arc<dyn MsixSink>) {
        *self.msix.lock() = Some(sink);
    }

    /// An engine's u32 write of `val` at the register `reg`: false if a
    /// user CB may not write it (the caller's RAZWI). Monitors it makes
    /// fire (the first [`sm::FIRE_BUDGET`]); `*more` tells whether some
    /// wait for [`Self::drain`]. A write that commits a DMA core's
    /// transfer takes it out of the core into `*commit`: this host has no
    /// engine of its own for the DMA cores, the writing engine runs it
    /// (`engine::transfer`). A job `stopped` (halted) by the time the
    /// lock is held writes nothing: a halt moves the job's epoch on before
    /// it takes the locks to disarm its stream's monitor and clear its
    /// fence, so no write of the halted job lands after that cleaning.
    /// O(monitors armed on a SOB's group + FIRE_BUDGET messages).
    pub(crate) fn user_write(
        &self,
        sim: &SimGaudi2,
        (reg, val): (u32, u32),
        stopped: &dyn Fn() -> bool,
        (more, commit): (&mut bool, &mut Option<Transfer>),
    ) -> bool {
        if !security::user_writable(reg) {
            return false;
        }
        if let Some((m, off)) = qman::decode(reg) {
            *commit = self.qman_write(m, off, val, stopped);
            return true;
        }
        *more = self.fire(sim, |sm| {
            if !stopped() {
                sm.write(reg, val);
            }
        });
        true
    }

    /// Fire the next [`sm::FIRE_BUDGET`] queued monitors; true while some
    /// are left. O(FIRE_BUDGET messages).
    pub(crate) fn drain(&self, sim: &SimGaudi2) -> bool {
        self.fire(sim, |_| {})
    }

    /// `change` the sync manager, then fire up to [`sm::FIRE_BUDGET`] of
    /// its queued monitors and raise their interrupts once its lock is
    /// dropped; true while some are left. O(change + FIRE_BUDGET messages).
    fn fire(&self, sim: &SimGaudi2, change: impl FnOnce(&mut SyncManager)) -> bool {
        let mut sm = self.sm.lock();
        change(&mut sm);
        let mut port = Port {
            sm: &mut sm,
            sync: self,
            sim,
            raised: 0,
        };
        let more = sm::drain(&mut port);
        let raised = port.raised;
        drop(sm);
        self.raise(raised);
        more
    }

    /// A write of QMAN `m`'s register at `off` (none if `stopped` once the
    /// lock is held; a fence counter's wakes the fence waiters). A write
    /// that commits the QMAN's DMA core's transfer returns it, taken out
    /// of the core (a commit the model refuses starts nothing). O(1).
    fn qman_write(
        &self,
        m: usize,
        off: u32,
        val: u32,
        stopped: &dyn Fn() -> bool,
    ) -> Option<Transfer> {
        let mut cps = self.cps.lock();
        if stopped() {
            return None;
        }
        let q = cps.get_mut(m)?;
        let effect = q.write(off, val);
        let commit = (effect == Effect::Commit).then(|| q.core.take()).flatten();
        drop(cps);
        if effect == Effect::Fence {
            self.fenced.notify_all();
        }
        commit
    }

    /// `CP_MSG_BASE[base]` of CP `c` of QMAN `m` (0 for a base or CP that
    /// does not exist). O(1).
    pub(crate) fn msg_base(&self, (m, c): (usize, usize), base: u32) -> u64 {
        let cps = self.cps.lock();
        cps.get(m)
            .and_then(|q| q.cp(c))
            .and_then(|cp| cp.msg_base.get(base as usize).copied())
            .unwrap_or(0)
    }

    /// The predicates and scalars of CP `c` of QMAN `m`. O(1).
    pub(crate) fn cp_regs(&self, (m, c): (usize, usize)) -> CpRegs {
        let cps = self.cps.lock();
        cps.get(m)
            .and_then(|q| q.cp(c))
            .map_or(CpRegs::IDLE, |cp| CpRegs {
                pred: cp.pred,
                scalars: cp.scalars,
            })
    }

    /// Set the predicates and scalars of CP `c` of QMAN `m`. O(1).
    pub(crate) fn set_cp_regs(&self, (m, c): (usize, usize), regs: CpRegs) {
        if let Some(cp) = self.cps.lock().get_mut(m).and_then(|q| q.cp_mut(c)) {
            cp.pred = regs.pred | 1;
            cp.scalars = regs.scalars;
        }
    }

    /// `FENCE` on counter `id` of CP `c` of QMAN `m`: sleep until it
    /// reaches `target`, then take `dec` off it; `stop` is asked every
    /// [`FENCE_POLL_MS`] and on every wake (a halt wakes at once). Sleeps;
    /// O(wakes).
    pub(crate) fn fence_wait<S>(
        &self,
        (m, c): (usize, usize),
        (id, target, dec): (u32, u32, u32),
        stop: &mut dyn FnMut() -> Option<S>,
    ) -> Result<(), S> {
        let mut cps = self.cps.lock();
        loop {
            let Some(v) = cps
                .get_mut(m)
                .and_then(|q| q.cp_mut(c))
                .and_then(|cp| cp.fence.get_mut(id as usize))
            else {
                return Ok(());
            };
            if *v >= target {
                *v = v.saturating_sub(dec);
                return Ok(());
            }
            if let Some(s) = stop() {
                return Err(s);
            }
            let _ = self
                .fenced
                .wait_interruptible_timeout(&mut cps, msecs_to_jiffies(FENCE_POLL_MS));
        }
    }

    /// Queues `(QMAN m, stream s)` of `slots` halted: each one's
    /// sync-stream monitor (`GAUDI2_RESERVED_MON_NUMBER + q`) disarmed and
    /// fence 2 of its CP cleared, so a halted WAIT leaves nothing that
    /// releases the next one early (as the PCI driver's halt does); then
    /// every fence wait is woken to ask its job whether to stop. Both locks
    /// taken once. O(slots + waiters).
    pub(crate) fn halt_streams(&self, slots: &mut dyn Iterator<Item = (usize, usize)>) {
        let mut sm = self.sm.lock();
        let mut cps = self.cps.lock();
        for (m, s) in slots {
            let mon = (sm::RESERVED_MONS + m * qman::STREAMS + s) as u32;
            sm.write(sm::OBJS_BASE + sm::MON_STATUS + 4 * mon, MON_STATUS_PROT);
            if let Some(f) = cps
                .get_mut(m)
                .and_then(|x| x.cp_mut(s))
                .and_then(|cp| cp.fence.get_mut(2))
            {
                *f = 0;
            }
        }
        drop(cps);
        drop(sm);
        self.fenced.notify_all();
    }

    /// DCORE0 sync-stream SOB `sob` set to 0 (a stream's switch). O(monitors
    /// armed on its group).
    pub(crate) fn reset_sob(&self, sob: u32) {
        self.sm
            .lock()
            .write(sm::OBJS_BASE + sm::SOB_OBJ + 4 * sob, 0);
    }

    /// A new context with `asid`: what users may write zeroed (see the
    /// module doc; the model's `clear_user`, which gives what the PCI
    /// driver's register writes give), the sync managers' user writes made
    /// with `asid`. O(the objects: about 50,000 stores).
    pub(crate) fn reset_user(&self, asid: u32) {
        let mut sm = self.sm.lock();
        for d in 0..DCORES {
            let first = if d == 0 {
                (sm::RESERVED_SOBS, sm::RESERVED_MONS, sm::FIRST_USER_CQ)
            } else {
                (0, 0, 0)
            };
            sm.clear_user(d, first);
            let glbl = sm::GLBL_BASE + d as u32 * DCORE_STRIDE;
            sm.write(glbl + sm::ASID_NONE_SEC_PRIV, asid & 0x3FF);
            if d > 0 {
                let v = (asid & 0x3FF) << 16 | (asid & 0x3FF);
                sm.write(glbl + sm::MSTR_IF_AXUSER_HB_ASID, v);
            }
        }
        drop(sm);
        let mut cps = self.cps.lock();
        for q in cps.iter_mut() {
            idle_cp_registers(q);
        }
    }

    /// Raise the user interrupts of `raised` (bit = MSI-X vector). O(bits).
    fn raise(&self, raised: u128) {
        if raised == 0 {
            return;
        }
        let Some(sink) = self.msix.lock().clone() else {
            return;
        };
        for v in 0..128u16 {
            if raised & (1 << v) != 0 {
                sink.raise(v);
            }
        }
    }

    /// Monitors fired, firings dropped and user monitors' messages refused
    /// (tests). O(1).
    pub(crate) fn counts(&self) -> (u64, u64, u64) {
        self.sm.lock().counts()
    }

    /// Sync manager register `reg`, if the model gives it meaning (tests,
    /// debugfs). O(1).
    pub(crate) fn sm_read(&self, reg: u32) -> Option<u32> {
        self.sm.lock().read(reg)
    }
}

/// The QMANs' registers as the driver's init leaves them. `ENOMEM`.
/// O(QMANS x CPS).
fn idle_cps() -> Result<KVVec<Qman>> {
    let mut v = KVVec::with_capacity(QMANS, GFP_KERNEL)?;
    for _ in 0..QMANS {
        v.push(Qman::new(), GFP_KERNEL)?;
    }
    for q in v.iter_mut() {
        idle_cp_registers(q);
    }
    Ok(v)
}

/// Every CP of `q` idle: fence counters, predicates (but P0) and scalars
/// zeroed, message base 0 the monitors' payloads and base 1 the SOBs
/// (`gaudi2_init_qman_cp`). O(CPS).
fn idle_cp_registers(q: &mut Qman) {
    let mon = CFG_BASE + u64::from(sm::OBJS_BASE + sm::MON_PAY_ADDRL);
    let sob = CFG_BASE + u64::from(sm::OBJS_BASE + sm::SOB_OBJ);
    for c in 0..CPS {
        if let Some(cp) = q.cp_mut(c) {
            *cp = qman::Cp::new();
            cp.msg_base = [mon, sob, 0, 0];
        }
    }
    // The DMA core's context registers are the last user's too (a
    // committed transfer never outlives its job here: the job that
    // committed it ran it).
    q.core = DmaCore::new();
}

/// Host 1's side of a firing: the locked sync manager, the CP registers,
/// memory through the engines' MMUs; the interrupts raised, collected to be
/// sent once the lock is dropped.
struct Port<'a> {
    sm: &'a mut SyncManager,
    sync: &'a SimSync,
    sim: &'a SimGaudi2,
    raised: u128,
}

impl SmPort for Port<'_> {
    fn sm(&mut self) -> &mut SyncManager {
        self.sm
    }

    fn read(&mut self, asid: u16, addr: u64, buf: &mut [u8]) -> bool {
        // Reads of registers are not modelled: a CQ counter is memory.
        cfg_reg(addr).is_none()
            && self
                .sim
                .engine_read(EngineAccess::new(SM_ENGINE, u32::from(asid)), addr, buf)
                .is_ok()
    }

    fn write(&mut self, asid: u16, addr: u64, data: &[u8]) -> bool {
        let Some(reg) = cfg_reg(addr) else {
            let who = EngineAccess::new(SM_ENGINE, u32::from(asid));
            return self.sim.engine_write(who, addr, data).is_ok();
        };
        let Some(val) = data
            .get(..4)
            .and_then(|b| b.try_into().ok())
            .map(u32::from_le_bytes)
        else {
            return false;
        };
        // An LBW write of the sync manager itself: its objects (queued
        // firings), a CP's registers; anything else is dropped.
        if let Some((m, off)) = qman::decode(reg) {
            // A monitor's commit of a DMA core's transfer starts nothing
            // here: no engine of this host runs it (silicon and the PCI
            // model do).
            let _ = self.sync.qman_write(m, off, val, &|| false);
            true
        } else {
            self.sm.write(reg, val)
        }
    }

    fn msix_doorbell(&self) -> u64 {
        // No CPU-CP here: the PCIe block's `PCIE_MSIX` only.
        0
    }

    fn raise(&mut self, vector: u16) {
        if vector < 128 {
            self.raised |= 1 << vector;
        }
    }

    fn user_reaches(&self, addr: u64, len: u64) -> bool {
        // Host 1's engines reach no bus address at all (`engine_mem`).
        crate::model::bus::user_closed(addr, len, true).is_none()
    }
}

#[kunit_tests(hlrs_sim_sync)]
mod tests {
    use super::*;
    use crate::asic::AsicProperties;

    fn sim() -> Result<Arc<SimGaudi2>> {
        let asic = AsicProperties::gaudi2(6, 0)?;
        Arc::pin_init(SimGaudi2::new(&asic), GFP_KERNEL)
    }

    /// The register of DCORE0's SOB `s`.
    fn sob(s: u32) -> u32 {
        sm::OBJS_BASE + sm::SOB_OBJ + 4 * s
    }

    /// The register of DCORE0's monitor array `arr`, monitor `m`.
    fn mon(arr: u32, m: u32) -> u32 {
        sm::OBJS_BASE + arr + 4 * m
    }

    #[test]
    fn a_monitor_releases_a_fence_and_the_driver_objects_stay_closed() -> Result {
        let sim = sim()?;
        let s = &sim.sync;
        let mut more = false;
        // A context's open: user monitors act with its ASID (with none
        // they do nothing).
        s.reset_user(1);
        // Monitor 300 pays 1 into fence 1 of PDMA_1_0's CP when SOB 500 >= 2.
        let base = qman::base(1).ok_or(EINVAL)?;
        let fence = CFG_BASE + u64::from(base + qm::CP_FENCE0_RDATA + 0x14);
        for (reg, val) in [
            (mon(sm::MON_PAY_ADDRL, 300), fence as u32),
            (mon(sm::MON_PAY_ADDRH, 300), (fence >> 32) as u32),
            (mon(sm::MON_PAY_DATA, 300), 1),
            (
                mon(sm::MON_ARM, 300),
                (500 / 8) | (!(1u32 << (500 % 8)) & 0xFF) << 8 | 2 << 17,
            ),
        ] {
            assert!(s.user_write(&sim, (reg, val), &|| false, (&mut more, &mut None)));
        }
        let mut stop = || Some(());
        assert_eq!(s.fence_wait((1, 0), (1, 1, 1), &mut stop), Err(()));
        assert!(s.user_write(
            &sim,
            (sob(500), 1 << 31 | 1),
            &|| false,
            (&mut more, &mut None)
        ));
        assert_eq!(s.fence_wait((1, 0), (1, 1, 1), &mut stop), Err(()));
        assert!(s.user_write(
            &sim,
            (sob(500), 1 << 31 | 1),
            &|| false,
            (&mut more, &mut None)
        ));
        assert_eq!(s.fence_wait((1, 0), (1, 1, 1), &mut stop), Ok(()));
        assert_eq!(s.counts(), (1, 0, 0));
        // The CS-completion SOBs are the driver's: no user write lands.
        assert!(!s.user_write(&sim, (sob(3), 7), &|| false, (&mut more, &mut None)));
        assert_eq!(s.sm_read(sob(3)), Some(0));
        // A new context finds the user's objects zeroed and no monitor armed.
        assert!(s.user_write(
            &sim,
            (mon(sm::MON_ARM, 301), (500 / 8) | (3 << 17)),
            &|| false,
            (&mut more, &mut None)
        ));
        s.reset_user(2);
        assert_eq!(s.sm_read(sob(500)), Some(0));
        assert_eq!(s.sm_read(mon(sm::MON_STATUS, 301)).map(|v| v & 1), Some(0));
        Ok(())
    }
}
