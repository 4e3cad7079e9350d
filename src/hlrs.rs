// SPDX-License-Identifier: GPL-2.0

//! habanalabs_rs: the Habana Gaudi device-memory subsystem in Rust.
//!
//! Without Gaudi hardware the module creates simulated Gaudi2 devices, each
//! behind a compute-accel node `/dev/accel/accelN` and its control node
//! `/dev/accel/accel_controlDN`, speaking the upstream uAPI of
//! `include/uapi/drm/habanalabs_accel.h`.

use kernel::prelude::*;

pub mod uapi;

mod asic;
mod params;
mod vm;

module! {
    type: HabanaLabsRs,
    name: "habanalabs_rs",
    authors: ["habanalabs_rs developers"],
    description: "Habana Gaudi device-memory subsystem (Rust), simulated Gaudi2",
    license: "GPL",
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
    },
}

struct HabanaLabsRs {
    config: params::Config,
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
        Ok(Self { config })
    }
}

impl Drop for HabanaLabsRs {
    fn drop(&mut self) {
        pr_info!("unloaded ({} device(s))\n", self.config.devices);
    }
}
