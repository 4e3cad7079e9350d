//! Module loads that fail at injected allocation faults, with the module
//! unloaded (the guest's `/init` runs this binary after its last `rmmod`).
//!
//! A failed load frees the module whatever is still open, so no node of the
//! module may ever have been visible when a load fails: module init makes
//! everything that can fail before the first node is registered, and a
//! device whose registration fails later is left out while the load
//! succeeds. The sweep fails allocations of a two-device load with the
//! kernel's `/proc/thread-self/fail-nth` (the init logs how much of the
//! count is left at its start, at its registrations, before each device's
//! and at its end, which places each fault exactly), and checks every
//! outcome against the kernel log the load printed.

use hlrs_guest_tests::{guest_only, FailNth};
use std::{ffi::CString, fs::File, io::Read, os::fd::AsRawFd, path::Path};

const MODULE: &str = "/habanalabs_rs.ko";
const DEVICES: usize = 2;

/// `finit_module(ko, params)`: 0 or the errno.
fn load(ko: &File, params: &str) -> i32 {
    let params = CString::new(params).unwrap();
    // SAFETY: a system call with a valid fd and C string.
    let rc = unsafe { libc::syscall(libc::SYS_finit_module, ko.as_raw_fd(), params.as_ptr(), 0) };
    if rc == 0 {
        0
    } else {
        std::io::Error::last_os_error().raw_os_error().unwrap_or(-1)
    }
}

/// `delete_module("habanalabs_rs")`.
fn unload() {
    let name = CString::new("habanalabs_rs").unwrap();
    // SAFETY: a system call with a valid C string.
    let rc = unsafe { libc::syscall(libc::SYS_delete_module, name.as_ptr(), libc::O_NONBLOCK) };
    assert_eq!(rc, 0, "rmmod: {}", std::io::Error::last_os_error());
}

/// The kernel log from now on (`/dev/kmsg`, from its end).
struct Kmsg(File);

impl Kmsg {
    fn open() -> Self {
        use std::os::unix::fs::OpenOptionsExt;
        let f = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open("/dev/kmsg")
            .unwrap();
        // SAFETY: lseek on the fd just opened.
        assert!(unsafe { libc::lseek(f.as_raw_fd(), 0, libc::SEEK_END) } >= 0);
        Self(f)
    }

    /// The messages logged since the last call, one per line.
    fn take(&mut self) -> String {
        let mut all = String::new();
        let mut buf = vec![0u8; 8192];
        loop {
            match self.0.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    // `prio,seq,time,flags;message`
                    let rec = String::from_utf8_lossy(&buf[..n]);
                    let msg = rec.split_once(';').map_or(&*rec, |(_, m)| m);
                    all.push_str(msg.lines().next().unwrap_or(""));
                    all.push('\n');
                }
                Err(e) if e.raw_os_error() == Some(libc::EPIPE) => continue,
                Err(_) => break,
            }
        }
        all
    }
}

/// Nothing of the module is left in the system.
fn assert_nothing_left(what: &str) {
    for p in [
        "/sys/module/habanalabs_rs",
        "/sys/kernel/debug/habanalabs_rs",
        "/dev/accel/accel0",
        "/dev/accel/accel_controlD0",
        "/sys/bus/faux/devices/habanalabs_rs.0",
    ] {
        assert!(!Path::new(p).exists(), "{what}: {p} is left");
    }
}

/// The device indices the module's log says it registered, and those it
/// says it left out.
fn outcome(log: &str) -> (Vec<usize>, Vec<usize>) {
    let index =
        |l: &str| -> Option<usize> { l.split("device ").nth(1)?.split(':').next()?.parse().ok() };
    let registered = log
        .lines()
        .filter(|l| l.contains(": simulated 1da3:1020"))
        .filter_map(index)
        .collect();
    let left_out = log
        .lines()
        .filter(|l| l.contains("registration failed"))
        .filter_map(index)
        .collect();
    (registered, left_out)
}

/// No KUnit suite at these loads: they ran at the first one.
fn no_kunit() {
    let _ = std::fs::write(
        "/sys/module/kunit/parameters/filter_glob",
        "hlrs_none_on_insmod_faults",
    );
}

/// What one load with the `n`-th fault point failed did, checked.
#[derive(Debug, PartialEq, Eq)]
enum Outcome {
    /// The load failed before any node was registered, and left nothing.
    Failed,
    /// The load succeeded with a device left out (a failed registration).
    Partial,
    /// The load succeeded whole (`reached`: the fault was reached anyway,
    /// in an allocation whose failure does not matter, such as debugfs).
    Whole { reached: bool },
}

struct Sweep {
    ko: File,
    params: String,
    kmsg: Kmsg,
    fail: FailNth,
}

impl Sweep {
    /// Load with the `n`-th fault point failed (0: none), check the outcome
    /// against the log, unload, and return it with the log.
    fn run(&mut self, n: u32) -> (Outcome, String) {
        self.fail.arm(n);
        let rc = load(&self.ko, &self.params);
        let left = self.fail.left();
        self.fail.arm(0);
        let log = self.kmsg.take();
        let (registered, left_out) = outcome(&log);
        if rc != 0 {
            // A failed load: nothing may ever have been registered.
            assert!(
                registered.is_empty() && !log.contains("Initialized habanalabs"),
                "fault {n}: the load failed (errno {rc}) after registering a node:\n{log}"
            );
            assert_nothing_left(&format!("fault {n}, errno {rc}"));
            return (Outcome::Failed, log);
        }
        // A load that succeeded: every device is there or was left out (a
        // failed registration), and the registered ones work.
        assert_eq!(
            registered.len() + left_out.len(),
            DEVICES,
            "fault {n}:\n{log}"
        );
        for &i in &registered {
            let d = hlrs::Device::open_control(i as u32).unwrap();
            assert_eq!(d.hw_ip_info().unwrap().device_id, 0x1020);
            let c = hlrs::Device::open_compute(i as u32).unwrap();
            assert!(c.dram_usage().is_ok());
        }
        unload();
        self.kmsg.take();
        assert_nothing_left(&format!("fault {n}, after rmmod"));
        let out = if left_out.is_empty() {
            Outcome::Whole { reached: left == 0 }
        } else {
            Outcome::Partial
        };
        (out, log)
    }
}

/// Whether the sweep tries every point of the init (`HLRS_CMDLINE=
/// hlrs.insmod_sweep=all`, an hour under plain emulation) instead of the
/// default: one failed load in the first phase and one failed registration
/// of device 1, about 7 loads (each costs about 5 s: its unload waits for
/// the module's kobject release, which `CONFIG_DEBUG_KOBJECT_RELEASE`
/// delays by 1-4 s).
fn sweep_all() -> bool {
    std::fs::read_to_string("/proc/cmdline")
        .unwrap_or_default()
        .split_whitespace()
        .any(|a| a == "hlrs.insmod_sweep=all")
}

/// What the module's init logged as left of the fault count at `phase`
/// (`init 0`, `registration 0`, `publish N` before registering device N,
/// `end 0`), if it got there.
fn left_at(log: &str, phase: &str) -> Option<u32> {
    let tail = format!(" point(s) to go at {phase}");
    log.lines()
        .find_map(|l| {
            l.split("fault injection armed: ")
                .nth(1)?
                .strip_suffix(&tail)
        })
        .and_then(|n| n.parse().ok())
}

#[test]
fn a_load_failing_at_any_allocation_never_unloads_a_registered_node() {
    guest_only!();
    if Path::new("/sys/module/habanalabs_rs").exists() {
        eprintln!("the module is loaded: this sweep runs after the last rmmod");
        return;
    }
    no_kunit();
    let mut sweep = Sweep {
        ko: File::open(MODULE).unwrap(),
        params: format!("devices={DEVICES}"),
        kmsg: Kmsg::open(),
        fail: FailNth::open(),
    };
    sweep.kmsg.take();
    // Where the init, its registrations and its end fall among a load's
    // fault points: a load with a large count armed logs what is left of it
    // at each.
    const BIG: u32 = 1 << 24;
    sweep.fail.arm(BIG);
    assert_eq!(load(&sweep.ko, &sweep.params), 0);
    sweep.fail.arm(0);
    let log = sweep.kmsg.take();
    unload();
    sweep.kmsg.take();
    let phase =
        |p: &str| left_at(&log, p).unwrap_or_else(|| panic!("the init did not report {p}:\n{log}"));
    let at_init = phase("init 0");
    // Points counted from the init's start: phase 1 is [1, reg]; phase 2
    // (the registrations) [reg + 1, end], device 1's from `second`.
    let reg = at_init - phase("registration 0");
    let second = at_init - phase("publish 1") + 1;
    let end = at_init - phase("end 0");
    // The number of points before the init varies from one load to the
    // next, so no point can be aimed at exactly: each load reports, at each
    // mark, what was left of the count, which places its fault exactly
    // (after the last mark with some left, that many points on), and the
    // next load is aimed by it.
    let mut tally = [0u32; 3];
    let mut tried = 0;
    // Load with the fault `k` points after `mark`, aimed by the estimate
    // `before` of the points before it; returns the outcome and how many
    // points after the mark the fault really was (0: before the mark).
    let mut try_after = |mark: &str, before: &mut u32, k: u32| -> (Outcome, u32) {
        let n = *before + k;
        let (out, log) = sweep.run(n);
        let r = left_at(&log, mark).unwrap_or(0);
        if r > 0 {
            *before = n - r;
        }
        tried += 1;
        let slot = match out {
            Outcome::Failed => 0,
            Outcome::Partial => 1,
            Outcome::Whole { .. } => 2,
        };
        tally[slot] += 1;
        let _ = std::fs::write(
            "/dev/kmsg",
            format!("hlrs-insmod-faults: fault {n}: {r} point(s) after `{mark}`: {out:?}\n"),
        );
        (out, r)
    };
    let mut before_init = BIG - at_init;
    let mut before_second = BIG - phase("publish 1");
    match sweep_all() {
        true => {
            for k in 1..=end {
                try_after("init 0", &mut before_init, k);
            }
        }
        false => {
            // The first phase from its first point until a point fails the
            // load. Only its first few points fail it (the later ones of the
            // window before the devices are absorbed), and the points before
            // the init vary by a few from one load to the next: a fault that
            // landed before the mark moves the aim on by 2, not past the
            // window (by 8 it once landed 8, 12, 14 and 16 points in, all
            // absorbed, and the sweep ended without a failed load).
            let mut k = 1;
            for _ in 0..16 {
                match try_after("init 0", &mut before_init, k) {
                    (Outcome::Failed, r) if r > 0 => break,
                    (_, 0) => before_init += 2,
                    (_, r) if r > 4 => k = 1,
                    (_, r) => k = r + 1,
                }
            }
            // ...and the case this guards: device 1's registration failing
            // while device 0 is registered (and could be open). Its first
            // points are ones whose failure is absorbed (the DRM minor's
            // debugfs files): walk on, every other point, until one fails
            // the registration.
            let mut k = 1;
            for _ in 0..16 {
                match try_after("publish 1", &mut before_second, k) {
                    (Outcome::Partial, r) if r > 0 => break,
                    (_, 0) => before_second += 8,
                    (_, r) => k = r + 2,
                }
            }
        }
    }
    let [failed, partial, whole] = tally;
    let summary = format!(
        "hlrs-insmod-faults: a {DEVICES}-device init has {end} fault points, {reg} before the registrations, device 1's from {second}; tried {tried}: {failed} failed loads left nothing, {partial} loads left a device out, {whole} whole\n"
    );
    std::fs::write("/dev/kmsg", &summary).unwrap();
    assert!(
        failed > 0 && partial > 0,
        "the sweep did not reach both phases: {summary}"
    );
}
