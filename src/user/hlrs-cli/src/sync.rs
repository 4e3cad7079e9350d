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
//! (`HL_INFO_SYNC_MANAGER`). Then an interrupt wait: a thread sleeps in
//! WAIT_CS on user interrupt 48 until a monitor bumps a CQ counter.

use crate::dma::{checksum, map_cb};
use hlrs::{
    cs::{Cb, Cs, CsDone},
    sync::{Cq, Fence, Monitor, Sob, FIRST_USER_INTERRUPT},
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
    let dst = HostBuffer::new(size.max(1))?;
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
    interrupt_wait(&dev, (sob, mon), &mut out)?;
    Ok(out)
}

/// A thread sleeps in WAIT_CS on user interrupt 48 while a CS on PDMA_0_0
/// makes the first user CQ a counter in a device-mapped CB, arms a monitor
/// adding 1 to it (with the interrupt) and signals its SOB.
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
