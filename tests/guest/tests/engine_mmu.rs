//! The simulated Gaudi2's engine-side MMU (issue 22) through the real device
//! nodes: an engine access (debugfs `engine`, made as engine 0xffff) reaches
//! exactly the process's mapped host buffer or DRAM, through the device's own
//! walker, STLB and IOMMU; after UNMAP it faults; and with the UNMAP's
//! invalidation skipped on purpose (debugfs `skip_invalidations`) it goes
//! through the stale translation, which the model shows: an IOMMU fault for
//! host pages that are no longer DMA-mapped, a stale use for DRAM.

use hlrs::{Device, HostBuffer};
use hlrs_guest_tests::{debugfs, guest_only, phys_of};

/// The user ASID of the open compute context.
const ASID: u32 = 1;

fn engine(cmd: &str) -> std::io::Result<()> {
    std::fs::write("/sys/kernel/debug/habanalabs_rs/0/engine", cmd)
}

/// The engine's read of `len` bytes at `va` of the open context: the
/// `engine` file's text (translation, then bytes or the fault).
fn engine_read(va: u64, len: usize) -> String {
    engine(&format!("read {ASID} {va:#x} {len}")).unwrap();
    debugfs(0, "engine")
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A number after `label` in debugfs `stlb`.
fn stlb_count(label: &str) -> u64 {
    let text = debugfs(0, "stlb");
    let line = text
        .lines()
        .find(|l| l.contains(label))
        .unwrap_or_else(|| panic!("no {label} in: {text}"));
    let after = line.split(label).nth(1).unwrap();
    after.split_whitespace().next().unwrap().parse().unwrap()
}

fn skip_invalidations(n: u32) {
    std::fs::write(
        "/sys/kernel/debug/habanalabs_rs/0/skip_invalidations",
        n.to_string(),
    )
    .unwrap();
}

#[test]
fn engine_accesses_reach_the_mapped_host_buffer_and_fault_after_unmap() {
    guest_only!();
    skip_invalidations(0);
    let d = Device::open_compute(0).unwrap();
    let mut b = HostBuffer::new(8192).unwrap();
    b.as_mut_slice().fill(0x5A);
    let va = d.map_host(b.addr(), 8192, 0, 0).unwrap();
    // Across the buffer's page boundary.
    engine(&format!("write {ASID} {:#x} 0102030405060708", va + 4092)).unwrap();
    assert_eq!(
        &b.as_slice()[4090..4102],
        &[0x5A, 0x5A, 1, 2, 3, 4, 5, 6, 7, 8, 0x5A, 0x5A]
    );
    let text = engine_read(va + 4092, 8);
    // The device's translation is the host page the process sees.
    let want = format!("-> host {:#x}", phys_of(b.addr() + 4092));
    assert!(text.contains(&want), "{text}");
    assert!(
        text.contains(&format!(":{}", hex(&[1, 2, 3, 4, 5, 6, 7, 8]))),
        "{text}"
    );
    d.unmap(va).unwrap();
    let text = engine_read(va + 4092, 8);
    assert!(
        text.contains(&format!("page fault: pmmu asid {ASID} va {:#x}", va + 4092)),
        "{text}"
    );
    // Nothing the device could reach was touched.
    assert_eq!(&b.as_slice()[4096..4100], &[5, 6, 7, 8]);
}

#[test]
fn a_skipped_invalidation_of_a_host_unmap_ends_in_an_iommu_fault() {
    guest_only!();
    skip_invalidations(0);
    let d = Device::open_compute(0).unwrap();
    let b = HostBuffer::new(4096).unwrap();
    let va = d.map_host(b.addr(), 4096, 0, 0).unwrap();
    assert!(engine_read(va, 4).contains(":00000000"));
    let (stale0, skipped0) = (stlb_count("stale hits:"), stlb_count("skipped:"));
    skip_invalidations(1);
    // The device answers success, so the driver unpins the buffer.
    d.unmap(va).unwrap();
    assert_eq!(stlb_count("skipped:"), skipped0 + 1);
    // The STLB still holds the translation; the IOMMU refuses the page.
    let text = engine_read(va, 4);
    assert!(text.contains("iommu fault: bus"), "{text}");
    // (Reading `engine` shows the translation, then reads: two hits.)
    assert_eq!(stlb_count("stale hits:"), stale0 + 2);
    // The next invalidation covering it (this MAP's, at the same VA) drops
    // it: the same sequence faults as a page fault.
    let va2 = d.map_host(b.addr(), 4096, 0, 0).unwrap();
    assert_eq!(va2, va);
    d.unmap(va2).unwrap();
    assert!(engine_read(va, 4).contains("page fault: pmmu"));
}

#[test]
fn a_skipped_invalidation_of_a_dram_unmap_lets_a_dma_reach_the_freed_page() {
    guest_only!();
    skip_invalidations(0);
    let d = Device::open_compute(0).unwrap();
    let h = d.alloc(1, 0).unwrap();
    let va = d.map(h, 0, 0).unwrap();
    engine(&format!("write {ASID} {:#x} c0ffee", va + 8)).unwrap();
    assert!(engine_read(va + 8, 3).contains(":c0ffee"));
    skip_invalidations(1);
    d.unmap(va).unwrap();
    d.free(h).unwrap();
    // The page is free, yet a DMA through the old VA still reaches it (a
    // stale use); what it reads is what a freed page holds: its contents
    // went back with the FREE (zeros), never the old bytes.
    let text = engine_read(va + 8, 3);
    assert!(text.contains(":000000"), "{text}");
    let stlb = debugfs(0, "stlb");
    assert!(
        stlb.contains(&format!(
            "last stale use:   asid {ASID} va {:#x} -> dram",
            va + 8
        )),
        "{stlb}"
    );
    // A real invalidation (the teardown's) ends it.
    drop(d);
    let d = Device::open_compute(0).unwrap();
    assert!(engine_read(va + 8, 3).contains("page fault: dmmu"));
    drop(d);
}
