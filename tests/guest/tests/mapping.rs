//! In-guest tests of MAP / UNMAP of device memory through the real ioctl.

use hlrs::{uapi::*, Device};
use hlrs_guest_tests::{debugfs, expect_errno, guest_only, spawn_hold};
use std::process::Command;

const EINVAL: i32 = 22;
const EADDRINUSE: i32 = 98;
const PAGE: u64 = 0x3000_0000;
const DRAM_VA: u64 = 0x1001_0018_0000_0000;

/// The oracle's translation of `va` on device `dev`, via debugfs.
fn translate(dev: u32, va: u64) -> String {
    std::fs::write(
        format!("/sys/kernel/debug/habanalabs_rs/{dev}/mmu"),
        format!("{va:#x}"),
    )
    .unwrap();
    let out = debugfs(dev, "mmu");
    out.lines().last().unwrap_or_default().to_owned()
}

#[test]
fn alloc_map_unmap_free() {
    guest_only!();
    let d = Device::open_compute(0).unwrap();
    let h = d.alloc(3 * PAGE, HL_MEM_CONTIGUOUS).unwrap();
    let va = d.map(h, 0, 0).unwrap();
    assert_eq!(va, DRAM_VA);
    // The hardware walk reaches the allocation's pages (first user page).
    let t = translate(0, va + PAGE + 0x1234);
    assert!(t.contains("-> pa 0x1001000060001234"), "{t}");
    d.unmap(va).unwrap();
    assert!(translate(0, va).contains("fault"));
    d.free(h).unwrap();
    assert_eq!(d.dram_usage().unwrap().ctx_dram_mem, 0);
}

#[test]
fn map_writes_the_union_back_as_upstream() {
    guest_only!();
    let d = Device::open_compute(0).unwrap();
    let h = d.alloc(1, 0).unwrap();
    let mut a = HlMemArgs {
        arg0: 0,
        arg1: h,
        arg2: 55,
        op: HL_MEM_OP_MAP,
        flags: 0,
        ctx_id: 3,
        num_of_elements: 9,
    };
    d.memory_args(&mut a).unwrap();
    assert_eq!(a.out_u64(), DRAM_VA);
    assert_eq!((a.arg1, a.arg2, a.op, a.ctx_id), (0, 0, 0, 0));
    // A failed MAP leaves VA 0.
    let mut a = HlMemArgs {
        arg1: 999,
        op: HL_MEM_OP_MAP,
        ..Default::default()
    };
    expect_errno(d.memory_args(&mut a), EINVAL);
    assert_eq!(a.out_u64(), 0);
}

#[test]
fn hints() {
    guest_only!();
    let d = Device::open_compute(0).unwrap();
    let h = d.alloc(PAGE, 0).unwrap();
    let hint = DRAM_VA + 10 * PAGE;
    assert_eq!(d.map(h, hint, 0).unwrap(), hint);
    // Occupied: placed elsewhere, or refused when forced.
    assert_eq!(d.map(h, hint, 0).unwrap(), DRAM_VA);
    expect_errno(d.map(h, hint, HL_MEM_FORCE_HINT), EADDRINUSE);
    // Not page aligned: ignored, or refused when forced.
    assert_eq!(d.map(h, hint + 0x1000, 0).unwrap(), DRAM_VA + PAGE);
    expect_errno(d.map(h, hint + 0x1000, HL_MEM_FORCE_HINT), EINVAL);
    expect_errno(d.map(h, 0, HL_MEM_FORCE_HINT), EINVAL);
}

#[test]
fn free_while_mapped_and_bad_unmaps() {
    guest_only!();
    let d = Device::open_compute(0).unwrap();
    let h = d.alloc(2 * PAGE, 0).unwrap();
    let a = d.map(h, 0, 0).unwrap();
    let b = d.map(h, 0, 0).unwrap();
    assert_ne!(a, b);
    expect_errno(d.free(h), EINVAL);
    for bad in [0, a + 1, a + PAGE, b + PAGE + 4096, 0xdead_0000] {
        expect_errno(d.unmap(bad), EINVAL);
    }
    d.unmap(a).unwrap();
    expect_errno(d.unmap(a), EINVAL);
    expect_errno(d.free(h), EINVAL);
    d.unmap(b).unwrap();
    d.free(h).unwrap();
    // Unknown handles and unknown flag bits.
    expect_errno(d.map(h, 0, 0), EINVAL);
    let h = d.alloc(1, 0).unwrap();
    expect_errno(d.map(h, 0, 0x20), EINVAL);
    // VA reuse: best fit hands the first VA out again.
    assert_eq!(d.map(h, 0, 0).unwrap(), a);
}

#[test]
fn a_killed_process_leaves_nothing_behind() {
    guest_only!();
    let ctl = Device::open_control(0).unwrap();
    let idle = ctl.dram_usage().unwrap().dram_free_mem;
    let mut child = spawn_hold(&["--size", &(3 * PAGE).to_string(), "--count", "2"]);
    assert_eq!(ctl.dram_usage().unwrap().dram_free_mem, idle - 6 * PAGE);
    assert!(debugfs(0, "va").contains("used"));
    // `hlrs usage` sees the other process's context (like hl-smi).
    let usage = Command::new("/bin/hlrs")
        .args(["usage", "--json"])
        .output()
        .unwrap();
    let usage = String::from_utf8_lossy(&usage.stdout);
    assert!(
        usage.contains(&format!("\"context\":{}", 6 * PAGE)),
        "{usage}"
    );
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(ctl.dram_usage().unwrap().dram_free_mem, idle);
    assert!(
        debugfs(0, "memory").lines().count() == 1,
        "{}",
        debugfs(0, "memory")
    );
    assert!(debugfs(0, "va").contains("no open compute context"));
    assert!(debugfs(0, "dram_pool").contains("0 used"));
    let d = Device::open_compute(0).unwrap();
    let h = d.alloc(1, 0).unwrap();
    assert_eq!(d.map(h, 0, 0).unwrap(), DRAM_VA);
}

#[test]
fn devices_map_independently() {
    guest_only!();
    let all = hlrs::device_indices().unwrap();
    let devs: Vec<Device> = all
        .iter()
        .map(|&i| Device::open_compute(i).unwrap())
        .collect();
    let mut vas = Vec::new();
    for (n, d) in devs.iter().enumerate() {
        let h = d.alloc((n as u64 + 1) * PAGE, 0).unwrap();
        vas.push((d.index(), d.map(h, 0, 0).unwrap(), n as u64 + 1));
    }
    for (i, va, pages) in &vas {
        assert_eq!(*va, DRAM_VA);
        assert!(translate(*i, va + (pages - 1) * PAGE).contains("-> pa"));
        assert!(translate(*i, va + pages * PAGE).contains("fault"));
    }
}

#[test]
fn bench_map_64_gib_against_a_null_ioctl() {
    guest_only!();
    let d = Device::open_compute(0).unwrap();
    let null_ns = d.null_ioctl_ns(20_000).unwrap() as u64;
    let writes = |d: u32| -> u64 {
        let s = debugfs(d, "mmu");
        s.lines()
            .find_map(|l| l.strip_prefix("PTE writes:"))
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    };
    let h = d.alloc(64 << 30, 0).unwrap();
    let w0 = writes(0);
    let t = std::time::Instant::now();
    let va = d.map(h, 0, 0).unwrap();
    let map_ns = t.elapsed().as_nanos();
    let w1 = writes(0);
    let t = std::time::Instant::now();
    d.unmap(va).unwrap();
    let unmap_ns = t.elapsed().as_nanos();
    let w2 = writes(0);
    let report = format!(
        "hlrs-bench: MAP 64 GiB: {} us, {} PTE writes; UNMAP: {} us, {} PTE writes; null INFO ioctl: {} ns\n",
        map_ns / 1000,
        w1 - w0,
        unmap_ns / 1000,
        w2 - w1,
        null_ns
    );
    std::fs::write("/dev/kmsg", report).unwrap();
    d.free(h).unwrap();
}
