// SPDX-License-Identifier: GPL-2.0

//! The DCORE0 sync manager: sync objects (SOBs), monitors, and the
//! completion queues with their LBW interrupt write, as the CS completion
//! path uses them (reference §6.6; `gaudi2_init_sm`, gaudi2/gaudi2.c:
//! 5754-5795; `gaudi2_arm_cq_monitor`, :7233-7259):
//!
//! - a SOB write sets the 15-bit value, or adds to it when bit 31 (`INC`)
//!   is set (asic_reg/dcore0_sync_mngr_objs_masks.h:24-31);
//! - `MON_ARM` arms a monitor on the 8 SOBs of sync group `SID` (with
//!   `MON_CONFIG.MSB_SID` above it) not masked by `MASK`: it fires when
//!   each is equal to (`SOP` 1) or at least (`SOP` 0) `SOD`, checked at
//!   arming and at every SOB write;
//! - a monitor that fires is disarmed and, with `CQ_EN`, writes
//!   `MON_PAY_DATA` as the next 4-byte entry of CQ `MON_PAY_ADDRL` (its
//!   `GLBL_CQ_BASE_ADDR`, `GLBL_CQ_SIZE_LOG2` bytes, `GLBL_CQ_PI`), then
//!   with `LBW_EN` writes that CQ's `GLBL_LBW_DATA` to `GLBL_LBW_ADDR`;
//!   without `CQ_EN` it writes `MON_PAY_DATA` to the address
//!   `MON_PAY_ADDRH:L`;
//! - an LBW write to the virtual MSI-X doorbell (the page
//!   `CPUCP_PACKET_ENABLE_PCI_ACCESS` named) raises the MSI-X vector its
//!   data names (the PCIe block's job on silicon; gaudi2/gaudi2.c:
//!   5772-5774, 3667-3668); any other LBW address is a plain write.
//!
//! The model keeps [`SOBS`] SOBs and [`MONS`] monitors (of the 8192 and
//! 2048 DCORE0 has; upstream's CS completion uses SOB/monitor 0..63) and
//! all [`CQS`] CQs; registers of higher SOBs and monitors are kept by the
//! register file without behaviour.

use super::half;
use super::regs;
use super::{Env, Gaudi2};

/// SOBs the model runs.
pub const SOBS: usize = 1024;
/// Monitors the model runs.
pub const MONS: usize = 256;
/// Completion queues (the `GLBL_CQ_*` arrays hold 64).
pub const CQS: usize = 64;

/// One monitor.
#[derive(Clone, Copy, Debug, Default)]
pub struct Monitor {
    pay_addr: u64,
    pay_data: u32,
    arm: u32,
    config: u32,
    armed: bool,
}

/// One completion queue.
#[derive(Clone, Copy, Debug, Default)]
pub struct Cq {
    base: u64,
    size_log2: u32,
    pi: u32,
    lbw_addr: u64,
    lbw_data: u32,
}

/// The sync manager.
pub struct SyncManager {
    sobs: [u16; SOBS],
    mons: [Monitor; MONS],
    cqs: [Cq; CQS],
}

/// Which register of an array of `n` u32s from `first` `reg` is.
fn index(reg: u32, first: u32, n: usize) -> Option<usize> {
    let rel = reg.checked_sub(first)?;
    let i = usize::try_from(rel / 4).ok()?;
    (rel % 4 == 0 && i < n).then_some(i)
}

impl Default for SyncManager {
    fn default() -> Self {
        Self::new()
    }
}

impl SyncManager {
    /// All SOBs 0, no monitor armed, no CQ. O(SOBS + MONS + CQS).
    pub const fn new() -> Self {
        const M: Monitor = Monitor {
            pay_addr: 0,
            pay_data: 0,
            arm: 0,
            config: 0,
            armed: false,
        };
        const C: Cq = Cq {
            base: 0,
            size_log2: 0,
            pi: 0,
            lbw_addr: 0,
            lbw_data: 0,
        };
        Self {
            sobs: [0; SOBS],
            mons: [M; MONS],
            cqs: [C; CQS],
        }
    }

    /// The register `reg` if the model gives it meaning. O(1).
    pub fn read(&self, reg: u32) -> Option<u32> {
        let mon = |first| index(reg, first, MONS).and_then(|i| self.mons.get(i));
        let cq = |first| index(reg, first, CQS).and_then(|i| self.cqs.get(i));
        if let Some(i) = index(reg, regs::SM_SOB_OBJ_0, SOBS) {
            return self.sobs.get(i).map(|&v| u32::from(v));
        }
        if let Some(m) = mon(regs::SM_MON_PAY_ADDRL_0) {
            return Some(m.pay_addr as u32);
        }
        if let Some(m) = mon(regs::SM_MON_PAY_ADDRH_0) {
            return Some((m.pay_addr >> 32) as u32);
        }
        if let Some(m) = mon(regs::SM_MON_PAY_DATA_0) {
            return Some(m.pay_data);
        }
        if let Some(m) = mon(regs::SM_MON_ARM_0) {
            return Some(m.arm);
        }
        if let Some(m) = mon(regs::SM_MON_CONFIG_0) {
            return Some(m.config);
        }
        if let Some(m) = mon(regs::SM_MON_STATUS_0) {
            return Some(u32::from(m.armed));
        }
        if let Some(c) = cq(regs::SM_CQ_BASE_ADDR_L_0) {
            return Some(c.base as u32);
        }
        if let Some(c) = cq(regs::SM_CQ_BASE_ADDR_H_0) {
            return Some((c.base >> 32) as u32);
        }
        if let Some(c) = cq(regs::SM_CQ_SIZE_LOG2_0) {
            return Some(c.size_log2);
        }
        if let Some(c) = cq(regs::SM_CQ_PI_0) {
            return Some(c.pi);
        }
        if let Some(c) = cq(regs::SM_LBW_ADDR_L_0) {
            return Some(c.lbw_addr as u32);
        }
        if let Some(c) = cq(regs::SM_LBW_ADDR_H_0) {
            return Some((c.lbw_addr >> 32) as u32);
        }
        cq(regs::SM_LBW_DATA_0).map(|c| c.lbw_data)
    }

    /// Write `reg`: `Some(index)` of a SOB written or a monitor armed (the
    /// caller then checks the monitors), `Some(None)` for another register
    /// of the block, `None` if not the block's. O(1).
    pub fn write(&mut self, reg: u32, val: u32) -> Option<Option<Touch>> {
        if let Some(s) = index(reg, regs::SM_SOB_OBJ_0, SOBS).and_then(|i| self.sobs.get_mut(i)) {
            let v = (val & 0x7FFF) as u16;
            *s = if val & (1 << 31) != 0 {
                s.wrapping_add(v) & 0x7FFF
            } else {
                v
            };
            return Some(Some(Touch::Sob));
        }
        let mons = &mut self.mons;
        let mon = |first| index(reg, first, MONS);
        if let Some(m) = mon(regs::SM_MON_PAY_ADDRL_0).and_then(|i| mons.get_mut(i)) {
            half(&mut m.pay_addr, false, val);
        } else if let Some(m) = mon(regs::SM_MON_PAY_ADDRH_0).and_then(|i| mons.get_mut(i)) {
            half(&mut m.pay_addr, true, val);
        } else if let Some(m) = mon(regs::SM_MON_PAY_DATA_0).and_then(|i| mons.get_mut(i)) {
            m.pay_data = val;
        } else if let Some(i) = mon(regs::SM_MON_ARM_0) {
            let m = mons.get_mut(i)?;
            m.arm = val;
            m.armed = true;
            return Some(Some(Touch::Armed(i)));
        } else if let Some(m) = mon(regs::SM_MON_CONFIG_0).and_then(|i| mons.get_mut(i)) {
            m.config = val;
        } else {
            return self.write_cq(reg, val).then_some(None);
        }
        Some(None)
    }

    fn write_cq(&mut self, reg: u32, val: u32) -> bool {
        let cq = |first| index(reg, first, CQS);
        let c = &mut self.cqs;
        if let Some(q) = cq(regs::SM_CQ_BASE_ADDR_L_0).and_then(|i| c.get_mut(i)) {
            half(&mut q.base, false, val);
        } else if let Some(q) = cq(regs::SM_CQ_BASE_ADDR_H_0).and_then(|i| c.get_mut(i)) {
            half(&mut q.base, true, val);
        } else if let Some(q) = cq(regs::SM_CQ_SIZE_LOG2_0).and_then(|i| c.get_mut(i)) {
            q.size_log2 = val;
        } else if let Some(q) = cq(regs::SM_CQ_PI_0).and_then(|i| c.get_mut(i)) {
            q.pi = val;
        } else if let Some(q) = cq(regs::SM_LBW_ADDR_L_0).and_then(|i| c.get_mut(i)) {
            half(&mut q.lbw_addr, false, val);
        } else if let Some(q) = cq(regs::SM_LBW_ADDR_H_0).and_then(|i| c.get_mut(i)) {
            half(&mut q.lbw_addr, true, val);
        } else if let Some(q) = cq(regs::SM_LBW_DATA_0).and_then(|i| c.get_mut(i)) {
            q.lbw_data = val;
        } else {
            return false;
        }
        true
    }

    /// Whether monitor `i` is armed and its condition holds. O(8).
    fn holds(&self, i: usize) -> bool {
        let Some(m) = self.mons.get(i).filter(|m| m.armed) else {
            return false;
        };
        let sid = (m.arm & 0xFF) as usize | (((m.config >> 16) & 0xF) as usize) << 8;
        let mask = (m.arm >> 8) & 0xFF;
        let equal = m.arm & (1 << 16) != 0;
        let sod = ((m.arm >> 17) & 0x7FFF) as u16;
        (0..8usize).filter(|b| mask & (1 << b) == 0).all(|b| {
            self.sobs
                .get(sid * 8 + b)
                .is_some_and(|&v| if equal { v == sod } else { v >= sod })
        })
    }
}

/// What an SM write touched.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Touch {
    /// A SOB changed: every armed monitor is checked.
    Sob,
    /// Monitor `i` was armed: it is checked.
    Armed(usize),
}

impl Gaudi2 {
    /// After an SM write that touched `t`: fire the monitors whose
    /// condition holds. O(MONS x 8) for a SOB write, O(8) for an arm.
    pub(super) fn sm_check(&mut self, env: &mut dyn Env, t: Touch) {
        let (from, to) = match t {
            Touch::Sob => (0, MONS),
            Touch::Armed(i) => (i, i.saturating_add(1).min(MONS)),
        };
        for i in from..to {
            if self.sm.holds(i) {
                self.fire(env, i);
            }
        }
    }

    /// Monitor `i` fires: disarm, then the CQ entry and the LBW write, or
    /// the payload write.
    fn fire(&mut self, env: &mut dyn Env, i: usize) {
        let Some(m) = self.sm.mons.get_mut(i) else {
            return;
        };
        m.armed = false;
        let m = *m;
        if m.config & (1 << 4) == 0 {
            let _ = self.engine_write(env, 0, m.pay_addr, &m.pay_data.to_le_bytes());
            return;
        }
        let Some(cq) = self.sm.cqs.get(m.pay_addr as u32 as usize).copied() else {
            return;
        };
        let entries = 1u64.checked_shl(cq.size_log2).map_or(0, |b| b / 4);
        if let Some(at) = u64::from(cq.pi)
            .checked_rem(entries)
            .and_then(|slot| cq.base.checked_add(slot * 4))
        {
            let _ = self.engine_write(env, 0, at, &m.pay_data.to_le_bytes());
        }
        if let Some(c) = self.sm.cqs.get_mut(m.pay_addr as u32 as usize) {
            c.pi = c.pi.wrapping_add(1);
        }
        if m.config & (1 << 8) != 0 {
            self.lbw_interrupt(env, cq.lbw_addr, cq.lbw_data);
        }
    }

    /// An LBW write of `data` at `addr`: an MSI-X at the virtual doorbell,
    /// else a plain write.
    fn lbw_interrupt(&mut self, env: &mut dyn Env, addr: u64, data: u32) {
        let db = self.cpu_if.msix_db;
        if db != 0 && addr == db {
            if let Ok(vector) = u16::try_from(data) {
                if vector < 128 {
                    self.raise(env, vector);
                }
            }
        } else {
            let _ = self.engine_write(env, 0, addr, &data.to_le_bytes());
        }
    }
}
