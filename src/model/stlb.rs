// SPDX-License-Identifier: GPL-2.0

//! Gaudi2's STLB: the translation cache in front of the page walker, the
//! one both hosts run (host 1 keeps one per simulated device, in storage it
//! allocates; host 2 one per MMU, in a fixed array).
//!
//! Set associative: [`WAYS`] ways per set, as many sets as the storage
//! holds ways (a power of two), true LRU in a set. Keyed by (side, ASID,
//! page), where the side is the PMMU's ([`Side::Host`]) or the HMMUs'
//! ([`Side::Dram`]); each entry holds the page a walk found and its size
//! (4 KiB, 2 MiB, 1 GiB HMMU pages, any size a LAST entry gives).
//!
//! Entries come in only by [`Stlb::fill`] after a walk (or by
//! [`Stlb::translate`], which walks on a miss), and go only by an
//! invalidation ([`Stlb::invalidate_range`], [`Stlb::invalidate_all`]) or
//! when a fill needs their way. A PTE the driver changes without
//! invalidating keeps translating to the old page, as on hardware, so a
//! test can tell a missed invalidation. An invalidation a host was told to
//! skip (fault injection) leaves its entries in place but marks them stale
//! ([`Stlb::skip_range`], [`Stlb::skip_all`]): they keep translating, and
//! every use of one is counted.
//!
//! Ranges are `[start, end)` in addresses as the MMU sees them (scrambled
//! for an HMMU): exactly the entries whose page overlaps it are dropped.
//! The register interface's page numbers (start exclusive, end inclusive,
//! `gaudi2_mmu_invalidate_cache_trigger`, gaudi2/gaudi2.c:6112-6138) are
//! converted by the MMU block (`super::mmu`).
//!
//! Kernel-free: no allocation; the host provides the entries
//! ([`Stlb::with_storage`]).

use super::walker::{self, HbmScrambler, Leaf, Tables, WalkStop};

/// Ways per set.
pub const WAYS: usize = 4;

/// Most (page size, page) pairs a range invalidation probes set by set;
/// larger ranges scan every entry.
const PROBES: u64 = 32;

/// Which MMUs an entry belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    /// The PMMU: host VAs to bus addresses.
    Host,
    /// The HMMUs: DRAM VAs (scrambled) to DRAM pages.
    Dram,
}

impl Side {
    fn index(self) -> usize {
        match self {
            Self::Host => 0,
            Self::Dram => 1,
        }
    }
}

/// One cached translation.
#[derive(Clone, Copy, Debug, Default)]
pub struct Entry {
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
    /// An invalid entry (what storage starts as).
    pub const EMPTY: Self = Self {
        valid: false,
        stale: false,
        dram: false,
        shift: 0,
        asid: 0,
        vpn: 0,
        page: 0,
        used: 0,
    };

    fn is(&self, dram: bool, asid: u32) -> bool {
        self.valid && self.dram == dram && self.asid == asid
    }

    /// Drop it.
    pub fn clear(&mut self) {
        self.valid = false;
    }

    /// Mark it stale.
    pub fn mark_stale(&mut self) {
        self.stale = true;
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

/// What the STLB has done since it was created.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StlbStats {
    /// Lookups answered from the cache.
    pub hits: u64,
    /// Lookups that missed (each followed by a walk).
    pub misses: u64,
    /// Walks.
    pub walks: u64,
    /// Walks that found no page (page faults, unreadable tables).
    pub walk_faults: u64,
    /// Entries evicted to make room.
    pub evictions: u64,
    /// Entries dropped by invalidations.
    pub invalidated: u64,
    /// Invalidations skipped on purpose (fault injection).
    pub skipped: u64,
    /// Entries left stale by skipped invalidations.
    pub left_stale: u64,
    /// Hits on stale entries: accesses through a translation the driver
    /// had invalidated.
    pub stale_hits: u64,
}

/// A translation found in the STLB.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hit {
    /// The page (as the LAST entry held it).
    pub page: u64,
    /// log2 of its size.
    pub shift: u32,
    /// Whether an invalidation covering it was skipped.
    pub stale: bool,
}

/// Where [`Stlb::translate`] took an address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Translation {
    /// The bus address (PMMU) or DRAM physical address (HMMU, descrambled).
    pub addr: u64,
    /// It came from the cache.
    pub hit: bool,
    /// It came from an entry an invalidation should have dropped.
    pub stale: bool,
}

/// Why [`Stlb::translate`] found no page.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Miss {
    /// The ASID has no hop 0.
    NoHop0,
    /// The walk stopped.
    Walk(WalkStop),
}

/// The translation cache.
///
/// # Invariants
///
/// `entries` holds `sets x WAYS` entries (`sets` a power of two, 0 if the
/// storage is too small), set `s` at `s x WAYS ..`; bit `k` of
/// `shifts[side]` is set if an entry of that side with shift `k` may
/// exist; `live[side]` is the number of valid entries of that side.
pub struct Stlb<S> {
    entries: S,
    sets: usize,
    clock: u64,
    shifts: [u64; 2],
    live: [u64; 2],
    stats: StlbStats,
}

/// The set of a page: the low bits of its number, mixed with the ASID,
/// the page size and the side. O(1).
pub fn set_of(sets: usize, side: Side, asid: u32, shift: u32, vpn: u64) -> usize {
    let mix = vpn ^ (u64::from(asid) << 3) ^ u64::from(shift) ^ ((side.index() as u64) << 5);
    (mix as usize) & sets.saturating_sub(1)
}

impl<S: AsRef<[Entry]> + AsMut<[Entry]>> Stlb<S> {
    /// An STLB over `entries` (all [`Entry::EMPTY`]); a length that is not
    /// `WAYS` times a power of two is rounded down to one. O(1).
    pub const fn with_storage(entries: S, len: usize) -> Self {
        let sets = len / WAYS;
        let sets = if sets == 0 {
            0
        } else {
            1usize << (usize::BITS - 1 - sets.leading_zeros())
        };
        Self {
            entries,
            sets,
            clock: 0,
            shifts: [0; 2],
            live: [0; 2],
            stats: StlbStats {
                hits: 0,
                misses: 0,
                walks: 0,
                walk_faults: 0,
                evictions: 0,
                invalidated: 0,
                skipped: 0,
                left_stale: 0,
                stale_hits: 0,
            },
        }
    }

    /// Sets of the cache. O(1).
    pub fn sets(&self) -> usize {
        self.sets
    }

    /// The statistics. O(1).
    pub fn stats(&self) -> StlbStats {
        self.stats
    }

    /// Valid entries, and how many of them are stale. O(entries): tests and
    /// debugfs.
    pub fn occupancy(&self) -> (usize, usize) {
        let all = self.entries.as_ref();
        let valid = all.iter().filter(|e| e.valid).count();
        let stale = all.iter().filter(|e| e.valid && e.stale).count();
        (valid, stale)
    }

    fn set_mut(&mut self, set: usize) -> &mut [Entry] {
        let start = set.saturating_mul(WAYS);
        self.entries
            .as_mut()
            .get_mut(start..start.saturating_add(WAYS))
            .unwrap_or(&mut [])
    }

    /// Translate `va` of `asid` through the MMUs of `side`: a hit, or a
    /// walk of the tables at `hop0` (`read` gives a table entry by its
    /// address) and a fill. The HMMUs see the VA scrambled and the page
    /// they find descrambled. O(page sizes cached x ways + hops on a miss).
    pub fn translate(
        &mut self,
        (side, scrambler): (Side, &HbmScrambler),
        asid: u32,
        va: u64,
        hop0: Option<u64>,
        read: &mut dyn FnMut(u64) -> Option<u64>,
    ) -> Result<Translation, Miss> {
        let key = match side {
            Side::Dram => scrambler.scramble(va),
            Side::Host => va,
        };
        let (page, shift, hit, stale) = match self.lookup(side, asid, key) {
            Some(h) => (h.page, h.shift, true, h.stale),
            None => {
                let tables = match side {
                    Side::Dram => Tables::Hmmu,
                    Side::Host => Tables::Pmmu,
                };
                let leaf = match hop0 {
                    Some(h) => walker::walk(tables, h, key, read).map_err(Miss::Walk),
                    None => Err(Miss::NoHop0),
                };
                self.count_walk(leaf.is_ok());
                let Leaf { page, shift, .. } = leaf?;
                self.fill(side, asid, key, page, shift);
                (page, shift, false, false)
            }
        };
        let in_page = 1u64
            .checked_shl(shift)
            .map_or(u64::MAX, |size| size.saturating_sub(1));
        let addr = page | (key & in_page);
        let addr = match side {
            Side::Dram => scrambler.descramble(addr),
            Side::Host => addr,
        };
        Ok(Translation { addr, hit, stale })
    }

    /// Look up `va` (as the MMU sees it) of `asid` on `side`, counting a
    /// hit or a miss. O(page sizes cached x ways).
    pub fn lookup(&mut self, side: Side, asid: u32, va: u64) -> Option<Hit> {
        let dram = side == Side::Dram;
        let mask = self.shifts.get(side.index()).copied().unwrap_or(0);
        self.clock = self.clock.wrapping_add(1);
        let now = self.clock;
        let sets = self.sets;
        let mut found = None;
        for shift in (0..64u32).filter(|s| mask & (1u64 << s) != 0) {
            let vpn = va >> shift;
            let set = set_of(sets, side, asid, shift, vpn);
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
    pub fn count_walk(&mut self, found: bool) {
        self.stats.walks = self.stats.walks.saturating_add(1);
        if !found {
            self.stats.walk_faults = self.stats.walk_faults.saturating_add(1);
        }
    }

    /// Cache the page a walk found for `va` of `asid`: `page`, of `1 <<
    /// shift` bytes. Takes a free way of the set, or evicts its least
    /// recently used entry. O(ways).
    pub fn fill(&mut self, side: Side, asid: u32, va: u64, page: u64, shift: u32) {
        if shift >= 64 || self.sets == 0 {
            return;
        }
        let dram = side == Side::Dram;
        let vpn = va >> shift;
        self.clock = self.clock.wrapping_add(1);
        let now = self.clock;
        let set = set_of(self.sets, side, asid, shift, vpn);
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
                gone = Some(if e.dram { Side::Dram } else { Side::Host });
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
        self.count_live(side, 1);
        if let Some(m) = self.shifts.get_mut(side.index()) {
            *m |= 1u64 << shift;
        }
    }

    fn count_live(&mut self, side: Side, delta: i64) {
        if let Some(n) = self.live.get_mut(side.index()) {
            *n = n.saturating_add_signed(delta);
        }
    }

    /// Valid entries of `side`. O(1).
    pub fn live(&self, side: Side) -> u64 {
        self.live.get(side.index()).copied().unwrap_or(0)
    }

    /// Apply `f` to every valid entry of `side` (and of `asid`, if given)
    /// whose page overlaps `[start, end)`; how many. O(1) when no entry of
    /// `side` is valid; O(page sizes x pages x ways) for a range of at most
    /// [`PROBES`] pages of the sizes cached (only the sets they map to);
    /// O(entries) otherwise.
    fn each(
        &mut self,
        side: Side,
        asid: Option<u32>,
        (start, end): (u64, u64),
        f: fn(&mut Entry),
    ) -> u64 {
        if self.live(side) == 0 || start >= end {
            return 0;
        }
        let mask = self.shifts.get(side.index()).copied().unwrap_or(0);
        let pages = |shift: u32| {
            ((end - 1) >> shift)
                .saturating_sub(start >> shift)
                .saturating_add(1)
        };
        let probes = (0..64u32)
            .filter(|s| mask & (1u64 << s) != 0)
            .fold(0u64, |n, s| n.saturating_add(pages(s)));
        match asid {
            Some(a) if probes <= PROBES => self.probe(side, a, (start, end), f),
            _ => self.scan(side, asid, (start, end), f),
        }
    }

    /// [`Self::each`] for one ASID, looking only at the sets of the range's
    /// pages. O(page sizes x pages x ways).
    pub fn probe(
        &mut self,
        side: Side,
        asid: u32,
        (start, end): (u64, u64),
        f: fn(&mut Entry),
    ) -> u64 {
        if start >= end {
            return 0;
        }
        let dram = side == Side::Dram;
        let mask = self.shifts.get(side.index()).copied().unwrap_or(0);
        let sets = self.sets;
        let mut n = 0u64;
        for shift in (0..64u32).filter(|s| mask & (1u64 << s) != 0) {
            for vpn in (start >> shift)..=((end - 1) >> shift) {
                let set = set_of(sets, side, asid, shift, vpn);
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
    pub fn scan(
        &mut self,
        side: Side,
        asid: Option<u32>,
        (start, end): (u64, u64),
        f: fn(&mut Entry),
    ) -> u64 {
        let dram = side == Side::Dram;
        let mut n = 0u64;
        for e in self.entries.as_mut().iter_mut() {
            let ours = e.valid && e.dram == dram && asid.is_none_or(|a| e.asid == a);
            if ours && e.overlaps(start, end) {
                f(e);
                n = n.saturating_add(1);
            }
        }
        n
    }

    /// Drop the entries of `side` (of `asid`, or of every ASID) whose page
    /// overlaps `[start, end)` (addresses as the MMU sees them). Returns
    /// how many. O(entries) at worst (see [`Self::each`]).
    pub fn invalidate_range(&mut self, side: Side, asid: Option<u32>, start: u64, end: u64) -> u64 {
        let n = self.each(side, asid, (start, end), Entry::clear);
        self.count_live(side, -(n as i64));
        self.stats.invalidated = self.stats.invalidated.saturating_add(n);
        n
    }

    /// Drop every entry of `side`, of every ASID. Returns how many.
    /// O(entries).
    pub fn invalidate_all(&mut self, side: Side) -> u64 {
        let n = self.each(side, None, (0, u64::MAX), Entry::clear);
        if let Some(m) = self.shifts.get_mut(side.index()) {
            *m = 0;
        }
        if let Some(l) = self.live.get_mut(side.index()) {
            *l = 0;
        }
        self.stats.invalidated = self.stats.invalidated.saturating_add(n);
        n
    }

    /// A skipped [`Self::invalidate_range`]: the entries stay, marked
    /// stale. Returns how many. O(entries).
    pub fn skip_range(&mut self, side: Side, asid: u32, start: u64, end: u64) -> u64 {
        let n = self.each(side, Some(asid), (start, end), Entry::mark_stale);
        self.count_skip(n)
    }

    /// A skipped [`Self::invalidate_all`]: the entries stay, marked stale.
    /// Returns how many. O(entries).
    pub fn skip_all(&mut self, side: Side) -> u64 {
        let n = self.each(side, None, (0, u64::MAX), Entry::mark_stale);
        self.count_skip(n)
    }

    fn count_skip(&mut self, n: u64) -> u64 {
        self.stats.skipped = self.stats.skipped.saturating_add(1);
        self.stats.left_stale = self.stats.left_stale.saturating_add(n);
        n
    }
}
