//! Command buffers (`DRM_IOCTL_HL_CB` and the mmap of CB handles) through the
//! real device nodes, as libhlthunk's `hlthunk_request_command_buffer`,
//! `hlthunk_get_cb_usage_count` and `hlthunk_destroy_command_buffer` use them.

use hlrs::{cb_mapped_len, uapi::*, Device};
use hlrs_guest_tests::{debugfs, expect_errno, guest_only, oracle_walk, phys_of, spawn_hold};

const EINVAL: i32 = 22;
const EMFILE: i32 = 24;

/// The `alive in the module` line of debugfs `cbs`.
fn alive() -> u64 {
    let s = debugfs(0, "cbs");
    let line = s.lines().next().unwrap_or_default();
    line.rsplit(' ').next().unwrap().parse().unwrap()
}

const SIZES: [u32; 6] = [1, 77, 5000, 92517, 1 << 20, HL_MAX_CB_SIZE];

#[test]
fn sizes_create_mmap_write_munmap_destroy() {
    guest_only!();
    let base = alive();
    let d = Device::open_compute(0).unwrap();
    for size in SIZES {
        let cb = d.command_buffer(size).unwrap();
        assert_eq!(cb.handle() >> 60, 1, "CB type bits");
        assert_eq!(cb.usage_count().unwrap(), 0);
        let m = cb.mmap().unwrap();
        assert_eq!(m.len(), cb_mapped_len(size));
        assert_eq!(m.len() % 4096, 0);
        // Zeroed, then what the process writes is the CB's memory.
        for off in (0..m.len()).step_by(4096) {
            assert_eq!(m.read(off), Some(0), "size {size} off {off}");
        }
        let last = m.len() - 8;
        m.write(0, 0x1111).unwrap();
        m.write(last, 0x2222).unwrap();
        let shown = debugfs(0, "cbs");
        assert!(shown.contains("1 mapped vma(s)"), "{shown}");
        assert!(shown.contains("[0]=0x1111"), "{shown}");
        assert!(shown.contains(&format!("[{last}]=0x2222")), "{shown}");
        assert_eq!((m.read(0), m.read(last)), (Some(0x1111), Some(0x2222)));
        drop(m);
        assert!(debugfs(0, "cbs").contains("0 mapped vma(s)"));
        cb.destroy().unwrap();
        assert_eq!(alive(), base, "size {size}");
    }
    // A mapping outlives DESTROY; the CB goes with the munmap.
    let cb = d.command_buffer(5000).unwrap();
    let h = cb.handle();
    let m = cb.mmap().unwrap();
    cb.destroy().unwrap();
    expect_errno(d.cb_destroy(h), EINVAL);
    m.write(8, 7).unwrap();
    assert_eq!(alive(), base + 1);
    drop(m);
    assert_eq!(alive(), base);
}

#[test]
fn bad_sizes_handles_and_ops_get_upstreams_errnos() {
    guest_only!();
    let d = Device::open_compute(0).unwrap();
    for size in [HL_MAX_CB_SIZE + 1, 2 << 20, u32::MAX] {
        let mut a = HlCbArgs {
            cb_handle: 5,
            op: HL_CB_OP_CREATE,
            cb_size: size,
            ..Default::default()
        };
        expect_errno(d.cb_args(&mut a), EINVAL);
        // As upstream, a failed CREATE writes a zeroed union back.
        assert_eq!(a, HlCbArgs::default());
    }
    // Size 0 is one page, as upstream.
    let h = d.cb_create(0, 0).unwrap();
    expect_errno(d.mmap_raw(h, 8192), EINVAL);
    let p = d.mmap_raw(h, 4096).unwrap();
    // One live mapping.
    expect_errno(d.mmap_raw(h, 4096), EINVAL);
    // SAFETY: `p` is the 4 KiB mapping made above, referred to by nothing.
    unsafe { d.munmap(p, 4096) }.unwrap();
    // Double destroy, INFO of a destroyed handle, foreign and made-up handles.
    d.cb_destroy(h).unwrap();
    expect_errno(d.cb_destroy(h), EINVAL);
    expect_errno(d.cb_info(h), EINVAL);
    let ts = d.ts_alloc(1).unwrap();
    let id = ts >> 12 & 0xffff_ffff;
    let cb = d.cb_create(1, 0).unwrap();
    assert_eq!(cb >> 12 & 0xffff_ffff, 2);
    for bad in [
        ts,
        mmap_handle(id, HL_MMAP_TYPE_CB) + (99 << 12),
        0,
        u64::MAX,
    ] {
        expect_errno(d.cb_destroy(bad), EINVAL);
        expect_errno(d.cb_info(bad), EINVAL);
    }
    // The device VA of a CB that is not mapped.
    expect_errno(d.cb_device_va(cb), EINVAL);
    expect_errno(d.cb_create(HL_MAX_CB_SIZE + 1, HL_CB_FLAGS_MAP), EINVAL);
    // Unknown op.
    let mut a = HlCbArgs {
        cb_handle: cb,
        op: 3,
        ..Default::default()
    };
    expect_errno(d.cb_args(&mut a), EINVAL);
    // Wrong mmap lengths of a 5000-byte CB (8 KiB).
    let big = d.cb_create(5000, 0).unwrap();
    for len in [4096, 12288, 2 << 20] {
        expect_errno(d.mmap_raw(big, len), EINVAL);
    }
    // Handles are per file: another open does not know them.
    drop(d);
    let e = Device::open_compute(0).unwrap();
    expect_errno(e.cb_destroy(big), EINVAL);
    expect_errno(e.cb_info(cb), EINVAL);
    assert_eq!(e.cb_create(1, 0).unwrap(), mmap_handle(1, HL_MMAP_TYPE_CB));
}

#[test]
fn the_per_file_bound_and_close_frees_everything() {
    guest_only!();
    let base = alive();
    let p = {
        let d = Device::open_compute(0).unwrap();
        let mut handles = Vec::new();
        while let Ok(h) = d.cb_create(4096, 0) {
            handles.push(h);
        }
        expect_errno(d.cb_create(1, 0), EMFILE);
        assert_eq!(handles.len(), 256);
        assert!(debugfs(0, "cbs").contains("cbs: 256 of 256"));
        d.cb_destroy(handles[10]).unwrap();
        let p = d.mmap_raw(d.cb_create(1, 0).unwrap(), 4096).unwrap();
        expect_errno(d.cb_create(1, 0), EMFILE);
        p
    };
    // Closed with 256 CBs, one of them still mapped: the mapping keeps the
    // file open, so all of them are alive; the munmap closes the file and
    // frees them all.
    assert_eq!(alive(), base + 256);
    // SAFETY: the 4 KiB mapping made above, referred to by nothing.
    unsafe { rustix::mm::munmap(p as *mut std::ffi::c_void, 4096) }.unwrap();
    assert_eq!(alive(), base);
    drop(Device::open_compute(0).unwrap());
}

#[test]
fn a_cb_left_mapped_and_alive_until_exit_goes_with_the_process() {
    guest_only!();
    let base = alive();
    let mut child = spawn_hold(&["--count", "0", "--cb", "92517"]);
    let shown = debugfs(0, "cbs");
    assert!(shown.contains("cbs: 1 of"), "{shown}");
    assert!(
        shown.contains("1 mapped vma(s); non-zero: [0]=0xc0ffee"),
        "{shown}"
    );
    assert_eq!(alive(), base + 1);
    child.kill().unwrap();
    child.wait().unwrap();
    // The exit unmaps and closes the file.
    for _ in 0..100 {
        if alive() == base {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert_eq!(alive(), base);
}

#[test]
fn create_and_destroy_cost() {
    guest_only!();
    let d = Device::open_compute(0).unwrap();
    for (size, n) in [(4096u32, 2000u32), (92517, 500), (HL_MAX_CB_SIZE, 100)] {
        let t = std::time::Instant::now();
        for _ in 0..n {
            let h = d.cb_create(size, 0).unwrap();
            d.cb_destroy(h).unwrap();
        }
        let us = t.elapsed().as_secs_f64() * 1e6 / f64::from(n);
        let t = std::time::Instant::now();
        for _ in 0..n {
            let cb = d.command_buffer(size).unwrap();
            drop(cb.mmap().unwrap());
        }
        let with_mmap = t.elapsed().as_secs_f64() * 1e6 / f64::from(n);
        std::fs::write(
            "/dev/kmsg",
            format!(
                "hlrs-cb: CREATE+DESTROY of {size} bytes: {us:.1} us; with mmap+munmap: {with_mmap:.1} us\n"
            ),
        )
        .unwrap();
    }
}

#[test]
fn cb_map_gives_a_device_va_the_oracle_translates_to_the_cbs_pages() {
    guest_only!();
    let base = alive();
    let d = Device::open_compute(0).unwrap();
    let mut vas = Vec::new();
    for size in [32u32, 77, 4096, 5000, 92517, 1 << 20, HL_MAX_CB_SIZE] {
        let h = d.cb_create(size, HL_CB_FLAGS_MAP).unwrap();
        let va = d.cb_device_va(h).unwrap();
        assert_eq!(va % 4096, 0);
        assert_eq!(d.cb_info(h).unwrap(), 0);
        let m = d.cb_mmap(h, size).unwrap();
        // Every page of the device VA is the CB's page the process maps.
        for off in (0..m.len()).step_by(4096) {
            m.write(off + 8, off as u64 + 1).unwrap();
            let pa = phys_of(m.addr() + off as u64);
            let walked = oracle_walk(0, va + off as u64 + 8).map(|w| w.0);
            assert_eq!(walked, Some(pa + 8), "size {size} off {off}");
        }
        assert_eq!(oracle_walk(0, va + m.len() as u64), None, "size {size}");
        // The mapping is the driver's: UNMAP and EXPORT of it are refused.
        expect_errno(d.unmap(va), EINVAL);
        expect_errno(d.export_dmabuf(va, 4096, 0, hlrs::DMABUF_FLAGS), EINVAL);
        vas.push((h, va, m));
    }
    // DESTROY unmaps (the mmap keeps the CB's memory, not its device VA).
    for (h, va, m) in vas {
        d.cb_destroy(h).unwrap();
        assert_eq!(oracle_walk(0, va), None);
        expect_errno(d.cb_device_va(h), EINVAL);
        drop(m);
    }
    assert_eq!(alive(), base);
    // Closing the file with mapped CBs unmaps and frees them.
    for _ in 0..3 {
        d.cb_create(5000, HL_CB_FLAGS_MAP).unwrap();
    }
    drop(d);
    assert_eq!(alive(), base);
    assert!(debugfs(0, "memory").len() > 0);
}
