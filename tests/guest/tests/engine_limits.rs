//! The host CPU the simulated engines use, and the VAs they can reach
//! (issue 30, defects 4 and 6b):
//!
//! - the engines' threads are in the submitter's cgroup, counted in its
//!   `cpu.stat` and held to its `cpu.max`: long CSs on four engines use
//!   about the quota, not four CPUs;
//! - a CS's custom timeout of `0xFFFFFFFF` s is clamped to the run-time
//!   cap `cs_max_run_s`: the CS ends TIMEDOUT;
//! - a VA unmapped while a DMA writes to it is not reused until the DMA's
//!   CS has ended, so a handle mapped right after at the same VA (hint,
//!   forced hint) or elsewhere never receives the DMA's bytes.
//!
//! Assertions are on CPU-time ratios with wide margins and on counters,
//! never on how long something took.

use hlrs::{
    cs::{Cb, Cs, CsDone},
    uapi::*,
    Device, HostBuffer,
};
use hlrs_guest_tests::{expect_errno, guest_only};
use std::{
    io,
    time::{Duration, Instant},
};

const EIO: i32 = 5;
const EADDRINUSE: i32 = 98;
const ETIMEDOUT: i32 = 110;
const SEC: u64 = 1_000_000;
const PDMA: u32 = GAUDI2_QUEUE_ID_PDMA_0_0;
const SRAM: u64 = 0x1000_FFFF_FD00_0000;
const CGROOT: &str = "/sys/fs/cgroup";
const CAP: &str = "/sys/module/habanalabs_rs/parameters/cs_max_run_s";

/// Four engines' queues: PDMA 0, PDMA 1 and two EDMAs.
const QUEUES: [u32; 4] = [
    GAUDI2_QUEUE_ID_PDMA_0_0,
    GAUDI2_QUEUE_ID_PDMA_1_0,
    GAUDI2_QUEUE_ID_DCORE0_EDMA_0_0,
    GAUDI2_QUEUE_ID_DCORE1_EDMA_0_0 + 4,
];

/// A CB in a host buffer of its own, mapped (unmapped when dropped).
struct HostCb<'d> {
    d: &'d Device,
    _buf: HostBuffer,
    va: u64,
    len: u32,
}

impl Drop for HostCb<'_> {
    fn drop(&mut self) {
        let _ = self.d.unmap(self.va);
    }
}

fn host_cb<'d>(d: &'d Device, cb: &Cb) -> HostCb<'d> {
    let buf = cb.to_host_buffer().unwrap();
    let va = d.map_host(buf.addr(), buf.len() as u64, 0, 0).unwrap();
    HostCb {
        d,
        _buf: buf,
        va,
        len: cb.len(),
    }
}

/// A CB that keeps an engine busy for tens of seconds: memsets of 32 MiB
/// of SRAM, 1000 of them.
fn long_cb() -> Cb {
    (0..1000).fold(Cb::new(), |cb, i| cb.memset(SRAM + (8 << 20), i, 32 << 20))
}

/// A line in the kernel log (the console), to follow a test's steps.
fn kmsg(what: &str) {
    let _ = std::fs::write("/dev/kmsg", format!("engine_limits: {what}\n"));
}

// --- cgroups --------------------------------------------------------------------------------

/// cgroup v2 at /sys/fs/cgroup (mounted here if it is not yet) with the
/// CPU controller enabled for children, and a child group for this test;
/// the test's process moves in. Dropping it moves the process back and
/// removes the group.
struct CpuGroup {
    dir: String,
}

impl CpuGroup {
    fn new(name: &str, cpu_max: &str) -> Self {
        if std::fs::metadata(format!("{CGROOT}/cgroup.controllers")).is_err() {
            std::fs::create_dir_all(CGROOT).unwrap();
            let (src, target, fs) = (c"none", c"/sys/fs/cgroup", c"cgroup2");
            // SAFETY: NUL-terminated strings that outlive the call.
            let rc = unsafe {
                libc::mount(
                    src.as_ptr(),
                    target.as_ptr(),
                    fs.as_ptr(),
                    0,
                    std::ptr::null(),
                )
            };
            assert_eq!(rc, 0, "mount cgroup2: {}", io::Error::last_os_error());
        }
        let controllers = std::fs::read_to_string(format!("{CGROOT}/cgroup.controllers")).unwrap();
        assert!(
            controllers.contains("cpu"),
            "no cpu controller: {controllers}"
        );
        std::fs::write(format!("{CGROOT}/cgroup.subtree_control"), "+cpu").unwrap();
        let dir = format!("{CGROOT}/{name}-{}", std::process::id());
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(format!("{dir}/cpu.max"), cpu_max).unwrap();
        std::fs::write(format!("{dir}/cgroup.procs"), "0").unwrap();
        Self { dir }
    }

    /// A counter of `cpu.stat`.
    fn stat(&self, key: &str) -> u64 {
        let s = std::fs::read_to_string(format!("{}/cpu.stat", self.dir)).unwrap();
        s.lines()
            .find_map(|l| l.strip_prefix(key)?.trim().parse().ok())
            .unwrap_or_else(|| panic!("no {key} in cpu.stat: {s}"))
    }

    /// The threads in the group, with their names.
    fn threads(&self) -> Vec<(u32, String)> {
        let s = std::fs::read_to_string(format!("{}/cgroup.threads", self.dir)).unwrap();
        s.lines()
            .filter_map(|l| l.trim().parse().ok())
            .map(|tid: u32| {
                let comm = std::fs::read_to_string(format!("/proc/{tid}/comm")).unwrap_or_default();
                (tid, comm.trim().to_owned())
            })
            .collect()
    }
}

impl Drop for CpuGroup {
    fn drop(&mut self) {
        let _ = std::fs::write(format!("{CGROOT}/cgroup.procs"), "0");
        // The engine threads ended with the close; rmdir waits for nothing.
        for _ in 0..100 {
            if std::fs::remove_dir(&self.dir).is_ok() {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = std::fs::write(format!("{CGROOT}/cgroup.subtree_control"), "-cpu");
    }
}

/// Busy CPU time of the whole machine (`/proc/stat`, every CPU), in us.
fn machine_busy_us() -> u64 {
    let s = std::fs::read_to_string("/proc/stat").unwrap();
    let cpu = s.lines().next().unwrap();
    let f: Vec<u64> = cpu
        .split_whitespace()
        .skip(1)
        .map(|x| x.parse().unwrap())
        .collect();
    // user nice system idle iowait irq softirq steal: all but idle, iowait.
    let ticks = f[0] + f[1] + f[2] + f[5] + f[6] + f[7];
    // USER_HZ is 100.
    ticks * 10_000
}

/// Not met on 7.3 (issue 30, defect 4c, left open): CFS bandwidth throttles
/// a task only on its return to user space (task-based throttling, 6.18),
/// and kernel threads never return there, so engine threads moved into the
/// group would use its quota unthrottled and starve its user threads
/// instead. The engines therefore stay in the root cgroup for now; this
/// test shows the bound once they are bounded (a per-context budget).
#[test]
#[ignore = "engines are not yet held to the submitter's cpu.max (docs/command-submission.md)"]
fn engines_run_in_the_submitters_cgroup_and_within_its_cpu_max() {
    guest_only!();
    // A fifth of one CPU.
    let (quota, period) = (20_000u64, 100_000u64);
    let group = CpuGroup::new("hlrs-engines", &format!("{quota} {period}"));
    kmsg("in the group");
    let d = Device::open_compute(0).unwrap();
    let cb = host_cb(&d, &long_cb());
    let mut seqs = Vec::new();
    for q in QUEUES {
        let f = Cs::new().chunk(q, cb.va, cb.len).submit(&d).unwrap();
        seqs.push(f.seq);
        kmsg("submitted");
    }
    // The four engine threads are in the group, beside this process.
    let me = std::process::id();
    let workers: Vec<_> = group
        .threads()
        .into_iter()
        .filter(|(tid, comm)| *tid != me && comm.starts_with("hlrs-e"))
        .collect();
    assert_eq!(workers.len(), 4, "engine threads in the group: {workers:?}");
    let (u0, t0, b0, w0) = (
        group.stat("usage_usec"),
        group.stat("nr_throttled"),
        machine_busy_us(),
        Instant::now(),
    );
    kmsg("measuring");
    std::thread::sleep(Duration::from_secs(3));
    kmsg("measured");
    let (u1, t1, b1) = (
        group.stat("usage_usec"),
        group.stat("nr_throttled"),
        machine_busy_us(),
    );
    let wall = w0.elapsed().as_micros() as u64;
    // The CSs still run: nothing finished on its own.
    for &s in &seqs {
        assert_eq!(d.wait_cs(s, 0).unwrap(), CsDone::Busy);
    }
    kmsg("closing");
    drop(cb);
    drop(d);
    kmsg("closed");
    let (used, machine) = (u1 - u0, b1 - b0);
    let bound = wall * quota / period;
    eprintln!(
        "wall {wall} us: group used {used} us (bound {bound}), throttled {} times; machine busy {machine} us",
        t1 - t0
    );
    // Charged here (the test itself sleeps), and throttled.
    assert!(used >= bound / 4, "the engines' time is not the group's");
    assert!(t1 > t0, "never throttled");
    // Within the bound (wide margins: accounting granularity), and the
    // machine (two CPUs; four busy engines would take both) mostly idle.
    assert!(used <= 2 * bound + 100_000, "over cpu.max");
    assert!(
        machine <= wall,
        "the engines took {machine} us of CPU in {wall} us"
    );
    drop(group);
}

// --- the run-time cap -----------------------------------------------------------------------

/// Sets `cs_max_run_s` and puts the old value back when dropped.
struct Cap(String);

impl Cap {
    fn set(s: u32) -> Self {
        let old = std::fs::read_to_string(CAP).unwrap().trim().to_owned();
        std::fs::write(CAP, s.to_string()).unwrap();
        Self(old)
    }
}

impl Drop for Cap {
    fn drop(&mut self) {
        let _ = std::fs::write(CAP, &self.0);
    }
}

#[test]
fn a_custom_timeout_of_0xffffffff_is_clamped_to_the_run_time_cap() {
    guest_only!();
    let d = Device::open_compute(0).unwrap();
    let cb = host_cb(&d, &long_cb());
    let _cap = Cap::set(2);
    let f = Cs::new()
        .chunk(PDMA, cb.va, cb.len)
        .timeout(u32::MAX)
        .submit(&d)
        .unwrap();
    // Without the cap the CS runs to its end (tens of seconds: COMPLETED),
    // or past this wait (BUSY).
    expect_errno(f.wait(&d, 120 * SEC), ETIMEDOUT);
    assert_eq!(d.cs_timeout_event().unwrap().seq, f.seq);
    // A CS not the oldest (its timer does not run) is capped too.
    let g1 = Cs::new().chunk(PDMA, cb.va, cb.len).submit(&d).unwrap();
    let g2 = Cs::new()
        .chunk(QUEUES[2], cb.va, cb.len)
        .timeout(u32::MAX)
        .submit(&d)
        .unwrap();
    expect_errno(g2.wait(&d, 120 * SEC), ETIMEDOUT);
    expect_errno(g1.wait(&d, 120 * SEC), ETIMEDOUT);
}

// --- VA reuse after an UNMAP with DMAs in flight ----------------------------------------------

/// Bytes the racing DMA writes, and that the other handle is checked over.
const SPAN: u32 = 16 << 20;
const DMA_FILL: u64 = 0xD3A_D3A_D3A_D3A_D3A;
const HANDLE_FILL: u64 = 0x5AFE_5AFE_5AFE_5AFE;

/// Where the other handle goes in a round.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Place {
    /// `HL_MEM_FORCE_HINT` at the unmapped VA, then the plain hint.
    SameVa,
    /// No hint.
    Elsewhere,
}

/// What a round saw.
#[derive(Debug, Default)]
struct Seen {
    /// The CS was still running when the other handle was mapped.
    raced: bool,
    /// The forced hint was refused.
    refused: bool,
    aborted: bool,
}

/// Run `cb` on `queue` and wait for it to complete.
fn run(d: &Device, queue: u32, cb: &Cb) {
    let c = host_cb(d, cb);
    assert!(matches!(
        d.run_cb(queue, c.va, c.len, 60 * SEC).unwrap(),
        CsDone::Completed { .. }
    ));
}

/// One round: a DMA (memsets of `SPAN` bytes, 64 times) writes to handle
/// A's mapping; once it runs, A is unmapped and handle B (filled with
/// another pattern) mapped at `place`; B must hold none of the DMA's bytes.
fn unmap_race_round(place: Place, round: u32) -> Seen {
    let d = Device::open_compute(0).unwrap();
    let a = d.alloc(u64::from(SPAN), 0).unwrap();
    let b = d.alloc(u64::from(SPAN), 0).unwrap();
    // B filled, then unmapped with nothing in flight.
    let bva = d.map(b, 0, 0).unwrap();
    run(&d, QUEUES[2], &Cb::new().memset(bva, HANDLE_FILL, SPAN));
    d.unmap(bva).unwrap();
    let ava = d.map(a, 0, 0).unwrap();
    let flag = HostBuffer::new(4096).unwrap();
    let fva = d.map_host(flag.addr(), 4096, 0, 0).unwrap();
    let race = (0..64).fold(Cb::new().msg_long(fva, 1), |cb, _| {
        cb.memset(ava, DMA_FILL, SPAN)
    });
    let rcb = host_cb(&d, &race);
    let f = Cs::new().chunk(PDMA, rcb.va, rcb.len).submit(&d).unwrap();
    // Running: it wrote the flag.
    let flag_word = || {
        // SAFETY: a live, aligned u32 of the buffer the engine writes.
        unsafe { std::ptr::read_volatile(flag.as_slice().as_ptr().cast::<u32>()) }
    };
    for _ in 0..20_000 {
        if flag_word() == 1 {
            break;
        }
        std::thread::sleep(Duration::from_micros(500));
    }
    assert_eq!(flag_word(), 1, "round {round}: the DMA never started");
    d.unmap(ava).unwrap();
    let mut seen = Seen::default();
    let nva = match place {
        Place::SameVa => match d.map(b, ava, HL_MEM_FORCE_HINT) {
            Ok(va) => va,
            Err(e) => {
                assert_eq!(hlrs::errno(&e), EADDRINUSE, "round {round}");
                seen.refused = true;
                d.map(b, ava, 0).unwrap()
            }
        },
        Place::Elsewhere => d.map(b, 0, 0).unwrap(),
    };
    // The unmapped VA comes back only once the CS has ended.
    // (An ended CS answers its outcome: EIO when aborted.)
    let busy_after = matches!(d.wait_cs(f.seq, 0), Ok(CsDone::Busy));
    if nva == ava {
        assert!(
            !busy_after,
            "round {round}: VA {ava:#x} reused while its DMA runs"
        );
    }
    seen.raced = busy_after || seen.refused || nva != ava;
    match f.wait(&d, 120 * SEC) {
        Ok(CsDone::Completed { .. }) => {}
        Err(e) if hlrs::errno(&e) == EIO => {
            seen.aborted = true;
            // The fault is on the unmapped range (HMMU: bits 63..26).
            let pf = d.page_fault_event().unwrap();
            let mask = !((1u64 << 26) - 1);
            let range = (ava & mask)..=((ava + u64::from(SPAN) - 1) & mask);
            assert!(
                range.contains(&pf.addr),
                "round {round}: fault at {:#x}",
                pf.addr
            );
        }
        other => panic!("round {round}: {other:?}"),
    }
    // B, read back by DMA: only its own pattern.
    let mut out = HostBuffer::new(SPAN as usize).unwrap();
    out.as_mut_slice().fill(0);
    let ova = d.map_host(out.addr(), u64::from(SPAN), 0, 0).unwrap();
    run(&d, QUEUES[3], &Cb::new().lin_dma(nva, ova, SPAN));
    let bad = out
        .as_slice()
        .chunks_exact(8)
        .filter(|w| u64::from_le_bytes((*w).try_into().unwrap()) != HANDLE_FILL)
        .count();
    assert_eq!(
        bad, 0,
        "round {round} ({place:?}): {bad} words of B overwritten: {seen:?}"
    );
    d.unmap(ova).unwrap();
    d.unmap(nva).unwrap();
    d.unmap(fva).unwrap();
    drop(rcb);
    d.free(a).unwrap();
    d.free(b).unwrap();
    seen
}

/// Rounds of [`unmap_race_round`]; at least one must have raced (the DMA
/// still running when B was mapped) for the test to mean anything.
fn unmap_race(place: Place) {
    let mut raced = 0;
    for round in 0..6 {
        let s = unmap_race_round(place, round);
        kmsg(&format!("{place:?} round {round}: {s:?}"));
        raced += u32::from(s.raced && s.aborted);
    }
    assert!(raced >= 1, "no round raced");
    // Written simulated DRAM stays backed until a scrub.
    hlrs::debugfs::DebugfsMem::new(0).scrub(0).unwrap();
}

#[test]
fn a_dma_in_flight_at_unmap_never_reaches_a_handle_mapped_at_the_same_va() {
    guest_only!();
    unmap_race(Place::SameVa);
}

#[test]
fn a_dma_in_flight_at_unmap_never_reaches_a_handle_mapped_elsewhere() {
    guest_only!();
    unmap_race(Place::Elsewhere);
}
