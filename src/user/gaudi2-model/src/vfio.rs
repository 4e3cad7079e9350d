// SPDX-License-Identifier: GPL-2.0

//! The vfio-user face of the device: the regions and interrupts QEMU's
//! `vfio-user-pci` is told about, and the `vfio_user` crate's
//! [`ServerBackend`] that turns each message into a [`Device`] call.
//!
//! Regions (VFIO's PCI indexes): BAR0 (registers trapped, SRAM a sparse
//! mmap area of the BAR0 memfd), BAR2 (MSI-X, trapped), BAR4 (DRAM, one
//! sparse mmap area covering it, the DRAM memfd), config space (256 bytes,
//! trapped); the others are empty. QEMU mmaps a sparse area at
//! `region offset + area offset` of the region's file (hw/vfio/region.c
//! `vfio_region_mmap`); BAR0's region offset is 0, so SRAM sits at
//! `SRAM_OFFSET` in its memfd. Interrupts: MSI-X only, 128 vectors.
//!
//! Every handler takes the device lock for the duration of one message; the
//! engine thread takes it for one `step` at a time, so a `DMA_UNMAP` is
//! applied between two device accesses and the reply QEMU waits for means
//! the device no longer reaches that memory. Register writes that queue
//! engine work wake the engine thread instead of running it inline.

use std::io;
use std::mem::size_of;
use std::os::fd::RawFd;
use std::sync::{Arc, Mutex};

use vfio_bindings::bindings::vfio::{
    vfio_region_info, vfio_region_sparse_mmap_area, VFIO_DMA_UNMAP_FLAG_ALL, VFIO_IRQ_INFO_EVENTFD,
    VFIO_PCI_BAR0_REGION_INDEX, VFIO_PCI_BAR2_REGION_INDEX, VFIO_PCI_BAR4_REGION_INDEX,
    VFIO_PCI_CONFIG_REGION_INDEX, VFIO_PCI_MSIX_IRQ_INDEX, VFIO_PCI_NUM_IRQS, VFIO_PCI_NUM_REGIONS,
    VFIO_REGION_INFO_FLAG_MMAP, VFIO_REGION_INFO_FLAG_READ, VFIO_REGION_INFO_FLAG_WRITE,
};
use vfio_user::{DmaMapFlags, DmaUnmapFlags, IrqInfo, ServerBackend, ServerRegion, SparseArea};

use crate::device::{lock, Device};
use crate::dma::Perm;
use crate::event;
use crate::pci;
use crate::worker::Kick;

/// The vfio-user spec's `VFIO_DMA_UNMAP_FLAG_ALL` (bit 2, the `vfio_user`
/// crate's `UNMAP_ALL`); QEMU 10.2 sends the kernel uAPI's bit 1
/// (`VFIO_DMA_UNMAP_FLAG_ALL`, hw/vfio-user/container.c). Either means all:
/// unmapping too much is safe, too little is not.
const UNMAP_ALL_SPEC: u32 = 1 << 2;

/// One region's description.
fn region(index: u32, size: u64, flags: u32) -> vfio_region_info {
    vfio_region_info {
        argsz: size_of::<vfio_region_info>() as u32,
        flags,
        index,
        cap_offset: 0,
        size,
        offset: 0,
    }
}

/// The regions, in VFIO's PCI index order: BAR0 with SRAM in `bar0_fd`,
/// BAR4 the `dram_bytes` of `dram_fd`.
pub fn regions(bar0_fd: RawFd, dram_fd: RawFd, dram_bytes: u64) -> Vec<ServerRegion> {
    let rw = VFIO_REGION_INFO_FLAG_READ | VFIO_REGION_INFO_FLAG_WRITE;
    let area = |offset, size| SparseArea {
        area: vfio_region_sparse_mmap_area { offset, size },
    };
    (0..VFIO_PCI_NUM_REGIONS)
        .map(|index| match index {
            VFIO_PCI_BAR0_REGION_INDEX => ServerRegion {
                region_info: region(index, pci::BAR0_SIZE, rw | VFIO_REGION_INFO_FLAG_MMAP),
                sparse_areas: vec![area(pci::SRAM_OFFSET, pci::SRAM_SIZE)],
                mmap_fd: Some(bar0_fd),
            },
            VFIO_PCI_BAR4_REGION_INDEX => ServerRegion {
                region_info: region(index, dram_bytes, rw | VFIO_REGION_INFO_FLAG_MMAP),
                sparse_areas: vec![area(0, dram_bytes)],
                mmap_fd: Some(dram_fd),
            },
            VFIO_PCI_BAR2_REGION_INDEX => plain(region(index, pci::BAR2_SIZE, rw)),
            VFIO_PCI_CONFIG_REGION_INDEX => plain(region(index, pci::CONFIG_SIZE as u64, rw)),
            _ => plain(region(index, 0, 0)),
        })
        .collect()
}

fn plain(region_info: vfio_region_info) -> ServerRegion {
    ServerRegion {
        region_info,
        sparse_areas: Vec::new(),
        mmap_fd: None,
    }
}

/// The interrupt indexes: MSI-X with 128 eventfd vectors, nothing else.
pub fn irqs() -> Vec<IrqInfo> {
    (0..VFIO_PCI_NUM_IRQS)
        .map(|index| match index {
            VFIO_PCI_MSIX_IRQ_INDEX => IrqInfo {
                index,
                flags: VFIO_IRQ_INFO_EVENTFD,
                count: u32::from(pci::MSIX_VECTORS),
            },
            _ => IrqInfo {
                index,
                flags: 0,
                count: 0,
            },
        })
        .collect()
}

/// The crate's backend: the device behind its lock, and the engine
/// thread's doorbell.
pub struct Backend {
    dev: Arc<Mutex<Device>>,
    kick: Arc<Kick>,
}

impl Backend {
    /// A backend serving `dev`, waking the engine thread through `kick`.
    pub fn new(dev: Arc<Mutex<Device>>, kick: Arc<Kick>) -> Self {
        Self { dev, kick }
    }
}

impl ServerBackend for Backend {
    fn region_read(&mut self, region: u32, offset: u64, data: &mut [u8]) -> io::Result<()> {
        lock(&self.dev).region_read(region, offset, data);
        Ok(())
    }

    fn region_write(&mut self, region: u32, offset: u64, data: &[u8]) -> io::Result<()> {
        let mut d = lock(&self.dev);
        d.region_write(region, offset, data);
        if d.pending() {
            self.kick.kick();
        }
        Ok(())
    }

    fn dma_map(
        &mut self,
        flags: DmaMapFlags,
        offset: u64,
        address: u64,
        size: u64,
        fd: Option<std::fs::File>,
    ) -> io::Result<()> {
        let perm = Perm {
            read: flags.contains(DmaMapFlags::READ),
            write: flags.contains(DmaMapFlags::WRITE),
        };
        let has_file = fd.is_some();
        let mut d = lock(&self.dev);
        let r = d.env().dma.map(address, size, fd, offset, perm);
        let c = d.counts();
        match r {
            Ok(replaced) => {
                c.dma_maps += 1;
                if replaced > 0 {
                    event!(
                        "dma.remap",
                        "map of IOVA {address:#x}+{size:#x} replaced {replaced:#x} mapped bytes"
                    );
                }
                // QEMU maps every BAR and ROM of the machine (ours included)
                // without a file: peer-to-peer windows this model does not
                // serve. Counted; an access there is logged as a fault.
                if !has_file {
                    c.dma_maps_without_file += 1;
                }
                Ok(())
            }
            Err(e) => {
                c.dma_map_errors += 1;
                event!(
                    "dma.map_error",
                    "map of IOVA {address:#x}+{size:#x} at offset {offset:#x} refused: {e}"
                );
                Err(e.into())
            }
        }
    }

    fn dma_unmap(&mut self, flags: DmaUnmapFlags, address: u64, size: u64) -> io::Result<()> {
        let all = flags.bits() & (VFIO_DMA_UNMAP_FLAG_ALL | UNMAP_ALL_SPEC) != 0;
        let mut d = lock(&self.dev);
        let bytes = if all {
            d.env().dma.unmap_all()
        } else {
            d.env().dma.unmap(address, size)
        };
        let c = d.counts();
        c.dma_unmaps += 1;
        c.dma_unmapped_bytes = c.dma_unmapped_bytes.saturating_add(bytes);
        // With a vIOMMU QEMU unmaps whole invalidated ranges, mostly holes:
        // an unmap that finds less than its size is normal, not logged.
        if all {
            event!(
                "dma.unmap_all",
                "unmap of all DMA mappings ({bytes:#x} bytes)"
            );
        }
        Ok(())
    }

    fn reset(&mut self) -> io::Result<()> {
        lock(&self.dev).reset();
        event!("device.reset", "device reset: the model is as after boot");
        Ok(())
    }

    fn set_irqs(
        &mut self,
        index: u32,
        flags: u32,
        start: u32,
        count: u32,
        fds: Vec<std::fs::File>,
    ) -> io::Result<()> {
        let n = fds.len();
        let mut d = lock(&self.dev);
        let r = d.env().msix.set_irqs(index, flags, start, count, fds);
        let assigned = d.env().msix.assigned();
        drop(d);
        match &r {
            Ok(()) => event!(
                "irq.set",
                "SET_IRQS index {index} flags {flags:#x} vectors {start}+{count} with {n} eventfds: {assigned} vectors assigned"
            ),
            Err(e) => event!("irq.set_error", "SET_IRQS index {index} flags {flags:#x} {start}+{count} ({n} fds) refused: {e}"),
        }
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regions_in_vfio_order() {
        let r = regions(10, 11, 4 << 30);
        assert_eq!(r.len(), 9);
        for (i, reg) in r.iter().enumerate() {
            assert_eq!(reg.region_info.index, i as u32);
        }
        let bar0 = &r[0];
        assert_eq!(bar0.region_info.size, 0x1000_0000);
        assert_eq!(bar0.mmap_fd, Some(10));
        let sram = bar0.sparse_areas[0].area;
        assert_eq!((sram.offset, sram.size), (0xD00_0000, 48 << 20));
        assert_eq!((r[2].region_info.size, r[2].mmap_fd), (0x4000, None));
        let bar4 = &r[4];
        assert_eq!((bar4.region_info.size, bar4.mmap_fd), (4 << 30, Some(11)));
        assert_ne!(bar4.region_info.flags & VFIO_REGION_INFO_FLAG_MMAP, 0);
        assert_eq!(r[7].region_info.size, 256, "config space");
        for i in [1, 3, 5, 6, 8] {
            assert_eq!(r[i].region_info.size, 0, "region {i} is empty");
        }
    }

    #[test]
    fn only_msix() {
        let i = irqs();
        assert_eq!(i.len(), 5);
        assert_eq!((i[2].count, i[2].flags), (128, VFIO_IRQ_INFO_EVENTFD));
        assert!(i.iter().filter(|x| x.index != 2).all(|x| x.count == 0));
    }
}
