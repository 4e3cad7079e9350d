//! Release only after invalidation (issue 19), through the real device nodes:
//! pinned host pages stay pinned (the process's `VmLck`) while the MMU
//! invalidation that must cover them fails, after UNMAP, after MAP and at
//! teardown, and go back exactly once after a later one succeeds; opens
//! answer `EAGAIN` while a teardown waits for its invalidation. And the long
//! page-table loops yield: a MAP+UNMAP of the largest host buffer the guest
//! can pin runs with the soft-lockup and hung-task detectors on (lowered
//! thresholds, see `scripts/guest.sh`), and the run fails on any report.
//!
//! The invalidation failures are injected through debugfs
//! `fail_invalidations` of the simulated device.

use hlrs::{Device, HostBuffer};
use hlrs_guest_tests::{debugfs, expect_errno, guest_only, vm_locked_kb};

const EIO: i32 = 5;
const EAGAIN: i32 = 11;

/// Make the next `n` invalidations of device 0 fail (`max`: until changed).
fn fail_invalidations(n: &str) {
    std::fs::write("/sys/kernel/debug/habanalabs_rs/0/fail_invalidations", n).unwrap();
}

/// The quarantine of device 0's open context, from debugfs `mmu`.
fn quarantined() -> u64 {
    let mmu = debugfs(0, "mmu");
    let line = mmu
        .lines()
        .find(|l| l.starts_with("quarantined:"))
        .unwrap_or_else(|| panic!("no quarantine line: {mmu}"));
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// One MAP+UNMAP that succeeds: its invalidations settle the quarantine.
fn successful_map_unmap(d: &Device) {
    let b = HostBuffer::new(4096).unwrap();
    let va = d.map_host(b.addr(), 4096, 0, 0).unwrap();
    d.unmap(va).unwrap();
}

#[test]
fn unmap_whose_invalidation_fails_keeps_the_host_pages_pinned_until_a_later_one() {
    guest_only!();
    fail_invalidations("0");
    let d = Device::open_compute(0).unwrap();
    let base = vm_locked_kb();
    let b = HostBuffer::new(256 << 10).unwrap();
    let va = d.map_host(b.addr(), 256 << 10, 0, 0).unwrap();
    assert_eq!(vm_locked_kb(), base + 256);
    fail_invalidations("1");
    expect_errno(d.unmap(va), EIO);
    // Gone for the user (a second UNMAP does not find it) but still pinned.
    expect_errno(d.unmap(va), 22);
    assert_eq!(vm_locked_kb(), base + 256);
    assert_eq!(quarantined(), 1);
    assert!(debugfs(0, "mmu").contains("mappings:        0"));
    // The next successful operation's full invalidation releases it, once.
    successful_map_unmap(&d);
    assert_eq!(quarantined(), 0);
    assert_eq!(vm_locked_kb(), base);
    drop(d);
    assert_eq!(vm_locked_kb(), base);
}

#[test]
fn map_whose_invalidation_fails_keeps_the_pin_until_a_later_one() {
    guest_only!();
    fail_invalidations("0");
    let d = Device::open_compute(0).unwrap();
    let base = vm_locked_kb();
    let b = HostBuffer::new(128 << 10).unwrap();
    // The MAP's invalidation and the one after its rollback fail.
    fail_invalidations("2");
    expect_errno(d.map_host(b.addr(), 128 << 10, 0, 0), EIO);
    assert_eq!(vm_locked_kb(), base + 128);
    assert_eq!(quarantined(), 1);
    successful_map_unmap(&d);
    assert_eq!(vm_locked_kb(), base);
    // Mapped again, the same buffer gets the same VA back.
    let va = d.map_host(b.addr(), 128 << 10, 0, 0).unwrap();
    d.unmap(va).unwrap();
}

#[test]
fn teardown_whose_invalidation_fails_keeps_the_pins_and_answers_eagain_until_one_succeeds() {
    guest_only!();
    fail_invalidations("0");
    let ctl = Device::open_control(0).unwrap();
    let base = vm_locked_kb();
    let b = HostBuffer::new(64 << 10).unwrap();
    let d = Device::open_compute(0).unwrap();
    let h = d.alloc(1, 0).unwrap();
    d.map(h, 0, 0).unwrap();
    d.map_host(b.addr(), 64 << 10, 0, 0).unwrap();
    fail_invalidations("max");
    drop(d);
    // The pin, the DRAM page and the ASID are still held.
    assert_eq!(vm_locked_kb(), base + 64);
    assert!(debugfs(0, "fail_invalidations").contains("teardown parked:  yes"));
    let stats = ctl.open_stats().unwrap();
    assert_eq!(
        (stats.is_compute_ctx_active, stats.compute_ctx_in_release),
        (0, 1)
    );
    expect_errno(Device::open_compute(0), EAGAIN);
    assert_eq!(vm_locked_kb(), base + 64);
    fail_invalidations("0");
    let d = Device::open_compute(0).unwrap();
    assert_eq!(vm_locked_kb(), base);
    assert!(debugfs(0, "fail_invalidations").contains("teardown parked:  no"));
    assert!(!debugfs(0, "dram_pool").contains(" 1 used,"));
    let stats = ctl.open_stats().unwrap();
    assert_eq!(
        (stats.is_compute_ctx_active, stats.compute_ctx_in_release),
        (1, 0)
    );
    drop(d);
}

/// The largest anonymous buffer the guest can pin now: what is available,
/// less 384 MiB for the kernel's own needs (page arrays, hop tables), in
/// whole 2 MiB.
fn largest_pinnable() -> usize {
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap();
    let kb: u64 = meminfo
        .lines()
        .find(|l| l.starts_with("MemAvailable:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .unwrap()
        .parse()
        .unwrap();
    let bytes = (kb * 1024).saturating_sub(384 << 20);
    (bytes / (2 << 20) * (2 << 20)) as usize
}

#[test]
fn the_largest_pinnable_host_buffer_maps_and_unmaps_with_the_lockup_detectors_on() {
    guest_only!();
    let len = largest_pinnable();
    assert!(len >= 512 << 20, "only {len} bytes available");
    let mut b = HostBuffer::new(len).unwrap();
    // 4 KiB pages: the most PTEs, the longest loops.
    b.no_huge_pages().unwrap();
    for page in b.as_mut_slice().chunks_mut(4096) {
        page[0] = 1;
    }
    let d = Device::open_compute(0).unwrap();
    let t = std::time::Instant::now();
    let va = d.map_host(b.addr(), len as u64, 0, 0).unwrap();
    let mapped = t.elapsed();
    d.unmap(va).unwrap();
    println!(
        "hlrs-largest-map: {} MiB in 4 KiB pages: MAP {:?}, UNMAP {:?}",
        len >> 20,
        mapped,
        t.elapsed() - mapped
    );
    // And torn down with it still mapped.
    d.map_host(b.addr(), len as u64, 0, 0).unwrap();
    drop(d);
    assert!(debugfs(0, "userptr").lines().count() <= 1);
}
