// SPDX-License-Identifier: GPL-2.0

//! The per-open compute context (upstream `struct hl_ctx`): one per open of
//! the compute node. It owns the user ASID; closing the file tears it down.

use crate::{
    cs::tracker::ContextCs,
    device::HlDevice,
    ffi::memcg::MemCgroup,
    vm::{
        context_vm::ContextVm,
        teardown::{teardown, VmTeardown},
    },
};
use kernel::{prelude::*, sync::Arc};

/// A user context.
///
/// # Invariants
///
/// While a `Context` exists, `dev` counts it as the active compute context
/// and `asid` is reserved for it.
pub(crate) struct Context {
    dev: Arc<HlDevice>,
    asid: u32,
    /// The context's VA ranges, page tables and mappings (also reachable
    /// from the device for debugfs).
    vm: Arc<ContextVm>,
    /// The context's command submissions.
    cs: Arc<ContextCs>,
}

impl Context {
    /// Create the context of a new compute open (`hl_ctx_create`), or fail
    /// with the errno of `HlDevice::open_compute`.
    pub(crate) fn new(dev: Arc<HlDevice>, now_ns: i64) -> Result<Self> {
        let asid = dev.open_compute(now_ns)?;
        let made = ContextVm::new(&dev.vm, asid)
            .and_then(|init| Arc::pin_init(init, GFP_KERNEL))
            .and_then(|vm| Ok((ContextCs::new(dev.cs.clone(), vm.clone())?, vm)));
        let (cs, vm) = match made {
            Ok(made) => made,
            Err(e) => {
                dev.close_compute(asid);
                return Err(e);
            }
        };
        // A new user: what the last one's CSs captured goes
        // (`hl_enable_err_info_capture`), not under the device's `state`.
        dev.cs.enable_capture();
        dev.set_active_vm(Some(vm.clone()), Some(cs.clone()));
        // Host memory the simulation takes for this user's DRAM is charged
        // to the opener's memory cgroup, whichever thread allocates it.
        dev.backend().set_memory_owner(MemCgroup::of_current());
        // INVARIANT: `open_compute` marked the context active and reserved `asid`.
        Ok(Self { dev, asid, vm, cs })
    }

    /// The device of this context.
    pub(crate) fn device(&self) -> &Arc<HlDevice> {
        &self.dev
    }

    /// Bytes of DRAM this context allocated.
    pub(crate) fn dram_phys_mem(&self) -> u64 {
        self.vm.dram_phys_mem()
    }

    /// The context's VA ranges, page tables and mappings.
    pub(crate) fn vm(&self) -> &Arc<ContextVm> {
        &self.vm
    }

    /// The context's ASID.
    pub(crate) fn asid(&self) -> u32 {
        self.asid
    }

    /// The context's command submissions.
    pub(crate) fn cs(&self) -> &Arc<ContextCs> {
        &self.cs
    }
}

impl Drop for Context {
    /// Tear the context down (`hl_ctx_fini` -> `hl_vm_ctx_fini`): stop its
    /// jobs and wait for every CS in flight to finish (so no engine reaches
    /// its memory any more), unmap and free everything left behind, then
    /// release the ASID.
    ///
    /// Nothing the MMU could still reach goes back before the teardown's own
    /// invalidation of both MMUs succeeded (always issued, as upstream). If it
    /// fails, the device keeps this context's VM, with its pins, DRAM pages,
    /// hops and ASID, and opens answer `EAGAIN` until a later invalidation
    /// succeeds (`HlDevice::open_compute`). Allocates nothing.
    fn drop(&mut self) {
        // Usually done at the file's close already.
        self.cs.stop_and_drain();
        // Its timestamp registrations go with it.
        if let Ok(ints) = self.dev.cs.interrupts() {
            ints.forget(Arc::as_ptr(&self.cs) as usize);
        }
        // Opens answer `EAGAIN` from here on (upstream `compute_ctx_in_release`).
        self.dev.begin_release();
        // The registers of every HW block go, so the next user reads zeros
        // (upstream resets a Gaudi2 when its user releases it). None is
        // mapped any more: every block vma holds a reference to this context.
        // SRAM is zeroed too.
        self.dev.backend().release_registers();
        self.dev.backend().release_sram();
        let VmTeardown {
            blocks_left,
            maps_left,
            hops_left,
            settled,
            allocations_freed: left,
        } = teardown(&self.vm);
        if blocks_left > 0 {
            hl_err!(
                "context {}: {} HW block mapping(s) left at teardown\n",
                self.asid,
                blocks_left
            );
        }
        if maps_left > 0 || hops_left > 0 {
            pr_debug!(
                "context {}: unmapped {} mapping(s) left behind; {} hop(s) were left\n",
                self.asid,
                maps_left,
                hops_left
            );
        }
        if !settled {
            hl_err!(
                "context {}: MMU invalidation failed at teardown; the device keeps its memory until one succeeds\n",
                self.asid
            );
            self.dev.cs.finish_reset();
            self.dev.backend().set_memory_owner(None);
            self.dev.park_release(self.asid, self.vm.clone());
            return;
        }
        let va_left = self.vm.clear();
        if left > 0 || va_left > 0 {
            pr_debug!(
                "context {}: freed {} allocation(s) and {} VA block(s) left behind\n",
                self.asid,
                left,
                va_left
            );
        }
        // Every page pack of the context went back with its contents;
        // upstream's `memory_scrub` scrubs all device memory on top.
        self.dev.scrub_at_release();
        self.dev.backend().set_memory_owner(None);
        // A reset a page fault asked for (`reset_on_page_fault`) ends here.
        self.dev.cs.finish_reset();
        self.dev.close_compute(self.asid);
    }
}

#[kunit_tests(hlrs_context)]
mod tests {
    use super::*;
    use crate::{
        asic::AsicProperties,
        vm::{
            device_memory::{alloc_device_memory, free_device_memory},
            handles::HandleReservation,
            mapping::map_device_va,
            page_pack::PhysPgPack,
        },
    };

    const PAGE: u64 = 0x3000_0000;

    fn setup() -> Result<(Arc<HlDevice>, Context)> {
        let d = HlDevice::new(0, AsicProperties::gaudi2(6, 0)?)?;
        let ctx = Context::new(d.clone(), 1)?;
        Ok((d, ctx))
    }

    #[test]
    fn a_context_owns_the_user_asid_until_dropped() -> Result {
        let dev = HlDevice::new(0, AsicProperties::gaudi2(6, 0)?)?;
        let ctx = Context::new(dev.clone(), 1)?;
        assert_eq!(ctx.asid(), 1);
        assert_eq!(ctx.dram_phys_mem(), 0);
        assert!(Arc::ptr_eq(ctx.device(), &dev));
        assert!(Context::new(dev.clone(), 2).is_err());
        drop(ctx);
        assert!(!dev.state.lock().compute_ctx_active);
        let again = Context::new(dev.clone(), 3)?;
        assert_eq!(again.asid(), 1);
        Ok(())
    }

    #[test]
    fn teardown_whose_invalidation_fails_keeps_everything_until_the_next_open() -> Result {
        let (d, ctx) = setup()?;
        let slots = d.mmu.dr_hops.lock().free_slots();
        let h = alloc_device_memory(ctx.vm(), 2 * PAGE, 0)?;
        map_device_va(ctx.vm(), u64::from(h), 0, 0)?;
        let free = d.vm.pool.lock().free_pages();
        d.sim()?.inject_invalidation_failures(u64::MAX);
        drop(ctx);
        // The pages, the hops and the ASID are still held; opens say EAGAIN.
        assert!(d.release_parked());
        assert_eq!(d.vm.pool.lock().free_pages(), free);
        assert!(d.mmu.dr_hops.lock().free_slots() < slots);
        assert_eq!(Context::new(d.clone(), 2).err(), Some(EAGAIN));
        {
            let st = d.state.lock();
            assert!(st.in_release && !st.compute_ctx_active);
        }
        // Once an invalidation succeeds, the next open finishes the teardown.
        d.sim()?.inject_invalidation_failures(0);
        let ctx = Context::new(d.clone(), 3)?;
        assert_eq!(ctx.asid(), 1);
        assert!(!d.release_parked());
        assert_eq!(d.vm.pool.lock().free_pages(), free + 2);
        assert_eq!(d.mmu.dr_hops.lock().free_slots(), slots);
        Ok(())
    }

    #[test]
    fn a_recycled_asid_starts_with_nothing() -> Result {
        let (d, ctx) = setup()?;
        assert_eq!(ctx.asid(), 1);
        drop(ctx);
        // What a teardown that failed half-way used to leave: a handle of ASID 1
        // with no context. The next context gets ASID 1 again and must not
        // pass the owner check with it.
        let stray = Arc::new(
            PhysPgPack::alloc(&d.vm.pool, &d.vm.asic, 1, 0, 2, true)?,
            GFP_KERNEL,
        )?;
        let h =
            d.vm.handles
                .lock()
                .insert(stray, HandleReservation::new()?)?;
        d.vm.account_dram(2 * PAGE as i64);
        let ctx = Context::new(d.clone(), 2)?;
        assert_eq!(ctx.asid(), 1);
        assert!(d.vm.handles.lock().get(h).is_none());
        assert_eq!(d.vm.handles.lock().owned_by(1), 0);
        assert_eq!(free_device_memory(ctx.vm(), u64::from(h)), Err(EINVAL));
        assert_eq!(d.vm.pool.lock().free_pages(), 127);
        assert_eq!(d.vm.dram_used(), 0);
        Ok(())
    }
}
