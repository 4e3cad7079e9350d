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

#[kunit_tests(hlrs_hw_block)]
mod tests {
    use super::*;
    use crate::uapi::{mmap_handle, HL_MMAP_TYPE_BLOCK};
    use crate::vm::hw_block::*;
    use crate::{
        asic::{AsicProperties, CFG_BASE, NUM_USER_MAPPED_BLOCKS},
        uapi::{mmap_type, HL_MMAP_PAGE_SHIFT},
    };
    use crate::{
        uapi::mmap_value,
        vm::test_vm::{TestContext, TestDevice},
    };

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
        let d = TestDevice::new(AsicProperties::gaudi2(6, 0)?)?;
        let ctx = Arc::new(TestContext::new(&d)?, GFP_KERNEL)?;
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
        let d = TestDevice::new(AsicProperties::gaudi2(6, 0)?)?;
        let pg = |id: u64| mmap_handle(id, HL_MMAP_TYPE_BLOCK) >> HL_MMAP_PAGE_SHIFT;
        let ctx = Arc::new(TestContext::new(&d)?, GFP_KERNEL)?;
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
        let ctx = Arc::new(TestContext::new(&d)?, GFP_KERNEL)?;
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
