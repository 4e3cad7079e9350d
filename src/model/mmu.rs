// SPDX-License-Identifier: GPL-2.0

//! The MMU and STLB register blocks of the PMMU and the 16 HMMUs, and what
//! their writes do (upstream's init and invalidation sequences,
//! gaudi2/gaudi2.c:5998-6450; offsets in [`super::regs::mmu`] and
//! [`super::regs::stlb`]):
//!
//! - hop 0 per ASID: `ASID`, `HOP0_PA43_12`, `HOP0_PA63_44`, then `BUSY`
//!   written with bit 31 commits them (`gaudi2_mmu_update_asid_hop0_addr`);
//!   `BUSY` reads 0 at once. The model keeps hop 0 for [`ASIDS`] ASIDs
//!   (upstream uses 2, `prop->max_asid`, gaudi2/gaudi2.c:2816); a commit for
//!   a higher ASID is ignored and its walks fault;
//! - `INV_ALL_START` 1: the whole STLB is dropped, reads 0 when done (at
//!   once); `SRAM_INIT` reads 0 (initialized);
//! - `RANGE_CACHE_INVALIDATION` with bit 0: the STLB entries of the range
//!   `RANGE_INV_START/END` (of the ASID when bit 1 is set) are dropped;
//!   bit 0 reads 0 when done (at once);
//! - `MEM_CACHE_INVALIDATION` 1: `MEM_CACHE_INV_STATUS` bit 0 becomes 1 (the
//!   model has no memory line cache, so it is done at once); the driver
//!   writes the status back to 0;
//! - `MMU_ENABLE` bit 0, `MMU_BYPASS` bit 0: whether engine accesses are
//!   translated;
//! - fault capture: the first page fault's VA in `PAGE_ERROR_CAPTURE`/`_VA`
//!   and the first access error's in `ACCESS_ERROR_CAPTURE`/`_VA`, flagged
//!   in `ACCESS_PAGE_ERROR_VALID` (bits 0, 1) and `SPI_SEI_CAUSE` (bits 0,
//!   1), kept until the driver writes the valid register to 0
//!   (`gaudi2_handle_page_error`, gaudi2/gaudi2.c:9359-9387) and clears the
//!   cause (`gaudi2_handle_mmu_spi_sei_generic`, gaudi2/gaudi2.c:9412-9444).
//!
//! Other registers of the blocks (`HOP_CONFIGURATION`, `SPI_SEI_MASK`,
//! `STATIC_MULTI_PAGE_SIZE`, the range registers...) are kept by the
//! register file and read back as written.

use super::regs::{self, mmu as m, stlb as s};
use super::stlb::{Entry, Side, Stlb};

/// Entries of each MMU's STLB (8 sets of 4 ways; real STLBs hold hundreds
/// to a few thousand: a small cache makes evictions and stale entries easy
/// to reach in tests).
pub const STLB_ENTRIES: usize = 32;

/// ASIDs whose hop 0 an MMU keeps.
pub const ASIDS: usize = 64;
/// MMUs: the PMMU (index 0) and the 16 HMMUs (1 + dcore x 4 + hmmu).
pub const MMUS: usize = 1 + (regs::DCORES * regs::HMMUS_PER_DCORE) as usize;
/// The index of the PMMU in [`MMUS`].
pub const PMMU: usize = 0;
/// The HMMU engine accesses to the DRAM space go through: DCORE0 HMMU0
/// (all HMMUs are programmed alike by upstream's init and invalidations).
pub const ENGINE_HMMU: usize = 1;

/// The MMU (index into [`MMUS`]) and the offset in its block of register
/// `reg`, if `reg` is in an MMU's MMU or STLB block. O(1).
pub fn decode(reg: u32) -> Option<(usize, u32)> {
    if let Some(off) = reg.checked_sub(regs::PMMU_MMU_BASE) {
        if off < regs::MMU_SPAN {
            return Some((PMMU, off));
        }
    }
    let rel = reg.checked_sub(regs::HMMU0_MMU_BASE)?;
    let dcore = rel / regs::DCORE_OFFSET;
    let hmmu = (rel % regs::DCORE_OFFSET) / regs::DCORE_HMMU_OFFSET;
    let off = rel % regs::DCORE_HMMU_OFFSET;
    if dcore >= regs::DCORES || hmmu >= regs::HMMUS_PER_DCORE || off >= regs::MMU_SPAN {
        return None;
    }
    let index = 1 + dcore * regs::HMMUS_PER_DCORE + hmmu;
    Some((usize::try_from(index).ok()?, off))
}

/// What a register write did, for the device's counters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Effect {
    /// Not this block's register: the caller keeps it in the register file.
    NotMine,
    /// Handled, nothing to count.
    Done,
    /// An STLB invalidation ran.
    Invalidated,
}

/// One MMU: its registers with meaning, hop 0 per ASID, its STLB.
pub struct Mmu {
    enabled: bool,
    bypass: bool,
    /// `ASID`, `HOP0_PA43_12`, `HOP0_PA63_44` as written, until `BUSY`.
    asid: u32,
    hop0_lo: u32,
    hop0_hi: u32,
    /// Hop 0 per ASID; bit `a` of `hop0_set` says whether ASID `a` has one.
    hop0: [u64; ASIDS],
    hop0_set: u64,
    /// `RANGE_INV_START_LSB/MSB`, `RANGE_INV_END_LSB/MSB`.
    range: [u32; 4],
    mem_cache_status: u32,
    spi_sei_cause: u32,
    err_valid: u32,
    page_err_va: u64,
    access_err_va: u64,
    /// The translation cache.
    pub stlb: Stlb<[Entry; STLB_ENTRIES]>,
}

impl Default for Mmu {
    fn default() -> Self {
        Self::new()
    }
}

impl Mmu {
    /// An MMU as after reset: disabled, no hop 0, empty STLB. O(ASIDS).
    pub const fn new() -> Self {
        Self {
            enabled: false,
            bypass: false,
            asid: 0,
            hop0_lo: 0,
            hop0_hi: 0,
            hop0: [0; ASIDS],
            hop0_set: 0,
            range: [0; 4],
            mem_cache_status: 0,
            spi_sei_cause: 0,
            err_valid: 0,
            page_err_va: 0,
            access_err_va: 0,
            stlb: Stlb::with_storage([Entry::EMPTY; STLB_ENTRIES], STLB_ENTRIES),
        }
    }

    /// Whether engine accesses through this MMU are translated.
    pub fn translates(&self) -> bool {
        self.enabled && !self.bypass
    }

    /// The hop 0 of `asid`, if committed. O(1).
    pub fn hop0(&self, asid: u16) -> Option<u64> {
        let bit = 1u64.checked_shl(u32::from(asid))?;
        (self.hop0_set & bit != 0)
            .then(|| self.hop0.get(usize::from(asid)).copied())
            .flatten()
    }

    /// The value of the register at `off` if the model gives it meaning.
    /// O(1).
    pub fn read(&self, off: u32) -> Option<u32> {
        const STLB: u32 = regs::STLB_BLOCK_OFFSET;
        Some(match off {
            m::MMU_ENABLE => u32::from(self.enabled),
            m::MMU_BYPASS => u32::from(self.bypass),
            m::SPI_SEI_CAUSE => self.spi_sei_cause,
            m::PAGE_ERROR_CAPTURE => (self.page_err_va >> 32) as u32,
            m::PAGE_ERROR_CAPTURE_VA => self.page_err_va as u32,
            m::ACCESS_ERROR_CAPTURE => (self.access_err_va >> 32) as u32,
            m::ACCESS_ERROR_CAPTURE_VA => self.access_err_va as u32,
            m::ACCESS_PAGE_ERROR_VALID => self.err_valid,
            o if o == STLB + s::BUSY => 0,
            o if o == STLB + s::ASID => self.asid,
            o if o == STLB + s::HOP0_PA43_12 => self.hop0_lo,
            o if o == STLB + s::HOP0_PA63_44 => self.hop0_hi,
            o if o == STLB + s::INV_ALL_START => 0,
            o if o == STLB + s::SRAM_INIT => 0,
            o if o == STLB + s::RANGE_CACHE_INVALIDATION => 0,
            o if o == STLB + s::MEM_CACHE_INV_STATUS => self.mem_cache_status,
            o => return self.range_index(o).and_then(|i| self.range.get(i).copied()),
        })
    }

    /// The index in `range` of the range register at `off`.
    fn range_index(&self, off: u32) -> Option<usize> {
        let rel = off.checked_sub(regs::STLB_BLOCK_OFFSET + s::RANGE_INV_START_LSB)?;
        (rel % 4 == 0 && rel < 16).then_some((rel / 4) as usize)
    }

    /// Write the register at `off`. O(1), an invalidation O(STLB entries).
    pub fn write(&mut self, off: u32, val: u32) -> Effect {
        const STLB: u32 = regs::STLB_BLOCK_OFFSET;
        match off {
            m::MMU_ENABLE => self.enabled = val & 1 != 0,
            m::MMU_BYPASS => self.bypass = val & 1 != 0,
            m::SPI_SEI_CAUSE => self.spi_sei_cause = val,
            m::ACCESS_PAGE_ERROR_VALID => self.err_valid = val & 3,
            o if o == STLB + s::ASID => self.asid = val & 0x3FF,
            o if o == STLB + s::HOP0_PA43_12 => self.hop0_lo = val,
            o if o == STLB + s::HOP0_PA63_44 => self.hop0_hi = val & 0xF_FFFF,
            o if o == STLB + s::BUSY => {
                if val & (1 << 31) != 0 {
                    self.commit_hop0();
                }
            }
            o if o == STLB + s::INV_ALL_START => {
                if val & 1 != 0 {
                    // One MMU's cache holds one side; both are dropped.
                    self.stlb.invalidate_all(Side::Host);
                    self.stlb.invalidate_all(Side::Dram);
                    return Effect::Invalidated;
                }
            }
            o if o == STLB + s::RANGE_CACHE_INVALIDATION => {
                if val & 1 != 0 {
                    self.invalidate_range(val);
                    return Effect::Invalidated;
                }
            }
            o if o == STLB + s::MEM_CACHE_INVALIDATION => {
                if val & 1 != 0 {
                    self.mem_cache_status = 1;
                }
            }
            o if o == STLB + s::MEM_CACHE_INV_STATUS => self.mem_cache_status = val,
            o => match self.range_index(o).and_then(|i| self.range.get_mut(i)) {
                Some(r) => *r = val,
                None => return Effect::NotMine,
            },
        }
        Effect::Done
    }

    /// `BUSY` bit 31: hop 0 of `ASID` from the `HOP0_PA` registers. O(1).
    fn commit_hop0(&mut self) {
        let pa = u64::from(self.hop0_hi) << regs::HOP0_PA63_44_SHIFT
            | u64::from(self.hop0_lo) << regs::HOP0_PA43_12_SHIFT;
        let Ok(asid) = u16::try_from(self.asid) else {
            return;
        };
        if let (Some(slot), Some(bit)) = (
            self.hop0.get_mut(usize::from(asid)),
            1u64.checked_shl(u32::from(asid)),
        ) {
            *slot = pa;
            self.hop0_set |= bit;
        }
    }

    /// `RANGE_CACHE_INVALIDATION` = `val`: drop the range the range
    /// registers hold (4 KiB page numbers: LSB bits 31:0, MSB bits 51:32).
    /// O(STLB entries).
    fn invalidate_range(&mut self, val: u32) {
        let [start_lo, start_hi, end_lo, end_hi] = self.range;
        let after = u64::from(start_hi & 0xF_FFFF) << 32 | u64::from(start_lo);
        let last = u64::from(end_hi & 0xF_FFFF) << 32 | u64::from(end_lo);
        let asid = (val & 2 != 0).then_some((val >> 2) & 0x3FF);
        // Pages `after < p <= last`: bytes [(after + 1) << 12, (last + 1) << 12).
        let start = after.saturating_add(1).saturating_mul(4096);
        let end = last.saturating_add(1).saturating_mul(4096);
        for side in [Side::Host, Side::Dram] {
            self.stlb.invalidate_range(side, asid, start, end);
        }
    }

    /// Capture a page fault at `va` (the first one until the driver
    /// releases the capture). O(1).
    pub fn capture_page_fault(&mut self, va: u64) {
        if self.err_valid & regs::PAGE_ERR_VALID == 0 {
            self.page_err_va = va;
            self.err_valid |= regs::PAGE_ERR_VALID;
        }
        self.spi_sei_cause |= 1 << 0;
    }

    /// Capture an access error at `va` (the first one until released). O(1).
    pub fn capture_access_error(&mut self, va: u64) {
        if self.err_valid & regs::ACCESS_ERR_VALID == 0 {
            self.access_err_va = va;
            self.err_valid |= regs::ACCESS_ERR_VALID;
        }
        self.spi_sei_cause |= 1 << 1;
    }
}
