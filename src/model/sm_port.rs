// SPDX-License-Identifier: GPL-2.0

//! Host 2's side of the sync managers' firing ([`super::sm::SmPort`]):
//! the model's own MMUs (a monitor's message into memory), its register
//! file (an LBW write: a SOB, a monitor, a CP's fence counter), the CPU-CP
//! stand-in's MSI-X doorbell, and the security predicate
//! ([`super::bus::user_closed`]) that a user monitor's register
//! writes pass. Host 1 has its own (`crate::hw::sim::sync_manager`).

use super::bus::user_closed;
use super::sm::{drain, SmPort, SyncManager};
use super::{Env, Gaudi2};

/// Host 2's port: a device and its environment, for one drain.
struct ModelPort<'a> {
    g: &'a mut Gaudi2,
    env: &'a mut dyn Env,
}

impl SmPort for ModelPort<'_> {
    fn sm(&mut self) -> &mut SyncManager {
        &mut self.g.sm
    }

    fn read(&mut self, asid: u16, addr: u64, buf: &mut [u8]) -> bool {
        let env = &mut *self.env;
        self.g
            .sm_access(|g| g.engine_read(env, asid, addr, buf).is_ok())
    }

    fn write(&mut self, asid: u16, addr: u64, data: &[u8]) -> bool {
        let env = &mut *self.env;
        self.g
            .sm_access(|g| g.engine_write(env, asid, addr, data).is_ok())
    }

    fn msix_doorbell(&self) -> u64 {
        self.g.cpu_if.msix_db
    }

    fn raise(&mut self, vector: u16) {
        self.g.raise(self.env, vector);
    }

    fn user_reaches(&self, addr: u64, len: u64) -> bool {
        user_closed(addr, len, self.g.pmmu_on()).is_none()
    }
}

impl Gaudi2 {
    /// Fire up to [`super::sm::FIRE_BUDGET`] queued monitors ([`drain`]);
    /// true while some are left. O(FIRE_BUDGET x (WR_NUM + 1) messages).
    pub(super) fn sm_run(&mut self, env: &mut dyn Env) -> bool {
        drain(&mut ModelPort { g: self, env })
    }

    /// `f`, an access of the sync manager's master, with the MMUs on: a
    /// monitor may fire while the KDMA's transfer has them bypassed (its
    /// write into the register space drains monitors inline), and the
    /// bypass is the KDMA's own, never a monitor's (`gaudi2_mmu_prepare`
    /// gives the SM's master the context's ASID, MMU on). O(f).
    fn sm_access<T>(&mut self, f: impl FnOnce(&mut Self) -> T) -> T {
        let bypass = core::mem::replace(&mut self.bypass, false);
        let r = f(self);
        self.bypass = bypass;
        r
    }

    /// Monitors are queued to fire. O(1).
    pub(super) fn sm_pending(&self) -> bool {
        self.sm.queued() > 0
    }
}
