// SPDX-License-Identifier: GPL-2.0

//! The simulated Gaudi2's page walker: what its PMMU and HMMUs do on an STLB
//! miss, and the HBM address scrambling of the HMMUs.
//!
//! Written from the hardware's documented format, on purpose without the
//! driver's page-table code (`src/mmu/`): a driver that encodes a PTE, a
//! hop index or a scrambled address wrongly gets a fault or a wrong page
//! from this walker instead of a mirror of its own mistake.
//!
//! - A PTE is 64 bits (include/hw_ip/mmu/mmu_general.h:24-41): bit 0
//!   `PAGE_PRESENT_MASK`, bit 11 `LAST_MASK` (the entry maps a page, it does
//!   not point to the next hop), bits 63..12 the physical address
//!   (`HOP_PHYS_ADDR_MASK = ~FLAGS_MASK`, `FLAGS_MASK` = 0xFFF).
//! - A hop table is 512 PTEs. The entry of `va` in hop `n` is
//!   `(va & HOPn_MASK) >> HOPn_SHIFT` (include/hw_ip/mmu/mmu_v2_0.h); the
//!   PMMU walks up to 6 hops (4 KiB masks and shifts), the HMMUs 4 (the same
//!   masks for hops 0-3), gaudi2/gaudi2.c:2821-2905.
//! - A LAST entry at hop `n` maps a page of `1 << HOPn_SHIFT` bytes: 4 KiB
//!   at hop 5, 2 MiB at hop 4, 1 GiB at hop 3.
//! - Hop 0 of each ASID is where the STLB's `HOP0_PA` registers say
//!   (`gaudi2_mmu_update_asid_hop0_addr`).

use crate::asic::{MmuGeometry, DRAM_PHYS_BASE, VA_HBM_SPACE_END};
use crate::hw::backend::MmuKind;
use kernel::prelude::*;

/// `PAGE_PRESENT_MASK`.
const PRESENT: u64 = 1 << 0;
/// `LAST_MASK`.
const LAST: u64 = 1 << 11;
/// `HOP_PHYS_ADDR_MASK`.
const ADDR: u64 = !0xFFF;
/// Bytes of one PTE (`HL_PTE_SIZE`).
const PTE_BYTES: u64 = 8;

/// The hops of the MMU of `kind`, with each hop's index shift and mask: the
/// hardware's geometry, from the ground floor's constants (which cite
/// mmu_v2_0.h); what the walker does with an entry is its own.
fn layout(kind: MmuKind) -> &'static MmuGeometry {
    match kind {
        MmuKind::Host => &MmuGeometry::PMMU,
        MmuKind::Dram => &MmuGeometry::DMMU,
    }
}

/// What a walk found: the page `va` lies in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Leaf {
    /// The page's address as the LAST entry holds it (scrambled for an
    /// HMMU), aligned down to the page size.
    pub(crate) page: u64,
    /// log2 of the page size.
    pub(crate) shift: u32,
    /// The hop holding the LAST entry.
    pub(crate) level: usize,
}

/// Why a walk stopped without a page.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WalkStop {
    /// The entry at this hop is not present.
    NotPresent(usize),
    /// No LAST entry within the MMU's hops.
    NoLeaf,
    /// The hop table entry at this address could not be read (outside
    /// device memory, or host memory the device may not reach).
    Unreadable(u64),
}

/// Walk the tables of the MMU of `kind` from `hop0` for `va` (as the MMU
/// sees it: scrambled for an HMMU). `read` reads one PTE of table memory
/// (`None`: unreadable). O(hops).
pub(crate) fn walk(
    kind: MmuKind,
    hop0: u64,
    va: u64,
    read: &mut dyn FnMut(u64) -> Option<u64>,
) -> Result<Leaf, WalkStop> {
    let l = layout(kind);
    let mut table = hop0;
    for (level, (&shift, &mask)) in l.hop_shifts.iter().zip(l.hop_masks.iter()).enumerate() {
        if level >= l.num_hops {
            break;
        }
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
pub(crate) struct HbmScrambler {
    /// `num_functional_hbms x GAUDI2_HBM_MMU_SCRM_MEM_SIZE`.
    divisor: u64,
}

/// `GAUDI2_HBM_MMU_SCRM_MEM_SIZE`.
const SCRM_MEM_SIZE: u64 = 8 << 20;
/// `1 << GAUDI2_HBM_MMU_SCRM_DIV_SHIFT`: 64 MiB.
const SCRM_UNIT: u64 = 1 << 26;
/// `GAUDI2_HBM_MMU_SCRM_ADDRESS_MASK` (`DRAM_VA_HINT_MASK`).
const SCRM_MASK: u64 = 0xFFFF_FFFF_FFFF;

impl HbmScrambler {
    /// The scrambling of a Gaudi2 with `hbms` working HBMs (5 or 6).
    pub(crate) fn new(hbms: u32) -> Self {
        Self {
            divisor: u64::from(hbms).saturating_mul(SCRM_MEM_SIZE),
        }
    }

    fn in_space(addr: u64) -> bool {
        (DRAM_PHYS_BASE..VA_HBM_SPACE_END).contains(&addr)
    }

    /// Scramble an address an engine issues. O(1).
    pub(crate) fn scramble(&self, addr: u64) -> u64 {
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

    /// Descramble a page address found by a walk. O(1).
    pub(crate) fn descramble(&self, addr: u64) -> u64 {
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

#[kunit_tests(hlrs_sim_walker)]
mod tests {
    use super::*;

    /// Walk tables given as a list of (address, PTE): anything else reads
    /// 0, addresses from `limit` on are unreadable.
    fn walked(
        kind: MmuKind,
        hop0: u64,
        va: u64,
        ptes: &[(u64, u64)],
        limit: u64,
    ) -> Result<Leaf, WalkStop> {
        let mut read = |a: u64| {
            (a < limit).then(|| ptes.iter().find(|(at, _)| *at == a).map_or(0, |(_, v)| *v))
        };
        walk(kind, hop0, va, &mut read)
    }

    #[test]
    fn decodes_hand_written_pmmu_tables() {
        // VA 0xFFF0_0000_0020_3ABC: hop indices 127, 0x1F0, 0, 0, 1, 3.
        let va = 0xFFF0_0000_0020_3ABCu64;
        let hop0 = 0x10_0000u64;
        let t = [0x20_0000u64, 0x30_0000, 0x40_0000, 0x50_0000, 0x60_0000];
        let ptes = [
            (hop0 + 127 * 8, t[0] | 1),
            (t[0] + 0x1F0 * 8, t[1] | 1),
            (t[1], t[2] | 1),
            (t[2], t[3] | 1),
            (t[3] + 8, t[4] | 1),
            // The leaf: flag bits other than PRESENT and LAST are ignored.
            (t[4] + 3 * 8, 0x1234_5000 | 0x800 | 0x7E | 1),
        ];
        let leaf = walked(MmuKind::Host, hop0, va, &ptes, u64::MAX);
        assert_eq!(
            leaf,
            Ok(Leaf {
                page: 0x1234_5000,
                shift: 12,
                level: 5
            })
        );
        // A 2 MiB leaf at hop 4: the address bits below 2 MiB are dropped.
        let mut huge = ptes;
        huge[4] = (t[3] + 8, 0x4000_0000 | 0x1000 | 0x801);
        assert_eq!(
            walked(MmuKind::Host, hop0, va, &huge, u64::MAX).map(|l| (l.page, l.shift)),
            Ok((0x4000_0000, 21))
        );
        // A cleared PRESENT bit stops the walk there, LAST or not.
        let mut gone = ptes;
        gone[2] = (t[1], t[2] | 0x800);
        assert_eq!(
            walked(MmuKind::Host, hop0, va, &gone, u64::MAX),
            Err(WalkStop::NotPresent(2))
        );
        // Tables the MMU cannot read.
        assert_eq!(
            walked(MmuKind::Host, hop0, va, &ptes, 0x50_0000),
            Err(WalkStop::Unreadable(t[3] + 8))
        );
        // Six hops of pointers and no LAST: no page.
        let mut deep = ptes;
        deep[5] = (t[4] + 3 * 8, 0x1234_5000 | 1);
        assert_eq!(
            walked(MmuKind::Host, hop0, va, &deep, u64::MAX),
            Err(WalkStop::NoLeaf)
        );
    }

    #[test]
    fn hmmu_walks_four_hops_to_1g_pages() {
        let hop0 = 0x1001_0000_2FC0_0000u64;
        let va = 0x1001_0040_8765_4321u64;
        // Indices: hop0 8 (bits 63:57 of 0x1001.. = 0x08), hop1 1, hop2 0, hop3 0x102.
        let t = [
            0x1001_0000_2FC0_1000u64,
            0x1001_0000_2FC0_2000,
            0x1001_0000_2FC0_3000,
        ];
        let ptes = [
            (hop0 + 8 * 8, t[0] | 1),
            (t[0] + 8, t[1] | 1),
            (t[1], t[2] | 1),
            (t[2] + 0x102 * 8, 0x1001_0001_4000_0000 | 0x801),
        ];
        assert_eq!(
            walked(MmuKind::Dram, hop0, va, &ptes, u64::MAX),
            Ok(Leaf {
                page: 0x1001_0001_4000_0000,
                shift: 30,
                level: 3
            })
        );
        // A pointer at hop 3 leads nowhere: the HMMU has four hops.
        let mut four = ptes;
        four[3] = (t[2] + 0x102 * 8, 0x1001_0001_4000_0000 | 1);
        assert_eq!(
            walked(MmuKind::Dram, hop0, va, &four, u64::MAX),
            Err(WalkStop::NoLeaf)
        );
    }

    #[test]
    fn scrambling_follows_the_documented_formula() {
        // The table of gaudi2.c:11512-11517 (6 HBMs: 48 MiB -> 64 MiB).
        let s = HbmScrambler::new(6);
        let base = DRAM_PHYS_BASE;
        assert_eq!(s.scramble(base + 0x9C00_0000), base + 0xD000_0000);
        assert_eq!(s.scramble(base + 0x9F00_0000), base + 0xD400_0000);
        assert_eq!(s.descramble(base + 0xD000_0000), base + 0x9C00_0000);
        for hbms in [5u32, 6] {
            let s = HbmScrambler::new(hbms);
            let page = 16 * u64::from(hbms) * (8 << 20);
            // DRAM page k is MMU page k (1 GiB), and back.
            for k in [0u64, 1, 7, 100] {
                let a = base + k * page + 12345;
                assert_eq!(s.scramble(base + k * page), base + k * (1 << 30));
                assert_eq!(s.descramble(s.scramble(a)), a);
            }
        }
        // Outside the DRAM space nothing changes.
        assert_eq!(s.scramble(0xFFF0_0000_0000_1000), 0xFFF0_0000_0000_1000);
        assert_eq!(s.descramble(0x1000_FFFF_FD00_0000), 0x1000_FFFF_FD00_0000);
    }
}
