// SPDX-License-Identifier: GPL-2.0

//! The sync managers of the four dcores: sync objects (SOBs), monitors, and
//! the completion queues with their LBW interrupt write (reference §6.6 and
//! /work/shared/reference/libhlthunk-datapath.md §3.1-3.2; `gaudi2_init_sm`,
//! gaudi2/gaudi2.c:5754-5795; `gaudi2_arm_cq_monitor`, :7233-7259).
//!
//! # Layout
//!
//! Dcore `d` has its `OBJS` block at [`OBJS_BASE`] `+ d x` [`DCORE_STRIDE`]
//! (`mmDCORE0_SYNC_MNGR_OBJS_BASE` 0x4100000, DCORE1..3 at 0x4300000,
//! 0x4500000, 0x4700000, asic_reg/gaudi2_blocks_linux_driver.h) with
//! [`SOBS`] SOBs and [`MONS`] monitors (six arrays of u32: `PAY_ADDRL`,
//! `PAY_ADDRH`, `PAY_DATA`, `ARM`, `CONFIG`, `STATUS`,
//! asic_reg/dcore0_sync_mngr_objs_regs.h:23-40981), and its `GLBL` block
//! at [`GLBL_BASE`] `+ d x` [`DCORE_STRIDE`] with [`CQS`] CQs
//! (asic_reg/dcore0_sync_mngr_glbl_regs.h:51-1201). Other registers of the
//! blocks (`SM_SEC`, `SM_PRIV`, `CQ_SEC`, ...) are the register file's.
//!
//! # SOBs (asic_reg/dcore0_sync_mngr_objs_masks.h:24-31)
//!
//! A SOB write carries `VAL` (bits 14:0), `LONG_SOB` (bit 24) and `INC`
//! (bit 31). A short write sets the 15-bit value or adds to it with a
//! 15-bit wrap. A long SOB is a 60-bit value over SOBs `s..s+3`, 15 bits
//! each, `s` holding the low bits. What a long write does is taken from how
//! libhlthunk uses it (`gaudi2_add_write_to_sob_pkt`,
//! tests/gaudi2/hlthunk_tests_gaudi2.c): a long SET carries only 15 bits,
//! so the library splits a 60-bit SET into a long-mode write of the low 15
//! bits to `s` ("setting index 0 zeros indexes 1-3") followed by short
//! writes of `s+1..s+3`; so the model's long SET writes `VAL` to `s` and
//! zeroes `s+1..s+3`. A long ADD adds `VAL` to the 60-bit value, the carry
//! running across the 4 SOBs (modulo 2^60).
//!
//! # Monitors (masks.h:45-77)
//!
//! `ARM`: `SID` 7:0, `MASK` 15:8 (a 1 ignores that SOB of the group), `SOP`
//! 16 (0: each SOB >= `SOD`, 1: ==), `SOD` 31:17. `CONFIG`: `LONG_SOB` 0,
//! `CQ_EN` 4, `WR_NUM` 6:5, `LBW_EN` 8, `MSB_SID` 19:16, `LONG_HIGH_GROUP`
//! 31. Writing `ARM` arms the monitor on sync group `SID | MSB_SID << 8`
//! (8 SOBs); it is evaluated at arming and on every change of a SOB of its
//! group, and fires once: it disarms and sends `WR_NUM + 1` messages, the
//! k-th from monitor `m + k`'s `PAY_ADDR`/`PAY_DATA`. Several monitors on
//! one SOB all fire. `STATUS` reads `VALID` (bit 0, armed) and `PENDING`
//! (8:1, the group's unmasked SOBs the condition does not hold for yet).
//!
//! Long mode (`CONFIG.LONG_SOB` of monitor `m`): the monitor compares the
//! 60-bit value of SOBs `g x 8 + 4 x LONG_HIGH_GROUP ..+3` of its group `g`
//! (the mask is not used) against a 60-bit `SOD` spread over the `ARM`s of
//! monitors `m..m+3`, 15 bits each, `m` the low bits. libhlthunk
//! (`gaudi2_add_monitor`) writes the `ARM`s of `m+3, m+2, m+1` first (their
//! `SOD` the high parts, group 0) and `m`'s last: so an `ARM` write to a
//! monitor within 3 after a monitor whose `CONFIG` is long only keeps the
//! value (it does not arm), and writing `m`'s arms the long monitor. The
//! library also gives a long monitor at least 2 messages (its H6-3342
//! workaround), which `WR_NUM` models like any other.
//!
//! # Messages
//!
//! With `CQ_EN`, the first message goes to CQ `PAY_ADDRL` of the monitor's
//! dcore (a user's monitor only to a user CQ: DCORE0's CQs below
//! [`FIRST_USER_CQ`] are the driver's, and a user monitor's message to
//! one is refused like a register write a user CB may not make):
//! `CQ_INC_MODE` 0 writes the 32-bit `PAY_DATA` as the 4-byte entry
//! at `PI` (modulo the ring of `2^SIZE_LOG2` bytes at `CQ_BASE_ADDR`) and
//! increments `PI`; mode 1 adds `PAY_DATA` to the 64-bit counter at
//! `CQ_BASE_ADDR` (a read-modify-write through the bus); then with
//! `LBW_EN` the CQ's `LBW_DATA` is written to its `LBW_ADDR`. The further
//! messages (`WR_NUM` > 0) are plain writes (libhlthunk's dummy second
//! message of a long CQ monitor is a SOB write). Without `CQ_EN` each
//! message writes `PAY_DATA` to `PAY_ADDRH:L`: the register space is an
//! LBW write (`Gaudi2::reg_write`), anything else memory through the bus,
//! ASID 0 (the SM's kernel ASID, gaudi2.c:5787). An LBW write to the
//! virtual MSI-X doorbell (the page `CPUCP_PACKET_ENABLE_PCI_ACCESS` named,
//! gaudi2.c:5772-5774) or to the PCIe block's `PCIE_MSIX` (libhlthunk's CQ
//! interrupt address) raises the MSI-X vector its data names.
//!
//! # Work and bounds
//!
//! A SOB write evaluates only the monitors armed on that SOB's group: each
//! group heads an intrusive doubly-linked list of its armed monitors
//! (`u16` links), so a write costs O(monitors armed on the group) and
//! arming or disarming O(1). A monitor whose condition holds is disarmed
//! and queued on a FIFO of [`FIFO`] monitors to fire; the FIFO is drained
//! iteratively, at most [`FIRE_BUDGET`] firings per register write or
//! `Gaudi2::step`, never recursively (a message that writes a SOB or an
//! `ARM` only queues more firings). Chains and cycles of monitors (A
//! re-arms B, which re-arms A) thus cost a bounded amount per call, the
//! rest waits for the next `step` (`Gaudi2::pending` reports it). A firing
//! that finds the FIFO full is dropped and counted (`Stats::sm_dropped`).
//! A queued monitor's messages are read when it fires, not when it is
//! queued. A `STATUS` write that disarms a monitor (the driver's restore
//! at a context's open) also drops a firing of it still queued: silicon
//! sends a monitor's messages as it fires, so the queue is the model's
//! own, and a cycle of monitors one user left running ends with that
//! user's context instead of writing into the next one's.

use super::half;

/// Dcores, each with its sync manager.
pub const DCORES: usize = 4;
/// SOBs per dcore (`DCORE_NUM_OF_SOB`, gaudi2/gaudi2_security.c).
pub const SOBS: usize = 8192;
/// Monitors per dcore (`DCORE_NUM_OF_MONITORS`).
pub const MONS: usize = 2048;
/// Completion queues per dcore (the `GLBL_CQ_*` arrays hold 64).
pub const CQS: usize = 64;
/// Sync groups per dcore (8 SOBs each).
pub const GROUPS: usize = SOBS / 8;
/// Distance between two dcores' blocks (`DCORE_OFFSET`,
/// `mmDCORE1_SYNC_MNGR_OBJS_BASE - mmDCORE0_SYNC_MNGR_OBJS_BASE`).
pub const DCORE_STRIDE: u32 = 0x20_0000;
/// `mmDCORE0_SYNC_MNGR_OBJS_BASE` (gaudi2_blocks_linux_driver.h).
pub const OBJS_BASE: u32 = 0x410_0000;
/// `mmDCORE0_SYNC_MNGR_GLBL_BASE`.
pub const GLBL_BASE: u32 = 0x411_E000;
/// `SOB_OBJ_0` in the OBJS block (objs_regs.h:23).
pub const SOB_OBJ: u32 = 0x0;
/// `MON_PAY_ADDRL_0` (objs_regs.h:16407).
pub const MON_PAY_ADDRL: u32 = 0x8000;
/// `MON_PAY_ADDRH_0` (objs_regs.h:20503).
pub const MON_PAY_ADDRH: u32 = 0xA000;
/// `MON_PAY_DATA_0` (objs_regs.h:24599).
pub const MON_PAY_DATA: u32 = 0xC000;
/// `MON_ARM_0` (objs_regs.h:28695).
pub const MON_ARM: u32 = 0xE000;
/// `MON_CONFIG_0` (objs_regs.h:32791).
pub const MON_CONFIG: u32 = 0x1_0000;
/// `MON_STATUS_0` (objs_regs.h:36887).
pub const MON_STATUS: u32 = 0x1_2000;
/// `GLBL_CQ_BASE_ADDR_L_0` in the GLBL block (glbl_regs.h:51).
pub const CQ_BASE_ADDR_L: u32 = 0x050;
/// `GLBL_CQ_BASE_ADDR_H_0` (glbl_regs.h:179).
pub const CQ_BASE_ADDR_H: u32 = 0x150;
/// `GLBL_CQ_SIZE_LOG2_0` (glbl_regs.h:307).
pub const CQ_SIZE_LOG2: u32 = 0x250;
/// `GLBL_CQ_PI_0` (glbl_regs.h:435).
pub const CQ_PI: u32 = 0x350;
/// `GLBL_LBW_ADDR_L_0` (glbl_regs.h:691).
pub const CQ_LBW_ADDR_L: u32 = 0x550;
/// `GLBL_LBW_ADDR_H_0` (glbl_regs.h:819).
pub const CQ_LBW_ADDR_H: u32 = 0x650;
/// `GLBL_LBW_DATA_0` (glbl_regs.h:947).
pub const CQ_LBW_DATA: u32 = 0x750;
/// `GLBL_CQ_INC_MODE_0` (glbl_regs.h:1075).
pub const CQ_INC_MODE: u32 = 0x850;
/// `mmPCIE_MSIX_BASE` (gaudi2_blocks_linux_driver.h:22645): an LBW write
/// `GAUDI2_RESERVED_SOB_NUMBER` (gaudi2/gaudi2P.h:252-263: 64 CS
/// completions + 1 KDMA + 2 x 10 decoders): DCORE0's SOBs below it are the
/// driver's; the sync-stream SOBs from it on are writable by user CBs
/// (`gaudi2_init_pb_sm_objs`, gaudi2/gaudi2_security.c:2712-2760).
pub const RESERVED_SOBS: usize = 85;
/// `GAUDI2_RESERVED_MON_NUMBER` (gaudi2P.h:265-276: 64 + 1 + 2 x 3 x 10):
/// DCORE0's monitors below it are the driver's (secured, written with the
/// kernel's ASID); from it on they are unsecured.
pub const RESERVED_MONS: usize = 125;
/// [`RESERVED_SOBS`] plus `HL_RSVD_SOBS` (2,
/// common/habanalabs.h:127) per sync-stream queue (164): DCORE0's first
/// SOB a user may write (`first_available_user_sob[0]`,
/// gaudi2/gaudi2.c:2925-2926).
pub const FIRST_USER_SOB: usize = 413;
/// [`RESERVED_MONS`] plus `HL_RSVD_MONS` (1) per sync-stream queue (164):
/// `first_available_user_mon[0]` (gaudi2.c:2928-2929).
pub const FIRST_USER_MON: usize = 289;
/// `GAUDI2_RESERVED_CQ_NUMBER` (gaudi2P.h:280-284: CS completion, KDMA
/// completion): `first_available_cq[0]` (gaudi2.c:2935).
pub const FIRST_USER_CQ: usize = 2;
/// `GLBL_ASID_NONE_SEC_PRIV` from [`GLBL_BASE`]
/// (asic_reg/dcore0_sync_mngr_glbl_regs.h:47, 0x411E048).
pub const ASID_NONE_SEC_PRIV: u32 = 0x048;
/// `MSTR_IF_AXUSER_HB_ASID` from [`GLBL_BASE`]
/// (asic_reg/dcore0_sync_mngr_mstr_if_axuser_regs.h:23, 0x411FA80).
pub const MSTR_IF_AXUSER_HB_ASID: u32 = 0x1A80;
/// there raises the MSI-X vector its data names.
pub const PCIE_MSIX: u32 = 0x4C1_7000;
/// Monitors the fire FIFO holds.
pub const FIFO: usize = 512;
/// Monitor firings one register write or `Gaudi2::step` runs.
pub const FIRE_BUDGET: u32 = 64;

/// `MON_STATUS.PROT` (masks.h:74): written alone, the `STATUS` write
/// disarms the monitor (the driver's restore, a halt).
pub const MON_STATUS_PROT: u32 = 1 << 9;
/// `SOB_OBJ.VAL` (masks.h:24-25).
const SOB_VAL: u32 = 0x7FFF;
/// `SOB_OBJ.LONG_SOB` (masks.h:26-27).
const SOB_LONG: u32 = 1 << 24;
/// `SOB_OBJ.INC` (masks.h:30-31).
const SOB_INC: u32 = 1 << 31;
/// `MON_ARM.SOP` (masks.h:50-51): 1 equal, 0 greater or equal.
const ARM_SOP_EQ: u32 = 1 << 16;
/// `MON_CONFIG.LONG_SOB` (masks.h:56-57).
const CFG_LONG: u32 = 1;
/// `MON_CONFIG.CQ_EN` (masks.h:58-59).
const CFG_CQ_EN: u32 = 1 << 4;
/// `MON_CONFIG.LBW_EN` (masks.h:62-63).
const CFG_LBW_EN: u32 = 1 << 8;
/// `MON_CONFIG.LONG_HIGH_GROUP` (masks.h:66-67).
const CFG_LONG_HIGH: u32 = 1 << 31;
/// 60 bits of a long SOB.
const LONG_MASK: u64 = (1 << 60) - 1;
/// The bits of a monitor's disarm epoch a queued firing keeps.
const EPOCH_MASK: u16 = 0x1FFF;
/// No monitor or group: links hold index + 1, so that the idle state is
/// all zeros (a host or the kernel zero-fills it, no 300 KiB template).
const NIL: u16 = 0;

/// The index a link names (`usize::MAX`, which no array has, for [`NIL`]).
/// O(1).
fn at(link: u16) -> usize {
    usize::from(link).wrapping_sub(1)
}

/// The link naming index `i` (< 2^16 - 1). O(1).
fn link_to(i: usize) -> u16 {
    (i as u16).wrapping_add(1)
}

/// One monitor's registers and its place on its group's armed list.
#[derive(Clone, Copy, Debug)]
struct Monitor {
    pay_lo: u32,
    pay_hi: u32,
    data: u32,
    arm: u32,
    config: u32,
    /// Link to the group it is armed on, [`NIL`] when not armed.
    group: u16,
    /// Disarms by a `STATUS` write so far (modulo 2^13): a firing queued
    /// before one is dropped (see "Work and bounds").
    epoch: u16,
    next: u16,
    prev: u16,
}

impl Monitor {
    const IDLE: Self = Self {
        pay_lo: 0,
        pay_hi: 0,
        data: 0,
        arm: 0,
        config: 0,
        group: NIL,
        epoch: 0,
        next: NIL,
        prev: NIL,
    };

    /// Armed (on a group's list). O(1).
    fn armed(&self) -> bool {
        self.group != NIL
    }

    /// `PAY_ADDRH:L`. O(1).
    fn pay_addr(&self) -> u64 {
        (u64::from(self.pay_hi) << 32) | u64::from(self.pay_lo)
    }

    /// The sync group `ARM` and `CONFIG` name. O(1).
    fn sync_group(&self) -> u16 {
        ((self.arm & 0xFF) | (((self.config >> 16) & 0xF) << 8)) as u16
    }

    /// `ARM.SOD`. O(1).
    fn sod(&self) -> u16 {
        ((self.arm >> 17) & SOB_VAL) as u16
    }
}

/// One completion queue.
#[derive(Clone, Copy, Debug)]
struct Cq {
    base: u64,
    size_log2: u32,
    pi: u32,
    lbw_addr: u64,
    lbw_data: u32,
    inc_mode: u32,
}

impl Cq {
    const IDLE: Self = Self {
        base: 0,
        size_log2: 0,
        pi: 0,
        lbw_addr: 0,
        lbw_data: 0,
        inc_mode: 0,
    };
}

/// One dcore's sync manager.
struct Dcore {
    sobs: [u16; SOBS],
    mons: [Monitor; MONS],
    /// Per sync group, the first monitor armed on it.
    heads: [u16; GROUPS],
    cqs: [Cq; CQS],
    /// `GLBL_ASID_NONE_SEC_PRIV`.
    asid_nonsec: u32,
    /// `MSTR_IF_AXUSER_HB_ASID`.
    mstr_asid: u32,
}

impl Dcore {
    const IDLE: Self = Self {
        sobs: [0; SOBS],
        mons: [Monitor::IDLE; MONS],
        heads: [NIL; GROUPS],
        cqs: [Cq::IDLE; CQS],
        asid_nonsec: 0,
        mstr_asid: 0,
    };

    /// The 60-bit value of SOBs `s..s+3` (missing SOBs read 0). O(1).
    fn long_value(&self, s: usize) -> u64 {
        (0..4).fold(0, |v, k| {
            let x = s
                .checked_add(k)
                .and_then(|i| self.sobs.get(i))
                .map_or(0, |&x| u64::from(x));
            v | x << (15 * k)
        })
    }

    /// Store the 60-bit `v` in SOBs `s..s+3`. O(1).
    fn set_long(&mut self, s: usize, v: u64) {
        for k in 0..4 {
            if let Some(x) = s.checked_add(k).and_then(|i| self.sobs.get_mut(i)) {
                *x = ((v >> (15 * k)) & u64::from(SOB_VAL)) as u16;
            }
        }
    }

    /// The 60-bit `SOD` of a long monitor `m` (`ARM`s of `m..m+3`). O(1).
    fn long_sod(&self, m: usize) -> u64 {
        (0..4).fold(0, |v, k| {
            let x = m
                .checked_add(k)
                .and_then(|i| self.mons.get(i))
                .map_or(0, |x| u64::from(x.sod()));
            v | x << (15 * k)
        })
    }

    /// Whether an `ARM` write to `m` only holds high `SOD` bits of a long
    /// monitor among `m-3..m-1`. O(1).
    fn long_tail(&self, m: usize) -> bool {
        (1..4).any(|k| {
            m.checked_sub(k)
                .and_then(|i| self.mons.get(i))
                .is_some_and(|x| x.config & CFG_LONG != 0)
        })
    }

    /// The SOBs of its group `g` for which armed monitor `m`'s condition
    /// does not hold (bit `b` for SOB `8g + b`; a long monitor: all or
    /// none; 0 for a monitor not armed). O(1).
    fn pending(&self, m: usize) -> u8 {
        let Some(mon) = self.mons.get(m).filter(|x| x.armed()) else {
            return 0;
        };
        let base = at(mon.group).wrapping_mul(8);
        let equal = mon.arm & ARM_SOP_EQ != 0;
        if mon.config & CFG_LONG != 0 {
            let at = base
                + if mon.config & CFG_LONG_HIGH != 0 {
                    4
                } else {
                    0
                };
            let (v, sod) = (self.long_value(at), self.long_sod(m));
            let ok = if equal { v == sod } else { v >= sod };
            return if ok { 0 } else { 0xFF };
        }
        let mask = (mon.arm >> 8) & 0xFF;
        let sod = mon.sod();
        (0..8usize)
            .filter(|b| mask & (1 << b) == 0)
            .filter(|b| {
                !self
                    .sobs
                    .get(base + b)
                    .is_some_and(|&v| if equal { v == sod } else { v >= sod })
            })
            .fold(0u8, |p, b| p | 1 << b)
    }

    /// Link monitor `m` (not armed) on group `g`'s list. O(1).
    fn link(&mut self, m: usize, g: u16) {
        let Some(head) = self.heads.get_mut(usize::from(g)) else {
            return;
        };
        let old = *head;
        *head = link_to(m);
        if let Some(x) = self.mons.get_mut(at(old)) {
            x.prev = link_to(m);
        }
        if let Some(x) = self.mons.get_mut(m) {
            x.group = link_to(usize::from(g));
            x.next = old;
            x.prev = NIL;
        }
    }

    /// Disarm monitor `m` by a `STATUS` write: unlinked, and a firing of
    /// it still queued dropped (its epoch moves on). O(1).
    fn disarm(&mut self, m: usize) {
        self.unlink(m);
        if let Some(x) = self.mons.get_mut(m) {
            x.epoch = x.epoch.wrapping_add(1);
        }
    }

    /// Unlink monitor `m` from its group's list (disarm it). O(1).
    fn unlink(&mut self, m: usize) {
        let Some(x) = self.mons.get(m).copied().filter(|x| x.armed()) else {
            return;
        };
        match self.mons.get_mut(at(x.prev)) {
            Some(p) => p.next = x.next,
            None => {
                if let Some(h) = self.heads.get_mut(at(x.group)) {
                    *h = x.next;
                }
            }
        }
        if let Some(n) = self.mons.get_mut(at(x.next)) {
            n.prev = x.prev;
        }
        if let Some(x) = self.mons.get_mut(m) {
            x.group = NIL;
            x.next = NIL;
            x.prev = NIL;
        }
    }
}

/// The sync managers and the FIFO of monitors to fire.
pub struct SyncManager {
    dcores: [Dcore; DCORES],
    /// Ring of `dcore << 30 | monitor << 16 | epoch` to fire (the
    /// monitor's [`Monitor::epoch`] when it was queued, 13 bits).
    fifo: [u32; FIFO],
    head: usize,
    len: usize,
    /// Set while the FIFO is being drained (no nested draining).
    draining: bool,
    fired: u64,
    dropped: u64,
    /// Messages of user monitors refused (a register no user may write).
    refused: u64,
}

/// A register of a monitor (its six arrays, in address order).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum MonReg {
    PayL,
    PayH,
    Data,
    Arm,
    Config,
    Status,
}

/// A register of a CQ (its GLBL arrays the model interprets).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum CqReg {
    BaseL,
    BaseH,
    Size,
    Pi,
    LbwL,
    LbwH,
    LbwData,
    IncMode,
}

/// A register of the sync managers: the object it belongs to (its index
/// in its dcore) and which of the object's registers it is. The one
/// classifier both the model ([`SyncManager::read`] and
/// [`SyncManager::write`]) and the protection (`super::security`) use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Reg {
    Sob(usize),
    Mon(MonReg, usize),
    Cq(CqReg, usize),
    /// `GLBL_ASID_NONE_SEC_PRIV`: the ASID of the user's (non-secured)
    /// monitors' writes.
    AsidNonSec,
    /// `MSTR_IF_AXUSER_HB_ASID`: the ASID (write field 9:0) of every write
    /// of the dcore's sync manager (programmed for DCORE1..3).
    MstrAsid,
}

/// Which dcore's sync manager register `reg` is. O(1).
pub(super) fn decode(reg: u32) -> Option<(usize, Reg)> {
    if reg % 4 != 0 {
        return None;
    }
    let rel = reg.checked_sub(OBJS_BASE)?;
    let d = usize::try_from(rel / DCORE_STRIDE)
        .ok()
        .filter(|&d| d < DCORES)?;
    let off = rel % DCORE_STRIDE;
    let arr = |first: u32, n: usize| {
        let i = usize::try_from(off.checked_sub(first)? / 4).ok()?;
        (i < n).then_some(i)
    };
    let glbl = GLBL_BASE - OBJS_BASE;
    let r = if off < MON_PAY_ADDRL {
        Reg::Sob(arr(SOB_OBJ, SOBS)?)
    } else if off < MON_STATUS + 4 * MONS as u32 {
        let i = arr(MON_PAY_ADDRL, 6 * MONS)?;
        let f = match i / MONS {
            0 => MonReg::PayL,
            1 => MonReg::PayH,
            2 => MonReg::Data,
            3 => MonReg::Arm,
            4 => MonReg::Config,
            _ => MonReg::Status,
        };
        Reg::Mon(f, i % MONS)
    } else if off == glbl + ASID_NONE_SEC_PRIV {
        Reg::AsidNonSec
    } else if off == glbl + MSTR_IF_AXUSER_HB_ASID {
        Reg::MstrAsid
    } else if off >= glbl + CQ_BASE_ADDR_L {
        let i = arr(glbl + CQ_BASE_ADDR_L, 9 * CQS)?;
        let f = match i / CQS {
            0 => CqReg::BaseL,
            1 => CqReg::BaseH,
            2 => CqReg::Size,
            3 => CqReg::Pi,
            4 => return None, // GLBL_CQ_SEC: the register file's.
            5 => CqReg::LbwL,
            6 => CqReg::LbwH,
            7 => CqReg::LbwData,
            _ => CqReg::IncMode,
        };
        Reg::Cq(f, i % CQS)
    } else {
        return None;
    };
    Some((d, r))
}

impl Default for SyncManager {
    fn default() -> Self {
        Self::new()
    }
}

impl SyncManager {
    /// [`Self::new`] as a constant (all zeros): a host initialising a
    /// `Gaudi2` fills it in place instead of building a 300 KiB temporary
    /// on its stack.
    pub const IDLE: Self = Self::new();

    /// All SOBs 0, no monitor armed, no CQ, the FIFO empty. O(size: about
    /// 290 KiB).
    pub const fn new() -> Self {
        Self {
            dcores: [const { Dcore::IDLE }; DCORES],
            fifo: [0; FIFO],
            head: 0,
            len: 0,
            draining: false,
            fired: 0,
            dropped: 0,
            refused: 0,
        }
    }

    /// Monitors queued to fire. O(1).
    pub fn queued(&self) -> usize {
        self.len
    }

    /// Monitors fired so far, firings dropped on a full FIFO, and user
    /// monitors' messages refused (a register no user may write). O(1).
    pub fn counts(&self) -> (u64, u64, u64) {
        (self.fired, self.dropped, self.refused)
    }

    /// The register `reg` if it is a sync manager's the model gives meaning.
    /// O(1).
    pub fn read(&self, reg: u32) -> Option<u32> {
        let (d, r) = decode(reg)?;
        let dc = self.dcores.get(d)?;
        let mon = |m: usize| dc.mons.get(m);
        let cq = |c: usize| dc.cqs.get(c);
        match r {
            Reg::Sob(s) => dc.sobs.get(s).map(|&v| u32::from(v)),
            Reg::Mon(f, m) => mon(m).map(|x| match f {
                MonReg::PayL => x.pay_lo,
                MonReg::PayH => x.pay_hi,
                MonReg::Data => x.data,
                MonReg::Arm => x.arm,
                MonReg::Config => x.config,
                MonReg::Status => u32::from(x.armed()) | u32::from(dc.pending(m)) << 1,
            }),
            Reg::Cq(f, c) => cq(c).map(|q| match f {
                CqReg::BaseL => q.base as u32,
                CqReg::BaseH => (q.base >> 32) as u32,
                CqReg::Size => q.size_log2,
                CqReg::Pi => q.pi,
                CqReg::LbwL => q.lbw_addr as u32,
                CqReg::LbwH => (q.lbw_addr >> 32) as u32,
                CqReg::LbwData => q.lbw_data,
                CqReg::IncMode => q.inc_mode,
            }),
            Reg::AsidNonSec => Some(dc.asid_nonsec),
            Reg::MstrAsid => Some(dc.mstr_asid),
        }
    }

    /// Write `reg`; true if it is a sync manager register the model gives
    /// meaning (monitors whose condition now holds are queued to fire).
    /// O(monitors armed on the group) for a SOB write (two groups for a long
    /// write straddling them), O(1) otherwise.
    pub fn write(&mut self, reg: u32, val: u32) -> bool {
        let Some((d, r)) = decode(reg) else {
            return false;
        };
        let Some(dc) = self.dcores.get_mut(d) else {
            return false;
        };
        match r {
            Reg::Sob(s) => self.sob_write(d, s, val),
            Reg::Mon(MonReg::Arm, m) => self.arm(d, m, val),
            Reg::Mon(f, m) => {
                if let Some(x) = dc.mons.get_mut(m) {
                    match f {
                        MonReg::PayL => x.pay_lo = val,
                        MonReg::PayH => x.pay_hi = val,
                        MonReg::Data => x.data = val,
                        MonReg::Config => x.config = val,
                        MonReg::Arm | MonReg::Status => {}
                    }
                }
                // A STATUS write without VALID disarms (upstream's context
                // init writes PROT alone to every user monitor,
                // gaudi2/gaudi2.c:10899-10911), and drops a firing of it
                // still queued.
                if f == MonReg::Status && val & 1 == 0 {
                    dc.disarm(m);
                }
            }
            Reg::AsidNonSec => dc.asid_nonsec = val & 0x3FF,
            Reg::MstrAsid => dc.mstr_asid = val,
            Reg::Cq(f, c) => {
                if let Some(q) = dc.cqs.get_mut(c) {
                    match f {
                        CqReg::BaseL => half(&mut q.base, false, val),
                        CqReg::BaseH => half(&mut q.base, true, val),
                        CqReg::Size => q.size_log2 = val & 0xFF,
                        CqReg::Pi => q.pi = val,
                        CqReg::LbwL => half(&mut q.lbw_addr, false, val),
                        CqReg::LbwH => half(&mut q.lbw_addr, true, val),
                        CqReg::LbwData => q.lbw_data = val,
                        CqReg::IncMode => q.inc_mode = val & 1,
                    }
                }
            }
        }
        true
    }

    /// What the driver's restore at a context's open writes into dcore
    /// `d` (`gaudi2_restore_user_registers`; the PCI driver's KDMA
    /// memsets, `hw/pci/user_state.rs`), from SOB, monitor and CQ `first`
    /// on: the CQs' base, size, LBW address and data zeroed (not `PI` or
    /// `INC_MODE`), the monitors' `STATUS` written with `PROT` alone (they
    /// disarm) and `CONFIG` zeroed, the SOBs zeroed; then the groups that
    /// still have armed monitors evaluated, as the SOB writes would.
    /// The same result as those register writes one by one, at the cost of
    /// memory stores. O(objects + groups).
    pub fn clear_user(&mut self, d: usize, (sob, mon, cq): (usize, usize, usize)) {
        let Some(dc) = self.dcores.get_mut(d) else {
            return;
        };
        for q in dc.cqs.iter_mut().skip(cq) {
            q.base = 0;
            q.size_log2 = 0;
            q.lbw_addr = 0;
            q.lbw_data = 0;
        }
        for m in mon..MONS {
            dc.disarm(m);
            if let Some(x) = dc.mons.get_mut(m) {
                x.config = 0;
            }
        }
        for v in dc.sobs.iter_mut().skip(sob) {
            *v = 0;
        }
        for g in 0..GROUPS {
            if self
                .dcores
                .get(d)
                .and_then(|dc| dc.heads.get(g))
                .is_some_and(|&h| h != NIL)
            {
                self.evaluate_group(d, g);
            }
        }
    }

    /// SOB `s` of dcore `d` written with `val`, then its group(s)
    /// evaluated. O(monitors armed on the groups).
    fn sob_write(&mut self, d: usize, s: usize, val: u32) {
        let Some(dc) = self.dcores.get_mut(d) else {
            return;
        };
        let v = val & SOB_VAL;
        let last = if val & SOB_LONG != 0 {
            let new = if val & SOB_INC != 0 {
                dc.long_value(s).wrapping_add(u64::from(v)) & LONG_MASK
            } else {
                u64::from(v)
            };
            dc.set_long(s, new);
            s.saturating_add(3).min(SOBS - 1)
        } else {
            if let Some(x) = dc.sobs.get_mut(s) {
                *x = if val & SOB_INC != 0 {
                    ((u32::from(*x) + v) & SOB_VAL) as u16
                } else {
                    v as u16
                };
            }
            s
        };
        self.evaluate_group(d, s / 8);
        if last / 8 != s / 8 {
            self.evaluate_group(d, last / 8);
        }
    }

    /// Fire every monitor armed on group `g` of dcore `d` whose condition
    /// holds. O(monitors armed on the group).
    fn evaluate_group(&mut self, d: usize, g: usize) {
        let Some(dc) = self.dcores.get(d) else {
            return;
        };
        let mut m = dc.heads.get(g).copied().unwrap_or(NIL);
        // The list holds at most MONS monitors; the bound only guards it.
        for _ in 0..MONS {
            let Some(x) = self.dcores.get(d).and_then(|dc| dc.mons.get(at(m))) else {
                break;
            };
            let next = x.next;
            self.evaluate(d, at(m));
            m = next;
        }
    }

    /// Monitor `m` of dcore `d`: if armed and its condition holds, disarm
    /// and queue it. O(1).
    fn evaluate(&mut self, d: usize, m: usize) {
        let Some(dc) = self.dcores.get_mut(d) else {
            return;
        };
        if dc.mons.get(m).is_some_and(|x| x.armed()) && dc.pending(m) == 0 {
            dc.unlink(m);
            self.push(d, m);
        }
    }

    /// `ARM` of monitor `m` of dcore `d` written: (re)arm it on its group
    /// and evaluate it, unless it holds the high `SOD` bits of a long
    /// monitor. O(1).
    fn arm(&mut self, d: usize, m: usize, val: u32) {
        let Some(dc) = self.dcores.get_mut(d) else {
            return;
        };
        dc.unlink(m);
        let tail = dc.long_tail(m);
        let Some(x) = dc.mons.get_mut(m) else {
            return;
        };
        x.arm = val;
        if tail {
            return;
        }
        let g = x.sync_group();
        dc.link(m, g);
        self.evaluate(d, m);
    }

    /// The ASID of monitor `m` of dcore `d`'s writes: DCORE0's secured
    /// monitors (below [`RESERVED_MONS`]) write with the
    /// kernel's (`GLBL_ASID_SEC`, gaudi2/gaudi2.c:5790), its unsecured ones
    /// (the sync-stream monitors and the user's) with `GLBL_ASID_NONE_SEC_PRIV` (the context's, written at
    /// `gaudi2_mmu_prepare`, :7963); DCORE1..3's, all the user's, with
    /// `MSTR_IF_AXUSER_HB_ASID` (:7969-7971). O(1).
    fn asid(&self, d: usize, m: usize) -> u16 {
        let Some(dc) = self.dcores.get(d) else {
            return 0;
        };
        let asid = match d {
            0 if m < RESERVED_MONS => 0,
            0 => dc.asid_nonsec,
            _ => dc.mstr_asid,
        };
        (asid & 0x3FF) as u16
    }

    /// Queue monitor `m` of dcore `d` to fire (counted as dropped when the
    /// FIFO is full). O(1).
    fn push(&mut self, d: usize, m: usize) {
        if self.len >= FIFO {
            self.dropped = self.dropped.wrapping_add(1);
            return;
        }
        let epoch = self
            .dcores
            .get(d)
            .and_then(|dc| dc.mons.get(m))
            .map_or(0, |x| x.epoch);
        let at = (self.head + self.len) % FIFO;
        if let Some(e) = self.fifo.get_mut(at) {
            *e = (d as u32) << 30 | (m as u32 & 0x3FFF) << 16 | u32::from(epoch & EPOCH_MASK);
            self.len += 1;
        }
    }

    /// The next monitor to fire, skipping those disarmed by a `STATUS`
    /// write since they were queued. O(1) amortized.
    fn pop(&mut self) -> Option<(usize, usize)> {
        while self.len > 0 {
            let e = self.fifo.get(self.head).copied()?;
            self.head = (self.head + 1) % FIFO;
            self.len -= 1;
            let (d, m) = ((e >> 30) as usize, ((e >> 16) & 0x3FFF) as usize);
            let now = self
                .dcores
                .get(d)
                .and_then(|dc| dc.mons.get(m))
                .map_or(0, |x| x.epoch & EPOCH_MASK);
            if (e & 0xFFFF) as u16 == now {
                return Some((d, m));
            }
        }
        None
    }
}

/// What a sync manager's monitors reach when they fire: the host's
/// register space and memory. Each host of the model core implements it:
/// [`Gaudi2`] (host 2, through its MMUs and register file) and the
/// in-module simulation (host 1, `crate::hw::sim::sync_manager`), so both
/// fire monitors, write CQs and raise interrupts with this code.
pub trait SmPort {
    /// The sync manager whose monitors fire. O(1).
    fn sm(&mut self) -> &mut SyncManager;
    /// Read `buf.len()` bytes at `addr` with `asid`; false on a fault.
    /// O(an engine read).
    fn read(&mut self, asid: u16, addr: u64, buf: &mut [u8]) -> bool;
    /// Write `data` at `addr` with `asid`: an LBW write into the register
    /// space, or memory through the MMUs; false on a fault. O(an engine
    /// write, or a register write: more firings queued).
    fn write(&mut self, asid: u16, addr: u64, data: &[u8]) -> bool;
    /// The virtual MSI-X doorbell's address (0: none yet). O(1).
    fn msix_doorbell(&self) -> u64;
    /// Raise MSI-X `vector` (< 128). O(1).
    fn raise(&mut self, vector: u16);
    /// Whether a user's (unsecured) monitor or CQ may write
    /// `[addr, addr + len)`: the hosts' `bus::user_closed` (no host bus
    /// address; in the register space only what `security::user_writable`
    /// opens). The check lives with the hosts so that this file and
    /// `security.rs`, which classifies registers with [`decode`], do not
    /// import each other. O(words in the register space).
    fn user_reaches(&self, addr: u64, len: u64) -> bool;
}

/// Fire up to [`FIRE_BUDGET`] queued monitors of `port`'s sync manager,
/// unless already firing (a message's write only queues more); true while
/// some are left. O(FIRE_BUDGET x (WR_NUM + 1) messages).
pub fn drain<P: SmPort + ?Sized>(port: &mut P) -> bool {
    if port.sm().draining {
        return port.sm().len > 0;
    }
    port.sm().draining = true;
    for _ in 0..FIRE_BUDGET {
        let Some((d, m)) = port.sm().pop() else {
            break;
        };
        fire(port, d, m);
    }
    let sm = port.sm();
    sm.draining = false;
    sm.len > 0
}

/// Monitor `m` of dcore `d` fires: its `WR_NUM + 1` messages, the first to
/// a CQ with `CQ_EN`. O(WR_NUM + 1).
fn fire<P: SmPort + ?Sized>(port: &mut P, d: usize, m: usize) {
    let sm = port.sm();
    let Some(config) = sm
        .dcores
        .get(d)
        .and_then(|dc| dc.mons.get(m))
        .map(|x| x.config)
    else {
        return;
    };
    sm.fired = sm.fired.wrapping_add(1);
    let asid = sm.asid(d, m);
    // DCORE0's monitors below the first unsecured one are the driver's
    // (secured); every other monitor's writes are the user's, and into the
    // register space they reach only what a user CB may write.
    let secured = d == 0 && m < RESERVED_MONS;
    // A user's monitor acts with its context's ASID; with none (0, the
    // kernel's: before the first context, and from a context's close to
    // the next one's open, while the driver restores the objects) it does
    // nothing. So no chain of monitors a user left armed outlives its
    // context, however it spans the dcores the restore cleans one by one.
    if !secured && asid == 0 {
        sm.refused = sm.refused.wrapping_add(1);
        return;
    }
    let writes = ((config >> 5) & 3) as usize + 1;
    for k in 0..writes {
        let Some(x) = port
            .sm()
            .dcores
            .get(d)
            .and_then(|dc| dc.mons.get(m.saturating_add(k)))
            .copied()
        else {
            break;
        };
        if k == 0 && config & CFG_CQ_EN != 0 {
            let lbw = config & CFG_LBW_EN != 0;
            cq_write(port, (d, asid, secured), x.pay_lo as usize, x.data, lbw);
        } else {
            message(port, (asid, secured), x.pay_addr(), x.data);
        }
    }
}

/// A monitor's message to CQ `c` of dcore `d`: the ring entry or the
/// 64-bit add, then with `lbw` the CQ's LBW write. A user's (unsecured)
/// monitor may not post to the driver's CQs (DCORE0's below
/// [`FIRST_USER_CQ`]: CQ 0 carries the driver's CS completions): refused
/// and counted as a refused message, the CQ's `PI` untouched. A user's
/// CQ whose entry or counter lies in the register space reaches only the
/// words a user CB may write there; any other write is refused and
/// counted (the `PI` moves on, as a RAZWI'd write leaves it). O(1).
fn cq_write<P: SmPort + ?Sized>(
    port: &mut P,
    (d, asid, secured): (usize, u16, bool),
    c: usize,
    data: u32,
    lbw: bool,
) {
    if !secured && d == 0 && c < FIRST_USER_CQ {
        let sm = port.sm();
        sm.refused = sm.refused.wrapping_add(1);
        return;
    }
    let Some(q) = port
        .sm()
        .dcores
        .get(d)
        .and_then(|dc| dc.cqs.get(c))
        .copied()
    else {
        return;
    };
    // A user's CQ lies where its user put it: into the register space
    // only words a user CB may write, as a monitor's message.
    let closed = |port: &P, a: u64, words: u64| !secured && !port.user_reaches(a, 4 * words);
    if q.inc_mode & 1 != 0 {
        let mut b = [0u8; 8];
        if closed(port, q.base, 2) {
            let sm = port.sm();
            sm.refused = sm.refused.wrapping_add(1);
        } else if port.read(asid, q.base, &mut b) {
            let v = u64::from_le_bytes(b).wrapping_add(u64::from(data));
            let _ = port.write(asid, q.base, &v.to_le_bytes());
        }
    } else {
        let entries = 1u64.checked_shl(q.size_log2).map_or(0, |b| b / 4);
        if let Some(at) = u64::from(q.pi)
            .checked_rem(entries)
            .and_then(|slot| q.base.checked_add(slot * 4))
        {
            if closed(port, at, 1) {
                let sm = port.sm();
                sm.refused = sm.refused.wrapping_add(1);
            } else {
                let _ = port.write(asid, at, &data.to_le_bytes());
            }
        }
        if let Some(x) = port.sm().dcores.get_mut(d).and_then(|dc| dc.cqs.get_mut(c)) {
            x.pi = x.pi.wrapping_add(1);
        }
    }
    if lbw {
        lbw_interrupt(
            port,
            (if secured { 0 } else { asid }, secured),
            q.lbw_addr,
            q.lbw_data,
        );
    }
}

/// A monitor's message: `data` at `addr` with `asid`; into the register
/// space only what a user CB may write unless the monitor is `secured`
/// (else a RAZWI: dropped, counted in `SyncManager::counts`). O(a write).
fn message<P: SmPort + ?Sized>(port: &mut P, (asid, secured): (u16, bool), addr: u64, data: u32) {
    if !secured && !port.user_reaches(addr, 4) {
        let sm = port.sm();
        sm.refused = sm.refused.wrapping_add(1);
        return;
    }
    let _ = port.write(asid, addr, &data.to_le_bytes());
}

/// An LBW write of `data` at `addr` by a monitor with `asid`: an MSI-X at
/// the PCIe block's `PCIE_MSIX` (unsecured upstream: any CQ may raise any
/// vector, gaudi2/gaudi2.c:6688-6694), for the driver's own (`secured`)
/// monitors also at the virtual doorbell's and `PCIE_MSIX`'s bus
/// addresses; else a plain write, a user's with its monitor's ASID and
/// where a non-secured initiator may go. O(1) (a bus write).
fn lbw_interrupt<P: SmPort + ?Sized>(
    port: &mut P,
    (asid, secured): (u16, bool),
    addr: u64,
    data: u32,
) {
    let db = port.msix_doorbell();
    let msix = u64::from(PCIE_MSIX);
    let cfg_msix = super::regs::CFG_BASE.wrapping_add(msix);
    let alias = secured && ((db != 0 && addr == db) || addr == msix);
    if alias || addr == cfg_msix {
        if let Ok(vector) = u16::try_from(data) {
            if vector < 128 {
                port.raise(vector);
            }
        }
    } else {
        message(port, (asid, secured), addr, data);
    }
}
