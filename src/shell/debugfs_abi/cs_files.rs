// SPDX-License-Identifier: GPL-2.0

//! Upstream's `command_buffers`, `command_submission` and
//! `command_submission_jobs` (`command_buffers_show`,
//! `command_submission_show`, `command_submission_jobs_show`,
//! common/debugfs.c:103-202) for the open compute context, the only one
//! with CBs and CSs here (upstream lists every context's, the kernel's
//! included). Newest first, as upstream's lists (`list_add`) are.
//!
//! What each row holds here:
//!
//! - a CB: its handle (as CB CREATE returned it), the context's ASID, its
//!   size, `1 + mmap?` references (the handle table's and a live mmap's, as
//!   upstream's `buf->refcount` counts them), whether it is mmapped, and a CS
//!   counter of 0 (a CS here runs user CBs only: a kernel-CB chunk is
//!   refused, so no CS holds a CB). A CB destroyed while mmapped is gone
//!   from its table and from this file (upstream lists it until freed);
//! - a CS: its sequence, type 0 (`CS_TYPE_DEFAULT`, the only one that
//!   runs here), the ASID, `1 + jobs not ended` references (upstream's CS
//!   takes one per job of a H/W queue), submitted 1 and completed 0 (a CS
//!   is listed from its submission until it ends; upstream keeps it until
//!   it is freed, shortly after);
//! - a job: its id (`i + 1` for chunk `i`), its CS's sequence, type and
//!   ASID, one reference, and its queue; every job of a CS in flight is
//!   listed (upstream frees a CS's H/W-queue jobs together when it ends).
//!
//! Each renderer copies references out under the lock of what it lists,
//! into room reserved before it, and formats after releasing it.

use super::AbiFiles;
use crate::vm::command_buffer::CB_MAX_PER_FILE;
use crate::{uapi::mmap_handle, uapi::HL_MMAP_TYPE_CB, vm::one_mmap::OneMmap};
use kernel::{alloc::KVVec, fmt, prelude::*};

/// `CS_TYPE_DEFAULT`.
const CS_TYPE_DEFAULT: u32 = 0;

/// `command_buffers_show`. O(CBs), at most [`CB_MAX_PER_FILE`].
pub(super) fn show_command_buffers(p: &AbiFiles, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    let Some(vm) = p.dev.state.lock().active_vm.clone() else {
        return Ok(());
    };
    // A file holds at most CB_MAX_PER_FILE CBs: room for all of them.
    let mut cbs = KVVec::with_capacity(CB_MAX_PER_FILE, GFP_KERNEL).map_err(|_| fmt::Error)?;
    for cb in vm.cbs.lock().iter() {
        let _ = cbs.push_within_capacity(cb.clone());
    }
    if cbs.is_empty() {
        return Ok(());
    }
    writeln!(f)?;
    writeln!(
        f,
        " CB ID   CTX ID   CB size    CB RefCnt    mmap?   CS counter"
    )?;
    writeln!(
        f,
        "---------------------------------------------------------------"
    )?;
    for cb in cbs.iter().rev() {
        let mmap = u32::from(cb.mapped_vmas() > 0);
        writeln!(
            f,
            "   {:03}        {}    0x{:08x}      {}          {}          {}",
            mmap_handle(u64::from(cb.id()), HL_MMAP_TYPE_CB),
            vm.asid,
            cb.size(),
            1 + mmap,
            mmap,
            0
        )?;
    }
    writeln!(f)
}

/// `command_submission_show`. O(64).
pub(super) fn show_command_submission(p: &AbiFiles, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    let Some(cs) = p.dev.state.lock().active_cs.clone() else {
        return Ok(());
    };
    let flights = cs.flights().map_err(|_| fmt::Error)?;
    if flights.is_empty() {
        return Ok(());
    }
    writeln!(f)?;
    writeln!(
        f,
        " CS ID   CS TYPE   CTX ASID   CS RefCnt   Submitted    Completed"
    )?;
    writeln!(
        f,
        "----------------------------------------------------------------"
    )?;
    for fl in flights.iter().rev() {
        writeln!(
            f,
            "   {}        {}          {}          {}           {}            {}",
            fl.seq,
            CS_TYPE_DEFAULT,
            fl.asid(),
            1 + fl.jobs_left(),
            1,
            0
        )?;
    }
    writeln!(f)
}

/// `command_submission_jobs_show`. O(64 + jobs).
pub(super) fn show_command_submission_jobs(
    p: &AbiFiles,
    f: &mut fmt::Formatter<'_>,
) -> fmt::Result {
    let Some(cs) = p.dev.state.lock().active_cs.clone() else {
        return Ok(());
    };
    let flights = cs.flights().map_err(|_| fmt::Error)?;
    let mut first = true;
    for fl in flights.iter().rev() {
        for (i, queue) in fl.queues().iter().enumerate().rev() {
            if first {
                first = false;
                writeln!(f)?;
                writeln!(
                    f,
                    " JOB ID   CS ID    CS TYPE    CTX ASID   JOB RefCnt   H/W Queue"
                )?;
                writeln!(
                    f,
                    "---------------------------------------------------------------"
                )?;
            }
            writeln!(
                f,
                "   {:02}      {}        {}        {}          {}           {}",
                i + 1,
                fl.seq,
                CS_TYPE_DEFAULT,
                fl.asid(),
                1,
                queue
            )?;
        }
    }
    if !first {
        writeln!(f)?;
    }
    Ok(())
}
