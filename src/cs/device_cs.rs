// SPDX-License-Identifier: GPL-2.0

//! The device-wide side of command submission: the engines (the boundary
//! [`Engines`]), the device status (the driver's, [`DeviceCs::status`]), the
//! CS counters of every context together (`aggregated_cs_counters`), the
//! errors captured for the user ([`Captured`]) and the configuration from
//! the module parameters: the CS timeout (`timeout_locked`) and what a page
//! fault does (`reset_on_page_fault`).
//!
//! **Page faults.** Upstream Gaudi2 answers an MMU page fault with a hard
//! reset of the device, which ends every process using it. Here the faulting
//! CS is aborted (WAIT_CS: ABORTED), the fault captured, and the device stays
//! usable for the next CS: a deliberate difference, so that a runtime's
//! fault handling can be tested without losing the process. With
//! `reset_on_page_fault=1` the device behaves as upstream's does from the
//! user's side: the fault raises `HL_NOTIFIER_EVENT_DEVICE_RESET` with the
//! page-fault event, every CS of the context is aborted, and the device
//! reports `NEEDS_RESET` (every CS, WAIT_CS and MEMORY call then answers
//! `EBUSY`) until its user closes it; the close completes the reset
//! (`hard_reset_cnt` + 1) and the device is operational again. Unlike
//! upstream the process is not killed: it must close the device itself.
//!
//! **Notifier.** The events raised (page fault, RAZWI, engine error, CS
//! timeout, undefined opcode, device reset) are kept for
//! `HL_INFO_GET_EVENTS` and signalled on the eventfd the compute file
//! registered (`HL_INFO_REGISTER_EVENTFD`), which goes with the file's
//! close.
//!
//! **Kernel log.** Engine errors (faults, refused packets, timeouts, failed
//! restore CSs) are logged through a per-device rate limit ([`LogLimit`]):
//! at most [`LOG_BURST`] lines per [`LOG_INTERVAL_NS`], as the kernel's
//! `dev_err_ratelimited` defaults, whatever the opens and closes; the lines
//! left out are counted in one line when the next interval starts.
//!
//! Lock order: `captured` and `notifier` are leaves, never nested, taken
//! alone (a CS's event, the watchdog's timeout); `status` is a leaf;
//! `captured` is never held across a copy to or from user memory (INFO
//! takes what it reports, an O(1) copy or a reference, and copies it out
//! unlocked), nor inside `HlDevice::state`.

use crate::{
    cs::{
        capture::{self, Captured},
        user_interrupt::UserInterrupts,
    },
    ffi::{clock::ktime_ns, eventfd::EventFd},
    hw::{
        backend::{Backend, DeviceStatus},
        engines::{EngineFault, Engines, PacketError},
    },
    uapi::*,
    vm::context_vm::ContextVm,
};
use kernel::{
    new_mutex,
    prelude::*,
    sync::{
        atomic::{Atomic, Relaxed},
        Arc, Mutex,
    },
};

/// The reasons a CS is dropped, in `struct hl_info_cs_counters` order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum DropKind {
    /// An allocation failed.
    OutOfMem = 0,
    /// A chunk failed the parser (disabled queue, CB address).
    Parsing = 1,
    /// A queue had no room.
    QueueFull = 2,
    /// The device was not operational at scheduling.
    DeviceInReset = 3,
    /// 64 CSs were in flight.
    MaxCsInFlight = 4,
    /// A chunk failed validation (count, copy, queue index, CB kind).
    Validation = 5,
}

/// One set of drop counters (`struct hl_cs_counters_atomic`).
pub(crate) struct CsCounters([Atomic<u64>; 6]);

impl CsCounters {
    /// All zero.
    pub(crate) fn new() -> Self {
        Self(core::array::from_fn(|_| Atomic::new(0)))
    }

    /// Count one drop of `kind`. O(1).
    pub(crate) fn count(&self, kind: DropKind) {
        if let Some(c) = self.0.get(kind as usize) {
            c.add(1, Relaxed);
        }
    }

    /// The six counters in uAPI order. O(1).
    pub(crate) fn values(&self) -> [u64; 6] {
        core::array::from_fn(|i| self.0.get(i).map_or(0, |c| c.load(Relaxed)))
    }
}

/// Default of `timeout_locked` (upstream `HL_DEFAULT_TIMEOUT_LOCKED`), in seconds.
pub(crate) const DEFAULT_TIMEOUT_S: u32 = 30;

/// The device-wide command-submission state.
#[pin_data]
pub(crate) struct DeviceCs {
    /// The hardware (its health: a PCI device that fell off the bus).
    hw: Arc<dyn Backend>,
    /// The device status the driver keeps (`hdev->status`): set by the
    /// reset of `reset_on_page_fault` and by debugfs; [`Self::status`]
    /// combines it with the hardware's health.
    #[pin]
    status: Mutex<DeviceStatus>,
    /// The engines; `None` on a device whose engines the driver does not
    /// drive (a PCI Gaudi2: PQ submission, doorbells and MSI-X completion
    /// are not implemented), where every CS with jobs fails with
    /// `EOPNOTSUPP` before it gets a sequence number ([`Self::engines`]).
    engines: Option<Arc<dyn Engines>>,
    /// The user interrupts (MSI-X 48..111) and their waits; `None` on a
    /// device without them (the simulation: interrupt waits are `EPERM`).
    interrupts: Option<Arc<UserInterrupts>>,
    /// Every context's drops together.
    pub(crate) counters: CsCounters,
    #[pin]
    captured: Mutex<Captured>,
    /// The eventfd the compute file registered (`HL_INFO_REGISTER_EVENTFD`).
    #[pin]
    notifier: Mutex<Option<EventFd>>,
    /// CS timeout in ms (0: none), from `timeout_locked`.
    timeout_ms: Atomic<u64>,
    /// `reset_on_page_fault`.
    reset_on_fault: Atomic<bool>,
    /// A reset is pending: set by a page fault in reset mode, completed by
    /// the close of the context.
    reset_pending: Atomic<bool>,
    /// Hard resets since load.
    hard_resets: Atomic<u32>,
    /// The rate limit of engine-error log lines (upstream logs them
    /// rate-limited; a fuzzer provokes thousands).
    log_limit: LogLimit,
}

/// Engine-error lines logged per interval (`DEFAULT_RATELIMIT_BURST`).
pub(crate) const LOG_BURST: u32 = 10;
/// The interval of [`LOG_BURST`] (`DEFAULT_RATELIMIT_INTERVAL`: 5 s), in ns.
pub(crate) const LOG_INTERVAL_NS: i64 = 5_000_000_000;

/// A time-based rate limit without a lock (the kernel's `___ratelimit`
/// with atomics): at most [`LOG_BURST`] lines in an interval of
/// [`LOG_INTERVAL_NS`] that starts at the first line after the last one
/// ended. Opens and closes do not refill it.
pub(crate) struct LogLimit {
    /// Start of the current interval (ktime ns); `i64::MIN`: none yet.
    start_ns: Atomic<i64>,
    /// Lines allowed in the current interval.
    printed: Atomic<u32>,
    /// Lines refused since the current interval started.
    missed: Atomic<u32>,
}

impl LogLimit {
    /// No line logged yet.
    pub(crate) fn new() -> Self {
        Self {
            start_ns: Atomic::new(i64::MIN),
            printed: Atomic::new(0),
            missed: Atomic::new(0),
        }
    }

    /// Whether one more line may go out at `now_ns`, and how many were
    /// refused in the interval that `now_ns` ends (to be reported once).
    /// Callers racing the start of an interval may each get one line more
    /// through (the count is reset after the interval moved). O(1) (a
    /// bounded retry under contention).
    pub(crate) fn allow(&self, now_ns: i64) -> (bool, u32) {
        let start = self.start_ns.load(Relaxed);
        let mut missed = 0;
        let over = start == i64::MIN || now_ns.saturating_sub(start) >= LOG_INTERVAL_NS;
        if over && self.start_ns.cmpxchg(start, now_ns, Relaxed).is_ok() {
            missed = self.missed.xchg(0, Relaxed);
            self.printed.store(0, Relaxed);
        }
        let mut n = self.printed.load(Relaxed);
        while n < LOG_BURST {
            match self.printed.cmpxchg(n, n + 1, Relaxed) {
                Ok(_) => return (true, missed),
                Err(now) => n = now,
            }
        }
        self.missed.add(1, Relaxed);
        (false, missed)
    }
}

impl DeviceCs {
    /// The CS state of a device on `hw` with `engines` (`None`: engines the
    /// driver does not drive, so every CS with jobs is refused), with
    /// upstream's default timeout, operational. O(1).
    pub(crate) fn new(
        hw: Arc<dyn Backend>,
        engines: Option<Arc<dyn Engines>>,
        interrupts: Option<Arc<UserInterrupts>>,
    ) -> Result<Arc<Self>> {
        Arc::pin_init(
            try_pin_init!(Self {
                hw,
                status <- new_mutex!(DeviceStatus::Operational),
                engines,
                interrupts,
                counters: CsCounters::new(),
                captured <- new_mutex!(Captured::default()),
                notifier <- new_mutex!(None),
                timeout_ms: Atomic::new(u64::from(DEFAULT_TIMEOUT_S) * 1000),
                reset_on_fault: Atomic::new(false),
                reset_pending: Atomic::new(false),
                hard_resets: Atomic::new(0),
                log_limit: LogLimit::new(),
            }),
            GFP_KERNEL,
        )
    }

    /// Apply the module parameters: `timeout_s` seconds (0: none) and the
    /// page-fault behaviour. O(1).
    pub(crate) fn configure(&self, timeout_s: u32, reset_on_fault: bool) {
        self.set_timeout_ms(u64::from(timeout_s) * 1000);
        self.reset_on_fault.store(reset_on_fault, Relaxed);
    }

    /// Set the CS timeout in ms (0: none). O(1).
    pub(crate) fn set_timeout_ms(&self, ms: u64) {
        self.timeout_ms.store(ms, Relaxed);
    }

    /// The device's CS timeout in ms, `None` if disabled. O(1).
    pub(crate) fn timeout_ms(&self) -> Option<u64> {
        Some(self.timeout_ms.load(Relaxed)).filter(|&t| t != 0)
    }

    /// The device state (`hl_device_status`): the driver's, unless it is
    /// operational and the hardware says otherwise (a PCI device gone).
    /// O(1).
    pub(crate) fn status(&self) -> DeviceStatus {
        match *self.status.lock() {
            DeviceStatus::Operational => self.hw.status(),
            s => s,
        }
    }

    /// Set the driver's device state (a reset, debugfs, tests). O(1).
    pub(crate) fn set_status(&self, status: DeviceStatus) {
        *self.status.lock() = status;
    }

    /// Whether the device takes work. O(1).
    pub(crate) fn operational(&self) -> bool {
        self.status().is_operational()
    }

    /// The engines: `EOPNOTSUPP` on a device without engines the driver
    /// drives (see [`Self::engines`]). O(1).
    /// The user interrupts: `EPERM` on a device without them (upstream's
    /// answer when `user_interrupt_count` is 0).
    pub(crate) fn interrupts(&self) -> Result<&Arc<UserInterrupts>> {
        self.interrupts.as_ref().ok_or(EPERM)
    }

    pub(crate) fn engines(&self) -> Result<&Arc<dyn Engines>> {
        self.engines.as_ref().ok_or(EOPNOTSUPP)
    }

    /// The busy engines (`HL_INFO_HW_IDLE`); none without engines. O(engines).
    pub(crate) fn busy_mask(&self) -> [u64; HL_BUSY_ENGINES_MASK_EXT_SIZE] {
        self.engines
            .as_ref()
            .map_or([0; HL_BUSY_ENGINES_MASK_EXT_SIZE], |e| e.busy_mask())
    }

    /// A new open of the compute node: forget what was captured
    /// (`hl_enable_err_info_capture`). Called with no other lock held (not
    /// under `HlDevice::state`). O(1); frees the old mapping list (after
    /// unlocking) unless an INFO still copies it out.
    pub(crate) fn enable_capture(&self) {
        let old = core::mem::take(&mut *self.captured.lock());
        drop(old);
    }

    /// Whether one more engine error may be logged now (the device's rate
    /// limit). O(1).
    pub(crate) fn may_log(&self) -> bool {
        self.may_log_at(ktime_ns())
    }

    /// [`Self::may_log`] at `now_ns`; reports the lines the limit left out
    /// when a new interval starts. O(1).
    pub(crate) fn may_log_at(&self, now_ns: i64) -> bool {
        let (ok, missed) = self.log_limit.allow(now_ns);
        if missed > 0 {
            pr_info!("{} engine error message(s) suppressed\n", missed);
        }
        ok
    }

    /// Run `f` on what was captured (INFO) and return what it takes out.
    /// The lock is held for `f`, which must not copy to or from user memory
    /// (a fault there can sleep for as long as the memory's owner likes).
    /// O(f).
    pub(crate) fn with_captured<R>(&self, f: impl FnOnce(&mut Captured) -> R) -> R {
        f(&mut self.captured.lock())
    }

    /// Whether `captured` is free now (tests: no user copy holds it).
    #[cfg(CONFIG_KUNIT)]
    pub(crate) fn captured_is_free(&self) -> bool {
        self.captured.try_lock().is_some()
    }

    /// Record an engine fault of a job of context `vm`: the first page
    /// fault with the user mappings of the moment, and its event; in reset
    /// mode, the reset it starts. Returns whether the context's CSs must
    /// all be aborted (reset mode). Allocates the mapping list (a failure
    /// leaves it empty, as upstream's `vzalloc` failure does). O(mappings)
    /// for the first page fault, O(1) after.
    pub(crate) fn record_fault(&self, fault: &EngineFault, vm: &ContextVm) -> bool {
        if let Some(r) = capture::razwi_info(fault) {
            self.captured.lock().razwi.get_or_insert(r);
            self.raise(HL_NOTIFIER_EVENT_RAZWI);
            return false;
        }
        if let Some(engine) = capture::engine_error_of(fault) {
            self.record_engine_error(engine);
            return false;
        }
        let Some((info, pmmu)) = capture::page_fault_info(fault) else {
            return false;
        };
        let first = self.captured.lock().page_fault.is_none();
        if first {
            let maps = capture::user_mappings(vm, pmmu)
                .and_then(|m| Ok(Arc::new(m, GFP_KERNEL)?))
                .ok();
            let mut c = self.captured.lock();
            if c.page_fault.is_none() {
                c.page_fault = Some(info);
                c.user_mappings = maps;
            }
        }
        let reset = self.reset_on_fault.load(Relaxed);
        let mut events = HL_NOTIFIER_EVENT_PAGE_FAULT;
        if reset && !self.reset_pending.xchg(true, Relaxed) {
            events |= HL_NOTIFIER_EVENT_DEVICE_RESET;
            self.set_status(DeviceStatus::NeedsReset);
            pr_info!("page fault: the device needs a reset (reset_on_page_fault=1)\n");
        }
        self.raise(events);
        reset
    }

    /// Raise notifier `events`: kept for `HL_INFO_GET_EVENTS` and signalled
    /// on the registered eventfd (`hl_notifier_event_send`). O(1).
    fn raise(&self, events: u64) {
        self.captured.lock().events |= events;
        if let Some(fd) = self.notifier.lock().as_ref() {
            fd.signal();
        }
    }

    /// `HL_INFO_REGISTER_EVENTFD` with the caller's `fd`: `EINVAL` if one is
    /// registered already, `EBADF`/`EINVAL` for a bad fd. O(1).
    pub(crate) fn register_eventfd(&self, fd: i32) -> Result {
        let mut n = self.notifier.lock();
        if n.is_some() {
            return Err(EINVAL);
        }
        *n = Some(EventFd::from_fd(fd)?);
        Ok(())
    }

    /// `HL_INFO_UNREGISTER_EVENTFD`: `EINVAL` if none is registered. O(1).
    pub(crate) fn unregister_eventfd(&self) -> Result {
        let fd = self.notifier.lock().take().ok_or(EINVAL)?;
        drop(fd);
        Ok(())
    }

    /// The compute file closes: its eventfd goes. O(1).
    pub(crate) fn release_notifier(&self) {
        let fd = self.notifier.lock().take();
        drop(fd);
    }

    /// Record the first CS timeout (`seq`) and its event. O(1).
    pub(crate) fn record_timeout(&self, seq: u64) {
        {
            let mut c = self.captured.lock();
            if c.cs_timeout.seq == 0 {
                c.cs_timeout = HlInfoCsTimeoutEvent {
                    timestamp: crate::ffi::clock::ktime_ns(),
                    seq,
                };
            }
        }
        self.raise(HL_NOTIFIER_EVENT_CS_TIMEOUT);
    }

    /// Record a packet at `addr` that `engine` refused with `error`: the
    /// first undefined opcode, or for a `LIN_DMA` whose size does not fit
    /// its swap, which the DMA core refuses (`WRONG CFG FOR COMMIT IN LIN
    /// DMA`), an engine error. O(1).
    pub(crate) fn record_bad_packet(&self, addr: u64, engine: u16, error: &PacketError) {
        if matches!(error, PacketError::SwapSize { .. }) {
            self.record_engine_error(engine);
            return;
        }
        {
            let mut c = self.captured.lock();
            if c.undefined_opcode.is_none() {
                c.undefined_opcode = Some(capture::undefined_opcode_info(addr, engine));
            }
        }
        self.raise(HL_NOTIFIER_EVENT_UNDEFINED_OPCODE);
    }

    /// Record the first engine error, on `engine` (`hl_capture_engine_err`),
    /// and its event. O(1).
    fn record_engine_error(&self, engine: u16) {
        self.captured
            .lock()
            .engine_err
            .get_or_insert_with(|| capture::engine_err_info(engine));
        self.raise(HL_NOTIFIER_EVENT_USER_ENGINE_ERR);
    }

    /// The user of the device is gone: complete a pending reset (the device
    /// is operational again). O(1).
    pub(crate) fn finish_reset(&self) {
        if self.reset_pending.xchg(false, Relaxed) {
            self.hard_resets.add(1, Relaxed);
            self.set_status(DeviceStatus::Operational);
            pr_info!("device reset after a page fault: operational again\n");
        }
    }

    /// Hard resets since load (`HL_INFO_RESET_COUNT`). O(1).
    pub(crate) fn hard_resets(&self) -> u32 {
        self.hard_resets.load(Relaxed)
    }
}

#[kunit_tests(hlrs_device_cs)]
mod tests {
    use super::*;

    const T0: i64 = 1_000_000_000_000;

    #[test]
    fn the_log_limit_is_a_rate_not_a_budget_per_open() -> Result {
        let asic = crate::asic::AsicProperties::gaudi2(6, 0)?;
        let sim = Arc::pin_init(crate::hw::sim::SimGaudi2::new(&asic), GFP_KERNEL)?;
        let cs = DeviceCs::new(sim, None, None)?;
        for _ in 0..LOG_BURST {
            assert!(cs.may_log_at(T0));
        }
        assert!(!cs.may_log_at(T0 + 1));
        // Opens and closes refill nothing.
        for _ in 0..100 {
            cs.enable_capture();
            assert!(!cs.may_log_at(T0 + 2));
        }
        // Time does (asked of the limit itself: `may_log_at` would log
        // the 102 lines it left out).
        assert!(!cs.may_log_at(T0 + LOG_INTERVAL_NS - 1));
        assert_eq!(cs.log_limit.allow(T0 + LOG_INTERVAL_NS), (true, 102));
        Ok(())
    }

    #[test]
    fn the_log_limit_counts_what_it_left_out() {
        let l = LogLimit::new();
        for i in 0..LOG_BURST {
            assert_eq!(l.allow(T0 + i64::from(i)), (true, 0));
        }
        for _ in 0..7 {
            assert_eq!(l.allow(T0 + 100), (false, 0));
        }
        // The next interval starts with the first line after it is due,
        // and reports the 7 refused.
        assert_eq!(l.allow(T0 + 3 * LOG_INTERVAL_NS), (true, 7));
        assert_eq!(l.allow(T0 + 3 * LOG_INTERVAL_NS + 1), (true, 0));
        // 1,000 calls in one interval: exactly the burst goes out.
        let l = LogLimit::new();
        let n = (0..1000).filter(|&i| l.allow(T0 + i).0).count();
        assert_eq!(n, LOG_BURST as usize);
    }
}
