// SPDX-License-Identifier: GPL-2.0

//! The PCI driver for Gaudi2 functions (1da3:1020), registered only when the
//! module parameter `pci` is set ([`register`]).
//!
//! **Binding.** The driver is named `habanalabs_rs` and its id table holds
//! 1da3:1020 only. The table is not exported as a module alias, so a Gaudi2
//! never makes udev load this module, and with `pci=0` (the default) no PCI
//! driver is registered at all: the module loads next to upstream's
//! `habanalabs`, which keeps its devices. With `pci=1` the driver binds every
//! 1da3:1020 function no other driver owns; on a host with real Gaudi2s,
//! load `habanalabs` first (or leave `pci=0`).
//!
//! **Probe** ([`PciDevice::probe`]): the hardware's bring-up
//! ([`crate::hw::pci::probe`]), the device ([`HlDevice::new_pci`], whose MMU
//! owner commits every ASID's hop 0), the end of MMU init
//! ([`PciGaudi2::mmu_enable`]), then the accel and control nodes and the
//! debugfs files, exactly as a simulated device's (`accel<N>` after the
//! simulated ones; device index `devices`, `devices + 1`, ... in probe
//! order). A failure anywhere undoes everything and fails the probe with
//! its errno; the module stays loaded.
//!
//! **Remove** (driver unbind, `rmmod`, hot removal; [`PciDevice`]'s drop):
//! the nodes are unregistered as at module exit, with open files allowed:
//! an open compute file then answers `ENODEV` (the DRM device is
//! unplugged, its CPU mappings zapped) and releases its context when it is
//! closed; the hardware is detached ([`PciGaudi2::detach`]: every host page
//! DMA-unmapped, its state gone), the MSI-X vectors freed, bus mastering
//! and the function disabled.
//!
//! The objects every device shares (the control nodes' char-device region,
//! the debugfs roots) reach the probe through [`PCI_HOME`], set by the
//! module before it registers the driver and cleared after it unregisters
//! it.

use crate::{
    asic::{gaudi2_regs as r, PCI_IDS_GAUDI2, PCI_VENDOR_ID_HABANALABS},
    cs::user_interrupt::{UserInterruptIrq, UserInterrupts, FIRST_USER_INTERRUPT, USER_INTERRUPTS},
    device::{BusId, HlDevice},
    ffi::irq::MsixHandlers,
    ffi::{
        debugfs::Dir,
        pci::{device_id, EnabledDevice},
    },
    hw::pci::{
        probe,
        queues::{EqIrq, PciEngines},
        PciGaudi2,
    },
    shell::accel::{ChrdevRegion, PreparedDevice},
    PciScan, RegisteredDevice,
};
use kernel::{
    device::Core, device_id::IdArray, driver::Registration, pci, prelude::*, sync::Arc, ThisModule,
};

/// What every PCI device of the module shares, while the driver is
/// registered.
pub(crate) struct PciHome {
    /// The control nodes' char-device region.
    pub(crate) region: Arc<ChrdevRegion>,
    /// `/sys/kernel/debug/habanalabs_rs/`.
    pub(crate) root: Arc<Dir<PciScan>>,
    /// `/sys/kernel/debug/habanalabs/`.
    pub(crate) hl_root: Arc<Dir<()>>,
    /// The device index of the next PCI device.
    pub(crate) next_index: u32,
}

kernel::sync::global_lock! {
    // SAFETY: initialised by `init_home`, from the module's init, before
    // any other use.
    unsafe(uninit) static PCI_HOME: Mutex<Option<PciHome>> = None;
}

/// Initialise [`PCI_HOME`] (empty). Module init only, once per load.
pub(crate) fn init_home() {
    // SAFETY: called once, by the module's init, before any use of the lock.
    unsafe { PCI_HOME.init() };
}

/// `struct pci_device_id` of 1da3:1020 (`PCI_DEVICE(PCI_VENDOR_ID_HABANALABS,
/// PCI_IDS_GAUDI2)`, common/habanalabs_drv.c:68-74).
const GAUDI2_ID: pci::DeviceId = device_id(PCI_VENDOR_ID_HABANALABS, PCI_IDS_GAUDI2 as u32);

/// The id table: Gaudi2 only. Not a module alias (see the module
/// documentation).
static PCI_TABLE: IdArray<pci::DeviceId, (), 1> = IdArray::new([(GAUDI2_ID, &())]);

/// The PCI driver.
pub(crate) struct HlPciDriver;

/// The driver's registration, held by the module while `pci=1`.
pub(crate) type PciRegistration = Pin<KBox<Registration<pci::Adapter<HlPciDriver>>>>;

/// Register the driver with `home` as what the devices share; every
/// unowned Gaudi2 function is probed before this returns.
pub(crate) fn register(home: PciHome, module: &'static ThisModule) -> Result<PciRegistration> {
    *PCI_HOME.lock() = Some(home);
    let reg = KBox::pin_init(Registration::new(c"habanalabs_rs", module), GFP_KERNEL);
    if reg.is_err() {
        clear_home();
    }
    reg
}

/// Forget what the devices share (after the driver is unregistered: no
/// probe runs any more). Idempotent.
pub(crate) fn clear_home() {
    let home = PCI_HOME.lock().take();
    drop(home);
}

/// One bound Gaudi2 function.
pub(crate) struct PciDevice<'bound> {
    /// The nodes and debugfs files; taken first at removal.
    registered: Option<RegisteredDevice>,
    /// The hardware (shared with the device and its open files).
    hw: Arc<PciGaudi2>,
    /// The engines (their jobs end at removal).
    engines: Arc<PciEngines>,
    /// The MSI-X vectors with the completion (21) and event queue (0)
    /// handlers, freed before the function is disabled.
    _msix: MsixHandlers<'bound>,
    /// Memory and bus mastering, turned off last.
    _enabled: EnabledDevice,
}

/// The bus id of `pdev` (`DDDD:BB:DD.F`, its device name). O(1).
fn bus_id(pdev: &pci::Device<Core<'_>>) -> Result<BusId> {
    let mut id = [0u8; 12];
    let name = pdev.as_ref().name().to_bytes();
    id.copy_from_slice(name.get(..12).ok_or(EINVAL)?);
    Ok(id)
}

impl<'bound> PciDevice<'bound> {
    /// Probe `pdev` (see the module documentation). Sleeps.
    fn probe(pdev: &'bound pci::Device<Core<'_>>) -> Result<Self> {
        let (region, root, hl_root, index) = {
            let mut home = PCI_HOME.lock();
            let h = home.as_mut().ok_or(ENODEV)?;
            let index = h.next_index;
            h.next_index = index.checked_add(1).ok_or(ENOSPC)?;
            (h.region.clone(), h.root.clone(), h.hl_root.clone(), index)
        };
        let hw_probe = probe::probe(pdev, crate::module_parameters::hbms.value())?;
        let engines = PciEngines::new(&hw_probe.hw, pdev.as_ref())?;
        let mut msix = MsixHandlers::new(hw_probe.irqs);
        msix.request(
            r::IRQ_NUM_COMPLETION as usize,
            c"habanalabs_rs cs",
            engines.core().clone(),
        )?;
        msix.request(
            r::IRQ_NUM_EVENT_QUEUE as usize,
            c"habanalabs_rs eq",
            EqIrq::new(&engines)?,
        )?;
        // The user interrupts: MSI-X 48..111, each its own thread.
        let interrupts = UserInterrupts::new()?;
        for k in 0..USER_INTERRUPTS {
            msix.request(
                (FIRST_USER_INTERRUPT + k) as usize,
                c"habanalabs_rs user",
                UserInterruptIrq::new(&interrupts, k as usize)?,
            )?;
        }
        let hdev = HlDevice::new_pci(
            index,
            hw_probe.asic.clone(),
            hw_probe.hw.clone(),
            (engines.clone(), interrupts),
            bus_id(pdev)?,
        )?;
        hdev.cs.configure(
            crate::module_parameters::timeout_locked.value(),
            crate::module_parameters::reset_on_page_fault.value(),
        );
        hw_probe.hw.mmu_enable()?;
        let files = crate::shell::debugfs::prepare(&hdev)?;
        let abi = crate::shell::debugfs_abi::prepare(&hdev)?;
        let dev = PreparedDevice::with_parent(hdev, pdev.as_ref())?;
        let registered = crate::publish(dev, (files, abi), &region, (&root, &hl_root))?;
        Ok(Self {
            registered: Some(registered),
            hw: hw_probe.hw,
            engines,
            _msix: msix,
            _enabled: hw_probe.enabled,
        })
    }
}

impl Drop for PciDevice<'_> {
    fn drop(&mut self) {
        // The nodes first (no new open, open files unplugged), then the
        // hardware: no DMA mapping of it survives the unbind.
        drop(self.registered.take());
        self.engines.detach();
        self.hw.detach();
    }
}

impl pci::Driver for HlPciDriver {
    type IdInfo = ();
    type Data<'bound> = PciDevice<'bound>;
    const ID_TABLE: pci::IdTable<()> = &PCI_TABLE;

    fn probe<'bound>(
        pdev: &'bound pci::Device<Core<'_>>,
        _info: Option<&'bound ()>,
    ) -> impl PinInit<Self::Data<'bound>, Error> + 'bound {
        PciDevice::probe(pdev).inspect_err(|e| {
            dev_err!(pdev.as_ref(), "probe failed ({:?})\n", e);
        })
    }
}
