// SPDX-License-Identifier: GPL-2.0

//! The CPU-CP packet interface as the driver speaks it (upstream
//! include/linux/habanalabs/cpucp_if.h; the driver side of
//! common/firmware_if.c): `struct cpucp_packet`, the opcodes the INFO ops
//! send, the `ctl` fields and the timeouts.

/// `struct cpucp_packet` (cpucp_if.h:811-877, 24 bytes, little-endian).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct CpucpPacket {
    /// `value` (SET), `result` (GET) or `addr` (a DMA'd answer).
    pub(crate) value: u64,
    /// Opcode (bits 28:16) and the firmware's rc (bits 15:12).
    pub(crate) ctl: u32,
    /// Written last by the firmware: [`FENCE_VAL`].
    pub(crate) fence: u32,
    /// The union of `index`, `pll_index`, `pll_type` (low half),
    /// `data_max_size`, `sensor_index`/`type`.
    pub(crate) index: u32,
    /// `port_index` / `pkt_subidx` / `nonce`.
    pub(crate) port: u32,
}

/// Bytes of a [`CpucpPacket`].
pub(crate) const PACKET_BYTES: usize = 24;
const _: () = assert!(core::mem::size_of::<CpucpPacket>() == PACKET_BYTES);

impl CpucpPacket {
    /// A packet of `opcode` (`ctl = opcode << CPUCP_PKT_CTL_OPCODE_SHIFT`).
    pub(crate) const fn new(opcode: u32) -> Self {
        Self {
            value: 0,
            ctl: opcode << OPCODE_SHIFT,
            fence: 0,
            index: 0,
            port: 0,
        }
    }

    /// The little-endian bytes the firmware reads.
    pub(crate) fn to_bytes(self) -> [u8; PACKET_BYTES] {
        let mut b = [0u8; PACKET_BYTES];
        for (at, v) in [
            (0usize, &self.value.to_le_bytes()[..]),
            (8, &self.ctl.to_le_bytes()[..]),
            (12, &self.fence.to_le_bytes()[..]),
            (16, &self.index.to_le_bytes()[..]),
            (20, &self.port.to_le_bytes()[..]),
        ] {
            if let Some(dst) = b.get_mut(at..at + v.len()) {
                dst.copy_from_slice(v);
            }
        }
        b
    }

    /// The packet of the little-endian bytes `b` (the firmware's answer).
    pub(crate) fn from_bytes(b: &[u8; PACKET_BYTES]) -> Self {
        let w = |at: usize| {
            b.get(at..at + 4)
                .and_then(|s| <[u8; 4]>::try_from(s).ok())
                .map_or(0, u32::from_le_bytes)
        };
        Self {
            value: u64::from(w(0)) | u64::from(w(4)) << 32,
            ctl: w(8),
            fence: w(12),
            index: w(16),
            port: w(20),
        }
    }

    /// The firmware's rc (`CPUCP_PKT_CTL_RC_MASK`).
    pub(crate) const fn rc(&self) -> u32 {
        (self.ctl & RC_MASK) >> RC_SHIFT
    }
}

/// `CPUCP_PACKET_FENCE_VAL` (cpucp_if.h:770).
pub(crate) const FENCE_VAL: u32 = 0xFE8C_E7A5;
/// `CPUCP_PKT_CTL_RC_SHIFT` / `_MASK` (cpucp_if.h:772-773).
const RC_SHIFT: u32 = 12;
const RC_MASK: u32 = 0x0000_F000;
/// `CPUCP_PKT_CTL_OPCODE_SHIFT` (cpucp_if.h:775).
const OPCODE_SHIFT: u32 = 16;

/// `enum cpucp_packet_id` (cpucp_if.h:701-767), the packets the driver sends.
pub(crate) mod op {
    /// `CPUCP_PACKET_ENABLE_PCI_ACCESS`: `value` is the virtual MSI-X
    /// doorbell page (gaudi2/gaudi2.c:3667-3669).
    pub(crate) const ENABLE_PCI_ACCESS: u32 = 2;
    /// `CPUCP_PACKET_FREQUENCY_GET`.
    pub(crate) const FREQUENCY_GET: u32 = 11;
    /// `CPUCP_PACKET_INFO_GET`.
    pub(crate) const INFO_GET: u32 = 15;
    /// `CPUCP_PACKET_FREQUENCY_CURR_GET`.
    pub(crate) const FREQUENCY_CURR_GET: u32 = 20;
    /// `CPUCP_PACKET_MAX_POWER_GET`.
    pub(crate) const MAX_POWER_GET: u32 = 21;
    /// `CPUCP_PACKET_PCIE_THROUGHPUT_GET`.
    pub(crate) const PCIE_THROUGHPUT_GET: u32 = 28;
    /// `CPUCP_PACKET_PCIE_REPLAY_CNT_GET`.
    pub(crate) const PCIE_REPLAY_CNT_GET: u32 = 29;
    /// `CPUCP_PACKET_TOTAL_ENERGY_GET`.
    pub(crate) const TOTAL_ENERGY_GET: u32 = 30;
    /// `CPUCP_PACKET_PLL_INFO_GET`.
    pub(crate) const PLL_INFO_GET: u32 = 31;
    /// `CPUCP_PACKET_POWER_GET`.
    pub(crate) const POWER_GET: u32 = 33;
    /// `CPUCP_PACKET_HBM_REPLACED_ROWS_INFO_GET`.
    pub(crate) const HBM_REPLACED_ROWS_INFO_GET: u32 = 44;
    /// `CPUCP_PACKET_HBM_PENDING_ROWS_STATUS`.
    pub(crate) const HBM_PENDING_ROWS_STATUS: u32 = 45;
}

/// `cpucp_pcie_throughput_rx` / `_tx` (cpucp_if.h `enum
/// cpucp_pcie_throughput_attributes`).
pub(crate) const PCIE_THROUGHPUT_RX: u32 = 0;
/// See [`PCIE_THROUGHPUT_RX`].
pub(crate) const PCIE_THROUGHPUT_TX: u32 = 1;
/// `CPUCP_POWER_INPUT` (cpucp_if.h:1001), the `type` of `POWER_GET`
/// (the high half of the index word).
pub(crate) const POWER_INPUT: u32 = 8;

/// `HL_CPUCP_INFO_TIMEOUT_USEC` (common/habanalabs.h:78): the INFO packets'.
pub(crate) const INFO_TIMEOUT_US: u32 = 10_000_000;
/// `GAUDI2_MSG_TO_CPU_TIMEOUT_USEC` (gaudi2/gaudi2.c:37): a packet sent
/// with timeout 0 (`gaudi2_send_cpu_message`, :7090-7105).
pub(crate) const MSG_TIMEOUT_US: u32 = 4_000_000;
/// `DC_POWER_DEFAULT` (gaudi2/gaudi2P.h:91), mW: utilization's floor.
pub(crate) const DC_POWER_MW: u64 = 60_000;
/// Bytes of `struct cpucp_hbm_row_info` (cpucp_if.h:1312-1320), what
/// `hl_fw_dram_replaced_row_get` asks for and copies.
pub(crate) const HBM_ROW_INFO_BYTES: usize = 8;

/// The CPU interface registers (upstream `mm*` addresses,
/// asic_reg/cpu_if_regs.h:87-109) the driver programs in
/// `gaudi2_init_cpu_queues` (gaudi2/gaudi2.c:5299-5365).
pub(crate) mod regs {
    /// `mmCPU_IF_PF_PQ_PI`: the CPU PQ's doorbell.
    pub(crate) const PF_PQ_PI: u32 = 0x4CC_1200;
    /// `mmCPU_IF_PQ_BASE_ADDR_LOW` / `_HIGH`.
    pub(crate) const PQ_BASE_ADDR_LOW: u32 = 0x4CC_1204;
    /// See [`PQ_BASE_ADDR_LOW`].
    pub(crate) const PQ_BASE_ADDR_HIGH: u32 = 0x4CC_1208;
    /// `mmCPU_IF_PQ_LENGTH` (bytes).
    pub(crate) const PQ_LENGTH: u32 = 0x4CC_120C;
    /// `mmCPU_IF_CQ_BASE_ADDR_LOW` / `_HIGH`: the CPU-accessible pool.
    pub(crate) const CQ_BASE_ADDR_LOW: u32 = 0x4CC_1210;
    /// See [`CQ_BASE_ADDR_LOW`].
    pub(crate) const CQ_BASE_ADDR_HIGH: u32 = 0x4CC_1214;
    /// `mmCPU_IF_CQ_LENGTH` (bytes).
    pub(crate) const CQ_LENGTH: u32 = 0x4CC_1218;
    /// `mmCPU_IF_EQ_BASE_ADDR_LOW` / `_HIGH`.
    pub(crate) const EQ_BASE_ADDR_LOW: u32 = 0x4CC_1220;
    /// See [`EQ_BASE_ADDR_LOW`].
    pub(crate) const EQ_BASE_ADDR_HIGH: u32 = 0x4CC_1224;
    /// `mmCPU_IF_EQ_LENGTH` (bytes).
    pub(crate) const EQ_LENGTH: u32 = 0x4CC_1228;
    /// `mmCPU_IF_EQ_RD_OFFS`: the driver's EQ consumer index.
    pub(crate) const EQ_RD_OFFS: u32 = 0x4CC_122C;
    /// `mmCPU_IF_QUEUE_INIT`: the handshake.
    pub(crate) const QUEUE_INIT: u32 = 0x4CC_1230;
    /// `PQ_INIT_STATUS_READY_FOR_CP` (cpucp_if.h:411).
    pub(crate) const READY_FOR_CP: u32 = 1;
    /// `PQ_INIT_STATUS_READY_FOR_HOST` (cpucp_if.h:412).
    pub(crate) const READY_FOR_HOST: u32 = 2;
}

/// `GAUDI2_CPU_TIMEOUT_USEC` (gaudi2/gaudi2P.h:22): the handshake's.
pub(crate) const CPU_TIMEOUT_US: u64 = 30_000_000;
