// SPDX-License-Identifier: GPL-2.0

//! User interrupts and the waits on them: `DRM_IOCTL_HL_WAIT_CS` with
//! `HL_WAIT_CS_FLAGS_INTERRUPT` (upstream `hl_interrupt_wait_ioctl`,
//! common/command_submission.c:3387-3718) and its timestamp registrations
//! (`_hl_interrupt_ts_reg_ioctl`, :3214-3385), woken by the MSI-X vectors
//! a completion queue's LBW write raises (`hl_irq_user_interrupt_handler`,
//! common/irq.c:331-449).
//!
//! On Gaudi2 the user interrupts are MSI-X 48..111 (`GAUDI2_IRQ_NUM_USER_FIRST`
//! .. `_LAST`, gaudi2/gaudi2P.h:396-434; HW_IP_INFO reports 48 and 64), plus
//! the common CQ interrupt (`HL_COMMON_USER_CQ_INTERRUPT_ID`, 0xFFF), which
//! every user CQ interrupt also fires, and the common decoder interrupt
//! (0xFFE), which nothing fires (the model has no decoders; ids 0..9, the
//! decoders' own, are `EINVAL` as for a device whose decoders are all
//! disabled).
//!
//! **A wait** reads a 64-bit counter: in a command buffer's memory
//! (`INTERRUPT_KERNEL_CQ`: `cq_counters_handle`, `cq_counters_offset` in
//! u64s) or at a user address (`addr`, read with a user copy, with no lock
//! held). It completes as soon as the counter is at least `target`,
//! re-reading it after each interrupt of its id; an interrupt's count
//! (its generation) is snapshotted before each read, so an interrupt
//! between the read and the sleep is not lost. Outcomes as upstream:
//! `COMPLETED` with the interrupt's time (or the time of the call when the
//! counter was already there), `BUSY` at the timeout (rc 0), `EINTR` for
//! a signal, `EINVAL` for an id that names no interrupt or a counter
//! outside its CB, `EFAULT` for an unreadable user address, `EPERM` on a
//! device without user interrupts (the simulation).
//!
//! **A registration** (`REGISTER_INTERRUPT` with `INTERRUPT_KERNEL_CQ`)
//! asks for the time of the interrupt that brings the counter to `target`
//! in element `timestamp_offset` of a timestamp buffer. If the counter is
//! already there the time is written at once; else the registration is
//! kept (it holds the CB and the buffer) until an interrupt of its id
//! finds the counter there. Registering an element again replaces its
//! registration. A context's registrations go with its close (upstream
//! keeps them until they fire or the device resets; here nothing of one
//! user is left for the next).
//!
//! Complexity: a wait is O(1) per interrupt; an interrupt is O(waiters of
//! its id) wake-ups plus O(registrations on its id and the common id)
//! checks (a tree keyed by interrupt, buffer and element: upstream keeps a
//! list per interrupt), and a registration O(log registrations) (the
//! element it replaces looked up under each of the 66 ids), registrations
//! bounded by [`MAX_REGISTRATIONS`] per device (`ENOMEM` past it; upstream
//! bounds them only by the elements of the buffers, 2^20 each).

use crate::{
    ffi::{clock::ktime_ns, irq::IrqThread},
    hw::engines::MsixSink,
    uapi::*,
    vm::{command_buffer::CommandBuffer, ts_buffer::TsBuffer},
};
use kernel::{
    new_condvar, new_mutex, new_spinlock,
    prelude::*,
    rbtree::{RBTree, RBTreeNodeReservation},
    sync::{Arc, CondVar, CondVarTimeoutResult, Mutex, SpinLock},
    time::{msecs_to_jiffies, Jiffies},
    uaccess::{UserPtr, UserSlice},
};

/// `GAUDI2_IRQ_NUM_USER_FIRST`: the first user interrupt id (and MSI-X
/// vector).
pub(crate) const FIRST_USER_INTERRUPT: u32 = 48;
/// User interrupts (`GAUDI2_IRQ_NUM_USER_LAST - FIRST + 1`).
pub(crate) const USER_INTERRUPTS: u32 = 64;
/// `GAUDI2_IRQ_NUM_TPC_ASSERT` (gaudi2/gaudi2P.h), reported as
/// HW_IP_INFO's `tpc_interrupt_id` (nothing raises it: no TPC runs).
pub(crate) const TPC_ASSERT_INTERRUPT: u32 = 46;
/// `HL_COMMON_USER_CQ_INTERRUPT_ID` (common/habanalabs.h:90).
pub(crate) const COMMON_CQ_ID: u32 = 0xFFF;
/// `HL_COMMON_DEC_INTERRUPT_ID` (common/habanalabs.h:91).
pub(crate) const COMMON_DEC_ID: u32 = 0xFFE;
/// Slots: the 64 user interrupts, the common CQ and the common decoder.
const SLOTS: usize = USER_INTERRUPTS as usize + 2;
const COMMON_CQ_SLOT: usize = USER_INTERRUPTS as usize;
const COMMON_DEC_SLOT: usize = COMMON_CQ_SLOT + 1;
/// Timestamp registrations a device keeps at most.
pub(crate) const MAX_REGISTRATIONS: usize = 65536;

/// What an interrupt last did: how many times it fired, and when.
#[derive(Clone, Copy, Default)]
struct Fired {
    count: u64,
    ts_ns: i64,
}

/// One user interrupt: its generation and the waiters sleeping on it.
#[pin_data]
struct UserInterrupt {
    #[pin]
    fired: SpinLock<Fired>,
    #[pin]
    wake: CondVar,
}

impl UserInterrupt {
    fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            fired <- new_spinlock!(Fired::default(), "UserInterrupt::fired"),
            wake <- new_condvar!("UserInterrupt::wake"),
        })
    }
}

/// Where a wait's counter is.
pub(crate) enum Counter {
    /// u64 `index` of a command buffer (`INTERRUPT_KERNEL_CQ`).
    Cb(Arc<CommandBuffer>, usize),
    /// A user address.
    User(u64),
}

impl Counter {
    /// The counter's value: one atomic load of CB memory, or an 8-byte user
    /// copy (`EFAULT`). No lock is held by the caller.
    fn read(&self) -> Result<u64> {
        match self {
            Self::Cb(cb, i) => cb.word(*i).ok_or(EINVAL),
            Self::User(addr) => {
                let a = usize::try_from(*addr).map_err(|_| EFAULT)?;
                UserSlice::new(UserPtr::from_addr(a), 8)
                    .reader()
                    .read::<u64>()
            }
        }
    }
}

/// How a wait ended (rc 0).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Waited {
    /// `HL_WAIT_CS_STATUS_COMPLETED` or `_BUSY`.
    pub(crate) status: u32,
    /// The time to report (0: none).
    pub(crate) ts_ns: i64,
}

/// One timestamp registration.
struct TsReg {
    /// The context it belongs to (its close drops it).
    owner: usize,
    /// Its buffer (the key holds its address).
    buf: Arc<TsBuffer>,
    /// The CB of its counter.
    cb: Arc<CommandBuffer>,
    /// The counter's u64 index in the CB.
    index: usize,
    /// The value the counter must reach.
    target: u64,
}

/// A registration's key: its interrupt slot, its buffer's address, the
/// element.
type RegKey = (usize, usize, usize);

/// The registrations of a device and their count.
struct Regs {
    tree: RBTree<RegKey, TsReg>,
    len: usize,
}

/// A device's user interrupts.
pub(crate) struct UserInterrupts {
    ints: KVec<Pin<KBox<UserInterrupt>>>,
    regs: Pin<KBox<Mutex<Regs>>>,
}

impl UserInterrupts {
    /// Every interrupt idle, no registration. `ENOMEM`.
    pub(crate) fn new() -> Result<Arc<Self>> {
        let mut ints = KVec::with_capacity(SLOTS, GFP_KERNEL)?;
        for _ in 0..SLOTS {
            ints.push(
                KBox::pin_init(UserInterrupt::new(), GFP_KERNEL)?,
                GFP_KERNEL,
            )?;
        }
        let regs = Regs {
            tree: RBTree::new(),
            len: 0,
        };
        let regs = KBox::pin_init(new_mutex!(regs, "UserInterrupts::regs"), GFP_KERNEL)?;
        Ok(Arc::new(Self { ints, regs }, GFP_KERNEL)?)
    }

    /// The slot of interrupt id `id`: `EINVAL` for an id that names none.
    /// O(1).
    pub(crate) fn slot(id: u32) -> Result<usize> {
        match id {
            COMMON_CQ_ID => Ok(COMMON_CQ_SLOT),
            COMMON_DEC_ID => Ok(COMMON_DEC_SLOT),
            i if (FIRST_USER_INTERRUPT..FIRST_USER_INTERRUPT + USER_INTERRUPTS).contains(&i) => {
                Ok((i - FIRST_USER_INTERRUPT) as usize)
            }
            _ => Err(EINVAL),
        }
    }

    /// User interrupt `k` (MSI-X `48 + k`) fired: wake its waiters and
    /// the common CQ's, then write the timestamps of the registrations whose
    /// counter reached their target. Process context (an IRQ thread).
    /// O(waiters + registrations).
    pub(crate) fn fire(&self, k: usize) {
        let now = ktime_ns();
        for slot in [k, COMMON_CQ_SLOT] {
            if let Some(int) = self.ints.get(slot) {
                let mut f = int.fired.lock();
                f.count = f.count.wrapping_add(1);
                f.ts_ns = now;
                drop(f);
                int.wake.notify_all();
            }
        }
        let mut regs = self.regs.lock();
        fire_slot(&mut regs, k, now as u64);
        if k != COMMON_CQ_SLOT {
            fire_slot(&mut regs, COMMON_CQ_SLOT, now as u64);
        }
    }

    /// Wait on interrupt `slot` until `counter` is at least `target`, at
    /// most `timeout_us`. Sleeps interruptibly (`EINTR`). O(1) per wake.
    pub(crate) fn wait(
        &self,
        slot: usize,
        counter: &Counter,
        target: u64,
        timeout_us: u64,
    ) -> Result<Waited> {
        let int = self.ints.get(slot).ok_or(EINVAL)?;
        let kernel_cq = matches!(counter, Counter::Cb(..));
        let mut seen = int.fired.lock().count;
        if counter.read()? >= target {
            return Ok(Waited {
                status: HL_WAIT_CS_STATUS_COMPLETED,
                ts_ns: ktime_ns(),
            });
        }
        if timeout_us == 0 {
            // Upstream's kernel-CQ path stamps even a BUSY answer.
            let ts_ns = if kernel_cq { ktime_ns() } else { 0 };
            return Ok(Waited {
                status: HL_WAIT_CS_STATUS_BUSY,
                ts_ns,
            });
        }
        let ms = timeout_us.div_ceil(1000);
        let mut left: Jiffies = u32::try_from(ms).map_or(Jiffies::MAX, msecs_to_jiffies);
        let mut last_ts = 0;
        loop {
            let mut f = int.fired.lock();
            while f.count == seen {
                match int.wake.wait_interruptible_timeout(&mut f, left) {
                    CondVarTimeoutResult::Timeout => {
                        let ts_ns = if kernel_cq { 0 } else { last_ts };
                        return Ok(Waited {
                            status: HL_WAIT_CS_STATUS_BUSY,
                            ts_ns,
                        });
                    }
                    CondVarTimeoutResult::Signal { .. } => return Err(EINTR),
                    CondVarTimeoutResult::Woken { jiffies } => left = jiffies.max(1),
                }
            }
            seen = f.count;
            last_ts = f.ts_ns;
            drop(f);
            if counter.read()? >= target {
                return Ok(Waited {
                    status: HL_WAIT_CS_STATUS_COMPLETED,
                    ts_ns: last_ts,
                });
            }
        }
    }

    /// Register element `element` of `buf` for the time the counter `index`
    /// of `cb` reaches `target` on interrupt `slot`, for the context
    /// `owner`. `EINVAL` for an element outside the buffer, `ENOMEM` past
    /// [`MAX_REGISTRATIONS`]. O(log registrations).
    pub(crate) fn register(
        &self,
        owner: usize,
        slot: usize,
        (buf, element): (Arc<TsBuffer>, usize),
        (cb, index): (Arc<CommandBuffer>, usize),
        target: u64,
    ) -> Result {
        if element >= buf.elements() as usize || slot >= SLOTS {
            return Err(EINVAL);
        }
        let node = RBTreeNodeReservation::new(GFP_KERNEL)?;
        let b = Arc::as_ptr(&buf) as usize;
        let mut regs = self.regs.lock();
        // A registration of the same element (on any interrupt) is replaced.
        for s in 0..SLOTS {
            if regs.tree.remove(&(s, b, element)).is_some() {
                regs.len = regs.len.saturating_sub(1);
            }
        }
        if cb.word(index).ok_or(EINVAL)? >= target {
            buf.set_timestamp(element, ktime_ns() as u64);
            return Ok(());
        }
        if regs.len >= MAX_REGISTRATIONS {
            return Err(ENOMEM);
        }
        let r = TsReg {
            owner,
            buf,
            cb,
            index,
            target,
        };
        regs.tree.insert(node.into_node((slot, b, element), r));
        regs.len = regs.len.saturating_add(1);
        Ok(())
    }

    /// Drop the registrations of context `owner` (its close). O(registrations).
    pub(crate) fn forget(&self, owner: usize) {
        let mut regs = self.regs.lock();
        regs.remove_where(None, |_| true, |_, r| r.owner == owner);
    }

    /// Registrations kept (debugfs, tests). O(1).
    pub(crate) fn registrations(&self) -> usize {
        self.regs.lock().len
    }
}

impl MsixSink for UserInterrupts {
    /// The simulated device's CQ interrupt: MSI-X `48 + k` fires user
    /// interrupt `k` (any other vector is none of the user's). O(waiters +
    /// registrations).
    fn raise(&self, vector: u16) {
        let v = u32::from(vector);
        if (FIRST_USER_INTERRUPT..FIRST_USER_INTERRUPT + USER_INTERRUPTS).contains(&v) {
            self.fire((v - FIRST_USER_INTERRUPT) as usize);
        }
    }
}

/// The IRQ thread of user interrupt `k` (MSI-X `48 + k`).
/// Write the timestamps of interrupt `slot`'s registrations whose counter
/// reached its target, and drop them. O(registrations on `slot` + log n).
fn fire_slot(regs: &mut Regs, slot: usize, now: u64) {
    regs.remove_where(
        Some((slot, 0, 0)),
        |key| key.0 == slot,
        |key, r| {
            let hit = r.cb.word(r.index).is_some_and(|v| v >= r.target);
            if hit {
                r.buf.set_timestamp(key.2, now);
            }
            hit
        },
    );
}

impl Regs {
    /// Drop the registrations `take` picks, walking the keys from `from`
    /// (the first without) while `within` holds. O(keys walked + log n).
    fn remove_where(
        &mut self,
        from: Option<RegKey>,
        within: impl Fn(&RegKey) -> bool,
        mut take: impl FnMut(&RegKey, &TsReg) -> bool,
    ) {
        let mut gone = 0usize;
        let mut cur = match from {
            Some(k) => self.tree.cursor_lower_bound_mut(&k),
            None => self.tree.cursor_front_mut(),
        };
        while let Some(c) = cur {
            let (&key, r) = c.current();
            if !within(&key) {
                break;
            }
            if !take(&key, r) {
                cur = c.move_next();
                continue;
            }
            let (next, _node) = c.remove_current();
            gone = gone.saturating_add(1);
            // Past the last node, the cursor comes back to the one before.
            cur = next.filter(|n| *n.current().0 > key);
        }
        self.len = self.len.saturating_sub(gone);
    }
}

pub(crate) struct UserInterruptIrq {
    ints: Arc<UserInterrupts>,
    k: usize,
}

impl UserInterruptIrq {
    /// The handler data of user interrupt `k`. `ENOMEM`.
    pub(crate) fn new(ints: &Arc<UserInterrupts>, k: usize) -> Result<Arc<Self>> {
        Ok(Arc::new(
            Self {
                ints: ints.clone(),
                k,
            },
            GFP_KERNEL,
        )?)
    }
}

impl IrqThread for UserInterruptIrq {
    fn run(&self) {
        self.ints.fire(self.k);
    }
}

#[kunit_tests(hlrs_user_interrupt)]
mod tests {
    use super::*;
    use crate::uapi::{mmap_value, HL_MMAP_PAGE_SHIFT};
    use crate::vm::{
        command_buffer::{cb_create, cb_get, CbTable},
        ts_buffer::{ts_alloc, TsBufferTable},
    };

    fn cb() -> Result<Arc<CommandBuffer>> {
        let t = KBox::pin_init(new_mutex!(CbTable::new()), GFP_KERNEL)?;
        let h = cb_create(&t, 4096)?;
        cb_get(&t, h)
    }

    fn ts(n: u32) -> Result<Arc<TsBuffer>> {
        let t = KBox::pin_init(new_mutex!(TsBufferTable::new()), GFP_KERNEL)?;
        let h = ts_alloc(&t, n)?;
        let id = mmap_value(h >> HL_MMAP_PAGE_SHIFT) as u32;
        let b = t.lock().get(id);
        b.ok_or(EINVAL)
    }

    #[test]
    fn ids_name_upstreams_interrupts() {
        assert_eq!(UserInterrupts::slot(48), Ok(0));
        assert_eq!(UserInterrupts::slot(111), Ok(63));
        assert_eq!(UserInterrupts::slot(0xFFF), Ok(COMMON_CQ_SLOT));
        assert_eq!(UserInterrupts::slot(0xFFE), Ok(COMMON_DEC_SLOT));
        for id in [0, 9, 10, 47, 112, 0xFFD] {
            assert_eq!(UserInterrupts::slot(id), Err(EINVAL));
        }
    }

    #[test]
    fn a_wait_sees_its_counter_and_times_out_busy() -> Result {
        let ints = UserInterrupts::new()?;
        let cb = cb()?;
        let c = Counter::Cb(cb.clone(), 3);
        // Short of the target: BUSY at once (timeout 0, stamped) and after
        // a short timeout (not stamped).
        let w = ints.wait(0, &c, 5, 0)?;
        assert_eq!(w.status, HL_WAIT_CS_STATUS_BUSY);
        assert!(w.ts_ns > 0);
        let w = ints.wait(0, &c, 5, 2000)?;
        assert_eq!((w.status, w.ts_ns), (HL_WAIT_CS_STATUS_BUSY, 0));
        // There: COMPLETED without sleeping.
        cb.set_word(3, 5);
        assert_eq!(
            ints.wait(0, &c, 5, 1_000_000)?.status,
            HL_WAIT_CS_STATUS_COMPLETED
        );
        Ok(())
    }

    #[test]
    fn a_registration_fires_with_its_interrupt_and_goes_with_its_owner() -> Result {
        let ints = UserInterrupts::new()?;
        let (cb, buf) = (cb()?, ts(8)?);
        ints.register(1, 2, (buf.clone(), 4), (cb.clone(), 0), 1)?;
        // Again on the same element: replaced, not added.
        ints.register(1, 2, (buf.clone(), 4), (cb.clone(), 0), 1)?;
        ints.register(2, 2, (buf.clone(), 5), (cb.clone(), 0), 1)?;
        assert_eq!(ints.registrations(), 2);
        assert_eq!(
            ints.register(1, 2, (buf.clone(), 8), (cb.clone(), 0), 1),
            Err(EINVAL)
        );
        // Another interrupt, or the counter short: nothing written.
        ints.fire(3);
        ints.fire(2);
        assert_eq!((buf.timestamp(4), ints.registrations()), (Some(0), 2));
        cb.set_word(0, 1);
        ints.fire(2);
        assert!(buf.timestamp(4).is_some_and(|t| t > 0));
        assert_eq!(ints.registrations(), 0);
        // Already there: written at once, nothing kept; an owner's close
        // drops what it left.
        ints.register(1, 7, (buf.clone(), 6), (cb.clone(), 0), 1)?;
        assert!(buf.timestamp(6).is_some_and(|t| t > 0));
        ints.register(1, 7, (buf.clone(), 7), (cb.clone(), 0), 2)?;
        ints.forget(1);
        assert_eq!(ints.registrations(), 0);
        Ok(())
    }

    #[test]
    fn registrations_move_between_ids_fire_on_the_common_one_and_go_by_owner() -> Result {
        let ints = UserInterrupts::new()?;
        let (cb, buf) = (cb()?, ts(16)?);
        // Element 0 on interrupt 1, then on 5: one registration, on 5.
        ints.register(1, 1, (buf.clone(), 0), (cb.clone(), 0), 1)?;
        ints.register(1, 5, (buf.clone(), 0), (cb.clone(), 0), 1)?;
        assert_eq!(ints.registrations(), 1);
        // Owner 1's on the common id: the tree's last key.
        ints.register(1, COMMON_CQ_SLOT, (buf.clone(), 1), (cb.clone(), 0), 1)?;
        for e in 2..10 {
            ints.register(1 + e % 2, 9, (buf.clone(), e), (cb.clone(), 0), 1)?;
        }
        assert_eq!(ints.registrations(), 10);
        // Owner 1's go (the first, every other one, the last).
        ints.forget(1);
        assert_eq!(ints.registrations(), 4);
        cb.set_word(0, 1);
        ints.fire(9);
        assert_eq!(ints.registrations(), 0);
        for e in [3, 5, 7, 9] {
            assert!(buf.timestamp(e).is_some_and(|t| t > 0));
        }
        assert_eq!(buf.timestamp(2), Some(0));
        // One on the common id fires with any user interrupt.
        ints.register(3, COMMON_CQ_SLOT, (buf.clone(), 10), (cb.clone(), 0), 2)?;
        cb.set_word(0, 2);
        ints.fire(0);
        assert!(buf.timestamp(10).is_some_and(|t| t > 0));
        assert_eq!(ints.registrations(), 0);
        Ok(())
    }
}
