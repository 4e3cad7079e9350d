//! The model core's run-to-completion CP (`gaudi2_model::engine`, what the
//! in-module simulation's engine threads run), against a flat memory with
//! a fault past its end, in userspace.

use gaudi2_model::engine::{self, EngineBus, JobEnd, CB_WINDOW, RESCHED_PACKETS};
use gaudi2_model::packets::{build, op, PacketError};

/// 1 MiB of memory at 0; an access past it faults at its first byte there.
struct Flat {
    mem: Vec<u8>,
    reads: Vec<(u64, usize)>,
    /// Stop at the n-th check (0: never).
    stop_at: u32,
    checks: u32,
    points: u32,
}

const SIZE: u64 = 1 << 20;

impl Flat {
    fn new() -> Self {
        Self {
            mem: vec![0; SIZE as usize],
            reads: Vec::new(),
            stop_at: 0,
            checks: 0,
            points: 0,
        }
    }

    fn put(&mut self, at: u64, bytes: &[u8]) {
        self.mem[at as usize..at as usize + bytes.len()].copy_from_slice(bytes);
    }

    fn range(&self, at: u64, n: usize) -> Result<std::ops::Range<usize>, u64> {
        let end = at.checked_add(n as u64).ok_or(at)?;
        if end > SIZE {
            return Err(at.max(SIZE));
        }
        Ok(at as usize..end as usize)
    }

    fn run(&mut self, cb: (u64, u32)) -> JobEnd<u64, &'static str> {
        let mut window = vec![0u8; CB_WINDOW];
        let mut data = vec![0u8; 64];
        engine::execute(self, (&mut window, &mut data), cb)
    }
}

impl EngineBus for Flat {
    type Fault = u64;
    type Stop = &'static str;

    fn read(&mut self, addr: u64, buf: &mut [u8]) -> Result<(), u64> {
        self.reads.push((addr, buf.len()));
        let r = self.range(addr, buf.len())?;
        buf.copy_from_slice(&self.mem[r]);
        Ok(())
    }

    fn write(&mut self, addr: u64, data: &[u8]) -> Result<(), u64> {
        let r = self.range(addr, data.len())?;
        self.mem[r].copy_from_slice(data);
        Ok(())
    }

    fn decode_fault(&self, addr: u64) -> u64 {
        addr
    }

    fn stop(&mut self) -> Option<&'static str> {
        self.checks += 1;
        (self.stop_at != 0 && self.checks >= self.stop_at).then_some("halted")
    }

    fn point(&mut self) {
        self.points += 1;
    }
}

fn cb(f: &mut Flat, at: u64, packets: &[&[u8]]) -> (u64, u32) {
    let mut off = 0;
    for p in packets {
        f.put(at + off, p);
        off += p.len() as u64;
    }
    (at, off as u32)
}

#[test]
fn packets_run_in_order_and_fetch_no_further_than_the_page() {
    let mut f = Flat::new();
    f.put(0x1000, &[7; 100]);
    // The CB straddles a page: the first window stops at the page's end.
    let job = cb(
        &mut f,
        0x8000 - 12,
        &[
            &build::nop(),
            &build::msg_long(0x2000, 0x0403_0201),
            &build::lin_dma(0x1000, 0x2004, 100, false),
            &build::lin_dma(0x5a5a_5a5a_5a5a_5a5a, 0x3000, 130, true),
        ],
    );
    assert_eq!(f.run(job), JobEnd::Done);
    assert_eq!(&f.mem[0x2000..0x2008], &[1, 2, 3, 4, 7, 7, 7, 7]);
    assert_eq!(&f.mem[0x3000 + 128..0x3000 + 131], &[0x5a, 0x5a, 0]);
    // The rest of the first page, then the header of the MSG_LONG that
    // crosses it, then that packet.
    assert_eq!(f.reads[0], (0x8000 - 12, 12));
    assert_eq!(f.reads[1], (0x8000 - 4, 8));
    assert_eq!(f.reads[2], (0x8000 - 4, 16));
    // Nothing past the CB's end is fetched.
    let end = job.0 + u64::from(job.1);
    assert!(f
        .reads
        .iter()
        .all(|&(a, n)| (0x1000..0x4000).contains(&a) || a + n as u64 <= end));
    // One check per packet, one per DMA chunk after the first.
    assert_eq!(f.checks, 4 + 1 + 2);
    assert_eq!(f.points, 1 + 2);
}

#[test]
fn a_job_ends_at_its_first_refusal_fault_or_stop() {
    let mut f = Flat::new();
    // An opcode the engines do not run, after a NOP.
    let mut fence = build::nop();
    fence[4..8].copy_from_slice(&build::ctl(op::FENCE).to_le_bytes());
    let job = cb(&mut f, 0, &[&build::nop(), &fence]);
    let undefined = PacketError::Undefined { opcode: op::FENCE };
    assert_eq!(
        f.run(job),
        JobEnd::BadPacket {
            addr: 8,
            error: undefined
        }
    );
    // Cut short.
    let job = cb(&mut f, 0x100, &[&build::msg_long(0x10, 1)]);
    let short = PacketError::Truncated {
        opcode: op::MSG_LONG,
        need: 16,
    };
    assert_eq!(
        f.run((job.0, 12)),
        JobEnd::BadPacket {
            addr: 0x100,
            error: short
        }
    );
    // A write past the memory.
    let job = cb(&mut f, 0x200, &[&build::msg_long(SIZE, 1)]);
    assert_eq!(f.run(job), JobEnd::Fault(SIZE));
    // The CB runs off the end of memory after its last whole packet.
    let job = cb(&mut f, SIZE - 16, &[&build::msg_long(0x300, 9)]);
    assert_eq!(f.run((job.0, 24)), JobEnd::Fault(SIZE));
    assert_eq!(f.mem[0x300], 9);
    // Stopped between the chunks of a DMA (the packet's check, then one
    // per chunk after the first).
    let job = cb(
        &mut f,
        0x400,
        &[&build::lin_dma(1, 0x1_0000, 64 * 10, true)],
    );
    f.stop_at = f.checks + 3;
    assert_eq!(f.run(job), JobEnd::Stopped("halted"));
}

#[test]
fn long_cbs_reach_reschedule_points() {
    let mut f = Flat::new();
    let nops: Vec<[u8; 8]> = (0..RESCHED_PACKETS * 3).map(|_| build::nop()).collect();
    let refs: Vec<&[u8]> = nops.iter().map(|n| &n[..]).collect();
    let job = cb(&mut f, 0, &refs);
    assert_eq!(f.run(job), JobEnd::Done);
    assert_eq!(f.points, 3);
}
