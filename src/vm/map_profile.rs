// SPDX-License-Identifier: GPL-2.0

//! Where the time of a host MAP goes: cumulative nanoseconds per phase of
//! `map_host_va`, per device, read by debugfs `bench` (and `make bench`, which
//! takes the difference around one 1 GiB MAP).
//!
//! | phase | what it covers |
//! |---|---|
//! | pin | `account_locked_vm`, the page array, `pin_user_pages_fast` |
//! | lookup | the huge-page check and the device address of every page |
//! | account | the VA allocation and the mapping record with its userptr index entry |
//! | pte | the page-table writes and the MMU cache invalidation |
//!
//! Five clock reads per host MAP (tens of nanoseconds next to a pin of even
//! one page); no lock, relaxed atomics only.

use kernel::{
    prelude::*,
    sync::atomic::{Atomic, Relaxed},
    time::{Instant, Monotonic},
};

/// One phase of a host MAP.
#[derive(Clone, Copy)]
pub(crate) enum Phase {
    /// Charging `locked_vm` and pinning the pages.
    Pin = 0,
    /// Huge-page check and device addresses.
    Lookup = 1,
    /// VA allocation and the mapping/userptr records.
    Account = 2,
    /// PTE writes and invalidation.
    Pte = 3,
}

/// Cumulative time per [`Phase`] and the number of host MAPs that completed.
pub(crate) struct HostMapProfile {
    ns: [Atomic<u64>; 4],
    maps: Atomic<u64>,
}

impl HostMapProfile {
    /// All zero.
    pub(crate) const fn new() -> Self {
        Self {
            ns: [
                Atomic::new(0),
                Atomic::new(0),
                Atomic::new(0),
                Atomic::new(0),
            ],
            maps: Atomic::new(0),
        }
    }

    /// `[pin, lookup, account, pte]` nanoseconds and the MAP count. O(1).
    pub(crate) fn snapshot(&self) -> ([u64; 4], u64) {
        let [a, b, c, d] = &self.ns;
        (
            [
                a.load(Relaxed),
                b.load(Relaxed),
                c.load(Relaxed),
                d.load(Relaxed),
            ],
            self.maps.load(Relaxed),
        )
    }
}

/// Times the phases of one host MAP into a [`HostMapProfile`]; a MAP that
/// fails part-way still adds the phases it went through, but is not counted.
pub(crate) struct PhaseTimer<'a> {
    profile: Option<&'a HostMapProfile>,
    last: Instant<Monotonic>,
}

impl<'a> PhaseTimer<'a> {
    /// Start timing into `profile` (`None`: a MAP that is not profiled).
    pub(crate) fn start(profile: Option<&'a HostMapProfile>) -> Self {
        Self {
            profile,
            last: Instant::now(),
        }
    }

    /// The time since the previous lap (or the start) was spent in `phase`. O(1).
    pub(crate) fn lap(&mut self, phase: Phase) {
        if let Some(p) = self.profile {
            let now = Instant::now();
            let ns = u64::try_from((now - self.last).as_nanos()).unwrap_or(0);
            if let Some(slot) = p.ns.get(phase as usize) {
                slot.fetch_add(ns, Relaxed);
            }
            self.last = now;
        }
    }

    /// The MAP completed.
    pub(crate) fn done(self) {
        if let Some(p) = self.profile {
            p.maps.fetch_add(1, Relaxed);
        }
    }
}

#[kunit_tests(hlrs_map_profile)]
mod tests {
    use super::*;

    #[test]
    fn laps_add_to_their_phase_and_only_completed_maps_count() {
        let p = HostMapProfile::new();
        let mut t = PhaseTimer::start(Some(&p));
        t.lap(Phase::Pin);
        t.lap(Phase::Pte);
        t.done();
        {
            // A MAP that fails after its lookup: the lap counts, the MAP not.
            let mut failed = PhaseTimer::start(Some(&p));
            failed.lap(Phase::Lookup);
        }
        PhaseTimer::start(None).done();
        let (ns, maps) = p.snapshot();
        assert_eq!(maps, 1);
        // Clocks may not advance between two reads; phases never touched stay 0.
        assert_eq!(ns[2], 0);
        let t = PhaseTimer::start(Some(&p));
        kernel::time::delay::fsleep(kernel::time::Delta::from_micros(50));
        let mut t = t;
        t.lap(Phase::Account);
        assert!(p.snapshot().0[2] >= 50_000);
    }
}
