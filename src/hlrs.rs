// SPDX-License-Identifier: GPL-2.0

//! habanalabs_rs: the Habana Gaudi device-memory subsystem in Rust.
//!
//! Without Gaudi hardware the module creates simulated Gaudi2 devices, each
//! behind a compute-accel node `/dev/accel/accelN` and its control node
//! `/dev/accel/accel_controlDN`, speaking the upstream uAPI of
//! `include/uapi/drm/habanalabs_accel.h`.

use kernel::{prelude::*, sync::Arc};

pub mod uapi;

mod asic;
mod backend;
mod bench;
mod context;
mod debugfs;
mod device;
mod ffi;
mod file;
mod ioctl;
mod mmu;
mod params;
mod sim;
mod vm;

module! {
    type: HabanaLabsRs,
    name: "habanalabs_rs",
    authors: ["habanalabs_rs developers"],
    description: "Habana Gaudi device-memory subsystem (Rust), simulated Gaudi2",
    license: "GPL",
    imports_ns: ["DMA_BUF"],
    params: {
        devices: u32 {
            default: 1,
            description: "Number of simulated Gaudi2 devices to create (1..=8)",
        },
        hbms: u32 {
            default: 6,
            description: "Working HBM stacks per simulated Gaudi2 (5 or 6); DRAM page = 16 x hbms x 8 MiB",
        },
        dram_mib: u64 {
            default: 0,
            description: "Simulated DRAM size in MiB (0: hbms x 16 GiB); at least two DRAM pages",
        },
        kunit_mappings: u64 {
            default: 100000,
            description: "Mappings the KUnit teardown test creates (make run uses 1000)",
        },
        bench_va_blocks: u64 {
            default: 1000,
            description: "Live VA blocks of the KUnit VA benchmark (make bench uses 100000)",
        },
    },
}

struct HabanaLabsRs {
    config: params::Config,
    /// The registered devices and their debugfs files; dropped (unregistered)
    /// before `_region` and `_debugfs`.
    devices: KVec<(ffi::accel::AccelDevice, Pin<KBox<debugfs::DeviceDebugfs>>)>,
    _region: ffi::accel::ChrdevRegion,
    /// `pci_scan` at the debugfs root; removed before the directory.
    _pci_scan: Pin<KBox<kernel::debugfs::File<PciScan>>>,
    _debugfs: kernel::debugfs::Dir,
}

impl kernel::Module for HabanaLabsRs {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        let config = params::Config::validate(
            module_parameters::devices.value(),
            module_parameters::hbms.value(),
            module_parameters::dram_mib.value(),
        )
        .inspect_err(|e| pr_err!("invalid module parameters: {}\n", e.msg()))
        .map_err(|e| e.errno())?;
        let p = &config.asic;
        pr_info!(
            "{} simulated Gaudi2 device(s): {} HBMs, DRAM {} MiB, DRAM page {} MiB\n",
            config.devices,
            p.hbms,
            p.dram_size >> 20,
            p.dram_page_size >> 20
        );
        // On a host with real Gaudis this module stays away from them: it only
        // creates simulated devices, and says so (kernel log and debugfs).
        let pci = ffi::accel::real_habana_devices();
        match pci {
            (0, _) => pr_info!("{}\n", NO_HABANA_PCI),
            (n, id) => pr_info!(
                "{} Habana PCI function(s) on this host (first: device {:#06x}): {}\n",
                n,
                id,
                HABANA_PCI_LEFT_ALONE
            ),
        }
        let region = ffi::accel::ChrdevRegion::new()?;
        let root = kernel::debugfs::Dir::new(c"habanalabs_rs");
        let pci_scan = KBox::pin_init(
            root.read_callback_file(c"pci_scan", PciScan(pci), &show_pci_scan),
            GFP_KERNEL,
        )?;
        let mut devices = KVec::with_capacity(config.devices as usize, GFP_KERNEL)?;
        for index in 0..config.devices {
            let hdev = Arc::pin_init(device::HlDevice::new(index, p.clone()), GFP_KERNEL)?;
            let files = KBox::pin_init(debugfs::DeviceDebugfs::new(&root, &hdev)?, GFP_KERNEL)?;
            devices.push(
                (ffi::accel::AccelDevice::new(hdev, &region)?, files),
                GFP_KERNEL,
            )?;
        }
        Ok(Self {
            config,
            devices,
            _region: region,
            _pci_scan: pci_scan,
            _debugfs: root,
        })
    }
}

/// What the module found on the host's PCI bus: Habana functions (count,
/// device id of the first), which it never touches.
struct PciScan((u32, u16));

const NO_HABANA_PCI: &str = "no Habana PCI device on this host; creating simulated devices only";
const HABANA_PCI_LEFT_ALONE: &str = "not touched; this module only creates simulated devices";

fn show_pci_scan(scan: &PciScan, f: &mut kernel::fmt::Formatter<'_>) -> kernel::fmt::Result {
    match scan.0 {
        (0, _) => writeln!(f, "{}", NO_HABANA_PCI),
        (n, id) => writeln!(
            f,
            "{} Habana PCI function(s) on this host (first: device {:#06x}): {}",
            n, id, HABANA_PCI_LEFT_ALONE
        ),
    }
}

impl Drop for HabanaLabsRs {
    fn drop(&mut self) {
        // Unregister the devices before the char-device region goes.
        self.devices.clear();
        pr_info!("unloaded ({} device(s))\n", self.config.devices);
    }
}
