// SPDX-License-Identifier: GPL-2.0

//! The hardware (floor 3): what the layers above need of a Gaudi
//! ([`backend::Backend`], sealed), the simulated Gaudi2 that implements it
//! ([`sim::SimGaudi2`]: sparse DRAM, register blocks, PTE writes, MMU
//! cache invalidations, fault injection), and a Gaudi2 on the PCI bus that
//! implements it too ([`pci::PciGaudi2`]: BARs, registers, the DMA API; with
//! `CONFIG_PCI`).

pub(crate) mod backend;
pub(crate) mod cpucp;
pub(crate) mod engines;
#[cfg(CONFIG_PCI)]
pub(crate) mod pci;
pub(crate) mod sim;
