//! `hlrs dma` and `hlrs cs`: the simulated DMA engines at work through the
//! device MMUs, in one process.
//!
//! - `dma`: a round trip host -> device memory (DRAM through the DMMU, or
//!   SRAM) -> host with one CS of two `LIN_DMA`s, checked with a checksum
//!   and timed next to a `memcpy` of the same bytes; with `--fault`, a DMA
//!   to an unmapped VA, which the device aborts, and the page fault it
//!   reports.
//! - `cs`: back-to-back NOP CSs, each waited for, then pipelined (up to 64
//!   in flight): the cost of a CS next to the null ioctl.

use hlrs::{
    cs::{Cb, Cs, CsDone},
    uapi::*,
    Device, HostBuffer,
};
use std::{fmt::Write, io, time::Instant};

/// SRAM's base address (HW_IP_INFO `sram_base_address`).
const SRAM: u64 = 0x1000_FFFF_FD00_0000;
const SEC: u64 = 1_000_000;

/// Where a round trip goes through.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Via {
    /// Device DRAM, by a DRAM VA (the DMMU translates).
    Dram,
    /// SRAM, by physical address.
    Sram,
}

/// A checksum of bytes (FNV-1a).
pub fn checksum(b: &[u8]) -> u64 {
    b.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &x| {
        (h ^ u64::from(x)).wrapping_mul(0x100_0000_01b3)
    })
}

/// A CB that runs for tens of seconds: 64 LIN_DMAs of `(host VA, DRAM
/// VA, bytes)` if given, else 1000 memsets of 32 MiB of SRAM.
pub fn busy_cb(copy: Option<(u64, u64, u64)>) -> Cb {
    match copy {
        Some((host, dram, n)) => (0..64).fold(Cb::new(), |cb, _| {
            cb.lin_dma(host, dram, n.min(u64::from(u32::MAX)) as u32)
        }),
        None => (0..1000).fold(Cb::new(), |cb, i| cb.memset(SRAM + (8 << 20), i, 32 << 20)),
    }
}

/// Submit `cb`, mapped from a host buffer of its own, on the default
/// queue without waiting; prints `submitted CS <seq> (<what>)`. Returns the
/// buffer (the mapping goes with the close).
pub fn submit_mapped(dev: &Device, cb: &Cb, what: &str) -> io::Result<HostBuffer> {
    let (b, va) = host_cb(dev, cb)?;
    let f = Cs::new().chunk(DEFAULT_QUEUE, va, cb.len()).submit(dev)?;
    println!("submitted CS {} ({what})", f.seq);
    Ok(b)
}

/// A CB mapped from a host buffer of its own (unmapped by the close).
pub fn map_cb(dev: &Device, cb: &Cb) -> io::Result<(HostBuffer, u64)> {
    host_cb(dev, cb)
}

/// A CB mapped from a host buffer of its own (unmapped by the close).
fn host_cb(dev: &Device, cb: &Cb) -> io::Result<(HostBuffer, u64)> {
    let b = cb.to_host_buffer()?;
    let va = dev.map_host(b.addr(), b.len() as u64, 0, 0)?;
    Ok((b, va))
}

/// `hlrs dma`: the round trip of `size` bytes through `via` on `queue`,
/// or, with `fault`, a DMA to an unmapped VA.
pub fn run_dma(device: u32, size: usize, via: Via, queue: u32, fault: bool) -> io::Result<String> {
    let dev = Device::open_compute(device)?;
    if fault {
        return show_fault(&dev, queue);
    }
    let mut out = String::new();
    let mut src = HostBuffer::new(size)?;
    for (i, b) in src.as_mut_slice().iter_mut().enumerate() {
        *b = (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15).to_le_bytes()[7];
    }
    let dst = HostBuffer::new(size)?;
    let s = dev.map_host(src.addr(), size as u64, 0, 0)?;
    let d = dev.map_host(dst.addr(), size as u64, 0, 0)?;
    let (mid, what) = match via {
        Via::Dram => {
            let h = dev.alloc(size as u64, 0)?;
            (dev.map(h, 0, 0)?, "DRAM VA")
        }
        Via::Sram => {
            if size as u64 > 48 << 20 {
                return Err(io::Error::from_raw_os_error(22));
            }
            (SRAM, "SRAM")
        }
    };
    let n = u32::try_from(size).map_err(|_| io::Error::from_raw_os_error(22))?;
    let cb = Cb::new().lin_dma(s, mid, n).lin_dma(mid, d, n);
    let (_cb_buf, cb_va) = host_cb(&dev, &cb)?;
    let t = Instant::now();
    let done = Cs::new()
        .chunk(queue, cb_va, cb.len())
        .timestamp()
        .submit(&dev)?
        .wait(&dev, 60 * SEC)?;
    let dma = t.elapsed();
    let mut copy = vec![0u8; size];
    let t = Instant::now();
    copy.copy_from_slice(src.as_slice());
    let memcpy = t.elapsed() * 2;
    let ok = checksum(dst.as_slice()) == checksum(src.as_slice());
    let _ = writeln!(
        out,
        "host {s:#x} -> {what} {mid:#x} -> host {d:#x}: {size} bytes each way on queue {queue}"
    );
    let _ = writeln!(
        out,
        "checksum {:#018x} -> {:#018x}: {}",
        checksum(src.as_slice()),
        checksum(dst.as_slice()),
        if ok { "equal" } else { "DIFFERENT" }
    );
    let _ = writeln!(
        out,
        "CS + WAIT_CS: {:?} ({}); memcpy of the same bytes: {:?} ({:.2}x)",
        dma,
        match done {
            CsDone::Completed {
                timestamp: Some(_), ..
            } => "completed, timestamped",
            _ => "completed",
        },
        memcpy,
        memcpy.as_secs_f64() / dma.as_secs_f64().max(1e-9)
    );
    drop(copy);
    if !ok {
        print!("{out}");
        return Err(io::Error::other("the data came back different"));
    }
    Ok(out)
}

/// A DMA to an unmapped VA: the CS is aborted and the fault reported.
fn show_fault(dev: &Device, queue: u32) -> io::Result<String> {
    let mut out = String::new();
    let src = HostBuffer::new(4096)?;
    let s = dev.map_host(src.addr(), 4096, 0, 0)?;
    let unmapped = s + (1 << 40);
    let cb = Cb::new().lin_dma(s, unmapped, 4096);
    let (_cb_buf, cb_va) = host_cb(dev, &cb)?;
    let r = dev.run_cb(queue, cb_va, cb.len(), 10 * SEC);
    let _ = writeln!(
        out,
        "LIN_DMA host {s:#x} -> unmapped {unmapped:#x}: WAIT_CS {}",
        match &r {
            Err(e) if hlrs::errno(e) == 5 => "ABORTED (EIO)".to_owned(),
            other => format!("{other:?} (expected ABORTED)"),
        }
    );
    let pf = dev.page_fault_event()?;
    let _ = writeln!(
        out,
        "HL_INFO_PAGE_FAULT_EVENT: address {:#x}, engine {}, at {} ns",
        pf.addr, pf.engine_id, pf.timestamp
    );
    let maps = dev.user_mappings(64)?;
    let _ = writeln!(
        out,
        "HL_INFO_USER_MAPPINGS at the fault: {} host mapping(s)",
        maps.len()
    );
    for m in &maps {
        let _ = writeln!(out, "  {:#x} + {:#x}", m.dev_va, m.size);
    }
    let _ = writeln!(out, "HL_INFO_GET_EVENTS: {:#x}", dev.events()?);
    // The device goes on.
    let nop = Cb::new().nop();
    let (_nop_buf, nop_va) = host_cb(dev, &nop)?;
    let next = dev.run_cb(queue, nop_va, nop.len(), 10 * SEC)?;
    let _ = writeln!(out, "the next CS: {next:?}");
    Ok(out)
}

/// `hlrs cs`: `n` NOP CSs on `queue`, each waited for, then pipelined.
pub fn run_cs(device: u32, n: u64, queue: u32) -> io::Result<String> {
    let dev = Device::open_compute(device)?;
    let cb = Cb::new().nop();
    let (_b, va) = host_cb(&dev, &cb)?;
    let null = dev.null_ioctl_ns(20_000)?;
    let t = Instant::now();
    for _ in 0..n {
        Cs::new()
            .chunk(queue, va, cb.len())
            .submit(&dev)?
            .wait(&dev, 10 * SEC)?;
    }
    let serial = t.elapsed().as_nanos() as f64 / n.max(1) as f64;
    let t = Instant::now();
    let mut last = 0;
    let mut full = 0u64;
    for _ in 0..n {
        loop {
            match Cs::new().chunk(queue, va, cb.len()).submit(&dev) {
                Ok(f) => {
                    last = f.seq;
                    break;
                }
                Err(e) if hlrs::errno(&e) == 11 => {
                    full += 1;
                    dev.wait_cs(last.saturating_sub(32).max(1), 10 * SEC)?;
                }
                Err(e) => return Err(e),
            }
        }
    }
    dev.wait_cs(last, 10 * SEC)?;
    let piped = t.elapsed().as_nanos() as f64 / n.max(1) as f64;
    let mut out = String::new();
    let _ = writeln!(out, "{n} NOP CSs on queue {queue}");
    let _ = writeln!(
        out,
        "CS + WAIT_CS, one at a time: {:.1} us each ({:.1}x the null ioctl, {:.0} ns)",
        serial / 1000.0,
        serial / null,
        null
    );
    let _ = writeln!(
        out,
        "pipelined (64 in flight at most, {full} EAGAIN): {:.1} us each",
        piped / 1000.0
    );
    let _ = writeln!(
        out,
        "last sequence {last}; HL_INFO_CS_COUNTERS max-in-flight drops: {}",
        dev.cs_counters()?.counters[9]
    );
    Ok(out)
}

/// Queue ids accepted on the command line: PDMA_0_0 by default.
pub const DEFAULT_QUEUE: u32 = GAUDI2_QUEUE_ID_PDMA_0_0;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checksums_differ_for_different_bytes() {
        assert_ne!(checksum(b"ab"), checksum(b"ba"));
        assert_eq!(checksum(b""), 0xcbf2_9ce4_8422_2325);
    }
}
