// SPDX-License-Identifier: GPL-2.0

//! The ASIC model: a Gaudi2 as the driver sees it.
//!
//! Every constant cites the upstream source it comes from (paths relative to
//! `drivers/accel/habanalabs/`). What depends on the number of working HBMs
//! and the DRAM size is derived in [`AsicProperties::gaudi2`], exactly as
//! upstream's `gaudi2_set_dram_properties()` (gaudi2/gaudi2.c:2675-2745) does.

use kernel::prelude::*;

pub(crate) mod cpucp_if;
mod gaudi2_blocks;
#[cfg(CONFIG_PCI)]
pub(crate) mod gaudi2_regs;
pub(crate) use gaudi2_blocks::{CFG_BASE, NUM as NUM_USER_MAPPED_BLOCKS};

/// One user-mappable HW block (upstream `struct user_mapped_block`): a window
/// of the configuration space, `address` bytes from [`CFG_BASE`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct UserBlock {
    /// Offset from `CFG_BASE`.
    pub(crate) address: u64,
    /// Size in bytes (a multiple of 4 KiB).
    pub(crate) size: u64,
}

/// Block ids in increasing address order, computed at compile time.
const BLOCKS_BY_ADDRESS: [u16; NUM_USER_MAPPED_BLOCKS] = {
    let mut ids = [0u16; NUM_USER_MAPPED_BLOCKS];
    let mut i = 0;
    while i < NUM_USER_MAPPED_BLOCKS {
        ids[i] = i as u16;
        i += 1;
    }
    // Insertion sort (453 entries, once, in the compiler).
    let mut j = 1;
    while j < NUM_USER_MAPPED_BLOCKS {
        let mut k = j;
        while k > 0
            && gaudi2_blocks::USER_BLOCKS[ids[k - 1] as usize].address
                > gaudi2_blocks::USER_BLOCKS[ids[k] as usize].address
        {
            let t = ids[k];
            ids[k] = ids[k - 1];
            ids[k - 1] = t;
            k -= 1;
        }
        j += 1;
    }
    ids
};

/// The user-mappable block with id `id` (upstream `mapped_blocks[id]`). O(1).
pub(crate) fn user_block(id: u64) -> Option<&'static UserBlock> {
    gaudi2_blocks::USER_BLOCKS.get(usize::try_from(id).ok()?)
}

/// `gaudi2_get_hw_block_id`: the id of the block that starts exactly at the
/// device address `addr` (`CFG_BASE` + its offset). O(log n) by binary search
/// over the blocks sorted by address; upstream scans all 453 (gaudi2.c:11585-11603).
pub(crate) fn user_block_id(addr: u64) -> Option<u32> {
    let off = addr.checked_sub(CFG_BASE)?;
    let pos = BLOCKS_BY_ADDRESS
        .binary_search_by(|&id| {
            let b = gaudi2_blocks::USER_BLOCKS.get(usize::from(id));
            b.map_or(u64::MAX, |b| b.address).cmp(&off)
        })
        .ok()?;
    BLOCKS_BY_ADDRESS.get(pos).map(|&id| u32::from(id))
}

/// PCI vendor id of Habana Labs (`PCI_VENDOR_ID_HABANALABS`, common/habanalabs.h:42).
pub(crate) const PCI_VENDOR_ID_HABANALABS: u16 = 0x1da3;
/// PCI device id of Gaudi2 (`PCI_IDS_GAUDI2`, common/habanalabs_drv.c:66).
pub(crate) const PCI_IDS_GAUDI2: u16 = 0x1020;
/// PCI revision of a plain Gaudi2 (`REV_ID_A`..: 1 = GAUDI2, 2 = 2B, 3 = 2C, 4 = 2D;
/// common/habanalabs_drv.c:135-152).
pub(crate) const GAUDI2_REVISION: u8 = 1;

const SZ_4K: u64 = 1 << 12;
const SZ_2M: u64 = 1 << 21;
const SZ_8M: u64 = 1 << 23;
const SZ_1G: u64 = 1 << 30;
const SZ_16G: u64 = 1 << 34;
const SZ_1M: u64 = 1 << 20;

/// `DRAM_PHYS_BASE` (include/gaudi2/gaudi2.h:43).
pub(crate) const DRAM_PHYS_BASE: u64 = 0x1001_0000_0000_0000;
/// `VA_HBM_SPACE_END`: end of the DRAM VA space (gaudi2/gaudi2P.h:155).
pub(crate) const VA_HBM_SPACE_END: u64 = 0x1002_0000_0000_0000;
/// `GAUDI2_COMPENSATE_TLB_PAGE_SIZE_FACTOR`: DRAM pages are 16 x (HBMs x 8 MiB)
/// to work around a TLB sizing bug (gaudi2/gaudi2.c:2686-2692).
pub(crate) const COMPENSATE_TLB_PAGE_SIZE_FACTOR: u64 = 16;
/// `CPU_FW_IMAGE_SIZE`: firmware image at the start of DRAM (gaudi2/gaudi2P.h:109).
pub(crate) const CPU_FW_IMAGE_SIZE: u64 = 256 * SZ_1M;
/// `HMMU_PAGE_TABLES_SIZE` (gaudi2/gaudi2P.h:111).
pub(crate) const HMMU_PAGE_TABLES_SIZE: u64 = SZ_1M;
/// `EDMA_PQS_SIZE` (gaudi2/gaudi2P.h:112).
pub(crate) const EDMA_PQS_SIZE: u64 = 2 * SZ_1M;
/// `EDMA_SCRATCHPAD_SIZE` (gaudi2/gaudi2P.h:113).
pub(crate) const EDMA_SCRATCHPAD_SIZE: u64 = SZ_1M;
/// `SRAM_BASE_ADDR` (include/gaudi2/gaudi2.h:40).
pub(crate) const SRAM_BASE_ADDR: u64 = 0x1000_FFFF_FD00_0000;
/// `SRAM_SIZE`: 48 MiB (include/gaudi2/gaudi2.h:41).
pub(crate) const SRAM_SIZE: u64 = 48 * SZ_1M;
/// `SRAM_USER_BASE_OFFSET`: the driver keeps no SRAM for itself on Gaudi2
/// (gaudi2/gaudi2P.h:121), so `sram_user_base_address` = `SRAM_BASE_ADDR`
/// (gaudi2/gaudi2.c:2810).
pub(crate) const SRAM_USER_BASE_OFFSET: u64 = 0;
/// `GAUDI2_EDMA_FULL_MASK` (gaudi2/gaudi2P.h:126): every EDMA enabled, no
/// binning (gaudi2/gaudi2.c:3216-3219).
pub(crate) const GAUDI2_EDMA_FULL_MASK: u32 = 0xFF;
/// `GAUDI2_RESERVED_SOB_NUMBER` (gaudi2/gaudi2P.h:252-264): DCORE0's SOBs
/// below it are the driver's (its CS completions use `0..64`); the
/// sync-stream SOBs from it on (`sync_stream_first_sob`, 2 per queue) are
/// unsecured, as upstream's protection leaves them.
pub(crate) const GAUDI2_RESERVED_SOB_NUMBER: u32 = 85;
/// `GAUDI2_RESERVED_MON_NUMBER` (gaudi2/gaudi2P.h:266-278): the same for
/// monitors (`sync_stream_first_mon`, 1 per queue).
pub(crate) const GAUDI2_RESERVED_MON_NUMBER: u32 = 125;
/// `first_available_user_sob[0]` (gaudi2/gaudi2.c:2925-2926):
/// `GAUDI2_RESERVED_SOB_NUMBER` (85: 64 CS completions, the KDMA's, 2 x 10
/// decoders; gaudi2/gaudi2P.h:252-264) + 164 sync-stream queues x
/// `HL_RSVD_SOBS` (2). DCORE0's SOBs below it are the driver's.
pub(crate) const GAUDI2_FIRST_USER_SOB: u32 = 413;
/// `first_available_user_mon[0]` (gaudi2/gaudi2.c:2928-2929):
/// `GAUDI2_RESERVED_MON_NUMBER` (125) + 164 x `HL_RSVD_MONS` (1).
pub(crate) const GAUDI2_FIRST_USER_MON: u32 = 289;
/// `first_available_cq[0]`: `GAUDI2_RESERVED_CQ_NUMBER` (gaudi2/gaudi2.c:2935).
pub(crate) const GAUDI2_FIRST_USER_CQ: u32 = 2;
/// `GAUDI2_TPC_FULL_MASK` (gaudi2/gaudi2.c:54): the 25 TPCs (6 per dcore
/// and DCORE0's seventh), none binned.
pub(crate) const GAUDI2_TPC_FULL_MASK: u64 = 0x1FF_FFFF;
/// `GAUDI2_HBM_NUM`: HBM stacks on a Gaudi2 (gaudi2/gaudi2P.h).
pub(crate) const GAUDI2_HBM_NUM: u32 = 6;
/// Fewest working HBMs a Gaudi2 runs with: at most one may be binned
/// (`set_number_of_functional_hbms`, gaudi2/gaudi2.c:2628-2658).
pub(crate) const GAUDI2_MIN_HBMS: u32 = GAUDI2_HBM_NUM - 1;
/// `GAUDI2_EVENT_SIZE`: number of async event ids (include/gaudi2/gaudi2_async_events.h:969).
pub(crate) const GAUDI2_EVENT_SIZE: u32 = 1329;
/// `max_asid` (gaudi2/gaudi2.c:2816): ASID 0 is the kernel's, ASID 1 the user's.
pub(crate) const MAX_ASID: u32 = 2;
/// `dram_hints_align_mask = ~GAUDI2_HBM_MMU_SCRM_ADDRESS_MASK`: only the low 48 bits of a
/// DRAM hint are checked for page alignment (gaudi2/gaudi2.c:2700, include/gaudi2/gaudi2.h:46).
pub(crate) const DRAM_HINTS_ALIGN_MASK: u64 = !0xFFFF_FFFF_FFFF;

/// `VA_HOST_SPACE_PAGE_START`/`_END` (gaudi2/gaudi2P.h:131-132), 4 KiB pages.
pub(crate) const VA_HOST_SPACE_PAGE_START: u64 = 0xFFF0_0000_0000_0000;
/// End (exclusive) of the host VA range.
pub(crate) const VA_HOST_SPACE_PAGE_END: u64 = 0xFFF0_8000_0000_0000;
/// `VA_HOST_SPACE_HPAGE_START`/`_END` (gaudi2/gaudi2P.h:134-135), 2 MiB pages.
pub(crate) const VA_HOST_SPACE_HPAGE_START: u64 = 0xFFF0_8000_0000_0000;
/// End (exclusive) of the host huge-page VA range.
pub(crate) const VA_HOST_SPACE_HPAGE_END: u64 = 0xFFF1_0000_0000_0000;

/// `RESERVED_VA_RANGE_FOR_ARC_ON_HBM_START`/`_END` (include/gaudi2/gaudi2.h:54-55).
pub(crate) const HINTS_DRAM_RESERVED: VaSpan =
    VaSpan::new(0x1001_5000_0000_0000, 0x1001_7000_0000_0000);
/// `RESERVED_VA_FOR_VIRTUAL_MSIX_DOORBELL_START` .. `RESERVED_VA_RANGE_FOR_ARC_ON_HOST_END`
/// (include/gaudi2/gaudi2.h:57-60).
pub(crate) const HINTS_HOST_RESERVED: VaSpan =
    VaSpan::new(0xFFF0_77FF_FFFF_0000, 0xFFF0_8000_0000_0000);
/// `RESERVED_VA_RANGE_FOR_ARC_ON_HOST_HPAGE_START`/`_END` (include/gaudi2/gaudi2.h:62-63).
pub(crate) const HINTS_HOST_HPAGE_RESERVED: VaSpan =
    VaSpan::new(0xFFF0_F800_0000_0000, 0xFFF1_0000_0000_0000);

/// PTE bit: the entry is valid (`PAGE_PRESENT_MASK`, include/hw_ip/mmu/mmu_general.h:24).
pub(crate) const PTE_PRESENT: u64 = 0x1;
/// PTE bit: the entry maps a page, not a next-level hop (`LAST_MASK`, mmu_general.h:26).
pub(crate) const PTE_LAST: u64 = 0x800;
/// PTE flag field (`FLAGS_MASK`, mmu_general.h:27); the rest is the physical address.
pub(crate) const PTE_FLAGS_MASK: u64 = 0xFFF;
/// PTEs per hop table (`HOP_TABLE_SIZE_512_PTE / HL_PTE_SIZE`, mmu_general.h:39-40).
pub(crate) const HOP_PTES: u64 = 512;
/// Size of one hop table in bytes.
pub(crate) const HOP_TABLE_SIZE: u64 = HOP_PTES * 8;

/// A half-open span of addresses `[start, end)`.
///
/// Upstream mixes inclusive and exclusive ends (see the README); this driver
/// uses half-open spans everywhere.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct VaSpan {
    /// First address.
    pub(crate) start: u64,
    /// One past the last address.
    pub(crate) end: u64,
}

impl VaSpan {
    /// The span `[start, end)`.
    pub(crate) const fn new(start: u64, end: u64) -> Self {
        Self { start, end }
    }

    /// Number of bytes in the span.
    pub(crate) const fn len(&self) -> u64 {
        self.end - self.start
    }

    /// Whether `[addr, addr + size)` lies entirely inside the span. O(1).
    ///
    /// `size == 0` or a wrapping end is never inside. Unlike upstream's
    /// `hl_mem_area_inside_range` there is no off-by-one at the end.
    pub(crate) fn contains_area(&self, addr: u64, size: u64) -> bool {
        match addr.checked_add(size) {
            Some(end) => size != 0 && addr >= self.start && end <= self.end,
            None => false,
        }
    }

    /// Whether `[addr, addr + size)` overlaps the span. O(1), full 64-bit sizes
    /// (upstream's `hl_mem_area_crosses_range` cuts the size to u32).
    pub(crate) fn overlaps(&self, addr: u64, size: u64) -> bool {
        let end = addr.saturating_add(size);
        size != 0 && addr < self.end && end > self.start
    }
}

/// The MMU walk geometry of one page-table kind (`struct hl_mmu_properties`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct MmuGeometry {
    /// Number of hops in a full walk.
    pub(crate) num_hops: usize,
    /// Shift of the VA bits that index each hop.
    pub(crate) hop_shifts: [u32; 6],
    /// Mask of the VA bits that index each hop.
    pub(crate) hop_masks: [u64; 6],
    /// Whether the tables live in host memory (`host_resident`).
    pub(crate) host_resident: bool,
}

impl MmuGeometry {
    /// Gaudi2 PMMU with 4 KiB kernel pages: 6 hops, shifts 57..12
    /// (include/hw_ip/mmu/mmu_v2_0.h:66-85; gaudi2/gaudi2.c:2883-2905), host resident.
    pub(crate) const PMMU: Self = Self {
        num_hops: 6,
        hop_shifts: [57, 48, 39, 30, 21, 12],
        hop_masks: [
            0xFE00_0000_0000_0000,
            0x01FF_0000_0000_0000,
            0x0000_FF80_0000_0000,
            0x0000_007F_C000_0000,
            0x0000_0000_3FE0_0000,
            0x0000_0000_001F_F000,
        ],
        host_resident: true,
    };

    /// Gaudi2 DMMU (HMMU): 4 hops with the same masks, 1 GiB leaves at hop 3
    /// (gaudi2/gaudi2.c:2821-2834), device resident with a host shadow.
    pub(crate) const DMMU: Self = Self {
        num_hops: 4,
        hop_shifts: [57, 48, 39, 30, 0, 0],
        hop_masks: [
            0xFE00_0000_0000_0000,
            0x01FF_0000_0000_0000,
            0x0000_FF80_0000_0000,
            0x0000_007F_C000_0000,
            0,
            0,
        ],
        host_resident: false,
    };

    /// Index of `va`'s PTE inside its hop table at level `hop`, or `None` for a
    /// level outside the geometry. O(1).
    pub(crate) fn pte_index(&self, hop: usize, va: u64) -> Option<u64> {
        if hop >= self.num_hops {
            return None;
        }
        let mask = *self.hop_masks.get(hop)?;
        let shift = *self.hop_shifts.get(hop)?;
        Some((va & mask) >> shift)
    }

    /// The leaf level for a page of `page_size` bytes: the deepest hop whose
    /// span `1 << shift` still covers the page (`hl_mmu_v2_get_last_hop`,
    /// common/mmu/mmu_v2_hr.c:190-203). O(hops).
    pub(crate) fn leaf_hop(&self, page_size: u64) -> Option<usize> {
        (0..self.num_hops).rev().find(|&h| {
            self.hop_shifts
                .get(h)
                .is_some_and(|&s| (1u64 << s) >= page_size)
        })
    }
}

/// Everything the memory code needs to know about one ASIC
/// (`struct asic_fixed_properties`, the memory part).
///
/// # Invariants
///
/// Built only by [`AsicProperties::gaudi2`], which guarantees
/// `dram_base < dram_user_base < dram_end`, `dram_page_size > 0`,
/// `dram_size` a whole number of DRAM pages, and non-empty VA ranges.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct AsicProperties {
    /// Number of working HBM stacks.
    pub(crate) hbms: u32,
    /// PCI device id.
    pub(crate) device_id: u16,
    /// PCI revision.
    pub(crate) revision: u8,
    /// Physical DRAM base (`dram_base_address`).
    pub(crate) dram_base: u64,
    /// DRAM size in bytes (`dram_size`).
    pub(crate) dram_size: u64,
    /// First DRAM byte users may allocate (`dram_user_base_address`).
    pub(crate) dram_user_base: u64,
    /// DRAM page size: 16 x HBMs x 8 MiB, not a power of two.
    pub(crate) dram_page_size: u64,
    /// Device-resident page tables (`mmu_pgt_addr`), inside the reserved first page.
    pub(crate) mmu_pgt_addr: u64,
    /// User SRAM base (`sram_user_base_address`).
    pub(crate) sram_user_base: u64,
    /// User SRAM size.
    pub(crate) sram_size: u64,
    /// DRAM VA range (`dmmu.start_addr` .. `dmmu.end_addr`).
    pub(crate) dram_va: VaSpan,
    /// MMU page size of the DMMU leaves (`dmmu.page_size`, 1 GiB).
    pub(crate) dmmu_page_size: u64,
    /// Host VA range (`pmmu`), 4 KiB pages.
    pub(crate) host_va: VaSpan,
    /// Host huge-page VA range (`pmmu_huge`), 2 MiB pages.
    pub(crate) host_huge_va: VaSpan,
    /// Host page size (`pmmu.page_size`).
    pub(crate) host_page_size: u64,
    /// Host huge page size (`pmmu_huge.page_size`).
    pub(crate) host_huge_page_size: u64,
}

impl AsicProperties {
    /// The properties of a Gaudi2 with `hbms` working HBMs and `dram_size` bytes of
    /// DRAM (0: the real `hbms` x 16 GiB). O(1).
    ///
    /// Returns `EINVAL` for an impossible configuration: HBMs other than 5 or 6, a DRAM
    /// size larger than the HBMs hold, or less than two DRAM pages (the first page
    /// is reserved for firmware and page tables).
    pub(crate) fn gaudi2(hbms: u32, dram_size: u64) -> Result<Self> {
        if !(GAUDI2_MIN_HBMS..=GAUDI2_HBM_NUM).contains(&hbms) {
            return Err(EINVAL);
        }
        let hbm_page = u64::from(hbms) * SZ_8M;
        let dram_page_size = COMPENSATE_TLB_PAGE_SIZE_FACTOR * hbm_page;
        let full = u64::from(hbms) * SZ_16G;
        let dram_size = if dram_size == 0 { full } else { dram_size };
        if dram_size > full || dram_size < 2 * dram_page_size {
            return Err(EINVAL);
        }
        // Only whole DRAM pages are usable (common/habanalabs_ioctl.c:75-78).
        let dram_size = dram_size / dram_page_size * dram_page_size;
        // dmmu.start = base + page x ceil(size / page); dmmu.end = start + page x
        // floor((VA_HBM_SPACE_END - start) / dmmu.page_size) (gaudi2/gaudi2.c:2721-2725).
        let dmmu_start = DRAM_PHYS_BASE + dram_page_size * dram_size.div_ceil(dram_page_size);
        let dmmu_end = dmmu_start + dram_page_size * ((VA_HBM_SPACE_END - dmmu_start) / SZ_1G);
        // The driver's share of the first DRAM page starts at the next HBM-page
        // boundary after the firmware image; page tables sit at its end
        // (gaudi2/gaudi2.c:2727-2741).
        let drv_base = CPU_FW_IMAGE_SIZE.div_ceil(hbm_page) * hbm_page;
        let drv_area = dram_page_size
            .checked_sub(drv_base)
            .and_then(|a| {
                a.checked_sub(HMMU_PAGE_TABLES_SIZE + EDMA_PQS_SIZE + EDMA_SCRATCHPAD_SIZE)
            })
            .ok_or(EINVAL)?;
        let mmu_pgt_addr = DRAM_PHYS_BASE + drv_base + drv_area;
        Ok(Self {
            hbms,
            device_id: PCI_IDS_GAUDI2,
            revision: GAUDI2_REVISION,
            dram_base: DRAM_PHYS_BASE,
            dram_size,
            dram_user_base: DRAM_PHYS_BASE + dram_page_size,
            dram_page_size,
            mmu_pgt_addr,
            sram_user_base: SRAM_BASE_ADDR + SRAM_USER_BASE_OFFSET,
            sram_size: SRAM_SIZE,
            dram_va: VaSpan::new(dmmu_start, dmmu_end),
            dmmu_page_size: SZ_1G,
            host_va: VaSpan::new(VA_HOST_SPACE_PAGE_START, VA_HOST_SPACE_PAGE_END),
            host_huge_va: VaSpan::new(VA_HOST_SPACE_HPAGE_START, VA_HOST_SPACE_HPAGE_END),
            host_page_size: SZ_4K,
            host_huge_page_size: SZ_2M,
        })
    }

    /// End (exclusive) of physical DRAM.
    pub(crate) fn dram_end(&self) -> u64 {
        self.dram_base + self.dram_size
    }

    /// DRAM reserved for firmware and driver at the start of DRAM
    /// (`dram_user_base_address - dram_base_address`).
    pub(crate) fn reserved_dram_size(&self) -> u64 {
        self.dram_user_base - self.dram_base
    }

    /// DRAM users may allocate, a whole number of DRAM pages (HW_IP_INFO `dram_size`).
    pub(crate) fn user_dram_size(&self) -> u64 {
        self.user_dram_pages() * self.dram_page_size
    }

    /// Number of DRAM pages users may allocate.
    pub(crate) fn user_dram_pages(&self) -> u64 {
        // Cannot fail by the type invariant; checked anyway, no panic path.
        self.dram_size
            .saturating_sub(self.reserved_dram_size())
            .checked_div(self.dram_page_size)
            .unwrap_or(0)
    }
}

#[kunit_tests(hlrs_asic)]
mod tests {
    use super::*;

    #[test]
    fn every_user_block_is_found_and_one_byte_off_is_not() -> Result {
        let mut total = 0u64;
        for id in 0..NUM_USER_MAPPED_BLOCKS as u64 {
            let b = user_block(id).ok_or(EINVAL)?;
            assert_eq!(b.size % 4096, 0);
            assert_eq!(user_block_id(CFG_BASE + b.address), Some(id as u32));
            assert_eq!(user_block_id(CFG_BASE + b.address + 1), None);
            assert_eq!(user_block_id(CFG_BASE + b.address - 1), None);
            total += b.size;
        }
        assert_eq!(user_block(NUM_USER_MAPPED_BLOCKS as u64), None);
        assert_eq!(user_block_id(0), None);
        assert_eq!(user_block_id(u64::MAX), None);
        // Upstream's table: 69 ARC DCCMs, 8 ACPs, 24 x 15 NIC UMRs, 10
        // decoders, 3 x 2 sync-manager blocks.
        assert_eq!(NUM_USER_MAPPED_BLOCKS, 69 + 8 + 360 + 10 + 6);
        assert_eq!(user_block(0).map(|b| b.size), Some(0x10000));
        assert_eq!(user_block(4).map(|b| b.size), Some(0x8000));
        assert_eq!(user_block(452).map(|b| b.size), Some(0x1000));
        // No two blocks overlap.
        for w in BLOCKS_BY_ADDRESS.windows(2) {
            let (a, b) = (
                user_block(w[0].into()).ok_or(EINVAL)?,
                user_block(w[1].into()).ok_or(EINVAL)?,
            );
            assert!(a.address + a.size <= b.address);
        }
        assert!(total < 8 << 20);
        Ok(())
    }

    #[test]
    fn gaudi2_six_hbms_matches_upstream() -> Result {
        let p = AsicProperties::gaudi2(6, 0)?;
        assert_eq!(p.dram_page_size, 0x3000_0000);
        assert_eq!(p.dram_size, 0x18_0000_0000);
        assert_eq!(p.dram_user_base, 0x1001_0000_3000_0000);
        assert_eq!(p.dram_va.start, 0x1001_0018_0000_0000);
        assert_eq!(p.dram_va.end, 0x1001_C006_0000_0000);
        assert_eq!(p.dram_va.len() / p.dram_page_size, 262_048);
        assert_eq!(p.mmu_pgt_addr, 0x1001_0000_2FC0_0000);
        assert_eq!(p.user_dram_size(), 0x17_D000_0000);
        assert_eq!(p.user_dram_pages(), 127);
        assert_eq!(p.reserved_dram_size(), 0x3000_0000);
        Ok(())
    }

    #[test]
    fn gaudi2_five_hbms_matches_upstream() -> Result {
        let p = AsicProperties::gaudi2(5, 0)?;
        assert_eq!(p.dram_page_size, 0x2800_0000);
        assert_eq!(p.dram_size, 0x14_0000_0000);
        assert_eq!(p.dram_va.start, 0x1001_0014_0000_0000);
        assert_eq!(p.dram_va.end, 0x1001_A007_8000_0000);
        assert_eq!(p.dram_va.len() / p.dram_page_size, 262_064);
        assert_eq!(p.user_dram_size(), 0x13_D800_0000);
        assert_eq!(p.reserved_dram_size(), 0x2800_0000);
        Ok(())
    }

    #[test]
    fn dram_page_is_not_a_power_of_two() -> Result {
        for hbms in GAUDI2_MIN_HBMS..=GAUDI2_HBM_NUM {
            let p = AsicProperties::gaudi2(hbms, 0)?;
            assert_eq!(p.dram_page_size, 16 * u64::from(hbms) * SZ_8M);
            assert!(!p.dram_page_size.is_power_of_two());
            assert!(p.dram_size % p.dram_page_size == 0);
            assert!(p.user_dram_size() % p.dram_page_size == 0);
        }
        Ok(())
    }

    #[test]
    fn smaller_simulated_dram_is_rounded_to_pages() -> Result {
        let p = AsicProperties::gaudi2(6, 4 * SZ_1G + 1)?;
        // 4 GiB + 1 holds 5 pages of 768 MiB.
        assert_eq!(p.dram_size, 5 * 0x3000_0000);
        assert_eq!(p.user_dram_pages(), 4);
        Ok(())
    }

    #[test]
    fn impossible_configurations_are_rejected() {
        assert!(AsicProperties::gaudi2(0, 0).is_err());
        assert!(AsicProperties::gaudi2(4, 0).is_err());
        assert!(AsicProperties::gaudi2(7, 0).is_err());
        assert!(AsicProperties::gaudi2(6, 6 * SZ_16G + 1).is_err());
        assert!(AsicProperties::gaudi2(6, 0x3000_0000).is_err());
        assert!(AsicProperties::gaudi2(6, 2 * 0x3000_0000).is_ok());
    }

    #[test]
    fn va_ranges_and_hint_reservations() -> Result {
        let p = AsicProperties::gaudi2(6, 0)?;
        assert_eq!(p.host_va.len(), 0x8000_0000_0000);
        assert!(p
            .host_va
            .contains_area(VA_HOST_SPACE_PAGE_END - SZ_4K, SZ_4K));
        assert!(!p
            .host_va
            .contains_area(VA_HOST_SPACE_PAGE_END - SZ_4K, SZ_4K + 1));
        assert!(!p.host_va.contains_area(u64::MAX, 2));
        assert!(!p.host_va.contains_area(VA_HOST_SPACE_PAGE_START, 0));
        assert!(p
            .dram_va
            .contains_area(HINTS_DRAM_RESERVED.start, HINTS_DRAM_RESERVED.len()));
        assert!(p
            .host_va
            .contains_area(HINTS_HOST_RESERVED.start, HINTS_HOST_RESERVED.len()));
        assert!(p.host_huge_va.contains_area(
            HINTS_HOST_HPAGE_RESERVED.start,
            HINTS_HOST_HPAGE_RESERVED.len()
        ));
        // Overlap works for sizes of 4 GiB and more (upstream truncates to u32).
        assert!(HINTS_DRAM_RESERVED.overlaps(HINTS_DRAM_RESERVED.start - 4 * SZ_1G, 4 * SZ_1G + 1));
        assert!(!HINTS_DRAM_RESERVED.overlaps(HINTS_DRAM_RESERVED.start - 4 * SZ_1G, 4 * SZ_1G));
        Ok(())
    }

    #[test]
    fn hop_geometry() {
        let g = MmuGeometry::PMMU;
        let va = 0xFFF0_1234_5678_9000u64;
        assert_eq!(g.pte_index(0, va), Some(va >> 57));
        assert_eq!(g.pte_index(5, va), Some((va >> 12) & 0x1FF));
        assert_eq!(g.pte_index(6, va), None);
        assert_eq!(g.leaf_hop(SZ_4K), Some(5));
        assert_eq!(g.leaf_hop(SZ_2M), Some(4));
        assert_eq!(MmuGeometry::DMMU.leaf_hop(SZ_1G), Some(3));
        for h in 0..6 {
            // Every hop indexes at most 512 entries.
            assert!(g.pte_index(h, u64::MAX).is_some_and(|i| i < HOP_PTES));
        }
    }
}
