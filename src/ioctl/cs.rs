// SPDX-License-Identifier: GPL-2.0

//! `DRM_IOCTL_HL_CS` and `DRM_IOCTL_HL_WAIT_CS` (upstream `hl_cs_ioctl` and
//! `hl_wait_ioctl`, common/command_submission.c:2555-2654, 3158-3212,
//! 3720-3742): the copy of the chunk arrays from the caller and what each
//! writes back (DRM copies the union back whatever the result).
//!
//! CS: the union is zeroed and `out.seq` (`u64::MAX` when no CS was
//! submitted) and `out.status` (the result, a negative errno as a u32) set,
//! except after `EAGAIN`, which leaves it as it came.
//!
//! WAIT_CS: `EBUSY` while the device is not operational; user-interrupt
//! waits as [`interrupt_wait`] (`EPERM` on the simulated device, which has
//! no user interrupts), multi-CS
//! waits `EINVAL` for non-zero padding and else `EPERM` (Gaudi2 does not
//! support them). A wait on one sequence zeroes the union and sets `status`,
//! `flags` and `timestamp_nsec`: COMPLETED (0), with `FLAG_GONE` for a CS
//! out of the window and `FLAG_TIMESTAMP_VLD` with its time if the CS
//! asked for one; BUSY (0) when the timeout passed first; TIMEDOUT with
//! `ETIMEDOUT`; ABORTED with `EIO`; a future sequence `EINVAL` with the
//! union zeroed. A signal ends the wait with `EINTR` and leaves the union
//! as it came (upstream turns `ERESTARTSYS` into `EINTR`: no restart).

use crate::{
    cs::{
        submit::{self, ChunkSource, Chunks, CsIn, INLINE_CHUNKS},
        user_interrupt::{Counter, UserInterrupts},
        wait::{upstream_timeout_us, wait_cs, WaitCs},
    },
    file::ComputeFile,
    uapi::*,
    vm::command_buffer::cb_get,
};
use kernel::{
    alloc::KVVec,
    prelude::*,
    sync::Arc,
    uaccess::{UserPtr, UserSlice},
};

/// The chunk arrays of a CS in the caller's memory.
pub(crate) struct UserChunks;

impl ChunkSource for UserChunks {
    fn read(&self, addr: u64, n: u32) -> Result<Chunks> {
        let n = n as usize;
        let len = n
            .checked_mul(core::mem::size_of::<HlCsChunk>())
            .ok_or(EINVAL)?;
        let addr = usize::try_from(addr).map_err(|_| EFAULT)?;
        let mut reader = UserSlice::new(UserPtr::from_addr(addr), len).reader();
        if n <= INLINE_CHUNKS {
            let mut a = [HlCsChunk::default(); INLINE_CHUNKS];
            for c in a.iter_mut().take(n) {
                *c = reader.read::<HlCsChunk>()?;
            }
            return Ok(Chunks::inline(a, n));
        }
        let mut chunks = KVVec::with_capacity(n, GFP_KERNEL)?;
        for _ in 0..n {
            chunks
                .push_within_capacity(reader.read::<HlCsChunk>()?)
                .map_err(|_| ENOMEM)?;
        }
        Ok(Chunks::heap(chunks))
    }

    fn read_u64(&self, addr: u64) -> Result<u64> {
        let addr = usize::try_from(addr).map_err(|_| EFAULT)?;
        UserSlice::new(UserPtr::from_addr(addr), 8)
            .reader()
            .read::<u64>()
    }
}

/// Serve one CS ioctl of a compute file, reading its chunks from `src`.
/// O(chunks) plus a restore CS's run.
pub(crate) fn cs_ioctl(file: &ComputeFile, args: &mut HlCsArgs, src: &dyn ChunkSource) -> Result {
    let input = CsIn::from(&*args);
    let (seq, rc, sob) = submit::cs_ioctl(file.ctx.cs(), &input, src);
    if rc != Err(EAGAIN) {
        let status = match rc {
            Ok(()) => HL_CS_STATUS_SUCCESS,
            Err(e) => e.to_errno() as u32,
        };
        args.set_out(seq, status);
        args.set_out_sob(sob.addr_offset, sob.count);
    }
    rc
}

/// WAIT_CS on a user interrupt (`hl_interrupt_wait_ioctl`,
/// common/command_submission.c:3622-3718; see
/// [`crate::cs::user_interrupt`]): a wait on
/// a counter in a CB (`INTERRUPT_KERNEL_CQ`) or at a user address, or a
/// timestamp registration (`INTERRUPT_KERNEL_CQ | REGISTER_INTERRUPT`).
/// `EPERM` on a device without user interrupts, `EINVAL` for an id that
/// names none, an unknown CB or timestamp buffer, or a counter outside its
/// CB. Sleeps (interruptibly) up to `interrupt_timeout_us`.
fn interrupt_wait(file: &ComputeFile, args: &mut HlWaitCsArgs) -> Result {
    let ctx = &file.ctx;
    let ints = ctx.cs().dev.interrupts()?.clone();
    let id = (args.flags & HL_WAIT_CS_FLAGS_INTERRUPT_MASK) >> 20;
    let slot = UserInterrupts::slot(id)?;
    // The union: `addr` or `cq_counters_handle` at 0, `target` at 8.
    let (handle, target) = (args.seq, args.timeout_us);
    let counter = if args.flags & HL_WAIT_CS_FLAGS_INTERRUPT_KERNEL_CQ != 0 {
        let cb = cb_get(&ctx.vm().cbs, handle).map_err(|_| EINVAL)?;
        let index = usize::try_from(args.cq_counters_offset).map_err(|_| EINVAL)?;
        if index >= cb.size() as usize / 8 {
            return Err(EINVAL);
        }
        if args.flags & HL_WAIT_CS_FLAGS_REGISTER_INTERRUPT != 0 {
            let pgoff = args.timestamp_handle >> HL_MMAP_PAGE_SHIFT;
            let buf = (mmap_type(pgoff) == HL_MMAP_TYPE_TS_BUFF)
                .then(|| ctx.vm().ts_buffers.lock().get(mmap_value(pgoff) as u32))
                .flatten()
                .ok_or(EINVAL)?;
            let element = usize::try_from(args.timestamp_offset).map_err(|_| EINVAL)?;
            let owner = Arc::as_ptr(ctx.cs()) as usize;
            ints.register(owner, slot, (buf, element), (cb, index), target)?;
            args.set_out(HL_WAIT_CS_STATUS_COMPLETED, 0, 0);
            return Ok(());
        }
        Counter::Cb(cb, index)
    } else {
        Counter::User(handle)
    };
    let w = ints.wait(slot, &counter, target, args.interrupt_timeout_us)?;
    let flags = if w.ts_ns != 0 {
        HL_WAIT_CS_STATUS_FLAG_TIMESTAMP_VLD
    } else {
        0
    };
    args.set_out(w.status, flags, w.ts_ns);
    Ok(())
}

/// Serve one WAIT_CS ioctl of a compute file. Sleeps (interruptibly) up to
/// `timeout_us`, as upstream counts it (its low 32 bits, or for ever).
pub(crate) fn wait_cs_ioctl(file: &ComputeFile, args: &mut HlWaitCsArgs) -> Result {
    let cs = file.ctx.cs();
    if !cs.dev.operational() {
        return Err(EBUSY);
    }
    if args.flags & HL_WAIT_CS_FLAGS_INTERRUPT != 0 {
        return interrupt_wait(file, args);
    }
    if args.flags & HL_WAIT_CS_FLAGS_MULTI_CS != 0 {
        if args.multi_cs_pad() != [0; 7] {
            return Err(EINVAL);
        }
        return Err(EPERM);
    }
    let outcome = wait_cs(cs, args.seq, upstream_timeout_us(args.timeout_us));
    let (status, flags, ts, rc) = match outcome {
        Ok(WaitCs::Interrupted) => return Err(EINTR),
        Err(e) => (0, 0, 0, Err(e)),
        Ok(WaitCs::Completed { gone, timestamp_ns }) => {
            let mut flags = 0;
            if gone {
                flags |= HL_WAIT_CS_STATUS_FLAG_GONE;
            }
            if timestamp_ns != 0 {
                flags |= HL_WAIT_CS_STATUS_FLAG_TIMESTAMP_VLD;
            }
            (HL_WAIT_CS_STATUS_COMPLETED, flags, timestamp_ns, Ok(()))
        }
        Ok(WaitCs::Busy) => (HL_WAIT_CS_STATUS_BUSY, 0, 0, Ok(())),
        Ok(WaitCs::TimedOut) => (HL_WAIT_CS_STATUS_TIMEDOUT, 0, 0, Err(ETIMEDOUT)),
        Ok(WaitCs::Aborted) => (HL_WAIT_CS_STATUS_ABORTED, 0, 0, Err(EIO)),
    };
    args.set_out(status, flags, ts);
    rc
}

#[kunit_tests(hlrs_cs_ioctl)]
mod tests {
    use super::*;
    use crate::cs::sync_objects::SobOut;
    use crate::{
        asic::{AsicProperties, SRAM_BASE_ADDR},
        context::Context,
        cs::fence::CsStatus,
        device::HlDevice,
        ffi::kthread::set_cs_max_run_s,
        hw::{
            backend::{Backend, DeviceStatus},
            sim::packets::build::{lin_dma, msg_long, nop},
        },
        vm::{
            device_memory::alloc_device_memory,
            mapping::{map_device_va, unmap_device_va},
        },
    };
    use kernel::sync::Arc;

    const SRAM: u64 = SRAM_BASE_ADDR;
    const U: u32 = HL_CS_CHUNK_FLAGS_USER_ALLOC_CB;
    const PDMA: u32 = GAUDI2_QUEUE_ID_PDMA_0_0;
    const SEC: u64 = 1_000_000;

    #[test]
    fn nop_css_get_sequences_from_one_and_complete() -> Result {
        let (_d, f) = setup()?;
        let cb = put_cb(&f, SRAM + 8, &[&nop(false, false), &nop(true, true)])?;
        for want in 1..=3u64 {
            let mut a = args(&[chunk(cb, PDMA)], 0);
            cs_ioctl(&f, &mut a, &Src(&[chunk(cb, PDMA)], &[]))?;
            assert_eq!((a.out_seq(), a.out_status()), (want, 0));
            // The rest of the union is zeroed.
            assert_eq!((a.seq, a.num_chunks_execute, a.cs_flags), (0, 0, 0));
            assert_eq!(wait(&f, want, 10 * SEC), (Ok(()), (0, 0, 0)));
        }
        // A future sequence: EINVAL, union zeroed; a gone one: GONE.
        assert_eq!(wait(&f, 4, 0), (Err(EINVAL), (0, 0, 0)));
        assert_eq!(
            wait(&f, 0, 0),
            (Ok(()), (0, HL_WAIT_CS_STATUS_FLAG_GONE, 0))
        );
        Ok(())
    }

    #[test]
    fn lin_dma_moves_in_chunks_with_swaps_and_memset() -> Result {
        let (_d, f) = setup()?;
        let h = alloc_device_memory(f.ctx.vm(), 0x3000_0000, 0)?;
        let dram = map_device_va(f.ctx.vm(), u64::from(h), 0, 0)?;
        // 200 KiB + 3 bytes: four DMA chunks, odd offsets everywhere.
        let n = (200 << 10) + 3;
        let mut src = KVVec::from_elem(0u8, n, GFP_KERNEL)?;
        for (i, b) in src.iter_mut().enumerate() {
            *b = (i * 7 + i / 251) as u8;
        }
        let (s, mid, out) = (SRAM + 0x10_0001, dram + 0x1234_5677, SRAM + 0x40_0003);
        f.ctx.device().sim()?.sram_write(s, &src)?;
        let cb = put_cb(
            &f,
            SRAM + 0x30,
            &[
                &lin_dma(s, mid, n as u32, 0, false),
                &lin_dma(mid, out, n as u32, 0, false),
                // 64-bit swap of the first 16 bytes; memset of 11 bytes.
                &lin_dma(s, SRAM + 0x80_0000, 16, 3, false),
                &lin_dma(0x1122_3344_5566_7788, SRAM + 0x80_0101, 11, 0, true),
            ],
        )?;
        run(&f, &[chunk(cb, GAUDI2_QUEUE_ID_DCORE3_EDMA_0_0 + 7)])?;
        let mut got = KVVec::from_elem(0u8, n + 1, GFP_KERNEL)?;
        f.ctx.device().sim()?.sram_read(out, &mut got)?;
        assert!(got.get(..n) == Some(&src[..]));
        assert_eq!(got.get(n).copied(), Some(0));
        let mut w = [0u8; 16];
        f.ctx.device().sim()?.sram_read(SRAM + 0x80_0000, &mut w)?;
        let mut want = [0u8; 16];
        want.copy_from_slice(src.get(..16).ok_or(EINVAL)?);
        want[..8].reverse();
        want[8..].reverse();
        assert_eq!(w, want);
        let mut m = [0u8; 13];
        f.ctx.device().sim()?.sram_read(SRAM + 0x80_0100, &mut m)?;
        assert_eq!(
            m,
            [0, 0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11, 0x88, 0x77, 0x66, 0]
        );
        Ok(())
    }

    #[test]
    fn wait_reports_every_outcome() -> Result {
        let (d, f) = setup()?;
        let ok = put_cb(&f, SRAM, &[&nop(false, false), &nop(false, false)])?;
        // Completed with a timestamp, then gone from the window but kept.
        let mut a = args(&[chunk(ok, PDMA)], HL_CS_FLAGS_TIMESTAMP);
        cs_ioctl(&f, &mut a, &Src(&[chunk(ok, PDMA)], &[]))?;
        let (rc, (st, fl, ts)) = wait(&f, 1, 10 * SEC);
        assert_eq!(
            (rc, st, fl),
            (Ok(()), 0, HL_WAIT_CS_STATUS_FLAG_TIMESTAMP_VLD)
        );
        assert!(ts > 0);
        for _ in 0..64 {
            run(&f, &[chunk(ok, PDMA)])?;
        }
        assert_eq!(
            wait(&f, 1, 0),
            (Ok(()), (0, HL_WAIT_CS_STATUS_FLAG_TIMESTAMP_VLD, ts))
        );
        // Popped: a second wait finds it gone.
        assert_eq!(
            wait(&f, 1, 0),
            (Ok(()), (0, HL_WAIT_CS_STATUS_FLAG_GONE, 0))
        );
        // Timed out: a custom timeout of 0 s expires at the first check.
        // A CB of seconds, not two NOPs: on a busy machine the engine could
        // finish those before the driver's watchdog first looks.
        let slow = slow_cb(&f)?;
        let mut a = args(&[chunk(slow, PDMA)], HL_CS_FLAGS_CUSTOM_TIMEOUT);
        cs_ioctl(&f, &mut a, &Src(&[chunk(slow, PDMA)], &[]))?;
        let seq = a.out_seq();
        assert_eq!(
            wait(&f, seq, 10 * SEC),
            (Err(ETIMEDOUT), (HL_WAIT_CS_STATUS_TIMEDOUT, 0, 0))
        );
        assert_eq!(d.cs.with_captured(|c| c.cs_timeout.seq), seq);
        // Aborted: a MSG_LONG to an unmapped DRAM VA; the fault is captured.
        let va = d.asic.dram_va.start + 0x7654_3210;
        let bad = put_cb(&f, SRAM + 0x100, &[&nop(false, false), &msg_long(va, 1)])?;
        let seq = submit(&f, &[chunk(bad, GAUDI2_QUEUE_ID_PDMA_1_0)])?;
        assert_eq!(
            wait(&f, seq, 10 * SEC),
            (Err(EIO), (HL_WAIT_CS_STATUS_ABORTED, 0, 0))
        );
        let pf = d.cs.with_captured(|c| c.page_fault).ok_or(EINVAL)?;
        assert_eq!(
            (pf.addr, pf.engine_id),
            (va & !((1 << 26) - 1), GAUDI2_ENGINE_ID_PDMA_1)
        );
        // The device stays usable.
        run(&f, &[chunk(ok, PDMA)])?;
        // A wait on a CS that does not end in time is BUSY.
        let seq = submit(&f, &[chunk(slow, PDMA)])?;
        assert_eq!(wait(&f, seq, 0), (Ok(()), (HL_WAIT_CS_STATUS_BUSY, 0, 0)));
        assert_eq!(
            wait(&f, seq, 1000),
            (Ok(()), (HL_WAIT_CS_STATUS_BUSY, 0, 0))
        );
        f.ctx.cs().stop_and_drain();
        assert_eq!(
            wait(&f, seq, 0),
            (Err(EIO), (HL_WAIT_CS_STATUS_ABORTED, 0, 0))
        );
        Ok(())
    }

    #[test]
    fn at_most_64_css_are_in_flight() -> Result {
        let (d, f) = setup()?;
        let cs = f.ctx.cs();
        let mut held = KVec::new();
        {
            let mut t = cs.lock();
            for _ in 0..64 {
                held.push(cs.allocate(&mut t, false, (None, None))?, GFP_KERNEL)?;
            }
            assert_eq!(cs.allocate(&mut t, false, (None, None)).err(), Some(EAGAIN));
        }
        // Through the ioctl: EAGAIN leaves the arguments as they came.
        let ok = put_cb(&f, SRAM, &[&nop(false, false)])?;
        let mut a = args(&[chunk(ok, PDMA)], 0);
        let before = a;
        assert_eq!(
            cs_ioctl(&f, &mut a, &Src(&[chunk(ok, PDMA)], &[])),
            Err(EAGAIN)
        );
        assert_eq!(a, before);
        assert_eq!(cs.counters.values()[4], 2);
        assert_eq!(d.cs.counters.values()[4], 2);
        // The oldest finishing makes room for one.
        held.first().ok_or(EINVAL)?.reject();
        assert_eq!(submit(&f, &[chunk(ok, PDMA)])?, 65);
        for h in held.iter() {
            h.reject();
        }
        Ok(())
    }

    #[test]
    fn refused_css_get_upstreams_errnos_and_counters() -> Result {
        let (d, f) = setup()?;
        let ok = put_cb(&f, SRAM, &[&nop(false, false)])?;
        let c = chunk(ok, PDMA);
        let cases: [(HlCsChunk, Error, usize); 6] = [
            (
                HlCsChunk {
                    queue_index: GAUDI2_QUEUE_ID_CPU_PQ,
                    ..c
                },
                EINVAL,
                5,
            ),
            (
                HlCsChunk {
                    queue_index: 999,
                    ..c
                },
                EINVAL,
                5,
            ),
            (
                HlCsChunk {
                    cs_chunk_flags: 0,
                    ..c
                },
                EINVAL,
                5,
            ),
            (
                HlCsChunk {
                    queue_index: 2,
                    ..c
                },
                EINVAL,
                1,
            ),
            (
                HlCsChunk {
                    cb_handle: 0x1000,
                    ..c
                },
                EFAULT,
                1,
            ),
            (HlCsChunk { cb_size: 0, ..c }, EFAULT, 1),
        ];
        let mut seq = 0;
        for (bad, errno, counter) in cases {
            let before = f.ctx.cs().counters.values();
            let mut a = args(&[c, bad], 0);
            assert_eq!(cs_ioctl(&f, &mut a, &Src(&[c, bad], &[])), Err(errno));
            assert_eq!(a.out_seq(), u64::MAX);
            assert_eq!(a.out_status(), errno.to_errno() as u32);
            let after = f.ctx.cs().counters.values();
            assert_eq!(after[counter], before[counter] + 1);
            // The refused CS used a sequence number and counts as completed.
            seq += 1;
            assert_eq!(wait(&f, seq, 0), (Ok(()), (0, 0, 0)));
        }
        assert_eq!(d.cs.counters.values(), [0, 3, 0, 0, 0, 3]);
        // Before a sequence number: the count, the copy, the sanity checks.
        let many = KVVec::from_elem(c, 513, GFP_KERNEL)?;
        assert_eq!(submit(&f, &many).err(), Some(EINVAL));
        let bad_copy = CsIn {
            execute: (0xBAD, 1),
            ..CsIn::default()
        };
        let (s, r, _) = submit::cs_ioctl(f.ctx.cs(), &bad_copy, &Src(&[c], &[]));
        assert_eq!((s, r), (u64::MAX, Err(EFAULT)));
        assert_eq!(f.ctx.cs().counters.values()[5], 5);
        let mut input = CsIn {
            execute: (2, 1),
            ..CsIn::default()
        };
        for (flags, pad, want) in [
            (0, [0, 0, 0, 1], Err(EINVAL)),
            (HL_CS_FLAGS_STAGED_SUBMISSION, [0; 4], Err(EPERM)),
            (HL_CS_FLAGS_SIGNAL | HL_CS_FLAGS_WAIT, [0; 4], Err(EINVAL)),
            (HL_CS_FLAGS_ENGINES_COMMAND, [0; 4], Err(EOPNOTSUPP)),
            (HL_CS_FLAGS_FLUSH_PCI_HBW_WRITES, [0; 4], Ok(())),
        ] {
            input.flags = flags;
            input.pad = pad;
            let (s, r, _) = submit::cs_ioctl(f.ctx.cs(), &input, &Src(&[c], &[]));
            assert_eq!((s, r), (u64::MAX, want));
        }
        input = CsIn::default();
        assert_eq!(
            submit::cs_ioctl(f.ctx.cs(), &input, &Src(&[], &[])).1,
            Err(EINVAL)
        );
        d.set_status(DeviceStatus::InReset);
        assert_eq!(submit(&f, &[c]).err(), Some(EBUSY));
        assert_eq!(wait(&f, 1, 0).0, Err(EBUSY));
        d.set_status(DeviceStatus::Operational);
        Ok(())
    }

    #[test]
    fn the_restore_phase_runs_first_as_its_own_cs() -> Result {
        let (d, f) = setup()?;
        let restore = put_cb(&f, SRAM, &[&msg_long(SRAM + 0x1000, 0xA5A5_0001)])?;
        let exec = put_cb(
            &f,
            SRAM + 0x100,
            &[&lin_dma(SRAM + 0x1000, SRAM + 0x2000, 4, 0, false)],
        )?;
        let input = CsIn {
            restore: (1, 1),
            execute: (2, 1),
            flags: HL_CS_FLAGS_FORCE_RESTORE,
            ..CsIn::default()
        };
        let (r, e) = (
            [chunk(restore, PDMA)],
            [chunk(exec, GAUDI2_QUEUE_ID_PDMA_1_0)],
        );
        assert_eq!(
            submit::cs_ioctl(f.ctx.cs(), &input, &Src(&e, &r)),
            (2, Ok(()), SobOut::default())
        );
        assert_eq!(wait(&f, 2, 10 * SEC).0, Ok(()));
        let mut v = [0u8; 4];
        d.sim()?.sram_read(SRAM + 0x2000, &mut v)?;
        assert_eq!(u32::from_le_bytes(v), 0xA5A5_0001);
        // A restore CS that aborts: ENOEXEC, and the execute CS is not submitted.
        let bad = put_cb(&f, SRAM + 0x200, &[&[0u8; 8]])?;
        let r = [chunk(bad, PDMA)];
        assert_eq!(
            submit::cs_ioctl(f.ctx.cs(), &input, &Src(&e, &r)),
            (3, Err(ENOEXEC), SobOut::default())
        );
        let cq_addr =
            d.cs.with_captured(|c| c.undefined_opcode.map(|u| u.cq_addr));
        assert_eq!(cq_addr, Some(bad.0));
        // Restore without restore chunks, or restore chunks without the flag.
        let only = CsIn {
            restore: (1, 0),
            ..input
        };
        assert_eq!(
            submit::cs_ioctl(f.ctx.cs(), &only, &Src(&e, &r)),
            (4, Ok(()), SobOut::default())
        );
        let unflagged = CsIn { flags: 0, ..input };
        assert_eq!(
            submit::cs_ioctl(f.ctx.cs(), &unflagged, &Src(&e, &r)),
            (5, Ok(()), SobOut::default())
        );
        assert_eq!(wait(&f, 5, 10 * SEC).0, Ok(()));
        Ok(())
    }

    #[test]
    fn engines_run_in_parallel_and_hw_idle_follows_them() -> Result {
        let (d, f) = setup()?;
        let nop1 = put_cb(&f, SRAM + 0x800, &[&nop(false, false)])?;
        // 64 chunks over the enabled queues in one CS.
        let queues = [0u32, 1, 4, 8, 13, 50, 55, 86, 91, 120, 127];
        let mut many = KVec::new();
        for q in queues.iter().cycle().take(64) {
            many.push(chunk(nop1, *q), GFP_KERNEL)?;
        }
        run(&f, &many)?;
        assert!(idle_soon(&d));
        let slow = slow_cb(&f)?;
        let seq = submit(&f, &[chunk(slow, PDMA)])?;
        // Another engine finishes while PDMA 0 is busy.
        let edma = submit(&f, &[chunk(nop1, GAUDI2_QUEUE_ID_DCORE2_EDMA_0_0 + 5)])?;
        assert_eq!(wait(&f, edma, 10 * SEC).0, Ok(()));
        assert_eq!(wait(&f, seq, 0).1 .0, HL_WAIT_CS_STATUS_BUSY);
        let mask = d.cs.busy_mask();
        assert_eq!(mask[0] >> GAUDI2_ENGINE_ID_PDMA_0 & 1, 1);
        assert_eq!(mask[0].count_ones(), 1);
        assert_eq!(f.ctx.cs().in_flight(), 1);
        // Closing stops it.
        f.ctx.cs().stop_and_drain();
        assert_eq!(f.ctx.cs().in_flight(), 0);
        // An engine reports a job's end just before it leaves it.
        assert!(idle_soon(&d));
        assert_eq!(wait(&f, seq, 0).1 .0, HL_WAIT_CS_STATUS_ABORTED);
        Ok(())
    }

    #[test]
    fn reset_on_page_fault_makes_the_device_need_a_reset_until_close() -> Result {
        let (d, f) = setup()?;
        d.cs.configure(30, true);
        let slow = slow_cb(&f)?;
        let bad = put_cb(&f, SRAM + 0x900, &[&msg_long(d.asic.dram_va.start, 1)])?;
        let s1 = submit(&f, &[chunk(slow, PDMA)])?;
        let s2 = submit(&f, &[chunk(bad, GAUDI2_QUEUE_ID_PDMA_1_0)])?;
        let cs = f.ctx.cs();
        let fence = |seq| cs.fence(seq).ok().flatten().ok_or(EINVAL);
        assert_eq!(fence(s2)?.wait_done().status, CsStatus::Aborted);
        // Every CS of the context is aborted, and the device refuses work.
        assert_eq!(fence(s1)?.wait_done().status, CsStatus::Aborted);
        assert_eq!(d.status(), DeviceStatus::NeedsReset);
        assert_eq!(submit(&f, &[chunk(bad, PDMA)]).err(), Some(EBUSY));
        assert_eq!(wait(&f, s1, 0).0, Err(EBUSY));
        let events = d.cs.with_captured(|c| c.events);
        let both = HL_NOTIFIER_EVENT_DEVICE_RESET | HL_NOTIFIER_EVENT_PAGE_FAULT;
        assert_eq!(events & both, both);
        assert_eq!(d.cs.hard_resets(), 0);
        // The close completes the reset.
        drop(f);
        assert_eq!(d.status(), DeviceStatus::Operational);
        assert_eq!(d.cs.hard_resets(), 1);
        Ok(())
    }

    #[test]
    fn a_context_has_one_engine_thread_per_stream_it_used_until_close() -> Result {
        let (_d, f) = setup()?;
        let ok = put_cb(&f, SRAM, &[&nop(false, false)])?;
        assert_eq!(f.ctx.cs().engine_threads(), 0);
        // Two streams of PDMA 0 and one of an EDMA: three threads.
        let edma = GAUDI2_QUEUE_ID_DCORE3_EDMA_0_0 + 6;
        run(&f, &[chunk(ok, PDMA), chunk(ok, PDMA + 1), chunk(ok, edma)])?;
        run(&f, &[chunk(ok, PDMA)])?;
        assert_eq!(f.ctx.cs().engine_threads(), 3);
        // A disabled queue makes none.
        let mut a = args(&[chunk(ok, 2)], 0);
        assert_eq!(
            cs_ioctl(&f, &mut a, &Src(&[chunk(ok, 2)], &[])),
            Err(EINVAL)
        );
        assert_eq!(f.ctx.cs().engine_threads(), 3);
        // The close ends them; later CSs are refused.
        f.ctx.cs().stop_and_drain();
        assert_eq!(f.ctx.cs().engine_threads(), 0);
        assert_eq!(submit(&f, &[chunk(ok, PDMA)]).err(), Some(EBUSY));
        assert_eq!(f.ctx.cs().engine_threads(), 0);
        Ok(())
    }

    #[test]
    fn the_run_time_cap_ends_a_cs_whatever_its_timeout() -> Result {
        let (d, f) = setup()?;
        let slow = slow_cb(&f)?;
        let long: KVec<HlCsChunk> = {
            let mut v = KVec::new();
            for _ in 0..64 {
                v.push(chunk(slow, PDMA), GFP_KERNEL)?;
            }
            v
        };
        let old = set_cs_max_run_s(1);
        // A custom timeout of 0xFFFFFFFF s is clamped to the cap: the TDR
        // ends it TIMEDOUT.
        let mut a = args(&long, HL_CS_FLAGS_CUSTOM_TIMEOUT);
        a.timeout = u32::MAX;
        let r1 = cs_ioctl(&f, &mut a, &Src(&long, &[]));
        let s1 = a.out_seq();
        let w1 = wait(&f, s1, 60 * SEC);
        // Without a device timeout (`timeout_locked=0`, custom timeouts
        // ignored as upstream) the cap still ends it.
        d.cs.configure(0, false);
        let mut a = args(&long, HL_CS_FLAGS_CUSTOM_TIMEOUT);
        a.timeout = u32::MAX;
        let r2 = cs_ioctl(&f, &mut a, &Src(&long, &[]));
        let s2 = a.out_seq();
        let w2 = wait(&f, s2, 60 * SEC);
        set_cs_max_run_s(old);
        let timed_out = (Err(ETIMEDOUT), (HL_WAIT_CS_STATUS_TIMEDOUT, 0, 0));
        assert_eq!((r1, w1), (Ok(()), timed_out));
        assert_eq!((r2, w2), (Ok(()), timed_out));
        assert_eq!(d.cs.with_captured(|c| c.cs_timeout.seq), s1);
        Ok(())
    }

    #[test]
    fn the_driver_s_tdr_halts_the_timed_out_cs_s_queues() -> Result {
        let (d, f) = setup()?;
        let ok = put_cb(&f, SRAM, &[&nop(false, false)])?;
        // 64 jobs of 256 MiB of memset each: far longer than its 1 s.
        let slow = slow_cb(&f)?;
        let mut long = KVec::new();
        for _ in 0..64 {
            long.push(chunk(slow, PDMA), GFP_KERNEL)?;
        }
        // Its timeout leaves a busy machine time to queue the next CS
        // behind it before the watchdog fires (the jobs run for minutes).
        let mut a = args(&long, HL_CS_FLAGS_CUSTOM_TIMEOUT);
        a.timeout = 5;
        cs_ioctl(&f, &mut a, &Src(&long, &[]))?;
        let s1 = a.out_seq();
        // Behind it on its queue, and on another engine.
        let s2 = submit(&f, &[chunk(ok, PDMA)])?;
        let s3 = submit(&f, &[chunk(ok, GAUDI2_QUEUE_ID_PDMA_1_0)])?;
        assert_eq!(wait(&f, s3, 60 * SEC).0, Ok(()));
        // The watchdog times it out and halts PDMA 0's stream: it ends
        // TIMEDOUT once its jobs stopped, the CS behind it ABORTED.
        assert_eq!(
            wait(&f, s1, 60 * SEC),
            (Err(ETIMEDOUT), (HL_WAIT_CS_STATUS_TIMEDOUT, 0, 0))
        );
        assert_eq!(
            wait(&f, s2, 60 * SEC),
            (Err(EIO), (HL_WAIT_CS_STATUS_ABORTED, 0, 0))
        );
        assert_eq!(d.cs.with_captured(|c| c.cs_timeout.seq), s1);
        // The queue was reset: it takes work again.
        run(&f, &[chunk(ok, PDMA)])?;
        // The close halts a CS without a timeout, and quiesces the queues.
        d.cs.configure(0, false);
        let s5 = submit(&f, &long)?;
        let fence = f.ctx.cs().fence(s5)?.ok_or(EINVAL)?;
        f.ctx.cs().stop_and_drain();
        assert_eq!(fence.poll().map(|x| x.status), Some(CsStatus::Aborted));
        assert_eq!(f.ctx.cs().engine_threads(), 0);
        assert_eq!(d.cs.busy_mask(), [0; 4]);
        Ok(())
    }

    #[test]
    fn an_unmapped_va_is_not_reused_while_a_cs_could_reach_it() -> Result {
        let (d, f) = setup()?;
        let vm = f.ctx.vm();
        let h = u64::from(alloc_device_memory(vm, d.asic.dram_page_size, 0)?);
        let va = map_device_va(vm, h, 0, 0)?;
        // No CS in flight: the VA comes straight back.
        unmap_device_va(vm, va)?;
        assert_eq!(map_device_va(vm, h, va, HL_MEM_FORCE_HINT)?, va);
        let slow = slow_cb(&f)?;
        let seq = submit(&f, &[chunk(slow, PDMA)])?;
        unmap_device_va(vm, va)?;
        assert_eq!(vm.va_quarantine.held(), 1);
        // While the CS runs: a hint at the VA is placed elsewhere, a forced
        // one is refused as occupied.
        let other = map_device_va(vm, h, va, 0)?;
        assert!(other != va);
        assert_eq!(map_device_va(vm, h, va, HL_MEM_FORCE_HINT), Err(EADDRINUSE));
        // Once it ended, the next MAP gets the VA back.
        f.ctx.cs().stop_and_drain();
        assert_eq!(wait(&f, seq, 0).1 .0, HL_WAIT_CS_STATUS_ABORTED);
        assert_eq!(map_device_va(vm, h, va, HL_MEM_FORCE_HINT)?, va);
        assert_eq!(vm.va_quarantine.held(), 0);
        Ok(())
    }

    // --- helpers -------------------------------------------------------------------------------

    /// Whether every engine is idle within a second.
    fn idle_soon(d: &HlDevice) -> bool {
        for _ in 0..1000 {
            if d.cs.busy_mask() == [0; 4] {
                return true;
            }
            kernel::time::delay::fsleep(kernel::time::Delta::from_millis(1));
        }
        false
    }

    /// Chunk arrays: address 1 is the restore array, 2 the execute one,
    /// 0xBAD faults.
    struct Src<'a>(&'a [HlCsChunk], &'a [HlCsChunk]);

    impl ChunkSource for Src<'_> {
        fn read(&self, addr: u64, n: u32) -> Result<Chunks> {
            let from = match addr {
                1 => self.1,
                0xBAD => return Err(EFAULT),
                _ => self.0,
            };
            let mut v = KVVec::new();
            for c in from.iter().take(n as usize) {
                v.push(*c, GFP_KERNEL)?;
            }
            Ok(Chunks::heap(v))
        }

        fn read_u64(&self, addr: u64) -> Result<u64> {
            match addr {
                0xBAD => Err(EFAULT),
                a => Ok(a),
            }
        }
    }

    fn setup() -> Result<(Arc<HlDevice>, ComputeFile)> {
        let d = HlDevice::new(0, AsicProperties::gaudi2(6, 0)?)?;
        let ctx = Context::new(d.clone(), 1)?;
        Ok((
            d,
            ComputeFile {
                ctx: Arc::new(ctx, GFP_KERNEL)?,
            },
        ))
    }

    /// Write the packets at `at` in SRAM; returns `(at, size)` packed as a
    /// chunk's address and size.
    fn put_cb(f: &ComputeFile, at: u64, packets: &[&[u8]]) -> Result<(u64, u32)> {
        let mut off = 0u64;
        for p in packets {
            f.ctx.device().sim()?.sram_write(at + off, p)?;
            off += p.len() as u64;
        }
        Ok((at, off as u32))
    }

    /// A CB that runs for a while: memsets of 32 MiB of SRAM.
    fn slow_cb(f: &ComputeFile) -> Result<(u64, u32)> {
        let m = lin_dma(0x5a, SRAM + (8 << 20), 32 << 20, 0, true);
        put_cb(f, SRAM + 0x400, &[&m, &m, &m, &m, &m, &m, &m, &m])
    }

    fn chunk((cb, size): (u64, u32), queue: u32) -> HlCsChunk {
        HlCsChunk {
            cb_handle: cb,
            queue_index: queue,
            cb_size: size,
            cs_chunk_flags: U,
            ..Default::default()
        }
    }

    fn args(chunks: &[HlCsChunk], flags: u32) -> HlCsArgs {
        HlCsArgs {
            chunks_execute: 2,
            num_chunks_execute: chunks.len() as u32,
            cs_flags: flags,
            ..Default::default()
        }
    }

    fn submit(f: &ComputeFile, chunks: &[HlCsChunk]) -> Result<u64> {
        let mut a = args(chunks, 0);
        cs_ioctl(f, &mut a, &Src(chunks, &[]))?;
        Ok(a.out_seq())
    }

    /// Submit and wait for a successful end.
    fn run(f: &ComputeFile, chunks: &[HlCsChunk]) -> Result {
        let seq = submit(f, chunks)?;
        match wait(f, seq, 30 * SEC) {
            (Ok(()), (HL_WAIT_CS_STATUS_COMPLETED, _, _)) => Ok(()),
            _ => Err(EIO),
        }
    }

    /// WAIT_CS: the result and `(status, flags, timestamp)`.
    fn wait(f: &ComputeFile, seq: u64, timeout_us: u64) -> (Result, (u32, u32, i64)) {
        let mut a = HlWaitCsArgs {
            seq,
            timeout_us,
            ..Default::default()
        };
        let rc = wait_cs_ioctl(f, &mut a);
        (rc, (a.out_status(), a.out_flags(), a.out_timestamp_nsec()))
    }
}
