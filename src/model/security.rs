// SPDX-License-Identifier: GPL-2.0

//! What a user's command buffer may write in the register space: the
//! range registers and protection bits upstream's `gaudi2_security.c` sets
//! up on silicon. Everything else an engine addresses there is a RAZWI.
//!
//! What is open to a user CB:
//!
//! - DCORE0's sync manager objects from the first ones the driver leaves
//!   unsecured, as upstream: SOBs from [`RESERVED_SOBS`] (85) and the six
//!   monitor arrays (`PAY_ADDRL`, `PAY_ADDRH`, `PAY_DATA`, `ARM`,
//!   `CONFIG`, `STATUS`) from [`RESERVED_MONS`] (125)
//!   (`gaudi2_init_pb_sm_objs`, gaudi2/gaudi2_security.c:2712-2760): the
//!   sync-stream objects (SOBs 85..412, monitors 125..288, which the
//!   driver's SIGNAL and WAIT CSs use from the user's own queues) and
//!   every object from the first one `HL_INFO_SYNC_MANAGER` reports (413,
//!   289) on. The driver's CS-completion, KDMA and decoder objects below
//!   stay closed. The CQ registers of the GLBL block (`CQ_BASE_ADDR_L/H`,
//!   `CQ_SIZE_LOG2`, `CQ_PI`, `LBW_ADDR_L/H`, `LBW_DATA`, `CQ_INC_MODE`;
//!   not `CQ_SEC`) from CQ [`FIRST_USER_CQ`]; upstream opens them from CQ
//!   1 (`gaudi2_pb_dcr0_sm_glbl_unsecured_regs`, :1683-1692), which leaves
//!   its KDMA CQ writable: this model keeps CQ 1 for the driver. A new
//!   context finds all of these zeroed (the driver's restore at open).
//! - DCORE1..3's sync manager objects, all of them (upstream writes the
//!   whole protection array of those blocks to all-ones, :2761-2769), and
//!   all 64 CQs' GLBL registers of those dcores
//!   (`gaudi2_pb_dcr_x_sm_glbl_unsecured_regs`, :1694-1703).
//! - In every QMAN of the PDMA, EDMA, MME and TPC kinds, the QMAN
//!   registers upstream lists as unsecured (`gaudi2_pb_pdma0_unsecured_regs`
//!   :131-417, `gaudi2_pb_dcr0_edma0_unsecured_regs` :446,
//!   `gaudi2_pb_dcr0_mme_qm_unsecured_regs` :778,
//!   `gaudi2_pb_dcr0_tpc0_unsecured_regs` :1270; the four lists name the
//!   same QMAN offsets): [`QM_USER`].
//!
//! - In the DMA core of every PDMA and EDMA, the context registers
//!   upstream lists as unsecured ([`CORE_USER`]): a CB may program and
//!   commit a linear transfer of its own (`super::dma_core`), with the
//!   ASID the driver gave the core.
//!
//! Not modelled as open although upstream opens them: the MME and TPC
//! engines' own registers and the QMANs' ARC AUX blocks (no engine of the
//! model runs them). Everything
//! else (MMUs and STLBs, other QMAN configuration such as `GLBL_CFG*`,
//! `PQ_*`, PCIe, PSOC, the SM's `SEC`/`PRIV` arrays) is closed.

use super::sm::{self, Reg};

pub use super::sm::{FIRST_USER_CQ, RESERVED_MONS, RESERVED_SOBS};
// Part of the API (the first objects `HL_INFO_SYNC_MANAGER` reports).
#[allow(unused_imports)]
pub use super::sm::{FIRST_USER_MON, FIRST_USER_SOB};

/// `mmPDMA0_QM_BASE` (asic_reg/gaudi2_blocks_linux_driver.h).
pub const PDMA0_QM: u32 = 0x4C8_A000;
/// `mmPDMA1_QM_BASE`.
pub const PDMA1_QM: u32 = 0x4C9_A000;
/// `mmDCORE0_TPC0_QM_BASE`, the first register of the dcores' blocks
/// (`mmDCORE0_MME_QM_BASE` 0x40CA000, `mmDCORE0_EDMA0/1_QM_BASE` 0x41CA000 /
/// 0x41DA000, `mmDCORE0_TPCn_QM_BASE` 0x400A000 + n x 0x10000; dcore `d` at
/// `d x` [`sm::DCORE_STRIDE`]).
const DCORE0_TPC0_QM: u32 = 0x400_A000;

/// The QMAN registers a user may write, as inclusive ranges of offsets in
/// the 4 KiB QMAN block (asic_reg/pdma0_qm_regs.h, the names of
/// `gaudi2_pb_pdma0_unsecured_regs`, gaudi2/gaudi2_security.c:131-417).
pub const QM_USER: [(u16, u16); 19] = [
    (0x0E0, 0x0F0), // CQ_CFG0_0..4
    (0x150, 0x19C), // CQ_PTR_LO/HI, CQ_TSIZE, CQ_CTL _0..4
    (0x1F0, 0x32C), // CP_MSG_BASE0..3_ADDR_LO/HI, CP_FENCE0..3_RDATA/CNT
    (0x3A4, 0x3C8), // CP_PRED_0..4, CP_PRED_UPEN_0..4
    (0x4A4, 0x4B8), // ARB_CFG_0, ARB_CHOICE_Q_PUSH, ARB_WRR_WEIGHT_0..3
    (0x5E0, 0x6E0), // ARB_MST_CRED_INC, ARB_MST_CHOICE_PUSH_OFST_0..63
    (0x704, 0x70C), // ARB_SLV_MASTER_INC_CRED_OFST, ARB_MST_SLAVE_EN(_1)
    (0x714, 0x718), // ARB_SLV_ID, ARB_MST_QUIET_PER
    (0x754, 0x758), // ARB_BASE_LO/HI
    (0x800, 0x800), // ARC_CQ_CFG0
    (0x808, 0x814), // ARC_CQ_PTR_LO/HI, ARC_CQ_TSIZE, ARC_CQ_CTL
    (0x82C, 0x830), // ARC_CQ_PTR_LO_STS, ARC_CQ_PTR_HI_STS
    (0x840, 0x840), // ARC_CQ_IFIFO_MSG_BASE_LO
    (0x848, 0x848), // ARC_CQ_CTL_MSG_BASE_LO
    (0x850, 0x850), // CQ_IFIFO_MSG_BASE_LO
    (0x858, 0x858), // CQ_CTL_MSG_BASE_LO
    (0x860, 0x88C), // CQ_IFIFO_CI_0..4, ARC_CQ_IFIFO_CI, CQ_CTL_CI_0..4, ARC_CQ_CTL_CI
    (0x894, 0x898), // CP_EXT_SWITCH, CP_SWITCH_WD_SET
    (0x900, 0x97C), // QMAN_WR64_BASE_ADDR0..15 (LO and HI)
];

/// Whether an engine running a user CB may write the register `reg`
/// (upstream's `mm*` address, `CFG_BASE`-relative). O(1) (at most
/// [`QM_USER`]'s 19 ranges).
pub fn user_writable(reg: u32) -> bool {
    reg % 4 == 0 && (sm_user(reg) || qman_user(reg) || dma_core_user(reg))
}

/// The DMA core registers upstream leaves to users, as offsets in the
/// core's 4 KiB block (`gaudi2_pb_pdma0_unsecured_regs` :132-166,
/// `gaudi2_pb_dcr0_edma0_unsecured_regs` :447-481, the same offsets):
/// `CTX_AXUSER_HB_WR_REDUCTION`, and the context block from
/// `CTX_TE_NUMROWS` to `CTX_COMMIT` (not `RATE_LIM_TKN`, `PWRLP`, nor the
/// ASID and MMU-bypass registers, which stay the driver's).
pub const CORE_USER: [(u16, u16); 2] = [(0x810, 0x810), (0x868, 0x8EC)];

/// A DMA core register open to users: in the core block (the QMAN's
/// + 0x1000) of a PDMA or EDMA. O(1).
fn dma_core_user(reg: u32) -> bool {
    let off = (reg & 0xFFF) as u16;
    let Some(qm) = (reg & !0xFFF).checked_sub(0x1000) else {
        return false;
    };
    let dma = qm == PDMA0_QM || qm == PDMA1_QM || {
        let rel = qm.wrapping_sub(DCORE0_TPC0_QM - 0xA000);
        let (d, o) = (rel / sm::DCORE_STRIDE, rel % sm::DCORE_STRIDE);
        d < sm::DCORES as u32 && (o == 0x1C_A000 || o == 0x1D_A000)
    };
    dma && CORE_USER.iter().any(|&(a, b)| (a..=b).contains(&off))
}

/// A sync manager register open to users. O(1).
fn sm_user(reg: u32) -> bool {
    let Some((d, r)) = sm::decode(reg) else {
        return false;
    };
    // The ASID registers stay the driver's in every dcore (GLBL and
    // MSTR_IF blocks: only their CQ registers are unsecured).
    match r {
        Reg::AsidNonSec | Reg::MstrAsid => false,
        _ if d != 0 => true,
        Reg::Sob(s) => s >= RESERVED_SOBS,
        Reg::Mon(_, m) => m >= RESERVED_MONS,
        Reg::Cq(_, c) => c >= FIRST_USER_CQ,
    }
}

/// A QMAN register open to users. O(19).
fn qman_user(reg: u32) -> bool {
    let off = (reg & 0xFFF) as u16;
    qman_block(reg & !0xFFF) && QM_USER.iter().any(|&(a, b)| (a..=b).contains(&off))
}

/// Whether `base` is the block of a PDMA, EDMA, MME or TPC QMAN. O(1).
fn qman_block(base: u32) -> bool {
    if base == PDMA0_QM || base == PDMA1_QM {
        return true;
    }
    let Some(rel) = base.checked_sub(DCORE0_TPC0_QM - 0xA000) else {
        return false;
    };
    let (d, off) = (rel / sm::DCORE_STRIDE, rel % sm::DCORE_STRIDE);
    if d >= sm::DCORES as u32 {
        return false;
    }
    // TPC6 is DCORE0's only (gaudi2_blocks_linux_driver.h).
    let tpcs = if d == 0 { 7 } else { 6 };
    let tpc = off
        .checked_sub(0xA000)
        .filter(|t| t % 0x1_0000 == 0)
        .is_some_and(|t| t / 0x1_0000 < tpcs);
    tpc || off == 0xC_A000 || off == 0x1C_A000 || off == 0x1D_A000
}
