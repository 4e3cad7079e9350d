//! In-guest tests of upstream's debugfs ABI (`accel/<parent>/`, `accel/<N>`,
//! `habanalabs/hl<N>`): `addr` + `data32`/`data64` through a host buffer's
//! and a DRAM handle's device VA, SRAM and DRAM physical addresses, and what
//! is refused.

use hlrs::{
    debugfs::{abi_dirs, DebugfsMem, Width},
    Device,
};
use hlrs_guest_tests::{debugfs, expect_errno, guest_only, oracle_walk};
use std::path::PathBuf;

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
    let pa = oracle_walk(0, va).unwrap().0;
    assert!(
        walk.starts_with(&format!(
            "asid: {asid}, virt_addr: {va:#x}, phys_addr: {pa:#x}\n"
        )),
        "{walk}"
    );
    assert!(walk.contains("hop0_addr: 0x"), "{walk}");
    // Another ASID has no tables here.
    std::fs::write(dir.join("mmu"), format!("{} {va:#x}", asid + 1)).unwrap();
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
