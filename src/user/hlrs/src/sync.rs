//! Synchronisation between queues, as a runtime does it on Gaudi2: sync
//! objects (SOBs) that queues write, monitors armed on them that fire a
//! write (into another queue's fence counter, a completion queue, or
//! memory), and `FENCE` packets that hold a queue's command processor until
//! its counter is reached.
//!
//! Everything here builds packets; nothing talks to the driver. The
//! addresses are upstream's (include/gaudi2/asic_reg/*sync_mngr*, the
//! QMAN blocks of gaudi2_blocks_linux_driver.h), and the message bases are
//! the ones the driver programs into every CP (`gaudi2_init_qman_cp`):
//! `MSG_SHORT` base 0 is DCORE0's monitors, base 1 its SOBs.
//!
//! ```no_run
//! # fn main() -> std::io::Result<()> {
//! use hlrs::sync::{Fence, Monitor, Sob};
//! use hlrs::uapi::{GAUDI2_QUEUE_ID_PDMA_0_0, GAUDI2_QUEUE_ID_PDMA_1_0};
//! let dev = hlrs::Device::open_compute(0)?;
//! let sm = dev.sync_manager_info(0)?;
//! let sob = Sob::new(sm.first_available_sync_object);
//! let mon = Monitor::new(sm.first_available_monitor);
//! let fence = Fence::of(GAUDI2_QUEUE_ID_PDMA_1_0).unwrap();
//! // PDMA_1_0 waits for the SOB to reach 1; PDMA_0_0 signals it.
//! let waiter = hlrs::cs::Cb::new()
//!     .push(&mon.fire_into(fence, sob, 1))
//!     .push(&fence.wait(1));
//! let signaller = hlrs::cs::Cb::new().push(&sob.add(1));
//! # let _ = (waiter, signaller, GAUDI2_QUEUE_ID_PDMA_0_0);
//! # Ok(()) }
//! ```

use crate::uapi::*;

/// Base of the configuration space in the device's address map
/// (`CFG_BASE`, include/gaudi2/gaudi2.h:20).
pub const CFG_BASE: u64 = crate::gaudi2::CFG_BASE;
/// Register distance between two dcores (`DCORE_OFFSET`).
pub const DCORE_OFFSET: u32 = 0x20_0000;
/// `mmDCORE0_SYNC_MNGR_OBJS_SOB_OBJ_0`.
pub const SOB_OBJ_0: u32 = 0x410_0000;
/// `mmDCORE0_SYNC_MNGR_OBJS_MON_PAY_ADDRL_0`: message base 0.
pub const MON_PAY_ADDRL_0: u32 = 0x410_8000;
/// `MON_PAY_ADDRH_0` from [`MON_PAY_ADDRL_0`].
pub const MON_PAY_ADDRH: u32 = 0x2000;
/// `MON_PAY_DATA_0` from [`MON_PAY_ADDRL_0`].
pub const MON_PAY_DATA: u32 = 0x4000;
/// `MON_ARM_0` from [`MON_PAY_ADDRL_0`].
pub const MON_ARM: u32 = 0x6000;
/// `MON_CONFIG_0` from [`MON_PAY_ADDRL_0`].
pub const MON_CONFIG: u32 = 0x8000;
/// `mmDCORE0_SYNC_MNGR_GLBL_CQ_BASE_ADDR_L_0` and the other CQ arrays,
/// each of 64 u32s at its offset from it.
pub const CQ_BASE_ADDR_L_0: u32 = 0x411_E050;
/// CQ arrays from [`CQ_BASE_ADDR_L_0`]: `BASE_ADDR_H`.
pub const CQ_BASE_ADDR_H: u32 = 0x100;
/// `SIZE_LOG2`.
pub const CQ_SIZE_LOG2: u32 = 0x200;
/// `PI`.
pub const CQ_PI: u32 = 0x300;
/// `LBW_ADDR_L`.
pub const CQ_LBW_ADDR_L: u32 = 0x500;
/// `LBW_ADDR_H`.
pub const CQ_LBW_ADDR_H: u32 = 0x600;
/// `LBW_DATA`.
pub const CQ_LBW_DATA: u32 = 0x700;
/// `CQ_INC_MODE`.
pub const CQ_INC_MODE: u32 = 0x800;

/// `MSG_SHORT` message bases the driver programs (`gaudi2_init_qman_cp`).
const BASE_MON: u32 = 0;
const BASE_SOB: u32 = 1;

fn ctl(opcode: u32) -> u32 {
    packet_ctl(opcode, true, true)
}

/// A `MSG_SHORT` writing `value` at message base `base` + `offset`.
pub fn msg_short(base: u32, offset: u32, value: u32) -> [u8; 8] {
    let c = ctl(PACKET_MSG_SHORT) | (base & 3) << 22 | (offset & 0xFFFF);
    let mut p = [0u8; 8];
    p[0..4].copy_from_slice(&value.to_le_bytes());
    p[4..8].copy_from_slice(&c.to_le_bytes());
    p
}

/// A `MSG_LONG` writing the u32 `value` at the device address `addr`,
/// run only if predicate `pred` holds (0: always).
pub fn msg_long_pred(addr: u64, value: u32, pred: u32) -> [u8; 16] {
    let mut p = [0u8; 16];
    p[0..4].copy_from_slice(&value.to_le_bytes());
    p[4..8].copy_from_slice(&(ctl(PACKET_MSG_LONG) | (pred & 0x1F)).to_le_bytes());
    p[8..16].copy_from_slice(&addr.to_le_bytes());
    p
}

/// A register of the configuration space as a device address.
pub fn reg_addr(reg: u32) -> u64 {
    CFG_BASE + u64::from(reg)
}

/// A sync object of DCORE0.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sob(pub u32);

impl Sob {
    /// SOB `id` of DCORE0.
    pub const fn new(id: u32) -> Self {
        Self(id)
    }

    /// Its register (`mm*`).
    pub const fn reg(self) -> u32 {
        SOB_OBJ_0 + 4 * self.0
    }

    /// Its device address.
    pub fn addr(self) -> u64 {
        reg_addr(self.reg())
    }

    /// The sync group a monitor arms on (`id / 8`) and its bit in it.
    pub const fn group(self) -> (u32, u32) {
        (self.0 / 8, self.0 % 8)
    }

    /// `MSG_SHORT` setting it to the 15-bit `value`.
    pub fn set(self, value: u32) -> [u8; 8] {
        msg_short(BASE_SOB, 4 * self.0, value & 0x7FFF)
    }

    /// `MSG_SHORT` adding the 15-bit `value` (mode bit 31: ADD).
    #[allow(clippy::should_implement_trait)]
    pub fn add(self, value: u32) -> [u8; 8] {
        msg_short(BASE_SOB, 4 * self.0, value & 0x7FFF | 1 << 31)
    }

    /// `MSG_SHORT` adding `value` to the 60-bit value of the long SOB of
    /// four that starts here (`LONG_SOB`, bit 24).
    pub fn long_add(self, value: u32) -> [u8; 8] {
        msg_short(BASE_SOB, 4 * self.0, value & 0x7FFF | 1 << 24 | 1 << 31)
    }

    /// The four `MSG_SHORT`s setting the long SOB that starts here to the
    /// 60-bit `value`, 15 bits per SOB, low bits first (as libhlthunk
    /// splits a long SET).
    pub fn long_set(self, value: u64) -> [[u8; 8]; 4] {
        let part = |i: u32| ((value >> (15 * i)) & 0x7FFF) as u32;
        [0, 1, 2, 3].map(|i| msg_short(BASE_SOB, 4 * (self.0 + i), part(i) | 1 << 24))
    }
}

/// How a monitor compares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compare {
    /// Every SOB of the mask at least the value (`SOP` 0).
    AtLeast,
    /// Every SOB of the mask equal to it (`SOP` 1).
    Equal,
}

/// A monitor of DCORE0.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Monitor(pub u32);

/// `MON_CONFIG` bits (asic_reg/dcore0_sync_mngr_objs_masks.h:56-66).
pub mod config {
    /// `LONG_SOB`.
    pub const LONG_SOB: u32 = 1;
    /// `CQ_EN`: the payload address is a CQ index.
    pub const CQ_EN: u32 = 1 << 4;
    /// `WR_NUM` (6:5): payload writes - 1, from consecutive monitors.
    pub const fn wr_num(n: u32) -> u32 {
        (n & 3) << 5
    }
    /// `LBW_EN`: after the CQ write, the CQ's LBW write (an interrupt).
    pub const LBW_EN: u32 = 1 << 8;
}

impl Monitor {
    /// Monitor `id` of DCORE0.
    pub const fn new(id: u32) -> Self {
        Self(id)
    }

    fn write(self, array: u32, value: u32) -> [u8; 8] {
        msg_short(BASE_MON, array + 4 * self.0, value)
    }

    /// `MSG_SHORT`s setting `CONFIG` and the payload (`addr`, `data`).
    pub fn payload(self, config: u32, addr: u64, data: u32) -> Vec<u8> {
        [
            self.write(MON_CONFIG, config),
            self.write(0, addr as u32),
            self.write(MON_PAY_ADDRH, (addr >> 32) as u32),
            self.write(MON_PAY_DATA, data),
        ]
        .concat()
    }

    /// The `ARM` value for `sob` (its group, every other SOB of the group
    /// masked) reaching `value` (15 bits).
    pub fn arm_value(sob: Sob, cmp: Compare, value: u32) -> u32 {
        let (group, bit) = sob.group();
        let mask = !(1u32 << bit) & 0xFF;
        let sop = u32::from(cmp == Compare::Equal);
        (group & 0xFF) | mask << 8 | sop << 16 | (value & 0x7FFF) << 17
    }

    /// `MSG_SHORT` arming on `sob` reaching `value`.
    pub fn arm(self, sob: Sob, cmp: Compare, value: u32) -> [u8; 8] {
        self.write(MON_ARM, Self::arm_value(sob, cmp, value))
    }

    /// `MSG_SHORT` writing a raw `ARM` value.
    pub fn arm_raw(self, arm: u32) -> [u8; 8] {
        self.write(MON_ARM, arm)
    }

    /// A monitor that adds 1 to `fence` when `sob` is at least `value`:
    /// payload then arm (libhlthunk's `gaudi2_add_monitor`).
    pub fn fire_into(self, fence: Fence, sob: Sob, value: u32) -> Vec<u8> {
        let mut p = self.payload(0, fence.addr(), 1);
        p.extend_from_slice(&self.arm(sob, Compare::AtLeast, value));
        p
    }
}

/// A fence counter of one CP of a QMAN: what a `FENCE` packet waits on
/// and what a monitor's payload adds to (its `CP_FENCEn_RDATA`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fence {
    /// The QMAN's register block.
    pub qman: u32,
    /// The CP: a stream (0..3) or the lower CP (4).
    pub cp: u32,
    /// Which of its four counters.
    pub id: u32,
}

/// `CP_FENCE0_RDATA_0` of a QMAN block (asic_reg/pdma0_qm_regs.h:335).
const CP_FENCE0_RDATA: u32 = 0x290;

impl Fence {
    /// Counter 0 of the CP of queue `queue` (a stream's upper CP).
    pub fn of(queue: u32) -> Option<Self> {
        let (qman, cp) = qman_of(queue)?;
        Some(Self { qman, cp, id: 0 })
    }

    /// Counter 0 of the lower CP of `queue`'s QMAN.
    pub fn lower(queue: u32) -> Option<Self> {
        let (qman, _) = qman_of(queue)?;
        Some(Self { qman, cp: 4, id: 0 })
    }

    /// Counter `id` of the same CP.
    pub const fn counter(self, id: u32) -> Self {
        Self { id: id & 3, ..self }
    }

    /// The device address of its `RDATA` register (a write adds to it).
    pub fn addr(self) -> u64 {
        reg_addr(self.qman + CP_FENCE0_RDATA + 0x14 * self.id + 4 * self.cp)
    }

    /// The `FENCE` packet: wait until the counter is at least `target`,
    /// then take `target` off it.
    pub fn wait(self, target: u32) -> [u8; 8] {
        self.wait_dec(target, target)
    }

    /// The `FENCE` packet with its own decrement.
    pub fn wait_dec(self, target: u32, dec: u32) -> [u8; 8] {
        let cfg = (self.id & 3) << 30 | (target & 0xFF) << 16 | (dec & 0xF);
        let mut p = [0u8; 8];
        p[0..4].copy_from_slice(&cfg.to_le_bytes());
        p[4..8].copy_from_slice(&ctl(PACKET_FENCE).to_le_bytes());
        p
    }
}

/// `CP_MSG_BASE0_ADDR_LO_0` of a QMAN block (pdma0_qm_regs.h:255): base
/// `n` of CP `c` at `+ 0x28 n + 4 c`, its `HI` half at `+ 0x14`.
const CP_MSG_BASE0_LO: u32 = 0x1F0;

/// Two `MSG_LONG`s pointing message base `n` (0..3) of CP `cp` (a stream,
/// or 4 the lower CP) of the QMAN block `qman` at the device address
/// `addr`: a later `MSG_SHORT` of that CP with base `n` writes at
/// `addr + offset`. User CBs may write the bases (upstream leaves them
/// unsecured); the driver puts them back to its own at every new context.
pub fn set_msg_base(qman: u32, cp: u32, n: u32, addr: u64) -> Vec<u8> {
    let lo = qman + CP_MSG_BASE0_LO + 0x28 * (n & 3) + 4 * cp;
    let mut p = crate::cs::packet::msg_long(reg_addr(lo), addr as u32).to_vec();
    p.extend_from_slice(&crate::cs::packet::msg_long(
        reg_addr(lo + 0x14),
        (addr >> 32) as u32,
    ));
    p
}

/// The DMA core behind a PDMA or EDMA queue, programmed by a CB's
/// messages: the context registers upstream leaves to users
/// (`gaudi2_pb_pdma0_unsecured_regs`, gaudi2/gaudi2_security.c:132-166).
/// A CB writes the source, destination, size and completion, then
/// `COMMIT`; the core moves the bytes with the ASID the driver gave it
/// (the context's) and, when done, writes the completion (a SOB that a
/// monitor and a `FENCE` wait on). The core runs on its own: the CB goes
/// on at once, as on silicon.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DmaCore {
    /// The core's register block (its QMAN's + 0x1000).
    pub block: u32,
}

/// Offsets in a DMA core's block and its `COMMIT` bits: the model core's
/// own file (`src/model/dma_core.rs`), included as it is.
#[allow(dead_code, unreachable_pub)]
#[path = "../../../model/dma_core.rs"]
pub mod core_reg;

impl DmaCore {
    /// The core behind `queue`'s QMAN; `None` for a queue without one
    /// (MME, TPC) or no queue.
    pub fn of(queue: u32) -> Option<Self> {
        let (qm, _) = qman_of(queue)?;
        let dma = qm == 0x4C8_A000
            || qm == 0x4C9_A000
            || matches!(qm % DCORE_OFFSET, 0x1C_A000 | 0x1D_A000);
        dma.then_some(Self { block: qm + 0x1000 })
    }

    /// The device address of the core's register at `off`.
    pub fn reg(self, off: u32) -> u64 {
        reg_addr(self.block + off)
    }

    /// A `MSG_LONG` writing `value` into the core's register at `off`.
    pub fn write(self, off: u32, value: u32) -> [u8; 16] {
        crate::cs::packet::msg_long(self.reg(off), value)
    }

    /// The messages of a linear transfer of `tsize` bytes from `src` to
    /// `dst` (`memset`: `src` is the 64-bit fill value), writing
    /// `completion` (address, value) when done, then its `COMMIT`.
    pub fn linear(
        self,
        (src, dst, tsize): (u64, u64, u32),
        memset: bool,
        completion: Option<(u64, u32)>,
    ) -> Vec<u8> {
        use core_reg::*;
        let (comp, data) = completion.unwrap_or((0, 0));
        let mut commit = COMMIT_LIN;
        if memset {
            commit |= COMMIT_MEM_SET;
        }
        if completion.is_some() {
            commit |= COMMIT_WR_COMP_EN;
        }
        [
            (SRC_BASE_LO, src as u32),
            (SRC_BASE_HI, (src >> 32) as u32),
            (DST_BASE_LO, dst as u32),
            (DST_BASE_HI, (dst >> 32) as u32),
            (DST_TSIZE_0, tsize),
            (WR_COMP_ADDR_LO, comp as u32),
            (WR_COMP_ADDR_HI, (comp >> 32) as u32),
            (WR_COMP_WDATA, data),
            (COMMIT, commit),
        ]
        .iter()
        .flat_map(|&(off, v)| self.write(off, v))
        .collect()
    }
}

/// The QMAN block and stream of queue id `queue` (upstream's
/// `gaudi2_qm_blocks_bases`): PDMA, EDMA, MME and TPC queues.
pub fn qman_of(queue: u32) -> Option<(u32, u32)> {
    let stream = queue % 4;
    let engine = queue / 4;
    let dcore_block = |d: u32, i: u32| -> Option<u32> {
        let base = d * DCORE_OFFSET;
        Some(match i {
            0 => 0x41C_A000 + base,
            1 => 0x41D_A000 + base,
            2 => 0x40C_A000 + base,
            t @ 3..=8 => 0x400_A000 + base + (t - 3) * 0x1_0000,
            _ => return None,
        })
    };
    let block = match engine {
        0 => 0x4C8_A000,
        1 => 0x4C9_A000,
        // DCORE0: EDMA0, EDMA1, MME, TPC0..5, then TPC6.
        e @ 2..=10 => dcore_block(0, e - 2)?,
        11 => 0x406_A000,
        // DCORE1..3: EDMA0, EDMA1, MME, TPC0..5 each.
        e @ 12..=38 => dcore_block(1 + (e - 12) / 9, (e - 12) % 9)?,
        _ => return None,
    };
    Some((block, stream))
}

/// A `CP_DMA`: the CB of `tsize` bytes at `src` run by the lower CP of the
/// QMAN (`upper` false) or nested in the upper CP (`upper` true).
pub fn cp_dma(src: u64, tsize: u32, upper: bool) -> [u8; 16] {
    let c = ctl(PACKET_CP_DMA) | u32::from(upper) << 5;
    let mut p = [0u8; 16];
    p[0..4].copy_from_slice(&tsize.to_le_bytes());
    p[4..8].copy_from_slice(&c.to_le_bytes());
    p[8..16].copy_from_slice(&src.to_le_bytes());
    p
}

/// A `CB_LIST`: run entry `*index_addr` of the table of 16-byte packets at
/// `table_addr`.
pub fn cb_list(index_addr: u64, table_addr: u64) -> [u8; 24] {
    let mut p = [0u8; 24];
    p[4..8].copy_from_slice(&ctl(PACKET_CB_LIST).to_le_bytes());
    p[8..16].copy_from_slice(&index_addr.to_le_bytes());
    p[16..24].copy_from_slice(&table_addr.to_le_bytes());
    p
}

/// What a `LOAD_AND_EXE` does (its `cfg`: `dst` bit 0, `pmap` 1, `load`
/// 8, `exe` 9, `etype` 10; libhlthunk's `packet_load_and_exe`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LoadAndExe {
    /// Load the predicates from `src`: one u32 bitmap (`bitmap` true,
    /// `pmap` 1) or 32 u32s of which bit 0 counts. Predicate 0 is always
    /// true.
    Predicates {
        /// One bitmap rather than 32 words.
        bitmap: bool,
    },
    /// Load 16 bytes of scalars (R0..R3), and with `exe` run them: the
    /// packet at R0 (`etype` 0) or the 8 bytes in R2-R3 (`etype` 1).
    Scalars {
        /// Run them too.
        exe: Option<u32>,
    },
    /// Run the scalars loaded before (`etype` as above).
    Exe {
        /// Which.
        etype: u32,
    },
}

/// A `LOAD_AND_EXE` of `what` from `src`.
pub fn load_and_exe(what: LoadAndExe, src: u64) -> [u8; 16] {
    let cfg = match what {
        LoadAndExe::Predicates { bitmap } => 1 << 8 | u32::from(bitmap) << 1,
        LoadAndExe::Scalars { exe: None } => 1 << 8 | 1,
        LoadAndExe::Scalars { exe: Some(e) } => 1 << 8 | 1 | 1 << 9 | (e & 1) << 10,
        LoadAndExe::Exe { etype } => 1 | 1 << 9 | (etype & 1) << 10,
    };
    let mut p = [0u8; 16];
    p[0..4].copy_from_slice(&cfg.to_le_bytes());
    p[4..8].copy_from_slice(&ctl(PACKET_LOAD_AND_EXE).to_le_bytes());
    p[8..16].copy_from_slice(&src.to_le_bytes());
    p
}

/// An `ARB_POINT` (`rls` releases the arbitration, else it is taken with
/// `priority`).
pub fn arb_point(priority: u32, rls: bool) -> [u8; 8] {
    let cfg = (priority & 0xFF) | u32::from(rls) << 31;
    let mut p = [0u8; 8];
    p[0..4].copy_from_slice(&cfg.to_le_bytes());
    p[4..8].copy_from_slice(&ctl(PACKET_ARB_POINT).to_le_bytes());
    p
}

/// `GAUDI2_IRQ_NUM_USER_FIRST`: HW_IP_INFO's `first_available_interrupt_id`.
pub const FIRST_USER_INTERRUPT: u32 = 48;
/// `HL_COMMON_USER_CQ_INTERRUPT_ID`: any user CQ interrupt.
pub const ANY_CQ_INTERRUPT: u32 = 0xFFF;
/// `mmPCIE_MSIX_BASE`: a write of a vector number here raises it (the
/// address a CQ's `LBW_ADDR` names for an interrupt).
pub const PCIE_MSIX: u32 = 0x4C1_7000;

/// A completion queue of DCORE0 (from `HL_INFO_SYNC_MANAGER`'s first on).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cq(pub u32);

impl Cq {
    fn reg(self, array: u32) -> u32 {
        CQ_BASE_ADDR_L_0 + array + 4 * self.0
    }

    /// `MSG_LONG`s that make it a 64-bit counter at the device VA
    /// `counter` (`CQ_INC_MODE` 1: each monitor message adds its data),
    /// raising user interrupt `interrupt` after each add (libhlthunk's
    /// `gaudi2_add_cq_config_pkt`).
    pub fn counter(self, counter: u64, interrupt: u32) -> Vec<u8> {
        let msix = reg_addr(PCIE_MSIX);
        [
            (self.reg(0), counter as u32),
            (self.reg(CQ_BASE_ADDR_H), (counter >> 32) as u32),
            (self.reg(CQ_SIZE_LOG2), 3),
            (self.reg(CQ_INC_MODE), 1),
            (self.reg(CQ_LBW_ADDR_L), msix as u32),
            (self.reg(CQ_LBW_ADDR_H), (msix >> 32) as u32),
            (self.reg(CQ_LBW_DATA), interrupt),
        ]
        .iter()
        .flat_map(|&(reg, v)| crate::cs::packet::msg_long(reg_addr(reg), v))
        .collect()
    }
}

impl Monitor {
    /// A monitor that adds `data` to CQ `cq` (and raises its interrupt)
    /// when `sob` is at least `value`: payload then arm.
    pub fn fire_into_cq(self, cq: Cq, sob: Sob, value: u32, data: u32) -> Vec<u8> {
        let mut p = self.payload(config::CQ_EN | config::LBW_EN, u64::from(cq.0), data);
        p.extend_from_slice(&self.arm(sob, Compare::AtLeast, value));
        p
    }
}

/// How a wait on a user interrupt ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InterruptWait {
    /// `HL_WAIT_CS_STATUS_COMPLETED` or `_BUSY`.
    pub status: u32,
    /// The interrupt's time (ns, CLOCK_MONOTONIC) when reported.
    pub timestamp: Option<i64>,
}

impl crate::Device {
    fn interrupt_args(&self, args: &mut HlWaitCsArgs) -> std::io::Result<InterruptWait> {
        self.wait_cs_args(args)?;
        let ts = (args.out_flags() & HL_WAIT_CS_STATUS_FLAG_TIMESTAMP_VLD != 0)
            .then(|| args.out_timestamp_nsec());
        Ok(InterruptWait {
            status: args.out_status(),
            timestamp: ts,
        })
    }

    /// WAIT_CS on user interrupt `interrupt` until the u64 `index` of CB
    /// `cb_handle` is at least `target`, up to `timeout_us`
    /// (`HL_WAIT_CS_FLAGS_INTERRUPT | INTERRUPT_KERNEL_CQ`).
    pub fn wait_interrupt_cb(
        &self,
        interrupt: u32,
        (cb_handle, index): (u64, u64),
        target: u64,
        timeout_us: u64,
    ) -> std::io::Result<InterruptWait> {
        let mut a = HlWaitCsArgs {
            seq: cb_handle,
            timeout_us: target,
            flags: HL_WAIT_CS_FLAGS_INTERRUPT
                | HL_WAIT_CS_FLAGS_INTERRUPT_KERNEL_CQ
                | (interrupt << 20),
            interrupt_timeout_us: timeout_us,
            cq_counters_offset: index,
            ..Default::default()
        };
        self.interrupt_args(&mut a)
    }

    /// WAIT_CS on user interrupt `interrupt` until the u64 at the user
    /// address `addr` is at least `target`, up to `timeout_us`.
    pub fn wait_interrupt_addr(
        &self,
        interrupt: u32,
        addr: u64,
        target: u64,
        timeout_us: u64,
    ) -> std::io::Result<InterruptWait> {
        let mut a = HlWaitCsArgs {
            seq: addr,
            timeout_us: target,
            flags: HL_WAIT_CS_FLAGS_INTERRUPT | (interrupt << 20),
            interrupt_timeout_us: timeout_us,
            ..Default::default()
        };
        self.interrupt_args(&mut a)
    }

    /// Ask for the time user interrupt `interrupt` brings the u64 `index`
    /// of CB `cb_handle` to `target`, in element `element` of the
    /// timestamp buffer `ts_handle` (`REGISTER_INTERRUPT`).
    pub fn register_timestamp(
        &self,
        interrupt: u32,
        (cb_handle, index): (u64, u64),
        target: u64,
        (ts_handle, element): (u64, u64),
    ) -> std::io::Result<()> {
        let mut a = HlWaitCsArgs {
            seq: cb_handle,
            timeout_us: target,
            flags: HL_WAIT_CS_FLAGS_INTERRUPT
                | HL_WAIT_CS_FLAGS_INTERRUPT_KERNEL_CQ
                | HL_WAIT_CS_FLAGS_REGISTER_INTERRUPT
                | (interrupt << 20),
            cq_counters_offset: index,
            timestamp_handle: ts_handle,
            timestamp_offset: element,
            ..Default::default()
        };
        self.interrupt_args(&mut a).map(|_| ())
    }
}

/// What a SIGNAL CS returned (`hl_cs_out`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Signaled {
    /// The signal CS.
    pub fence: crate::cs::Fence,
    /// `sob_base_addr_offset` (0 on Gaudi2).
    pub sob_addr_offset: u32,
    /// `sob_count_before_submission`: the stream's SOB value once this
    /// signal ran (upstream's `next_sob_val - 1`; 0 at a SOB switch).
    pub sob_count: u16,
}

impl crate::Device {
    /// A CS of the one chunk `c` (what it points to outlives the call).
    fn sync_stream_cs(
        &self,
        c: HlCsChunk,
        flags: u32,
        timeout_s: u32,
    ) -> std::io::Result<HlCsArgs> {
        let c = [c];
        let mut a = HlCsArgs {
            chunks_execute: c.as_ptr() as u64,
            num_chunks_execute: 1,
            cs_flags: flags,
            timeout: timeout_s,
            ..Default::default()
        };
        self.cs_args(&mut a)?;
        Ok(a)
    }

    /// A SIGNAL CS on `queue` (`HL_CS_FLAGS_SIGNAL`): the driver's CB
    /// increments the queue's sync-stream SOB once the queue's earlier
    /// work ran. `EOPNOTSUPP` on a device whose queues do not run the sync
    /// manager.
    pub fn signal(&self, queue: u32) -> std::io::Result<Signaled> {
        self.signal_with(queue, 0, 0)
    }

    /// [`Self::signal`] with more `HL_CS_FLAGS_*` (a timestamp;
    /// `HL_CS_FLAGS_CUSTOM_TIMEOUT` with `timeout_s`).
    pub fn signal_with(&self, queue: u32, flags: u32, timeout_s: u32) -> std::io::Result<Signaled> {
        let c = HlCsChunk {
            queue_index: queue,
            ..Default::default()
        };
        let a = self.sync_stream_cs(c, HL_CS_FLAGS_SIGNAL | flags, timeout_s)?;
        Ok(Signaled {
            fence: crate::cs::Fence { seq: a.out_seq() },
            sob_addr_offset: a.out_sob_addr_offset(),
            sob_count: a.out_sob_count(),
        })
    }

    /// A WAIT CS on `queue` for the signal CS `signal` (`HL_CS_FLAGS_WAIT`,
    /// one sequence in `signal_seq_arr`): the queue's later work runs once
    /// the signal ran. `None` when the signal had finished (nothing to
    /// wait for: no CS, as upstream's `ULLONG_MAX`); `EINVAL` for a
    /// sequence not given yet or a CS that is no signal.
    pub fn wait_signal(
        &self,
        queue: u32,
        signal: u64,
    ) -> std::io::Result<Option<crate::cs::Fence>> {
        self.wait_signals_raw(queue, &[signal], (0, 0))
    }

    /// A WAIT CS with a raw signal array, more flags and a timeout (as
    /// [`Self::signal_with`]); tests: the driver takes exactly one signal.
    pub fn wait_signals_raw(
        &self,
        queue: u32,
        signals: &[u64],
        (flags, timeout_s): (u32, u32),
    ) -> std::io::Result<Option<crate::cs::Fence>> {
        let c = HlCsChunk {
            cb_handle: signals.as_ptr() as u64,
            queue_index: queue,
            cb_size: signals.len() as u32,
            ..Default::default()
        };
        let a = self.sync_stream_cs(c, HL_CS_FLAGS_WAIT | flags, timeout_s)?;
        Ok(Some(a.out_seq())
            .filter(|&s| s != u64::MAX)
            .map(|seq| crate::cs::Fence { seq }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_are_upstreams() {
        assert_eq!(Sob::new(413).addr(), 0x1000_007F_FC10_0000 + 4 * 413);
        assert_eq!(
            Fence::of(GAUDI2_QUEUE_ID_PDMA_1_0).map(Fence::addr),
            Some(0x1000_007F_FCC9_A290)
        );
        assert_eq!(
            Fence::lower(GAUDI2_QUEUE_ID_PDMA_0_0).map(|f| f.addr()),
            Some(0x1000_007F_FCC8_A2A0)
        );
        assert_eq!(
            qman_of(GAUDI2_QUEUE_ID_DCORE1_EDMA_0_0),
            Some((0x43C_A000, 0))
        );
        assert_eq!(
            qman_of(GAUDI2_QUEUE_ID_DCORE0_MME_0_0 + 1),
            Some((0x40C_A000, 1))
        );
        assert_eq!(qman_of(44), Some((0x406_A000, 0)));
        assert_eq!(
            qman_of(GAUDI2_QUEUE_ID_DCORE3_EDMA_0_0 + 7),
            Some((0x47D_A000, 3))
        );
        assert_eq!(qman_of(155), Some((0x465_A000, 3)));
        assert_eq!(qman_of(156), None);
    }

    #[test]
    fn packets_encode_their_fields() {
        let s = Sob::new(413).add(1);
        assert_eq!(u32::from_le_bytes(s[0..4].try_into().unwrap()), 1 << 31 | 1);
        let c = u32::from_le_bytes(s[4..8].try_into().unwrap());
        assert_eq!((c >> 24) & 0x1F, PACKET_MSG_SHORT);
        assert_eq!(((c >> 22) & 3, c & 0xFFFF), (1, 4 * 413));
        let arm = Monitor::arm_value(Sob::new(413), Compare::Equal, 5);
        assert_eq!(arm, 51 | (0xFF & !(1 << 5)) << 8 | 1 << 16 | 5 << 17);
        let f = Fence::of(0).unwrap().wait(1);
        assert_eq!(u32::from_le_bytes(f[0..4].try_into().unwrap()), 1 << 16 | 1);
        let long = Sob::new(416).long_set(0xFFFE_0003_FFF8_000);
        assert_eq!(
            u32::from_le_bytes(long[0][0..4].try_into().unwrap()),
            1 << 24
        );
        assert_eq!(
            u32::from_le_bytes(long[3][0..4].try_into().unwrap()) & 0x7FFF,
            0x7FFF
        );
    }
}
