// SPDX-License-Identifier: GPL-2.0

//! The sync streams' objects and CBs ([`super::sync_stream`] runs the
//! CSs): per queue `q` below the NICs, DCORE0 SOBs `85 + 2q` / `86 + 2q`
//! and monitor `125 + q` (`sync_stream_queue_init`,
//! common/hw_queue.c:913-975), the value the next signal leaves in the
//! current SOB and its switch at 32,767
//! (`hl_cs_signal_sob_wraparound_handler`,
//! common/command_submission.c:1798-1876), the recent signal CSs a WAIT
//! may name, the packets of upstream's signal and wait CBs
//! (`gaudi2_gen_signal_cb`, `gaudi2_gen_wait_cb`,
//! gaudi2/gaudi2.c:11324-11467), and the context's page of CB memory
//! those run from.
//!
//! A SOB is idle (may be reset and reused at a switch) once every CS up to
//! the last one that used it (a signal on it or a wait for one) finished;
//! upstream counts references per SOB and resets it at the last release.

use crate::{
    asic::{
        gaudi2_regs::{sm, CFG_BASE, QM_BASES},
        GAUDI2_RESERVED_SOB_NUMBER,
    },
    vm::{
        command_buffer::{cb_create_unpublished, cb_withdraw, CommandBuffer},
        context_vm::ContextVm,
        mapping::{map_cb_va, unmap_cb_va},
    },
};
use kernel::{prelude::*, sync::Arc};

/// Queues with a sync stream the driver runs: every queue id below the
/// NICs' (`GAUDI2_QUEUE_ID_NIC_0_0`); the rotators' are refused as queues
/// the device does not run.
pub(crate) const SYNC_QUEUES: usize = 156;
/// The tracker's window of sequences (`GAUDI2_MAX_PENDING_CS`, checked
/// against it in [`super::sync_stream`]): the signals kept and the CB slots.
pub(crate) const WINDOW: u64 = 64;
/// `HL_MAX_SOB_VAL` (common/habanalabs.h:135).
const MAX_SOB_VAL: u32 = 1 << 15;
/// `QM_FENCE2_OFFSET` (gaudi2/gaudi2.c): `CP_FENCE2_RDATA_0` in a QMAN
/// block, stream `s` at `+ 4 s`.
const QM_FENCE2_OFFSET: u32 = 0x2B8;
/// Bytes of a CS's CB in the pool.
const CB_SLOT: usize = 64;

/// What a sync-stream CS returns besides its sequence number.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct SobOut {
    /// `sob_base_addr_offset` (0 on Gaudi2: `gaudi2_get_sob_addr`).
    pub(crate) addr_offset: u32,
    /// `sob_count_before_submission`.
    pub(crate) count: u16,
}

/// One queue's sync stream (`struct hl_sync_stream_properties`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Stream {
    /// Which of its two SOBs is in use.
    cur: u8,
    /// The value the next signal leaves in it (`next_sob_val`, from 1).
    next: u16,
    /// The last CS that used each SOB (0: none).
    last: [u64; 2],
}

/// A SIGNAL CS, kept for the WAITs on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Signal {
    /// Its sequence number.
    seq: u64,
    /// Its queue.
    queue: u16,
    /// Which SOB of the queue it increments (0 or 1).
    which: u8,
    /// The SOB's value once it ran.
    pub(crate) val: u16,
}

impl Signal {
    /// The DCORE0 SOB it increments. O(1).
    pub(crate) fn sob(&self) -> u32 {
        sob_id(usize::from(self.queue), self.which)
    }
}

/// DCORE0 SOB `which` of queue `q`'s stream. O(1).
fn sob_id(q: usize, which: u8) -> u32 {
    GAUDI2_RESERVED_SOB_NUMBER + 2 * q as u32 + u32::from(which & 1)
}

/// The sync streams of a context's queues and its recent signals.
///
/// # Invariants
///
/// `signals[seq % 64]`, when set, is the signal of that `seq`.
pub(crate) struct SyncStreams {
    streams: [Stream; SYNC_QUEUES],
    signals: [Option<Signal>; WINDOW as usize],
}

/// What a signal did to its stream, to undo it.
pub(crate) struct Undo {
    queue: usize,
    stream: Stream,
}

impl SyncStreams {
    /// Every stream at its first SOB, value 1 next (a new context: the
    /// SOBs were zeroed at its open). O(queues).
    pub(crate) fn new() -> Result<KBox<Self>> {
        let s = Stream {
            cur: 0,
            next: 1,
            last: [0; 2],
        };
        Ok(KBox::new(
            Self {
                streams: [s; SYNC_QUEUES],
                signals: [None; WINDOW as usize],
            },
            GFP_KERNEL_ACCOUNT,
        )?)
    }

    /// A signal CS `seq` on queue `q` (`init_signal_cs` with its wrap,
    /// `hl_cs_signal_sob_wraparound_handler`): the signal, the
    /// `sob_count_before_submission`, the SOB to reset first (at a switch),
    /// and what undoes it. `oldest`: the oldest CS still in flight. `EINVAL`
    /// for a queue without a stream or a switch to a SOB in use. O(1).
    pub(crate) fn signal(
        &mut self,
        q: usize,
        seq: u64,
        oldest: Option<u64>,
    ) -> Result<(Signal, u16, Option<u32>, Undo)> {
        let st = self.streams.get_mut(q).ok_or(EINVAL)?;
        let undo = Undo {
            queue: q,
            stream: *st,
        };
        let sig = Signal {
            seq,
            queue: q as u16,
            which: st.cur,
            val: st.next,
        };
        let mut reset = None;
        if u32::from(st.next) + 1 >= MAX_SOB_VAL {
            let other = st.cur ^ 1;
            let last = st.last.get(usize::from(other)).copied().unwrap_or(0);
            if last != 0 && oldest.is_some_and(|o| o <= last) {
                return Err(EINVAL);
            }
            st.cur = other;
            st.next = 1;
            reset = Some(sob_id(q, other));
        } else {
            st.next += 1;
        }
        if let Some(l) = st.last.get_mut(usize::from(sig.which)) {
            *l = seq;
        }
        let count = st.next - 1;
        if let Some(s) = self.signals.get_mut((seq % WINDOW) as usize) {
            *s = Some(sig);
        }
        Ok((sig, count, reset, undo))
    }

    /// Undo a [`Self::signal`] whose CS was not queued. O(1).
    pub(crate) fn undo(&mut self, u: Undo, seq: u64) {
        if let Some(st) = self.streams.get_mut(u.queue) {
            *st = u.stream;
        }
        self.forget(seq);
    }

    /// Forget CS `seq` as a signal. O(1).
    fn forget(&mut self, seq: u64) {
        if let Some(s) = self.signals.get_mut((seq % WINDOW) as usize) {
            if s.is_some_and(|s| s.seq == seq) {
                *s = None;
            }
        }
    }

    /// The signal CS `seq`, if it is one and still kept. O(1).
    pub(crate) fn signal_of(&self, seq: u64) -> Option<Signal> {
        self.signals
            .get((seq % WINDOW) as usize)
            .copied()
            .flatten()
            .filter(|s| s.seq == seq)
    }

    /// A wait CS `seq` uses `sig`'s SOB. O(1).
    pub(crate) fn note_wait(&mut self, sig: &Signal, seq: u64) {
        let st = self.streams.get_mut(usize::from(sig.queue));
        if let Some(l) = st.and_then(|s| s.last.get_mut(usize::from(sig.which))) {
            *l = (*l).max(seq);
        }
    }
}

/// A `MSG_SHORT` as one CB word: `value`, then `ctl` (opcode 4).
const fn msg_short(value: u32, ctl: u32) -> u64 {
    value as u64 | ((ctl | 0x4 << 24) as u64) << 32
}
/// `GAUDI2_PKT_CTL_EB` / `_MB`.
const CTL_EB: u32 = 1 << 29;
const CTL_MB: u32 = 1 << 31;
/// `MSG_SHORT` base 1: the SOBs (`CP_MSG_BASE1`); base 0 the monitors.
const BASE_SOB: u32 = 1 << 22;

/// `gaudi2_gen_signal_cb`: add 1 to `sob`. O(1).
pub(crate) const fn signal_cb(sob: u32) -> [u64; 1] {
    [msg_short(
        1 | 1 << 31,
        (4 * sob) & 0xFFFF | BASE_SOB | CTL_EB | CTL_MB,
    )]
}

/// `gaudi2_gen_wait_cb`: monitor `mon` pays 1 into fence 2 of queue `q`'s
/// stream when `sob` >= `val`, then the stream waits on that fence.
/// `None` for a queue without a QMAN. O(1).
pub(crate) fn wait_cb(q: u32, sob: u32, val: u16, mon: u32) -> Option<[u64; 5]> {
    let qm = *QM_BASES.get(q as usize / 4)?;
    let fence = CFG_BASE + u64::from(qm + QM_FENCE2_OFFSET + 4 * (q % 4));
    let at = |reg: u32| (reg + 4 * mon - sm::MON_PAY_ADDRL_0) & 0xFFFF;
    let mask = !(1u32 << (sob % 8)) & 0xFF;
    let arm = (sob / 8) & 0xFF | mask << 8 | (u32::from(val) & 0x7FFF) << 17;
    let fence_cfg: u32 = 1 | 1 << 16 | 2 << 30;
    Some([
        msg_short(fence as u32, at(sm::MON_PAY_ADDRL_0)),
        msg_short((fence >> 32) as u32, at(sm::MON_PAY_ADDRH_0)),
        msg_short(1, at(sm::MON_PAY_DATA_0)),
        msg_short(arm, at(sm::MON_ARM_0) | CTL_MB),
        u64::from(fence_cfg) | u64::from(0x8u32 << 24 | CTL_MB) << 32,
    ])
}

/// The context's sync-stream CB page and its device VA.
pub(crate) struct SyncPool {
    cb: Arc<CommandBuffer>,
    handle: u64,
    va: u64,
}

impl SyncPool {
    /// One page of `vm`'s CB memory, mapped, unpublished. `ENOMEM`,
    /// `EMFILE` (the file's CB limit). Sleeps.
    pub(crate) fn new(vm: &ContextVm) -> Result<Self> {
        let (h, cb) = cb_create_unpublished(&vm.cbs, 4096)?;
        match map_cb_va(vm, &cb) {
            Ok(va) => Ok(Self { cb, handle: h, va }),
            Err(e) => {
                drop(cb_withdraw(&vm.cbs, h));
                Err(e)
            }
        }
    }

    /// Unmap and drop the page (a context's first sync-stream CS failed
    /// after making it: the context is left as before the call). Sleeps;
    /// O(log n).
    pub(crate) fn release(self, vm: &ContextVm) {
        // An unmap whose invalidation fails keeps the page quarantined
        // until a later one succeeds (`unmap_cb_va`).
        let _ = unmap_cb_va(vm, &self.cb);
        drop(cb_withdraw(&vm.cbs, self.handle));
    }

    /// Write CS `seq`'s CB; its device address and size, and the slot's
    /// earlier words (for [`Self::restore`]). O(1).
    pub(crate) fn put(&self, seq: u64, words: &[u64]) -> (u64, u32, SlotWords) {
        let first = (seq % WINDOW) as usize * CB_SLOT / 8;
        let mut saved = SlotWords::default();
        for (i, w) in saved.0.iter_mut().enumerate() {
            *w = self.cb.word(first + i).unwrap_or(0);
        }
        for (i, &w) in words.iter().take(CB_SLOT / 8).enumerate() {
            self.cb.set_word(first + i, w);
        }
        let size = (words.len().min(CB_SLOT / 8) * 8) as u32;
        (self.va + (first * 8) as u64, size, saved)
    }

    /// Put back the words a [`Self::put`] of `seq` replaced: its CS failed
    /// before the device saw the CB, and the page is as before the call.
    /// O(1).
    pub(crate) fn restore(&self, seq: u64, saved: &SlotWords) {
        let first = (seq % WINDOW) as usize * CB_SLOT / 8;
        for (i, &w) in saved.0.iter().enumerate() {
            self.cb.set_word(first + i, w);
        }
    }
}

/// The words of one CB slot.
#[derive(Default)]
pub(crate) struct SlotWords([u64; CB_SLOT / 8]);

/// The sync-stream state of a context (under `ContextCs::sync`, taken
/// before the tracker).
#[derive(Default)]
pub(crate) struct SyncState {
    /// The streams, from the context's first sync-stream CS.
    pub(crate) streams: Option<KBox<SyncStreams>>,
    /// The CB page, from then too.
    pub(crate) pool: Option<SyncPool>,
}

#[kunit_tests(hlrs_sync_objects)]
mod tests {
    use super::*;

    #[test]
    fn signals_count_up_and_switch_sobs_at_the_wrap() -> Result {
        let mut s = SyncStreams::new()?;
        let (a, count, reset, _) = s.signal(4, 1, None)?;
        assert_eq!((a.sob(), a.val, count, reset), (85 + 8, 1, 1, None));
        let (b, count, _, _) = s.signal(4, 2, Some(2))?;
        assert_eq!((b.sob(), b.val, count), (93, 2, 2));
        assert_eq!(s.signal_of(1), Some(a));
        // Another sequence in the slot.
        assert_eq!(s.signal_of(65), None);
        // Up to the wrap: the signal with 32,767 is the SOB's last, the
        // next ones go to the other SOB, reset first.
        for seq in 3..32767 {
            s.signal(4, seq, None)?;
        }
        let (last, count, reset, _) = s.signal(4, 32767, None)?;
        assert_eq!(
            (last.sob(), last.val, count, reset),
            (93, 32767, 0, Some(94))
        );
        let (next, count, reset, _) = s.signal(4, 32768, None)?;
        assert_eq!((next.sob(), next.val, count, reset), (94, 1, 1, None));
        Ok(())
    }

    #[test]
    fn a_switch_to_a_sob_in_use_is_refused_and_undo_restores() -> Result {
        let mut s = SyncStreams::new()?;
        // Queue 0 runs to its switch; its first SOB's last CS is 32767.
        for seq in 1..=32767 {
            s.signal(0, seq, None)?;
        }
        for seq in 32768..(32768 + 32766) {
            s.signal(0, seq, None)?;
        }
        // Back to SOB 0, whose last user (32767) is still in flight.
        assert_eq!(s.signal(0, 70000, Some(32767)).err(), Some(EINVAL));
        let (sig, _, reset, undo) = s.signal(0, 70000, Some(32768))?;
        assert_eq!((sig.sob(), reset), (86, Some(85)));
        s.undo(undo, 70000);
        assert_eq!(s.signal_of(70000), None);
        let (again, _, _, _) = s.signal(0, 70001, None)?;
        assert_eq!(again, Signal { seq: 70001, ..sig });
        // A wait keeps the SOB in use until it finished.
        let (w, _, _, _) = s.signal(1, 5, None)?;
        s.note_wait(&w, 9);
        assert_eq!(s.streams.get(1).map(|st| st.last), Some([9, 0]));
        assert_eq!(s.signal(300, 1, None).err(), Some(EINVAL));
        Ok(())
    }

    #[test]
    fn the_cbs_are_upstreams_packets() {
        // MSG_SHORT add 1 to SOB 93 (base 1, EB, MB).
        assert_eq!(signal_cb(93), [0xA440_0174_8000_0001]);
        let w = wait_cb(1, 95, 3, 130).unwrap_or_default();
        // PDMA0 stream 1's CP_FENCE2_RDATA.
        let fence = CFG_BASE + 0x4C8_A000 + 0x2B8 + 4;
        assert_eq!(w[0], msg_short(fence as u32, 4 * 130));
        assert_eq!(w[1], msg_short((fence >> 32) as u32, 0x2000 + 4 * 130));
        assert_eq!(w[2], msg_short(1, 0x4000 + 4 * 130));
        // Group 11, every SOB but 95's (bit 7) masked, >= 3.
        let arm = 11 | 0x7F << 8 | 3 << 17;
        assert_eq!(w[3], msg_short(arm, (0x6000 + 4 * 130) | CTL_MB));
        assert_eq!(w[4], 0x8800_0000_8001_0001);
        assert_eq!(wait_cb(156, 95, 3, 130), None);
    }
}
