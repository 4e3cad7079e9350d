//! `hlrs bench`, the command-submission section (issue 22): what the
//! simulated DMA engines cost next to the CPU doing the same work.
//!
//! 1. `LIN_DMA` throughput host -> DRAM and DRAM -> host at 4 KiB, 2 MiB
//!    and 256 MiB: one CS of one `LIN_DMA` (a host buffer mapped through the
//!    PMMU, a scattered DRAM handle mapped through the DMMU), timed from the
//!    CS ioctl to the end of its WAIT_CS, against a userspace `memcpy` of the
//!    same bytes between two host buffers, the two interleaved repetition by
//!    repetition; the median of each (`dma.<dir>.<size>.ns` and
//!    `.memcpy_ns`). `scripts/bench_report.py` prints the throughput ratio
//!    DMA / memcpy (goal: at least 0.5 from 2 MiB up).
//! 2. CS + WAIT_CS of one NOP against the null ioctl, in interleaved
//!    batches (`cs.nop_wait`), and the same NOP CSs pipelined (up to 64 in
//!    flight, each waited for 32 CSs later: `cs.nop_piped`).
//!
//! Every transfer is checked (the destination's checksum), so a wrong byte
//! fails the run; no figure fails it.

use crate::{
    bench_common::{against_null, emit, median_best},
    dma::map_cb,
};
use hlrs::{
    cs::{Cb, Cs},
    uapi::*,
    Device, HostBuffer,
};
use std::{hint::black_box, io, time::Instant};

const QUEUE: u32 = GAUDI2_QUEUE_ID_PDMA_0_0;
const SEC: u64 = 1_000_000;

/// The sizes measured, their figure names and repetitions.
const SIZES: [(usize, &str, usize); 3] = [
    (4 << 10, "4k", 21),
    (2 << 20, "2m", 9),
    (256 << 20, "256m", 3),
];

/// A host buffer of `len` bytes, every byte written (a pattern that differs
/// at every 8-byte word).
fn filled(len: usize, seed: u64) -> io::Result<HostBuffer> {
    let mut b = HostBuffer::new(len)?;
    let mut x = seed | 1;
    for c in b.as_mut_slice().chunks_mut(8) {
        x = x.wrapping_mul(0x9E37_79B9_7F4A_7C15).wrapping_add(1);
        c.copy_from_slice(&x.to_le_bytes()[..c.len()]);
    }
    Ok(b)
}

/// Run the CS of the CB mapped at `cb` (`len` bytes) and wait for it:
/// an error unless it completed.
pub(crate) fn run_cb(dev: &Device, cb: u64, len: u32) -> io::Result<()> {
    let f = Cs::new().chunk(QUEUE, cb, len).submit(dev)?;
    match f.wait(dev, 120 * SEC)? {
        hlrs::cs::CsDone::Completed { .. } => Ok(()),
        other => Err(io::Error::other(format!("CS {}: {other:?}", f.seq))),
    }
}

/// Section 1 for one size: host -> DRAM then DRAM -> host, each timed
/// against a memcpy of the same bytes. O(reps x size).
fn lin_dma_size(dev: &Device, size: usize, name: &str, reps: usize) -> io::Result<()> {
    let src = filled(size, size as u64)?;
    let dst = HostBuffer::new(size)?;
    let sva = dev.map_host(src.addr(), size as u64, 0, 0)?;
    let dva_host = dev.map_host(dst.addr(), size as u64, 0, 0)?;
    let h = dev.alloc(size as u64, 0)?;
    let dram = dev.map(h, 0, 0)?;
    let n = u32::try_from(size).map_err(|_| io::Error::from_raw_os_error(22))?;
    let there = Cb::new().lin_dma(sva, dram, n);
    let back = Cb::new().lin_dma(dram, dva_host, n);
    let (_b1, cb_there) = map_cb(dev, &there)?;
    let (_b2, cb_back) = map_cb(dev, &back)?;
    // The memcpy's destination, written once (no first-touch faults timed).
    let mut copy = vec![1u8; size];
    // Warm-up: one of each (STLB fill, DRAM backing, page cache of the CBs).
    run_cb(dev, cb_there, there.len())?;
    run_cb(dev, cb_back, back.len())?;
    let (mut h2d, mut d2h, mut cpu) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..reps {
        let t = Instant::now();
        run_cb(dev, cb_there, there.len())?;
        h2d.push(t.elapsed().as_nanos() as f64);
        let t = Instant::now();
        run_cb(dev, cb_back, back.len())?;
        d2h.push(t.elapsed().as_nanos() as f64);
        let t = Instant::now();
        copy.copy_from_slice(black_box(src.as_slice()));
        black_box(&mut copy);
        cpu.push(t.elapsed().as_nanos() as f64);
    }
    if crate::dma::checksum(dst.as_slice()) != crate::dma::checksum(src.as_slice()) {
        return Err(io::Error::other(format!(
            "DMA of {name}: the bytes came back different"
        )));
    }
    let memcpy = median_best(cpu).0;
    for (dir, v) in [("h2d", h2d), ("d2h", d2h)] {
        emit(&format!("dma.{dir}.{name}.ns"), median_best(v).0, "ns");
        emit(&format!("dma.{dir}.{name}.memcpy_ns"), memcpy, "ns");
    }
    emit(&format!("dma.{name}.bytes"), size as f64, "B");
    dev.unmap(dram)?;
    dev.free(h)?;
    dev.unmap(sva)?;
    dev.unmap(dva_host)
}

/// The median time of `reps` CSs of the CB mapped at `cb`. O(reps).
fn median_cs(dev: &Device, cb: u64, len: u32, reps: usize) -> io::Result<f64> {
    run_cb(dev, cb, len)?;
    let mut v = Vec::new();
    for _ in 0..reps {
        let t = Instant::now();
        run_cb(dev, cb, len)?;
        v.push(t.elapsed().as_nanos() as f64);
    }
    Ok(median_best(v).0)
}

/// Where a 2 MiB LIN_DMA's time goes, by route (`dma.route.<r>.2m`): from
/// a hugetlbfs buffer (one PMMU walk for the 2 MiB instead of 512),
/// DRAM -> DRAM (no host page, no IOMMU: two copies through the bounce
/// buffer and the DRAM chunks' lookups), SRAM -> SRAM (no MMU at all).
/// O(reps x 2 MiB).
fn lin_dma_routes(dev: &Device) -> io::Result<()> {
    const SIZE: u32 = 2 << 20;
    const SRAM: u64 = 0x1000_FFFF_FD00_0000;
    let huge = HostBuffer::hugetlb(SIZE as usize)?;
    let hva = dev.map_host(huge.addr(), u64::from(SIZE), 0, 0)?;
    let h = dev.alloc(2 * u64::from(SIZE), 0)?;
    let dram = dev.map(h, 0, 0)?;
    for (route, src, dst) in [
        ("h2d_huge", hva, dram),
        ("d2d", dram, dram + u64::from(SIZE)),
        ("s2s", SRAM, SRAM + u64::from(SIZE)),
    ] {
        let cb = Cb::new().lin_dma(src, dst, SIZE);
        let (_b, va) = map_cb(dev, &cb)?;
        let t = median_cs(dev, va, cb.len(), 9)?;
        emit(&format!("dma.route.{route}.2m"), t, "ns");
    }
    dev.unmap(dram)?;
    dev.free(h)?;
    dev.unmap(hva)
}

/// Section 2: one NOP CS waited for, against the null ioctl; then
/// pipelined. O(CSs).
fn nop_cs(dev: &Device) -> io::Result<()> {
    let nop = Cb::new().nop();
    let (_b, va) = map_cb(dev, &nop)?;
    against_null(dev, "cs.nop_wait", 100, || run_cb(dev, va, nop.len()))?;
    const N: u64 = 2000;
    let mut times = Vec::new();
    for _ in 0..3 {
        let t = Instant::now();
        let mut last = 0;
        for _ in 0..N {
            let f = Cs::new().chunk(QUEUE, va, nop.len()).submit(dev)?;
            last = f.seq;
            if last > 32 {
                dev.wait_cs(last - 32, 10 * SEC)?;
            }
        }
        dev.wait_cs(last, 10 * SEC)?;
        times.push(t.elapsed().as_nanos() as f64 / N as f64);
    }
    emit("cs.nop_piped", median_best(times).0, "ns");
    nop_phases(dev, va, nop.len())
}

/// CLOCK_MONOTONIC in ns: the clock of the kernel's `ktime_get_ns`, which
/// stamps a CS's completion (`HL_CS_FLAGS_TIMESTAMP`).
fn monotonic_ns() -> i64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: writes the current time to our own timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec * 1_000_000_000 + ts.tv_nsec
}

/// Where one NOP CS's time goes, from its completion timestamp: the CS
/// ioctl (`cs.nop_phase.submit`), from its return to the engine's end of
/// the job (`.engine`: the work item's wake-up, the CB fetch, the fence),
/// and from there to WAIT_CS's return (`.wake`: the waiter's wake-up).
/// Medians of 201. O(CSs).
fn nop_phases(dev: &Device, va: u64, len: u32) -> io::Result<()> {
    let mut phases = [Vec::new(), Vec::new(), Vec::new()];
    for _ in 0..201 {
        let t0 = monotonic_ns();
        let f = Cs::new().chunk(QUEUE, va, len).timestamp().submit(dev)?;
        let t1 = monotonic_ns();
        let done = f.wait(dev, 10 * SEC)?;
        let t2 = monotonic_ns();
        let hlrs::cs::CsDone::Completed {
            timestamp: Some(tc),
            ..
        } = done
        else {
            return Err(io::Error::other(format!("CS {}: {done:?}", f.seq)));
        };
        for (v, d) in phases.iter_mut().zip([t1 - t0, tc - t1, t2 - tc]) {
            v.push(d as f64);
        }
    }
    for (name, v) in ["submit", "engine", "wake"].iter().zip(phases) {
        emit(&format!("cs.nop_phase.{name}"), median_best(v).0, "ns");
    }
    Ok(())
}

/// The command-submission section on device `index`.
pub fn run(index: u32) -> io::Result<()> {
    let dev = Device::open_compute(index)?;
    nop_cs(&dev)?;
    for (size, name, reps) in SIZES {
        lin_dma_size(&dev, size, name, reps)?;
    }
    lin_dma_routes(&dev)
}
