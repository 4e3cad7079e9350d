// SPDX-License-Identifier: GPL-2.0

//! One MMU's translation cache (STLB): a fixed number of fully associative
//! entries with least-recently-used replacement, keyed by (ASID, page) and
//! holding the page a walk found and its size (4 KiB, 2 MiB, 1 GiB, any
//! size a LAST entry gives).
//!
//! Entries come in only by [`Stlb::fill`] after a walk and go only by an
//! invalidation ([`Stlb::invalidate_all`], [`Stlb::invalidate_range`]) or
//! when a fill needs room: a PTE the driver changes without invalidating
//! keeps translating to the old page, as on hardware, so a test can tell a
//! missed invalidation.
//!
//! Range semantics are the hardware's (`gaudi2_mmu_invalidate_cache_trigger`,
//! gaudi2/gaudi2.c:6112-6138): the registers hold 4 KiB page numbers, the
//! start exclusive (the driver writes `start - 1`) and the end inclusive, so
//! a page starting exactly at the driver's `end` is dropped too.

/// Entries per STLB (real STLBs hold hundreds to a few thousand; a small
/// cache makes evictions and stale entries easy to reach in tests).
pub const ENTRIES: usize = 16;

/// One cached translation.
#[derive(Clone, Copy, Debug, Default)]
struct Entry {
    valid: bool,
    asid: u16,
    /// log2 of the page size.
    shift: u8,
    /// The page number (VA >> shift, the VA as the MMU sees it).
    vpn: u64,
    /// The page the walk found.
    page: u64,
    /// LRU stamp: the cache's clock at the last use.
    used: u64,
}

impl Entry {
    /// The 4 KiB page numbers the entry covers, first and last.
    fn pfns(&self) -> (u64, u64) {
        let first = self
            .vpn
            .checked_shl(u32::from(self.shift))
            .map_or(u64::MAX, |va| va >> 12);
        let count = 1u64
            .checked_shl(u32::from(self.shift).saturating_sub(12))
            .unwrap_or(u64::MAX);
        (first, first.saturating_add(count - 1))
    }
}

/// A translation the cache answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hit {
    /// The page (as the walk found it), aligned to its size.
    pub page: u64,
    /// log2 of the page size.
    pub shift: u32,
}

/// The cache.
pub struct Stlb {
    entries: [Entry; ENTRIES],
    clock: u64,
}

impl Default for Stlb {
    fn default() -> Self {
        Self::new()
    }
}

impl Stlb {
    /// An empty cache. O(ENTRIES).
    pub const fn new() -> Self {
        const EMPTY: Entry = Entry {
            valid: false,
            asid: 0,
            shift: 0,
            vpn: 0,
            page: 0,
            used: 0,
        };
        Self {
            entries: [EMPTY; ENTRIES],
            clock: 0,
        }
    }

    /// The cached translation of `va` for `asid`, if any (marking it
    /// used). O(ENTRIES).
    pub fn lookup(&mut self, asid: u16, va: u64) -> Option<Hit> {
        self.clock = self.clock.wrapping_add(1);
        let now = self.clock;
        let e = self.entries.iter_mut().find(|e| {
            e.valid
                && e.asid == asid
                && va
                    .checked_shr(u32::from(e.shift))
                    .is_some_and(|v| v == e.vpn)
        })?;
        e.used = now;
        Some(Hit {
            page: e.page,
            shift: u32::from(e.shift),
        })
    }

    /// Cache the page a walk found for `va` (replacing the least recently
    /// used entry when full). O(ENTRIES).
    pub fn fill(&mut self, asid: u16, va: u64, page: u64, shift: u32) {
        let (Ok(shift8), Some(vpn)) = (u8::try_from(shift), va.checked_shr(shift)) else {
            return;
        };
        self.clock = self.clock.wrapping_add(1);
        let used = self.clock;
        let victim =
            self.entries
                .iter_mut()
                .min_by_key(|e| if e.valid { e.used.saturating_add(1) } else { 0 });
        if let Some(e) = victim {
            *e = Entry {
                valid: true,
                asid,
                shift: shift8,
                vpn,
                page,
                used,
            };
        }
    }

    /// Drop every entry; returns how many were valid. O(ENTRIES).
    pub fn invalidate_all(&mut self) -> usize {
        self.drop_where(|_| true)
    }

    /// Drop the entries of `asid` (every ASID if `None`) that cover a 4 KiB
    /// page `p` with `after < p <= last`; returns how many. O(ENTRIES).
    pub fn invalidate_range(&mut self, asid: Option<u16>, after: u64, last: u64) -> usize {
        self.drop_where(|e| {
            let (first, end) = e.pfns();
            asid.is_none_or(|a| a == e.asid) && first <= last && end > after
        })
    }

    /// The valid entries. O(ENTRIES).
    pub fn occupancy(&self) -> usize {
        self.entries.iter().filter(|e| e.valid).count()
    }

    fn drop_where(&mut self, mut hit: impl FnMut(&Entry) -> bool) -> usize {
        let mut n = 0;
        for e in self.entries.iter_mut().filter(|e| e.valid) {
            if hit(e) {
                e.valid = false;
                n += 1;
            }
        }
        n
    }
}
