// SPDX-License-Identifier: GPL-2.0

//! Host tests of the Gaudi2 model core, driven through a test [`Env`] over
//! plain vectors: host memory as a set of DMA-mapped windows (anything else
//! faults), DRAM and SRAM as byte vectors, MSI-X as a list of vectors.

mod common;

use common::TestEnv;
use gaudi2_model::{regs, walker, Config, Gaudi2};

/// A device on the heap: `Gaudi2` is about 360 KiB, a test thread's stack 2 MiB.
fn device() -> (Box<Gaudi2>, TestEnv) {
    (
        Box::new(Gaudi2::new(&Config::with_dram(64 << 20))),
        TestEnv::new(64 << 20),
    )
}

#[test]
fn boot_status_reads_as_after_firmware_boot() {
    let (mut g, mut env) = device();
    assert_eq!(
        g.reg_read(&mut env, regs::CPU_BOOT_STATUS),
        regs::BOOT_STATUS_SRAM_AVAIL
    );
    assert_eq!(g.reg_read(&mut env, regs::CPU_BOOT_DEV_STS0), 1 << 31);
    assert_eq!(g.reg_read(&mut env, regs::CPU_BOOT_DEV_STS1), 1 << 31);
    assert_eq!(g.reg_read(&mut env, regs::CPU_BOOT_ERR0), 1 << 31);
    assert_eq!(g.reg_read(&mut env, regs::HW_STATE), regs::HW_STATE_CLEAN);
    // Scratchpads and plain registers keep what is written.
    g.reg_write(&mut env, regs::PSOC_SCRATCHPAD_0 + 4, 0x1234);
    assert_eq!(g.reg_read(&mut env, regs::PSOC_SCRATCHPAD_0 + 4), 0x1234);
    g.reg_write(&mut env, regs::HW_STATE, 1);
    assert_eq!(g.reg_read(&mut env, regs::HW_STATE), 1);
    g.reg_write(&mut env, 0x4C8_A04C, 0xFF);
    assert_eq!(g.reg_read(&mut env, 0x4C8_A04C), 0xFF);
    assert_eq!(g.reg_read(&mut env, 0x4C8_A050), 0);
    let s = g.stats();
    assert_eq!((s.reg_reads, s.reg_writes), (9, 3));
    assert!(!g.pending());
    assert!(!g.step(&mut env));
}

#[test]
fn the_device_state_stays_small() {
    // Fixed-size state a host can box: guard against an array growing
    // (the four dcores' sync managers are about 300 KiB of it).
    let n = core::mem::size_of::<Gaudi2>();
    // 39 QMANs of 5 CPs with 8-frame stacks, 4 dcores' sync managers.
    assert!(n < 512 << 10, "{n} bytes");
}

#[test]
fn register_file_fills_without_panicking() {
    let (mut g, mut env) = device();
    // More distinct registers than the file holds, unaligned ones and the
    // top of the address space included: the excess is dropped and counted.
    for i in 0..5000u32 {
        g.reg_write(&mut env, 0x100_0000 + i * 4, i);
    }
    g.reg_write(&mut env, u32::MAX, 1);
    g.reg_write(&mut env, 0x100_0001, 1);
    assert!(g.stats().regfile_dropped > 0);
    assert_eq!(g.reg_read(&mut env, 0x100_0000 + 4), 1);
}

// --- The page walker and the scrambler (moved from the sim's KUnit suite
// `hlrs_sim_walker` with the walker itself) -------------------------------

use walker::{HbmScrambler, Leaf, Tables, WalkStop};

/// Walk tables given as a list of (address, PTE): anything else reads 0,
/// addresses from `limit` on are unreadable.
fn walked(
    t: Tables,
    hop0: u64,
    va: u64,
    ptes: &[(u64, u64)],
    limit: u64,
) -> Result<Leaf, WalkStop> {
    let mut read =
        |a: u64| (a < limit).then(|| ptes.iter().find(|(at, _)| *at == a).map_or(0, |(_, v)| *v));
    walker::walk(t, hop0, va, &mut read)
}

#[test]
fn walker_decodes_hand_written_pmmu_tables() {
    // VA 0xFFF0_0000_0020_3ABC: hop indices 127, 0x1F0, 0, 0, 1, 3.
    let va = 0xFFF0_0000_0020_3ABCu64;
    let hop0 = 0x10_0000u64;
    let t = [0x20_0000u64, 0x30_0000, 0x40_0000, 0x50_0000, 0x60_0000];
    let ptes = [
        (hop0 + 127 * 8, t[0] | 1),
        (t[0] + 0x1F0 * 8, t[1] | 1),
        (t[1], t[2] | 1),
        (t[2], t[3] | 1),
        (t[3] + 8, t[4] | 1),
        // The leaf: flag bits other than PRESENT and LAST are ignored.
        (t[4] + 3 * 8, 0x1234_5000 | 0x800 | 0x7E | 1),
    ];
    let leaf = walked(Tables::Pmmu, hop0, va, &ptes, u64::MAX);
    assert_eq!(
        leaf,
        Ok(Leaf {
            page: 0x1234_5000,
            shift: 12,
            level: 5
        })
    );
    // A 2 MiB leaf at hop 4: the address bits below 2 MiB are dropped.
    let mut huge = ptes;
    huge[4] = (t[3] + 8, 0x4000_0000 | 0x1000 | 0x801);
    assert_eq!(
        walked(Tables::Pmmu, hop0, va, &huge, u64::MAX).map(|l| (l.page, l.shift)),
        Ok((0x4000_0000, 21))
    );
    // A cleared PRESENT bit stops the walk there, LAST or not.
    let mut gone = ptes;
    gone[2] = (t[1], t[2] | 0x800);
    assert_eq!(
        walked(Tables::Pmmu, hop0, va, &gone, u64::MAX),
        Err(WalkStop::NotPresent(2))
    );
    // Tables the MMU cannot read.
    assert_eq!(
        walked(Tables::Pmmu, hop0, va, &ptes, 0x50_0000),
        Err(WalkStop::Unreadable(t[3] + 8))
    );
    // Six hops of pointers and no LAST: no page.
    let mut deep = ptes;
    deep[5] = (t[4] + 3 * 8, 0x1234_5000 | 1);
    assert_eq!(
        walked(Tables::Pmmu, hop0, va, &deep, u64::MAX),
        Err(WalkStop::NoLeaf)
    );
}

#[test]
fn walker_hmmu_walks_four_hops_to_1g_pages() {
    let hop0 = 0x1001_0000_2FC0_0000u64;
    let va = 0x1001_0040_8765_4321u64;
    // Indices: hop0 8 (bits 63:57 of 0x1001.. = 0x08), hop1 1, hop2 0, hop3 0x102.
    let t = [
        0x1001_0000_2FC0_1000u64,
        0x1001_0000_2FC0_2000,
        0x1001_0000_2FC0_3000,
    ];
    let ptes = [
        (hop0 + 8 * 8, t[0] | 1),
        (t[0] + 8, t[1] | 1),
        (t[1], t[2] | 1),
        (t[2] + 0x102 * 8, 0x1001_0001_4000_0000 | 0x801),
    ];
    assert_eq!(
        walked(Tables::Hmmu, hop0, va, &ptes, u64::MAX),
        Ok(Leaf {
            page: 0x1001_0001_4000_0000,
            shift: 30,
            level: 3
        })
    );
    // A pointer at hop 3 leads nowhere: the HMMU has four hops.
    let mut four = ptes;
    four[3] = (t[2] + 0x102 * 8, 0x1001_0001_4000_0000 | 1);
    assert_eq!(
        walked(Tables::Hmmu, hop0, va, &four, u64::MAX),
        Err(WalkStop::NoLeaf)
    );
}

#[test]
fn scrambling_follows_the_documented_formula() {
    // The table of gaudi2.c:11512-11517 (6 HBMs: 48 MiB -> 64 MiB).
    let s = HbmScrambler::new(6);
    let base = regs::DRAM_PHYS_BASE;
    assert_eq!(s.scramble(base + 0x9C00_0000), base + 0xD000_0000);
    assert_eq!(s.scramble(base + 0x9F00_0000), base + 0xD400_0000);
    assert_eq!(s.descramble(base + 0xD000_0000), base + 0x9C00_0000);
    for hbms in [5u32, 6] {
        let s = HbmScrambler::new(hbms);
        let page = 16 * u64::from(hbms) * (8 << 20);
        // DRAM page k is MMU page k (1 GiB), and back.
        for k in [0u64, 1, 7, 100] {
            let a = base + k * page + 12345;
            assert_eq!(s.scramble(base + k * page), base + k * (1 << 30));
            assert_eq!(s.descramble(s.scramble(a)), a);
        }
    }
    // Outside the DRAM space nothing changes.
    assert_eq!(s.scramble(0xFFF0_0000_0000_1000), 0xFFF0_0000_0000_1000);
    assert_eq!(s.descramble(0x1000_FFFF_FD00_0000), 0x1000_FFFF_FD00_0000);
}

// --- MMUs through their registers ---------------------------------------

const PMMU_STLB: u32 = regs::PMMU_MMU_BASE + regs::STLB_BLOCK_OFFSET;
const HMMU0_STLB: u32 = regs::HMMU0_MMU_BASE + regs::STLB_BLOCK_OFFSET;

/// Hop 0 of `asid` through the STLB registers at `stlb`, as
/// `gaudi2_mmu_update_asid_hop0_addr` does, checking BUSY clears.
fn set_hop0(g: &mut Gaudi2, env: &mut TestEnv, stlb: u32, asid: u32, pa: u64) {
    g.reg_write(env, stlb + regs::stlb::ASID, asid);
    g.reg_write(env, stlb + regs::stlb::HOP0_PA43_12, (pa >> 12) as u32);
    g.reg_write(env, stlb + regs::stlb::HOP0_PA63_44, (pa >> 44) as u32);
    g.reg_write(env, stlb + regs::stlb::BUSY, 0x8000_0000);
    assert_eq!(g.reg_read(env, stlb + regs::stlb::BUSY) & 0x8000_0000, 0);
}

/// `gaudi2_mmu_init_common` on the MMU whose block starts at `mmu`.
fn enable_mmu(g: &mut Gaudi2, env: &mut TestEnv, mmu: u32) {
    let stlb = mmu + regs::STLB_BLOCK_OFFSET;
    g.reg_write(env, stlb + regs::stlb::INV_ALL_START, 1);
    assert_eq!(g.reg_read(env, stlb + regs::stlb::SRAM_INIT), 0);
    g.reg_write(env, mmu + regs::mmu::MMU_BYPASS, 0);
    assert_eq!(g.reg_read(env, stlb + regs::stlb::INV_ALL_START), 0);
    g.reg_write(env, mmu + regs::mmu::MMU_ENABLE, 1);
}

/// Host memory for PMMU tables and pages: 1 MiB at bus 0x10_0000.
const HOST: u64 = 0x10_0000;

/// Six hops of PMMU tables for `va` -> bus `page`, hop 0 at `hop0`, the
/// other tables in fresh 4 KiB pages from `tables`.
fn pmmu_map(env: &mut TestEnv, hop0: u64, tables: u64, va: u64, page: u64) {
    let shifts = [57u32, 48, 39, 30, 21, 12];
    let mut table = hop0;
    for (level, shift) in shifts.iter().enumerate() {
        let index = (va >> shift) & if level == 0 { 0x7F } else { 0x1FF };
        let pte = if level == 5 {
            page | 0x801
        } else {
            (tables + level as u64 * 0x1000) | 1
        };
        env.host_u64(table + index * 8, pte);
        table = tables + level as u64 * 0x1000;
    }
}

#[test]
fn hop0_is_kept_per_asid_and_a_6_level_pmmu_walk_translates() {
    let (mut g, mut env) = device();
    env.map(HOST, 1 << 20);
    // Two ASIDs with their own hop 0 and their own mapping of one VA.
    let va = 0xFFF0_0000_0020_3000u64;
    set_hop0(&mut g, &mut env, PMMU_STLB, 1, HOST);
    set_hop0(&mut g, &mut env, PMMU_STLB, 2, HOST + 0x1000);
    pmmu_map(&mut env, HOST, HOST + 0x2000, va, HOST + 0x8_0000);
    pmmu_map(
        &mut env,
        HOST + 0x1000,
        HOST + 0x1_0000,
        va,
        HOST + 0x9_0000,
    );
    env.host_write(HOST + 0x8_0010, b"asid one");
    env.host_write(HOST + 0x9_0010, b"asid two");
    // Disabled, the PMMU translates nothing: a decode error.
    let mut buf = [0u8; 8];
    assert!(g.engine_read(&mut env, 1, va + 0x10, &mut buf).is_err());
    enable_mmu(&mut g, &mut env, regs::PMMU_MMU_BASE);
    g.engine_read(&mut env, 1, va + 0x10, &mut buf).unwrap();
    assert_eq!(&buf, b"asid one");
    g.engine_read(&mut env, 2, va + 0x10, &mut buf).unwrap();
    assert_eq!(&buf, b"asid two");
    // ASID 3 has no hop 0: a page fault.
    assert_eq!(
        g.engine_read(&mut env, 3, va + 0x10, &mut buf),
        Err(gaudi2_model::EngineFault::Page {
            mmu: 0,
            va: va + 0x10
        })
    );
    let s = g.stats();
    assert_eq!((s.stlb_misses, s.stlb_hits), (3, 0));
    g.engine_read(&mut env, 1, va + 0x18, &mut buf).unwrap();
    assert_eq!(g.stats().stlb_hits, 1);
}

#[test]
fn a_4_level_hmmu_walk_reads_dram_tables_through_the_scrambler() {
    let (mut g, mut env) = device();
    let base = regs::DRAM_PHYS_BASE;
    let scr = HbmScrambler::new(6);
    // Hop 0 of ASID 1 at DRAM + 0x10_0000, tables after it; VA DRAM page 1
    // (a DRAM page is 16 x 6 HBMs x 8 MiB = 768 MiB, one 1 GiB MMU page
    // once scrambled) maps DRAM page 0.
    let hop0 = base + 0x10_0000;
    let va = base + (768 << 20) + 0x1234;
    let key = scr.scramble(va);
    let mut table = hop0;
    for (level, shift) in [57u32, 48, 39, 30].iter().enumerate() {
        let index = (key >> shift) & if level == 0 { 0x7F } else { 0x1FF };
        let next = base + 0x20_0000 + level as u64 * 0x1000;
        let pte = if level == 3 {
            scr.scramble(base) | 0x801
        } else {
            next | 1
        };
        env.dram_u64(table + index * 8, pte);
        table = next;
    }
    env.dram_range(base + 0x1234, 4)
        .unwrap()
        .copy_from_slice(b"hbm!");
    set_hop0(&mut g, &mut env, HMMU0_STLB, 1, hop0);
    enable_mmu(&mut g, &mut env, regs::HMMU0_MMU_BASE);
    let mut buf = [0u8; 4];
    g.engine_read(&mut env, 1, va, &mut buf).unwrap();
    assert_eq!(&buf, b"hbm!");
    // Through the 1 GiB MMU page the next DRAM page's bytes are reached too.
    g.engine_write(&mut env, 1, va + (48 << 20), b"next")
        .unwrap();
    assert_eq!(
        env.dram_range(base + (48 << 20) + 0x1234, 4).unwrap(),
        b"next"
    );
}

/// A PMMU with ASID 1's `va` mapped to bus `HOST + 0x8_0000`.
fn pmmu_device(va: u64) -> (Box<Gaudi2>, TestEnv) {
    let (mut g, mut env) = device();
    env.map(HOST, 1 << 20);
    set_hop0(&mut g, &mut env, PMMU_STLB, 1, HOST);
    pmmu_map(&mut env, HOST, HOST + 0x2000, va, HOST + 0x8_0000);
    enable_mmu(&mut g, &mut env, regs::PMMU_MMU_BASE);
    env.host_write(HOST + 0x8_0000, b"old page");
    env.host_write(HOST + 0x9_0000, b"new page");
    (g, env)
}

/// Remap `va` (already walked) to bus `HOST + 0x9_0000` in the tables.
fn remap(env: &mut TestEnv, va: u64) {
    pmmu_map(env, HOST, HOST + 0x2000, va, HOST + 0x9_0000);
}

/// The driver's range invalidation of `[start, end)` for `asid`
/// (`gaudi2_mmu_invalidate_cache_range` + trigger + poll).
fn invalidate_range(g: &mut Gaudi2, env: &mut TestEnv, asid: u32, start: u64, end: u64) {
    let s = PMMU_STLB;
    g.reg_write(
        env,
        regs::PMMU_MMU_BASE + 0x1000 + regs::stlb::MEM_CACHE_INVALIDATION,
        1,
    );
    g.reg_write(
        env,
        s + regs::stlb::RANGE_INV_START_LSB,
        ((start - 1) >> 12) as u32,
    );
    g.reg_write(
        env,
        s + regs::stlb::RANGE_INV_START_MSB,
        ((start - 1) >> 44) as u32,
    );
    g.reg_write(env, s + regs::stlb::RANGE_INV_END_LSB, (end >> 12) as u32);
    g.reg_write(env, s + regs::stlb::RANGE_INV_END_MSB, (end >> 44) as u32);
    g.reg_write(
        env,
        s + regs::stlb::RANGE_CACHE_INVALIDATION,
        1 | 1 << 1 | asid << 2,
    );
    assert_eq!(g.reg_read(env, s + regs::stlb::MEM_CACHE_INV_STATUS) & 1, 1);
    g.reg_write(env, s + regs::stlb::MEM_CACHE_INV_STATUS, 0);
    assert_eq!(
        g.reg_read(env, s + regs::stlb::RANGE_CACHE_INVALIDATION) & 1,
        0
    );
}

#[test]
fn without_invalidation_the_stlb_serves_the_stale_page() {
    let va = 0xFFF0_0000_0040_0000u64;
    let (mut g, mut env) = pmmu_device(va);
    let mut buf = [0u8; 8];
    g.engine_read(&mut env, 1, va, &mut buf).unwrap();
    assert_eq!(&buf, b"old page");
    remap(&mut env, va);
    g.engine_read(&mut env, 1, va, &mut buf).unwrap();
    assert_eq!(&buf, b"old page", "the STLB keeps the walked translation");
    // A range of another ASID, or one ending before the page, keeps it.
    invalidate_range(&mut g, &mut env, 2, va, va + 0x1000);
    invalidate_range(&mut g, &mut env, 1, va - 0x2000, va - 0x1000);
    g.engine_read(&mut env, 1, va, &mut buf).unwrap();
    assert_eq!(&buf, b"old page");
    // The enable's INV_ALL and the two ranges.
    assert_eq!(g.stats().invalidations, 3);
}

#[test]
fn a_range_invalidation_makes_the_changed_pte_visible() {
    let va = 0xFFF0_0000_0040_0000u64;
    let (mut g, mut env) = pmmu_device(va);
    let mut buf = [0u8; 8];
    g.engine_read(&mut env, 1, va, &mut buf).unwrap();
    assert_eq!(&buf, b"old page");
    remap(&mut env, va);
    invalidate_range(&mut g, &mut env, 1, va, va + 0x1000);
    g.engine_read(&mut env, 1, va, &mut buf).unwrap();
    assert_eq!(&buf, b"new page");
    // INV_ALL drops everything as well.
    pmmu_map(&mut env, HOST, HOST + 0x2000, va, HOST + 0x8_0000);
    g.reg_write(&mut env, PMMU_STLB + regs::stlb::INV_ALL_START, 1);
    g.engine_read(&mut env, 1, va, &mut buf).unwrap();
    assert_eq!(&buf, b"old page");
}

// --- CPU-CP and the event queue -------------------------------------------

/// Host memory of the CPU queues: PQ (64 KiB), EQ (4 KiB), the
/// CPU-accessible pool (CQ, 2 MiB window), at these bus addresses.
const CPU_PQ: u64 = 0x100_0000;
const CPU_EQ: u64 = 0x200_0000;
const CPU_POOL: u64 = 0x300_0000;

/// `gaudi2_init_cpu_queues`: bases, lengths, QUEUE_INIT, the answer.
fn cpu_queues(g: &mut Gaudi2, env: &mut TestEnv) {
    env.map(CPU_PQ, 64 << 10);
    env.map(CPU_EQ, 4 << 10);
    env.map(CPU_POOL, 2 << 20);
    for (reg, v) in [
        (regs::CPU_IF_PQ_BASE_ADDR_LOW, CPU_PQ as u32),
        (regs::CPU_IF_PQ_BASE_ADDR_HIGH, 0),
        (regs::CPU_IF_EQ_BASE_ADDR_LOW, CPU_EQ as u32),
        (regs::CPU_IF_EQ_BASE_ADDR_HIGH, 0),
        (regs::CPU_IF_CQ_BASE_ADDR_LOW, CPU_POOL as u32),
        (regs::CPU_IF_CQ_BASE_ADDR_HIGH, 0),
        (regs::CPU_IF_PQ_LENGTH, 64 << 10),
        (regs::CPU_IF_EQ_LENGTH, 4 << 10),
        (regs::CPU_IF_CQ_LENGTH, 2 << 20),
        (regs::CPU_IF_EQ_RD_OFFS, 0),
        (regs::CPU_IF_PF_PQ_PI, 0),
        (regs::CPU_IF_QUEUE_INIT, regs::PQ_INIT_STATUS_READY_FOR_CP),
    ] {
        g.reg_write(env, reg, v);
    }
    assert_eq!(
        g.reg_read(env, regs::CPU_IF_QUEUE_INIT),
        regs::PQ_INIT_STATUS_READY_FOR_HOST
    );
}

/// `hl_fw_send_cpu_message`: the packet in the pool at `slot`, its BD at
/// PQ entry `pi`, the doorbell; returns (fence, rc, result).
fn cpu_message(
    g: &mut Gaudi2,
    env: &mut TestEnv,
    pi: u32,
    opcode: u32,
    value: u64,
    index: u32,
) -> (u32, u32, u64) {
    let pkt = CPU_POOL + u64::from(pi) * 0x100;
    let mut p = [0u8; 24];
    p[0..8].copy_from_slice(&value.to_le_bytes());
    p[8..12].copy_from_slice(&(opcode << 16).to_le_bytes());
    p[12..16].copy_from_slice(&u32::MAX.to_le_bytes());
    p[16..20].copy_from_slice(&index.to_le_bytes());
    env.host_write(pkt, &p);
    let mut bd = [0u8; 16];
    bd[0..8].copy_from_slice(&pkt.to_le_bytes());
    bd[8..12].copy_from_slice(&24u32.to_le_bytes());
    env.host_write(CPU_PQ + u64::from(pi % 4096) * 16, &bd);
    g.reg_write(env, regs::CPU_IF_PF_PQ_PI, pi + 1);
    let a = env.host_read(pkt, 24);
    let ctl = u32::from_le_bytes(a[8..12].try_into().unwrap());
    (
        u32::from_le_bytes(a[12..16].try_into().unwrap()),
        (ctl >> 12) & 0xF,
        u64::from_le_bytes(a[0..8].try_into().unwrap()),
    )
}

const FENCE: u32 = 0xFE8C_E7A5;

#[test]
fn cpucp_test_and_info_get_round_trip_through_the_cpu_pq() {
    let (mut g, mut env) = device();
    // Before the handshake nothing answers.
    env.map(CPU_POOL, 2 << 20);
    env.map(CPU_PQ, 64 << 10);
    assert_eq!(
        cpu_message(&mut g, &mut env, 0, 19, u64::from(FENCE), 0).0,
        u32::MAX
    );
    env.unmap(CPU_POOL);
    env.unmap(CPU_PQ);
    cpu_queues(&mut g, &mut env);
    // TEST: the fence value comes back as the result.
    assert_eq!(
        cpu_message(&mut g, &mut env, 0, 19, u64::from(FENCE), 0),
        (FENCE, 0, u64::from(FENCE))
    );
    // INFO_GET: a cpucp_info DMA'd where the packet says.
    let info = CPU_POOL + 0x10_0000;
    let (fence, rc, _) = cpu_message(&mut g, &mut env, 1, 15, info, 1768);
    assert_eq!((fence, rc), (FENCE, 0));
    let i = env.host_read(info, 1768);
    assert_eq!(
        u64::from_le_bytes(i[1560..1568].try_into().unwrap()),
        64 << 20
    );
    assert_eq!(&i[1568..1575], b"HL-225\0");
    // An unknown packet: rc invalid_pkt, fence still written.
    assert_eq!(cpu_message(&mut g, &mut env, 2, 4000, 0, 0), (FENCE, 3, 0));
    // PLL info: four outputs in MHz.
    assert_eq!(cpu_message(&mut g, &mut env, 3, 31, 0, 0).2 & 0xFFFF, 1650);
    // PCI throughput: the model's own DMA byte counters, growing.
    let (_, rc, rx1) = cpu_message(&mut g, &mut env, 4, 28, 0, 0);
    let (_, _, rx2) = cpu_message(&mut g, &mut env, 5, 28, 0, 0);
    assert_eq!(rc, 0);
    assert!(rx1 > 0 && rx2 > rx1, "{rx1} {rx2}");
    assert_eq!(
        cpu_message(&mut g, &mut env, 6, 28, 0, 1).2,
        g.stats().dma_write_bytes - 16
    );
    assert_eq!(g.stats().cpucp_packets, 7);
}

#[test]
fn queue_init_refuses_a_pq_length_that_is_not_a_power_of_two() {
    let (mut g, mut env) = device();
    g.reg_write(&mut env, regs::CPU_IF_PQ_BASE_ADDR_LOW, 0x1000);
    g.reg_write(&mut env, regs::CPU_IF_EQ_BASE_ADDR_LOW, 0x2000);
    g.reg_write(&mut env, regs::CPU_IF_PQ_LENGTH, 3000);
    g.reg_write(&mut env, regs::CPU_IF_EQ_LENGTH, 4096);
    g.reg_write(
        &mut env,
        regs::CPU_IF_QUEUE_INIT,
        regs::PQ_INIT_STATUS_READY_FOR_CP,
    );
    assert_eq!(g.reg_read(&mut env, regs::CPU_IF_QUEUE_INIT), 4);
}

#[test]
fn an_engine_access_to_an_unmapped_bus_address_faults_to_the_event_queue() {
    let (mut g, mut env) = device();
    cpu_queues(&mut g, &mut env);
    env.map(HOST, 1 << 20);
    let va = 0xFFF0_0000_0080_0000u64;
    set_hop0(&mut g, &mut env, PMMU_STLB, 1, HOST);
    // The PTE names a bus page the driver never mapped for the device.
    pmmu_map(&mut env, HOST, HOST + 0x2000, va, 0x4000_0000);
    enable_mmu(&mut g, &mut env, regs::PMMU_MMU_BASE);
    let mut buf = [0u8; 8];
    assert_eq!(
        g.engine_read(&mut env, 1, va + 8, &mut buf),
        Err(gaudi2_model::EngineFault::Bus {
            va: va + 8,
            addr: 0x4000_0008
        })
    );
    let m = regs::PMMU_MMU_BASE;
    assert_eq!(
        g.reg_read(&mut env, m + regs::mmu::ACCESS_PAGE_ERROR_VALID),
        2
    );
    assert_eq!(g.reg_read(&mut env, m + regs::mmu::SPI_SEI_CAUSE), 2);
    let hi = u64::from(g.reg_read(&mut env, m + regs::mmu::ACCESS_ERROR_CAPTURE));
    let lo = u64::from(g.reg_read(&mut env, m + regs::mmu::ACCESS_ERROR_CAPTURE_VA));
    assert_eq!(hi << 32 | lo, va + 8);
    // EQ entry 0: READY, event 768 (PMMU0 page fault), running index 1.
    let ctl = env.host_read_u32(CPU_EQ + 4);
    assert_eq!(ctl, 1 << 31 | 768 << 16 | 1);
    assert_eq!(env.msix, vec![0]);
    // A page fault (no PTE) is captured as a page error, second EQ entry.
    assert!(g
        .engine_read(&mut env, 1, va + 0x100_0000, &mut buf)
        .is_err());
    assert_eq!(
        g.reg_read(&mut env, m + regs::mmu::ACCESS_PAGE_ERROR_VALID),
        3
    );
    let lo = g.reg_read(&mut env, m + regs::mmu::PAGE_ERROR_CAPTURE_VA);
    assert_eq!(u64::from(lo), (va + 0x100_0000) & 0xFFFF_FFFF);
    assert_eq!(env.host_read_u32(CPU_EQ + 64 + 4), 1 << 31 | 768 << 16 | 2);
    assert_eq!(g.stats().faults, 2);
}

// --- PDMA QMAN, CP, PQC, sync manager, CQ, MSI-X 21 ----------------------

use gaudi2_model::packets::build;

const QM0: u32 = 0x4C8_A000;
/// The PDMA0 stream 0 PQ (16 entries), a CB page, a data page, the CQ and
/// the virtual MSI-X doorbell page, at these bus addresses.
const PQ: u64 = 0x400_0000;
const CB: u64 = 0x401_0000;
const DATA: u64 = 0x402_0000;
const CQ: u64 = 0x403_0000;
const MSIX_DB: u64 = 0x404_0000;
const SOB_BASE: u64 = 0x1000_007F_F800_0000 + 0x410_0000;

/// `gaudi2_init_pdma` (stream 0 of PDMA0), `gaudi2_init_sm` (CQ 0, the
/// LBW doorbell), CPU queues with ENABLE_PCI_ACCESS naming the doorbell.
fn pdma_device() -> (Box<Gaudi2>, TestEnv) {
    let (mut g, mut env) = device();
    cpu_queues(&mut g, &mut env);
    let (fence, rc, _) = cpu_message(&mut g, &mut env, 0, 2, MSIX_DB, 0);
    assert_eq!((fence, rc), (FENCE, 0));
    for at in [PQ, CB, DATA, CQ, MSIX_DB] {
        env.map(at, 0x1000);
    }
    let sob_lo = SOB_BASE as u32;
    let sob_hi = (SOB_BASE >> 32) as u32;
    for (reg, v) in [
        (QM0 + 0x050, PQ as u32),
        (QM0 + 0x060, 0),
        (QM0 + 0x070, 4),
        (QM0 + 0x080, 0),
        (QM0 + 0x46C, sob_lo),
        (QM0 + 0x47C, sob_hi),
        (QM0 + 0x45C, 1 | 1 << 31),
        (QM0 + 0x48C, 1),
        (QM0 + 0x1F0 + 0x28, sob_lo),
        (QM0 + 0x204 + 0x28, sob_hi),
        (QM0, 0x3 | 0x1F << 4 | 0x1F << 9),
        (0x411_E550, MSIX_DB as u32),
        (0x411_E650, 0),
        (0x411_E750, 21),
        (0x411_E050, CQ as u32),
        (0x411_E150, 0),
        (0x411_E250, 12),
    ] {
        g.reg_write(&mut env, reg, v);
    }
    // MON_CONFIG of the 64 CS-completion monitors: CQ and LBW enabled.
    for mon in 0..64 {
        g.reg_write(&mut env, 0x411_0000 + mon * 4, 1 << 4 | 1 << 8);
    }
    env.msix.clear();
    (g, env)
}

/// A BD for the CB `[cb, cb + len)` completing into SOB `sob`, at PQ
/// entry `pi`, then the doorbell.
fn submit(g: &mut Gaudi2, env: &mut TestEnv, pi: u32, cb: u64, len: u32, sob: u32) {
    let mut bd = [0u8; 16];
    bd[0..8].copy_from_slice(&cb.to_le_bytes());
    bd[8..12].copy_from_slice(&len.to_le_bytes());
    bd[12..16].copy_from_slice(&(sob << 16 | pi).to_le_bytes());
    env.host_write(PQ + u64::from(pi % 16) * 16, &bd);
    g.reg_write(env, QM0 + 0x080, pi + 1);
}

/// `gaudi2_arm_cq_monitor`: SOB `sob` = 0, monitor `sob` to CQ 0 with the
/// CS-completion payload for `index`, armed for "equal to `jobs`".
fn arm(g: &mut Gaudi2, env: &mut TestEnv, sob: u32, index: u32, jobs: u32) {
    g.reg_write(env, 0x410_0000 + sob * 4, 0);
    g.reg_write(env, 0x410_8000 + sob * 4, 0);
    g.reg_write(env, 0x410_C000 + sob * 4, 1 << 30 | 1 << 31 | index);
    let mask = !(1u32 << (sob & 7)) & 0xFF;
    g.reg_write(
        env,
        0x410_E000 + sob * 4,
        jobs << 17 | 1 << 16 | mask << 8 | (sob / 8),
    );
}

fn run(g: &mut Gaudi2, env: &mut TestEnv) {
    for _ in 0..1000 {
        if !g.step(env) {
            return;
        }
    }
    panic!("engine work never ended");
}

#[test]
fn a_lin_dma_cb_completes_into_the_sob_the_cq_and_msix_21() {
    let (mut g, mut env) = pdma_device();
    let payload: Vec<u8> = (0..3000u32).map(|i| (i * 7) as u8).collect();
    env.host_write(DATA, &payload);
    let dst = regs::DRAM_PHYS_BASE + 0x1000;
    let mut cb = Vec::new();
    cb.extend_from_slice(&build::nop());
    cb.extend_from_slice(&build::lin_dma(DATA, dst, 3000, false));
    cb.extend_from_slice(&build::msg_long(DATA + 0x800, 0x5151));
    env.host_write(CB, &cb);
    arm(&mut g, &mut env, 3, 3, 1);
    submit(&mut g, &mut env, 0, CB, cb.len() as u32, 3);
    assert!(g.pending());
    assert!(env.msix.is_empty(), "nothing runs before step");
    run(&mut g, &mut env);
    assert_eq!(env.dram_range(dst, 3000).unwrap(), &payload[..]);
    // The MSG_LONG wrote host memory; the PQC incremented SOB 3, which
    // fired monitor 3: CQ entry 0 and MSI-X 21.
    assert_eq!(env.host_read_u32(DATA + 0x800), 0x5151);
    assert_eq!(g.reg_read(&mut env, 0x410_0000 + 3 * 4), 1);
    assert_eq!(env.host_read_u32(CQ), 1 << 31 | 1 << 30 | 3);
    assert_eq!(env.msix, vec![21]);
    assert_eq!(g.reg_read(&mut env, 0x411_E350), 1);
    assert_eq!(g.reg_read(&mut env, QM0 + 0x090), 1);
    assert_eq!(g.reg_read(&mut env, 0x411_2000 + 3 * 4), 0, "disarmed");
    // A second job on the same SOB: an unarmed monitor stays quiet.
    submit(&mut g, &mut env, 1, CB, 8, 3);
    run(&mut g, &mut env);
    assert_eq!(env.msix, vec![21]);
    assert_eq!(g.reg_read(&mut env, 0x410_0000 + 3 * 4), 2);
    assert!(g.stats().doorbells >= 2);
}

#[test]
fn a_pdma_to_an_unmapped_bus_address_faults_and_halts_the_stream() {
    let (mut g, mut env) = pdma_device();
    let cb = build::lin_dma(0x7000_0000, regs::DRAM_PHYS_BASE, 64, false);
    env.host_write(CB, &cb);
    arm(&mut g, &mut env, 4, 4, 1);
    submit(&mut g, &mut env, 0, CB, 24, 4);
    run(&mut g, &mut env);
    let m = regs::PMMU_MMU_BASE;
    assert_eq!(
        g.reg_read(&mut env, m + regs::mmu::ACCESS_PAGE_ERROR_VALID),
        2
    );
    assert_eq!(
        g.reg_read(&mut env, m + regs::mmu::ACCESS_ERROR_CAPTURE_VA),
        0x7000_0000
    );
    // EQ: the PMMU event, then the QMAN error; MSI-X 0 for each.
    assert_eq!(env.host_read_u32(CPU_EQ + 4), 1 << 31 | 768 << 16 | 1);
    assert_eq!(env.host_read_u32(CPU_EQ + 64 + 4), 1 << 31 | 1244 << 16 | 2);
    assert_eq!(env.msix, vec![0, 0]);
    // No completion: the SOB was not incremented, and the stream is
    // halted: a new job waits until GLBL_CFG1 is written.
    assert_eq!(g.reg_read(&mut env, 0x410_0000 + 4 * 4), 0);
    submit(&mut g, &mut env, 1, CB, 0, 4);
    assert!(!g.step(&mut env));
    assert_eq!(g.reg_read(&mut env, 0x410_0000 + 4 * 4), 0);
    // The error is the stream's: GLBL_ERR_STS, and the failing packet's
    // address in CP_CURRENT_INST.
    assert_eq!(g.reg_read(&mut env, QM0 + 0x024), 1);
    assert_eq!(g.reg_read(&mut env, QM0 + 0x37C), CB as u32);
    // Releasing the halt (no flush) drops the failing CB only: the BD
    // queued behind it runs, and so does the next.
    g.reg_write(&mut env, QM0 + 0x004, 0);
    assert_eq!(g.reg_read(&mut env, QM0 + 0x024), 0);
    submit(&mut g, &mut env, 2, CB, 0, 4);
    run(&mut g, &mut env);
    assert_eq!(g.reg_read(&mut env, 0x410_0000 + 4 * 4), 2);
    // The first completion fired monitor 4 (armed for 1).
    assert_eq!(env.msix, vec![0, 0, 21]);
}

#[test]
fn a_fence_parks_the_stream_until_its_counter_is_written() {
    let (mut g, mut env) = pdma_device();
    // FENCE on counter 0 for 1, then a MSG_LONG to host memory.
    let fence_cfg: u32 = 1 << 16 | 1;
    let mut cb = Vec::new();
    cb.extend_from_slice(&fence_cfg.to_le_bytes());
    cb.extend_from_slice(&build::ctl(8).to_le_bytes());
    cb.extend_from_slice(&build::msg_long(DATA + 0x900, 7));
    env.host_write(CB, &cb);
    submit(&mut g, &mut env, 0, CB, cb.len() as u32, 60);
    run(&mut g, &mut env);
    assert!(!g.pending());
    assert_eq!(env.host_read_u32(DATA + 0x900), 0);
    g.reg_write(&mut env, QM0 + 0x290, 1);
    run(&mut g, &mut env);
    assert_eq!(env.host_read_u32(DATA + 0x900), 7);
    assert_eq!(g.reg_read(&mut env, QM0 + 0x2E0), 0);
}

#[test]
fn a_cb_reaches_no_register_a_wreg_or_a_message_there_is_a_razwi() {
    let (mut g, mut env) = pdma_device();
    // A MSG_LONG at SOB 40, a WREG_32 of GLBL_CFG0 (it would stop the
    // QMAN), a MSG_SHORT through base 1 (the SOBs): each halts its stream
    // with a RAZWI on the event queue, and nothing is written.
    let mut wreg = build::ctl(1).to_le_bytes().to_vec();
    wreg.splice(0..0, 0u32.to_le_bytes());
    let short = [
        7u32.to_le_bytes(),
        (build::ctl(4) | 1 << 22 | (9 * 4)).to_le_bytes(),
    ]
    .concat();
    for (i, cb) in [
        build::msg_long(SOB_BASE + 4 * 40, 1 << 31 | 5).to_vec(),
        wreg,
        short,
    ]
    .into_iter()
    .enumerate()
    {
        env.host_write(CB, &cb);
        submit(&mut g, &mut env, i as u32, CB, cb.len() as u32, 6);
        run(&mut g, &mut env);
        assert_eq!(g.reg_read(&mut env, QM0 + 0x024), 1, "case {i}: halted");
        g.reg_write(&mut env, QM0 + 0x004, 0);
    }
    assert_eq!(g.reg_read(&mut env, 0x410_0000 + 40 * 4), 0);
    assert_eq!(g.reg_read(&mut env, 0x410_0000 + 9 * 4), 0);
    assert_eq!(g.reg_read(&mut env, QM0) & 0xF, 0x3, "GLBL_CFG0 unchanged");
    // RAZWI then the QMAN error, per case, with the address as data.
    let mut ctl = |n: u64| env.host_read_u32(CPU_EQ + n * 64 + 4) >> 16 & 0xFFF;
    assert_eq!((ctl(0), ctl(1)), (875, 1244));
    let mut data = [0u8; 8];
    data.copy_from_slice(&env.host_read(CPU_EQ + 8, 8));
    assert_eq!(u64::from_le_bytes(data), SOB_BASE + 4 * 40);
}

#[test]
fn a_stop_and_flush_of_a_stream_drops_its_work_and_a_cleared_stop_restarts_it() {
    let (mut g, mut env) = pdma_device();
    // A CB parked at a FENCE that is never released, then a second BD.
    let fence_cfg: u32 = 1 << 16 | 1;
    let mut cb = Vec::new();
    cb.extend_from_slice(&fence_cfg.to_le_bytes());
    cb.extend_from_slice(&build::ctl(8).to_le_bytes());
    env.host_write(CB, &cb);
    arm(&mut g, &mut env, 5, 5, 1);
    submit(&mut g, &mut env, 0, CB, cb.len() as u32, 5);
    submit(&mut g, &mut env, 1, CB + 0x100, 8, 5);
    run(&mut g, &mut env);
    assert_eq!(g.reg_read(&mut env, QM0 + 0x01C) & 1, 0, "stream 0 busy");
    // PQF_STOP | CP_STOP | PQF_FLUSH | CP_FLUSH of stream 0 only.
    g.reg_write(&mut env, QM0 + 0x004, 1 | 1 << 9 | 1 << 16 | 1 << 25);
    assert!(!g.pending());
    assert_eq!(
        g.reg_read(&mut env, QM0 + 0x090),
        2,
        "CI = PI: both BDs dropped"
    );
    // Stopped: a new BD waits.
    env.host_write(CB + 0x200, &build::nop());
    submit(&mut g, &mut env, 2, CB + 0x200, 8, 5);
    assert!(!g.pending());
    assert!(env.msix.is_empty());
    // The stop cleared: it runs, and completes into SOB 5 (monitor 5).
    g.reg_write(&mut env, QM0 + 0x004, 0);
    run(&mut g, &mut env);
    assert_eq!(env.msix, vec![21]);
    assert_eq!(env.host_read_u32(CQ), 1 << 31 | 1 << 30 | 5);
    assert_eq!(g.reg_read(&mut env, QM0 + 0x01C) & 1, 1, "stream 0 idle");
}

#[test]
fn garbage_packets_and_registers_never_panic() {
    let (mut g, mut env) = pdma_device();
    // Every opcode with random-ish fields, truncated CBs, huge sizes.
    let mut x: u64 = 0x1234_5678_9ABC_DEF1;
    for round in 0..200u32 {
        let mut cb = [0u8; 64];
        for b in cb.iter_mut() {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            *b = x as u8;
        }
        cb[7] = (cb[7] & 0xE0) | (round % 32) as u8;
        env.host_write(CB, &cb);
        g.reg_write(&mut env, QM0 + 0x004, 0);
        submit(
            &mut g,
            &mut env,
            round % 32,
            CB,
            (x % 100) as u32,
            (x >> 8) as u32 & 0xFFF,
        );
        for _ in 0..10 {
            g.step(&mut env);
        }
        g.reg_write(&mut env, (x >> 20) as u32 & 0x7FF_FFFC, x as u32);
        let _ = g.reg_read(&mut env, (x >> 24) as u32);
    }
}

/// Program and commit a KDMA transfer (as `gaudi2_send_job_to_kdma`).
fn kdma(
    g: &mut Gaudi2,
    env: &mut TestEnv,
    (src, dst, size): (u64, u64, u32),
    comp: u64,
    memset: bool,
) {
    use gaudi2_model::kdma as k;
    let w = |g: &mut Gaudi2, env: &mut TestEnv, r, v| g.reg_write(env, r, v);
    w(g, env, k::SRC_BASE_LO, src as u32);
    w(g, env, k::SRC_BASE_HI, (src >> 32) as u32);
    w(g, env, k::DST_BASE_LO, dst as u32);
    w(g, env, k::DST_BASE_HI, (dst >> 32) as u32);
    w(g, env, k::WR_COMP_ADDR_LO, comp as u32);
    w(g, env, k::WR_COMP_ADDR_HI, (comp >> 32) as u32);
    w(g, env, k::WR_COMP_WDATA, 1);
    w(g, env, k::DST_TSIZE_0, size);
    let set = if memset { k::COMMIT_MEM_SET } else { 0 };
    w(
        g,
        env,
        k::COMMIT,
        k::COMMIT_LIN | k::COMMIT_WR_COMP_EN | set,
    );
}

#[test]
fn the_kdma_copies_device_memory_to_the_host_and_writes_its_completion() {
    use gaudi2_model::kdma as k;
    let (mut g, mut env) = device();
    cpu_queues(&mut g, &mut env);
    env.map(HOST, 1 << 20);
    let dram = regs::DRAM_PHYS_BASE + 0x1000;
    for i in 0..512u64 {
        env.dram_u64(dram + 8 * i, 0x1111_0000_0000_0000 | i);
    }
    // MMU bypassed: DRAM addresses are physical.
    g.reg_write(&mut env, k::AXUSER_HB_MMU_BP, 0x11);
    let comp = HOST + 0x8_0000;
    kdma(
        &mut g,
        &mut env,
        (dram + 8, HOST + 0x1000, 4000),
        comp,
        false,
    );
    assert!(g.pending());
    while g.step(&mut env) {}
    assert_eq!(env.host_read_u32(comp), 1);
    let got = env.host_read(HOST + 0x1000, 4000);
    assert_eq!(&got[..8], &(0x1111_0000_0000_0000u64 | 1).to_le_bytes());
    assert_eq!(
        &got[3992..4000],
        &(0x1111_0000_0000_0000u64 | 500).to_le_bytes()
    );
    // A memset of host memory.
    env.host_write(comp, &[0; 4]);
    kdma(
        &mut g,
        &mut env,
        (0x0102_0304_0506_0708, HOST, 12),
        comp,
        true,
    );
    while g.step(&mut env) {}
    assert_eq!(
        env.host_read(HOST, 12),
        [8, 7, 6, 5, 4, 3, 2, 1, 8, 7, 6, 5]
    );
    assert_eq!(env.host_read_u32(comp), 1);
    // A destination the driver did not map: the transfer ends at the
    // fault, without its completion write, and the fault is reported.
    env.host_write(comp, &[0; 4]);
    kdma(&mut g, &mut env, (dram, 0x4000_0000, 64), comp, false);
    while g.step(&mut env) {}
    assert_eq!(env.host_read_u32(comp), 0);
    assert!(!g.pending());
    assert_eq!(g.stats().faults, 1);
    // HALT drops a transfer in flight.
    kdma(&mut g, &mut env, (dram, HOST, 1 << 20), comp, false);
    g.reg_write(&mut env, k::CFG_1, 1);
    assert!(!g.pending());
}

#[test]
fn with_the_pmmu_on_a_user_cb_reaches_host_memory_only_by_va() {
    let (mut g, mut env) = pdma_device();
    // PMMU tables for ASID 0 at bus HOST: the CB page and the data page
    // mapped at two VAs.
    env.map(HOST, 1 << 20);
    let (cb_va, data_va) = (0xFFF0_0000_0010_0000u64, 0xFFF0_0000_0020_0000u64);
    set_hop0(&mut g, &mut env, PMMU_STLB, 0, HOST);
    pmmu_map(&mut env, HOST, HOST + 0x2000, cb_va, CB);
    pmmu_map(&mut env, HOST, HOST + 0x2000, data_va, DATA);
    enable_mmu(&mut g, &mut env, regs::PMMU_MMU_BASE);
    // By VA: the message and the copy land.
    let cb = [
        build::msg_long(data_va, 0x600D).to_vec(),
        build::lin_dma(data_va, data_va + 0x100, 4, false).to_vec(),
    ]
    .concat();
    env.host_write(CB, &cb);
    arm(&mut g, &mut env, 5, 5, 1);
    submit(&mut g, &mut env, 0, cb_va, cb.len() as u32, 5);
    run(&mut g, &mut env);
    assert_eq!(env.host_read_u32(DATA + 0x100), 0x600D);
    assert_eq!(g.reg_read(&mut env, QM0 + 0x024), 0, "not halted");
    // By bus address: a MSG_LONG, a LIN_DMA's destination, its source:
    // each a PMMU page fault that halts the stream, nothing written.
    let faults = g.stats().faults;
    for (i, p) in [
        build::msg_long(DATA, 0xBAD).to_vec(),
        build::lin_dma(data_va, DATA, 4, false).to_vec(),
        build::lin_dma(DATA, data_va + 0x200, 4, false).to_vec(),
    ]
    .into_iter()
    .enumerate()
    {
        env.host_write(CB, &p);
        submit(&mut g, &mut env, 1 + i as u32, cb_va, p.len() as u32, 5);
        run(&mut g, &mut env);
        assert_eq!(g.reg_read(&mut env, QM0 + 0x024), 1, "case {i} halted");
        g.reg_write(&mut env, QM0 + 0x004, 0);
    }
    assert_eq!(env.host_read_u32(DATA), 0x600D);
    assert_eq!(env.host_read_u32(DATA + 0x200), 0);
    assert_eq!(g.stats().faults, faults + 3);
    // A CB fetched by bus address is a user fetch too.
    env.host_write(CB, &build::nop());
    submit(&mut g, &mut env, 4, CB, 8, 5);
    run(&mut g, &mut env);
    assert_eq!(
        g.reg_read(&mut env, QM0 + 0x024),
        1,
        "bus-address CB halted"
    );
}
