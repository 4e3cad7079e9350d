//! `hlrs sensors`: what the device CPU's firmware (CPU-CP) reports through
//! the INFO ops upstream answers with it: clocks, utilization, power,
//! energy, every PLL's outputs, the PCIe counters, the DRAM rows.

use hlrs::{uapi::*, Device};
use std::fmt::Write;

/// The report of device `index`, through its control node (as a monitor
/// would, next to a running workload), as text or JSON.
pub fn run(index: u32, json: bool) -> std::io::Result<String> {
    let dev = Device::open_control(index)?;
    let clk: HlInfoClkRate = dev.info_value(HL_INFO_CLK_RATE, 0)?;
    let util: HlInfoDeviceUtilization = dev.info_value(HL_INFO_DEVICE_UTILIZATION, 0)?;
    let power: HlPowerInfo = dev.info_value(HL_INFO_POWER, 0)?;
    let energy: HlInfoEnergy = dev.info_value(HL_INFO_TOTAL_ENERGY, 0)?;
    let pci: HlInfoPciCounters = dev.info_value(HL_INFO_PCI_COUNTERS, 0)?;
    let pending: u32 = dev.info_value(HL_INFO_DRAM_PENDING_ROWS, 0)?;
    let mut plls = Vec::new();
    for pll in 0..HL_GAUDI2_PLL_MAX {
        let f: HlPllFrequencyInfo = dev.info_value(HL_INFO_PLL_FREQUENCY, pll)?;
        plls.push(f.output);
    }
    let mut s = String::new();
    if json {
        let plls: Vec<String> = plls
            .iter()
            .map(|o| format!("[{},{},{},{}]", o[0], o[1], o[2], o[3]))
            .collect();
        let _ = write!(
            s,
            "{{\"device\":{index},\"clk_mhz\":{},\"max_clk_mhz\":{},\"utilization\":{},\
             \"power_mw\":{},\"energy\":{},\"pci_rx\":{},\"pci_tx\":{},\"pci_replays\":{},\
             \"dram_pending_rows\":{pending},\"plls_mhz\":[{}]}}",
            clk.cur_clk_rate_mhz,
            clk.max_clk_rate_mhz,
            util.utilization,
            power.power,
            energy.total_energy_consumption,
            pci.rx_throughput,
            pci.tx_throughput,
            pci.replay_cnt,
            plls.join(",")
        );
        return Ok(s);
    }
    const NAMES: [&str; 12] = [
        "CPU", "PCI", "SRAM", "HBM", "NIC", "DMA", "MESH", "MME", "TPC", "IF", "VID", "MSS",
    ];
    let _ = writeln!(s, "device {index}");
    let _ = writeln!(
        s,
        "clock          {} MHz (max {} MHz)",
        clk.cur_clk_rate_mhz, clk.max_clk_rate_mhz
    );
    let _ = writeln!(s, "utilization    {} %", util.utilization);
    let _ = writeln!(s, "power          {} mW", power.power);
    let _ = writeln!(s, "energy         {}", energy.total_energy_consumption);
    let _ = writeln!(
        s,
        "pci            rx {} B, tx {} B, {} replays",
        pci.rx_throughput, pci.tx_throughput, pci.replay_cnt
    );
    let _ = writeln!(s, "dram rows      {pending} pending");
    for (name, o) in NAMES.iter().zip(&plls) {
        let _ = writeln!(
            s,
            "pll {name:<10} {} / {} / {} / {} MHz",
            o[0], o[1], o[2], o[3]
        );
    }
    Ok(s)
}
