// SPDX-License-Identifier: GPL-2.0

//! The simulated Gaudi2's STLB: the model core's translation cache
//! ([`crate::model::stlb`], the one the PCI device's model process runs
//! too), one per device for its PMMU and HMMUs, with its entries in memory
//! this host allocates: 128 sets x 4 ways (real STLBs hold hundreds to a
//! few thousand entries).

use crate::hw::backend::MmuKind;
use crate::model::stlb as model;
use kernel::{alloc::KVVec, prelude::*};

#[cfg(CONFIG_KUNIT)]
pub(crate) use model::{set_of, Hit};
pub(crate) use model::{Entry, Side, StlbStats, WAYS};

/// Sets (a power of two).
pub(crate) const SETS: usize = 128;

/// The entries, allocated once per device.
pub(crate) struct Entries(KVVec<Entry>);

impl AsRef<[Entry]> for Entries {
    fn as_ref(&self) -> &[Entry] {
        &self.0
    }
}

impl AsMut<[Entry]> for Entries {
    fn as_mut(&mut self) -> &mut [Entry] {
        &mut self.0
    }
}

/// The STLB of one simulated device.
pub(crate) type Stlb = model::Stlb<Entries>;

/// An empty STLB of `SETS x WAYS` entries. O(entries).
pub(crate) fn new() -> Result<Stlb> {
    let n = SETS * WAYS;
    let entries = KVVec::from_elem(Entry::EMPTY, n, GFP_KERNEL)?;
    Ok(Stlb::with_storage(Entries(entries), n))
}

/// The side of the STLB an MMU's entries live on. O(1).
pub(crate) fn side(kind: MmuKind) -> Side {
    match kind {
        MmuKind::Host => Side::Host,
        MmuKind::Dram => Side::Dram,
    }
}

#[kunit_tests(hlrs_sim_stlb)]
mod tests {
    use super::*;

    const K4: u32 = 12;
    const M2: u32 = 21;

    #[test]
    fn hits_after_a_fill_per_asid_and_mmu() -> Result {
        let mut s = new()?;
        let va = 0xFFF0_0000_0012_3456u64;
        assert_eq!(s.lookup(Side::Host, 1, va), None);
        s.fill(Side::Host, 1, va, 0x7777_7000, K4);
        let hit = Some(Hit {
            page: 0x7777_7000,
            shift: K4,
            stale: false,
        });
        assert_eq!(s.lookup(Side::Host, 1, va + 0xABC - 0x456), hit);
        // Another ASID, another MMU, the next page: misses.
        assert_eq!(s.lookup(Side::Host, 0, va), None);
        assert_eq!(s.lookup(Side::Dram, 1, va), None);
        assert_eq!(s.lookup(Side::Host, 1, va + 0x1000), None);
        // A 2 MiB entry covers every 4 KiB of it.
        s.fill(Side::Host, 1, 0xFFF0_8000_0020_0000, 0x4000_0000, M2);
        let h = s.lookup(Side::Host, 1, 0xFFF0_8000_003F_F123);
        assert_eq!(h.map(|h| (h.page, h.shift)), Some((0x4000_0000, M2)));
        let st = s.stats();
        assert_eq!((st.hits, st.misses, st.evictions), (2, 4, 0));
        Ok(())
    }

    #[test]
    fn invalidate_range_drops_only_that_asid_s_overlapping_pages() -> Result {
        let mut s = new()?;
        let base = 0xFFF0_0000_0100_0000u64;
        for i in 0..8u64 {
            s.fill(Side::Host, 1, base + i * 0x1000, 0x10_0000 + i * 0x1000, K4);
            s.fill(Side::Host, 0, base + i * 0x1000, 0x20_0000 + i * 0x1000, K4);
        }
        s.fill(Side::Dram, 1, base, 0x1001_0000_4000_0000, 30);
        // Pages 2..5 of ASID 1: a range starting and ending inside pages.
        assert_eq!(
            s.invalidate_range(Side::Host, Some(1), base + 0x2800, base + 0x5001),
            4
        );
        for i in 0..8u64 {
            let hit = s.lookup(Side::Host, 1, base + i * 0x1000).is_some();
            assert_eq!(hit, !(2..6).contains(&i));
            assert!(s.lookup(Side::Host, 0, base + i * 0x1000).is_some());
        }
        // The end is exclusive: a range ending where page 6 starts keeps it.
        assert_eq!(
            s.invalidate_range(Side::Host, Some(1), base + 0x6000 - 1, base + 0x6000),
            0
        );
        assert!(s.lookup(Side::Dram, 1, base).is_some());
        // A full invalidation of one MMU takes every ASID of it, and only it.
        assert_eq!(s.invalidate_all(Side::Host), 4 + 8);
        assert_eq!(s.occupancy(), (1, 0));
        assert_eq!(s.stats().invalidated, 4 + 12);
        Ok(())
    }

    #[test]
    fn probing_a_small_range_drops_what_a_full_scan_drops() -> Result {
        // Two STLBs filled alike; one invalidates by probing, one by scanning.
        let (mut a, mut b) = (new()?, new()?);
        let mut x = 0x2545_F491_4F6C_DD1Du64;
        for _ in 0..600 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let shift = [K4, M2, 30][(x % 3) as usize];
            let kind = if x & 8 != 0 { Side::Dram } else { Side::Host };
            let va = (x >> 8) % (64 << 30);
            for s in [&mut a, &mut b] {
                s.fill(kind, (x >> 4) as u32 % 3, va, va, shift);
            }
        }
        assert_eq!(
            a.live(Side::Host) + a.live(Side::Dram),
            a.occupancy().0 as u64
        );
        for i in 0..200u64 {
            let start = (i * 0x1234_5000) % (64 << 30);
            let end = start + (i % 5 + 1) * 4096;
            let kind = if i % 2 == 0 { Side::Dram } else { Side::Host };
            let drop = Entry::clear;
            let n = a.probe(kind, (i % 3) as u32, (start, end), drop);
            assert_eq!(n, b.scan(kind, Some((i % 3) as u32), (start, end), drop));
        }
        assert_eq!(a.occupancy(), b.occupancy());
        // Once every entry is gone an invalidation looks at nothing.
        a.invalidate_all(Side::Host);
        a.invalidate_all(Side::Dram);
        assert_eq!((a.live(Side::Host), a.live(Side::Dram)), (0, 0));
        assert_eq!(a.invalidate_range(Side::Host, Some(0), 0, u64::MAX), 0);
        Ok(())
    }

    #[test]
    fn a_full_set_evicts_its_least_recently_used_entry() -> Result {
        let mut s = new()?;
        // Pages SETS apart share a set (same ASID, size and MMU).
        let va = |i: u64| 0xFFF0_0000_0000_0000u64 + (5 + i * SETS as u64) * 0x1000;
        let set = set_of(SETS, Side::Host, 1, K4, va(0) >> K4);
        for i in 0..WAYS as u64 {
            assert_eq!(set_of(SETS, Side::Host, 1, K4, va(i) >> K4), set);
            s.fill(Side::Host, 1, va(i), i << 12, K4);
        }
        // Touch way 0, so way 1 is the least recently used.
        assert!(s.lookup(Side::Host, 1, va(0)).is_some());
        s.fill(Side::Host, 1, va(WAYS as u64), 0xAB_C000, K4);
        assert_eq!(s.stats().evictions, 1);
        assert!(s.lookup(Side::Host, 1, va(1)).is_none());
        for i in [0, 2, 3, WAYS as u64] {
            assert!(s.lookup(Side::Host, 1, va(i)).is_some());
        }
        // The whole cache holds SETS x WAYS entries, no more.
        for i in 0..(2 * SETS * WAYS) as u64 {
            s.fill(Side::Dram, 1, i << 30, i << 30, 30);
        }
        assert_eq!(s.occupancy().0, SETS * WAYS);
        Ok(())
    }

    #[test]
    fn skipped_invalidations_leave_stale_entries_that_still_translate() -> Result {
        let mut s = new()?;
        let va = 0x1001_0000_4000_0000u64;
        s.fill(Side::Dram, 1, va, 0x1001_0001_4000_0000, 30);
        s.fill(Side::Dram, 1, va + (1 << 30), 0x1001_0002_4000_0000, 30);
        assert_eq!(s.skip_range(Side::Dram, 1, va, va + 1), 1);
        let h = s.lookup(Side::Dram, 1, va + 5);
        assert_eq!(
            h.map(|h| (h.page, h.stale)),
            Some((0x1001_0001_4000_0000, true))
        );
        let h = s.lookup(Side::Dram, 1, va + (1 << 30));
        assert_eq!(h.map(|h| h.stale), Some(false));
        let st = s.stats();
        assert_eq!((st.skipped, st.left_stale, st.stale_hits), (1, 1, 1));
        assert_eq!(s.occupancy(), (2, 1));
        // The next real invalidation takes them.
        assert_eq!(s.skip_all(Side::Dram), 2);
        assert_eq!(s.invalidate_all(Side::Dram), 2);
        assert_eq!(s.lookup(Side::Dram, 1, va), None);
        Ok(())
    }
}
