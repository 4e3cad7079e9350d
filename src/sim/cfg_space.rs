// SPDX-License-Identifier: GPL-2.0

//! The simulated Gaudi2's configuration space, as far as userspace sees it:
//! the registers behind the user-mappable HW blocks (`asic::USER_BLOCKS`).
//!
//! A block's registers are allocated (zeroed, physically contiguous) the first
//! time it is mapped and stay until the device goes, like a BAR window that
//! always exists; a block never mapped costs nothing (all 453 would be about
//! 4 MiB per device). User mappings reach them with `remap_pfn_range`; the
//! driver reads and writes them as 32-bit registers.
//!
//! Lock order: the lock here is a leaf.

use crate::ffi::mmap::RegisterBlock;
use kernel::{
    new_mutex,
    prelude::*,
    rbtree::{RBTree, RBTreeNodeReservation},
    sync::Mutex, //
};

/// The registers of the HW blocks mapped so far, by block id.
#[pin_data]
pub(crate) struct CfgSpace {
    #[pin]
    blocks: Mutex<RBTree<u32, RegisterBlock>>,
}

impl CfgSpace {
    /// No block backed yet.
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            blocks <- new_mutex!(RBTree::new()),
        })
    }

    /// Page frame number of block `id`'s registers (`size` bytes), allocating
    /// them on first use. O(log n); the allocation is made without the lock.
    pub(crate) fn block_pfn(&self, id: u32, size: u64) -> Result<u64> {
        if let Some(b) = self.blocks.lock().get(&id) {
            return Ok(b.pfn());
        }
        let regs = RegisterBlock::new(usize::try_from(size).map_err(|_| EINVAL)?)?;
        let node = RBTreeNodeReservation::new(GFP_KERNEL)?;
        let mut blocks = self.blocks.lock();
        // Another mapping may have backed it meanwhile: keep the first.
        if let Some(b) = blocks.get(&id) {
            return Ok(b.pfn());
        }
        let pfn = regs.pfn();
        blocks.insert(node.into_node(id, regs));
        Ok(pfn)
    }

    /// The 32-bit register at byte offset `off` of block `id`, if the block
    /// is backed and `off` inside it. O(log n).
    pub(crate) fn read(&self, id: u32, off: usize) -> Option<u32> {
        self.blocks.lock().get(&id)?.read(off)
    }

    /// Write a register of a backed block (`EINVAL` otherwise). O(log n).
    pub(crate) fn write(&self, id: u32, off: usize, value: u32) -> Result {
        self.blocks.lock().get(&id).ok_or(EINVAL)?.write(off, value)
    }

    /// Visit every backed block in id order with its non-zero registers
    /// (debugfs). O(total register count).
    pub(crate) fn for_each_nonzero(&self, mut f: impl FnMut(u32, usize, u32)) {
        for (id, regs) in self.blocks.lock().iter() {
            for off in (0..regs.size()).step_by(4) {
                match regs.read(off) {
                    Some(0) | None => {}
                    Some(v) => f(*id, off, v),
                }
            }
        }
    }

    /// Number of backed blocks.
    pub(crate) fn backed_blocks(&self) -> usize {
        self.blocks.lock().iter().count()
    }
}
