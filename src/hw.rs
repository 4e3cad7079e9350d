// SPDX-License-Identifier: GPL-2.0

//! The hardware (floor 3): what the layers above need of a Gaudi
//! ([`backend::Backend`], sealed) and the simulated Gaudi2 that implements
//! it ([`sim::SimGaudi2`]: sparse DRAM, register blocks, PTE writes, MMU
//! cache invalidations, fault injection).

pub(crate) mod backend;
pub(crate) mod sim;
