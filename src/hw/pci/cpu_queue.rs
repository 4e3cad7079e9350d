// SPDX-License-Identifier: GPL-2.0

//! The CPU-CP channel of the PCI Gaudi2 ([`CpuCp`]).
//!
//! Not driven yet: the CPU PQ (`gaudi2_init_cpu_queues`, coherent DMA
//! memory for the queues and the packets) is not set up at probe, so every
//! packet fails with `EOPNOTSUPP`, and the INFO ops answered by CPU-CP
//! with it.

use super::PciGaudi2;
use crate::asic::cpucp_if::CpucpPacket;
use crate::hw::cpucp::CpuCp;
use kernel::prelude::*;

impl CpuCp for PciGaudi2 {
    fn send(&self, _pkt: CpucpPacket, _buf: Option<&mut [u8]>, _timeout_us: u32) -> Result<u64> {
        Err(EOPNOTSUPP)
    }
}
