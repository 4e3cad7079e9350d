// SPDX-License-Identifier: GPL-2.0

//! The driver's CPU-CP client: the packets upstream's INFO ops send to the
//! device CPU's firmware (common/firmware_if.c), over a [`CpuCp`] channel
//! each hardware provides.
//!
//! | hardware | channel | upstream |
//! |---|---|---|
//! | simulated ([`SimCpuCp`]) | the packet is answered in place by the model core's firmware ([`crate::model::cpucp::answer`]), an answer that DMAs (replaced rows) into an in-module buffer standing in for the coherent DMA pool; never times out | `hl_fw_send_cpu_message`, :404-540 |
//! | PCI (`PciGaudi2`) | the packet and its buffer in coherent DMA memory, a BD on the CPU PQ, the doorbell `CPU_IF_PF_PQ_PI`, the fence polled with upstream's timeout ([`crate::hw::pci`]) | the same |
//!
//! Both hosts answer from one model: the simulated device's firmware is
//! the same function the userspace server runs behind the CPU PQ.
//!
//! Errors as upstream's: a firmware rc other than success is `EIO`
//! (`supports_advanced_cpucp_rc` is not advertised by the device's boot
//! status, :470-476); a fence that never comes is `ETIMEDOUT`, after which
//! the device CPU is disabled and every later packet `EAGAIN`
//! (`device_cpu_disabled`, :433-436, :466).

use crate::asic::cpucp_if::{self as fw, op, CpucpPacket, PACKET_BYTES};
use crate::model::{self, cpucp as model_fw, BusFault};
use kernel::{
    alloc::KVec,
    prelude::*,
    sync::atomic::{Atomic, Relaxed},
};

/// A way to the device CPU's firmware.
pub(crate) trait CpuCp: Send + Sync {
    /// `hl_fw_send_cpu_message`: send `pkt` and wait up to `timeout_us` for
    /// its fence; `buf`, when given, is the DMA buffer the packet's `value`
    /// must point at (the channel puts it in device-reachable memory and
    /// copies the answer back). The firmware's result; `EIO` for a
    /// firmware rc, `ETIMEDOUT` / `EAGAIN` as upstream. Sleeps.
    fn send(&self, pkt: CpucpPacket, buf: Option<&mut [u8]>, timeout_us: u32) -> Result<u64>;
}

/// The simulated device's firmware state: the MSI-X doorbell page and the
/// traffic counters the model reports as PCIe throughput (bytes of the
/// packets and answers moved, as the server's model counts its CPU-CP DMA).
pub(crate) struct SimCpuCp {
    dram_bytes: u64,
    msix_db: Atomic<u64>,
    rx_bytes: Atomic<u64>,
    tx_bytes: Atomic<u64>,
}

impl SimCpuCp {
    /// The firmware of a device with `dram_bytes` of DRAM.
    pub(crate) fn new(dram_bytes: u64) -> Self {
        Self {
            dram_bytes,
            msix_db: Atomic::new(0),
            rx_bytes: Atomic::new(0),
            tx_bytes: Atomic::new(0),
        }
    }
}

/// Bus address the in-module buffer of a packet stands at.
const SIM_BUF_BUS: u64 = 0x1000;

/// The model's view of the simulated device while it answers one packet:
/// one DMA buffer at [`SIM_BUF_BUS`], nothing else on the bus.
struct OneBuffer<'a> {
    buf: &'a mut [u8],
    now_ns: u64,
}

impl OneBuffer<'_> {
    fn window(&mut self, addr: u64, len: usize) -> Result<&mut [u8], BusFault> {
        let fault = BusFault { addr };
        let off = addr.checked_sub(SIM_BUF_BUS).ok_or(fault)?;
        let off = usize::try_from(off).map_err(|_| fault)?;
        let end = off.checked_add(len).ok_or(fault)?;
        self.buf.get_mut(off..end).ok_or(fault)
    }
}

impl model::Env for OneBuffer<'_> {
    fn dma_read(&mut self, addr: u64, buf: &mut [u8]) -> Result<(), BusFault> {
        buf.copy_from_slice(self.window(addr, buf.len())?);
        Ok(())
    }
    fn dma_write(&mut self, addr: u64, data: &[u8]) -> Result<(), BusFault> {
        self.window(addr, data.len())?.copy_from_slice(data);
        Ok(())
    }
    fn dram_read(&mut self, pa: u64, _buf: &mut [u8]) -> Result<(), BusFault> {
        Err(BusFault { addr: pa })
    }
    fn dram_write(&mut self, pa: u64, _data: &[u8]) -> Result<(), BusFault> {
        Err(BusFault { addr: pa })
    }
    fn sram_read(&mut self, pa: u64, _buf: &mut [u8]) -> Result<(), BusFault> {
        Err(BusFault { addr: pa })
    }
    fn sram_write(&mut self, pa: u64, _data: &[u8]) -> Result<(), BusFault> {
        Err(BusFault { addr: pa })
    }
    fn msix(&mut self, _vector: u16) {}
    fn now_ns(&mut self) -> u64 {
        self.now_ns
    }
}

impl CpuCp for SimCpuCp {
    /// The model's firmware answers at once (no fence to wait for).
    fn send(&self, mut pkt: CpucpPacket, buf: Option<&mut [u8]>, _timeout_us: u32) -> Result<u64> {
        let mut empty = [0u8; 0];
        let buf = match buf {
            Some(b) => {
                pkt.value = SIM_BUF_BUS;
                b
            }
            None => &mut empty[..],
        };
        pkt.fence = u32::MAX;
        let mut bytes = pkt.to_bytes();
        let now_ns = u64::try_from(crate::ffi::clock::ktime_ns()).unwrap_or(0);
        let mut env = OneBuffer { buf, now_ns };
        // The packet and its BD read, as the CPU PQ would.
        let step = 16 + PACKET_BYTES as u64;
        let rx = self.rx_bytes.fetch_add(step, Relaxed).wrapping_add(step);
        let facts = model_fw::Facts {
            dram_bytes: self.dram_bytes,
            rx_bytes: rx,
            tx_bytes: self.tx_bytes.load(Relaxed),
            now_ns,
        };
        let mut db = self.msix_db.load(Relaxed);
        let a = model_fw::answer(&mut env, &facts, &mut db, &mut bytes);
        self.msix_db.store(db, Relaxed);
        self.tx_bytes.add(16 + a.dma_bytes, Relaxed);
        finish(&CpucpPacket::from_bytes(&bytes))
    }
}

/// The end of `hl_fw_send_cpu_message` once the fence came: the firmware's
/// rc as an errno, else the result.
pub(crate) fn finish(answer: &CpucpPacket) -> Result<u64> {
    if answer.fence != fw::FENCE_VAL {
        return Err(ETIMEDOUT);
    }
    if answer.rc() != 0 {
        return Err(EIO);
    }
    Ok(answer.value)
}

/// `hl_fw_get_frequency` (common/firmware_if.c:3166-3192): PLL `pll`'s
/// frequency in Hz, current or highest. The device's boot status does not
/// advertise `CPU_BOOT_DEV_STS0_DYN_PLL_EN`, so the index goes as given.
pub(crate) fn frequency(fw: &dyn CpuCp, pll: u32, curr: bool) -> Result<u64> {
    let mut pkt = CpucpPacket::new(if curr {
        op::FREQUENCY_CURR_GET
    } else {
        op::FREQUENCY_GET
    });
    pkt.index = pll;
    fw.send(pkt, None, 0)
}

/// `hl_fw_get_clk_rate` (:3132-3164): (current, highest) MHz of `pll`.
pub(crate) fn clk_rate(fw: &dyn CpuCp, pll: u32) -> Result<(u32, u32)> {
    let mhz = |hz: u64| u32::try_from(hz / 1_000_000).unwrap_or(u32::MAX);
    let max = frequency(fw, pll, false)?;
    let cur = frequency(fw, pll, true)?;
    Ok((mhz(cur), mhz(max)))
}

/// A GET packet of `opcode` with `index`, sent with the INFO timeout.
fn get(fw: &dyn CpuCp, opcode: u32, index: u32) -> Result<u64> {
    let mut pkt = CpucpPacket::new(opcode);
    pkt.index = index;
    fw.send(pkt, None, fw::INFO_TIMEOUT_US)
}

/// `hl_fw_cpucp_power_get` (:1257-1280): power now, mW.
pub(crate) fn power(fw: &dyn CpuCp) -> Result<u64> {
    get(fw, op::POWER_GET, fw::POWER_INPUT << 16)
}

/// `hl_fw_get_max_power` (:3214-3230, asked once at init upstream): mW.
pub(crate) fn max_power(fw: &dyn CpuCp) -> Result<u64> {
    let pkt = CpucpPacket::new(op::MAX_POWER_GET);
    fw.send(pkt, None, 0)
}

/// `hl_device_utilization` (common/device.c:1192-1214): percent of the
/// power between the DC floor and the highest. `EOPNOTSUPP` when the two
/// are equal, as upstream; `EINVAL` for a highest power below the floor
/// (upstream's unsigned division would answer garbage).
pub(crate) fn utilization(fw: &dyn CpuCp) -> Result<u32> {
    let max = max_power(fw)?;
    let divisor = max.checked_sub(fw::DC_POWER_MW).ok_or(EINVAL)?;
    if divisor == 0 {
        return Err(EOPNOTSUPP);
    }
    let cur = power(fw)?.clamp(fw::DC_POWER_MW, max);
    let pct = (cur - fw::DC_POWER_MW).saturating_mul(100) / divisor;
    u32::try_from(pct).map_err(|_| EINVAL)
}

/// `hl_fw_cpucp_total_energy_get` (:1154-1175).
pub(crate) fn total_energy(fw: &dyn CpuCp) -> Result<u64> {
    get(fw, op::TOTAL_ENERGY_GET, 0)
}

/// `hl_fw_cpucp_pll_info_get` (:1223-1255): the four outputs (MHz) of PLL
/// `pll` (`pll_type`, a u16: upstream truncates the index).
pub(crate) fn pll_info(fw: &dyn CpuCp, pll: u32) -> Result<[u16; 4]> {
    let r = get(fw, op::PLL_INFO_GET, pll & 0xFFFF)?;
    let out = |i: u32| ((r >> (16 * i)) & 0xFFFF) as u16;
    Ok([out(0), out(1), out(2), out(3)])
}

/// `hl_fw_cpucp_pci_counters_get` (:1098-1152): rx, tx, replays.
pub(crate) fn pci_counters(fw: &dyn CpuCp) -> Result<(u64, u64, u32)> {
    let rx = get(fw, op::PCIE_THROUGHPUT_GET, fw::PCIE_THROUGHPUT_RX)?;
    let tx = get(fw, op::PCIE_THROUGHPUT_GET, fw::PCIE_THROUGHPUT_TX)?;
    let replays = get(fw, op::PCIE_REPLAY_CNT_GET, 0)?;
    Ok((rx, tx, replays as u32))
}

/// What the firmware says of itself in its `cpucp_info`
/// (`hl_fw_cpucp_info_get`, common/firmware_if.c:858-930), as HW_IP_INFO
/// reports it (habanalabs_ioctl.c:88-91): the CPU-CP version and the card
/// name (upstream's `GAUDI2_DEFAULT_CARD_NAME` when the firmware gives none,
/// gaudi2/gaudi2.c:3379-3381).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct FwIdentity {
    /// `cpucp_info.cpucp_version`, NUL-padded.
    pub(crate) cpucp_version: [u8; crate::uapi::HL_INFO_VERSION_MAX_LEN],
    /// `cpucp_info.card_name`, NUL-padded.
    pub(crate) card_name: [u8; crate::uapi::HL_INFO_CARD_NAME_MAX_LEN],
}

impl FwIdentity {
    /// A device whose firmware did not answer: no version, upstream's
    /// default card name.
    pub(crate) const fn unknown() -> Self {
        let mut card_name = [0u8; crate::uapi::HL_INFO_CARD_NAME_MAX_LEN];
        let d = DEFAULT_CARD_NAME;
        let mut i = 0;
        while i < d.len() && i < card_name.len() {
            card_name[i] = d[i];
            i += 1;
        }
        Self {
            cpucp_version: [0; crate::uapi::HL_INFO_VERSION_MAX_LEN],
            card_name,
        }
    }
}

/// `GAUDI2_DEFAULT_CARD_NAME` (gaudi2/gaudi2P.h:97).
const DEFAULT_CARD_NAME: &[u8] = b"HL225";

/// `hl_fw_cpucp_info_get`: the firmware's `cpucp_info` (`INFO_GET`, the
/// struct DMA'd into a buffer of its size), the fields HW_IP_INFO reports.
/// `ENOMEM`, and the channel's errors. Sleeps; O(1).
pub(crate) fn identity(fw: &dyn CpuCp) -> Result<FwIdentity> {
    use model_fw::info;
    let mut raw = KVec::from_elem(0u8, info::BYTES, GFP_KERNEL)?;
    let mut pkt = CpucpPacket::new(op::INFO_GET);
    pkt.index = info::BYTES as u32;
    fw.send(pkt, Some(&mut raw), fw::INFO_TIMEOUT_US)?;
    let mut id = FwIdentity::unknown();
    let field = |at: usize, n: usize| raw.get(at..at + n).unwrap_or(&[]);
    let version = field(info::CPUCP_VERSION, id.cpucp_version.len());
    id.cpucp_version
        .iter_mut()
        .zip(version)
        .for_each(|(d, s)| *d = *s);
    let name = field(info::CARD_NAME, id.card_name.len());
    if name.first().is_some_and(|&c| c != 0) {
        id.card_name = [0; crate::uapi::HL_INFO_CARD_NAME_MAX_LEN];
        id.card_name.iter_mut().zip(name).for_each(|(d, s)| *d = *s);
    }
    // Both NUL-terminated, as upstream's copies are.
    if let Some(last) = id.cpucp_version.last_mut() {
        *last = 0;
    }
    if let Some(last) = id.card_name.last_mut() {
        *last = 0;
    }
    Ok(id)
}

/// `hl_fw_dram_pending_row_get` (:1325-1346).
pub(crate) fn dram_pending_rows(fw: &dyn CpuCp) -> Result<u32> {
    let pkt = CpucpPacket::new(op::HBM_PENDING_ROWS_STATUS);
    Ok(fw.send(pkt, None, 0)? as u32)
}

/// `hl_fw_dram_replaced_row_get` (:1282-1323): a `cpucp_hbm_row_info`
/// DMA'd by the firmware (`data_max_size` its size).
pub(crate) fn dram_replaced_rows(fw: &dyn CpuCp) -> Result<[u8; fw::HBM_ROW_INFO_BYTES]> {
    let mut info = [0u8; fw::HBM_ROW_INFO_BYTES];
    let mut pkt = CpucpPacket::new(op::HBM_REPLACED_ROWS_INFO_GET);
    pkt.index = fw::HBM_ROW_INFO_BYTES as u32;
    fw.send(pkt, Some(&mut info), fw::INFO_TIMEOUT_US)?;
    Ok(info)
}

#[kunit_tests(hlrs_cpucp_identity)]
mod tests {
    use super::*;

    #[test]
    fn the_simulated_firmware_names_an_hl225() -> Result {
        let id = identity(&SimCpuCp::new(1 << 30))?;
        let name: &[u8] = &id.card_name;
        assert!(name.starts_with(b"HL-225\0"));
        let version: &[u8] = &id.cpucp_version;
        assert!(version.starts_with(b"gaudi2-model cpucp stand-in\0"));
        // Without an answer: upstream's default name, no version.
        let unknown = FwIdentity::unknown();
        assert!(unknown.card_name.starts_with(b"HL225\0"));
        assert!(unknown.cpucp_version.iter().all(|&b| b == 0));
        Ok(())
    }
}
