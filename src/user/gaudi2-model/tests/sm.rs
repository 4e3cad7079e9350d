// SPDX-License-Identifier: GPL-2.0

//! Host tests of the sync managers (`src/model/sm.rs`) and of the security
//! predicate (`src/model/security.rs`), driven through `Gaudi2::reg_write`
//! (a register write, as the driver's or an engine's LBW write) and
//! `Gaudi2::step`.

use gaudi2_model::security::{self, user_writable, FIRST_USER_CQ, RESERVED_MONS, RESERVED_SOBS};
use gaudi2_model::sm::{self, DCORE_STRIDE, FIFO, FIRE_BUDGET, GLBL_BASE, OBJS_BASE};
use gaudi2_model::{regs, Config, Gaudi2};

mod common;
use common::TestEnv;

/// Host memory the monitors write: one window at [`HOST`].
const HOST: u64 = 0x10_0000;
const HOST_LEN: usize = 0x1_0000;

/// A device on the heap (about 360 KiB) and its environment.
fn device() -> (Box<Gaudi2>, TestEnv) {
    let mut env = TestEnv::new(0);
    env.map(HOST, HOST_LEN);
    let mut g = Box::new(Gaudi2::new(&Config::with_dram(1 << 20)));
    open_context(&mut g, &mut env, 1);
    (g, env)
}

/// What the driver writes at a context's open (`gaudi2_mmu_prepare`): the
/// user monitors' ASID in every dcore (0 at close: they do nothing).
fn open_context(g: &mut Gaudi2, env: &mut TestEnv, asid: u32) {
    for d in 0..4 {
        let glbl = GLBL_BASE + d * DCORE_STRIDE;
        g.reg_write(env, glbl + sm::ASID_NONE_SEC_PRIV, asid);
        if d > 0 {
            g.reg_write(env, glbl + sm::MSTR_IF_AXUSER_HB_ASID, asid << 16 | asid);
        }
    }
}

/// SOB `i` of dcore `d`.
fn sob(d: u32, i: u32) -> u32 {
    OBJS_BASE + d * DCORE_STRIDE + sm::SOB_OBJ + 4 * i
}

/// Register `arr` (`sm::MON_*`) of monitor `m` of dcore `d`.
fn mon(d: u32, arr: u32, m: u32) -> u32 {
    OBJS_BASE + d * DCORE_STRIDE + arr + 4 * m
}

/// Register `arr` (`sm::CQ_*`) of CQ `c` of dcore `d`.
fn cq(d: u32, arr: u32, c: u32) -> u32 {
    GLBL_BASE + d * DCORE_STRIDE + arr + 4 * c
}

/// The engine address of register `reg` (an LBW write).
fn cfg(reg: u32) -> u64 {
    regs::CFG_BASE + u64::from(reg)
}

const INC: u32 = 1 << 31;
const LONG: u32 = 1 << 24;
/// `MON_ARM.SOP`: equal.
const EQ: u32 = 1 << 16;
const CQ_EN: u32 = 1 << 4;
const LBW_EN: u32 = 1 << 8;

/// `MON_ARM` for SOB `s` alone (its group, the others masked), `SOD` `v`.
fn arm_val(s: u32, v: u32, sop: u32) -> u32 {
    ((s / 8) & 0xFF) | (!(1u32 << (s % 8)) & 0xFF) << 8 | sop | (v & 0x7FFF) << 17
}

/// Write monitor `m`'s payload (`data` to `addr`).
fn payload(g: &mut Gaudi2, env: &mut TestEnv, d: u32, m: u32, addr: u64, data: u32) {
    g.reg_write(env, mon(d, sm::MON_PAY_ADDRL, m), addr as u32);
    g.reg_write(env, mon(d, sm::MON_PAY_ADDRH, m), (addr >> 32) as u32);
    g.reg_write(env, mon(d, sm::MON_PAY_DATA, m), data);
}

/// Configure and arm monitor `m` of dcore `d` on SOB `s` (`SOD` `v`,
/// `sop`), writing `data` to `addr` when it fires, as libhlthunk does.
#[allow(clippy::too_many_arguments)]
fn monitor(
    g: &mut Gaudi2,
    env: &mut TestEnv,
    d: u32,
    m: u32,
    s: u32,
    v: u32,
    sop: u32,
    addr: u64,
    data: u32,
) {
    g.reg_write(env, mon(d, sm::MON_CONFIG, m), ((s / 8) >> 8) << 16);
    payload(g, env, d, m, addr, data);
    g.reg_write(env, mon(d, sm::MON_ARM, m), arm_val(s, v, sop));
}

fn status(g: &mut Gaudi2, env: &mut TestEnv, d: u32, m: u32) -> u32 {
    g.reg_read(env, mon(d, sm::MON_STATUS, m))
}

#[test]
fn a_sob_sets_adds_and_wraps_at_15_bits() {
    let (mut g, mut env) = device();
    let s = sob(0, 500);
    g.reg_write(&mut env, s, 5);
    assert_eq!(g.reg_read(&mut env, s), 5);
    g.reg_write(&mut env, s, INC | 3);
    assert_eq!(g.reg_read(&mut env, s), 8);
    g.reg_write(&mut env, s, 0x7FFE);
    g.reg_write(&mut env, s, INC | 3);
    assert_eq!(g.reg_read(&mut env, s), 1, "15-bit wrap");
    // Bits above VAL (TRACE_EVICT) are not part of the value.
    g.reg_write(&mut env, s, 1 << 30 | 0xFFFF);
    assert_eq!(g.reg_read(&mut env, s), 0x7FFF);
    // The last SOB of the last dcore is there too.
    g.reg_write(&mut env, sob(3, 8191), 9);
    assert_eq!(g.reg_read(&mut env, sob(3, 8191)), 9);
}

/// The 60-bit value of SOBs `s..s+3` of dcore 0.
fn long_value(g: &mut Gaudi2, env: &mut TestEnv, s: u32) -> u64 {
    (0..4).fold(0, |v, k| {
        v | u64::from(g.reg_read(env, sob(0, s + k))) << (15 * k)
    })
}

/// A long SET as libhlthunk's `gaudi2_add_write_to_sob_pkt` issues it: the
/// low 15 bits in long mode (zeroing the rest), then 3 short writes.
fn long_set(g: &mut Gaudi2, env: &mut TestEnv, s: u32, v: u64) {
    for k in 0..4 {
        let chunk = ((v >> (15 * k)) & 0x7FFF) as u32;
        g.reg_write(env, sob(0, s + k), chunk | if k == 0 { LONG } else { 0 });
    }
}

#[test]
fn a_long_sob_set_zeroes_the_upper_sobs_and_an_add_carries_across_four() {
    let (mut g, mut env) = device();
    let s = 1000;
    for k in 1..4 {
        g.reg_write(&mut env, sob(0, s + k), 0x1234);
    }
    g.reg_write(&mut env, sob(0, s), LONG | 0x7FFF);
    assert_eq!(long_value(&mut g, &mut env, s), 0x7FFF, "SOBs 1..3 zeroed");
    g.reg_write(&mut env, sob(0, s), LONG | INC | 1);
    assert_eq!(long_value(&mut g, &mut env, s), 0x8000);
    assert_eq!(g.reg_read(&mut env, sob(0, s + 1)), 1, "carried");
    // libhlthunk's test_sm_long_mode values.
    long_set(&mut g, &mut env, s, 0xFFF_E000_3FFF_8000);
    g.reg_write(&mut env, sob(0, s), LONG | INC | 0x100);
    assert_eq!(long_value(&mut g, &mut env, s), 0xFFF_E000_3FFF_8100);
    // A carry through all four, and the wrap at 2^60.
    long_set(&mut g, &mut env, s, (1 << 45) - 1);
    g.reg_write(&mut env, sob(0, s), LONG | INC | 1);
    assert_eq!(long_value(&mut g, &mut env, s), 1 << 45);
    long_set(&mut g, &mut env, s, (1 << 60) - 1);
    g.reg_write(&mut env, sob(0, s), LONG | INC | 2);
    assert_eq!(long_value(&mut g, &mut env, s), 1);
    // The SOB after them is not touched.
    assert_eq!(g.reg_read(&mut env, sob(0, s + 4)), 0);
}

#[test]
fn a_long_monitor_fires_at_exactly_its_60_bit_value() {
    let (mut g, mut env) = device();
    let (s, m) = (1000u32, 400u32); // SOB aligned to 8, as libhlthunk uses it.
    let target: u64 = 0xFFF_E000_3FFF_8100;
    long_set(&mut g, &mut env, s, target - 2);
    // As `gaudi2_add_monitor` in long mode: CONFIG (long, WR_NUM 1 for the
    // H6-3342 workaround), the payload, a dummy payload on m+1 to SOB
    // 8184, then ARM m+3..m+1 (high SOD parts, group 0) and m last.
    g.reg_write(&mut env, mon(0, sm::MON_CONFIG, m), 1 | 1 << 5);
    payload(&mut g, &mut env, 0, m, HOST, 0xABCD);
    payload(&mut g, &mut env, 0, m + 1, cfg(sob(0, 8184)), 0);
    g.reg_write(&mut env, sob(0, 8184), 77);
    for k in (0..4u32).rev() {
        let chunk = ((target >> (15 * k)) & 0x7FFF) as u32;
        let target_sob = if k == 0 { s } else { 0 };
        g.reg_write(
            &mut env,
            mon(0, sm::MON_ARM, m + k),
            arm_val(target_sob, chunk, EQ),
        );
        if k > 0 {
            assert_eq!(
                status(&mut g, &mut env, 0, m + k) & 1,
                0,
                "ARM {k} only holds SOD bits"
            );
        }
    }
    assert_eq!(status(&mut g, &mut env, 0, m) & 1, 1, "armed");
    // SOB 0 equal to a high SOD part fires nothing.
    g.reg_write(&mut env, sob(0, 0), ((target >> 15) & 0x7FFF) as u32);
    g.reg_write(&mut env, sob(0, s), LONG | INC | 1);
    assert_eq!(env.host_read_u32(HOST), 0, "one short of the value");
    assert_eq!(status(&mut g, &mut env, 0, m) & 1, 1);
    g.reg_write(&mut env, sob(0, s), LONG | INC | 1);
    assert_eq!(env.host_read_u32(HOST), 0xABCD, "fired at the value");
    assert_eq!(
        g.reg_read(&mut env, sob(0, 8184)),
        0,
        "second (dummy) message"
    );
    assert_eq!(status(&mut g, &mut env, 0, m) & 1, 0, "disarmed");
    assert_eq!(g.stats().monitors_fired, 1);
}

#[test]
fn a_monitor_armed_after_its_sob_is_set_fires_at_arming() {
    let (mut g, mut env) = device();
    g.reg_write(&mut env, sob(0, 600), 10);
    monitor(&mut g, &mut env, 0, 300, 600, 7, 0, HOST + 8, 0x55);
    assert_eq!(env.host_read_u32(HOST + 8), 0x55, ">= holds at arming");
    assert_eq!(status(&mut g, &mut env, 0, 300) & 1, 0);
    // Equal does not hold for 10 vs 7: it waits.
    monitor(&mut g, &mut env, 0, 301, 600, 7, EQ, HOST + 12, 0x66);
    assert_eq!(env.host_read_u32(HOST + 12), 0);
    assert_eq!(
        status(&mut g, &mut env, 0, 301),
        1 | 1 << 1, // PENDING bit 1 + (600 % 8)
        "VALID, PENDING"
    );
    g.reg_write(&mut env, sob(0, 600), 7);
    assert_eq!(env.host_read_u32(HOST + 12), 0x66);
}

#[test]
fn two_monitors_on_one_sob_both_fire_once() {
    let (mut g, mut env) = device();
    monitor(&mut g, &mut env, 0, 300, 700, 2, 0, HOST, 1);
    monitor(&mut g, &mut env, 0, 301, 700, 2, EQ, HOST + 4, 2);
    g.reg_write(&mut env, sob(0, 700), INC | 1);
    assert_eq!(
        (env.host_read_u32(HOST), env.host_read_u32(HOST + 4)),
        (0, 0)
    );
    g.reg_write(&mut env, sob(0, 700), INC | 1);
    assert_eq!(
        (env.host_read_u32(HOST), env.host_read_u32(HOST + 4)),
        (1, 2)
    );
    // Fired once: a later change does not fire them again.
    env.host_write(HOST, &[0; 8]);
    g.reg_write(&mut env, sob(0, 700), INC | 1);
    assert_eq!(
        (env.host_read_u32(HOST), env.host_read_u32(HOST + 4)),
        (0, 0)
    );
    assert_eq!(g.stats().monitors_fired, 2);
}

#[test]
fn re_arming_moves_a_monitor_to_its_new_group() {
    let (mut g, mut env) = device();
    for (i, m) in [370u32, 371, 372].into_iter().enumerate() {
        monitor(&mut g, &mut env, 0, m, 100, 5, EQ, HOST + 4 * i as u64, m);
    }
    // The middle one of the group's list moves to SOB 200's group.
    g.reg_write(&mut env, mon(0, sm::MON_ARM, 371), arm_val(200, 5, EQ));
    g.reg_write(&mut env, sob(0, 100), 5);
    assert_eq!(
        (
            env.host_read_u32(HOST),
            env.host_read_u32(HOST + 4),
            env.host_read_u32(HOST + 8)
        ),
        (370, 0, 372)
    );
    g.reg_write(&mut env, sob(0, 200), 5);
    assert_eq!(env.host_read_u32(HOST + 4), 371);
    for m in 370..373 {
        assert_eq!(status(&mut g, &mut env, 0, m), 0, "all disarmed");
    }
}

#[test]
fn a_monitor_ignores_sobs_outside_its_mask_and_group() {
    let (mut g, mut env) = device();
    // Monitor on SOB 808 (group 101, bit 0), >= 1.
    monitor(&mut g, &mut env, 0, 320, 808, 1, 0, HOST, 9);
    for other in [809, 815, 800, 816, 808 + 8192 / 2] {
        g.reg_write(&mut env, sob(0, other), 5);
    }
    // Same SOB index on another dcore.
    g.reg_write(&mut env, sob(1, 808), 5);
    assert_eq!(env.host_read_u32(HOST), 0);
    assert_eq!(status(&mut g, &mut env, 0, 320), 1 | 1 << 1);
    g.reg_write(&mut env, sob(0, 808), 1);
    assert_eq!(env.host_read_u32(HOST), 9);
}

#[test]
fn a_monitor_on_a_high_group_uses_msb_sid() {
    let (mut g, mut env) = device();
    // SOB 8000: group 1000 = SID 0xE8 | MSB_SID 3 << 8.
    monitor(&mut g, &mut env, 0, 330, 8000, 1, 0, HOST, 3);
    g.reg_write(&mut env, sob(0, 8000 % 2048), 1);
    assert_eq!(env.host_read_u32(HOST), 0, "same SID, other MSB_SID");
    g.reg_write(&mut env, sob(0, 8000), 1);
    assert_eq!(env.host_read_u32(HOST), 3);
}

#[test]
fn wr_num_1_sends_two_messages_from_m_and_m_plus_1() {
    let (mut g, mut env) = device();
    payload(&mut g, &mut env, 0, 341, cfg(sob(0, 900)), INC | 4);
    g.reg_write(&mut env, mon(0, sm::MON_CONFIG, 340), 1 << 5);
    payload(&mut g, &mut env, 0, 340, HOST + 0x10, 0x1111);
    g.reg_write(&mut env, mon(0, sm::MON_ARM, 340), arm_val(850, 1, 0));
    g.reg_write(&mut env, sob(0, 850), 1);
    assert_eq!(env.host_read_u32(HOST + 0x10), 0x1111);
    assert_eq!(
        g.reg_read(&mut env, sob(0, 900)),
        4,
        "second message from m+1"
    );
    assert_eq!(status(&mut g, &mut env, 0, 341) & 1, 0, "m+1 not armed");
}

/// Set up CQ `c` of dcore `d`.
fn cq_setup(g: &mut Gaudi2, env: &mut TestEnv, d: u32, c: u32, base: u64, log2: u32, mode: u32) {
    g.reg_write(env, cq(d, sm::CQ_BASE_ADDR_L, c), base as u32);
    g.reg_write(env, cq(d, sm::CQ_BASE_ADDR_H, c), (base >> 32) as u32);
    g.reg_write(env, cq(d, sm::CQ_SIZE_LOG2, c), log2);
    g.reg_write(env, cq(d, sm::CQ_INC_MODE, c), mode);
}

/// Arm a CQ monitor `m` of dcore `d` on SOB `s` >= 1 to CQ `c`, then fire
/// it by setting the SOB.
#[allow(clippy::too_many_arguments)]
fn cq_fire(
    g: &mut Gaudi2,
    env: &mut TestEnv,
    d: u32,
    m: u32,
    s: u32,
    c: u32,
    data: u32,
    config: u32,
) {
    g.reg_write(env, sob(d, s), 0);
    g.reg_write(
        env,
        mon(d, sm::MON_CONFIG, m),
        config | ((s / 8) >> 8) << 16,
    );
    payload(g, env, d, m, u64::from(c), data);
    g.reg_write(env, mon(d, sm::MON_ARM, m), arm_val(s, 1, 0));
    g.reg_write(env, sob(d, s), 1);
}

#[test]
fn a_cq_in_mode_0_takes_ring_entries_at_pi_and_wraps() {
    let (mut g, mut env) = device();
    // 8 bytes: 2 entries.
    cq_setup(&mut g, &mut env, 0, 5, HOST + 0x1000, 3, 0);
    for (i, data) in [0xA0u32, 0xA1, 0xA2].into_iter().enumerate() {
        cq_fire(&mut g, &mut env, 0, 350, 1200, 5, data, CQ_EN);
        assert_eq!(g.reg_read(&mut env, cq(0, sm::CQ_PI, 5)), i as u32 + 1);
    }
    assert_eq!(
        env.host_read_u32(HOST + 0x1000),
        0xA2,
        "entry 0 again after the wrap"
    );
    assert_eq!(env.host_read_u32(HOST + 0x1004), 0xA1);
    assert_eq!(env.host_read_u32(HOST + 0x1008), 0, "nothing past the ring");
}

#[test]
fn a_cq_in_mode_1_adds_to_a_64_bit_counter() {
    let (mut g, mut env) = device();
    env.host_u64(HOST + 0x2000, 0xFFFF_FFFF);
    cq_setup(&mut g, &mut env, 0, 6, HOST + 0x2000, 2, 1);
    cq_fire(&mut g, &mut env, 0, 351, 1208, 6, 1, CQ_EN);
    assert_eq!(
        env.host_read_u64(HOST + 0x2000),
        0x1_0000_0000,
        "carry into the high word"
    );
    cq_fire(&mut g, &mut env, 0, 351, 1208, 6, 100, CQ_EN);
    assert_eq!(env.host_read_u64(HOST + 0x2000), 0x1_0000_0064);
    assert_eq!(g.reg_read(&mut env, cq(0, sm::CQ_INC_MODE, 6)), 1);
}

#[test]
fn lbw_en_raises_the_msix_vector_at_pcie_msix_or_writes_plain() {
    let (mut g, mut env) = device();
    cq_setup(&mut g, &mut env, 0, 7, HOST + 0x3000, 4, 0);
    let msix = cfg(sm::PCIE_MSIX);
    g.reg_write(&mut env, cq(0, sm::CQ_LBW_ADDR_L, 7), msix as u32);
    g.reg_write(&mut env, cq(0, sm::CQ_LBW_ADDR_H, 7), (msix >> 32) as u32);
    g.reg_write(&mut env, cq(0, sm::CQ_LBW_DATA, 7), 77);
    cq_fire(&mut g, &mut env, 0, 352, 1216, 7, 5, CQ_EN | LBW_EN);
    assert_eq!(env.msix, [77]);
    assert_eq!(env.host_read_u32(HOST + 0x3000), 5);
    // Without LBW_EN, no interrupt.
    cq_fire(&mut g, &mut env, 0, 352, 1216, 7, 6, CQ_EN);
    assert_eq!(env.msix, [77]);
    // An LBW address elsewhere is a plain write of LBW_DATA.
    g.reg_write(
        &mut env,
        cq(0, sm::CQ_LBW_ADDR_L, 7),
        (HOST + 0x3100) as u32,
    );
    g.reg_write(&mut env, cq(0, sm::CQ_LBW_ADDR_H, 7), 0);
    cq_fire(&mut g, &mut env, 0, 352, 1216, 7, 7, CQ_EN | LBW_EN);
    assert_eq!(env.host_read_u32(HOST + 0x3100), 77);
    assert_eq!(env.msix, [77]);
}

#[test]
fn a_cycle_of_monitors_is_bounded_per_call_and_per_step() {
    let (mut g, mut env) = device();
    // A and B armed on SOB 1300 >= 0 (always holds): each re-arms the
    // other, forever.
    let (a, b) = (360u32, 361u32);
    let arm = arm_val(1300, 0, 0);
    payload(&mut g, &mut env, 0, a, cfg(mon(0, sm::MON_ARM, b)), arm);
    payload(&mut g, &mut env, 0, b, cfg(mon(0, sm::MON_ARM, a)), arm);
    g.reg_write(&mut env, mon(0, sm::MON_ARM, a), arm);
    assert_eq!(g.stats().monitors_fired, u64::from(FIRE_BUDGET));
    assert!(g.pending(), "the rest is step()'s");
    g.step(&mut env);
    assert_eq!(g.stats().monitors_fired, 2 * u64::from(FIRE_BUDGET));
    assert!(g.pending());
    // Break the cycle: B's message arms C instead, which writes memory.
    let c = 362u32;
    payload(&mut g, &mut env, 0, c, HOST + 0x20, 0xB);
    let arm_c = cfg(mon(0, sm::MON_ARM, c));
    g.reg_write(&mut env, mon(0, sm::MON_PAY_ADDRL, b), arm_c as u32);
    for _ in 0..2 {
        g.step(&mut env);
    }
    assert!(!g.pending());
    assert_eq!(env.host_read_u32(HOST + 0x20), 0xB);
    assert_eq!(g.stats().sm_dropped, 0);
}

#[test]
fn a_full_fire_fifo_drops_and_counts() {
    let (mut g, mut env) = device();
    let n = FIFO as u32 + 10;
    for m in 0..n {
        monitor(&mut g, &mut env, 2, m, 40, 1, 0, HOST + 0x4000, m);
    }
    g.reg_write(&mut env, sob(2, 40), 1);
    assert_eq!(g.stats().sm_dropped, 10);
    while g.step(&mut env) {}
    assert_eq!(g.stats().monitors_fired, FIFO as u64);
    // Dropped monitors are disarmed like fired ones.
    assert_eq!(status(&mut g, &mut env, 2, n - 1) & 1, 0);
}

#[test]
fn dcore_1_has_its_own_sobs_monitors_and_cqs() {
    let (mut g, mut env) = device();
    monitor(&mut g, &mut env, 1, 5, 16, 3, EQ, HOST + 0x5000, 0xD1);
    g.reg_write(&mut env, sob(0, 16), 3);
    assert_eq!(env.host_read_u32(HOST + 0x5000), 0, "dcore 0's SOB 16");
    g.reg_write(&mut env, sob(1, 16), 3);
    assert_eq!(env.host_read_u32(HOST + 0x5000), 0xD1);
    assert_eq!(g.reg_read(&mut env, sob(1, 16)), 3);
    assert_eq!(g.reg_read(&mut env, mon(1, sm::MON_PAY_DATA, 5)), 0xD1);
    // Dcore 3's CQ 63, through its monitor 2047.
    cq_setup(&mut g, &mut env, 3, 63, HOST + 0x6000, 4, 0);
    cq_fire(&mut g, &mut env, 3, 2047, 8191, 63, 0x33, CQ_EN);
    assert_eq!(env.host_read_u32(HOST + 0x6000), 0x33);
    assert_eq!(g.reg_read(&mut env, cq(3, sm::CQ_PI, 63)), 1);
    assert_eq!(g.reg_read(&mut env, cq(0, sm::CQ_PI, 63)), 0);
}

#[test]
fn user_writable_follows_the_protection_upstream_sets() {
    let d0 = |arr, i: usize| mon(0, arr, i as u32);
    // DCORE0 SOBs and monitors: the driver's below the sync-stream ones
    // (open to the user's queues, as upstream), CQs below the first user's.
    assert!(!user_writable(sob(0, 0)));
    assert!(!user_writable(sob(0, 63)), "a CS-completion SOB");
    assert!(!user_writable(sob(0, RESERVED_SOBS as u32 - 1)));
    assert!(user_writable(sob(0, RESERVED_SOBS as u32)));
    assert!(user_writable(sob(0, 413)));
    assert!(user_writable(sob(0, 8191)));
    for arr in [
        sm::MON_PAY_ADDRL,
        sm::MON_PAY_ADDRH,
        sm::MON_PAY_DATA,
        sm::MON_ARM,
        sm::MON_CONFIG,
        sm::MON_STATUS,
    ] {
        assert!(!user_writable(d0(arr, 0)));
        assert!(!user_writable(d0(arr, 63)));
        assert!(!user_writable(d0(arr, RESERVED_MONS - 1)));
        assert!(user_writable(d0(arr, RESERVED_MONS)));
        assert!(user_writable(d0(arr, 289)));
        assert!(user_writable(d0(arr, 2047)));
    }
    for arr in [
        sm::CQ_BASE_ADDR_L,
        sm::CQ_LBW_DATA,
        sm::CQ_INC_MODE,
        sm::CQ_PI,
    ] {
        assert!(!user_writable(cq(0, arr, 0)));
        assert!(!user_writable(cq(0, arr, FIRST_USER_CQ as u32 - 1)));
        assert!(user_writable(cq(0, arr, FIRST_USER_CQ as u32)));
        assert!(user_writable(cq(3, arr, 0)), "dcore 3, all CQs");
    }
    assert!(!user_writable(cq(0, 0x450, 10)), "CQ_SEC");
    assert!(!user_writable(OBJS_BASE + 0x1_4000), "SM_SEC");
    assert!(!user_writable(GLBL_BASE), "GLBL config");
    // DCORE1..3: every object.
    assert!(user_writable(sob(1, 0)));
    assert!(user_writable(mon(2, sm::MON_ARM, 0)));
    assert!(user_writable(mon(3, sm::MON_CONFIG, 0)));
    // QMANs: the fences, the ARB registers, CP_MSG_BASE, WR64 bases.
    for qm in [
        security::PDMA0_QM,
        security::PDMA1_QM,
        0x41C_A000, // DCORE0 EDMA0
        0x47D_A000, // DCORE3 EDMA1
        0x40C_A000, // DCORE0 MME
        0x406_A000, // DCORE0 TPC6
        0x465_A000, // DCORE3 TPC5
    ] {
        for off in [0x290, 0x2A0, 0x4A4, 0x4AC, 0x718, 0x1F0, 0x97C] {
            assert!(user_writable(qm + off), "{qm:#x} + {off:#x}");
        }
        // GLBL_CFG0, PQ_BASE_LO, PQ_PI, an unaligned fence.
        for off in [0x000, 0x050, 0x0A0, 0x292] {
            assert!(!user_writable(qm + off), "{qm:#x} + {off:#x}");
        }
    }
    assert!(!user_writable(0x466_A000 + 0x290), "no TPC6 on dcore 3");
    // MMU/STLB, PCIe, PSOC.
    for reg in [
        0x4C8_3000,
        regs::CPU_IF_PF_PQ_PI,
        regs::PSOC_SCRATCHPAD_0,
        sm::PCIE_MSIX,
    ] {
        assert!(!user_writable(reg), "{reg:#x}");
    }
}

#[test]
fn a_status_write_without_valid_disarms_and_the_asids_are_the_drivers() {
    let (mut g, mut env) = device();
    monitor(&mut g, &mut env, 0, 400, 700, 1, 0, HOST + 0x40, 0x77);
    assert_eq!(status(&mut g, &mut env, 0, 400) & 1, 1);
    // Upstream's context init writes PROT alone: the monitor is disarmed
    // and a later SOB write fires nothing.
    g.reg_write(&mut env, mon(0, sm::MON_STATUS, 400), 1 << 9);
    assert_eq!(status(&mut g, &mut env, 0, 400) & 1, 0);
    g.reg_write(&mut env, sob(0, 700), 1);
    g.step(&mut env);
    assert_eq!(env.host_read_u32(HOST + 0x40), 0);
    // The ASID registers read back, and no user CB may write them.
    for d in 0..4 {
        let nonsec = GLBL_BASE + d * DCORE_STRIDE + sm::ASID_NONE_SEC_PRIV;
        let mstr = GLBL_BASE + d * DCORE_STRIDE + sm::MSTR_IF_AXUSER_HB_ASID;
        g.reg_write(&mut env, nonsec, 5);
        g.reg_write(&mut env, mstr, 5 << 16 | 5);
        assert_eq!(g.reg_read(&mut env, nonsec), 5);
        assert_eq!(g.reg_read(&mut env, mstr), 5 << 16 | 5);
        assert!(!user_writable(nonsec) && !user_writable(mstr));
    }
}

/// `SyncManager::clear_user` (host 1's restore at a context's open) leaves
/// what the PCI driver's register writes leave: every SOB, monitor and CQ
/// register and the firings queued, after the same setup, compared.
#[test]
fn clearing_the_user_objects_equals_the_drivers_register_writes() {
    use gaudi2_model::sm::SyncManager;
    let mut by_regs = Box::new(SyncManager::new());
    let mut cleared = Box::new(SyncManager::new());
    for sm in [&mut by_regs, &mut cleared] {
        for d in 0..4 {
            for i in (0..8192).step_by(7) {
                sm.write(sob(d, i), i % 5 + 1);
            }
            for c in 0..64 {
                sm.write(cq(d, sm::CQ_BASE_ADDR_L, c), 0x1000 + c);
                sm.write(cq(d, sm::CQ_SIZE_LOG2, c), 6);
                sm.write(cq(d, sm::CQ_PI, c), c);
            }
            // Monitors on both sides of the first unsecured one, some
            // waiting for their SOB to be 0 (they fire when it is cleared),
            // some for more than it will ever hold.
            for m in (100..400).step_by(3) {
                let s = 80 + (m % 40);
                let (v, sop) = if m % 2 == 0 { (0, 1 << 16) } else { (9, 0) };
                sm.write(mon(d, sm::MON_CONFIG, m), 0);
                sm.write(mon(d, sm::MON_ARM, m), arm_val(s, v, sop));
            }
        }
    }
    let queued = by_regs.queued();
    assert_eq!(cleared.queued(), queued);
    for d in 0..4usize {
        let first = if d == 0 {
            (RESERVED_SOBS, RESERVED_MONS, FIRST_USER_CQ)
        } else {
            (0, 0, 0)
        };
        cleared.clear_user(d, first);
        let dd = d as u32;
        let (s0, m0, c0) = (first.0 as u32, first.1 as u32, first.2 as u32);
        for arr in [
            sm::CQ_LBW_ADDR_L,
            sm::CQ_LBW_ADDR_H,
            sm::CQ_LBW_DATA,
            sm::CQ_BASE_ADDR_L,
            sm::CQ_BASE_ADDR_H,
            sm::CQ_SIZE_LOG2,
        ] {
            for c in c0..64 {
                by_regs.write(cq(dd, arr, c), 0);
            }
        }
        for m in m0..2048 {
            by_regs.write(mon(dd, sm::MON_STATUS, m), 1 << 9);
        }
        for m in m0..2048 {
            by_regs.write(mon(dd, sm::MON_CONFIG, m), 0);
        }
        for i in s0..8192 {
            by_regs.write(sob(dd, i), 0);
        }
    }
    assert!(
        cleared.queued() > queued,
        "no monitor waited for a cleared SOB"
    );
    assert_eq!(cleared.queued(), by_regs.queued());
    for d in 0..4 {
        for i in 0..8192 {
            assert_eq!(
                cleared.read(sob(d, i)),
                by_regs.read(sob(d, i)),
                "SOB {d}/{i}"
            );
        }
        for m in 0..2048 {
            for arr in [sm::MON_ARM, sm::MON_CONFIG, sm::MON_STATUS] {
                assert_eq!(
                    cleared.read(mon(d, arr, m)),
                    by_regs.read(mon(d, arr, m)),
                    "monitor {d}/{m}"
                );
            }
        }
        for c in 0..64 {
            for arr in [
                sm::CQ_BASE_ADDR_L,
                sm::CQ_SIZE_LOG2,
                sm::CQ_PI,
                sm::CQ_LBW_DATA,
            ] {
                assert_eq!(
                    cleared.read(cq(d, arr, c)),
                    by_regs.read(cq(d, arr, c)),
                    "CQ {d}/{c}"
                );
            }
        }
    }
}

/// A cycle of monitors one user left running ends at the driver's restore
/// for the next context: its `STATUS` writes disarm both and drop the
/// firing still queued, so nothing fires afterwards.
#[test]
fn disarming_by_status_drops_a_queued_firing_and_ends_a_cycle() {
    let (mut g, mut env) = device();
    let (a, b) = (370u32, 371u32);
    let arm = arm_val(1300, 0, 0);
    payload(&mut g, &mut env, 0, a, cfg(mon(0, sm::MON_ARM, b)), arm);
    payload(&mut g, &mut env, 0, b, cfg(mon(0, sm::MON_ARM, a)), arm);
    g.reg_write(&mut env, mon(0, sm::MON_ARM, a), arm);
    g.step(&mut env);
    assert!(g.pending(), "the cycle runs");
    for m in [a, b] {
        g.reg_write(&mut env, mon(0, sm::MON_STATUS, m), 1 << 9);
    }
    let fired = g.stats().monitors_fired;
    for _ in 0..4 {
        g.step(&mut env);
    }
    assert!(!g.pending());
    assert_eq!(g.stats().monitors_fired, fired);
    for m in [a, b] {
        assert_eq!(
            status(&mut g, &mut env, 0, m) & 1,
            0,
            "monitor {m} armed again"
        );
    }
}

/// A user's monitor reaches in the register space only what a user CB may
/// write: a payload into a driver's SOB (below 85) or an MMU register is
/// refused and counted; the same from a driver's (secured) monitor lands.
#[test]
fn a_user_monitors_register_writes_pass_the_security_check() {
    let (mut g, mut env) = device();
    // User monitor 400 pays 5 into the driver's SOB 10 when SOB 1400 >= 1.
    monitor(&mut g, &mut env, 0, 400, 1400, 1, 0, cfg(sob(0, 10)), 5);
    g.reg_write(&mut env, sob(0, 1400), 1);
    g.step(&mut env);
    assert_eq!(g.reg_read(&mut env, sob(0, 10)), 0);
    assert_eq!(g.stats().sm_refused, 1);
    // Driver's monitor 100 (secured) does the same: it lands.
    monitor(&mut g, &mut env, 0, 100, 1400, 1, 0, cfg(sob(0, 10)), 5);
    g.step(&mut env);
    assert_eq!(g.reg_read(&mut env, sob(0, 10)), 5);
    assert_eq!(g.stats().sm_refused, 1);
    // A user SOB stays reachable from a user monitor.
    monitor(&mut g, &mut env, 0, 401, 1400, 1, 0, cfg(sob(0, 1500)), 6);
    g.step(&mut env);
    assert_eq!(g.reg_read(&mut env, sob(0, 1500)), 6);
}

/// A user's monitor may not post to the driver's CQs (DCORE0's CQ 0 and 1:
/// CQ 0 carries the driver's CS completions): refused and counted, the
/// CQ's PI and ring untouched. The driver's monitor posts there, and a user
/// monitor posts to a user CQ (2) and to DCORE1's CQ 0.
#[test]
fn a_user_monitor_may_not_post_to_the_drivers_cqs() {
    let (mut g, mut env) = device();
    for c in [0, 1] {
        cq_setup(
            &mut g,
            &mut env,
            0,
            c,
            HOST + 0x3000 + 0x100 * u64::from(c),
            4,
            0,
        );
        cq_fire(&mut g, &mut env, 0, 352, 1216, c, 0xBAD, CQ_EN);
        assert_eq!(g.reg_read(&mut env, cq(0, sm::CQ_PI, c)), 0, "CQ {c}");
        assert_eq!(env.host_read_u32(HOST + 0x3000 + 0x100 * u64::from(c)), 0);
    }
    assert_eq!(g.stats().sm_refused, 2);
    // The driver's monitor 60 (secured) posts to CQ 0.
    cq_fire(&mut g, &mut env, 0, 60, 1216, 0, 0x600D, CQ_EN);
    assert_eq!(g.reg_read(&mut env, cq(0, sm::CQ_PI, 0)), 1);
    assert_eq!(env.host_read_u32(HOST + 0x3000), 0x600D);
    // A user monitor posts to user CQ 2, and to DCORE1's CQ 0.
    cq_setup(&mut g, &mut env, 0, 2, HOST + 0x3400, 4, 0);
    cq_fire(&mut g, &mut env, 0, 353, 1224, 2, 0x22, CQ_EN);
    assert_eq!(env.host_read_u32(HOST + 0x3400), 0x22);
    cq_setup(&mut g, &mut env, 1, 0, HOST + 0x3800, 4, 0);
    cq_fire(&mut g, &mut env, 1, 20, 1232, 0, 0x10, CQ_EN);
    assert_eq!(env.host_read_u32(HOST + 0x3800), 0x10);
    assert_eq!(g.stats().sm_refused, 2);
}

#[test]
fn a_user_cq_in_the_register_space_reaches_only_what_users_may_write() {
    let (mut g, mut env) = device();
    // CQ 2's ring at the driver's SOB 0, then its counter there: refused.
    let driver_sob = regs::CFG_BASE + u64::from(sob(0, 0));
    g.reg_write(&mut env, sob(0, 0), 7);
    for mode in [0, 1] {
        cq_setup(&mut g, &mut env, 0, 2, driver_sob, 4, mode);
        cq_fire(&mut g, &mut env, 0, 352, 1216, 2, 0x55, CQ_EN);
        assert_eq!(g.reg_read(&mut env, sob(0, 0)), 7, "mode {mode}");
    }
    assert_eq!(g.stats().sm_refused, 2);
    // CQ 3's ring at a user SOB (1000): the entry lands.
    cq_setup(
        &mut g,
        &mut env,
        0,
        3,
        regs::CFG_BASE + u64::from(sob(0, 1000)),
        4,
        0,
    );
    cq_fire(&mut g, &mut env, 0, 352, 1216, 3, 0x55, CQ_EN);
    assert_eq!(g.reg_read(&mut env, sob(0, 1000)), 0x55);
    assert_eq!(g.stats().sm_refused, 2);
}

/// Found by a review: a user monitor cycle left running fired inside the
/// KDMA's MMU bypass (the driver's restore memsets the register space, and
/// each LBW write drains monitors inline), so its DRAM payload landed at a
/// physical address. The SM's master never bypasses the MMUs.
#[test]
fn a_user_monitor_never_writes_through_the_kdmas_mmu_bypass() {
    use gaudi2_model::kdma as k;
    let mut env = TestEnv::new(64 << 20);
    env.map(HOST, HOST_LEN);
    let mut g = Box::new(Gaudi2::new(&Config::with_dram(64 << 20)));
    let hmmu = regs::HMMU0_MMU_BASE;
    let stlb = hmmu + regs::STLB_BLOCK_OFFSET;
    g.reg_write(&mut env, stlb + regs::stlb::INV_ALL_START, 1);
    g.reg_write(&mut env, hmmu + regs::mmu::MMU_BYPASS, 0);
    g.reg_write(&mut env, hmmu + regs::mmu::MMU_ENABLE, 1);
    g.reg_write(&mut env, GLBL_BASE + sm::ASID_NONE_SEC_PRIV, 1);
    // Monitors 400 and 402 re-arm each other; their second messages
    // (WR_NUM 1) write the driver's reserved DRAM page.
    let target = regs::DRAM_PHYS_BASE + 0x100;
    let arm = arm_val(1300, 0, 0);
    for (m, other) in [(400, 402), (402, 400)] {
        g.reg_write(&mut env, mon(0, sm::MON_CONFIG, m), 1 << 5);
        payload(&mut g, &mut env, 0, m, cfg(mon(0, sm::MON_ARM, other)), arm);
        payload(&mut g, &mut env, 0, m + 1, target, 0xDEAD_BEEF);
    }
    g.reg_write(&mut env, mon(0, sm::MON_ARM, 400), arm);
    g.step(&mut env);
    assert_eq!(env.dram_range(target, 4).unwrap(), &[0; 4], "an HMMU fault");
    // The driver's restore: the KDMA, MMU bypassed, memsets CQ registers.
    g.reg_write(&mut env, k::AXUSER_HB_MMU_BP, 0x11);
    let dst = cfg(cq(0, sm::CQ_LBW_ADDR_L, 2));
    for (r, v) in [
        (k::SRC_BASE_LO, 0),
        (k::SRC_BASE_HI, 0),
        (k::DST_BASE_LO, dst as u32),
        (k::DST_BASE_HI, (dst >> 32) as u32),
        (k::WR_COMP_ADDR_LO, (HOST + 0x8000) as u32),
        (k::WR_COMP_ADDR_HI, 0),
        (k::WR_COMP_WDATA, 1),
        (k::DST_TSIZE_0, 4 * 62),
        (
            k::COMMIT,
            k::COMMIT_LIN | k::COMMIT_WR_COMP_EN | k::COMMIT_MEM_SET,
        ),
    ] {
        g.reg_write(&mut env, r, v);
    }
    for _ in 0..4 {
        g.step(&mut env);
    }
    assert_eq!(env.host_read_u32(HOST + 0x8000), 1, "the KDMA's job done");
    assert_eq!(
        env.dram_range(target, 4).unwrap(),
        &[0; 4],
        "nothing landed"
    );
}

/// Found by a review: the PCI restore cleans the dcores one after the
/// other, and a cycle still live in DCORE1 re-armed DCORE0's monitors
/// after their cleaning, so a user's cycle ran on into the next context.
/// From the close (ASID 0) to the next open, user monitors do nothing.
#[test]
fn a_cycle_across_dcores_ends_with_its_context() {
    let (mut g, mut env) = device();
    let arm = arm_val(1300, 0, 0);
    let arm1 = arm_val(40, 0, 0);
    // DCORE0: 500 <-> 501. DCORE1: 10 <-> 12, each also arming DCORE0's 500.
    payload(&mut g, &mut env, 0, 500, cfg(mon(0, sm::MON_ARM, 501)), arm);
    payload(&mut g, &mut env, 0, 501, cfg(mon(0, sm::MON_ARM, 500)), arm);
    for (m, other) in [(10, 12), (12, 10)] {
        g.reg_write(&mut env, mon(1, sm::MON_CONFIG, m), 1 << 5);
        payload(
            &mut g,
            &mut env,
            1,
            m,
            cfg(mon(1, sm::MON_ARM, other)),
            arm1,
        );
        payload(
            &mut g,
            &mut env,
            1,
            m + 1,
            cfg(mon(0, sm::MON_ARM, 500)),
            arm,
        );
    }
    g.reg_write(&mut env, mon(1, sm::MON_ARM, 10), arm1);
    g.step(&mut env);
    let live = g.stats().monitors_fired;
    g.step(&mut env);
    assert!(g.stats().monitors_fired > live, "the cycles run");
    // The close, then the restore register by register, dcore by dcore.
    open_context(&mut g, &mut env, 0);
    for d in 0..4u32 {
        let (m0, s0) = if d == 0 { (125, 85) } else { (0, 0) };
        for m in m0..2048 {
            g.reg_write(&mut env, mon(d, sm::MON_STATUS, m), 1 << 9);
            g.step(&mut env);
        }
        for s in s0..8192 {
            g.reg_write(&mut env, OBJS_BASE + d * DCORE_STRIDE + 4 * s, 0);
        }
    }
    open_context(&mut g, &mut env, 2);
    let fired = g.stats().monitors_fired;
    for _ in 0..8 {
        g.step(&mut env);
    }
    assert_eq!(
        g.stats().monitors_fired,
        fired,
        "nothing fires in the next context"
    );
    for (d, m) in [(0, 500), (0, 501), (1, 10), (1, 12)] {
        assert_eq!(
            status(&mut g, &mut env, d, m) & 1,
            0,
            "monitor {d}/{m} disarmed"
        );
    }
}
