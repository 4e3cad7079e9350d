// SPDX-License-Identifier: GPL-2.0

//! Fixtures for the KUnit suites of `vm/` (KUnit builds only), which stand
//! below the device and the context: a simulated Gaudi2 with its MMUs and
//! memory ([`TestDevice`]), and one context's VM on it ([`TestContext`]),
//! torn down when dropped as a context is.

use crate::{
    asic::AsicProperties,
    hw::{backend::Backend, sim::SimGaudi2},
    mmu::device_mmu::DeviceMmu,
    vm::{context_vm::ContextVm, device_vm::DeviceVm, teardown::teardown},
};
use kernel::{
    prelude::*,
    sync::{
        atomic::{Atomic, Relaxed},
        Arc,
    },
};

/// The hardware, MMUs and memory of one simulated Gaudi2.
pub(crate) struct TestDevice {
    /// The ASIC model.
    pub(crate) asic: AsicProperties,
    /// The hardware.
    pub(crate) sim: Arc<SimGaudi2>,
    /// Its MMUs.
    pub(crate) mmu: Arc<DeviceMmu>,
    /// Its memory.
    pub(crate) vm: Arc<DeviceVm>,
    /// Bit `n`: ASID `n` is taken (0 is the kernel's).
    asids: Atomic<u64>,
    /// 1 while the last teardown could not settle (its invalidation failed):
    /// what a device would park.
    parked: Atomic<u32>,
}

impl TestDevice {
    /// A device with `asic`'s geometry, nothing allocated.
    pub(crate) fn new(asic: AsicProperties) -> Result<Arc<Self>> {
        let (sim, mmu, vm) = DeviceVm::simulated(&asic)?;
        Arc::new(
            Self {
                asic,
                sim,
                mmu,
                vm,
                asids: Atomic::new(1),
                parked: Atomic::new(0),
            },
            GFP_KERNEL,
        )
        .map_err(Error::from)
    }

    /// The hardware.
    pub(crate) fn backend(&self) -> &dyn Backend {
        &*self.sim
    }

    /// Whether the last context teardown kept its VM for want of a
    /// successful invalidation (a device would park it).
    pub(crate) fn release_parked(&self) -> bool {
        self.parked.load(Relaxed) != 0
    }
}

/// A Gaudi2 with six HBMs and one context on it, shared by the suites.
pub(crate) fn device_and_context() -> Result<(Arc<TestDevice>, Arc<TestContext>)> {
    let d = TestDevice::new(AsicProperties::gaudi2(6, 0)?)?;
    let ctx = Arc::new(TestContext::new(&d)?, GFP_KERNEL)?;
    Ok((d, ctx))
}

/// One context's VM with the lowest free user ASID. Dropping it does what a
/// context's teardown does to the VM and the device's registers.
pub(crate) struct TestContext {
    dev: Arc<TestDevice>,
    vm: Arc<ContextVm>,
}

impl TestContext {
    /// A new context on `dev`.
    pub(crate) fn new(dev: &Arc<TestDevice>) -> Result<Self> {
        let taken = dev.asids.load(Relaxed);
        let asid = (!taken).trailing_zeros();
        if asid >= crate::asic::MAX_ASID {
            return Err(EBUSY);
        }
        let vm = Arc::pin_init(ContextVm::new(&dev.vm, asid)?, GFP_KERNEL)?;
        dev.asids.store(taken | (1 << asid), Relaxed);
        Ok(Self {
            dev: dev.clone(),
            vm,
        })
    }

    /// The context's VM.
    pub(crate) fn vm(&self) -> &Arc<ContextVm> {
        &self.vm
    }

    /// The context's ASID.
    pub(crate) fn asid(&self) -> u32 {
        self.vm.asid
    }

    /// Bytes of DRAM the context allocated.
    pub(crate) fn dram_phys_mem(&self) -> u64 {
        self.vm.dram_phys_mem()
    }
}

impl Drop for TestContext {
    fn drop(&mut self) {
        self.dev.backend().release_registers();
        self.dev.backend().release_sram();
        let settled = teardown(&self.vm).settled;
        self.dev.parked.store(u32::from(!settled), Relaxed);
        if settled {
            self.vm.clear();
            let asid = self.vm.asid;
            let taken = self.dev.asids.load(Relaxed);
            self.dev.asids.store(taken & !(1 << asid), Relaxed);
        }
    }
}
