// SPDX-License-Identifier: GPL-2.0

//! HW blocks: `HL_MEM_OP_MAP_BLOCK` and the mmap of a block's registers
//! (upstream `map_block`, `hl_hw_block_mmap`, `hw_block_vm_close`,
//! `hl_hw_block_mem_init/fini`, common/memory.c:1408-1513, 2912-2938).
//!
//! MAP_BLOCK is stateless: it turns a block's device address into an mmap
//! handle and the block's size. The mmap (in `ffi/mmap.rs`) maps exactly one
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
use kernel::{
    prelude::*,
    rbtree::RBTree,
    sync::Arc, //
};

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

#[kunit_tests(hlrs_hw_block)]
mod tests {
    use super::*;
    use crate::{
        asic::{AsicProperties, CFG_BASE, NUM_USER_MAPPED_BLOCKS},
        device::HlDevice,
        uapi::{mmap_type, HL_MMAP_PAGE_SHIFT},
    };
    use crate::{context::Context, uapi::mmap_value, vm::hw_block_mmap::prepare_mmap};

    #[test]
    fn map_block_answers_for_every_block_and_nothing_else() -> Result {
        for id in 0..NUM_USER_MAPPED_BLOCKS as u64 {
            let b = user_block(id).ok_or(EINVAL)?;
            let (h, size) = map_block(CFG_BASE + b.address)?;
            assert_eq!(u64::from(size), b.size);
            assert_eq!(h >> 61, 1);
            let pgoff = h >> HL_MMAP_PAGE_SHIFT;
            assert_eq!(mmap_type(pgoff), HL_MMAP_TYPE_BLOCK);
            assert_eq!(mmap_value(pgoff), id);
            for off in [1u64, 4, 0x800] {
                assert_eq!(map_block(CFG_BASE + b.address + off), Err(EINVAL));
            }
        }
        assert_eq!(map_block(0), Err(EINVAL));
        assert_eq!(map_block(CFG_BASE), Err(EINVAL));
        Ok(())
    }

    #[test]
    fn mmap_checks_and_the_record_lifetime() -> Result {
        let d = HlDevice::new(0, AsicProperties::gaudi2(6, 0)?)?;
        let ctx = Arc::new(Context::new(d.clone(), 1)?, GFP_KERNEL)?;
        let pg = |id: u64| mmap_handle(id, HL_MMAP_TYPE_BLOCK) >> HL_MMAP_PAGE_SHIFT;
        // Unknown id, wrong sizes.
        assert!(prepare_mmap(
            ctx.vm(),
            ctx.clone(),
            pg(NUM_USER_MAPPED_BLOCKS as u64),
            0x1000,
            0x1000
        )
        .is_err());
        assert_eq!(
            prepare_mmap(ctx.vm(), ctx.clone(), pg(4), 0x1000, 0x1000).err(),
            Some(EINVAL)
        );
        assert_eq!(
            prepare_mmap(ctx.vm(), ctx.clone(), pg(4), 0x1000, 0x10000).err(),
            Some(EINVAL)
        );
        // A good one: the block's registers exist from now on.
        let plan = prepare_mmap(ctx.vm(), ctx.clone(), pg(4), 0x7000_0000, 0x8000)?;
        let pfn = plan.pfn;
        assert_eq!(d.sim.cfg_space.block_pfn(4, 0x8000)?, pfn);
        let vma = plan.publish();
        let rec = *ctx.vm().hw_blocks.lock().iter().next().ok_or(EINVAL)?;
        assert_eq!(
            (rec.id, rec.va, rec.size, rec.vmas),
            (4, 0x7000_0000, 0x8000, 1)
        );
        // A split adds a vma; the record goes with the last one.
        vma.vma_opened();
        vma.vma_closed();
        assert_eq!(ctx.vm().hw_blocks.lock().iter().count(), 1);
        vma.vma_closed();
        assert_eq!(ctx.vm().hw_blocks.lock().iter().count(), 0);
        // The mapping held a context reference: this test's, and the vma's.
        drop(vma);
        assert_eq!(ctx.vm().hw_blocks.lock().fini(), 0);
        // Registers written by "userspace" read back.
        d.sim.cfg_space.write(4, 0x10, 0xdead_beef)?;
        assert_eq!(d.sim.cfg_space.read(4, 0x10), Some(0xdead_beef));
        assert_eq!(d.sim.cfg_space.read(4, 0x8000), None);
        assert_eq!(d.sim.cfg_space.read(5, 0), None);
        Ok(())
    }

    #[test]
    fn the_next_context_finds_the_registers_the_last_one_wrote_zeroed() -> Result {
        let d = HlDevice::new(0, AsicProperties::gaudi2(6, 0)?)?;
        let pg = |id: u64| mmap_handle(id, HL_MMAP_TYPE_BLOCK) >> HL_MMAP_PAGE_SHIFT;
        let ctx = Arc::new(Context::new(d.clone(), 1)?, GFP_KERNEL)?;
        for (id, size) in [(4u64, 0x8000u64), (0, 0x10000)] {
            let vma = prepare_mmap(ctx.vm(), ctx.clone(), pg(id), 0x7000_0000, size)?.publish();
            d.sim.cfg_space.write(id as u32, 0x10, 0xdead_beef)?;
            // The vma goes (munmap): its reference to the context with it.
            vma.vma_closed();
        }
        assert_eq!(d.sim.cfg_space.backed_blocks(), 2);
        assert_eq!(d.sim.cfg_space.read(4, 0x10), Some(0xdead_beef));
        // The context goes: every block's registers with it.
        drop(ctx);
        assert_eq!(d.sim.cfg_space.backed_blocks(), 0);
        assert_eq!(d.sim.cfg_space.read(4, 0x10), None);
        // The next context backs the block again, zeroed.
        let ctx = Arc::new(Context::new(d.clone(), 2)?, GFP_KERNEL)?;
        let vma = prepare_mmap(ctx.vm(), ctx.clone(), pg(4), 0x7000_0000, 0x8000)?.publish();
        for off in (0..0x8000).step_by(4) {
            assert_eq!(d.sim.cfg_space.read(4, off), Some(0));
        }
        vma.vma_closed();
        drop(vma);
        drop(ctx);
        assert_eq!(d.sim.cfg_space.backed_blocks(), 0);
        Ok(())
    }
}
