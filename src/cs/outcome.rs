// SPDX-License-Identifier: GPL-2.0

//! The outcome store of a context (upstream `struct hl_cs_outcome_store`,
//! common/command_submission.c:57-133): the status and completion time of
//! finished CSs that asked for a timestamp, kept after their fence left the
//! window of the last 64 sequences, so that a late WAIT_CS still gets them.
//! A pop removes the entry (a second WAIT_CS finds the CS gone); a push
//! into a full store drops the oldest entry.

use crate::cs::fence::Finished;
use kernel::{alloc::KVVec, prelude::*};

/// Entries kept (`HL_CS_OUTCOME_HISTORY_LEN`).
pub(crate) const OUTCOME_HISTORY_LEN: usize = 256;

/// One kept outcome.
#[derive(Clone, Copy)]
struct Entry {
    seq: u64,
    /// Push order: the smallest is the oldest.
    age: u64,
    finished: Finished,
}

/// The store: a fixed number of entries, allocated once (10 KiB: not on
/// the stack), so that a push never allocates.
pub(crate) struct OutcomeStore {
    entries: KVVec<Option<Entry>>,
    pushes: u64,
}

impl OutcomeStore {
    /// An empty store. O(256).
    pub(crate) fn new() -> Result<Self> {
        Ok(Self {
            entries: KVVec::from_elem(None, OUTCOME_HISTORY_LEN, GFP_KERNEL)?,
            pushes: 0,
        })
    }

    /// Keep the outcome of `seq`, dropping the oldest if full. O(256).
    pub(crate) fn push(&mut self, seq: u64, finished: Finished) {
        self.pushes = self.pushes.wrapping_add(1);
        let entry = Entry {
            seq,
            age: self.pushes,
            finished,
        };
        let slot = match self.entries.iter().position(Option::is_none) {
            Some(i) => i,
            None => self
                .entries
                .iter()
                .enumerate()
                .min_by_key(|(_, e)| e.map_or(0, |e| e.age))
                .map_or(0, |(i, _)| i),
        };
        if let Some(s) = self.entries.get_mut(slot) {
            *s = Some(entry);
        }
    }

    /// Take the outcome of `seq` out of the store, if kept. O(256).
    pub(crate) fn pop(&mut self, seq: u64) -> Option<Finished> {
        let slot = self
            .entries
            .iter_mut()
            .find(|e| matches!(e, Some(x) if x.seq == seq))?;
        slot.take().map(|e| e.finished)
    }
}

#[kunit_tests(hlrs_outcome)]
mod tests {
    use super::*;
    use crate::cs::fence::CsStatus;

    fn f(ts: i64) -> Finished {
        Finished {
            status: CsStatus::Ok,
            timestamp_ns: ts,
        }
    }

    #[test]
    fn pops_once_and_drops_the_oldest_when_full() -> Result {
        let mut s = OutcomeStore::new()?;
        assert_eq!(s.pop(1), None);
        for seq in 1..=OUTCOME_HISTORY_LEN as u64 {
            s.push(seq, f(seq as i64));
        }
        assert_eq!(s.pop(10), Some(f(10)));
        assert_eq!(s.pop(10), None);
        // A free slot is used first: 1 stays.
        s.push(1000, f(1000));
        s.push(1001, f(1001));
        // Full again: 1 was the oldest and went.
        assert_eq!(s.pop(1), None);
        assert_eq!(s.pop(2), Some(f(2)));
        assert_eq!(s.pop(1001), Some(f(1001)));
        assert_eq!(s.pop(1000), Some(f(1000)));
        Ok(())
    }
}
