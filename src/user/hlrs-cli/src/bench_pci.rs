//! `hlrs bench`, the PCI section (issue 31): the figures where a Gaudi2 on
//! PCI (the model process behind QEMU's vfio-user-pci, the IOMMU on)
//! differs from a simulated one, each timed on both devices in the same
//! run, batch for batch interleaved, with the register traffic per
//! operation from the driver's own counters (debugfs `pci`):
//!
//! - MAP+UNMAP of a 4 KiB host buffer (PMMU PTE writes through BAR4 or
//!   host-resident hops, the range invalidation by register write + poll,
//!   the page DMA-mapped through the IOMMU);
//! - CS + WAIT_CS of one NOP (a PQ entry and a doorbell, the completion by
//!   MSI-X into the fence);
//! - one `LIN_DMA` of 2 MiB host -> DRAM (the model's engine reading guest
//!   memory through QEMU's DMA regions, writing its DRAM).
//!
//! Figures: `pci.<name>.sim` and `.pci` (ns per operation, median batch)
//! and `pci.<name>.<counter>` (per operation on the PCI device).
//! `scripts/bench_report.py` prints the ratio PCI / simulated.

use crate::bench_common::{batch, emit, median_best, BATCHES};
use crate::bench_dma::run_cb;
use crate::dma::map_cb;
use hlrs::{cs::Cb, Device, HostBuffer};
use std::{collections::HashMap, io};

/// The counters reported per operation.
const COUNTERS: [&str; 5] = [
    "reg_writes",
    "reg_reads",
    "pte_writes",
    "doorbells",
    "cq_interrupts",
];

/// The accel index of the device on PCI (its debugfs `pci` starts with
/// `bus `), if any.
pub fn pci_device() -> Option<u32> {
    hlrs::device_indices().ok()?.into_iter().find(|i| {
        std::fs::read_to_string(format!("/sys/kernel/debug/habanalabs_rs/{i}/pci"))
            .is_ok_and(|t| t.starts_with("bus "))
    })
}

/// The `pci` counters of device `index`.
fn counters(index: u32) -> io::Result<HashMap<String, u64>> {
    let text = std::fs::read_to_string(format!("/sys/kernel/debug/habanalabs_rs/{index}/pci"))?;
    Ok(text
        .lines()
        .filter_map(|l| l.split_once(' '))
        .filter_map(|(k, v)| Some((k.to_owned(), v.parse().ok()?)))
        .collect())
}

/// An operation measured on both devices: `make(dev)` sets it up and
/// returns the operation (and whatever must live while it runs).
type Op<'a> = Box<dyn FnMut() -> io::Result<()> + 'a>;

/// Time `per` calls of each device's operation, [`BATCHES`] times
/// interleaved; emit both medians and the PCI device's counters per call.
fn measure(name: &str, per: u32, sim: &mut Op<'_>, pci: &mut Op<'_>, index: u32) -> io::Result<()> {
    sim()?;
    pci()?;
    let (mut s, mut p) = (Vec::new(), Vec::new());
    let before = counters(index)?;
    for _ in 0..BATCHES {
        s.push(batch(per, sim)?);
        p.push(batch(per, pci)?);
    }
    let after = counters(index)?;
    emit(&format!("pci.{name}.sim"), median_best(s).0, "ns");
    emit(&format!("pci.{name}.pci"), median_best(p).0, "ns");
    let ops = f64::from(per) * BATCHES as f64;
    for c in COUNTERS {
        // Saturating: a rebind in between starts the counters over.
        let d = after
            .get(c)
            .copied()
            .unwrap_or(0)
            .saturating_sub(before.get(c).copied().unwrap_or(0));
        emit(&format!("pci.{name}.{c}"), d as f64 / ops, "per_op");
    }
    Ok(())
}

/// MAP+UNMAP of a 4 KiB host buffer on `dev`.
fn map_unmap<'a>(dev: &'a Device, b: &'a HostBuffer) -> Op<'a> {
    Box::new(move || dev.unmap(dev.map_host(b.addr(), 4096, 0, 0)?))
}

/// A NOP CS on `dev`, waited for.
fn nop(dev: &Device) -> io::Result<(Op<'_>, HostBuffer)> {
    let cb = Cb::new().nop();
    let (buf, va) = map_cb(dev, &cb)?;
    let len = cb.len();
    Ok((Box::new(move || run_cb(dev, va, len)) as Op<'_>, buf))
}

/// What a 2 MiB host -> DRAM `LIN_DMA` holds: its source (freed after the
/// unmaps), the DRAM handle and both mappings.
struct Dma2m<'a> {
    dev: &'a Device,
    _src: HostBuffer,
    sva: u64,
    handle: u64,
    dram: u64,
}

impl Drop for Dma2m<'_> {
    fn drop(&mut self) {
        let _ = self.dev.unmap(self.dram);
        let _ = self.dev.free(self.handle);
        let _ = self.dev.unmap(self.sva);
    }
}

/// A CS of one 2 MiB `LIN_DMA` host -> DRAM on `dev`, waited for.
fn dma_2m(dev: &Device) -> io::Result<(Op<'_>, Dma2m<'_>, HostBuffer)> {
    const SIZE: u32 = 2 << 20;
    let mut src = HostBuffer::new(SIZE as usize)?;
    src.as_mut_slice().fill(0x5a);
    let sva = dev.map_host(src.addr(), u64::from(SIZE), 0, 0)?;
    let handle = dev.alloc(u64::from(SIZE), 0)?;
    let dram = dev.map(handle, 0, 0)?;
    let hold = Dma2m {
        dev,
        _src: src,
        sva,
        handle,
        dram,
    };
    let cb = Cb::new().lin_dma(sva, dram, SIZE);
    let (buf, va) = map_cb(dev, &cb)?;
    let len = cb.len();
    Ok((Box::new(move || run_cb(dev, va, len)) as Op<'_>, hold, buf))
}

/// The PCI section: simulated device `sim` against PCI device `pci`.
pub fn run(sim: u32, pci: u32) -> io::Result<()> {
    let (ds, dp) = (Device::open_compute(sim)?, Device::open_compute(pci)?);
    let (bs, bp) = (HostBuffer::new(4096)?, HostBuffer::new(4096)?);
    measure(
        "map_unmap_host_4k",
        50,
        &mut map_unmap(&ds, &bs),
        &mut map_unmap(&dp, &bp),
        pci,
    )?;
    let ((mut s, _hs), (mut p, _hp)) = (nop(&ds)?, nop(&dp)?);
    measure("nop_cs", 50, &mut s, &mut p, pci)?;
    let ((mut s, _ds, _bs), (mut p, _dp, _bp)) = (dma_2m(&ds)?, dma_2m(&dp)?);
    measure("lin_dma_2m", 2, &mut s, &mut p, pci)
}
