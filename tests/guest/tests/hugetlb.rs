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

/// Threads sharing a pool of hugetlbfs buffers that the device maps (and so
/// pins), unmaps, and that are `munmap`ped while the device still maps them.
/// Found by the fuzzer: a MAP_PRIVATE hugetlbfs mmap whose reservation was
/// granted can find no free page at its first touch (SIGBUS), because the
/// kernel gives back the reservation of a pinned page when its vma closes
/// (`__unmap_hugepage_range` sets restore-reserve, `hugetlb_vm_op_close`
/// then returns the reservation, mm/hugetlb.c:5333-5350, 4755-4763) but only
/// restores it when the pin goes and the page is freed. Here `populate` turns
/// the SIGBUS into EFAULT; the count goes to the log. What must hold: no other
/// error, and once the device has unmapped everything, every huge page is
/// free and no reservation is left (the driver leaks no pin).
#[test]
fn pinned_hugetlb_buffers_munmapped_under_other_threads_keep_the_pool_exact() {
    guest_only!();
    use rustix::mm::{madvise, mmap_anonymous, munmap, Advice, MapFlags, ProtFlags};
    use std::sync::{atomic::AtomicU64, atomic::Ordering::Relaxed, Mutex};
    let (free0, rsvd0) = (meminfo("HugePages_Free:"), meminfo("HugePages_Rsvd:"));
    let d = Device::open_compute(0).unwrap();
    // (user address, device VA while mapped)
    let pool: Mutex<Vec<(usize, Option<u64>)>> = Mutex::new(Vec::new());
    let (granted, no_page) = (AtomicU64::new(0), AtomicU64::new(0));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
    std::thread::scope(|s| {
        for t in 0..4u64 {
            let (d, pool, granted, no_page) = (&d, &pool, &granted, &no_page);
            s.spawn(move || {
                let mut x = t * 0x9E37_79B9 + 1;
                let mut next = || {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x
                };
                while std::time::Instant::now() < deadline {
                    match next() % 4 {
                        0 => {
                            // SAFETY: a new mapping at an address the kernel picks.
                            let p = unsafe {
                                mmap_anonymous(
                                    std::ptr::null_mut(),
                                    HUGE as usize,
                                    ProtFlags::READ | ProtFlags::WRITE,
                                    MapFlags::PRIVATE | MapFlags::HUGETLB | MapFlags::HUGE_2MB,
                                )
                            };
                            let Ok(p) = p else { continue };
                            granted.fetch_add(1, Relaxed);
                            // SAFETY: advice on the mapping just made.
                            match unsafe { madvise(p, HUGE as usize, Advice::LinuxPopulateWrite) } {
                                Ok(()) => pool.lock().unwrap().push((p as usize, None)),
                                Err(e) => {
                                    assert_eq!(e.raw_os_error(), 14, "populate: {e}");
                                    no_page.fetch_add(1, Relaxed);
                                    // SAFETY: our mapping, used by nothing else.
                                    unsafe { munmap(p, HUGE as usize) }.unwrap();
                                }
                            }
                        }
                        1 => {
                            let mut p = pool.lock().unwrap();
                            let n = p.len() as u64;
                            if let Some(e) = p.get_mut((next() % n.max(1)) as usize) {
                                if e.1.is_none() {
                                    e.1 = Some(d.map_host(e.0 as u64, HUGE, 0, 0).unwrap());
                                }
                            }
                        }
                        2 => {
                            let mut p = pool.lock().unwrap();
                            let n = p.len() as u64;
                            if n > 0 {
                                let (addr, va) = p.swap_remove((next() % n) as usize);
                                // SAFETY: a buffer of the pool, now ours alone;
                                // the device may still map (and pin) it.
                                unsafe { munmap(addr as *mut _, HUGE as usize) }.unwrap();
                                if let Some(va) = va.filter(|_| next() % 2 == 0) {
                                    d.unmap(va).unwrap();
                                }
                            }
                        }
                        _ => {
                            let mut p = pool.lock().unwrap();
                            if let Some(e) = p.iter_mut().find(|e| e.1.is_some()) {
                                d.unmap(e.1.take().unwrap()).unwrap();
                            }
                        }
                    }
                }
            });
        }
    });
    for (addr, _) in pool.into_inner().unwrap() {
        // SAFETY: the buffers left in the pool, used by nothing else now.
        unsafe { munmap(addr as *mut _, HUGE as usize) }.unwrap();
    }
    // Closing the fd unmaps what is still mapped and unpins it.
    drop(d);
    std::fs::write(
        "/dev/kmsg",
        format!(
            "hlrs-hugetlb: {} of {} granted hugetlbfs reservations found no free page (kernel restore-reserve window)\n",
            no_page.load(Relaxed),
            granted.load(Relaxed)
        ),
    )
    .unwrap();
    assert!(granted.into_inner() > 10);
    assert_eq!(meminfo("HugePages_Free:"), free0);
    assert_eq!(meminfo("HugePages_Rsvd:"), rsvd0);
}
