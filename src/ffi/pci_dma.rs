// SPDX-License-Identifier: GPL-2.0

//! [`DmaStreams`]: host pages DMA-mapped for one bound PCI function with the
//! kernel's DMA API (`dma_map_page_attrs`, through the IOMMU when there is
//! one), by bus address: what the PCI Gaudi2 reaches in host memory.
//!
//! `kernel::dma` of 7.3 maps only coherent allocations and vmalloc'ed sg
//! tables; user pages pinned by a MAP and the driver's own kernel pages
//! (host-resident hop tables, command buffers) need streaming mappings of
//! arbitrary pages, so this file wraps them.
//!
//! - **One mapping per run.** A run is one device page: 4 KiB, or 2 MiB of
//!   physically contiguous pages (a huge page), mapped with one
//!   `dma_map_page_attrs` call so that its bus addresses are contiguous too.
//!   Upstream maps a whole user buffer as one sg table
//!   (`dma_map_sgtable`, common/memory.c:2390-2410); one mapping per device
//!   page gives the same device view and lets every page be unmapped by its
//!   bus address alone, which is all [`crate::hw::backend::Backend::dma_unmap_host`]
//!   is given.
//! - **Page references.** Each run holds one reference to each of its pages
//!   (`get_page`), dropped when it is unmapped, so a page the device may
//!   reach is never freed under it, whatever the order in which its owner
//!   unpins it and unmaps it (as the simulated IOMMU, `ffi/dma_pages.rs`).
//! - **Never after unbind.** The DMA API must not be used for a device once
//!   its driver is unbound. [`DmaStreams::new`] registers a device-managed
//!   action that [closes](DmaStreams::close) the table when the device is
//!   unbound (`devres_release_all` runs before the device's DMA ops are torn
//!   down): every run still mapped is unmapped then, and every later map
//!   fails with `ENODEV` and every later unmap is a no-op. The driver closes
//!   it itself at its `remove`; the device-managed action covers every other
//!   path.
//!
//! Lock: the table's mutex is a leaf; it is held across one
//! `dma_map_page_attrs` / `dma_unmap_page_attrs` call (which do not sleep)
//! and never across an allocation.

use super::{host_page::HostPage, pin::PinnedUserPages};
use kernel::{
    bindings,
    device::{self, Core},
    devres,
    dma::{self, DmaMask},
    new_mutex,
    page::PAGE_SIZE,
    pci,
    prelude::*,
    rbtree::{RBTree, RBTreeNodeReservation},
    sync::{aref::ARef, Arc, Mutex},
};

#[allow(improper_ctypes)]
extern "C" {
    // Prototypes in `ffi/helpers.h`, bodies in `ffi/helpers.c`.
    fn hlrs_page_to_phys(page: *mut bindings::page) -> u64;
    fn hlrs_pfn_to_page(pfn: c_ulong) -> *mut bindings::page;
    fn hlrs_get_page(page: *mut bindings::page);
    fn hlrs_put_page(page: *mut bindings::page);
    fn hlrs_dma_mapping_error(dev: *mut bindings::device, addr: bindings::dma_addr_t) -> c_int;
}

const PAGE: u64 = PAGE_SIZE as u64;

/// One mapped run: `pages` physically consecutive 4 KiB pages from `phys`.
///
/// # Invariants
///
/// The table owns one reference to each of the `pages` pages from `phys`.
struct Run {
    phys: u64,
    pages: u32,
}

/// The runs by bus address.
struct Table {
    /// `false` once closed: nothing is mapped and nothing may be.
    open: bool,
    runs: RBTree<u64, Run>,
    /// Small pages mapped (a page in two runs counts twice).
    pages: u64,
}

/// The streaming DMA mappings of one PCI function.
///
/// # Invariants
///
/// While `table.open`, `dev` is bound to our driver, and every run of
/// `table.runs` is mapped for `dev` with `dma_map_page_attrs` at its key, for
/// `pages x 4 KiB` bytes, bidirectional; once closed, no run is left and no
/// DMA API call is made for `dev` again.
#[pin_data]
pub(crate) struct DmaStreams {
    dev: ARef<device::Device>,
    #[pin]
    table: Mutex<Table>,
}

/// The device-managed action of [`DmaStreams::new`]: closes the table when
/// the device is unbound.
struct Closer(Arc<DmaStreams>);

impl Drop for Closer {
    fn drop(&mut self) {
        self.0.close();
    }
}

impl DmaStreams {
    /// Set `pdev`'s DMA mask to `mask_bits` bits and its largest segment to
    /// 4 GiB - 1 (upstream `hl_pci_init`, common/pci/pci.c:408-416), and
    /// make its (empty) table, closed when `pdev` is unbound. Probe only.
    pub(crate) fn new(pdev: &pci::Device<Core<'_>>, mask_bits: u32) -> Result<Arc<Self>> {
        let mask = DmaMask::try_new(mask_bits)?;
        // SAFETY: in probe, before this device's table exists: no mapping
        // or allocation of ours for `pdev` can run concurrently (every one
        // goes through the table made below).
        unsafe {
            dma::Device::dma_set_mask_and_coherent(pdev, mask)?;
            dma::Device::dma_set_max_seg_size(pdev, u32::MAX);
        }
        let dev: &device::Device<Core<'_>> = pdev.as_ref();
        let plain: &device::Device = dev;
        let this = Arc::pin_init(
            pin_init!(Self {
                dev: plain.into(),
                table <- new_mutex!(Table {
                    open: true,
                    runs: RBTree::new(),
                    pages: 0,
                }),
            }),
            GFP_KERNEL,
        )?;
        // On failure the action has run: the table is closed, and the
        // probe fails.
        devres::register(dev, Closer(this.clone()), GFP_KERNEL)?;
        // INVARIANT: open, `pdev` bound (in probe), nothing mapped.
        Ok(this)
    }

    fn raw_dev(&self) -> *mut bindings::device {
        let dev: &device::Device = &self.dev;
        // CAST: `device::Device` is a `repr(transparent)` wrapper of
        // `Opaque<bindings::device>`.
        core::ptr::from_ref(dev)
            .cast::<bindings::device>()
            .cast_mut()
    }

    /// Small pages mapped. O(1).
    pub(crate) fn mapped_pages(&self) -> u64 {
        self.table.lock().pages
    }

    /// The physical address the device's IOMMU translates `bus` to, as the
    /// IOMMU's own page tables say (`iommu_iova_to_phys`): `bus` itself
    /// without an IOMMU domain, `None` when nothing is mapped there or the
    /// table is closed (the device unbound). The debugfs page-walk oracle
    /// on PCI. O(IOMMU page-table depth).
    pub(crate) fn iova_to_phys(&self, bus: u64) -> Option<u64> {
        let dev = self.raw_dev();
        let t = self.table.lock();
        if !t.open {
            return None;
        }
        // SAFETY: open, so `dev` is bound (the table's lock keeps it so);
        // the call only reads the device's domain pointer.
        let domain = unsafe { bindings::iommu_get_domain_for_dev(dev) };
        if domain.is_null() {
            return Some(bus);
        }
        // SAFETY: `domain` is the bound device's live domain (it changes
        // only with the device's driver binding, which the lock above
        // excludes); the lookup only reads its page tables.
        let pa = unsafe { bindings::iommu_iova_to_phys(domain, bus) };
        drop(t);
        (pa != 0).then_some(pa)
    }

    /// Whether the table is closed (the device unbound). O(1).
    pub(crate) fn is_closed(&self) -> bool {
        !self.table.lock().open
    }

    /// Map `page` and the `n - 1` pages physically after it as one run.
    /// `ENODEV` once closed; `ENOMEM`, also for a failed map (the call
    /// gives no reason; with an IOMMU its failures are IOVA and page-table
    /// allocations, which `dma_map_sgtable`, upstream's call, reports as
    /// `ENOMEM`); `EIO` for a bus address mapped twice.
    /// O(n + log runs).
    ///
    /// # Safety
    ///
    /// `page` and the `n - 1` pages after it (physically consecutive) are
    /// live for the duration of the call.
    unsafe fn map_run(&self, page: *mut bindings::page, n: u32) -> Result<u64> {
        let node = RBTreeNodeReservation::new(GFP_KERNEL)?;
        let len = usize::try_from(n)
            .ok()
            .and_then(|n| n.checked_mul(PAGE_SIZE))
            .ok_or(EINVAL)?;
        // SAFETY: `page` is live (safety contract).
        let phys = unsafe { hlrs_page_to_phys(page) };
        let dev = self.raw_dev();
        let mut t = self.table.lock();
        if !t.open {
            return Err(ENODEV);
        }
        // SAFETY: `dev` is bound (invariant: the table is open, and closing
        // it takes this lock); `page..page + n` are live consecutive pages.
        let bus = unsafe {
            bindings::dma_map_page_attrs(
                dev,
                page,
                0,
                len,
                bindings::dma_data_direction::DMA_BIDIRECTIONAL,
                0,
            )
        };
        // SAFETY: as above; `bus` is what the map call returned.
        if unsafe { hlrs_dma_mapping_error(dev, bus) } != 0 {
            return Err(ENOMEM);
        }
        if t.runs.get(&bus).is_some() {
            // Two live mappings at one bus address: the DMA API never does.
            // SAFETY: mapped just above, for `dev`, with these arguments.
            unsafe {
                bindings::dma_unmap_page_attrs(
                    dev,
                    bus,
                    len,
                    bindings::dma_data_direction::DMA_BIDIRECTIONAL,
                    0,
                )
            };
            return Err(EIO);
        }
        for k in 0..u64::from(n) {
            // SAFETY: page `k` of the run is live (safety contract).
            // INVARIANT: the reference that goes with the run.
            unsafe { hlrs_get_page(hlrs_pfn_to_page((phys / PAGE + k) as c_ulong)) };
        }
        t.runs.insert(node.into_node(bus, Run { phys, pages: n }));
        t.pages = t.pages.saturating_add(u64::from(n));
        Ok(bus)
    }

    /// Map pinned pages `first..first + n` of `pinned` as one run; `EINVAL`
    /// if they are not physically consecutive or not all pinned. Returns the
    /// run's bus address. O(n + log runs).
    pub(crate) fn map_pinned(&self, pinned: &PinnedUserPages, first: usize, n: u32) -> Result<u64> {
        let page = pinned.page_ptr(first).ok_or(EINVAL)?;
        let base = pinned.phys(first).ok_or(EINVAL)?;
        for k in 1..n as usize {
            let at = first.checked_add(k).ok_or(EINVAL)?;
            let want = (k as u64)
                .checked_mul(PAGE)
                .and_then(|o| o.checked_add(base));
            if pinned.phys(at).is_none() || pinned.phys(at) != want {
                return Err(EINVAL);
            }
        }
        // SAFETY: the pages of `pinned` are pinned while it is borrowed, and
        // they are the `n` consecutive pages from `page` (checked above).
        unsafe { self.map_run(page, n) }
    }

    /// Map one kernel page; the run takes its own reference. Its bus
    /// address. O(log runs).
    pub(crate) fn map_page(&self, page: &HostPage) -> Result<u64> {
        // SAFETY: `page` holds a reference: the page is live.
        unsafe { self.map_run(page.as_ptr(), 1) }
    }

    /// Undo the run mapped at `bus`, of `len` bytes, dropping its page
    /// references. `false` (nothing done) if no such run is mapped: never
    /// mapped, already unmapped, another length, or the table is closed.
    /// O(pages of the run + log runs).
    pub(crate) fn unmap(&self, bus: u64, len: u64) -> bool {
        let dev = self.raw_dev();
        let mut t = self.table.lock();
        let fits = t
            .runs
            .get(&bus)
            .is_some_and(|r| u64::from(r.pages).checked_mul(PAGE) == Some(len));
        if !t.open || !fits {
            return false;
        }
        let Some(node) = t.runs.remove_node(&bus) else {
            return false;
        };
        let (_, run) = node.to_key_value();
        // SAFETY: open, so `dev` is bound; the run was mapped at `bus` for
        // `dev` with this length and direction (invariant).
        unsafe {
            bindings::dma_unmap_page_attrs(
                dev,
                bus,
                len as usize,
                bindings::dma_data_direction::DMA_BIDIRECTIONAL,
                0,
            )
        };
        t.pages = t.pages.saturating_sub(u64::from(run.pages));
        drop(t);
        Self::put_run(&run);
        true
    }

    /// Drop the page references of an unmapped run.
    fn put_run(run: &Run) {
        for k in 0..u64::from(run.pages) {
            // SAFETY: one of the references the run owned (invariant of
            // `Run`), to a page that is therefore live, dropped once.
            unsafe { hlrs_put_page(hlrs_pfn_to_page((run.phys / PAGE + k) as c_ulong)) };
        }
    }

    /// Unmap every run and refuse every later map: the device is being
    /// unbound (or is gone). Returns how many runs were still mapped.
    /// Idempotent. O(runs x pages).
    pub(crate) fn close(&self) -> usize {
        let dev = self.raw_dev();
        let mut t = self.table.lock();
        if !t.open {
            return 0;
        }
        let runs = core::mem::take(&mut t.runs);
        t.pages = 0;
        t.open = false;
        let mut n = 0usize;
        for (bus, run) in runs.iter() {
            let len = (u64::from(run.pages) * PAGE) as usize;
            // The table was open until now, under this lock: `dev` is still
            // bound (this runs at the latest in the device's devres release,
            // before its DMA ops go).
            // SAFETY: `dev` is bound (above); the run is mapped as recorded
            // (invariant).
            unsafe {
                bindings::dma_unmap_page_attrs(
                    dev,
                    *bus,
                    len,
                    bindings::dma_data_direction::DMA_BIDIRECTIONAL,
                    0,
                )
            };
            Self::put_run(run);
            n += 1;
        }
        drop(t);
        drop(runs);
        n
    }
}
