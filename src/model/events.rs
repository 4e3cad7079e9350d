// SPDX-License-Identifier: GPL-2.0

//! The event ids the model reports on the event queue
//! (include/gaudi2/gaudi2_async_events.h, `enum gaudi2_async_event_id`) and
//! the format of an event queue entry (`struct hl_eq_entry`,
//! include/linux/habanalabs/cpucp_if.h:375-392).

/// `GAUDI2_EVENT_PMMU0_PAGE_FAULT_WR_PERM` (gaudi2_async_events.h:721):
/// upstream reads the PMMU's capture registers on it
/// (`gaudi2_handle_mmu_spi_sei_err`, gaudi2/gaudi2.c:9593-9623).
pub const PMMU_PAGE_FAULT: u16 = 768;
/// `GAUDI2_EVENT_PSOC63_RAZWI_OR_PID_MIN_MAX_INTERRUPT`
/// (gaudi2_async_events.h:761): an address nothing decodes.
/// Its data words: the address, then the channel (1: a write, the AW
/// channel; 0: a read, AR). The model's compact stand-in for the routers'
/// capture registers upstream reads (`RR_SHRD_HBW_AW/AR_RAZWI_HAPPENED`
/// and their address registers, gaudi2/gaudi2.c, `gaudi2_razwi_rr_hbw_shared_printf_info`).
pub const RAZWI: u16 = 875;

/// `GAUDI2_EVENT_PDMA0_CORE`.. / `GAUDI2_EVENT_HDMAn_CORE` (gaudi2_async_events.h:899-908)
/// of the QMAN with error event `qm_event` ([`super::regs::EVENT_QM`]):
/// the DMA core's interrupt, 23 ids after its QMAN's. Its data word is the
/// cause (`gaudi2_handle_dma_core_event`, gaudi2/gaudi2.c:9248). O(1).
pub const fn dma_core(qm_event: u16) -> u16 {
    qm_event + 23
}

/// `GAUDI2_EVENT_KDMA0_CORE` (gaudi2_async_events.h:909): the KDMA's
/// error (`gaudi2_handle_kdma_core_event`); its data word is the cause.
pub const KDMA_CORE: u16 = 1269;

/// Cause bit 7 of a DMA core event: "WRONG CFG FOR COMMIT IN LIN DMA"
/// (`gaudi2_dma_core_interrupts_cause`, gaudi2/gaudi2.c:1278-1287).
pub const DMA_CORE_WRONG_CFG: u64 = 1 << 7;

/// A DMA core event's second data word, bit 0: the error is of a transfer
/// the core's registers committed (`super::dma_core`), not of a `LIN_DMA`
/// packet: no QMAN error follows (the model's own marker; upstream reads
/// the core's cause registers).
pub const DMA_CORE_CTX: u64 = 1;

/// `GAUDI2_EVENT_HMMUn_PAGE_FAULT_WR_PERM` by model HMMU index
/// (`dcore x 4 + hmmu`): upstream numbers the HMMUs across dcores
/// (`get_hmmu_base`, gaudi2/gaudi2.c:9500-9590; the ids at
/// gaudi2_async_events.h:674-719).
const HMMU_PAGE_FAULT: [u16; 16] = [
    720, 726, 732, 738, // dcore 0: HMMU0, HMMU2, HMMU8, HMMU10
    723, 729, 735, 741, // dcore 1: HMMU1, HMMU3, HMMU9, HMMU11
    762, 756, 750, 744, // dcore 2: HMMU13, HMMU15, HMMU5, HMMU7
    765, 759, 753, 747, // dcore 3: HMMU12, HMMU14, HMMU4, HMMU6
];

/// The page-fault event of model MMU `mmu` (0: the PMMU, 1..=16 HMMUs). O(1).
pub fn mmu_page_fault(mmu: usize) -> u16 {
    match mmu.checked_sub(1) {
        None => PMMU_PAGE_FAULT,
        Some(h) => HMMU_PAGE_FAULT.get(h).copied().unwrap_or(RAZWI),
    }
}

/// Bytes of an event queue entry: an 8-byte header and 7 u64s of data
/// (`HL_EQ_ENTRY_SIZE`, cpucp_if.h:395).
pub const ENTRY_BYTES: usize = 64;
/// `EQ_CTL_READY_MASK` (cpucp_if.h:398).
pub const CTL_READY: u32 = 1 << 31;
/// `EQ_CTL_EVENT_TYPE_SHIFT` (cpucp_if.h:403), 12 bits (`_MASK` :404).
pub const CTL_EVENT_TYPE_SHIFT: u32 = 16;
/// `EQ_CTL_INDEX_MASK` (cpucp_if.h:407).
pub const CTL_INDEX_MASK: u32 = 0xFFFF;

/// The entry reporting `event` as the `index`-th entry (a running index,
/// `EQ_CTL_INDEX`), with `data` in its first two data words. O(1).
pub fn entry(event: u16, index: u32, data: [u64; 2]) -> [u8; ENTRY_BYTES] {
    let ctl =
        CTL_READY | (u32::from(event) & 0xFFF) << CTL_EVENT_TYPE_SHIFT | (index & CTL_INDEX_MASK);
    let mut e = [0u8; ENTRY_BYTES];
    for (dst, src) in e.iter_mut().skip(4).zip(
        ctl.to_le_bytes()
            .into_iter()
            .chain(data[0].to_le_bytes())
            .chain(data[1].to_le_bytes()),
    ) {
        *dst = src;
    }
    e
}
