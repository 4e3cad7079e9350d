//! The driver's PCI path (issue 31) against a Gaudi2 on the guest's PCI bus
//! (the `gaudi2-model` process behind QEMU's `vfio-user-pci`), loaded with
//! `pci=1`: the probe (driver bound, 128 MSI-X vectors, every ASID's hop 0
//! committed to every MMU), a DRAM MAP whose PTEs are written through BAR4
//! and whose UNMAP invalidates every HMMU by register, a host MAP whose
//! pages are DMA-mapped and whose UNMAP invalidates the PMMU by register,
//! device DRAM reached through BAR4, a CS through a PQ, its doorbell and
//! MSI-X 21 (and one halted by the TDR), and an unbind with a
//! context open followed by a new bind.
//!
//! The register traffic is the driver's own count (debugfs `pci`). Without
//! `pci=1` there is no PCI device to test and every case passes at once;
//! with it, a missing PCI device fails them.

use hlrs::{
    cs::{Cb, Cs},
    uapi::*,
    Device, HostBuffer,
};
use hlrs_guest_tests::{expect_errno, guest_only, host_cb, oracle_walk, read_trimmed};
use std::collections::HashMap;

const ENODEV: i32 = 19;
const DRAM_PHYS_BASE: u64 = 0x1001_0000_0000_0000;
/// ASIDs the driver has (`MAX_ASID`), PMMU + 16 HMMUs.
const HOP0_COMMITS: u64 = 2 * 17;

/// The PCI Gaudi2 the driver bound: its accel index, bus id and debugfs
/// directory (its device index).
struct Pci {
    accel: u32,
    bdf: String,
    dbg: String,
}

/// Whether the module was loaded with `pci=1` (its debugfs `pci_scan` says
/// so; the `module!` parameters are not in sysfs on 7.3).
fn pci_mode() -> bool {
    std::fs::read_to_string("/sys/kernel/debug/habanalabs_rs/pci_scan")
        .is_ok_and(|v| v.contains("pci=1"))
}

/// The accel device whose parent is a 1da3:1020 PCI function, if any.
fn find() -> Option<Pci> {
    for e in std::fs::read_dir("/sys/class/accel").ok()?.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(accel) = name.strip_prefix("accel").and_then(|n| n.parse().ok()) else {
            continue;
        };
        let dev = e.path().join("device");
        if read_trimmed(&format!("{}/vendor", dev.display())).ok()? != "0x1da3" {
            continue;
        }
        let bdf = std::fs::read_link(&dev).ok()?;
        let bdf = bdf.file_name()?.to_string_lossy().into_owned();
        let dbg = debugfs_dir(&bdf)?;
        return Some(Pci { accel, bdf, dbg });
    }
    None
}

/// Our debugfs directory of the PCI device at `bdf` (its `pci` file names it).
fn debugfs_dir(bdf: &str) -> Option<String> {
    for e in std::fs::read_dir("/sys/kernel/debug/habanalabs_rs")
        .ok()?
        .flatten()
    {
        let pci = e.path().join("pci");
        let text = std::fs::read_to_string(&pci).unwrap_or_default();
        if text.lines().next() == Some(&format!("bus {bdf}")) {
            return Some(e.path().display().to_string());
        }
    }
    None
}

/// The PCI device, or `None` (the case passes) when the module was not
/// loaded with `pci=1`; with it, a missing device fails.
fn pci() -> Option<Pci> {
    let found = find();
    assert!(
        found.is_some() || !pci_mode(),
        "pci=1 but no PCI Gaudi2 is bound"
    );
    found
}

/// The `pci` counters.
fn counters(p: &Pci) -> HashMap<String, String> {
    let text = std::fs::read_to_string(format!("{}/pci", p.dbg)).unwrap();
    text.lines()
        .filter_map(|l| l.split_once(' '))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

fn count(c: &HashMap<String, String>, k: &str) -> u64 {
    c.get(k)
        .unwrap_or_else(|| panic!("no counter {k}"))
        .parse()
        .unwrap()
}

/// `count(after, k) - count(before, k)`.
fn delta(before: &HashMap<String, String>, after: &HashMap<String, String>, k: &str) -> u64 {
    count(after, k) - count(before, k)
}

#[test]
fn probed_with_128_msix_vectors_and_every_hop0_committed() {
    guest_only!();
    let Some(p) = pci() else { return };
    let sys = format!("/sys/bus/pci/devices/{}", p.bdf);
    let driver = std::fs::read_link(format!("{sys}/driver")).unwrap();
    assert!(driver.ends_with("habanalabs_rs"), "{driver:?}");
    let vectors = std::fs::read_dir(format!("{sys}/msi_irqs"))
        .unwrap()
        .count();
    assert_eq!(vectors, 128);
    let node = format!("/sys/class/accel/accel{}", p.accel);
    assert_eq!(read_trimmed(&format!("{node}/pci_addr")).unwrap(), p.bdf);
    assert_eq!(
        read_trimmed(&format!("{node}/device_type")).unwrap(),
        "GAUDI2"
    );
    assert_eq!(
        read_trimmed(&format!("{node}/status")).unwrap(),
        "operational"
    );
    let c = counters(&p);
    assert_eq!(c["state"], "alive");
    assert_eq!(count(&c, "hop0_commits"), HOP0_COMMITS);
    assert_eq!(count(&c, "poll_timeouts"), 0);
    let d = Device::open_compute(p.accel).unwrap();
    assert_eq!(d.bus_id().unwrap(), p.bdf);
}

#[test]
fn a_dram_map_writes_its_ptes_through_bar4_and_unmap_invalidates_every_hmmu() {
    guest_only!();
    let Some(p) = pci() else { return };
    let d = Device::open_compute(p.accel).unwrap();
    let page = d.hw_ip_info().unwrap().dram_page_size;
    let h = d.alloc(page, 0).unwrap();
    let c0 = counters(&p);
    let va = d.map(h, 0, 0).unwrap();
    let c1 = counters(&p);
    // The DMMU's tables live in device DRAM: every PTE of the MAP went
    // through BAR4 (a leaf at least), none through host memory's DMA.
    assert!(delta(&c0, &c1, "pte_writes") >= 1, "{c0:?} {c1:?}");
    assert_eq!(delta(&c0, &c1, "dma_maps"), 0);
    // The hardware's tables translate it: the page-walk oracle reads
    // them back through BAR4.
    let dbg_index: u32 = p.dbg.rsplit('/').next().unwrap().parse().unwrap();
    let (pa, _) = oracle_walk(dbg_index, va + 0x1234).expect("the walk faults");
    assert_eq!((pa - DRAM_PHYS_BASE) % page, 0x1234);
    assert!(count(&counters(&p), "pte_reads") > count(&c1, "pte_reads"));
    let c2 = counters(&p);
    d.unmap(va).unwrap();
    let c3 = counters(&p);
    // One range invalidation, on all 16 HMMUs: 4 range registers and the
    // start register each, triggered before any is polled.
    assert_eq!(delta(&c2, &c3, "range_invalidations"), 1);
    assert_eq!(delta(&c2, &c3, "reg_writes"), 16 * 5);
    assert!(delta(&c2, &c3, "reg_reads") >= 16);
    assert!(delta(&c2, &c3, "pte_writes") >= 1);
    assert_eq!(count(&c3, "poll_timeouts"), 0);
    eprintln!(
        "DRAM MAP: {} PTE writes; UNMAP: {} register writes, {} reads, {} PTE writes",
        delta(&c0, &c1, "pte_writes"),
        delta(&c2, &c3, "reg_writes"),
        delta(&c2, &c3, "reg_reads"),
        delta(&c2, &c3, "pte_writes")
    );
    d.free(h).unwrap();
}

#[test]
fn a_host_map_dma_maps_its_pages_and_unmap_invalidates_the_pmmu_by_register() {
    guest_only!();
    let Some(p) = pci() else { return };
    let d = Device::open_compute(p.accel).unwrap();
    let buf = HostBuffer::new(64 << 10).unwrap();
    let c0 = counters(&p);
    let va = d.map_host(buf.addr(), buf.len() as u64, 0, 0).unwrap();
    let c1 = counters(&p);
    // Sixteen pages mapped with the DMA API (and the new hop tables the
    // PMMU reads from host memory); the PMMU's PTEs are host memory, so
    // nothing goes through BAR4.
    assert!(delta(&c0, &c1, "dma_maps") >= 16, "{c0:?} {c1:?}");
    assert!(count(&c1, "dma_mapped_pages") >= count(&c0, "dma_mapped_pages") + 16);
    assert_eq!(delta(&c0, &c1, "pte_writes"), 0);
    let c2 = counters(&p);
    d.unmap(va).unwrap();
    let c3 = counters(&p);
    // One PMMU range invalidation: 4 range registers, the memory line
    // cache, the start register, the line cache's status written back.
    assert_eq!(delta(&c2, &c3, "range_invalidations"), 1);
    assert_eq!(delta(&c2, &c3, "reg_writes"), 7);
    assert!(delta(&c2, &c3, "reg_reads") >= 2);
    assert!(delta(&c2, &c3, "dma_unmaps") >= 16);
    eprintln!(
        "host MAP of 16 pages: {} DMA maps; UNMAP: {} register writes, {} reads, {} DMA unmaps",
        delta(&c0, &c1, "dma_maps"),
        delta(&c2, &c3, "reg_writes"),
        delta(&c2, &c3, "reg_reads"),
        delta(&c2, &c3, "dma_unmaps")
    );
}

/// The 8 bytes at `off` of the function's BAR4 (its sysfs resource file).
fn bar4_read(bdf: &str, off: u64) -> u64 {
    let f = std::fs::File::open(format!("/sys/bus/pci/devices/{bdf}/resource4")).unwrap();
    let len = f.metadata().unwrap().len();
    assert!(off + 8 <= len);
    // A resource file is read by mapping it.
    let page = off & !0xFFF;
    // SAFETY: a new shared read-only mapping of one page of the file,
    // unmapped below; nothing else refers to it.
    let map = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            4096,
            libc::PROT_READ,
            libc::MAP_SHARED,
            std::os::fd::AsRawFd::as_raw_fd(&f),
            page as libc::off_t,
        )
    };
    assert_ne!(map, libc::MAP_FAILED);
    // SAFETY: `off - page + 8 <= 4096`, 8-aligned (callers pass aligned
    // offsets), inside the mapping.
    let v = unsafe {
        std::ptr::read_volatile(map.cast::<u8>().add((off - page) as usize).cast::<u64>())
    };
    // SAFETY: the mapping made above, unmapped once.
    unsafe { libc::munmap(map, 4096) };
    v
}

#[test]
fn device_dram_is_reached_through_bar4() {
    guest_only!();
    let Some(p) = pci() else { return };
    let d = Device::open_compute(p.accel).unwrap();
    let page = d.hw_ip_info().unwrap().dram_page_size;
    drop(d);
    // The first user DRAM page, written through the driver's BAR4
    // window (debugfs `dram`), read back by the CPU through the BAR.
    let at = DRAM_PHYS_BASE + page + 0x40;
    std::fs::write(
        format!("{}/dram", p.dbg),
        format!("write {at:#x} 0123456789abcdef"),
    )
    .unwrap();
    assert_eq!(
        bar4_read(&p.bdf, at - DRAM_PHYS_BASE),
        0xefcd_ab89_6745_2301
    );
}

/// Microseconds in a second.
const SEC: u64 = 1_000_000;
const ETIMEDOUT: i32 = 110;

#[test]
fn a_cs_runs_through_pq_doorbell_and_msix_21_and_a_timeout_halts_its_stream() {
    guest_only!();
    let Some(p) = pci() else { return };
    let d = Device::open_compute(p.accel).unwrap();
    let mut src = HostBuffer::new(8192).unwrap();
    for (i, b) in src.as_mut_slice().iter_mut().enumerate() {
        *b = (i * 13 % 251) as u8;
    }
    let dst = HostBuffer::new(8192).unwrap();
    let sva = d.map_host(src.addr(), 8192, 0, 0).unwrap();
    let dva = d.map_host(dst.addr(), 8192, 0, 0).unwrap();
    let page = d.hw_ip_info().unwrap().dram_page_size;
    let h = d.alloc(page, 0).unwrap();
    let dram = d.map(h, 0, 0).unwrap();
    let to_dram = host_cb(&d, &Cb::new().lin_dma(sva, dram, 8192));
    let to_host = host_cb(&d, &Cb::new().lin_dma(dram, dva, 8192));
    let c0 = counters(&p);
    // Host -> DRAM on PDMA0 stream 0, DRAM -> host on PDMA1: each a BD on
    // its PQ, a doorbell, the PQC's SOB, the monitor's CQ entry, MSI-X 21.
    let done = d
        .run_cb(GAUDI2_QUEUE_ID_PDMA_0_0, to_dram.va, to_dram.len, 30 * SEC)
        .unwrap();
    assert_eq!(
        d.run_cb(GAUDI2_QUEUE_ID_PDMA_1_0, to_host.va, to_host.len, 30 * SEC)
            .unwrap(),
        done
    );
    assert!(
        dst.as_slice() == src.as_slice(),
        "the round trip lost bytes"
    );
    let c1 = counters(&p);
    for k in ["cs_jobs", "doorbells", "cq_entries", "cs_done"] {
        assert_eq!(delta(&c0, &c1, k), 2, "{k}");
    }
    let irqs = delta(&c0, &c1, "cq_interrupts");
    assert!((1..=2).contains(&irqs), "{irqs} completion interrupts");
    assert_eq!(delta(&c0, &c1, "cs_halted"), 0);
    // A CS whose CB never ends (it waits at a FENCE nobody releases): the
    // driver's TDR stops and flushes its stream; the next CS runs.
    let fence = Cb::new().push(&hlrs::cs::packet::raw(PACKET_FENCE, 1 << 16 | 1));
    let stuck = host_cb(&d, &fence.nop());
    let f = Cs::new()
        .chunk(GAUDI2_QUEUE_ID_PDMA_0_1, stuck.va, stuck.len)
        .timeout(1)
        .submit(&d)
        .unwrap();
    expect_errno(f.wait(&d, 30 * SEC).map(|_| ()), ETIMEDOUT);
    let c2 = counters(&p);
    assert_eq!(delta(&c1, &c2, "cs_halted"), 1);
    assert_eq!(delta(&c1, &c2, "cs_done"), 0);
    let nop = host_cb(&d, &Cb::new().nop());
    assert_eq!(
        d.run_cb(GAUDI2_QUEUE_ID_PDMA_0_1, nop.va, nop.len, 30 * SEC)
            .unwrap(),
        done
    );
    // A queue the device keeps for its ARCs (PDMA_1_1, upstream's
    // QUEUE_TYPE_NA on Gaudi2) is refused before it reaches the device.
    let c3 = counters(&p);
    let r = Cs::new().chunk(5, nop.va, nop.len).submit(&d);
    expect_errno(r.map(|f| f.seq), 22);
    assert_eq!(delta(&c3, &counters(&p), "doorbells"), 0);
}

/// Write `bdf` to the driver's `unbind` or `bind` file.
fn driver_file(which: &str, bdf: &str) {
    std::fs::write(format!("/sys/bus/pci/drivers/habanalabs_rs/{which}"), bdf).unwrap();
}

#[test]
fn unbind_with_a_context_open_then_bind_again() {
    guest_only!();
    let Some(p) = pci() else { return };
    let d = Device::open_compute(p.accel).unwrap();
    let buf = HostBuffer::new(16 << 10).unwrap();
    let hva = d.map_host(buf.addr(), buf.len() as u64, 0, 0).unwrap();
    let page = d.hw_ip_info().unwrap().dram_page_size;
    let h = d.alloc(page, 0).unwrap();
    let dva = d.map(h, 0, 0).unwrap();
    // Removal with the context open and its mappings in place.
    driver_file("unbind", &p.bdf);
    assert!(find().is_none(), "still bound after unbind");
    expect_errno(d.dram_usage(), ENODEV);
    expect_errno(d.map_host(buf.addr(), buf.len() as u64, 0, 0), ENODEV);
    expect_errno(d.unmap(dva), ENODEV);
    let _ = hva;
    // Closing it releases everything (the kernel log stays clean).
    drop(d);
    driver_file("bind", &p.bdf);
    let q = find().expect("bound again");
    assert_eq!(q.bdf, p.bdf);
    assert_eq!(counters(&q)["state"], "alive");
    let d = Device::open_compute(q.accel).unwrap();
    let h = d.alloc(page, 0).unwrap();
    let va = d.map(h, 0, 0).unwrap();
    d.unmap(va).unwrap();
    d.free(h).unwrap();
    let hva = d.map_host(buf.addr(), buf.len() as u64, 0, 0).unwrap();
    d.unmap(hva).unwrap();
    assert_eq!(count(&counters(&q), "poll_timeouts"), 0);
}
