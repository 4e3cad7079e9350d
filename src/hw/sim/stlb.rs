// SPDX-License-Identifier: GPL-2.0

//! The simulated Gaudi2's STLB: one translation cache per device for its
//! PMMU and HMMUs, set associative (128 sets x 4 ways, true LRU in a set;
//! real STLBs hold hundreds to a few thousand entries), keyed by (MMU, ASID,
//! page) and holding the page a walk found and its size (4 KiB, 2 MiB,
//! 1 GiB HMMU pages, any size a LAST entry gives).
//!
//! Entries come in only by [`Stlb::fill`] after a walk, and go only by an
//! invalidation ([`Stlb::invalidate_range`], [`Stlb::invalidate_all`]) or
//! when a fill needs their way ([`Stlb::fill`] evicts the least recently
//! used entry of the set). An invalidation the device was told to skip
//! (fault injection) leaves its entries in place but marks them stale
//! ([`Stlb::skip_range`], [`Stlb::skip_all`]): they keep translating, as on
//! a device that missed the invalidation, and every use of one is counted,
//! so a test sees that an access went through a translation the driver had
//! invalidated.
//!
//! Range semantics (upstream `gaudi2_mmu_invalidate_cache_range`): the
//! driver invalidates `[va, va + size)` of one ASID (the HMMUs get the range
//! scrambled, which the caller does). The hardware registers take the start
//! exclusive (`start - 1`) and the end as given, in 4 KiB units, so the
//! hardware also drops a page starting exactly at the end; this model drops
//! exactly the entries whose page overlaps `[start, end)`, which catches a
//! driver that relies on the extra page. A PMMU range starting at 0 is a
//! full invalidation upstream; the caller does that.

use crate::hw::backend::MmuKind;
use kernel::{alloc::KVVec, prelude::*};

/// Sets (a power of two).
pub(crate) const SETS: usize = 128;
/// Ways per set.
pub(crate) const WAYS: usize = 4;

/// One cached translation.
#[derive(Clone, Copy, Debug, Default)]
struct Entry {
    valid: bool,
    /// An invalidation covering it was skipped (fault injection).
    stale: bool,
    dram: bool,
    shift: u32,
    asid: u32,
    /// The page number (VA >> shift, the VA as the MMU sees it).
    vpn: u64,
    /// The page the walk found.
    page: u64,
    /// LRU stamp: the STLB clock at the last use.
    used: u64,
}

impl Entry {
    fn is(&self, dram: bool, asid: u32) -> bool {
        self.valid && self.dram == dram && self.asid == asid
    }

    /// Whether the entry's page overlaps `[start, end)`.
    fn overlaps(&self, start: u64, end: u64) -> bool {
        let first = self.vpn.checked_shl(self.shift).unwrap_or(u64::MAX);
        let last = (1u64.checked_shl(self.shift).unwrap_or(0))
            .checked_sub(1)
            .and_then(|m| first.checked_add(m))
            .unwrap_or(u64::MAX);
        first < end && last >= start
    }
}

/// What the STLB has done since the device was created.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct StlbStats {
    /// Lookups answered from the cache.
    pub(crate) hits: u64,
    /// Lookups that missed (each followed by a walk).
    pub(crate) misses: u64,
    /// Walks, and those that found no page.
    pub(crate) walks: u64,
    /// Walks that found no page (page faults, unreadable tables).
    pub(crate) walk_faults: u64,
    /// Entries evicted to make room.
    pub(crate) evictions: u64,
    /// Entries dropped by invalidations.
    pub(crate) invalidated: u64,
    /// Invalidations skipped on purpose (fault injection), and the entries
    /// they left behind marked stale.
    pub(crate) skipped: u64,
    /// Entries left stale by skipped invalidations.
    pub(crate) left_stale: u64,
    /// Hits on stale entries: accesses through a translation the driver
    /// had invalidated.
    pub(crate) stale_hits: u64,
}

/// A translation found in the STLB.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Hit {
    /// The page (as the LAST entry held it).
    pub(crate) page: u64,
    /// log2 of its size.
    pub(crate) shift: u32,
    /// Whether an invalidation covering it was skipped.
    pub(crate) stale: bool,
}

/// The translation cache of one device.
///
/// # Invariants
///
/// `entries` has `SETS x WAYS` entries, set `s` at `s x WAYS ..`; bit `k` of
/// `shifts[kind]` is set if an entry of that kind with shift `k` may exist;
/// `live[kind]` is the number of valid entries of that kind.
pub(crate) struct Stlb {
    entries: KVVec<Entry>,
    clock: u64,
    shifts: [u64; 2],
    live: [u64; 2],
    stats: StlbStats,
}

/// Most (page size, page) pairs a range invalidation probes set by set;
/// larger ranges scan every entry.
const PROBES: u64 = 32;

fn kind_index(kind: MmuKind) -> usize {
    match kind {
        MmuKind::Host => 0,
        MmuKind::Dram => 1,
    }
}

/// The set of a page: the low bits of its number, mixed with the ASID,
/// the page size and the MMU. O(1).
pub(crate) fn set_of(kind: MmuKind, asid: u32, shift: u32, vpn: u64) -> usize {
    let mix = vpn ^ (u64::from(asid) << 3) ^ u64::from(shift) ^ ((kind_index(kind) as u64) << 5);
    (mix as usize) & (SETS - 1)
}

impl Stlb {
    /// An empty STLB.
    pub(crate) fn new() -> Result<Self> {
        let mut entries = KVVec::with_capacity(SETS * WAYS, GFP_KERNEL)?;
        for _ in 0..SETS * WAYS {
            entries
                .push_within_capacity(Entry::default())
                .map_err(|_| ENOMEM)?;
        }
        Ok(Self {
            entries,
            clock: 0,
            shifts: [0; 2],
            live: [0; 2],
            stats: StlbStats::default(),
        })
    }

    /// The statistics. O(1).
    pub(crate) fn stats(&self) -> StlbStats {
        self.stats
    }

    /// Valid entries, and how many of them are stale. O(entries): tests and
    /// debugfs.
    pub(crate) fn occupancy(&self) -> (usize, usize) {
        let valid = self.entries.iter().filter(|e| e.valid);
        let stale = self.entries.iter().filter(|e| e.valid && e.stale).count();
        (valid.count(), stale)
    }

    fn set_mut(&mut self, set: usize) -> &mut [Entry] {
        let start = set.saturating_mul(WAYS);
        self.entries
            .get_mut(start..start.saturating_add(WAYS))
            .unwrap_or(&mut [])
    }

    /// Look up `va` (as the MMU sees it) of `asid` in the MMU of `kind`,
    /// counting a hit or a miss. O(page sizes cached x ways).
    pub(crate) fn lookup(&mut self, kind: MmuKind, asid: u32, va: u64) -> Option<Hit> {
        let dram = kind == MmuKind::Dram;
        let mask = self.shifts.get(kind_index(kind)).copied().unwrap_or(0);
        self.clock = self.clock.wrapping_add(1);
        let now = self.clock;
        let mut found = None;
        for shift in (0..64u32).filter(|s| mask & (1u64 << s) != 0) {
            let vpn = va >> shift;
            let set = set_of(kind, asid, shift, vpn);
            let hit = self
                .set_mut(set)
                .iter_mut()
                .find(|e| e.is(dram, asid) && e.shift == shift && e.vpn == vpn);
            if let Some(e) = hit {
                e.used = now;
                found = Some(Hit {
                    page: e.page,
                    shift,
                    stale: e.stale,
                });
                break;
            }
        }
        match found {
            Some(h) => {
                self.stats.hits = self.stats.hits.saturating_add(1);
                if h.stale {
                    self.stats.stale_hits = self.stats.stale_hits.saturating_add(1);
                }
            }
            None => self.stats.misses = self.stats.misses.saturating_add(1),
        }
        found
    }

    /// Count a walk, and whether it found a page. O(1).
    pub(crate) fn count_walk(&mut self, found: bool) {
        self.stats.walks = self.stats.walks.saturating_add(1);
        if !found {
            self.stats.walk_faults = self.stats.walk_faults.saturating_add(1);
        }
    }

    /// Cache the page a walk found for `va` of `asid`: `page`, of `1 <<
    /// shift` bytes. Takes a free way of the set, or evicts its least
    /// recently used entry. O(ways).
    pub(crate) fn fill(&mut self, kind: MmuKind, asid: u32, va: u64, page: u64, shift: u32) {
        if shift >= 64 {
            return;
        }
        let dram = kind == MmuKind::Dram;
        let vpn = va >> shift;
        self.clock = self.clock.wrapping_add(1);
        let now = self.clock;
        let set = set_of(kind, asid, shift, vpn);
        let ways = self.set_mut(set);
        let victim = match ways.iter().position(|e| !e.valid) {
            Some(free) => Some((free, false)),
            None => (0..ways.len())
                .min_by_key(|&w| ways.get(w).map_or(u64::MAX, |e| e.used))
                .map(|w| (w, true)),
        };
        let Some((way, evicted)) = victim else {
            return;
        };
        let mut gone = None;
        if let Some(e) = ways.get_mut(way) {
            if e.valid {
                gone = Some(if e.dram { MmuKind::Dram } else { MmuKind::Host });
            }
            *e = Entry {
                valid: true,
                stale: false,
                dram,
                shift,
                asid,
                vpn,
                page,
                used: now,
            };
        }
        if evicted {
            self.stats.evictions = self.stats.evictions.saturating_add(1);
        }
        if let Some(k) = gone {
            self.count_live(k, -1);
        }
        self.count_live(kind, 1);
        if let Some(m) = self.shifts.get_mut(kind_index(kind)) {
            *m |= 1u64 << shift;
        }
    }

    fn count_live(&mut self, kind: MmuKind, delta: i64) {
        if let Some(n) = self.live.get_mut(kind_index(kind)) {
            *n = n.saturating_add_signed(delta);
        }
    }

    /// Valid entries of `kind`. O(1).
    fn live(&self, kind: MmuKind) -> u64 {
        self.live.get(kind_index(kind)).copied().unwrap_or(0)
    }

    /// Apply `f` to every valid entry of `kind` (and of `asid`, if given)
    /// whose page overlaps `[start, end)`; how many. O(1) when no entry of
    /// `kind` is valid; O(page sizes x pages x ways) for a range of at most
    /// [`PROBES`] pages of the sizes cached (only the sets they map to);
    /// O(entries) otherwise.
    fn each(
        &mut self,
        kind: MmuKind,
        asid: Option<u32>,
        (start, end): (u64, u64),
        f: fn(&mut Entry),
    ) -> u64 {
        if self.live(kind) == 0 || start >= end {
            return 0;
        }
        let mask = self.shifts.get(kind_index(kind)).copied().unwrap_or(0);
        let pages = |shift: u32| {
            ((end - 1) >> shift)
                .saturating_sub(start >> shift)
                .saturating_add(1)
        };
        let probes = (0..64u32)
            .filter(|s| mask & (1u64 << s) != 0)
            .fold(0u64, |n, s| n.saturating_add(pages(s)));
        match asid {
            Some(a) if probes <= PROBES => self.probe(kind, a, (start, end), f),
            _ => self.scan(kind, asid, (start, end), f),
        }
    }

    /// [`Self::each`] for one ASID, looking only at the sets of the range's
    /// pages. O(page sizes x pages x ways).
    fn probe(
        &mut self,
        kind: MmuKind,
        asid: u32,
        (start, end): (u64, u64),
        f: fn(&mut Entry),
    ) -> u64 {
        let dram = kind == MmuKind::Dram;
        let mask = self.shifts.get(kind_index(kind)).copied().unwrap_or(0);
        let mut n = 0u64;
        for shift in (0..64u32).filter(|s| mask & (1u64 << s) != 0) {
            for vpn in (start >> shift)..=((end - 1) >> shift) {
                let set = set_of(kind, asid, shift, vpn);
                for e in self.set_mut(set) {
                    if e.is(dram, asid) && e.shift == shift && e.vpn == vpn {
                        f(e);
                        n = n.saturating_add(1);
                    }
                }
            }
        }
        n
    }

    /// [`Self::each`] over every entry. O(entries).
    fn scan(
        &mut self,
        kind: MmuKind,
        asid: Option<u32>,
        (start, end): (u64, u64),
        f: fn(&mut Entry),
    ) -> u64 {
        let dram = kind == MmuKind::Dram;
        let mut n = 0u64;
        for e in self.entries.iter_mut() {
            let ours = e.valid && e.dram == dram && asid.is_none_or(|a| e.asid == a);
            if ours && e.overlaps(start, end) {
                f(e);
                n = n.saturating_add(1);
            }
        }
        n
    }

    /// Drop the entries of `asid` in the MMU of `kind` whose page overlaps
    /// `[start, end)` (addresses as the MMU sees them). Returns how many.
    /// O(entries).
    pub(crate) fn invalidate_range(
        &mut self,
        kind: MmuKind,
        asid: u32,
        start: u64,
        end: u64,
    ) -> u64 {
        let n = self.each(kind, Some(asid), (start, end), |e| e.valid = false);
        self.count_live(kind, -(n as i64));
        self.stats.invalidated = self.stats.invalidated.saturating_add(n);
        n
    }

    /// Drop every entry of the MMU of `kind`, of every ASID. Returns how
    /// many. O(entries).
    pub(crate) fn invalidate_all(&mut self, kind: MmuKind) -> u64 {
        let n = self.each(kind, None, (0, u64::MAX), |e| e.valid = false);
        if let Some(m) = self.shifts.get_mut(kind_index(kind)) {
            *m = 0;
        }
        if let Some(l) = self.live.get_mut(kind_index(kind)) {
            *l = 0;
        }
        self.stats.invalidated = self.stats.invalidated.saturating_add(n);
        n
    }

    /// A skipped [`Self::invalidate_range`]: the entries stay, marked
    /// stale. Returns how many. O(entries).
    pub(crate) fn skip_range(&mut self, kind: MmuKind, asid: u32, start: u64, end: u64) -> u64 {
        let n = self.each(kind, Some(asid), (start, end), |e| e.stale = true);
        self.count_skip(n)
    }

    /// A skipped [`Self::invalidate_all`]: the entries stay, marked stale.
    /// Returns how many. O(entries).
    pub(crate) fn skip_all(&mut self, kind: MmuKind) -> u64 {
        let n = self.each(kind, None, (0, u64::MAX), |e| e.stale = true);
        self.count_skip(n)
    }

    fn count_skip(&mut self, n: u64) -> u64 {
        self.stats.skipped = self.stats.skipped.saturating_add(1);
        self.stats.left_stale = self.stats.left_stale.saturating_add(n);
        n
    }
}

#[kunit_tests(hlrs_sim_stlb)]
mod tests {
    use super::*;

    const K4: u32 = 12;
    const M2: u32 = 21;

    #[test]
    fn hits_after_a_fill_per_asid_and_mmu() -> Result {
        let mut s = Stlb::new()?;
        let va = 0xFFF0_0000_0012_3456u64;
        assert_eq!(s.lookup(MmuKind::Host, 1, va), None);
        s.fill(MmuKind::Host, 1, va, 0x7777_7000, K4);
        let hit = Some(Hit {
            page: 0x7777_7000,
            shift: K4,
            stale: false,
        });
        assert_eq!(s.lookup(MmuKind::Host, 1, va + 0xABC - 0x456), hit);
        // Another ASID, another MMU, the next page: misses.
        assert_eq!(s.lookup(MmuKind::Host, 0, va), None);
        assert_eq!(s.lookup(MmuKind::Dram, 1, va), None);
        assert_eq!(s.lookup(MmuKind::Host, 1, va + 0x1000), None);
        // A 2 MiB entry covers every 4 KiB of it.
        s.fill(MmuKind::Host, 1, 0xFFF0_8000_0020_0000, 0x4000_0000, M2);
        let h = s.lookup(MmuKind::Host, 1, 0xFFF0_8000_003F_F123);
        assert_eq!(h.map(|h| (h.page, h.shift)), Some((0x4000_0000, M2)));
        let st = s.stats();
        assert_eq!((st.hits, st.misses, st.evictions), (2, 4, 0));
        Ok(())
    }

    #[test]
    fn invalidate_range_drops_only_that_asid_s_overlapping_pages() -> Result {
        let mut s = Stlb::new()?;
        let base = 0xFFF0_0000_0100_0000u64;
        for i in 0..8u64 {
            s.fill(
                MmuKind::Host,
                1,
                base + i * 0x1000,
                0x10_0000 + i * 0x1000,
                K4,
            );
            s.fill(
                MmuKind::Host,
                0,
                base + i * 0x1000,
                0x20_0000 + i * 0x1000,
                K4,
            );
        }
        s.fill(MmuKind::Dram, 1, base, 0x1001_0000_4000_0000, 30);
        // Pages 2..5 of ASID 1: a range starting and ending inside pages.
        assert_eq!(
            s.invalidate_range(MmuKind::Host, 1, base + 0x2800, base + 0x5001),
            4
        );
        for i in 0..8u64 {
            let hit = s.lookup(MmuKind::Host, 1, base + i * 0x1000).is_some();
            assert_eq!(hit, !(2..6).contains(&i));
            assert!(s.lookup(MmuKind::Host, 0, base + i * 0x1000).is_some());
        }
        // The end is exclusive: a range ending where page 6 starts keeps it.
        assert_eq!(
            s.invalidate_range(MmuKind::Host, 1, base + 0x6000 - 1, base + 0x6000),
            0
        );
        assert!(s.lookup(MmuKind::Dram, 1, base).is_some());
        // A full invalidation of one MMU takes every ASID of it, and only it.
        assert_eq!(s.invalidate_all(MmuKind::Host), 4 + 8);
        assert_eq!(s.occupancy(), (1, 0));
        assert_eq!(s.stats().invalidated, 4 + 12);
        Ok(())
    }

    #[test]
    fn probing_a_small_range_drops_what_a_full_scan_drops() -> Result {
        // Two STLBs filled alike; one invalidates by probing, one by scanning.
        let (mut a, mut b) = (Stlb::new()?, Stlb::new()?);
        let mut x = 0x2545_F491_4F6C_DD1Du64;
        for _ in 0..600 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let shift = [K4, M2, 30][(x % 3) as usize];
            let kind = if x & 8 != 0 {
                MmuKind::Dram
            } else {
                MmuKind::Host
            };
            let va = (x >> 8) % (64 << 30);
            for s in [&mut a, &mut b] {
                s.fill(kind, (x >> 4) as u32 % 3, va, va, shift);
            }
        }
        assert_eq!(
            a.live(MmuKind::Host) + a.live(MmuKind::Dram),
            a.occupancy().0 as u64
        );
        for i in 0..200u64 {
            let start = (i * 0x1234_5000) % (64 << 30);
            let end = start + (i % 5 + 1) * 4096;
            let kind = if i % 2 == 0 {
                MmuKind::Dram
            } else {
                MmuKind::Host
            };
            let drop = |e: &mut Entry| e.valid = false;
            let n = a.probe(kind, (i % 3) as u32, (start, end), drop);
            assert_eq!(n, b.scan(kind, Some((i % 3) as u32), (start, end), drop));
        }
        assert_eq!(a.occupancy(), b.occupancy());
        // Once every entry is gone an invalidation looks at nothing.
        a.invalidate_all(MmuKind::Host);
        a.invalidate_all(MmuKind::Dram);
        assert_eq!((a.live(MmuKind::Host), a.live(MmuKind::Dram)), (0, 0));
        assert_eq!(a.invalidate_range(MmuKind::Host, 0, 0, u64::MAX), 0);
        Ok(())
    }

    #[test]
    fn a_full_set_evicts_its_least_recently_used_entry() -> Result {
        let mut s = Stlb::new()?;
        // Pages SETS apart share a set (same ASID, size and MMU).
        let va = |i: u64| 0xFFF0_0000_0000_0000u64 + (5 + i * SETS as u64) * 0x1000;
        let set = set_of(MmuKind::Host, 1, K4, va(0) >> K4);
        for i in 0..WAYS as u64 {
            assert_eq!(set_of(MmuKind::Host, 1, K4, va(i) >> K4), set);
            s.fill(MmuKind::Host, 1, va(i), i << 12, K4);
        }
        // Touch way 0, so way 1 is the least recently used.
        assert!(s.lookup(MmuKind::Host, 1, va(0)).is_some());
        s.fill(MmuKind::Host, 1, va(WAYS as u64), 0xAB_C000, K4);
        assert_eq!(s.stats().evictions, 1);
        assert!(s.lookup(MmuKind::Host, 1, va(1)).is_none());
        for i in [0, 2, 3, WAYS as u64] {
            assert!(s.lookup(MmuKind::Host, 1, va(i)).is_some());
        }
        // The whole cache holds SETS x WAYS entries, no more.
        for i in 0..(2 * SETS * WAYS) as u64 {
            s.fill(MmuKind::Dram, 1, i << 30, i << 30, 30);
        }
        assert_eq!(s.occupancy().0, SETS * WAYS);
        Ok(())
    }

    #[test]
    fn skipped_invalidations_leave_stale_entries_that_still_translate() -> Result {
        let mut s = Stlb::new()?;
        let va = 0x1001_0000_4000_0000u64;
        s.fill(MmuKind::Dram, 1, va, 0x1001_0001_4000_0000, 30);
        s.fill(MmuKind::Dram, 1, va + (1 << 30), 0x1001_0002_4000_0000, 30);
        assert_eq!(s.skip_range(MmuKind::Dram, 1, va, va + 1), 1);
        let h = s.lookup(MmuKind::Dram, 1, va + 5);
        assert_eq!(
            h.map(|h| (h.page, h.stale)),
            Some((0x1001_0001_4000_0000, true))
        );
        let h = s.lookup(MmuKind::Dram, 1, va + (1 << 30));
        assert_eq!(h.map(|h| h.stale), Some(false));
        let st = s.stats();
        assert_eq!((st.skipped, st.left_stale, st.stale_hits), (1, 1, 1));
        assert_eq!(s.occupancy(), (2, 1));
        // The next real invalidation takes them.
        assert_eq!(s.skip_all(MmuKind::Dram), 2);
        assert_eq!(s.invalidate_all(MmuKind::Dram), 2);
        assert_eq!(s.lookup(MmuKind::Dram, 1, va), None);
        Ok(())
    }
}
