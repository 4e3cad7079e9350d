// SPDX-License-Identifier: GPL-2.0

//! The model's register map: upstream's `mm*` addresses (BAR0 offset minus
//! 0x400_0000) and the field values the model interprets, each with the
//! upstream file:line it comes from. Paths are relative to
//! `drivers/accel/habanalabs/` (`asic_reg/` = `include/gaudi2/asic_reg/`)
//! or, for `include/linux/habanalabs/`, to the kernel source tree.
//!
//! The model keeps its own copy on purpose: the driver's constants
//! (`src/asic*`) are the driver's floor 1, which the model must not import;
//! a driver that gets an address wrong then meets a model that disagrees.

// --- Memory map ------------------------------------------------------------

/// `DRAM_PHYS_BASE` (include/gaudi2/gaudi2.h:43).
pub const DRAM_PHYS_BASE: u64 = 0x1001_0000_0000_0000;
/// `VA_HBM_SPACE_END`: the end of the DRAM address space (gaudi2/gaudi2P.h:155).
pub const VA_HBM_SPACE_END: u64 = 0x1002_0000_0000_0000;
/// `SRAM_BASE_ADDR` (include/gaudi2/gaudi2.h:40).
pub const SRAM_BASE_ADDR: u64 = 0x1000_FFFF_FD00_0000;
/// `SRAM_SIZE`: 48 MiB (include/gaudi2/gaudi2.h:41).
pub const SRAM_SIZE: u64 = 48 << 20;
/// `CFG_BASE` (include/gaudi2/gaudi2.h:20): the device address of the
/// register space; an LBW write the engines issue at `CFG_BASE + mmX` is a
/// write of register `mmX`.
pub const CFG_BASE: u64 = 0x1000_007F_F800_0000;
/// `CFG_SIZE`: the register space (include/gaudi2/gaudi2.h:21).
pub const CFG_SIZE: u64 = 0x0800_0000;

/// The register (`mm*` address) a device address names, if it lies in the
/// configuration space `[CFG_BASE, CFG_BASE + CFG_SIZE)`. O(1).
pub fn cfg_reg(addr: u64) -> Option<u32> {
    let off = addr.checked_sub(CFG_BASE).filter(|&o| o < CFG_SIZE)?;
    u32::try_from(off).ok()
}

// --- PSOC global configuration: boot status, scratchpads ------------------

/// `mmPSOC_GLOBAL_CONF_SCRATCHPAD_0` (asic_reg/psoc_global_conf_regs.h:95);
/// 32 scratchpads, 4 bytes apart.
pub const PSOC_SCRATCHPAD_0: u32 = 0x4C4_B100;
/// Number of PSOC scratchpads.
pub const PSOC_SCRATCHPADS: usize = 32;
/// `mmCPU_BOOT_DEV_STS0` = scratchpad 20 (include/gaudi2/gaudi2_reg_map.h:36).
pub const CPU_BOOT_DEV_STS0: u32 = 0x4C4_B150;
/// `mmCPU_BOOT_DEV_STS1` = scratchpad 21 (include/gaudi2/gaudi2_reg_map.h:37).
pub const CPU_BOOT_DEV_STS1: u32 = 0x4C4_B154;
/// `mmCPU_CMD_STATUS_TO_HOST` = scratchpad 23 (include/gaudi2/gaudi2_reg_map.h:38).
pub const CPU_CMD_STATUS_TO_HOST: u32 = 0x4C4_B15C;
/// `mmCPU_BOOT_ERR0` = scratchpad 24 (include/gaudi2/gaudi2_reg_map.h:39).
pub const CPU_BOOT_ERR0: u32 = 0x4C4_B160;
/// `mmCPU_BOOT_ERR1` = scratchpad 25 (include/gaudi2/gaudi2_reg_map.h:40).
pub const CPU_BOOT_ERR1: u32 = 0x4C4_B164;
/// `mmPSOC_GLOBAL_CONF_CPU_BOOT_STATUS` (asic_reg/psoc_global_conf_regs.h:223).
pub const CPU_BOOT_STATUS: u32 = 0x4C4_B300;
/// `mmPSOC_GLOBAL_CONF_KMD_MSG_TO_CPU` (asic_reg/psoc_global_conf_regs.h:225).
pub const KMD_MSG_TO_CPU: u32 = 0x4C4_B304;

/// `CPU_BOOT_STATUS_SRAM_AVAIL` (include/linux/habanalabs/hl_boot_if.h:391):
/// what a booted device's boot status reads.
pub const BOOT_STATUS_SRAM_AVAIL: u32 = 3;
/// `CPU_BOOT_DEV_STS0_ENABLED` / `CPU_BOOT_DEV_STS1_ENABLED`: the status
/// register is valid (include/linux/habanalabs/hl_boot_if.h:198,384-385).
/// No other bit: no security, firmware loaded, no optional protocol.
pub const BOOT_DEV_STS_ENABLED: u32 = 1 << 31;
/// `CPU_BOOT_ERR0_ENABLED` / `CPU_BOOT_ERR1_ENABLED`: the error register is
/// valid, and no error bit is set (include/linux/habanalabs/hl_boot_if.h:39,165-166).
pub const BOOT_ERR_ENABLED: u32 = 1 << 31;

// --- CPU interface (CPU-CP queues) -----------------------------------------

/// `mmCPU_IF_KMD_HW_DIRTY_STATUS` = `mmHW_STATE`
/// (asic_reg/cpu_if_regs.h:73, include/gaudi2/gaudi2_reg_map.h:14).
pub const HW_STATE: u32 = 0x4CC_1174;
/// `HL_DEVICE_HW_STATE_CLEAN` (common/habanalabs.h:499): as after boot.
pub const HW_STATE_CLEAN: u32 = 0;
/// `mmCPU_IF_PF_PQ_PI`: the CPU PQ doorbell (asic_reg/cpu_if_regs.h:87).
pub const CPU_IF_PF_PQ_PI: u32 = 0x4CC_1200;
/// `mmCPU_IF_PQ_BASE_ADDR_LOW` (asic_reg/cpu_if_regs.h:89).
pub const CPU_IF_PQ_BASE_ADDR_LOW: u32 = 0x4CC_1204;
/// `mmCPU_IF_PQ_BASE_ADDR_HIGH` (asic_reg/cpu_if_regs.h:91).
pub const CPU_IF_PQ_BASE_ADDR_HIGH: u32 = 0x4CC_1208;
/// `mmCPU_IF_PQ_LENGTH` (asic_reg/cpu_if_regs.h:93).
pub const CPU_IF_PQ_LENGTH: u32 = 0x4CC_120C;
/// `mmCPU_IF_CQ_BASE_ADDR_LOW` (asic_reg/cpu_if_regs.h:95).
pub const CPU_IF_CQ_BASE_ADDR_LOW: u32 = 0x4CC_1210;
/// `mmCPU_IF_CQ_BASE_ADDR_HIGH` (asic_reg/cpu_if_regs.h:97).
pub const CPU_IF_CQ_BASE_ADDR_HIGH: u32 = 0x4CC_1214;
/// `mmCPU_IF_CQ_LENGTH` (asic_reg/cpu_if_regs.h:99).
pub const CPU_IF_CQ_LENGTH: u32 = 0x4CC_1218;
/// `mmCPU_IF_EQ_BASE_ADDR_LOW` (asic_reg/cpu_if_regs.h:101).
pub const CPU_IF_EQ_BASE_ADDR_LOW: u32 = 0x4CC_1220;
/// `mmCPU_IF_EQ_BASE_ADDR_HIGH` (asic_reg/cpu_if_regs.h:103).
pub const CPU_IF_EQ_BASE_ADDR_HIGH: u32 = 0x4CC_1224;
/// `mmCPU_IF_EQ_LENGTH` (asic_reg/cpu_if_regs.h:105).
pub const CPU_IF_EQ_LENGTH: u32 = 0x4CC_1228;
/// `mmCPU_IF_EQ_RD_OFFS`: the driver's EQ consumer index (asic_reg/cpu_if_regs.h:107).
pub const CPU_IF_EQ_RD_OFFS: u32 = 0x4CC_122C;
/// `mmCPU_IF_QUEUE_INIT` (asic_reg/cpu_if_regs.h:109).
pub const CPU_IF_QUEUE_INIT: u32 = 0x4CC_1230;
/// `PQ_INIT_STATUS_READY_FOR_CP` (include/linux/habanalabs/cpucp_if.h:411).
pub const PQ_INIT_STATUS_READY_FOR_CP: u32 = 1;
/// `PQ_INIT_STATUS_READY_FOR_HOST` (include/linux/habanalabs/cpucp_if.h:412).
pub const PQ_INIT_STATUS_READY_FOR_HOST: u32 = 2;
/// `PQ_INIT_STATUS_READY_FOR_CP_SINGLE_MSI` (include/linux/habanalabs/cpucp_if.h:413).
pub const PQ_INIT_STATUS_READY_FOR_CP_SINGLE_MSI: u32 = 3;

// --- MMUs --------------------------------------------------------------------

/// `mmPMMU_HBW_MMU_BASE` (asic_reg/gaudi2_blocks_linux_driver.h:23410).
pub const PMMU_MMU_BASE: u32 = 0x4D0_0000;
/// `mmDCORE0_HMMU0_MMU_BASE` (asic_reg/gaudi2_blocks_linux_driver.h:7537).
pub const HMMU0_MMU_BASE: u32 = 0x408_0000;
/// `DCORE_OFFSET` (asic_reg/gaudi2_regs.h:171): `mmDCORE1_HMMU0_MMU_BASE`
/// 0x428_0000 (asic_reg/gaudi2_blocks_linux_driver.h:11623) minus DCORE0's.
pub const DCORE_OFFSET: u32 = 0x20_0000;
/// `DCORE_HMMU_OFFSET` (asic_reg/gaudi2_regs.h:175): `mmDCORE0_HMMU1_MMU_BASE`
/// 0x409_0000 (asic_reg/gaudi2_blocks_linux_driver.h:7588) minus HMMU0's.
pub const DCORE_HMMU_OFFSET: u32 = 0x1_0000;
/// Dcores (`NUM_OF_DCORES`, include/gaudi2/gaudi2.h:81).
pub const DCORES: u32 = 4;
/// HMMUs per dcore (`NUM_OF_HMMU_PER_DCORE`, include/gaudi2/gaudi2.h:99).
pub const HMMUS_PER_DCORE: u32 = 4;
/// The STLB block of an MMU: MMU base + 0x1000 (`mmPMMU_HBW_STLB_BASE`
/// 0x4D0_1000, `mmDCORE0_HMMU0_STLB_BASE` 0x408_1000,
/// asic_reg/gaudi2_blocks_linux_driver.h:23416,7543).
pub const STLB_BLOCK_OFFSET: u32 = 0x1000;
/// Bytes of the MMU + STLB register blocks the model decodes per MMU.
pub const MMU_SPAN: u32 = 0x2000;

/// MMU block offsets (asic_reg/dcore0_hmmu0_mmu_regs.h, line of each).
pub mod mmu {
    /// `MMU_ENABLE` (:23).
    pub const MMU_ENABLE: u32 = 0x0C;
    /// `SPI_SEI_MASK` (:39).
    pub const SPI_SEI_MASK: u32 = 0x2C;
    /// `SPI_SEI_CAUSE` (:41).
    pub const SPI_SEI_CAUSE: u32 = 0x30;
    /// `PAGE_ERROR_CAPTURE` (:43): VA bits 63:32 of the first page fault
    /// (asic_reg/dcore0_hmmu0_mmu_masks.h:90-91; read by
    /// `gaudi2_handle_page_error`, gaudi2/gaudi2.c:9359-9387).
    pub const PAGE_ERROR_CAPTURE: u32 = 0x34;
    /// `PAGE_ERROR_CAPTURE_VA` (:45): VA bits 31:0.
    pub const PAGE_ERROR_CAPTURE_VA: u32 = 0x38;
    /// `ACCESS_ERROR_CAPTURE` (:47): VA bits 63:32 of the first access error.
    pub const ACCESS_ERROR_CAPTURE: u32 = 0x3C;
    /// `ACCESS_ERROR_CAPTURE_VA` (:49): VA bits 31:0.
    pub const ACCESS_ERROR_CAPTURE_VA: u32 = 0x40;
    /// `ACCESS_PAGE_ERROR_VALID` (:51): bit 0 a page error is captured,
    /// bit 1 an access error (asic_reg/dcore0_hmmu0_mmu_masks.h:106-109); the
    /// driver writes 0 to release the capture.
    pub const ACCESS_PAGE_ERROR_VALID: u32 = 0x44;
    /// `INTERRUPT_CLR` (:53).
    pub const INTERRUPT_CLR: u32 = 0x48;
    /// `MMU_BYPASS` (:63).
    pub const MMU_BYPASS: u32 = 0x6C;
    /// `STATIC_MULTI_PAGE_SIZE` (:65).
    pub const STATIC_MULTI_PAGE_SIZE: u32 = 0x70;
}

/// STLB block offsets, from the STLB base (asic_reg/dcore0_hmmu0_stlb_regs.h,
/// line of each; the PMMU's STLB has the same layout,
/// asic_reg/pmmu_hbw_stlb_regs.h).
pub mod stlb {
    /// `BUSY` (:23): write bit 31 to commit `ASID`/`HOP0_PA*`; reads 0
    /// when done.
    pub const BUSY: u32 = 0x00;
    /// `ASID` (:25).
    pub const ASID: u32 = 0x04;
    /// `HOP0_PA43_12` (:27): hop 0 address bits 43:12.
    pub const HOP0_PA43_12: u32 = 0x08;
    /// `HOP0_PA63_44` (:29): hop 0 address bits 63:44.
    pub const HOP0_PA63_44: u32 = 0x0C;
    /// `HOP_CONFIGURATION` (:41).
    pub const HOP_CONFIGURATION: u32 = 0x24;
    /// `LINK_LIST_LOOKUP_MASK_63_32` (:43).
    pub const LINK_LIST_LOOKUP_MASK_63_32: u32 = 0x28;
    /// `INV_ALL_START` (:47): write 1 to invalidate everything; bit 0
    /// reads 0 when done.
    pub const INV_ALL_START: u32 = 0x34;
    /// `SRAM_INIT` (:59): reads 0 once the STLB's memories are initialized.
    pub const SRAM_INIT: u32 = 0x4C;
    /// `MEM_CACHE_INVALIDATION` (:61; the PMMU's at 0x4D0_1050,
    /// asic_reg/pmmu_hbw_stlb_regs.h:61).
    pub const MEM_CACHE_INVALIDATION: u32 = 0x50;
    /// `MEM_CACHE_INV_STATUS` (:63; asic_reg/pmmu_hbw_stlb_regs.h:63): bit 0
    /// set when the memory line cache invalidation is done; the driver
    /// writes 0 back.
    pub const MEM_CACHE_INV_STATUS: u32 = 0x54;
    /// `RANGE_CACHE_INVALIDATION` (:91): `EN | ASID_EN << 1 | asid << 2`
    /// (`MMU_RANGE_INV_*_SHIFT`, gaudi2/gaudi2.c:119-121); bit 0 reads 0
    /// when done.
    pub const RANGE_CACHE_INVALIDATION: u32 = 0x8C;
    /// `RANGE_INV_START_LSB` (:93): `(start - 1) >> 12` (the start is
    /// exclusive, gaudi2/gaudi2.c:6118-6125).
    pub const RANGE_INV_START_LSB: u32 = 0x90;
    /// `RANGE_INV_START_MSB` (:95): `(start - 1) >> 44`.
    pub const RANGE_INV_START_MSB: u32 = 0x94;
    /// `RANGE_INV_END_LSB` (:97): `end >> 12`.
    pub const RANGE_INV_END_LSB: u32 = 0x98;
    /// `RANGE_INV_END_MSB` (:99): `end >> 44`.
    pub const RANGE_INV_END_MSB: u32 = 0x9C;
}

/// `MMU_RANGE_INV_VA_LSB_SHIFT` (gaudi2/gaudi2.c:117).
pub const RANGE_INV_VA_LSB_SHIFT: u32 = 12;
/// `MMU_RANGE_INV_VA_MSB_SHIFT` (gaudi2/gaudi2.c:118).
pub const RANGE_INV_VA_MSB_SHIFT: u32 = 44;
/// `MMU_HOP0_PA43_12_SHIFT` (include/hw_ip/mmu/mmu_general.h:43).
pub const HOP0_PA43_12_SHIFT: u32 = 12;
/// `MMU_HOP0_PA63_44_SHIFT` (include/hw_ip/mmu/mmu_general.h:45).
pub const HOP0_PA63_44_SHIFT: u32 = 44;

/// `PAGE_ERR_VALID_ENTRY` of `ACCESS_PAGE_ERROR_VALID`
/// (asic_reg/dcore0_hmmu0_mmu_masks.h:107).
pub const PAGE_ERR_VALID: u32 = 1 << 0;
/// `ACCESS_ERR_VALID_ENTRY` of `ACCESS_PAGE_ERROR_VALID`
/// (asic_reg/dcore0_hmmu0_mmu_masks.h:109).
pub const ACCESS_ERR_VALID: u32 = 1 << 1;

/// `PQ_INIT_STATUS_LEN_NOT_POWER_OF_TWO_ERR` (include/linux/habanalabs/cpucp_if.h:414).
pub const PQ_INIT_STATUS_LEN_NOT_POWER_OF_TWO_ERR: u32 = 4;
/// `PQ_INIT_STATUS_ILLEGAL_Q_ADDR_ERR` (include/linux/habanalabs/cpucp_if.h:415).
pub const PQ_INIT_STATUS_ILLEGAL_Q_ADDR_ERR: u32 = 5;

// --- QMANs --------------------------------------------------------------------

/// `mmPDMA0_QM_BASE` (asic_reg/gaudi2_blocks_linux_driver.h:23119).
pub const PDMA0_QM_BASE: u32 = 0x4C8_A000;
/// `mmPDMA1_QM_BASE` (:23245).
pub const PDMA1_QM_BASE: u32 = 0x4C9_A000;
/// `mmDCORE0_TPC0_QM_BASE` (:5950); TPC t at + t x [`DCORE_TPC_OFFSET`]
/// (TPC6 only in DCORE0, :7318).
pub const DCORE0_TPC0_QM_BASE: u32 = 0x400_A000;
/// `DCORE_TPC_OFFSET` (asic_reg/gaudi2_regs.h:173).
pub const DCORE_TPC_OFFSET: u32 = 0x1_0000;
/// `mmDCORE0_MME_QM_BASE` (:7759).
pub const DCORE0_MME_QM_BASE: u32 = 0x40C_A000;
/// `mmDCORE0_EDMA0_QM_BASE` (:9874); EDMA1 at + `DCORE_EDMA_OFFSET`
/// (asic_reg/gaudi2_regs.h:172), 0x41D_A000 (:10000).
pub const DCORE0_EDMA0_QM_BASE: u32 = 0x41C_A000;
/// `DCORE_EDMA_OFFSET`.
pub const DCORE_EDMA_OFFSET: u32 = 0x1_0000;
/// The dcores' QMAN blocks: DCORE d's at DCORE0's + d x [`DCORE_OFFSET`]
/// (`mmDCORE1_EDMA0_QM_BASE` 0x43C_A000, :13960; `mmDCORE3_TPC5_QM_BASE`
/// 0x465_A000, :19576). Every QMAN has the PDMA QMAN's register layout; a
/// DMA QMAN has its DMA core at [`PDMA_CORE_OFFSET`].
pub const DCORE0_BASE: u32 = 0x400_0000;
/// `mmPDMA0_CORE_BASE` minus `mmPDMA0_QM_BASE`: the DMA core follows its
/// QMAN (asic_reg/gaudi2_blocks_linux_driver.h:23188).
pub const PDMA_CORE_OFFSET: u32 = 0x1000;
/// Bytes of a QMAN register block the model decodes.
pub const QM_SPAN: u32 = 0x1000;

/// QMAN block offsets (asic_reg/pdma0_qm_regs.h, line of each); per-stream
/// registers are 4 bytes apart (`q` = 0..4; the CP registers have a fifth,
/// the lower CP).
pub mod qm {
    /// `GLBL_CFG0` (:23): `PQF_EN` bits 3:0 per stream, `CP_EN` 13:9
    /// (asic_reg/pdma0_qm_masks.h:24-29).
    pub const GLBL_CFG0: u32 = 0x000;
    /// `GLBL_CFG1` (:25): stop and flush bits per stream (the model's
    /// `Qman::write`); any write also clears a halted stream.
    pub const GLBL_CFG1: u32 = 0x004;
    /// `GLBL_STS0` (:37): `PQF_IDLE` 3:0, `CQF_IDLE` 8:4, `CP_IDLE` 13:9
    /// (asic_reg/pdma0_qm_masks.h:118-123).
    pub const GLBL_STS0: u32 = 0x01C;
    /// `GLBL_ERR_STS_0` (:41), per CP (the lower CP's `_4`): the model sets
    /// bit 0 while the CP is halted by an error (its CB faulted or held a
    /// packet it cannot run).
    pub const GLBL_ERR_STS: u32 = 0x024;
    /// `CP_CURRENT_INST_LO_0` (:443), per CP: the address of the CP's
    /// packet in progress (the failing one while halted), low half.
    pub const CP_CURRENT_INST_LO: u32 = 0x37C;
    /// `CP_CURRENT_INST_HI_0` (:453).
    pub const CP_CURRENT_INST_HI: u32 = 0x390;
    /// `PQ_BASE_LO_0` (:63).
    pub const PQ_BASE_LO: u32 = 0x050;
    /// `PQ_BASE_HI_0` (:71).
    pub const PQ_BASE_HI: u32 = 0x060;
    /// `PQ_SIZE_0` (:79): log2 of the entries.
    pub const PQ_SIZE: u32 = 0x070;
    /// `PQ_PI_0` (:87): the doorbell.
    pub const PQ_PI: u32 = 0x080;
    /// `PQ_CI_0` (:95).
    pub const PQ_CI: u32 = 0x090;
    /// `CP_MSG_BASE0_ADDR_LO_0` (:255); base `n` at + 0x28 n, `HI` at
    /// + 0x14 (:265, :275...).
    pub const CP_MSG_BASE0_LO: u32 = 0x1F0;
    /// `CP_FENCE0_RDATA_0` (:335): a write adds to fence counter 0; fence
    /// `n` at + 0x14 n.
    pub const CP_FENCE0_RDATA: u32 = 0x290;
    /// `CP_FENCE0_CNT_0` (:375).
    pub const CP_FENCE0_CNT: u32 = 0x2E0;
    /// `CP_PRED_0` (:463): CP `c`'s predicates at + 4 c (bit `p` predicate
    /// `p`; predicate 0 always holds).
    pub const CP_PRED: u32 = 0x3A4;
    /// `PQC_LBW_WDATA_0` (:555).
    pub const PQC_LBW_WDATA: u32 = 0x45C;
    /// `PQC_LBW_BASE_LO_0` (:563).
    pub const PQC_LBW_BASE_LO: u32 = 0x46C;
    /// `PQC_LBW_BASE_HI_0` (:571).
    pub const PQC_LBW_BASE_HI: u32 = 0x47C;
    /// `PQC_CFG` (:579): bit 0 `EN` (asic_reg/pdma0_qm_masks.h:708-709).
    pub const PQC_CFG: u32 = 0x48C;
    /// `ARB_CFG_0` (:585): the arbiter (`ARB_EN` bit 4); kept by the
    /// register file, the model's streams take turns whatever it says.
    pub const ARB_CFG_0: u32 = 0x4A4;
    /// `ARB_WRR_WEIGHT_0..3` (:589-595): kept, ordering nothing.
    pub const ARB_WRR_WEIGHT_0: u32 = 0x4AC;
    /// `ARB_MST_QUIET_PER` (:867): kept, ordering nothing.
    pub const ARB_MST_QUIET_PER: u32 = 0x718;
    /// `AXUSER_NONSECURED_HB_ASID` (asic_reg/pdma0_qm_axuser_nonsecured_regs.h:23):
    /// `WR` ASID bits 9:0, `RD` 25:16 (asic_reg/arc_farm_kdma_ctx_axuser_masks.h:25-27).
    pub const AXUSER_HB_ASID: u32 = 0xB80;
}

/// `mmPDMA0_CORE_CTX_AXUSER_HB_ASID` minus the core base: the DMA core's
/// ASIDs, as the QMAN's (asic_reg/pdma0_core_ctx_axuser_regs.h:23).
pub const CORE_AXUSER_HB_ASID: u32 = 0x800;

/// `BD_CTL_COMP_OFFSET_SHIFT` / `_MASK` (include/common/qman_if.h:42-43):
/// the SOB the PQC increments when the BD's CB is done.
pub const BD_CTL_COMP_OFFSET_SHIFT: u32 = 16;
/// The `COMP_OFFSET` field.
pub const BD_CTL_COMP_OFFSET_MASK: u32 = 0x0FFF_0000;
/// The QMAN error event of QMAN `m` (`super::qman`, first queue id / 4):
/// `GAUDI2_EVENT_PDMA0_QM`, `_PDMA1_QM`, then per dcore d: EDMA e is
/// `GAUDI2_EVENT_HDMAn_QM`, n = 2d + e; the MME `GAUDI2_EVENT_MMEd_QM`;
/// TPC t `GAUDI2_EVENT_TPCn_QM`, n = 6d + t, DCORE0's TPC6 `TPC24_QM`
/// (include/gaudi2/gaudi2_async_events.h:847-885; the queue-to-event map
/// gaudi2/gaudi2.c:455-640, `gaudi2_handle_qman_err`'s 8907-8945).
pub const EVENT_QM: [u16; 39] = [
    1244, 1245, // PDMA0, PDMA1
    1238, 1239, 1232, 1206, 1207, 1208, 1209, 1210, 1211, 1230, // DCORE0
    1236, 1237, 1233, 1212, 1213, 1214, 1215, 1216, 1217, // DCORE1
    1242, 1243, 1234, 1218, 1219, 1220, 1221, 1222, 1223, // DCORE2
    1240, 1241, 1235, 1224, 1225, 1226, 1227, 1228, 1229, // DCORE3
];

// --- DCORE0 sync manager -------------------------------------------------------

/// `mmDCORE0_SYNC_MNGR_OBJS_SOB_OBJ_0` (asic_reg/dcore0_sync_mngr_objs_regs.h:23).
pub const SM_SOB_OBJ_0: u32 = 0x410_0000;
/// `mmDCORE0_SYNC_MNGR_OBJS_MON_PAY_ADDRL_0` (:16407).
pub const SM_MON_PAY_ADDRL_0: u32 = 0x410_8000;
/// `mmDCORE0_SYNC_MNGR_OBJS_MON_PAY_ADDRH_0` (:20503).
pub const SM_MON_PAY_ADDRH_0: u32 = 0x410_A000;
/// `mmDCORE0_SYNC_MNGR_OBJS_MON_PAY_DATA_0` (:24599).
pub const SM_MON_PAY_DATA_0: u32 = 0x410_C000;
/// `mmDCORE0_SYNC_MNGR_OBJS_MON_ARM_0` (:28695): `SID` 7:0, `MASK` 15:8,
/// `SOP` 16 (1: equal, 0: greater or equal), `SOD` 31:17
/// (asic_reg/dcore0_sync_mngr_objs_masks.h:46-53).
pub const SM_MON_ARM_0: u32 = 0x410_E000;
/// `mmDCORE0_SYNC_MNGR_OBJS_MON_CONFIG_0` (:32791): `CQ_EN` bit 4, `LBW_EN`
/// bit 8, `MSB_SID` 19:16 (asic_reg/dcore0_sync_mngr_objs_masks.h:56-65).
pub const SM_MON_CONFIG_0: u32 = 0x411_0000;
/// `mmDCORE0_SYNC_MNGR_OBJS_MON_STATUS_0` (:36887): bit 0 `VALID` (armed).
pub const SM_MON_STATUS_0: u32 = 0x411_2000;
/// `mmDCORE0_SYNC_MNGR_GLBL_CQ_BASE_ADDR_L_0` (asic_reg/dcore0_sync_mngr_glbl_regs.h:51).
pub const SM_CQ_BASE_ADDR_L_0: u32 = 0x411_E050;
/// `mmDCORE0_SYNC_MNGR_GLBL_CQ_BASE_ADDR_H_0` (:179).
pub const SM_CQ_BASE_ADDR_H_0: u32 = 0x411_E150;
/// `mmDCORE0_SYNC_MNGR_GLBL_CQ_SIZE_LOG2_0` (:307): log2 of the CQ's bytes.
pub const SM_CQ_SIZE_LOG2_0: u32 = 0x411_E250;
/// `mmDCORE0_SYNC_MNGR_GLBL_CQ_PI_0` (:435).
pub const SM_CQ_PI_0: u32 = 0x411_E350;
/// `mmDCORE0_SYNC_MNGR_GLBL_LBW_ADDR_L_0` (:691).
pub const SM_LBW_ADDR_L_0: u32 = 0x411_E550;
/// `mmDCORE0_SYNC_MNGR_GLBL_LBW_ADDR_H_0` (:819).
pub const SM_LBW_ADDR_H_0: u32 = 0x411_E650;
/// `mmDCORE0_SYNC_MNGR_GLBL_LBW_DATA_0` (:947).
pub const SM_LBW_DATA_0: u32 = 0x411_E750;
/// `GAUDI2_IRQ_NUM_COMPLETION` (gaudi2/gaudi2P.h:423).
pub const MSIX_COMPLETION: u16 = 21;
