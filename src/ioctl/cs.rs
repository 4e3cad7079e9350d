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
//! waits `EPERM` (the simulated device has no user interrupts), multi-CS
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
        submit::{self, ChunkSource, CsIn},
        wait::{wait_cs, WaitCs},
    },
    file::ComputeFile,
    uapi::*,
};
use kernel::{
    alloc::KVVec,
    prelude::*,
    uaccess::{UserPtr, UserSlice},
};

/// The chunk arrays of a CS in the caller's memory.
pub(crate) struct UserChunks;

impl ChunkSource for UserChunks {
    fn read(&self, addr: u64, n: u32) -> Result<KVVec<HlCsChunk>> {
        let n = n as usize;
        let len = n
            .checked_mul(core::mem::size_of::<HlCsChunk>())
            .ok_or(EINVAL)?;
        let addr = usize::try_from(addr).map_err(|_| EFAULT)?;
        let mut reader = UserSlice::new(UserPtr::from_addr(addr), len).reader();
        let mut chunks = KVVec::with_capacity(n, GFP_KERNEL)?;
        for _ in 0..n {
            chunks
                .push_within_capacity(reader.read::<HlCsChunk>()?)
                .map_err(|_| ENOMEM)?;
        }
        Ok(chunks)
    }
}

/// Serve one CS ioctl of a compute file, reading its chunks from `src`.
/// O(chunks) plus a restore CS's run.
pub(crate) fn cs_ioctl(file: &ComputeFile, args: &mut HlCsArgs, src: &dyn ChunkSource) -> Result {
    let input = CsIn::from(&*args);
    let (seq, rc) = submit::cs_ioctl(file.ctx.cs(), &input, src);
    if rc != Err(EAGAIN) {
        let status = match rc {
            Ok(()) => HL_CS_STATUS_SUCCESS,
            Err(e) => e.to_errno() as u32,
        };
        args.set_out(seq, status);
    }
    rc
}

/// Serve one WAIT_CS ioctl of a compute file. Sleeps (interruptibly) up to
/// `timeout_us`.
pub(crate) fn wait_cs_ioctl(file: &ComputeFile, args: &mut HlWaitCsArgs) -> Result {
    let cs = file.ctx.cs();
    if !cs.dev.operational() {
        return Err(EBUSY);
    }
    if args.flags & HL_WAIT_CS_FLAGS_INTERRUPT != 0 {
        return Err(EPERM);
    }
    if args.flags & HL_WAIT_CS_FLAGS_MULTI_CS != 0 {
        if args.multi_cs_pad() != [0; 7] {
            return Err(EINVAL);
        }
        return Err(EPERM);
    }
    let outcome = wait_cs(cs, args.seq, args.timeout_us);
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
