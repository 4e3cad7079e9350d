//! The CPU-CP stand-in's answers (`gaudi2_model::cpucp::answer`), as both
//! hosts get them: the in-module simulation calls `answer` on a packet
//! buffer, the userspace server through the CPU PQ (tests/model.rs).

use gaudi2_model::cpucp::{self, answer, op, rc, Facts, PACKET_BYTES};
use gaudi2_model::{BusFault, Env};

/// An environment with one host buffer at `BUF`.
struct OneBuffer {
    buf: Vec<u8>,
}

const BUF: u64 = 0x10_0000;

impl OneBuffer {
    fn window(&mut self, addr: u64, len: usize) -> Result<&mut [u8], BusFault> {
        let off = addr.checked_sub(BUF).ok_or(BusFault { addr })? as usize;
        self.buf.get_mut(off..off + len).ok_or(BusFault { addr })
    }
}

impl Env for OneBuffer {
    fn dma_read(&mut self, addr: u64, buf: &mut [u8]) -> Result<(), BusFault> {
        let w = self.window(addr, buf.len())?;
        buf.copy_from_slice(w);
        Ok(())
    }
    fn dma_write(&mut self, addr: u64, data: &[u8]) -> Result<(), BusFault> {
        self.window(addr, data.len())?.copy_from_slice(data);
        Ok(())
    }
    fn dram_read(&mut self, pa: u64, _: &mut [u8]) -> Result<(), BusFault> {
        Err(BusFault { addr: pa })
    }
    fn dram_write(&mut self, pa: u64, _: &[u8]) -> Result<(), BusFault> {
        Err(BusFault { addr: pa })
    }
    fn sram_read(&mut self, pa: u64, _: &mut [u8]) -> Result<(), BusFault> {
        Err(BusFault { addr: pa })
    }
    fn sram_write(&mut self, pa: u64, _: &[u8]) -> Result<(), BusFault> {
        Err(BusFault { addr: pa })
    }
    fn msix(&mut self, _: u16) {}
    fn now_ns(&mut self) -> u64 {
        0
    }
}

/// A packet of `opcode` with `value` and `index`, its fence not yet valid.
fn packet(opcode: u32, value: u64, index: u32) -> [u8; PACKET_BYTES] {
    let mut p = [0u8; PACKET_BYTES];
    p[0..8].copy_from_slice(&value.to_le_bytes());
    p[8..12].copy_from_slice(&(opcode << 16).to_le_bytes());
    p[12..16].copy_from_slice(&u32::MAX.to_le_bytes());
    p[16..20].copy_from_slice(&index.to_le_bytes());
    p
}

/// Answer one packet: (fence, rc in ctl, result).
fn ask(facts: &Facts, opcode: u32, value: u64, index: u32) -> (u32, u32, u64) {
    let mut env = OneBuffer {
        buf: vec![0xAA; 4096],
    };
    let mut db = 0;
    let mut p = packet(opcode, value, index);
    let a = answer(&mut env, facts, &mut db, &mut p);
    let ctl = u32::from_le_bytes(p[8..12].try_into().unwrap());
    assert_eq!((ctl >> 12) & 0xF, a.rc);
    assert_eq!(ctl >> 16, opcode, "the opcode stays");
    (
        u32::from_le_bytes(p[12..16].try_into().unwrap()),
        a.rc,
        u64::from_le_bytes(p[0..8].try_into().unwrap()),
    )
}

fn facts(now_ns: u64) -> Facts {
    Facts {
        dram_bytes: 96 << 30,
        rx_bytes: 1000,
        tx_bytes: 2000,
        now_ns,
    }
}

#[test]
fn every_answer_carries_the_fence() {
    let f = facts(1);
    for opcode in [op::TEST, op::POWER_GET, op::PLL_INFO_GET, 4000, 0] {
        assert_eq!(ask(&f, opcode, 0, 0).0, cpucp::FENCE_VAL, "opcode {opcode}");
    }
}

#[test]
fn frequencies_are_an_hl225s_in_hz_and_mhz() {
    let f = facts(1);
    // The MME PLL (upstream's clk_pll_index): 1650 MHz, max and current.
    for opcode in [op::FREQUENCY_GET, op::FREQUENCY_CURR_GET] {
        assert_eq!(ask(&f, opcode, 0, 7), (cpucp::FENCE_VAL, 0, 1_650_000_000));
    }
    // Every PLL of the uAPI's 12 answers four outputs, the first the PLL's.
    for pll in 0..12u32 {
        let (_, code, r) = ask(&f, op::PLL_INFO_GET, 0, pll);
        assert_eq!(code, rc::SUCCESS);
        let out: Vec<u64> = (0..4).map(|i| (r >> (16 * i)) & 0xFFFF).collect();
        assert_eq!(out[0], cpucp::PLL_MHZ[pll as usize]);
        assert!(out[0] >= 100 && out[0] <= 3000, "PLL {pll}: {out:?}");
        assert!(out.windows(2).all(|w| w[1] <= w[0]));
    }
    // Past the table: invalid parameters, as firmware refuses an index.
    assert_eq!(ask(&f, op::PLL_INFO_GET, 0, 12).1, rc::INVALID_PARAMS);
    assert_eq!(
        ask(&f, op::FREQUENCY_GET, 0, u32::MAX).1,
        rc::INVALID_PARAMS
    );
}

#[test]
fn power_gives_a_utilization_between_0_and_100() {
    let f = facts(1);
    let power = ask(&f, op::POWER_GET, 0, 0).2;
    let max = ask(&f, op::MAX_POWER_GET, 0, 0).2;
    // Upstream's formula with Gaudi2's DC floor of 60 W.
    let dc = 60_000;
    assert!(dc < power && power <= max, "{power} {max}");
    let util = (power - dc) * 100 / (max - dc);
    assert!(util <= 100);
    assert_eq!(util, 16);
}

#[test]
fn energy_grows_with_time() {
    let e1 = ask(&facts(1_000_000_000), op::TOTAL_ENERGY_GET, 0, 0).2;
    let e2 = ask(&facts(2_000_000_000), op::TOTAL_ENERGY_GET, 0, 0).2;
    assert!(e2 > e1);
    // 150 W for one second: 150 J, in uJ.
    assert_eq!(e2 - e1, 150_000_000);
}

#[test]
fn pci_counters_are_the_facts() {
    let f = facts(1);
    assert_eq!(ask(&f, op::PCIE_THROUGHPUT_GET, 0, 0).2, 1000);
    assert_eq!(ask(&f, op::PCIE_THROUGHPUT_GET, 0, 1).2, 2000);
    assert_eq!(ask(&f, op::PCIE_REPLAY_CNT_GET, 0, 0).2, 0);
}

#[test]
fn info_get_dmas_the_info_bounded_by_data_max_size() {
    let mut env = OneBuffer {
        buf: vec![0xAA; 4096],
    };
    let mut db = 0;
    let mut p = packet(op::INFO_GET, BUF, 1768);
    let a = answer(&mut env, &facts(1), &mut db, &mut p);
    assert_eq!((a.rc, a.dma_bytes), (rc::SUCCESS, 1768));
    assert_eq!(&env.buf[1568..1575], b"HL-225\0");
    assert_eq!(
        u64::from_le_bytes(env.buf[1560..1568].try_into().unwrap()),
        96 << 30
    );
    assert_eq!(env.buf[1768], 0xAA, "nothing past the struct");
    // A short buffer: only what fits.
    let mut env = OneBuffer {
        buf: vec![0xAA; 4096],
    };
    let mut p = packet(op::INFO_GET, BUF, 16);
    assert_eq!(answer(&mut env, &facts(1), &mut db, &mut p).dma_bytes, 16);
    assert_eq!(env.buf[16], 0xAA);
    // An address nothing maps: rc fault, nothing written.
    let mut p = packet(op::INFO_GET, 0x1000, 1768);
    assert_eq!(answer(&mut env, &facts(1), &mut db, &mut p).rc, rc::FAULT);
}

#[test]
fn enable_pci_access_keeps_the_doorbell() {
    let mut env = OneBuffer { buf: vec![0; 16] };
    let mut db = 0;
    let mut p = packet(op::ENABLE_PCI_ACCESS, 0xABC000, 0);
    answer(&mut env, &facts(1), &mut db, &mut p);
    assert_eq!(db, 0xABC000);
    let mut p = packet(op::DISABLE_PCI_ACCESS, 0, 0);
    answer(&mut env, &facts(1), &mut db, &mut p);
    assert_eq!(db, 0);
}
