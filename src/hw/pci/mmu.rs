// SPDX-License-Identifier: GPL-2.0

//! The PCI Gaudi2's MMUs through their registers, as upstream programs them
//! on silicon (gaudi2/gaudi2.c): the PMMU (host memory, `mmPMMU_HBW_*`) and
//! the HMMUs (device DRAM, `mmDCORE<d>_HMMU<h>_*`, those of
//! [`PciGaudi2::hmmu_mask`]).
//!
//! - **Init** (`gaudi2_pci_mmu_init`, :6349-6398; `gaudi2_dcore_hmmu_init`,
//!   :6400-6450; `gaudi2_mmu_init_common`, :6303-6347), split around the
//!   hop-0 commits, which the driver's MMU owner makes for every ASID when it
//!   is created ([`crate::hw::backend::Backend::set_hop0`]):
//!   [`PciGaudi2::mmu_init_start`] (hop configuration, error mask,
//!   `INV_ALL_START`, the STLB's `SRAM_INIT` poll) before,
//!   [`PciGaudi2::mmu_enable`] (`MMU_BYPASS` 0, the `INV_ALL_START` poll,
//!   `MMU_ENABLE` 1) after. Upstream runs the whole sequence one MMU after
//!   the other; here each step runs on every MMU before the next, with the
//!   same order of writes within each MMU.
//! - **Hop 0** of an ASID (`gaudi2_mmu_update_asid_hop0_addr`, :5998-6028):
//!   `ASID`, `HOP0_PA43_12`, `HOP0_PA63_44`, `BUSY` = bit 31, then poll
//!   `BUSY` for 2 ms.
//! - **Invalidations** (`gaudi2_mmu_invalidate_cache`, :6198-6221, and
//!   `_range`, :6223-6273): a range of the PMMU with its memory line cache
//!   (`MEM_CACHE_INVALIDATION`, then the status polled and written back to
//!   0), a range of every HMMU with scrambled addresses, all of them
//!   triggered before any is polled (`gaudi2_hmmus_invalidate_cache`,
//!   :6165-6196); a PMMU range at VA 0 is a full invalidation (upstream:
//!   "range invalidation does not support zero address"). Every poll has
//!   upstream's 20 ms; a poll that times out is a failed invalidation
//!   (`ETIMEDOUT`), and the memory code keeps what it protects.
//!
//! A device that is [dead](super::regs::Life::Dead) fails every one of them
//! with `ENODEV`. A device that is [gone](super::regs::Life::Gone) (the
//! driver unbound: bus mastering off, every host page DMA-unmapped) has no
//! translation any engine can use any more: its invalidations succeed
//! without touching it.
//!
//! The register sequences of one device are serialized by
//! `PciGaudi2::mmu_regs` (a leaf lock, held across a sequence and its
//! polls; upstream: the callers' `mmu_lock`).

use super::{
    regs::{bump, Life},
    PciGaudi2,
};
use crate::asic::{
    gaudi2_regs::{self as r, mmu, stlb},
    DRAM_PHYS_BASE, VA_HBM_SPACE_END,
};
use crate::hw::backend::MmuKind;
use kernel::prelude::*;

/// The MMU and STLB register blocks of one MMU.
#[derive(Clone, Copy)]
pub(super) struct MmuBlocks {
    mmu: u32,
    stlb: u32,
}

/// The PMMU's blocks.
const PMMU: MmuBlocks = MmuBlocks {
    mmu: r::PMMU_MMU_BASE,
    stlb: r::PMMU_STLB_BASE,
};

/// An invalidation of one MMU: the value written to its start register and,
/// for a range, the (already scrambled) `[start, end)`.
#[derive(Clone, Copy)]
struct Inval {
    range: Option<(u64, u64)>,
    start_val: u32,
    clear_memcache: bool,
}

/// The start register of an invalidation.
fn start_reg(inv: &Inval) -> u32 {
    if inv.range.is_some() {
        stlb::RANGE_CACHE_INVALIDATION
    } else {
        stlb::INV_ALL_START
    }
}

/// `gaudi2_mmu_descramble_addr` (gaudi2/gaudi2.c:11541-11555): the
/// inverse of [`scramble`] (a captured HMMU fault address back to the VA
/// the engine issued). O(1).
pub(super) fn descramble(hbms: u32, addr: u64) -> u64 {
    const MASK: u64 = 0xFFFF_FFFF_FFFF;
    let divisor = u64::from(hbms) * (8 << 20);
    if !(DRAM_PHYS_BASE..VA_HBM_SPACE_END).contains(&addr) || divisor == 0 {
        return addr;
    }
    let lo = addr & MASK;
    ((lo >> 26) * divisor)
        .checked_add(lo & ((1 << 26) - 1))
        .and_then(|v| v.checked_add(addr & !MASK))
        .unwrap_or(addr)
}

/// `gaudi2_mmu_scramble_addr` (gaudi2/gaudi2.c:11521-11539): a DRAM-space
/// address's low 48 bits rewritten as `off / (HBMs x 8 MiB) x 64 MiB + off
/// mod (HBMs x 8 MiB)`. The high bits are added instead of ORed, as the
/// driver's own page tables do (`crate::mmu::pte::Scrambler`, which says
/// why). O(1).
pub(super) fn scramble(hbms: u32, addr: u64) -> u64 {
    const MASK: u64 = 0xFFFF_FFFF_FFFF;
    let divisor = u64::from(hbms) * (8 << 20);
    if !(DRAM_PHYS_BASE..VA_HBM_SPACE_END).contains(&addr) || divisor == 0 {
        return addr;
    }
    let lo = addr & MASK;
    ((lo / divisor) << 26)
        .checked_add(lo % divisor)
        .and_then(|v| v.checked_add(addr & !MASK))
        .unwrap_or(addr)
}

impl PciGaudi2 {
    /// The blocks of every enabled HMMU, in upstream's order (dcore, then
    /// HMMU).
    fn hmmus(&self) -> impl Iterator<Item = MmuBlocks> + '_ {
        (0..r::DCORES * r::HMMUS_PER_DCORE)
            .filter(move |seq| self.hmmu_mask & (1 << seq) != 0)
            .map(|seq| {
                let (mmu, stlb) = r::hmmu_bases(seq);
                MmuBlocks { mmu, stlb }
            })
    }

    /// Run `f` on the blocks of each MMU of `kind`, stopping at its first
    /// error.
    fn each_mmu(&self, kind: MmuKind, mut f: impl FnMut(MmuBlocks) -> Result) -> Result {
        match kind {
            MmuKind::Host => f(PMMU),
            MmuKind::Dram => self.hmmus().try_for_each(f),
        }
    }

    /// Steps of MMU init before the hop-0 commits, on the PMMU then every
    /// HMMU (`gaudi2_pci_mmu_init` :6357-6391, `gaudi2_dcore_hmmu_init`
    /// :6419-6441, `gaudi2_mmu_init_common` :6314-6322). A slow
    /// `SRAM_INIT` is only reported, as upstream. Sleeps.
    pub(super) fn mmu_init_start(&self) -> Result {
        let _seq = self.mmu_regs.lock();
        let io = &self.mmio;
        io.rmw(PMMU.stlb + stlb::HOP_CONFIGURATION, r::PMMU_HOP_CONFIG)?;
        io.wreg(PMMU.stlb + stlb::LINK_LIST_LOOKUP_MASK_63_32, 0)?;
        io.wreg(PMMU.mmu + mmu::SPI_SEI_MASK, r::PMMU_SPI_SEI_ENABLE_MASK)?;
        self.inv_all_and_sram_init(PMMU)?;
        for h in self.hmmus() {
            io.rmw(h.mmu + mmu::STATIC_MULTI_PAGE_SIZE, r::HMMU_HOP4_PAGE_SIZE)?;
            io.rmw(h.stlb + stlb::HOP_CONFIGURATION, r::HMMU_HOP_CONFIG)?;
            io.wreg(h.mmu + mmu::SPI_SEI_MASK, r::HMMU_SPI_SEI_ENABLE_MASK)?;
            self.inv_all_and_sram_init(h)?;
        }
        Ok(())
    }

    /// `INV_ALL_START` = 1 and the `SRAM_INIT` poll of one MMU
    /// (gaudi2/gaudi2.c:6314-6322).
    fn inv_all_and_sram_init(&self, b: MmuBlocks) -> Result {
        self.mmio.wreg(b.stlb + stlb::INV_ALL_START, 1)?;
        let sram = b.stlb + stlb::SRAM_INIT;
        match self.mmio.poll(
            sram,
            |v| v == 0,
            r::MMU_POLL_SLEEP_US,
            r::MMU_CACHE_INV_TIMEOUT_US,
        ) {
            Err(ETIMEDOUT) => {
                pr_notice!(
                    "PCI Gaudi2: timeout when waiting for MMU SRAM init ({:#x})\n",
                    sram
                );
                Ok(())
            }
            r => r.map(|_| ()),
        }
    }

    /// Steps of MMU init after the hop-0 commits, on every MMU: `MMU_BYPASS`
    /// 0, the first `INV_ALL_START` poll, `MMU_ENABLE` 1
    /// (gaudi2/gaudi2.c:6328-6346: a timeout is reported, `MMU_ENABLE` still
    /// written, and the init fails with it). Sleeps.
    pub(crate) fn mmu_enable(&self) -> Result {
        let _seq = self.mmu_regs.lock();
        let mut rc = Ok(());
        let mut enable = |b: MmuBlocks| {
            self.mmio.wreg(b.mmu + mmu::MMU_BYPASS, 0)?;
            let inv = b.stlb + stlb::INV_ALL_START;
            let polled = self.mmio.poll(
                inv,
                |v| v == 0,
                r::MMU_POLL_SLEEP_US,
                r::MMU_CACHE_INV_TIMEOUT_US,
            );
            if let Err(e) = polled {
                pr_notice!(
                    "PCI Gaudi2: timeout when waiting for MMU invalidate all ({:#x})\n",
                    inv
                );
                rc = Err(e);
            }
            self.mmio.wreg(b.mmu + mmu::MMU_ENABLE, 1)
        };
        self.each_mmu(MmuKind::Host, &mut enable)?;
        self.each_mmu(MmuKind::Dram, &mut enable)?;
        rc
    }

    /// `gaudi2_mmu_update_asid_hop0_addr` on every MMU of `kind`: tell it
    /// where the hop 0 of `asid` is. Sleeps.
    pub(super) fn commit_hop0(&self, kind: MmuKind, asid: u32, addr: u64) -> Result {
        let _seq = self.mmu_regs.lock();
        let io = &self.mmio;
        self.each_mmu(kind, |b| {
            io.wreg(b.stlb + stlb::ASID, asid)?;
            io.wreg(
                b.stlb + stlb::HOP0_PA43_12,
                (addr >> r::HOP0_PA43_12_SHIFT) as u32,
            )?;
            io.wreg(
                b.stlb + stlb::HOP0_PA63_44,
                (addr >> r::HOP0_PA63_44_SHIFT) as u32,
            )?;
            io.wreg(b.stlb + stlb::BUSY, r::STLB_BUSY_BIT)?;
            let busy = b.stlb + stlb::BUSY;
            let done = |v: u32| v & r::STLB_BUSY_BIT == 0;
            if let Err(e) = io.poll(busy, done, r::MMU_POLL_SLEEP_US, r::MMU_CONFIG_TIMEOUT_US) {
                pr_err!(
                    "PCI Gaudi2: timeout during MMU hop0 config of asid {}\n",
                    asid
                );
                return Err(e);
            }
            bump(&io.counters.hop0_commits);
            Ok(())
        })
    }

    /// Invalidate `[va, va + size)` of `asid` in the MMUs of `kind`
    /// (`gaudi2_mmu_invalidate_cache_range`). Sleeps.
    pub(super) fn invalidate_range_regs(
        &self,
        kind: MmuKind,
        asid: u32,
        va: u64,
        size: u64,
    ) -> Result {
        let end = va.checked_add(size).ok_or(EINVAL)?;
        let start_val = (1 << r::RANGE_INV_EN_SHIFT)
            | (1 << r::RANGE_INV_ASID_EN_SHIFT)
            | (asid << r::RANGE_INV_ASID_SHIFT);
        let inv = match kind {
            // `MMU_OP_USERPTR | MMU_OP_CLEAR_MEMCACHE`; VA 0: a full one.
            MmuKind::Host if va == 0 => Inval {
                range: None,
                start_val: 1,
                clear_memcache: false,
            },
            MmuKind::Host => Inval {
                range: Some((va, end)),
                start_val,
                clear_memcache: true,
            },
            // `MMU_OP_PHYS_PACK`, scrambled addresses (:6264-6266).
            MmuKind::Dram => Inval {
                range: Some((scramble(self.hbms, va), scramble(self.hbms, end))),
                start_val,
                clear_memcache: false,
            },
        };
        bump(&self.mmio.counters.range_invalidations);
        self.invalidate(kind, &inv)
    }

    /// Invalidate everything the MMUs of `kind` cached
    /// (`gaudi2_mmu_invalidate_cache`). Sleeps.
    pub(super) fn invalidate_all_regs(&self, kind: MmuKind) -> Result {
        bump(&self.mmio.counters.full_invalidations);
        let inv = Inval {
            range: None,
            start_val: 1,
            clear_memcache: false,
        };
        self.invalidate(kind, &inv)
    }

    /// Trigger `inv` on every MMU of `kind`, then poll each
    /// (`gaudi2_hmmus_invalidate_cache`). A gone device has nothing to
    /// invalidate.
    fn invalidate(&self, kind: MmuKind, inv: &Inval) -> Result {
        let _seq = self.mmu_regs.lock();
        if self.mmio.life() == Life::Gone {
            return Ok(());
        }
        self.each_mmu(kind, |b| self.trigger(b, inv))?;
        self.each_mmu(kind, |b| {
            self.poll_done(b, inv).inspect_err(|e| {
                pr_err!(
                    "PCI Gaudi2: MMU cache invalidation of STLB {:#x} failed ({:?})\n",
                    b.stlb,
                    e
                )
            })
        })
    }

    /// `gaudi2_mmu_invalidate_cache_trigger` and
    /// `gaudi2_mmu_send_invalidate_cache_cmd` (:6112-6160, :6030-6042): the
    /// range registers (the start is exclusive, so `start - 1`), the
    /// memory line cache, the start register.
    fn trigger(&self, b: MmuBlocks, inv: &Inval) -> Result {
        let io = &self.mmio;
        if let Some((start, end)) = inv.range {
            let start = start.wrapping_sub(1);
            io.wreg(
                b.stlb + stlb::RANGE_INV_START_LSB,
                (start >> r::RANGE_INV_VA_LSB_SHIFT) as u32,
            )?;
            io.wreg(
                b.stlb + stlb::RANGE_INV_START_MSB,
                (start >> r::RANGE_INV_VA_MSB_SHIFT) as u32,
            )?;
            io.wreg(
                b.stlb + stlb::RANGE_INV_END_LSB,
                (end >> r::RANGE_INV_VA_LSB_SHIFT) as u32,
            )?;
            io.wreg(
                b.stlb + stlb::RANGE_INV_END_MSB,
                (end >> r::RANGE_INV_VA_MSB_SHIFT) as u32,
            )?;
        }
        if inv.clear_memcache {
            io.wreg(r::PMMU_MEM_CACHE_INVALIDATION, 1)?;
        }
        io.wreg(b.stlb + start_reg(inv), inv.start_val)
    }

    /// `gaudi2_mmu_invalidate_cache_status_poll` (:6044-6088): the memory
    /// line cache's status (then written back to 0), then the start
    /// register's bit 0.
    fn poll_done(&self, b: MmuBlocks, inv: &Inval) -> Result {
        let io = &self.mmio;
        let (sleep, timeout) = (r::MMU_POLL_SLEEP_US, r::MMU_CACHE_INV_TIMEOUT_US);
        if inv.clear_memcache {
            io.poll(r::PMMU_MEM_CACHE_INV_STATUS, |v| v & 1 != 0, sleep, timeout)?;
            io.wreg(r::PMMU_MEM_CACHE_INV_STATUS, 0)?;
        }
        io.poll(b.stlb + start_reg(inv), |v| v & 1 == 0, sleep, timeout)
            .map(|_| ())
    }
}

#[kunit_tests(hlrs_pci_mmu)]
mod tests {
    use super::*;

    #[test]
    fn scrambling_is_upstreams_for_dram_addresses() {
        // Six HBMs: 48 MiB units become 64 MiB ones.
        let unit = 6u64 * (8 << 20);
        assert_eq!(scramble(6, DRAM_PHYS_BASE), DRAM_PHYS_BASE);
        assert_eq!(
            scramble(6, DRAM_PHYS_BASE + unit + 5),
            DRAM_PHYS_BASE + (64 << 20) + 5
        );
        // Host addresses are left alone.
        assert_eq!(scramble(6, 0xFFF0_0000_0000_1000), 0xFFF0_0000_0000_1000);
    }
}
