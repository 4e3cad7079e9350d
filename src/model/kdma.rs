// SPDX-License-Identifier: GPL-2.0

//! The KDMA (`ARC_FARM_KDMA`): the driver's own DMA engine, programmed by
//! registers, no queue. Upstream uses it for debugfs `dma_size`
//! (`gaudi2_debugfs_read_dma`, gaudi2/gaudi2.c:11027-11125) and its
//! memsets (`gaudi2_send_job_to_kdma`, :7263-7325):
//!
//! - `CTX_AXUSER_HB_ASID` (RD ASID bits 25:16, WR 9:0) and
//!   `CTX_AXUSER_HB_MMU_BP` (bypass, RD bit 4, WR bit 0;
//!   `gaudi2_kdma_set_mmbp_asid`, :7218-7231): with the bypass set, DRAM
//!   addresses are physical;
//! - `CTX_SRC_BASE_LO/HI`, `CTX_DST_BASE_LO/HI`, `CTX_DST_TSIZE_0`,
//!   `CTX_WR_COMP_ADDR_LO/HI`, `CTX_WR_COMP_WDATA`;
//! - `CTX_COMMIT` with `LIN` (bit 31) starts a linear transfer of `TSIZE`
//!   bytes (`MEM_SET`, bit 4: `SRC_BASE` is the 64-bit fill value); with
//!   `WR_COMP_EN` (bit 0) the engine writes `WR_COMP_WDATA` (32 bits) at
//!   `WR_COMP_ADDR` when the transfer is done, an address like any other
//!   (a SOB upstream, a word of host memory is as good);
//! - `CFG_1` bit 0 (`HALT`) stops a transfer in flight.
//!
//! The transfer is engine work: [`Gaudi2::step`] moves it in chunks, so a
//! 2 MiB read never holds the register interface. An access that faults
//! (captured and reported as any engine's, `super::bus`) ends the transfer
//! without its completion write, and the KDMA's error event
//! (`GAUDI2_EVENT_KDMA0_CORE`) follows the MMU's: the driver's poll times
//! out, as upstream's ("Timeout while waiting for KDMA to be idle").

use super::{events, half, Env, Gaudi2};

/// `mmARC_FARM_KDMA_CTX_AXUSER_HB_ASID` (asic_reg/arc_farm_kdma_ctx_axuser_regs.h:23).
pub const AXUSER_HB_ASID: u32 = 0x4E8_B800;
/// `mmARC_FARM_KDMA_CTX_AXUSER_HB_MMU_BP` (:25).
pub const AXUSER_HB_MMU_BP: u32 = 0x4E8_B804;
/// `mmARC_FARM_KDMA_CTX_WR_COMP_ADDR_HI` (asic_reg/arc_farm_kdma_ctx_regs.h:69).
pub const WR_COMP_ADDR_HI: u32 = 0x4E8_B8BC;
/// `mmARC_FARM_KDMA_CTX_WR_COMP_ADDR_LO` (:71).
pub const WR_COMP_ADDR_LO: u32 = 0x4E8_B8C0;
/// `mmARC_FARM_KDMA_CTX_WR_COMP_WDATA` (:73).
pub const WR_COMP_WDATA: u32 = 0x4E8_B8C4;
/// `mmARC_FARM_KDMA_CTX_SRC_BASE_LO` (:83).
pub const SRC_BASE_LO: u32 = 0x4E8_B8D8;
/// `mmARC_FARM_KDMA_CTX_SRC_BASE_HI` (:85).
pub const SRC_BASE_HI: u32 = 0x4E8_B8DC;
/// `mmARC_FARM_KDMA_CTX_DST_BASE_LO` (:87).
pub const DST_BASE_LO: u32 = 0x4E8_B8E0;
/// `mmARC_FARM_KDMA_CTX_DST_BASE_HI` (:89).
pub const DST_BASE_HI: u32 = 0x4E8_B8E4;
/// `mmARC_FARM_KDMA_CTX_DST_TSIZE_0` (:91).
pub const DST_TSIZE_0: u32 = 0x4E8_B8E8;
/// `mmARC_FARM_KDMA_CTX_COMMIT` (:93).
pub const COMMIT: u32 = 0x4E8_B8EC;
/// `mmARC_FARM_KDMA_CFG_1` (asic_reg/arc_farm_kdma_regs.h:25).
pub const CFG_1: u32 = 0x4E8_B004;
/// `COMMIT.WR_COMP_EN` (asic_reg/arc_farm_kdma_ctx_masks.h:177).
pub const COMMIT_WR_COMP_EN: u32 = 1 << 0;
/// `COMMIT.MEM_SET` (:181).
pub const COMMIT_MEM_SET: u32 = 1 << 4;
/// `COMMIT.LIN` (:219).
pub const COMMIT_LIN: u32 = 1 << 31;

/// Bytes one step moves (a buffer on the stack).
const CHUNK: usize = 1024;
/// Chunks per [`Gaudi2::step`].
const CHUNKS_PER_STEP: u32 = 64;

/// The KDMA's context registers and its transfer in flight.
#[derive(Clone, Copy, Debug, Default)]
pub struct Kdma {
    asid: u32,
    mmu_bp: u32,
    src: u64,
    dst: u64,
    tsize: u32,
    comp_addr: u64,
    comp_wdata: u32,
    /// The `COMMIT` of the transfer in flight, and the bytes it moved.
    running: Option<(u32, u32)>,
}

impl Kdma {
    /// Idle, registers 0. O(1).
    pub const fn new() -> Self {
        Self {
            asid: 0,
            mmu_bp: 0,
            src: 0,
            dst: 0,
            tsize: 0,
            comp_addr: 0,
            comp_wdata: 0,
            running: None,
        }
    }

    /// Whether a transfer is in flight. O(1).
    pub fn busy(&self) -> bool {
        self.running.is_some()
    }

    /// Read register `reg`, if it is one of the KDMA's. O(1).
    pub fn read(&self, reg: u32) -> Option<u32> {
        let lo = |v: u64| v as u32;
        let hi = |v: u64| (v >> 32) as u32;
        Some(match reg {
            AXUSER_HB_ASID => self.asid,
            AXUSER_HB_MMU_BP => self.mmu_bp,
            WR_COMP_ADDR_HI => hi(self.comp_addr),
            WR_COMP_ADDR_LO => lo(self.comp_addr),
            WR_COMP_WDATA => self.comp_wdata,
            SRC_BASE_LO => lo(self.src),
            SRC_BASE_HI => hi(self.src),
            DST_BASE_LO => lo(self.dst),
            DST_BASE_HI => hi(self.dst),
            DST_TSIZE_0 => self.tsize,
            COMMIT => self.running.map_or(0, |(c, _)| c),
            _ => return None,
        })
    }

    /// Write register `reg`; `None` if it is not the KDMA's. A `COMMIT`
    /// with `LIN` while idle starts a transfer; `CFG_1.HALT` drops the one
    /// in flight. O(1).
    pub fn write(&mut self, reg: u32, val: u32) -> Option<()> {
        match reg {
            AXUSER_HB_ASID => self.asid = val,
            AXUSER_HB_MMU_BP => self.mmu_bp = val,
            WR_COMP_ADDR_HI => half(&mut self.comp_addr, true, val),
            WR_COMP_ADDR_LO => half(&mut self.comp_addr, false, val),
            WR_COMP_WDATA => self.comp_wdata = val,
            SRC_BASE_LO => half(&mut self.src, false, val),
            SRC_BASE_HI => half(&mut self.src, true, val),
            DST_BASE_LO => half(&mut self.dst, false, val),
            DST_BASE_HI => half(&mut self.dst, true, val),
            DST_TSIZE_0 => self.tsize = val,
            COMMIT => {
                if val & COMMIT_LIN != 0 && self.running.is_none() {
                    self.running = Some((val, 0));
                }
            }
            CFG_1 => {
                if val & 1 != 0 {
                    self.running = None;
                }
            }
            _ => return None,
        }
        Some(())
    }

    /// The read and write ASIDs, and whether the MMU is bypassed.
    fn who(&self) -> (u16, u16, bool) {
        (
            ((self.asid >> 16) & 0x3FF) as u16,
            (self.asid & 0x3FF) as u16,
            self.mmu_bp & 0x11 != 0,
        )
    }
}

impl Gaudi2 {
    /// Move up to [`CHUNKS_PER_STEP`] chunks of the KDMA's transfer; at its
    /// end the completion write. O(CHUNKS_PER_STEP x a 1 KiB copy).
    pub(super) fn kdma_step(&mut self, env: &mut dyn Env) {
        for _ in 0..CHUNKS_PER_STEP {
            let Some((commit, done)) = self.kdma.running else {
                return;
            };
            let k = self.kdma;
            let (rd, wr, bypass) = k.who();
            if done >= k.tsize {
                self.kdma.running = None;
                if commit & COMMIT_WR_COMP_EN != 0 {
                    let data = k.comp_wdata.to_le_bytes();
                    self.bypass = bypass;
                    let _ = self.engine_write(env, wr, k.comp_addr, &data);
                    self.bypass = false;
                }
                return;
            }
            let n = (k.tsize - done).min(CHUNK as u32);
            let mut buf = [0u8; CHUNK];
            let Some(chunk) = buf.get_mut(..n as usize) else {
                self.kdma.running = None;
                return;
            };
            self.bypass = bypass;
            let ok = if commit & COMMIT_MEM_SET != 0 {
                let fill = k.src.to_le_bytes();
                for (i, b) in chunk.iter_mut().enumerate() {
                    *b = fill.get((done as usize + i) % 8).copied().unwrap_or(0);
                }
                true
            } else {
                self.engine_read(env, rd, k.src.wrapping_add(u64::from(done)), chunk)
                    .is_ok()
            };
            let ok = ok
                && self
                    .engine_write(env, wr, k.dst.wrapping_add(u64::from(done)), chunk)
                    .is_ok();
            self.bypass = false;
            // A fault ends the transfer without its completion; after the
            // MMU's event, the KDMA's own (cause bit 0: a read returned
            // an error, bit 1: a write).
            self.kdma.running = ok.then_some((commit, done + n));
            if !ok {
                self.post_event_data(env, events::KDMA_CORE, [0b11, 0]);
                return;
            }
        }
    }
}
