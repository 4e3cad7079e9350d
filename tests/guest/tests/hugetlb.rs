//! Host buffers backed by hugetlbfs 2 MiB pages (`mmap(MAP_HUGETLB)`), as
//! Gaudi runtimes allocate them: the case upstream's huge-page detection in
//! `init_phys_pg_pack_from_userptr` (memory.c:864-884) exists for. The guest's
//! init reserves the pages (`/proc/sys/vm/nr_hugepages`).

use hlrs::{uapi::*, Device, HostBuffer, HUGE_PAGE_SIZE};
use hlrs_guest_tests::{debugfs, expect_errno, guest_only, oracle_walk, phys_of, spawn_hold};

const EINVAL: i32 = 22;
const EADDRINUSE: i32 = 98;
const HUGE: u64 = HUGE_PAGE_SIZE as u64;
const HOST_VA: std::ops::Range<u64> = 0xFFF0_0000_0000_0000..0xFFF0_8000_0000_0000;
const HOST_HUGE_VA: std::ops::Range<u64> = 0xFFF0_8000_0000_0000..0xFFF1_0000_0000_0000;
/// PMMU leaf levels: hop 4 for 2 MiB pages, hop 5 for 4 KiB pages.
const LEAF_2M: u32 = 4;
const LEAF_4K: u32 = 5;

/// A `/proc/meminfo` field, in its unit.
fn meminfo(field: &str) -> u64 {
    let text = std::fs::read_to_string("/proc/meminfo").unwrap();
    let line = text.lines().find(|l| l.starts_with(field)).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// Check every 2 MiB page of a mapping at `va` of `buf` against the oracle:
/// a 2 MiB leaf at hop 4 that reaches the huge page's physical address, at
/// both ends and inside.
fn check_huge_pages(va: u64, buf: &HostBuffer) {
    for i in 0..buf.len() as u64 / HUGE {
        for off in [0, 4096, 0x12_3456, HUGE - 1] {
            let at = i * HUGE + off;
            assert_eq!(
                oracle_walk(0, va + at),
                Some((phys_of(buf.addr() + at), LEAF_2M)),
                "huge page {i}, offset {off:#x}"
            );
        }
    }
}

#[test]
fn the_guest_reserves_huge_pages() {
    guest_only!();
    assert_eq!(meminfo("Hugepagesize:"), 2048);
    assert!(meminfo("HugePages_Total:") >= 8);
}

#[test]
fn hugetlbfs_buffers_map_with_2_mib_leaves_in_host_huge() {
    guest_only!();
    let d = Device::open_compute(0).unwrap();
    let free0 = meminfo("HugePages_Free:");
    let buf = HostBuffer::hugetlb(4 * HUGE_PAGE_SIZE).unwrap();
    assert_eq!(meminfo("HugePages_Free:"), free0 - 4);
    let va = d.map_host(buf.addr(), buf.len() as u64, 0, 0).unwrap();
    assert!(HOST_HUGE_VA.contains(&va), "{va:#x}");
    assert_eq!(va % HUGE, 0);
    let list = debugfs(0, "userptr");
    assert!(
        list.contains(&format!("{:#x}", buf.addr())) && list.contains(" yes "),
        "{list}"
    );
    check_huge_pages(va, &buf);
    // Past the end nothing translates.
    assert_eq!(oracle_walk(0, va + buf.len() as u64), None);
    // A sub-range starting on a huge page, and one that does not.
    let part = d.map_host(buf.addr() + HUGE, 2 * HUGE, 0, 0).unwrap();
    assert!(HOST_HUGE_VA.contains(&part));
    assert_eq!(
        oracle_walk(0, part + 5),
        Some((phys_of(buf.addr() + HUGE + 5), LEAF_2M))
    );
    let odd = d.map_host(buf.addr() + 4096, HUGE, 0, 0).unwrap();
    assert!(HOST_VA.contains(&odd), "{odd:#x}");
    assert_eq!(
        oracle_walk(0, odd + 7),
        Some((phys_of(buf.addr() + 4096 + 7), LEAF_4K))
    );
    for v in [va, part, odd] {
        d.unmap(v).unwrap();
        assert_eq!(oracle_walk(0, v), None);
    }
    assert_eq!(debugfs(0, "userptr").lines().count(), 1);
    drop(buf);
    assert_eq!(meminfo("HugePages_Free:"), free0);
}

#[test]
fn hints_on_hugetlbfs_buffers() {
    guest_only!();
    let d = Device::open_compute(0).unwrap();
    let buf = HostBuffer::hugetlb(HUGE_PAGE_SIZE).unwrap();
    let (addr, len) = (buf.addr(), HUGE);
    let hint = HOST_HUGE_VA.start + (64 << 20);
    // Aligned and free: honoured, with or without FORCE_HINT.
    let a = d.map_host(addr, len, hint, 0).unwrap();
    assert_eq!(a, hint);
    let b = d
        .map_host(addr, len, hint + HUGE, HL_MEM_FORCE_HINT)
        .unwrap();
    assert_eq!(b, hint + HUGE);
    // Occupied: elsewhere, or EADDRINUSE when forced.
    let c = d.map_host(addr, len, hint, 0).unwrap();
    assert!(HOST_HUGE_VA.contains(&c) && c != hint && c != hint + HUGE);
    expect_errno(d.map_host(addr, len, hint, HL_MEM_FORCE_HINT), EADDRINUSE);
    // Not 2 MiB aligned: ignored, or EINVAL when forced.
    let e = d.map_host(addr, len, hint + 4 * HUGE + 4096, 0).unwrap();
    assert_ne!(e, hint + 4 * HUGE + 4096);
    assert_eq!(e % HUGE, 0);
    expect_errno(
        d.map_host(addr, len, hint + 8 * HUGE + 4096, HL_MEM_FORCE_HINT),
        EINVAL,
    );
    for v in [a, b, c, e] {
        assert_eq!(oracle_walk(0, v + 99), Some((phys_of(addr + 99), LEAF_2M)));
        d.unmap(v).unwrap();
    }
    assert_eq!(debugfs(0, "userptr").lines().count(), 1);
}

#[test]
fn a_buffer_mixing_huge_and_regular_pages_uses_4_kib_leaves() {
    guest_only!();
    use rustix::mm::{madvise, mmap_anonymous, munmap, Advice, MapFlags, ProtFlags};
    let d = Device::open_compute(0).unwrap();
    // Reserve 6 MiB of address space, then put one huge page at a 2 MiB
    // boundary and 64 KiB of regular pages (no THP) right after it.
    let span = 6 * HUGE_PAGE_SIZE / 2;
    // SAFETY: a fresh PROT_NONE reservation, unmapped below.
    let res = unsafe {
        mmap_anonymous(
            std::ptr::null_mut(),
            span,
            ProtFlags::empty(),
            MapFlags::PRIVATE,
        )
    }
    .unwrap();
    let start = (res as u64).div_ceil(HUGE) * HUGE;
    let rw = ProtFlags::READ | ProtFlags::WRITE;
    // SAFETY: both fixed mappings lie inside the reservation made above.
    unsafe {
        mmap_anonymous(
            start as *mut _,
            HUGE_PAGE_SIZE,
            rw,
            MapFlags::PRIVATE | MapFlags::FIXED | MapFlags::HUGETLB | MapFlags::HUGE_2MB,
        )
        .unwrap();
        mmap_anonymous(
            (start + HUGE) as *mut _,
            64 << 10,
            rw,
            MapFlags::PRIVATE | MapFlags::FIXED,
        )
        .unwrap();
        madvise((start + HUGE) as *mut _, 64 << 10, Advice::LinuxNoHugepage).unwrap();
        std::ptr::write_bytes(start as *mut u8, 5, HUGE_PAGE_SIZE + (64 << 10));
    }
    let len = HUGE + (64 << 10);
    let va = d.map_host(start, len, 0, 0).unwrap();
    // Not every 2 MiB piece is a huge page: HOST range, 4 KiB leaves, but a
    // 2 MiB-aligned VA because the user address is 2 MiB aligned.
    assert!(HOST_VA.contains(&va), "{va:#x}");
    assert_eq!(va % HUGE, 0);
    assert!(!debugfs(0, "userptr").contains(" yes "));
    for page in 0..len / 4096 {
        let at = page * 4096 + page % 4096;
        assert_eq!(
            oracle_walk(0, va + at),
            Some((phys_of(start + at), LEAF_4K)),
            "page {page}"
        );
    }
    d.unmap(va).unwrap();
    assert_eq!(oracle_walk(0, va), None);
    // SAFETY: unmapping the whole reservation (and what was mapped into it).
    unsafe { munmap(res, span) }.unwrap();
}

#[test]
fn a_killed_process_releases_its_hugetlbfs_buffer() {
    guest_only!();
    let free0 = meminfo("HugePages_Free:");
    let mut child = spawn_hold(&[
        "--count",
        "1",
        "--size",
        "1",
        "--host",
        &(4 * HUGE).to_string(),
        "--hugetlb",
    ]);
    let list = debugfs(0, "userptr");
    assert!(
        list.contains(" yes ") && list.contains(&format!("{:<6}", child.id())),
        "{list}"
    );
    assert_eq!(meminfo("HugePages_Free:"), free0 - 4);
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(debugfs(0, "userptr").lines().count(), 1);
    assert!(debugfs(0, "mmu").contains("no open compute context"));
    // Unpinned and unmapped: the huge pages are free again.
    assert_eq!(meminfo("HugePages_Free:"), free0);
}

/// Not a timed assertion: pin + map of a 1 GiB hugetlbfs buffer (512 huge
/// pages, 512 PTEs) next to the null INFO ioctl, written to the guest log.
/// The guest reserves the extra huge pages for it and gives them back.
#[test]
fn bench_map_1_gib_hugetlbfs_buffer() {
    guest_only!();
    let d = Device::open_compute(0).unwrap();
    let null_ns = d.null_ioctl_ns(20_000).unwrap() as u64;
    let nr = "/proc/sys/vm/nr_hugepages";
    let before: u64 = std::fs::read_to_string(nr).unwrap().trim().parse().unwrap();
    std::fs::write(nr, (before + 512).to_string()).unwrap();
    let result = HostBuffer::hugetlb(1 << 30).map(|buf| {
        let t = std::time::Instant::now();
        let va = d.map_host(buf.addr(), buf.len() as u64, 0, 0).unwrap();
        let map_us = t.elapsed().as_micros();
        assert!(HOST_HUGE_VA.contains(&va));
        let t = std::time::Instant::now();
        d.unmap(va).unwrap();
        (map_us, t.elapsed().as_micros())
    });
    std::fs::write(nr, before.to_string()).unwrap();
    let (map_us, unmap_us) = result.expect("512 huge pages for the benchmark");
    std::fs::write(
        "/dev/kmsg",
        format!("hlrs-bench: USERPTR MAP 1 GiB hugetlbfs (pin + map, 512 x 2 MiB): {map_us} us; UNMAP (+ unpin): {unmap_us} us; null INFO ioctl: {null_ns} ns\n"),
    )
    .unwrap();
}
