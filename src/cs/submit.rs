// SPDX-License-Identifier: GPL-2.0

//! `DRM_IOCTL_HL_CS` for Gaudi2 (upstream `hl_cs_ioctl`,
//! common/command_submission.c:2555-2654), below the copy of its argument.
//!
//! 1. Sanity (`hl_cs_sanity_checks`): `pad` must be zero (`EINVAL`); the
//!    device must be operational (`EBUSY`); staged submission is not
//!    supported on Gaudi2 (`EPERM`); at most one CS-type flag (`EINVAL`);
//!    a default CS needs execute chunks (`EINVAL`), a sync-stream CS one.
//! 2. Restore phase (`hl_cs_ctx_switch`): with `HL_CS_FLAGS_FORCE_RESTORE`
//!    and restore chunks, those run first as their own CS (flags 0, the
//!    device's timeout), under the context's restore lock, and the execute
//!    CS is submitted only after it completed: a restore CS that fails to
//!    complete (aborted, timed out, or the wait interrupted) makes the
//!    ioctl `ENOEXEC`.
//! 3. By type: a default CS (`cs_ioctl_default`) as described below;
//!    `HL_CS_FLAGS_FLUSH_PCI_HBW_WRITES` succeeds at once (the simulation
//!    has no posted writes to flush); the sync-stream, signal-reservation
//!    and engine-command types are not served: `EOPNOTSUPP` (upstream
//!    Gaudi2 serves them). SIGNAL and WAIT CSs are
//!    [`super::sync_stream`]'s (`EOPNOTSUPP` on a device whose queues do
//!    not run the sync manager). On a device without engines the driver
//!    drives every CS with jobs, restore phase included, is `EOPNOTSUPP`
//!    too, before its chunks are read: nothing reaches the hardware and no
//!    drop is counted. Unknown flag bits are ignored, as upstream, and
//!    so are `HL_CS_FLAGS_SKIP_RESET_ON_TIMEOUT` (no reset follows a timeout
//!    here) and `HL_CS_FLAGS_ENCAP_SIGNALS` without a staged submission.
//!
//! A default CS: more than `HL_MAX_JOBS_PER_CS` chunks is `EINVAL` and an
//! unreadable array `EFAULT` (validation drops), both before the CS gets a
//! sequence number; then the number (`EAGAIN` with 64 in flight), then
//! every chunk's checks ([`check_chunk`]), the device state at scheduling
//! (`EPERM`, device-in-reset drop) and the queues' room (`EAGAIN`,
//! queue-full drop). Before the number, the queues the chunks name are
//! made ready ([`AsidQueues::prepare`]: the simulation creates the
//! context's engine thread of each engine there; `ENOMEM`, out-of-memory
//! drop, or `EINTR` for a submitter being killed), and the context's
//! watchdog thread (its TDR timer) is created with its first CS. A CS refused after it got its number has used it: its
//! fence is done at once and WAIT_CS reports it completed, as upstream. The
//! jobs are queued under the tracker's lock, so a context's CSs reach the
//! engines in sequence order, and the ioctl returns without waiting for
//! them.
//!
//! **Timeouts and the cap.** The CS's timeout is its own with
//! `HL_CS_FLAGS_CUSTOM_TIMEOUT` (upstream: `secs_to_jiffies(args->in.timeout)`,
//! up to `0xFFFFFFFF` s) or the device's `timeout_locked`, and is clamped
//! to the module parameter `cs_max_run_s` (when not 0), which also bounds
//! every CS's time in flight from its submission ([`super::tracker`]): whatever
//! the user asks, no CS runs longer on the engines.

pub(crate) use crate::cs::chunks::{ChunkSource, Chunks, INLINE_CHUNKS};
use crate::{
    cs::{
        device_cs::DropKind,
        sync_objects::SobOut,
        sync_stream::cs_signal_wait,
        tracker::{start_threads, ContextCs, Flight, Track},
        validate::check_chunk,
        wait::{wait_cs, WaitCs},
    },
    ffi::kthread::cs_max_run_s,
    hw::engines::{AsidQueues, EngineJob, EngineSink},
    uapi::*,
};
use kernel::{alloc::KVec, prelude::*, sync::Arc};

/// The input of a CS ioctl.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct CsIn {
    /// Restore chunks: array address and count.
    pub(crate) restore: (u64, u32),
    /// Execute chunks.
    pub(crate) execute: (u64, u32),
    /// `HL_CS_FLAGS_*`.
    pub(crate) flags: u32,
    /// Seconds, with `HL_CS_FLAGS_CUSTOM_TIMEOUT`.
    pub(crate) timeout_s: u32,
    /// Must be zero.
    pub(crate) pad: [u8; 4],
}

impl From<&HlCsArgs> for CsIn {
    fn from(a: &HlCsArgs) -> Self {
        Self {
            restore: (a.chunks_restore, a.num_chunks_restore),
            execute: (a.chunks_execute, a.num_chunks_execute),
            flags: a.cs_flags,
            timeout_s: a.timeout,
            pad: a.pad,
        }
    }
}

/// Serve a CS ioctl. Returns `out.seq` (`u64::MAX` when no CS was
/// submitted), the result and a signal's SOB fields; upstream leaves the
/// arguments untouched after `EAGAIN`, the caller's part.
pub(crate) fn cs_ioctl(
    ctx: &Arc<ContextCs>,
    a: &CsIn,
    src: &dyn ChunkSource,
) -> (u64, Result, SobOut) {
    let mut seq = u64::MAX;
    let plain = |seq, r| (seq, r, SobOut::default());
    if let Err(e) = sanity(ctx, a) {
        return plain(seq, Err(e));
    }
    if let Err(e) = restore_phase(ctx, a, src, &mut seq) {
        return plain(seq, Err(e));
    }
    let timeout = if a.flags & HL_CS_FLAGS_CUSTOM_TIMEOUT != 0 {
        Some(u64::from(a.timeout_s) * 1000)
    } else {
        ctx.dev.timeout_ms()
    };
    match a.flags & HL_CS_FLAGS_TYPE_MASK {
        0 => {
            let (s, r) = cs_default(ctx, a.execute, a.flags, capped(timeout), src);
            plain(s, r)
        }
        HL_CS_FLAGS_SIGNAL | HL_CS_FLAGS_WAIT | HL_CS_FLAGS_COLLECTIVE_WAIT => {
            cs_signal_wait(ctx, (a.execute.0, a.flags), capped(timeout), src)
        }
        HL_CS_FLAGS_FLUSH_PCI_HBW_WRITES => plain(seq, Ok(())),
        _ => plain(seq, Err(EOPNOTSUPP)),
    }
}

/// The run-time cap in ms (`cs_max_run_s`; `None`: no cap). O(1).
fn cap_ms() -> Option<u64> {
    Some(u64::from(cs_max_run_s()) * 1000).filter(|&ms| ms != 0)
}

/// A CS's timeout and cap: the timeout clamped to the cap. O(1).
fn capped(timeout_ms: Option<u64>) -> (Option<u64>, Option<u64>) {
    let cap = cap_ms();
    let timeout = match (timeout_ms, cap) {
        (Some(t), Some(c)) => Some(t.min(c)),
        (t, _) => t,
    };
    (timeout, cap)
}

/// `hl_cs_sanity_checks`. O(1).
fn sanity(ctx: &ContextCs, a: &CsIn) -> Result {
    if a.pad != [0; 4] {
        return Err(EINVAL);
    }
    if !ctx.dev.operational() {
        return Err(EBUSY);
    }
    if a.flags & HL_CS_FLAGS_STAGED_SUBMISSION != 0 {
        return Err(EPERM);
    }
    let kind = a.flags & HL_CS_FLAGS_TYPE_MASK;
    if kind != 0 && !kind.is_power_of_two() {
        return Err(EINVAL);
    }
    let sync_stream = HL_CS_FLAGS_SIGNAL | HL_CS_FLAGS_WAIT | HL_CS_FLAGS_COLLECTIVE_WAIT;
    match (kind, a.execute.1) {
        (0, 0) => Err(EINVAL),
        (k, n) if k & sync_stream != 0 && n != 1 => Err(EINVAL),
        _ => Ok(()),
    }
}

/// `hl_cs_ctx_switch` on Gaudi2 (no context switch): the restore phase of
/// `HL_CS_FLAGS_FORCE_RESTORE`. Sets `seq` to the restore CS's.
fn restore_phase(ctx: &Arc<ContextCs>, a: &CsIn, src: &dyn ChunkSource, seq: &mut u64) -> Result {
    if a.flags & HL_CS_FLAGS_FORCE_RESTORE == 0 {
        return Ok(());
    }
    let serial = ctx.restore.lock();
    if a.restore.1 == 0 {
        return Ok(());
    }
    let (timeout, cap) = capped(ctx.dev.timeout_ms());
    let (s, r) = cs_default(ctx, a.restore, 0, (timeout, cap), src);
    *seq = s;
    drop(serial);
    r?;
    // Wait as long as a CS may run (for ever without a timeout or cap).
    let us = timeout
        .or(cap)
        .map_or(u64::MAX, |ms| ms.saturating_mul(1000));
    match wait_cs(ctx, s, us) {
        Ok(WaitCs::Completed { .. } | WaitCs::Busy) => Ok(()),
        _ => {
            if ctx.dev.may_log() {
                hl_err!("restore CS for context {} failed to complete\n", ctx.asid());
            }
            Err(ENOEXEC)
        }
    }
}

/// `cs_ioctl_default`: copy, number, check and queue one CS of `chunks`.
/// Returns its sequence number (`u64::MAX` if refused) and the result.
/// O(chunks).
fn cs_default(
    ctx: &Arc<ContextCs>,
    (addr, n): (u64, u32),
    flags: u32,
    timeouts: (Option<u64>, Option<u64>),
    src: &dyn ChunkSource,
) -> (u64, Result) {
    if let Err(e) = ctx.dev.engines() {
        // A device whose engines the driver does not drive (PCI): refused
        // before anything is read or counted.
        return (u64::MAX, Err(e));
    }
    if n > HL_MAX_JOBS_PER_CS {
        ctx.count_drop(DropKind::Validation);
        return (u64::MAX, Err(EINVAL));
    }
    let chunks = match src.read(addr, n) {
        Ok(c) => c,
        Err(e) => {
            let kind = match e {
                ENOMEM => DropKind::OutOfMem,
                _ => DropKind::Validation,
            };
            ctx.count_drop(kind);
            return (u64::MAX, Err(e));
        }
    };
    let Some(queues) = ctx.queues.as_ref() else {
        return (u64::MAX, Err(EOPNOTSUPP));
    };
    let watch = ctx.watch.lock();
    if ctx.stopping() {
        return (u64::MAX, Err(EBUSY));
    }
    if let Err(e) = start_threads(ctx, queues, watch, &chunks) {
        return (u64::MAX, Err(e));
    }
    let mut track = ctx.lock();
    if ctx.stopping() {
        return (u64::MAX, Err(EBUSY));
    }
    let timestamp = flags & HL_CS_FLAGS_TIMESTAMP != 0;
    let flight = match ctx.allocate(&mut track, timestamp, timeouts) {
        Ok(f) => f,
        Err(e) => return (u64::MAX, Err(e)),
    };
    match queue(ctx, (&mut track, &**queues), &flight, &chunks) {
        Ok(()) => (flight.seq, Ok(())),
        Err(e) => {
            flight.reject();
            ctx.publish_oldest(&track);
            (u64::MAX, Err(e))
        }
    }
}

/// Check every chunk, make its job, and queue them all on the engines
/// (`hl_hw_queue_schedule_cs`); on success the CS is in flight. O(chunks).
fn queue(
    ctx: &Arc<ContextCs>,
    (track, queues): (&mut Track, &dyn AsidQueues),
    flight: &Arc<Flight>,
    chunks: &[HlCsChunk],
) -> Result {
    let asic = &ctx.vm.dev.asic;
    let mut jobs = KVec::with_capacity(chunks.len(), GFP_KERNEL)
        .inspect_err(|_| ctx.count_drop(DropKind::OutOfMem))?;
    for (tag, c) in (0u64..).zip(chunks) {
        check_chunk(asic, c).map_err(|(e, kind)| {
            ctx.count_drop(kind);
            e
        })?;
        let sink: Arc<dyn EngineSink> = flight.clone();
        let job = EngineJob {
            queue: c.queue_index,
            cb: c.cb_handle,
            cb_size: c.cb_size,
            tag,
            sink,
        };
        // Room for every chunk was reserved.
        let _ = jobs.push_within_capacity(job);
    }
    flight
        .expect_jobs(chunks)
        .inspect_err(|_| ctx.count_drop(DropKind::OutOfMem))?;
    ctx.launch_jobs(track, flight, queues, &mut jobs)
}
