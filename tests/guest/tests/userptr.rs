//! In-guest tests of host-memory mapping (HL_MEM_USERPTR) through the real ioctl.

use hlrs::{errno, uapi::*, Device};
use hlrs_guest_tests::in_guest;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::process::{Command, Stdio};

const EINVAL: i32 = 22;
const EFAULT: i32 = 14;
const ENOMEM: i32 = 12;
const HOST_VA: std::ops::Range<u64> = 0xFFF0_0000_0000_0000..0xFFF0_8000_0000_0000;

macro_rules! guest_only {
    () => {
        if !in_guest() {
            eprintln!("not in the test guest: skipped");
            return;
        }
    };
}

fn expect_errno<T: std::fmt::Debug>(r: std::io::Result<T>, want: i32) {
    match r {
        Ok(v) => panic!("expected errno {want}, got Ok({v:?})"),
        Err(e) => assert_eq!(errno(&e), want, "expected errno {want}, got {e}"),
    }
}

fn debugfs(file: &str) -> String {
    std::fs::read_to_string(format!("/sys/kernel/debug/habanalabs_rs/0/{file}")).unwrap()
}

/// The oracle's translation of `va` (debugfs `mmu`).
fn translate(va: u64) -> Option<u64> {
    std::fs::write("/sys/kernel/debug/habanalabs_rs/0/mmu", format!("{va:#x}")).unwrap();
    let out = debugfs("mmu");
    let last = out.lines().last()?;
    let pa = last.split("-> pa ").nth(1)?.split(' ').next()?;
    u64::from_str_radix(pa.trim_start_matches("0x"), 16).ok()
}

/// Physical address of a byte of this process, from /proc/self/pagemap.
fn phys_of(addr: u64) -> u64 {
    let mut f = std::fs::File::open("/proc/self/pagemap").unwrap();
    f.seek(SeekFrom::Start(addr / 4096 * 8)).unwrap();
    let mut b = [0u8; 8];
    f.read_exact(&mut b).unwrap();
    let e = u64::from_ne_bytes(b);
    assert!(e & (1 << 63) != 0, "page not present");
    (e & ((1 << 55) - 1)) * 4096 + addr % 4096
}

#[test]
fn map_small_and_unaligned_buffers() {
    guest_only!();
    let d = Device::open_compute(0).unwrap();
    let buf = vec![7u8; 5 * 4096];
    let base = buf.as_ptr() as u64;
    for (off, size) in [
        (0u64, 1u64),
        (0, 4096),
        (123, 4096),
        (4095, 2),
        (1, 3 * 4096 + 5),
    ] {
        let addr = base + off;
        let va = d.map_host(addr, size, 0, 0).unwrap();
        assert!(HOST_VA.contains(&va), "{va:#x}");
        assert_eq!(va % 4096, addr % 4096);
        // Every page of the buffer translates to its pinned physical page.
        let mut p = 0;
        while p < size {
            assert_eq!(translate(va + p), Some(phys_of(addr + p)));
            p += 4096 - ((addr + p) % 4096);
        }
        assert!(debugfs("userptr").contains(&format!("{addr:#x}")));
        // UNMAP needs the exact VA, offset included.
        if va % 4096 != 0 {
            expect_errno(d.unmap(va - va % 4096), EINVAL);
        }
        d.unmap(va).unwrap();
        assert_eq!(translate(va), None);
    }
    assert_eq!(debugfs("userptr").lines().count(), 1);
}

#[test]
fn hints_for_host_buffers() {
    guest_only!();
    let d = Device::open_compute(0).unwrap();
    let buf = vec![0u8; 3 * 4096];
    let page_aligned = (buf.as_ptr() as u64 + 4095) / 4096 * 4096;
    let hint = HOST_VA.start + (64 << 20);
    assert_eq!(d.map_host(page_aligned, 4096, hint, 0).unwrap(), hint);
    // Occupied: elsewhere, or refused when forced.
    let other = d.map_host(page_aligned, 4096, hint, 0).unwrap();
    assert_ne!(other, hint);
    expect_errno(d.map_host(page_aligned, 4096, hint, HL_MEM_FORCE_HINT), 98);
    // Misaligned hint: ignored, or refused when forced.
    let v = d.map_host(page_aligned, 4096, hint + 12, 0).unwrap();
    assert_ne!(v, hint + 12);
    expect_errno(
        d.map_host(page_aligned, 4096, hint + 0x10_000 + 12, HL_MEM_FORCE_HINT),
        EINVAL,
    );
    // A host address with an in-page offset cannot be forced to a hint.
    expect_errno(
        d.map_host(page_aligned + 8, 8, hint + (1 << 20), HL_MEM_FORCE_HINT),
        EINVAL,
    );
}

#[test]
fn bad_host_buffers_pin_nothing() {
    guest_only!();
    let d = Device::open_compute(0).unwrap();
    let buf = vec![0u8; 4096];
    let addr = buf.as_ptr() as u64;
    expect_errno(d.map_host(addr, 0, 0, 0), EINVAL);
    expect_errno(d.map_host(u64::MAX - 10, 100, 0, 0), EINVAL);
    expect_errno(d.map_host(addr, u64::MAX - addr + 1, 0, 0), EINVAL);
    // Unmapped user memory and a kernel address.
    expect_errno(d.map_host(0x1000, 4096, 0, 0), EFAULT);
    expect_errno(d.map_host(0xffff_8880_0000_0000, 4096, 0, 0), EFAULT);
    // Read-only memory cannot be pinned for writing.
    let ro = unsafe_ro_page();
    expect_errno(d.map_host(ro, 4096, 0, 0), EFAULT);
    assert_eq!(debugfs("userptr").lines().count(), 1);
    assert!(debugfs("va").contains("range host: [0xfff0000000000000, 0xfff0800000000000) page 0x1000, 1 free block(s), 0 allocation(s)"), "{}", debugfs("va"));
}

/// A read-only page of this process (the program's own text is mapped r-x).
fn unsafe_ro_page() -> u64 {
    let f: fn() -> u64 = unsafe_ro_page;
    f as usize as u64 / 4096 * 4096
}

#[test]
fn rlimit_memlock_is_enforced_without_cap_ipc_lock() {
    guest_only!();
    use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
    use rustix::thread::{capabilities, set_capabilities, CapabilitySet};
    let d = Device::open_compute(0).unwrap();
    let buf = vec![0u8; 1 << 20];
    let old = getrlimit(Resource::Memlock);
    setrlimit(
        Resource::Memlock,
        Rlimit {
            current: Some(64 << 10),
            maximum: old.maximum,
        },
    )
    .unwrap();
    // Capabilities are per thread: only this test's thread loses CAP_IPC_LOCK.
    let caps = capabilities(None).unwrap();
    let mut less = caps;
    less.effective.remove(CapabilitySet::IPC_LOCK);
    set_capabilities(None, less).unwrap();
    let big = d.map_host(buf.as_ptr() as u64, 1 << 20, 0, 0);
    let small = d.map_host(buf.as_ptr() as u64, 16 << 10, 0, 0);
    set_capabilities(None, caps).unwrap();
    setrlimit(Resource::Memlock, old).unwrap();
    expect_errno(big, ENOMEM);
    d.unmap(small.unwrap()).unwrap();
}

#[test]
fn a_killed_process_unpins_everything() {
    guest_only!();
    let mut child = Command::new("/bin/hlrs")
        .args([
            "hold",
            "--count",
            "1",
            "--size",
            "1",
            "--host",
            &(256 << 10).to_string(),
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    loop {
        let line = lines.next().expect("hlrs hold exited early").unwrap();
        if line == "holding" {
            break;
        }
    }
    let list = debugfs("userptr");
    assert_eq!(list.lines().count(), 2, "{list}");
    assert!(list.contains(&format!("{:<6}", child.id())));
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(debugfs("va").contains("no open compute context"));
    assert!(debugfs("mmu").contains("no open compute context"));
    assert_eq!(debugfs("userptr").lines().count(), 1);
}

#[test]
fn bench_map_1_gib_host_buffer() {
    guest_only!();
    let d = Device::open_compute(0).unwrap();
    let n = 20_000;
    let t = std::time::Instant::now();
    for _ in 0..n {
        d.device_status().unwrap();
    }
    let null_ns = t.elapsed().as_nanos() / n;
    let size = 1usize << 30;
    let buf = vec![1u8; size];
    let t = std::time::Instant::now();
    let va = d.map_host(buf.as_ptr() as u64, size as u64, 0, 0).unwrap();
    let map_us = t.elapsed().as_micros();
    let t = std::time::Instant::now();
    d.unmap(va).unwrap();
    let unmap_us = t.elapsed().as_micros();
    std::fs::write(
        "/dev/kmsg",
        format!("hlrs-bench: USERPTR MAP 1 GiB (pin + map): {map_us} us; UNMAP (+ unpin): {unmap_us} us; null INFO ioctl: {null_ns} ns\n"),
    )
    .unwrap();
}
