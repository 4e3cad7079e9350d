//! In-guest tests of upstream's debugfs ABI (`accel/<parent>/`, `accel/<N>`,
//! `habanalabs/hl<N>`): `addr` + `data32`/`data64` through a host buffer's
//! and a DRAM handle's device VA, SRAM and DRAM physical addresses, the
//! exact sequence of libhlthunk's test harness on long-lived fds, the CB and
//! CS files, and what is refused.

use hlrs::{
    cs::{Cb, Cs},
    debugfs::{abi_dirs, DebugfsMem, Width},
    uapi::{GAUDI2_QUEUE_ID_PDMA_0_0, GAUDI2_QUEUE_ID_PDMA_1_0},
    Device, HostBuffer,
};
use hlrs_guest_tests::{debugfs, expect_errno, guest_only, oracle_walk};
use std::{
    fs::{File, OpenOptions},
    io::{Read, Write},
    os::unix::fs::FileExt,
    path::{Path, PathBuf},
};

const EINVAL: i32 = 22;
const EPERM: i32 = 1;
const ERANGE: i32 = 34;
const EIO: i32 = 5;
const EBUSY: i32 = 16;
const SRAM_BASE: u64 = 0x1000_FFFF_FD00_0000;
const SRAM_SIZE: u64 = 48 << 20;
const DRAM_PHYS: u64 = 0x1001_0000_0000_0000;
const HOST_VA: u64 = 0xFFF0_0000_0000_0000;
const PAGE: u64 = 0x3000_0000;

fn mem() -> DebugfsMem {
    DebugfsMem::new(0)
}

/// Every directory that reaches device 0's files: `accel/0`,
/// `habanalabs/hl0` and the DRM core's `accel/<parent device>`.
fn all_dirs() -> Vec<PathBuf> {
    let [by_minor, old] = abi_dirs(0);
    let parent = std::fs::read_link(&by_minor).expect("accel/0 is a link");
    let real = PathBuf::from("/sys/kernel/debug/accel").join(parent);
    assert!(real.join("data64").exists(), "{real:?}");
    vec![by_minor, old, real]
}

/// What simulated DRAM holds at `pa` (this module's own `dram` file).
fn dram_u64(pa: u64) -> u64 {
    std::fs::write(
        "/sys/kernel/debug/habanalabs_rs/0/dram",
        format!("read {pa:#x} 8"),
    )
    .unwrap();
    let text = debugfs(0, "dram");
    let hex = text.trim().split(':').nth(1).unwrap();
    let mut b = [0u8; 8];
    for (i, byte) in b.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap();
    }
    u64::from_le_bytes(b)
}

#[test]
fn files_and_paths() {
    guest_only!();
    for dir in all_dirs() {
        for f in [
            "addr",
            "data32",
            "data64",
            "mmu",
            "mmu_error",
            "userptr",
            "clk_gate",
            "memory_scrub",
            "memory_scrub_val",
            "dma_size",
            "data_dma",
        ] {
            assert!(dir.join(f).exists(), "{dir:?}/{f}");
        }
        // Upstream's modes.
        use std::os::unix::fs::PermissionsExt;
        for (f, mode) in [
            ("addr", 0o644),
            ("vm", 0o644),
            ("memory_scrub", 0o200),
            ("dma_size", 0o200),
            ("data_dma", 0o400),
        ] {
            let m = std::fs::metadata(dir.join(f)).unwrap().permissions().mode();
            assert_eq!(m & 0o777, mode, "{dir:?}/{f}");
        }
        // clk_gate accepts writes and reads empty, as upstream.
        std::fs::write(dir.join("clk_gate"), "0x0").unwrap();
        assert_eq!(std::fs::read_to_string(dir.join("clk_gate")).unwrap(), "");
    }
    std::fs::write(abi_dirs(0)[0].join("addr"), "0x1234abcd").unwrap();
    for dir in all_dirs() {
        let addr = std::fs::read_to_string(dir.join("addr")).unwrap();
        assert_eq!(addr, "0x000000001234abcd\n");
    }
    // `addr` is an x64 attribute: base 0, as kstrtoull(.., 0, ..).
    for (text, value) in [("4096", 0x1000u64), ("010", 8), ("0X10", 0x10)] {
        std::fs::write(abi_dirs(0)[0].join("addr"), text).unwrap();
        let addr = std::fs::read_to_string(abi_dirs(0)[0].join("addr")).unwrap();
        assert_eq!(addr, format!("0x{value:016x}\n"), "{text}");
    }
}

#[test]
fn host_buffer_through_its_device_va() {
    guest_only!();
    let d = Device::open_compute(0).unwrap();
    let mut buf = vec![0u64; 3 * 512];
    for (i, v) in buf.iter_mut().enumerate() {
        *v = 0x0101_0101_0000_0000 | i as u64;
    }
    let addr = buf.as_ptr() as u64;
    let va = d.map_host(addr, 3 * 4096, 0, 0).unwrap();
    let m = mem();
    for i in [0usize, 1, 511, 512, 1000, 1535] {
        let at = va + 8 * i as u64;
        assert_eq!(m.peek(at, Width::W64).unwrap(), buf[i]);
        assert_eq!(m.peek(at, Width::W32).unwrap(), buf[i] & 0xffff_ffff);
        // The process writes, debugfs reads.
        // SAFETY: a plain write to our own buffer, which the device maps.
        unsafe { std::ptr::write_volatile(&mut buf[i], 0xdead_0000 + i as u64) };
        assert_eq!(m.peek(at, Width::W64).unwrap(), 0xdead_0000 + i as u64);
        // Debugfs writes, the process reads.
        m.poke(at, 0x5a5a_0000_1111_0000 | i as u64, Width::W64)
            .unwrap();
        // SAFETY: as above.
        let now = unsafe { std::ptr::read_volatile(&buf[i]) };
        assert_eq!(now, 0x5a5a_0000_1111_0000 | i as u64);
        m.poke(at + 4, 0x7777_7777, Width::W32).unwrap();
        // SAFETY: as above.
        let now = unsafe { std::ptr::read_volatile(&buf[i]) };
        assert_eq!(now >> 32, 0x7777_7777);
    }
    // Every path gives the same answer.
    let answers: Vec<u64> = all_dirs()
        .into_iter()
        .map(|dir| DebugfsMem::at(dir).peek(va + 8, Width::W64).unwrap())
        .collect();
    assert!(answers.iter().all(|a| *a == buf[1]), "{answers:x?}");
    // Misaligned, past the mapping, after UNMAP: refused.
    expect_errno(m.peek(va + 4, Width::W64), EINVAL);
    d.unmap(va).unwrap();
    expect_errno(m.peek(va, Width::W64), EINVAL);
    expect_errno(m.poke(va, 1, Width::W64), EINVAL);
    drop(buf);
}

#[test]
fn dram_handle_through_its_device_va() {
    guest_only!();
    let d = Device::open_compute(0).unwrap();
    let h = d.alloc(2 * PAGE, 0).unwrap();
    let va = d.map(h, 0, 0).unwrap();
    let m = mem();
    for off in [0u64, 8, PAGE - 8, PAGE, 2 * PAGE - 8] {
        let value = 0x1234_5678_0000_0000 | off;
        m.poke(va + off, value, Width::W64).unwrap();
        assert_eq!(m.peek(va + off, Width::W64).unwrap(), value);
        // The oracle's physical address holds it, and so does data64 there.
        let pa = oracle_walk(0, va + off).expect("mapped").0;
        assert_eq!(dram_u64(pa), value);
        assert_eq!(m.peek(pa, Width::W64).unwrap(), value);
        m.poke(pa, !value, Width::W64).unwrap();
        assert_eq!(m.peek(va + off, Width::W64).unwrap(), !value);
    }
    expect_errno(m.peek(va + 2 * PAGE, Width::W64), EINVAL);
    // vm: the mapping with its size and handle.
    let vm = std::fs::read_to_string(abi_dirs(0)[0].join("vm")).unwrap();
    let row = format!("    0x{va:<14x}      {:<10}       {h:<4}", 2 * PAGE);
    assert!(vm.contains("ctx asid: ") && vm.contains(&row), "{vm}");
    d.unmap(va).unwrap();
    expect_errno(m.peek(va, Width::W32), EINVAL);
    d.free(h).unwrap();
}

#[test]
fn sram_round_trips_and_is_zeroed_for_each_context() {
    guest_only!();
    let m = mem();
    let top = SRAM_BASE + SRAM_SIZE;
    for (at, v) in [
        (SRAM_BASE, 0x1122_3344_5566_7788u64),
        (top - 8, 0xfeed_beef),
    ] {
        m.poke(at, v, Width::W64).unwrap();
        assert_eq!(m.peek(at, Width::W64).unwrap(), v);
    }
    m.poke(SRAM_BASE + 4, 0xabcd_ef01, Width::W32).unwrap();
    assert_eq!(
        m.peek(SRAM_BASE, Width::W64).unwrap(),
        0xabcd_ef01_5566_7788
    );
    assert_eq!(m.peek(SRAM_BASE + 4, Width::W32).unwrap(), 0xabcd_ef01);
    // Below SRAM nothing; right above it DRAM begins.
    expect_errno(m.peek(SRAM_BASE - 4, Width::W32), EINVAL);
    assert_eq!(top, DRAM_PHYS);
    // HW_IP_INFO describes it.
    let d = Device::open_compute(0).unwrap();
    let hw = d.hw_ip_info().unwrap();
    assert_eq!(hw.sram_base_address, SRAM_BASE);
    assert_eq!(u64::from(hw.sram_size), SRAM_SIZE);
    assert_eq!(hw.edma_enabled_mask, 0xFF);
    // A context came and went: the next one finds SRAM zeroed.
    drop(d);
    let d = Device::open_compute(0).unwrap();
    assert_eq!(m.peek(SRAM_BASE, Width::W64).unwrap(), 0);
    assert_eq!(m.peek(top - 8, Width::W64).unwrap(), 0);
    drop(d);
}

#[test]
fn refused_without_a_splat() {
    guest_only!();
    let m = mem();
    // No compute context: no device VA is mapped.
    expect_errno(m.peek(HOST_VA, Width::W64), EINVAL);
    let d = Device::open_compute(0).unwrap();
    // An unmapped VA of each range, wild addresses.
    for addr in [
        HOST_VA,
        0xFFF0_8000_0000_0000,
        0x1001_0018_0000_0000,
        0,
        0x1234,
        u64::MAX - 7,
        SRAM_BASE - 8,
    ] {
        expect_errno(m.peek(addr, Width::W64), EINVAL);
        expect_errno(m.poke(addr, 1, Width::W32), EINVAL);
    }
    // The driver's own DRAM (page tables) is read-only here.
    m.peek(DRAM_PHYS, Width::W64).unwrap();
    expect_errno(m.poke(DRAM_PHYS, 1, Width::W64), EPERM);
    // Malformed input.
    let [dir, _] = abi_dirs(0);
    for bad in ["zz", "0x", "1 2", "-1", "08", "ff"] {
        expect_errno(std::fs::write(dir.join("addr"), bad), EINVAL);
    }
    expect_errno(
        std::fs::write(dir.join("addr"), "0x1_0000_0000_0000_0000"),
        EINVAL,
    );
    expect_errno(
        std::fs::write(dir.join("addr"), "18446744073709551616"),
        ERANGE,
    );
    m.poke(SRAM_BASE, 0, Width::W32).unwrap();
    expect_errno(std::fs::write(dir.join("data32"), "0x100000000"), ERANGE);
    expect_errno(std::fs::write(dir.join("mmu"), "1 1234"), EINVAL);
    expect_errno(std::fs::write(dir.join("mmu_error"), "5"), EINVAL);
    expect_errno(std::fs::read_to_string(dir.join("mmu_error")), EINVAL);
    drop(d);
}

#[test]
fn mmu_and_userptr_files() {
    guest_only!();
    let d = Device::open_compute(0).unwrap();
    let buf = vec![1u8; 2 * 4096];
    let addr = buf.as_ptr() as u64;
    let va = d.map_host(addr, 4096, 0, 0).unwrap();
    let [dir, _] = abi_dirs(0);
    let userptr = std::fs::read_to_string(dir.join("userptr")).unwrap();
    assert!(userptr.contains(&format!("0x{addr:<14x}")), "{userptr}");
    assert!(userptr.contains("DMA_BIDIRECTIONAL"), "{userptr}");
    // userptr_lookup: the physical (DMA) address of a byte of the buffer.
    std::fs::write(dir.join("userptr_lookup"), format!("{:#x}", addr + 100)).unwrap();
    let lookup = std::fs::read_to_string(dir.join("userptr_lookup")).unwrap();
    let dma = hlrs_guest_tests::phys_of(addr + 100);
    assert!(lookup.contains(&format!("0x{dma:<16x}")), "{lookup}");
    std::fs::write(dir.join("userptr_lookup"), "0x10").unwrap();
    assert_eq!(
        std::fs::read_to_string(dir.join("userptr_lookup")).unwrap(),
        ""
    );
    // The walk of the context's ASID; the oracle agrees.
    let asid: u32 = debugfs(0, "mmu")
        .lines()
        .find_map(|l| l.strip_prefix("asid:"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    std::fs::write(dir.join("mmu"), format!("{asid} {va:#x}")).unwrap();
    let walk = std::fs::read_to_string(dir.join("mmu")).unwrap();
    // Upstream's phys_addr is the device's view: the bus address.
    let pa = hlrs_guest_tests::oracle_walk_bus(0, va).unwrap().0;
    assert!(
        walk.starts_with(&format!(
            "asid: {asid}, virt_addr: {va:#x}, phys_addr: {pa:#x}\n"
        )),
        "{walk}"
    );
    assert!(walk.contains("hop0_addr: 0x"), "{walk}");
    // Each hop: its address, the PTE's address in it and the PTE, as
    // upstream; the leaf PTE holds the page the oracle reached.
    let hops = walk.matches("_pte_addr: 0x").count();
    assert!(hops >= 2, "{walk}");
    for i in 0..hops {
        for key in ["addr", "pte_addr", "pte"] {
            assert!(walk.contains(&format!("\nhop{i}_{key}: 0x")), "{walk}");
        }
    }
    let leaf: u64 = walk
        .lines()
        .find_map(|l| l.strip_prefix(&format!("hop{}_pte: 0x", hops - 1)))
        .map(|h| u64::from_str_radix(h, 16).unwrap())
        .unwrap();
    assert_eq!(leaf & !0xfff, pa & !0xfff, "{walk}");
    // Any other ASID but the kernel's names the compute context, as
    // upstream (only printed); the kernel context has no tables here.
    std::fs::write(dir.join("mmu"), format!("{} {va:#x}\n", asid + 1)).unwrap();
    let other = std::fs::read_to_string(dir.join("mmu")).unwrap();
    assert!(
        other.starts_with(&format!(
            "asid: {}, virt_addr: {va:#x}, phys_addr: {pa:#x}\n",
            asid + 1
        )),
        "{other}"
    );
    std::fs::write(dir.join("mmu"), format!("0 {va:#x}")).unwrap();
    assert_eq!(std::fs::read_to_string(dir.join("mmu")).unwrap(), "");
    d.unmap(va).unwrap();
    drop(buf);
}

/// With several devices (the second pass loads four): a VA mapped by device
/// 1's context is not device 0's.
#[test]
fn another_devices_va_is_refused() {
    guest_only!();
    if hlrs::device_indices().unwrap().len() < 2 {
        eprintln!("one device: skipped");
        return;
    }
    let d0 = Device::open_compute(0).unwrap();
    let d1 = Device::open_compute(1).unwrap();
    let buf = vec![9u64; 512];
    let va = d1.map_host(buf.as_ptr() as u64, 4096, 0, 0).unwrap();
    assert_eq!(DebugfsMem::new(1).peek(va, Width::W64).unwrap(), 9);
    expect_errno(mem().peek(va, Width::W64), EINVAL);
    let h = d1.alloc(PAGE, 0).unwrap();
    let dva = d1.map(h, 0, 0).unwrap();
    DebugfsMem::new(1).poke(dva, 5, Width::W64).unwrap();
    expect_errno(mem().peek(dva, Width::W64), EINVAL);
    d1.unmap(dva).unwrap();
    d1.free(h).unwrap();
    d1.unmap(va).unwrap();
    drop((d0, d1, buf));
}

#[test]
fn dma_size_reads_a_dram_va_and_sram_into_data_dma() {
    guest_only!();
    let m = mem();
    // SRAM needs no context.
    m.poke(SRAM_BASE + 4096 - 8, 0x0807_0605_0403_0201, Width::W64)
        .unwrap();
    m.poke(SRAM_BASE + 4096, 0x100f_0e0d_0c0b_0a09, Width::W64)
        .unwrap();
    let got = m.dma_read(SRAM_BASE + 4096 - 5, 10).unwrap();
    assert_eq!(got, [4, 5, 6, 7, 8, 9, 10, 11, 12, 13]);
    // A DRAM VA needs the open context's mapping.
    let va0 = 0x1001_4000_0000_0000u64;
    expect_errno(m.dma_read(va0, 8), EIO);
    let d = Device::open_compute(0).unwrap();
    let h = d.alloc(2 * PAGE, 0).unwrap();
    let va = d.map(h, 0, 0).unwrap();
    for (i, off) in [PAGE - 16, PAGE - 8, PAGE, PAGE + 8].iter().enumerate() {
        m.poke(va + off, 0x1111_1111_1111_1111 * (i as u64 + 1), Width::W64)
            .unwrap();
    }
    let got = m.dma_read(va + PAGE - 16, 32).unwrap();
    let want: Vec<u8> = (1u8..=4).flat_map(|i| [i * 0x11; 8]).collect();
    assert_eq!(got, want);
    // The blob stays until the next dma_size write; all paths serve it.
    for dir in all_dirs() {
        assert_eq!(std::fs::read(dir.join("data_dma")).unwrap(), want);
    }
    // 1 MiB across the two pages (each elsewhere in DRAM).
    let big = m.dma_read(va + PAGE - (512 << 10), 1 << 20).unwrap();
    assert_eq!(big.len(), 1 << 20);
    assert_eq!(&big[(512 << 10) - 16..(512 << 10) + 16], &want[..]);
    // Refused: size 0, over 128 MiB, past the device's memory, a host VA;
    // an unmapped page fails the read (EIO).
    expect_errno(m.dma_read(va, 0), EINVAL);
    expect_errno(m.dma_read(va, (128 << 20) + 1), EINVAL);
    expect_errno(m.dma_read(SRAM_BASE + SRAM_SIZE - 4, 8), EINVAL);
    expect_errno(m.dma_read(HOST_VA, 8), EINVAL);
    expect_errno(m.dma_read(DRAM_PHYS, 8), EINVAL);
    expect_errno(m.dma_read(va + 2 * PAGE - 8, 16), EIO);
    let [dir, _] = abi_dirs(0);
    expect_errno(std::fs::write(dir.join("dma_size"), "zz"), EINVAL);
    expect_errno(std::fs::write(dir.join("dma_size"), "0x100000000"), ERANGE);
    d.unmap(va).unwrap();
    expect_errno(m.dma_read(va, 8), EIO);
    d.free(h).unwrap();
}

#[test]
fn memory_scrub_fills_user_dram_only_without_a_context() {
    guest_only!();
    let m = mem();
    let [dir, _] = abi_dirs(0);
    {
        let _d = Device::open_compute(0).unwrap();
        expect_errno(m.scrub(0x5a), EBUSY);
    }
    m.scrub(0xa5a5_0000_0000_5a5a).unwrap();
    let val = std::fs::read_to_string(dir.join("memory_scrub_val")).unwrap();
    assert_eq!(val, "0xa5a5000000005a5a\n");
    // A new allocation reads as the pattern (upstream does not clear on ALLOC),
    // through its VA and through DMA.
    let d = Device::open_compute(0).unwrap();
    let h = d.alloc(PAGE, 0).unwrap();
    let va = d.map(h, 0, 0).unwrap();
    assert_eq!(m.peek(va + 64, Width::W64).unwrap(), 0xa5a5_0000_0000_5a5a);
    assert_eq!(m.peek(va + 68, Width::W32).unwrap(), 0xa5a5_0000);
    let pa = oracle_walk(0, va).expect("mapped").0;
    assert_eq!(dram_u64(pa + 8), 0xa5a5_0000_0000_5a5a);
    // The page tables (below the user base) were not touched: still mapped.
    assert_eq!(
        m.dma_read(va, 8).unwrap(),
        0xa5a5_0000_0000_5a5au64.to_le_bytes()
    );
    d.unmap(va).unwrap();
    d.free(h).unwrap();
    drop(d);
    // Back to zeros for the tests that follow.
    m.scrub(0).unwrap();
    let d = Device::open_compute(0).unwrap();
    let h = d.alloc(PAGE, 0).unwrap();
    let va = d.map(h, 0, 0).unwrap();
    assert_eq!(m.peek(va + 64, Width::W64).unwrap(), 0);
    d.unmap(va).unwrap();
    d.free(h).unwrap();
}

#[test]
fn vm_lists_mappings_hw_blocks_allocations_and_va_ranges() {
    guest_only!();
    let d = Device::open_compute(0).unwrap();
    let h = d.alloc(2 * PAGE, 0).unwrap();
    let va = d.map(h, 0, 0).unwrap();
    let buf = vec![0u8; 8192];
    let hva = d.map_host(buf.as_ptr() as u64, 8192, 0, 0).unwrap();
    let vm = std::fs::read_to_string(abi_dirs(0)[0].join("vm")).unwrap();
    assert!(
        vm.contains(&format!("    0x{hva:<14x}      {:<10}\n", 8192)),
        "{vm}"
    );
    assert!(
        vm.contains(&format!("\nhandle: {h}\npage size: {PAGE}\n")),
        "{vm}"
    );
    // The allocation's two pages, as the oracle sees them.
    for off in [0, PAGE] {
        let pa = oracle_walk(0, va + off).expect("mapped").0;
        assert!(vm.contains(&format!("    0x{pa:<14x}\n")), "{pa:#x}: {vm}");
    }
    // Three VA ranges; the DRAM one has a hole where the mapping is.
    for i in 0..3 {
        assert!(vm.contains(&format!("   va_range {i}\n")), "{vm}");
    }
    let dram_range = vm.split("   va_range 2\n").nth(1).unwrap();
    assert!(
        dram_range
            .lines()
            .any(|l| l.contains(&format!("- {:#x} (", va - 1))
                || l.trim_start()
                    .starts_with(&format!("{:#x} -", va + 2 * PAGE))),
        "{dram_range}"
    );
    d.unmap(hva).unwrap();
    d.unmap(va).unwrap();
    d.free(h).unwrap();
    drop(buf);
}

/// `addr` as libhlthunk's harness writes it: `"0x%lx"` and its NUL, in one
/// `write` of `strlen + 1` bytes (`hltests_debugfs_read/write[64]`).
fn harness_set_addr(addr_fd: &File, addr: u64) {
    let text = format!("0x{addr:x}\0");
    assert_eq!((&*addr_fd).write(text.as_bytes()).unwrap(), text.len());
}

/// `RREG32`/`RREG64`: set `addr`, then `pread(data_fd, buf, 64, 0)` and
/// `strtoul(buf, NULL, 16)`.
fn harness_read(addr_fd: &File, data_fd: &File, addr: u64) -> u64 {
    harness_set_addr(addr_fd, addr);
    let mut buf = [0u8; 64];
    let n = data_fd.read_at(&mut buf, 0).unwrap();
    let text = std::str::from_utf8(&buf[..n]).unwrap();
    assert!(text.starts_with("0x") && text.ends_with('\n'), "{text:?}");
    u64::from_str_radix(text.trim().trim_start_matches("0x"), 16).unwrap()
}

/// `WREG32`/`WREG64`: set `addr`, then `write(data_fd, "0x%x", strlen + 1)`.
fn harness_write(addr_fd: &File, data_fd: &File, addr: u64, value: u64) {
    harness_set_addr(addr_fd, addr);
    let text = format!("0x{value:x}\0");
    assert_eq!((&*data_fd).write(text.as_bytes()).unwrap(), text.len());
}

/// The harness's fds, opened once, before any address is written:
/// `addr` write-only, `data32`, `data64` and `clk_gate` read-write.
struct HarnessFds {
    addr: File,
    data32: File,
    data64: File,
    clk_gate: File,
}

impl HarnessFds {
    fn open(dir: &Path) -> Self {
        let rw = |f: &str| {
            OpenOptions::new()
                .read(true)
                .write(true)
                .open(dir.join(f))
                .unwrap_or_else(|e| panic!("{f}: {e}"))
        };
        Self {
            addr: OpenOptions::new()
                .write(true)
                .open(dir.join("addr"))
                .unwrap(),
            data32: rw("data32"),
            data64: rw("data64"),
            clk_gate: rw("clk_gate"),
        }
    }

    fn rreg32(&self, addr: u64) -> u32 {
        harness_read(&self.addr, &self.data32, addr) as u32
    }

    fn rreg64(&self, addr: u64) -> u64 {
        harness_read(&self.addr, &self.data64, addr)
    }

    fn wreg32(&self, addr: u64, v: u32) {
        harness_write(&self.addr, &self.data32, addr, u64::from(v));
    }

    fn wreg64(&self, addr: u64, v: u64) {
        harness_write(&self.addr, &self.data64, addr, v);
    }
}

/// One LIN_DMA of `len` bytes from `src` to `dst` (device addresses), run
/// from a CB in a host buffer of its own on PDMA 0, waited for.
fn dma(d: &Device, src: u64, dst: u64, len: u32) {
    let cb = Cb::new().lin_dma(src, dst, len);
    let buf = cb.to_host_buffer().unwrap();
    let va = d.map_host(buf.addr(), buf.len() as u64, 0, 0).unwrap();
    d.run_cb(GAUDI2_QUEUE_ID_PDMA_0_0, va, cb.len(), 30_000_000)
        .unwrap();
    d.unmap(va).unwrap();
}

/// Write the values in `vals` (little-endian u64s) at `at` by a DMA from a
/// host buffer, read them back through the harness's fds, write new ones
/// through the fds and DMA them back to the host: what the device wrote,
/// debugfs reads, and what debugfs wrote, the device reads.
fn round_trip_through_the_device(d: &Device, fds: &HarnessFds, at: u64, seed: u64) {
    let mut host = HostBuffer::new(4096).unwrap();
    let host_va = d.map_host(host.addr(), 4096, 0, 0).unwrap();
    for (i, w) in host.as_mut_slice()[..64].chunks_mut(8).enumerate() {
        w.copy_from_slice(&(seed.wrapping_mul(i as u64 + 1) ^ 0x5a5a).to_le_bytes());
    }
    dma(d, host_va, at, 64);
    let word = |h: &HostBuffer, i: usize| {
        u64::from_le_bytes(h.as_slice()[i * 8..i * 8 + 8].try_into().unwrap())
    };
    for i in 0..8 {
        assert_eq!(
            fds.rreg64(at + 8 * i as u64),
            word(&host, i),
            "{at:#x} + {i}"
        );
        assert_eq!(
            fds.rreg32(at + 8 * i as u64 + 4),
            (word(&host, i) >> 32) as u32
        );
    }
    fds.wreg64(at + 8, 0x1122_3344_5566_7788 ^ seed);
    fds.wreg32(at + 16, 0xcafe_f00d);
    fds.wreg32(at + 20, 0x0bad_beef);
    // Read back through the same fds, then through the device.
    assert_eq!(fds.rreg64(at + 8), 0x1122_3344_5566_7788 ^ seed);
    assert_eq!(fds.rreg64(at + 16), 0x0bad_beef_cafe_f00d);
    host.as_mut_slice()[..64].fill(0);
    dma(d, at, host_va, 64);
    assert_eq!(word(&host, 1), 0x1122_3344_5566_7788 ^ seed);
    assert_eq!(word(&host, 2), 0x0bad_beef_cafe_f00d);
    d.unmap(host_va).unwrap();
}

#[test]
fn libhlthunk_harness_sequence_on_long_lived_fds() {
    guest_only!();
    let d = Device::open_compute(0).unwrap();
    let [_, dir] = abi_dirs(0);
    // The harness's group setup: addr is 0, then the fds are opened.
    std::fs::write(dir.join("addr"), "0\n").unwrap();
    let fds = HarnessFds::open(&dir);
    // clk_gate reads empty and takes "0" (the harness saves and restores it).
    let mut b = [0u8; 64];
    assert_eq!(fds.clk_gate.read_at(&mut b, 0).unwrap(), 0);
    assert_eq!((&fds.clk_gate).write(b"0\0").unwrap(), 2);

    // Host memory through a userptr MAP: what the process wrote, debugfs
    // reads, and the other way round.
    let mut buf = HostBuffer::new(2 * 4096).unwrap();
    for (i, w) in buf.as_mut_slice().chunks_mut(8).enumerate() {
        w.copy_from_slice(&(0x0101_0000_0000_0000u64 | i as u64).to_le_bytes());
    }
    let hva = d.map_host(buf.addr(), 2 * 4096, 0, 0).unwrap();
    for i in [0u64, 1, 511, 512, 1023] {
        assert_eq!(fds.rreg64(hva + 8 * i), 0x0101_0000_0000_0000 | i);
        assert_eq!(fds.rreg32(hva + 8 * i), i as u32);
        assert_eq!(fds.rreg32(hva + 8 * i + 4), 0x0101_0000);
    }
    fds.wreg64(hva + 4096, 0xfeed_face_dead_beef);
    fds.wreg32(hva + 4104, 0x1234_5678);
    assert_eq!(
        &buf.as_slice()[4096..4104],
        &0xfeed_face_dead_beefu64.to_le_bytes()
    );
    assert_eq!(&buf.as_slice()[4104..4108], &0x1234_5678u32.to_le_bytes());
    // And through the device: a DMA into the host buffer, read by debugfs.
    round_trip_through_the_device(&d, &fds, hva + 1024, 3);

    // SRAM.
    round_trip_through_the_device(&d, &fds, SRAM_BASE + 0x10_0000, 5);
    // DRAM through a mapped handle, and at its physical address.
    let h = d.alloc(PAGE, 0).unwrap();
    let dva = d.map(h, 0, 0).unwrap();
    round_trip_through_the_device(&d, &fds, dva + 0x2000, 7);
    let pa = oracle_walk(0, dva + 0x2008).expect("mapped").0;
    assert_eq!(fds.rreg64(pa), fds.rreg64(dva + 0x2008));
    fds.wreg64(pa, 0x0123_4567_89ab_cdef);
    assert_eq!(fds.rreg64(dva + 0x2008), 0x0123_4567_89ab_cdef);

    // A read at a nonzero offset is end of file, on both data files.
    for f in [&fds.data32, &fds.data64] {
        for off in [1u64, 4, 11, 4096] {
            assert_eq!(f.read_at(&mut b, off).unwrap(), 0, "offset {off}");
        }
    }
    // Each pread at 0 reads the memory of that moment.
    fds.wreg64(dva + 0x2008, 1);
    assert_eq!(fds.data64.read_at(&mut b, 0).unwrap(), 19);
    assert_eq!(&b[..19], b"0x0000000000000001\n");
    fds.wreg64(dva + 0x2008, 2);
    assert_eq!(fds.data64.read_at(&mut b, 0).unwrap(), 19);
    assert_eq!(&b[..19], b"0x0000000000000002\n");
    assert_eq!(fds.data32.read_at(&mut b, 0).unwrap(), 11);
    assert_eq!(&b[..11], b"0x00000002\n");
    // A short read takes the start; the rest is not served (offset != 0).
    let mut four = [0u8; 4];
    assert_eq!((&fds.data64).read(&mut four).unwrap(), 4);
    assert_eq!(&four, b"0x00");
    assert_eq!((&fds.data64).read(&mut b).unwrap(), 0);

    // `addr` reads back as `0x%016llx\n`, continued from at other offsets.
    let mut addr_r = File::open(dir.join("addr")).unwrap();
    let want = format!("0x{:016x}\n", dva + 0x2008);
    let mut text = String::new();
    addr_r.read_to_string(&mut text).unwrap();
    assert_eq!(text, want);
    assert_eq!(addr_r.read_at(&mut b, 2).unwrap(), 17);
    assert_eq!(&b[..17], &want.as_bytes()[2..]);

    // Writes as kstrto* parses them: a newline and a NUL, a `+`, no `0x`;
    // not a leading blank; too much for 32 bits.
    for (text, v) in [
        (&b"0xab\n"[..], 0xabu64),
        (b"+cd\0", 0xcd),
        (b"ef", 0xef),
        (b"0x10\n\0ignored", 0x10),
    ] {
        assert_eq!(fds.data64.write_at(text, 0).unwrap(), text.len());
        assert_eq!(fds.rreg64(dva + 0x2008), v);
    }
    harness_set_addr(&fds.addr, dva + 0x2008);
    for bad in [&b" 0x1"[..], b"0x", b"1\n\n", b"-1", b"0x1 "] {
        expect_errno(fds.data64.write_at(bad, 0), EINVAL);
    }
    expect_errno(fds.data32.write_at(b"0x100000000\0", 0), ERANGE);
    expect_errno((&fds.addr).write(b" 0x10\0"), EINVAL);

    // In reset: reads and writes do nothing and return 0, as upstream's.
    let status = "/sys/kernel/debug/habanalabs_rs/0/status";
    std::fs::write(status, "in_reset").unwrap();
    let (r, w) = (
        fds.data64.read_at(&mut b, 0),
        fds.data64.write_at(b"0x5\0", 0),
    );
    std::fs::write(status, "operational").unwrap();
    assert_eq!((r.unwrap(), w.unwrap()), (0, 0));
    assert_eq!(fds.rreg64(dva + 0x2008), 0x10);

    // An address nothing maps: the read fails, the fds stay usable.
    harness_set_addr(&fds.addr, 0x1234);
    expect_errno(fds.data64.read_at(&mut b, 0), EINVAL);
    assert_eq!(fds.rreg64(dva + 0x2008), 0x10);

    d.unmap(dva).unwrap();
    d.free(h).unwrap();
    d.unmap(hva).unwrap();
    drop(buf);
}

#[test]
fn files_without_a_read_or_a_write_answer_as_upstream() {
    guest_only!();
    let [dir, _] = abi_dirs(0);
    let mut b = [0u8; 16];
    for f in ["dma_size", "memory_scrub"] {
        let fd = OpenOptions::new().read(true).open(dir.join(f)).unwrap();
        expect_errno(fd.read_at(&mut b, 0), EINVAL);
    }
    for f in [
        "userptr",
        "vm",
        "command_buffers",
        "command_submission",
        "command_submission_jobs",
    ] {
        expect_errno(std::fs::write(dir.join(f), "1"), EINVAL);
    }
    // `mmu` takes at most 49 bytes.
    let long = format!("1 0x{}", "0".repeat(46));
    expect_errno(std::fs::write(dir.join("mmu"), long), EINVAL);
    std::fs::write(dir.join("mmu"), "1 0x10\n\0").unwrap();
}

/// The ASID of the open compute context (upstream's `vm` file).
fn open_asid(dir: &Path) -> u32 {
    let vm = std::fs::read_to_string(dir.join("vm")).unwrap();
    vm.lines()
        .find_map(|l| l.strip_prefix("ctx asid: "))
        .unwrap()
        .parse()
        .unwrap()
}

#[test]
fn command_buffers_and_submissions_render() {
    guest_only!();
    let [dir, _] = abi_dirs(0);
    let read = |f: &str| std::fs::read_to_string(dir.join(f)).unwrap();
    let d = Device::open_compute(0).unwrap();
    let asid = open_asid(&dir);
    for f in [
        "command_buffers",
        "command_submission",
        "command_submission_jobs",
    ] {
        assert_eq!(read(f), "", "{f}");
    }
    // Two CBs, the second mmapped: newest first.
    {
        let ca = d.command_buffer(100).unwrap();
        let cb = d.command_buffer(8192).unwrap();
        let _map = cb.mmap().unwrap();
        let (a, b) = (ca.handle(), cb.handle());
        let cbs = read("command_buffers");
        let head = "\n CB ID   CTX ID   CB size    CB RefCnt    mmap?   CS counter\n\
                    ---------------------------------------------------------------\n";
        let rows = format!(
            "   {b:03}        {asid}    0x00002000      2          1          0\n\
             \x20  {a:03}        {asid}    0x00001000      1          0          0\n\n"
        );
        assert_eq!(cbs, format!("{head}{rows}"));
    }
    assert_eq!(read("command_buffers"), "");

    // A CS that runs long on PDMA 0, then one with a job on each PDMA.
    let slow = (0..1000).fold(Cb::new(), |cb, i| {
        cb.memset(SRAM_BASE + (8 << 20), i, 32 << 20)
    });
    let nop = Cb::new().nop();
    let (slow_buf, nop_buf) = (
        slow.to_host_buffer().unwrap(),
        nop.to_host_buffer().unwrap(),
    );
    let slow_va = d
        .map_host(slow_buf.addr(), slow_buf.len() as u64, 0, 0)
        .unwrap();
    let nop_va = d
        .map_host(nop_buf.addr(), nop_buf.len() as u64, 0, 0)
        .unwrap();
    let pdma0 = GAUDI2_QUEUE_ID_PDMA_0_0;
    let pdma1 = GAUDI2_QUEUE_ID_PDMA_1_0;
    let first = Cs::new()
        .chunk(pdma0, slow_va, slow.len())
        .submit(&d)
        .unwrap();
    let second = Cs::new()
        .chunk(pdma0, nop_va, nop.len())
        .chunk(pdma1, nop_va, nop.len())
        .submit(&d)
        .unwrap();
    let (s1, s2) = (first.seq, second.seq);
    let css = read("command_submission");
    assert!(
        css.starts_with(
            "\n CS ID   CS TYPE   CTX ASID   CS RefCnt   Submitted    Completed\n\
             ----------------------------------------------------------------\n"
        ),
        "{css}"
    );
    // The second CS is listed first; its PDMA 1 job may have ended.
    let lines: Vec<&str> = css.lines().skip(3).collect();
    assert_eq!(lines.len(), 3, "{css}");
    assert_eq!(lines[2], "", "{css}");
    assert!(lines[0].starts_with(&format!("   {s2}        0          {asid}          ")));
    assert_eq!(
        lines[1],
        format!("   {s1}        0          {asid}          2           1            0")
    );
    let jobs = read("command_submission_jobs");
    let want = format!(
        "\n JOB ID   CS ID    CS TYPE    CTX ASID   JOB RefCnt   H/W Queue\n\
         ---------------------------------------------------------------\n\
         \x20  02      {s2}        0        {asid}          1           {pdma1}\n\
         \x20  01      {s2}        0        {asid}          1           {pdma0}\n\
         \x20  01      {s1}        0        {asid}          1           {pdma0}\n\n"
    );
    assert_eq!(jobs, want);
    // The close stops them; with no context nothing is listed.
    drop(d);
    drop((slow_buf, nop_buf));
    for f in [
        "command_buffers",
        "command_submission",
        "command_submission_jobs",
    ] {
        assert_eq!(read(f), "", "{f}");
    }
}
