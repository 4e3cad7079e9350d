// SPDX-License-Identifier: GPL-2.0

//! A DMA core's context registers and the transfer a `COMMIT` starts: the
//! KDMA's (the driver's, `super::kdma`) and the ten user DMA cores' behind
//! the PDMA and EDMA QMANs (`mmPDMA0_CORE_BASE` = the QMAN's block +
//! `0x1000`, `mmDCORE0_EDMA0_CORE_BASE` likewise). Every core has the same
//! layout (asic_reg/pdma0_core_ctx_regs.h, arc_farm_kdma_ctx_regs.h), at
//! these offsets from its block:
//!
//! - `CFG_1` (`0x004`): bit 0 (`HALT`) drops the transfer in flight and,
//!   while it stays set, every commit (the driver holds the user cores
//!   halted from a context's close to the next one's open);
//! - `CTX_AXUSER_HB_ASID` (`0x800`: read ASID bits 25:16, write 9:0) and
//!   `CTX_AXUSER_HB_MMU_BP` (`0x804`, RD bit 4 / WR bit 0): the driver's,
//!   secured (`gaudi2_mmu_prepare` gives a user core the context's ASID
//!   with the MMU on);
//! - the context block `0x860..=0x8EC` ([`CTX_WORDS`] registers, kept as
//!   written and read back): `SRC_BASE_LO/HI` (`0x8D8`), `DST_BASE_LO/HI`
//!   (`0x8E0`), `DST_TSIZE_0` (`0x8E8`), `WR_COMP_ADDR_HI/LO` (`0x8BC`),
//!   `WR_COMP_WDATA` (`0x8C4`), `COMMIT` (`0x8EC`), and the tensor
//!   registers (sizes, strides, offsets, `CTRL`, `IDX`) a linear transfer
//!   does not use.
//!
//! **A `COMMIT`** with `LIN` (bit 31) while idle starts a linear transfer
//! of `DST_TSIZE_0` bytes from `SRC_BASE` to `DST_BASE` (with `MEM_SET`,
//! bit 4, `SRC_BASE` is the 64-bit fill value); with `WR_COMP_EN` (bit 0)
//! the core writes `WR_COMP_WDATA` (32 bits) at `WR_COMP_ADDR` when the
//! transfer is done (a SOB, as the runtimes use it). A commit while a
//! transfer runs is dropped (the model has no context FIFO).
//!
//! **What the model refuses:** a commit without `LIN` (a tensor transfer
//! over the five dimensions) and one with any other `COMMIT` bit
//! ([`MODELLED`]: byte swaps, BF16/FP16 conversion, `CTX_ID_INC`,
//! `ADD_OFFSET_0`, the `*_FROM_DST_*` copies) is a DMA core error
//! ("wrong configuration for commit", its event), nothing moved: stricter
//! than silicon, never more permissive.
//!
//! Complexity: every register access O(1); a transfer moves in chunks
//! (the hosts' steps).

/// `CFG_1` (asic_reg/pdma0_core_regs.h:25, minus the core's base).
pub const CFG_1: u32 = 0x004;
/// `CTX_AXUSER_HB_ASID` (asic_reg/pdma0_core_ctx_axuser_regs.h:23).
pub const AXUSER_HB_ASID: u32 = 0x800;
/// `CTX_AXUSER_HB_MMU_BP` (:25).
pub const AXUSER_HB_MMU_BP: u32 = 0x804;
/// `CTX_RATE_LIM_TKN`, the context block's first register
/// (asic_reg/pdma0_core_ctx_regs.h:23).
pub const CTX_FIRST: u32 = 0x860;
/// `CTX_WR_COMP_ADDR_HI` (:69).
pub const WR_COMP_ADDR_HI: u32 = 0x8BC;
/// `CTX_WR_COMP_ADDR_LO` (:71).
pub const WR_COMP_ADDR_LO: u32 = 0x8C0;
/// `CTX_WR_COMP_WDATA` (:73).
pub const WR_COMP_WDATA: u32 = 0x8C4;
/// `CTX_SRC_BASE_LO` (:83).
pub const SRC_BASE_LO: u32 = 0x8D8;
/// `CTX_SRC_BASE_HI` (:85).
pub const SRC_BASE_HI: u32 = 0x8DC;
/// `CTX_DST_BASE_LO` (:87).
pub const DST_BASE_LO: u32 = 0x8E0;
/// `CTX_DST_BASE_HI` (:89).
pub const DST_BASE_HI: u32 = 0x8E4;
/// `CTX_DST_TSIZE_0` (:91).
pub const DST_TSIZE_0: u32 = 0x8E8;
/// `CTX_COMMIT` (:93), the context block's last register.
pub const COMMIT: u32 = 0x8EC;
/// Registers of the context block, `CTX_FIRST..=COMMIT`.
pub const CTX_WORDS: usize = ((COMMIT - CTX_FIRST) / 4 + 1) as usize;

/// `COMMIT.WR_COMP_EN` (asic_reg/arc_farm_kdma_ctx_masks.h:177).
pub const COMMIT_WR_COMP_EN: u32 = 1 << 0;
/// `COMMIT.MEM_SET` (:181).
pub const COMMIT_MEM_SET: u32 = 1 << 4;
/// `COMMIT.LIN` (:219).
pub const COMMIT_LIN: u32 = 1 << 31;
/// The `COMMIT` bits the model executes; a commit with any other is
/// refused.
pub const MODELLED: u32 = COMMIT_WR_COMP_EN | COMMIT_MEM_SET | COMMIT_LIN;

/// What a register write did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wrote {
    /// Stored (or a halt).
    Stored,
    /// A `COMMIT` started a transfer.
    Started,
    /// A `COMMIT` the model does not execute (see the module doc):
    /// nothing started, the core's error to report.
    Refused,
}

/// A linear transfer as committed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Transfer {
    /// The `COMMIT` value.
    pub commit: u32,
    /// Source, or the fill value with `MEM_SET`.
    pub src: u64,
    /// Destination.
    pub dst: u64,
    /// Bytes.
    pub tsize: u32,
    /// The completion write's address and data.
    pub comp: (u64, u32),
    /// The read and write ASIDs and the MMU bypass as they were at the
    /// commit (the core's context is latched, as on silicon).
    pub who: (u16, u16, bool),
}

impl Transfer {
    /// Whether `MEM_SET` is on. O(1).
    pub fn memset(&self) -> bool {
        self.commit & COMMIT_MEM_SET != 0
    }

    /// The completion write to make at the end, if `WR_COMP_EN`. O(1).
    pub fn completion(&self) -> Option<(u64, u32)> {
        (self.commit & COMMIT_WR_COMP_EN != 0).then_some(self.comp)
    }
}

/// One DMA core's registers and its transfer in flight.
///
/// # Invariants
///
/// `running` is `Some` only for a commit with `LIN` and no bit outside
/// [`MODELLED`], made while not `halted`; its byte count never exceeds
/// the transfer's `tsize`.
#[derive(Clone, Copy, Debug)]
pub struct DmaCore {
    asid: u32,
    mmu_bp: u32,
    ctx: [u32; CTX_WORDS],
    /// `CFG_1.HALT` is set: no transfer runs or starts.
    halted: bool,
    /// The transfer in flight, and the bytes it moved.
    running: Option<(Transfer, u32)>,
}

impl Default for DmaCore {
    fn default() -> Self {
        Self::new()
    }
}

impl DmaCore {
    /// Idle, registers 0. O(CTX_WORDS).
    pub const fn new() -> Self {
        Self {
            asid: 0,
            mmu_bp: 0,
            ctx: [0; CTX_WORDS],
            halted: false,
            running: None,
        }
    }

    /// Whether a transfer is in flight. O(1).
    pub fn busy(&self) -> bool {
        self.running.is_some()
    }

    /// The transfer in flight and the bytes it moved. O(1).
    pub fn running(&self) -> Option<(Transfer, u32)> {
        self.running
    }

    /// Record that the transfer moved `n` more bytes (ended past its
    /// size). O(1).
    pub fn advance(&mut self, n: u32) {
        if let Some((t, done)) = self.running {
            let done = done.saturating_add(n).min(t.tsize);
            self.running = Some((t, done));
        }
    }

    /// Drop the transfer in flight (its end, a fault or a halt). O(1).
    pub fn stop(&mut self) {
        self.running = None;
    }

    /// Take the transfer a commit just started, leaving the core idle:
    /// for a host that runs it on the committing engine. O(1).
    pub fn take(&mut self) -> Option<Transfer> {
        self.running.take().map(|(t, _)| t)
    }

    /// The read and write ASIDs, and whether the MMU is bypassed. O(1).
    pub fn who(&self) -> (u16, u16, bool) {
        (
            ((self.asid >> 16) & 0x3FF) as u16,
            (self.asid & 0x3FF) as u16,
            self.mmu_bp & 0x11 != 0,
        )
    }

    /// `CTX_AXUSER_HB_ASID` as written. O(1).
    pub fn asid_reg(&self) -> u32 {
        self.asid
    }

    /// The context register at `off`, if `off` is one. O(1).
    fn slot(off: u32) -> Option<usize> {
        let rel = off.checked_sub(CTX_FIRST)?;
        let i = usize::try_from(rel / 4).ok()?;
        (rel % 4 == 0 && i < CTX_WORDS).then_some(i)
    }

    /// A 64-bit value from the context registers `lo` and `hi`. O(1).
    fn pair(&self, lo: u32, hi: u32) -> u64 {
        let at = |o| {
            Self::slot(o)
                .and_then(|i| self.ctx.get(i))
                .copied()
                .unwrap_or(0)
        };
        u64::from(at(hi)) << 32 | u64::from(at(lo))
    }

    /// Read the register at offset `off` of the core's block, if it is one
    /// the model keeps. `COMMIT` reads the transfer in flight's (0 when
    /// idle). O(1).
    pub fn read(&self, off: u32) -> Option<u32> {
        match off {
            AXUSER_HB_ASID => Some(self.asid),
            AXUSER_HB_MMU_BP => Some(self.mmu_bp),
            CFG_1 => Some(u32::from(self.halted)),
            COMMIT => Some(self.running.map_or(0, |(t, _)| t.commit)),
            _ => Self::slot(off).and_then(|i| self.ctx.get(i)).copied(),
        }
    }

    /// Write the register at offset `off` of the core's block; `None` if
    /// it is not one the model keeps. O(1).
    pub fn write(&mut self, off: u32, val: u32) -> Option<Wrote> {
        match off {
            AXUSER_HB_ASID => self.asid = val,
            AXUSER_HB_MMU_BP => self.mmu_bp = val,
            CFG_1 => {
                self.halted = val & 1 != 0;
                if self.halted {
                    self.running = None;
                }
            }
            COMMIT => return Some(self.commit(val)),
            _ => {
                let i = Self::slot(off)?;
                *self.ctx.get_mut(i)? = val;
            }
        }
        Some(Wrote::Stored)
    }

    /// A `COMMIT` of `val` (see the module doc). O(1).
    fn commit(&mut self, val: u32) -> Wrote {
        if let Some(i) = Self::slot(COMMIT) {
            if let Some(r) = self.ctx.get_mut(i) {
                *r = val;
            }
        }
        if self.halted {
            return Wrote::Stored;
        }
        if val & COMMIT_LIN == 0 || val & !MODELLED != 0 {
            return Wrote::Refused;
        }
        if self.running.is_some() {
            return Wrote::Stored;
        }
        let at = |o| {
            Self::slot(o)
                .and_then(|i| self.ctx.get(i))
                .copied()
                .unwrap_or(0)
        };
        self.running = Some((
            Transfer {
                commit: val,
                src: self.pair(SRC_BASE_LO, SRC_BASE_HI),
                dst: self.pair(DST_BASE_LO, DST_BASE_HI),
                tsize: at(DST_TSIZE_0),
                comp: (
                    self.pair(WR_COMP_ADDR_LO, WR_COMP_ADDR_HI),
                    at(WR_COMP_WDATA),
                ),
                who: self.who(),
            },
            0,
        ));
        Wrote::Started
    }
}
