// SPDX-License-Identifier: GPL-2.0

//! The page-walk oracle: a software model of the Gaudi2 MMU walk.
//!
//! It reads the page tables exactly as the hardware does — from their real
//! memory (for the DMMU: device DRAM, through the backend), never from the
//! driver's shadows — starting at the ASID's hop 0 and following PRESENT
//! entries with the geometry's masks and shifts until an entry with LAST set
//! (upstream `hl_mmu_va_to_pa` / `hl_mmu_get_tlb_info`, common/mmu/mmu.c:476-585).
//! Tests use it to prove that every mapped byte translates to the right DRAM
//! page and that nothing translates after an unmap; debugfs exposes it.

use crate::{asic::MmuGeometry, mmu::pte::Pte, mmu::pte::Scrambler};
use kernel::prelude::*;

/// Why a walk failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WalkFault {
    /// The entry at this hop level is not present.
    NotPresent(usize),
    /// No LAST entry within the geometry's hops.
    NoLeaf,
    /// Reading the page tables failed.
    Read,
}

/// A successful walk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Translation {
    /// The physical address `va` reaches.
    pub(crate) pa: u64,
    /// The hop level of the leaf.
    pub(crate) leaf: usize,
    /// The hop tables visited, hop 0 first (up to 6).
    pub(crate) hops: [u64; 6],
}

/// Translate `va` through the tree at `hop0`. `read` reads one 64-bit PTE of
/// the tables' real memory. For the DMMU pass the device's scrambler: the VA
/// is scrambled before the walk and the leaf address descrambled after, as
/// Gaudi2's HMMUs and HBM address decoding do. O(hops).
pub(crate) fn translate(
    geo: &MmuGeometry,
    read: &dyn Fn(u64) -> Result<u64>,
    hop0: u64,
    va: u64,
    scrambler: Option<&Scrambler>,
) -> Result<Translation, WalkFault> {
    let sva = scrambler.map_or(va, |s| s.scramble(va));
    let mut hops = [0u64; 6];
    let mut hop = hop0;
    for lvl in 0..geo.num_hops {
        if let Some(slot) = hops.get_mut(lvl) {
            *slot = hop;
        }
        let idx = geo.pte_index(lvl, sva).ok_or(WalkFault::NoLeaf)?;
        let raw = read(hop + idx * 8).map_err(|_| WalkFault::Read)?;
        match Pte::decode(raw) {
            Pte::None => return Err(WalkFault::NotPresent(lvl)),
            Pte::Hop(next) => hop = next,
            Pte::Page(page) => {
                let shift = *geo.hop_shifts.get(lvl).ok_or(WalkFault::NoLeaf)?;
                let in_page = (1u64 << shift) - 1;
                let spa = (page & !in_page) | (sva & in_page);
                let pa = scrambler.map_or(spa, |s| s.descramble(spa));
                return Ok(Translation {
                    pa,
                    leaf: lvl,
                    hops,
                });
            }
        }
    }
    Err(WalkFault::NoLeaf)
}
