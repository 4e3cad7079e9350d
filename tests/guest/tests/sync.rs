//! The engines coordinate (issue 32): sync objects written by one queue,
//! monitors armed on them, fences that hold a stream until a monitor
//! releases it, what a user CB may and may not write of the sync manager,
//! a new context finding it reset, SIGNAL and WAIT CSs, and a queue that
//! fills. Through the real device nodes, with
//! the CBs a runtime writes (`hlrs::sync`).
//!
//! Runs on both hosts of the model core's sync manager: the PCI device
//! (the model process) and the in-module simulation (whose engines run a
//! job's CB to its end on a thread per stream, a lower-CP `CP_DMA` as a
//! call). The case of the PCI device's 64-job window runs there only
//! ([`device_window`]).

use hlrs::{
    cs::{Cb, Cs, CsDone},
    sync::{config, core_reg, Compare, DmaCore, Fence, Monitor, Sob},
    uapi::*,
    Device, HostBuffer,
};
use hlrs_guest_tests::{expect_errno, guest_only, host_cb, HostCb};
use std::io;

const EIO: i32 = 5;
const SEC: u64 = 1_000_000;
const SRAM: u64 = 0x1000_FFFF_FD00_0000;
const PDMA0: u32 = GAUDI2_QUEUE_ID_PDMA_0_0;
const PDMA0_1: u32 = GAUDI2_QUEUE_ID_PDMA_0_0 + 1;
const PDMA1: u32 = GAUDI2_QUEUE_ID_PDMA_1_0;

/// Whether device 0 holds 64 jobs in flight, as upstream's CS-completion
/// objects allow (the PCI device); the simulated device's queues hold
/// `HL_QUEUE_LENGTH` jobs each instead.
fn device_window(_d: &Device) -> bool {
    let window = hlrs_guest_tests::on_pci(0);
    if !window {
        eprintln!(
            "the simulated device's queues hold 4096 jobs each: skipped (runs on the PCI device)"
        );
    }
    window
}

/// The first SOB and monitor users may take.
fn first(d: &Device) -> (Sob, Monitor) {
    let sm = d.sync_manager_info(0).unwrap();
    (
        Sob::new(sm.first_available_sync_object),
        Monitor::new(sm.first_available_monitor),
    )
}

/// Submit one CS of `(queue, cb)` chunks; the CBs stay mapped until the
/// returned handles drop.
fn submit<'d>(d: &'d Device, chunks: &[(u32, &Cb)]) -> (hlrs::cs::Fence, Vec<HostCb<'d>>) {
    let cbs: Vec<HostCb<'d>> = chunks.iter().map(|(_, cb)| host_cb(d, cb)).collect();
    let cs = chunks
        .iter()
        .zip(&cbs)
        .fold(Cs::new(), |cs, ((q, _), c)| cs.chunk(*q, c.va, c.len));
    (cs.submit(d).unwrap(), cbs)
}

/// Run one CS of `chunks` to its end (10 s).
fn run(d: &Device, chunks: &[(u32, &Cb)]) -> io::Result<CsDone> {
    let (f, _cbs) = submit(d, chunks);
    f.wait(d, 10 * SEC)
}

fn completed(r: io::Result<CsDone>) {
    assert!(
        matches!(r, Ok(CsDone::Completed { .. })),
        "CS did not complete: {r:?}"
    );
}

/// A host buffer mapped on a device (unmapped when dropped).
struct Mem<'d> {
    d: &'d Device,
    buf: HostBuffer,
    va: u64,
}

impl Drop for Mem<'_> {
    fn drop(&mut self) {
        let _ = self.d.unmap(self.va);
    }
}

impl std::ops::Deref for Mem<'_> {
    type Target = HostBuffer;
    fn deref(&self) -> &HostBuffer {
        &self.buf
    }
}

/// A host buffer of `len` bytes mapped on `d`, and its device VA.
fn host(d: &Device, len: usize) -> (Mem<'_>, u64) {
    let buf = HostBuffer::new(len).unwrap();
    let va = d.map_host(buf.addr(), len as u64, 0, 0).unwrap();
    (Mem { d, buf, va }, va)
}

/// The u32 at `off` of `b`.
fn word(b: &HostBuffer, off: usize) -> u32 {
    u32::from_le_bytes(b.as_slice()[off..off + 4].try_into().unwrap())
}

#[test]
fn sync_manager_info_is_upstreams() {
    guest_only!();
    let d = Device::open_compute(0).unwrap();
    let sm = d.sync_manager_info(0).unwrap();
    assert_eq!(
        (
            sm.first_available_sync_object,
            sm.first_available_monitor,
            sm.first_available_cq
        ),
        (413, 289, 2)
    );
    let sm = d.sync_manager_info(3).unwrap();
    assert_eq!(sm.first_available_sync_object, 0);
}

#[test]
fn a_monitor_releases_a_fence_on_another_queue() {
    guest_only!();
    let d = Device::open_compute(0).unwrap();
    pipeline(&d, 0);
}

/// PDMA_1_0 waits for a SOB PDMA_0_0 adds to after copying `src` into
/// SRAM (at `sram`), then copies it out: the output is the input.
fn pipeline(d: &Device, sram: u64) {
    let (sob, mon) = first(d);
    let (mut src, s) = host(d, 8192);
    src.buf
        .as_mut_slice()
        .iter_mut()
        .enumerate()
        .for_each(|(i, b)| *b = (i * 7 + 3 + sram as usize) as u8);
    let (out, o) = host(d, 8192);
    let fence = Fence::of(PDMA1).unwrap();
    let at = SRAM + 0x4000 + sram;
    let waiter = Cb::new()
        .push(&mon.fire_into(fence, sob, 1))
        .push(&fence.wait(1))
        .lin_dma(at, o, 8192);
    let signaller = Cb::new().lin_dma(s, at, 8192).push(&sob.add(1));
    completed(run(d, &[(PDMA1, &waiter), (PDMA0, &signaller)]));
    assert_eq!(out.as_slice(), src.as_slice());
}

/// Every device at once (the pass with four simulated devices,
/// `scripts/guest/multi-device`): each one's sync manager orders its own
/// queues, and no device's objects reach another's.
#[test]
fn every_device_orders_its_own_queues_at_once() {
    guest_only!();
    let all = hlrs::device_indices().unwrap();
    std::thread::scope(|s| {
        for &i in &all {
            s.spawn(move || {
                // A fresh context each round: its SOBs count from 0.
                for _ in 0..3 {
                    let d = Device::open_compute(i).unwrap();
                    pipeline(&d, 0x10_0000 * u64::from(i));
                }
            });
        }
    });
    eprintln!("{} device(s)", all.len());
}

#[test]
fn a_monitor_armed_after_the_sob_is_set_fires_at_once() {
    guest_only!();
    let d = Device::open_compute(0).unwrap();
    let (sob, mon) = first(&d);
    completed(run(&d, &[(PDMA0, &Cb::new().push(&sob.set(3)))]));
    let fence = Fence::of(PDMA1).unwrap();
    let waiter = Cb::new()
        .push(&mon.fire_into(fence, sob, 3))
        .push(&fence.wait(1));
    completed(run(&d, &[(PDMA1, &waiter)]));
}

#[test]
fn a_fence_holds_only_its_own_stream() {
    guest_only!();
    let d = Device::open_compute(0).unwrap();
    let (sob, mon) = first(&d);
    let fence = Fence::of(PDMA0).unwrap();
    // Stream 0 of PDMA0 waits; stream 1 of the same QMAN runs on.
    let (held, _c1) = submit(&d, &[(PDMA0, &Cb::new().push(&fence.wait(1)))]);
    let (out, o) = host(&d, 4096);
    let other = Cb::new()
        .msg_long(SRAM + 0x100, 0xABCD)
        .lin_dma(SRAM + 0x100, o, 4);
    completed(run(&d, &[(PDMA0_1, &other)]));
    assert_eq!(word(&out, 0), 0xABCD);
    assert!(matches!(held.wait(&d, 0), Ok(CsDone::Busy)));
    // A monitor on PDMA_1_0 releases it.
    let release = Cb::new()
        .push(&mon.fire_into(fence, sob, 1))
        .push(&sob.add(1));
    completed(run(&d, &[(PDMA1, &release)]));
    completed(held.wait(&d, 10 * SEC));
}

#[test]
fn two_monitors_on_one_sob_both_fire_and_others_do_not() {
    guest_only!();
    let d = Device::open_compute(0).unwrap();
    let (sob, mon) = first(&d);
    let (a, b, c) = (mon, Monitor::new(mon.0 + 1), Monitor::new(mon.0 + 2));
    let next = Sob::new(sob.0 + 1);
    let (out, o) = host(&d, 4096);
    let cb = Cb::new()
        .msg_long(SRAM + 0x200, 0)
        .msg_long(SRAM + 0x204, 0)
        .msg_long(SRAM + 0x208, 0)
        .push(&a.payload(0, SRAM + 0x200, 0xA))
        .push(&b.payload(0, SRAM + 0x204, 0xB))
        .push(&c.payload(0, SRAM + 0x208, 0xC))
        .push(&a.arm(sob, Compare::Equal, 2))
        .push(&b.arm(sob, Compare::AtLeast, 2))
        // c watches the next SOB of the same group, which stays 0.
        .push(&c.arm(next, Compare::AtLeast, 1))
        .push(&sob.add(1))
        .push(&sob.add(1))
        .lin_dma(SRAM + 0x200, o, 12);
    completed(run(&d, &[(PDMA0, &cb)]));
    assert_eq!((word(&out, 0), word(&out, 4), word(&out, 8)), (0xA, 0xB, 0));
}

#[test]
fn a_monitor_with_wr_num_writes_from_consecutive_monitors() {
    guest_only!();
    let d = Device::open_compute(0).unwrap();
    let (sob, mon) = first(&d);
    let second = Monitor::new(mon.0 + 1);
    let (out, o) = host(&d, 4096);
    let cb = Cb::new()
        .msg_long(SRAM + 0x300, 0)
        .msg_long(SRAM + 0x304, 0)
        .push(&mon.payload(config::wr_num(1), SRAM + 0x300, 0x11))
        .push(&second.payload(0, SRAM + 0x304, 0x22))
        .push(&mon.arm(sob, Compare::AtLeast, 1))
        .push(&sob.set(1))
        .lin_dma(SRAM + 0x300, o, 8);
    completed(run(&d, &[(PDMA0, &cb)]));
    assert_eq!((word(&out, 0), word(&out, 4)), (0x11, 0x22));
}

#[test]
fn a_new_context_finds_the_user_sobs_zeroed() {
    guest_only!();
    let (sob, mon) = {
        let d = Device::open_compute(0).unwrap();
        let (sob, mon) = first(&d);
        let s = Sob::new(sob.0 + 40);
        completed(run(&d, &[(PDMA0, &Cb::new().push(&s.set(5)))]));
        (s, mon)
    };
    let d = Device::open_compute(0).unwrap();
    let (out, o) = host(&d, 4096);
    // Equal to 0: fires only if the last context's 5 is gone.
    let cb = Cb::new()
        .msg_long(SRAM + 0x400, 0)
        .push(&mon.payload(0, SRAM + 0x400, 0x5EED))
        .push(&mon.arm(sob, Compare::Equal, 0))
        .lin_dma(SRAM + 0x400, o, 4);
    completed(run(&d, &[(PDMA0, &cb)]));
    assert_eq!(word(&out, 0), 0x5EED);
}

/// A user CB may point a CP's message base elsewhere (upstream leaves
/// `CP_MSG_BASE0..3` unsecured); the next context finds the driver's bases
/// back (upstream does not restore them: its next user's `MSG_SHORT`s land
/// where the last one pointed).
#[test]
fn a_new_context_finds_the_message_bases_restored() {
    guest_only!();
    let sob = {
        let d = Device::open_compute(0).unwrap();
        let (sob, _) = first(&d);
        let (out, o) = host(&d, 4096);
        let (qman, cp) = hlrs::sync::qman_of(PDMA0).unwrap();
        // Base 1 (the SOBs) of PDMA_0_0's CP now points at `out`.
        let cb = Cb::new()
            .push(&hlrs::sync::set_msg_base(qman, cp, 1, o))
            .push(&hlrs::sync::msg_short(1, 8, 0xB0B));
        completed(run(&d, &[(PDMA0, &cb)]));
        assert_eq!(word(&out, 8), 0xB0B, "the moved base took no effect");
        Sob::new(sob.0 + 41)
    };
    let d = Device::open_compute(0).unwrap();
    let (_, mon) = first(&d);
    let (out, o) = host(&d, 4096);
    // `set` is a MSG_SHORT with base 1: it must reach the SOB, whose
    // monitor then writes `out`; through the last context's base it would
    // write the old VA (a fault, or `out` itself if mapped there again).
    let cb = Cb::new()
        .push(&sob.set(7))
        .push(&mon.payload(0, o + 16, 0x5EED))
        .push(&mon.arm(sob, Compare::Equal, 7));
    completed(run(&d, &[(PDMA0, &cb)]));
    assert_eq!(word(&out, 16), 0x5EED);
    assert_eq!(word(&out, 8), 0, "a MSG_SHORT used the last context's base");
}

/// A user's monitor with `CQ_EN` may not post to the driver's CQs (CQ 0
/// carries the CS completions on the PCI device): the message is refused,
/// and the device's CSs go on completing. (Before it was refused, one such
/// monitor moved CQ 0's PI past the driver's and no CS completed again
/// until the module was reloaded; the sync fuzz found it.)
#[test]
fn a_user_monitor_may_not_post_to_the_drivers_cqs() {
    guest_only!();
    let d = Device::open_compute(0).unwrap();
    let (sob, mon) = first(&d);
    for cq in [0u64, 1] {
        let cb = Cb::new()
            .push(&mon.payload(config::CQ_EN | config::LBW_EN, cq, 0xBAD))
            .push(&mon.arm(sob, Compare::AtLeast, 1))
            .push(&sob.add(1));
        completed(run(&d, &[(PDMA0, &cb)]));
    }
    for _ in 0..4 {
        completed(run(
            &d,
            &[(PDMA0, &Cb::new().nop()), (PDMA1, &Cb::new().nop())],
        ));
    }
}

#[test]
fn a_cb_may_not_write_the_drivers_sync_objects() {
    guest_only!();
    let d = Device::open_compute(0).unwrap();
    // SOB 0 and monitor 0 complete the driver's own jobs; the others
    // below the sync streams' (85, 125) stay the driver's too.
    for p in [
        Sob::new(0).set(1),
        Monitor::new(0).arm_raw(0),
        Sob::new(84).add(1),
        Monitor::new(124).arm_raw(0),
    ] {
        let cb = host_cb(&d, &Cb::new().push(&p));
        expect_errno(d.run_cb(PDMA0, cb.va, cb.len, 10 * SEC), EIO);
        let r = d.razwi_event().unwrap();
        assert!(r.addr >= hlrs::sync::CFG_BASE, "razwi at {:#x}", r.addr);
    }
    // The driver's completions still work.
    completed(run(&d, &[(PDMA0, &Cb::new().nop())]));
}

#[test]
fn a_lin_dma_into_the_register_space_reaches_only_what_a_cb_may_write() {
    guest_only!();
    let d = Device::open_compute(0).unwrap();
    let (sob, mon) = first(&d);
    let (out, o) = host(&d, 4096);
    // A memset of a user SOB lands, as a MSG_LONG would: a monitor on it
    // fires.
    let cb = Cb::new()
        .push(&mon.payload(0, o, 0x77))
        .push(&mon.arm(sob, Compare::AtLeast, 5))
        .memset(sob.addr(), 5, 4);
    completed(run(&d, &[(PDMA0, &cb)]));
    assert_eq!(word(&out.buf, 0), 0x77);
    // Into the driver's SOB 0, or out of a QMAN's PQ registers: a RAZWI.
    let pq_base = hlrs::sync::reg_addr(0x4C8_A050);
    for cb in [
        Cb::new().memset(Sob::new(0).addr(), 1, 4),
        Cb::new().lin_dma(pq_base, o + 4, 4),
    ] {
        let cb = host_cb(&d, &cb);
        expect_errno(d.run_cb(PDMA0, cb.va, cb.len, 10 * SEC), EIO);
        let r = d.razwi_event().unwrap();
        assert!(r.addr >= hlrs::sync::CFG_BASE, "razwi at {:#x}", r.addr);
    }
    assert_eq!(word(&out.buf, 4), 0);
    completed(run(&d, &[(PDMA0, &Cb::new().nop())]));
}

#[test]
fn a_cb_commits_its_dma_cores_transfer_and_fences_on_its_completion() {
    guest_only!();
    let d = Device::open_compute(0).unwrap();
    let (sob, mon) = first(&d);
    let (mut src, s) = host(&d, 3 * 4096);
    src.buf
        .as_mut_slice()
        .iter_mut()
        .enumerate()
        .for_each(|(i, b)| *b = (i * 11 + 5) as u8);
    let (out, o) = host(&d, 3 * 4096);
    let (fill, f) = host(&d, 4096);
    for q in [
        PDMA0,
        GAUDI2_QUEUE_ID_DCORE0_EDMA_0_0,
        GAUDI2_QUEUE_ID_DCORE3_EDMA_0_0 + 4,
    ] {
        let core = DmaCore::of(q).unwrap();
        let fence = Fence::of(q).unwrap();
        // The runtime's pattern: commit, then a monitor on the completion
        // SOB releases the stream's fence; after it the bytes are there.
        let cb = Cb::new()
            .push(&sob.set(0))
            .push(&mon.fire_into(fence, sob, 1))
            .push(&core.linear((s, o, 3 * 4096), false, Some((sob.addr(), 1))))
            .push(&fence.wait(1))
            .push(&core.linear(
                (0x5A5A_5A5A_5A5A_5A5A, f, 4096),
                true,
                Some((sob.addr(), 2)),
            ));
        completed(run(&d, &[(q, &cb)]));
        assert_eq!(out.as_slice(), src.as_slice(), "queue {q}");
        // The memset's completion, then its bytes: a monitor for 2.
        let (seen, v) = host(&d, 4096);
        let cb = Cb::new()
            .push(&mon.fire_into(fence, sob, 2))
            .push(&fence.wait(1))
            .msg_long(v, 0x600D);
        completed(run(&d, &[(q, &cb)]));
        assert_eq!(word(&seen.buf, 0), 0x600D);
        assert!(fill.as_slice().iter().all(|&b| b == 0x5A), "queue {q}");
    }
    // An MME queue has no DMA core, but its CB may commit one's transfer.
    let mme = GAUDI2_QUEUE_ID_DCORE0_MME_0_0;
    assert!(DmaCore::of(mme).is_none());
    let core = DmaCore::of(GAUDI2_QUEUE_ID_DCORE0_EDMA_0_0 + 4).unwrap();
    let fence = Fence::of(mme).unwrap();
    let (again, a) = host(&d, 3 * 4096);
    let cb = Cb::new()
        .push(&sob.set(0))
        .push(&mon.fire_into(fence, sob, 1))
        .push(&core.linear((s, a, 3 * 4096), false, Some((sob.addr(), 1))))
        .push(&fence.wait(1));
    completed(run(&d, &[(mme, &cb)]));
    assert_eq!(again.as_slice(), src.as_slice());
}

#[test]
fn a_dma_cores_completion_asid_and_tensor_commits_stay_refused() {
    guest_only!();
    let d = Device::open_compute(0).unwrap();
    let core = DmaCore::of(PDMA0).unwrap();
    // The core's ASID is the driver's: a RAZWI.
    let cb = host_cb(
        &d,
        &Cb::new().push(&core.write(core_reg::AXUSER_HB_ASID, 0)),
    );
    expect_errno(d.run_cb(PDMA0, cb.va, cb.len, 10 * SEC), EIO);
    assert!(d.razwi_event().unwrap().addr >= hlrs::sync::CFG_BASE);
    let (mut src, s) = host(&d, 4096);
    src.buf.as_mut_slice().fill(0xC3);
    let (out, o) = host(&d, 4096);
    // A completion aimed at the driver's SOB 0 never lands (the bytes
    // before it may: the simulated device fails the CS at the write, the
    // PCI device's core reports its error and the CS completes).
    let cb = Cb::new().push(&core.linear((s, o, 64), false, Some((Sob::new(0).addr(), 1))));
    let _ = run(&d, &[(PDMA0, &cb)]);
    // A tensor commit (no LIN) moves nothing.
    use core_reg::{
        COMMIT, COMMIT_WR_COMP_EN, DST_BASE_HI, DST_BASE_LO, DST_TSIZE_0, SRC_BASE_HI, SRC_BASE_LO,
    };
    let cb = Cb::new()
        .push(&core.write(SRC_BASE_LO, (s + 128) as u32))
        .push(&core.write(SRC_BASE_HI, ((s + 128) >> 32) as u32))
        .push(&core.write(DST_BASE_LO, (o + 128) as u32))
        .push(&core.write(DST_BASE_HI, ((o + 128) >> 32) as u32))
        .push(&core.write(DST_TSIZE_0, 64))
        .push(&core.write(COMMIT, COMMIT_WR_COMP_EN));
    let _ = run(&d, &[(PDMA0, &cb)]);
    // The device goes on; the driver's SOB 0 still completes its CSs.
    for _ in 0..4 {
        completed(run(
            &d,
            &[(PDMA0, &Cb::new().nop()), (PDMA1, &Cb::new().nop())],
        ));
    }
    assert!(out.as_slice()[128..192].iter().all(|&b| b == 0));
}

#[test]
fn a_cb_reaches_host_memory_only_through_the_mmu() {
    guest_only!();
    let d = Device::open_compute(0).unwrap();
    let (out, o) = host(&d, 4096);
    // The page's bus address, as the device sees it behind the MMU.
    let bus = hlrs_guest_tests::oracle_walk_bus(0, o).unwrap().0 & !0xFFF;
    completed(run(&d, &[(PDMA0, &Cb::new().msg_long(o, 0x600D))]));
    assert_eq!(word(&out.buf, 0), 0x600D);
    // By its bus address a user CB's message, a copy into it and a copy
    // out of it fault (the PMMU translates every user access): nothing
    // lands, and the device goes on.
    for cb in [
        Cb::new().msg_long(bus + 4, 0xBAD),
        Cb::new().lin_dma(o, bus + 8, 4),
        Cb::new().lin_dma(bus, o + 12, 4),
    ] {
        let cb = host_cb(&d, &cb);
        expect_errno(d.run_cb(PDMA0, cb.va, cb.len, 10 * SEC), EIO);
    }
    assert_eq!(words(&out.buf, 4, 3), [0, 0, 0]);
    completed(run(&d, &[(PDMA0, &Cb::new().nop())]));
}

/// Words of `b` from `off`.
fn words(b: &HostBuffer, off: usize, n: usize) -> Vec<u32> {
    (0..n).map(|i| word(b, off + 4 * i)).collect()
}

/// A host buffer holding `bytes`, mapped: (buffer, device VA).
fn host_with<'d>(d: &'d Device, bytes: &[u8]) -> (Mem<'d>, u64) {
    let (mut m, va) = host(d, bytes.len().max(4096));
    m.buf.as_mut_slice()[..bytes.len()].copy_from_slice(bytes);
    (m, va)
}

#[test]
fn cp_dma_hands_a_cb_to_the_lower_cp_and_nests_in_the_upper() {
    guest_only!();
    let d = Device::open_compute(0).unwrap();
    let (sob, mon) = first(&d);
    let q = GAUDI2_QUEUE_ID_DCORE0_EDMA_0_0;
    let (out, o) = host(&d, 4096);
    // The lower CP's CB: two words, then the SOB the upper CP waits on.
    let lower = Cb::new()
        .msg_long(o, 0x10)
        .msg_long(o + 4, 0x11)
        .push(&sob.add(1));
    let (_l, lva) = host_with(&d, lower.bytes());
    // A CB the upper CP calls (CP_DMA with upper_cp), from SRAM + 8.
    let nested = Cb::new().msg_long(o + 8, 0x20);
    let (_n, nva) = host_with(&d, nested.bytes());
    completed(run(
        &d,
        &[(PDMA0, &Cb::new().lin_dma(nva, SRAM + 0x1008, nested.len()))],
    ));
    let fence = Fence::of(q).unwrap();
    let upper = Cb::new()
        .push(&hlrs::sync::cp_dma(lva, lower.len(), false))
        .push(&mon.fire_into(fence, sob, 1))
        .push(&fence.wait(1))
        .push(&hlrs::sync::cp_dma(SRAM + 0x1008, nested.len(), true))
        .msg_long(o + 12, 0x30);
    completed(run(&d, &[(q, &upper)]));
    assert_eq!(words(&out, 0, 4), [0x10, 0x11, 0x20, 0x30]);
}

/// A CB handed to the lower CP waits on the lower CP's own fence counter
/// (libhlthunk's `cmdq_fence`), which a monitor pays into when another
/// queue signals: the CS completes once it did, and the handed CB ran.
#[test]
fn a_cb_handed_to_the_lower_cp_waits_on_its_fence() {
    guest_only!();
    let d = Device::open_compute(0).unwrap();
    let (sob, mon) = first(&d);
    let q = GAUDI2_QUEUE_ID_DCORE0_EDMA_0_0;
    let (out, o) = host(&d, 4096);
    let lower_fence = Fence::lower(q).unwrap();
    let lower = Cb::new().push(&lower_fence.wait(1)).msg_long(o, 0x44);
    let (_l, lva) = host_with(&d, lower.bytes());
    let upper = Cb::new()
        .push(&mon.fire_into(lower_fence, sob, 1))
        .push(&hlrs::sync::cp_dma(lva, lower.len(), false));
    let signal = Cb::new().push(&sob.add(1));
    completed(run(&d, &[(q, &upper), (PDMA0, &signal)]));
    assert_eq!(word(&out, 0), 0x44);
}

/// A CB handed to the lower CP waits at its fence for what the upper CP
/// does after the hand (a SOB whose monitor pays that fence): the upper CP
/// goes on, as on silicon, and the job completes once the handed CB ran.
/// A stream that ran the handed CB itself before going on would wait for
/// ever.
#[test]
fn the_upper_cp_goes_on_while_the_lower_cp_waits_for_it() {
    guest_only!();
    let d = Device::open_compute(0).unwrap();
    let (sob, mon) = first(&d);
    let q = GAUDI2_QUEUE_ID_DCORE1_EDMA_0_0 + 2;
    let (out, o) = host(&d, 4096);
    let lower_fence = Fence::lower(q).unwrap();
    let lower = Cb::new().push(&lower_fence.wait(1)).msg_long(o, 0x55);
    let (_l, lva) = host_with(&d, lower.bytes());
    let upper = Cb::new()
        .push(&mon.fire_into(lower_fence, sob, 1))
        .push(&hlrs::sync::cp_dma(lva, lower.len(), false))
        .msg_long(o + 4, 0x66)
        .push(&sob.add(1));
    completed(run(&d, &[(q, &upper)]));
    assert_eq!(words(&out, 0, 2), [0x55, 0x66]);
}

/// A bad packet in a CB handed to the lower CP fails the CS whose stream
/// handed it, and the stream and the lower CP go on with the next CS.
#[test]
fn a_bad_packet_of_a_handed_cb_fails_the_cs_that_handed_it() {
    guest_only!();
    let d = Device::open_compute(0).unwrap();
    let q = GAUDI2_QUEUE_ID_DCORE0_EDMA_0_0 + 3;
    let (out, o) = host(&d, 4096);
    let bad = Cb::new().push(&hlrs::cs::packet::raw(0x11, 0));
    let (_b, bva) = host_with(&d, bad.bytes());
    let upper = Cb::new().push(&hlrs::sync::cp_dma(bva, bad.len(), false));
    expect_errno(run(&d, &[(q, &upper)]), EIO);
    let good = Cb::new().msg_long(o, 0x77);
    let (_g, gva) = host_with(&d, good.bytes());
    let upper = Cb::new().push(&hlrs::sync::cp_dma(gva, good.len(), false));
    completed(run(&d, &[(q, &upper)]));
    assert_eq!(word(&out, 0), 0x77);
}

/// A job that fails after handing a CB to the lower CP ends with its own
/// error at once, the handed CB (which waited for what the failing job
/// would have done next) stopped rather than left to the TDR.
#[test]
fn a_job_that_fails_after_a_hand_ends_with_its_own_error() {
    guest_only!();
    let d = Device::open_compute(0).unwrap();
    let (sob, mon) = first(&d);
    let q = GAUDI2_QUEUE_ID_DCORE2_EDMA_0_0 + 1;
    let (out, o) = host(&d, 4096);
    let lower_fence = Fence::lower(q).unwrap();
    let lower = Cb::new().push(&lower_fence.wait(1)).msg_long(o, 0x88);
    let (_l, lva) = host_with(&d, lower.bytes());
    let upper = Cb::new()
        .push(&mon.fire_into(lower_fence, sob, 1))
        .push(&hlrs::sync::cp_dma(lva, lower.len(), false))
        .push(&hlrs::cs::packet::raw(0x11, 0))
        .push(&sob.add(1));
    let cb = host_cb(&d, &upper);
    expect_errno(d.run_cb(q, cb.va, cb.len, 30 * SEC), EIO);
    assert_eq!(word(&out, 0), 0, "the handed CB ran past its fence");
    // The queue and its lower CP go on.
    let good = Cb::new().msg_long(o + 4, 0x99);
    let (_g, gva) = host_with(&d, good.bytes());
    let upper = Cb::new().push(&hlrs::sync::cp_dma(gva, good.len(), false));
    completed(run(&d, &[(q, &upper)]));
    assert_eq!(word(&out, 4), 0x99);
}

#[test]
fn a_cb_list_chain_runs_every_entry() {
    guest_only!();
    let d = Device::open_compute(0).unwrap();
    const N: usize = 10;
    let (out, o) = host(&d, 4096);
    let (_index, iva) = host(&d, 4096);
    // Entry i's CB: word i := i + 1, index := i + 1, then the next CB_LIST
    // (the last one ends the chain).
    let (mut table, tva) = host(&d, 4096);
    let mut cbs = Vec::new();
    for i in 0..N {
        let mut cb = Cb::new()
            .msg_long(o + 4 * i as u64, i as u32 + 1)
            .msg_long(iva, i as u32 + 1);
        if i + 1 < N {
            cb = cb.push(&hlrs::sync::cb_list(iva, tva));
        }
        cbs.push(host_with(&d, cb.bytes()));
        let entry = hlrs::sync::cp_dma(cbs[i].1, cb.len(), true);
        table.buf.as_mut_slice()[16 * i..16 * i + 16].copy_from_slice(&entry);
    }
    let start = Cb::new()
        .msg_long(iva, 0)
        .push(&hlrs::sync::cb_list(iva, tva));
    completed(run(&d, &[(PDMA0, &start)]));
    assert_eq!(words(&out, 0, N), (1..=N as u32).collect::<Vec<_>>());
}

#[test]
fn predicated_packets_run_or_are_skipped_as_the_loaded_predicates_say() {
    guest_only!();
    use hlrs::sync::{load_and_exe, msg_long_pred, LoadAndExe};
    let d = Device::open_compute(0).unwrap();
    let (out, o) = host(&d, 4096);
    let (_on, on) = host_with(&d, &(1u32 << 10).to_le_bytes());
    let (_off, off) = host_with(&d, &(1u32 << 3).to_le_bytes());
    let cb = Cb::new()
        .push(&load_and_exe(LoadAndExe::Predicates { bitmap: true }, on))
        .push(&msg_long_pred(o, 0xA, 10))
        .push(&load_and_exe(LoadAndExe::Predicates { bitmap: true }, off))
        .push(&msg_long_pred(o + 4, 0xB, 10))
        // Predicate 0 always holds.
        .push(&msg_long_pred(o + 8, 0xC, 0));
    completed(run(&d, &[(PDMA0, &cb)]));
    assert_eq!(words(&out, 0, 3), [0xA, 0, 0xC]);
}

/// `WREG_BULK` writes consecutive registers of its QMAN's block (here
/// fence counter 3 of CPs 0 and 1, through their `RDATA`, and the next
/// `FENCE` passes), `MSG_PROT` writes as `MSG_LONG` does, and `STOP` ends
/// the CB: nothing after it runs.
/// The predicates one context loads are gone for the next: a packet
/// predicated on P5 that the last user's all-ones predicates would run is
/// skipped (upstream does not clear `CP_PRED`).
#[test]
fn a_new_context_finds_the_predicates_cleared() {
    guest_only!();
    use hlrs::sync::{load_and_exe, msg_long_pred, LoadAndExe};
    {
        let d = Device::open_compute(0).unwrap();
        let (out, o) = host(&d, 4096);
        let (_all, all) = host_with(&d, &u32::MAX.to_le_bytes());
        let cb = Cb::new()
            .push(&load_and_exe(LoadAndExe::Predicates { bitmap: true }, all))
            .push(&msg_long_pred(o, 0x5, 5));
        completed(run(&d, &[(PDMA0, &cb)]));
        assert_eq!(word(&out, 0), 0x5);
    }
    let d = Device::open_compute(0).unwrap();
    let (out, o) = host(&d, 4096);
    let cb = Cb::new()
        .push(&msg_long_pred(o, 0x5, 5))
        .push(&msg_long_pred(o + 4, 0x6, 0));
    completed(run(&d, &[(PDMA0, &cb)]));
    assert_eq!(words(&out, 0, 2), [0, 0x6]);
}

#[test]
fn wreg_bulk_msg_prot_wait_and_stop() {
    guest_only!();
    let d = Device::open_compute(0).unwrap();
    let (out, o) = host(&d, 4096);
    let q = GAUDI2_QUEUE_ID_DCORE0_EDMA_0_0;
    let fence = Fence::of(q).unwrap().counter(3);
    let (qman, _) = hlrs::sync::qman_of(q).unwrap();
    // RDATA of counter 3, CP 0, as an offset in the QMAN block.
    let rdata = (fence.addr() - hlrs::sync::reg_addr(qman)) as u32;
    let mut bulk = Vec::new();
    bulk.extend_from_slice(&2u32.to_le_bytes());
    bulk.extend_from_slice(
        &(PACKET_WREG_BULK << 24 | rdata << 8 | 1 << 31 | 1 << 29).to_le_bytes(),
    );
    for v in [2u64, 5] {
        bulk.extend_from_slice(&v.to_le_bytes());
    }
    let mut prot = hlrs::cs::packet::msg_long(o + 4, 0x9707);
    prot[4..8].copy_from_slice(&(PACKET_MSG_PROT << 24 | 1 << 31 | 1 << 29).to_le_bytes());
    let cb = Cb::new()
        .push(&bulk)
        .push(&fence.wait(2))
        .msg_long(o, 1)
        .push(&prot)
        // WAIT: no cycles to wait, on both hosts.
        .push(&hlrs::cs::packet::raw(PACKET_WAIT, 100))
        .push(&hlrs::cs::packet::raw(PACKET_STOP, 0))
        .msg_long(o + 8, 3);
    completed(run(&d, &[(q, &cb)]));
    assert_eq!(words(&out, 0, 3), [1, 0x9707, 0]);
    // CP 1's counter 3 got the second value: a FENCE on stream 1 passes.
    let cb = Cb::new()
        .push(&Fence::of(q + 1).unwrap().counter(3).wait(5))
        .msg_long(o + 12, 4);
    completed(run(&d, &[(q + 1, &cb)]));
    assert_eq!(word(&out, 12), 4);
}

#[test]
fn loaded_scalars_execute_as_a_packet() {
    guest_only!();
    use hlrs::sync::{load_and_exe, LoadAndExe};
    let d = Device::open_compute(0).unwrap();
    let (out, o) = host(&d, 4096);
    let scalars = hlrs::cs::packet::msg_long(o + 4, 0x5CA1);
    let (_s, sva) = host_with(&d, &scalars);
    let cb = Cb::new().push(&load_and_exe(LoadAndExe::Scalars { exe: Some(0) }, sva));
    completed(run(&d, &[(GAUDI2_QUEUE_ID_DCORE0_EDMA_0_0, &cb)]));
    assert_eq!(word(&out, 4), 0x5CA1);
}

/// A CB mapped into the device MMU to hold CQ counters: its handle and
/// device VA (destroyed with the context).
fn counter_cb(d: &Device) -> (u64, u64) {
    let h = d.cb_create(4096, HL_CB_FLAGS_MAP).unwrap();
    (h, d.cb_device_va(h).unwrap())
}

#[test]
fn an_interrupt_wait_completes_when_a_monitor_bumps_its_cq_counter() {
    guest_only!();
    use hlrs::sync::{Cq, FIRST_USER_INTERRUPT};
    let d = Device::open_compute(0).unwrap();
    let hw = d.hw_ip_info().unwrap();
    assert_eq!(
        (
            hw.first_available_interrupt_id,
            hw.number_of_user_interrupts
        ),
        (48, 64)
    );
    let (sob, mon) = first(&d);
    let cq = Cq(d.sync_manager_info(0).unwrap().first_available_cq);
    let (h, va) = counter_cb(&d);
    let irq = FIRST_USER_INTERRUPT + 5;
    // Not there yet: BUSY at once and after a short wait.
    let w = d.wait_interrupt_cb(irq, (h, 0), 100, 0).unwrap();
    assert_eq!(w.status, HL_WAIT_CS_STATUS_BUSY);
    let w = d.wait_interrupt_cb(irq, (h, 0), 100, 50_000).unwrap();
    assert_eq!((w.status, w.timestamp), (HL_WAIT_CS_STATUS_BUSY, None));
    // A waiter sleeps while a CS configures the CQ, arms a monitor adding
    // 101 to the counter and raising the interrupt, and signals the SOB.
    std::thread::scope(|s| {
        let waiter = s.spawn(|| d.wait_interrupt_cb(irq, (h, 0), 100, 10 * SEC));
        std::thread::sleep(std::time::Duration::from_millis(200));
        let cb = Cb::new()
            .push(&cq.counter(va, irq))
            .push(&mon.fire_into_cq(cq, sob, 1, 101))
            .push(&sob.add(1));
        completed(run(&d, &[(PDMA0, &cb)]));
        let w = waiter.join().unwrap().unwrap();
        assert_eq!(w.status, HL_WAIT_CS_STATUS_COMPLETED);
        assert!(w.timestamp.is_some_and(|t| t > 0));
    });
    // The counter is 101 now: a later wait completes at once, on the
    // common CQ id too; an id that names no interrupt is EINVAL.
    let w = d
        .wait_interrupt_cb(hlrs::sync::ANY_CQ_INTERRUPT, (h, 0), 101, 0)
        .unwrap();
    assert_eq!(w.status, HL_WAIT_CS_STATUS_COMPLETED);
    expect_errno(d.wait_interrupt_cb(10, (h, 0), 1, 0), 22);
    expect_errno(d.wait_interrupt_cb(irq, (h, 512), 1, 0), 22);
}

#[test]
fn a_timestamp_registration_is_written_when_the_counter_gets_there() {
    guest_only!();
    use hlrs::sync::{Cq, FIRST_USER_INTERRUPT};
    let d = Device::open_compute(0).unwrap();
    let (sob, mon) = first(&d);
    let cq = Cq(d.sync_manager_info(0).unwrap().first_available_cq + 1);
    let (h, va) = counter_cb(&d);
    let irq = FIRST_USER_INTERRUPT + 9;
    let ts = d.timestamp_buffer(16).unwrap();
    d.register_timestamp(irq, (h, 0), 7, (ts.handle(), 3))
        .unwrap();
    assert_eq!(ts.get(3), Some(0));
    let cb = Cb::new()
        .push(&cq.counter(va, irq))
        .push(&mon.fire_into_cq(cq, sob, 1, 7))
        .push(&sob.add(1));
    completed(run(&d, &[(PDMA0, &cb)]));
    // The interrupt's thread writes it; give it a moment.
    let mut t = 0;
    for _ in 0..100 {
        t = ts.get(3).unwrap();
        if t != 0 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert!(t > 0, "no timestamp written");
    // Already reached: written at the registration itself.
    d.register_timestamp(irq, (h, 0), 7, (ts.handle(), 4))
        .unwrap();
    assert!(ts.get(4).unwrap() > 0);
}

/// The CS counters: (queue full, validation) drops of the context.
fn drops(d: &Device) -> (u64, u64) {
    let c = d.cs_counters().unwrap().counters;
    (c[5], c[11])
}

/// Stream 0 of PDMA_0 held at a fence until [`release`].
fn hold(d: &Device) -> (hlrs::cs::Fence, Vec<HostCb<'_>>) {
    let fence = Fence::of(PDMA0).unwrap();
    submit(d, &[(PDMA0, &Cb::new().push(&fence.wait(1)))])
}

/// Release what [`hold`] holds, from queue `from`.
fn release(d: &Device, from: u32) {
    let (sob, mon) = first(d);
    let fence = Fence::of(PDMA0).unwrap();
    let cb = Cb::new()
        .push(&mon.fire_into(fence, sob, 1))
        .push(&sob.add(1));
    completed(run(d, &[(from, &cb)]));
}

#[test]
fn a_wait_cs_holds_its_queue_until_the_signal_ran() {
    guest_only!();
    let d = Device::open_compute(0).unwrap();
    let (held, _h) = hold(&d);
    // The signal queues behind the held CS on PDMA_0_0.
    let sig = d.signal(PDMA0).unwrap();
    assert_eq!((sig.sob_addr_offset, sig.sob_count), (0, 1));
    let wait = d
        .wait_signal(PDMA1, sig.fence.seq)
        .unwrap()
        .expect("a wait CS");
    let (out, o) = host(&d, 4096);
    let after = Cb::new()
        .msg_long(SRAM + 0x500, 0x5161_AAAA)
        .lin_dma(SRAM + 0x500, o, 4);
    let (marker, _m) = submit(&d, &[(PDMA1, &after)]);
    std::thread::sleep(std::time::Duration::from_millis(200));
    for f in [held, sig.fence, wait, marker] {
        assert!(matches!(f.wait(&d, 0), Ok(CsDone::Busy)), "{f:?} ran early");
    }
    assert_eq!(word(&out, 0), 0);
    release(&d, PDMA0_1);
    for f in [held, sig.fence, wait, marker] {
        completed(f.wait(&d, 10 * SEC));
    }
    assert_eq!(word(&out, 0), 0x5161_AAAA);
}

#[test]
fn signals_count_up_and_a_finished_signal_needs_no_wait() {
    guest_only!();
    let d = Device::open_compute(0).unwrap();
    let a = d.signal(PDMA0).unwrap();
    let b = d.signal(PDMA0).unwrap();
    let c = d.signal(PDMA1).unwrap();
    assert_eq!((a.sob_count, b.sob_count, c.sob_count), (1, 2, 1));
    for s in [a, b, c] {
        completed(s.fence.wait(&d, 10 * SEC));
    }
    // Finished: no CS, sequence ULLONG_MAX.
    assert_eq!(d.wait_signal(PDMA1, b.fence.seq).unwrap(), None);
    // A wait for the newest signal while it runs behind a held CS, on
    // another stream of the same QMAN.
    let (held, _h) = hold(&d);
    let s = d.signal(PDMA0).unwrap();
    assert_eq!(s.sob_count, 3);
    let w = d
        .wait_signal(PDMA0_1, s.fence.seq)
        .unwrap()
        .expect("a wait CS");
    // Released from PDMA_1: PDMA_0_1 waits behind the wait CS.
    release(&d, PDMA1);
    for f in [held, s.fence, w] {
        completed(f.wait(&d, 10 * SEC));
    }
}

#[test]
fn bad_signal_and_wait_css_get_upstreams_errnos() {
    guest_only!();
    let d = Device::open_compute(0).unwrap();
    let (_, before) = drops(&d);
    let plain = run(&d, &[(PDMA0, &Cb::new().nop())]);
    completed(plain);
    let (f, _c) = submit(&d, &[(PDMA0, &Cb::new().nop())]);
    completed(f.wait(&d, 10 * SEC));
    let sig = d.signal(PDMA0).unwrap();
    // Not a signal CS; a sequence not given yet; two signals.
    expect_errno(d.wait_signal(PDMA1, f.seq), libc_einval());
    expect_errno(d.wait_signal(PDMA1, sig.fence.seq + 100), libc_einval());
    let two = [sig.fence.seq, sig.fence.seq];
    expect_errno(d.wait_signals_raw(PDMA1, &two, (0, 0)), libc_einval());
    // Queues without a stream the device runs: a NIC's, PDMA_0_2, past
    // the last; and a collective wait.
    for q in [156, GAUDI2_QUEUE_ID_PDMA_0_0 + 2, 300] {
        expect_errno(d.signal(q), libc_einval());
    }
    // WAIT | COLLECTIVE_WAIT: two CS types, refused by the sanity checks
    // (no drop counted).
    let col = d.wait_signals_raw(PDMA1, &[sig.fence.seq], (HL_CS_FLAGS_COLLECTIVE_WAIT, 0));
    expect_errno(col, libc_einval());
    // Encapsulated signals name a reservation this driver never makes:
    // treated as finished.
    let encaps = d.wait_signals_raw(PDMA1, &[sig.fence.seq], (HL_CS_FLAGS_ENCAP_SIGNALS, 0));
    assert_eq!(encaps.unwrap(), None);
    let (_, after) = drops(&d);
    assert_eq!(
        after - before,
        5,
        "validation drops (PDMA_0_2 is a parsing drop)"
    );
    completed(sig.fence.wait(&d, 10 * SEC));
}

fn libc_einval() -> i32 {
    22
}

#[test]
fn a_new_context_counts_signals_from_one_on_a_zeroed_sob() {
    guest_only!();
    {
        let d = Device::open_compute(0).unwrap();
        for _ in 0..3 {
            let s = d.signal(PDMA0).unwrap();
            completed(s.fence.wait(&d, 10 * SEC));
        }
    }
    let d = Device::open_compute(0).unwrap();
    let (held, _h) = hold(&d);
    let s = d.signal(PDMA0).unwrap();
    assert_eq!(s.sob_count, 1);
    // Had the last context's 3 stayed in the SOB, this would run at once.
    let w = d
        .wait_signal(PDMA1, s.fence.seq)
        .unwrap()
        .expect("a wait CS");
    std::thread::sleep(std::time::Duration::from_millis(200));
    assert!(matches!(w.wait(&d, 0), Ok(CsDone::Busy)));
    release(&d, PDMA0_1);
    for f in [held, s.fence, w] {
        completed(f.wait(&d, 10 * SEC));
    }
}

#[test]
fn a_full_device_queue_is_eagain_and_counted() {
    guest_only!();
    let d = Device::open_compute(0).unwrap();
    if !device_window(&d) {
        return;
    }
    let (held, _h) = hold(&d);
    let (full_before, _) = drops(&d);
    let nop = host_cb(&d, &Cb::new().nop());
    let two = Cs::new()
        .chunk(PDMA0, nop.va, nop.len)
        .chunk(PDMA0, nop.va, nop.len);
    // 64 jobs in flight per device: the held one and 31 CSs of two.
    let mut queued = Vec::new();
    let err = loop {
        match two.submit(&d) {
            Ok(f) => queued.push(f),
            Err(e) => break e,
        }
        assert!(queued.len() <= 64, "the queue never filled");
    };
    assert_eq!(err.raw_os_error(), Some(11), "{err}");
    assert_eq!(queued.len(), 31);
    let (full_after, _) = drops(&d);
    assert_eq!(full_after - full_before, 1);
    // More jobs than the device ever holds: no retry helps.
    let big = (0..65).fold(Cs::new(), |cs, _| cs.chunk(PDMA0, nop.va, nop.len));
    expect_errno(big.submit(&d), libc_einval());
    release(&d, PDMA0_1);
    completed(held.wait(&d, 10 * SEC));
    for f in queued {
        completed(f.wait(&d, 10 * SEC));
    }
}

#[test]
fn threads_ping_pong_through_signals_and_waits() {
    guest_only!();
    let d = Device::open_compute(0).unwrap();
    let rounds = 6;
    std::thread::scope(|s| {
        for t in 0..16u32 {
            let d = &d;
            s.spawn(move || {
                let (from, to) = if t % 2 == 0 {
                    (PDMA0, PDMA1)
                } else {
                    (PDMA1, PDMA0_1)
                };
                for _ in 0..rounds {
                    let sig = retry(|| d.signal(from));
                    let w = retry(|| d.wait_signal(to, sig.fence.seq));
                    completed(sig.fence.wait(d, 30 * SEC));
                    if let Some(w) = w {
                        completed(w.wait(d, 30 * SEC));
                    }
                }
            });
        }
    });
}

/// 512 threads, each its own SOB and monitors, each submitting rounds of a
/// two-queue ping-pong (PDMA_0_0 adds 1 to the SOB; PDMA_1_0 arms the
/// monitor to add 1 to its fence and waits there): every CS completes.
/// PDMA_1_0's fence counter is shared, so a waiter may pass on another
/// thread's increment; each CS adds one and takes one, and the stream's
/// head always has its own monitor armed, so none is left waiting. On the
/// PCI device more than its 64 jobs are wanted in flight at once: some
/// submissions meet `EAGAIN` and are retried.
#[test]
fn five_hundred_twelve_threads_ping_pong_between_two_queues() {
    guest_only!();
    let d = Device::open_compute(0).unwrap();
    let (sob0, mon0) = first(&d);
    let fence = Fence::of(PDMA1).unwrap();
    let simulated = !hlrs_guest_tests::on_pci(0);
    let rounds = 2u32;
    let again = std::sync::atomic::AtomicU64::new(0);
    // Every thread builds its CBs first; then all submit at once, both
    // rounds back to back, and wait: 2,048 jobs wanted at the same time.
    let start = std::sync::Barrier::new(512);
    std::thread::scope(|s| {
        for t in 0..512u32 {
            let (d, again, start) = (&d, &again, &start);
            s.spawn(move || {
                // A monitor per round: a round's waiter may pass the shared
                // fence before its own monitor fired, and must not re-arm it.
                let sob = Sob::new(sob0.0 + t);
                let signal = Cb::new().push(&sob.add(1));
                let sig = host_cb(d, &signal);
                let waiters: Vec<HostCb<'_>> = (1..=rounds)
                    .map(|r| {
                        let mon = Monitor::new(mon0.0 + t * rounds + r - 1);
                        let cb = Cb::new()
                            .push(&mon.fire_into(fence, sob, r))
                            .push(&fence.wait(1));
                        host_cb(d, &cb)
                    })
                    .collect();
                start.wait();
                let mut fences = Vec::new();
                for w in &waiters {
                    let cs = Cs::new()
                        .chunk(PDMA1, w.va, w.len)
                        .chunk(PDMA0, sig.va, sig.len);
                    fences.push(loop {
                        match cs.submit(d) {
                            Err(e) if e.raw_os_error() == Some(11) => {
                                again.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                                std::thread::yield_now();
                            }
                            r => break r.unwrap(),
                        }
                    });
                }
                for f in fences {
                    completed(f.wait(d, 60 * SEC));
                }
            });
        }
    });
    let again = again.into_inner();
    eprintln!("EAGAIN met {again} times");
    if !simulated {
        assert!(
            again > 0,
            "the PCI device never had more than 64 jobs wanted"
        );
    }
}

/// `f` until it is not `EAGAIN` (more than 64 CSs in flight).
fn retry<T>(mut f: impl FnMut() -> io::Result<T>) -> T {
    loop {
        match f() {
            Err(e) if e.raw_os_error() == Some(11) => std::thread::yield_now(),
            r => return r.unwrap(),
        }
    }
}
