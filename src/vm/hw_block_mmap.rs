// SPDX-License-Identifier: GPL-2.0

//! `mmap` of a HW block up to the page-table work (upstream
//! `hl_hw_block_mmap`): the checks, the block's registers, and the record in
//! the context's `HwBlockMappings` that each vma of the mapping holds.

use crate::{
    asic::user_block,
    uapi::mmap_value,
    vm::{context_vm::ContextVm, hw_block::HwBlockRecord, ContextRef},
};
use kernel::{prelude::*, rbtree::RBTreeNodeReservation, sync::Arc};

/// What the vmas of one HW-block mapping hold (one strong reference each).
pub(crate) struct BlockVma {
    vm: Arc<ContextVm>,
    /// Keeps the context (and so its registers) alive while a vma maps them.
    _owner: ContextRef,
    seq: u64,
}

impl BlockVma {
    /// A new vma of the mapping. O(log n).
    pub(crate) fn vma_opened(&self) {
        self.vm.hw_blocks.lock().adjust(self.seq, true);
    }

    /// A vma of the mapping went away; the last one withdraws the record.
    /// O(log n).
    pub(crate) fn vma_closed(&self) {
        self.vm.hw_blocks.lock().adjust(self.seq, false);
    }
}

/// A HW-block mmap that passed every check, with what publishing it needs
/// allocated.
pub(crate) struct HwBlockMmap {
    /// Page frame number of the block's first register.
    pub(crate) pfn: u64,
    record: HwBlockRecord,
    node: RBTreeNodeReservation<u64, HwBlockRecord>,
    first_vma: Arc<BlockVma>,
}

impl HwBlockMmap {
    /// Record the mapping in its context and return the first vma's
    /// reference. Cannot fail, allocates nothing. O(log n).
    pub(crate) fn publish(self) -> Arc<BlockVma> {
        let v = &self.first_vma;
        v.vm.hw_blocks
            .lock()
            .by_seq
            .insert(self.node.into_node(v.seq, self.record));
        self.first_vma
    }
}

/// `hl_hw_block_mmap` up to the page-table work: the block id from the page
/// offset, the exact-size check, the block's registers (allocated on first
/// use), the record's tree node and the first vma's reference. `EINVAL` for
/// an unknown id or a length other than the block's size; `ENOMEM`. O(log n).
pub(crate) fn prepare_mmap(
    vm: &Arc<ContextVm>,
    owner: ContextRef,
    pgoff: u64,
    va: u64,
    len: u64,
) -> Result<HwBlockMmap> {
    let id = mmap_value(pgoff);
    let block = user_block(id).ok_or(EINVAL)?;
    if len != block.size {
        return Err(EINVAL);
    }
    let id = u32::try_from(id).map_err(|_| EINVAL)?;
    let node = RBTreeNodeReservation::new(GFP_KERNEL)?;
    let seq = {
        let mut list = vm.hw_blocks.lock();
        let seq = list.next;
        list.next = seq.checked_add(1).ok_or(ENOMEM)?;
        seq
    };
    let first_vma = Arc::new(
        BlockVma {
            vm: vm.clone(),
            _owner: owner,
            seq,
        },
        GFP_KERNEL,
    )?;
    // The registers last: a failure above leaves none backed. (One made by
    // a mapping that fails later, in the page-table work, stays backed and
    // zeroed until the context goes.)
    let pfn = vm.dev.backend().block_pfn(id, block.size)?;
    Ok(HwBlockMmap {
        pfn,
        record: HwBlockRecord {
            id,
            va,
            size: block.size,
            vmas: 1,
        },
        node,
        first_vma,
    })
}
