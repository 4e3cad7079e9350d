// SPDX-License-Identifier: GPL-2.0

//! dma-buf export of device memory: `HL_MEM_OP_EXPORT_DMABUF_FD` (upstream
//! `export_dmabuf_from_addr`, `validate_export_params`,
//! `alloc_sgt_from_device_pages`, the dma-buf callbacks; common/memory.c:1534-2091).
//!
//! What is exported is part of a mapped DRAM allocation: `size` bytes from
//! `offset` of the pack mapped exactly at `addr`. An importer (an RDMA NIC,
//! another accelerator, a CPU-side importer such as vgem) maps the dma-buf
//! and gets an sg table that the device's backend made for that importer
//! from the export's DRAM pieces ([`DramPieces`]): on the simulated Gaudi2,
//! whose DRAM is host memory, the host pages behind the range, DMA-mapped
//! for the importer's device (see `shell/dmabuf.rs` and `crate::hw::backend`).
//!
//! This file is the safe part: parameter checks, the export record (which
//! keeps the mapping from being unmapped and the context alive, and gives
//! everything back when dropped), and the DRAM pieces of an export.
//! `shell/dmabuf.rs` is the dma-buf framework glue.
//!
//! Differences from upstream: `offset + size` is checked for overflow
//! (upstream adds them unchecked, so a huge `offset` wraps past the check and
//! lets an importer reach beyond the allocation, memory.c:1967-1971); and
//! `flags` may only hold `O_RDWR | O_CLOEXEC` (upstream hands any bits to
//! `dma_buf_fd`).

use crate::{
    hw::backend::DramPieces,
    vm::{
        context_vm::ContextVm, export_list::ExportRecord, mapping_table::Backing,
        page_pack::PhysPgPack, ContextRef,
    },
};
use kernel::{
    bindings,
    page::PAGE_SIZE,
    prelude::*,
    rbtree::RBTreeNodeReservation,
    sync::Arc, //
};

const PAGE: u64 = PAGE_SIZE as u64;

/// The `flags` bits EXPORT accepts: those libhlthunk sends.
pub(crate) const EXPORT_FLAGS: u32 = bindings::O_RDWR | bindings::O_CLOEXEC;

/// One live export, what the dma-buf's private data owns. Dropping it (the
/// dma-buf's release) gives everything back: the mapping's export count, the
/// device's export count, the record in the context, the context reference.
pub(crate) struct DmabufExport {
    /// The VM of the exporting context.
    vm: Arc<ContextVm>,
    /// Keeps the exporting context alive (upstream `hl_ctx_get`); dropped
    /// after `vm`, before the pack, as one context reference was.
    _owner: ContextRef,
    /// The user VA of the exported mapping.
    pub(crate) va: u64,
    /// Its pages.
    pub(crate) pack: Arc<PhysPgPack>,
    /// Exported range within the pack.
    pub(crate) offset: u64,
    /// Bytes exported.
    pub(crate) size: u64,
    seq: u64,
}

impl DmabufExport {
    /// The VM of the context the export belongs to.
    pub(crate) fn vm(&self) -> &Arc<ContextVm> {
        &self.vm
    }

    /// The DRAM pieces of the exported range (see [`DramPieces`]).
    pub(crate) fn pieces(&self) -> Result<DramPieces<'_>> {
        DramPieces::new(&*self.pack, self.offset, self.size)
    }

    /// The DRAM physical address of byte `at` of the export; `None` past
    /// its end. O(1).
    pub(crate) fn dram_addr(&self, at: u64) -> Option<u64> {
        if at >= self.size {
            return None;
        }
        let pos = self.offset.checked_add(at)?;
        let in_page = pos.checked_rem(self.pack.page_size)?;
        self.pack
            .page_addr(pos.checked_div(self.pack.page_size)?)?
            .checked_add(in_page)
    }
}

impl Drop for DmabufExport {
    /// `hl_release_dmabuf`.
    fn drop(&mut self) {
        let vm = &self.vm;
        {
            let mut maps = vm.mappings.lock();
            match maps.get_mut(self.va) {
                Some(m) => m.export_cnt = m.export_cnt.saturating_sub(1),
                None => pr_err!("dma-buf release: mapping {:#x} is gone\n", self.va),
            }
        }
        vm.exports.lock().by_seq.remove(&self.seq);
        vm.dev.dmabuf_exported(false);
        // The context reference goes last, with `self.ctx`.
    }
}

/// `export_dmabuf_from_addr` up to the dma-buf itself: check every parameter,
/// count the export on the mapping (UNMAP and FREE are refused from here
/// until the record is dropped) and on the device, and return the record.
///
/// Errors, all `EINVAL`: `flags` outside `O_RDWR | O_CLOEXEC`; `addr`,
/// `size` or `offset` not page aligned, or `size == 0`; no mapping starting
/// exactly at `addr`; a host (userptr) mapping; `offset + size` past the
/// pack (checked, never wrapping). `ENOMEM` when the record cannot be
/// allocated. On error nothing is counted. O(log n).
pub(crate) fn prepare_export(
    vm: &Arc<ContextVm>,
    owner: ContextRef,
    addr: u64,
    size: u64,
    offset: u64,
    flags: u32,
) -> Result<KBox<DmabufExport>> {
    if flags & !EXPORT_FLAGS != 0 {
        return Err(EINVAL);
    }
    if addr % PAGE != 0 || size == 0 || size % PAGE != 0 || offset % PAGE != 0 {
        return Err(EINVAL);
    }
    let dev = &*vm.dev;
    let node = RBTreeNodeReservation::new(GFP_KERNEL)?;
    let seq = {
        let mut list = vm.exports.lock();
        let seq = list.next;
        list.next = seq.checked_add(1).ok_or(ENOMEM)?;
        seq
    };
    let pack = {
        let mut maps = vm.mappings.lock();
        let m = maps.get_mut(addr).ok_or(EINVAL)?;
        let Some(Backing::Dram { pack, .. }) = m.backing() else {
            return Err(EINVAL);
        };
        let pack = pack.clone();
        let end = offset.checked_add(size).ok_or(EINVAL)?;
        if end > pack.total_size {
            return Err(EINVAL);
        }
        m.export_cnt = m.export_cnt.checked_add(1).ok_or(EINVAL)?;
        pack
    };
    let record = ExportRecord {
        va: addr,
        offset,
        size,
    };
    vm.exports
        .lock()
        .by_seq
        .insert(node.into_node(seq, (record, pack.clone())));
    dev.dmabuf_exported(true);
    // From here on the record's `Drop` undoes the counts if anything fails.
    let export = DmabufExport {
        vm: vm.clone(),
        _owner: owner,
        va: addr,
        pack,
        offset,
        size,
        seq,
    };
    Ok(KBox::new(export, GFP_KERNEL)?)
}

#[kunit_tests(hlrs_dmabuf)]
mod tests {
    use super::*;
    use crate::vm::test_vm::TestContext;
    use crate::{
        uapi::{HL_MEM_CONTIGUOUS, HL_MEM_SHARED},
        vm::{
            device_memory::{alloc_device_memory, free_device_memory},
            mapping::{map_device_va, unmap_device_va},
        },
    };

    const DPAGE: u64 = 0x3000_0000;

    use crate::vm::test_vm::device_and_context as setup;

    fn mapped(ctx: &Arc<TestContext>, pages: u64, flags: u32) -> Result<(u32, u64)> {
        let h = alloc_device_memory(ctx.vm(), pages * DPAGE, flags)?;
        let va = map_device_va(ctx.vm(), u64::from(h), 0, 0)?;
        Ok((h, va))
    }

    #[test]
    fn parameters_at_every_boundary() -> Result {
        let (d, ctx) = setup()?;
        let (h, va) = mapped(&ctx, 2, 0)?;
        let total = 2 * DPAGE;
        let ok = |addr, size, offset, flags| {
            prepare_export(ctx.vm(), ctx.clone(), addr, size, offset, flags).map(drop)
        };
        // offset + size == total: accepted; a page more: refused.
        ok(va, total, 0, 0)?;
        ok(va, PAGE, total - PAGE, 0)?;
        assert_eq!(ok(va, PAGE, total, 0), Err(EINVAL));
        assert_eq!(ok(va, total + PAGE, 0, 0), Err(EINVAL));
        // Near 2^64: refused without wrapping (upstream wraps and accepts).
        assert_eq!(ok(va, PAGE, u64::MAX - PAGE + 1, 0), Err(EINVAL));
        assert_eq!(ok(va, u64::MAX - PAGE + 1, 2 * PAGE, 0), Err(EINVAL));
        // Alignment and zero size.
        assert_eq!(ok(va, 0, 0, 0), Err(EINVAL));
        assert_eq!(ok(va, PAGE + 1, 0, 0), Err(EINVAL));
        assert_eq!(ok(va, PAGE, 1, 0), Err(EINVAL));
        assert_eq!(ok(va + 1, PAGE, 0, 0), Err(EINVAL));
        // Only an exact mapping start; flags only O_RDWR | O_CLOEXEC.
        assert_eq!(ok(va + DPAGE, PAGE, 0, 0), Err(EINVAL));
        assert_eq!(ok(0, PAGE, 0, 0), Err(EINVAL));
        ok(va, PAGE, 0, EXPORT_FLAGS)?;
        for bad in [1u32, 0x40, 0x8000_0000] {
            assert_eq!(ok(va, PAGE, 0, bad), Err(EINVAL));
        }
        // Nothing stayed counted.
        assert_eq!(d.vm.dmabuf_exports(), 0);
        unmap_device_va(ctx.vm(), va)?;
        free_device_memory(ctx.vm(), u64::from(h))?;
        Ok(())
    }

    #[test]
    fn a_live_export_pins_the_mapping_and_the_handle() -> Result {
        let (d, ctx) = setup()?;
        let (h, va) = mapped(&ctx, 1, HL_MEM_SHARED)?;
        let e = prepare_export(ctx.vm(), ctx.clone(), va, PAGE, 0, 0)?;
        assert_eq!(d.vm.dmabuf_exports(), 1);
        assert_eq!(ctx.vm().exports.lock().iter().count(), 1);
        assert_eq!(unmap_device_va(ctx.vm(), va), Err(EINVAL));
        assert_eq!(free_device_memory(ctx.vm(), u64::from(h)), Err(EINVAL));
        drop(e);
        assert_eq!(d.vm.dmabuf_exports(), 0);
        assert_eq!(ctx.vm().exports.lock().iter().count(), 0);
        unmap_device_va(ctx.vm(), va)?;
        free_device_memory(ctx.vm(), u64::from(h))?;
        Ok(())
    }

    #[test]
    fn dram_pieces_of_contiguous_and_scattered_packs() -> Result {
        let (_d, ctx) = setup()?;
        // Contiguous: one piece.
        let (_, va) = mapped(&ctx, 3, HL_MEM_CONTIGUOUS)?;
        let e = prepare_export(ctx.vm(), ctx.clone(), va, 3 * DPAGE - 2 * PAGE, PAGE, 0)?;
        let base = e.pack.page_addr(0).ok_or(EINVAL)?;
        let all: KVec<(u64, u64)> = e.pieces()?.collect_vec()?;
        assert_eq!(all.as_slice(), &[(base + PAGE, 3 * DPAGE - 2 * PAGE)]);
        assert_eq!(e.pieces()?.bytes(), 3 * DPAGE - 2 * PAGE);
        assert_eq!(e.dram_addr(0), Some(base + PAGE));
        assert_eq!(e.dram_addr(DPAGE), Some(base + DPAGE + PAGE));
        assert_eq!(
            e.dram_addr(3 * DPAGE - 2 * PAGE - 1),
            Some(base + 3 * DPAGE - PAGE - 1)
        );
        assert_eq!(e.dram_addr(3 * DPAGE - 2 * PAGE), None);
        assert_eq!(e.dram_addr(u64::MAX), None);
        // Scattered: hold every other page so the next pack is not contiguous.
        let holes: KVec<u32> = {
            let mut v = KVec::new();
            for _ in 0..3 {
                v.push(alloc_device_memory(ctx.vm(), DPAGE, 0)?, GFP_KERNEL)?;
                v.push(alloc_device_memory(ctx.vm(), DPAGE, 0)?, GFP_KERNEL)?;
            }
            v
        };
        for (i, h) in holes.iter().enumerate() {
            if i % 2 == 0 {
                free_device_memory(ctx.vm(), u64::from(*h))?;
            }
        }
        let (_, sva) = mapped(&ctx, 3, 0)?;
        let s = prepare_export(ctx.vm(), ctx.clone(), sva, 3 * DPAGE, 0, 0)?;
        let v = s.pieces()?.collect_vec()?;
        assert_eq!(v.len(), 3);
        for (i, &(a, n)) in v.iter().enumerate() {
            assert_eq!((a, n), (s.pack.page_addr(i as u64).ok_or(EINVAL)?, DPAGE));
        }
        // With an offset inside the second page: the first page is skipped.
        let e = prepare_export(ctx.vm(), ctx.clone(), sva, DPAGE, DPAGE + PAGE, 0)?;
        let v = e.pieces()?.collect_vec()?;
        let p1 = s.pack.page_addr(1).ok_or(EINVAL)?;
        let p2 = s.pack.page_addr(2).ok_or(EINVAL)?;
        assert_eq!(v.as_slice(), &[(p1 + PAGE, DPAGE - PAGE), (p2, PAGE)]);
        assert_eq!(e.dram_addr(DPAGE - PAGE - 1), Some(p1 + DPAGE - 1));
        assert_eq!(e.dram_addr(DPAGE - PAGE), Some(p2));
        // Outside the pack: refused.
        assert!(DramPieces::new(&*s.pack, 3 * DPAGE - PAGE, 2 * PAGE).is_err());
        assert!(DramPieces::new(&*s.pack, u64::MAX - PAGE + 1, PAGE).is_err());
        Ok(())
    }

    /// Collect a short iterator (tests).
    trait CollectVec: Iterator + Sized {
        fn collect_vec(self) -> Result<KVec<Self::Item>> {
            let mut v = KVec::new();
            for x in self {
                v.push(x, GFP_KERNEL)?;
            }
            Ok(v)
        }
    }
    impl<I: Iterator> CollectVec for I {}
}
