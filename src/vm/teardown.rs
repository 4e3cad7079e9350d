// SPDX-License-Identifier: GPL-2.0

//! The VM part of a context's teardown (upstream `hl_vm_ctx_fini`,
//! `hl_hw_block_mem_fini`, `hl_mem_mgr_fini`, `hl_mmu_ctx_fini`), in the
//! order the release-only-after-invalidation rule needs: everything unmapped
//! into the quarantine, the page tables unlinked, both MMUs invalidated, and
//! only then what the invalidation covers given back, the DRAM handles last.
//! The context (floor above) brackets it with the device's bookkeeping.

use crate::vm::context_vm::ContextVm;

/// What a teardown found and did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct VmTeardown {
    /// HW-block mappings still recorded (every block vma holds the context,
    /// so none should be).
    pub(crate) blocks_left: usize,
    /// Mappings the user left behind (unmapped here).
    pub(crate) maps_left: usize,
    /// Hops still linked when the page tables were torn down.
    pub(crate) hops_left: usize,
    /// Whether the teardown's invalidation of both MMUs succeeded and
    /// everything was given back; if not, the VM still holds what the MMUs
    /// may reach and must be kept (and settled later).
    pub(crate) settled: bool,
    /// DRAM allocations the user left behind (freed here).
    pub(crate) allocations_freed: usize,
}

/// Tear down `vm`: HW-block records and timestamp buffers go, every mapping
/// is unmapped into the quarantine, the page tables are unlinked, both MMUs
/// are invalidated (always, as upstream), what the invalidation covers goes
/// back, and the context's DRAM handles are freed. Allocates nothing.
/// O(mappings log mappings + pages + handles).
pub(crate) fn teardown(vm: &ContextVm) -> VmTeardown {
    // `hl_hw_block_mem_fini`: every block mapping holds a reference to the
    // context, so none can be left here.
    let blocks_left = vm.hw_blocks.lock().fini();
    // `hl_mem_mgr_fini`: the timestamp buffers go (a live mmap would keep its
    // buffer, but it also keeps the file, so there is none).
    vm.ts_buffers.lock().clear();
    // The same for the command buffers (a mapped one lives on with its vma,
    // but a vma keeps the file, so there is none).
    vm.cbs.lock().clear();
    let maps_left = vm.unmap_all();
    let hops_left = vm.teardown_mmu();
    let settled = vm.settle_quarantine(true);
    let allocations_freed = free_all_of(vm);
    VmTeardown {
        blocks_left,
        maps_left,
        hops_left,
        settled,
        allocations_freed,
    }
}

/// Free every allocation `vm`'s context still owns (the DRAM part of `hl_vm_ctx_fini`,
/// common/memory.c:2787-2804), including `HL_MEM_SHARED` ones, as upstream.
/// Returns how many there were.
///
/// Cannot fail and allocates nothing (upstream's walk of the IDR does not
/// either): when it returns, no handle of the context's ASID is left, so the
/// next context that gets the same ASID cannot reach this one's DRAM. O(n) in
/// the device's live handles.
pub(crate) fn free_all_of(vm: &ContextVm) -> usize {
    let dev = &*vm.dev;
    let asid = vm.asid;
    let mut handles = dev.handles.lock();
    // The packs' pages go back to the pool as each one is dropped (pool lock
    // inside the handle lock, as documented in `device.rs`): the context's
    // mappings, which held the other references, are gone by now.
    handles.remove_owned_by(
        |owner| owner == asid,
        |_, pack| {
            vm.account_dram(-(pack.total_size as i64));
        },
    )
}
