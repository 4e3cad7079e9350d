// SPDX-License-Identifier: GPL-2.0

//! Host memory for the PCI Gaudi2: the [`Backend`](crate::hw::backend::Backend)'s
//! `dma_map_host`, `dma_map_kernel` and `dma_unmap_host` with the kernel's
//! DMA API ([`DmaStreams`]), so the device (and the model behind it) reaches
//! exactly the pages the driver mapped, through the guest's IOMMU when there
//! is one.
//!
//! Each device page is one mapping: a 4 KiB page, or a 2 MiB huge page
//! mapped in one piece (its bus addresses contiguous, and 2 MiB aligned as a
//! 2 MiB PTE needs: the IOMMU's allocator aligns a 2 MiB mapping to its
//! size, and without an IOMMU the bus address is the physical one, which the
//! caller checked). Long maps and unmaps yield once per 512 small pages.

use super::{regs::bump, PciGaudi2};
use crate::ffi::{host_page::HostPage, pin::PinnedUserPages, sched};
use crate::hw::backend::BusAddrs;
use kernel::{alloc::KVVec, page::PAGE_SIZE, prelude::*};

const PAGE: u64 = PAGE_SIZE as u64;

/// Small pages between two scheduling points.
const BATCH: usize = 512;

impl PciGaudi2 {
    /// `dma_map_host`: each `page_size` page of `pinned` as one mapping (its
    /// small pages physically consecutive: `EINVAL` otherwise); on an error
    /// nothing stays mapped. `ENODEV` once the device is unbound.
    /// O(pages x log n).
    pub(super) fn map_pinned(&self, pinned: &PinnedUserPages, page_size: u64) -> Result<BusAddrs> {
        let per = u32::try_from(page_size / PAGE).map_err(|_| EINVAL)?.max(1);
        let per_us = per as usize;
        if pinned.npages() % per_us != 0 {
            return Err(EINVAL);
        }
        let n = pinned.npages() / per_us;
        let mut bus = BusAddrs::with_capacity(n, 0, GFP_KERNEL | __GFP_NOWARN)?;
        let step = (BATCH / per_us).max(1);
        for i in 0..n {
            if i > 0 && i % step == 0 {
                sched::cond_resched();
            }
            let mapped = i
                .checked_mul(per_us)
                .ok_or(EINVAL)
                .and_then(|first| self.streams.map_pinned(pinned, first, per))
                .and_then(|a| self.check_aligned(a, page_size));
            match mapped.and_then(|a| bus.push_within_capacity(a).map_err(|_| ENOMEM)) {
                Ok(()) => bump(&self.mmio.counters.dma_maps),
                Err(e) => {
                    self.unmap_bus(&bus, page_size);
                    return Err(e);
                }
            }
        }
        Ok(bus)
    }

    /// A device page of more than 4 KiB needs a bus address aligned to its
    /// size: `a` if it is, else it is unmapped and `EINVAL`.
    fn check_aligned(&self, a: u64, page_size: u64) -> Result<u64> {
        if page_size <= PAGE || a % page_size == 0 {
            return Ok(a);
        }
        pr_err!(
            "PCI Gaudi2: a {} KiB DMA mapping at {:#x} is not aligned to its size\n",
            page_size >> 10,
            a
        );
        self.streams.unmap(a, page_size);
        Err(EINVAL)
    }

    /// `dma_map_kernel`: each of `pages` (4 KiB) mapped on its own, the
    /// mapping holding its own reference; on an error nothing stays mapped.
    /// O(pages x log n).
    pub(super) fn map_kernel(&self, pages: KVVec<HostPage>) -> Result<BusAddrs> {
        let mut bus = BusAddrs::with_capacity(pages.len(), 0, GFP_KERNEL)?;
        for p in pages.iter() {
            let mapped = self
                .streams
                .map_page(p)
                .and_then(|a| bus.push_within_capacity(a).map_err(|_| ENOMEM));
            if let Err(e) = mapped {
                self.unmap_bus(&bus, PAGE);
                return Err(e);
            }
            bump(&self.mmio.counters.dma_maps);
        }
        Ok(bus)
    }

    /// `dma_unmap_host`: undo the mapping of each `page_size` page at
    /// `addrs`. Once the device is unbound its mappings are already undone
    /// (the table was closed): nothing to do. A mapping that does not exist
    /// on a bound device is a driver bug, reported. Never allocates.
    /// O(pages x log n).
    pub(super) fn unmap_bus(&self, addrs: &[u64], page_size: u64) {
        let per = usize::try_from(page_size / PAGE).unwrap_or(1).max(1);
        let step = (BATCH / per).max(1);
        let mut missing = 0usize;
        for (i, a) in addrs.iter().enumerate() {
            if i > 0 && i % step == 0 {
                sched::cond_resched();
            }
            if self.streams.unmap(*a, page_size) {
                bump(&self.mmio.counters.dma_unmaps);
            } else {
                missing += 1;
            }
        }
        if missing > 0 && !self.streams.is_closed() {
            hl_err!(
                "PCI Gaudi2: DMA-unmap of {} page(s) that were not mapped\n",
                missing
            );
        }
    }
}
