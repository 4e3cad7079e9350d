// SPDX-License-Identifier: GPL-2.0

//! What a new context finds on the PCI Gaudi2: the sync-manager objects,
//! completion queues, fence counters and arbitration left to users, reset
//! (`gaudi2_restore_user_registers` at `gaudi2_ctx_init`,
//! gaudi2/gaudi2.c:10853-10960, 11217-11269), so nothing of one user's
//! synchronisation state is left for the next.
//!
//! The ranges are upstream's, in its order:
//!
//! - the CQ registers (`LBW_ADDR_L/H`, `LBW_DATA`, `CQ_BASE_ADDR_L/H`,
//!   `CQ_SIZE_LOG2`) of DCORE0 from the first user CQ on, and all of them
//!   in DCORE1..3;
//! - `MON_STATUS` (to `PROT`) and `MON_CONFIG` (to 0) of DCORE0 from the
//!   first unsecured monitor on (the sync-stream monitors, 125, where
//!   upstream starts at the first user monitor, 289), all of DCORE1..3's;
//! - DCORE0's SOBs from the first unsecured SOB on (the sync-stream SOBs,
//!   85, where upstream starts at 413), all of DCORE1..3's: a user CB may
//!   write the sync-stream objects (as on silicon), so they are reset too,
//!   and the next context's SIGNAL CSs count from 0;
//! - per enabled QMAN, the fence counters of its five CPs
//!   (`gaudi2_clear_qm_fence_counters_common`) and `ARB_CFG_0`
//!   (`gaudi2_restore_user_qm_registers`);
//! - per QMAN, the message bases of its five CPs (`CP_MSG_BASE0..3`) back
//!   to what `gaudi2_init_qman_cp` set: base 0 the monitors' payload
//!   registers, base 1 the SOBs, bases 2 and 3 zero.
//!
//! **Better than upstream:** upstream leaves `CP_MSG_BASE0..3` writable by
//! user CBs (`gaudi2_pb_pdma0_unsecured_regs`, gaudi2/gaudi2_security.c:
//! 373-412) but does not restore them at a context's start, so a
//! `MSG_SHORT` of the next user lands wherever the last one pointed a
//! base. Here they are restored with the fence counters: one KDMA job per
//! QMAN writes `CP_MSG_BASE0_ADDR_LO_0` .. `CP_FENCE3_CNT_4` from a
//! template ([`cp_template`]; the `CP_FENCEn_RDATA` words in between are
//! written with 0, which adds nothing to a counter).
//!
//! **Also better than upstream: the predicates.** `CP_PRED_0..4` are user
//! state too (a `LOAD_AND_EXE` loads them, and upstream leaves the
//! registers unsecured, gaudi2_security.c); upstream does not clear them,
//! so the next user's predicated packets follow the last user's
//! predicates. Here one KDMA memset per QMAN zeroes them (predicate 0
//! always holds).
//!
//! **The DMA cores' context registers** (upstream leaves
//! `CTX_SRC_BASE` .. `CTX_COMMIT` to users, gaudi2_security.c:132-166):
//! every user DMA core is held halted (`CFG_1.HALT`) from a context's
//! close (after the user monitors lost their ASID) until the next open
//! wrote its ASIDs, so a transfer a CB committed by registers never
//! outlives its context, and meanwhile its user registers are zeroed,
//! `COMMIT` excepted (a write of it commits): two KDMA memsets per core.
//!
//! **Difference from upstream:** upstream writes every register with a
//! `WREG32` (`gaudi2_memset_device_lbw`: about 50,000 of them per context);
//! here each range is one KDMA job into the register space (36 jobs,
//! two per QMAN, two per DMA core: 134), which on a device behind a socket is the difference
//! between seconds and milliseconds per open.

use super::PciGaudi2;
use crate::asic::{
    gaudi2_regs::{self as r, qm, sm, DCORES, DCORE_OFFSET},
    CFG_BASE, GAUDI2_FIRST_USER_CQ, GAUDI2_RESERVED_MON_NUMBER, GAUDI2_RESERVED_SOB_NUMBER,
};
use kernel::prelude::*;

/// SOBs, monitors and CQs per dcore's sync manager (`DCORE_NUM_OF_SOB`,
/// `DCORE_NUM_OF_MONITORS`, the 64 `GLBL_CQ_*` of each).
const SOBS: u32 = 8192;
const MONS: u32 = 2048;
const CQS: u32 = 64;
/// `MON_STATUS.PROT` (asic_reg/dcore0_sync_mngr_objs_masks.h:74).
const MON_STATUS_PROT: u32 = 1 << 9;
/// `CP_MSG_BASE0_ADDR_LO_0` .. `CP_FENCE3_CNT_4` of a QMAN (the 40
/// message-base halves, the 20 `RDATA`s and the 20 fence counters,
/// asic_reg/pdma0_qm_regs.h:255-413): 80 registers.
const QM_CP_SPAN: (u32, usize) = (qm::CP_MSG_BASE0_LO, 0x140);
/// Bytes from one message base to the next (`+ 0x28 n`), and from `LO` to
/// `HI` (`+ 0x14`), of the CPs' registers.
const MSG_BASE_STRIDE: usize = 0x28;
const MSG_BASE_HI: usize = 0x14;
/// `ARB_CFG_0` of a QMAN (pdma0_qm_regs.h:585).
const QM_ARB_CFG_0: u32 = 0x4A4;

/// A range to fill: register, bytes, value.
type Fill = (u32, u32, u32);

/// The sync-manager ranges of one dcore: from object `first_*` on in
/// DCORE0, all in the others. O(1).
fn sm_fills(dcore: u32) -> [Fill; 9] {
    let base = dcore * DCORE_OFFSET;
    let (cq, mon, sob) = if dcore == 0 {
        (
            GAUDI2_FIRST_USER_CQ,
            GAUDI2_RESERVED_MON_NUMBER,
            GAUDI2_RESERVED_SOB_NUMBER,
        )
    } else {
        (0, 0, 0)
    };
    let cqs = |reg: u32| (base + reg + 4 * cq, 4 * (CQS - cq), 0);
    let mons = |reg: u32, val| (base + reg + 4 * mon, 4 * (MONS - mon), val);
    [
        cqs(sm::LBW_ADDR_L_0),
        cqs(sm::LBW_ADDR_H_0),
        cqs(sm::LBW_DATA_0),
        cqs(sm::CQ_BASE_ADDR_L_0),
        cqs(sm::CQ_BASE_ADDR_H_0),
        cqs(sm::CQ_SIZE_LOG2_0),
        mons(sm::MON_STATUS_0, MON_STATUS_PROT),
        mons(sm::MON_CONFIG_0, 0),
        (base + sm::SOB_OBJ_0 + 4 * sob, 4 * (SOBS - sob), 0),
    ]
}

/// What a QMAN's [`QM_CP_SPAN`] holds after the restore: the message bases
/// `gaudi2_init_qman_cp` sets for all five CPs (base 0 the monitors'
/// `PAY_ADDRL`, base 1 the SOBs), everything else 0. O(1).
fn cp_template() -> [u8; QM_CP_SPAN.1] {
    let mut t = [0u8; QM_CP_SPAN.1];
    let bases = [
        CFG_BASE + u64::from(sm::MON_PAY_ADDRL_0),
        CFG_BASE + u64::from(sm::SOB_OBJ_0),
    ];
    for (n, base) in bases.into_iter().enumerate() {
        for (half, val) in [(0, base as u32), (MSG_BASE_HI, (base >> 32) as u32)] {
            for cp in 0..5 {
                let at = n * MSG_BASE_STRIDE + half + 4 * cp;
                if let Some(w) = t.get_mut(at..at + 4) {
                    w.copy_from_slice(&val.to_le_bytes());
                }
            }
        }
    }
    t
}

impl PciGaudi2 {
    /// Reset what users may have left in the sync managers and the QMANs
    /// (the module doc), before a context runs, with the KDMA held once.
    /// Sleeps; O(dcores + QMANs + DMA cores) KDMA jobs (134).
    pub(crate) fn restore_user_registers(&self) -> Result {
        // Held halted from the last close (and now, before the first open).
        self.hold_dma_cores(true)?;
        self.with_kdma(|k| {
            for dcore in 0..DCORES {
                for (reg, bytes, val) in sm_fills(dcore) {
                    k.memset(CFG_BASE + u64::from(reg), bytes, val)?;
                }
            }
            let cps = cp_template();
            for &base in r::QM_BASES.iter() {
                k.write(CFG_BASE + u64::from(base + QM_CP_SPAN.0), &cps)?;
                k.memset(CFG_BASE + u64::from(base + qm::CP_PRED_0), 4 * 5, 0)?;
                self.mmio.wreg(base + QM_ARB_CFG_0, 0)?;
            }
            for base in dma_cores() {
                for (off, bytes) in r::CORE_CTX_USER {
                    k.memset(CFG_BASE + u64::from(base + off), bytes, 0)?;
                }
            }
            Ok(())
        })
    }

    /// A context's end (its close's quiesce): the user monitors of every
    /// dcore given ASID 0 (none), so they do nothing until the next open
    /// gives them its own (a chain of monitors the user left armed dies
    /// here, before the restore cleans the dcores one by one; upstream
    /// resets the device instead, at the release), then every user DMA
    /// core halted and held halted until the next open (no monitor can
    /// commit a transfer any more, and a core's completion that commits
    /// another core finds it halted). Errors: the device is gone. O(7 +
    /// 10) register writes.
    pub(crate) fn end_user_context(&self) -> Result {
        for d in 0..DCORES {
            let off = d * DCORE_OFFSET;
            self.mmio.wreg(sm::GLBL_ASID_NONE_SEC_PRIV + off, 0)?;
            if d > 0 {
                self.mmio.wreg(sm::MSTR_IF_AXUSER_HB_ASID + off, 0)?;
            }
        }
        self.hold_dma_cores(true)
    }

    /// Set (`halt`) or clear every user DMA core's `CFG_1.HALT`: set, its
    /// transfer is dropped and no commit starts one. Held from a context's
    /// close (and the first open) until the open has restored the
    /// registers and written the new context's ASIDs. O(10) register
    /// writes.
    pub(crate) fn hold_dma_cores(&self, halt: bool) -> Result {
        for base in dma_cores() {
            self.mmio.wreg(base + r::CORE_CFG_1, u32::from(halt))?;
        }
        Ok(())
    }
}

/// The blocks of the ten user DMA cores (PDMA0/1, the eight EDMAs): each
/// DMA QMAN's + `PDMA_CORE_OFFSET`. O(QMANs).
fn dma_cores() -> impl Iterator<Item = u32> {
    r::QM_BASES
        .iter()
        .enumerate()
        .filter(|&(m, _)| r::qman_has_dma(m))
        .map(|(_, &base)| base + r::PDMA_CORE_OFFSET)
}

#[kunit_tests(hlrs_pci_user_state)]
mod tests {
    use super::*;

    #[test]
    fn the_ranges_are_upstreams() {
        let d0 = sm_fills(0);
        // DCORE0: the sync-stream SOBs (85) up to MON_PAY_ADDRL_0, the
        // sync-stream monitors (125) on, CQs 2...
        assert_eq!(d0[8], (0x410_0000 + 4 * 85, 4 * (8192 - 85), 0));
        assert_eq!(d0[8].0 + d0[8].1, sm::MON_PAY_ADDRL_0);
        assert_eq!(d0[6], (0x411_2000 + 4 * 125, 4 * (2048 - 125), 1 << 9));
        assert_eq!(d0[0], (0x411_E550 + 8, 4 * 62, 0));
        let d3 = sm_fills(3);
        assert_eq!(d3[8], (0x470_0000, 4 * 8192, 0));
        assert_eq!(d3[7], (0x471_0000, 4 * 2048, 0));
    }

    #[test]
    fn the_cp_template_restores_init_qman_cp() {
        let t = cp_template();
        let word = |at: usize| {
            t.get(at..at + 4)
                .map_or(u32::MAX, |w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]))
        };
        let mon = CFG_BASE + u64::from(sm::MON_PAY_ADDRL_0);
        let sob = CFG_BASE + u64::from(sm::SOB_OBJ_0);
        // Base 0 of CP 0 and CP 4, LO and HI; base 1 of CP 4.
        assert_eq!(word(0), mon as u32);
        assert_eq!(word(4 * 4 + 0x14), (mon >> 32) as u32);
        assert_eq!(word(0x28 + 4 * 4), sob as u32);
        assert_eq!(word(0x28 + 0x14), (sob >> 32) as u32);
        // Bases 2 and 3, the RDATAs and the counters: zero, to the end of
        // CP_FENCE3_CNT_4 (0x32C).
        assert!((0x50..0x140).step_by(4).all(|at| word(at) == 0));
        assert_eq!(QM_CP_SPAN.0 as usize + QM_CP_SPAN.1, 0x330);
    }
}
