//! In-guest tests of host-memory mapping (HL_MEM_USERPTR) through the real ioctl.

use hlrs::{uapi::*, Device};
use hlrs_guest_tests::{expect_errno, guest_only, phys_of, spawn_hold};

const EINVAL: i32 = 22;
const EFAULT: i32 = 14;
const ENOMEM: i32 = 12;
const HOST_VA: std::ops::Range<u64> = 0xFFF0_0000_0000_0000..0xFFF0_8000_0000_0000;

fn debugfs(file: &str) -> String {
    hlrs_guest_tests::debugfs(0, file)
}

/// The oracle's translation of `va` (debugfs `mmu`).
fn translate(va: u64) -> Option<u64> {
    hlrs_guest_tests::oracle_walk(0, va).map(|(pa, _)| pa)
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
    // A huge range (pages array sized by it): refused without a kernel splat.
    assert!(d.map_host(addr, 1 << 44, 0, 0).is_err());
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
    let mut child = spawn_hold(&[
        "--count",
        "1",
        "--size",
        "1",
        "--host",
        &(256 << 10).to_string(),
    ]);
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
    let null_ns = d.null_ioctl_ns(20_000).unwrap() as u64;
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

#[test]
fn huge_pages_land_in_host_huge() {
    guest_only!();
    use rustix::mm::{madvise, mmap_anonymous, munmap, Advice, MapFlags, ProtFlags};
    let d = Device::open_compute(0).unwrap();
    let huge = 2u64 << 20;
    // An anonymous mapping with a 2 MiB-aligned 4 MiB window, backed by THP.
    let len = 8 << 20;
    // SAFETY: a fresh anonymous mapping, unmapped below.
    let p = unsafe {
        mmap_anonymous(
            std::ptr::null_mut(),
            len,
            ProtFlags::READ | ProtFlags::WRITE,
            MapFlags::PRIVATE,
        )
    }
    .unwrap();
    let start = (p as u64 + huge - 1) / huge * huge;
    // SAFETY: the advised range lies inside the mapping.
    unsafe { madvise(start as *mut _, 2 * huge as usize, Advice::LinuxHugepage) }.unwrap();
    // SAFETY: writable memory of the mapping.
    unsafe { std::ptr::write_bytes(start as *mut u8, 1, 2 * huge as usize) };
    let first = phys_of(start);
    let thp = first % huge == 0 && (0..512).all(|i| phys_of(start + i * 4096) == first + i * 4096);
    let va = d.map_host(start, 2 * huge, 0, 0).unwrap();
    if thp {
        assert!(
            va >= 0xFFF0_8000_0000_0000 && va < 0xFFF1_0000_0000_0000,
            "{va:#x}"
        );
        assert!(debugfs("userptr").contains(" yes "));
    } else {
        // No huge page was available: regular pages, but a 2 MiB-aligned VA.
        assert!(HOST_VA.contains(&va));
        assert_eq!(va % huge, 0);
    }
    for off in [0, 4096, huge + 12345, 2 * huge - 1] {
        assert_eq!(translate(va + off), Some(phys_of(start + off)));
    }
    d.unmap(va).unwrap();
    // SAFETY: unmapping the mapping made above.
    unsafe { munmap(p, len) }.unwrap();
    assert!(thp, "transparent huge pages were not used");
}

#[test]
fn a_buffer_across_leaf_hops_translates_page_by_page() {
    guest_only!();
    // 1,500 pages of 4 KiB starting 100 bytes into a page: the MAP writes each
    // leaf hop's run of PTEs in one batch, the runs cross three hop boundaries.
    let d = Device::open_compute(0).unwrap();
    let buf = hlrs::HostBuffer::new(1501 * 4096).unwrap();
    buf.no_huge_pages().unwrap();
    let mut buf = buf;
    buf.as_mut_slice()
        .iter_mut()
        .step_by(4096)
        .for_each(|x| *x = 1);
    let addr = buf.addr() + 100;
    let size = 1500 * 4096;
    let va = d.map_host(addr, size, 0, 0).unwrap();
    for p in 0..1501u64 {
        let off = if p == 0 { 0 } else { p * 4096 - 100 };
        assert_eq!(translate(va + off), Some(phys_of(addr + off)), "page {p}");
    }
    assert_eq!(translate(va + size + 4096), None);
    d.unmap(va).unwrap();
    for p in [0u64, 1, 411, 412, 923, 924, 1500] {
        assert_eq!(translate(va - 100 + p * 4096), None, "page {p}");
    }
    // Every host-resident hop went back with the mapping.
    assert!(
        debugfs("mmu").contains("pmmu hops:       0 in use"),
        "{}",
        debugfs("mmu")
    );
}

#[test]
fn debugfs_bench_pins_and_unpins_the_writers_buffer() {
    guest_only!();
    let path = "/sys/kernel/debug/habanalabs_rs/0/bench";
    let vm_locked = || {
        std::fs::read_to_string("/proc/self/status")
            .unwrap()
            .lines()
            .find(|l| l.starts_with("VmLck:"))
            .unwrap()
            .to_owned()
    };
    let before = vm_locked();
    let mut buf = hlrs::HostBuffer::new(64 * 4096).unwrap();
    buf.as_mut_slice().fill(3);
    std::fs::write(path, format!("pin {:#x} {}", buf.addr(), buf.len())).unwrap();
    let text = std::fs::read_to_string(path).unwrap();
    assert!(text.contains("pin_floor: pages 64 "), "{text}");
    assert!(text.starts_with("profile: 0\n"), "{text}");
    assert!(text.contains("\nmap_host: done "), "{text}");
    // The phase clocks: on, a host MAP is counted with its phases; off again.
    let done = |t: &str| -> u64 {
        let line = t
            .lines()
            .find(|l| l.starts_with("map_host: done "))
            .unwrap();
        line.split_whitespace().nth(2).unwrap().parse().unwrap()
    };
    std::fs::write(path, "profile 1").unwrap();
    let d = hlrs::Device::open_compute(0).unwrap();
    let n0 = done(&std::fs::read_to_string(path).unwrap());
    d.unmap(d.map_host(buf.addr(), 4096, 0, 0).unwrap())
        .unwrap();
    let text = std::fs::read_to_string(path).unwrap();
    assert!(text.starts_with("profile: 1\n"), "{text}");
    assert_eq!(done(&text), n0 + 1, "{text}");
    assert!(text.contains(" pin_ns "), "{text}");
    assert!(text.contains("\nunmap_host: done "), "{text}");
    std::fs::write(path, "profile 0").unwrap();
    d.unmap(d.map_host(buf.addr(), 4096, 0, 0).unwrap())
        .unwrap();
    assert_eq!(done(&std::fs::read_to_string(path).unwrap()), n0 + 1);
    drop(d);
    // Nothing stays pinned or charged.
    assert_eq!(vm_locked(), before);
    assert!(debugfs("userptr").lines().count() <= 1);
    for (bad, errno) in [
        ("pin".to_owned(), EINVAL),
        ("pin zz 4096".to_owned(), EINVAL),
        ("pin 0x1000 0".to_owned(), EINVAL),
        ("unpin 0x1000 4096".to_owned(), EINVAL),
        ("profile".to_owned(), EINVAL),
        ("profile 2".to_owned(), EINVAL),
        ("pin 0x1000 4096".to_owned(), EFAULT),
        (format!("pin {:#x} {}", u64::MAX - 4095, 8192), EINVAL),
        ("pin 0x1000 8796093022208".to_owned(), ENOMEM),
    ] {
        let e = std::fs::write(path, &bad).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(errno), "{bad}");
    }
}
