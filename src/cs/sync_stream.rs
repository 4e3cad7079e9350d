// SPDX-License-Identifier: GPL-2.0

//! Sync-stream CSs: `HL_CS_FLAGS_SIGNAL` and `HL_CS_FLAGS_WAIT` (upstream
//! `cs_ioctl_signal_wait`, common/command_submission.c:1878-2463;
//! `init_signal_cs` / `init_wait_cs`, common/hw_queue.c:416-551; the
//! Gaudi2 CBs `gaudi2_gen_signal_cb` / `gaudi2_gen_wait_cb`,
//! gaudi2/gaudi2.c:11324-11467).
//!
//! **Objects.** Every queue below the NICs has a sync stream (Gaudi2's
//! `supports_sync_stream`, gaudi2/gaudi2.c:2773-2782), whose index is its
//! queue id: queue `q` owns SOBs `85 + 2q` and `86 + 2q` (one in use, the
//! other for the wrap) and monitor `125 + q` of DCORE0
//! (`sync_stream_queue_init`, common/hw_queue.c:913-975).
//!
//! **SIGNAL** on queue `q`: one `MSG_SHORT` adding 1 to the stream's
//! current SOB, with the engine and message barriers. Signals of a queue
//! run in PQ order, so the `k`-th one leaves the SOB at `k`: its value is
//! known at submission (`next_sob_val`). Returned: `sob_base_addr_offset`
//! 0 (`gaudi2_get_sob_addr`) and `sob_count_before_submission`, upstream's
//! `next_sob_val - 1` after the count (the SOB's value once this signal
//! ran). At 32,767 the stream moves to its other SOB, which must be idle
//! (else `EINVAL`, upstream's "Cannot switch SOBs") and is reset to 0 by
//! the driver then (upstream resets a SOB when its last CS is released;
//! here "idle" means every CS up to the last one that used it finished).
//!
//! **WAIT** on queue `w` for signal CS `s` (`signal_seq_arr`, exactly one
//! entry): four `MSG_SHORT`s programming monitor `125 + w` (payload: 1 to
//! `CP_FENCE2_RDATA` of `w`'s stream; armed for "the signal's SOB >= its
//! value"), then a `FENCE` on fence 2 (target 1, decrement 1). A wait for a
//! signal that already finished, or left the window of 64, is no CS at
//! all: success with sequence `ULLONG_MAX`, as upstream; for a sequence
//! not given yet, or one that is not a SIGNAL CS, `EINVAL` (a validation
//! drop). `HL_CS_FLAGS_ENCAP_SIGNALS` names a reservation this driver never
//! makes (`RESERVE_SIGNALS` is refused), so upstream's "handle not found,
//! treated as finished" applies: success, `ULLONG_MAX`.
//!
//! **CBs.** Upstream runs them from its internal CB pool, mapped into
//! every context. Here: one page of the context's CB memory, created and
//! mapped into its device VA space at its first sync-stream CS (unmapped
//! and dropped again if that CS fails) and never published (no handle
//! names it, so no ioctl can destroy or mmap it);
//! CS `seq` uses the 64 bytes at `seq % 64`, free again because the CS 64
//! sequences back finished before this one got its number.
//!
//! **Where it runs.** On a device whose queues run the sync manager
//! ([`AsidQueues::sync_streams`]: the PCI Gaudi2 and the in-module
//! simulation); any other answers `EOPNOTSUPP` before reading anything.
//!
//! **Limits.** A signal halted by the TDR never increments its SOB: waits
//! for it or later signals of its queue time out too (upstream resets the
//! device at a TDR). `HL_CS_FLAGS_COLLECTIVE_WAIT` is `EINVAL` (no Gaudi2
//! queue is a collective master, as upstream).

use crate::{
    asic::GAUDI2_RESERVED_MON_NUMBER,
    cs::{
        chunks::ChunkSource,
        device_cs::DropKind,
        sync_objects::{
            signal_cb, wait_cb, Signal, SlotWords, SobOut, SyncPool, SyncState, SyncStreams, Undo,
            SYNC_QUEUES, WINDOW,
        },
        tracker::{start_threads, ContextCs, Flight, Track, MAX_PENDING_CS},
    },
    hw::engines::{queue_engine, AsidQueues, EngineJob, EngineSink},
    uapi::*,
};
use kernel::{alloc::KVec, prelude::*, sync::Arc};

const _: () = assert!(WINDOW == MAX_PENDING_CS);

/// What the checks of a sync-stream CS decided.
enum Plan {
    /// A signal on the queue.
    Signal(u32),
    /// A wait on the queue for the signal.
    Wait(u32, Signal),
    /// Nothing to run: success, no sequence number.
    Nothing,
}

/// The request, checked and read before any lock is taken.
enum Request {
    /// A signal on the queue.
    Signal(u32),
    /// A wait on the queue for the signal CS of that sequence.
    Wait(u32, u64),
    /// Nothing to run.
    Nothing,
}

/// A refusal and the drop it counts.
type Refusal = (Error, Option<DropKind>);

/// Serve a SIGNAL or WAIT CS (`flags` has one of them) of the one chunk at
/// `chunks`. Returns the sequence number (`u64::MAX` when none), the result
/// and the SOB fields. Sleeps; O(1) besides the first CS's pool.
pub(crate) fn cs_signal_wait(
    ctx: &Arc<ContextCs>,
    (chunks, flags): (u64, u32),
    timeouts: (Option<u64>, Option<u64>),
    src: &dyn ChunkSource,
) -> (u64, Result, SobOut) {
    let none = |r| (u64::MAX, r, SobOut::default());
    let refuse = |(e, kind): Refusal| {
        if let Some(k) = kind {
            ctx.count_drop(k);
        }
        none(Err(e))
    };
    let Some(queues) = ctx.queues.as_ref().filter(|q| q.sync_streams()) else {
        return none(Err(EOPNOTSUPP));
    };
    // The user copies (the chunk, the signal's sequence) hold no lock.
    let req = match request(flags, chunks, src) {
        Ok(r) => r,
        Err(r) => return refuse(r),
    };
    let mut sync = ctx.sync.lock();
    let plan = match resolve(ctx, &sync, req) {
        Ok(Plan::Nothing) => return none(Ok(())),
        Ok(p) => p,
        Err(r) => return refuse(r),
    };
    // A context's first sync-stream CS makes the CB page: if the CS then
    // fails, the page goes again (the context as before the call).
    let fresh = sync.pool.is_none();
    if let Err(e) = ready(ctx, &mut sync) {
        return refuse((e, Some(DropKind::OutOfMem)));
    }
    let queue = match plan {
        Plan::Signal(q) | Plan::Wait(q, _) => q,
        Plan::Nothing => 0,
    };
    let chunk = HlCsChunk {
        queue_index: queue,
        ..Default::default()
    };
    let watch = ctx.watch.lock();
    let out = match start_threads(ctx, queues, watch, core::slice::from_ref(&chunk)) {
        Ok(()) => submit(ctx, (&mut *sync, &**queues), plan, flags, timeouts),
        Err(e) => none(Err(e)),
    };
    if out.1.is_err() && fresh {
        if let Some(pool) = sync.pool.take() {
            pool.release(&ctx.vm);
        }
    }
    out
}

/// The checks of `cs_ioctl_signal_wait` that need no state, in upstream's
/// order, with the drop each counts; reads the chunk and a WAIT's signal
/// sequence. O(1).
fn request(flags: u32, chunks: u64, src: &dyn ChunkSource) -> Result<Request, Refusal> {
    let c = match src.read(chunks, 1) {
        Ok(c) => *c.first().ok_or((EINVAL, None))?,
        Err(e) if e == ENOMEM => return Err((e, Some(DropKind::OutOfMem))),
        Err(e) => return Err((e, Some(DropKind::Validation))),
    };
    let q = c.queue_index;
    let nic = (156..252).contains(&q);
    if q >= GAUDI2_QUEUE_ID_SIZE || q == GAUDI2_QUEUE_ID_CPU_PQ || nic {
        return Err((EINVAL, Some(DropKind::Validation)));
    }
    if flags & HL_CS_FLAGS_COLLECTIVE_WAIT != 0 {
        return Err((EINVAL, Some(DropKind::Validation)));
    }
    if queue_engine(q).is_none() || q as usize >= SYNC_QUEUES {
        return Err((EINVAL, Some(DropKind::Parsing)));
    }
    if flags & HL_CS_FLAGS_SIGNAL != 0 {
        return Ok(Request::Signal(q));
    }
    if flags & HL_CS_FLAGS_ENCAP_SIGNALS != 0 {
        return Ok(Request::Nothing);
    }
    // `num_signal_seq_arr` shares `cb_size`'s place, `signal_seq_arr`
    // `cb_handle`'s.
    if c.cb_size != 1 {
        return Err((EINVAL, Some(DropKind::Validation)));
    }
    let seq = src
        .read_u64(c.cb_handle)
        .map_err(|e| (e, Some(DropKind::Validation)))?;
    Ok(Request::Wait(q, seq))
}

/// What a request comes to, under `ContextCs::sync`: a WAIT's signal
/// looked up (`hl_ctx_get_fence`). O(1).
fn resolve(ctx: &ContextCs, sync: &SyncState, req: Request) -> Result<Plan, Refusal> {
    let (q, seq) = match req {
        Request::Signal(q) => return Ok(Plan::Signal(q)),
        Request::Nothing => return Ok(Plan::Nothing),
        Request::Wait(q, seq) => (q, seq),
    };
    let fence = ctx
        .fence(seq)
        .map_err(|e| (e, Some(DropKind::Validation)))?;
    let Some(fence) = fence else {
        return Ok(Plan::Nothing);
    };
    match sync.streams.as_ref().and_then(|s| s.signal_of(seq)) {
        None => Err((EINVAL, Some(DropKind::Validation))),
        Some(_) if fence.poll().is_some() => Ok(Plan::Nothing),
        Some(s) => Ok(Plan::Wait(q, s)),
    }
}

/// Make the streams and the CB page, at a context's first sync-stream CS.
/// Sleeps.
fn ready(ctx: &ContextCs, sync: &mut SyncState) -> Result {
    if sync.streams.is_none() {
        sync.streams = Some(SyncStreams::new()?);
    }
    if sync.pool.is_none() {
        sync.pool = Some(SyncPool::new(&ctx.vm)?);
    }
    Ok(())
}

/// Number, build and queue the CS of `plan`. O(1).
fn submit(
    ctx: &Arc<ContextCs>,
    (sync, queues): (&mut SyncState, &dyn AsidQueues),
    plan: Plan,
    flags: u32,
    timeouts: (Option<u64>, Option<u64>),
) -> (u64, Result, SobOut) {
    let none = |r| (u64::MAX, r, SobOut::default());
    let (Some(streams), Some(pool)) = (sync.streams.as_mut(), sync.pool.as_ref()) else {
        return none(Err(EINVAL));
    };
    let mut track = ctx.lock();
    if ctx.stopping() {
        return none(Err(EBUSY));
    }
    let timestamp = flags & HL_CS_FLAGS_TIMESTAMP != 0;
    let flight = match ctx.allocate(&mut track, timestamp, timeouts) {
        Ok(f) => f,
        Err(e) => return none(Err(e)),
    };
    let seq = flight.seq;
    let built = build(
        streams,
        pool,
        queues,
        &plan,
        (seq, ContextCs::oldest(&track)),
    );
    let Built {
        queue,
        cb,
        out,
        undo,
        saved,
    } = match built {
        Ok(b) => b,
        Err(e) => {
            ctx.count_drop(DropKind::Validation);
            return reject(ctx, &track, &flight, e);
        }
    };
    let chunk = HlCsChunk {
        queue_index: queue,
        ..Default::default()
    };
    let rc = flight
        .expect_jobs(core::slice::from_ref(&chunk))
        .inspect_err(|_| ctx.count_drop(DropKind::OutOfMem))
        .and_then(|()| queue_one(ctx, (&mut track, queues), &flight, (queue, cb)));
    match rc {
        Ok(()) => {
            if let Plan::Wait(_, sig) = &plan {
                streams.note_wait(sig, seq);
            }
            (seq, Ok(()), out)
        }
        Err(e) => {
            if let Some(u) = undo {
                streams.undo(u, seq);
            }
            pool.restore(seq, &saved);
            reject(ctx, &track, &flight, e)
        }
    }
}

/// A CS refused after it got its number. O(64).
fn reject(ctx: &ContextCs, track: &Track, flight: &Flight, e: Error) -> (u64, Result, SobOut) {
    flight.reject();
    ctx.publish_oldest(track);
    (u64::MAX, Err(e), SobOut::default())
}

/// A sync-stream CS's job, built.
struct Built {
    /// Its queue.
    queue: u32,
    /// Its CB's device address and size.
    cb: (u64, u32),
    /// The SOB fields to return.
    out: SobOut,
    /// A signal's undo.
    undo: Option<Undo>,
    /// The CB slot's words before, put back if the CS fails.
    saved: SlotWords,
}

/// The CB of CS `seq` for `plan`, written into the pool (a signal's stream
/// updated, its SOB reset at a switch): the queue, the CB's address and
/// size, the SOB fields and the signal's undo. O(1).
fn build(
    streams: &mut SyncStreams,
    pool: &SyncPool,
    queues: &dyn AsidQueues,
    plan: &Plan,
    (seq, oldest): (u64, Option<u64>),
) -> Result<Built> {
    match *plan {
        Plan::Signal(q) => {
            let (sig, count, reset, undo) = streams.signal(q as usize, seq, oldest)?;
            if let Some(sob) = reset {
                if let Err(e) = queues.reset_sob(sob) {
                    streams.undo(undo, seq);
                    return Err(e);
                }
            }
            let (addr, size, saved) = pool.put(seq, &signal_cb(sig.sob()));
            let out = SobOut {
                addr_offset: 0,
                count,
            };
            Ok(Built {
                queue: q,
                cb: (addr, size),
                out,
                undo: Some(undo),
                saved,
            })
        }
        Plan::Wait(q, sig) => {
            let mon = GAUDI2_RESERVED_MON_NUMBER + q;
            let words = wait_cb(q, sig.sob(), sig.val, mon).ok_or(EINVAL)?;
            let (addr, size, saved) = pool.put(seq, &words);
            Ok(Built {
                queue: q,
                cb: (addr, size),
                out: SobOut::default(),
                undo: None,
                saved,
            })
        }
        Plan::Nothing => Err(EINVAL),
    }
}

/// Launch `flight` and queue its one job. O(1).
fn queue_one(
    ctx: &ContextCs,
    (track, queues): (&mut Track, &dyn AsidQueues),
    flight: &Arc<Flight>,
    (queue, (cb, cb_size)): (u32, (u64, u32)),
) -> Result {
    let sink: Arc<dyn EngineSink> = flight.clone();
    let mut jobs =
        KVec::with_capacity(1, GFP_KERNEL).inspect_err(|_| ctx.count_drop(DropKind::OutOfMem))?;
    let _ = jobs.push_within_capacity(EngineJob {
        queue,
        cb,
        cb_size,
        tag: 0,
        sink,
    });
    ctx.launch_jobs(track, flight, queues, &mut jobs)
}
