// SPDX-License-Identifier: GPL-2.0

//! What the memory code needs from the hardware.
//!
//! The memory subsystem (contexts, page packs, the MMU code) talks to a device
//! only through [`Backend`]. The simulated Gaudi2 ([`crate::hw::sim::SimGaudi2`])
//! implements it, and so does a Gaudi2 on the PCI bus (`crate::hw::pci::PciGaudi2`,
//! with `CONFIG_PCI`: PTE writes through the DRAM BAR, MMU cache invalidation
//! through the STLB/HMMU registers, the DMA API), without touching the memory
//! code.
//!
//! # dma-buf importers
//!
//! What an importer of an EXPORT_DMABUF_FD buffer is given is the backend's
//! to decide, because it depends on what device memory is:
//!
//! - **Host pages** (the simulation, whose DRAM is host memory): every
//!   importer, peer to peer or not, gets the host pages behind the exported
//!   range, populated (zeroed if never written) and held while it has them
//!   mapped, in an sg table with `sg_page` set and DMA-mapped for its device
//!   with `dma_map_sgtable` ([`ImporterSgt::map_host_pages`]); CPU mappings of
//!   the export fault in the same pages ([`Backend::dram_host_page`]).
//! - **Peer to peer** (device DRAM behind a BAR: the PCI backend,
//!   `crate::hw::pci::PciGaudi2`), as upstream `hl_dmabuf_attach`/`hl_map_dmabuf`:
//!   `peer_to_peer` asks `pci_p2pdma_distance(pdev, importer, true)`;
//!   `map_for_importer` refuses a non-P2P attachment (`EPERM`,
//!   [`Importer::peer2peer`]) and otherwise maps each DRAM piece's BAR
//!   window with `dma_map_resource` for the importer (split at its segment
//!   limit, [`Importer::max_seg_size`]) into an `ImporterSgt` made by
//!   [`ImporterSgt::map_resources`], whose drop undoes them with
//!   `dma_unmap_resource`; `dram_host_page` answers `EOPNOTSUPP` (device
//!   memory has no `struct page`), so CPU mappings of an export fault with
//!   `SIGBUS` (refusing its `mmap` instead is left to do).
//!
//! Either way the only sg table an importer can be handed is an
//! [`ImporterSgt`], and the only way to make one is a DMA-mapping call for
//! that importer's device: an address that was not mapped for the importer
//! cannot reach it.

use crate::ffi::{
    dma::{DmaDirection, Importer, ImporterSgt},
    host_page::HostPage,
    pin::{PinnedUserPages, INLINE_PAGES},
};
use crate::small_array::SmallArray;
use kernel::{alloc::KVVec, prelude::*, sync::Arc};

/// The device address of each page of a run: inline for a small run, so a
/// MAP of a small host buffer allocates no array for them.
pub(crate) type BusAddrs = SmallArray<u64, INLINE_PAGES>;

/// Host pages mapped for a device's DMA: the device address of each page of
/// a run, unmapped ([`Backend::dma_unmap_host`]) when dropped.
///
/// # Invariants
///
/// `addrs` came from `backend.dma_map_host(.., page_size, ..)` and is unmapped
/// exactly once, by `Drop`.
pub(crate) struct HostDma {
    backend: Arc<dyn Backend>,
    addrs: BusAddrs,
    page_size: u64,
}

impl HostDma {
    /// Number of pages. O(1).
    pub(crate) fn len(&self) -> usize {
        self.addrs.len()
    }

    /// The device address of page `i`. O(1).
    pub(crate) fn get(&self, i: usize) -> Option<u64> {
        self.addrs.at(i)
    }
}

impl Drop for HostDma {
    fn drop(&mut self) {
        self.backend.dma_unmap_host(&self.addrs, self.page_size);
    }
}

/// Map the pinned buffer `pinned` in pages of `page_size` bytes for
/// `backend`'s DMA; see [`Backend::dma_map_host`].
pub(crate) fn map_host_pages(
    backend: &Arc<dyn Backend>,
    pinned: &PinnedUserPages,
    page_size: u64,
) -> Result<HostDma> {
    let addrs = backend.dma_map_host(pinned, page_size)?;
    // INVARIANT: just mapped by `backend`.
    Ok(HostDma {
        backend: backend.clone(),
        addrs,
        page_size,
    })
}

/// Map kernel pages (4 KiB each) for `backend`'s DMA; see
/// [`Backend::dma_map_kernel`]. O(pages).
pub(crate) fn map_kernel_pages(
    backend: &Arc<dyn Backend>,
    pages: KVVec<HostPage>,
) -> Result<HostDma> {
    let addrs = backend.dma_map_kernel(pages)?;
    // INVARIANT: just mapped by `backend`.
    Ok(HostDma {
        backend: backend.clone(),
        addrs,
        page_size: kernel::page::PAGE_SIZE as u64,
    })
}

/// Which MMU an invalidation is for (upstream `MMU_OP_USERPTR` / `MMU_OP_PHYS_PACK`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum MmuKind {
    /// The PMMU, which translates host-memory VAs.
    Host,
    /// The DMMU (HMMUs), which translates DRAM VAs.
    Dram,
}

/// The state a device reports (`enum hl_device_status`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum DeviceStatus {
    /// Ready for work.
    Operational,
    /// A hard or soft reset is in progress.
    InReset,
    /// The device failed and is disabled.
    Malfunction,
    /// A reset is required before the device can be used.
    NeedsReset,
    /// The device is still being initialised.
    InDeviceCreation,
    /// A compute reset after the last user closed the device.
    InResetAfterDeviceRelease,
}

impl DeviceStatus {
    /// The uAPI value (`HL_DEVICE_STATUS_*`).
    pub(crate) fn uapi(self) -> u32 {
        use crate::uapi::*;
        match self {
            Self::Operational => HL_DEVICE_STATUS_OPERATIONAL,
            Self::InReset => HL_DEVICE_STATUS_IN_RESET,
            Self::Malfunction => HL_DEVICE_STATUS_MALFUNCTION,
            Self::NeedsReset => HL_DEVICE_STATUS_NEEDS_RESET,
            Self::InDeviceCreation => HL_DEVICE_STATUS_IN_DEVICE_CREATION,
            Self::InResetAfterDeviceRelease => HL_DEVICE_STATUS_IN_RESET_AFTER_DEVICE_RELEASE,
        }
    }

    /// Whether ioctls other than the always-answered INFO ops may run
    /// (`hl_device_operational`, common/device.c:397-417): device creation
    /// counts as operational.
    pub(crate) fn is_operational(self) -> bool {
        matches!(self, Self::Operational | Self::InDeviceCreation)
    }

    /// The name upstream's sysfs `status` attribute prints (common/device.c).
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Operational => "operational",
            Self::InReset => "in reset",
            Self::Malfunction => "disabled",
            Self::NeedsReset => "needs reset",
            Self::InDeviceCreation => "in device creation",
            Self::InResetAfterDeviceRelease => "in reset after device release",
        }
    }
}

mod private {
    /// Seals [`super::Backend`]: only this crate's hardware implements it.
    pub(crate) trait Sealed {}
}
pub(crate) use private::Sealed;

/// The hardware operations the layers above need of a device: everything
/// production code asks of it goes through here (sealed: implemented by the
/// simulated Gaudi2 and the PCI Gaudi2).
pub(crate) trait Backend: Sealed + Send + Sync {
    /// Write one 64-bit page-table entry at device-DRAM address `addr`
    /// (device-resident page tables; upstream `write_pte` through the DRAM BAR).
    fn write_pte(&self, addr: u64, value: u64) -> Result;

    /// Read one 64-bit page-table entry from device DRAM (what the MMU walks).
    fn read_pte(&self, addr: u64) -> Result<u64>;

    /// Tell the MMU of `kind` where the hop-0 table of `asid` is (upstream
    /// `gaudi2_mmu_update_asid_hop0_addr`: the STLB's `ASID` and
    /// `HOP0_PA43_12`/`HOP0_PA63_44` registers), at device init: a device-DRAM
    /// address for the DMMU, the bus address of a host page the device can
    /// reach ([`Backend::dma_map_kernel`]) for the PMMU. `EINVAL` for an
    /// address that is not 4 KiB aligned or an ASID out of range.
    fn set_hop0(&self, kind: MmuKind, asid: u32, addr: u64) -> Result;

    /// Invalidate the MMU caches of `asid` for `[va, va + size)`. On
    /// success no translation of the range that the MMU cached before the
    /// call is used any more, and no engine access that used one is still
    /// in flight (the call waits for them).
    fn invalidate_range(&self, kind: MmuKind, asid: u32, va: u64, size: u64) -> Result;

    /// Invalidate all MMU caches of one kind, for every ASID (context
    /// teardown); waits for engine accesses as [`Backend::invalidate_range`].
    fn invalidate_all(&self, kind: MmuKind) -> Result;

    /// The hardware's health: `Operational` unless the device failed
    /// under the driver (a PCI device whose registers read all ones, or
    /// unbound). The device status users see is the driver's
    /// (`DeviceCs::status`), which this only overrides when not operational.
    fn status(&self) -> DeviceStatus;

    /// Whether every engine is idle.
    fn is_idle(&self) -> bool;

    /// Map the pinned host buffer `pinned` for the device's DMA in pages of
    /// `page_size` bytes (4 KiB, or 2 MiB when each 2 MiB piece is physically
    /// contiguous; upstream `dma_map_host_va`: `dma_map_sgtable`). Returns
    /// the device address of each page: every page is contiguous for the
    /// device, the buffer need not be. Undone by [`Backend::dma_unmap_host`]
    /// (use [`map_host_pages`], whose result undoes it when dropped).
    /// O(pages), yielding once per 512.
    fn dma_map_host(&self, pinned: &PinnedUserPages, page_size: u64) -> Result<BusAddrs>;

    /// Map kernel pages (a command buffer's, host-resident hop tables) for
    /// the device's DMA: their device addresses, in order. The device keeps
    /// the pages alive while they are mapped. Undone by
    /// [`Backend::dma_unmap_host`] with 4 KiB pages.
    fn dma_map_kernel(&self, pages: KVVec<HostPage>) -> Result<BusAddrs>;

    /// Undo [`Backend::dma_map_host`] of `addrs` (pages of `page_size`).
    fn dma_unmap_host(&self, addrs: &[u64], page_size: u64);

    /// Whether `importer` reaches device memory peer to peer (upstream:
    /// `pci_p2pdma_distance(pdev, importer, true) >= 0`); when not, its
    /// attachment is marked non-P2P at attach time. See the module
    /// documentation.
    fn peer_to_peer(&self, importer: &Importer<'_>) -> bool;

    /// The sg table `importer` gets for the DRAM `pieces` of an export, mapped
    /// for its device in direction `dir`. See the module documentation.
    fn map_for_importer(
        &self,
        importer: &Importer<'_>,
        dir: DmaDirection,
        pieces: DramPieces<'_>,
    ) -> Result<ImporterSgt>;

    /// The host page behind the 4 KiB of DRAM at `pa` (page aligned),
    /// allocated zeroed if that DRAM was never written: a new reference to it
    /// (CPU mappings of exports). `EINVAL` outside DRAM or unaligned.
    fn dram_host_page(&self, pa: u64) -> Result<HostPage>;

    /// The physical address of the host memory the device reaches at bus
    /// address `bus` (the debugfs page-walk oracle): the IOMMU's
    /// translation on PCI, `bus` itself on the simulated device (its bus
    /// addresses are physical). `None` when nothing is mapped there.
    fn host_phys(&self, bus: u64) -> Option<u64>;

    /// Read device DRAM at `addr` into `buf` (tests and debugfs).
    fn dram_read(&self, addr: u64, buf: &mut [u8]) -> Result;

    /// Write `data` to device DRAM at `addr` (tests and debugfs).
    fn dram_write(&self, addr: u64, data: &[u8]) -> Result;

    /// Scrub device DRAM from `from` (chunk aligned) to its end with the
    /// little-endian pattern `val` (`gaudi2_scrub_device_dram`, a memset of
    /// the user DRAM). O(backed chunks above `from`).
    fn scrub_dram(&self, from: u64, val: u64) -> Result;

    /// The DRAM `[pa, pa + len)` went back to the pool (a page pack's pages):
    /// nothing of what was written there may reach the next user. The
    /// simulation gives the host memory behind it back (it then reads as
    /// never-written DRAM); silicon has nothing to do unless
    /// `memory_scrub` asks for a scrub at release. O(backed chunks in the
    /// range).
    fn release_dram(&self, pa: u64, len: u64);

    /// A compute context opened (`Some`: its opener's memory cgroup) or went
    /// (`None`): host memory the simulation takes for user DRAM from now on
    /// is charged to that cgroup. Nothing to do on silicon. O(1).
    fn set_memory_owner(&self, owner: Option<crate::ffi::memcg::MemCgroup>);

    /// Read device SRAM at `addr` (`[SRAM_BASE_ADDR, + SRAM_SIZE)`) into
    /// `buf`; never-written SRAM reads as zeros. `EINVAL` outside SRAM.
    fn sram_read(&self, addr: u64, buf: &mut [u8]) -> Result;

    /// Write `data` to device SRAM at `addr`. `EINVAL` outside SRAM.
    fn sram_write(&self, addr: u64, data: &[u8]) -> Result;

    /// The compute context is gone: SRAM is zeroed for the next one (as
    /// upstream's reset upon device release leaves it). Returns how many
    /// 4 KiB chunks had been written.
    fn release_sram(&self) -> usize;

    /// Scrub all of SRAM with the little-endian pattern `val`
    /// (`gaudi2_scrub_device_mem`'s SRAM part): it reads as `val` until
    /// written. O(backed chunks).
    fn scrub_sram(&self, val: u64);

    /// The page frame number of user-mappable HW block `id` (`size` bytes,
    /// its exact size) for `remap_pfn_range` (upstream
    /// `gaudi2_hw_block_mmap`: the block's BAR address). O(log blocks).
    fn block_pfn(&self, id: u32, size: u64) -> Result<u64>;

    /// The compute context is gone: its HW blocks' registers are reset (the
    /// next user finds them zeroed, as upstream's reset upon device release).
    /// No user mapping of them may remain. Returns how many were backed.
    fn release_registers(&self) -> usize;
}

/// Device DRAM pages of equal size, by index: what [`DramPieces`] walks
/// (the VM's page packs implement it).
pub(crate) trait DramPages {
    /// Page size in bytes.
    fn page_size(&self) -> u64;
    /// Bytes of all the pages.
    fn total_size(&self) -> u64;
    /// The DRAM address of page `i`, `None` past the end. O(1).
    fn page_addr(&self, i: u64) -> Option<u64>;
}

/// The DRAM pieces of an export: physical address and length of each run
/// of physically consecutive DRAM in `[offset, offset + size)` of a set of
/// pages (whole pages covered by `offset` are skipped, consecutive pages
/// merged). What a backend makes an importer's sg table from. Lazy: no
/// allocation, O(1) per piece.
pub(crate) struct DramPieces<'a> {
    pack: &'a dyn DramPages,
    /// Next pack offset to emit, and bytes left.
    pos: u64,
    left: u64,
}

impl<'a> DramPieces<'a> {
    /// `EINVAL` if the range is not inside the pack.
    pub(crate) fn new(pack: &'a dyn DramPages, offset: u64, size: u64) -> Result<Self> {
        if offset
            .checked_add(size)
            .is_none_or(|end| end > pack.total_size())
        {
            return Err(EINVAL);
        }
        Ok(Self {
            pack,
            pos: offset,
            left: size,
        })
    }

    /// Bytes not yet emitted (all of them before the first piece).
    pub(crate) fn bytes(&self) -> u64 {
        self.left
    }
}

impl Iterator for DramPieces<'_> {
    type Item = (u64, u64);

    fn next(&mut self) -> Option<(u64, u64)> {
        let psz = self.pack.page_size();
        let mut piece: Option<(u64, u64)> = None;
        while self.left > 0 {
            let idx = self.pos.checked_div(psz)?;
            let in_page = self.pos.checked_rem(psz)?;
            let len = psz.checked_sub(in_page)?.min(self.left);
            let pa = self.pack.page_addr(idx)?.checked_add(in_page)?;
            match piece {
                None => piece = Some((pa, len)),
                Some((start, n)) if start.checked_add(n) == Some(pa) => {
                    piece = Some((start, n.checked_add(len)?))
                }
                Some(_) => break,
            }
            self.pos = self.pos.checked_add(len)?;
            self.left = self.left.checked_sub(len)?;
        }
        piece
    }
}
