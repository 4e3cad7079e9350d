// SPDX-License-Identifier: GPL-2.0

//! Command submission (floor 5, beside `vm/`): the driver's side of
//! `DRM_IOCTL_HL_CS` and `DRM_IOCTL_HL_WAIT_CS` (upstream
//! `common/command_submission.c`), over the engine boundary
//! ([`crate::hw::engines`]: no `hw::sim` type is named here). Each concept has its file, importing only downward:
//!
//! 1. [`chunks`] (a CS's chunks as read), [`fence`] (one CS's completion), [`outcome`] (outcomes kept for late
//!    waits), [`capture`] (the errors captured for INFO), [`validate`]
//!    (the checks of a chunk);
//! 2. [`device_cs`]: the device-wide part (engines, device status, aggregated counters,
//!    captured errors, timeout and page-fault configuration);
//! 3. [`tracker`]: one context's CSs in flight, sequence numbers, the
//!    window of 64, timeouts (the driver's TDR watchdog), close;
//! 4. [`wait`] (WAIT_CS) and [`submit`] (CS, with its restore phase);
//!    [`sync_stream`] (SIGNAL and WAIT CSs, over [`sync_objects`]: the
//!    sync streams' SOBs, monitors and CBs);
//!    [`user_interrupt`] (WAIT_CS on a user interrupt, timestamp
//!    registrations, the MSI-X 48..111 threads).

pub(crate) mod capture;
pub(crate) mod chunks;
pub(crate) mod device_cs;
pub(crate) mod fence;
pub(crate) mod outcome;
pub(crate) mod submit;
pub(crate) mod sync_objects;
pub(crate) mod sync_stream;
pub(crate) mod tracker;
pub(crate) mod user_interrupt;
pub(crate) mod validate;
pub(crate) mod wait;
