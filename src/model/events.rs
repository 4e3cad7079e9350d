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
pub const RAZWI: u16 = 875;

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
/// `EQ_CTL_INDEX`), with `data` in its first data word. O(1).
pub fn entry(event: u16, index: u32, data: u64) -> [u8; ENTRY_BYTES] {
    let ctl =
        CTL_READY | (u32::from(event) & 0xFFF) << CTL_EVENT_TYPE_SHIFT | (index & CTL_INDEX_MASK);
    let mut e = [0u8; ENTRY_BYTES];
    for (dst, src) in e
        .iter_mut()
        .skip(4)
        .zip(ctl.to_le_bytes().into_iter().chain(data.to_le_bytes()))
    {
        *dst = src;
    }
    e
}
