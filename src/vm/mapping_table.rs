// SPDX-License-Identifier: GPL-2.0

//! The mapping table of one context (upstream `mem_hash` with its
//! `hl_vm_hash_node`s, and the userptr list): what each mapping maps
//! ([`Backing`], held until an invalidation covers it), the live mappings
//! by VA with the userptr index, and the quarantine of mappings whose
//! invalidation failed. The MAP/UNMAP paths that fill and empty it are in
//! [`super::mapping`].

use crate::{
    ffi::pin::PinnedUserPages,
    hw::backend::HostDma,
    mmu::{
        context_mmu::MappedPages,
        invalidate::{Held, Invalidated, MmuArea},
    },
    vm::{
        command_buffer::CommandBuffer,
        device_vm::DeviceVm,
        page_pack::PhysPgPack,
        spares::Spares,
        userptr::{UserptrIndex, UserptrReservation},
        va_quarantine::VaQuarantine,
        va_range::{VaRangeType, VaRanges},
    },
};
use kernel::{
    prelude::*,
    rbtree::{RBTree, RBTreeNodeReservation},
    sync::{Arc, Mutex}, //
};

/// What a mapping maps.
pub(crate) enum Backing {
    /// Device DRAM of a handle.
    Dram {
        /// The handle that was mapped.
        handle: u32,
        /// Its pages.
        pack: Arc<PhysPgPack>,
    },
    /// Pinned host memory (`HL_MEM_USERPTR`); unpinned when dropped.
    Host {
        /// The pinned pages.
        pinned: PinnedUserPages,
        /// Device address of every mapped page, from the backend (8 bytes per
        /// page; upstream keeps a DMA-mapped sg_table); unmapped when dropped.
        dma: HostDma,
        /// MMU page size used: 4 KiB, or 2 MiB for huge pages.
        page_size: u64,
    },
    /// A command buffer (`HL_CB_FLAGS_MAP`), in 4 KiB pages; kept alive by
    /// the mapping until an invalidation covering its unmap succeeded.
    Cb {
        /// The CB: held, not read, so that its pages outlive the mapping.
        #[allow(dead_code)]
        cb: Arc<CommandBuffer>,
        /// Device address of every page of the CB.
        dma: HostDma,
    },
}

impl Backing {
    /// Page size and number of pages as mapped.
    pub(super) fn geometry(&self) -> (u64, u64) {
        match self {
            Self::Dram { pack, .. } => (pack.page_size, pack.npages),
            Self::Host { dma, page_size, .. } => (*page_size, dma.len() as u64),
            Self::Cb { dma, .. } => (kernel::page::PAGE_SIZE as u64, dma.len() as u64),
        }
    }

    /// Physical address of mapped page `i`.
    pub(super) fn page_addr(&self, i: u64) -> Option<u64> {
        match self {
            Self::Dram { pack, .. } => pack.page_addr(i),
            Self::Host { dma, .. } | Self::Cb { dma, .. } => dma.get(usize::try_from(i).ok()?),
        }
    }
}

impl MappedPages for Backing {
    fn geometry(&self) -> (u64, u64) {
        Backing::geometry(self)
    }

    fn page_addr(&self, i: u64) -> Option<u64> {
        Backing::page_addr(self, i)
    }
}

/// One mapping (upstream `struct hl_vm_hash_node`), keyed by the VA returned
/// to the user (the range VA plus a host buffer's in-page offset).
pub(crate) struct Mapping {
    /// What is mapped; given back only by [`Mapping::release`].
    pub(super) held: Held<Backing>,
    /// The VA range the mapping lives in.
    pub(crate) kind: VaRangeType,
    /// First VA of the mapping in its range (page aligned).
    pub(crate) va: u64,
    /// Bytes of VA.
    pub(crate) size: u64,
    /// Live dma-bufs exported from this mapping; UNMAP is refused while > 0.
    pub(crate) export_cnt: u32,
    /// Quarantined with PTEs that could not be cleared: not releasable until a
    /// retry or teardown (which unlinks every hop) clears them.
    pub(super) ptes_left: bool,
}

impl Mapping {
    pub(super) fn new(backing: Backing, kind: VaRangeType, asid: u32, va: u64, size: u64) -> Self {
        Self {
            held: Held::new(backing, MmuArea::new(kind.mmu(), asid, va, size)),
            kind,
            va,
            size,
            export_cnt: 0,
            ptes_left: false,
        }
    }

    /// What is mapped (always `Some` while the mapping exists).
    pub(crate) fn backing(&self) -> Option<&Backing> {
        self.held.get()
    }

    /// Whether `proof` lets [`Self::release`] give it back.
    pub(super) fn releasable(&self, proof: &Invalidated) -> bool {
        !self.ptes_left && proof.covers(&self.area())
    }

    /// The PTEs that pointed at the backing.
    pub(super) fn area(&self) -> MmuArea {
        self.held.area()
    }

    /// Give back what the mapping held and its VA, if `proof` covers it and
    /// its PTEs are gone (`false` and nothing changed otherwise); the
    /// mapping is left empty, so its tree node can be kept for another
    /// mapping. A DRAM handle's mapping count goes down, a host buffer is
    /// unpinned, and the VA goes back to `ranges`, or is held in `held`
    /// until every CS up to sequence `until` has ended (see
    /// [`super::va_quarantine`]). O(log n).
    pub(super) fn release(
        &mut self,
        (ranges, held): (&VaRanges, &VaQuarantine),
        dev: &DeviceVm,
        proof: &Invalidated,
        until: Option<u64>,
    ) -> bool {
        if self.ptes_left {
            return false;
        }
        let Some(backing) = self.held.take(proof) else {
            return false;
        };
        // The VA of a mapping is an allocation until here.
        held.give_back(ranges, (self.kind, self.va, self.size), until);
        if let Backing::Dram { handle, pack } = &backing {
            release_mapping_count(dev, *handle, pack);
        }
        // A host buffer is unpinned here.
        drop(backing);
        true
    }
}

pub(super) struct OneMapping {
    pub(super) tree: RBTree<u64, Mapping>,
    pub(super) key: u64,
}

impl OneMapping {
    pub(super) fn get(&self) -> Option<&Mapping> {
        self.tree.get(&self.key)
    }

    pub(super) fn get_mut(&mut self) -> Option<&mut Mapping> {
        self.tree.get_mut(&self.key)
    }
}

/// The live mappings of a context and its userptr index, under one lock
/// (`ContextVm::mappings`; upstream has `mem_hash_lock` for the one and
/// `userptr_lock` for the other), and the quarantine.
///
/// # Invariants
///
/// For every host mapping in `by_va` the index holds one pin of its
/// `(addr, size)`, and the index holds nothing else: a host mapping and its
/// index entry are published and withdrawn in one critical section, so no
/// reader or UNMAP ever sees one without the other. `quarantine` holds
/// mappings whose PTEs were cleared (or could not be) but whose invalidation
/// failed; no user call can name them.
pub(crate) struct MappingTable {
    pub(super) by_va: RBTree<u64, Mapping>,
    pub(super) userptrs: UserptrIndex,
    pub(super) quarantine: RBTree<u64, Mapping>,
    /// Nodes of released mappings, for the next MAPs.
    spare: Spares<RBTreeNodeReservation<u64, Mapping>>,
}

/// The tree nodes publishing one mapping needs, reserved before the lock.
pub(crate) struct MappingReservation {
    pub(super) node: RBTreeNodeReservation<u64, Mapping>,
    pub(super) pin_node: Option<UserptrReservation>,
}

impl MappingReservation {
    /// Reserve the nodes for a mapping (with `host`: and its index entry):
    /// `table`'s spares if it has them (its lock taken once), allocated
    /// otherwise (without the lock).
    pub(crate) fn new(host: bool, table: &Mutex<MappingTable>) -> Result<Self> {
        let (node, pin) = {
            let mut t = table.lock();
            let pin = if host { t.userptrs.take_spare() } else { None };
            (t.spare.take(), pin)
        };
        Ok(Self {
            node: match node {
                Some(n) => n,
                None => RBTreeNodeReservation::new(GFP_KERNEL)?,
            },
            pin_node: match (host, pin) {
                (false, _) => None,
                (true, Some(p)) => Some(p),
                (true, None) => Some(RBTreeNodeReservation::new(GFP_KERNEL)?),
            },
        })
    }
}

impl MappingTable {
    /// No mappings.
    pub(crate) fn new() -> Self {
        Self {
            by_va: RBTree::new(),
            userptrs: UserptrIndex::new(),
            quarantine: RBTree::new(),
            spare: Spares::new(),
        }
    }

    /// Keep the node of a released mapping for a later MAP. O(1).
    pub(super) fn keep_node(&mut self, node: RBTreeNodeReservation<u64, Mapping>) {
        self.spare.put(node);
    }

    /// Publish the mapping in flight `one`, with its index entry when it maps
    /// host memory. `EINVAL` (and `one` back) when a host mapping comes
    /// without the index node. O(log n), no allocation.
    pub(super) fn publish(
        &mut self,
        mut one: OneMapping,
        pin_node: Option<UserptrReservation>,
    ) -> Result<(), OneMapping> {
        let pin = match one.get().and_then(Mapping::backing) {
            Some(Backing::Host { pinned, .. }) => Some((pinned.addr, pinned.size)),
            Some(Backing::Dram { .. } | Backing::Cb { .. }) => None,
            None => return Err(one),
        };
        let node = match (pin, pin_node) {
            (Some((addr, size)), Some(res)) => {
                let Some(node) = one.tree.remove_node(&one.key) else {
                    return Err(one);
                };
                self.userptrs.insert(addr, size, res);
                node
            }
            (Some(_), None) => return Err(one),
            (None, _) => match one.tree.remove_node(&one.key) {
                Some(node) => node,
                None => return Err(one),
            },
        };
        self.by_va.insert(node);
        Ok(())
    }

    /// Withdraw the mapping of `user_va` and its index entry, if `check`
    /// accepts it. `EINVAL` for an unknown VA. O(log n), no allocation.
    pub(super) fn take_if(
        &mut self,
        user_va: u64,
        check: impl FnOnce(&Mapping) -> Result,
    ) -> Result<OneMapping> {
        check(self.by_va.get(&user_va).ok_or(EINVAL)?)?;
        let node = self.by_va.remove_node(&user_va).ok_or(EINVAL)?;
        let mut one = OneMapping {
            tree: RBTree::new(),
            key: user_va,
        };
        one.tree.insert(node);
        if let Some(m) = one.get() {
            self.forget_pin(m);
        }
        Ok(one)
    }

    pub(super) fn forget_pin(&mut self, m: &Mapping) {
        if let Some(Backing::Host { pinned, .. }) = m.backing() {
            if !self.userptrs.remove(pinned.addr, pinned.size) {
                hl_err!(
                    "userptr index: {:#x}+{:#x} was not indexed\n",
                    pinned.addr,
                    pinned.size
                );
            }
        }
    }

    /// Move every mapping of `kept` (back) to the quarantine; returns how
    /// many. O(k log n), no allocation.
    pub(super) fn requarantine(&mut self, mut kept: RBTree<u64, Mapping>) -> u32 {
        let mut n = 0;
        let mut cursor = kept.cursor_front_mut();
        while let Some(c) = cursor {
            let (next, node) = c.remove_current();
            self.quarantine.insert(node);
            n += 1;
            cursor = next;
        }
        n
    }

    /// Move an unmapped mapping to the quarantine. O(log n), no allocation.
    pub(super) fn quarantine(&mut self, mut one: OneMapping) {
        if let Some(node) = one.tree.remove_node(&one.key) {
            self.quarantine.insert(node);
        }
    }

    /// Every live mapping in VA order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&u64, &Mapping)> {
        self.by_va.iter()
    }

    /// The mapping published under `user_va`, mutable (export counts). O(log n).
    pub(crate) fn get_mut(&mut self, user_va: u64) -> Option<&mut Mapping> {
        self.by_va.get_mut(&user_va)
    }

    /// The userptr index (`hl_userptr_is_pinned`).
    pub(crate) fn userptrs(&self) -> &UserptrIndex {
        &self.userptrs
    }

    /// Number of live mappings. O(n): debugfs and tests.
    pub(crate) fn len(&self) -> usize {
        self.by_va.iter().count()
    }

    /// Number of quarantined mappings. O(n): debugfs and tests.
    pub(crate) fn quarantined_len(&self) -> usize {
        self.quarantine.iter().count()
    }
}

/// Drop one mapping count of `handle`, if it still names `pack` (teardown may
/// have freed the handle, and its id may have been reused since).
pub(super) fn release_mapping_count(dev: &DeviceVm, handle: u32, pack: &Arc<PhysPgPack>) {
    if let Some(e) = dev.handles.lock().get_mut(handle) {
        if Arc::ptr_eq(&e.pack, pack) {
            e.mapping_cnt = e.mapping_cnt.saturating_sub(1);
        }
    }
}
