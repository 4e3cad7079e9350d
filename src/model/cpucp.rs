// SPDX-License-Identifier: GPL-2.0

//! The CPU-CP packets the stand-in firmware answers, as
//! `hl_fw_send_cpu_message` (common/firmware_if.c:404-540) expects: the BD
//! points at a `struct cpucp_packet` (include/linux/habanalabs/cpucp_if.h:
//! 811-877: `value/result` u64 at 0, `ctl` u32 at 8, `fence` u32 at 12,
//! `index` u32 at 16); the firmware writes the result, the rc in `ctl`
//! bits 15:12 (`CPUCP_PKT_CTL_RC`, :772-773) and last the fence
//! `CPUCP_PACKET_FENCE_VAL` (:770; `CPU_BOOT_DEV_STS0_PKT_PI_ACK_EN` is not
//! advertised, so not the PI).
//!
//! Answers (a device of [`super::Config`]'s DRAM, an HL-225):
//!
//! | packet | answer |
//! |---|---|
//! | `TEST` | `result = value` (upstream sends the fence value, `hl_fw_test_cpu_queue`, common/firmware_if.c:604-625) |
//! | `INFO_GET` | a `struct cpucp_info` (:1175-1204) DMA'd to `addr` (at most `data_max_size` bytes): DRAM size, card name "HL-225", versions |
//! | `ENABLE_PCI_ACCESS` | the MSI-X doorbell page (`value`) kept (gaudi2/gaudi2.c:3667-3668); `DISABLE_PCI_ACCESS` clears it |
//! | `FREQUENCY_GET`, `FREQUENCY_CURR_GET` | PLL `pll_index`'s frequency in Hz ([`PLL_MHZ`], in the legacy numbering of uAPI `HL_GAUDI2_*_PLL`: `CPU_BOOT_DEV_STS0_DYN_PLL_EN` is not advertised, so the driver sends its own index, common/firmware_if.c:1184-1195); an index past the table: rc `invalid_params` |
//! | `PLL_INFO_GET` | four outputs of PLL `pll_type` in MHz (`CPUCP_PKT_RES_PLL_OUT0..3`, :778-785): the PLL's frequency, /2, /4, /8 |
//! | `POWER_GET` | [`POWER_MW`]; `MAX_POWER_GET`: [`MAX_POWER_MW`]; `TOTAL_ENERGY_GET`: energy of that power since boot (uJ, from `now_ns`) |
//! | `HBM_PENDING_ROWS_STATUS` | 0 rows pending; `HBM_REPLACED_ROWS_INFO_GET`: an all-zero `cpucp_hbm_row_info` DMA'd to `addr` |
//! | `TEMPERATURE_GET` | [`TEMP_MILLI_C`] |
//! | `PCIE_THROUGHPUT_GET`, `PCIE_REPLAY_CNT_GET` | the DMA bytes the model moved (index 0 rx, 1 tx); replays 0 |
//! | `UNMASK_RAZWI_IRQ(_ARRAY)`, `MSI_INFO_SET`, `ENGINE_CORE_ASID_SET`, `ACTIVE_STATUS_SET`, `INTS_REGISTER` | acknowledged |
//! | anything else | rc `cpucp_packet_invalid_pkt` (:919) |

use super::{Env, Gaudi2};

/// `CPUCP_PACKET_FENCE_VAL` (cpucp_if.h:770).
pub const FENCE_VAL: u32 = 0xFE8C_E7A5;
/// `CPUCP_PKT_CTL_RC_SHIFT` (cpucp_if.h:772), 4 bits.
const RC_SHIFT: u32 = 12;
/// `CPUCP_PKT_CTL_OPCODE_SHIFT` / `_MASK` (cpucp_if.h:775-776).
const OPCODE_SHIFT: u32 = 16;
const OPCODE_MASK: u32 = 0x1FFF_0000;
/// Bytes of a `struct cpucp_packet`.
pub const PACKET_BYTES: usize = 24;

/// `enum cpucp_packet_id` (cpucp_if.h:701-767).
pub mod op {
    /// `CPUCP_PACKET_DISABLE_PCI_ACCESS`.
    pub const DISABLE_PCI_ACCESS: u32 = 1;
    /// `CPUCP_PACKET_ENABLE_PCI_ACCESS`.
    pub const ENABLE_PCI_ACCESS: u32 = 2;
    /// `CPUCP_PACKET_TEMPERATURE_GET`.
    pub const TEMPERATURE_GET: u32 = 3;
    /// `CPUCP_PACKET_FREQUENCY_GET`.
    pub const FREQUENCY_GET: u32 = 11;
    /// `CPUCP_PACKET_INFO_GET`.
    pub const INFO_GET: u32 = 15;
    /// `CPUCP_PACKET_UNMASK_RAZWI_IRQ`.
    pub const UNMASK_RAZWI_IRQ: u32 = 17;
    /// `CPUCP_PACKET_UNMASK_RAZWI_IRQ_ARRAY`.
    pub const UNMASK_RAZWI_IRQ_ARRAY: u32 = 18;
    /// `CPUCP_PACKET_TEST`.
    pub const TEST: u32 = 19;
    /// `CPUCP_PACKET_FREQUENCY_CURR_GET`.
    pub const FREQUENCY_CURR_GET: u32 = 20;
    /// `CPUCP_PACKET_MAX_POWER_GET`.
    pub const MAX_POWER_GET: u32 = 21;
    /// `CPUCP_PACKET_PCIE_THROUGHPUT_GET`.
    pub const PCIE_THROUGHPUT_GET: u32 = 28;
    /// `CPUCP_PACKET_PCIE_REPLAY_CNT_GET`.
    pub const PCIE_REPLAY_CNT_GET: u32 = 29;
    /// `CPUCP_PACKET_TOTAL_ENERGY_GET`.
    pub const TOTAL_ENERGY_GET: u32 = 30;
    /// `CPUCP_PACKET_PLL_INFO_GET`.
    pub const PLL_INFO_GET: u32 = 31;
    /// `CPUCP_PACKET_POWER_GET`.
    pub const POWER_GET: u32 = 33;
    /// `CPUCP_PACKET_MSI_INFO_SET`.
    pub const MSI_INFO_SET: u32 = 38;
    /// `CPUCP_PACKET_HBM_REPLACED_ROWS_INFO_GET`.
    pub const HBM_REPLACED_ROWS_INFO_GET: u32 = 44;
    /// `CPUCP_PACKET_HBM_PENDING_ROWS_STATUS`.
    pub const HBM_PENDING_ROWS_STATUS: u32 = 45;
    /// `CPUCP_PACKET_ENGINE_CORE_ASID_SET`.
    pub const ENGINE_CORE_ASID_SET: u32 = 48;
    /// `CPUCP_PACKET_ACTIVE_STATUS_SET`.
    pub const ACTIVE_STATUS_SET: u32 = 59;
    /// `CPUCP_PACKET_INTS_REGISTER`.
    pub const INTS_REGISTER: u32 = 65;
}

/// `enum cpucp_packet_rc` (cpucp_if.h:916-923).
pub mod rc {
    /// `cpucp_packet_success`.
    pub const SUCCESS: u32 = 0;
    /// `cpucp_packet_fault`.
    pub const FAULT: u32 = 2;
    /// `cpucp_packet_invalid_pkt`.
    pub const INVALID_PKT: u32 = 3;
    /// `cpucp_packet_invalid_params`.
    pub const INVALID_PARAMS: u32 = 4;
}

/// Each PLL's frequency in MHz, by the uAPI's `HL_GAUDI2_*_PLL` index
/// (include/uapi/drm/habanalabs_accel.h:640-652: CPU, PCI, SRAM, HBM, NIC,
/// DMA, MESH, MME, TPC, IF, VID, MSS). The MME PLL (7) is the clock upstream
/// reports as the device's (`clk_pll_index`, gaudi2/gaudi2.c:2946).
pub const PLL_MHZ: [u64; 12] = [
    1650, 500, 1650, 1600, 1250, 1650, 1650, 1650, 1650, 1650, 1200, 1100,
];
/// The power the device reports, mW (an idle HL-225 above its DC floor).
pub const POWER_MW: u64 = 150_000;
/// The most power the device may draw, mW (`MAX_POWER_GET`; an HL-225's
/// 600 W): upstream's utilization is `(power - 60 W) / (max - 60 W)`
/// (common/device.c:1192-1214), 16 for [`POWER_MW`].
pub const MAX_POWER_MW: u64 = 600_000;
/// The temperature the device reports, millidegrees Celsius.
pub const TEMP_MILLI_C: u64 = 45_000;
/// The card name (`cpucp_info.card_name`), NUL-padded to 16 bytes.
pub const CARD_NAME: &[u8] = b"HL-225";

/// `struct cpucp_info` offsets (cpucp_if.h:1175-1204; checked with
/// offsetof on the header): `kernel_version`, `card_type`, `cpucp_version`,
/// `dram_size`, `card_name`, `fw_os_version`; the struct is 1768 bytes.
pub mod info {
    /// `kernel_version`.
    pub const KERNEL_VERSION: usize = 1024;
    /// `card_type`.
    pub const CARD_TYPE: usize = 1156;
    /// `cpucp_version` (`VERSION_MAX_LEN`, 128 bytes).
    pub const CPUCP_VERSION: usize = 1428;
    /// `dram_size`.
    pub const DRAM_SIZE: usize = 1560;
    /// `card_name` (`CARD_NAME_MAX_LEN`, 16 bytes).
    pub const CARD_NAME: usize = 1568;
    /// `fw_os_version`.
    pub const FW_OS_VERSION: usize = 1640;
    /// The whole struct.
    pub const BYTES: usize = 1768;
}

/// Copy `src` into `buf` at `at` (as much as fits).
fn put(buf: &mut [u8], at: usize, src: &[u8]) {
    if let Some(dst) = buf.get_mut(at..) {
        dst.iter_mut().zip(src).for_each(|(d, s)| *d = *s);
    }
}

/// The little-endian u32/u64 at `at` of `b` (0 past its end).
fn le32(b: &[u8], at: usize) -> u32 {
    b.get(at..at.saturating_add(4))
        .and_then(|s| <[u8; 4]>::try_from(s).ok())
        .map_or(0, u32::from_le_bytes)
}

fn le64(b: &[u8], at: usize) -> u64 {
    u64::from(le32(b, at)) | u64::from(le32(b, at.saturating_add(4))) << 32
}

impl Gaudi2 {
    /// `PF_PQ_PI` = `pi`: the firmware answers every BD from its consumer
    /// index up to `pi`, at most one queue's worth (a PI further ahead than
    /// the queue is long is taken modulo, as the hardware's index is).
    /// O(BDs x packet size).
    pub(super) fn cpu_pq_doorbell(&mut self, env: &mut dyn Env, pi: u32) {
        self.stats.doorbells = self.stats.doorbells.wrapping_add(1);
        self.cpu_if.pq_pi = pi;
        let entries = self.cpu_if.pq_entries();
        if !self.cpu_if.ready() || entries == 0 {
            return;
        }
        // Upstream's PI runs modulo twice the queue length.
        let span = entries.saturating_mul(2);
        let todo = (u64::from(pi) + span - u64::from(self.cpu_if.pq_ci) % span) % span;
        for _ in 0..todo.min(entries) {
            let ci = self.cpu_if.pq_ci;
            if let Some(at) = self.cpu_if.pq_entry_addr(ci) {
                self.cpu_bd(env, at);
            }
            self.cpu_if.pq_ci = ((u64::from(ci) + 1) % span) as u32;
        }
        self.cpu_if.pq_ci = (u64::from(pi) % span) as u32;
    }

    /// Answer the packet of the BD at bus address `at`.
    fn cpu_bd(&mut self, env: &mut dyn Env, at: u64) {
        let mut bd = [0u8; 16];
        if env.dma_read(at, &mut bd).is_err() {
            self.stats.faults = self.stats.faults.wrapping_add(1);
            return;
        }
        let (ptr, len) = (le64(&bd, 0), le32(&bd, 8));
        let mut pkt = [0u8; PACKET_BYTES];
        if usize::try_from(len).map_or(true, |l| l < PACKET_BYTES)
            || env.dma_read(ptr, &mut pkt).is_err()
        {
            self.stats.faults = self.stats.faults.wrapping_add(1);
            return;
        }
        self.stats.dma_read_bytes = self.stats.dma_read_bytes.wrapping_add(16 + 24);
        let facts = Facts {
            dram_bytes: self.cfg.dram_bytes,
            rx_bytes: self.stats.dma_read_bytes,
            tx_bytes: self.stats.dma_write_bytes,
            now_ns: env.now_ns(),
        };
        let a = answer(env, &facts, &mut self.cpu_if.msix_db, &mut pkt);
        self.stats.dma_write_bytes = self.stats.dma_write_bytes.wrapping_add(a.dma_bytes);
        // The result and rc first, the fence last: the driver polls it.
        let wrote = env.dma_write(ptr, pkt.get(..12).unwrap_or(&[])).is_ok()
            && env
                .dma_write(ptr.wrapping_add(12), pkt.get(12..16).unwrap_or(&[]))
                .is_ok();
        if wrote {
            self.stats.cpucp_packets = self.stats.cpucp_packets.wrapping_add(1);
            self.stats.dma_write_bytes = self.stats.dma_write_bytes.wrapping_add(16);
        } else {
            self.stats.faults = self.stats.faults.wrapping_add(1);
        }
    }
}

/// What the firmware reports that it does not keep itself: the device's
/// DRAM, its PCIe traffic counters, the time.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Facts {
    /// Bytes of device DRAM (`cpucp_info.dram_size`).
    pub dram_bytes: u64,
    /// Bytes the device read from the host over PCIe (throughput index 0).
    pub rx_bytes: u64,
    /// Bytes the device wrote to the host over PCIe (throughput index 1).
    pub tx_bytes: u64,
    /// Monotonic nanoseconds (the energy counter).
    pub now_ns: u64,
}

/// What [`answer`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Answer {
    /// The packet's rc (`enum cpucp_packet_rc`).
    pub rc: u32,
    /// Bytes the answer DMA'd to the host besides the packet itself.
    pub dma_bytes: u64,
}

/// Answer the `struct cpucp_packet` `pkt` as the firmware does: its result
/// (`value` left as it was for a packet that has none), its rc in `ctl`
/// and the fence value, written into `pkt`; an `INFO_GET` or
/// `HBM_REPLACED_ROWS_INFO_GET` DMAs its struct through `env`. `msix_db`
/// is the MSI-X doorbell page `ENABLE_PCI_ACCESS` sets. The whole firmware
/// of both hosts: the CPU PQ ([`Gaudi2`]'s doorbell) and the in-module
/// simulation call it. O(1), plus the DMA of an info struct.
pub fn answer(
    env: &mut dyn Env,
    facts: &Facts,
    msix_db: &mut u64,
    pkt: &mut [u8; PACKET_BYTES],
) -> Answer {
    let ctl = le32(pkt, 8);
    let opcode = (ctl & OPCODE_MASK) >> OPCODE_SHIFT;
    let (code, result, dma_bytes) = respond(env, facts, msix_db, opcode, pkt);
    let result = result.unwrap_or_else(|| le64(pkt, 0));
    put(pkt, 0, &result.to_le_bytes());
    let ctl = (ctl & !(0xF << RC_SHIFT)) | (code & 0xF) << RC_SHIFT;
    put(pkt, 8, &ctl.to_le_bytes());
    put(pkt, 12, &FENCE_VAL.to_le_bytes());
    Answer {
        rc: code,
        dma_bytes,
    }
}

/// The rc, result (`None`: leave `value` as it is) and bytes DMA'd of a
/// packet.
fn respond(
    env: &mut dyn Env,
    facts: &Facts,
    msix_db: &mut u64,
    opcode: u32,
    pkt: &[u8],
) -> (u32, Option<u64>, u64) {
    let value = le64(pkt, 0);
    let index = le32(pkt, 16);
    let ok = |r: u64| (rc::SUCCESS, Some(r), 0);
    let pll = |i: u32| {
        PLL_MHZ
            .get(usize::try_from(i).unwrap_or(usize::MAX))
            .copied()
    };
    match opcode {
        op::TEST => ok(value),
        op::INFO_GET => info_get(env, facts, value, index),
        op::ENABLE_PCI_ACCESS => {
            *msix_db = value;
            ok(0)
        }
        op::DISABLE_PCI_ACCESS => {
            *msix_db = 0;
            ok(0)
        }
        op::FREQUENCY_GET | op::FREQUENCY_CURR_GET => match pll(index) {
            Some(mhz) => ok(mhz * 1_000_000),
            None => (rc::INVALID_PARAMS, Some(0), 0),
        },
        // `pll_type` is the low half of the index word.
        op::PLL_INFO_GET => match pll(index & 0xFFFF) {
            Some(m) => ok(m | (m / 2) << 16 | (m / 4) << 32 | (m / 8) << 48),
            None => (rc::INVALID_PARAMS, Some(0), 0),
        },
        op::POWER_GET => ok(POWER_MW),
        op::MAX_POWER_GET => ok(MAX_POWER_MW),
        op::TOTAL_ENERGY_GET => ok((facts.now_ns / 1000).saturating_mul(POWER_MW) / 1000),
        op::TEMPERATURE_GET => ok(TEMP_MILLI_C),
        op::PCIE_THROUGHPUT_GET => ok(if index == 0 {
            facts.rx_bytes
        } else {
            facts.tx_bytes
        }),
        op::PCIE_REPLAY_CNT_GET | op::HBM_PENDING_ROWS_STATUS => ok(0),
        op::HBM_REPLACED_ROWS_INFO_GET => {
            // No row was ever replaced: a zeroed `cpucp_hbm_row_info`.
            let zeros = [0u8; HBM_ROW_INFO_BYTES];
            dma_struct(env, value, index, &zeros)
        }
        op::UNMASK_RAZWI_IRQ
        | op::UNMASK_RAZWI_IRQ_ARRAY
        | op::MSI_INFO_SET
        | op::ENGINE_CORE_ASID_SET
        | op::ACTIVE_STATUS_SET
        | op::INTS_REGISTER => ok(0),
        _ => (rc::INVALID_PKT, None, 0),
    }
}

/// Bytes of `struct cpucp_hbm_row_replaced_rows_info` (cpucp_if.h:1322-1326:
/// a u16 count and 6 pad bytes, then 32 `cpucp_hbm_row_info` of 8 bytes);
/// upstream asks for `sizeof(struct cpucp_hbm_row_info)` = 8 of them
/// (common/firmware_if.c:1282-1323), the firmware writes at most that.
pub const HBM_ROW_INFO_BYTES: usize = 8 + 32 * 8;

/// DMA `data` (at most `max` bytes of it) to `addr`: rc and bytes moved.
fn dma_struct(env: &mut dyn Env, addr: u64, max: u32, data: &[u8]) -> (u32, Option<u64>, u64) {
    let n = usize::try_from(max).map_or(data.len(), |m| m.min(data.len()));
    match env.dma_write(addr, data.get(..n).unwrap_or(&[])) {
        Ok(()) => (rc::SUCCESS, Some(0), n as u64),
        Err(_) => (rc::FAULT, Some(0), 0),
    }
}

/// `INFO_GET`: a `cpucp_info` of at most `max` bytes DMA'd to `addr`.
fn info_get(env: &mut dyn Env, facts: &Facts, addr: u64, max: u32) -> (u32, Option<u64>, u64) {
    let mut buf = [0u8; info::BYTES];
    put(&mut buf, info::KERNEL_VERSION, b"gaudi2-model");
    put(
        &mut buf,
        info::CPUCP_VERSION,
        b"gaudi2-model cpucp stand-in",
    );
    put(&mut buf, info::FW_OS_VERSION, b"gaudi2-model");
    put(&mut buf, info::CARD_TYPE, &0u32.to_le_bytes());
    put(&mut buf, info::DRAM_SIZE, &facts.dram_bytes.to_le_bytes());
    put(&mut buf, info::CARD_NAME, CARD_NAME);
    dma_struct(env, addr, max, &buf)
}
