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

use super::dma_core::{self, DmaCore, Wrote};
use super::qman::QMANS;
use super::{events, regs, Env, Gaudi2};

/// `mmARC_FARM_KDMA_BASE`: the KDMA's block ([`super::dma_core`]'s offsets
/// from here; asic_reg/arc_farm_kdma_ctx_regs.h, arc_farm_kdma_regs.h).
pub const BASE: u32 = 0x4E8_B000;
/// `mmARC_FARM_KDMA_CTX_AXUSER_HB_ASID`.
pub const AXUSER_HB_ASID: u32 = BASE + dma_core::AXUSER_HB_ASID;
/// `mmARC_FARM_KDMA_CTX_AXUSER_HB_MMU_BP`.
pub const AXUSER_HB_MMU_BP: u32 = BASE + dma_core::AXUSER_HB_MMU_BP;
/// `mmARC_FARM_KDMA_CTX_WR_COMP_ADDR_HI`.
pub const WR_COMP_ADDR_HI: u32 = BASE + dma_core::WR_COMP_ADDR_HI;
/// `mmARC_FARM_KDMA_CTX_WR_COMP_ADDR_LO`.
pub const WR_COMP_ADDR_LO: u32 = BASE + dma_core::WR_COMP_ADDR_LO;
/// `mmARC_FARM_KDMA_CTX_WR_COMP_WDATA`.
pub const WR_COMP_WDATA: u32 = BASE + dma_core::WR_COMP_WDATA;
/// `mmARC_FARM_KDMA_CTX_SRC_BASE_LO`.
pub const SRC_BASE_LO: u32 = BASE + dma_core::SRC_BASE_LO;
/// `mmARC_FARM_KDMA_CTX_SRC_BASE_HI`.
pub const SRC_BASE_HI: u32 = BASE + dma_core::SRC_BASE_HI;
/// `mmARC_FARM_KDMA_CTX_DST_BASE_LO`.
pub const DST_BASE_LO: u32 = BASE + dma_core::DST_BASE_LO;
/// `mmARC_FARM_KDMA_CTX_DST_BASE_HI`.
pub const DST_BASE_HI: u32 = BASE + dma_core::DST_BASE_HI;
/// `mmARC_FARM_KDMA_CTX_DST_TSIZE_0`.
pub const DST_TSIZE_0: u32 = BASE + dma_core::DST_TSIZE_0;
/// `mmARC_FARM_KDMA_CTX_COMMIT`.
pub const COMMIT: u32 = BASE + dma_core::COMMIT;
/// `mmARC_FARM_KDMA_CFG_1`.
pub const CFG_1: u32 = BASE + dma_core::CFG_1;
/// The `COMMIT` bits, the same for every DMA core (part of the API: the
/// hosts' tests program the KDMA with them).
#[allow(unused_imports)]
pub use super::dma_core::{COMMIT_LIN, COMMIT_MEM_SET, COMMIT_WR_COMP_EN};

/// Bytes one step moves (a buffer on the stack).
const CHUNK: usize = 1024;
/// Chunks per [`Gaudi2::step`], per DMA core.
const CHUNKS_PER_STEP: u32 = 64;

/// The KDMA: a DMA core at [`BASE`], the driver's (secured, its MMU bypass
/// its own to set).
#[derive(Clone, Copy, Debug, Default)]
pub struct Kdma(pub DmaCore);

impl Kdma {
    /// Idle, registers 0. O(1).
    pub const fn new() -> Self {
        Self(DmaCore::new())
    }

    /// Whether a transfer is in flight. O(1).
    pub fn busy(&self) -> bool {
        self.0.busy()
    }

    /// Read register `reg`, if it is one of the KDMA's. O(1).
    pub fn read(&self, reg: u32) -> Option<u32> {
        self.0.read(reg.checked_sub(BASE)?)
    }

    /// Write register `reg`; `None` if it is not the KDMA's. A `COMMIT`
    /// with `LIN` while idle starts a transfer; `CFG_1.HALT` drops the one
    /// in flight. O(1).
    pub fn write(&mut self, reg: u32, val: u32) -> Option<Wrote> {
        self.0.write(reg.checked_sub(BASE)?, val)
    }
}

/// Which DMA core a step moves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Core {
    /// The driver's KDMA: secured, its own bypass.
    Kdma,
    /// The DMA core behind QMAN `m` (a PDMA or EDMA): a user's, a
    /// non-secured initiator (`super::bus::user_closed`).
    Qman(usize),
}

impl Gaudi2 {
    /// The core `which`. O(1).
    fn core_mut(&mut self, which: Core) -> Option<&mut DmaCore> {
        match which {
            Core::Kdma => Some(&mut self.kdma.0),
            Core::Qman(m) => self.qmans.get_mut(m).map(|q| &mut q.core),
        }
    }

    /// Move up to [`CHUNKS_PER_STEP`] chunks of the KDMA's transfer and of
    /// every user DMA core's; at a transfer's end its completion write.
    /// O((1 + busy cores) x CHUNKS_PER_STEP x a 1 KiB copy + QMANS).
    pub(super) fn dma_cores_step(&mut self, env: &mut dyn Env) {
        self.core_step(env, Core::Kdma);
        for m in 0..QMANS {
            if self.qmans.get(m).is_some_and(|q| q.core.busy()) {
                self.core_step(env, Core::Qman(m));
            }
        }
    }

    /// Whether any DMA core has a transfer in flight. O(QMANS).
    pub(super) fn dma_cores_busy(&self) -> bool {
        self.kdma.busy() || self.qmans.iter().any(|q| q.core.busy())
    }

    /// One step of core `which`. O(CHUNKS_PER_STEP x a 1 KiB copy).
    fn core_step(&mut self, env: &mut dyn Env, which: Core) {
        let user = which != Core::Kdma;
        for _ in 0..CHUNKS_PER_STEP {
            let Some(core) = self.core_mut(which) else {
                return;
            };
            let Some((t, done)) = core.running() else {
                return;
            };
            let (rd, wr, bypass) = t.who;
            // A user core's bypass is never on: `MMU_BP` is the driver's
            // (secured), and the driver leaves it 0.
            let bypass = bypass && !user;
            if done >= t.tsize {
                core.stop();
                if let Some((addr, data)) = t.completion() {
                    let data = data.to_le_bytes();
                    self.bypass = bypass;
                    self.core_write(env, (user, wr), addr, &data);
                    self.bypass = false;
                }
                return;
            }
            let n = (t.tsize - done).min(CHUNK as u32);
            let mut buf = [0u8; CHUNK];
            let Some(chunk) = buf.get_mut(..n as usize) else {
                core.stop();
                return;
            };
            self.bypass = bypass;
            let (src, dst) = (
                t.src.wrapping_add(u64::from(done)),
                t.dst.wrapping_add(u64::from(done)),
            );
            let ok = if t.memset() {
                let fill = t.src.to_le_bytes();
                for (i, b) in chunk.iter_mut().enumerate() {
                    *b = fill.get((done as usize + i) % 8).copied().unwrap_or(0);
                }
                true
            } else {
                self.core_read(env, (user, rd), src, chunk)
            };
            let ok = ok && self.core_write(env, (user, wr), dst, chunk);
            self.bypass = false;
            let Some(core) = self.core_mut(which) else {
                return;
            };
            if ok {
                core.advance(n);
            } else {
                // A fault ends the transfer without its completion; after
                // the MMU's event (or the RAZWI's), the core's own (cause
                // bit 0: a read returned an error, bit 1: a write).
                core.stop();
                self.core_error(env, which, 0b11);
                return;
            }
        }
    }

    /// A core's read: a user core's as a non-secured initiator's
    /// (`user_read`), the KDMA's as the driver's. True when done. O(the
    /// access).
    fn core_read(
        &mut self,
        env: &mut dyn Env,
        (user, asid): (bool, u16),
        at: u64,
        buf: &mut [u8],
    ) -> bool {
        if user {
            self.user_read(env, asid, at, buf).is_ok()
        } else {
            self.engine_read(env, asid, at, buf).is_ok()
        }
    }

    /// A core's write, as [`Self::core_read`]. O(the access).
    fn core_write(
        &mut self,
        env: &mut dyn Env,
        (user, asid): (bool, u16),
        at: u64,
        data: &[u8],
    ) -> bool {
        if user {
            self.user_write(env, asid, at, data).is_ok()
        } else {
            self.engine_write(env, asid, at, data).is_ok()
        }
    }

    /// The error event of core `which` with `cause`, for a transfer its
    /// registers committed (second data word [`events::DMA_CORE_CTX`]: no
    /// QMAN error follows, unlike a `LIN_DMA` packet's). O(1).
    pub(super) fn core_error(&mut self, env: &mut dyn Env, which: Core, cause: u64) {
        let event = match which {
            Core::Kdma => events::KDMA_CORE,
            Core::Qman(m) => events::dma_core(regs::EVENT_QM.get(m).copied().unwrap_or(0)),
        };
        self.post_event_data(env, event, [cause, events::DMA_CORE_CTX]);
    }
}
