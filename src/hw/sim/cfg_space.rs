// SPDX-License-Identifier: GPL-2.0

//! The simulated Gaudi2's configuration space, as far as userspace sees it:
//! the registers behind the user-mappable HW blocks (`asic::USER_BLOCKS`).
//!
//! A block's registers are allocated (zeroed, physically contiguous) the first
//! time it is mapped and stay until the compute context that mapped them goes
//! ([`CfgSpace::release_all`]): the next user of the device finds every
//! register zeroed, as upstream's reset of a Gaudi2 when its user releases it
//! leaves them (`reset_upon_device_release`, common/habanalabs_drv.c:374,
//! common/device.c:484). A block never mapped costs nothing (all 453 would be
//! about 4 MiB per device). User mappings reach them with `remap_pfn_range`;
//! the driver reads and writes them as 32-bit registers.
//!
//! Lock order: the lock here is a leaf.

use crate::ffi::register_page::RegisterBlock;
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

    /// Free the registers of every backed block; the next mmap of a block
    /// backs it again with zeroed registers. Returns how many blocks were
    /// backed. Allocates nothing; the memory is freed after the lock is
    /// dropped. O(n) in the backed blocks.
    ///
    /// Called only when no user mapping of any block can exist: at the
    /// teardown of the device's compute context (every block vma holds a
    /// reference to it, and the mm clears a vma's page-table entries before
    /// its `close` gives that reference back), or when the device goes.
    pub(crate) fn release_all(&self) -> usize {
        let blocks = core::mem::take(&mut *self.blocks.lock());
        let n = blocks.iter().count();
        drop(blocks);
        n
    }
}
