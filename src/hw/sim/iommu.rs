// SPDX-License-Identifier: GPL-2.0

//! The simulated Gaudi2's IOMMU: which host pages the device may reach by
//! bus address ([`DmaPages`](crate::ffi::dma_pages::DmaPages), an identity map: a page's bus address is its
//! physical address, as `dma_map_*` returns it on a machine without an
//! IOMMU, so the driver, debugfs and the guest tests see the addresses
//! `/proc/self/pagemap` shows).
//!
//! Only what the driver DMA-mapped is reachable: user buffers
//! ([`Backend::dma_map_host`](crate::hw::backend::Backend::dma_map_host)),
//! command buffers and the PMMU's host-resident hop tables
//! ([`Backend::dma_map_kernel`](crate::hw::backend::Backend::dma_map_kernel)),
//! until [`Backend::dma_unmap_host`](crate::hw::backend::Backend::dma_unmap_host).
//! An engine access or a PMMU walk that reaches any other bus address is
//! refused and recorded as an IOMMU fault; it never touches memory that may
//! have been freed, since each mapping holds a reference to its page.
//!
//! The map's lock is a leaf. A long map or unmap takes it once per 512
//! small pages and yields between.

use super::SimGaudi2;
use crate::ffi::{host_page::HostPage, pin::PinnedUserPages, sched};
use kernel::{alloc::KVVec, page::PAGE_SIZE, prelude::*};

/// Small pages mapped or unmapped per hold of the map's lock.
const BATCH: usize = 512;

/// Small pages per device page of `page_size` bytes (at least 1).
fn small_pages(page_size: u64) -> Result<usize> {
    usize::try_from(page_size / PAGE_SIZE as u64)
        .map(|n| n.max(1))
        .map_err(|_| EINVAL)
}

impl SimGaudi2 {
    /// `dma_map_host`: map each `page_size` page of `pinned` (its small
    /// pages physically consecutive) and return its bus address. On an
    /// error nothing stays mapped. O(pages x log n), yielding once per
    /// 512 small pages.
    pub(super) fn map_pinned(
        &self,
        pinned: &PinnedUserPages,
        page_size: u64,
    ) -> Result<KVVec<u64>> {
        let per = small_pages(page_size)?;
        let n = pinned.npages() / per;
        let mut bus = KVVec::with_capacity(n, GFP_KERNEL | __GFP_NOWARN)?;
        let step = (BATCH / per).max(1);
        let mut i = 0;
        while i < n {
            if i > 0 {
                sched::cond_resched();
            }
            let end = i.saturating_add(step).min(n);
            let mut pages = self.dma_pages.lock();
            for j in i..end {
                let mapped = j
                    .checked_mul(per)
                    .ok_or(EINVAL)
                    .and_then(|first| pages.map_pinned(pinned, first, per));
                let pushed = mapped.and_then(|a| {
                    bus.push_within_capacity(a).map_err(|_| {
                        pages.unmap(a, per);
                        ENOMEM
                    })
                });
                if let Err(e) = pushed {
                    drop(pages);
                    self.unmap_bus(&bus, page_size);
                    return Err(e);
                }
            }
            i = end;
        }
        Ok(bus)
    }

    /// `dma_map_kernel`: map each of `pages` (4 KiB) and return its bus
    /// address; the map holds its own reference. On an error nothing stays
    /// mapped. O(pages x log n).
    pub(super) fn map_kernel(&self, pages: &[HostPage]) -> Result<KVVec<u64>> {
        let mut bus = KVVec::with_capacity(pages.len(), GFP_KERNEL)?;
        let mut map = self.dma_pages.lock();
        for p in pages {
            let pushed = map.map_page(p).and_then(|a| {
                bus.push_within_capacity(a).map_err(|_| {
                    map.unmap(a, 1);
                    ENOMEM
                })
            });
            if let Err(e) = pushed {
                for a in bus.iter() {
                    map.unmap(*a, 1);
                }
                return Err(e);
            }
        }
        Ok(bus)
    }

    /// `dma_unmap_host`: undo the mapping of each `page_size` page at the
    /// bus addresses `addrs`. An address that was not mapped is reported
    /// (a driver bug) and skipped. Never allocates. O(pages x log n),
    /// yielding once per 512 small pages.
    pub(super) fn unmap_bus(&self, addrs: &[u64], page_size: u64) {
        let Ok(per) = small_pages(page_size) else {
            hl_err!(
                "simulated Gaudi2: DMA-unmap with page size {:#x}\n",
                page_size
            );
            return;
        };
        let mut missing = 0usize;
        for (k, chunk) in addrs.chunks((BATCH / per).max(1)).enumerate() {
            if k > 0 {
                sched::cond_resched();
            }
            let mut pages = self.dma_pages.lock();
            for a in chunk {
                missing = missing.saturating_add(per.saturating_sub(pages.unmap(*a, per)));
            }
        }
        if missing > 0 {
            hl_err!(
                "simulated Gaudi2: DMA-unmap of {} page(s) that were not mapped\n",
                missing
            );
        }
    }

    /// Mappings the IOMMU holds, in 4 KiB pages (tests, debugfs). O(1).
    pub(crate) fn dma_mapped_pages(&self) -> u64 {
        self.dma_pages.lock().mapped()
    }

    /// Whether bus address `addr` is DMA-mapped (tests). O(log n).
    pub(crate) fn dma_is_mapped(&self, addr: u64) -> bool {
        self.dma_pages.lock().is_mapped(addr)
    }
}

#[kunit_tests(hlrs_sim_iommu)]
mod tests {
    use super::*;
    use crate::asic::AsicProperties;
    use crate::hw::backend::Backend;
    use kernel::sync::Arc;

    #[test]
    fn kernel_pages_are_reachable_only_while_mapped() -> Result {
        let s = Arc::pin_init(SimGaudi2::new(&AsicProperties::gaudi2(6, 0)?), GFP_KERNEL)?;
        let page = HostPage::new_zeroed()?;
        page.write(8, &[1, 2, 3])?;
        let phys = page.phys();
        let refs = page.ref_count();
        let mut v = KVVec::new();
        v.push(page.clone(), GFP_KERNEL)?;
        v.push(page.clone(), GFP_KERNEL)?;
        // One page mapped twice: an identity address, a reference each.
        let bus = s.dma_map_kernel(v)?;
        assert_eq!(&bus[..], &[phys, phys]);
        assert_eq!(page.ref_count(), refs + 2);
        assert_eq!(s.dma_mapped_pages(), 2);
        let mut b = [0u8; 4];
        s.dma_pages
            .lock()
            .read(phys + 7, &mut b)
            .map_err(|_| EINVAL)?;
        assert_eq!(b, [0, 1, 2, 3]);
        s.dma_unmap_host(&bus[..1], 4096);
        assert!(s.dma_is_mapped(phys));
        s.dma_unmap_host(&bus[1..], 4096);
        assert!(!s.dma_is_mapped(phys));
        assert_eq!(page.ref_count(), refs);
        // Unmapped: refused, the address of the refusal returned.
        assert_eq!(s.dma_pages.lock().read(phys + 7, &mut b), Err(phys + 7));
        assert_eq!(s.dma_pages.lock().write(phys, &b), Err(phys));
        // Unmapping again is reported and changes nothing.
        s.dma_unmap_host(&bus[..1], 4096);
        assert_eq!(s.dma_mapped_pages(), 0);
        Ok(())
    }

    #[test]
    fn a_device_dropped_with_pages_mapped_gives_their_references_back() -> Result {
        let page = HostPage::new_zeroed()?;
        let refs = page.ref_count();
        {
            let s = Arc::pin_init(SimGaudi2::new(&AsicProperties::gaudi2(6, 0)?), GFP_KERNEL)?;
            let mut v = KVVec::new();
            v.push(page.clone(), GFP_KERNEL)?;
            s.dma_map_kernel(v)?;
            assert_eq!(page.ref_count(), refs + 1);
        }
        assert_eq!(page.ref_count(), refs);
        Ok(())
    }
}
