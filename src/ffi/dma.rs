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
}

/// The importing side of one attachment, during a dma-buf callback.
///
/// # Invariants
///
/// `dev` is the live device of an attachment to one of our dma-bufs that
/// stays live for `'a`.
pub(crate) struct Importer<'a> {
    dev: NonNull<bindings::device>,
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
        // SAFETY: per the contract `attach` is live.
        let dev = NonNull::new(unsafe { (*attach).dev })?;
        // INVARIANT: per the contract, the attachment's device.
        Some(Self {
            dev,
            _attach: PhantomData,
        })
    }

    /// The importer's device.
    fn dev(&self) -> NonNull<bindings::device> {
        self.dev
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
    pages: KVVec<HostPage>,
}

/// An sg table handed to an importer, mapped with the DMA API for that
/// importer's device. This is the only thing `map_dma_buf` returns, and the
/// only way to make one is a DMA-mapping call for the importer:
/// [`ImporterSgt::map_host_pages`] (`dma_map_sgtable` of host pages, with
/// `sg_page` set so CPU importers can use them too). A backend whose memory
/// is reached peer to peer would add a second constructor that maps each
/// BAR chunk with `dma_map_resource` (upstream's
/// `alloc_sgt_from_device_pages`) and record which undo its drop needs
/// (`dma_unmap_resource` per entry).
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

impl Drop for ImporterSgt {
    fn drop(&mut self) {
        let m = &mut *self.inner;
        // The table itself and the page references go after this, with
        // `inner` (`SgTable` and `KVVec<HostPage>` drops).
        // SAFETY: the table is mapped for `dev` in `dir` (invariant), and the
        // dma-buf core unmaps before it detaches, so `dev` is still live.
        unsafe { bindings::dma_unmap_sgtable(m.dev.as_ptr(), &mut m.table.0, m.dir, 0) };
    }
}
