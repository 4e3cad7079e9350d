//! The compute node's mmap surface through the real device nodes: HW blocks
//! (MAP_BLOCK + mmap) and timestamp buffers (TS_ALLOC + mmap), as
//! libhlthunk's `hlthunk_get_hw_block` and
//! `hlthunk_allocate_timestamp_elements` use them.

use hlrs::{gaudi2, uapi::*, Device};
use hlrs_guest_tests::{debugfs, expect_errno, guest_only, spawn_hold};
use rustix::mm::{MapFlags, ProtFlags};

const EINVAL: i32 = 22;
const ENOMEM: i32 = 12;
const EBUSY: i32 = 16;
const ENODEV: i32 = 19;

/// MAP_BLOCK with the raw union, to check what is written back.
fn map_block_args(d: &Device, addr: u64) -> (std::io::Result<()>, HlMemArgs) {
    let mut a = HlMemArgs {
        arg0: addr,
        arg1: 0xffff_ffff_ffff_ffff,
        op: HL_MEM_OP_MAP_BLOCK,
        ..Default::default()
    };
    let rc = d.memory_args(&mut a);
    (rc, a)
}

#[test]
fn map_block_of_every_user_block_and_of_bad_addresses() {
    guest_only!();
    let d = Device::open_compute(0).unwrap();
    for (id, b) in gaudi2::user_blocks().iter().enumerate() {
        let addr = gaudi2::CFG_BASE + b.address;
        let (handle, size) = d.map_block(addr).unwrap();
        assert_eq!(
            handle,
            mmap_handle(id as u64, HL_MMAP_TYPE_BLOCK),
            "block {id}"
        );
        assert_eq!(u64::from(size), b.size);
        for off in [1u64, 4, 0x800] {
            let (rc, a) = map_block_args(&d, addr + off);
            expect_errno(rc, EINVAL);
            // Upstream writes 0 and 0 back on failure, and keeps `out.pad`.
            assert_eq!((a.out_u64(), a.out_block_size()), (0, 0));
            assert_eq!(a.arg1 >> 32, 0xffff_ffff);
        }
    }
    for bad in [0, gaudi2::CFG_BASE, u64::MAX] {
        expect_errno(d.map_block(bad), EINVAL);
    }
    // MAP_BLOCK is stateless: nothing was recorded.
    assert!(debugfs(0, "hw_blocks").contains("mappings: 0"));
}

#[test]
fn block_mmap_needs_the_exact_size_and_a_known_handle() {
    guest_only!();
    let d = Device::open_compute(0).unwrap();
    let addr = gaudi2::block_addr(4).unwrap(); // 32 KiB ARC DCCM
    let (h, size) = d.map_block(addr).unwrap();
    let size = size as usize;
    expect_errno(d.mmap_raw(h, size - 4096), EINVAL);
    expect_errno(d.mmap_raw(h, size + 4096), EINVAL);
    // An id past the table, and type bits that are none of the served ones.
    expect_errno(
        d.mmap_raw(mmap_handle(453, HL_MMAP_TYPE_BLOCK), 4096),
        EINVAL,
    );
    expect_errno(d.mmap_raw(mmap_handle(0, HL_MMAP_TYPE_CB), 4096), EINVAL);
    expect_errno(
        d.mmap_raw(mmap_handle(0, 0x8 << HL_MMAP_TYPE_SHIFT), 4096),
        EINVAL,
    );
    expect_errno(d.mmap_raw(0, 4096), EINVAL);
    assert!(debugfs(0, "hw_blocks").contains("mappings: 0"));
    // The control node has no mmap at all.
    let c = Device::open_control(0).unwrap();
    expect_errno(c.mmap_raw(h, size), ENODEV);
    // The exact size works.
    let block = d.map_hw_block(addr).unwrap();
    assert_eq!(block.len(), size);
    assert!(debugfs(0, "hw_blocks").contains("mappings: 1"));
}

#[test]
fn what_userspace_writes_the_driver_reads() {
    guest_only!();
    let d = Device::open_compute(0).unwrap();
    for id in [0usize, 70, 200, 452] {
        let block = d.map_hw_block(gaudi2::block_addr(id).unwrap()).unwrap();
        let off = block.len() - 4;
        let value = 0xa5a5_0000 | id as u32;
        block.write(off, value).unwrap();
        assert_eq!(block.read(off), Some(value));
        let regs = debugfs(0, "hw_blocks");
        let want = format!(
            "block {id} {:#x} +{off:#06x} = {value:#010x}",
            gaudi2::block_addr(id).unwrap()
        );
        assert!(regs.contains(&want), "{want} not in\n{regs}");
        // A second mapping of the same block sees the same registers.
        let again = d.map_hw_block(gaudi2::block_addr(id).unwrap()).unwrap();
        assert_eq!(again.read(off), Some(value));
        // Leave the registers clean for the other tests.
        block.write(off, 0).unwrap();
    }
}

#[test]
fn partial_then_full_munmap_of_a_block() {
    guest_only!();
    let d = Device::open_compute(0).unwrap();
    let (h, size) = d.map_block(gaudi2::block_addr(0).unwrap()).unwrap(); // 64 KiB
    let size = size as usize;
    let addr = d.mmap_raw(h, size).unwrap();
    assert!(debugfs(0, "hw_blocks").contains(", 1 vma(s)"));
    // Unmap the middle: two pieces remain, one mapping.
    // SAFETY: the range is part of the mapping made above, which nothing else uses.
    unsafe { d.munmap(addr + 0x4000, 0x4000) }.unwrap();
    let list = debugfs(0, "hw_blocks");
    assert!(
        list.contains("mappings: 1") && list.contains(", 2 vma(s)"),
        "{list}"
    );
    // SAFETY: as above.
    unsafe { d.munmap(addr, 0x4000) }.unwrap();
    assert!(debugfs(0, "hw_blocks").contains(", 1 vma(s)"));
    // SAFETY: as above: the rest of the mapping.
    unsafe { d.munmap(addr + 0x8000, size - 0x8000) }.unwrap();
    assert!(debugfs(0, "hw_blocks").contains("mappings: 0"));
}

#[test]
fn an_mremap_move_keeps_the_mapping_accounted() {
    guest_only!();
    use rustix::mm::{mremap_fixed, MremapFlags};
    let d = Device::open_compute(0).unwrap();
    let (h, size) = d.map_block(gaudi2::block_addr(5).unwrap()).unwrap();
    let size = size as usize;
    let addr = d.mmap_raw(h, size).unwrap();
    let target = d
        .mmap_raw(mmap_handle(6, HL_MMAP_TYPE_BLOCK), size)
        .unwrap();
    // SAFETY: both ranges are mappings made above; `target` is replaced.
    let moved = unsafe {
        mremap_fixed(
            addr as *mut _,
            size,
            size,
            MremapFlags::MAYMOVE,
            target as *mut _,
        )
    }
    .unwrap() as u64;
    assert_eq!(moved, target);
    // The moved mapping is still one live mapping of block 5 (upstream frees
    // its record here, and the moved vma then points to freed memory).
    let list = debugfs(0, "hw_blocks");
    assert!(
        list.contains("mappings: 1") && list.contains("block 5 at"),
        "{list}"
    );
    // SAFETY: the moved mapping, used by nothing else.
    unsafe { d.munmap(moved, size) }.unwrap();
    assert!(debugfs(0, "hw_blocks").contains("mappings: 0"));
}

/// Whether a forked child has anything mapped at `[addr, addr + len)`: the
/// child asks `madvise` (ENOMEM for an unmapped range) and exits with the
/// answer.
fn child_has_mapping(addr: u64, len: usize) -> bool {
    // SAFETY: the child only makes system calls (async-signal safe) and
    // leaves with `_exit`.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork: {}", std::io::Error::last_os_error());
    if pid == 0 {
        // SAFETY: a system call on a range of this (child) process.
        let rc = unsafe { libc::madvise(addr as *mut _, len, libc::MADV_NORMAL) };
        let errno = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
        let code = match (rc, errno) {
            (0, _) => 1,
            (_, ENOMEM) => 0,
            _ => 2,
        };
        // SAFETY: ends the child without running the parent's destructors.
        unsafe { libc::_exit(code) };
    }
    let mut status = 0;
    // SAFETY: waits for the child forked above.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    assert!(libc::WIFEXITED(status));
    match libc::WEXITSTATUS(status) {
        0 => false,
        1 => true,
        other => panic!("madvise in the child failed unexpectedly ({other})"),
    }
}

#[test]
fn fork_does_not_copy_block_or_timestamp_mappings() {
    guest_only!();
    let d = Device::open_compute(0).unwrap();
    let block = d.map_hw_block(gaudi2::block_addr(8).unwrap()).unwrap();
    let ts = d.timestamp_buffer(100).unwrap();
    let host = hlrs::HostBuffer::new(4096).unwrap();
    // VM_DONTCOPY: the child has neither; an ordinary mapping it has.
    assert!(!child_has_mapping(block.addr(), block.len()));
    assert!(!child_has_mapping(ts.addr(), ts.mapped_len()));
    assert!(child_has_mapping(host.addr(), host.len()));
    assert!(debugfs(0, "hw_blocks").contains("mappings: 1"));
}

#[test]
fn closing_the_fd_with_a_live_block_mapping() {
    guest_only!();
    let d = Device::open_compute(0).unwrap();
    let (h, size) = d.map_block(gaudi2::block_addr(3).unwrap()).unwrap();
    let addr = d.mmap_raw(h, size as usize).unwrap();
    let alloc = d.alloc(1, 0).unwrap();
    drop(d);
    // The mapping keeps the file, and so the context, alive: the device is
    // still busy, and the mapping still works.
    expect_errno(Device::open_compute(0), EBUSY);
    assert!(debugfs(0, "hw_blocks").contains("mappings: 1"));
    let ctl = Device::open_control(0).unwrap();
    assert!(ctl.dram_usage().unwrap().dram_free_mem < ctl.hw_ip_info().unwrap().dram_size);
    // SAFETY: the mapping made above, used by nothing else.
    unsafe { Device::open_control(0).unwrap().munmap(addr, size as usize) }.unwrap();
    // The last munmap released the file: the context is gone.
    let d = Device::open_compute(0).unwrap();
    assert_eq!(d.dram_usage().unwrap().ctx_dram_mem, 0);
    assert_eq!(
        ctl.dram_usage().unwrap().dram_free_mem,
        ctl.hw_ip_info().unwrap().dram_size
    );
    expect_errno(d.free(alloc), EINVAL);
    assert!(debugfs(0, "hw_blocks").contains("mappings: 0"));
}

#[test]
fn ts_alloc_element_counts() {
    guest_only!();
    let d = Device::open_compute(0).unwrap();
    expect_errno(d.ts_alloc(0), EINVAL);
    expect_errno(d.ts_alloc(TS_MAX_ELEMENTS_NUM + 1), EINVAL);
    let one = d.ts_alloc(1).unwrap();
    assert_eq!(one, mmap_handle(1, HL_MMAP_TYPE_TS_BUFF));
    assert_eq!(one >> 63, 1);
    let big = d.ts_alloc(TS_MAX_ELEMENTS_NUM).unwrap();
    assert_eq!(big, mmap_handle(2, HL_MMAP_TYPE_TS_BUFF));
    // The per-file bound (64 MiB): a second buffer of the largest size does not fit.
    expect_errno(d.ts_alloc(TS_MAX_ELEMENTS_NUM), ENOMEM);
    let ts = debugfs(0, "ts_buffers");
    assert!(ts.contains("buffers: 2,"), "{ts}");
    // Failed allocations take no id: the next is 3.
    assert_eq!(
        d.ts_alloc(10).unwrap(),
        mmap_handle(3, HL_MMAP_TYPE_TS_BUFF)
    );
    // A big buffer maps whole: 8 MiB.
    let addr = d.mmap_raw(big, 8 << 20).unwrap();
    // SAFETY: the mapping made above, used by nothing else.
    unsafe { d.munmap(addr, 8 << 20) }.unwrap();
}

#[test]
fn ts_mmap_rules() {
    guest_only!();
    let d = Device::open_compute(0).unwrap();
    let h = d.ts_alloc(513).unwrap(); // 4104 bytes: two pages
    expect_errno(d.mmap_raw(h, 4096), EINVAL);
    expect_errno(d.mmap_raw(h, 3 * 4096), EINVAL);
    expect_errno(
        d.mmap_raw(mmap_handle(9, HL_MMAP_TYPE_TS_BUFF), 4096),
        EINVAL,
    );
    let addr = d.mmap_raw(h, 2 * 4096).unwrap();
    // One live mmap per buffer.
    expect_errno(d.mmap_raw(h, 2 * 4096), EINVAL);
    // What userspace writes, the driver reads.
    // SAFETY: element 512 of the live mapping (second page).
    unsafe { ((addr + 512 * 8) as *mut u64).write_volatile(0xfeed_face) };
    let ts = debugfs(0, "ts_buffers");
    assert!(
        ts.contains("[512]=0xfeedface") && ts.contains("1 mapped vma(s)"),
        "{ts}"
    );
    // A partial munmap keeps the mmap live; the last piece ends it.
    // SAFETY: parts of the mapping made above.
    unsafe { d.munmap(addr, 4096) }.unwrap();
    expect_errno(d.mmap_raw(h, 2 * 4096), EINVAL);
    // SAFETY: as above.
    unsafe { d.munmap(addr + 4096, 4096) }.unwrap();
    let again = d.mmap_raw(h, 2 * 4096).unwrap();
    // The data is still there: the buffer lives until the file is closed.
    // SAFETY: the new mapping.
    assert_eq!(
        unsafe { ((again + 512 * 8) as *const u64).read_volatile() },
        0xfeed_face
    );
    // SAFETY: as above.
    unsafe { d.munmap(again, 2 * 4096) }.unwrap();
}

#[test]
fn closing_the_fd_with_a_live_timestamp_mapping() {
    guest_only!();
    let alive0 = alive_buffers();
    let d = Device::open_compute(0).unwrap();
    let h = d.ts_alloc(16).unwrap();
    let addr = d.mmap_raw(h, 4096).unwrap();
    d.ts_alloc(16).unwrap(); // not mapped
    drop(d);
    // The mapping keeps the file, both buffers and the context.
    expect_errno(Device::open_compute(0), EBUSY);
    assert_eq!(alive_buffers(), alive0 + 2);
    // SAFETY: element 0 of the live mapping.
    unsafe { (addr as *mut u64).write_volatile(1) };
    // SAFETY: the mapping made above.
    unsafe { Device::open_control(0).unwrap().munmap(addr, 4096) }.unwrap();
    assert_eq!(alive_buffers(), alive0);
    let _d = Device::open_compute(0).unwrap();
    assert!(debugfs(0, "ts_buffers").contains("buffers: 0,"));
}

fn alive_buffers() -> u64 {
    let ts = debugfs(0, "ts_buffers");
    let line = ts.lines().next().unwrap();
    line.trim_start_matches("alive in the module: ")
        .parse()
        .unwrap()
}

#[test]
fn a_killed_process_with_blocks_and_timestamps_leaves_nothing() {
    guest_only!();
    let alive0 = alive_buffers();
    let mut child = spawn_hold(&[
        "--count",
        "1",
        "--size",
        "1",
        "--hw-block",
        "7",
        "--ts",
        "4096",
    ]);
    assert!(debugfs(0, "hw_blocks").contains("block 7 at"));
    assert!(debugfs(0, "ts_buffers").contains("id 1: 4096 element(s), 1 mapped vma(s)"));
    assert_eq!(alive_buffers(), alive0 + 1);
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(debugfs(0, "hw_blocks").contains("no open compute context"));
    assert_eq!(alive_buffers(), alive0);
    let d = Device::open_compute(0).unwrap();
    assert_eq!(d.dram_usage().unwrap().ctx_dram_mem, 0);
    assert!(debugfs(0, "hw_blocks").contains("mappings: 0"));
}

/// The registers of `ids`, written by one opener, then mapped again by the
/// next one: every register must read zero, but those the driver programs
/// for each context: a sync manager's `GLBL_ASID_NONE_SEC_PRIV` (+0x48 of
/// its GLBL block) holds the new opener's ASID on a device with a sync
/// manager (gaudi2_mmu_prepare).
fn assert_blocks_read_zero(d: &Device, ids: &[usize]) {
    let sm_glbl = |addr: u64| {
        (0..4).any(|dcore| addr == hlrs::sync::CFG_BASE + 0x411_E000 + dcore * 0x20_0000)
    };
    for &id in ids {
        let addr = gaudi2::block_addr(id).unwrap();
        let b = d.map_hw_block(addr).unwrap();
        for off in (0..b.len()).step_by(4) {
            if sm_glbl(addr) && off == 0x48 {
                continue;
            }
            assert_eq!(b.read(off), Some(0), "block {id} +{off:#x}");
        }
    }
}

#[test]
fn a_second_opener_reads_zeroed_block_registers() {
    guest_only!();
    let ids = [0usize, 4, 70, 452];
    {
        let d = Device::open_compute(0).unwrap();
        for &id in &ids {
            let b = d.map_hw_block(gaudi2::block_addr(id).unwrap()).unwrap();
            for off in [0, b.len() / 2, b.len() - 4] {
                b.write(off, 0x5eed_0000 | id as u32).unwrap();
            }
        }
        let regs = debugfs(0, "hw_blocks");
        assert!(regs.contains("backed blocks: 4 of"), "{regs}");
        assert!(regs.contains("= 0x5eed0046"), "{regs}");
    }
    // The context went with the fd: so did the registers it wrote.
    let regs = debugfs(0, "hw_blocks");
    assert!(
        regs.contains("backed blocks: 0 of") && !regs.contains("= 0x"),
        "{regs}"
    );
    let d = Device::open_compute(0).unwrap();
    assert_blocks_read_zero(&d, &ids);
}

#[test]
fn registers_of_a_mapping_that_outlived_its_fd_are_zeroed_for_the_next_opener() {
    guest_only!();
    let d = Device::open_compute(0).unwrap();
    let (h, size) = d.map_block(gaudi2::block_addr(3).unwrap()).unwrap();
    let size = size as usize;
    let addr = d.mmap_raw(h, size).unwrap();
    // SAFETY: the last register of the live mapping made above.
    unsafe { ((addr + size as u64 - 4) as *mut u32).write_volatile(0xdead_beef) };
    drop(d);
    // The mapping keeps the context: the register is still there.
    assert!(debugfs(0, "hw_blocks").contains("= 0xdeadbeef"));
    // SAFETY: the register is still mapped (as above).
    assert_eq!(
        unsafe { ((addr + size as u64 - 4) as *const u32).read_volatile() },
        0xdead_beef
    );
    // SAFETY: the mapping made above, used by nothing else.
    unsafe { Device::open_control(0).unwrap().munmap(addr, size) }.unwrap();
    // The last munmap ended the context, and its registers.
    assert!(debugfs(0, "hw_blocks").contains("backed blocks: 0 of"));
    let d = Device::open_compute(0).unwrap();
    assert_blocks_read_zero(&d, &[3]);
}

/// A raw `mmap` of the device fd with `flags` (`MAP_SHARED` or `MAP_PRIVATE`).
fn mmap_with(
    d: &Device,
    offset: u64,
    len: usize,
    prot: ProtFlags,
    flags: MapFlags,
) -> Result<u64, i32> {
    use std::os::fd::AsFd;
    // SAFETY: a new mapping at an address the kernel chooses; it aliases no
    // Rust object, and the callers unmap it.
    unsafe { rustix::mm::mmap(std::ptr::null_mut(), len, prot, flags, d.as_fd(), offset) }
        .map(|p| p as u64)
        .map_err(|e| e.raw_os_error())
}

#[test]
fn map_private_of_a_block_or_a_timestamp_buffer_is_refused() {
    guest_only!();
    let d = Device::open_compute(0).unwrap();
    let (block, size) = d.map_block(gaudi2::block_addr(4).unwrap()).unwrap();
    let ts = d.ts_alloc(16).unwrap();
    for (h, len) in [(block, size as usize), (ts, 4096)] {
        for prot in [ProtFlags::READ, ProtFlags::READ | ProtFlags::WRITE] {
            assert_eq!(
                mmap_with(&d, h, len, prot, MapFlags::PRIVATE),
                Err(EINVAL),
                "handle {h:#x} {prot:?}"
            );
        }
    }
    // Nothing was recorded or backed, nothing claimed the buffer's mmap.
    let regs = debugfs(0, "hw_blocks");
    assert!(
        regs.contains("mappings: 0") && regs.contains("backed blocks: 0 of"),
        "{regs}"
    );
    assert!(debugfs(0, "ts_buffers").contains("0 mapped vma(s)"));
    // The shared mappings work.
    for (h, len) in [(block, size as usize), (ts, 4096)] {
        let addr = mmap_with(
            &d,
            h,
            len,
            ProtFlags::READ | ProtFlags::WRITE,
            MapFlags::SHARED,
        )
        .unwrap();
        // SAFETY: the mapping made just above.
        unsafe { d.munmap(addr, len) }.unwrap();
    }
}

/// The offset `/proc/self/maps` shows for the mapping that starts at `addr`.
fn proc_maps_offset(addr: u64) -> u64 {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    let line = maps
        .lines()
        .find(|l| l.starts_with(&format!("{addr:x}-")))
        .unwrap_or_else(|| panic!("no mapping at {addr:#x} in\n{maps}"));
    let offset = line.split_whitespace().nth(2).unwrap();
    u64::from_str_radix(offset, 16).unwrap()
}

#[test]
fn proc_maps_shows_the_handle_of_a_block_mapping_not_a_physical_address() {
    guest_only!();
    let d = Device::open_compute(0).unwrap();
    let block = d.map_hw_block(gaudi2::block_addr(4).unwrap()).unwrap();
    assert_eq!(proc_maps_offset(block.addr()), block.handle());
    let ts = d.timestamp_buffer(16).unwrap();
    assert_eq!(proc_maps_offset(ts.addr()), ts.handle());
}
