//! The systematic fault-injection sweep: for every operation of a scripted
//! scenario, fail the 1st, 2nd, ... allocation inside that one call
//! (`/proc/thread-self/fail-nth`, with failslab and fail_page_alloc reaching
//! GFP_KERNEL allocations of any order: the guest's init sets them up) until
//! the call completes without reaching the injected fault. After each
//! injected failure: the errno is ENOMEM, every view of the device and the
//! process (DRAM_USAGE, debugfs memory/va/mmu/userptr/hw_blocks/ts_buffers/
//! cbs/dmabuf, VmLck) is exactly as before the call, and the same call without
//! injection succeeds. The number of failure points of each operation goes to
//! the guest log (`hlrs-faults:`).

use hlrs::{gaudi2, uapi::*, Device};
use hlrs_guest_tests::{debugfs, guest_only, FailNth};

const ENOMEM: i32 = 12;
const PAGE: u64 = 0x3000_0000;
/// More failure points than any one call has: the sweep must end before.
const MAX_POINTS: u32 = 400;

/// Everything a failed call must leave as it was.
#[derive(Debug, PartialEq, Eq)]
struct Snapshot {
    usage: (u64, u64),
    views: Vec<(String, String)>,
    vm_locked: String,
}

fn snapshot(d: &Device) -> Snapshot {
    let u = d.dram_usage().unwrap();
    let mut views = Vec::new();
    for f in [
        "memory",
        "va",
        "mmu",
        "userptr",
        "hw_blocks",
        "ts_buffers",
        "cbs",
        "dmabuf",
        "dram_pool",
    ] {
        // Counters of work done (PTE writes) legitimately move, and so do
        // the page tables' caches: hops a failed MAP took from the pool may
        // wait among its tree's spares (counted with the free slots here).
        let raw = debugfs(0, f);
        let spare_dmmu: u64 = raw
            .lines()
            .find(|l| l.starts_with("spare hops:"))
            .and_then(|l| l.split_whitespace().nth(2))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        // Empty hops an unmap leaves linked (idle ones, and the path above
        // them, kept for the next MAP until the context's teardown) are a
        // cache too: only the hops in use count.
        let in_use_only = |l: &str| match l.rsplit_once(", ") {
            Some((head, tail)) if tail.ends_with(" linked") => head.to_owned(),
            _ => l.to_owned(),
        };
        let text: String = raw
            .lines()
            .filter(|l| {
                !l.starts_with("PTE writes")
                    && !l.starts_with("spare hops:")
                    && !l.starts_with("idle hops:")
            })
            .map(|l| match l.strip_prefix("hop slots free:") {
                Some(n) => {
                    let n: u64 = n.trim().parse().unwrap_or(u64::MAX);
                    format!("hop slots free or spare: {}\n", n + spare_dmmu)
                }
                None if l.starts_with("dmmu hop0:") || l.starts_with("pmmu hops:") => {
                    format!("{}\n", in_use_only(l))
                }
                // The translation of a VA written to the file earlier: where
                // a walk for an unmapped VA stops depends on those linked
                // empty hops too.
                None if l.starts_with("va ") && l.contains(": fault: not present at hop ") => {
                    format!("{}\n", l.split(" at hop ").next().unwrap_or(l))
                }
                None => format!("{l}\n"),
            })
            .collect();
        views.push((f.to_owned(), text));
    }
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let vm_locked = status
        .lines()
        .find(|l| l.starts_with("VmLck:"))
        .unwrap()
        .to_owned();
    Snapshot {
        usage: (u.dram_free_mem, u.ctx_dram_mem),
        views,
        vm_locked,
    }
}

/// Sweep one operation: `setup` makes its preconditions on a fresh open,
/// `call` is the operation, `undo` releases what a successful call made.
fn sweep<S, T>(
    name: &str,
    setup: impl Fn(&Device) -> S,
    call: impl Fn(&Device, &S) -> std::io::Result<T>,
    undo: impl Fn(&Device, &S, T),
) -> u32 {
    let fail = FailNth::open();
    for n in 1..=MAX_POINTS {
        let d = Device::open_compute(0).unwrap();
        let s = setup(&d);
        let before = snapshot(&d);
        fail.arm(n);
        let r = call(&d, &s);
        let left = fail.left();
        fail.arm(0);
        match r {
            Err(e) => {
                assert_eq!(left, 0, "{name}: failed without an injected fault: {e}");
                assert_eq!(hlrs::errno(&e), ENOMEM, "{name}: injection point {n}: {e}");
                let after = snapshot(&d);
                assert_eq!(
                    after, before,
                    "{name}: injection point {n} changed the state"
                );
                // The same call without injection succeeds.
                let v = call(&d, &s).unwrap_or_else(|e| panic!("{name} after point {n}: {e}"));
                undo(&d, &s, v);
            }
            Ok(v) => {
                undo(&d, &s, v);
                if left != 0 {
                    // Completed without reaching the n-th point: n - 1 in all.
                    report(name, n - 1);
                    return n - 1;
                }
                // The injected failure was absorbed (a fallback allocation).
            }
        }
    }
    panic!("{name}: more than {MAX_POINTS} injection points");
}

fn report(name: &str, points: u32) {
    std::fs::write(
        "/dev/kmsg",
        format!("hlrs-faults: {name}: {points} allocation point(s)\n"),
    )
    .unwrap();
}

#[test]
fn alloc_contiguous_and_not() {
    guest_only!();
    for (name, flags) in [
        ("ALLOC contiguous", HL_MEM_CONTIGUOUS),
        ("ALLOC scattered", 0),
    ] {
        let points = sweep(
            name,
            // The device keeps the nodes and the pack of its last FREEs for
            // the next ALLOCs: use them up, so the call allocates.
            |d| {
                (0..5)
                    .map(|_| d.alloc(PAGE, 0).unwrap())
                    .collect::<Vec<_>>()
            },
            |d, _| d.alloc(3 * PAGE, flags),
            |d, _, h| d.free(h).unwrap(),
        );
        assert!(points >= 2, "{name}: {points}");
    }
}

#[test]
fn free() {
    guest_only!();
    sweep(
        "FREE",
        |d| d.alloc(2 * PAGE, 0).unwrap(),
        |d, &h| d.free(h),
        |_, _, ()| {},
    );
}

#[test]
fn map_and_unmap_device_memory() {
    guest_only!();
    let points = sweep(
        "MAP device",
        |d| d.alloc(3 * PAGE, 0).unwrap(),
        |d, &h| d.map(h, 0, 0),
        |d, _, va| d.unmap(va).unwrap(),
    );
    assert!(points >= 2);
    sweep(
        "UNMAP device",
        |d| {
            let h = d.alloc(PAGE, 0).unwrap();
            d.map(h, 0, 0).unwrap()
        },
        |d, &va| d.unmap(va),
        |_, _, ()| {},
    );
}

#[test]
fn map_and_unmap_host_memory() {
    guest_only!();
    // Touched, so pinning needs no page-fault allocation of its own.
    let buf = vec![7u8; 256 << 10];
    let addr = buf.as_ptr() as u64 + 100;
    let points = sweep(
        "MAP host",
        |_| (),
        |d, _| d.map_host(addr, 128 << 10, 0, 0),
        |d, _, va| d.unmap(va).unwrap(),
    );
    assert!(points >= 3);
    sweep(
        "UNMAP host",
        |d| d.map_host(addr, 128 << 10, 0, 0).unwrap(),
        |d, &va| d.unmap(va),
        |_, _, ()| {},
    );
}

#[test]
fn hw_block_map_and_mmap() {
    guest_only!();
    let addr = gaudi2::block_addr(9).unwrap();
    sweep("MAP_BLOCK", |_| (), |d, _| d.map_block(addr), |_, _, _| {});
    sweep(
        "HW block mmap",
        |d| {
            // A block's registers are allocated at its first mmap in a context
            // and kept until the context goes: map it once in this one first,
            // so the sweep sees only the mmap's own allocations.
            drop(d.map_hw_block(addr).unwrap());
            d.map_block(addr).unwrap()
        },
        |d, &(h, size)| d.mmap_raw(h, size as usize),
        // SAFETY: the mapping the call made, used by nothing else.
        |d, &(_, size), a| unsafe { d.munmap(a, size as usize) }.unwrap(),
    );
}

#[test]
fn timestamp_alloc_and_mmap() {
    guest_only!();
    let points = sweep("TS_ALLOC", |_| (), |d, _| d.ts_alloc(1000), |_, _, _| {});
    assert!(points >= 2);
    sweep(
        "TS mmap",
        |d| d.ts_alloc(1000).unwrap(),
        |d, &h| d.mmap_raw(h, 8192),
        // SAFETY: the mapping the call made, used by nothing else.
        |d, _, a| unsafe { d.munmap(a, 8192) }.unwrap(),
    );
}

#[test]
fn cb_create_and_mmap() {
    guest_only!();
    // Not HL_MAX_CB_SIZE: its 512 vmalloc pages are as many failure points.
    for size in [1u32, 92517] {
        let points = sweep(
            "CB CREATE",
            |_| (),
            |d, _| d.cb_create(size, 0),
            |d, _, h| d.cb_destroy(h).unwrap(),
        );
        assert!(points >= 2);
    }
    sweep(
        "CB CREATE with HL_CB_FLAGS_MAP",
        |_| (),
        |d, _| d.cb_create(92517, HL_CB_FLAGS_MAP),
        |d, _, h| d.cb_destroy(h).unwrap(),
    );
    let len = hlrs::cb_mapped_len(92517);
    sweep(
        "CB mmap",
        |d| d.cb_create(92517, 0).unwrap(),
        |d, &h| d.mmap_raw(h, len),
        // SAFETY: the mapping the call made, used by nothing else.
        |d, _, a| unsafe { d.munmap(a, len) }.unwrap(),
    );
}

#[test]
fn debugfs_dma_size() {
    guest_only!();
    // Every allocation of `addr` + `dma_size` + `data_dma` (the written
    // text, the blob, its reference, the open file's snapshot).
    let points = sweep(
        "debugfs dma_size",
        |d| {
            let h = d.alloc(PAGE, 0).unwrap();
            d.map(h, 0, 0).unwrap()
        },
        |_, &va| hlrs::debugfs::DebugfsMem::new(0).dma_read(va + 4096 - 8, 65536),
        |_, _, blob| assert_eq!(blob.len(), 65536),
    );
    assert!(points >= 3);
}

#[test]
fn dmabuf_export() {
    guest_only!();
    let points = sweep(
        "EXPORT_DMABUF_FD",
        |d| {
            let h = d.alloc(PAGE, 0).unwrap();
            d.map(h, 0, 0).unwrap()
        },
        |d, &va| d.export_dmabuf(va, 1 << 20, 0, hlrs::DMABUF_FLAGS),
        |_, _, fd| drop(fd),
    );
    assert!(points >= 2);
}

#[test]
fn map_host_memory_of_every_backing() {
    guest_only!();
    // hugetlbfs (2 MiB leaves), transparent huge pages and shmem file pages
    // take other paths through pinning and the page-size choice than the
    // anonymous buffer above; each is faulted in first (HostBuffer does).
    for (name, backing) in [
        ("MAP host hugetlb", hlrs::Backing::Hugetlb),
        ("MAP host thp", hlrs::Backing::Thp),
        ("MAP host memfd", hlrs::Backing::Memfd),
    ] {
        let buf = hlrs::HostBuffer::with_backing(2 << 20, backing).unwrap();
        let points = sweep(
            name,
            |_| (),
            |d, _| d.map_host(buf.addr(), buf.len() as u64, 0, 0),
            |d, _, va| d.unmap(va).unwrap(),
        );
        assert!(points >= 3, "{name}: {points}");
    }
}

#[test]
fn cs_and_wait_cs() {
    guest_only!();
    use hlrs::cs::{Cb, Cs};
    const SRAM: u64 = 0x1000_FFFF_FD00_0000;
    // A NOP, a MSG_LONG and a small LIN_DMA, fetched from host memory.
    let cb = Cb::new()
        .nop()
        .msg_long(SRAM + 0x100, 7)
        .lin_dma(SRAM + 0x100, SRAM + 0x200, 4);
    let len = cb.len();
    let setup = |d: &Device| {
        let b = cb.to_host_buffer().unwrap();
        let va = d.map_host(b.addr(), b.len() as u64, 0, 0).unwrap();
        (b, va)
    };
    let wait = |d: &Device, f: hlrs::cs::Fence| {
        f.wait(d, 10_000_000).unwrap();
    };
    let points = sweep(
        "CS",
        setup,
        |d, (_, va)| {
            Cs::new()
                .chunk(GAUDI2_QUEUE_ID_PDMA_0_0, *va, len)
                .chunk(GAUDI2_QUEUE_ID_DCORE0_EDMA_0_0, *va, len)
                .submit(d)
        },
        |d, _, f| wait(d, f),
    );
    assert!(points >= 3, "{points}");
    sweep(
        "CS with a restore phase",
        setup,
        |d, (_, va)| {
            Cs::new()
                .restore_chunk(GAUDI2_QUEUE_ID_PDMA_1_0, *va, len)
                .chunk(GAUDI2_QUEUE_ID_PDMA_0_0, *va, len)
                .submit(d)
        },
        |d, _, f| wait(d, f),
    );
    let points = sweep(
        "WAIT_CS",
        |d| {
            let s = setup(d);
            let f = Cs::new()
                .chunk(GAUDI2_QUEUE_ID_PDMA_0_0, s.1, len)
                .timestamp()
                .submit(d)
                .unwrap();
            (s, f)
        },
        |d, (_, f)| f.wait(d, 10_000_000),
        |_, _, _| {},
    );
    assert_eq!(points, 0);
}

#[test]
fn signal_css() {
    guest_only!();
    let d = Device::open_compute(0).unwrap();
    if d.hw_ip_info().unwrap().number_of_user_interrupts == 0 {
        eprintln!("no sync manager on device 0: SIGNAL CSs run on the PCI device");
        return;
    }
    drop(d);
    let q = GAUDI2_QUEUE_ID_PDMA_0_0;
    let wait = |d: &Device, f: hlrs::cs::Fence| {
        f.wait(d, 10_000_000).unwrap();
    };
    // A context's first: its streams, its CB page made and mapped, its
    // watchdog, the job; a failure leaves none of it.
    let points = sweep(
        "SIGNAL, a context's first",
        |_| (),
        |d, _| d.signal(q),
        |d, _, s| wait(d, s.fence),
    );
    assert!(points >= 3, "{points}");
    // The next ones: the job alone.
    sweep(
        "SIGNAL",
        |d| wait(d, d.signal(q).unwrap().fence),
        |d, _| d.signal(q),
        |d, _, s| wait(d, s.fence),
    );
}
