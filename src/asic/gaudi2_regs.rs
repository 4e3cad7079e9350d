// SPDX-License-Identifier: GPL-2.0

//! The Gaudi2 registers and BAR layout the driver's PCI path uses, each with
//! the upstream file:line it comes from. Paths are relative to
//! `drivers/accel/habanalabs/` (`asic_reg/` = `include/gaudi2/asic_reg/`),
//! or to the kernel source tree for `include/linux/habanalabs/`.
//!
//! Register addresses are upstream's `mm*` values: `WREG32(mmX)` writes
//! `rmmio + mmX` with `rmmio = BAR0 + (CFG_BASE - STM_FLASH_BASE_ADDR)`
//! (gaudi2/gaudi2.c:2961-2973), so register `mmX` is at BAR0 offset
//! [`RMMIO_OFFSET`] + `mmX` ([`bar0_offset`]).
//!
//! The model of `src/model/` keeps its own copy of these addresses on
//! purpose (it must not import the driver): a driver and a model that
//! disagree on an address then disagree visibly.

// --- BARs (include/gaudi2/gaudi2.h:11-18) ----------------------------------

/// `SRAM_CFG_BAR_ID`: configuration space and SRAM (include/gaudi2/gaudi2.h:11).
pub(crate) const SRAM_CFG_BAR_ID: u32 = 0;
/// `MSIX_BAR_ID`: the MSI-X table (include/gaudi2/gaudi2.h:12).
pub(crate) const MSIX_BAR_ID: u32 = 2;
/// `DRAM_BAR_ID`: the DRAM window (include/gaudi2/gaudi2.h:13).
pub(crate) const DRAM_BAR_ID: u32 = 4;
/// `CFG_BAR_SIZE`: BAR0 is exactly 256 MiB (include/gaudi2/gaudi2.h:16;
/// checked by `gaudi2_early_init`, gaudi2/gaudi2.c:3462-3469).
pub(crate) const CFG_BAR_SIZE: u64 = 0x1000_0000;
/// `MSIX_BAR_SIZE`: BAR2 is exactly 16 KiB (include/gaudi2/gaudi2.h:18;
/// gaudi2/gaudi2.c:3471-3477).
pub(crate) const MSIX_BAR_SIZE: u64 = 0x4000;

/// `CFG_BASE - STM_FLASH_BASE_ADDR`: where the register space starts in
/// BAR0 (include/gaudi2/gaudi2.h:20,24; gaudi2/gaudi2.c:2961-2973, the PCI
/// region of the CFG space at gaudi2/gaudi2.c:3844-3848).
pub(crate) const RMMIO_OFFSET: u64 = 0x400_0000;
/// `CFG_REGION_SIZE + BAR0_RSRVD_SIZE`: SRAM's offset in BAR0
/// (include/gaudi2/gaudi2.h:22,38; the SRAM region at gaudi2/gaudi2.c:3853-3857).
pub(crate) const SRAM_BAR_OFFSET: u64 = 0xC00_0000 + 0x100_0000;

/// The BAR0 offset of register `mmX`. O(1).
pub(crate) const fn bar0_offset(reg: u32) -> u64 {
    RMMIO_OFFSET + reg as u64
}

/// `GAUDI2_MSIX_ENTRIES`: exactly this many MSI-X vectors
/// (include/gaudi2/gaudi2.h:68; `gaudi2_enable_msix`, gaudi2/gaudi2.c:4672).
pub(crate) const MSIX_ENTRIES: u32 = 128;

/// `prop->dma_mask`: the device addresses 64 bits (gaudi2/gaudi2.c:2948; set
/// by `hl_pci_init`, common/pci/pci.c:408).
pub(crate) const DMA_MASK_BITS: u32 = 64;

// --- Boot status (firmware stand-in) ----------------------------------------

/// `mmPSOC_GLOBAL_CONF_CPU_BOOT_STATUS` (asic_reg/psoc_global_conf_regs.h:223).
pub(crate) const CPU_BOOT_STATUS: u32 = 0x4C4_B300;
/// `mmCPU_BOOT_ERR0` = scratchpad 24 (include/gaudi2/gaudi2_reg_map.h:39,
/// asic_reg/psoc_global_conf_regs.h:143).
pub(crate) const CPU_BOOT_ERR0: u32 = 0x4C4_B160;
/// `mmHW_STATE` = `mmCPU_IF_KMD_HW_DIRTY_STATUS` (include/gaudi2/gaudi2_reg_map.h:14,
/// asic_reg/cpu_if_regs.h:73).
pub(crate) const HW_STATE: u32 = 0x4CC_1174;
/// `HL_DEVICE_HW_STATE_DIRTY` (common/habanalabs.h:500).
pub(crate) const HW_STATE_DIRTY: u32 = 1;

/// `CPU_BOOT_STATUS_DRAM_RDY` (include/linux/habanalabs/hl_boot_if.h:390).
pub(crate) const BOOT_DRAM_RDY: u32 = 2;
/// `CPU_BOOT_STATUS_SRAM_AVAIL` (include/linux/habanalabs/hl_boot_if.h:391).
pub(crate) const BOOT_SRAM_AVAIL: u32 = 3;
/// `CPU_BOOT_STATUS_NIC_FW_RDY` (include/linux/habanalabs/hl_boot_if.h:401).
pub(crate) const BOOT_NIC_FW_RDY: u32 = 11;
/// `CPU_BOOT_STATUS_READY_TO_BOOT` (include/linux/habanalabs/hl_boot_if.h:406).
pub(crate) const BOOT_READY_TO_BOOT: u32 = 15;
/// `CPU_BOOT_STATUS_WAITING_FOR_BOOT_FIT` (include/linux/habanalabs/hl_boot_if.h:408).
pub(crate) const BOOT_WAITING_FOR_BOOT_FIT: u32 = 16;

/// The boot states the driver accepts at probe: those upstream's
/// `hl_fw_wait_preboot_ready` waits for (common/firmware_if.c:1510-1512:
/// preboot ready for the driver) and those its boot-loader wait accepts
/// (common/firmware_if.c:2993-2996: the device's own firmware is up, as on
/// a device whose boot was done before the driver loads, which is what the
/// model presents). O(1).
pub(crate) fn boot_status_accepted(status: u32) -> bool {
    matches!(
        status,
        BOOT_DRAM_RDY
            | BOOT_SRAM_AVAIL
            | BOOT_NIC_FW_RDY
            | BOOT_READY_TO_BOOT
            | BOOT_WAITING_FOR_BOOT_FIT
    )
}

/// `CPU_BOOT_ERR0_ENABLED`: the error register is valid
/// (include/linux/habanalabs/hl_boot_if.h:165-166).
pub(crate) const BOOT_ERR0_ENABLED: u32 = 1 << 31;

/// `GAUDI2_PREBOOT_REQ_TIMEOUT_USEC`: 25 s for the boot status (gaudi2/gaudi2P.h:84).
pub(crate) const PREBOOT_TIMEOUT_US: u64 = 25_000_000;
/// `HL_FW_STATUS_POLL_INTERVAL_USEC`: 10 ms between boot status reads
/// (common/habanalabs.h:83).
pub(crate) const FW_POLL_INTERVAL_US: u64 = 10_000;

// --- MMUs ---------------------------------------------------------------------

/// `mmPMMU_HBW_MMU_BASE` (asic_reg/gaudi2_blocks_linux_driver.h:23410).
pub(crate) const PMMU_MMU_BASE: u32 = 0x4D0_0000;
/// `mmPMMU_HBW_STLB_BASE` (asic_reg/gaudi2_blocks_linux_driver.h:23416).
pub(crate) const PMMU_STLB_BASE: u32 = 0x4D0_1000;
/// `mmDCORE0_HMMU0_MMU_BASE` (asic_reg/gaudi2_blocks_linux_driver.h:7537).
pub(crate) const HMMU0_MMU_BASE: u32 = 0x408_0000;
/// `mmDCORE0_HMMU0_STLB_BASE` (asic_reg/gaudi2_blocks_linux_driver.h:7543).
pub(crate) const HMMU0_STLB_BASE: u32 = 0x408_1000;
/// `DCORE_OFFSET` (asic_reg/gaudi2_regs.h:171).
pub(crate) const DCORE_OFFSET: u32 = 0x20_0000;
/// `DCORE_HMMU_OFFSET` (asic_reg/gaudi2_regs.h:175).
pub(crate) const DCORE_HMMU_OFFSET: u32 = 0x1_0000;
/// `NUM_OF_DCORES` (include/gaudi2/gaudi2.h:81).
pub(crate) const DCORES: u32 = 4;
/// `NUM_OF_HMMU_PER_DCORE` (include/gaudi2/gaudi2.h:99).
pub(crate) const HMMUS_PER_DCORE: u32 = 4;
/// `GAUDI2_HIF_HMMU_FULL_MASK`: the HMMUs of a device without DRAM binning
/// (gaudi2/gaudi2.c:55, set at gaudi2/gaudi2.c:3298).
pub(crate) const HMMU_FULL_MASK: u32 = 0xFFFF;

/// The MMU and STLB register blocks of HMMU `seq` (`dcore * 4 + hmmu`,
/// `get_hmmu_stlb_base`, gaudi2/gaudi2.c:6104-6110). O(1).
pub(crate) const fn hmmu_bases(seq: u32) -> (u32, u32) {
    let off = (seq / HMMUS_PER_DCORE) * DCORE_OFFSET + (seq % HMMUS_PER_DCORE) * DCORE_HMMU_OFFSET;
    (HMMU0_MMU_BASE + off, HMMU0_STLB_BASE + off)
}

/// MMU block register offsets (`MMU_*_OFFSET`, asic_reg/gaudi2_regs.h:286-300;
/// values from asic_reg/dcore0_hmmu0_mmu_regs.h, line of each).
pub(crate) mod mmu {
    /// `MMU_ENABLE` (:23).
    pub(crate) const MMU_ENABLE: u32 = 0x0C;
    /// `SPI_SEI_MASK` (:39).
    pub(crate) const SPI_SEI_MASK: u32 = 0x2C;
    /// `MMU_BYPASS` (:63).
    pub(crate) const MMU_BYPASS: u32 = 0x6C;
    /// `STATIC_MULTI_PAGE_SIZE` (:65).
    pub(crate) const STATIC_MULTI_PAGE_SIZE: u32 = 0x70;
}

/// STLB block register offsets (`STLB_*_OFFSET`, asic_reg/gaudi2_regs.h:302-320;
/// values from asic_reg/dcore0_hmmu0_stlb_regs.h, line of each; the PMMU's
/// STLB has the same layout, asic_reg/pmmu_hbw_stlb_regs.h).
pub(crate) mod stlb {
    /// `BUSY` (:23): write bit 31 to commit `ASID`/`HOP0_PA*`.
    pub(crate) const BUSY: u32 = 0x00;
    /// `ASID` (:25).
    pub(crate) const ASID: u32 = 0x04;
    /// `HOP0_PA43_12` (:27).
    pub(crate) const HOP0_PA43_12: u32 = 0x08;
    /// `HOP0_PA63_44` (:29).
    pub(crate) const HOP0_PA63_44: u32 = 0x0C;
    /// `HOP_CONFIGURATION` (:41).
    pub(crate) const HOP_CONFIGURATION: u32 = 0x24;
    /// `LINK_LIST_LOOKUP_MASK_63_32` (:43).
    pub(crate) const LINK_LIST_LOOKUP_MASK_63_32: u32 = 0x28;
    /// `INV_ALL_START` (:47).
    pub(crate) const INV_ALL_START: u32 = 0x34;
    /// `SRAM_INIT` (:59).
    pub(crate) const SRAM_INIT: u32 = 0x4C;
    /// `RANGE_CACHE_INVALIDATION` (:91).
    pub(crate) const RANGE_CACHE_INVALIDATION: u32 = 0x8C;
    /// `RANGE_INV_START_LSB` (:93).
    pub(crate) const RANGE_INV_START_LSB: u32 = 0x90;
    /// `RANGE_INV_START_MSB` (:95).
    pub(crate) const RANGE_INV_START_MSB: u32 = 0x94;
    /// `RANGE_INV_END_LSB` (:97).
    pub(crate) const RANGE_INV_END_LSB: u32 = 0x98;
    /// `RANGE_INV_END_MSB` (:99).
    pub(crate) const RANGE_INV_END_MSB: u32 = 0x9C;
}

/// `mmPMMU_HBW_STLB_MEM_CACHE_INVALIDATION` (asic_reg/pmmu_hbw_stlb_regs.h:61).
pub(crate) const PMMU_MEM_CACHE_INVALIDATION: u32 = 0x4D0_1050;
/// `mmPMMU_HBW_STLB_MEM_CACHE_INV_STATUS` (asic_reg/pmmu_hbw_stlb_regs.h:63).
pub(crate) const PMMU_MEM_CACHE_INV_STATUS: u32 = 0x4D0_1054;

/// `STLB_BUSY` commit bit (gaudi2/gaudi2.c:6012, polled at :6014-6020).
pub(crate) const STLB_BUSY_BIT: u32 = 0x8000_0000;
/// `MMU_HOP0_PA43_12_SHIFT` (include/hw_ip/mmu/mmu_general.h:43).
pub(crate) const HOP0_PA43_12_SHIFT: u32 = 12;
/// `MMU_HOP0_PA63_44_SHIFT` (include/hw_ip/mmu/mmu_general.h:45).
pub(crate) const HOP0_PA63_44_SHIFT: u32 = 44;
/// `MMU_RANGE_INV_VA_LSB_SHIFT` (gaudi2/gaudi2.c:117).
pub(crate) const RANGE_INV_VA_LSB_SHIFT: u32 = 12;
/// `MMU_RANGE_INV_VA_MSB_SHIFT` (gaudi2/gaudi2.c:118).
pub(crate) const RANGE_INV_VA_MSB_SHIFT: u32 = 44;
/// `MMU_RANGE_INV_EN_SHIFT` (gaudi2/gaudi2.c:119).
pub(crate) const RANGE_INV_EN_SHIFT: u32 = 0;
/// `MMU_RANGE_INV_ASID_EN_SHIFT` (gaudi2/gaudi2.c:120).
pub(crate) const RANGE_INV_ASID_EN_SHIFT: u32 = 1;
/// `MMU_RANGE_INV_ASID_SHIFT` (gaudi2/gaudi2.c:121).
pub(crate) const RANGE_INV_ASID_SHIFT: u32 = 2;

/// `HOP_CONFIGURATION` of the PMMU: first hop 0, first lookup hop 5 (small
/// pages) and 4 (large), last hop 5, follower hop 5 (`gaudi2_pci_mmu_init`,
/// gaudi2/gaudi2.c:6362-6373; shifts and masks at
/// asic_reg/pmmu_hbw_stlb_masks.h:82-91), and the bits it sets.
pub(crate) const PMMU_HOP_CONFIG: (u32, u32) = (
    (5 << 4) | (4 << 8) | (5 << 12) | (5 << 16),
    0x7 | 0x70 | 0x700 | 0x7000 | 0x7_0000,
);
/// `HOP_CONFIGURATION` of an HMMU: first hop 0, lookups, last and follower
/// hop 3 (`gaudi2_dcore_hmmu_init`, gaudi2/gaudi2.c:6426-6436; masks at
/// asic_reg/dcore0_hmmu0_stlb_masks.h:82-91) and `ONLY_LARGE_PAGE`
/// (gaudi2/gaudi2.c:6438-6439, asic_reg/dcore0_hmmu0_stlb_masks.h:93).
pub(crate) const HMMU_HOP_CONFIG: (u32, u32) = (
    (3 << 4) | (3 << 8) | (3 << 12) | (3 << 16) | (1 << 20),
    0x7 | 0x70 | 0x700 | 0x7000 | 0x7_0000 | 0x10_0000,
);
/// `STATIC_MULTI_PAGE_SIZE.HOP4_PAGE_SIZE` of an HMMU: 5, 64 MiB pages
/// (gaudi2/gaudi2.c:6423-6424; mask at asic_reg/dcore0_hmmu0_mmu_masks.h:145).
pub(crate) const HMMU_HOP4_PAGE_SIZE: (u32, u32) = (5 << 4, 0xF0);
/// `GAUDI2_NUM_OF_MMU_SPI_SEI_CAUSE` (gaudi2/gaudi2.c:71).
const MMU_SPI_SEI_CAUSES: u32 = 19;
/// `GAUDI2_PMMU_SPI_SEI_ENABLE_MASK` (gaudi2/gaudi2.c:126).
pub(crate) const PMMU_SPI_SEI_ENABLE_MASK: u32 = (1 << (MMU_SPI_SEI_CAUSES - 1)) - 1;
/// `GAUDI2_HMMU_SPI_SEI_ENABLE_MASK` (gaudi2/gaudi2.c:127).
pub(crate) const HMMU_SPI_SEI_ENABLE_MASK: u32 = (1 << MMU_SPI_SEI_CAUSES) - 1;

/// `MMU_CONFIG_TIMEOUT_USEC`: 2 ms for a hop-0 commit
/// (include/hw_ip/mmu/mmu_general.h:47; gaudi2/gaudi2.c:6004-6007).
pub(crate) const MMU_CONFIG_TIMEOUT_US: u64 = 2_000;
/// `GAUDI2_MMU_CACHE_INV_TIMEOUT_USEC`: 20 ms for an invalidation
/// (gaudi2/gaudi2.c:80; used at :6050-6051 and :6309-6312).
pub(crate) const MMU_CACHE_INV_TIMEOUT_US: u64 = 20_000;
/// The `sleep_us` of every MMU poll (`hl_poll_timeout(.., 1000, ..)`,
/// gaudi2/gaudi2.c:6014-6020, 6055-6061, 6079-6085, 6316-6322, 6333-6339).
pub(crate) const MMU_POLL_SLEEP_US: u64 = 1_000;

#[kernel::prelude::kunit_tests(hlrs_gaudi2_regs)]
mod tests {
    use super::*;

    #[test]
    fn hmmu_blocks_are_where_upstream_puts_them() {
        // asic_reg/gaudi2_blocks_linux_driver.h:7537,7543 and :11623.
        assert_eq!(hmmu_bases(0), (0x408_0000, 0x408_1000));
        assert_eq!(hmmu_bases(4), (0x428_0000, 0x428_1000));
        assert_eq!(hmmu_bases(15), (0x46B_0000, 0x46B_1000));
        assert_eq!(bar0_offset(CPU_BOOT_STATUS), 0x8C4_B300);
        assert_eq!(SRAM_BAR_OFFSET, 0xD00_0000);
    }

    #[test]
    fn masks_are_upstreams() {
        assert_eq!(PMMU_SPI_SEI_ENABLE_MASK, 0x3_FFFF);
        assert_eq!(HMMU_SPI_SEI_ENABLE_MASK, 0x7_FFFF);
        assert!(boot_status_accepted(BOOT_SRAM_AVAIL));
        assert!(!boot_status_accepted(u32::MAX));
        assert!(!boot_status_accepted(0));
    }
}

// --- Command submission: the PDMA QMANs, the DCORE0 sync manager ------------

/// `CFG_BASE` (include/gaudi2/gaudi2.h:26): the register space as the
/// engines address it (an LBW access at `CFG_BASE + mmX` is a register
/// access).
pub(crate) const CFG_BASE: u64 = 0x1000_007F_F800_0000;

/// QMANs of the user queues: QMAN `m` serves queue ids `4m..4m+3`
/// (upstream's `enum gaudi2_queue_id` order up to the NICs).
pub(crate) const QMANS: usize = 39;

/// QMAN `i` of dcore `d` in queue-id order: EDMA0, EDMA1, MME, TPC0..5
/// (TPC6 of DCORE0 is `i` = 9): `mmDCOREd_EDMAe_QM_BASE` (0x41C_A000 +
/// 0x1_0000 e), `mmDCOREd_MME_QM_BASE` (0x40C_A000),
/// `mmDCOREd_TPCt_QM_BASE` (0x400_A000 + 0x1_0000 t), each dcore
/// 0x20_0000 further (asic_reg/gaudi2_blocks_linux_driver.h).
const fn dcore_qm(d: u32, i: u32) -> u32 {
    let dcore = d * DCORE_OFFSET;
    match i {
        0 => 0x41C_A000 + dcore,
        1 => 0x41D_A000 + dcore,
        2 => 0x40C_A000 + dcore,
        t => 0x400_A000 + (t - 3) * 0x1_0000 + dcore,
    }
}

/// The QMAN block of every user queue's QMAN, by QMAN index:
/// `mmPDMA0_QM_BASE`, `mmPDMA1_QM_BASE` (:23119, 23245), DCORE0's EDMA0,
/// EDMA1, MME, TPC0..6, then DCORE1..3's EDMA0, EDMA1, MME, TPC0..5.
pub(crate) const QM_BASES: [u32; QMANS] = {
    let mut b = [0u32; QMANS];
    b[0] = 0x4C8_A000;
    b[1] = 0x4C9_A000;
    let mut m = 2;
    while m < QMANS {
        b[m] = if m <= 11 {
            dcore_qm(0, (m - 2) as u32)
        } else {
            dcore_qm(1 + ((m - 12) / 9) as u32, ((m - 12) % 9) as u32)
        };
        m += 1;
    }
    b
};

/// Whether QMAN `m` feeds a DMA core (PDMA, EDMA: `LIN_DMA` and the
/// core's ASID register), not an MME or TPC. O(1).
pub(crate) const fn qman_has_dma(m: usize) -> bool {
    match m {
        0 | 1 => true,
        2..=11 => m - 2 < 2,
        12..=38 => (m - 12) % 9 < 2,
        _ => false,
    }
}
/// The QMAN error event of each of [`QM_BASES`] (`GAUDI2_EVENT_PDMAn_QM`,
/// `GAUDI2_EVENT_HDMAn_QM`, `GAUDI2_EVENT_MMEn_QM`, `GAUDI2_EVENT_TPCn_QM`,
/// include/gaudi2/gaudi2_async_events.h, mapped as gaudi2/gaudi2.c:455-640).
pub(crate) const EVENT_QM: [u16; QMANS] = [
    1244, 1245, // PDMA0, PDMA1
    1238, 1239, 1232, 1206, 1207, 1208, 1209, 1210, 1211, 1230, // DCORE0
    1236, 1237, 1233, 1212, 1213, 1214, 1215, 1216, 1217, // DCORE1
    1242, 1243, 1234, 1218, 1219, 1220, 1221, 1222, 1223, // DCORE2
    1240, 1241, 1235, 1224, 1225, 1226, 1227, 1228, 1229, // DCORE3
];
/// The DMA core events (`GAUDI2_EVENT_PDMAn_CORE`,
/// `GAUDI2_EVENT_HDMAn_CORE`, gaudi2_async_events.h:899-908: 23 after the
/// QMAN's); its data word is the cause (`gaudi2_handle_dma_core_event`).
pub(crate) const EVENT_DMA_CORE: [u16; 10] =
    [1267, 1268, 1261, 1262, 1259, 1260, 1265, 1266, 1263, 1264];
/// Cause bit 7 of a DMA core event: "WRONG CFG FOR COMMIT IN LIN DMA"
/// (`gaudi2_dma_core_interrupts_cause`, gaudi2/gaudi2.c:1278-1287).
pub(crate) const DMA_CORE_WRONG_CFG: u64 = 1 << 7;
/// `GAUDI2_EVENT_KDMA0_CORE` (gaudi2_async_events.h:909): the KDMA's
/// error (`gaudi2_handle_kdma_core_event`).
pub(crate) const EVENT_KDMA_CORE: u16 = 1269;
/// `GAUDI2_EVENT_PMMU0_PAGE_FAULT_WR_PERM` (gaudi2_async_events.h:721).
pub(crate) const EVENT_PMMU_PAGE_FAULT: u16 = 768;
/// `GAUDI2_EVENT_HMMUn_PAGE_FAULT_WR_PERM` by HMMU sequence `dcore x 4 +
/// hmmu` (gaudi2_async_events.h:674-719, `get_hmmu_base`).
pub(crate) const EVENT_HMMU_PAGE_FAULT: [u16; 16] = [
    720, 726, 732, 738, 723, 729, 735, 741, 762, 756, 750, 744, 765, 759, 753, 747,
];
/// `GAUDI2_EVENT_PSOC63_RAZWI_OR_PID_MIN_MAX_INTERRUPT` (gaudi2_async_events.h:761);
/// the model's entry carries the address and the channel (1: write).
pub(crate) const EVENT_RAZWI: u16 = 875;
/// The DMA core of a QMAN, as an offset from the QMAN
/// (asic_reg/gaudi2_blocks_linux_driver.h:23188).
pub(crate) const PDMA_CORE_OFFSET: u32 = 0x1000;
/// `mmPDMA0_CORE_CTX_AXUSER_HB_ASID` minus the core base
/// (asic_reg/pdma0_core_ctx_axuser_regs.h:23): the DMA core's ASIDs.
pub(crate) const CORE_AXUSER_HB_ASID: u32 = 0x800;
/// `mmPDMA0_CORE_CFG_1` minus the core base (asic_reg/pdma0_core_regs.h:25):
/// bit 0 `HALT` stops the core's transfer.
pub(crate) const CORE_CFG_1: u32 = 0x004;
/// The DMA core's context registers users may write, minus the core base,
/// as (first, bytes): `CTX_AXUSER_HB_WR_REDUCTION` (0x810) and
/// `CTX_TE_NUMROWS` .. `CTX_DST_TSIZE_0` (0x868..=0x8E8;
/// `gaudi2_pb_pdma0_unsecured_regs`, gaudi2/gaudi2_security.c:132-166).
/// The last one users may write, `CTX_COMMIT` (0x8EC), is left out: a
/// write of it commits a transfer.
pub(crate) const CORE_CTX_USER: [(u32, u32); 2] = [(0x810, 4), (0x868, 0x8EC - 0x868)];
/// A DMA core event's second data word, bit 0: the core's error came from a
/// transfer a CB committed by registers, not from a `LIN_DMA` packet, so
/// no QMAN error follows it (the model's; upstream reads the cause
/// registers instead).
pub(crate) const DMA_CORE_EVENT_CTX: u64 = 1;

/// QMAN block offsets (asic_reg/pdma0_qm_regs.h); per-stream registers are
/// 4 bytes apart.
pub(crate) mod qm {
    /// `GLBL_CFG0`: `PQF_EN` 3:0, `CQF_EN` 8:4, `CP_EN` 13:9
    /// (asic_reg/pdma0_qm_masks.h:24-29).
    pub(crate) const GLBL_CFG0: u32 = 0x000;
    /// `GLBL_CFG1`: `PQF_STOP` 3:0, `CP_STOP` 13:9, `PQF_FLUSH` 19:16,
    /// `CP_FLUSH` 29:25 (asic_reg/pdma0_qm_masks.h:34-45).
    pub(crate) const GLBL_CFG1: u32 = 0x004;
    /// `GLBL_STS0`: `PQF_IDLE` 3:0, `CP_IDLE` 13:9.
    pub(crate) const GLBL_STS0: u32 = 0x01C;
    /// `GLBL_ERR_STS_0`: the stream's errors (non-zero: halted by one).
    pub(crate) const GLBL_ERR_STS: u32 = 0x024;
    /// `CP_CURRENT_INST_LO_0`: the address of the stream's packet.
    pub(crate) const CP_CURRENT_INST_LO: u32 = 0x37C;
    /// `CP_CURRENT_INST_HI_0`.
    pub(crate) const CP_CURRENT_INST_HI: u32 = 0x390;
    /// `PQ_BASE_LO_0`.
    pub(crate) const PQ_BASE_LO: u32 = 0x050;
    /// `PQ_BASE_HI_0`.
    pub(crate) const PQ_BASE_HI: u32 = 0x060;
    /// `PQ_SIZE_0`: log2 of the entries.
    pub(crate) const PQ_SIZE: u32 = 0x070;
    /// `PQ_PI_0`: the doorbell.
    pub(crate) const PQ_PI: u32 = 0x080;
    /// `PQ_CI_0`.
    pub(crate) const PQ_CI: u32 = 0x090;
    /// `CP_MSG_BASE0_ADDR_LO_0`: base `n` of CP `c` at `+ 0x28 n + 4 c`,
    /// its `HI` at `+ 0x14` more.
    pub(crate) const CP_MSG_BASE0_LO: u32 = 0x1F0;
    /// `CP_PRED_0` (pdma0_qm_regs.h:463): CP `c`'s predicates at + 4 c.
    pub(crate) const CP_PRED_0: u32 = 0x3A4;
    /// `PQC_LBW_WDATA_0`.
    pub(crate) const PQC_LBW_WDATA: u32 = 0x45C;
    /// `PQC_LBW_BASE_LO_0`.
    pub(crate) const PQC_LBW_BASE_LO: u32 = 0x46C;
    /// `PQC_LBW_BASE_HI_0`.
    pub(crate) const PQC_LBW_BASE_HI: u32 = 0x47C;
    /// `PQC_CFG`: bit 0 `EN`.
    pub(crate) const PQC_CFG: u32 = 0x48C;
    /// `AXUSER_NONSECURED_HB_ASID`: `WR` 9:0, `RD` 25:16.
    pub(crate) const AXUSER_HB_ASID: u32 = 0xB80;
}

/// `GLBL_CFG1` bits of stream `q`: `PQF_STOP`, `CP_STOP`, `PQF_FLUSH`,
/// `CP_FLUSH` (`gaudi2_stop_qmans` then `gaudi2_flush_qmans`,
/// gaudi2/gaudi2.c:4198-4210, for one stream).
pub(crate) const fn qm_stop_flush(q: u32) -> u32 {
    1 << q | 1 << (9 + q) | 1 << (16 + q) | 1 << (25 + q)
}

/// `GLBL_CFG0` of a QMAN of [`QM_BASES`]: `PDMA0_QMAN_ENABLE` (PQF of
/// streams 0-1), `PDMA1_QMAN_ENABLE` (stream 0), `QMAN_ENABLE` of the EDMAs
/// (every stream), every CQF and CP (gaudi2/gaudi2_masks.h:54-64).
pub(crate) const fn qman_enable(qman: usize) -> u32 {
    let pqf = match qman {
        0 => 0x3,
        1 => 0x1,
        _ => 0xF,
    };
    pqf | 0x1F << 4 | 0x1F << 9
}

/// `ACCESS_PAGE_ERROR_VALID` of an MMU block (asic_reg/pmmu_hbw_mmu_regs.h:51):
/// bit 0 a page error captured, bit 1 an access error; written 0 to
/// release the capture.
pub(crate) const MMU_ACCESS_PAGE_ERROR_VALID: u32 = 0x44;
/// `PAGE_ERROR_CAPTURE` (VA 63:32) and `_VA` (31:0) of an MMU block (:43, :45).
pub(crate) const MMU_PAGE_ERROR_CAPTURE: (u32, u32) = (0x34, 0x38);
/// `ACCESS_ERROR_CAPTURE` (VA 63:32) and `_VA` (31:0) of an MMU block (:47, :49).
pub(crate) const MMU_ACCESS_ERROR_CAPTURE: (u32, u32) = (0x3C, 0x40);
/// The MSI-X vector of the event queue (`GAUDI2_IRQ_NUM_EVENT_QUEUE`,
/// gaudi2/gaudi2P.h:401).
pub(crate) const IRQ_NUM_EVENT_QUEUE: u32 = 0;

/// DCORE0 sync manager registers (asic_reg/dcore0_sync_mngr_objs_regs.h,
/// asic_reg/dcore0_sync_mngr_glbl_regs.h): arrays of u32, index `n` at
/// `+ 4 n`.
pub(crate) mod sm {
    /// `mmDCORE0_SYNC_MNGR_OBJS_SOB_OBJ_0`.
    pub(crate) const SOB_OBJ_0: u32 = 0x410_0000;
    /// `mmDCORE0_SYNC_MNGR_OBJS_MON_PAY_ADDRL_0`.
    pub(crate) const MON_PAY_ADDRL_0: u32 = 0x410_8000;
    /// `mmDCORE0_SYNC_MNGR_OBJS_MON_PAY_ADDRH_0`.
    pub(crate) const MON_PAY_ADDRH_0: u32 = 0x410_A000;
    /// `mmDCORE0_SYNC_MNGR_OBJS_MON_PAY_DATA_0`.
    pub(crate) const MON_PAY_DATA_0: u32 = 0x410_C000;
    /// `mmDCORE0_SYNC_MNGR_OBJS_MON_ARM_0`: `SID` 7:0, `MASK` 15:8, `SOP`
    /// 16 (1: equal), `SOD` 31:17.
    pub(crate) const MON_ARM_0: u32 = 0x410_E000;
    /// `mmDCORE0_SYNC_MNGR_OBJS_MON_CONFIG_0`: `CQ_EN` 4, `LBW_EN` 8.
    pub(crate) const MON_CONFIG_0: u32 = 0x411_0000;
    /// `mmDCORE0_SYNC_MNGR_GLBL_ASID_NONE_SEC_PRIV`: the ASID of the user
    /// monitors' writes (dcore `d` at `+ d x DCORE_OFFSET`).
    pub(crate) const GLBL_ASID_NONE_SEC_PRIV: u32 = 0x411_E048;
    /// `mmDCORE0_SYNC_MNGR_MSTR_IF_AXUSER_HB_ASID`: RD 25:16, WR 9:0.
    pub(crate) const MSTR_IF_AXUSER_HB_ASID: u32 = 0x411_FA80;
    /// `mmDCORE0_SYNC_MNGR_MSTR_IF_AXUSER_HB_MMU_BP`.
    pub(crate) const MSTR_IF_AXUSER_HB_MMU_BP: u32 = 0x411_FA84;
    /// `mmDCORE0_SYNC_MNGR_OBJS_MON_STATUS_0`.
    pub(crate) const MON_STATUS_0: u32 = 0x411_2000;
    /// `mmDCORE0_SYNC_MNGR_GLBL_CQ_BASE_ADDR_L_0`.
    pub(crate) const CQ_BASE_ADDR_L_0: u32 = 0x411_E050;
    /// `mmDCORE0_SYNC_MNGR_GLBL_CQ_BASE_ADDR_H_0`.
    pub(crate) const CQ_BASE_ADDR_H_0: u32 = 0x411_E150;
    /// `mmDCORE0_SYNC_MNGR_GLBL_CQ_SIZE_LOG2_0`: log2 of the CQ's bytes.
    pub(crate) const CQ_SIZE_LOG2_0: u32 = 0x411_E250;
    /// `mmDCORE0_SYNC_MNGR_GLBL_CQ_PI_0`.
    pub(crate) const CQ_PI_0: u32 = 0x411_E350;
    /// `mmDCORE0_SYNC_MNGR_GLBL_LBW_ADDR_L_0`.
    pub(crate) const LBW_ADDR_L_0: u32 = 0x411_E550;
    /// `mmDCORE0_SYNC_MNGR_GLBL_LBW_ADDR_H_0`.
    pub(crate) const LBW_ADDR_H_0: u32 = 0x411_E650;
    /// `mmDCORE0_SYNC_MNGR_GLBL_LBW_DATA_0`.
    pub(crate) const LBW_DATA_0: u32 = 0x411_E750;
    /// `MON_CONFIG`: write a CQ entry, then the CQ's LBW write (the
    /// interrupt) when the monitor fires (gaudi2/gaudi2.c:5761-5766).
    pub(crate) const MON_CONFIG_CQ_LBW: u32 = 1 << 4 | 1 << 8;
}

/// `CQ_ENTRY_READY_MASK`, `CQ_ENTRY_SHADOW_INDEX_VALID_MASK`,
/// `CQ_ENTRY_SHADOW_INDEX_MASK` (include/common/qman_if.h:52-58).
pub(crate) const CQ_ENTRY_READY: u32 = 1 << 31;
/// See [`CQ_ENTRY_READY`].
pub(crate) const CQ_ENTRY_SHADOW_INDEX_VALID: u32 = 1 << 30;
/// See [`CQ_ENTRY_READY`].
pub(crate) const CQ_ENTRY_SHADOW_INDEX_MASK: u32 = 0xFFFF;
/// `BD_CTL_COMP_OFFSET_SHIFT` (include/common/qman_if.h:42): the SOB the
/// PQC increments when the BD's CB is done.
pub(crate) const BD_CTL_COMP_OFFSET_SHIFT: u32 = 16;
/// `GAUDI2_IRQ_NUM_COMPLETION` (gaudi2/gaudi2P.h:423).
pub(crate) const IRQ_NUM_COMPLETION: u32 = 21;

/// The KDMA's registers (`ARC_FARM_KDMA`, asic_reg/arc_farm_kdma_ctx_regs.h,
/// arc_farm_kdma_ctx_axuser_regs.h, arc_farm_kdma_regs.h) and `COMMIT` bits
/// (arc_farm_kdma_ctx_masks.h:176-219).
pub(crate) mod kdma {
    /// `mmARC_FARM_KDMA_CTX_AXUSER_HB_ASID`: RD ASID 25:16, WR 9:0.
    pub(crate) const AXUSER_HB_ASID: u32 = 0x4E8_B800;
    /// `mmARC_FARM_KDMA_CTX_AXUSER_HB_MMU_BP`: RD bit 4, WR bit 0.
    pub(crate) const AXUSER_HB_MMU_BP: u32 = 0x4E8_B804;
    /// `mmARC_FARM_KDMA_CTX_WR_COMP_ADDR_HI`.
    pub(crate) const WR_COMP_ADDR_HI: u32 = 0x4E8_B8BC;
    /// `mmARC_FARM_KDMA_CTX_WR_COMP_ADDR_LO`.
    pub(crate) const WR_COMP_ADDR_LO: u32 = 0x4E8_B8C0;
    /// `mmARC_FARM_KDMA_CTX_WR_COMP_WDATA`.
    pub(crate) const WR_COMP_WDATA: u32 = 0x4E8_B8C4;
    /// `mmARC_FARM_KDMA_CTX_SRC_BASE_LO`.
    pub(crate) const SRC_BASE_LO: u32 = 0x4E8_B8D8;
    /// `mmARC_FARM_KDMA_CTX_SRC_BASE_HI`.
    pub(crate) const SRC_BASE_HI: u32 = 0x4E8_B8DC;
    /// `mmARC_FARM_KDMA_CTX_DST_BASE_LO`.
    pub(crate) const DST_BASE_LO: u32 = 0x4E8_B8E0;
    /// `mmARC_FARM_KDMA_CTX_DST_BASE_HI`.
    pub(crate) const DST_BASE_HI: u32 = 0x4E8_B8E4;
    /// `mmARC_FARM_KDMA_CTX_DST_TSIZE_0`.
    pub(crate) const DST_TSIZE_0: u32 = 0x4E8_B8E8;
    /// `mmARC_FARM_KDMA_CTX_COMMIT`.
    pub(crate) const COMMIT: u32 = 0x4E8_B8EC;
    /// `mmARC_FARM_KDMA_CFG_1`: bit 0 `HALT`.
    pub(crate) const CFG_1: u32 = 0x4E8_B004;
    /// `COMMIT.WR_COMP_EN`.
    pub(crate) const COMMIT_WR_COMP_EN: u32 = 1 << 0;
    /// `COMMIT.LIN`.
    pub(crate) const COMMIT_LIN: u32 = 1 << 31;
    /// `COMMIT.MEM_SET` (asic_reg/arc_farm_kdma_ctx_masks.h:181): fill
    /// with the 64-bit `SRC_BASE`.
    pub(crate) const COMMIT_MEM_SET: u32 = 1 << 4;
}
