//! Command submission through the real device nodes (issue 22): CBs of
//! NOP, MSG_LONG and LIN_DMA packets run by the simulated engines through
//! the device MMUs, every WAIT_CS outcome, the CS errnos, the window of 64
//! CSs in flight, page faults and their report, and closes with CSs in
//! flight.

use hlrs::{
    cs::{chunk, packet, Cb, Cs, CsDone, Swap},
    uapi::*,
    Device, HostBuffer,
};
use hlrs_guest_tests::{expect_errno, guest_only, vm_locked_kb};
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

/// A CB that runs for a long time (1000 memsets of 32 MiB of SRAM: tens of
/// seconds), for tests that stop it (timeout, close).
fn forever() -> Cb {
    (0..1000).fold(Cb::new(), |cb, i| cb.memset(SRAM + (8 << 20), i, 32 << 20))
}

#[test]
fn cbs_are_fetched_from_host_sram_and_dram_at_offset_8() {
    guest_only!();
    let d = Device::open_compute(0).unwrap();
    let out = HostBuffer::new(4096).unwrap();
    let om = d.map_buffer(out.as_slice(), 0, 0).unwrap();
    let dram = d.allocate(1 << 30, 0).unwrap();
    let dm = dram.map(0, 0).unwrap();
    // The CB under test writes a marker per place it was fetched from.
    let cb_for = |marker: u32| {
        Cb::new()
            .nop()
            .msg_long(om.va() + u64::from(marker) * 4, marker)
    };
    // From host memory at +8.
    let cb = cb_for(1);
    let h = host_cb_at(&d, &cb, 8);
    d.run_cb(PDMA, h.va(), h.len, 10 * SEC).unwrap();
    // Copied into SRAM and DRAM at +8 by a first CS, then run from there.
    for (marker, place) in [(2u32, SRAM + 0x20_0000 + 8), (3, dm.va() + 8)] {
        let cb = cb_for(marker);
        let staged = host_cb(&d, &cb);
        let copy = Cb::new().lin_dma(staged.va(), place, cb.len());
        run(&d, EDMA, &copy).unwrap();
        d.run_cb(GAUDI2_QUEUE_ID_PDMA_1_0, place, cb.len(), 10 * SEC)
            .unwrap();
    }
    for marker in 1..=3u32 {
        let at = marker as usize * 4;
        assert_eq!(
            &out.as_slice()[at..at + 4],
            &marker.to_le_bytes(),
            "marker {marker}"
        );
    }
}

#[test]
fn sixty_four_chunks_on_every_queue_in_one_cs() {
    guest_only!();
    let d = Device::open_compute(0).unwrap();
    let out = HostBuffer::new(4096).unwrap();
    let om = d.map_buffer(out.as_slice(), 0, 0).unwrap();
    let queues: Vec<u32> = [0u32, 1, 4]
        .into_iter()
        .chain([8u32, 48, 84, 120].into_iter().flat_map(|b| b..b + 8))
        .collect();
    assert_eq!(queues.len(), 35);
    let cbs: Vec<HostCb> = (0..64u32)
        .map(|i| host_cb(&d, &Cb::new().msg_long(om.va() + u64::from(i) * 4, i + 1)))
        .collect();
    let mut cs = Cs::new();
    for (i, cb) in cbs.iter().enumerate() {
        cs = cs.chunk(queues[i % queues.len()], cb.va(), cb.len);
    }
    cs.submit(&d).unwrap().wait(&d, 30 * SEC).unwrap();
    for i in 0..64usize {
        assert_eq!(
            &out.as_slice()[i * 4..i * 4 + 4],
            &(i as u32 + 1).to_le_bytes()
        );
    }
    // 65 MSG_LONGs of a CB read back through the same engine.
    let many = (0..512u32).fold(Cb::new(), |cb, i| {
        cb.msg_long(om.va() + 2048 + u64::from(i % 64) * 4, i)
    });
    run(&d, EDMA, &many).unwrap();
    assert_eq!(
        &out.as_slice()[2048 + 63 * 4..2048 + 64 * 4],
        &511u32.to_le_bytes()
    );
}

#[test]
fn a_hundred_thousand_back_to_back_nop_css() {
    guest_only!();
    let d = Device::open_compute(0).unwrap();
    let cb = host_cb(&d, &Cb::new().nop());
    let t = std::time::Instant::now();
    let serial = 1_000u64;
    for i in 1..=serial {
        let f = Cs::new().chunk(PDMA, cb.va(), cb.len).submit(&d).unwrap();
        assert_eq!(f.seq, i);
        f.wait(&d, 10 * SEC).unwrap();
    }
    let per = t.elapsed() / serial as u32;
    eprintln!("CS+WAIT_CS of one NOP: {per:?} each over {serial}");
    // Back to back: 100,000 CSs submitted without waiting for each, the
    // window of 64 kept by waiting, every 32 CSs, for the CS 32 back; every
    // sequence in order, none refused.
    let t = std::time::Instant::now();
    let n = 100_000u64;
    for i in serial + 1..=serial + n {
        if i % 32 == 0 {
            let done = d.wait_cs(i - 32, 10 * SEC).unwrap();
            assert!(matches!(done, CsDone::Completed { .. }), "CS {}", i - 32);
        }
        let f = Cs::new().chunk(PDMA, cb.va(), cb.len).submit(&d).unwrap();
        assert_eq!(f.seq, i);
    }
    let last = serial + n;
    assert_eq!(
        d.wait_cs(last, 10 * SEC).unwrap(),
        CsDone::Completed {
            gone: false,
            timestamp: None
        }
    );
    eprintln!(
        "{n} NOP CSs back to back: {:?} each",
        t.elapsed() / n as u32
    );
    // Past the window: EAGAIN, not a lost CS.
    let mut refused = 0;
    let mut top = last;
    for _ in 0..200 {
        match Cs::new().chunk(PDMA, cb.va(), cb.len).submit(&d) {
            Ok(f) => {
                top += 1;
                assert_eq!(f.seq, top);
            }
            Err(e) => {
                assert_eq!(hlrs::errno(&e), EAGAIN);
                refused += 1;
                d.wait_cs(top, 10 * SEC).unwrap();
            }
        }
    }
    d.wait_cs(top, 10 * SEC).unwrap();
    assert_eq!(top - last + refused, 200);
    assert_eq!(d.hw_idle().unwrap().is_idle, 1);
}

#[test]
fn eagain_at_64_in_flight_and_close_stops_them() {
    guest_only!();
    let d = Device::open_compute(0).unwrap();
    let slow = host_cb(&d, &forever());
    let nop = host_cb(&d, &Cb::new().nop());
    let first = Cs::new()
        .chunk(PDMA, slow.va(), slow.len)
        .submit(&d)
        .unwrap();
    assert_eq!(first.seq, 1);
    for want in 2..=64 {
        let f = Cs::new().chunk(PDMA, nop.va(), nop.len).submit(&d).unwrap();
        assert_eq!(f.seq, want);
    }
    // The 65th: EAGAIN, arguments untouched; counted.
    let cs = Cs::new().chunk(PDMA, nop.va(), nop.len);
    let mut a = cs.args();
    let before = a;
    expect_errno(d.cs_args(&mut a), EAGAIN);
    assert_eq!(a, before);
    let c = d.cs_counters().unwrap();
    assert!(c.counters[8] >= 1 && c.counters[9] == 1, "{c:?}");
    // HW_IDLE: PDMA 0 is busy.
    let idle = d.hw_idle().unwrap();
    assert_eq!(idle.is_idle, 0);
    assert_eq!(idle.busy_engines_mask_ext[0], 1 << GAUDI2_ENGINE_ID_PDMA_0);
    assert_eq!(d.wait_cs(1, 0).unwrap(), CsDone::Busy);
    assert_eq!(d.wait_cs(64, 1000).unwrap(), CsDone::Busy);
    // Close with 64 CSs in flight: prompt.
    let t = std::time::Instant::now();
    drop((slow, nop));
    drop(d);
    assert!(
        t.elapsed() < std::time::Duration::from_secs(5),
        "{:?}",
        t.elapsed()
    );
    let d = Device::open_compute(0).unwrap();
    assert_eq!(d.hw_idle().unwrap().is_idle, 1);
    assert_eq!(run_seq(&d), 1);
    // The device total stays, the new context's count starts at 0.
    let c = d.cs_counters().unwrap();
    assert!(c.counters[8] >= 1 && c.counters[9] == 0, "{c:?}");
}

#[test]
fn every_wait_cs_outcome() {
    guest_only!();
    let d = Device::open_compute(0).unwrap();
    let nop = host_cb(&d, &Cb::new().nop());
    let done = CsDone::Completed {
        gone: false,
        timestamp: None,
    };
    let gone = CsDone::Completed {
        gone: true,
        timestamp: None,
    };
    // COMPLETED with a timestamp.
    let t0 = Cs::new()
        .chunk(PDMA, nop.va(), nop.len)
        .timestamp()
        .submit(&d)
        .unwrap();
    let CsDone::Completed {
        gone: false,
        timestamp: Some(ts),
    } = t0.wait(&d, 10 * SEC).unwrap()
    else {
        panic!("no timestamp");
    };
    assert!(ts > 0);
    // A future sequence: EINVAL.
    expect_errno(d.wait_cs(t0.seq + 1, 0), EINVAL);
    expect_errno(d.wait_cs(u64::MAX, 0), EINVAL);
    // Out of the window: the kept outcome once (with its time), then GONE;
    // a CS without a timestamp is GONE at once.
    let plain = Cs::new().chunk(PDMA, nop.va(), nop.len).submit(&d).unwrap();
    plain.wait(&d, 10 * SEC).unwrap();
    for _ in 0..64 {
        d.run_cb(PDMA, nop.va(), nop.len, 10 * SEC).unwrap();
    }
    assert_eq!(
        t0.wait(&d, 0).unwrap(),
        CsDone::Completed {
            gone: false,
            timestamp: Some(ts)
        }
    );
    assert_eq!(t0.wait(&d, 0).unwrap(), gone);
    assert_eq!(plain.wait(&d, 0).unwrap(), gone);
    assert_eq!(d.wait_cs(0, 0).unwrap(), gone);
    // The raw union of a GONE answer.
    let mut w = HlWaitCsArgs {
        seq: plain.seq,
        ..Default::default()
    };
    d.wait_cs_args(&mut w).unwrap();
    assert_eq!(
        (w.out_status(), w.out_flags(), w.out_timestamp_nsec()),
        (0, 1, 0)
    );
    // BUSY, then TIMEDOUT (a timeout of its own, 1 s), captured.
    let slow = host_cb(&d, &forever());
    let f = Cs::new()
        .chunk(EDMA, slow.va(), slow.len)
        .timeout(1)
        .submit(&d)
        .unwrap();
    assert_eq!(f.wait(&d, 0).unwrap(), CsDone::Busy);
    assert_eq!(f.wait(&d, 100_000).unwrap(), CsDone::Busy);
    let t = std::time::Instant::now();
    expect_errno(f.wait(&d, 30 * SEC), ETIMEDOUT);
    assert!(t.elapsed() < std::time::Duration::from_secs(5));
    let mut w = HlWaitCsArgs {
        seq: f.seq,
        ..Default::default()
    };
    expect_errno(d.wait_cs_args(&mut w), ETIMEDOUT);
    assert_eq!(w.out_status(), HL_WAIT_CS_STATUS_TIMEDOUT);
    let ev = d.cs_timeout_event().unwrap();
    assert_eq!(ev.seq, f.seq);
    assert!(ev.timestamp > ts);
    assert_eq!(
        d.events().unwrap() & HL_NOTIFIER_EVENT_CS_TIMEOUT,
        HL_NOTIFIER_EVENT_CS_TIMEOUT
    );
    assert_eq!(d.events().unwrap(), 0);
    // The device goes on.
    assert_eq!(d.run_cb(PDMA, nop.va(), nop.len, 10 * SEC).unwrap(), done);
    // ABORTED: a bad packet; the undefined opcode is captured.
    // Opcode 0x11: no packet has it.
    let bad = host_cb(&d, &Cb::new().nop().push(&packet::raw(0x11, 0)));
    let f = Cs::new().chunk(PDMA, bad.va(), bad.len).submit(&d).unwrap();
    expect_errno(f.wait(&d, 10 * SEC), EIO);
    let u = d.undefined_opcode_event().unwrap();
    assert_eq!(u.engine_id, u32::from(GAUDI2_ENGINE_ID_PDMA_0));
    assert_eq!((u.cq_addr, u.stream_id), (bad.va() + 8, 4));
    assert_eq!(d.run_cb(PDMA, nop.va(), nop.len, 10 * SEC).unwrap(), done);
}

/// SIGUSR1's handler: nothing (the wait must see the signal and return).
extern "C" fn on_signal(_: libc::c_int) {}

#[test]
fn a_signal_interrupts_a_wait_with_eintr() {
    guest_only!();
    // SAFETY: installs a handler that does nothing, without SA_RESTART.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_signal as *const () as usize;
        libc::sigaction(libc::SIGUSR1, &sa, std::ptr::null_mut());
    }
    let d = Device::open_compute(0).unwrap();
    let slow = host_cb(&d, &forever());
    let f = Cs::new()
        .chunk(PDMA, slow.va(), slow.len)
        .submit(&d)
        .unwrap();
    // SAFETY: the calling thread's id.
    let me = unsafe { libc::pthread_self() };
    let kicker = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(300));
        // SAFETY: `me` is alive: it waits for this thread's join.
        unsafe { libc::pthread_kill(me, libc::SIGUSR1) };
    });
    let mut w = HlWaitCsArgs {
        seq: f.seq,
        timeout_us: 60 * SEC,
        ..Default::default()
    };
    let before = w;
    expect_errno(d.wait_cs_args(&mut w), EINTR);
    // Left as it came.
    assert_eq!(w, before);
    kicker.join().unwrap();
}

#[test]
fn refused_css_get_upstreams_errnos() {
    guest_only!();
    let d = Device::open_compute(0).unwrap();
    let nop = host_cb(&d, &Cb::new().nop());
    let good = chunk(PDMA, nop.va(), nop.len);
    let try_cs = |c: HlCsChunk| {
        let cs = Cs::new().raw_chunk(c);
        let mut a = cs.args();
        let r = d.cs_args(&mut a);
        (r, a.out_seq(), a.out_status())
    };
    for (c, errno) in [
        // A kernel-CB handle (no USER_ALLOC_CB): Gaudi2's queues refuse it.
        (
            HlCsChunk {
                cs_chunk_flags: 0,
                ..good
            },
            EINVAL,
        ),
        (
            HlCsChunk {
                queue_index: GAUDI2_QUEUE_ID_CPU_PQ,
                ..good
            },
            EINVAL,
        ),
        (
            HlCsChunk {
                queue_index: GAUDI2_QUEUE_ID_SIZE,
                ..good
            },
            EINVAL,
        ),
        // Disabled queues: PDMA 0 stream 2 (the ARCs' on Gaudi2), a NIC.
        (
            HlCsChunk {
                queue_index: 2,
                ..good
            },
            EINVAL,
        ),
        (
            HlCsChunk {
                queue_index: 156,
                ..good
            },
            EINVAL,
        ),
        // CB addresses outside every range, or empty.
        (
            HlCsChunk {
                cb_handle: 0x1000,
                ..good
            },
            EFAULT,
        ),
        (HlCsChunk { cb_size: 0, ..good }, EFAULT),
        (
            HlCsChunk {
                cb_handle: SRAM + SRAM_SIZE - 8,
                cb_size: 16,
                ..good
            },
            EFAULT,
        ),
    ] {
        let (r, seq, status) = try_cs(c);
        expect_errno(r, errno);
        assert_eq!((seq, status), (u64::MAX, (-errno) as u32), "{c:?}");
    }
    // Each used a sequence number and completed (upstream's rollback).
    let f = Cs::new().chunk(PDMA, nop.va(), nop.len).submit(&d).unwrap();
    assert_eq!(f.seq, 9);
    assert_eq!(
        d.wait_cs(3, 0).unwrap(),
        CsDone::Completed {
            gone: false,
            timestamp: None
        }
    );
    let c = d.cs_counters().unwrap();
    // This context's parsing drops: 5, validation drops: 3.
    assert_eq!((c.counters[3], c.counters[11]), (5, 3));
    assert!(c.counters[2] >= 5 && c.counters[10] >= 3);
    // Chunk counts, flags, padding.
    let mut cs = Cs::new();
    for _ in 0..513 {
        cs = cs.chunk(PDMA, nop.va(), nop.len);
    }
    expect_errno(cs.submit(&d), EINVAL);
    let mut a = Cs::new().args();
    expect_errno(d.cs_args(&mut a), EINVAL);
    // A SIGNAL CS runs where the queues run the sync manager (the PCI
    // device: tests/sync.rs); the simulation refuses it.
    let sync = d.hw_ip_info().unwrap().number_of_user_interrupts > 0;
    let signal = d.signal(PDMA);
    if sync {
        let f = signal.unwrap().fence;
        assert!(matches!(f.wait(&d, 10 * SEC), Ok(CsDone::Completed { .. })));
    } else {
        expect_errno(signal, EOPNOTSUPP);
    }
    for (flags, errno) in [
        (HL_CS_FLAGS_STAGED_SUBMISSION, EPERM),
        (HL_CS_FLAGS_SIGNAL | HL_CS_FLAGS_WAIT, EINVAL),
        (HL_CS_FLAGS_RESERVE_SIGNALS_ONLY, EOPNOTSUPP),
        (HL_CS_FLAGS_ENGINE_CORE_COMMAND, EOPNOTSUPP),
    ] {
        expect_errno(
            Cs::new()
                .chunk(PDMA, nop.va(), nop.len)
                .flags(flags)
                .submit(&d),
            errno,
        );
    }
    let mut a = Cs::new().chunk(PDMA, nop.va(), nop.len).args();
    a.pad = [0, 0, 1, 0];
    expect_errno(d.cs_args(&mut a), EINVAL);
    // An unreadable chunk array: EFAULT.
    let mut a = Cs::new().chunk(PDMA, nop.va(), nop.len).args();
    a.chunks_execute = 8;
    expect_errno(d.cs_args(&mut a), EFAULT);
    // Flush: done at once, no sequence.
    let mut a = Cs::new().flags(HL_CS_FLAGS_FLUSH_PCI_HBW_WRITES).args();
    d.cs_args(&mut a).unwrap();
    assert_eq!((a.out_seq(), a.out_status()), (u64::MAX, 0));
    // WAIT_CS: user interrupts are served where the device raises them
    // (the PCI device; interrupt id 0 names none there), multi-CS waits
    // are not.
    let mut w = HlWaitCsArgs {
        flags: HL_WAIT_CS_FLAGS_INTERRUPT,
        ..Default::default()
    };
    let interrupts = d.hw_ip_info().unwrap().number_of_user_interrupts > 0;
    expect_errno(
        d.wait_cs_args(&mut w),
        if interrupts { EINVAL } else { EPERM },
    );
    let mut w = HlWaitCsArgs {
        flags: HL_WAIT_CS_FLAGS_MULTI_CS,
        ..Default::default()
    };
    expect_errno(d.wait_cs_args(&mut w), EPERM);
    w.interrupt_timeout_us = 1 << 8;
    expect_errno(d.wait_cs_args(&mut w), EINVAL);
    // A device not operational: EBUSY for both.
    std::fs::write("/sys/kernel/debug/habanalabs_rs/0/status", "in_reset").unwrap();
    expect_errno(Cs::new().chunk(PDMA, nop.va(), nop.len).submit(&d), EBUSY);
    expect_errno(d.wait_cs(1, 0), EBUSY);
    std::fs::write("/sys/kernel/debug/habanalabs_rs/0/status", "operational").unwrap();
}

#[test]
fn restore_chunks_run_first_as_their_own_cs() {
    guest_only!();
    let d = Device::open_compute(0).unwrap();
    let out = HostBuffer::new(4096).unwrap();
    let om = d.map_buffer(out.as_slice(), 0, 0).unwrap();
    let restore = host_cb(&d, &Cb::new().msg_long(SRAM + 0x100, 0x5151_5151));
    let exec = host_cb(&d, &Cb::new().lin_dma(SRAM + 0x100, om.va(), 4));
    let f = Cs::new()
        .restore_chunk(PDMA, restore.va(), restore.len)
        .chunk(GAUDI2_QUEUE_ID_PDMA_1_0, exec.va(), exec.len)
        .submit(&d)
        .unwrap();
    // The restore CS took sequence 1.
    assert_eq!(f.seq, 2);
    f.wait(&d, 10 * SEC).unwrap();
    assert_eq!(&out.as_slice()[..4], &0x5151_5151u32.to_le_bytes());
    // A restore CS that aborts: ENOEXEC, out.seq its sequence.
    let bad = host_cb(&d, &Cb::new().push(&packet::raw(PACKET_WREG_32, 0)));
    let cs = Cs::new()
        .restore_chunk(PDMA, bad.va(), bad.len)
        .chunk(PDMA, exec.va(), exec.len);
    let mut a = cs.args();
    expect_errno(d.cs_args(&mut a), 8);
    assert_eq!(a.out_seq(), 3);
}

#[test]
fn a_dma_to_an_unmapped_va_aborts_and_reports_the_fault() {
    guest_only!();
    let d = Device::open_compute(0).unwrap();
    let mut src = HostBuffer::new(65536).unwrap();
    pattern(src.as_mut_slice(), 3);
    let dst = HostBuffer::new(8192).unwrap();
    let sm = d.map_buffer(src.as_slice(), 0, 0).unwrap();
    let tm = d.map_buffer(dst.as_slice(), 0, 0).unwrap();
    let bad = tm.va() + (1 << 40);
    let cb = host_cb(
        &d,
        &Cb::new()
            .lin_dma(sm.va(), tm.va(), 4096)
            .lin_dma(sm.va(), bad, 4096),
    );
    assert_eq!(d.page_fault_event().unwrap(), HlPageFaultInfo::default());
    expect_errno(d.run_cb(PDMA, cb.va(), cb.len, 10 * SEC), EIO);
    // What ran before the fault ran.
    assert_eq!(&dst.as_slice()[..4096], &src.as_slice()[..4096]);
    let pf = d.page_fault_event().unwrap();
    assert_eq!((pf.addr, pf.engine_id), (bad, GAUDI2_ENGINE_ID_PDMA_0));
    assert!(pf.timestamp > 0);
    // The host mappings of the moment: the two buffers and the CB's.
    let maps = d.user_mappings(16).unwrap();
    assert_eq!(maps.len(), 3, "{maps:?}");
    assert!(maps.iter().any(|m| (m.dev_va, m.size) == (sm.va(), 65536)));
    assert!(maps.iter().any(|m| (m.dev_va, m.size) == (tm.va(), 8192)));
    // Too small a buffer: ENOMEM with the count.
    let mut one = [HlUserMapping::default(); 1];
    let mut a = HlInfoArgs {
        return_pointer: one.as_mut_ptr() as u64,
        return_size: 16,
        op: HL_INFO_USER_MAPPINGS,
        arg: 0,
        pad: 0,
    };
    expect_errno(d.info_args(&mut a), 12);
    assert_eq!(a.arg, 3);
    assert_eq!(
        d.events().unwrap() & HL_NOTIFIER_EVENT_PAGE_FAULT,
        HL_NOTIFIER_EVENT_PAGE_FAULT
    );
    // The device stays usable; only the first fault is kept.
    let nop = host_cb(&d, &Cb::new().nop());
    d.run_cb(PDMA, nop.va(), nop.len, 10 * SEC).unwrap();
    let dram = d.allocate(1 << 30, 0).unwrap();
    let dm = dram.map(0, 0).unwrap();
    let unmapped_dram = dm.va() + (3 << 30) + 0x1234_5678;
    let cb2 = host_cb(&d, &Cb::new().msg_long(unmapped_dram, 1));
    expect_errno(d.run_cb(EDMA, cb2.va(), cb2.len, 10 * SEC), EIO);
    assert_eq!(d.page_fault_event().unwrap(), pf);
    drop((cb, cb2, nop, sm, tm, dm));
    drop(dram);
    drop(d);
    // A new open starts with nothing captured; an HMMU fault is reported
    // with the VA's bits 63..26, and the DRAM mappings of the moment.
    let d = Device::open_compute(0).unwrap();
    assert_eq!(d.page_fault_event().unwrap(), HlPageFaultInfo::default());
    let dram = d.allocate(1 << 30, 0).unwrap();
    let dm = dram.map(0, 0).unwrap();
    let unmapped_dram = dm.va() + (3 << 30) + 0x1234_5678;
    let cb = host_cb(&d, &Cb::new().msg_long(unmapped_dram, 1));
    expect_errno(d.run_cb(EDMA, cb.va(), cb.len, 10 * SEC), EIO);
    let pf = d.page_fault_event().unwrap();
    assert_eq!(pf.addr, unmapped_dram & !((1 << 26) - 1));
    assert_eq!(pf.engine_id, 11 + 1);
    let maps = d.user_mappings(16).unwrap();
    assert_eq!(maps.len(), 1);
    assert_eq!(maps[0].dev_va, dm.va());
    assert!(maps[0].size >= 1 << 30);
    // An address no memory decodes (below SRAM): a RAZWI, not a page fault.
    assert_eq!(d.razwi_event().unwrap(), HlInfoRazwiEvent::default());
    let below = SRAM - 0x1000;
    let cb = host_cb(&d, &Cb::new().msg_long(below, 1));
    expect_errno(d.run_cb(PDMA, cb.va(), cb.len, 10 * SEC), EIO);
    let r = d.razwi_event().unwrap();
    assert_eq!(
        (r.addr, r.engine_id[0], r.num_of_possible_engines),
        (below, GAUDI2_ENGINE_ID_PDMA_0, 1)
    );
    assert!(r.timestamp > 0);
    assert_eq!(d.page_fault_event().unwrap(), pf);
    assert_eq!(
        d.events().unwrap() & HL_NOTIFIER_EVENT_RAZWI,
        HL_NOTIFIER_EVENT_RAZWI
    );
}

#[test]
fn closing_with_dmas_in_flight_stops_them_and_unpins() {
    guest_only!();
    let base = vm_locked_kb();
    let src = HostBuffer::new(64 << 20).unwrap();
    let d = Device::open_compute(0).unwrap();
    let sva = d.map_host(src.addr(), 64 << 20, 0, 0).unwrap();
    let dram = d.alloc(1 << 30, 0).unwrap();
    let dva = d.map(dram, 0, 0).unwrap();
    let copies = (0..64).fold(Cb::new(), |cb, _| cb.lin_dma(sva, dva, 64 << 20));
    let cb1 = copies.to_host_buffer().unwrap();
    let cb1va = d.map_host(cb1.addr(), cb1.len() as u64, 0, 0).unwrap();
    let slow = forever();
    let cb2 = slow.to_host_buffer().unwrap();
    let cb2va = d.map_host(cb2.addr(), cb2.len() as u64, 0, 0).unwrap();
    let f = Cs::new()
        .chunk(PDMA, cb1va, copies.len())
        .chunk(EDMA, cb2va, slow.len())
        .submit(&d)
        .unwrap();
    assert_eq!(d.wait_cs(f.seq, 100_000).unwrap(), CsDone::Busy);
    assert!(vm_locked_kb() > base);
    let t = std::time::Instant::now();
    drop(d);
    assert!(
        t.elapsed() < std::time::Duration::from_secs(5),
        "{:?}",
        t.elapsed()
    );
    assert_eq!(vm_locked_kb(), base);
    drop((src, cb1, cb2));
    // The next user finds an idle device.
    let d = Device::open_compute(0).unwrap();
    assert_eq!(d.hw_idle().unwrap().is_idle, 1);
}

#[test]
fn big_round_trips_64_mib_through_contiguous_dram_and_48_mib_through_sram() {
    guest_only!();
    let d = Device::open_compute(0).unwrap();
    let dram = d.allocate(1 << 30, HL_MEM_CONTIGUOUS).unwrap();
    let dm = dram.map(0, 0).unwrap();
    for (size, mid, queue) in [
        (64usize << 20, dm.va() + 4096 + 3, PDMA),
        (48 << 20, SRAM, GAUDI2_QUEUE_ID_DCORE3_EDMA_0_0),
    ] {
        let mut src = HostBuffer::new(size).unwrap();
        pattern(src.as_mut_slice(), size as u64);
        let dst = HostBuffer::new(size).unwrap();
        let sm = d.map_buffer(src.as_slice(), 0, 0).unwrap();
        let tm = d.map_buffer(dst.as_slice(), 0, 0).unwrap();
        let cb = Cb::new()
            .lin_dma(sm.va(), mid, size as u32)
            .lin_dma(mid, tm.va(), size as u32);
        let t = std::time::Instant::now();
        run(&d, queue, &cb).unwrap();
        let ms = t.elapsed().as_millis().max(1);
        eprintln!(
            "{} MiB there and back: {} ms ({} MiB/s)",
            size >> 20,
            ms,
            (2 * size as u128 >> 20) * 1000 / ms
        );
        assert_eq!(checksum(dst.as_slice()), checksum(src.as_slice()));
    }
}

/// Host -> DRAM at `dram` -> host of `len` bytes of `src` into `dst` (both
/// mapped at `sva`/`dva`, at byte offsets `so`/`dof` of them), one CS of
/// two LIN_DMAs on `queue`; `dst` must come back equal.
/// [`run`] for the big transfers: with a custom timeout (clamped to
/// `cs_max_run_s`, 60 s) instead of the device's 30 s, and waited for as
/// long: a slow or busy machine moves the same bytes more slowly.
fn run_long(d: &Device, queue: u32, cb: &Cb) -> io::Result<CsDone> {
    let c = host_cb(d, cb);
    let f = Cs::new()
        .chunk(queue, c.va(), c.len)
        .timeout(300)
        .submit(d)?;
    f.wait(d, 300 * SEC)
}

fn round_trip(
    d: &Device,
    queue: u32,
    (src, sva, so): (&HostBuffer, u64, usize),
    (dst, dva, dof): (&HostBuffer, u64, usize),
    dram: u64,
    len: usize,
) {
    let n = u32::try_from(len).unwrap();
    let cb = Cb::new()
        .lin_dma(sva + so as u64, dram, n)
        .lin_dma(dram, dva + dof as u64, n);
    assert_eq!(
        run_long(d, queue, &cb).unwrap(),
        CsDone::Completed {
            gone: false,
            timestamp: None
        },
        "{len} bytes through {dram:#x}"
    );
    assert!(
        dst.as_slice()[dof..dof + len] == src.as_slice()[so..so + len],
        "{len} bytes through {dram:#x} came back different"
    );
}

#[test]
fn a_256_mib_round_trip_across_the_pages_of_a_scattered_handle() {
    guest_only!();
    let d = Device::open_compute(0).unwrap();
    let page = d.hw_ip_info().unwrap().dram_page_size;
    const SIZE: usize = 256 << 20;
    let mut src = HostBuffer::new(SIZE + 8).unwrap();
    pattern(src.as_mut_slice(), 256);
    let dst = HostBuffer::new(SIZE + 8).unwrap();
    let sm = d.map_buffer(src.as_slice(), 0, 0).unwrap();
    let tm = d.map_buffer(dst.as_slice(), 0, 0).unwrap();
    // A scattered handle of two pages, with a page freed between them, so
    // they are not adjacent: an odd size across the boundary of its pages,
    // at odd host offsets (a contiguous handle: the 64 MiB round trip).
    let a = d.alloc(page, 0).unwrap();
    let hole = d.alloc(page, 0).unwrap();
    let b = d.alloc(page, 0).unwrap();
    d.free(hole).unwrap();
    let two = d.allocate(2 * page, 0).unwrap();
    let tw = two.map(0, 0).unwrap();
    let across = tw.va() + page - (100 << 20) - 1;
    let len = SIZE - 4093;
    let t = std::time::Instant::now();
    round_trip(
        &d,
        EDMA,
        (&src, sm.va(), 8),
        (&dst, tm.va(), 1),
        across,
        len,
    );
    eprintln!("256 MiB there and back: {:?}", t.elapsed());
    tw.unmap().unwrap();
    two.free().unwrap();
    d.free(a).unwrap();
    d.free(b).unwrap();
    let u = d.dram_usage().unwrap();
    assert_eq!(u.dram_free_mem, d.hw_ip_info().unwrap().dram_size);
    drop((sm, tm));
    drop(d);
}

#[test]
fn round_trips_from_and_to_hugetlbfs_buffers() {
    guest_only!();
    let d = Device::open_compute(0).unwrap();
    // Three 2 MiB pages each (the guest reserves 16): mapped with 2 MiB
    // leaves, one STLB entry per page.
    let mut src = HostBuffer::hugetlb(6 << 20).unwrap();
    pattern(src.as_mut_slice(), 2);
    let dst = HostBuffer::hugetlb(6 << 20).unwrap();
    let sva = d.map_host(src.addr(), src.len() as u64, 0, 0).unwrap();
    let dva = d.map_host(dst.addr(), dst.len() as u64, 0, 0).unwrap();
    let dram = d.allocate(1 << 30, 0).unwrap();
    let dm = dram.map(0, 0).unwrap();
    // Across both huge-page boundaries, at odd offsets; through DRAM and
    // through SRAM; and a few bytes astride one boundary.
    let len = (6 << 20) - 4099;
    round_trip(
        &d,
        PDMA,
        (&src, sva, 1),
        (&dst, dva, 4097),
        dm.va() + 3,
        len,
    );
    round_trip(&d, EDMA, (&src, sva, 2), (&dst, dva, 7), SRAM + 5, len);
    let edge = (2 << 20) - 3;
    round_trip(
        &d,
        PDMA,
        (&src, sva, edge),
        (&dst, dva, edge + 1),
        dm.va(),
        7,
    );
    d.unmap(sva).unwrap();
    d.unmap(dva).unwrap();
}

#[test]
fn unmap_and_free_while_dmas_run_on_two_engines() {
    guest_only!();
    let base = vm_locked_kb();
    let d = Device::open_compute(0).unwrap();
    let src = HostBuffer::new(64 << 20).unwrap();
    let sva = d.map_host(src.addr(), 64 << 20, 0, 0).unwrap();
    let h = d.alloc(1 << 30, 0).unwrap();
    let dva = d.map(h, 0, 0).unwrap();
    let there = (0..16).fold(Cb::new(), |cb, _| cb.lin_dma(sva, dva, 64 << 20));
    let back = (0..16).fold(Cb::new(), |cb, _| {
        cb.lin_dma(dva + (64 << 20), sva, 64 << 20)
    });
    let (c1, c2) = (host_cb(&d, &there), host_cb(&d, &back));
    let f = Cs::new()
        .chunk(PDMA, c1.va(), c1.len)
        .chunk(EDMA, c2.va(), c2.len)
        .submit(&d)
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(50));
    // Each UNMAP's invalidation waits for the engines' access in flight;
    // their next access faults.
    d.unmap(sva).unwrap();
    d.unmap(dva).unwrap();
    d.free(h).unwrap();
    match f.wait(&d, 60 * SEC) {
        Err(e) => assert_eq!(hlrs::errno(&e), EIO),
        Ok(done) => assert!(matches!(done, CsDone::Completed { .. })),
    }
    assert_eq!(vm_locked_kb(), base + 2 * 4, "only the two CBs stay pinned");
    let nop = host_cb(&d, &Cb::new().nop());
    d.run_cb(PDMA, nop.va(), nop.len, 10 * SEC).unwrap();
    drop((c1, c2, nop));
    drop(d);
    assert_eq!(vm_locked_kb(), base);
}

#[test]
fn killing_a_process_with_a_dma_in_flight() {
    guest_only!();
    let size = (256u64 << 20).to_string();
    let mut child = hlrs_guest_tests::spawn_hold(&["--count", "1", "--host", &size, "--busy"]);
    std::thread::sleep(std::time::Duration::from_millis(200));
    child.kill().unwrap();
    child.wait().unwrap();
    let d = Device::open_compute(0).unwrap();
    assert_eq!(d.hw_idle().unwrap().is_idle, 1);
    let u = d.dram_usage().unwrap();
    assert_eq!(u.dram_free_mem, d.hw_ip_info().unwrap().dram_size);
    assert_eq!(run_seq(&d), 1);
}

#[test]
fn killing_a_process_during_a_1_gib_dma() {
    guest_only!();
    // One LIN_DMA of 1 GiB from DRAM never written (nothing backs it) to
    // another handle: the kill comes while it runs.
    let gib = (1u64 << 30).to_string();
    let mut child =
        hlrs_guest_tests::spawn_hold(&["--count", "2", "--size", &gib, "--busy-dram", &gib]);
    // Submitted before the child said it holds; 1 GiB takes the engine far
    // longer than this (hundreds of ms at the fastest).
    let control = Device::open_control(0).unwrap();
    let busy = control.hw_idle().unwrap().is_idle == 0;
    child.kill().unwrap();
    child.wait().unwrap();
    // The release stopped the engine and freed both handles.
    assert_eq!(control.hw_idle().unwrap().is_idle, 1);
    let u = control.dram_usage().unwrap();
    assert_eq!(u.dram_free_mem, control.hw_ip_info().unwrap().dram_size);
    let d = Device::open_compute(0).unwrap();
    assert_eq!(run_seq(&d), 1);
    drop(d);
    eprintln!("killed with the 1 GiB DMA in flight: {busy}");
}

#[test]
fn a_registered_eventfd_is_signalled_on_a_page_fault() {
    guest_only!();
    let d = Device::open_compute(0).unwrap();
    // SAFETY: plain system call; the fd is closed below.
    let efd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK) };
    assert!(efd >= 0);
    let register = |fd: i32| {
        let mut buf = [0u8; 8];
        let mut a = HlInfoArgs {
            return_pointer: buf.as_mut_ptr() as u64,
            return_size: 8,
            op: HL_INFO_REGISTER_EVENTFD,
            arg: fd as u32,
            pad: 0,
        };
        d.info_args(&mut a)
    };
    let unregister = || {
        d.info_into(HL_INFO_UNREGISTER_EVENTFD, 0, &mut [0u8; 8])
            .map(drop)
    };
    expect_errno(unregister(), EINVAL);
    expect_errno(register(9999), 9);
    register(efd).unwrap();
    expect_errno(register(efd), EINVAL);
    let read = || {
        let mut v = 0u64;
        // SAFETY: reads 8 bytes into `v`.
        let n = unsafe { libc::read(efd, (&mut v as *mut u64).cast(), 8) };
        (n == 8).then_some(v)
    };
    assert_eq!(read(), None);
    // A host VA nothing maps.
    let cb = host_cb(&d, &Cb::new().msg_long(0xFFF0_0F00_0000_0000, 1));
    expect_errno(d.run_cb(PDMA, cb.va(), cb.len, 10 * SEC), EIO);
    assert!(read().is_some_and(|v| v >= 1));
    assert_eq!(
        d.events().unwrap() & HL_NOTIFIER_EVENT_PAGE_FAULT,
        HL_NOTIFIER_EVENT_PAGE_FAULT
    );
    unregister().unwrap();
    expect_errno(unregister(), EINVAL);
    // Registered again, then left to the close.
    register(efd).unwrap();
    drop(cb);
    drop(d);
    // SAFETY: closes the eventfd made above.
    unsafe { libc::close(efd) };
}

/// The `last stale use` of debugfs `stlb`: (VA, DRAM address).
fn last_stale_use() -> Option<(u64, u64)> {
    let s = hlrs_guest_tests::debugfs(0, "stlb");
    let line = s.lines().find(|l| l.starts_with("last stale use:"))?;
    let mut w = line.split_whitespace();
    let va = w.clone().skip_while(|&x| x != "va").nth(1)?;
    let pa = w.by_ref().skip_while(|&x| x != "dram").nth(1)?;
    let hex = |t: &str| u64::from_str_radix(t.trim_start_matches("0x"), 16).ok();
    Some((hex(va)?, hex(pa)?))
}

#[test]
fn a_skipped_invalidation_lets_a_dma_reach_the_freed_page_and_is_caught() {
    guest_only!();
    let d = Device::open_compute(0).unwrap();
    let page = d.hw_ip_info().unwrap().dram_page_size;
    let out = HostBuffer::new(4096).unwrap();
    let om = d.map_buffer(out.as_slice(), 0, 0).unwrap();
    for skip in [false, true] {
        let h1 = d.alloc(page, 0).unwrap();
        let va1 = d.map(h1, 0, 0).unwrap();
        // A DMA through VA1: the STLB holds its translation.
        run(&d, PDMA, &Cb::new().memset(va1, 0x11, 8)).unwrap();
        if skip {
            std::fs::write("/sys/kernel/debug/habanalabs_rs/0/skip_invalidations", "1").unwrap();
        }
        d.unmap(va1).unwrap();
        d.free(h1).unwrap();
        // Mapped elsewhere: the MAP's own invalidation covers VA2, not VA1.
        let h2 = d.alloc(page, 0).unwrap();
        let va2 = d.map(h2, va1 + 4 * page, HL_MEM_FORCE_HINT).unwrap();
        run(&d, PDMA, &Cb::new().memset(va2, 0x22, 8)).unwrap();
        // The DMA through the unmapped VA1.
        let stale = run(&d, PDMA, &Cb::new().memset(va1, 0x33, 8));
        run(&d, PDMA, &Cb::new().lin_dma(va2, om.va(), 8)).unwrap();
        let seen = out.as_slice()[0];
        if skip {
            // It reached memory the driver had freed: the model lets it and
            // reports it (the STLB's stale use).
            assert!(stale.is_ok(), "{stale:?}");
            let (va, pa) = last_stale_use().expect("a stale use");
            assert_eq!(va, va1);
            if hlrs_guest_tests::oracle_walk(0, va2).map(|(p, _)| p) == Some(pa) {
                // The freed page is the new allocation's: overwritten.
                assert_eq!(seen, 0x33);
            }
        } else {
            // With the invalidation, the DMA faults and nothing changes.
            expect_errno(stale, EIO);
            assert_eq!(seen, 0x22);
        }
        d.unmap(va2).unwrap();
        d.free(h2).unwrap();
    }
    std::fs::write("/sys/kernel/debug/habanalabs_rs/0/skip_invalidations", "0").unwrap();
}

#[test]
fn mme_and_tpc_queues_run_cbs_but_no_lin_dma() {
    guest_only!();
    let d = Device::open_compute(0).unwrap();
    let hw = d.hw_ip_info().unwrap();
    assert_eq!(
        (hw.tpc_enabled_mask, hw.tpc_enabled_mask_ext),
        (0xFF, 0x1FF_FFFF)
    );
    let dst = HostBuffer::new(4096).unwrap();
    let tm = d.map_buffer(dst.as_slice(), 0, 0).unwrap();
    // Each of these QMANs (DCORE0 MME stream 1, DCORE0 TPC 6, DCORE3 TPC 5
    // stream 3) writes its own word of SRAM.
    let queues = [GAUDI2_QUEUE_ID_DCORE0_MME_0_0 + 1, 44, 155];
    for (i, q) in queues.iter().enumerate() {
        let cb = Cb::new()
            .nop()
            .msg_long(SRAM + 0x3000 + 4 * i as u64, 0x700 + i as u32);
        assert!(
            matches!(run(&d, *q, &cb), Ok(CsDone::Completed { .. })),
            "queue {q}"
        );
    }
    let back = Cb::new().lin_dma(SRAM + 0x3000, tm.va(), 12);
    run(&d, PDMA, &back).unwrap();
    for i in 0..3 {
        let w = u32::from_le_bytes(dst.as_slice()[4 * i..4 * i + 4].try_into().unwrap());
        assert_eq!(w, 0x700 + i as u32);
    }
    // No DMA core behind a TPC's QMAN: a LIN_DMA is an engine error.
    let dma = Cb::new().lin_dma(SRAM, SRAM + 0x100, 8);
    expect_errno(run(&d, 44, &dma), EIO);
    // The queue runs on after it.
    assert!(matches!(
        run(&d, 44, &Cb::new().nop()),
        Ok(CsDone::Completed { .. })
    ));
}
