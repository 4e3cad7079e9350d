// SPDX-License-Identifier: GPL-2.0

//! Where hops live: the device-wide hop pools of the two MMUs and the
//! [`HopMemory`] each page table writes through, the DMMU/PMMU difference as
//! two small impls of one trait:
//!
//! - [`DrHops`]: device-resident hops (upstream `mmu_v2.c`): slots in the
//!   DRAM page-table area, written through the backend (the DRAM BAR on real
//!   hardware).
//! - [`HrHops`]: host-resident hops (upstream `mmu_v2_hr.c`): host pages
//!   DMA-mapped for the device, which the PMMU walks by bus address.

use crate::{
    asic::{HOP_PTES, HOP_TABLE_SIZE},
    ffi::host_page::HostPage,
    hw::backend::{map_kernel_pages, Backend, HostDma},
};
use kernel::{
    alloc::KVVec,
    prelude::*,
    rbtree::{RBTree, RBTreeNodeReservation},
    sync::{Arc, Mutex}, //
};

/// Where the hops of a tree live.
pub(crate) trait HopMemory {
    /// A free, all-zero hop; returns its physical address.
    fn alloc_hop(&mut self) -> Result<u64>;
    /// Give back a hop whose entries are all zero again.
    fn free_hop(&mut self, phys: u64);
    /// Write one PTE of a hop's real memory (what the hardware reads).
    fn write_pte(&mut self, addr: u64, value: u64) -> Result;
    /// Write consecutive PTEs of one hop, `values[i]` at `addr + 8 i`. On an
    /// error a prefix may have been written: the caller restores it. O(n).
    fn write_ptes(&mut self, addr: u64, values: &[u64]) -> Result {
        for (i, v) in (0u64..).zip(values) {
            self.write_pte(addr + i * 8, *v)?;
        }
        Ok(())
    }
}

/// Zeros for clearing up to a hop's worth of PTEs in one [`HopMemory::write_ptes`].
pub(crate) static ZERO_PTES: [u64; HOP_PTES as usize] = [0; HOP_PTES as usize];

/// The device-resident hop area of a device: `[mmu_pgt_addr, + size)` in DRAM
/// (gaudi2/gaudi2.c:2727-2741). Hop 0 of ASID `a` is slot `a`; the other slots
/// are handed out from a stack.
///
/// # Invariants
///
/// Every slot in `free` is in `max_asid..slots` and all-zero in device memory.
pub(crate) struct DrHopPool {
    base: u64,
    max_asid: u32,
    slots: u32,
    free: KVec<u32>,
}

impl DrHopPool {
    /// The hop area at `base` of `size` bytes, with one hop 0 per ASID.
    pub(crate) fn new(base: u64, size: u64, max_asid: u32) -> Result<Self> {
        let slots = u32::try_from(size / HOP_TABLE_SIZE).map_err(|_| EINVAL)?;
        if slots <= max_asid {
            return Err(EINVAL);
        }
        let mut free = KVec::with_capacity((slots - max_asid) as usize, GFP_KERNEL)?;
        for s in (max_asid..slots).rev() {
            free.push_within_capacity(s).map_err(|_| ENOMEM)?;
        }
        Ok(Self {
            base,
            max_asid,
            slots,
            free,
        })
    }

    /// Physical address of hop 0 of `asid`.
    pub(crate) fn hop0(&self, asid: u32) -> Option<u64> {
        (asid < self.max_asid).then(|| self.base + u64::from(asid) * HOP_TABLE_SIZE)
    }

    /// Hops that can still be allocated.
    pub(crate) fn free_slots(&self) -> usize {
        self.free.len()
    }

    /// Take a slot. O(1).
    pub(crate) fn alloc(&mut self) -> Option<u64> {
        self.free
            .pop()
            .map(|s| self.base + u64::from(s) * HOP_TABLE_SIZE)
    }

    /// Return a slot taken by [`Self::alloc`]. O(1), never allocates (the stack
    /// has room for every slot).
    pub(crate) fn free(&mut self, phys: u64) {
        let slot = phys.checked_sub(self.base).map(|o| o / HOP_TABLE_SIZE);
        match slot.and_then(|s| u32::try_from(s).ok()) {
            Some(s) if (self.max_asid..self.slots).contains(&s) => {
                if self.free.push_within_capacity(s).is_err() {
                    hl_err!("MMU: hop slot freed twice\n");
                }
            }
            _ => hl_err!("MMU: freeing a hop outside the hop area\n"),
        }
    }
}

/// Device-resident hops: slots of a [`DrHopPool`], PTEs written through the
/// backend. The pool is locked only around each slot allocation or release.
pub(crate) struct DrHops<'a> {
    /// The device's hop slots.
    pub(crate) pool: &'a Mutex<DrHopPool>,
    /// The hardware.
    pub(crate) backend: &'a dyn Backend,
}

impl HopMemory for DrHops<'_> {
    fn alloc_hop(&mut self) -> Result<u64> {
        self.pool.lock().alloc().ok_or(ENOMEM)
    }
    fn free_hop(&mut self, phys: u64) {
        self.pool.lock().free(phys)
    }
    fn write_pte(&mut self, addr: u64, value: u64) -> Result {
        self.backend.write_pte(addr, value)
    }
}

/// The host-resident hop tables of a device (upstream `mmu_pgt_pool`, a
/// genalloc pool of DMA-coherent host memory; common/mmu/mmu.c:824-896): the
/// PMMU reads them from host memory by DMA. Each hop is a zeroed host page
/// (charged to the memory cgroup of the process whose MAP needs it),
/// DMA-mapped for the device ([`map_kernel_pages`]); its bus address is the
/// hop's address in the PTEs and in the device's hop-0 registers. The driver
/// writes PTEs into the page, as the CPU does upstream, and the device reads
/// them through its IOMMU.
///
/// # Invariants
///
/// `tables` holds every hop handed out and the hop 0 of each ASID (whose
/// bus addresses are `hop0`), each DMA-mapped by `backend`; `handed_out`
/// counts the former, at most [`HR_HOPS_MAX`].
pub(crate) struct HrHopPool {
    backend: Arc<dyn Backend>,
    hop0: KVec<u64>,
    handed_out: u64,
    tables: RBTree<u64, HrHop>,
}

/// One host-resident hop: its page, and the page's mapping for the device
/// (undone when dropped, before the page goes).
struct HrHop {
    page: HostPage,
    _dma: HostDma,
}

/// Most hops handed out at once (`PMMU_PAGE_TABLES_SIZE`, 256 MiB of tables,
/// gaudi2/gaudi2P.h).
pub(crate) const HR_HOPS_MAX: u64 = (256 << 20) / HOP_TABLE_SIZE;

impl HrHopPool {
    /// A pool on `backend` with one hop 0 per ASID (allocated and mapped
    /// now).
    pub(crate) fn new(backend: Arc<dyn Backend>, max_asid: u32) -> Result<Self> {
        let mut p = Self {
            backend,
            hop0: KVec::with_capacity(max_asid as usize, GFP_KERNEL)?,
            handed_out: 0,
            tables: RBTree::new(),
        };
        for _ in 0..max_asid {
            let at = p.new_table(false)?;
            p.hop0.push_within_capacity(at).map_err(|_| ENOMEM)?;
        }
        Ok(p)
    }

    /// Bus address of hop 0 of `asid`.
    pub(crate) fn hop0(&self, asid: u32) -> Option<u64> {
        self.hop0.get(usize::try_from(asid).ok()?).copied()
    }

    /// Hops currently handed out (besides the hop-0 tables).
    pub(crate) fn in_use(&self) -> u64 {
        self.handed_out
    }

    /// The page of the hop holding the PTE at `addr`, and the PTE's byte
    /// offset in it. O(log n).
    fn locate(&self, addr: u64) -> Result<(&HostPage, usize)> {
        let hop = addr / HOP_TABLE_SIZE * HOP_TABLE_SIZE;
        let off = usize::try_from(addr - hop).map_err(|_| EINVAL)?;
        let t = self.tables.get(&hop).ok_or(EINVAL)?;
        Ok((&t.page, off))
    }

    /// Read one PTE, as the PMMU does by DMA (the page-walk oracle).
    /// O(log n).
    pub(crate) fn read(&self, addr: u64) -> Result<u64> {
        let (page, off) = self.locate(addr)?;
        page.read_u64(off)
    }

    /// A new zeroed table, mapped for the device and kept; its bus address.
    /// `account`: charged to the caller's memory cgroup.
    fn new_table(&mut self, account: bool) -> Result<u64> {
        let (page, flags) = if account {
            (HostPage::new_zeroed_accounted()?, GFP_KERNEL_ACCOUNT)
        } else {
            (HostPage::new_zeroed()?, GFP_KERNEL)
        };
        let node = RBTreeNodeReservation::new(flags)?;
        let mut one = KVVec::with_capacity(1, flags)?;
        one.push_within_capacity(page.clone()).map_err(|_| ENOMEM)?;
        let dma = map_kernel_pages(&self.backend, one)?;
        let bus = dma.get(0).ok_or(EINVAL)?;
        self.tables
            .insert(node.into_node(bus, HrHop { page, _dma: dma }));
        Ok(bus)
    }

    fn alloc(&mut self) -> Result<u64> {
        if self.handed_out >= HR_HOPS_MAX {
            return Err(ENOMEM);
        }
        // Charged to the memory cgroup of the process whose MAP needs it (up
        // to 256 MiB of tables per device).
        let bus = self.new_table(true)?;
        self.handed_out += 1;
        Ok(bus)
    }

    /// Give back a hop: unmapped for the device, then freed. Never
    /// allocates.
    fn release(&mut self, bus: u64) {
        if self.hop0.contains(&bus) || self.tables.remove(&bus).is_none() {
            hl_err!("MMU: bad host-resident hop release\n");
            return;
        }
        self.handed_out = self.handed_out.saturating_sub(1);
    }

    /// Write `values` from the PTE at `addr` on, all in one hop (`EINVAL`,
    /// nothing written, if they do not fit). One tree lookup; O(log n + k).
    fn write(&mut self, addr: u64, values: &[u64]) -> Result {
        let (page, off) = self.locate(addr)?;
        page.write_u64s(off, values)
    }
}

/// Host-resident hops: PTEs written straight into host memory.
pub(crate) struct HrHops<'a> {
    /// The device's host-resident hop tables.
    pub(crate) pool: &'a Mutex<HrHopPool>,
}

impl HopMemory for HrHops<'_> {
    fn alloc_hop(&mut self) -> Result<u64> {
        self.pool.lock().alloc()
    }
    fn free_hop(&mut self, phys: u64) {
        self.pool.lock().release(phys)
    }
    fn write_pte(&mut self, addr: u64, value: u64) -> Result {
        self.pool.lock().write(addr, &[value])
    }
    /// One lock and one lookup for the whole run.
    fn write_ptes(&mut self, addr: u64, values: &[u64]) -> Result {
        self.pool.lock().write(addr, values)
    }
}
