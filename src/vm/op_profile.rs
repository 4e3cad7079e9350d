// SPDX-License-Identifier: GPL-2.0

//! Where the time of the memory ioctls goes: cumulative nanoseconds per
//! phase of ALLOC, FREE, MAP (device handle, host memory) and UNMAP (device,
//! host), per device, read by debugfs `bench` (and `make bench`, which takes
//! the difference around a loop of each operation, and around one 1 GiB host
//! MAP).
//!
//! | phase | what it covers |
//! |---|---|
//! | pin | `account_locked_vm`, the page array, `pin_user_pages_fast` |
//! | lookup | the huge-page check and the device address of every page |
//! | handle | the handle table: lookup and mapping count, insert, remove |
//! | pack | the DRAM page pack: pool pages and its record (ALLOC, FREE) |
//! | va | the VA allocation (or its release) and the mapping record's reservation |
//! | pte | the page-table writes (MAP) or clears (UNMAP) |
//! | invalidate | the MMU cache invalidation of the range |
//! | publish | the mapping record in (MAP) or out of (UNMAP) the mapping table |
//! | release | giving back what an UNMAP held: emptied hops, pinned pages or the handle's count, the VA |
//!
//! Off until debugfs `bench` turns it on (`profile 1`): then a clock read per
//! phase (tens of nanoseconds), no lock, relaxed atomics only. Off, one
//! relaxed load per operation.

use kernel::{
    prelude::*,
    sync::atomic::{Atomic, Relaxed},
    time::{Instant, Monotonic},
};

/// A profiled operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Op {
    /// ALLOC of DRAM.
    Alloc = 0,
    /// FREE of a handle.
    Free = 1,
    /// MAP of a DRAM handle.
    MapDevice = 2,
    /// MAP of host memory.
    MapHost = 3,
    /// UNMAP of a DRAM mapping.
    UnmapDevice = 4,
    /// UNMAP of a host (or CB) mapping.
    UnmapHost = 5,
}

/// Number of [`Op`]s.
const OPS: usize = 6;

/// One phase of an operation (see the module doc).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Phase {
    /// Charging `locked_vm` and pinning the pages.
    Pin = 0,
    /// Huge-page check and device addresses.
    Lookup = 1,
    /// The handle table.
    Handle = 2,
    /// The DRAM page pack.
    Pack = 3,
    /// The VA and the mapping record's reservation.
    Va = 4,
    /// PTE writes or clears.
    Pte = 5,
    /// The MMU cache invalidation.
    Invalidate = 6,
    /// The mapping table.
    Publish = 7,
    /// What an UNMAP gives back.
    Release = 8,
}

/// Number of [`Phase`]s.
const PHASES: usize = 9;

/// The names debugfs prints, by [`Op`] and by [`Phase`].
pub(crate) const OP_NAMES: [&str; OPS] = [
    "alloc",
    "free",
    "map_device",
    "map_host",
    "unmap_device",
    "unmap_host",
];
/// See [`OP_NAMES`].
pub(crate) const PHASE_NAMES: [&str; PHASES] = [
    "pin",
    "lookup",
    "handle",
    "pack",
    "va",
    "pte",
    "invalidate",
    "publish",
    "release",
];

/// Totals of one [`Op`]: nanoseconds per [`Phase`], completed calls.
struct OpTotals {
    ns: [Atomic<u64>; PHASES],
    done: Atomic<u64>,
}

impl OpTotals {
    const fn new() -> Self {
        Self {
            ns: [const { Atomic::new(0) }; PHASES],
            done: Atomic::new(0),
        }
    }
}

/// Cumulative time per [`Op`] and [`Phase`], and the calls that completed.
pub(crate) struct OpProfile {
    on: Atomic<u32>,
    ops: [OpTotals; OPS],
}

impl OpProfile {
    /// All zero, off.
    pub(crate) const fn new() -> Self {
        Self {
            on: Atomic::new(0),
            ops: [const { OpTotals::new() }; OPS],
        }
    }

    /// Turn the clock reads on or off. O(1).
    pub(crate) fn set_on(&self, on: bool) {
        self.on.store(u32::from(on), Relaxed);
    }

    /// Whether it is on. O(1).
    pub(crate) fn is_on(&self) -> bool {
        self.on.load(Relaxed) != 0
    }

    /// Completed calls of `op` and its nanoseconds per phase (indexed as
    /// [`PHASE_NAMES`]). O(phases).
    pub(crate) fn snapshot(&self, op: usize) -> Option<(u64, [u64; PHASES])> {
        let t = self.ops.get(op)?;
        let mut ns = [0; PHASES];
        for (out, a) in ns.iter_mut().zip(&t.ns) {
            *out = a.load(Relaxed);
        }
        Some((t.done.load(Relaxed), ns))
    }
}

/// Times the phases of one operation into an [`OpProfile`]; an operation
/// that fails part-way still adds the phases it went through, but is not
/// counted as done.
pub(crate) struct OpTimer<'a> {
    profile: Option<&'a OpProfile>,
    op: Op,
    last: Option<Instant<Monotonic>>,
}

impl<'a> OpTimer<'a> {
    /// Start timing `op` into `profile` if it is on. O(1).
    pub(crate) fn start(profile: &'a OpProfile, op: Op) -> Self {
        if profile.is_on() {
            Self {
                profile: Some(profile),
                op,
                last: Some(Instant::now()),
            }
        } else {
            Self::off(op)
        }
    }

    /// A timer that records nothing.
    pub(crate) fn off(op: Op) -> Self {
        Self {
            profile: None,
            op,
            last: None,
        }
    }

    /// Count the rest (and the completion) as `op` instead. O(1).
    pub(crate) fn set_op(&mut self, op: Op) {
        self.op = op;
    }

    /// The time since the previous lap (or the start) was spent in `phase`. O(1).
    pub(crate) fn lap(&mut self, phase: Phase) {
        if let (Some(p), Some(last)) = (self.profile, self.last) {
            let now = Instant::now();
            let ns = u64::try_from((now - last).as_nanos()).unwrap_or(0);
            if let Some(slot) = p
                .ops
                .get(self.op as usize)
                .and_then(|t| t.ns.get(phase as usize))
            {
                slot.fetch_add(ns, Relaxed);
            }
            self.last = Some(now);
        }
    }

    /// The operation completed.
    pub(crate) fn done(self) {
        if let Some(t) = self.profile.and_then(|p| p.ops.get(self.op as usize)) {
            t.done.add(1, Relaxed);
        }
    }
}

#[kunit_tests(hlrs_op_profile)]
mod tests {
    use super::*;

    #[test]
    fn laps_add_to_their_phase_and_only_completed_calls_count() {
        let p = OpProfile::new();
        // Off: nothing is recorded.
        let mut t = OpTimer::start(&p, Op::MapHost);
        t.lap(Phase::Pin);
        t.done();
        assert_eq!(p.snapshot(Op::MapHost as usize).map(|s| s.0), Some(0));
        p.set_on(true);
        let mut t = OpTimer::start(&p, Op::MapHost);
        t.lap(Phase::Pin);
        t.lap(Phase::Pte);
        t.done();
        {
            // A MAP that fails after its lookup: the lap counts, the MAP not.
            let mut failed = OpTimer::start(&p, Op::MapHost);
            failed.lap(Phase::Lookup);
        }
        OpTimer::off(Op::MapHost).done();
        let (done, ns) = p.snapshot(Op::MapHost as usize).unwrap_or_default();
        assert_eq!(done, 1);
        // Clocks may not advance between two reads; phases never touched stay 0.
        assert_eq!(ns[Phase::Va as usize], 0);
        let mut t = OpTimer::start(&p, Op::UnmapDevice);
        kernel::time::delay::fsleep(kernel::time::Delta::from_micros(50));
        t.set_op(Op::UnmapHost);
        t.lap(Phase::Release);
        t.done();
        let (done, ns) = p.snapshot(Op::UnmapHost as usize).unwrap_or_default();
        assert_eq!(done, 1);
        assert!(ns[Phase::Release as usize] >= 50_000);
        assert_eq!(p.snapshot(Op::UnmapDevice as usize).map(|s| s.0), Some(0));
        assert!(p.snapshot(OPS).is_none());
    }
}
