// SPDX-License-Identifier: GPL-2.0

//! Host tests of the QMANs' command processors (`gaudi2_model::cp`): the
//! lower CP and `CP_DMA`, nesting and `CB_LIST` chains, predicates and
//! scalars (`LOAD_AND_EXE`), fences per CP, the MME and TPC QMANs, the
//! register space refused to CBs, QMAN errors.
//!
//! Completions are observed without the sync manager: each stream's PQC
//! writes 1 to host memory at `DONE + 4 x COMP_OFFSET`.

use gaudi2_model::packets::{self, build};
use gaudi2_model::{qman, regs, Config, Gaudi2};

mod common;
use common::TestEnv;

const HOST: u64 = 0x400_0000;
const HOST_LEN: usize = 4 << 20;
/// CPU queues (for the event queue), PQs, CBs, data, completions.
const CPU_PQ: u64 = HOST;
const CPU_EQ: u64 = HOST + 0x1_0000;
const CPU_CQ: u64 = HOST + 0x2_0000;
const PQS: u64 = HOST + 0x10_0000;
const CB: u64 = HOST + 0x20_0000;
const DATA: u64 = HOST + 0x30_0000;
const DONE: u64 = HOST + 0x38_0000;

/// QMAN block bases (gaudi2_blocks_linux_driver.h).
const PDMA0: u32 = 0x4C8_A000;
const EDMA0: u32 = 0x41C_A000;
const DCORE1_MME: u32 = 0x42C_A000;
const DCORE0_TPC6: u32 = 0x406_A000;
const DCORE3_TPC5: u32 = 0x465_A000;

/// A device with its CPU queues up (events reach `CPU_EQ`).
fn device() -> (Gaudi2, TestEnv) {
    let mut g = Gaudi2::new(&Config::with_dram(1 << 20));
    let mut env = TestEnv::new(1 << 20);
    env.map(HOST, HOST_LEN);
    for (reg, v) in [
        (regs::CPU_IF_PQ_BASE_ADDR_LOW, CPU_PQ as u32),
        (regs::CPU_IF_PQ_BASE_ADDR_HIGH, 0),
        (regs::CPU_IF_EQ_BASE_ADDR_LOW, CPU_EQ as u32),
        (regs::CPU_IF_EQ_BASE_ADDR_HIGH, 0),
        (regs::CPU_IF_CQ_BASE_ADDR_LOW, CPU_CQ as u32),
        (regs::CPU_IF_CQ_BASE_ADDR_HIGH, 0),
        (regs::CPU_IF_PQ_LENGTH, 4 << 10),
        (regs::CPU_IF_EQ_LENGTH, 4 << 10),
        (regs::CPU_IF_CQ_LENGTH, 4 << 10),
        (regs::CPU_IF_EQ_RD_OFFS, 0),
        (regs::CPU_IF_PF_PQ_PI, 0),
        (regs::CPU_IF_QUEUE_INIT, regs::PQ_INIT_STATUS_READY_FOR_CP),
    ] {
        g.reg_write(&mut env, reg, v);
    }
    (g, env)
}

/// The PQ of stream `q` of the QMAN at `base`.
fn pq(base: u32, q: u32) -> u64 {
    let m = qman::decode(base).unwrap().0 as u64;
    PQS + m * 0x400 + u64::from(q) * 0x100
}

/// `gaudi2_init_qman`-like: every stream's PQ (16 entries), its PQC
/// writing 1 to `DONE`, every stream and CP enabled.
fn qman_up(g: &mut Gaudi2, env: &mut TestEnv, base: u32) {
    for q in 0..4 {
        for (off, v) in [
            (0x050, pq(base, q) as u32),
            (0x060, 0),
            (0x070, 4),
            (0x46C, DONE as u32),
            (0x47C, 0),
            (0x45C, 1),
        ] {
            g.reg_write(env, base + off + 4 * q, v);
        }
    }
    g.reg_write(env, base + 0x48C, 1);
    g.reg_write(env, base, 0xF | 0x1F << 9);
}

/// Write `cb` at `at` and submit it on stream `q` of the QMAN at `base`
/// at PQ entry `pi`,
/// completing into `DONE + 4 x sob`.
fn submit(
    g: &mut Gaudi2,
    env: &mut TestEnv,
    (base, q, pi): (u32, u32, u32),
    at: u64,
    cb: &[u8],
    sob: u32,
) {
    env.host_write(at, cb);
    let mut bd = [0u8; 16];
    bd[0..8].copy_from_slice(&at.to_le_bytes());
    bd[8..12].copy_from_slice(&(cb.len() as u32).to_le_bytes());
    bd[12..16].copy_from_slice(&(sob << 16).to_le_bytes());
    env.host_write(pq(base, q) + u64::from(pi % 16) * 16, &bd);
    g.reg_write(env, base + 0x080 + 4 * q, pi + 1);
}

fn run(g: &mut Gaudi2, env: &mut TestEnv) {
    for _ in 0..10_000 {
        if !g.step(env) {
            return;
        }
    }
    panic!("engine work never ended");
}

/// The event ids on the event queue so far.
fn events(env: &mut TestEnv) -> Vec<u16> {
    (0..64)
        .map(|n| env.host_read_u32(CPU_EQ + n * 64 + 4))
        .take_while(|ctl| ctl & 1 << 31 != 0)
        .map(|ctl| (ctl >> 16 & 0xFFF) as u16)
        .collect()
}

fn cat(parts: &[&[u8]]) -> Vec<u8> {
    parts.concat()
}

#[test]
fn every_user_qman_decodes_to_its_queue_ids_base_and_event() {
    assert_eq!(qman::QMANS, 39);
    let bases: Vec<u32> = (0..qman::QMANS).map(|m| qman::base(m).unwrap()).collect();
    assert_eq!(
        &bases[..5],
        &[PDMA0, 0x4C9_A000, EDMA0, 0x41D_A000, 0x40C_A000]
    );
    assert_eq!(bases[5], 0x400_A000, "DCORE0 TPC0 (qid 20)");
    assert_eq!(bases[11], DCORE0_TPC6, "DCORE0 TPC6 (qid 44)");
    assert_eq!(bases[12], 0x43C_A000, "DCORE1 EDMA0 (qid 48)");
    assert_eq!(bases[14], DCORE1_MME, "DCORE1 MME (qid 56)");
    assert_eq!(bases[38], DCORE3_TPC5, "DCORE3 TPC5 (qid 152)");
    for (m, &b) in bases.iter().enumerate() {
        assert_eq!(qman::decode(b + 0x290), Some((m, 0x290)));
        assert_eq!(qman::decode(b + 0xFFC), Some((m, 0xFFC)));
        let dma = qman::kind(m) == qman::Kind::Dma;
        assert_eq!(qman::decode(b + 0x1800).is_some(), dma, "core ASID of {m}");
    }
    assert_eq!(qman::decode(0x416_A000), None, "no DCORE1 TPC6");
    assert_eq!(qman::decode(0x400_9FFC), None);
    assert_eq!(regs::EVENT_QM[11], 1230, "TPC24_QM");
    assert_eq!(regs::EVENT_QM[14], 1233, "MME1_QM");
    assert_eq!(regs::EVENT_QM[15], 1212, "TPC6_QM = DCORE1 TPC0");
}

#[test]
fn cp_dma_hands_a_cb_to_the_lower_cp_whose_fence_an_rdata_write_releases() {
    let (mut g, mut env) = device();
    qman_up(&mut g, &mut env, PDMA0);
    let lower = cat(&[&build::fence(0, 1, 1), &build::msg_long(DATA, 0xAA)]);
    env.host_write(CB + 0x1000, &lower);
    let upper = cat(&[
        &build::cp_dma(CB + 0x1000, lower.len() as u32, false),
        &build::msg_long(DATA + 4, 0xBB),
    ]);
    submit(&mut g, &mut env, (PDMA0, 0, 0), CB, &upper, 1);
    run(&mut g, &mut env);
    assert_eq!(env.host_read_u32(DATA + 4), 0xBB, "the upper CP went on");
    assert_eq!(
        env.host_read_u32(DATA),
        0,
        "the lower CP waits at its fence"
    );
    assert_eq!(
        env.host_read_u32(DONE + 4),
        0,
        "the BD waits for the lower CP"
    );
    assert_eq!(
        g.reg_read(&mut env, PDMA0 + 0x01C) & 1 << 13,
        0,
        "lower CP busy"
    );
    // CP_FENCE0_RDATA_4: the lower CP's counter.
    g.reg_write(&mut env, PDMA0 + 0x290 + 4 * 4, 1);
    run(&mut g, &mut env);
    assert_eq!(env.host_read_u32(DATA), 0xAA);
    assert_eq!(env.host_read_u32(DONE + 4), 1);
    assert_eq!(g.reg_read(&mut env, PDMA0 + 0x2E0 + 4 * 4), 0);
    assert_ne!(g.reg_read(&mut env, PDMA0 + 0x01C) & 1 << 13, 0, "idle");
}

#[test]
fn a_full_lower_cp_queue_stalls_the_upper_cp_until_there_is_room() {
    let (mut g, mut env) = device();
    qman_up(&mut g, &mut env, EDMA0);
    let mut upper = Vec::new();
    for i in 0..(qman::LOWER_FIFO as u64 + 2) {
        let mut cb = build::msg_long(DATA + 4 * i, i as u32 + 1).to_vec();
        if i == 0 {
            cb.splice(0..0, build::fence(1, 1, 1));
        }
        let at = CB + 0x1000 + 0x100 * i;
        env.host_write(at, &cb);
        upper.extend_from_slice(&build::cp_dma(at, cb.len() as u32, false));
    }
    upper.extend_from_slice(&build::msg_long(DATA + 0x100, 9));
    submit(&mut g, &mut env, (EDMA0, 2, 0), CB, &upper, 3);
    run(&mut g, &mut env);
    assert!(!g.pending(), "the stalled upper CP waits for room");
    assert_eq!(env.host_read_u32(DATA + 0x100), 0, "the upper CP stalls");
    assert_eq!(env.host_read_u32(DATA), 0);
    g.reg_write(&mut env, EDMA0 + 0x290 + 0x14 + 4 * 4, 1);
    run(&mut g, &mut env);
    for i in 0..(qman::LOWER_FIFO as u64 + 2) {
        assert_eq!(env.host_read_u32(DATA + 4 * i), i as u32 + 1);
    }
    assert_eq!(
        (
            env.host_read_u32(DATA + 0x100),
            env.host_read_u32(DONE + 12)
        ),
        (9, 1)
    );
}

#[test]
fn cp_dma_to_the_upper_cp_nests_and_returns() {
    let (mut g, mut env) = device();
    qman_up(&mut g, &mut env, PDMA0);
    let (b, c) = (CB + 0x1000, CB + 0x2000);
    let cb_c = build::msg_long(DATA + 12, 4);
    env.host_write(c, &cb_c);
    let cb_b = cat(&[
        &build::msg_long(DATA, 2),
        &build::cp_dma(c, 16, true),
        &build::msg_long(DATA + 4, 3),
    ]);
    env.host_write(b, &cb_b);
    let cb_a = cat(&[
        &build::msg_long(DATA, 1),
        &build::cp_dma(b, cb_b.len() as u32, true),
        &build::msg_long(DATA + 8, 5),
    ]);
    submit(&mut g, &mut env, (PDMA0, 1, 0), CB, &cb_a, 2);
    run(&mut g, &mut env);
    let got: Vec<u32> = (0..4).map(|i| env.host_read_u32(DATA + 4 * i)).collect();
    assert_eq!(got, vec![2, 3, 5, 4]);
    assert_eq!(env.host_read_u32(DONE + 8), 1);
}

#[test]
fn a_cb_list_chain_of_ten_runs_in_tail_calls() {
    let (mut g, mut env) = device();
    qman_up(&mut g, &mut env, PDMA0);
    let index = regs::SRAM_BASE_ADDR;
    let table = regs::SRAM_BASE_ADDR + 0x1000;
    const N: u64 = 10;
    for i in 0..N {
        let mut cb = build::msg_long(DATA + 4 * i, i as u32 + 1).to_vec();
        if i != N - 1 {
            cb.extend_from_slice(&build::msg_long(index, i as u32 + 1));
            cb.extend_from_slice(&build::cb_list(index, table));
        }
        let at = regs::SRAM_BASE_ADDR + 0x9000 + 0x1000 * i;
        env.sram_put(at, &cb);
        env.sram_put(table + 16 * i, &build::cp_dma(at, cb.len() as u32, true));
    }
    env.sram_put(index, &7u32.to_le_bytes());
    let ext = cat(&[&build::msg_long(index, 0), &build::cb_list(index, table)]);
    submit(&mut g, &mut env, (PDMA0, 0, 0), CB, &ext, 5);
    run(&mut g, &mut env);
    for i in 0..N {
        assert_eq!(env.host_read_u32(DATA + 4 * i), i as u32 + 1, "CB {i}");
    }
    assert_eq!(env.sram_u32(index), N as u32 - 1);
    assert_eq!(env.host_read_u32(DONE + 20), 1);
    assert!(events(&mut env).is_empty());
}

#[test]
fn a_predicated_msg_long_is_skipped_until_load_and_exe_sets_its_predicate() {
    let (mut g, mut env) = device();
    qman_up(&mut g, &mut env, PDMA0);
    let pred = DATA + 0x1000;
    let lae = |pmap: bool| {
        let cfg = packets::LAE_LOAD | if pmap { packets::LAE_PMAP } else { 0 };
        build::load_and_exe(cfg, pred)
    };
    // (pmap, the 128-byte buffer with P10 set) for both maps.
    let mut sparse = vec![0u8; 128];
    sparse[40] = 1;
    let mut bitmap = vec![0u8; 128];
    bitmap[1] = 1 << 2;
    let mut pi = 0;
    for (pmap, set) in [(false, sparse), (true, bitmap)] {
        for loaded in [vec![0u8; 128], set] {
            let want = if loaded.iter().any(|&b| b != 0) { 6 } else { 5 };
            env.host_write(pred, &loaded);
            let cb = cat(&[
                &build::msg_long(DATA, 5),
                &lae(pmap),
                &build::with_pred(build::msg_long(DATA, 6), 10),
            ]);
            submit(
                &mut g,
                &mut env,
                (PDMA0, 0, pi),
                CB + 0x100 * u64::from(pi),
                &cb,
                0,
            );
            pi += 1;
            run(&mut g, &mut env);
            assert_eq!(env.host_read_u32(DATA), want, "pmap {pmap}, loaded {want}");
        }
    }
    // Predicate 0 is always true.
    let cb = build::with_pred(build::msg_long(DATA + 4, 1), 0);
    submit(&mut g, &mut env, (PDMA0, 0, pi), CB + 0x800, &cb, 0);
    run(&mut g, &mut env);
    assert_eq!(env.host_read_u32(DATA + 4), 1);
}

#[test]
fn loaded_scalars_execute_as_a_msg_long_and_as_a_msg_short() {
    let (mut g, mut env) = device();
    qman_up(&mut g, &mut env, EDMA0);
    let scalars = DATA + 0x1000;
    let (load, exe) = (packets::LAE_LOAD | packets::LAE_DST, packets::LAE_EXE);
    // ETYPE 0: R0..R3 hold a MSG_LONG; load and execute in one packet,
    // then in two.
    env.host_write(scalars, &build::msg_long(DATA, 0x77));
    let one = build::load_and_exe(load | exe, scalars);
    submit(&mut g, &mut env, (EDMA0, 0, 0), CB, &one, 0);
    run(&mut g, &mut env);
    assert_eq!(env.host_read_u32(DATA), 0x77);
    env.host_write(scalars, &build::msg_long(DATA + 4, 0x78));
    let two = cat(&[
        &build::load_and_exe(load, scalars),
        &build::load_and_exe(exe, 0),
    ]);
    submit(&mut g, &mut env, (EDMA0, 0, 1), CB + 0x100, &two, 0);
    run(&mut g, &mut env);
    assert_eq!(env.host_read_u32(DATA + 4), 0x78);
    // A MSG_SHORT through the stream CP's message base 2: in R2-R3
    // (ETYPE 1), then in R0-R1 (ETYPE 0).
    let q = 0;
    g.reg_write(
        &mut env,
        EDMA0 + 0x1F0 + 0x28 * 2 + 4 * q,
        (DATA + 0x200) as u32,
    );
    g.reg_write(&mut env, EDMA0 + 0x204 + 0x28 * 2 + 4 * q, 0);
    let mut regs16 = [0u8; 16];
    regs16[8..].copy_from_slice(&build::msg_short(2, 0x10, 0x99));
    env.host_write(scalars, &regs16);
    let upper = build::load_and_exe(load | exe | packets::LAE_ETYPE, scalars);
    submit(&mut g, &mut env, (EDMA0, 0, 2), CB + 0x200, &upper, 0);
    run(&mut g, &mut env);
    assert_eq!(env.host_read_u32(DATA + 0x210), 0x99);
    let mut regs16 = [0u8; 16];
    regs16[..8].copy_from_slice(&build::msg_short(2, 0x14, 0x9A));
    env.host_write(scalars, &regs16);
    let lower = build::load_and_exe(load | exe, scalars);
    submit(&mut g, &mut env, (EDMA0, 0, 3), CB + 0x300, &lower, 0);
    run(&mut g, &mut env);
    assert_eq!(env.host_read_u32(DATA + 0x214), 0x9A);
    assert!(events(&mut env).is_empty());
}

#[test]
fn a_fence_on_stream_0_stalls_only_stream_0() {
    let (mut g, mut env) = device();
    qman_up(&mut g, &mut env, PDMA0);
    let parked = cat(&[&build::fence(0, 1, 1), &build::msg_long(DATA, 1)]);
    submit(&mut g, &mut env, (PDMA0, 0, 0), CB, &parked, 0);
    let other = cat(&[&build::nop(), &build::msg_long(DATA + 4, 2)]);
    submit(&mut g, &mut env, (PDMA0, 1, 0), CB + 0x100, &other, 1);
    run(&mut g, &mut env);
    assert_eq!(
        (env.host_read_u32(DATA), env.host_read_u32(DATA + 4)),
        (0, 2)
    );
    assert_eq!(
        (env.host_read_u32(DONE), env.host_read_u32(DONE + 4)),
        (0, 1)
    );
    g.reg_write(&mut env, PDMA0 + 0x290, 1);
    run(&mut g, &mut env);
    assert_eq!((env.host_read_u32(DATA), env.host_read_u32(DONE)), (1, 1));
}

#[test]
fn mme_and_tpc_qmans_run_nop_and_msg_long_cbs() {
    let (mut g, mut env) = device();
    for (i, base) in [DCORE1_MME, DCORE0_TPC6, DCORE3_TPC5]
        .into_iter()
        .enumerate()
    {
        let i = i as u64;
        qman_up(&mut g, &mut env, base);
        let cb = cat(&[
            &build::nop(),
            &build::arb_point(1, false),
            &build::msg_long(DATA + 4 * i, 0x10 + i as u32),
        ]);
        submit(
            &mut g,
            &mut env,
            (base, 3, 0),
            CB + 0x100 * i,
            &cb,
            8 + i as u32,
        );
    }
    run(&mut g, &mut env);
    for i in 0..3 {
        assert_eq!(env.host_read_u32(DATA + 4 * i), 0x10 + i as u32);
        assert_eq!(env.host_read_u32(DONE + 4 * (8 + i)), 1);
    }
    // No DMA core behind a TPC QMAN: a LIN_DMA is its QMAN's error.
    let dma = build::lin_dma(DATA, DATA + 0x100, 8, false);
    submit(&mut g, &mut env, (DCORE0_TPC6, 0, 0), CB + 0x400, &dma, 20);
    run(&mut g, &mut env);
    assert_eq!(g.reg_read(&mut env, DCORE0_TPC6 + 0x024), 1, "halted");
    assert_eq!(events(&mut env), vec![1230]);
    assert_eq!(env.host_read_u32(DONE + 80), 0);
}

#[test]
fn a_wreg_or_message_into_a_register_users_may_not_write_is_a_razwi() {
    let (mut g, mut env) = device();
    qman_up(&mut g, &mut env, EDMA0);
    let sob = regs::CFG_BASE + u64::from(regs::SM_SOB_OBJ_0);
    g.reg_write(&mut env, EDMA0 + 0x1F0 + 0x28, sob as u32);
    g.reg_write(&mut env, EDMA0 + 0x204 + 0x28, (sob >> 32) as u32);
    let pq_base = g.reg_read(&mut env, EDMA0 + 0x050);
    let cases: [Vec<u8>; 3] = [
        // PQ_BASE_LO of stream 0: the driver's, not a user's.
        build::wreg32(0x050, 1).to_vec(),
        build::msg_short(1, 4 * 9, 1).to_vec(),
        build::msg_long(sob + 4 * 40, 1).to_vec(),
    ];
    for (i, cb) in cases.iter().enumerate() {
        submit(
            &mut g,
            &mut env,
            (EDMA0, 0, i as u32),
            CB + 0x100 * i as u64,
            cb,
            1,
        );
        run(&mut g, &mut env);
        assert_eq!(g.reg_read(&mut env, EDMA0 + 0x024), 1, "case {i}: halted");
        g.reg_write(&mut env, EDMA0 + 0x004, 0);
    }
    assert_eq!(events(&mut env), [875, 1238].repeat(3));
    assert_eq!(g.reg_read(&mut env, regs::SM_SOB_OBJ_0 + 4 * 9), 0);
    assert_eq!(g.reg_read(&mut env, regs::SM_SOB_OBJ_0 + 4 * 40), 0);
    assert_eq!(
        g.reg_read(&mut env, EDMA0 + 0x050),
        pq_base,
        "PQ_BASE_LO unchanged"
    );
    // The WREG_32's address: the QMAN's block + its offset.
    let data = env.host_read_u64(CPU_EQ + 8);
    assert_eq!(data, regs::CFG_BASE + u64::from(EDMA0) + 0x050);
}

#[test]
fn a_msg_short_and_a_msg_long_reach_a_user_sob() {
    let (mut g, mut env) = device();
    qman_up(&mut g, &mut env, PDMA0);
    let sob = regs::CFG_BASE + u64::from(regs::SM_SOB_OBJ_0);
    g.reg_write(&mut env, PDMA0 + 0x1F0 + 0x28, sob as u32);
    g.reg_write(&mut env, PDMA0 + 0x204 + 0x28, (sob >> 32) as u32);
    let cb = cat(&[
        &build::msg_short(1, 4 * 413, 1 << 31 | 1),
        &build::msg_long(sob + 4 * 414, 5),
    ]);
    submit(&mut g, &mut env, (PDMA0, 0, 0), CB, &cb, 1);
    run(&mut g, &mut env);
    assert_eq!(g.reg_read(&mut env, regs::SM_SOB_OBJ_0 + 4 * 413), 1);
    assert_eq!(g.reg_read(&mut env, regs::SM_SOB_OBJ_0 + 4 * 414), 5);
    assert!(events(&mut env).is_empty());
}

#[test]
fn nesting_deeper_than_the_frame_stack_is_a_qman_error() {
    let (mut g, mut env) = device();
    qman_up(&mut g, &mut env, DCORE1_MME);
    // A CB calling itself, not as its last packet: no tail call.
    let cb = cat(&[&build::cp_dma(CB, 24, true), &build::nop()]);
    submit(&mut g, &mut env, (DCORE1_MME, 0, 0), CB, &cb, 1);
    run(&mut g, &mut env);
    assert_eq!(g.reg_read(&mut env, DCORE1_MME + 0x024), 1, "halted");
    assert_eq!(events(&mut env), vec![1233]);
    assert_eq!(env.host_read_u32(DONE + 4), 0);
    // Released: the stream goes on with its next BD.
    g.reg_write(&mut env, DCORE1_MME + 0x004, 0);
    submit(
        &mut g,
        &mut env,
        (DCORE1_MME, 0, 1),
        CB + 0x100,
        &build::nop(),
        1,
    );
    run(&mut g, &mut env);
    assert_eq!(env.host_read_u32(DONE + 4), 1);
}

#[test]
fn an_error_of_the_lower_cp_halts_it_and_the_stream_that_handed_the_cb() {
    let (mut g, mut env) = device();
    qman_up(&mut g, &mut env, PDMA0);
    // Opcode 0x6 (REPEAT): not modelled, undefined.
    let mut bad = build::nop().to_vec();
    bad.extend_from_slice(&0u32.to_le_bytes());
    bad.extend_from_slice(&build::ctl(6).to_le_bytes());
    env.host_write(CB + 0x1000, &bad);
    let upper = build::cp_dma(CB + 0x1000, 16, false);
    submit(&mut g, &mut env, (PDMA0, 0, 0), CB, &upper, 1);
    run(&mut g, &mut env);
    assert_eq!(events(&mut env), vec![1244]);
    assert_eq!(
        g.reg_read(&mut env, PDMA0 + 0x024 + 4 * 4),
        1,
        "lower CP halted"
    );
    assert_eq!(g.reg_read(&mut env, PDMA0 + 0x024), 1, "stream 0 halted");
    assert_eq!(
        g.reg_read(&mut env, PDMA0 + 0x37C + 4 * 4),
        (CB + 0x1008) as u32,
        "the failing packet"
    );
    assert_eq!(env.host_read_u32(DONE + 4), 0);
    // Released: both drop their work; the next BD runs on.
    g.reg_write(&mut env, PDMA0 + 0x004, 0);
    assert_eq!(g.reg_read(&mut env, PDMA0 + 0x024 + 4 * 4), 0);
    let ok = build::msg_long(DATA, 3);
    submit(&mut g, &mut env, (PDMA0, 0, 1), CB + 0x100, &ok, 1);
    run(&mut g, &mut env);
    assert_eq!(
        (env.host_read_u32(DATA), env.host_read_u32(DONE + 4)),
        (3, 1)
    );
}

#[test]
fn garbage_calls_lists_and_loads_never_panic() {
    let (mut g, mut env) = device();
    qman_up(&mut g, &mut env, EDMA0);
    qman_up(&mut g, &mut env, DCORE0_TPC6);
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let opcodes = [0x5u32, 0xE, 0xF, 0x3, 0x4, 0x8, 0xC, 0x2, 0x1];
    for round in 0..300u32 {
        let mut cb = Vec::new();
        for _ in 0..4 {
            let op = opcodes[(next() % opcodes.len() as u64) as usize];
            let first = next() as u32;
            let ctl = build::ctl(op) | (next() as u32 & 0x00FF_FFFF);
            // Addresses into the CB area, the data area, SRAM, or anywhere.
            let addr = match next() % 4 {
                0 => CB + (next() % 0x2000),
                1 => DATA + (next() % 0x1000),
                2 => regs::SRAM_BASE_ADDR + (next() % 0x1000),
                _ => next(),
            };
            cb.extend_from_slice(&first.to_le_bytes());
            cb.extend_from_slice(&ctl.to_le_bytes());
            cb.extend_from_slice(&addr.to_le_bytes());
            cb.extend_from_slice(&next().to_le_bytes());
        }
        let len = (next() % cb.len() as u64) as usize;
        let base = if round % 2 == 0 { EDMA0 } else { DCORE0_TPC6 };
        let at = CB + 0x100 * u64::from(round % 32);
        submit(
            &mut g,
            &mut env,
            (base, round % 4, round / 4),
            at,
            &cb[..len],
            1,
        );
        for _ in 0..20 {
            g.step(&mut env);
        }
        g.reg_write(&mut env, base + 0x004, 0);
        g.reg_write(&mut env, base + 0x290 + 4 * (round % 5), next() as u32);
    }
}

#[test]
fn a_lin_dma_into_the_register_space_is_a_razwi() {
    let (mut g, mut env) = device();
    qman_up(&mut g, &mut env, EDMA0);
    let pq_base = g.reg_read(&mut env, EDMA0 + 0x050);
    let target = regs::CFG_BASE + u64::from(EDMA0) + 0x050;
    let cb = build::lin_dma(1, target, 4, true);
    submit(&mut g, &mut env, (EDMA0, 0, 0), CB, &cb, 1);
    run(&mut g, &mut env);
    assert_eq!(
        g.reg_read(&mut env, EDMA0 + 0x050),
        pq_base,
        "PQ_BASE_LO unchanged"
    );
    assert_eq!(g.reg_read(&mut env, EDMA0 + 0x024), 1, "halted");
}

#[test]
fn a_lin_dma_reaches_user_sobs_in_the_register_space_and_reads_no_closed_word() {
    let (mut g, mut env) = device();
    qman_up(&mut g, &mut env, EDMA0);
    // Two user SOBs (1000, 1001) set by a memset of 8 bytes.
    let at = regs::CFG_BASE + u64::from(regs::SM_SOB_OBJ_0) + 4 * 1000;
    let cb = build::lin_dma(0x0000_0002_0000_0001, at, 8, true);
    submit(&mut g, &mut env, (EDMA0, 0, 0), CB, &cb, 1);
    run(&mut g, &mut env);
    assert_eq!(g.reg_read(&mut env, EDMA0 + 0x024), 0, "not halted");
    assert_eq!(g.reg_read(&mut env, regs::SM_SOB_OBJ_0 + 4 * 1000), 1);
    assert_eq!(g.reg_read(&mut env, regs::SM_SOB_OBJ_0 + 4 * 1001), 2);
    // A copy out of the QMAN's own PQ registers: a RAZWI, nothing read.
    env.host_write(DATA, &[0xEE; 16]);
    let src = regs::CFG_BASE + u64::from(EDMA0) + 0x050;
    let cb = build::lin_dma(src, DATA, 16, false);
    submit(&mut g, &mut env, (EDMA0, 1, 0), CB + 0x100, &cb, 1);
    run(&mut g, &mut env);
    assert_eq!(g.reg_read(&mut env, EDMA0 + 0x028), 1, "stream 1 halted");
    assert_eq!(env.host_read_u32(DATA), 0xEEEE_EEEE);
}

/// `mmDCORE0_EDMA0_CORE_BASE`: EDMA0's DMA core, the QMAN's block + 0x1000.
const EDMA0_CORE: u32 = EDMA0 + 0x1000;

/// MSG_LONGs that program EDMA0's core for a linear transfer of `tsize`
/// bytes (`memset`: `src` the fill value), completing with `wdata` at
/// `comp`, then the `COMMIT` of `commit`.
fn core_cb(src: u64, dst: u64, tsize: u32, comp: (u64, u32), commit: u32) -> Vec<u8> {
    use gaudi2_model::dma_core as k;
    let reg = |off: u32| regs::CFG_BASE + u64::from(EDMA0_CORE + off);
    [
        (k::SRC_BASE_LO, src as u32),
        (k::SRC_BASE_HI, (src >> 32) as u32),
        (k::DST_BASE_LO, dst as u32),
        (k::DST_BASE_HI, (dst >> 32) as u32),
        (k::DST_TSIZE_0, tsize),
        (k::WR_COMP_ADDR_LO, comp.0 as u32),
        (k::WR_COMP_ADDR_HI, (comp.0 >> 32) as u32),
        (k::WR_COMP_WDATA, comp.1),
        (k::COMMIT, commit),
    ]
    .iter()
    .flat_map(|&(off, v)| build::msg_long(reg(off), v))
    .collect()
}

#[test]
fn a_cb_programs_and_commits_its_dma_cores_linear_transfer() {
    use gaudi2_model::dma_core as k;
    let (mut g, mut env) = device();
    qman_up(&mut g, &mut env, EDMA0);
    let payload: Vec<u8> = (0..5000u32).map(|i| (i * 13) as u8).collect();
    env.host_write(DATA, &payload);
    let sob = |s: u32| regs::CFG_BASE + u64::from(regs::SM_SOB_OBJ_0 + 4 * s);
    // A copy of 5000 bytes completing into user SOB 1000.
    let cb = core_cb(
        DATA,
        DATA + 0x2000,
        5000,
        (sob(1000), 7),
        k::COMMIT_LIN | k::COMMIT_WR_COMP_EN,
    );
    submit(&mut g, &mut env, (EDMA0, 0, 0), CB, &cb, 1);
    run(&mut g, &mut env);
    assert_eq!(g.reg_read(&mut env, EDMA0 + 0x024), 0, "not halted");
    assert_eq!(env.host_read(DATA + 0x2000, 5000), payload);
    assert_eq!(g.reg_read(&mut env, regs::SM_SOB_OBJ_0 + 4 * 1000), 7);
    // The registers read back; COMMIT reads 0 once idle.
    assert_eq!(g.reg_read(&mut env, EDMA0_CORE + k::DST_TSIZE_0), 5000);
    assert_eq!(g.reg_read(&mut env, EDMA0_CORE + k::COMMIT), 0);
    // A memset, no completion.
    let cb = core_cb(
        0x0101_0101_0101_0101,
        DATA + 0x4000,
        64,
        (0, 0),
        k::COMMIT_LIN | k::COMMIT_MEM_SET,
    );
    submit(&mut g, &mut env, (EDMA0, 0, 1), CB + 0x400, &cb, 1);
    run(&mut g, &mut env);
    assert_eq!(env.host_read_u64(DATA + 0x4000 + 56), 0x0101_0101_0101_0101);
    // A tensor commit (no LIN): the core's error, nothing moved.
    let cb = core_cb(
        DATA,
        DATA + 0x6000,
        64,
        (sob(1001), 1),
        k::COMMIT_WR_COMP_EN,
    );
    submit(&mut g, &mut env, (EDMA0, 0, 2), CB + 0x800, &cb, 1);
    run(&mut g, &mut env);
    assert_eq!(env.host_read_u64(DATA + 0x6000), 0);
    assert_eq!(g.reg_read(&mut env, regs::SM_SOB_OBJ_0 + 4 * 1001), 0);
    assert!(events(&mut env).contains(&gaudi2_model::events::dma_core(regs::EVENT_QM[2])));
}

#[test]
fn a_dma_cores_completion_and_asid_stay_the_drivers() {
    use gaudi2_model::dma_core as k;
    let (mut g, mut env) = device();
    qman_up(&mut g, &mut env, EDMA0);
    // A completion aimed at the driver's SOB 0: a RAZWI, the SOB unchanged.
    let sob0 = regs::CFG_BASE + u64::from(regs::SM_SOB_OBJ_0);
    let cb = core_cb(
        DATA,
        DATA + 0x100,
        16,
        (sob0, 1),
        k::COMMIT_LIN | k::COMMIT_WR_COMP_EN,
    );
    submit(&mut g, &mut env, (EDMA0, 0, 0), CB, &cb, 1);
    run(&mut g, &mut env);
    assert_eq!(g.reg_read(&mut env, regs::SM_SOB_OBJ_0), 0);
    assert!(events(&mut env).contains(&gaudi2_model::events::RAZWI));
    // The core's ASID and MMU bypass are secured: a CB's write is a RAZWI
    // that halts the stream.
    let asid = regs::CFG_BASE + u64::from(EDMA0_CORE + k::AXUSER_HB_MMU_BP);
    let cb = build::msg_long(asid, 0x11);
    submit(&mut g, &mut env, (EDMA0, 1, 0), CB + 0x400, &cb, 1);
    run(&mut g, &mut env);
    assert_eq!(g.reg_read(&mut env, EDMA0 + 0x028), 1, "stream 1 halted");
    assert_eq!(g.reg_read(&mut env, EDMA0_CORE + k::AXUSER_HB_MMU_BP), 0);
}

/// Found by a review: a CB's messages to registers users may write but the
/// model does not interpret (here `ARB_MST_CHOICE_PUSH_OFST_*` of many
/// QMANs) took slots of the register file until it was full, and the
/// driver's later writes were dropped.
#[test]
fn a_cbs_messages_never_fill_the_register_file() {
    let (mut g, mut env) = device();
    qman_up(&mut g, &mut env, EDMA0);
    let cb: Vec<u8> = (0..qman::QMANS)
        .flat_map(|m| {
            let base = qman::base(m).unwrap();
            (0..63u32).map(move |i| regs::CFG_BASE + u64::from(base + 0x5E4 + 4 * i))
        })
        .flat_map(|at| build::msg_long(at, 1))
        .collect();
    assert!(cb.len() / 16 > 2 * 1024);
    submit(&mut g, &mut env, (EDMA0, 0, 0), CB, &cb, 1);
    run(&mut g, &mut env);
    assert_eq!(g.reg_read(&mut env, EDMA0 + 0x024), 0, "not halted");
    // The driver's own writes of registers the model keeps still stick.
    for i in 0..64 {
        let reg = regs::PDMA0_QM_BASE + 0x600 + 4 * i;
        g.reg_write(&mut env, reg, 0x100 + i);
        assert_eq!(g.reg_read(&mut env, reg), 0x100 + i);
    }
}

/// The driver holds the user cores halted from a context's close to the
/// next open: a commit meanwhile starts nothing, and a release lets the
/// next one run. A transfer's ASIDs are the ones at its commit.
#[test]
fn a_halted_dma_core_drops_every_commit_until_released() {
    use gaudi2_model::dma_core as k;
    let (mut g, mut env) = device();
    qman_up(&mut g, &mut env, EDMA0);
    env.host_write(DATA, &[0xAB; 256]);
    g.reg_write(&mut env, EDMA0_CORE + k::CFG_1, 1);
    let commit = k::COMMIT_LIN;
    let cb = core_cb(DATA, DATA + 0x1000, 256, (0, 0), commit);
    submit(&mut g, &mut env, (EDMA0, 0, 0), CB, &cb, 1);
    run(&mut g, &mut env);
    assert_eq!(env.host_read(DATA + 0x1000, 256), vec![0; 256], "halted");
    assert_eq!(g.reg_read(&mut env, EDMA0_CORE + k::CFG_1), 1);
    g.reg_write(&mut env, EDMA0_CORE + k::CFG_1, 0);
    submit(&mut g, &mut env, (EDMA0, 0, 1), CB + 0x400, &cb, 1);
    run(&mut g, &mut env);
    assert_eq!(
        env.host_read(DATA + 0x1000, 256),
        vec![0xAB; 256],
        "released"
    );
}
