//! `hlrs sync`: two queues in a pipeline, ordered by the sync manager as a
//! runtime orders them. Per round, in one CS of two chunks:
//!
//! - PDMA_0_0 copies a block of the host buffer into SRAM, then adds 1 to
//!   a SOB (`MSG_SHORT`);
//! - PDMA_1_0 arms a monitor on that SOB reaching the round's count, whose
//!   payload adds 1 to its own fence counter, waits at a `FENCE` on it,
//!   then copies the block from SRAM back to the host.
//!
//! Without the monitor and the fence the second copy could read SRAM
//! before the first wrote it; the output's checksum shows it did not. The
//! SOB and monitor are the first ones the driver leaves to users
//! (`HL_INFO_SYNC_MANAGER`). Then the same pipeline with the driver's
//! sync streams: per round a copy CS on PDMA_0_0, a SIGNAL CS on it, a
//! WAIT CS on PDMA_1_0 for that signal and a copy CS on PDMA_1_0, all in
//! flight at once (only the last is waited for). Then a DMA core
//! programmed by a CB: DCORE0 EDMA0's core copies the whole input by its
//! context registers (`hlrs::sync::DmaCore`) and its completion write,
//! through a monitor, releases the stream's fence. Then an interrupt
//! wait: a thread sleeps in WAIT_CS on user interrupt 48 until a monitor
//! bumps a CQ counter.

use crate::dma::{checksum, map_cb};
use hlrs::{
    cs::{Cb, Cs, CsDone},
    sync::{Cq, DmaCore, Fence, Monitor, Sob, FIRST_USER_INTERRUPT},
    uapi::*,
    Device, HostBuffer,
};
use std::{fmt::Write, io, time::Instant};

const SRAM: u64 = 0x1000_FFFF_FD00_0000;
const SEC: u64 = 1_000_000;

/// `hlrs sync`: `rounds` rounds of `block` bytes each through SRAM.
pub fn run(device: u32, rounds: u32, block: u32) -> io::Result<String> {
    let dev = Device::open_compute(device)?;
    let sm = dev.sync_manager_info(0)?;
    let (sob, mon) = (
        Sob::new(sm.first_available_sync_object),
        Monitor::new(sm.first_available_monitor),
    );
    let fence = Fence::of(GAUDI2_QUEUE_ID_PDMA_1_0).ok_or(io::ErrorKind::InvalidInput)?;
    let size = block as usize * rounds as usize;
    let mut src = HostBuffer::new(size.max(1))?;
    for (i, b) in src.as_mut_slice().iter_mut().enumerate() {
        *b = (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15).to_le_bytes()[7];
    }
    let mut dst = HostBuffer::new(size.max(1))?;
    let s = dev.map_host(src.addr(), src.len() as u64, 0, 0)?;
    let d = dev.map_host(dst.addr(), dst.len() as u64, 0, 0)?;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "PDMA_0_0 host -> SRAM, SOB {} += 1; PDMA_1_0 monitor {} on SOB >= round -> FENCE, SRAM -> host",
        sob.0, mon.0
    );
    let t = Instant::now();
    for r in 0..rounds {
        let off = u64::from(r) * u64::from(block);
        let signal = Cb::new().lin_dma(s + off, SRAM, block).push(&sob.add(1));
        let wait = Cb::new()
            .push(&mon.fire_into(fence, sob, r + 1))
            .push(&fence.wait(1))
            .lin_dma(SRAM, d + off, block);
        let (_a, va_s) = map_cb(&dev, &signal)?;
        let (_b, va_w) = map_cb(&dev, &wait)?;
        let done = Cs::new()
            .chunk(GAUDI2_QUEUE_ID_PDMA_1_0, va_w, wait.len())
            .chunk(GAUDI2_QUEUE_ID_PDMA_0_0, va_s, signal.len())
            .submit(&dev)?
            .wait(&dev, 30 * SEC)?;
        if done == CsDone::Busy {
            return Err(io::ErrorKind::TimedOut.into());
        }
        dev.unmap(va_s)?;
        dev.unmap(va_w)?;
    }
    let took = t.elapsed();
    let ok = checksum(src.as_slice()) == checksum(dst.as_slice());
    let _ = writeln!(
        out,
        "{rounds} rounds of {block} bytes in {:.1} ms ({:.0} us a round): output {}",
        took.as_secs_f64() * 1e3,
        took.as_secs_f64() * 1e6 / f64::from(rounds.max(1)),
        if ok { "matches the input" } else { "DIFFERS" }
    );
    if !ok {
        return Err(io::Error::other(out));
    }
    // The second pipeline starts from a zeroed output.
    dst.as_mut_slice().fill(0);
    signal_wait(&dev, (&src, s), (&dst, d), (rounds, block), &mut out)?;
    dst.as_mut_slice().fill(0);
    dma_core(&dev, (sob, mon), (&src, s), (&dst, d), &mut out)?;
    interrupt_wait(&dev, (sob, mon), &mut out)?;
    Ok(out)
}

/// The pipeline through SIGNAL and WAIT CSs (`HL_CS_FLAGS_SIGNAL`,
/// `HL_CS_FLAGS_WAIT`): the driver's CBs order the two queues.
fn signal_wait(
    dev: &Device,
    (src, s): (&HostBuffer, u64),
    (dst, d): (&HostBuffer, u64),
    (rounds, block): (u32, u32),
    out: &mut String,
) -> io::Result<()> {
    let (q0, q1) = (GAUDI2_QUEUE_ID_PDMA_0_0, GAUDI2_QUEUE_ID_PDMA_1_0);
    let t = Instant::now();
    let mut cbs = Vec::new();
    let mut last = None;
    let mut first_count = None;
    for r in 0..rounds {
        let off = u64::from(r) * u64::from(block);
        let sram = SRAM + 0x10_0000 + off;
        let put = Cb::new().lin_dma(s + off, sram, block);
        let get = Cb::new().lin_dma(sram, d + off, block);
        let (a, va_p) = map_cb(dev, &put)?;
        let (b, va_g) = map_cb(dev, &get)?;
        Cs::new().chunk(q0, va_p, put.len()).submit(dev)?;
        let sig = dev.signal(q0)?;
        first_count.get_or_insert(sig.sob_count);
        dev.wait_signal(q1, sig.fence.seq)?;
        last = Some(Cs::new().chunk(q1, va_g, get.len()).submit(dev)?);
        cbs.push((a, va_p));
        cbs.push((b, va_g));
        // At most 8 rounds (32 CSs) in flight: the window is 64.
        if r % 8 == 7 {
            if let Some(f) = last {
                f.wait(dev, 30 * SEC)?;
            }
        }
    }
    if let Some(f) = last {
        if f.wait(dev, 30 * SEC)? == CsDone::Busy {
            return Err(io::ErrorKind::TimedOut.into());
        }
    }
    let took = t.elapsed();
    for (_, va) in &cbs {
        dev.unmap(*va)?;
    }
    let ok = checksum(src.as_slice()) == checksum(dst.as_slice());
    let _ = writeln!(
        out,
        "sync streams: {rounds} x (copy on PDMA_0_0, SIGNAL on PDMA_0_0 (first SOB count {}), WAIT on PDMA_1_0, copy on PDMA_1_0) in {:.1} ms: output {}",
        first_count.unwrap_or(0),
        took.as_secs_f64() * 1e3,
        if ok { "matches the input" } else { "DIFFERS" }
    );
    if ok {
        Ok(())
    } else {
        Err(io::Error::other(out.clone()))
    }
}

/// A thread sleeps in WAIT_CS on user interrupt 48 while a CS on PDMA_0_0
/// makes the first user CQ a counter in a device-mapped CB, arms a monitor
/// adding 1 to it (with the interrupt) and signals its SOB.
/// A CB on DCORE0 EDMA0 programs its DMA core to copy `src` to `dst` and
/// to set `sob` when done; a monitor on `sob` releases the stream's fence,
/// and the CB's last `MSG_LONG` after the fence marks the copy seen.
fn dma_core(
    dev: &Device,
    (sob, mon): (Sob, Monitor),
    (src, s): (&HostBuffer, u64),
    (dst, d): (&HostBuffer, u64),
    out: &mut String,
) -> io::Result<()> {
    let q = GAUDI2_QUEUE_ID_DCORE0_EDMA_0_0;
    let (core, fence) = DmaCore::of(q)
        .zip(Fence::of(q))
        .ok_or(io::ErrorKind::InvalidInput)?;
    let len = u32::try_from(src.len()).map_err(|_| io::ErrorKind::InvalidInput)?;
    let cb = Cb::new()
        .push(&sob.set(0))
        .push(&mon.fire_into(fence, sob, 1))
        .push(&core.linear((s, d, len), false, Some((sob.addr(), 1))))
        .push(&fence.wait(1));
    let (_b, va) = map_cb(dev, &cb)?;
    let t = Instant::now();
    let done = Cs::new()
        .chunk(q, va, cb.len())
        .submit(dev)?
        .wait(dev, 30 * SEC)?;
    let took = t.elapsed();
    if done == CsDone::Busy {
        return Err(io::ErrorKind::TimedOut.into());
    }
    let ok = checksum(src.as_slice()) == checksum(dst.as_slice());
    let _ = writeln!(
        out,
        "DMA core by registers: DCORE0 EDMA0's core copied {len} bytes host -> host, its completion set SOB {} and a monitor released the fence, in {:.1} ms: output {}",
        sob.0,
        took.as_secs_f64() * 1e3,
        if ok { "matches the input" } else { "DIFFERS" }
    );
    if !ok {
        return Err(io::Error::other(out.clone()));
    }
    Ok(())
}

fn interrupt_wait(dev: &Device, (sob, mon): (Sob, Monitor), out: &mut String) -> io::Result<()> {
    let cq = Cq(dev.sync_manager_info(0)?.first_available_cq);
    let h = dev.cb_create(4096, HL_CB_FLAGS_MAP)?;
    let va = dev.cb_device_va(h)?;
    let next = Sob::new(sob.0 + 8);
    let cb = Cb::new()
        .push(&cq.counter(va, FIRST_USER_INTERRUPT))
        .push(&mon.fire_into_cq(cq, next, 1, 1))
        .push(&next.add(1));
    let (_b, cb_va) = map_cb(dev, &cb)?;
    let (w, took) = std::thread::scope(|s| {
        let waiter = s.spawn(|| {
            let w = dev.wait_interrupt_cb(FIRST_USER_INTERRUPT, (h, 0), 1, 30 * SEC);
            (w, Instant::now())
        });
        // The waiter is asleep by then.
        std::thread::sleep(std::time::Duration::from_millis(100));
        let submitted = Instant::now();
        let cs = Cs::new()
            .chunk(GAUDI2_QUEUE_ID_PDMA_0_0, cb_va, cb.len())
            .submit(dev)
            .and_then(|f| f.wait(dev, 30 * SEC));
        let (w, woken) = waiter
            .join()
            .unwrap_or((Err(io::ErrorKind::Other.into()), submitted));
        cs.map(|_| (w, woken.saturating_duration_since(submitted)))
    })?;
    let w = w?;
    let state = if w.status == HL_WAIT_CS_STATUS_COMPLETED {
        "completed"
    } else {
        "still busy"
    };
    let _ = writeln!(
        out,
        "interrupt wait: WAIT_CS on user interrupt {FIRST_USER_INTERRUPT} (CQ {} counter in CB {h:#x}) {state}, {:.0} us after the CS that fires it was submitted",
        cq.0,
        took.as_secs_f64() * 1e6
    );
    dev.cb_destroy(h)?;
    Ok(())
}
