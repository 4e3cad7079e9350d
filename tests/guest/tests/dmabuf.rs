//! dma-buf export of device memory (EXPORT_DMABUF_FD) through the real node,
//! as libhlthunk's `hlthunk_device_mapped_memory_export_dmabuf_fd` uses it.
//! The importer side: vgem, a real in-kernel importer, PRIME-imports the
//! exports and maps them for the CPU (below); the DMA side (attach, map, every
//! sg entry checked against the DMA API and the simulated DRAM) is the KUnit
//! suite `hlrs_dmabuf`.

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
    let pa = hlrs_guest_tests::oracle_walk(0, va).unwrap().0;
    assert!(list.contains(&format!("  dram {pa:#x} + ")), "{list}");
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

// ---------------------------------------------------------------------------
// A real in-kernel importer: vgem (`CONFIG_DRM_VGEM`).
//
// vgem PRIME-imports with `drm_gem_shmem_prime_import_no_map` (it attaches
// and never maps the attachment; the DMA side is the KUnit importer's), and
// an mmap of an imported object goes to `drm_gem_shmem_mmap`, which calls
// `dma_buf_mmap`: our `mmap` op. `DRM_IOCTL_MODE_MAP_DUMB` refuses imported
// objects (`drm_gem_dumb_map_offset`: "Don't allow imported objects to be
// mapped") and vgem has no mmap-offset ioctl of its own, but every shmem
// object gets its fake offset at creation, and only objects this file holds
// a handle to can be mapped through it: the test finds the offset by trying
// offsets from the first one up (`mmap` says `EINVAL` at an offset where no
// object starts, `EACCES` for other files' objects), and checks in
// `/proc/self/maps` that what it mapped is backed by our dma-buf.
// ---------------------------------------------------------------------------

const EACCES: i32 = 13;
const KIB4: u64 = 4096;

/// `_IOWR('d', nr, size)` and `_IOW('d', nr, size)`.
const fn drm_iowr(nr: u64, size: u64) -> u64 {
    (3 << 30) | (size << 16) | (0x64 << 8) | nr
}
const fn drm_iow(nr: u64, size: u64) -> u64 {
    (1 << 30) | (size << 16) | (0x64 << 8) | nr
}

/// `struct drm_version`.
#[repr(C)]
#[derive(Default)]
struct DrmVersion {
    major: i32,
    minor: i32,
    patch: i32,
    name_len: usize,
    name: u64,
    date_len: usize,
    date: u64,
    desc_len: usize,
    desc: u64,
}

/// `struct drm_prime_handle`.
#[repr(C)]
#[derive(Default)]
struct DrmPrimeHandle {
    handle: u32,
    flags: u32,
    fd: i32,
}

/// `struct drm_gem_close`.
#[repr(C)]
#[derive(Default)]
struct DrmGemClose {
    handle: u32,
    pad: u32,
}

const DRM_IOCTL_VERSION: u64 = drm_iowr(0x00, std::mem::size_of::<DrmVersion>() as u64);
const DRM_IOCTL_GEM_CLOSE: u64 = drm_iow(0x09, std::mem::size_of::<DrmGemClose>() as u64);
const DRM_IOCTL_PRIME_FD_TO_HANDLE: u64 =
    drm_iowr(0x2e, std::mem::size_of::<DrmPrimeHandle>() as u64);

/// The first fake mmap offset of a DRM device (`DRM_FILE_PAGE_OFFSET_START`
/// on 64-bit, in bytes).
const DRM_FIRST_OFFSET: u64 = 0x1_0000_0000;

fn ioctl<T>(fd: &impl AsRawFd, cmd: u64, arg: &mut T) -> std::io::Result<()> {
    // SAFETY: `arg` is the argument struct of `cmd` (checked sizes above).
    let rc = unsafe { libc::ioctl(fd.as_raw_fd(), cmd as _, arg as *mut T) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// An open vgem node.
struct Vgem(OwnedFd);

impl Vgem {
    /// The `/dev/dri/card*` whose driver is vgem (`DRM_IOCTL_VERSION`).
    fn open() -> Self {
        for entry in std::fs::read_dir("/dev/dri").expect("no /dev/dri: CONFIG_DRM_VGEM?") {
            let path = entry.unwrap().path();
            if !path
                .file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("card")
            {
                continue;
            }
            let f: OwnedFd = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open(&path)
                .unwrap()
                .into();
            let mut name = [0u8; 32];
            let mut v = DrmVersion {
                name_len: name.len(),
                name: name.as_mut_ptr() as u64,
                ..Default::default()
            };
            ioctl(&f, DRM_IOCTL_VERSION, &mut v).unwrap();
            if name.get(..v.name_len) == Some(b"vgem".as_slice()) {
                return Self(f);
            }
        }
        panic!("no vgem card in /dev/dri");
    }

    /// PRIME import of `dmabuf`: the GEM handle.
    fn import(&self, dmabuf: &impl AsRawFd) -> u32 {
        let mut p = DrmPrimeHandle {
            fd: dmabuf.as_raw_fd(),
            ..Default::default()
        };
        ioctl(&self.0, DRM_IOCTL_PRIME_FD_TO_HANDLE, &mut p).unwrap();
        p.handle
    }

    fn close_handle(&self, handle: u32) {
        let mut c = DrmGemClose { handle, pad: 0 };
        ioctl(&self.0, DRM_IOCTL_GEM_CLOSE, &mut c).unwrap();
    }

    /// `mmap` of the one object this file holds a handle to, `size` bytes
    /// with `prot`: its fake offset is found by trying (see above). Returns
    /// the address and the offset, or the errno at the object's offset once
    /// a read-only probe found it.
    fn mmap_object(&self, size: u64, prot: i32) -> Result<(*mut u8, u64), i32> {
        let try_at = |off: u64, prot: i32| {
            // SAFETY: a new shared mapping of the vgem file; nothing else is
            // at the address the kernel picks.
            let p = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    size as usize,
                    prot,
                    libc::MAP_SHARED,
                    self.0.as_raw_fd(),
                    off as libc::off_t,
                )
            };
            if p == libc::MAP_FAILED {
                Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(0))
            } else {
                Ok(p.cast::<u8>())
            }
        };
        for page in 0..(1u64 << 16) {
            let off = DRM_FIRST_OFFSET + page * KIB4;
            match try_at(off, libc::PROT_READ) {
                Ok(p) => {
                    if prot == libc::PROT_READ {
                        return Ok((p, off));
                    }
                    // SAFETY: the probe mapping just made.
                    unsafe { libc::munmap(p.cast(), size as usize) };
                    return try_at(off, prot).map(|p| (p, off));
                }
                Err(e) if e == EINVAL || e == EACCES => continue,
                Err(e) => panic!("mmap of the vgem object: errno {e}"),
            }
        }
        panic!("no mappable vgem object found");
    }
}

/// The inode behind the mapping at `addr` in `/proc/self/maps`.
fn mapped_inode(addr: *mut u8) -> u64 {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    let start = format!("{:x}-", addr as usize);
    let line = maps
        .lines()
        .find(|l| l.starts_with(&start))
        .unwrap_or_else(|| panic!("{start} not in {maps}"));
    line.split_whitespace().nth(4).unwrap().parse().unwrap()
}

fn inode_of(fd: &OwnedFd) -> u64 {
    rustix::fs::fstat(fd).unwrap().st_ino
}

/// Write `data` to simulated DRAM at physical address `pa` (debugfs `dram`).
fn dram_write(pa: u64, data: &[u8]) {
    let hex: String = data.iter().map(|b| format!("{b:02x}")).collect();
    std::fs::write(
        "/sys/kernel/debug/habanalabs_rs/0/dram",
        format!("write {pa:#x} {hex}"),
    )
    .unwrap();
}

/// What simulated DRAM holds at `[pa, pa + len)` (debugfs `dram`).
fn dram_read(pa: u64, len: usize) -> Vec<u8> {
    std::fs::write(
        "/sys/kernel/debug/habanalabs_rs/0/dram",
        format!("read {pa:#x} {len}"),
    )
    .unwrap();
    let text = debugfs(0, "dram");
    let hex = text.trim().split(':').nth(1).unwrap();
    (0..hex.len() / 2)
        .map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap())
        .collect()
}

/// The DRAM physical address behind device VA `va` (the page-walk oracle).
fn pa_of(va: u64) -> u64 {
    hlrs_guest_tests::oracle_walk(0, va)
        .expect("VA not mapped")
        .0
}

/// A mapping whose two DRAM pages are not physically consecutive (a page
/// held between them), and the range to export: the last 8 KiB of the first
/// DRAM page and the first 8 KiB of the second. Returns the handles to free
/// (the held one and the mapped one), the VA, the offset and the size.
fn export_across_dram_pages(d: &Device) -> ([u64; 2], u64, u64, u64) {
    let first = d.alloc(PAGE, 0).unwrap();
    let held = d.alloc(PAGE, 0).unwrap();
    d.free(first).unwrap();
    let h = d.alloc(2 * PAGE, 0).unwrap();
    let va = d.map(h, 0, 0).unwrap();
    let (offset, size) = (PAGE - 2 * KIB4, 4 * KIB4);
    assert_ne!(
        pa_of(va + PAGE - KIB4) + KIB4,
        pa_of(va + PAGE),
        "pages are consecutive"
    );
    ([held, h], va, offset, size)
}

/// Fill every 4 KiB of `[va + offset, + size)` but the `skip`-th with a
/// pattern through debugfs, and return what DRAM then holds for the range
/// (for the skipped page: zeros if that DRAM was never written, or what an
/// earlier test left there; ALLOC does not scrub DRAM).
fn fill_dram(va: u64, offset: u64, size: u64, skip: u64, seed: u8) -> Vec<u8> {
    let mut want = Vec::new();
    for i in 0..size / KIB4 {
        let pa = pa_of(va + offset + i * KIB4);
        if i != skip {
            let page: Vec<u8> = (0..KIB4)
                .map(|k| (k as u8).wrapping_mul(7) ^ (i as u8 + seed) | 1)
                .collect();
            dram_write(pa, &page);
        }
        want.extend(dram_read(pa, KIB4 as usize));
    }
    assert!(want.iter().any(|&b| b != 0));
    want
}

fn bufinfo() -> String {
    std::fs::read_to_string("/sys/kernel/debug/dma_buf/bufinfo").unwrap()
}

fn idle() -> bool {
    let ctl = Device::open_control(0).unwrap();
    ctl.dram_usage().unwrap().dram_free_mem == ctl.hw_ip_info().unwrap().dram_size
        && debugfs(0, "dmabuf").starts_with("exports: 0\nimporter mappings: 0\n")
        && !bufinfo().contains("habanalabs_rs")
}

#[test]
fn vgem_maps_exactly_the_dram_bytes_of_an_export_across_dram_pages() {
    guest_only!();
    let d = Device::open_compute(0).unwrap();
    let (handles, va, offset, size) = export_across_dram_pages(&d);
    // The third page is not written here: vgem must show whatever DRAM holds.
    let want = fill_dram(va, offset, size, 2, 0x40);
    let fd = d.export_dmabuf(va, size, offset, DMABUF_FLAGS).unwrap();
    // debugfs shows the export's DRAM pieces: two, one per DRAM page.
    let list = debugfs(0, "dmabuf");
    for (at, len) in [(0, 2 * KIB4), (2 * KIB4, 2 * KIB4)] {
        let line = format!("  dram {:#x} + {:#x}", pa_of(va + offset + at), len);
        assert!(list.contains(&line), "{line} not in {list}");
    }
    let vgem = Vgem::open();
    let handle = vgem.import(&fd);
    assert!(bufinfo().contains("vgem"), "{}", bufinfo());
    let (p, _) = vgem
        .mmap_object(size, libc::PROT_READ | libc::PROT_WRITE)
        .unwrap();
    // The vgem object's mapping is our dma-buf's (dma_buf_mmap swapped the file).
    assert_eq!(mapped_inode(p), inode_of(&fd));
    // SAFETY: `size` bytes mapped just above.
    let mapped = unsafe { std::slice::from_raw_parts_mut(p, size as usize) };
    assert!(
        mapped[..] == want[..],
        "vgem sees other bytes than DRAM holds"
    );
    // Writes through vgem land in the simulated DRAM, both sides of the
    // DRAM page boundary, including the page not written above.
    for i in [1u64, 2, 3] {
        let at = (i * KIB4 + 100) as usize;
        mapped[at..at + 4].copy_from_slice(&[0xde, 0xad, 0xbe, i as u8]);
        let pa = pa_of(va + offset + i * KIB4);
        assert_eq!(dram_read(pa + 100, 4), [0xde, 0xad, 0xbe, i as u8]);
    }
    // And DRAM writes show through the mapping.
    let pa0 = pa_of(va + offset);
    dram_write(pa0 + 8, &[1, 2, 3]);
    assert_eq!(&mapped[8..11], &[1, 2, 3]);
    // SAFETY: the mapping made above, not used after.
    unsafe { libc::munmap(p.cast(), size as usize) };
    // Close order: dma-buf fd first; vgem's import keeps the export alive.
    drop(fd);
    assert_eq!(exports(), 1);
    expect_errno(d.unmap(va), EINVAL);
    vgem.close_handle(handle);
    assert_eq!(exports(), 0);
    d.unmap(va).unwrap();
    for h in handles {
        d.free(h).unwrap();
    }
    drop(d);
    assert!(idle());
}

#[test]
fn vgem_handle_closed_first_then_the_dmabuf_fd() {
    guest_only!();
    let d = Device::open_compute(0).unwrap();
    let (handles, va, offset, size) = export_across_dram_pages(&d);
    let want = fill_dram(va, offset, size, 0, 0x11);
    let fd = d.export_dmabuf(va, size, offset, DMABUF_FLAGS).unwrap();
    let vgem = Vgem::open();
    let handle = vgem.import(&fd);
    let (p, _) = vgem.mmap_object(size, libc::PROT_READ).unwrap();
    // SAFETY: `size` bytes mapped just above.
    assert!(unsafe { std::slice::from_raw_parts(p, size as usize) } == &want[..]);
    // SAFETY: the mapping made above, not used after.
    unsafe { libc::munmap(p.cast(), size as usize) };
    // Close order: vgem handle first; the fd keeps the export alive.
    vgem.close_handle(handle);
    assert_eq!(exports(), 1);
    assert!(!bufinfo().contains("vgem"), "{}", bufinfo());
    drop(fd);
    assert_eq!(exports(), 0);
    // A mapping outlives both the fd and the vgem handle.
    let fd = d.export_dmabuf(va, size, offset, DMABUF_FLAGS).unwrap();
    let handle = vgem.import(&fd);
    let (p, _) = vgem.mmap_object(size, libc::PROT_READ).unwrap();
    drop(fd);
    vgem.close_handle(handle);
    assert_eq!(exports(), 1);
    // SAFETY: still mapped.
    assert!(unsafe { std::slice::from_raw_parts(p, size as usize) } == &want[..]);
    // SAFETY: the mapping made above, not used after.
    unsafe { libc::munmap(p.cast(), size as usize) };
    assert_eq!(exports(), 0);
    drop(vgem);
    d.unmap(va).unwrap();
    for h in handles {
        d.free(h).unwrap();
    }
    drop(d);
    assert!(idle());
}

#[test]
fn cpu_mappings_of_an_export_are_shared_and_follow_its_mode() {
    guest_only!();
    let d = Device::open_compute(0).unwrap();
    let h = d.alloc(PAGE, 0).unwrap();
    let va = d.map(h, 0, 0).unwrap();
    let map = |fd: &OwnedFd, prot: i32, flags: i32| {
        // SAFETY: a new mapping of the dma-buf; unmapped below on success.
        let p = unsafe { libc::mmap(std::ptr::null_mut(), 8192, prot, flags, fd.as_raw_fd(), 0) };
        if p == libc::MAP_FAILED {
            Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(0))
        } else {
            // SAFETY: the mapping just made.
            unsafe { libc::munmap(p, 8192) };
            Ok(())
        }
    };
    let rw = d.export_dmabuf(va, 8192, 0, DMABUF_FLAGS).unwrap();
    let prot = libc::PROT_READ | libc::PROT_WRITE;
    assert_eq!(map(&rw, prot, libc::MAP_SHARED), Ok(()));
    // A private copy of device memory is refused, readable or not.
    assert_eq!(map(&rw, libc::PROT_READ, libc::MAP_PRIVATE), Err(EINVAL));
    assert_eq!(map(&rw, prot, libc::MAP_PRIVATE), Err(EINVAL));
    // An export without O_RDWR maps read-only, also through an importer
    // (whose own file is writable).
    let ro = d.export_dmabuf(va, 8192, 0, 0).unwrap();
    assert_eq!(map(&ro, libc::PROT_READ, libc::MAP_SHARED), Ok(()));
    assert_eq!(map(&ro, prot, libc::MAP_SHARED), Err(EACCES));
    let vgem = Vgem::open();
    let handle = vgem.import(&ro);
    assert_eq!(vgem.mmap_object(8192, prot).err(), Some(EACCES));
    let (p, _) = vgem.mmap_object(8192, libc::PROT_READ).unwrap();
    // SAFETY: the mapping just made; `mprotect` cannot make it writable.
    unsafe {
        assert_ne!(libc::mprotect(p.cast(), 8192, prot), 0);
        libc::munmap(p.cast(), 8192);
    }
    vgem.close_handle(handle);
    drop((rw, ro));
    assert_eq!(exports(), 0);
    d.unmap(va).unwrap();
    d.free(h).unwrap();
}

#[test]
fn a_killed_process_with_a_live_vgem_attachment_and_mapping_leaves_nothing() {
    guest_only!();
    let mut pipe = [0i32; 2];
    // SAFETY: a new pipe into `pipe`.
    assert_eq!(unsafe { libc::pipe(pipe.as_mut_ptr()) }, 0);
    // SAFETY: tests run one at a time (`--test-threads=1`), so the child is a
    // copy of a process with no other thread inside the allocator; it leaves
    // with `_exit` or is killed.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0);
    if pid == 0 {
        // The child: everything live, then wait to be killed. The objects
        // are leaked on purpose: the kill releases them.
        let held = std::panic::catch_unwind(|| {
            let d = Device::open_compute(0).unwrap();
            let (_, va, offset, size) = export_across_dram_pages(&d);
            let want = fill_dram(va, offset, size, 3, 0x22);
            let fd = d.export_dmabuf(va, size, offset, DMABUF_FLAGS).unwrap();
            let vgem = Vgem::open();
            vgem.import(&fd);
            let (p, _) = vgem
                .mmap_object(size, libc::PROT_READ | libc::PROT_WRITE)
                .unwrap();
            // SAFETY: `size` bytes mapped just above.
            let ok = unsafe { std::slice::from_raw_parts(p, size as usize) } == &want[..];
            std::mem::forget((d, fd, vgem));
            ok
        });
        let byte = u8::from(held.unwrap_or(false));
        // SAFETY: one byte to the pipe; then wait for the kill (or leave at
        // once after a failure, without the parent's destructors).
        unsafe {
            libc::write(pipe[1], [byte].as_ptr().cast(), 1);
            if byte == 0 {
                libc::_exit(1);
            }
            loop {
                libc::pause();
            }
        }
    }
    // SAFETY: our copy of the write end: the read below sees EOF if the
    // child dies without writing.
    unsafe { libc::close(pipe[1]) };
    let mut b = [0u8; 1];
    // SAFETY: reads one byte the child writes.
    assert_eq!(unsafe { libc::read(pipe[0], b.as_mut_ptr().cast(), 1) }, 1);
    assert_eq!(b[0], 1, "the child's vgem mapping showed other bytes");
    assert_eq!(exports(), 1);
    assert!(bufinfo().contains("vgem"), "{}", bufinfo());
    // SAFETY: the child forked above.
    unsafe {
        assert_eq!(libc::kill(pid, libc::SIGKILL), 0);
        let mut status = 0;
        assert_eq!(libc::waitpid(pid, &mut status, 0), pid);
        libc::close(pipe[0]);
    }
    assert_eq!(exports(), 0);
    assert!(idle());
    // The device is free for the next opener.
    let d = Device::open_compute(0).unwrap();
    assert_eq!(d.dram_usage().unwrap().ctx_dram_mem, 0);
}
