// SPDX-License-Identifier: GPL-2.0

//! The device-wide MMU owner (upstream: the `mmu_priv`/`mmu_lock` part of
//! `struct hl_device`, in the spirit of Tyr's `Mmu`): the hardware behind the
//! page tables, Gaudi2's DRAM address scrambler, and the hop pools of the two
//! MMUs. Per-context page tables borrow their hop memory from here, through
//! [`DeviceMmu::hops`], the one place a hop-memory handle is made.

use crate::{
    asic::{AsicProperties, HMMU_PAGE_TABLES_SIZE, MAX_ASID},
    hw::backend::{Backend, MmuKind},
    mmu::{
        hop_pool::{DrHopPool, DrHops, HopMemory, HrHopPool, HrHops},
        pte::Scrambler,
    },
};
use kernel::{
    new_mutex,
    prelude::*,
    sync::{Arc, Mutex},
};

/// The MMUs of one device.
#[pin_data]
pub(crate) struct DeviceMmu {
    /// The hardware the tables are written to and whose caches are
    /// invalidated.
    backend: Arc<dyn Backend>,
    /// Gaudi2's DRAM address scrambling for this HBM count.
    pub(crate) scrambler: Scrambler,
    /// The DMMU leaf page size (1 GiB on Gaudi2: one leaf per DRAM page).
    pub(crate) dmmu_page_size: u64,
    /// The device-resident hop slots of the DMMU page tables.
    #[pin]
    pub(crate) dr_hops: Mutex<DrHopPool>,
    /// The host-resident hop tables of the PMMU page tables.
    #[pin]
    pub(crate) hr_hops: Mutex<HrHopPool>,
}

impl DeviceMmu {
    /// The MMUs of a device with `asic`'s geometry on `backend`: hop pools
    /// for every ASID, nothing mapped.
    ///
    /// The hardware is told where each ASID's hop 0 is in both MMUs
    /// (upstream `gaudi2_mmu_update_hop0_addr` at MMU init): the device walks
    /// from there, never from the driver's records.
    pub(crate) fn new(
        asic: &AsicProperties,
        backend: Arc<dyn Backend>,
    ) -> impl PinInit<Self, Error> {
        let pools = Self::pools(asic, &backend);
        let (dr, hr) = match pools {
            Ok((dr, hr)) => (Ok(dr), Ok(hr)),
            Err(e) => (Err(e), Err(e)),
        };
        let scrambler = Scrambler::new(asic.hbms);
        let dmmu_page_size = asic.dmmu_page_size;
        try_pin_init!(Self {
            backend,
            scrambler,
            dmmu_page_size,
            dr_hops <- new_mutex!(dr?),
            hr_hops <- new_mutex!(hr?),
        })
    }

    /// The hop pools of both MMUs, with every ASID's hop 0 given to the
    /// hardware.
    fn pools(asic: &AsicProperties, backend: &Arc<dyn Backend>) -> Result<(DrHopPool, HrHopPool)> {
        let dr = DrHopPool::new(asic.mmu_pgt_addr, HMMU_PAGE_TABLES_SIZE, MAX_ASID)?;
        let hr = HrHopPool::new(backend.clone(), MAX_ASID)?;
        for asid in 0..MAX_ASID {
            backend.set_hop0(MmuKind::Dram, asid, dr.hop0(asid).ok_or(EINVAL)?)?;
            backend.set_hop0(MmuKind::Host, asid, hr.hop0(asid).ok_or(EINVAL)?)?;
        }
        Ok((dr, hr))
    }

    /// The hardware behind the tables.
    pub(crate) fn backend(&self) -> &dyn Backend {
        &*self.backend
    }

    /// The hardware behind the tables, shared (for what outlives a call,
    /// such as host pages mapped for DMA).
    pub(crate) fn backend_arc(&self) -> &Arc<dyn Backend> {
        &self.backend
    }

    /// The hop memory of the MMU of `kind`. O(1).
    pub(crate) fn hops(&self, kind: MmuKind) -> Hops<'_> {
        match kind {
            MmuKind::Dram => Hops::Dr(DrHops {
                pool: &self.dr_hops,
                backend: self.backend(),
            }),
            MmuKind::Host => Hops::Hr(HrHops {
                pool: &self.hr_hops,
            }),
        }
    }
}

/// The MMUs of a simulated Gaudi2 on their own, for the KUnit suites of
/// `mmu/` (which stand below the device): the hardware and its [`DeviceMmu`].
#[cfg(CONFIG_KUNIT)]
pub(crate) struct TestMmu {
    /// The hardware.
    pub(crate) sim: Arc<crate::hw::sim::SimGaudi2>,
    /// Its MMUs.
    pub(crate) mmu: Arc<DeviceMmu>,
}

#[cfg(CONFIG_KUNIT)]
impl TestMmu {
    /// A Gaudi2 with six HBMs and its MMUs.
    pub(crate) fn new() -> Result<Self> {
        let asic = AsicProperties::gaudi2(6, 0)?;
        let sim = Arc::pin_init(crate::hw::sim::SimGaudi2::new(&asic), GFP_KERNEL)?;
        let mmu = Arc::pin_init(DeviceMmu::new(&asic, sim.clone()), GFP_KERNEL)?;
        Ok(Self { sim, mmu })
    }

    /// The hardware behind the MMUs.
    pub(crate) fn backend(&self) -> &dyn Backend {
        &*self.sim
    }
}

/// The hop memory of one MMU of a device, borrowed from its [`DeviceMmu`].
pub(crate) enum Hops<'a> {
    /// Device-resident (DMMU).
    Dr(DrHops<'a>),
    /// Host-resident (PMMU).
    Hr(HrHops<'a>),
}

impl Hops<'_> {
    /// The hop memory, for the page-table calls.
    pub(crate) fn mem(&mut self) -> &mut dyn HopMemory {
        match self {
            Self::Dr(d) => d,
            Self::Hr(h) => h,
        }
    }
}
