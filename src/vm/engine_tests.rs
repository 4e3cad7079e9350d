// SPDX-License-Identifier: GPL-2.0

//! KUnit (KUnit builds only): the simulated Gaudi2's engines reach exactly
//! what the driver mapped, through the device's own MMU model (hardware
//! walker, STLB, IOMMU), and nothing after an UNMAP whose invalidation
//! succeeded; with an invalidation skipped on purpose, the model shows the
//! access that reaches the stale page.

use kernel::prelude::*;

#[kunit_tests(hlrs_engine_mmu)]
mod tests {
    use super::*;
    use crate::{
        hw::{
            backend::{Backend, MmuKind},
            sim::{
                engine_mem::EngineAccess,
                fault::{EngineFault, StaleUse, Target},
                stlb,
            },
        },
        vm::{
            command_buffer::{cb_create, cb_get},
            context_vm::ContextVm,
            device_memory::{alloc_device_memory, free_device_memory},
            mapping::{map_cb_va, map_device_va, unmap_cb_va, unmap_device_va},
            test_vm::{device_and_context, TestContext, TestDevice},
        },
    };

    /// The engine the tests access memory as.
    const ENGINE: u16 = 5;

    fn engine(ctx: &TestContext) -> EngineAccess {
        EngineAccess::new(ENGINE, ctx.asid())
    }

    /// What the driver's page-walk oracle says `va` is.
    fn oracle(vm: &ContextVm, va: u64) -> Result<u64> {
        vm.translate(va).map(|t| t.pa).map_err(|_| EINVAL)
    }

    /// `n` bytes of a pattern.
    fn pattern(n: usize, seed: u8) -> Result<KVec<u8>> {
        let mut v = KVec::with_capacity(n, GFP_KERNEL)?;
        for i in 0..n {
            v.push((i as u8).wrapping_mul(7).wrapping_add(seed), GFP_KERNEL)?;
        }
        Ok(v)
    }

    /// A page fault of the test engine.
    fn page_fault(mmu: MmuKind, ctx: &TestContext, va: u64) -> EngineFault {
        EngineFault::Page {
            mmu,
            asid: ctx.asid(),
            va,
            engine: ENGINE,
        }
    }

    /// A new handle of `pages` DRAM pages of the test context, mapped: the
    /// handle and its VA.
    fn mapped_dram(d: &TestDevice, ctx: &TestContext, pages: u64) -> Result<(u64, u64)> {
        let h = u64::from(alloc_device_memory(
            ctx.vm(),
            pages * d.asic.dram_page_size,
            0,
        )?);
        Ok((h, map_device_va(ctx.vm(), h, 0, 0)?))
    }

    fn stats(d: &TestDevice) -> stlb::StlbStats {
        d.sim.stlb_stats().0
    }

    #[test]
    fn the_driver_gives_the_device_its_hop0_tables() -> Result {
        let (d, ctx) = device_and_context()?;
        let (dmmu, pmmu) = {
            let mmu = ctx.vm().mmu.lock();
            (mmu.dmmu.hop0(), mmu.pmmu.hop0())
        };
        assert_eq!(d.sim.hop0(MmuKind::Dram, ctx.asid()), Some(dmmu));
        assert_eq!(d.sim.hop0(MmuKind::Host, ctx.asid()), Some(pmmu));
        // Host-resident tables are host pages the device may reach.
        assert!(d.sim.dma_is_mapped(pmmu));
        assert!(!d.sim.dma_is_mapped(dmmu));
        Ok(())
    }

    #[test]
    fn dram_round_trip_lands_where_the_oracle_says_and_hits_the_stlb() -> Result {
        let (d, ctx) = device_and_context()?;
        let vm = ctx.vm();
        let page = d.asic.dram_page_size;
        let (h, va) = mapped_dram(&d, &ctx, 2)?;
        let who = engine(&ctx);
        // 8 KiB + 6 bytes across the two DRAM pages: 4 pieces, 2 pages.
        let at = va + page - 4099;
        let data = pattern(8198, 3)?;
        d.sim.engine_write(who, at, &data)?;
        let mut back = KVec::from_elem(0u8, data.len(), GFP_KERNEL)?;
        d.sim.engine_read(who, at, &mut back)?;
        assert!(back[..] == data[..]);
        let st = stats(&d);
        assert_eq!((st.misses, st.walks, st.hits), (2, 2, 6));
        // Each byte is where the driver's oracle walk says it is.
        for off in [0u64, 4098, 4099, 8197] {
            let pa = oracle(vm, at + off)?;
            assert_eq!(d.sim.engine_translate(who, at + off)?, Target::Dram(pa));
            let mut b = [0u8; 1];
            d.sim.dram_read(pa, &mut b)?;
            assert_eq!(Some(&b[0]), data.get(off as usize));
        }
        // UNMAP invalidates: the next access walks and faults.
        unmap_device_va(vm, va)?;
        assert_eq!(stats(&d).invalidated, 2);
        assert_eq!(
            d.sim.engine_read(who, at, &mut back),
            Err(page_fault(MmuKind::Dram, &ctx, at))
        );
        assert_eq!(d.sim.engine_faults().page, 1);
        free_device_memory(vm, h)?;
        Ok(())
    }

    #[test]
    fn host_round_trip_through_a_mapped_command_buffer() -> Result {
        let (d, ctx) = device_and_context()?;
        let vm = ctx.vm();
        let cb = cb_get(&vm.cbs, cb_create(&vm.cbs, 3 * 4096)?)?;
        let va = map_cb_va(vm, &cb)?;
        let who = engine(&ctx);
        // Three words across the first page boundary of the CB.
        let words = [
            0x1111_2222_3333_4444u64,
            0x5555_6666_7777_8888,
            0x99AA_BBCC_DDEE_FF00,
        ];
        let mut bytes = KVec::with_capacity(24, GFP_KERNEL)?;
        for w in words {
            for b in w.to_le_bytes() {
                bytes.push(b, GFP_KERNEL)?;
            }
        }
        d.sim.engine_write(who, va + 4096 - 8, &bytes)?;
        assert_eq!(cb.word(511), Some(words[0]));
        assert_eq!(cb.word(512), Some(words[1]));
        assert_eq!(cb.word(513), Some(words[2]));
        let mut back = [0u8; 24];
        d.sim.engine_read(who, va + 4096 - 8, &mut back)?;
        assert!(back[..] == bytes[..]);
        for off in [0u64, 4096 + 8, 3 * 4096 - 1] {
            let bus = oracle(vm, va + off)?;
            assert_eq!(d.sim.engine_translate(who, va + off)?, Target::Host(bus));
            assert!(d.sim.dma_is_mapped(bus));
        }
        let bus = oracle(vm, va)?;
        unmap_cb_va(vm, &cb)?;
        // The CB lives on in its table, but the device reaches it no more.
        assert!(!d.sim.dma_is_mapped(bus));
        assert_eq!(
            d.sim.engine_read(who, va, &mut back),
            Err(page_fault(MmuKind::Host, &ctx, va))
        );
        Ok(())
    }

    #[test]
    fn a_skipped_invalidation_lets_a_dma_reach_a_freed_dram_page() -> Result {
        let (d, ctx) = device_and_context()?;
        let vm = ctx.vm();
        let page = d.asic.dram_page_size;
        let who = engine(&ctx);
        let (h, va) = mapped_dram(&d, &ctx, 1)?;
        let mut b = [0u8; 6];
        d.sim.engine_write(who, va + 64, b"before")?;
        let old = oracle(vm, va + 64)?;
        // The device skips the UNMAP's invalidation but answers success, so
        // the driver unmaps and frees the page as it should.
        d.sim.skip_invalidations(1);
        unmap_device_va(vm, va)?;
        assert_eq!(d.sim.invalidation_skips(), (0, 1));
        free_device_memory(vm, h)?;
        // The page's next owner writes it.
        let h2 = u64::from(alloc_device_memory(vm, page, 0)?);
        d.sim.dram_write(old, b"secret")?;
        // A DMA through the old VA still reaches it: the model shows the
        // stale translation it used.
        d.sim.engine_read(who, va + 64, &mut b)?;
        assert_eq!(&b, b"secret");
        assert_eq!(stats(&d).stale_hits, 1);
        assert_eq!(d.sim.stlb_stats().1, (1, 1));
        let used = StaleUse {
            mmu: MmuKind::Dram,
            asid: ctx.asid(),
            va: va + 64,
            target: Target::Dram(old),
        };
        assert_eq!(d.sim.engine_faults().last_stale, Some(used));
        // The same sequence with the invalidation: the access faults. (The
        // MAP at the same VA invalidates its range first, so the stale entry
        // goes.)
        assert_eq!(map_device_va(vm, h2, 0, 0)?, va);
        assert_eq!(d.sim.stlb_stats().1, (0, 0));
        d.sim.engine_write(who, va + 64, b"before")?;
        unmap_device_va(vm, va)?;
        assert_eq!(
            d.sim.engine_read(who, va + 64, &mut b),
            Err(page_fault(MmuKind::Dram, &ctx, va + 64))
        );
        assert_eq!(stats(&d).stale_hits, 1);
        free_device_memory(vm, h2)?;
        Ok(())
    }

    #[test]
    fn a_skipped_invalidation_of_host_memory_ends_in_an_iommu_fault() -> Result {
        let (d, ctx) = device_and_context()?;
        let vm = ctx.vm();
        let who = engine(&ctx);
        let cb = cb_get(&vm.cbs, cb_create(&vm.cbs, 4096)?)?;
        let va = map_cb_va(vm, &cb)?;
        let mut b = [0u8; 8];
        d.sim.engine_write(who, va + 16, &[7; 8])?;
        let bus = oracle(vm, va + 16)?;
        d.sim.skip_invalidations(1);
        unmap_cb_va(vm, &cb)?;
        // The STLB still translates, but the page is no longer DMA-mapped:
        // the IOMMU refuses the access, which never touches the page.
        let refused = EngineFault::Iommu {
            bus,
            asid: ctx.asid(),
            va: va + 16,
            engine: ENGINE,
        };
        assert_eq!(d.sim.engine_read(who, va + 16, &mut b), Err(refused));
        assert_eq!(d.sim.engine_faults().iommu, 1);
        assert_eq!(stats(&d).stale_hits, 1);
        // With the invalidation: a page fault, and the IOMMU is not reached.
        let cb2 = cb_get(&vm.cbs, cb_create(&vm.cbs, 4096)?)?;
        let va2 = map_cb_va(vm, &cb2)?;
        d.sim.engine_write(who, va2 + 16, &[7; 8])?;
        unmap_cb_va(vm, &cb2)?;
        assert_eq!(
            d.sim.engine_read(who, va2 + 16, &mut b),
            Err(page_fault(MmuKind::Host, &ctx, va2 + 16))
        );
        assert_eq!(d.sim.engine_faults().iommu, 1);
        Ok(())
    }

    #[test]
    fn invalidate_range_drops_only_that_range_of_that_asid() -> Result {
        let (d, ctx) = device_and_context()?;
        let vm = ctx.vm();
        let page = d.asic.dram_page_size;
        let who = engine(&ctx);
        let asid = ctx.asid();
        let (h, va) = mapped_dram(&d, &ctx, 3)?;
        let mut b = [0u8; 1];
        let touch = |i: u64| d.sim.engine_read(who, va + i * page + 9, &mut [0u8; 1]);
        for i in 0..3 {
            touch(i)?;
        }
        assert_eq!(d.sim.stlb_stats().1, (3, 0));
        // Another ASID, the other MMU: nothing dropped.
        d.sim.invalidate_range(MmuKind::Dram, 0, va, 3 * page)?;
        d.sim.invalidate_range(MmuKind::Host, asid, va, 3 * page)?;
        assert_eq!(d.sim.stlb_stats().1, (3, 0));
        // The middle DRAM page, then the last byte of the last one.
        d.sim
            .invalidate_range(MmuKind::Dram, asid, va + page, page)?;
        assert_eq!(d.sim.stlb_stats().1, (2, 0));
        d.sim
            .invalidate_range(MmuKind::Dram, asid, va + 3 * page - 1, 1)?;
        assert_eq!(d.sim.stlb_stats().1, (1, 0));
        let misses = stats(&d).misses;
        touch(0)?;
        assert_eq!(stats(&d).misses, misses);
        touch(1)?;
        touch(2)?;
        assert_eq!(stats(&d).misses, misses + 2);
        // A PMMU range at VA 0 is a full invalidation (as upstream).
        let cb = cb_get(&vm.cbs, cb_create(&vm.cbs, 2 * 4096)?)?;
        let hva = map_cb_va(vm, &cb)?;
        d.sim.engine_read(who, hva, &mut b)?;
        d.sim.engine_read(who, hva + 4096, &mut b)?;
        assert_eq!(d.sim.stlb_stats().1, (5, 0));
        d.sim.invalidate_range(MmuKind::Host, asid, 0, 4096)?;
        assert_eq!(d.sim.stlb_stats().1, (3, 0));
        unmap_cb_va(vm, &cb)?;
        unmap_device_va(vm, va)?;
        assert_eq!(d.sim.stlb_stats().1, (0, 0));
        free_device_memory(vm, h)?;
        Ok(())
    }

    #[test]
    fn a_full_stlb_evicts_and_walks_again() -> Result {
        let (d, ctx) = device_and_context()?;
        let vm = ctx.vm();
        let who = engine(&ctx);
        let h = u64::from(alloc_device_memory(vm, 1, 0)?);
        // One DRAM page mapped at more VAs than the STLB holds pages.
        let n = stlb::SETS * stlb::WAYS + 8;
        let mut vas = KVec::with_capacity(n, GFP_KERNEL)?;
        for _ in 0..n {
            vas.push(map_device_va(vm, h, 0, 0)?, GFP_KERNEL)?;
        }
        let first = *vas.first().ok_or(EINVAL)?;
        let last = *vas.last().ok_or(EINVAL)?;
        d.sim.engine_write(who, first + 100, b"alias")?;
        let mut b = [0u8; 5];
        for va in vas.iter() {
            d.sim.engine_read(who, *va + 100, &mut b)?;
            assert_eq!(&b, b"alias");
        }
        let st = stats(&d);
        assert_eq!((st.misses, st.evictions), (n as u64, 8));
        assert_eq!(d.sim.stlb_stats().1, (stlb::SETS * stlb::WAYS, 0));
        // The least recently used went first: the first mapping walks again.
        d.sim.engine_read(who, first, &mut b)?;
        d.sim.engine_read(who, last, &mut b)?;
        let st = stats(&d);
        assert_eq!((st.misses, st.walks), (n as u64 + 1, n as u64 + 1));
        for va in vas.iter() {
            unmap_device_va(vm, *va)?;
        }
        assert_eq!(d.sim.stlb_stats().1, (0, 0));
        free_device_memory(vm, h)?;
        Ok(())
    }
}
