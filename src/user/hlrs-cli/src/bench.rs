//! `hlrs bench`: the userspace half of `make bench` (the VA allocators are
//! compared by a KUnit benchmark in the same guest boot).
//!
//! Every figure is printed as one line `@@BENCH <id> <value> <unit>`, which
//! `scripts/bench_report.py` turns into the table and `results.json`:
//!
//! 1. ioctl costs, each timed in batches interleaved with batches of a null
//!    INFO ioctl (DEVICE_STATUS) in the same loop structure; median and best
//!    batch of each, so the ratio compares like with like;
//! 2. MAP+UNMAP of a 4 KiB host buffer with 100, 10,000 and 100,000 host
//!    mappings live in the context, and the teardown (close) of a context
//!    holding 100,000 host mappings next to 100,000 single UNMAPs;
//! 3. the pinning floor: MAP and UNMAP of 1 GiB of 4 KiB pages against
//!    `pin_user_pages_fast` + unpin of the same buffer alone (debugfs
//!    `bench`), with the MAP split into pin, lookup, accounting and PTE phases;
//! 4. parallelism: MAP+UNMAP throughput of 1 thread on one device and of 2
//!    threads on 2 devices (one context each);
//! 5. command submission (`bench_dma`), and with a Gaudi2 on PCI its
//!    figures next to the simulated device's (`bench_pci`) and its sync
//!    manager's round trips next to a NOP CS (`bench_sync`).
//!
//! Benchmarks never fail on a time; they fail only when an operation fails.

use crate::bench_common::{against_null, batch, emit, median_best, BATCHES};
use crate::bench_phases::{delta, phases, read_profile, set_profiling};
use hlrs::{errno, gaudi2, uapi::*, Device, HostBuffer};
use std::io;
use std::time::Instant;

/// Section 1: the cost of each ioctl next to the null ioctl.
fn ioctl_costs(index: u32) -> io::Result<()> {
    let dev = Device::open_compute(index)?;
    let page = dev.hw_ip_info()?.dram_page_size;
    against_null(&dev, "ioctl.null", 400, || dev.device_status().map(drop))?;
    against_null(&dev, "ioctl.info_dram_usage", 400, || {
        dev.dram_usage().map(drop)
    })?;
    for (name, flags) in [("contiguous", HL_MEM_CONTIGUOUS), ("scattered", 0)] {
        against_null(&dev, &format!("ioctl.alloc_free.{name}"), 200, || {
            dev.free(dev.alloc(page, flags)?)
        })?;
    }
    let h = dev.alloc(page, 0)?;
    against_null(&dev, "ioctl.map_unmap.device_page", 200, || {
        dev.unmap(dev.map(h, 0, 0)?)
    })?;
    for (name, len) in [("host_4k", 4096usize), ("host_2m", 2 << 20)] {
        let b = small_pages(len)?;
        let per = if len > 4096 { 20 } else { 200 };
        against_null(&dev, &format!("ioctl.map_unmap.{name}"), per, || {
            dev.unmap(dev.map_host(b.addr(), len as u64, 0, 0)?)
        })?;
    }
    let block = gaudi2::block_addr(9).ok_or_else(|| io::Error::from_raw_os_error(22))?;
    against_null(&dev, "ioctl.map_block", 400, || {
        dev.map_block(block).map(drop)
    })?;
    against_null(&dev, "ioctl.map_block_mmap_munmap", 100, || {
        dev.map_hw_block(block).map(drop)
    })?;
    let va = dev.map(h, 0, 0)?;
    against_null(&dev, "ioctl.export_dmabuf_close", 100, || {
        dev.export_dmabuf(va, 4096, 0, hlrs::DMABUF_FLAGS).map(drop)
    })?;
    dev.unmap(va)?;
    dev.free(h)?;
    map_64g(&dev)?;
    // TS buffers live until the file is closed: at most 7 x 100 + 1 pages.
    against_null(&dev, "ioctl.ts_alloc", 100, || dev.ts_alloc(1).map(drop))?;
    Ok(())
}

/// MAP and UNMAP of a 64 GiB handle, each timed on its own (median of
/// [`BATCHES`]) next to the null ioctl's median.
fn map_64g(dev: &Device) -> io::Result<()> {
    let h = dev.alloc(64 << 30, 0)?;
    let (mut map, mut unmap, mut base) = (Vec::new(), Vec::new(), Vec::new());
    dev.unmap(dev.map(h, 0, 0)?)?;
    for _ in 0..BATCHES {
        base.push(batch(50, &mut || dev.device_status().map(drop))?);
        let t = Instant::now();
        let va = dev.map(h, 0, 0)?;
        map.push(t.elapsed().as_nanos() as f64);
        let t = Instant::now();
        dev.unmap(va)?;
        unmap.push(t.elapsed().as_nanos() as f64);
    }
    let (b, _) = median_best(base);
    for (id, v) in [("ioctl.map_64g", map), ("ioctl.unmap_64g", unmap)] {
        let (m, best) = median_best(v);
        emit(&format!("{id}.median"), m, "ns");
        emit(&format!("{id}.best"), best, "ns");
        emit(&format!("{id}.baseline"), b, "ns");
    }
    dev.free(h)
}

/// An anonymous buffer of 4 KiB pages (no THP), every page touched.
fn small_pages(len: usize) -> io::Result<HostBuffer> {
    let mut b = HostBuffer::new(len)?;
    b.no_huge_pages()?;
    b.as_mut_slice()
        .iter_mut()
        .step_by(4096)
        .for_each(|x| *x = 1);
    Ok(b)
}

/// Map every page of `buf` on its own: `n` live host mappings. Returns the VAs.
fn map_pages(dev: &Device, buf: &HostBuffer, n: usize) -> io::Result<Vec<u64>> {
    (0..n)
        .map(|i| dev.map_host(buf.addr() + i as u64 * 4096, 4096, 0, 0))
        .collect()
}

/// Section 2: MAP+UNMAP of 4 KiB with many host mappings live, and teardown.
fn scaling(index: u32, sizes: &[usize]) -> io::Result<()> {
    let most = sizes.iter().copied().max().unwrap_or(0);
    let big = small_pages(most.max(1) * 4096)?;
    let one = small_pages(4096)?;
    for &n in sizes {
        let dev = Device::open_compute(index)?;
        map_pages(&dev, &big, n)?;
        against_null(&dev, &format!("scale.map_unmap_4k.live{n}"), 200, || {
            dev.unmap(dev.map_host(one.addr(), 4096, 0, 0)?)
        })?;
        if n == most {
            // Teardown of the whole context against n single UNMAPs.
            let t = Instant::now();
            drop(dev);
            emit(
                &format!("scale.close.live{n}"),
                t.elapsed().as_nanos() as f64,
                "ns",
            );
            let dev = Device::open_compute(index)?;
            let vas = map_pages(&dev, &big, n)?;
            let t = Instant::now();
            for va in vas {
                dev.unmap(va)?;
            }
            emit(
                &format!("scale.unmaps.live{n}"),
                t.elapsed().as_nanos() as f64,
                "ns",
            );
        }
    }
    Ok(())
}

/// Section 3: a 1 GiB MAP/UNMAP of 4 KiB pages next to pin+unpin alone.
fn pin_floor(index: u32) -> io::Result<()> {
    const SIZE: usize = 1 << 30;
    const PHASES: [&str; 5] = ["pin", "lookup", "va", "pte", "invalidate"];
    let dev = Device::open_compute(index)?;
    let buf = small_pages(SIZE)?;
    let path = format!("/sys/kernel/debug/habanalabs_rs/{index}/bench");
    let (mut map, mut unmap, mut pin, mut unpin) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut phases = [f64::MAX; PHASES.len()];
    const UNMAP_PHASES: [&str; 4] = ["publish", "pte", "invalidate", "release"];
    let mut unmap_phases = [f64::MAX; UNMAP_PHASES.len()];
    set_profiling(index, true)?;
    for _ in 0..3 {
        let before = read_profile(index)?;
        let t = Instant::now();
        let va = dev.map_host(buf.addr(), SIZE as u64, 0, 0)?;
        map.push(t.elapsed().as_nanos() as f64);
        let mid = read_profile(index)?;
        let d = delta(&before, &mid);
        let t = Instant::now();
        dev.unmap(va)?;
        unmap.push(t.elapsed().as_nanos() as f64);
        let du = delta(&mid, &read_profile(index)?);
        for (p, name) in phases.iter_mut().zip(PHASES) {
            let ns = d.get(&format!("map_host.{name}_ns")).copied().unwrap_or(0);
            *p = p.min(ns as f64);
        }
        for (p, name) in unmap_phases.iter_mut().zip(UNMAP_PHASES) {
            let ns = du
                .get(&format!("unmap_host.{name}_ns"))
                .copied()
                .unwrap_or(0);
            *p = p.min(ns as f64);
        }
        std::fs::write(&path, format!("pin {:#x} {}", buf.addr(), SIZE))?;
        let floor = read_profile(index)?;
        pin.push(*floor.get("pin_floor.pin_ns").unwrap_or(&0) as f64);
        unpin.push(*floor.get("pin_floor.unpin_ns").unwrap_or(&0) as f64);
    }
    set_profiling(index, false)?;
    for (id, v) in [
        ("pin.map_1g", map),
        ("pin.unmap_1g", unmap),
        ("pin.floor_pin_1g", pin),
        ("pin.floor_unpin_1g", unpin),
    ] {
        emit(&format!("{id}.best"), median_best(v).1, "ns");
    }
    for (name, v) in PHASES.iter().zip(phases) {
        emit(&format!("pin.map_1g.phase.{name}"), v, "ns");
    }
    for (name, v) in UNMAP_PHASES.iter().zip(unmap_phases) {
        emit(&format!("pin.unmap_1g.phase.{name}"), v, "ns");
    }
    emit("pin.pages", (SIZE / 4096) as f64, "pages");
    Ok(())
}

/// One thread's MAP+UNMAP loop on its own device: `n` pairs of a one-page
/// DRAM handle, or of a 4 KiB host buffer.
fn map_loop(index: u32, n: u32, host: bool) -> io::Result<()> {
    let dev = Device::open_compute(index)?;
    let page = dev.hw_ip_info()?.dram_page_size;
    let h = dev.alloc(page, 0)?;
    let b = small_pages(4096)?;
    for _ in 0..n {
        let va = if host {
            dev.map_host(b.addr(), 4096, 0, 0)?
        } else {
            dev.map(h, 0, 0)?
        };
        dev.unmap(va)?;
    }
    dev.free(h)
}

/// Section 4: aggregate throughput with 1 thread and with 2 threads on 2 devices.
fn parallelism(devices: u32) -> io::Result<()> {
    if devices < 2 {
        return Ok(());
    }
    const N: u32 = 2000;
    const ROUNDS: usize = 5;
    for (name, host) in [("device_page", false), ("host_4k", true)] {
        map_loop(0, 200, host)?;
        // 1 thread, 2 threads, 2 processes, interleaved over ROUNDS rounds;
        // the median throughput of each (two vCPUs under TCG are noisy).
        let mut got = [Vec::new(), Vec::new(), Vec::new()];
        for _ in 0..ROUNDS {
            for (k, v) in got.iter_mut().enumerate() {
                let t = Instant::now();
                let pairs = match k {
                    0 | 1 => {
                        let threads = k as u32 + 1;
                        std::thread::scope(|s| {
                            let hs: Vec<_> = (0..threads)
                                .map(|i| s.spawn(move || map_loop(i, N, host)))
                                .collect();
                            hs.into_iter().try_for_each(|h| {
                                h.join()
                                    .unwrap_or_else(|_| Err(io::Error::other("thread panicked")))
                            })
                        })?;
                        N * threads
                    }
                    _ => {
                        // Two processes (one per device, as runtimes run):
                        // the threads above share one mm, whose locks a host
                        // MAP takes (`account_locked_vm`, the pin's slow path).
                        let ok = (0..2u32)
                            .map(|i| fork_and(|| map_loop(i, N, host)))
                            .collect::<Vec<_>>()
                            .into_iter()
                            .all(wait_ok);
                        if !ok {
                            return Err(io::Error::other("a benchmark child failed"));
                        }
                        N * 2
                    }
                };
                v.push(f64::from(pairs) / t.elapsed().as_secs_f64());
            }
        }
        let [one, two, procs] = got;
        for (id, v) in [("threads1", one), ("threads2", two), ("processes2", procs)] {
            emit(&format!("par.{name}.{id}"), median_best(v).0, "pairs/s");
        }
    }
    Ok(())
}

/// Fork a child that runs `f` and exits with its success; returns its pid
/// (or -1 if the fork failed).
fn fork_and(f: impl FnOnce() -> io::Result<()>) -> i32 {
    // SAFETY: the benchmark is single-threaded here (the thread scopes above
    // have ended); the child runs `f` and leaves with `_exit`.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        let code = i32::from(f().is_err());
        // SAFETY: ends the child without running the parent's destructors.
        unsafe { libc::_exit(code) };
    }
    pid
}

/// Wait for a child of [`fork_and`]; whether it exited with 0.
fn wait_ok(pid: i32) -> bool {
    let mut status = 0;
    // SAFETY: waits for our own child.
    pid > 0 && unsafe { libc::waitpid(pid, &mut status, 0) } == pid && status == 0
}

/// Which sections to run and how large.
pub struct Settings {
    /// Live host mappings for the scaling section.
    pub live: Vec<usize>,
    /// Devices present (parallelism needs 2).
    pub devices: u32,
    /// Skip the 1 GiB pinning floor (machines with little RAM).
    pub skip_pin: bool,
    /// Run only these sections (empty: all).
    pub only: Vec<String>,
}

/// Run every section on device 0 (and 1); a failing operation ends the run.
pub fn run(s: &Settings) -> io::Result<()> {
    let step = |name: &str, r: &dyn Fn() -> io::Result<()>| {
        if !s.only.is_empty() && !s.only.iter().any(|o| o == name) {
            return Ok(());
        }
        r().map_err(|e| {
            io::Error::new(e.kind(), format!("bench {name}: {e} (errno {})", errno(&e)))
        })
    };
    let t = Instant::now();
    step("ioctl", &|| ioctl_costs(0))?;
    step("phases", &|| small_pages(4096).and_then(|b| phases(0, &b)))?;
    step("scaling", &|| scaling(0, &s.live))?;
    if !s.skip_pin {
        step("pin", &|| pin_floor(0))?;
    }
    step("parallelism", &|| parallelism(s.devices))?;
    step("cs", &|| crate::bench_dma::run(0))?;
    // Host 1's sync manager: the same figures on simulated device 0.
    step("sync", &|| crate::bench_sync::run(0, "sync_sim"))?;
    // libhlthunk's all-to-all CS: 8 EDMAs and 2 PDMAs ordered by the sync
    // manager, its rate and what it means for libhlthunk's sizes.
    step("all2all", &|| crate::bench_all2all::run(0, "a2a_sim"))?;
    // A Gaudi2 on PCI (`make bench` boots one when QEMU has vfio-user):
    // the figures where it differs, against simulated device 0.
    if let Some(pci) = crate::bench_pci::pci_device() {
        step("pci", &|| crate::bench_pci::run(0, pci))?;
        // Its sync manager: a two-queue ping-pong and an interrupt wait
        // next to a NOP CS (`bench_sync`; a device without user interrupts
        // reports nothing).
        step("sync", &|| crate::bench_sync::run(pci, "sync"))?;
        step("all2all", &|| crate::bench_all2all::run(pci, "a2a"))?;
    }
    emit("bench.userspace_seconds", t.elapsed().as_secs_f64(), "s");
    Ok(())
}
