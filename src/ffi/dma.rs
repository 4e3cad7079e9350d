// SPDX-License-Identifier: GPL-2.0

//! DMA mapping of host pages for another device: the importer side of a
//! dma-buf attachment ([`Importer`]) and the only sg table that may be handed
//! to it ([`ImporterSgt`], mapped with `dma_map_sgtable` for that importer's
//! device and unmapped by its drop). A leaf: it imports nothing of the
//! project but [`HostPage`].

use super::host_page::HostPage;
use core::{marker::PhantomData, ptr::NonNull};
use kernel::{alloc::KVVec, bindings, page::PAGE_SIZE, prelude::*};

#[allow(improper_ctypes)]
extern "C" {
    // Prototypes in `ffi/helpers.h`, bodies in `ffi/helpers.c`.
    /// `dma_get_max_seg_size(dev)`.
    fn hlrs_dma_max_seg_size(dev: *mut bindings::device) -> c_uint;
    fn hlrs_dma_mapping_error(dev: *mut bindings::device, addr: bindings::dma_addr_t) -> c_int;
    /// `sg_next(sg)`.
    fn hlrs_sg_next(sg: *mut bindings::scatterlist) -> *mut bindings::scatterlist;
    /// `sg_dma_address(sg) = addr; sg_dma_len(sg) = len`.
    fn hlrs_sg_set_dma(sg: *mut bindings::scatterlist, addr: bindings::dma_addr_t, len: c_uint);
    /// `sg_dma_address(sg)`, `sg_dma_len(sg)`.
    fn hlrs_sg_dma(sg: *mut bindings::scatterlist, len: *mut c_uint) -> bindings::dma_addr_t;
}

/// The importing side of one attachment, during a dma-buf callback.
///
/// # Invariants
///
/// `dev` is the live device of an attachment to one of our dma-bufs that
/// stays live for `'a`.
pub(crate) struct Importer<'a> {
    dev: NonNull<bindings::device>,
    attach: NonNull<bindings::dma_buf_attachment>,
    _attach: PhantomData<&'a bindings::dma_buf_attachment>,
}

impl Importer<'_> {
    /// The importer of `attach`; `None` if it has no device (the core
    /// never attaches without one).
    ///
    /// # Safety
    ///
    /// `attach` must be a live attachment to one of our dma-bufs, and stay
    /// so while the value lives (a dma-buf callback's argument).
    pub(crate) unsafe fn new(attach: *mut bindings::dma_buf_attachment) -> Option<Self> {
        let attach_nn = NonNull::new(attach)?;
        // SAFETY: per the contract `attach` is live.
        let dev = NonNull::new(unsafe { (*attach).dev })?;
        // INVARIANT: per the contract, the attachment's device.
        Some(Self {
            dev,
            attach: attach_nn,
            _attach: PhantomData,
        })
    }

    /// The importer's device.
    pub(super) fn dev(&self) -> NonNull<bindings::device> {
        self.dev
    }

    /// Whether the attachment is peer to peer (`attach->peer2peer`: the
    /// importer allowed it and the exporter's attach left it so).
    pub(crate) fn peer2peer(&self) -> bool {
        // SAFETY: the attachment is live while `self` is (invariant); the
        // flag is set before any callback of ours runs, and by our attach.
        unsafe { (*self.attach.as_ptr()).peer2peer }
    }

    /// The largest DMA segment the importer's device takes
    /// (`dma_get_max_seg_size`).
    pub(crate) fn max_seg_size(&self) -> u64 {
        // SAFETY: `dev` is the importer's live device (invariant).
        u64::from(unsafe { hlrs_dma_max_seg_size(self.dev().as_ptr()) })
    }
}

/// The direction of an importer's mapping (`enum dma_data_direction`), as the
/// dma-buf core passed it.
#[derive(Clone, Copy)]
pub(crate) struct DmaDirection(pub(crate) bindings::dma_data_direction);

/// An allocated sg table, freed with `sg_free_table` when dropped.
///
/// # Invariants
///
/// `0` was filled by a successful `sg_alloc_table*` call and is not freed.
#[repr(transparent)]
struct SgTable(bindings::sg_table);

impl SgTable {
    /// A table of `pages` (one 4 KiB page each, in order), physically
    /// consecutive pages merged into entries of at most `max_seg` bytes
    /// (`sg_alloc_table_from_pages_segment`); every entry has its page set.
    fn from_pages(pages: &[HostPage], max_seg: u64) -> Result<Self> {
        let n = c_uint::try_from(pages.len()).map_err(|_| ENOMEM)?;
        let size = pages.len().checked_mul(PAGE_SIZE).ok_or(ENOMEM)?;
        // `sg_alloc_table_from_pages_segment` warns below a page.
        let max_seg = c_uint::try_from(max_seg).unwrap_or(c_uint::MAX);
        if (max_seg as usize) < PAGE_SIZE || n == 0 {
            return Err(EINVAL);
        }
        let mut sgt = bindings::sg_table::default();
        // On failure the function frees whatever it allocated.
        // SAFETY: `sgt` is a zeroed table header of ours; `pages` is an array
        // of `n` page pointers (`HostPage` is a transparent `NonNull<page>`),
        // each live while the slice is borrowed.
        let rc = unsafe {
            bindings::sg_alloc_table_from_pages_segment(
                &mut sgt,
                pages.as_ptr().cast_mut().cast::<*mut bindings::page>(),
                n,
                0,
                size as c_ulong,
                max_seg,
                bindings::GFP_KERNEL,
            )
        };
        if rc != 0 {
            return Err(Error::from_errno(rc));
        }
        // INVARIANT: filled by the successful call above.
        Ok(Self(sgt))
    }
}

impl Drop for SgTable {
    fn drop(&mut self) {
        // SAFETY: a table filled by `sg_alloc_table*` (invariant), freed once.
        unsafe { bindings::sg_free_table(&mut self.0) };
    }
}

/// What an [`ImporterSgt`] owns. `table` comes first: the `sg_table` pointer
/// the importer holds is the address of this record.
#[repr(C)]
struct MappedTable {
    table: SgTable,
    dev: NonNull<bindings::device>,
    dir: bindings::dma_data_direction,
    /// One reference per page of `table`: the pages stay allocated while
    /// the importer has them mapped, whatever happens to the backing tree.
    /// Empty for a table of device memory ([`ImporterSgt::map_resources`]).
    pages: KVVec<HostPage>,
    /// The table maps device memory with `dma_map_resource`, one entry at a
    /// time (no page, no CPU list), instead of `dma_map_sgtable`.
    resources: bool,
}

/// An sg table handed to an importer, mapped with the DMA API for that
/// importer's device. This is the only thing `map_dma_buf` returns, and the
/// only way to make one is a DMA-mapping call for the importer:
/// [`ImporterSgt::map_host_pages`] (`dma_map_sgtable` of host pages, with
/// `sg_page` set so CPU importers can use them too), or
/// [`ImporterSgt::map_resources`] (each BAR chunk of a device reached peer to
/// peer with `dma_map_resource`, upstream's `alloc_sgt_from_device_pages`,
/// undone with `dma_unmap_resource` per entry).
///
/// # Invariants
///
/// `inner.table` holds `inner.pages` (in order) and is DMA-mapped with
/// `dma_map_sgtable` for `inner.dev` in direction `inner.dir`; the mapping is
/// undone exactly once, when the value is dropped.
pub(crate) struct ImporterSgt {
    inner: KBox<MappedTable>,
}

impl ImporterSgt {
    /// Map `pages` (each a 4 KiB piece of the export, in order) for
    /// `importer` in direction `dir`: an sg table of the pages, merged where
    /// physically consecutive up to the importer's segment limit, with
    /// `dma_map_sgtable` for the importer's device. On error everything is
    /// given back (the table freed, the page references dropped).
    pub(crate) fn map_host_pages(
        importer: &Importer<'_>,
        dir: DmaDirection,
        pages: KVVec<HostPage>,
    ) -> Result<Self> {
        let table = SgTable::from_pages(&pages, importer.max_seg_size())?;
        let dev = importer.dev();
        let mut inner = KBox::new(
            MappedTable {
                table,
                dev,
                dir: dir.0,
                pages,
                resources: false,
            },
            GFP_KERNEL,
        )?;
        // SAFETY: `dev` is the importer's live device; the table is ours,
        // filled with live pages that `inner.pages` holds. On failure nothing
        // is mapped and `inner` drops as an unmapped table.
        let rc = unsafe { bindings::dma_map_sgtable(dev.as_ptr(), &mut inner.table.0, dir.0, 0) };
        if rc != 0 {
            return Err(Error::from_errno(rc));
        }
        // INVARIANT: mapped for `dev` in `dir` just above.
        Ok(Self { inner })
    }

    /// Map device memory reached peer to peer for `importer` in direction
    /// `dir`: each of `pieces` (bus address of a BAR range, length, at most
    /// the importer's segment size) one entry mapped with
    /// `dma_map_resource` (upstream `alloc_sgt_from_device_pages`,
    /// common/memory.c:1534-1703). On error everything mapped is undone.
    /// O(pieces).
    pub(crate) fn map_resources(
        importer: &Importer<'_>,
        dir: DmaDirection,
        pieces: &[(u64, u64)],
    ) -> Result<Self> {
        let n = c_uint::try_from(pieces.len()).map_err(|_| ENOMEM)?;
        if n == 0 {
            return Err(EINVAL);
        }
        let mut sgt = bindings::sg_table::default();
        let flags = bindings::GFP_KERNEL | bindings::__GFP_ZERO;
        // SAFETY: `sgt` is a zeroed header of ours; on failure the call
        // frees what it allocated.
        let rc = unsafe { bindings::sg_alloc_table(&mut sgt, n, flags) };
        if rc != 0 {
            return Err(Error::from_errno(rc));
        }
        let dev = importer.dev();
        // INVARIANT (of `SgTable`): filled by the call above.
        let table = SgTable(sgt);
        let inner = KBox::new(
            MappedTable {
                table,
                dev,
                dir: dir.0,
                pages: KVVec::new(),
                resources: true,
            },
            GFP_KERNEL,
        )?;
        let mut sg = inner.table.0.sgl;
        for &(addr, len) in pieces {
            let len32 = c_uint::try_from(len).map_err(|_| EINVAL);
            let attrs = bindings::DMA_ATTR_SKIP_CPU_SYNC as c_ulong;
            let mapped = len32.and_then(|l| {
                // SAFETY: `dev` is the importer's live device; `addr..+len`
                // is a BAR range of the exporting device (the caller's).
                let a = unsafe {
                    bindings::dma_map_resource(dev.as_ptr(), addr, len as usize, dir.0, attrs)
                };
                // SAFETY: as above; `a` is what the map returned.
                match unsafe { hlrs_dma_mapping_error(dev.as_ptr(), a) } {
                    0 => Ok((a, l)),
                    _ => Err(ENOMEM),
                }
            });
            // An error drops `inner`: the entries set so far are unmapped.
            let (a, l) = mapped?;
            // SAFETY: `sg` is entry k of our table of `n` entries (k < n).
            unsafe {
                hlrs_sg_set_dma(sg, a, l);
                sg = hlrs_sg_next(sg);
            }
        }
        // INVARIANT: every entry mapped for `dev` in `dir` (resources).
        Ok(Self { inner })
    }

    /// Hand the table to the dma-buf core (`map_dma_buf`'s result).
    pub(crate) fn into_raw(self) -> *mut bindings::sg_table {
        let this = core::mem::ManuallyDrop::new(self);
        // SAFETY: `this` is never used or dropped again: the box moves out once.
        let inner = unsafe { core::ptr::read(&this.inner) };
        // CAST: `MappedTable` is `repr(C)` with the transparent `SgTable`
        // first, so its address is that of the `sg_table`.
        KBox::into_raw(inner).cast::<bindings::sg_table>()
    }

    /// Take back a table [`ImporterSgt::into_raw`] gave out.
    ///
    /// # Safety
    ///
    /// `sgt` must come from [`ImporterSgt::into_raw`] and not have been
    /// taken back before.
    pub(crate) unsafe fn from_raw(sgt: *mut bindings::sg_table) -> Self {
        // SAFETY: per the contract `sgt` is the box `into_raw` gave out.
        let inner = unsafe { KBox::from_raw(sgt.cast::<MappedTable>()) };
        // INVARIANT: still mapped as when it was given out.
        Self { inner }
    }
}

impl Drop for MappedTable {
    fn drop(&mut self) {
        if !self.resources {
            return;
        }
        // The entries of a table of device memory, each mapped with
        // `dma_map_resource` (an unset one, after a failed map, has length 0).
        let mut sg = self.table.0.sgl;
        for _ in 0..self.table.0.orig_nents {
            if sg.is_null() {
                break;
            }
            let mut len: c_uint = 0;
            // SAFETY: `sg` is an entry of our live table.
            let addr = unsafe { hlrs_sg_dma(sg, &mut len) };
            if len != 0 {
                let attrs = bindings::DMA_ATTR_SKIP_CPU_SYNC as c_ulong;
                // SAFETY: mapped by `map_resources` for `dev` in `dir` with
                // this length; the dma-buf core unmaps before it detaches,
                // so `dev` is live.
                unsafe {
                    bindings::dma_unmap_resource(
                        self.dev.as_ptr(),
                        addr,
                        len as usize,
                        self.dir,
                        attrs,
                    )
                };
            }
            // SAFETY: as above.
            sg = unsafe { hlrs_sg_next(sg) };
        }
    }
}

impl Drop for ImporterSgt {
    fn drop(&mut self) {
        let m = &mut *self.inner;
        if m.resources {
            // `MappedTable`'s drop unmaps its entries one by one.
            return;
        }
        // The table itself and the page references go after this, with
        // `inner` (`SgTable` and `KVVec<HostPage>` drops).
        // SAFETY: the table is mapped for `dev` in `dir` (invariant), and the
        // dma-buf core unmaps before it detaches, so `dev` is still live.
        unsafe { bindings::dma_unmap_sgtable(m.dev.as_ptr(), &mut m.table.0, m.dir, 0) };
    }
}
