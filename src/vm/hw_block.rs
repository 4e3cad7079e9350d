// SPDX-License-Identifier: GPL-2.0

//! HW blocks: `HL_MEM_OP_MAP_BLOCK` and the mmap of a block's registers
//! (upstream `map_block`, `hl_hw_block_mmap`, `hw_block_vm_close`,
//! `hl_hw_block_mem_init/fini`, common/memory.c:1408-1513, 2912-2938).
//!
//! MAP_BLOCK is stateless: it turns a block's device address into an mmap
//! handle and the block's size. The mmap (in `shell/mmap.rs`) maps exactly one
//! whole block and records the mapping in its context, with a reference to
//! the context, until the last vma of the mapping is gone.
//!
//! On the simulated Gaudi2 a block's registers are host memory owned by the
//! device (allocated on first mmap): what userspace writes through its
//! mapping, the driver reads (debugfs `hw_blocks`). They go with the compute
//! context (`Backend::release_registers` at teardown), so a second opener of the device reads
//! zeros where the first one wrote.

use crate::{
    asic::{user_block, user_block_id},
    uapi::{mmap_handle, HL_MMAP_TYPE_BLOCK},
};
use kernel::{prelude::*, rbtree::RBTree};

/// `map_block`: the mmap handle and size of the block that starts exactly
/// at device address `addr` (`CFG_BASE` + the block's offset). `EINVAL` for
/// any other address. O(log n) in the 453 blocks (upstream: a linear scan).
pub(crate) fn map_block(addr: u64) -> Result<(u64, u32)> {
    let id = user_block_id(addr).ok_or(EINVAL)?;
    let block = user_block(id.into()).ok_or(EINVAL)?;
    let size = u32::try_from(block.size).map_err(|_| EINVAL)?;
    Ok((mmap_handle(id.into(), HL_MMAP_TYPE_BLOCK), size))
}

/// One live HW-block mapping of a context (upstream `struct hl_vm_hw_block_list_node`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct HwBlockRecord {
    /// The block.
    pub(crate) id: u32,
    /// User address the mapping was created at.
    pub(crate) va: u64,
    /// Bytes mapped (the whole block).
    pub(crate) size: u64,
    /// Vmas of the mapping still alive (pieces after a partial `munmap` or
    /// `mprotect`, or the copy of an `mremap`).
    pub(crate) vmas: u32,
}

/// The HW-block mappings of a context (upstream `ctx->hw_block_mem_list`),
/// by a sequence number: user addresses can repeat (an `mremap` moves a
/// mapping away and a new one can land where it was).
///
/// # Invariants
///
/// Every record has `vmas >= 1`; `next` is above every key.
pub(crate) struct HwBlockMappings {
    pub(super) by_seq: RBTree<u64, HwBlockRecord>,
    pub(super) next: u64,
}

impl HwBlockMappings {
    /// `hl_hw_block_mem_init`: no mappings.
    pub(crate) fn new() -> Self {
        Self {
            by_seq: RBTree::new(),
            next: 0,
        }
    }

    /// Every live mapping, oldest first.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &HwBlockRecord> {
        self.by_seq.values()
    }

    /// `hl_hw_block_mem_fini`: forget every record and return how many there
    /// were (upstream reports them with `dev_crit`). None can be left: each
    /// holds a reference to the context being torn down. Allocates nothing.
    pub(crate) fn fini(&mut self) -> usize {
        let mut n = 0;
        while let Some(c) = self.by_seq.cursor_front_mut() {
            drop(c.remove_current().1);
            n += 1;
        }
        n
    }

    pub(super) fn adjust(&mut self, seq: u64, opened: bool) {
        let Some(rec) = self.by_seq.get_mut(&seq) else {
            pr_err!("HW block mapping {} has no record\n", seq);
            return;
        };
        if opened {
            rec.vmas = rec.vmas.saturating_add(1);
        } else {
            rec.vmas = rec.vmas.saturating_sub(1);
            if rec.vmas == 0 {
                self.by_seq.remove(&seq);
            }
        }
    }
}
