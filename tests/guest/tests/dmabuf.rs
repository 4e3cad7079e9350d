//! dma-buf export of device memory (EXPORT_DMABUF_FD) through the real node,
//! as libhlthunk's `hlthunk_device_mapped_memory_export_dmabuf_fd` uses it.
//! The importer side (attach, map, the sg table against the page-walk oracle)
//! is the KUnit suite `hlrs_dmabuf`.

use hlrs::{uapi::*, Device, DMABUF_FLAGS};
use hlrs_guest_tests::{debugfs, expect_errno, guest_only, spawn_hold};
use std::os::fd::{AsRawFd, OwnedFd};

const EINVAL: i32 = 22;
const EBUSY: i32 = 16;
const PAGE: u64 = 0x3000_0000;

fn exports() -> u64 {
    let text = debugfs(0, "dmabuf");
    let line = text.lines().next().unwrap_or_default();
    line.trim_start_matches("exports: ").parse().unwrap()
}

/// EXPORT with the raw union: the errno, and what was written back.
fn export_args(
    d: &Device,
    addr: u64,
    size: u64,
    offset: u64,
    flags: u32,
) -> (std::io::Result<()>, HlMemArgs) {
    let mut a = HlMemArgs {
        arg0: addr,
        arg1: size,
        arg2: offset,
        op: HL_MEM_OP_EXPORT_DMABUF_FD,
        flags,
        ctx_id: 7,
        ..Default::default()
    };
    let rc = d.memory_args(&mut a);
    (rc, a)
}

#[test]
fn a_live_export_refuses_unmap_and_free_until_closed() {
    guest_only!();
    let d = Device::open_compute(0).unwrap();
    let h = d.alloc(2 * PAGE, 0).unwrap();
    let va = d.map(h, 0, 0).unwrap();
    let fd = d.export_dmabuf(va, 2 * PAGE, 0, DMABUF_FLAGS).unwrap();
    assert_eq!(exports(), 1);
    expect_errno(d.unmap(va), EINVAL);
    expect_errno(d.free(h), EINVAL);
    // The fd: its size, O_CLOEXEC, and the kernel's dma-buf list.
    let end = rustix::fs::seek(&fd, rustix::fs::SeekFrom::End(0)).unwrap();
    assert_eq!(end, 2 * PAGE);
    let fdflags = rustix::io::fcntl_getfd(&fd).unwrap();
    assert!(fdflags.contains(rustix::io::FdFlags::CLOEXEC));
    let bufinfo = std::fs::read_to_string("/sys/kernel/debug/dma_buf/bufinfo").unwrap();
    assert!(
        bufinfo
            .lines()
            .any(|l| l.contains("habanalabs_rs") && l.contains(&format!("{:08}", 2 * PAGE))),
        "{bufinfo}"
    );
    let list = debugfs(0, "dmabuf");
    assert!(
        list.contains(&format!("va {va:#x} offset 0x0 size {:#x}:", 2 * PAGE)),
        "{list}"
    );
    assert!(list.contains("  sg 0x4000"), "{list}");
    drop(fd);
    assert_eq!(exports(), 0);
    d.unmap(va).unwrap();
    d.free(h).unwrap();
}

#[test]
fn bad_exports_get_their_errno_and_minus_ebadf() {
    guest_only!();
    let d = Device::open_compute(0).unwrap();
    let h = d.alloc(PAGE, 0).unwrap();
    let va = d.map(h, 0, 0).unwrap();
    let host = hlrs::HostBuffer::new(1 << 20).unwrap();
    let hva = d.map_host(host.addr(), 1 << 20, 0, 0).unwrap();
    let cases: [(u64, u64, u64, u32); 10] = [
        (hva, 4096, 0, 0),              // a userptr mapping
        (va + 4096, 4096, 0, 0),        // an interior address
        (va + PAGE, 4096, 0, 0),        // nothing mapped there
        (va, 4096, 0, 0x40),            // O_CREAT: not an accepted flag
        (va, 4096, 0, 1),               // O_WRONLY
        (va, 0, 0, 0),                  // size 0
        (va, 4095, 0, 0),               // size not page aligned
        (va, 4096, 1, 0),               // offset not page aligned
        (va, 4096, PAGE, 0),            // offset + size past the pack
        (va, 4096, u64::MAX - 4095, 0), // offset + size wraps (upstream accepts)
    ];
    for (addr, size, offset, flags) in cases {
        let (rc, a) = export_args(&d, addr, size, offset, flags);
        expect_errno(rc, EINVAL);
        // As upstream: the union is zeroed and out.fd is -EBADF.
        assert_eq!(a.out_fd(), -9);
        assert_eq!((a.arg1, a.arg2, a.op, a.flags, a.ctx_id), (0, 0, 0, 0, 0));
    }
    assert_eq!(exports(), 0);
    // The whole pack, and its last page, are fine.
    drop(d.export_dmabuf(va, PAGE, 0, 0).unwrap());
    drop(d.export_dmabuf(va, 4096, PAGE - 4096, 0).unwrap());
    assert_eq!(exports(), 0);
}

#[test]
fn closing_the_compute_fd_first_keeps_the_context_until_the_dmabuf_goes() {
    guest_only!();
    let d = Device::open_compute(0).unwrap();
    let h = d.alloc(PAGE, 0).unwrap();
    let va = d.map(h, 0, 0).unwrap();
    let fd: OwnedFd = d.export_dmabuf(va, PAGE, 0, DMABUF_FLAGS).unwrap();
    drop(d);
    // The dma-buf holds the file and the context: the device is still busy
    // and the memory still allocated.
    expect_errno(Device::open_compute(0), EBUSY);
    let ctl = Device::open_control(0).unwrap();
    let total = ctl.hw_ip_info().unwrap().dram_size;
    assert_eq!(ctl.dram_usage().unwrap().dram_free_mem, total - PAGE);
    assert_eq!(exports(), 1);
    drop(fd);
    // Now the context is torn down: idle device, and a new open works.
    assert_eq!(exports(), 0);
    assert_eq!(ctl.dram_usage().unwrap().dram_free_mem, total);
    let d = Device::open_compute(0).unwrap();
    expect_errno(d.free(h), EINVAL);
}

#[test]
fn a_thousand_export_close_cycles_leave_the_device_idle() {
    guest_only!();
    let d = Device::open_compute(0).unwrap();
    let null_ns = d.null_ioctl_ns(20_000).unwrap();
    let mem = d.allocate(PAGE, HL_MEM_CONTIGUOUS).unwrap();
    let map = mem.map(0, 0).unwrap();
    let t = std::time::Instant::now();
    for i in 0..1000u64 {
        let fd = map.export_dmabuf((i % 16) * 4096, 4096).unwrap();
        assert!(fd.as_raw_fd() >= 0);
    }
    let per_ns = t.elapsed().as_nanos() as f64 / 1000.0;
    assert_eq!(exports(), 0);
    std::fs::write(
        "/dev/kmsg",
        format!(
            "hlrs-bench: EXPORT_DMABUF_FD + close: {:.0} ns ({:.1}x a null INFO ioctl, {:.0} ns)\n",
            per_ns,
            per_ns / null_ns,
            null_ns
        ),
    )
    .unwrap();
    drop(map);
    drop(mem);
    assert_eq!(d.dram_usage().unwrap().ctx_dram_mem, 0);
}

#[test]
fn a_killed_process_with_an_export_leaves_nothing() {
    guest_only!();
    let mut child = spawn_hold(&["--count", "1", "--size", "1", "--export"]);
    assert_eq!(exports(), 1);
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(exports(), 0);
    let d = Device::open_compute(0).unwrap();
    assert_eq!(d.dram_usage().unwrap().ctx_dram_mem, 0);
    let ctl = Device::open_control(0).unwrap();
    assert_eq!(
        ctl.dram_usage().unwrap().dram_free_mem,
        ctl.hw_ip_info().unwrap().dram_size
    );
}
