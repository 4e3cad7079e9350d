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
//! | `FREQUENCY_GET`, `FREQUENCY_CURR_GET` | [`PLL_HZ`] |
//! | `PLL_INFO_GET` | four outputs of [`PLL_MHZ`] MHz (`CPUCP_PKT_RES_PLL_OUT0..3`, :778-785) |
//! | `POWER_GET` | [`POWER_MW`]; `TOTAL_ENERGY_GET`: energy of that power since boot (uJ) |
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
    /// `CPUCP_PACKET_ENGINE_CORE_ASID_SET`.
    pub const ENGINE_CORE_ASID_SET: u32 = 48;
    /// `CPUCP_PACKET_ACTIVE_STATUS_SET`.
    pub const ACTIVE_STATUS_SET: u32 = 59;
    /// `CPUCP_PACKET_INTS_REGISTER`.
    pub const INTS_REGISTER: u32 = 65;
}

/// `enum cpucp_packet_rc` (cpucp_if.h:916-923).
mod rc {
    pub(super) const SUCCESS: u32 = 0;
    pub(super) const FAULT: u32 = 2;
    pub(super) const INVALID_PKT: u32 = 3;
}

/// Every PLL's frequency, Hz.
pub const PLL_HZ: u64 = 1_650_000_000;
/// Every PLL output, MHz.
pub const PLL_MHZ: u64 = 1650;
/// The power the device reports, mW.
pub const POWER_MW: u64 = 150_000;
/// The temperature the device reports, millidegrees Celsius.
pub const TEMP_MILLI_C: u64 = 45_000;
/// The card name (`cpucp_info.card_name`), NUL-padded to 16 bytes.
pub const CARD_NAME: &[u8] = b"HL-225";

/// `struct cpucp_info` offsets (cpucp_if.h:1175-1204; checked with
/// offsetof on the header): `kernel_version`, `card_type`, `cpucp_version`,
/// `dram_size`, `card_name`, `fw_os_version`; the struct is 1768 bytes.
mod info {
    pub(super) const KERNEL_VERSION: usize = 1024;
    pub(super) const CARD_TYPE: usize = 1156;
    pub(super) const CPUCP_VERSION: usize = 1428;
    pub(super) const DRAM_SIZE: usize = 1560;
    pub(super) const CARD_NAME: usize = 1568;
    pub(super) const FW_OS_VERSION: usize = 1640;
    pub(super) const BYTES: usize = 1768;
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
        let ctl = le32(&pkt, 8);
        let opcode = (ctl & OPCODE_MASK) >> OPCODE_SHIFT;
        let (code, result) = self.cpucp_answer(env, opcode, &pkt);
        let result = result.unwrap_or_else(|| le64(&pkt, 0));
        let mut answer = [0u8; 16];
        put(&mut answer, 0, &result.to_le_bytes());
        let ctl = (ctl & !(0xF << RC_SHIFT)) | (code & 0xF) << RC_SHIFT;
        put(&mut answer, 8, &ctl.to_le_bytes());
        // The result and rc first, the fence last: the driver polls it.
        let wrote = env.dma_write(ptr, answer.get(..12).unwrap_or(&[])).is_ok()
            && env
                .dma_write(ptr.wrapping_add(12), &FENCE_VAL.to_le_bytes())
                .is_ok();
        if wrote {
            self.stats.cpucp_packets = self.stats.cpucp_packets.wrapping_add(1);
            self.stats.dma_write_bytes = self.stats.dma_write_bytes.wrapping_add(16);
        } else {
            self.stats.faults = self.stats.faults.wrapping_add(1);
        }
    }

    /// The rc and result (`None`: leave `value` as it is) of a packet.
    fn cpucp_answer(&mut self, env: &mut dyn Env, opcode: u32, pkt: &[u8]) -> (u32, Option<u64>) {
        let value = le64(pkt, 0);
        let index = le32(pkt, 16);
        let ok = |r: u64| (rc::SUCCESS, Some(r));
        match opcode {
            op::TEST => ok(value),
            op::INFO_GET => self.info_get(env, value, index),
            op::ENABLE_PCI_ACCESS => {
                self.cpu_if.msix_db = value;
                ok(0)
            }
            op::DISABLE_PCI_ACCESS => {
                self.cpu_if.msix_db = 0;
                ok(0)
            }
            op::FREQUENCY_GET | op::FREQUENCY_CURR_GET => ok(PLL_HZ),
            op::PLL_INFO_GET => ok(PLL_MHZ | PLL_MHZ << 16 | PLL_MHZ << 32 | PLL_MHZ << 48),
            op::POWER_GET => ok(POWER_MW),
            op::TOTAL_ENERGY_GET => ok((env.now_ns() / 1000).saturating_mul(POWER_MW) / 1000),
            op::TEMPERATURE_GET => ok(TEMP_MILLI_C),
            op::PCIE_THROUGHPUT_GET => ok(if index == 0 {
                self.stats.dma_read_bytes
            } else {
                self.stats.dma_write_bytes
            }),
            op::PCIE_REPLAY_CNT_GET => ok(0),
            op::UNMASK_RAZWI_IRQ
            | op::UNMASK_RAZWI_IRQ_ARRAY
            | op::MSI_INFO_SET
            | op::ENGINE_CORE_ASID_SET
            | op::ACTIVE_STATUS_SET
            | op::INTS_REGISTER => ok(0),
            _ => (rc::INVALID_PKT, None),
        }
    }

    /// `INFO_GET`: a `cpucp_info` of at most `max` bytes DMA'd to `addr`.
    fn info_get(&mut self, env: &mut dyn Env, addr: u64, max: u32) -> (u32, Option<u64>) {
        let mut buf = [0u8; info::BYTES];
        put(&mut buf, info::KERNEL_VERSION, b"gaudi2-model");
        put(
            &mut buf,
            info::CPUCP_VERSION,
            b"gaudi2-model cpucp stand-in",
        );
        put(&mut buf, info::FW_OS_VERSION, b"gaudi2-model");
        put(&mut buf, info::CARD_TYPE, &0u32.to_le_bytes());
        put(
            &mut buf,
            info::DRAM_SIZE,
            &self.cfg.dram_bytes.to_le_bytes(),
        );
        put(&mut buf, info::CARD_NAME, CARD_NAME);
        let n = usize::try_from(max).map_or(info::BYTES, |m| m.min(info::BYTES));
        match env.dma_write(addr, buf.get(..n).unwrap_or(&[])) {
            Ok(()) => {
                self.stats.dma_write_bytes = self.stats.dma_write_bytes.wrapping_add(n as u64);
                (rc::SUCCESS, Some(0))
            }
            Err(_) => (rc::FAULT, Some(0)),
        }
    }
}
