// SPDX-License-Identifier: GPL-2.0

//! Where hops live: the device-wide hop pools of the two MMUs and the
//! [`HopMemory`] each page table writes through, the DMMU/PMMU difference as
//! two small impls of one trait:
//!
//! - [`DrHops`]: device-resident hops (upstream `mmu_v2.c`): slots in the
//!   DRAM page-table area, written through the backend (the DRAM BAR on real
//!   hardware).
//! - [`HrHops`]: host-resident hops (upstream `mmu_v2_hr.c`): host memory the
//!   PMMU walks.

use crate::{
    asic::{HOP_PTES, HOP_TABLE_SIZE},
    hw::backend::Backend,
};
use kernel::{
    prelude::*,
    rbtree::{RBTree, RBTreeNodeReservation},
    sync::Mutex, //
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
/// PMMU reads them from host memory. On the simulation a hop's "DMA address"
/// is `base + slot x 4 KiB` and its memory a host allocation, looked up by
/// address when the MMU (or the oracle) walks.
///
/// # Invariants
///
/// Every slot below `next` is either in `free` or a key of `tables`; the
/// tables of free slots do not exist (they are allocated zeroed on reuse).
pub(crate) struct HrHopPool {
    base: u64,
    max_asid: u32,
    slots: u64,
    next: u64,
    free: KVec<u64>,
    tables: RBTree<u64, KBox<[u64; HOP_PTES as usize]>>,
}

/// Where the simulated host-resident hops are addressed (an arbitrary,
/// 4 KiB-aligned bus address outside device DRAM).
pub(crate) const HR_HOPS_BASE: u64 = 0x10_0000_0000;
/// Size of the host-resident page-table area (`PMMU_PAGE_TABLES_SIZE`, 256 MiB,
/// gaudi2/gaudi2P.h).
pub(crate) const HR_HOPS_SIZE: u64 = 256 << 20;

impl HrHopPool {
    /// A pool with one hop 0 per ASID (allocated now) and room for the rest.
    pub(crate) fn new(max_asid: u32) -> Result<Self> {
        let mut p = Self {
            base: HR_HOPS_BASE,
            max_asid,
            slots: HR_HOPS_SIZE / HOP_TABLE_SIZE,
            next: u64::from(max_asid),
            free: KVec::new(),
            tables: RBTree::new(),
        };
        for a in 0..u64::from(max_asid) {
            let t = KBox::new([0u64; HOP_PTES as usize], GFP_KERNEL)?;
            p.tables.insert(
                RBTreeNodeReservation::new(GFP_KERNEL)?.into_node(p.base + a * HOP_TABLE_SIZE, t),
            );
        }
        Ok(p)
    }

    /// Address of hop 0 of `asid`.
    pub(crate) fn hop0(&self, asid: u32) -> Option<u64> {
        (asid < self.max_asid).then(|| self.base + u64::from(asid) * HOP_TABLE_SIZE)
    }

    /// Hops currently handed out (besides the hop-0 tables).
    pub(crate) fn in_use(&self) -> u64 {
        self.next - u64::from(self.max_asid) - self.free.len() as u64
    }

    /// Read one PTE, as the PMMU does by DMA. O(log n).
    pub(crate) fn read(&self, addr: u64) -> Result<u64> {
        let off = addr.checked_sub(self.base).ok_or(EINVAL)?;
        let hop = self.base + off / HOP_TABLE_SIZE * HOP_TABLE_SIZE;
        let idx = usize::try_from((off % HOP_TABLE_SIZE) / 8).map_err(|_| EINVAL)?;
        self.tables
            .get(&hop)
            .and_then(|t| t.get(idx).copied())
            .ok_or(EINVAL)
    }

    fn alloc(&mut self) -> Result<u64> {
        // Charged to the memory cgroup of the process whose MAP needs it (up
        // to 256 MiB of tables per device).
        let table = KBox::new([0u64; HOP_PTES as usize], GFP_KERNEL_ACCOUNT)?;
        let node = RBTreeNodeReservation::new(GFP_KERNEL_ACCOUNT)?;
        // Room for every slot ever handed out, so that releasing never allocates.
        let handed_out =
            usize::try_from(self.next - u64::from(self.max_asid)).map_err(|_| ENOMEM)?;
        self.free
            .reserve((handed_out + 1).saturating_sub(self.free.len()), GFP_KERNEL)?;
        let slot = match self.free.pop() {
            Some(s) => s,
            None if self.next < self.slots => {
                self.next += 1;
                self.next - 1
            }
            None => return Err(ENOMEM),
        };
        let phys = self.base + slot * HOP_TABLE_SIZE;
        self.tables.insert(node.into_node(phys, table));
        Ok(phys)
    }

    fn release(&mut self, phys: u64) {
        let slot = (phys - self.base) / HOP_TABLE_SIZE;
        if slot < u64::from(self.max_asid) || self.tables.remove(&phys).is_none() {
            hl_err!("MMU: bad host-resident hop release\n");
            return;
        }
        if self.free.push_within_capacity(slot).is_err() {
            hl_err!("MMU: host-resident hop slot list full\n");
        }
    }

    /// Write `values` from the PTE at `addr` on, all in one hop (`EINVAL`,
    /// nothing written, if they do not fit). One tree lookup; O(log n + k).
    fn write(&mut self, addr: u64, values: &[u64]) -> Result {
        let off = addr.checked_sub(self.base).ok_or(EINVAL)?;
        let hop = self.base + off / HOP_TABLE_SIZE * HOP_TABLE_SIZE;
        let idx = usize::try_from((off % HOP_TABLE_SIZE) / 8).map_err(|_| EINVAL)?;
        let end = idx.checked_add(values.len()).ok_or(EINVAL)?;
        let slots = self
            .tables
            .get_mut(&hop)
            .and_then(|t| t.get_mut(idx..end))
            .ok_or(EINVAL)?;
        // Same lengths by construction; a zip has no panic path.
        for (slot, v) in slots.iter_mut().zip(values) {
            *slot = *v;
        }
        Ok(())
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
