// SPDX-License-Identifier: GPL-2.0

//! The PTE format shared by every Habana MMU (include/hw_ip/mmu/mmu_general.h:24-41)
//! and Gaudi2's DRAM address scrambling (gaudi2/gaudi2.c:11503-11560).
//!
//! A PTE is 64 bits: bit 0 PRESENT, bit 11 LAST (the entry maps a page rather
//! than pointing to the next hop), bits 63..12 the physical address. There are
//! no permission bits; ASIDs are separated by their hop-0 tables.

use crate::asic::{self, PTE_FLAGS_MASK, PTE_LAST, PTE_PRESENT};
use kernel::prelude::*;

/// A decoded PTE.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Pte {
    /// Not present.
    None,
    /// Points to the next hop table at this physical address.
    Hop(u64),
    /// Maps a page at this physical address.
    Page(u64),
}

impl Pte {
    /// Encode. Address bits below 4 KiB are dropped (the hardware ignores them).
    pub(crate) fn encode(self) -> u64 {
        match self {
            Self::None => 0,
            Self::Hop(addr) => (addr & !PTE_FLAGS_MASK) | PTE_PRESENT,
            Self::Page(addr) => (addr & !PTE_FLAGS_MASK) | PTE_LAST | PTE_PRESENT,
        }
    }

    /// Decode a raw value as the hardware reads it.
    pub(crate) fn decode(raw: u64) -> Self {
        if raw & PTE_PRESENT == 0 {
            Self::None
        } else if raw & PTE_LAST != 0 {
            Self::Page(raw & !PTE_FLAGS_MASK)
        } else {
            Self::Hop(raw & !PTE_FLAGS_MASK)
        }
    }
}

/// Gaudi2's DRAM address scrambling: a DRAM page of 16 x N x 8 MiB (not a power
/// of two) becomes a 1 GiB-aligned DMMU page. For an address in
/// `[DRAM_PHYS_BASE, VA_HBM_SPACE_END)` the offset from the DRAM base is
/// rewritten as `(off / (N x 8 MiB)) x 64 MiB + off mod (N x 8 MiB)`; other
/// addresses are unchanged. Applied to both VAs and PAs before they go into the
/// DMMU (`gaudi2_mmu_scramble_addr`).
///
/// Upstream ORs the rewritten 48-bit offset into the kept high bits; for the
/// last 32 pages of the DRAM VA range the rewritten offset reaches bit 48,
/// which is already set in the base, so the OR loses a carry and the
/// descramble no longer inverts it. Adding keeps the mapping one-to-one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Scrambler {
    unit: u64,
}

/// The DMMU page of a scrambled DRAM page (`PAGE_SIZE_64MB` per HBM unit).
const SCRAMBLED_UNIT: u64 = 64 << 20;

impl Scrambler {
    /// The scrambler of a Gaudi2 with `hbms` working HBMs.
    pub(crate) fn new(hbms: u32) -> Self {
        Self {
            unit: u64::from(hbms) * (8 << 20),
        }
    }

    fn in_space(addr: u64) -> bool {
        (asic::DRAM_PHYS_BASE..asic::VA_HBM_SPACE_END).contains(&addr)
    }

    /// Scramble `addr`. O(1).
    pub(crate) fn scramble(&self, addr: u64) -> u64 {
        if !Self::in_space(addr) || self.unit == 0 {
            return addr;
        }
        let off = addr - asic::DRAM_PHYS_BASE;
        asic::DRAM_PHYS_BASE + (off / self.unit) * SCRAMBLED_UNIT + off % self.unit
    }

    /// Undo [`Self::scramble`]. O(1).
    pub(crate) fn descramble(&self, addr: u64) -> u64 {
        if addr < asic::DRAM_PHYS_BASE || self.unit == 0 {
            return addr;
        }
        let off = addr - asic::DRAM_PHYS_BASE;
        asic::DRAM_PHYS_BASE + (off / SCRAMBLED_UNIT) * self.unit + off % SCRAMBLED_UNIT
    }
}

#[kunit_tests(hlrs_pte)]
mod tests {
    use super::*;
    use crate::asic::AsicProperties;

    #[test]
    fn pte_round_trips() {
        for p in [
            Pte::None,
            Pte::Hop(0x1001_0000_2FC0_1000),
            Pte::Page(0x1001_0020_0000_0000),
        ] {
            assert_eq!(Pte::decode(p.encode()), p);
        }
        assert_eq!(Pte::Hop(0x5000).encode(), 0x5001);
        assert_eq!(Pte::Page(0x4000_0000).encode(), 0x4000_0801);
        // Flag bits of the address are dropped; a non-present entry is none.
        assert_eq!(Pte::Page(0x4000_0fff).encode(), 0x4000_0801);
        assert_eq!(Pte::decode(0x4000_0800), Pte::None);
    }

    #[test]
    fn scrambling_makes_dram_pages_1gib_aligned() -> Result {
        for hbms in [5u32, 6] {
            let p = AsicProperties::gaudi2(hbms, 0)?;
            let s = Scrambler::new(hbms);
            let start = s.scramble(p.dram_va.start);
            assert_eq!(start % (1 << 30), 0);
            // Consecutive DRAM pages become consecutive 1 GiB pages, also at the
            // top of the range (where upstream's OR would lose a carry).
            let pages = p.dram_va.len() / p.dram_page_size;
            for k in [0u64, 1, 2, pages - 33, pages - 32, pages - 1] {
                let va = p.dram_va.start + k * p.dram_page_size;
                assert_eq!(s.scramble(va), start + k * (1 << 30));
                assert_eq!(s.descramble(s.scramble(va + 12345)), va + 12345);
            }
            // Physical DRAM pages too.
            let pa = p.dram_user_base + 3 * p.dram_page_size;
            assert_eq!(s.scramble(pa) % (1 << 30), 0);
            assert_eq!(
                s.descramble(s.scramble(pa + p.dram_page_size - 1)),
                pa + p.dram_page_size - 1
            );
        }
        // The example of gaudi2.c:11512-11517 (6 HBMs, offsets from the DRAM base).
        let s = Scrambler::new(6);
        let base = crate::asic::DRAM_PHYS_BASE;
        assert_eq!(s.scramble(base + 0x9C00_0000), base + 0xD000_0000);
        assert_eq!(s.scramble(base + 0x9F00_0000), base + 0xD400_0000);
        // Outside the DRAM space nothing changes.
        assert_eq!(s.scramble(0xFFF0_0000_0000_0000), 0xFFF0_0000_0000_0000);
        Ok(())
    }
}
