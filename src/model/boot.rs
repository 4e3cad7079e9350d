// SPDX-License-Identifier: GPL-2.0

//! The PSOC global configuration of a device whose firmware already booted:
//! what upstream's `hl_fw_read_preboot_status` (common/firmware_if.c:1728)
//! and `hl_fw_dynamic_init_cpu` (common/firmware_if.c:2749-2912) expect to
//! find once boot is over, without the boot (no preboot, no FIT loading,
//! no COMMS handshake: the model is "already up", as the reference's §6.8
//! decides).
//!
//! - `CPU_BOOT_STATUS` reads `CPU_BOOT_STATUS_SRAM_AVAIL`, the status of a
//!   device whose boot fit and firmware run (gaudi2/gaudi2.c:6600-6603);
//! - `CPU_BOOT_DEV_STS0/1` (scratchpads 20/21) say "valid" and nothing
//!   else: no security, no optional protocol;
//! - `CPU_BOOT_ERR0/1` (scratchpads 24/25) say "valid, no error";
//! - the other scratchpads and `KMD_MSG_TO_CPU` hold what is written.
//!
//! `mmHW_STATE` lives in the CPU interface block (`cpucp`); this block is
//! only the PSOC's.

use super::regs;

/// The PSOC scratchpads and boot status.
pub struct Boot {
    /// `PSOC_GLOBAL_CONF_SCRATCHPAD_0..31`.
    scratch: [u32; regs::PSOC_SCRATCHPADS],
    /// `CPU_BOOT_STATUS`.
    boot_status: u32,
    /// `KMD_MSG_TO_CPU`.
    kmd_msg: u32,
}

impl Boot {
    /// The registers after boot. O(1).
    pub fn new() -> Self {
        let mut scratch = [0u32; regs::PSOC_SCRATCHPADS];
        for (reg, val) in [
            (regs::CPU_BOOT_DEV_STS0, regs::BOOT_DEV_STS_ENABLED),
            (regs::CPU_BOOT_DEV_STS1, regs::BOOT_DEV_STS_ENABLED),
            (regs::CPU_BOOT_ERR0, regs::BOOT_ERR_ENABLED),
            (regs::CPU_BOOT_ERR1, regs::BOOT_ERR_ENABLED),
        ] {
            if let Some(s) = Self::index(reg).and_then(|i| scratch.get_mut(i)) {
                *s = val;
            }
        }
        Self {
            scratch,
            boot_status: regs::BOOT_STATUS_SRAM_AVAIL,
            kmd_msg: 0,
        }
    }

    /// The scratchpad index of `reg`, if it is one.
    fn index(reg: u32) -> Option<usize> {
        let off = reg.checked_sub(regs::PSOC_SCRATCHPAD_0)?;
        let i = usize::try_from(off / 4).ok()?;
        (off % 4 == 0 && i < regs::PSOC_SCRATCHPADS).then_some(i)
    }

    /// The value of `reg` if it is one of this block's. O(1).
    pub fn read(&self, reg: u32) -> Option<u32> {
        match reg {
            regs::CPU_BOOT_STATUS => Some(self.boot_status),
            regs::KMD_MSG_TO_CPU => Some(self.kmd_msg),
            _ => Self::index(reg).and_then(|i| self.scratch.get(i).copied()),
        }
    }

    /// Write `reg` if it is one of this block's (true), else false. The
    /// boot status is the firmware's: a driver write to it is kept, as the
    /// register is writable on silicon. O(1).
    pub fn write(&mut self, reg: u32, val: u32) -> bool {
        match reg {
            regs::CPU_BOOT_STATUS => self.boot_status = val,
            regs::KMD_MSG_TO_CPU => self.kmd_msg = val,
            _ => match Self::index(reg).and_then(|i| self.scratch.get_mut(i)) {
                Some(s) => *s = val,
                None => return false,
            },
        }
        true
    }
}
