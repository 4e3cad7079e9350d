// SPDX-License-Identifier: GPL-2.0

//! The device-wide VM owner (upstream `struct hl_vm` plus the memory counters
//! of `struct hl_device`): the DRAM page pool, the handle table of every
//! context's allocations, the usage counters, and the device's MMUs below it.
//! Every per-context VM ([`super::context_vm::ContextVm`]) holds an `Arc` of it.

use crate::{
    asic::AsicProperties,
    hw::{backend::Backend, sim::SimGaudi2},
    mmu::device_mmu::DeviceMmu,
    vm::{
        dram_pool::{DramPool, SharedPool},
        handles::HandleTable,
        op_profile::OpProfile,
    },
};
use kernel::{
    new_mutex,
    prelude::*,
    sync::{
        atomic::{Atomic, Relaxed},
        Arc, Mutex,
    },
};

/// The memory of one device.
#[pin_data]
pub(crate) struct DeviceVm {
    /// The ASIC model (page sizes, ranges).
    pub(crate) asic: AsicProperties,
    /// The device's MMUs.
    pub(crate) mmu: Arc<DeviceMmu>,
    /// The DRAM page pool over `[dram_user_base, dram_end)`. Page packs hold a
    /// reference to it (not to this owner, which holds them in `handles`).
    pub(crate) pool: Arc<SharedPool>,
    /// Handle -> page pack, device-wide (handles of every context).
    #[pin]
    pub(crate) handles: Mutex<HandleTable>,
    /// Bytes of DRAM allocated by all contexts (`dram_used_mem`).
    dram_used: Atomic<u64>,
    /// Live dma-buf exports of the device (`dmabuf_export_cnt`).
    dmabuf_exports: Atomic<u64>,
    /// Importers' sg tables of those exports currently mapped.
    dmabuf_mappings: Atomic<u64>,
    /// Time spent in each phase of ALLOC, FREE, MAP and UNMAP (debugfs `bench`).
    pub(crate) profile: OpProfile,
}

/// The device-wide owners of a simulated Gaudi2, bottom-up: the hardware,
/// its MMUs, its memory.
pub(crate) type SimulatedOwners = (Arc<SimGaudi2>, Arc<DeviceMmu>, Arc<DeviceVm>);

impl DeviceVm {
    /// The owners of a simulated Gaudi2 with `asic`'s geometry, nothing
    /// allocated (what a device, or a KUnit fixture, is built on).
    pub(crate) fn simulated(asic: &AsicProperties) -> Result<SimulatedOwners> {
        let sim = Arc::pin_init(SimGaudi2::new(asic), GFP_KERNEL)?;
        let (mmu, vm) = Self::on(asic, sim.clone())?;
        Ok((sim, mmu, vm))
    }

    /// The MMUs and memory of a Gaudi2 with `asic`'s geometry on the
    /// hardware `backend` (every ASID's hop 0 committed to it), nothing
    /// allocated.
    pub(crate) fn on(
        asic: &AsicProperties,
        backend: Arc<dyn Backend>,
    ) -> Result<(Arc<DeviceMmu>, Arc<DeviceVm>)> {
        let mmu = Arc::pin_init(DeviceMmu::new(asic, backend), GFP_KERNEL)?;
        let vm = Arc::pin_init(Self::new(asic.clone(), mmu.clone()), GFP_KERNEL)?;
        Ok((mmu, vm))
    }

    /// The memory of a device with `asic`'s DRAM over `mmu`: every user DRAM
    /// page free, no handle.
    pub(crate) fn new(asic: AsicProperties, mmu: Arc<DeviceMmu>) -> impl PinInit<Self, Error> {
        let pool = DramPool::new(
            asic.dram_user_base,
            asic.dram_page_size,
            asic.user_dram_pages(),
        )
        .and_then(|p| Arc::pin_init(SharedPool::new(p, mmu.backend_arc().clone()), GFP_KERNEL));
        try_pin_init!(Self {
            pool: pool?,
            handles <- new_mutex!(HandleTable::new()),
            asic,
            mmu,
            dram_used: Atomic::new(0),
            dmabuf_exports: Atomic::new(0),
            dmabuf_mappings: Atomic::new(0),
            profile: OpProfile::new(),
        })
    }

    /// The hardware behind this memory.
    pub(crate) fn backend(&self) -> &dyn Backend {
        self.mmu.backend()
    }

    /// Bytes of DRAM allocated on the device. O(1).
    pub(crate) fn dram_used(&self) -> u64 {
        self.dram_used.load(Relaxed)
    }

    /// Add `delta` bytes (negative: subtract) to the device's DRAM usage. O(1).
    pub(crate) fn account_dram(&self, delta: i64) {
        self.dram_used.fetch_add(delta as u64, Relaxed);
    }

    /// Count a dma-buf export made (`true`) or released. O(1).
    pub(crate) fn dmabuf_exported(&self, made: bool) {
        if made {
            self.dmabuf_exports.fetch_add(1, Relaxed);
        } else {
            self.dmabuf_exports.fetch_sub(1, Relaxed);
        }
    }

    /// Live dma-buf exports of the device. O(1).
    pub(crate) fn dmabuf_exports(&self) -> u64 {
        self.dmabuf_exports.load(Relaxed)
    }

    /// Count an importer's sg table of one of the device's exports mapped
    /// (`true`) or unmapped. O(1).
    pub(crate) fn dmabuf_mapped(&self, mapped: bool) {
        if mapped {
            self.dmabuf_mappings.fetch_add(1, Relaxed);
        } else {
            self.dmabuf_mappings.fetch_sub(1, Relaxed);
        }
    }

    /// Importers' sg tables of the device's exports currently mapped. O(1).
    pub(crate) fn dmabuf_mappings(&self) -> u64 {
        self.dmabuf_mappings.load(Relaxed)
    }

    /// Free every handle still owned by `asid` (a recycled ASID starts with
    /// nothing; context teardown makes this impossible, see `free_all_of`).
    /// Returns how many there were. O(1) when there are none.
    pub(crate) fn purge_owned_by(&self, asid: u32) -> usize {
        let mut handles = self.handles.lock();
        if handles.owned_by(asid) == 0 {
            return 0;
        }
        handles.remove_owned_by(
            |owner| owner == asid,
            |_, pack| self.account_dram(-(pack.total_size as i64)),
        )
    }
}
