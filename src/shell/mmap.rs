// SPDX-License-Identifier: GPL-2.0

//! `mmap` of the compute node (upstream `hl_mmap`, common/device.c:650-689):
//! every `unsafe` of vma handling, and the memory that user mappings reach.
//!
//! - [`hl_mmap`] dispatches on the type bits of the page offset: a HW block
//!   (`HL_MMAP_TYPE_BLOCK`), a timestamp buffer (`HL_MMAP_TYPE_TS_BUFF`) or a
//!   command buffer (`HL_MMAP_TYPE_CB`); any other type is `EINVAL`. The
//!   checks (ids, exact sizes, one live mmap) are safe Rust in
//!   `vm/hw_block.rs`, `vm/ts_buffer.rs` and `vm/command_buffer.rs`; this file only turns
//!   their answer into page-table entries and vm operations.
//! - The register memory user mappings reach is `ffi::register_page`'s
//!   `RegisterBlock`.
//! - Only `MAP_SHARED` mappings are served (see [`is_shared`]).
//!
//! Every vma of a mapping, including the pieces a partial `munmap` or
//! `mprotect` splits off and the copy an `mremap` move makes, holds one
//! reference to the mapping's record through `vm_ops.open`/`close`. Upstream
//! counts bytes in `close` only, so an `mremap` move (allowed at the same
//! length) frees the record while the moved vma still points to it.

use crate::{
    file::ComputeFile,
    uapi::{mmap_type, HL_MMAP_TYPE_BLOCK, HL_MMAP_TYPE_CB, HL_MMAP_TYPE_TS_BUFF},
    vm::{
        command_buffer::CommandBuffer,
        hw_block_mmap::{BlockVma, HwBlockMmap},
        one_mmap::{MmapClaim, OneMmap},
        ts_buffer::TsBuffer,
    },
};
use kernel::{
    bindings,
    mm::virt::VmaRef,
    page::PAGE_SIZE,
    prelude::*,
    sync::{Arc, ArcBorrow},
};

#[allow(improper_ctypes)]
extern "C" {
    // Prototypes in `ffi/helpers.h`, bodies in `ffi/helpers.c`.
    /// `access_ok(addr, size)` on the current task.
    fn hlrs_access_ok(addr: c_ulong, size: c_ulong) -> bool;
}

/// Flags upstream sets on a HW-block mapping (gaudi2.c:11628-11629).
const BLOCK_VM_FLAGS: bindings::vm_flags_t = bindings::VM_IO
    | bindings::VM_PFNMAP
    | bindings::VM_DONTEXPAND
    | bindings::VM_DONTDUMP
    | bindings::VM_DONTCOPY
    | bindings::VM_NORESERVE;

/// Flags upstream sets on a timestamp-buffer mapping (memory.c:2102-2108),
/// and on a CB mapping (`gaudi2_mmap`, gaudi2.c, the same four).
const TS_VM_FLAGS: bindings::vm_flags_t = bindings::VM_DONTEXPAND
    | bindings::VM_DONTDUMP
    | bindings::VM_DONTCOPY
    | bindings::VM_NORESERVE;

struct VmOps(bindings::vm_operations_struct);
// SAFETY: the tables are never written after initialisation; the kernel only
// reads them.
unsafe impl Sync for VmOps {}

static HW_BLOCK_VM_OPS: VmOps = VmOps(bindings::vm_operations_struct {
    open: Some(vm_open::<BlockVma>),
    close: Some(vm_close::<BlockVma>),
    ..pin_init::zeroed()
});

static TS_VM_OPS: VmOps = VmOps(bindings::vm_operations_struct {
    open: Some(vm_open::<TsBuffer>),
    close: Some(vm_close::<TsBuffer>),
    ..pin_init::zeroed()
});

static CB_VM_OPS: VmOps = VmOps(bindings::vm_operations_struct {
    open: Some(vm_open::<CommandBuffer>),
    close: Some(vm_close::<CommandBuffer>),
    ..pin_init::zeroed()
});

/// `file_operations.mmap` of the compute node.
///
/// # Safety
///
/// Only called by the VFS (`mmap_region`) for a file of our DRM device whose
/// open succeeded, with `vma` undergoing its initial setup under the mmap lock.
pub(crate) unsafe extern "C" fn hl_mmap(
    filp: *mut bindings::file,
    vma: *mut bindings::vm_area_struct,
) -> c_int {
    // SAFETY: DRM's `private_data` of an open accel file is its `drm_file`.
    let drm_file = unsafe { (*filp).private_data.cast::<bindings::drm_file>() };
    // SAFETY: the file is open for the whole call (the VFS holds a reference).
    let f = unsafe { crate::shell::drm_file::compute_file(drm_file) };
    // SAFETY: `vma` is valid, and the mmap lock is held for the whole call.
    let area = unsafe { VmaRef::from_raw(vma) };
    // SAFETY: as above.
    let pgoff = unsafe { (*vma).vm_pgoff };
    let (start, len) = (area.start() as u64, (area.end() - area.start()) as u64);
    // SAFETY: no preconditions; checks the current task's address limit.
    if !unsafe { hlrs_access_ok(start as c_ulong, len as c_ulong) } {
        return EINVAL.to_errno();
    }
    if !is_shared(area.flags()) {
        return EINVAL.to_errno();
    }
    let rc = match mmap_type(pgoff as u64) {
        HL_MMAP_TYPE_BLOCK => {
            // SAFETY: as above.
            unsafe { map_hw_block(f, vma, pgoff as u64, start, len) }
        }
        // Each looks the buffer up, checks the length and claims its one
        // live mmap (safe Rust in `vm/`).
        HL_MMAP_TYPE_TS_BUFF => {
            let vm = f.ctx.vm();
            crate::vm::ts_buffer::claim_mmap(&vm.ts_buffers, pgoff as u64, len).and_then(|c| {
                let mem = c.user_memory();
                // SAFETY: as above; `mem` is the claimed buffer's user part.
                unsafe { map_claimed(vma, c, mem, (start, len), &TS_VM_OPS) }
            })
        }
        HL_MMAP_TYPE_CB => {
            let vm = f.ctx.vm();
            crate::vm::command_buffer::claim_mmap(&vm.cbs, pgoff as u64, len).and_then(|c| {
                let mem = c.memory();
                // SAFETY: as above; `mem` is the claimed CB's memory.
                unsafe { map_claimed(vma, c, mem, (start, len), &CB_VM_OPS) }
            })
        }
        _ => Err(EINVAL),
    };
    match rc {
        Ok(()) => 0,
        Err(e) => e.to_errno(),
    }
}

/// Whether a new vma with `flags` was asked for with `MAP_SHARED`: only
/// those are served (**difference**: upstream maps `MAP_PRIVATE` too).
///
/// Both kinds of mapping exist to share memory with the device and the
/// driver, and a private one is a copy-on-write mapping:
///
/// - a HW block: `remap_pfn_range` on a copy-on-write vma sets `vm_pgoff` to
///   the first pfn (so the mm can tell its raw pfns from copied pages), and
///   `/proc/self/maps` shows that offset: the physical address of a kernel
///   page that a shared mapping of the same block lets the user fill.
///   (Upstream sets `vm_pgoff` to the block id after the remap,
///   memory.c:1510, which hides the address; the page stays a private
///   copy-on-write view of the registers);
/// - a timestamp buffer: the first write of the user to a private mapping
///   copies the page, and from then on the user reads its copy instead of
///   the timestamps the device writes.
///
/// `VM_MAYSHARE` is what `MAP_SHARED` sets in every case; `VM_SHARED` goes
/// with it unless the fd is read-only, and then `VM_MAYWRITE` goes too, so
/// such a mapping is not copy-on-write either.
fn is_shared(flags: kernel::mm::virt::vm_flags_t) -> bool {
    flags & kernel::mm::virt::flags::MAYSHARE != 0
}

/// `hl_hw_block_mmap`: map the registers of one HW block.
///
/// # Safety
///
/// `vma` is undergoing initial setup (the caller is the `mmap` hook).
unsafe fn map_hw_block(
    f: &ComputeFile,
    vma: *mut bindings::vm_area_struct,
    pgoff: u64,
    start: u64,
    len: u64,
) -> Result {
    // The checks, the backing registers and the record: safe Rust.
    let plan: HwBlockMmap =
        crate::vm::hw_block_mmap::prepare_mmap(f.ctx.vm(), f.ctx.clone(), pgoff, start, len)?;
    // SAFETY: the vma is not yet visible to anyone else.
    unsafe { (*vma).__bindgen_anon_2.vm_flags |= BLOCK_VM_FLAGS };
    let size = c_ulong::try_from(len).map_err(|_| EINVAL)?;
    // SAFETY: `vma` covers exactly `len` bytes from `start`; the pfns are the
    // block's contiguous registers, which live as long as the device (longer
    // than any mapping: a mapping pins the file, the module and the device).
    let rc = unsafe {
        bindings::remap_pfn_range(
            vma,
            start as c_ulong,
            plan.pfn as c_ulong,
            size,
            (*vma).vm_page_prot,
        )
    };
    if rc != 0 {
        return Err(Error::from_errno(rc));
    }
    // The record is published and the vma gets its reference last, when
    // nothing can fail any more.
    // SAFETY: the vma is being set up by us (contract of this function).
    unsafe { install(vma, plan.publish(), &HW_BLOCK_VM_OPS) };
    Ok(())
}

/// Give the vma its reference to the mapping's shared record and its ops.
///
/// # Safety
///
/// `vma` must be undergoing initial setup in our `mmap` hook, with `ops`
/// the vm operations of `T`'s mappings.
unsafe fn install<T: SharedByVmas>(
    vma: *mut bindings::vm_area_struct,
    private: Arc<T>,
    ops: &'static VmOps,
) {
    // SAFETY: per the contract; the strong reference is owned by this vma
    // from now on and given back by `vm_close::<T>`.
    unsafe {
        (*vma).vm_private_data = Arc::into_raw(private).cast_mut().cast();
        (*vma).vm_ops = &ops.0;
    }
}

/// `hl_ts_mmap` and `hl_cb_mmap`: map the whole memory `(base, bytes)` of
/// a buffer whose one live mmap `claim` holds, and give the vma its
/// reference and `ops`.
///
/// # Safety
///
/// `vma` is undergoing initial setup (the caller is the `mmap` hook) and
/// covers `len` bytes from `start`; `(base, bytes)` is the vmalloc memory of
/// the claimed buffer, with `ops` the vm operations of `T`'s mappings.
unsafe fn map_claimed<T: SharedByVmas + OneMmap>(
    vma: *mut bindings::vm_area_struct,
    claim: MmapClaim<T>,
    (base, bytes): (*const u8, usize),
    (start, len): (u64, u64),
    ops: &'static VmOps,
) -> Result {
    // SAFETY: per the contract; the claim keeps the memory alive. On error
    // the claim is dropped: the buffer is free to be mapped again.
    unsafe { insert_vmalloc_pages(vma, (base, bytes), start, len) }?;
    // SAFETY: the vma is being set up by us (contract of this function).
    unsafe { install(vma, claim.into_vma_reference(), ops) };
    Ok(())
}

/// Set the flags of a mapping of vmalloc memory on `vma` and insert the
/// pages of `(base, bytes)` from `start`, up to `len` bytes. On error the
/// caller's claim, dropped, lets the memory be mapped again. O(pages).
///
/// # Safety
///
/// `vma` is undergoing initial setup and covers `len` bytes from `start`;
/// `base` is a vmalloc allocation of `bytes` bytes (a page multiple) that
/// stays alive for the call.
unsafe fn insert_vmalloc_pages(
    vma: *mut bindings::vm_area_struct,
    (base, bytes): (*const u8, usize),
    start: u64,
    len: u64,
) -> Result {
    // SAFETY: the vma is not yet visible to anyone else.
    unsafe { (*vma).__bindgen_anon_2.vm_flags |= TS_VM_FLAGS };
    let mut off = 0usize;
    while (off as u64) < len && off < bytes {
        // SAFETY: `base + off` is inside the buffer's vmalloc area (`off <
        // bytes`, both page multiples), which lives for the call (contract).
        let page = unsafe { bindings::vmalloc_to_page(base.add(off).cast()) };
        // SAFETY: `vma` covers `len` bytes from its start; `page` is a live
        // page of the buffer; `vm_insert_page` takes its own page reference.
        let rc = unsafe { bindings::vm_insert_page(vma, (start + off as u64) as c_ulong, page) };
        if rc != 0 {
            return Err(Error::from_errno(rc));
        }
        off += PAGE_SIZE;
    }
    Ok(())
}

/// What the vmas of one mapping share through `vm_private_data`: each vma
/// holds one strong reference and reports its coming and going.
pub(crate) trait SharedByVmas: Sync + Send + Sized {
    /// A new vma of the mapping (a split-off piece, or an `mremap` copy).
    fn vma_opened(&self);
    /// A vma of the mapping went away.
    fn vma_closed(&self);
}

impl SharedByVmas for BlockVma {
    fn vma_opened(&self) {
        BlockVma::vma_opened(self)
    }
    fn vma_closed(&self) {
        // Never the last reference to the context: the vma's file keeps the
        // DRM file, and so the context, open until after this returns.
        BlockVma::vma_closed(self)
    }
}

impl SharedByVmas for CommandBuffer {
    fn vma_opened(&self) {
        OneMmap::vma_opened(self)
    }
    fn vma_closed(&self) {
        OneMmap::vma_closed(self)
    }
}

impl SharedByVmas for TsBuffer {
    fn vma_opened(&self) {
        OneMmap::vma_opened(self)
    }
    fn vma_closed(&self) {
        OneMmap::vma_closed(self)
    }
}

/// `vm_ops.open`: a new vma (a split-off piece, or the copy an `mremap` move
/// makes) takes its own reference.
///
/// # Safety
///
/// Only called by the mm for a vma whose `vm_private_data` is an
/// `Arc<T>` reference set by [`map_hw_block`] or [`map_claimed`] (copied
/// from such a vma).
unsafe extern "C" fn vm_open<T: SharedByVmas>(vma: *mut bindings::vm_area_struct) {
    // SAFETY: `vm_private_data` is a live `Arc<T>` reference held by the vma
    // this one was copied from.
    let shared = unsafe { ArcBorrow::from_raw((*vma).vm_private_data.cast::<T>()) };
    let mine: Arc<T> = shared.into();
    mine.vma_opened();
    // This vma owns the new reference (the pointer is the one it already has).
    core::mem::forget(mine);
}

/// `vm_ops.close` (upstream `hw_block_vm_close`, `hl_mmap_mem_buf_vm_close`):
/// the vma gives its reference back; the last one ends the mapping.
///
/// # Safety
///
/// Only called by the mm, once per vma that [`map_hw_block`],
/// [`map_claimed`] or [`vm_open`] gave an `Arc<T>` reference.
unsafe extern "C" fn vm_close<T: SharedByVmas>(vma: *mut bindings::vm_area_struct) {
    // SAFETY: the vma owns one strong reference, given back once, here.
    let mine = unsafe { Arc::from_raw((*vma).vm_private_data.cast::<T>()) };
    mine.vma_closed();
}
