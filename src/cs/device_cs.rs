// SPDX-License-Identifier: GPL-2.0

//! The device-wide side of command submission: the engines ([`Qman`]), the
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
//! **Notifier.** The events raised (page fault, CS timeout, undefined
//! opcode, device reset) are kept for `HL_INFO_GET_EVENTS` and signalled on
//! the eventfd the compute file registered (`HL_INFO_REGISTER_EVENTFD`),
//! which goes with the file's close.
//!
//! Lock order: `captured` and `notifier` are leaves, never nested.

use crate::{
    cs::capture::{self, Captured},
    ffi::eventfd::EventFd,
    hw::{
        backend::{Backend, DeviceStatus},
        sim::{fault::EngineFault, qman::Qman, SimGaudi2},
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
    /// The hardware (its status; the reset of `reset_on_page_fault`).
    pub(crate) sim: Arc<SimGaudi2>,
    /// The engines.
    pub(crate) qman: Arc<Qman>,
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
    /// Engine errors still to be logged in this open (upstream logs them
    /// rate-limited; a fuzzer provokes thousands).
    log_budget: Atomic<u32>,
}

/// Engine errors logged per open of the compute node.
const LOG_BUDGET: u32 = 16;

impl DeviceCs {
    /// The CS state of a device on `sim`, with upstream's default timeout.
    /// O(engines).
    pub(crate) fn new(sim: Arc<SimGaudi2>) -> Result<Arc<Self>> {
        let qman = Qman::new(&sim)?;
        Arc::pin_init(
            try_pin_init!(Self {
                sim,
                qman,
                counters: CsCounters::new(),
                captured <- new_mutex!(Captured::default()),
                notifier <- new_mutex!(None),
                timeout_ms: Atomic::new(u64::from(DEFAULT_TIMEOUT_S) * 1000),
                reset_on_fault: Atomic::new(false),
                reset_pending: Atomic::new(false),
                hard_resets: Atomic::new(0),
                log_budget: Atomic::new(LOG_BUDGET),
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

    /// Whether the device takes work. O(1).
    pub(crate) fn operational(&self) -> bool {
        self.sim.status().is_operational()
    }

    /// A new open of the compute node: forget what was captured
    /// (`hl_enable_err_info_capture`). O(1); frees the old mapping list.
    pub(crate) fn enable_capture(&self) {
        let old = core::mem::take(&mut *self.captured.lock());
        drop(old);
        self.log_budget.store(LOG_BUDGET, Relaxed);
    }

    /// Whether one more engine error may be logged in this open. O(1).
    pub(crate) fn may_log(&self) -> bool {
        let mut left = self.log_budget.load(Relaxed);
        while left > 0 {
            match self.log_budget.cmpxchg(left, left - 1, Relaxed) {
                Ok(_) => return true,
                Err(now) => left = now,
            }
        }
        false
    }

    /// Run `f` on what was captured (INFO). The lock is held for `f`. O(f).
    pub(crate) fn with_captured<R>(&self, f: impl FnOnce(&mut Captured) -> R) -> R {
        f(&mut self.captured.lock())
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
        let Some((info, pmmu)) = capture::page_fault_info(fault) else {
            return false;
        };
        let first = self.captured.lock().page_fault.is_none();
        if first {
            let maps = capture::user_mappings(vm, pmmu).unwrap_or_default();
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
            self.sim.set_status(DeviceStatus::NeedsReset);
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

    /// Record the first undefined opcode: the packet at `addr` on `engine`. O(1).
    pub(crate) fn record_bad_packet(&self, addr: u64, engine: u16) {
        {
            let mut c = self.captured.lock();
            if c.undefined_opcode.is_none() {
                c.undefined_opcode = Some(capture::undefined_opcode_info(addr, engine));
            }
        }
        self.raise(HL_NOTIFIER_EVENT_UNDEFINED_OPCODE);
    }

    /// The user of the device is gone: complete a pending reset (the device
    /// is operational again). O(1).
    pub(crate) fn finish_reset(&self) {
        if self.reset_pending.xchg(false, Relaxed) {
            self.hard_resets.add(1, Relaxed);
            self.sim.set_status(DeviceStatus::Operational);
            pr_info!("device reset after a page fault: operational again\n");
        }
    }

    /// Hard resets since load (`HL_INFO_RESET_COUNT`). O(1).
    pub(crate) fn hard_resets(&self) -> u32 {
        self.hard_resets.load(Relaxed)
    }
}
