// SPDX-License-Identifier: GPL-2.0

//! dma-buf export of device memory: `HL_MEM_OP_EXPORT_DMABUF_FD` (upstream
//! `export_dmabuf_from_addr`, `validate_export_params`,
//! `alloc_sgt_from_device_pages`, the dma-buf callbacks; common/memory.c:1534-2091).
//!
//! What is exported is part of a mapped DRAM allocation: `size` bytes from
//! `offset` of the pack mapped exactly at `addr`. An importer (an RDMA NIC,
//! another accelerator) maps the dma-buf and gets an sg table of addresses in
//! the device's DRAM BAR: on the simulated Gaudi2 that BAR is
//! `[DRAM_BAR_BASE, + dram_size)` (`sim::DRAM_BAR_BASE`), and a DRAM physical
//! address `pa` appears at `DRAM_BAR_BASE + (pa - dram_base)`; the simulation
//! has no IOMMU, so these are also the DMA addresses.
//!
//! This file is the safe part: parameter checks, the export record (which
//! keeps the mapping from being unmapped and the context alive, and gives
//! everything back when dropped), and the sg chunks. `ffi/dmabuf.rs` is the
//! dma-buf framework glue.
//!
//! Differences from upstream: `offset + size` is checked for overflow
//! (upstream adds them unchecked, so a huge `offset` wraps past the check and
//! lets an importer reach beyond the allocation, memory.c:1967-1971); and
//! `flags` may only hold `O_RDWR | O_CLOEXEC` (upstream hands any bits to
//! `dma_buf_fd`).

use crate::{
    context::Context,
    vm::{mapping::Backing, page_pack::PhysPgPack},
};
use kernel::{
    bindings,
    page::PAGE_SIZE,
    prelude::*,
    rbtree::{RBTree, RBTreeNodeReservation},
    sync::Arc, //
};

const PAGE: u64 = PAGE_SIZE as u64;

/// The `flags` bits EXPORT accepts: those libhlthunk sends.
pub(crate) const EXPORT_FLAGS: u32 = bindings::O_RDWR | bindings::O_CLOEXEC;

/// The DRAM BAR of a device: `[base, base + size)` in bus addresses, covering
/// DRAM from `dram_base`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct DramBar {
    /// Bus address of DRAM offset 0.
    pub(crate) base: u64,
    /// Bytes the BAR spans.
    pub(crate) size: u64,
    /// The DRAM physical address the BAR starts at.
    pub(crate) dram_base: u64,
}

impl DramBar {
    /// The BAR address of DRAM physical address `pa`, if the window
    /// `[pa, pa + len)` lies inside the BAR. Checked arithmetic throughout.
    pub(crate) fn window(&self, pa: u64, len: u64) -> Option<u64> {
        let off = pa.checked_sub(self.dram_base)?;
        let end = off.checked_add(len)?;
        if end > self.size {
            return None;
        }
        self.base.checked_add(off)
    }
}

/// One live export, what the dma-buf's private data owns. Dropping it (the
/// dma-buf's release) gives everything back: the mapping's export count, the
/// device's export count, the record in the context, the context reference.
pub(crate) struct DmabufExport {
    ctx: Arc<Context>,
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

/// What the context's export list shows (debugfs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ExportRecord {
    /// User VA of the mapping.
    pub(crate) va: u64,
    /// Offset within the pack.
    pub(crate) offset: u64,
    /// Bytes exported.
    pub(crate) size: u64,
}

/// The live exports of a context, by sequence number.
pub(crate) struct ExportList {
    by_seq: RBTree<u64, (ExportRecord, Arc<PhysPgPack>)>,
    next: u64,
}

impl ExportList {
    /// None.
    pub(crate) fn new() -> Self {
        Self {
            by_seq: RBTree::new(),
            next: 0,
        }
    }

    /// Every live export with its pack, oldest first.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &(ExportRecord, Arc<PhysPgPack>)> {
        self.by_seq.values()
    }
}

impl DmabufExport {
    /// The context the export belongs to.
    pub(crate) fn context(&self) -> &Arc<Context> {
        &self.ctx
    }

    /// The sg chunks an importer whose DMA segments are at most `max_seg`
    /// bytes gets (see [`SgChunks`]).
    pub(crate) fn chunks(&self, max_seg: u64) -> Result<SgChunks<'_>> {
        SgChunks::new(&self.pack, self.bar(), self.offset, self.size, max_seg)
    }

    /// The device's DRAM BAR.
    pub(crate) fn bar(&self) -> DramBar {
        self.ctx.device().dram_bar()
    }
}

impl Drop for DmabufExport {
    /// `hl_release_dmabuf`.
    fn drop(&mut self) {
        let vm = self.ctx.vm();
        {
            let mut maps = vm.mappings.lock();
            match maps.get_mut(self.va) {
                Some(m) => m.export_cnt = m.export_cnt.saturating_sub(1),
                None => pr_err!("dma-buf release: mapping {:#x} is gone\n", self.va),
            }
        }
        vm.exports.lock().by_seq.remove(&self.seq);
        self.ctx.device().dmabuf_exported(false);
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
/// pack (checked, never wrapping); a page whose BAR window is outside the
/// BAR. `ENOMEM` when the record cannot be allocated. On error nothing is
/// counted. O(log n + pages).
pub(crate) fn prepare_export(
    ctx: &Arc<Context>,
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
    let dev = ctx.device();
    let bar = dev.dram_bar();
    let node = RBTreeNodeReservation::new(GFP_KERNEL)?;
    let vm = ctx.vm();
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
        for i in 0..pack.npages {
            let pa = pack.page_addr(i).ok_or(EINVAL)?;
            bar.window(pa, pack.page_size).ok_or(EINVAL)?;
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
        ctx: ctx.clone(),
        va: addr,
        pack,
        offset,
        size,
        seq,
    };
    Ok(KBox::new(export, GFP_KERNEL)?)
}

/// The sg entries of an export (`alloc_sgt_from_device_pages`): BAR address
/// and length of each DMA segment. Whole pages covered by `offset` are
/// skipped, physically consecutive pieces are merged, and a merged piece is
/// split at the importer's segment limit (rounded down to pages). Lazy: no
/// allocation, O(1) per entry.
pub(crate) struct SgChunks<'a> {
    pack: &'a PhysPgPack,
    bar: DramBar,
    max_seg: u64,
    /// Next pack offset to emit, and bytes left.
    pos: u64,
    left: u64,
    /// The merged piece being split: its BAR address and bytes left.
    piece: Option<(u64, u64)>,
}

impl<'a> SgChunks<'a> {
    /// `EINVAL` if the segment limit is below a page or the range is not
    /// inside the pack.
    pub(crate) fn new(
        pack: &'a PhysPgPack,
        bar: DramBar,
        offset: u64,
        size: u64,
        max_seg: u64,
    ) -> Result<Self> {
        let max_seg = max_seg / PAGE * PAGE;
        if max_seg == 0 {
            return Err(EINVAL);
        }
        if offset
            .checked_add(size)
            .is_none_or(|end| end > pack.total_size)
        {
            return Err(EINVAL);
        }
        Ok(Self {
            pack,
            bar,
            max_seg,
            pos: offset,
            left: size,
            piece: None,
        })
    }

    /// The next merged piece: consecutive DRAM pages joined while they are
    /// physically contiguous.
    fn next_piece(&mut self) -> Option<(u64, u64)> {
        let psz = self.pack.page_size;
        let mut piece: Option<(u64, u64)> = None;
        while self.left > 0 {
            let idx = self.pos.checked_div(psz)?;
            let in_page = self.pos.checked_rem(psz)?;
            let len = psz.checked_sub(in_page)?.min(self.left);
            let pa = self.pack.page_addr(idx)?.checked_add(in_page)?;
            let bar = self.bar.window(pa, len)?;
            match piece {
                None => piece = Some((bar, len)),
                Some((start, n)) if start.checked_add(n) == Some(bar) => {
                    piece = Some((start, n.checked_add(len)?))
                }
                Some(_) => break,
            }
            self.pos = self.pos.checked_add(len)?;
            self.left = self.left.checked_sub(len)?;
        }
        piece
    }

    /// Number of entries the whole range makes. O(entries), no allocation.
    pub(crate) fn count(
        pack: &'a PhysPgPack,
        bar: DramBar,
        offset: u64,
        size: u64,
        max_seg: u64,
    ) -> Result<usize> {
        Ok(Self::new(pack, bar, offset, size, max_seg)?.fold(0, |n, _| n + 1))
    }
}

impl Iterator for SgChunks<'_> {
    type Item = (u64, u64);

    fn next(&mut self) -> Option<(u64, u64)> {
        if self.piece.is_none_or(|(_, n)| n == 0) {
            self.piece = Some(self.next_piece()?);
        }
        let (start, n) = self.piece?;
        let len = n.min(self.max_seg);
        self.piece = Some((start.checked_add(len)?, n.checked_sub(len)?));
        Some((start, len))
    }
}

#[kunit_tests(hlrs_dmabuf)]
mod tests {
    use super::*;
    use crate::{
        asic::AsicProperties,
        device::HlDevice,
        uapi::{HL_MEM_CONTIGUOUS, HL_MEM_SHARED},
        vm::{
            device_memory::{alloc_device_memory, free_device_memory},
            mapping::{map_device_va, unmap_device_va},
        },
    };

    const DPAGE: u64 = 0x3000_0000;

    fn setup() -> Result<(Arc<HlDevice>, Arc<Context>)> {
        let d = Arc::pin_init(HlDevice::new(0, AsicProperties::gaudi2(6, 0)?), GFP_KERNEL)?;
        let ctx = Arc::new(Context::new(d.clone(), 1)?, GFP_KERNEL)?;
        Ok((d, ctx))
    }

    fn mapped(ctx: &Arc<Context>, pages: u64, flags: u32) -> Result<(u32, u64)> {
        let h = alloc_device_memory(ctx, pages * DPAGE, flags)?;
        let va = map_device_va(ctx, u64::from(h), 0, 0)?;
        Ok((h, va))
    }

    #[test]
    fn parameters_at_every_boundary() -> Result {
        let (d, ctx) = setup()?;
        let (h, va) = mapped(&ctx, 2, 0)?;
        let total = 2 * DPAGE;
        let ok =
            |addr, size, offset, flags| prepare_export(&ctx, addr, size, offset, flags).map(drop);
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
        assert_eq!(d.dmabuf_exports(), 0);
        unmap_device_va(&ctx, va)?;
        free_device_memory(&ctx, u64::from(h))?;
        Ok(())
    }

    #[test]
    fn a_live_export_pins_the_mapping_and_the_handle() -> Result {
        let (d, ctx) = setup()?;
        let (h, va) = mapped(&ctx, 1, HL_MEM_SHARED)?;
        let e = prepare_export(&ctx, va, PAGE, 0, 0)?;
        assert_eq!(d.dmabuf_exports(), 1);
        assert_eq!(ctx.vm().exports.lock().iter().count(), 1);
        assert_eq!(unmap_device_va(&ctx, va), Err(EINVAL));
        assert_eq!(free_device_memory(&ctx, u64::from(h)), Err(EINVAL));
        drop(e);
        assert_eq!(d.dmabuf_exports(), 0);
        assert_eq!(ctx.vm().exports.lock().iter().count(), 0);
        unmap_device_va(&ctx, va)?;
        free_device_memory(&ctx, u64::from(h))?;
        Ok(())
    }

    #[test]
    fn sg_chunks_of_contiguous_and_scattered_packs() -> Result {
        let (d, ctx) = setup()?;
        let bar = d.dram_bar();
        // Contiguous: one piece, split only by the segment limit.
        let (_, va) = mapped(&ctx, 3, HL_MEM_CONTIGUOUS)?;
        let e = prepare_export(&ctx, va, 3 * DPAGE - 2 * PAGE, PAGE, 0)?;
        let base = bar
            .window(e.pack.page_addr(0).ok_or(EINVAL)?, DPAGE)
            .ok_or(EINVAL)?;
        let all: KVec<(u64, u64)> = e.chunks(u64::MAX)?.collect_vec()?;
        assert_eq!(all.as_slice(), &[(base + PAGE, 3 * DPAGE - 2 * PAGE)]);
        for (limit, want) in [
            (DPAGE / 2, 6usize), // smaller than a DRAM page
            (DPAGE, 3),          // equal
            (4 * DPAGE, 1),      // larger
            (DPAGE + 123, 3),    // rounded down to pages
        ] {
            let v = e.chunks(limit)?.collect_vec()?;
            assert_eq!(v.len(), want);
            let mut next = base + PAGE;
            for &(a, n) in v.iter() {
                assert_eq!(a, next);
                assert!(n <= limit / PAGE * PAGE && n % PAGE == 0);
                next += n;
            }
            assert_eq!(next, base + 3 * DPAGE - PAGE);
        }
        assert!(e.chunks(PAGE - 1).is_err());
        // Scattered: hold every other page so the next pack is not contiguous.
        let holes: KVec<u32> = {
            let mut v = KVec::new();
            for _ in 0..3 {
                v.push(alloc_device_memory(&ctx, DPAGE, 0)?, GFP_KERNEL)?;
                v.push(alloc_device_memory(&ctx, DPAGE, 0)?, GFP_KERNEL)?;
            }
            v
        };
        for (i, h) in holes.iter().enumerate() {
            if i % 2 == 0 {
                free_device_memory(&ctx, u64::from(*h))?;
            }
        }
        let (_, sva) = mapped(&ctx, 3, 0)?;
        let s = prepare_export(&ctx, sva, 3 * DPAGE, 0, 0)?;
        let v = s.chunks(u64::MAX)?.collect_vec()?;
        assert_eq!(v.len(), 3);
        for (i, &(a, n)) in v.iter().enumerate() {
            let pa = s.pack.page_addr(i as u64).ok_or(EINVAL)?;
            assert_eq!((a, n), (bar.window(pa, DPAGE).ok_or(EINVAL)?, DPAGE));
        }
        // With an offset inside the second page: the first page is skipped.
        let v = prepare_export(&ctx, sva, DPAGE, DPAGE + PAGE, 0)?
            .chunks(u64::MAX)?
            .collect_vec()?;
        let p1 = bar
            .window(s.pack.page_addr(1).ok_or(EINVAL)?, DPAGE)
            .ok_or(EINVAL)?;
        let p2 = bar
            .window(s.pack.page_addr(2).ok_or(EINVAL)?, DPAGE)
            .ok_or(EINVAL)?;
        assert_eq!(v.as_slice(), &[(p1 + PAGE, DPAGE - PAGE), (p2, PAGE)]);
        Ok(())
    }

    #[test]
    fn an_importer_sees_the_oracle_translation_and_a_plain_one_is_refused() -> Result {
        let (d, ctx) = setup()?;
        let imp = crate::ffi::dmabuf::TestImporter::new()?;
        let bar = d.dram_bar();
        // A scattered pack: every other DRAM page held by another allocation.
        for _ in 0..3 {
            let keep = alloc_device_memory(&ctx, DPAGE, 0)?;
            let gap = alloc_device_memory(&ctx, DPAGE, 0)?;
            free_device_memory(&ctx, u64::from(gap))?;
            let _ = keep;
        }
        let (h, va) = mapped(&ctx, 3, 0)?;
        let (offset, size) = (DPAGE - 2 * PAGE, DPAGE + 4 * PAGE);
        for p2p in [true, false] {
            let export = prepare_export(&ctx, va, size, offset, 0)?;
            assert_eq!(d.dmabuf_exports(), 1);
            match imp.import(export, p2p) {
                Ok(entries) => {
                    assert!(p2p);
                    // Every byte of every entry is what the MMU translates the
                    // mapping plus `offset` to (checked at both ends of each).
                    let mut done = 0u64;
                    for &(addr, len) in entries.iter() {
                        assert!(len > 0 && len <= 64 << 10 && len % PAGE == 0);
                        let pa = addr - bar.base + bar.dram_base;
                        let tr = |at: u64| ctx.vm().translate(&d, va + offset + at).map(|t| t.pa);
                        assert_eq!(tr(done), Ok(pa));
                        assert_eq!(tr(done + len - 1), Ok(pa + len - 1));
                        done += len;
                    }
                    assert_eq!(done, size);
                }
                Err(e) => {
                    assert!(!p2p);
                    assert_eq!(e, EPERM);
                }
            }
            // The release gave everything back.
            assert_eq!(d.dmabuf_exports(), 0);
            assert_eq!(ctx.vm().exports.lock().iter().count(), 0);
        }
        unmap_device_va(&ctx, va)?;
        free_device_memory(&ctx, u64::from(h))?;
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
