// SPDX-License-Identifier: GPL-2.0

//! The INFO ops upstream answers by asking the device CPU's firmware
//! (CPU-CP, [`crate::hw::cpucp`]), as `_hl_info_ioctl` does for them
//! (common/habanalabs_ioctl.c:1100-1150): only while the device is
//! operational (the caller checked), a buffer required (`EINVAL`), the
//! firmware's answer copied truncated to `return_size`, the firmware's
//! errors as they come (`EIO` for a firmware rc, `ETIMEDOUT` for a fence
//! that never came), except DEVICE_UTILIZATION, which upstream turns into
//! `EINVAL` whatever failed (:263-279).
//!
//! | op | packets | upstream |
//! |---|---|---|
//! | `DEVICE_UTILIZATION` | `MAX_POWER_GET` (upstream: once at init) + `POWER_GET` | `device_utilization`, :263-279 |
//! | `CLK_RATE` | `FREQUENCY_GET` + `FREQUENCY_CURR_GET` of the MME PLL | `get_clk_rate`, :281-297 |
//! | `PCI_COUNTERS` | `PCIE_THROUGHPUT_GET` rx and tx, `PCIE_REPLAY_CNT_GET` | `pci_counters_info`, :332-349 |
//! | `TOTAL_ENERGY` | `TOTAL_ENERGY_GET` | `total_energy_consumption_info`, :466-485 |
//! | `PLL_FREQUENCY` | `PLL_INFO_GET` of `pll_index` (a bad index: the firmware's rc, `EIO`) | `pll_frequency_info`, :487-504 |
//! | `POWER` | `POWER_GET` | `power_info`, :506-523 |
//! | `DRAM_PENDING_ROWS` | `HBM_PENDING_ROWS_STATUS` (a u32) | `dram_pending_rows_info`, :545-562 |
//! | `DRAM_REPLACED_ROWS` | `HBM_REPLACED_ROWS_INFO_GET` (a `cpucp_hbm_row_info`) | `dram_replaced_rows_info`, :564-580 |
//!
//! Each op asks the firmware with no lock of the module held; the caller
//! (`super::info`) checks the buffer first and copies the answer after.

use crate::{
    hw::cpucp::{self, CpuCp},
    uapi::*, //
};
use kernel::{prelude::*, transmute::AsBytes};

/// Whether `op` is one of the ops answered by the firmware.
pub(crate) fn is_firmware_op(op: u32) -> bool {
    matches!(
        op,
        HL_INFO_DEVICE_UTILIZATION
            | HL_INFO_CLK_RATE
            | HL_INFO_PCI_COUNTERS
            | HL_INFO_TOTAL_ENERGY
            | HL_INFO_PLL_FREQUENCY
            | HL_INFO_POWER
            | HL_INFO_DRAM_PENDING_ROWS
            | HL_INFO_DRAM_REPLACED_ROWS
    )
}

/// The answer of a firmware op: the bytes of its result struct.
pub(crate) struct FwAnswer {
    bytes: [u8; 24],
    len: usize,
}

impl FwAnswer {
    fn of<T: AsBytes>(value: &T) -> Self {
        let mut a = Self {
            bytes: [0; 24],
            len: 0,
        };
        let b = value.as_bytes();
        for (d, s) in a.bytes.iter_mut().zip(b) {
            *d = *s;
        }
        a.len = b.len().min(a.bytes.len());
        a
    }

    /// The result struct's bytes.
    pub(crate) fn bytes(&self) -> &[u8] {
        self.bytes.get(..self.len).unwrap_or(&[])
    }
}

/// Ask `fw` for the answer of the firmware op `op` with the union
/// argument `arg` (see the module documentation). Sleeps.
pub(crate) fn ask(fw: &dyn CpuCp, op: u32, arg: u32) -> Result<FwAnswer> {
    Ok(match op {
        HL_INFO_DEVICE_UTILIZATION => {
            let utilization = cpucp::utilization(fw).map_err(|_| EINVAL)?;
            FwAnswer::of(&HlInfoDeviceUtilization {
                utilization,
                pad: 0,
            })
        }
        HL_INFO_CLK_RATE => {
            let (cur, max) = cpucp::clk_rate(fw, HL_GAUDI2_MME_PLL)?;
            FwAnswer::of(&HlInfoClkRate {
                cur_clk_rate_mhz: cur,
                max_clk_rate_mhz: max,
            })
        }
        HL_INFO_PCI_COUNTERS => {
            let (rx, tx, replays) = cpucp::pci_counters(fw)?;
            FwAnswer::of(&HlInfoPciCounters {
                rx_throughput: rx,
                tx_throughput: tx,
                replay_cnt: u64::from(replays),
            })
        }
        HL_INFO_TOTAL_ENERGY => FwAnswer::of(&HlInfoEnergy {
            total_energy_consumption: cpucp::total_energy(fw)?,
        }),
        // The union's `pll_index`.
        HL_INFO_PLL_FREQUENCY => FwAnswer::of(&HlPllFrequencyInfo {
            output: cpucp::pll_info(fw, arg)?,
        }),
        HL_INFO_POWER => FwAnswer::of(&HlPowerInfo {
            power: cpucp::power(fw)?,
        }),
        HL_INFO_DRAM_PENDING_ROWS => FwAnswer::of(&cpucp::dram_pending_rows(fw)?),
        HL_INFO_DRAM_REPLACED_ROWS => FwAnswer::of(&cpucp::dram_replaced_rows(fw)?),
        _ => return Err(EINVAL),
    })
}
