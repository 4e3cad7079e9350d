// SPDX-License-Identifier: GPL-2.0

//! ALLOC and FREE of device memory (upstream `alloc_device_memory` and
//! `free_device_memory`, common/memory.c:87-211, 353-386).

use crate::{
    uapi::HL_MEM_CONTIGUOUS,
    vm::{
        context_vm::ContextVm,
        handles::HandleReservation,
        op_profile::{Op, OpTimer, Phase},
        page_pack::PhysPgPack,
    },
};
use kernel::{prelude::*, sync::Arc};

/// Allocate `mem_size` bytes of DRAM for `vm`'s context, rounded up to whole DRAM pages;
/// returns the new handle (>= 1).
///
/// Errors: `EINVAL` for a zero size, a size whose rounding overflows (upstream
/// wraps to 0 pages and also says `EINVAL`) or unknown flag bits (upstream
/// ignores them); `ENOMEM` when the pool cannot satisfy it or no handle is
/// left (upstream: `EFAULT`). On error nothing is allocated and the usage
/// counters are unchanged.
///
/// Cost: O(npages) for the page addresses of a non-contiguous pack, O(log n)
/// for the handle; one accounting update (upstream takes one pool reference
/// per page).
pub(crate) fn alloc_device_memory(vm: &ContextVm, mem_size: u64, flags: u32) -> Result<u32> {
    crate::vm::check_flags(flags)?;
    let dev = &*vm.dev;
    // The ALLOC page size is always the default one: `supports_user_set_page_size`
    // is never set for Gaudi2 upstream, so `alloc.page_size` is ignored.
    let page_size = dev.asic.dram_page_size;
    if mem_size == 0 {
        return Err(EINVAL);
    }
    let npages = mem_size.checked_add(page_size - 1).ok_or(EINVAL)? / page_size;
    let contiguous = flags & HL_MEM_CONTIGUOUS != 0;
    let mut timer = OpTimer::start(&dev.profile, Op::Alloc);
    let spare = dev.handles.lock().take_spare_pack();
    let pack = PhysPgPack::alloc_shared(
        &dev.pool,
        &dev.asic,
        (vm.asid, flags),
        (npages, contiguous),
        spare,
    )?;
    timer.lap(Phase::Pack);
    let total = pack.total_size;
    // The table's spare nodes first; reserved here only when it has none.
    let recycled = dev.handles.lock().insert_recycled(pack);
    let handle = match recycled {
        Ok(h) => h,
        Err(pack) => {
            let res = HandleReservation::new()?;
            dev.handles.lock().insert(pack, res)?
        }
    };
    vm.account_dram(total as i64);
    timer.lap(Phase::Handle);
    timer.done();
    Ok(handle)
}

/// Free the DRAM of `handle` (only its low 32 bits count, as upstream).
///
/// Errors: `EINVAL` for an unknown handle, or one with live mappings (the
/// memory stays allocated); `EPERM` for a handle another context owns
/// (upstream does not check ownership).
pub(crate) fn free_device_memory(vm: &ContextVm, handle: u64) -> Result {
    let dev = &*vm.dev;
    let handle = handle as u32;
    let asid = vm.asid;
    let mut timer = OpTimer::start(&dev.profile, Op::Free);
    let pack = dev.handles.lock().remove_if(handle, |e| {
        if e.pack.asid != asid {
            Err(EPERM)
        } else if e.mapping_cnt > 0 {
            Err(EINVAL)
        } else {
            Ok(())
        }
    })?;
    vm.account_dram(-(pack.total_size as i64));
    timer.lap(Phase::Handle);
    // The pages go back to the pool with the last reference (here, unless
    // an export still holds the pack); the allocation stays for an ALLOC.
    if let Some(vacant) = PhysPgPack::vacate(pack) {
        dev.handles.lock().put_spare_pack(vacant);
    }
    timer.lap(Phase::Pack);
    timer.done();
    Ok(())
}

#[kunit_tests(hlrs_device_memory)]
mod tests {
    use super::*;
    use crate::vm::test_vm::{TestContext, TestDevice};
    use crate::{asic::AsicProperties, uapi::*};

    const PAGE: u64 = 0x3000_0000;
    const USER: u64 = 127 * PAGE;

    #[test]
    fn handles_start_at_one_and_are_reused_lowest_first() -> Result {
        let (d, ctx) = setup()?;
        assert_eq!(alloc_device_memory(ctx.vm(), 1, 0)?, 1);
        assert_eq!(alloc_device_memory(ctx.vm(), 1, 0)?, 2);
        assert_eq!(alloc_device_memory(ctx.vm(), 1, 0)?, 3);
        free_device_memory(ctx.vm(), 1)?;
        free_device_memory(ctx.vm(), 3)?;
        assert_eq!(alloc_device_memory(ctx.vm(), 1, 0)?, 1);
        assert_eq!(alloc_device_memory(ctx.vm(), 1, 0)?, 3);
        assert_eq!(alloc_device_memory(ctx.vm(), 1, 0)?, 4);
        assert_eq!(d.vm.handles.lock().len(), 4);
        Ok(())
    }

    #[test]
    fn alloc_after_free_reuses_the_table_s_spare_nodes() -> Result {
        let (d, ctx) = setup()?;
        let pack = || -> Result<Arc<PhysPgPack>> {
            Ok(Arc::new(
                PhysPgPack::alloc(&d.vm.pool, &d.vm.asic, 1, 0, 1, true)?,
                GFP_KERNEL,
            )?)
        };
        // An empty table has no spares: the caller reserves.
        let p =
            d.vm.handles
                .lock()
                .insert_recycled(pack()?)
                .err()
                .ok_or(EINVAL)?;
        drop(p);
        let a = alloc_device_memory(ctx.vm(), 1, 0)?;
        let b = alloc_device_memory(ctx.vm(), 1, 0)?;
        free_device_memory(ctx.vm(), u64::from(a))?;
        // A FREE leaves its node; the reused id brings its own.
        let h =
            d.vm.handles
                .lock()
                .insert_recycled(pack()?)
                .map_err(|_| EINVAL)?;
        assert_eq!(h, a);
        drop(d.vm.handles.lock().remove_if(h, |_| Ok(()))?);
        assert_eq!(alloc_device_memory(ctx.vm(), 1, 0)?, a);
        // Both ids live, no free id and no spare id node: reserve again.
        let p =
            d.vm.handles
                .lock()
                .insert_recycled(pack()?)
                .err()
                .ok_or(EINVAL)?;
        drop(p);
        for id in [a, b] {
            free_device_memory(ctx.vm(), u64::from(id))?;
        }
        // Steady ALLOC+FREE: lowest id first, usage exact, nothing leaks.
        for _ in 0..10 {
            let h = alloc_device_memory(ctx.vm(), 1, 0)?;
            assert_eq!(h, a.min(b));
            free_device_memory(ctx.vm(), u64::from(h))?;
        }
        assert_eq!(d.vm.handles.lock().len(), 0);
        assert_eq!(d.vm.dram_used(), 0);
        assert_eq!(d.vm.pool.lock().free_pages(), 127);
        Ok(())
    }

    #[test]
    fn sizes_round_up_to_whole_dram_pages() -> Result {
        let (d, ctx) = setup()?;
        let h = alloc_device_memory(ctx.vm(), 1, 0)?;
        assert_eq!(ctx.dram_phys_mem(), PAGE);
        assert_eq!(d.vm.dram_used(), PAGE);
        alloc_device_memory(ctx.vm(), PAGE + 1, 0)?;
        assert_eq!(ctx.dram_phys_mem(), 3 * PAGE);
        free_device_memory(ctx.vm(), u64::from(h))?;
        assert_eq!(ctx.dram_phys_mem(), 2 * PAGE);
        assert_eq!(d.vm.pool.lock().free_pages(), 125);
        Ok(())
    }

    #[test]
    fn bad_sizes_and_flags_are_einval() -> Result {
        let (d, ctx) = setup()?;
        assert_eq!(alloc_device_memory(ctx.vm(), 0, 0), Err(EINVAL));
        // Upstream's rounding wraps to 0 pages here; ours is checked.
        assert_eq!(alloc_device_memory(ctx.vm(), u64::MAX, 0), Err(EINVAL));
        assert_eq!(
            alloc_device_memory(ctx.vm(), u64::MAX - PAGE + 2, 0),
            Err(EINVAL)
        );
        for bad in [0x10u32, 0x20, 0x8000_0000] {
            assert_eq!(alloc_device_memory(ctx.vm(), 1, bad), Err(EINVAL));
        }
        assert_eq!(d.vm.dram_used(), 0);
        assert_eq!(d.vm.handles.lock().len(), 0);
        Ok(())
    }

    #[test]
    fn exhaustion_is_enomem_and_leaks_nothing() -> Result {
        for flags in [0, HL_MEM_CONTIGUOUS] {
            let (d, ctx) = setup()?;
            assert_eq!(alloc_device_memory(ctx.vm(), USER + 1, flags), Err(ENOMEM));
            assert_eq!(d.vm.dram_used(), 0);
            assert_eq!(d.vm.pool.lock().free_pages(), 127);
            let h = alloc_device_memory(ctx.vm(), USER, flags)?;
            assert_eq!(alloc_device_memory(ctx.vm(), 1, flags), Err(ENOMEM));
            free_device_memory(ctx.vm(), u64::from(h))?;
            assert_eq!(alloc_device_memory(ctx.vm(), 1, flags)?, 1);
        }
        Ok(())
    }

    #[test]
    fn packs_list_their_pages_in_order_without_an_array() -> Result {
        let (d, ctx) = setup()?;
        let a = alloc_device_memory(ctx.vm(), 3 * PAGE, HL_MEM_CONTIGUOUS)?;
        let b = alloc_device_memory(ctx.vm(), 3 * PAGE, 0)?;
        let handles = d.vm.handles.lock();
        let pa = handles.get(a).ok_or(EINVAL)?.pack.clone();
        let pb = handles.get(b).ok_or(EINVAL)?.pack.clone();
        drop(handles);
        assert!(pa.is_contiguous());
        let base = pa.page_addr(0).ok_or(EINVAL)?;
        assert_eq!(base, d.asic.dram_user_base);
        assert_eq!(pa.page_addr(2), Some(base + 2 * PAGE));
        assert_eq!(pa.page_addr(3), None);
        assert!(!pb.is_contiguous());
        assert_eq!(pb.page_addr(0), Some(base + 3 * PAGE));
        assert_eq!(pb.npages, 3);
        assert_eq!(pb.total_size, 3 * PAGE);
        assert_eq!(pb.page_size, PAGE);
        // A scattered pack over holes, across the bitmap's two words.
        let c = alloc_device_memory(ctx.vm(), 64 * PAGE, HL_MEM_CONTIGUOUS)?;
        // The pages go back with the pack's last reference.
        drop(pb);
        free_device_memory(ctx.vm(), u64::from(b))?;
        let e = alloc_device_memory(ctx.vm(), 5 * PAGE, 0)?;
        let pe = d.vm.handles.lock().get(e).ok_or(EINVAL)?.pack.clone();
        let want = [3u64, 4, 5, 70, 71];
        for (i, p) in (0u64..).zip(want) {
            assert_eq!(pe.page_addr(i), Some(base + p * PAGE));
        }
        assert_eq!(pe.page_addr(5), None);
        drop((pa, pe));
        for h in [a, c, e] {
            free_device_memory(ctx.vm(), u64::from(h))?;
        }
        assert_eq!(d.vm.pool.lock().free_pages(), 127);
        Ok(())
    }

    #[test]
    fn free_checks_handle_mapping_and_owner() -> Result {
        let (d, ctx) = setup()?;
        assert_eq!(free_device_memory(ctx.vm(), 1), Err(EINVAL));
        let h = alloc_device_memory(ctx.vm(), 1, HL_MEM_SHARED)?;
        // Mapped: refused, memory stays.
        d.vm.handles.lock().get_mut(h).ok_or(EINVAL)?.mapping_cnt = 1;
        assert_eq!(free_device_memory(ctx.vm(), u64::from(h)), Err(EINVAL));
        assert_eq!(d.vm.dram_used(), PAGE);
        d.vm.handles.lock().get_mut(h).ok_or(EINVAL)?.mapping_cnt = 0;
        // Only the low 32 bits of the handle count.
        free_device_memory(ctx.vm(), (1u64 << 32) | u64::from(h))?;
        assert_eq!(d.vm.dram_used(), 0);
        assert_eq!(free_device_memory(ctx.vm(), u64::from(h)), Err(EINVAL));
        // A pack of another ASID (the kernel's) cannot be freed by the user context.
        let foreign = Arc::new(
            PhysPgPack::alloc(&d.vm.pool, &d.vm.asic, 0, 0, 1, true)?,
            GFP_KERNEL,
        )?;
        let fh =
            d.vm.handles
                .lock()
                .insert(foreign, HandleReservation::new()?)?;
        assert_eq!(free_device_memory(ctx.vm(), u64::from(fh)), Err(EPERM));
        assert_eq!(d.vm.pool.lock().free_pages(), 126);
        drop(d.vm.handles.lock().remove_if(fh, |_| Ok(()))?);
        assert_eq!(d.vm.pool.lock().free_pages(), 127);
        Ok(())
    }

    #[test]
    fn teardown_frees_everything_left_behind() -> Result {
        let (d, ctx) = setup()?;
        alloc_device_memory(ctx.vm(), 5 * PAGE, HL_MEM_CONTIGUOUS)?;
        alloc_device_memory(ctx.vm(), 7 * PAGE, HL_MEM_SHARED)?;
        alloc_device_memory(ctx.vm(), 1, 0)?;
        assert_eq!(d.vm.dram_used(), 13 * PAGE);
        drop(ctx);
        assert_eq!(d.vm.dram_used(), 0);
        assert_eq!(d.vm.pool.lock().free_pages(), 127);
        assert_eq!(d.vm.handles.lock().len(), 0);
        // The next context starts from scratch.
        let ctx = TestContext::new(&d)?;
        assert_eq!(alloc_device_memory(ctx.vm(), 1, 0)?, 1);
        Ok(())
    }

    #[test]
    fn teardown_removes_only_its_own_handles_and_frees_their_ids() -> Result {
        let (d, ctx) = setup()?;
        // A kernel-ASID pack takes handle 1; the context's get 2, 3 and 4.
        let kpack = Arc::new(
            PhysPgPack::alloc(&d.vm.pool, &d.vm.asic, 0, 0, 1, true)?,
            GFP_KERNEL,
        )?;
        let kh =
            d.vm.handles
                .lock()
                .insert(kpack, HandleReservation::new()?)?;
        assert_eq!(kh, 1);
        for want in 2..=4 {
            assert_eq!(alloc_device_memory(ctx.vm(), PAGE, 0)?, want);
        }
        free_device_memory(ctx.vm(), 3)?;
        assert_eq!(d.vm.handles.lock().owned_by(1), 2);
        drop(ctx);
        {
            let handles = d.vm.handles.lock();
            assert_eq!(handles.owned_by(1), 0);
            assert_eq!(handles.owned_by(0), 1);
            assert_eq!(handles.len(), 1);
        }
        assert_eq!(d.vm.pool.lock().free_pages(), 126);
        // The ids went back to the free set: the next context reuses them.
        let ctx = TestContext::new(&d)?;
        assert_eq!(alloc_device_memory(ctx.vm(), 1, 0)?, 2);
        assert_eq!(alloc_device_memory(ctx.vm(), 1, 0)?, 3);
        assert_eq!(alloc_device_memory(ctx.vm(), 1, 0)?, 4);
        assert_eq!(alloc_device_memory(ctx.vm(), 1, 0)?, 5);
        drop(ctx);
        drop(d.vm.handles.lock().remove_if(kh, |_| Ok(()))?);
        assert_eq!(d.vm.pool.lock().free_pages(), 127);
        Ok(())
    }

    #[test]
    fn dram_usage_is_exact_through_a_random_mix() -> Result {
        let (d, ctx) = setup()?;
        let mut live: KVec<(u32, u64)> = KVec::new();
        let mut seed = 0x9E37_79B9_7F4A_7C15u64;
        for _ in 0..2000 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            if seed % 3 != 0 || live.is_empty() {
                let pages = seed % 9 + 1;
                let flags = if seed & 0x100 != 0 {
                    HL_MEM_CONTIGUOUS
                } else {
                    0
                };
                match alloc_device_memory(ctx.vm(), pages * PAGE - (seed % PAGE), flags) {
                    Ok(h) => live.push((h, pages), GFP_KERNEL)?,
                    Err(e) => assert_eq!(e, ENOMEM),
                }
            } else {
                let i = (seed as usize / 3) % live.len();
                let (h, _) = live.remove(i)?;
                free_device_memory(ctx.vm(), u64::from(h))?;
            }
            let used: u64 = live.iter().map(|&(_, p)| p * PAGE).sum();
            assert_eq!(d.vm.dram_used(), used);
            assert_eq!(ctx.dram_phys_mem(), used);
            assert_eq!(d.vm.pool.lock().free_pages(), 127 - used / PAGE);
        }
        Ok(())
    }

    fn setup() -> Result<(Arc<TestDevice>, TestContext)> {
        let d = TestDevice::new(AsicProperties::gaudi2(6, 0)?)?;
        let ctx = TestContext::new(&d)?;
        Ok((d, ctx))
    }
}
