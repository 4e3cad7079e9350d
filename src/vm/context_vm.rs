// SPDX-License-Identifier: GPL-2.0

//! The virtual-memory state of one context (upstream: the VM half of
//! `struct hl_ctx`): its VA ranges ([`super::va_range`]), page tables
//! ([`ContextMmu`]), mappings ([`super::mapping`]), HW-block and
//! timestamp-buffer mmaps, and dma-buf export records, over the device-wide
//! [`DeviceVm`].

use crate::{
    asic::VaSpan,
    mmu::page_table::PageTable,
    vm::{
        device_vm::DeviceVm,
        dmabuf::ExportList,
        hw_block::HwBlockMappings,
        mapping::MappingTable,
        ts_buffer::TsBufferTable,
        va_alloc::VaAllocator,
        va_range::{config, VaRangeType},
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

/// The page tables of one context.
pub(crate) struct ContextMmu {
    /// DMMU tree (DRAM VAs), device resident with a host shadow (upstream v2).
    pub(crate) dmmu: PageTable,
    /// PMMU tree (host VAs), host resident (upstream v2_hr).
    pub(crate) pmmu: PageTable,
}

/// The virtual-memory state of one context: VA ranges, page tables, mappings
/// of device and host memory, mmaps of HW blocks and timestamp buffers.
/// Held by the context and, for debugfs, by the device while the context is
/// open; it holds the device-wide [`DeviceVm`], never the device or the
/// context.
#[pin_data]
pub(crate) struct ContextVm {
    /// The device's memory and MMUs.
    pub(crate) dev: Arc<DeviceVm>,
    /// The context's ASID.
    pub(crate) asid: u32,
    /// Bytes of DRAM this context allocated (`dram_phys_mem`).
    dram_phys_mem: Atomic<u64>,
    /// The context's page tables (one lock per context; upstream: one
    /// device-wide `mmu_lock`).
    #[pin]
    pub(crate) mmu: Mutex<ContextMmu>,
    /// Live mappings keyed by the VA returned to the user (upstream
    /// `mem_hash`), with the userptr index of the pinned host ranges.
    #[pin]
    pub(crate) mappings: Mutex<MappingTable>,
    /// Live mmaps of HW blocks (upstream `hw_block_mem_list`).
    #[pin]
    pub(crate) hw_blocks: Mutex<HwBlockMappings>,
    /// Timestamp buffers (upstream's per-file memory manager).
    #[pin]
    pub(crate) ts_buffers: Mutex<TsBufferTable>,
    /// Live dma-buf exports of this context's mappings.
    #[pin]
    pub(crate) exports: Mutex<ExportList>,
    /// Mappings or hop sets put in quarantine since it was last empty: 0
    /// lets MAP and UNMAP skip [`ContextVm::settle_quarantine`] in O(1).
    pub(crate) quarantined: Atomic<u32>,
    pub(super) spans: [(VaRangeType, VaSpan); 3],
    #[pin]
    pub(super) host: Mutex<VaAllocator>,
    #[pin]
    pub(super) host_huge: Mutex<VaAllocator>,
    #[pin]
    pub(super) dram: Mutex<VaAllocator>,
}

impl ContextVm {
    /// The VM state of a new context with `asid` (`hl_vm_ctx_init` and
    /// `hl_mmu_ctx_init`): the three ranges and an empty DMMU tree whose hop 0
    /// is cleared in device memory.
    pub(crate) fn new(dev: &Arc<DeviceVm>, asid: u32) -> Result<impl PinInit<Self, Error>> {
        let (dmmu, pmmu) = dev.mmu.new_tables(asid)?;
        let asic = &dev.asic;
        let host = VaAllocator::new(&config(asic, VaRangeType::Host));
        let host_huge = VaAllocator::new(&config(asic, VaRangeType::HostHuge));
        let dram = VaAllocator::new(&config(asic, VaRangeType::Dram));
        let spans = [
            (VaRangeType::Host, asic.host_va),
            (VaRangeType::HostHuge, asic.host_huge_va),
            (VaRangeType::Dram, asic.dram_va),
        ];
        let dev = dev.clone();
        Ok(try_pin_init!(Self {
            dev,
            asid,
            dram_phys_mem: Atomic::new(0),
            mmu <- new_mutex!(ContextMmu { dmmu, pmmu }),
            mappings <- new_mutex!(MappingTable::new()),
            hw_blocks <- new_mutex!(HwBlockMappings::new()),
            ts_buffers <- new_mutex!(TsBufferTable::new()),
            exports <- new_mutex!(ExportList::new()),
            quarantined: Atomic::new(0),
            spans,
            host <- new_mutex!(host?),
            host_huge <- new_mutex!(host_huge?),
            dram <- new_mutex!(dram?),
        }))
    }

    /// Bytes of DRAM this context allocated. O(1).
    pub(crate) fn dram_phys_mem(&self) -> u64 {
        self.dram_phys_mem.load(Relaxed)
    }

    /// Add `delta` bytes (negative: subtract) to the context's and the
    /// device's DRAM usage. O(1).
    pub(crate) fn account_dram(&self, delta: i64) {
        self.dram_phys_mem.fetch_add(delta as u64, Relaxed);
        self.dev.account_dram(delta);
    }
}
