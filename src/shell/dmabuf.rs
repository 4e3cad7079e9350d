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
//!   `hl_release_dmabuf`, plus `mmap`, which upstream does not have): what an
//!   importer gets is decided by the device's [`Backend`]
//!   (`crate::hw::backend`), and the only sg table an importer can be handed is
//!   an [`ImporterSgt`], whose only constructor maps it for the importer's
//!   device with the DMA API ([`ImporterSgt::map_host_pages`]:
//!   `dma_map_sgtable`), undone by its drop (`dma_unmap_sgtable`) in
//!   `unmap_dma_buf`. So no importer can be given an address that was not
//!   mapped for it.
//! - `mmap` (of the dma-buf fd, or of an importer's object: vgem's
//!   `drm_gem_shmem_mmap` calls `dma_buf_mmap` for imported objects): shared
//!   mappings only; each page is faulted in from the backend's host page for
//!   that DRAM, so CPU readers and writers share the bytes the device holds.
//! - [`TestImporter`] (KUnit only): an importer on a device of its own, as a
//!   NIC driver would be, that reports what it was handed and checks every
//!   DMA address against the DMA API.
//!
//! [`Backend`]: crate::hw::backend::Backend

use crate::{
    ffi::dma::{DmaDirection, Importer, ImporterSgt},
    ioctl::memory::DmabufExporter,
    vm::dmabuf::DmabufExport, //
};
use core::ptr::NonNull;
use kernel::{
    alloc::KVVec,
    bindings,
    mm::virt::{flags as vm_flags, VmaNew},
    page::PAGE_SIZE,
    prelude::*, //
};

#[allow(improper_ctypes)]
extern "C" {
    // Prototypes in `ffi/helpers.h`, bodies in `ffi/helpers.c`.
    /// `sg_page(sg)`.
    #[cfg(CONFIG_KUNIT)]
    fn hlrs_sg_page(sg: *mut bindings::scatterlist) -> *mut bindings::page;
}

/// `FMODE_WRITE` (include/linux/fs.h; a cast bindgen cannot evaluate).
const FMODE_WRITE: bindings::fmode_t = 1 << 1;

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
    mmap: Some(hl_mmap_dmabuf),
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

/// The exporter of EXPORT_DMABUF_FD: the compute node's file during its
/// ioctl (which the dma-buf keeps a reference to), or none (KUnit).
pub(crate) struct FdExporter<'a>(pub(crate) Option<&'a OpenFile>);

impl DmabufExporter for FdExporter<'_> {
    /// EXPORT_DMABUF_FD's last step: export `export` and install a new fd
    /// with `flags` (`O_CLOEXEC` honoured). Returns the fd. On error
    /// everything the record counted is given back.
    fn export_fd(&self, export: KBox<DmabufExport>, flags: u32) -> Result<i32> {
        export_fd(export, flags, self.0)
    }
}

fn export_fd(export: KBox<DmabufExport>, flags: u32, file: Option<&OpenFile>) -> Result<i32> {
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
/// `dmabuf` must be a live dma-buf made by [`export_buf`], and stay live for `'a`.
unsafe fn export_of<'a>(dmabuf: *mut bindings::dma_buf) -> &'a DmabufExport {
    // SAFETY: per the contract `priv_` is our live `ExportPriv`.
    unsafe { &(*(*dmabuf).priv_.cast::<ExportPriv>()).export }
}

/// `dma_buf_ops.attach` (`hl_dmabuf_attach`): the backend says whether the
/// importer reaches device memory peer to peer (upstream:
/// `pci_p2pdma_distance`); when not, the attachment is not P2P. Attaching
/// never fails: what a non-P2P importer can be given is the backend's
/// answer at map time.
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
    // SAFETY: the attachment being set up for this callback.
    let Some(importer) = (unsafe { Importer::new(attach) }) else {
        return EINVAL.to_errno();
    };
    if !export.vm().dev.backend().peer_to_peer(&importer) {
        // SAFETY: `attach` is being set up by the core for us.
        unsafe { (*attach).peer2peer = false };
    }
    0
}

/// `dma_buf_ops.map_dma_buf` (`hl_map_dmabuf`): the backend maps the
/// export's DRAM for the importer; the result can only be an
/// [`ImporterSgt`] (mapped for that importer's device).
///
/// # Safety
///
/// Only called by the dma-buf core with a live attachment to one of ours.
unsafe extern "C" fn hl_map_dmabuf(
    attach: *mut bindings::dma_buf_attachment,
    dir: bindings::dma_data_direction,
) -> *mut bindings::sg_table {
    // SAFETY: per the contract: the dma-buf of a live attachment.
    let export = unsafe { export_of((*attach).dmabuf) };
    // SAFETY: the attachment of this callback.
    let Some(importer) = (unsafe { Importer::new(attach) }) else {
        return err_ptr(EINVAL);
    };
    let dev = &export.vm().dev;
    let mapped = export.pieces().and_then(|pieces| {
        dev.backend()
            .map_for_importer(&importer, DmaDirection(dir), pieces)
    });
    match mapped {
        Ok(sgt) => {
            dev.dmabuf_mapped(true);
            sgt.into_raw()
        }
        Err(e) => err_ptr(e),
    }
}

fn err_ptr<T>(e: Error) -> *mut T {
    // ERR_PTR: the negative errno as a pointer value.
    e.to_errno() as isize as *mut T
}

/// `dma_buf_ops.unmap_dma_buf` (`hl_unmap_dmabuf`): the table's drop unmaps
/// it from the importer's device, frees it and drops its page references.
///
/// # Safety
///
/// Only called by the dma-buf core with a table [`hl_map_dmabuf`] returned
/// for this attachment, once.
unsafe extern "C" fn hl_unmap_dmabuf(
    attach: *mut bindings::dma_buf_attachment,
    sgt: *mut bindings::sg_table,
    _dir: bindings::dma_data_direction,
) {
    // SAFETY: per the contract `sgt` came from `ImporterSgt::into_raw`.
    drop(unsafe { ImporterSgt::from_raw(sgt) });
    // SAFETY: per the contract: a live attachment to one of our dma-bufs.
    let export = unsafe { export_of((*attach).dmabuf) };
    export.vm().dev.dmabuf_mapped(false);
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

struct VmOps(bindings::vm_operations_struct);
// SAFETY: never written after initialisation; the kernel only reads it.
unsafe impl Sync for VmOps {}

static HL_DMABUF_VM_OPS: VmOps = VmOps(bindings::vm_operations_struct {
    fault: Some(hl_dmabuf_vm_fault),
    ..pin_init::zeroed()
});

/// `dma_buf_ops.mmap` (upstream has none): a CPU mapping of the export,
/// from the dma-buf fd or through an importer (`dma_buf_mmap`). Shared
/// mappings only (`EINVAL`: a private copy of device memory makes no sense);
/// writable only if the dma-buf was exported `O_RDWR` (`EACCES`, and
/// `mprotect` cannot add it later). The core has already checked that
/// `[vm_pgoff, + pages)` lies inside the buffer. Pages are faulted in one at
/// a time ([`hl_dmabuf_vm_fault`]), so mapping a large export costs nothing
/// until it is touched. The vma holds the dma-buf's file, so the export
/// outlives the mapping.
///
/// # Safety
///
/// Only called by the dma-buf core with a live dma-buf of ours and a vma
/// being set up for it, whose `vm_file` is the dma-buf's file.
unsafe extern "C" fn hl_mmap_dmabuf(
    dmabuf: *mut bindings::dma_buf,
    vma: *mut bindings::vm_area_struct,
) -> c_int {
    // SAFETY: per the contract: a vma in its `mmap` hook.
    let new = unsafe { VmaNew::from_raw(vma) };
    if new.flags() & (vm_flags::SHARED | vm_flags::MAYSHARE) == 0 {
        return EINVAL.to_errno();
    }
    // SAFETY: per the contract the dma-buf (and its file) are live.
    let mode = unsafe { (*(*dmabuf).file).f_mode };
    if mode & FMODE_WRITE == 0 {
        if new.writable() {
            return EACCES.to_errno();
        }
        if new.try_clear_maywrite().is_err() {
            return EACCES.to_errno();
        }
    }
    new.set_dontexpand();
    new.set_dontdump();
    // SAFETY: the vma is ours to set up; `vm_private_data` stays valid as
    // long as the vma, which holds the dma-buf's file (and so the dma-buf).
    unsafe {
        (*vma).vm_ops = &HL_DMABUF_VM_OPS.0;
        (*vma).vm_private_data = dmabuf.cast();
    }
    0
}

/// `vm_ops.fault` of an export's CPU mapping: the backend's host page for
/// the DRAM behind that page of the export (populated, zeroed, if never
/// written), handed to the core with its own reference (the page-table
/// entry's). `SIGBUS` past the export or when the backend has no host page
/// for it, `OOM` when one cannot be allocated.
///
/// # Safety
///
/// Only called by the core for a vma [`hl_mmap_dmabuf`] set up.
unsafe extern "C" fn hl_dmabuf_vm_fault(vmf: *mut bindings::vm_fault) -> bindings::vm_fault_t {
    // SAFETY: per the contract `vmf` describes a fault in one of our vmas,
    // whose `vm_private_data` is the live dma-buf.
    let (dmabuf, pgoff) = unsafe {
        let f = &(*vmf).__bindgen_anon_1;
        (
            (*f.vma).vm_private_data.cast::<bindings::dma_buf>(),
            f.pgoff,
        )
    };
    // SAFETY: the dma-buf outlives the vma (see `hl_mmap_dmabuf`).
    let export = unsafe { export_of(dmabuf) };
    let page = u64::try_from(pgoff)
        .ok()
        .and_then(|p| p.checked_mul(PAGE_SIZE as u64))
        .and_then(|at| export.dram_addr(at))
        .ok_or(EINVAL)
        .and_then(|pa| export.vm().dev.backend().dram_host_page(pa));
    match page {
        Ok(page) => {
            // SAFETY: `vmf` is the fault being handled; the core maps the
            // page and owns the reference given with it.
            unsafe { (*vmf).page = page.into_raw() };
            0
        }
        Err(e) if e == ENOMEM => bindings::vm_fault_reason_VM_FAULT_OOM,
        Err(_) => bindings::vm_fault_reason_VM_FAULT_SIGBUS,
    }
}

/// What [`TestImporter::import`] found in the table it was handed.
#[cfg(CONFIG_KUNIT)]
pub(crate) struct Imported {
    /// `attach->peer2peer` after the exporter's `attach`.
    pub(crate) peer2peer: bool,
    /// The table's CPU entries (`orig_nents`).
    pub(crate) cpu_entries: u32,
    /// Each DMA entry (`nents`).
    pub(crate) entries: KVec<ImportedEntry>,
    /// The bytes of the whole table, read through its pages (`sg_copy_to_buffer`).
    pub(crate) bytes: KVVec<u8>,
}

/// One DMA entry of an imported table.
#[cfg(CONFIG_KUNIT)]
pub(crate) struct ImportedEntry {
    /// `sg_dma_address`.
    pub(crate) dma: u64,
    /// `sg_dma_len`.
    pub(crate) len: u64,
    /// Whether `sg_page` is set.
    pub(crate) has_page: bool,
    /// What `dma_map_page` of the entry's page, offset and length on the
    /// importer's device returns (mapped and unmapped again), or `None`
    /// without a page.
    pub(crate) dma_of_page: Option<u64>,
}

/// A dma-buf importer for the KUnit suites: a device of its own, attaching
/// as a NIC driver would. Its device gets a 64-bit DMA mask (a faux device
/// has none, and the DMA API refuses such devices).
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
        let this = Self {
            faux: kernel::faux::Registration::new(c"hlrs_test_importer", None)?,
        };
        let dev = this.dev();
        // `dma_coerce_mask_and_coherent(dev, DMA_BIT_MASK(64))`.
        // SAFETY: the device is ours and nothing maps for it yet; the mask
        // pointer goes to its own coherent mask, which lives as long as it.
        unsafe {
            (*dev).coherent_dma_mask = u64::MAX;
            (*dev).dma_mask = &raw mut (*dev).coherent_dma_mask;
        }
        Ok(this)
    }

    /// Arm the calling task's systematic fault injection (what
    /// `/proc/thread-self/fail-nth` sets): the `n`-th fault-injection point
    /// it reaches from now fails (0: disarm). Returns what was left of the
    /// previous count: 0 if the armed fault was reached (or none was armed).
    /// `None` without `CONFIG_FAULT_INJECTION`.
    pub(crate) fn fail_nth(n: u32) -> Option<u32> {
        #[cfg(CONFIG_FAULT_INJECTION)]
        {
            let task = kernel::task::Task::current_raw();
            // SAFETY: the current task is live; only it reads and writes its
            // own `fail_nth` (`READ_ONCE`/`WRITE_ONCE` in C).
            unsafe {
                let slot = &raw mut (*task).fail_nth;
                let left = core::ptr::read_volatile(slot);
                core::ptr::write_volatile(slot, n);
                Some(left)
            }
        }
        #[cfg(not(CONFIG_FAULT_INJECTION))]
        {
            let _ = n;
            None
        }
    }

    fn dev(&self) -> *mut bindings::device {
        let dev: &kernel::device::Device = self.faux.as_ref().as_ref();
        core::ptr::from_ref(dev)
            .cast::<bindings::device>()
            .cast_mut()
    }

    /// Export `export` as a dma-buf (no fd), attach it from this device (as
    /// a P2P-capable dynamic importer, or a plain one), map it, and report
    /// what the table holds: every DMA entry with what the DMA API gives for
    /// its page on this device, and the bytes behind the pages. Then unmap,
    /// detach, put, and wait for the release. `map` runs with the export's
    /// pages mapped, after the entries were read (the mapping is live).
    pub(crate) fn import(
        &self,
        export: KBox<DmabufExport>,
        p2p: bool,
        map: impl FnOnce(&Imported),
    ) -> Result<Imported> {
        let size = usize::try_from(export.size).map_err(|_| EINVAL)?;
        let buf = export_buf(export, 0, None)?;
        let dev = self.dev();
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
        let result = kernel::error::from_err_ptr(attach).and_then(|attach| {
            // SAFETY: a live attachment of this device to a dma-buf of
            // `size` bytes; detached right after.
            let r = unsafe { self.map_and_read(attach, size, map) };
            // SAFETY: as above.
            unsafe { bindings::dma_buf_detach(buf.as_ptr(), attach) };
            r
        });
        // SAFETY: our reference from `export_buf`; a kthread's last `fput` is
        // deferred, so wait for the release to have run.
        unsafe {
            bindings::dma_buf_put(buf.as_ptr());
            bindings::flush_delayed_fput();
        }
        result
    }

    /// Map `attach`, read its table, run `map` on what was found, unmap.
    ///
    /// # Safety
    ///
    /// `attach` must be a live attachment of this importer's device to a
    /// dma-buf of `size` bytes.
    unsafe fn map_and_read(
        &self,
        attach: *mut bindings::dma_buf_attachment,
        size: usize,
        map: impl FnOnce(&Imported),
    ) -> Result<Imported> {
        let dir = bindings::dma_data_direction::DMA_BIDIRECTIONAL;
        // SAFETY: per the contract; unmapped below.
        let sgt = unsafe { bindings::dma_buf_map_attachment_unlocked(attach, dir) };
        let sgt = kernel::error::from_err_ptr(sgt)?;
        // SAFETY: the table just mapped for `attach`, live until the unmap below.
        let r = unsafe { self.read_table(attach, sgt, size, dir) };
        if let Ok(found) = &r {
            map(found);
        }
        // SAFETY: the mapping made above, undone once.
        unsafe { bindings::dma_buf_unmap_attachment_unlocked(attach, sgt, dir) };
        r
    }

    /// What a table mapped for this importer holds (see [`Imported`]).
    ///
    /// # Safety
    ///
    /// `sgt` must be a live table the exporter returned for `attach` (an
    /// attachment of this importer's device) in direction `dir`, for a
    /// dma-buf of `size` bytes.
    unsafe fn read_table(
        &self,
        attach: *mut bindings::dma_buf_attachment,
        sgt: *mut bindings::sg_table,
        size: usize,
        dir: bindings::dma_data_direction,
    ) -> Result<Imported> {
        let dev = self.dev();
        let mut bytes = KVVec::from_elem(0u8, size, GFP_KERNEL)?;
        // SAFETY: per the contract `sgt` is live, with `orig_nents` CPU
        // entries; `bytes` has room for `size` bytes.
        let (copied, first, nents, cpu_entries, peer2peer) = unsafe {
            let copied = bindings::sg_copy_to_buffer(
                (*sgt).sgl,
                (*sgt).orig_nents,
                bytes.as_mut_ptr().cast(),
                size,
            );
            let t = &*sgt;
            (copied, t.sgl, t.nents, t.orig_nents, (*attach).peer2peer)
        };
        if copied != size {
            return Err(EIO);
        }
        let mut entries = KVec::new();
        let mut sg = first;
        for _ in 0..nents {
            if sg.is_null() {
                return Err(EIO);
            }
            // SAFETY: `sg` is one of the table's first `nents` entries
            // (reached with `sg_next`); its page, if set, is live while the
            // table is mapped, and the `dma_map_page` of it is undone at once.
            let entry = unsafe {
                let page = hlrs_sg_page(sg);
                let (offset, length) = ((*sg).offset as usize, (*sg).length as usize);
                let dma_of_page = (!page.is_null()).then(|| {
                    let a = bindings::dma_map_page_attrs(dev, page, offset, length, dir, 0);
                    if a != u64::MAX {
                        bindings::dma_unmap_page_attrs(dev, a, length, dir, 0);
                    }
                    a
                });
                ImportedEntry {
                    dma: bindings::sg_dma_address(sg),
                    len: u64::from(bindings::sg_dma_len(sg)),
                    has_page: !page.is_null(),
                    dma_of_page,
                }
            };
            entries.push(entry, GFP_KERNEL)?;
            // SAFETY: as above.
            sg = unsafe { bindings::sg_next(sg) };
        }
        Ok(Imported {
            peer2peer,
            cpu_entries,
            entries,
            bytes,
        })
    }
}

#[cfg(CONFIG_KUNIT)]
#[kunit_tests(hlrs_dmabuf_import)]
mod tests {
    //! The callbacks as an importer on another device reaches them.
    use super::*;
    use crate::vm::{
        device_memory::{alloc_device_memory, free_device_memory},
        dmabuf::prepare_export,
        mapping::{map_device_va, unmap_device_va},
        test_vm::{TestContext, TestDevice},
    };
    use kernel::sync::Arc;

    const DPAGE: u64 = 0x3000_0000;
    const PAGE: u64 = PAGE_SIZE as u64;

    use crate::vm::test_vm::device_and_context as setup;

    fn mapped(ctx: &Arc<TestContext>, pages: u64, flags: u32) -> Result<(u32, u64)> {
        let h = alloc_device_memory(ctx.vm(), pages * DPAGE, flags)?;
        let va = map_device_va(ctx.vm(), u64::from(h), 0, 0)?;
        Ok((h, va))
    }

    /// A scattered 3-page mapping with every other DRAM page held by another
    /// allocation, and the range `[DPAGE - 3 pages, + 6 pages)` of it to
    /// export: it crosses the boundary between two DRAM pages that are not
    /// physically consecutive, so its DRAM is in two places. (Crossing both
    /// boundaries would take a whole 768 MiB DRAM page of host memory.)
    /// Returns (handle, VA, offset, size).
    fn scattered_export_setup(ctx: &Arc<TestContext>) -> Result<(u32, u64, u64, u64)> {
        for _ in 0..3 {
            let keep = alloc_device_memory(ctx.vm(), DPAGE, 0)?;
            let gap = alloc_device_memory(ctx.vm(), DPAGE, 0)?;
            free_device_memory(ctx.vm(), u64::from(gap))?;
            let _ = keep;
        }
        let (h, va) = mapped(ctx, 3, 0)?;
        Ok((h, va, DPAGE - 3 * PAGE, 6 * PAGE))
    }

    /// Write a pattern to the DRAM behind every 4 KiB of `[va + offset, +
    /// size)` (as the MMU translates it) except the `skip`-th, and return
    /// what the simulated DRAM then holds for the range.
    fn fill_and_read(
        d: &Arc<TestDevice>,
        ctx: &Arc<TestContext>,
        va: u64,
        offset: u64,
        size: u64,
        skip: u64,
    ) -> Result<KVVec<u8>> {
        let mut want = KVVec::from_elem(0u8, size as usize, GFP_KERNEL)?;
        for (i, chunk) in want.chunks_mut(PAGE as usize).enumerate() {
            let i = i as u64;
            let pa = ctx
                .vm()
                .translate(va + offset + i * PAGE)
                .map_err(|_| EINVAL)?
                .pa;
            if i != skip {
                let mut bytes = [0u8; 64];
                for (k, b) in bytes.iter_mut().enumerate() {
                    *b = (i as u8).wrapping_mul(31).wrapping_add(k as u8) | 1;
                }
                // The start, the end and the middle of each page.
                for at in [0, PAGE - 64, PAGE / 2 - 32] {
                    d.backend().dram_write(pa + at, &bytes)?;
                }
            }
            d.backend().dram_read(pa, chunk)?;
        }
        Ok(want)
    }

    #[test]
    fn importer_gets_addresses_mapped_for_its_device() -> Result {
        let (d, ctx) = setup()?;
        let imp = crate::shell::dmabuf::TestImporter::new()?;
        let (h, va, offset, size) = scattered_export_setup(&ctx)?;
        // The 4th page of the range is never written: the importer still
        // gets a (zeroed) host page for it.
        let want = fill_and_read(&d, &ctx, va, offset, size, 3)?;
        assert!(want.iter().take(PAGE as usize).any(|&b| b != 0));
        let backed = d.sim.backed_chunks();
        // A P2P-capable dynamic importer and a plain one are served alike:
        // the simulation's DRAM is host memory, so no attachment is P2P.
        for p2p in [true, false] {
            let export = prepare_export(ctx.vm(), ctx.clone(), va, size, offset, 0)?;
            assert_eq!(d.vm.dmabuf_exports(), 1);
            let found = imp.import(export, p2p, |_| assert_eq!(d.vm.dmabuf_mappings(), 1))?;
            assert!(!found.peer2peer);
            // No IOMMU in the guest: one DMA entry per CPU entry.
            assert_eq!(found.entries.len(), found.cpu_entries as usize);
            let mut done = 0u64;
            for e in found.entries.iter() {
                // Every entry has its page, and its DMA address is exactly
                // what the DMA API gives for that page on the importer's
                // device (before: the made-up BAR address 0x4000_0000_0000 +
                // offset, mapped for nobody).
                assert!(e.has_page);
                assert_eq!(e.dma_of_page, Some(e.dma));
                assert!(e.len > 0 && e.len <= 64 << 10 && e.len % PAGE == 0);
                done += e.len;
            }
            assert_eq!(done, size);
            // Through the pages, the importer reads exactly what the
            // simulated DRAM holds for the range.
            assert!(found.bytes.as_slice() == want.as_slice());
            // The release gave everything back.
            assert_eq!(d.vm.dmabuf_mappings(), 0);
            assert_eq!(d.vm.dmabuf_exports(), 0);
            assert_eq!(ctx.vm().exports.lock().iter().count(), 0);
        }
        // Mapping populated the one page never written, and only it.
        assert_eq!(d.sim.backed_chunks(), backed + 1);
        unmap_device_va(ctx.vm(), va)?;
        free_device_memory(ctx.vm(), u64::from(h))?;
        Ok(())
    }

    #[test]
    fn importer_mapping_holds_the_backing_pages_until_unmapped() -> Result {
        let (d, ctx) = setup()?;
        let imp = crate::shell::dmabuf::TestImporter::new()?;
        let (h, va, offset, size) = scattered_export_setup(&ctx)?;
        fill_and_read(&d, &ctx, va, offset, size, u64::MAX)?;
        let pages = size / PAGE;
        let mut pas = KVec::new();
        for i in 0..pages {
            let pa = ctx
                .vm()
                .translate(va + offset + i * PAGE)
                .map_err(|_| EINVAL)?
                .pa;
            pas.push(pa, GFP_KERNEL)?;
        }
        let refs = |pa: &u64| d.sim.chunk_refs(*pa);
        assert!(pas.iter().all(|pa| refs(pa) == Some(1)));
        let export = prepare_export(ctx.vm(), ctx.clone(), va, size, offset, 0)?;
        imp.import(export, false, |_| {
            // While mapped, the importer's table holds one more reference
            // to every page of the range.
            assert!(pas.iter().all(|pa| refs(pa) == Some(2)));
        })?;
        assert!(pas.iter().all(|pa| refs(pa) == Some(1)));
        // A failed map (the third page cannot be populated) keeps nothing.
        let (h2, va2) = mapped(&ctx, 1, 0)?;
        let pa = ctx.vm().translate(va2).map_err(|_| EINVAL)?.pa;
        let backed = d.sim.backed_chunks();
        d.sim.inject_host_page_failure(3);
        let export = prepare_export(ctx.vm(), ctx.clone(), va2, 8 * PAGE, 0, 0)?;
        assert_eq!(imp.import(export, false, |_| ()).err(), Some(ENOMEM));
        d.sim.inject_host_page_failure(0);
        assert_eq!(d.vm.dmabuf_mappings(), 0);
        assert_eq!(d.vm.dmabuf_exports(), 0);
        // The two pages populated before the failure stay backed DRAM, held
        // by the simulation alone.
        assert_eq!(d.sim.backed_chunks(), backed + 2);
        assert_eq!(d.sim.chunk_refs(pa), Some(1));
        assert_eq!(d.sim.chunk_refs(pa + PAGE), Some(1));
        assert_eq!(d.sim.chunk_refs(pa + 2 * PAGE), None);
        unmap_device_va(ctx.vm(), va2)?;
        free_device_memory(ctx.vm(), u64::from(h2))?;
        unmap_device_va(ctx.vm(), va)?;
        free_device_memory(ctx.vm(), u64::from(h))?;
        Ok(())
    }

    #[test]
    fn a_map_failing_at_any_allocation_keeps_nothing() -> Result {
        use crate::shell::dmabuf::TestImporter;
        let (d, ctx) = setup()?;
        let imp = TestImporter::new()?;
        let (h, va, offset, size) = scattered_export_setup(&ctx)?;
        // Every page but the 4th backed: the map populates that one.
        let want = fill_and_read(&d, &ctx, va, offset, size, 3)?;
        let mut pas = KVec::new();
        for i in 0..size / PAGE {
            let t = ctx.vm().translate(va + offset + i * PAGE);
            pas.push(t.map_err(|_| EINVAL)?.pa, GFP_KERNEL)?;
        }
        // Fail the 1st, 2nd, ... allocation of the import (export, attach,
        // populate, page array, sg table, its record, the importer's own
        // reads) until one goes through: each failure is ENOMEM, and leaves
        // no mapping, no export and no extra page reference behind
        // (kmemleak checks the sg table and the records at the end of the run).
        let mut failures = 0u32;
        for n in 1..1000 {
            let export = prepare_export(ctx.vm(), ctx.clone(), va, size, offset, 0)?;
            if TestImporter::fail_nth(n).is_none() {
                pr_info!("no CONFIG_FAULT_INJECTION: allocation failures not injected\n");
                break;
            }
            let r = imp.import(export, n % 2 == 0, |_| ());
            let left = TestImporter::fail_nth(0).unwrap_or(0);
            assert_eq!(d.vm.dmabuf_mappings(), 0);
            assert_eq!(d.vm.dmabuf_exports(), 0);
            for pa in pas.iter() {
                assert!(matches!(d.sim.chunk_refs(*pa), None | Some(1)));
            }
            match r {
                Ok(found) => {
                    assert!(found.bytes.as_slice() == want.as_slice());
                    if left != 0 {
                        break;
                    }
                }
                Err(e) => {
                    assert_eq!(left, 0);
                    assert_eq!(e, ENOMEM);
                    failures += 1;
                }
            }
        }
        pr_info!(
            "hlrs_dmabuf: an import failed at each of its {} allocation points (injected)\n",
            failures
        );
        unmap_device_va(ctx.vm(), va)?;
        free_device_memory(ctx.vm(), u64::from(h))?;
        Ok(())
    }
}
