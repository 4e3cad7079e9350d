//! `hlrs bench`, the sync section: what the sync manager costs on a
//! device, next to a NOP CS on the same device, batch for batch
//! interleaved in the same run; on simulated device 0 (host 1, ids
//! `sync_sim.*`) and on the Gaudi2 on PCI when the guest has one (host 2,
//! ids `sync.*`):
//!
//! - `sync.pingpong.ns`: one CS of two chunks, CS + WAIT_CS: PDMA_0_0 adds
//!   1 to a SOB; PDMA_1_0 arms a monitor on that SOB whose payload adds 1
//!   to its fence counter, waits at a `FENCE` on it, then runs a NOP (the
//!   SOB is not reset: round n arms on "at least n", the CBs of every round
//!   built and mapped before the timing);
//! - `sync.interrupt.ns`: a CS on PDMA_0_0 arming a monitor that adds 1 to
//!   a CQ counter (in a CB mapped into the device MMU) and raises a user
//!   interrupt, then adding 1 to its SOB; timed from the CS ioctl to the
//!   return of the `wait_interrupt_cb` that waits for the counter to reach
//!   the round (the CS's own WAIT_CS comes after, untimed);
//! - `sync.stream.ns`: the same ordering through the driver's sync
//!   streams: a SIGNAL CS on PDMA_0_0, a WAIT CS on PDMA_1_0 for it, a NOP
//!   CS on PDMA_1_0 after it, and WAIT_CS on that NOP (three CS ioctls a
//!   round where the ping-pong takes one);
//! - `sync.nop.ns`: CS + WAIT_CS of one NOP on PDMA_0_0 (the baseline);
//! - `sync.core.ns`: a CS on DCORE0 EDMA0 whose CB programs the queue's
//!   DMA core to copy [`COPY`] bytes host -> host by its registers and
//!   waits at a `FENCE` a monitor on the core's completion SOB releases
//!   (the ARC runtimes' way), next to `sync.lin.ns`: a `LIN_DMA` packet of
//!   the same bytes on the same queue, CS + WAIT_CS each; the ratio
//!   `sync.core.ratio` is to the `LIN_DMA`'s.
//!
//! Each figure is the median of [`BATCHES`] batches, ns per round; the
//! ratios `sync.pingpong.ratio`, `sync.stream.ratio` and
//! `sync.interrupt.ratio` are to the NOP's
//! median. Runs only on a device with user interrupts. The ids above are
//! the PCI device's; the simulated device's start with `sync_sim.`
//! instead.

use crate::bench_common::{emit, median_best, BATCHES};
use crate::dma::map_cb;
use hlrs::{
    cs::{Cb, Cs, CsDone},
    sync::{Cq, DmaCore, Fence, Monitor, Sob, FIRST_USER_INTERRUPT},
    uapi::*,
    Device, HostBuffer,
};
use std::{io, time::Instant};

const SEC: u64 = 1_000_000;
/// Rounds per batch.
const PER: u32 = 20;
/// Bytes each DMA-core and `LIN_DMA` round copies.
const COPY: u32 = 64 << 10;
const EDMA0: u32 = GAUDI2_QUEUE_ID_DCORE0_EDMA_0_0;
/// Bytes each round's CB takes in its buffer (its CBs are 56 bytes).
const SLOT: usize = 64;
const PDMA0: u32 = GAUDI2_QUEUE_ID_PDMA_0_0;
const PDMA1: u32 = GAUDI2_QUEUE_ID_PDMA_1_0;

/// Wait for the CS `f`: it must complete.
fn completed(dev: &Device, f: hlrs::cs::Fence) -> io::Result<()> {
    match f.wait(dev, 30 * SEC)? {
        CsDone::Completed { .. } => Ok(()),
        other => Err(io::Error::other(format!("CS {}: {other:?}", f.seq))),
    }
}

/// One CB per round (`make(round)`, rounds 1..=n) in one mapped host
/// buffer: the buffer, its VA and the CBs' lengths.
fn ring(dev: &Device, n: u32, make: impl Fn(u32) -> Cb) -> io::Result<(HostBuffer, u64, Vec<u32>)> {
    let mut b = HostBuffer::new(n as usize * SLOT)?;
    let mut lens = Vec::with_capacity(n as usize);
    for r in 1..=n {
        let cb = make(r);
        if cb.bytes().len() > SLOT {
            return Err(io::Error::other("a round's CB is larger than its slot"));
        }
        let at = (r - 1) as usize * SLOT;
        b.as_mut_slice()[at..at + cb.bytes().len()].copy_from_slice(cb.bytes());
        lens.push(cb.len());
    }
    let va = dev.map_host(b.addr(), b.len() as u64, 0, 0)?;
    Ok((b, va, lens))
}

/// The sync section on device `index` (nothing if it has no user
/// interrupts), its figures' ids starting with `prefix`.
pub fn run(index: u32, prefix: &str) -> io::Result<()> {
    let dev = Device::open_compute(index)?;
    if dev.hw_ip_info()?.number_of_user_interrupts == 0 {
        return Ok(());
    }
    let sm = dev.sync_manager_info(0)?;
    // The two figures' SOBs in different groups, their own monitors.
    let (sob, mon) = (
        Sob::new(sm.first_available_sync_object),
        Monitor::new(sm.first_available_monitor),
    );
    let (sob2, mon2) = (Sob::new(sob.0 + 8), Monitor::new(mon.0 + 1));
    let cq = Cq(sm.first_available_cq);
    let irq = FIRST_USER_INTERRUPT + 1;
    let fence = Fence::of(PDMA1).ok_or(io::ErrorKind::InvalidInput)?;
    // A fresh context: its SOBs are 0, so round n reaches n.
    let rounds = 1 + BATCHES as u32 * PER;

    let nop = Cb::new().nop();
    let (_nop_buf, nop_va) = map_cb(&dev, &nop)?;
    let signal = Cb::new().push(&sob.add(1));
    let (_signal_buf, signal_va) = map_cb(&dev, &signal)?;
    let (_waiters, waiter_va, waiter_len) = ring(&dev, rounds, |r| {
        Cb::new()
            .push(&mon.fire_into(fence, sob, r))
            .push(&fence.wait(1))
            .nop()
    })?;
    let (_fires, fire_va, fire_len) = ring(&dev, rounds, |r| {
        Cb::new()
            .push(&mon2.fire_into_cq(cq, sob2, r, 1))
            .push(&sob2.add(1))
    })?;

    // The CQ: a 64-bit counter in a CB mapped into the device MMU,
    // raising `irq` at each add.
    let counter = dev.cb_create(4096, HL_CB_FLAGS_MAP)?;
    let counter_va = dev.cb_device_va(counter)?;
    let setup = Cb::new().push(&cq.counter(counter_va, irq));
    let (_setup_buf, setup_va) = map_cb(&dev, &setup)?;
    completed(
        &dev,
        Cs::new().chunk(PDMA0, setup_va, setup.len()).submit(&dev)?,
    )?;
    let w = dev.wait_interrupt_cb(irq, (counter, 0), 1, 0)?;
    if w.status != HL_WAIT_CS_STATUS_BUSY {
        return Err(io::Error::other("the CQ counter is not 0 at the start"));
    }

    let mut round = 0usize;
    let nop_cs = || -> io::Result<()> {
        completed(
            &dev,
            Cs::new().chunk(PDMA0, nop_va, nop.len()).submit(&dev)?,
        )
    };
    let pingpong = |r: usize| -> io::Result<()> {
        let va = waiter_va + (r * SLOT) as u64;
        let f = Cs::new()
            .chunk(PDMA1, va, waiter_len[r])
            .chunk(PDMA0, signal_va, signal.len())
            .submit(&dev)?;
        completed(&dev, f)
    };
    let stream = || -> io::Result<()> {
        let sig = dev.signal(PDMA0)?;
        dev.wait_signal(PDMA1, sig.fence.seq)?;
        completed(
            &dev,
            Cs::new().chunk(PDMA1, nop_va, nop.len()).submit(&dev)?,
        )
    };
    // Submit to wake, in ns; the CS is waited for after.
    let interrupt = |r: usize| -> io::Result<f64> {
        let va = fire_va + (r * SLOT) as u64;
        let t = Instant::now();
        let f = Cs::new().chunk(PDMA0, va, fire_len[r]).submit(&dev)?;
        let w = dev.wait_interrupt_cb(irq, (counter, 0), r as u64 + 1, 10 * SEC)?;
        let ns = t.elapsed().as_nanos() as f64;
        if w.status != HL_WAIT_CS_STATUS_COMPLETED {
            return Err(io::Error::other(format!(
                "interrupt wait of round {}: status {}",
                r + 1,
                w.status
            )));
        }
        completed(&dev, f)?;
        Ok(ns)
    };
    // Warm-up: one of each (round 1).
    nop_cs()?;
    pingpong(round)?;
    stream()?;
    interrupt(round)?;
    round += 1;
    let (mut n, mut p, mut i, mut st) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for _ in 0..BATCHES {
        let t = Instant::now();
        for _ in 0..PER {
            nop_cs()?;
        }
        n.push(t.elapsed().as_nanos() as f64 / f64::from(PER));
        let t = Instant::now();
        for k in 0..PER as usize {
            pingpong(round + k)?;
        }
        p.push(t.elapsed().as_nanos() as f64 / f64::from(PER));
        let t = Instant::now();
        for _ in 0..PER {
            stream()?;
        }
        st.push(t.elapsed().as_nanos() as f64 / f64::from(PER));
        let mut sum = 0.0;
        for k in 0..PER as usize {
            sum += interrupt(round + k)?;
        }
        i.push(sum / f64::from(PER));
        round += PER as usize;
    }
    let ((nm, nb), (pm, pb), (im, ib)) = (median_best(n), median_best(p), median_best(i));
    let (sm_, sb) = median_best(st);
    emit(&format!("{prefix}.nop.ns"), nm, "ns");
    emit(&format!("{prefix}.nop.best"), nb, "ns");
    emit(&format!("{prefix}.pingpong.ns"), pm, "ns");
    emit(&format!("{prefix}.pingpong.best"), pb, "ns");
    emit(&format!("{prefix}.stream.ns"), sm_, "ns");
    emit(&format!("{prefix}.stream.best"), sb, "ns");
    emit(&format!("{prefix}.interrupt.ns"), im, "ns");
    emit(&format!("{prefix}.interrupt.best"), ib, "ns");
    emit(&format!("{prefix}.pingpong.ratio"), pm / nm.max(1.0), "x");
    emit(&format!("{prefix}.stream.ratio"), sm_ / nm.max(1.0), "x");
    emit(&format!("{prefix}.interrupt.ratio"), im / nm.max(1.0), "x");
    let _ = dev.cb_destroy(counter);
    let (sob3, mon3) = (Sob::new(sob.0 + 16), Monitor::new(mon.0 + 2));
    core_copy(&dev, (sob3, mon3), prefix)
}

/// `sync.core.*` and `sync.lin.*` (the module doc). O(BATCHES x PER
/// copies).
fn core_copy(dev: &Device, (sob, mon): (Sob, Monitor), prefix: &str) -> io::Result<()> {
    let (core, fence) = DmaCore::of(EDMA0)
        .zip(Fence::of(EDMA0))
        .ok_or(io::ErrorKind::InvalidInput)?;
    let src = HostBuffer::new(COPY as usize)?;
    let dst = HostBuffer::new(COPY as usize)?;
    let s = dev.map_host(src.addr(), src.len() as u64, 0, 0)?;
    let d = dev.map_host(dst.addr(), dst.len() as u64, 0, 0)?;
    let by_core = Cb::new()
        .push(&sob.set(0))
        .push(&mon.fire_into(fence, sob, 1))
        .push(&core.linear((s, d, COPY), false, Some((sob.addr(), 1))))
        .push(&fence.wait(1));
    let by_packet = Cb::new().lin_dma(s, d, COPY);
    let (_a, core_va) = map_cb(dev, &by_core)?;
    let (_b, lin_va) = map_cb(dev, &by_packet)?;
    let run = |va: u64, len: u32| -> io::Result<()> {
        completed(dev, Cs::new().chunk(EDMA0, va, len).submit(dev)?)
    };
    run(core_va, by_core.len())?;
    run(lin_va, by_packet.len())?;
    let (mut c, mut l) = (Vec::new(), Vec::new());
    for _ in 0..BATCHES {
        let t = Instant::now();
        for _ in 0..PER {
            run(core_va, by_core.len())?;
        }
        c.push(t.elapsed().as_nanos() as f64 / f64::from(PER));
        let t = Instant::now();
        for _ in 0..PER {
            run(lin_va, by_packet.len())?;
        }
        l.push(t.elapsed().as_nanos() as f64 / f64::from(PER));
    }
    let ((cm, cb), (lm, lb)) = (median_best(c), median_best(l));
    emit(&format!("{prefix}.core.ns"), cm, "ns");
    emit(&format!("{prefix}.core.best"), cb, "ns");
    emit(&format!("{prefix}.lin.ns"), lm, "ns");
    emit(&format!("{prefix}.lin.best"), lb, "ns");
    emit(&format!("{prefix}.core.ratio"), cm / lm.max(1.0), "x");
    dev.unmap(s)?;
    dev.unmap(d)?;
    Ok(())
}
