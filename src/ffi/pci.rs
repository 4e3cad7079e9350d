// SPDX-License-Identifier: GPL-2.0

//! What `kernel::pci` of 7.3 lacks for a PCI driver's bring-up and teardown:
//! [`EnabledDevice`], an enabled bus-mastering function that is disabled
//! again (`pci_clear_master`, `pci_disable_device`) when dropped, as
//! upstream's `hl_pci_fini` does (common/pci/pci.c:430-435); `kernel::pci`
//! enables (`enable_device_mem`, `set_master`) but never disables.
//!
//! [`p2p_reachable`]: whether an importer reaches a function's BARs peer to
//! peer (`pci_p2pdma_distance`, a stub answering no on kernels without
//! `CONFIG_PCI_P2PDMA`).
//!
//! A leaf: it imports nothing of the project but [`Importer`].

use super::dma::Importer;
use kernel::{
    bindings,
    device::Core,
    pci,
    prelude::*,
    sync::aref::ARef, //
};

#[allow(improper_ctypes)]
extern "C" {
    // Prototype in `ffi/helpers.h`, body in `ffi/helpers.c`.
    fn hlrs_pci_p2pdma_distance(
        provider: *mut bindings::pci_dev,
        client: *mut bindings::device,
    ) -> c_int;
}

/// The id-table entry of `vendor`:`device`, any subsystem
/// (`PCI_DEVICE(vendor, device)`): `kernel::pci::Vendor` has no constant
/// for every vendor (none for Habana), so the entry is built from the C
/// struct. O(1).
pub(crate) const fn device_id(vendor: u16, device: u32) -> pci::DeviceId {
    let raw = bindings::pci_device_id {
        vendor: vendor as u32,
        device,
        subvendor: !0,
        subdevice: !0,
        class: 0,
        class_mask: 0,
        driver_data: 0,
        override_only: 0,
    };
    // SAFETY: `pci::DeviceId` is a `repr(transparent)` wrapper of
    // `bindings::pci_device_id` with no invariant of its own (what its
    // `from_id` builds, for a vendor it has a constant for).
    unsafe { core::mem::transmute::<bindings::pci_device_id, pci::DeviceId>(raw) }
}

/// Whether `importer`'s device reaches `provider`'s BARs peer to peer
/// (`pci_p2pdma_distance(provider, importer, true) >= 0`, upstream
/// `hl_dmabuf_attach`, common/memory.c:1705-1721). O(PCI hierarchy depth).
pub(crate) fn p2p_reachable(provider: &pci::Device, importer: &Importer<'_>) -> bool {
    // CAST: `pci::Device` is a `repr(transparent)` wrapper of
    // `Opaque<bindings::pci_dev>`.
    let p = core::ptr::from_ref(provider)
        .cast::<bindings::pci_dev>()
        .cast_mut();
    // SAFETY: `p` is a live PCI device (borrowed), the importer's device is
    // live for the callback `importer` belongs to; the call only reads the
    // topology.
    unsafe { hlrs_pci_p2pdma_distance(p, importer.dev().as_ptr()) >= 0 }
}

/// A PCI function enabled for memory access and bus mastering
/// (`pci_enable_device_mem` + `pci_set_master`, upstream `hl_pci_init`,
/// common/pci/pci.c:384-390), disabled again when dropped.
///
/// # Invariants
///
/// `pdev` was enabled once by [`EnabledDevice::enable`] and is disabled
/// once, by `Drop`.
pub(crate) struct EnabledDevice {
    pdev: ARef<pci::Device>,
}

impl EnabledDevice {
    /// Enable `pdev`'s memory BARs and bus mastering (probe).
    pub(crate) fn enable(pdev: &pci::Device<Core<'_>>) -> Result<Self> {
        pdev.enable_device_mem()?;
        pdev.set_master();
        let dev: &pci::Device = pdev;
        // INVARIANT: enabled just above.
        Ok(Self { pdev: dev.into() })
    }

    fn raw(&self) -> *mut bindings::pci_dev {
        let dev: &pci::Device = &self.pdev;
        // CAST: `pci::Device` is a `repr(transparent)` wrapper of
        // `Opaque<bindings::pci_dev>`.
        core::ptr::from_ref(dev)
            .cast::<bindings::pci_dev>()
            .cast_mut()
    }
}

impl Drop for EnabledDevice {
    fn drop(&mut self) {
        let pdev = self.raw();
        // SAFETY: `pdev` is a live PCI device (we hold a reference) that we
        // enabled once (invariant) and disable once, here: its DMA stops
        // (bus mastering off) before its resources go.
        unsafe {
            bindings::pci_clear_master(pdev);
            bindings::pci_disable_device(pdev);
        }
    }
}
