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
use crate::hw::backend::BusAddrs;
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
    /// pages physically consecutive: `EINVAL` otherwise) and return its bus
    /// address. On an error nothing stays mapped. O(pages x log n), yielding
    /// once per 512 small pages.
    pub(super) fn map_pinned(&self, pinned: &PinnedUserPages, page_size: u64) -> Result<BusAddrs> {
        let per = small_pages(page_size)?;
        let n = pinned.npages().checked_div(per).ok_or(EINVAL)?;
        let mut bus = BusAddrs::with_capacity(n, 0, GFP_KERNEL | __GFP_NOWARN)?;
        let step = BATCH.checked_div(per).unwrap_or(1).max(1);
        let mut i = 0;
        while i < n {
            if i > 0 {
                sched::cond_resched();
            }
            let end = i.saturating_add(step).min(n);
            let small = i
                .checked_mul(per)
                .zip((end - i).checked_mul(per))
                .ok_or(EINVAL);
            let mut base = 0;
            // Each device page's first small page is its bus address; the
            // others must follow it.
            let mut sink = |k: usize, at: u64| {
                let off = k.checked_rem(per).ok_or(EINVAL)? as u64;
                if off == 0 {
                    base = at;
                    bus.push_within_capacity(at).map_err(|_| ENOMEM)
                } else if off
                    .checked_mul(PAGE_SIZE as u64)
                    .and_then(|o| o.checked_add(base))
                    == Some(at)
                {
                    Ok(())
                } else {
                    Err(EINVAL)
                }
            };
            let mapped = small.and_then(|s| self.dma_pages.lock().map_pinned(pinned, s, &mut sink));
            if let Err(e) = mapped {
                bus.truncate(i);
                self.unmap_bus(&bus, page_size);
                return Err(e);
            }
            i = end;
        }
        Ok(bus)
    }

    /// `dma_map_kernel`: map each of `pages` (4 KiB) and return its bus
    /// address; the map holds its own reference. On an error nothing stays
    /// mapped. O(pages x log n).
    pub(super) fn map_kernel(&self, pages: &[HostPage]) -> Result<BusAddrs> {
        let mut bus = BusAddrs::with_capacity(pages.len(), 0, GFP_KERNEL)?;
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
        let step = BATCH.checked_div(per).unwrap_or(1).max(1);
        for (k, chunk) in addrs.chunks(step).enumerate() {
            if k > 0 {
                sched::cond_resched();
            }
            let done = self.dma_pages.lock().unmap_each(chunk, per);
            let all = chunk.len().saturating_mul(per);
            missing = missing.saturating_add(all.saturating_sub(done));
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
    fn many_pages_map_and_unmap_in_any_order() -> Result {
        let s = Arc::pin_init(SimGaudi2::new(&AsicProperties::gaudi2(6, 0)?), GFP_KERNEL)?;
        let mut pages = KVVec::new();
        for _ in 0..300 {
            pages.push(HostPage::new_zeroed()?, GFP_KERNEL)?;
        }
        let mut v = KVVec::new();
        for p in pages.iter() {
            v.push(p.clone(), GFP_KERNEL)?;
        }
        let bus = s.dma_map_kernel(v)?;
        assert_eq!(s.dma_mapped_pages(), 300);
        for (p, a) in pages.iter().zip(bus.iter()) {
            assert_eq!(p.phys(), *a);
            assert!(s.dma_is_mapped(*a));
        }
        // Every other page first, then the rest in one call.
        let mut odd = KVVec::new();
        for a in bus.iter().skip(1).step_by(2) {
            odd.push(*a, GFP_KERNEL)?;
        }
        s.dma_unmap_host(&odd, 4096);
        assert_eq!(s.dma_mapped_pages(), 150);
        for (i, a) in bus.iter().enumerate() {
            assert_eq!(s.dma_is_mapped(*a), i % 2 == 0);
        }
        let mut even = KVVec::new();
        for a in bus.iter().step_by(2) {
            even.push(*a, GFP_KERNEL)?;
        }
        s.dma_unmap_host(&even, 4096);
        assert_eq!(s.dma_mapped_pages(), 0);
        assert!(s.dma_pages.lock().leaves_is_empty());
        for p in pages.iter() {
            assert_eq!(p.ref_count(), 1);
        }
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
