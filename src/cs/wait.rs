// SPDX-License-Identifier: GPL-2.0

//! `DRM_IOCTL_HL_WAIT_CS` on one sequence (upstream `_hl_cs_wait_ioctl` and
//! `hl_wait_for_fence`, common/command_submission.c:2656-2875), below its
//! argument:
//!
//! - a sequence not given yet: `EINVAL`;
//! - one older than the window of 64: its kept outcome, if the CS asked for
//!   a timestamp and no wait took it yet (COMPLETED with the time, or its
//!   error); otherwise COMPLETED with `HL_WAIT_CS_STATUS_FLAG_GONE`;
//! - one in the window: its fence, polled (`timeout_us` 0) or waited for
//!   interruptibly up to `timeout_us`: BUSY if not done by then, COMPLETED
//!   (with the time if asked), TIMEDOUT (`ETIMEDOUT`) or ABORTED (`EIO`).
//!   A CS refused after it got its number counts as completed.
//!
//! The ioctl's `timeout_us` is taken as upstream's `hl_wait_for_fence`
//! takes it ([`upstream_timeout_us`], applied by the ioctl; the driver's own
//! waits, such as the restore phase's, are not truncated): `MAX_SCHEDULE_TIMEOUT` (`i64::MAX`) waits for
//! ever; any other value goes through `usecs_to_jiffies`, whose argument
//! is an `unsigned int`: only its low 32 bits count (2^32 polls, 2^32 + 1
//! is one microsecond). Upstream's `0` check comes before the truncation,
//! so a multiple of 2^32 waits zero jiffies, which answers as a poll does.

use crate::cs::{
    fence::{CsStatus, Waited},
    tracker::ContextCs,
};
use kernel::prelude::*;

/// What WAIT_CS found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WaitCs {
    /// Done without error (`gone`: out of the window, nothing kept);
    /// `timestamp_ns` is non-zero if the CS asked for it.
    Completed {
        /// `HL_WAIT_CS_STATUS_FLAG_GONE`.
        gone: bool,
        /// Completion time, 0 if none.
        timestamp_ns: i64,
    },
    /// Not done within the timeout.
    Busy,
    /// Ran past its timeout.
    TimedOut,
    /// Aborted.
    Aborted,
    /// A signal came first.
    Interrupted,
}

/// `MAX_SCHEDULE_TIMEOUT` (`LONG_MAX`): a WAIT_CS timeout that never ends.
const MAX_SCHEDULE_TIMEOUT: u64 = i64::MAX as u64;

/// The timeout upstream's `hl_wait_for_fence` waits for a WAIT_CS
/// `timeout_us`: `u64::MAX` (for ever) for `MAX_SCHEDULE_TIMEOUT`, else its
/// low 32 bits (`usecs_to_jiffies(const unsigned int)`). O(1).
pub(crate) fn upstream_timeout_us(timeout_us: u64) -> u64 {
    if timeout_us == MAX_SCHEDULE_TIMEOUT {
        u64::MAX
    } else {
        u64::from(timeout_us as u32)
    }
}

/// Wait for CS `seq` of `ctx` at most `timeout_us`. `EINVAL` for a future
/// sequence. O(1) besides the wait.
pub(crate) fn wait_cs(ctx: &ContextCs, seq: u64, timeout_us: u64) -> Result<WaitCs> {
    let finished = match ctx.fence(seq)? {
        None => match ctx.pop_outcome(seq) {
            Some(f) => f,
            None => {
                return Ok(WaitCs::Completed {
                    gone: true,
                    timestamp_ns: 0,
                })
            }
        },
        Some(fence) => match fence.wait(timeout_us) {
            Waited::Done(f) => f,
            Waited::Busy => return Ok(WaitCs::Busy),
            Waited::Interrupted => return Ok(WaitCs::Interrupted),
        },
    };
    Ok(match finished.status {
        CsStatus::TimedOut => WaitCs::TimedOut,
        CsStatus::Aborted => WaitCs::Aborted,
        CsStatus::Ok | CsStatus::NotSubmitted => WaitCs::Completed {
            gone: false,
            timestamp_ns: finished.timestamp_ns,
        },
    })
}

#[kunit_tests(hlrs_cs_wait)]
mod tests {
    use super::*;

    #[test]
    fn timeouts_are_truncated_to_32_bits_as_upstream() {
        assert_eq!(upstream_timeout_us(0), 0);
        assert_eq!(upstream_timeout_us(1000), 1000);
        assert_eq!(
            upstream_timeout_us(u64::from(u32::MAX)),
            u64::from(u32::MAX)
        );
        assert_eq!(upstream_timeout_us(1 << 32), 0);
        assert_eq!(upstream_timeout_us((1 << 32) + 1), 1);
        assert_eq!(upstream_timeout_us(u64::MAX), u64::from(u32::MAX));
        assert_eq!(upstream_timeout_us(i64::MAX as u64), u64::MAX);
        assert_eq!(upstream_timeout_us(i64::MAX as u64 + 1), 0);
    }
}
