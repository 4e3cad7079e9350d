// SPDX-License-Identifier: GPL-2.0

//! Host tests of the Gaudi2 model core, driven through a test [`Env`] over
//! plain vectors: host memory as a set of DMA-mapped windows (anything else
//! faults), DRAM and SRAM as byte vectors, MSI-X as a list of vectors.

use gaudi2_model::{regs, walker, BusFault, Config, Env, Gaudi2};

/// Host memory the device may reach: windows of (bus address, bytes).
struct TestEnv {
    host: Vec<(u64, Vec<u8>)>,
    dram: Vec<u8>,
    sram: Vec<u8>,
    msix: Vec<u16>,
    now: u64,
}

impl TestEnv {
    /// `dram` bytes of DRAM, 1 MiB of SRAM, no host memory mapped.
    fn new(dram: usize) -> Self {
        Self {
            host: Vec::new(),
            dram: vec![0; dram],
            sram: vec![0; 1 << 20],
            msix: Vec::new(),
            now: 0,
        }
    }

    /// Map `len` zeroed bytes of host memory at bus address `at`.
    fn map(&mut self, at: u64, len: usize) {
        self.host.push((at, vec![0; len]));
    }

    /// Unmap the window at `at`.
    fn unmap(&mut self, at: u64) {
        self.host.retain(|(a, _)| *a != at);
    }

    /// The window bytes `[addr, addr + len)` lie in.
    fn window(&mut self, addr: u64, len: usize) -> Result<&mut [u8], BusFault> {
        for (at, bytes) in self.host.iter_mut() {
            let Some(off) = addr.checked_sub(*at) else {
                continue;
            };
            let Ok(off) = usize::try_from(off) else {
                continue;
            };
            if let Some(s) = off.checked_add(len).and_then(|end| bytes.get_mut(off..end)) {
                return Ok(s);
            }
        }
        Err(BusFault { addr })
    }

    fn host_write(&mut self, addr: u64, data: &[u8]) {
        self.window(addr, data.len()).unwrap().copy_from_slice(data);
    }

    fn host_read(&mut self, addr: u64, len: usize) -> Vec<u8> {
        self.window(addr, len).unwrap().to_vec()
    }

    fn host_u64(&mut self, addr: u64, v: u64) {
        self.host_write(addr, &v.to_le_bytes());
    }

    fn host_read_u32(&mut self, addr: u64) -> u32 {
        u32::from_le_bytes(self.host_read(addr, 4).try_into().unwrap())
    }

    fn dram_range(&mut self, pa: u64, len: usize) -> Result<&mut [u8], BusFault> {
        let off = pa
            .checked_sub(regs::DRAM_PHYS_BASE)
            .ok_or(BusFault { addr: pa })?;
        let off = usize::try_from(off).map_err(|_| BusFault { addr: pa })?;
        off.checked_add(len)
            .and_then(|end| self.dram.get_mut(off..end))
            .ok_or(BusFault { addr: pa })
    }

    fn dram_u64(&mut self, pa: u64, v: u64) {
        self.dram_range(pa, 8)
            .unwrap()
            .copy_from_slice(&v.to_le_bytes());
    }
}

impl Env for TestEnv {
    fn dma_read(&mut self, addr: u64, buf: &mut [u8]) -> Result<(), BusFault> {
        buf.copy_from_slice(self.window(addr, buf.len())?);
        Ok(())
    }
    fn dma_write(&mut self, addr: u64, data: &[u8]) -> Result<(), BusFault> {
        self.window(addr, data.len())?.copy_from_slice(data);
        Ok(())
    }
    fn dram_read(&mut self, pa: u64, buf: &mut [u8]) -> Result<(), BusFault> {
        buf.copy_from_slice(self.dram_range(pa, buf.len())?);
        Ok(())
    }
    fn dram_write(&mut self, pa: u64, data: &[u8]) -> Result<(), BusFault> {
        self.dram_range(pa, data.len())?.copy_from_slice(data);
        Ok(())
    }
    fn sram_read(&mut self, pa: u64, buf: &mut [u8]) -> Result<(), BusFault> {
        let off = pa
            .checked_sub(regs::SRAM_BASE_ADDR)
            .ok_or(BusFault { addr: pa })? as usize;
        let s = self
            .sram
            .get(off..off + buf.len())
            .ok_or(BusFault { addr: pa })?;
        buf.copy_from_slice(s);
        Ok(())
    }
    fn sram_write(&mut self, pa: u64, data: &[u8]) -> Result<(), BusFault> {
        let off = pa
            .checked_sub(regs::SRAM_BASE_ADDR)
            .ok_or(BusFault { addr: pa })? as usize;
        let s = self
            .sram
            .get_mut(off..off + data.len())
            .ok_or(BusFault { addr: pa })?;
        s.copy_from_slice(data);
        Ok(())
    }
    fn msix(&mut self, vector: u16) {
        self.msix.push(vector);
    }
    fn now_ns(&mut self) -> u64 {
        self.now += 1000;
        self.now
    }
}

fn device() -> (Gaudi2, TestEnv) {
    (
        Gaudi2::new(&Config::with_dram(64 << 20)),
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
