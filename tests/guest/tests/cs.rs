//! Command submission through the real device nodes (issue 22): CBs of
//! NOP, MSG_LONG and LIN_DMA packets run by the simulated engines through
//! the device MMUs, every WAIT_CS outcome, the CS errnos, the window of 64
//! CSs in flight, page faults and their report, and closes with CSs in
//! flight.

use hlrs::{
    cs::{chunk, packet, Cb, Cs, CsDone, Swap},
    uapi::*,
    Device, HostBuffer, Mapping,
};
use hlrs_guest_tests::{expect_errno, guest_only};
use std::io;

const EPERM: i32 = 1;
const EINTR: i32 = 4;
const EIO: i32 = 5;
const EAGAIN: i32 = 11;
const EFAULT: i32 = 14;
const EBUSY: i32 = 16;
const EINVAL: i32 = 22;
const EOPNOTSUPP: i32 = 95;
const ETIMEDOUT: i32 = 110;
const PDMA: u32 = GAUDI2_QUEUE_ID_PDMA_0_0;
const EDMA: u32 = GAUDI2_QUEUE_ID_DCORE1_EDMA_0_0 + 5;
const SEC: u64 = 1_000_000;
const SRAM: u64 = 0x1000_FFFF_FD00_0000;
const SRAM_SIZE: u64 = 48 << 20;

/// A CB in a host buffer of its own, mapped (unmapped when dropped).
struct HostCb<'d> {
    d: &'d Device,
    _buf: HostBuffer,
    map_va: u64,
    offset: u64,
    len: u32,
}

impl HostCb<'_> {
    fn va(&self) -> u64 {
        self.map_va + self.offset
    }
}

impl Drop for HostCb<'_> {
    fn drop(&mut self) {
        let _ = self.d.unmap(self.map_va);
    }
}

fn host_cb<'d>(d: &'d Device, cb: &Cb) -> HostCb<'d> {
    host_cb_at(d, cb, 0)
}

/// The CB at byte `offset` of its buffer.
fn host_cb_at<'d>(d: &'d Device, cb: &Cb, offset: usize) -> HostCb<'d> {
    let buf = cb.to_host_buffer_at(offset).unwrap();
    let map_va = d.map_host(buf.addr(), buf.len() as u64, 0, 0).unwrap();
    HostCb {
        d,
        _buf: buf,
        map_va,
        offset: offset as u64,
        len: cb.len(),
    }
}

/// Run `cb` from host memory on `queue` and wait for it.
fn run(d: &Device, queue: u32, cb: &Cb) -> io::Result<CsDone> {
    let c = host_cb(d, cb);
    d.run_cb(queue, c.va(), c.len, 30 * SEC)
}

/// A checksum of bytes (FNV-1a).
fn checksum(b: &[u8]) -> u64 {
    b.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &x| {
        (h ^ u64::from(x)).wrapping_mul(0x100_0000_01b3)
    })
}

/// Fill with a pattern that differs at every offset and between seeds.
fn pattern(b: &mut [u8], seed: u64) {
    let mut x = seed | 1;
    for c in b.chunks_mut(8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let bytes = x.to_le_bytes();
        c.copy_from_slice(&bytes[..c.len()]);
    }
}

#[test]
fn a_nop_cs_completes_and_sequences_start_at_one() {
    guest_only!();
    let d = Device::open_compute(0).unwrap();
    let cb = host_cb(&d, &Cb::new().nop());
    for want in 1..=3u64 {
        let f = Cs::new().chunk(PDMA, cb.va(), cb.len).submit(&d).unwrap();
        assert_eq!(f.seq, want);
        assert_eq!(
            f.wait(&d, 10 * SEC).unwrap(),
            CsDone::Completed {
                gone: false,
                timestamp: None
            }
        );
    }
    // A new open starts over.
    drop(cb);
    drop(d);
    let d = Device::open_compute(0).unwrap();
    assert_eq!(run_seq(&d), 1);
}

fn run_seq(d: &Device) -> u64 {
    let cb = host_cb(d, &Cb::new().nop());
    let f = Cs::new().chunk(PDMA, cb.va(), cb.len).submit(d).unwrap();
    f.wait(d, 10 * SEC).unwrap();
    f.seq
}

#[test]
fn host_to_dram_to_host_round_trip_at_odd_sizes_and_offsets() {
    guest_only!();
    let d = Device::open_compute(0).unwrap();
    let dram = d.allocate(1 << 30, 0).unwrap();
    let dm = dram.map(0, 0).unwrap();
    let sizes: [usize; 9] = [
        4,
        5,
        4095,
        4096,
        4097,
        65535,
        65536 + 3,
        1 << 20,
        (3 << 20) + 7,
    ];
    for (i, &size) in sizes.iter().enumerate() {
        let (soff, doff, moff) = (i * 3 % 8, i * 5 % 8, (i as u64 * 4099) % 4096);
        let mut src = HostBuffer::new(size + soff).unwrap();
        pattern(&mut src.as_mut_slice()[soff..], i as u64 + 1);
        let dst = HostBuffer::new(size + doff).unwrap();
        let sm = d.map_buffer(src.as_slice(), 0, 0).unwrap();
        let tm = d.map_buffer(dst.as_slice(), 0, 0).unwrap();
        let mid = dm.va() + moff;
        let cb = Cb::new()
            .lin_dma(sm.va() + soff as u64, mid, size as u32)
            .lin_dma(mid, tm.va() + doff as u64, size as u32);
        assert_eq!(
            run(&d, PDMA, &cb).unwrap(),
            CsDone::Completed {
                gone: false,
                timestamp: None
            },
            "size {size}"
        );
        assert_eq!(
            checksum(&dst.as_slice()[doff..doff + size]),
            checksum(&src.as_slice()[soff..soff + size]),
            "size {size}"
        );
        // Nothing outside the destination was written.
        assert!(dst.as_slice()[..doff].iter().all(|&b| b == 0));
    }
}

#[test]
fn memset_swaps_and_msg_long_into_host_and_sram() {
    guest_only!();
    let d = Device::open_compute(0).unwrap();
    let mut src = HostBuffer::new(4096).unwrap();
    pattern(src.as_mut_slice(), 9);
    let dst = HostBuffer::new(4 * 4096).unwrap();
    let sm = d.map_buffer(src.as_slice(), 0, 0).unwrap();
    let tm = d.map_buffer(dst.as_slice(), 0, 0).unwrap();
    // The three swaps, host -> SRAM -> host.
    for (k, (swap, unit)) in [(Swap::Bits16, 2), (Swap::Bits32, 4), (Swap::Bits64, 8)]
        .into_iter()
        .enumerate()
    {
        let sram = SRAM + 0x10_0000 * k as u64 + 8;
        let out = tm.va() + 4096 * k as u64;
        let cb = Cb::new()
            .lin_dma_swap(sm.va(), sram, 4096, swap)
            .lin_dma(sram, out, 4096);
        run(&d, EDMA, &cb).unwrap();
        let got = &dst.as_slice()[4096 * k..4096 * (k + 1)];
        for (g, s) in got.chunks(unit).zip(src.as_slice().chunks(unit)) {
            let mut r = s.to_vec();
            r.reverse();
            assert_eq!(g, &r[..], "swap {swap:?}");
        }
    }
    // Memset at an odd offset and size, then MSG_LONG into host and SRAM.
    let fill = 0x0102_0304_0506_0708u64;
    let at = tm.va() + 3 * 4096 + 5;
    let cb = Cb::new()
        .memset(at, fill, 1001)
        .msg_long(tm.va() + 3 * 4096 + 2000, 0xDEAD_BEEF)
        .msg_long(SRAM + 12, 0xCAFE_F00D)
        .lin_dma(SRAM + 12, tm.va() + 3 * 4096 + 3000, 4);
    run(&d, PDMA, &cb).unwrap();
    let page = &dst.as_slice()[3 * 4096..];
    for i in 0..1001 {
        assert_eq!(page[5 + i], fill.to_le_bytes()[i % 8], "memset byte {i}");
    }
    assert_eq!(page[5 + 1001], 0);
    assert_eq!(&page[2000..2004], &0xDEAD_BEEFu32.to_le_bytes());
    assert_eq!(&page[3000..3004], &0xCAFE_F00Du32.to_le_bytes());
}
