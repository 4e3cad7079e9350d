// SPDX-License-Identifier: GPL-2.0

//! Device virtual memory (floor 5). Upstream keeps all of this in
//! `common/memory.c`; here each concept has its own file, in three steps that
//! import only downward:
//!
//! 1. tables: [`dram_pool`], [`page_pack`], [`handles`], [`device_vm`] (the
//!    device-wide owner: pool, handles, usage counters, over the device's
//!    MMUs), [`va_range`] and [`va_alloc`] (a context's VA ranges and their
//!    block allocator), [`va_quarantine`] (unmapped VA kept from reuse
//!    while CSs could still reach it), [`mapping_table`] and [`userptr`], [`export_list`],
//!    [`hw_block`], [`one_mmap`], [`ts_buffer`], [`command_buffer`],
//!    [`op_profile`], [`spares`];
//! 2. [`context_vm`]: one context's VM, the aggregate of the tables (it
//!    holds an `Arc` of the [`device_vm::DeviceVm`], never the device or the
//!    context);
//! 3. operations on a context's VM: [`device_memory`] (ALLOC/FREE),
//!    [`mapping`] (MAP/UNMAP, the quarantine), [`dmabuf`] (EXPORT),
//!    [`hw_block_mmap`], [`teardown`].
//!
//! `test_vm` (KUnit builds only) is the suites' fixture: a simulated Gaudi2
//! with its MMUs and memory, and contexts' VMs on it; `engine_tests` (KUnit
//! builds only) drives the device's engine-side MMU model through MAP and
//! UNMAP.

pub(crate) mod command_buffer;
pub(crate) mod context_vm;
pub(crate) mod device_memory;
pub(crate) mod device_vm;
pub(crate) mod dmabuf;
pub(crate) mod dram_pool;
#[cfg(CONFIG_KUNIT)]
mod engine_tests;
pub(crate) mod export_list;
pub(crate) mod handles;
pub(crate) mod hw_block;
pub(crate) mod hw_block_mmap;
pub(crate) mod mapping;
pub(crate) mod mapping_table;
pub(crate) mod one_mmap;
pub(crate) mod op_profile;
pub(crate) mod page_pack;
pub(crate) mod spares;
pub(crate) mod teardown;
#[cfg(CONFIG_KUNIT)]
pub(crate) mod test_vm;
pub(crate) mod ts_buffer;
pub(crate) mod userptr;
pub(crate) mod va_alloc;
pub(crate) mod va_quarantine;
pub(crate) mod va_range;

use crate::uapi::{HL_MEM_FLAGS_ALL, HL_MEM_FORCE_HINT};
use kernel::{prelude::*, sync::Arc};

/// A reference that keeps the context owning a VM alive (its teardown, ASID
/// and HW-block registers), as upstream's `hl_ctx_get`: held by what outlives
/// an ioctl (dma-buf exports, HW-block vmas). The VM does not name the
/// context, which sits on a floor above it, so the reference is opaque.
pub(crate) type ContextRef = Arc<dyn Send + Sync>;

/// Refuse `HL_MEM_*` flag bits the uAPI does not define (`EINVAL`). Upstream
/// ignores them (spec 7.4 item 22), so no new flag could be added safely.
pub(crate) fn check_flags(flags: u32) -> Result {
    if flags & !HL_MEM_FLAGS_ALL != 0 {
        return Err(EINVAL);
    }
    Ok(())
}

/// The VA request of a MAP: `size` bytes at `align`, with the hint rules of
/// `HL_MEM_FORCE_HINT` in `flags`.
pub(crate) fn va_request(size: u64, align: u64, hint: u64, flags: u32) -> va_alloc::VaRequest {
    let req = va_alloc::VaRequest::new(size).with_align(align);
    if flags & HL_MEM_FORCE_HINT != 0 {
        req.with_forced_hint(hint)
    } else {
        req.with_hint(hint)
    }
}
