// SPDX-License-Identifier: GPL-2.0

//! The dma-buf framework glue of EXPORT_DMABUF_FD: every `unsafe` of it.
//!
//! - [`export_fd`]: `dma_buf_export` with our ops and the export record as
//!   private data, then `dma_buf_fd` (upstream `export_dmabuf`,
//!   common/memory.c:1858-1896). The dma-buf holds the record (with its
//!   context reference) and a reference to the compute node's `struct file`,
//!   so the node cannot finish closing while the dma-buf lives; its
//!   `owner` pins the module.
//! - The callbacks (`hl_dmabuf_attach`, `hl_map_dmabuf`, `hl_unmap_dmabuf`,
//!   `hl_release_dmabuf`): the sg table holds the BAR addresses computed by
//!   `vm::dmabuf::SgChunks` (DMA addresses: the simulation has no IOMMU),
//!   `orig_nents = 0` because there is no CPU page list; a non-P2P
//!   attachment gets `EPERM`.
//! - [`TestImporter`] (KUnit only): an importer on a device of its own, as a
//!   NIC driver would be.

use crate::vm::dmabuf::{DmabufExport, SgChunks};
use core::ptr::NonNull;
use kernel::{bindings, prelude::*};

#[allow(improper_ctypes)]
extern "C" {
    // Prototype in `ffi/helpers.h`, body in `ffi/helpers.c`.
    /// `dma_get_max_seg_size(dev)`.
    fn hlrs_dma_max_seg_size(dev: *mut bindings::device) -> c_uint;
}

/// The compute node's `struct file` during one of its ioctls.
///
/// # Invariants
///
/// `file` is a live file of our compute node for the lifetime of the value
/// (it only exists inside an ioctl of that file).
pub(crate) struct OpenFile {
    file: NonNull<bindings::file>,
}

impl OpenFile {
    /// # Safety
    ///
    /// `file` must be the compute node file whose ioctl is running, and the
    /// value must not outlive that ioctl.
    pub(crate) unsafe fn new(file: NonNull<bindings::file>) -> Self {
        // INVARIANT: per the contract.
        Self { file }
    }

    /// A counted reference to the file (`get_file`).
    fn pin(&self) -> FilePin {
        // SAFETY: the file is live (invariant); `get_file` takes a reference
        // that `FilePin` owns.
        unsafe { bindings::get_file(self.file.as_ptr()) };
        // INVARIANT: the reference just taken.
        FilePin { file: self.file }
    }
}

/// One reference to a `struct file`, dropped with `fput`.
///
/// # Invariants
///
/// The value owns one reference to `file`.
struct FilePin {
    file: NonNull<bindings::file>,
}

// SAFETY: a file reference may be dropped from any thread.
unsafe impl Send for FilePin {}
// SAFETY: `&FilePin` allows nothing.
unsafe impl Sync for FilePin {}

impl Drop for FilePin {
    fn drop(&mut self) {
        // SAFETY: the reference owned by this value (invariant), given back once.
        unsafe { bindings::fput(self.file.as_ptr()) };
    }
}

/// The private data of one of our dma-bufs. Fields drop in order: the export
/// record (counts, context reference), then the file reference.
struct ExportPriv {
    export: KBox<DmabufExport>,
    _file: Option<FilePin>,
}

struct Ops(bindings::dma_buf_ops);
// SAFETY: never written after initialisation; the kernel only reads it.
unsafe impl Sync for Ops {}

static HL_DMABUF_OPS: Ops = Ops(bindings::dma_buf_ops {
    attach: Some(hl_dmabuf_attach),
    map_dma_buf: Some(hl_map_dmabuf),
    unmap_dma_buf: Some(hl_unmap_dmabuf),
    release: Some(hl_release_dmabuf),
    ..pin_init::zeroed()
});

/// `dma_buf_export` of `export` (size = the exported bytes, file flags =
/// `flags`). The dma-buf owns the record and, with `file`, a reference to
/// the compute node's file. Returns the dma-buf with its one reference.
fn export_buf(
    export: KBox<DmabufExport>,
    flags: u32,
    file: Option<&OpenFile>,
) -> Result<NonNull<bindings::dma_buf>> {
    let size = usize::try_from(export.size).map_err(|_| EINVAL)?;
    let priv_ = KBox::new(
        ExportPriv {
            export,
            _file: file.map(OpenFile::pin),
        },
        GFP_KERNEL,
    )?;
    let raw = KBox::into_raw(priv_);
    let info = bindings::dma_buf_export_info {
        exp_name: kernel::str::as_char_ptr_in_const_context(c"habanalabs_rs"),
        owner: kernel::module::this_module::<crate::LocalModule>().as_ptr(),
        ops: &HL_DMABUF_OPS.0,
        size,
        flags: flags as c_int,
        resv: core::ptr::null_mut(),
        priv_: raw.cast(),
    };
    // SAFETY: `info` is complete; on success the dma-buf owns `raw`.
    let buf = unsafe { bindings::dma_buf_export(&info) };
    match kernel::error::from_err_ptr(buf).map(NonNull::new) {
        Ok(Some(b)) => Ok(b),
        Ok(None) | Err(_) => {
            // SAFETY: the export failed, so `raw` is still ours (from `into_raw`).
            drop(unsafe { KBox::from_raw(raw) });
            Err(kernel::error::from_err_ptr(buf).err().unwrap_or(ENOMEM))
        }
    }
}

/// EXPORT_DMABUF_FD's last step: export `export` and install a new fd with
/// `flags` (`O_CLOEXEC` honoured). Returns the fd. On error everything the
/// record counted is given back.
pub(crate) fn export_fd(
    export: KBox<DmabufExport>,
    flags: u32,
    file: Option<&OpenFile>,
) -> Result<i32> {
    let buf = export_buf(export, flags, file)?;
    // SAFETY: `buf` is our live dma-buf; `dma_buf_fd` takes over our reference
    // on success.
    let fd = unsafe { bindings::dma_buf_fd(buf.as_ptr(), flags as c_int) };
    if fd < 0 {
        // SAFETY: still our reference: drop it (the release frees the record).
        unsafe { bindings::dma_buf_put(buf.as_ptr()) };
        return Err(Error::from_errno(fd));
    }
    Ok(fd)
}

/// The export record of one of our dma-bufs.
///
/// # Safety
///
/// `dmabuf` must be a live dma-buf made by [`export_buf`].
unsafe fn export_of<'a>(dmabuf: *mut bindings::dma_buf) -> &'a DmabufExport {
    // SAFETY: per the contract `priv_` is our live `ExportPriv`.
    unsafe { &(*(*dmabuf).priv_.cast::<ExportPriv>()).export }
}

/// `dma_buf_ops.attach` (`hl_dmabuf_attach`): the peer-to-peer rule. On the
/// simulation every importer can reach the DRAM BAR; an attachment stays P2P
/// exactly when its importer asked for it (a dynamic importer with
/// `allow_peer2peer`).
///
/// # Safety
///
/// Only called by the dma-buf core with a live dma-buf of ours.
unsafe extern "C" fn hl_dmabuf_attach(
    dmabuf: *mut bindings::dma_buf,
    attach: *mut bindings::dma_buf_attachment,
) -> c_int {
    // SAFETY: per the contract.
    let export = unsafe { export_of(dmabuf) };
    if !export.context().device().backend().p2p_reachable() {
        // SAFETY: `attach` is being set up by the core for us.
        unsafe { (*attach).peer2peer = false };
    }
    0
}

/// `dma_buf_ops.map_dma_buf` (`hl_map_dmabuf`).
///
/// # Safety
///
/// Only called by the dma-buf core with a live attachment to one of ours.
unsafe extern "C" fn hl_map_dmabuf(
    attach: *mut bindings::dma_buf_attachment,
    _dir: bindings::dma_data_direction,
) -> *mut bindings::sg_table {
    // SAFETY: per the contract.
    let (p2p, dev, dmabuf) = unsafe { ((*attach).peer2peer, (*attach).dev, (*attach).dmabuf) };
    if !p2p {
        return err_ptr(EPERM);
    }
    // SAFETY: `dev` is the importer's live device.
    let max_seg = u64::from(unsafe { hlrs_dma_max_seg_size(dev) });
    // SAFETY: per the contract.
    let export = unsafe { export_of(dmabuf) };
    match build_sgt(export, max_seg) {
        Ok(sgt) => sgt.as_ptr(),
        Err(e) => err_ptr(e),
    }
}

fn err_ptr<T>(e: Error) -> *mut T {
    // ERR_PTR: the negative errno as a pointer value.
    e.to_errno() as isize as *mut T
}

/// `alloc_sgt_from_device_pages`: an sg table of the export's BAR chunks.
fn build_sgt(export: &DmabufExport, max_seg: u64) -> Result<NonNull<bindings::sg_table>> {
    let n = SgChunks::count(
        &export.pack,
        export.bar(),
        export.offset,
        export.size,
        max_seg,
    )?;
    let nents = c_uint::try_from(n).map_err(|_| EINVAL)?;
    let sgt = KBox::into_raw(KBox::new(bindings::sg_table::default(), GFP_KERNEL)?);
    // SAFETY: `sgt` is a fresh, zeroed table of ours.
    let rc = unsafe { bindings::sg_alloc_table(sgt, nents, bindings::GFP_KERNEL) };
    if rc != 0 {
        // SAFETY: `sgt` came from `into_raw` and was not shared.
        drop(unsafe { KBox::from_raw(sgt) });
        return Err(Error::from_errno(rc));
    }
    // SAFETY: `sg_alloc_table` made `nents` entries reachable from `sgl`
    // through `sg_next`; each is written once.
    unsafe {
        let mut sg = (*sgt).sgl;
        for (addr, len) in export.chunks(max_seg)? {
            if sg.is_null() {
                break;
            }
            let len = c_uint::try_from(len).map_err(|_| EINVAL)?;
            (*sg).dma_address = addr;
            (*sg).dma_length = len;
            (*sg).length = len;
            sg = bindings::sg_next(sg);
        }
        (*sgt).nents = nents;
        // No CPU page list behind the entries (as upstream).
        (*sgt).orig_nents = 0;
    }
    // SAFETY: not null (from `into_raw`).
    Ok(unsafe { NonNull::new_unchecked(sgt) })
}

/// `dma_buf_ops.unmap_dma_buf` (`hl_unmap_dmabuf`).
///
/// # Safety
///
/// Only called by the dma-buf core with a table [`hl_map_dmabuf`] returned.
unsafe extern "C" fn hl_unmap_dmabuf(
    _attach: *mut bindings::dma_buf_attachment,
    sgt: *mut bindings::sg_table,
    _dir: bindings::dma_data_direction,
) {
    // SAFETY: `sgt` is the table built by `build_sgt`: restore `orig_nents` so
    // that every entry is freed, then free the table and its box.
    unsafe {
        (*sgt).orig_nents = (*sgt).nents;
        bindings::sg_free_table(sgt);
        drop(KBox::from_raw(sgt));
    }
}

/// `dma_buf_ops.release` (`hl_release_dmabuf`): everything the export took is
/// given back (`ExportPriv`'s drop).
///
/// # Safety
///
/// Only called by the dma-buf core, once, for a dma-buf of ours.
unsafe extern "C" fn hl_release_dmabuf(dmabuf: *mut bindings::dma_buf) {
    // SAFETY: `priv_` came from `KBox::into_raw` in `export_buf` and is freed
    // once, here.
    drop(unsafe { KBox::from_raw((*dmabuf).priv_.cast::<ExportPriv>()) });
}

/// A dma-buf importer for the KUnit suites: a device of its own, attaching
/// as a NIC driver would.
#[cfg(CONFIG_KUNIT)]
pub(crate) struct TestImporter {
    faux: kernel::faux::Registration,
}

#[cfg(CONFIG_KUNIT)]
struct AttachOps(bindings::dma_buf_attach_ops);
// SAFETY: never written after initialisation.
#[cfg(CONFIG_KUNIT)]
unsafe impl Sync for AttachOps {}

#[cfg(CONFIG_KUNIT)]
static P2P_IMPORTER: AttachOps = AttachOps(bindings::dma_buf_attach_ops {
    allow_peer2peer: true,
    invalidate_mappings: Some(test_invalidate),
});

/// The importer's `invalidate_mappings`: our exports never move.
///
/// # Safety
///
/// Called by the dma-buf core only; touches nothing.
#[cfg(CONFIG_KUNIT)]
unsafe extern "C" fn test_invalidate(_attach: *mut bindings::dma_buf_attachment) {}

#[cfg(CONFIG_KUNIT)]
impl TestImporter {
    /// A new importer device.
    pub(crate) fn new() -> Result<Self> {
        Ok(Self {
            faux: kernel::faux::Registration::new(c"hlrs_test_importer", None)?,
        })
    }

    /// Export `export` as a dma-buf (no fd), attach it from this device
    /// (as a P2P-capable dynamic importer, or a plain one), map it, read every
    /// sg entry (DMA address, length), then unmap, detach and put, and wait
    /// for the release. Returns the entries, or the map error.
    pub(crate) fn import(&self, export: KBox<DmabufExport>, p2p: bool) -> Result<KVec<(u64, u64)>> {
        let buf = export_buf(export, 0, None)?;
        let dev: &kernel::device::Device = self.faux.as_ref().as_ref();
        let dev = core::ptr::from_ref(dev)
            .cast::<bindings::device>()
            .cast_mut();
        // SAFETY: `buf` is our live dma-buf and `dev` a bound device; the
        // attachment is detached below.
        let attach = unsafe {
            if p2p {
                bindings::dma_buf_dynamic_attach(
                    buf.as_ptr(),
                    dev,
                    &P2P_IMPORTER.0,
                    core::ptr::null_mut(),
                )
            } else {
                bindings::dma_buf_attach(buf.as_ptr(), dev)
            }
        };
        let result = match kernel::error::from_err_ptr(attach) {
            // SAFETY: a live attachment, mapped and unmapped here.
            Ok(attach) => unsafe {
                let dir = bindings::dma_data_direction::DMA_BIDIRECTIONAL;
                let sgt = bindings::dma_buf_map_attachment_unlocked(attach, dir);
                let r = match kernel::error::from_err_ptr(sgt) {
                    Ok(sgt) => {
                        let mut out = Ok(KVec::new());
                        let mut sg = (*sgt).sgl;
                        for _ in 0..(*sgt).nents {
                            let Ok(v) = out.as_mut() else { break };
                            if sg.is_null() {
                                break;
                            }
                            let entry = ((*sg).dma_address, u64::from((*sg).dma_length));
                            if v.push(entry, GFP_KERNEL).is_err() {
                                out = Err(ENOMEM);
                            }
                            sg = bindings::sg_next(sg);
                        }
                        bindings::dma_buf_unmap_attachment_unlocked(attach, sgt, dir);
                        out
                    }
                    Err(e) => Err(e),
                };
                bindings::dma_buf_detach(buf.as_ptr(), attach);
                r
            },
            Err(e) => Err(e),
        };
        // SAFETY: our reference from `export_buf`; a kthread's last `fput` is
        // deferred, so wait for the release to have run.
        unsafe {
            bindings::dma_buf_put(buf.as_ptr());
            bindings::flush_delayed_fput();
        }
        result
    }
}
