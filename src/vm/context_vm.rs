// SPDX-License-Identifier: GPL-2.0

//! The virtual-memory state of one context (upstream: the VM half of
//! `struct hl_ctx`): its VA ranges ([`super::va_range`]), page tables
//! ([`ContextMmu`], from `mmu/`), mappings ([`super::mapping`]), HW-block and
//! timestamp-buffer mmaps, command buffers, and dma-buf export records, over the device-wide
//! [`DeviceVm`].

use crate::{
    mmu::context_mmu::ContextMmu,
    vm::{
        command_buffer::CbTable,
        device_vm::DeviceVm,
        export_list::ExportList,
        hw_block::HwBlockMappings,
        mapping_table::MappingTable,
        ts_buffer::TsBufferTable,
        va_alloc::{VaAllocError, VaAllocator, VaRequest},
        va_quarantine::VaQuarantine,
        va_range::{VaRangeType, VaRanges},
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
    /// Command buffers (upstream's per-file memory manager).
    #[pin]
    pub(crate) cbs: Mutex<CbTable>,
    /// Live dma-buf exports of this context's mappings.
    #[pin]
    pub(crate) exports: Mutex<ExportList>,
    /// Mappings or hop sets put in quarantine since it was last empty: 0
    /// lets MAP and UNMAP skip [`ContextVm::settle_quarantine`] in O(1).
    pub(crate) quarantined: Atomic<u32>,
    /// The three VA ranges.
    #[pin]
    pub(crate) ranges: VaRanges,
    /// VA blocks unmapped while CSs that could reach them were in flight,
    /// and those CSs' progress (see [`super::va_quarantine`]).
    #[pin]
    pub(crate) va_quarantine: VaQuarantine,
}

impl ContextVm {
    /// The VM state of a new context with `asid` (`hl_vm_ctx_init` and
    /// `hl_mmu_ctx_init`): the three ranges and an empty DMMU tree whose hop 0
    /// is cleared in device memory.
    pub(crate) fn new(dev: &Arc<DeviceVm>, asid: u32) -> Result<impl PinInit<Self, Error>> {
        let mmu = ContextMmu::new(&dev.mmu, asid)?;
        let ranges = VaRanges::new(&dev.asic)?;
        let dev = dev.clone();
        Ok(try_pin_init!(Self {
            dev,
            asid,
            dram_phys_mem: Atomic::new(0),
            mmu <- new_mutex!(mmu),
            mappings <- new_mutex!(MappingTable::new()),
            hw_blocks <- new_mutex!(HwBlockMappings::new()),
            ts_buffers <- new_mutex!(TsBufferTable::new()),
            cbs <- new_mutex!(CbTable::new()),
            exports <- new_mutex!(ExportList::new()),
            quarantined: Atomic::new(0),
            ranges <- ranges,
            va_quarantine <- VaQuarantine::new(),
        }))
    }

    /// The allocator of one range (see [`VaRanges::range`]).
    pub(crate) fn range(&self, kind: VaRangeType) -> &Mutex<VaAllocator> {
        self.ranges.range(kind)
    }

    /// The range that holds all of `[addr, addr + size)` (see
    /// [`VaRanges::range_type`]). O(1).
    pub(crate) fn range_type(&self, addr: u64, size: u64) -> Option<VaRangeType> {
        self.ranges.range_type(addr, size)
    }

    /// Allocate VA in range `kind` (see [`VaRanges::alloc`]), after giving
    /// back the held VA blocks whose CSs have ended (a hint at one of them
    /// can then be honoured). O(log n), plus O(1) amortised per block
    /// given back.
    pub(crate) fn alloc(&self, kind: VaRangeType, req: VaRequest) -> Result<u64, VaAllocError> {
        self.va_quarantine.reap(&self.ranges);
        self.ranges.alloc(kind, req)
    }

    /// Give VA back (see [`VaRanges::free`]). O(log n).
    pub(crate) fn free(&self, kind: VaRangeType, start: u64, size: u64) -> Result {
        self.ranges.free(kind, start, size)
    }

    /// Drop every VA allocation (see [`VaRanges::clear`]).
    pub(crate) fn clear(&self) -> usize {
        self.ranges.clear()
    }

    /// Whether every range is one free block again.
    pub(crate) fn is_pristine(&self) -> bool {
        self.ranges.is_pristine()
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
