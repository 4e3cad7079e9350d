// SPDX-License-Identifier: GPL-2.0

//! The per-open compute context (upstream `struct hl_ctx`): one per open of
//! the compute node. It owns the user ASID; closing the file tears it down.

use crate::{
    device::HlDevice,
    vm::{context_vm::ContextVm, device_memory::free_all_of},
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
}

impl Context {
    /// Create the context of a new compute open (`hl_ctx_create`), or fail
    /// with the errno of `HlDevice::open_compute`.
    pub(crate) fn new(dev: Arc<HlDevice>, now_ns: i64) -> Result<Self> {
        let asid = dev.open_compute(now_ns)?;
        let vm =
            match ContextVm::new(&dev.vm, asid).and_then(|init| Arc::pin_init(init, GFP_KERNEL)) {
                Ok(vm) => vm,
                Err(e) => {
                    dev.close_compute(asid);
                    return Err(e);
                }
            };
        dev.set_active_vm(Some(vm.clone()));
        // INVARIANT: `open_compute` marked the context active and reserved `asid`.
        Ok(Self { dev, asid, vm })
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
}

impl Drop for Context {
    /// Tear the context down (`hl_ctx_fini` -> `hl_vm_ctx_fini`): unmap and
    /// free everything left behind, then release the ASID.
    ///
    /// Nothing the MMU could still reach goes back before the teardown's own
    /// invalidation of both MMUs succeeded (always issued, as upstream). If it
    /// fails, the device keeps this context's VM, with its pins, DRAM pages,
    /// hops and ASID, and opens answer `EAGAIN` until a later invalidation
    /// succeeds (`HlDevice::open_compute`). Allocates nothing.
    fn drop(&mut self) {
        // Opens answer `EAGAIN` from here on (upstream `compute_ctx_in_release`).
        self.dev.begin_release();
        // The registers of every HW block go, so the next user reads zeros
        // (upstream resets a Gaudi2 when its user releases it). None is
        // mapped any more: every block vma holds a reference to this context.
        self.dev.backend().release_registers();
        // `hl_hw_block_mem_fini`: every block mapping holds a reference to
        // the context, so none can be left here.
        let blocks_left = self.vm.hw_blocks.lock().fini();
        if blocks_left > 0 {
            hl_err!(
                "context {}: {} HW block mapping(s) left at teardown\n",
                self.asid,
                blocks_left
            );
        }
        // `hl_mem_mgr_fini`: the timestamp buffers go (a live mmap would keep
        // its buffer, but it also keeps the file, so there is none).
        self.vm.ts_buffers.lock().clear();
        let maps_left = self.vm.unmap_all();
        let hops_left = self.vm.teardown_mmu();
        let settled = self.vm.settle_quarantine(true);
        let left = free_all_of(&self.vm);
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
        self.dev.close_compute(self.asid);
    }
}

#[kunit_tests(hlrs_context)]
mod tests {
    use super::*;
    use crate::asic::AsicProperties;

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
}
