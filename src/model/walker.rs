// SPDX-License-Identifier: GPL-2.0

//! Gaudi2's page walker: what its PMMU and HMMUs do on an STLB miss, and
//! the HBM address scrambling of the HMMUs. Pure logic: the caller reads
//! the table memory (host memory by bus address for the PMMU, device DRAM
//! for the HMMUs).
//!
//! Written from the hardware's documented format, on purpose without the
//! driver's page-table code (`src/mmu/`): a driver that encodes a PTE, a
//! hop index or a scrambled address wrongly gets a fault or a wrong page
//! from this walker instead of a mirror of its own mistake.
//!
//! - A PTE is 64 bits (include/hw_ip/mmu/mmu_general.h:24-34): bit 0
//!   `PAGE_PRESENT_MASK`, bit 11 `LAST_MASK` (the entry maps a page, it does
//!   not point to the next hop), bits 63..12 the physical address
//!   (`HOP_PHYS_ADDR_MASK = ~FLAGS_MASK`, `FLAGS_MASK` = 0xFFF).
//! - A hop table is 512 PTEs. The entry of `va` in hop `n` is
//!   `(va & HOPn_MASK) >> HOPn_SHIFT` (include/hw_ip/mmu/mmu_v2_0.h:11-30);
//!   the PMMU walks up to 6 hops (4 KiB masks and shifts), the HMMUs 4 (the
//!   same masks for hops 0-3), gaudi2/gaudi2.c:2821-2905.
//! - A LAST entry at hop `n` maps a page of `1 << HOPn_SHIFT` bytes: 4 KiB
//!   at hop 5, 2 MiB at hop 4, 1 GiB at hop 3.
//! - Hop 0 of each ASID is where the STLB's `HOP0_PA` registers say
//!   (`gaudi2_mmu_update_asid_hop0_addr`, gaudi2/gaudi2.c:5998-6027).

use super::regs::{DRAM_PHYS_BASE, VA_HBM_SPACE_END};

/// `PAGE_PRESENT_MASK` (include/hw_ip/mmu/mmu_general.h:24).
pub const PRESENT: u64 = 1 << 0;
/// `LAST_MASK` (include/hw_ip/mmu/mmu_general.h:26).
pub const LAST: u64 = 1 << 11;
/// `HOP_PHYS_ADDR_MASK` (include/hw_ip/mmu/mmu_general.h:34).
pub const ADDR: u64 = !0xFFF;
/// Bytes of one PTE (`HL_PTE_SIZE`, include/hw_ip/mmu/mmu_general.h:36).
const PTE_BYTES: u64 = 8;

/// Which MMU's tables a walk reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tables {
    /// The PMMU: host-resident tables, 6 hops (gaudi2/gaudi2.c:2848,2883-2905).
    Pmmu,
    /// An HMMU: DRAM-resident tables, 4 hops (gaudi2/gaudi2.c:2821-2834).
    Hmmu,
}

/// The hop shifts of a 4 KiB-page MMU (`HOPn_SHIFT_4K`,
/// include/hw_ip/mmu/mmu_v2_0.h:25-30).
const SHIFTS: [u32; 6] = [57, 48, 39, 30, 21, 12];
/// The hop masks (`HOPn_MASK_4K`, include/hw_ip/mmu/mmu_v2_0.h:11-16).
const MASKS: [u64; 6] = [
    0xFE00_0000_0000_0000,
    0x01FF_0000_0000_0000,
    0x0000_FF80_0000_0000,
    0x0000_007F_C000_0000,
    0x0000_0000_3FE0_0000,
    0x0000_0000_001F_F000,
];

impl Tables {
    /// The number of hops the MMU walks.
    pub const fn hops(self) -> usize {
        match self {
            Self::Pmmu => 6,
            Self::Hmmu => 4,
        }
    }
}

/// What a walk found: the page `va` lies in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Leaf {
    /// The page's address as the LAST entry holds it (scrambled for an
    /// HMMU), aligned down to the page size.
    pub page: u64,
    /// log2 of the page size.
    pub shift: u32,
    /// The hop holding the LAST entry.
    pub level: usize,
}

/// Why a walk stopped without a page.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WalkStop {
    /// The entry at this hop is not present.
    NotPresent(usize),
    /// No LAST entry within the MMU's hops.
    NoLeaf,
    /// The hop table entry at this address could not be read (outside
    /// device memory, or host memory the device may not reach).
    Unreadable(u64),
}

/// Walk the tables of `tables` from `hop0` for `va` (as the MMU sees it:
/// scrambled for an HMMU). `read` reads one PTE of table memory (`None`:
/// unreadable). O(hops).
pub fn walk(
    tables: Tables,
    hop0: u64,
    va: u64,
    read: &mut dyn FnMut(u64) -> Option<u64>,
) -> Result<Leaf, WalkStop> {
    let mut table = hop0;
    let hops = SHIFTS.iter().zip(MASKS.iter()).take(tables.hops());
    for (level, (&shift, &mask)) in hops.enumerate() {
        let at = ((va & mask) >> shift)
            .checked_mul(PTE_BYTES)
            .and_then(|o| table.checked_add(o))
            .ok_or(WalkStop::Unreadable(table))?;
        let pte = read(at).ok_or(WalkStop::Unreadable(at))?;
        if pte & PRESENT == 0 {
            return Err(WalkStop::NotPresent(level));
        }
        if pte & LAST != 0 {
            let size = 1u64.checked_shl(shift).ok_or(WalkStop::NoLeaf)?;
            return Ok(Leaf {
                page: pte & ADDR & !(size - 1),
                shift,
                level,
            });
        }
        table = pte & ADDR;
    }
    Err(WalkStop::NoLeaf)
}

/// The HMMUs' HBM address scrambling (gaudi2/gaudi2.c:11503-11519, the
/// comment above `gaudi2_mmu_scramble_addr`): for an address in the DRAM
/// space `[DRAM_PHYS_BASE, VA_HBM_SPACE_END)`, `addr[47:0] / (HBMs x 8 MiB)
/// x 64 MiB + addr[47:0] mod (HBMs x 8 MiB) + addr[63:48]`, so that a DRAM
/// page (16 x HBMs x 8 MiB) is a 1 GiB MMU page. The HMMU scrambles the VA an
/// engine issues before its walk, and the HBM decoder descrambles the page a
/// walk found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HbmScrambler {
    /// `num_functional_hbms x GAUDI2_HBM_MMU_SCRM_MEM_SIZE`.
    divisor: u64,
}

/// `GAUDI2_HBM_MMU_SCRM_MEM_SIZE` (gaudi2/gaudi2.c:112).
const SCRM_MEM_SIZE: u64 = 8 << 20;
/// `1 << GAUDI2_HBM_MMU_SCRM_DIV_SHIFT`: 64 MiB (gaudi2/gaudi2.c:113).
const SCRM_UNIT: u64 = 1 << 26;
/// `GAUDI2_HBM_MMU_SCRM_ADDRESS_MASK` = `DRAM_VA_HINT_MASK`
/// (gaudi2/gaudi2.c:115, include/gaudi2/gaudi2.h:46).
const SCRM_MASK: u64 = 0xFFFF_FFFF_FFFF;

impl HbmScrambler {
    /// The scrambling of a Gaudi2 with `hbms` working HBMs (5 or 6).
    pub fn new(hbms: u32) -> Self {
        Self {
            divisor: u64::from(hbms).saturating_mul(SCRM_MEM_SIZE),
        }
    }

    fn in_space(addr: u64) -> bool {
        (DRAM_PHYS_BASE..VA_HBM_SPACE_END).contains(&addr)
    }

    /// Scramble an address an engine issues (`gaudi2_mmu_scramble_addr`,
    /// gaudi2/gaudi2.c:11521-11539). O(1).
    pub fn scramble(&self, addr: u64) -> u64 {
        if !Self::in_space(addr) || self.divisor == 0 {
            return addr;
        }
        let lo = addr & SCRM_MASK;
        let scrambled = (lo / self.divisor)
            .checked_mul(SCRM_UNIT)
            .and_then(|d| d.checked_add(lo % self.divisor))
            .and_then(|v| v.checked_add(addr & !SCRM_MASK));
        scrambled.unwrap_or(addr)
    }

    /// Descramble a page address found by a walk
    /// (`gaudi2_mmu_descramble_addr`, gaudi2/gaudi2.c:11541-11558). O(1).
    pub fn descramble(&self, addr: u64) -> u64 {
        if !Self::in_space(addr) || self.divisor == 0 {
            return addr;
        }
        let lo = addr & SCRM_MASK;
        let plain = (lo / SCRM_UNIT)
            .checked_mul(self.divisor)
            .and_then(|d| d.checked_add(lo % SCRM_UNIT))
            .and_then(|v| v.checked_add(addr & !SCRM_MASK));
        plain.unwrap_or(addr)
    }
}
