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
//! Each op asks the firmware with no lock of the module held, and copies
//! to the user after the answer is in.

use super::info::{check_buffer, reply, InfoCaller, InfoSink};
use crate::{
    hw::cpucp,
    uapi::*, //
};
use kernel::prelude::*;

/// Serve `args.op` if it is one of the firmware's; `None` otherwise.
pub(crate) fn firmware_info(
    caller: &InfoCaller<'_>,
    args: &HlInfoArgs,
    out: &mut dyn InfoSink,
) -> Option<Result> {
    if !matches!(
        args.op,
        HL_INFO_DEVICE_UTILIZATION
            | HL_INFO_CLK_RATE
            | HL_INFO_PCI_COUNTERS
            | HL_INFO_TOTAL_ENERGY
            | HL_INFO_PLL_FREQUENCY
            | HL_INFO_POWER
            | HL_INFO_DRAM_PENDING_ROWS
            | HL_INFO_DRAM_REPLACED_ROWS
    ) {
        return None;
    }
    Some(check_buffer(args).and_then(|()| ask(caller, args, out)))
}

/// The op's packets and its answer (the buffer was checked).
fn ask(caller: &InfoCaller<'_>, args: &HlInfoArgs, out: &mut dyn InfoSink) -> Result {
    let fw = &*caller.dev.cpucp;
    match args.op {
        HL_INFO_DEVICE_UTILIZATION => {
            let utilization = cpucp::utilization(fw).map_err(|_| EINVAL)?;
            let u = HlInfoDeviceUtilization {
                utilization,
                pad: 0,
            };
            reply(args, out, &u)
        }
        HL_INFO_CLK_RATE => {
            let (cur, max) = cpucp::clk_rate(fw, HL_GAUDI2_MME_PLL)?;
            let c = HlInfoClkRate {
                cur_clk_rate_mhz: cur,
                max_clk_rate_mhz: max,
            };
            reply(args, out, &c)
        }
        HL_INFO_PCI_COUNTERS => {
            let (rx, tx, replays) = cpucp::pci_counters(fw)?;
            let c = HlInfoPciCounters {
                rx_throughput: rx,
                tx_throughput: tx,
                replay_cnt: u64::from(replays),
            };
            reply(args, out, &c)
        }
        HL_INFO_TOTAL_ENERGY => {
            let e = HlInfoEnergy {
                total_energy_consumption: cpucp::total_energy(fw)?,
            };
            reply(args, out, &e)
        }
        HL_INFO_PLL_FREQUENCY => {
            // The union's `pll_index`.
            let output = cpucp::pll_info(fw, args.arg)?;
            reply(args, out, &HlPllFrequencyInfo { output })
        }
        HL_INFO_POWER => {
            let p = HlPowerInfo {
                power: cpucp::power(fw)?,
            };
            reply(args, out, &p)
        }
        HL_INFO_DRAM_PENDING_ROWS => {
            let rows = cpucp::dram_pending_rows(fw)?;
            reply_bytes(args, out, &rows.to_ne_bytes())
        }
        _ => {
            let info = cpucp::dram_replaced_rows(fw)?;
            reply_bytes(args, out, &info)
        }
    }
}

/// Copy `bytes` truncated to `return_size`.
fn reply_bytes(args: &HlInfoArgs, out: &mut dyn InfoSink, bytes: &[u8]) -> Result {
    let n = core::cmp::min(bytes.len(), args.return_size as usize);
    out.write(bytes.get(..n).ok_or(EINVAL)?)
}
