// SPDX-License-Identifier: GPL-2.0

//! The VA quarantine of one context: an unmapped VA stays out of reuse
//! until every CS that was in flight at its UNMAP has ended.
//!
//! **Why.** UNMAP clears the PTEs and invalidates the MMU caches (waiting
//! for the engine access in flight), so a DMA still running faults at its
//! next access, and its CS ends ABORTED with the page fault captured. That
//! holds only while nothing new is mapped at that VA: a process that maps
//! another handle at the same VA (a hint, or best fit handing the freed
//! block straight back) while the DMA runs would have the engine's next
//! walk find the new mapping and write on into the other handle. So the
//! VA block of an UNMAP is kept allocated, tagged with the context's last
//! CS sequence at that moment, and given back to its range only once
//! every CS up to that sequence has finished; the backing (pages, pins,
//! the handle's mapping count) goes back at once, as before.
//!
//! While a VA is held, a MAP whose hint names it is placed elsewhere (the
//! hint cannot be honoured: upstream ignores such a hint), and with
//! `HL_MEM_FORCE_HINT` fails with `EADDRINUSE` (the VA allocator's errno
//! for an occupied forced hint; upstream answers `ENOMEM` for every forced
//! hint it cannot honour), as if the old mapping were still there.
//!
//! **Progress.** The tracker of the context's CSs ([`crate::cs::tracker`])
//! publishes here the last sequence number it gave ([`VaQuarantine::numbered`])
//! and the lowest one not finished ([`VaQuarantine::set_oldest`]), in
//! atomics read without a lock. A CS counts as not finished from the moment
//! it gets its number, launched or not, until its last job reported, so no
//! CS that could still reach the VA is missed.
//!
//! **Cost.** With no CS in flight at the UNMAP the VA goes back at once:
//! nothing is held. Held blocks are a FIFO ring (sequences only grow), given
//! back from its front by [`VaQuarantine::reap`] at each VA allocation (MAP)
//! and at the settling of the mapping quarantine (teardown): O(1) per check
//! when nothing is held, O(1) amortised per block plus the range's O(log n)
//! free. **Memory** is bounded: at most [`MAX_HELD`] blocks (32 bytes each);
//! an UNMAP that would hold more waits first ([`VaQuarantine::wait_for_room`],
//! interruptibly: `EINTR`, nothing unmapped) until the oldest CSs end, which
//! the run-time cap bounds. If the ring cannot grow (no memory), the VA is
//! kept until the context's teardown instead: never reused early.
//!
//! Lock order: the ring's lock is a leaf, taken alone (never with the
//! mapping table or a VA range held); the wait's lock is a leaf the tracker
//! takes under its own to notify.

use crate::vm::va_range::{VaRangeType, VaRanges};
use kernel::{
    new_condvar, new_mutex,
    prelude::*,
    sync::{
        atomic::{Acquire, Atomic, Full, Relaxed},
        CondVar, CondVarTimeoutResult, Mutex,
    },
    time::msecs_to_jiffies,
};

/// Most VA blocks held at once (one context).
pub(crate) const MAX_HELD: usize = 4096;

/// `oldest`: nothing pending.
const NONE_PENDING: u64 = u64::MAX;

/// One held VA block.
#[derive(Clone, Copy)]
struct HeldVa {
    kind: VaRangeType,
    va: u64,
    size: u64,
    /// Held until every CS up to this sequence has finished.
    until: u64,
}

/// The ring of held blocks: `v[head..]` in hold order.
struct Ring {
    v: KVec<HeldVa>,
    head: usize,
}

impl Ring {
    fn len(&self) -> usize {
        self.v.len().saturating_sub(self.head)
    }

    /// The front block, if its CSs have all finished (`oldest` is the
    /// lowest sequence not finished). Popped; the storage is compacted
    /// when half of it is spent. O(1) amortised.
    fn pop_done(&mut self, oldest: u64) -> Option<HeldVa> {
        let front = *self.v.get(self.head)?;
        if front.until >= oldest {
            return None;
        }
        self.head += 1;
        if self.head == self.v.len() {
            self.v.clear();
            self.head = 0;
        } else if self.head * 2 >= self.v.len() {
            let live = self.v.len() - self.head;
            self.v.as_mut_slice().copy_within(self.head.., 0);
            self.v.truncate(live);
            self.head = 0;
        }
        Some(front)
    }
}

/// A context's VA quarantine and the CS progress it waits on.
#[pin_data]
pub(crate) struct VaQuarantine {
    /// The last sequence number given to a CS (0: none yet).
    last_seq: Atomic<u64>,
    /// The lowest sequence not finished, [`NONE_PENDING`] if none.
    oldest: Atomic<u64>,
    /// Blocks held (`ring.len()`, read without the lock).
    held: Atomic<u32>,
    /// UNMAPs waiting for room.
    waiters: Atomic<u32>,
    #[pin]
    ring: Mutex<Ring>,
    /// Held only to wait for and signal progress.
    #[pin]
    progress: Mutex<()>,
    #[pin]
    advanced: CondVar,
}

impl VaQuarantine {
    /// Empty, no CS yet.
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            last_seq: Atomic::new(0),
            oldest: Atomic::new(NONE_PENDING),
            held: Atomic::new(0),
            waiters: Atomic::new(0),
            ring <- new_mutex!(Ring {
                v: KVec::new(),
                head: 0,
            }),
            progress <- new_mutex!(()),
            advanced <- new_condvar!("VaQuarantine::advanced"),
        })
    }

    /// CS `seq` got its number (the tracker, under its lock): it is the
    /// last, and not finished. O(1).
    pub(crate) fn numbered(&self, seq: u64) {
        self.last_seq.xchg(seq, Full);
        let _ = self.oldest.cmpxchg(NONE_PENDING, seq, Full);
    }

    /// The lowest sequence not finished is now `oldest` (`None`: every CS
    /// has finished); the tracker, under its lock. Wakes UNMAPs waiting for
    /// room. O(1).
    pub(crate) fn set_oldest(&self, oldest: Option<u64>) {
        self.oldest.xchg(oldest.unwrap_or(NONE_PENDING), Full);
        if self.waiters.load(Acquire) > 0 {
            let _g = self.progress.lock();
            self.advanced.notify_all();
        }
    }

    /// What an UNMAP whose invalidation just succeeded must wait for: the
    /// last sequence given, if a CS up to it has not finished (`None`: no
    /// CS can reach the VA any more). O(1).
    pub(crate) fn hold_through(&self) -> Option<u64> {
        let last = self.last_seq.load(Acquire);
        (self.oldest.load(Acquire) <= last).then_some(last)
    }

    /// Give the VA block `[va, va + size)` of range `kind` back to `ranges`
    /// now (`until` `None`), or hold it until every CS up to `until` has
    /// finished. O(1) amortised, or the range's O(log n).
    pub(crate) fn give_back(
        &self,
        ranges: &VaRanges,
        (kind, va, size): (VaRangeType, u64, u64),
        until: Option<u64>,
    ) {
        let Some(until) = until else {
            free(ranges, kind, va, size);
            return;
        };
        let mut ring = self.ring.lock();
        let entry = HeldVa {
            kind,
            va,
            size,
            until,
        };
        if ring.v.push(entry, GFP_KERNEL).is_err() {
            // Never reused early: the teardown's clear of the ranges frees it.
            hl_err!("VA {:#x}: no memory to hold it; kept until teardown\n", va);
            return;
        }
        self.held.store(ring.len() as u32, Relaxed);
    }

    /// Give back every held block whose CSs have all finished, oldest
    /// first. Returns how many. O(1) when none is held; O(1) amortised per
    /// block plus the range's O(log n) free.
    pub(crate) fn reap(&self, ranges: &VaRanges) -> usize {
        let mut n = 0;
        while self.held.load(Relaxed) > 0 {
            let oldest = self.oldest.load(Acquire);
            let done = {
                let mut ring = self.ring.lock();
                let done = ring.pop_done(oldest);
                self.held.store(ring.len() as u32, Relaxed);
                done
            };
            let Some(b) = done else {
                break;
            };
            free(ranges, b.kind, b.va, b.size);
            n += 1;
        }
        n
    }

    /// Before an UNMAP: if [`MAX_HELD`] blocks are held, reap, and wait
    /// (interruptibly) until there is room. `EINTR` on a signal, nothing
    /// changed. O(1) when there is room.
    pub(crate) fn wait_for_room(&self, ranges: &VaRanges) -> Result {
        loop {
            if (self.held.load(Relaxed) as usize) < MAX_HELD {
                return Ok(());
            }
            self.reap(ranges);
            if (self.held.load(Relaxed) as usize) < MAX_HELD {
                return Ok(());
            }
            self.waiters.fetch_add(1, Full);
            let mut g = self.progress.lock();
            // Checked again under the lock the tracker notifies under; a
            // periodic look covers a notification between the two.
            let waited = if self.front_done() {
                CondVarTimeoutResult::Timeout
            } else {
                self.advanced
                    .wait_interruptible_timeout(&mut g, msecs_to_jiffies(100))
            };
            drop(g);
            self.waiters.fetch_sub(1, Full);
            if matches!(waited, CondVarTimeoutResult::Signal { .. }) {
                return Err(EINTR);
            }
        }
    }

    /// Whether the front block's CSs have all finished. O(1).
    fn front_done(&self) -> bool {
        let oldest = self.oldest.load(Acquire);
        let ring = self.ring.lock();
        ring.v.get(ring.head).is_some_and(|b| b.until < oldest)
    }

    /// Blocks held. O(1).
    pub(crate) fn held(&self) -> usize {
        self.held.load(Relaxed) as usize
    }
}

/// Give a VA block back to its range; it is an allocation until here, so
/// this cannot fail.
fn free(ranges: &VaRanges, kind: VaRangeType, va: u64, size: u64) {
    if ranges.free(kind, va, size).is_err() {
        hl_err!("mapping: VA {:#x} was not an allocation\n", va);
    }
}

#[kunit_tests(hlrs_va_quarantine)]
mod tests {
    use super::*;
    use crate::{
        asic::AsicProperties,
        vm::{va_alloc::VaRequest, va_range::VaRanges},
    };

    type Fixture = (AsicProperties, Pin<KBox<VaRanges>>, Pin<KBox<VaQuarantine>>);

    fn setup() -> Result<Fixture> {
        let asic = AsicProperties::gaudi2(6, 0)?;
        let ranges = KBox::pin_init(VaRanges::new(&asic)?, GFP_KERNEL)?;
        let q = KBox::pin_init(VaQuarantine::new(), GFP_KERNEL)?;
        Ok((asic, ranges, q))
    }

    #[test]
    fn progress_decides_what_is_held() -> Result {
        let (_, _, q) = setup()?;
        // No CS yet: nothing to wait for.
        assert_eq!(q.hold_through(), None);
        q.numbered(1);
        q.numbered(2);
        assert_eq!(q.hold_through(), Some(2));
        // CS 1 finished, 2 runs.
        q.set_oldest(Some(2));
        assert_eq!(q.hold_through(), Some(2));
        q.set_oldest(None);
        assert_eq!(q.hold_through(), None);
        // A new CS after all finished is pending from its number on.
        q.numbered(3);
        assert_eq!(q.hold_through(), Some(3));
        Ok(())
    }

    #[test]
    fn a_held_va_is_not_reused_until_its_css_end() -> Result {
        let (asic, ranges, q) = setup()?;
        let page = asic.dram_page_size;
        let kind = VaRangeType::Dram;
        let a = ranges
            .alloc(kind, VaRequest::new(page))
            .map_err(Error::from)?;
        let b = ranges
            .alloc(kind, VaRequest::new(page))
            .map_err(Error::from)?;
        q.numbered(1);
        q.numbered(2);
        // `a` unmapped while CSs 1 and 2 run, `b` after CS 3 got its number.
        q.give_back(&ranges, (kind, a, page), q.hold_through());
        q.numbered(3);
        q.give_back(&ranges, (kind, b, page), q.hold_through());
        assert_eq!(q.held(), 2);
        // Best fit would hand `a` straight back: it is still allocated.
        let c = ranges
            .alloc(kind, VaRequest::new(page))
            .map_err(Error::from)?;
        assert!(c != a && c != b);
        // A forced hint at `a` is refused as occupied.
        assert!(ranges
            .alloc(kind, VaRequest::new(page).with_forced_hint(a))
            .is_err());
        // CS 1 and 2 end (3 runs): `a` comes back, `b` stays.
        q.set_oldest(Some(3));
        assert_eq!(q.reap(&ranges), 1);
        assert_eq!(q.held(), 1);
        let again = ranges
            .alloc(kind, VaRequest::new(page).with_forced_hint(a))
            .map_err(Error::from)?;
        assert_eq!(again, a);
        q.set_oldest(None);
        assert_eq!(q.reap(&ranges), 1);
        assert_eq!(q.reap(&ranges), 0);
        for va in [a, c] {
            ranges.free(kind, va, page)?;
        }
        assert!(ranges.is_pristine());
        Ok(())
    }

    #[test]
    fn the_ring_is_bounded_and_a_full_one_waits_for_room() -> Result {
        let (asic, ranges, q) = setup()?;
        let kind = VaRangeType::Host;
        let page = asic.host_page_size;
        q.numbered(1);
        let mut vas = KVec::new();
        for _ in 0..MAX_HELD {
            let va = ranges
                .alloc(kind, VaRequest::new(page))
                .map_err(Error::from)?;
            vas.push(va, GFP_KERNEL)?;
            q.give_back(&ranges, (kind, va, page), q.hold_through());
        }
        assert_eq!(q.held(), MAX_HELD);
        // Full while CS 1 runs; once it ended, the wait reaps and returns
        // at once.
        q.set_oldest(None);
        q.wait_for_room(&ranges)?;
        assert_eq!(q.held(), 0);
        assert!(ranges.is_pristine());
        // Half spent, the ring compacts and keeps its order.
        q.numbered(2);
        let mut held = KVec::new();
        for i in 0..8u64 {
            let va = ranges
                .alloc(kind, VaRequest::new(page))
                .map_err(Error::from)?;
            held.push(va, GFP_KERNEL)?;
            q.give_back(&ranges, (kind, va, page), Some(2 + i / 4));
        }
        q.set_oldest(Some(3));
        assert_eq!(q.reap(&ranges), 4);
        q.set_oldest(None);
        assert_eq!(q.reap(&ranges), 4);
        assert!(ranges.is_pristine());
        drop(vas);
        Ok(())
    }
}
