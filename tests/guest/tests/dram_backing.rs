//! The host memory behind simulated DRAM (issue 30): bounded by a
//! module-wide limit (an access past it faults and its CS ends ABORTED),
//! charged to the opener's memory cgroup, given back when a page pack
//! returns to the pool, and never showing one user's bytes to the next.

use hlrs::{
    cs::{Cb, CsDone},
    Device, HostBuffer,
};
use hlrs_guest_tests::{debugfs, guest_only};
use std::io;

const PDMA: u32 = hlrs::uapi::GAUDI2_QUEUE_ID_PDMA_0_0;
const SEC: u64 = 1_000_000;
/// Gaudi2's DRAM page with 6 HBMs.
const DRAM_PAGE: u64 = 768 << 20;
const EIO: i32 = 5;

/// Run `cb` from a host buffer of its own on PDMA and wait for it.
fn run(d: &Device, cb: &Cb) -> io::Result<CsDone> {
    let buf = cb.to_host_buffer().unwrap();
    let va = d.map_host(buf.addr(), buf.len() as u64, 0, 0).unwrap();
    let r = d.run_cb(PDMA, va, cb.len(), 120 * SEC);
    d.unmap(va).unwrap();
    r
}

/// A field of debugfs `dram_host` of device 0, in bytes.
fn dram_host(field: &str) -> u64 {
    debugfs(0, "dram_host")
        .lines()
        .find_map(|l| l.strip_prefix(field).map(|v| v.trim().to_string()))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("dram_host has no {field}"))
}

fn set_limit(bytes: u64) {
    std::fs::write(
        "/sys/kernel/debug/habanalabs_rs/0/dram_host",
        bytes.to_string(),
    )
    .unwrap();
}

/// Read `len` bytes of device memory at `va` through a DMA to a host buffer.
fn read_back(d: &Device, va: u64, len: usize) -> Vec<u8> {
    let dst = HostBuffer::new(len).unwrap();
    let m = d.map_buffer(dst.as_slice(), 0, 0).unwrap();
    let done = run(d, &Cb::new().lin_dma(va, m.va(), len as u32)).unwrap();
    assert!(matches!(done, CsDone::Completed { .. }));
    drop(m);
    dst.as_slice().to_vec()
}

/// Memset `len` bytes at `va` with `value`, in packets of at most 1 GiB.
fn memset(d: &Device, va: u64, value: u64, len: u64) -> io::Result<CsDone> {
    let mut cb = Cb::new();
    let mut at = 0;
    while at < len {
        let n = (len - at).min(1 << 30);
        cb = cb.memset(va + at, value, n as u32);
        at += n;
    }
    run(d, &cb)
}

#[test]
fn a_memset_past_the_host_memory_limit_aborts_and_everything_comes_back() {
    guest_only!();
    let start = dram_host("all bytes:");
    let old_limit = dram_host("limit bytes:");
    let refused = dram_host("refused:");
    set_limit(start + (64 << 20));
    let during;
    {
        let d = Device::open_compute(0).unwrap();
        // 8 GiB and more of DRAM (11 DRAM pages), mapped, memset with a
        // non-zero value: without a bound the engine would back all of it.
        let mem = d.allocate(11 * DRAM_PAGE, 0).unwrap();
        let m = mem.map(0, 0).unwrap();
        let r = memset(&d, m.va(), 0x5a5a_5a5a_0102_0304, 8 << 30);
        assert_eq!(hlrs::errno(&r.unwrap_err()), EIO, "the CS ends ABORTED");
        assert!(dram_host("all bytes:") <= start + (64 << 20));
        assert!(dram_host("device bytes:") >= 60 << 20);
        assert!(dram_host("refused:") > refused);
        during = mem_available_kb();
        // A memset of zeros (what unwritten DRAM reads as) backs nothing.
        let done = memset(&d, m.va() + (4 << 30), 0, 1 << 30).unwrap();
        assert!(matches!(done, CsDone::Completed { .. }));
        // The process exits without FREE: the teardown gives it all back.
    }
    set_limit(old_limit);
    assert_eq!(dram_host("all bytes:"), start);
    assert_eq!(dram_host("device bytes:"), 0);
    // And the host sees it: MemAvailable up by a good part of the 64 MiB
    // (freed pages on the per-CPU lists are not counted as free).
    let after = mem_available_kb();
    assert!(
        after >= during + 16 * 1024,
        "MemAvailable {during} kB at the limit, {after} kB after the close"
    );
}

fn mem_available_kb() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("MemAvailable:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

#[test]
fn the_next_user_of_a_dram_page_reads_zeros_never_the_last_user_s_bytes() {
    guest_only!();
    const LEN: usize = 1 << 20;
    let first_page = |d: &Device| {
        // The pool hands out the lowest free page first: both users get
        // the same physical page (checked through debugfs `memory`).
        let text = debugfs(d.index(), "memory");
        text.lines()
            .nth(1)
            .map(|l| l.split_whitespace().last().unwrap_or("").to_string())
    };
    // A user writes a pattern and exits without FREE.
    let seen = {
        let d = Device::open_compute(0).unwrap();
        let mem = d.allocate(DRAM_PAGE, 0).unwrap();
        let m = mem.map(0, 0).unwrap();
        let done = memset(&d, m.va(), 0xdead_beef_cafe_f00d, LEN as u64).unwrap();
        assert!(matches!(done, CsDone::Completed { .. }));
        let back = read_back(&d, m.va(), LEN);
        assert!(back
            .chunks(8)
            .all(|w| w == 0xdead_beef_cafe_f00du64.to_le_bytes()));
        let page = first_page(&d);
        std::mem::forget(m);
        std::mem::forget(mem);
        page
    };
    // The next user of the device gets the same page and reads zeros.
    let d = Device::open_compute(0).unwrap();
    let mem = d.allocate(DRAM_PAGE, 0).unwrap();
    assert_eq!(first_page(&d), seen, "the same DRAM page");
    let m = mem.map(0, 0).unwrap();
    let back = read_back(&d, m.va(), LEN);
    assert!(back.iter().all(|&b| b == 0), "a previous user's bytes");
    // Within one open too: FREE and ALLOC again, zeros.
    let done = memset(&d, m.va(), 0x1111_2222_3333_4444, LEN as u64).unwrap();
    assert!(matches!(done, CsDone::Completed { .. }));
    m.unmap().unwrap();
    mem.free().unwrap();
    let mem = d.allocate(DRAM_PAGE, 0).unwrap();
    let m = mem.map(0, 0).unwrap();
    let back = read_back(&d, m.va(), LEN);
    assert!(back.iter().all(|&b| b == 0), "bytes of the freed handle");
    assert_eq!(dram_host("device bytes:"), 0);
}

/// The cgroup v2 hierarchy, mounted if it is not, with the memory
/// controller enabled for children; a new child group.
struct Cgroup {
    path: String,
}

impl Cgroup {
    fn new(name: &str) -> Self {
        let root = "/sys/fs/cgroup";
        if !std::path::Path::new(&format!("{root}/cgroup.controllers")).exists() {
            std::fs::create_dir_all(root).unwrap();
            let rc = std::process::Command::new("mount")
                .args(["-t", "cgroup2", "none", root])
                .status()
                .unwrap();
            assert!(rc.success(), "mount cgroup2");
        }
        std::fs::write(format!("{root}/cgroup.subtree_control"), "+memory").unwrap();
        let path = format!("{root}/{name}");
        let _ = std::fs::create_dir(&path);
        Self { path }
    }

    fn enter(&self) {
        std::fs::write(format!("{}/cgroup.procs", self.path), "0").unwrap();
    }

    fn memory_current(&self) -> u64 {
        std::fs::read_to_string(format!("{}/memory.current", self.path))
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    }
}

impl Drop for Cgroup {
    fn drop(&mut self) {
        let _ = std::fs::write("/sys/fs/cgroup/cgroup.procs", "0");
        let _ = std::fs::remove_dir(&self.path);
    }
}

#[test]
fn host_memory_behind_dram_is_charged_to_the_opener_s_memory_cgroup() {
    guest_only!();
    const LEN: u64 = 32 << 20;
    let cg = Cgroup::new("hlrs-dram-backing");
    cg.enter();
    let d = Device::open_compute(0).unwrap();
    let mem = d.allocate(DRAM_PAGE, 0).unwrap();
    let m = mem.map(0, 0).unwrap();
    let before = cg.memory_current();
    // The engine's worker thread allocates; the opener's cgroup pays.
    let done = memset(&d, m.va(), 0x0123_4567_89ab_cdef, LEN).unwrap();
    assert!(matches!(done, CsDone::Completed { .. }));
    let during = cg.memory_current();
    assert!(
        during >= before + LEN,
        "memory.current {before} -> {during}: the DRAM's host pages are not charged"
    );
    // FREE gives the pages back, and the charge with them.
    m.unmap().unwrap();
    mem.free().unwrap();
    let after = cg.memory_current();
    assert!(
        after + LEN - (2 << 20) <= during,
        "memory.current {during} -> {after} after FREE"
    );
    drop(d);
}
