// SPDX-License-Identifier: GPL-2.0

//! The checks a CS chunk passes before its job is queued, in upstream's
//! order and with its errnos and counters:
//!
//! 1. `validate_queue_index` (common/command_submission.c:1203-1272), a
//!    validation drop: a queue index past `GAUDI2_QUEUE_ID_SIZE` or the
//!    driver's own CPU queue is `EINVAL`; every other Gaudi2 queue is a H/W
//!    queue that takes user CBs only (`CB_ALLOC_USER`, gaudi2/gaudi2.c:2775),
//!    so a chunk without `HL_CS_CHUNK_FLAGS_USER_ALLOC_CB` (a kernel-CB
//!    handle) is `EINVAL`.
//! 2. `gaudi2_validate_cb_address` (gaudi2/gaudi2.c:7132-7188), a parsing
//!    drop: a queue that is not enabled ([`queue_engine`]) is `EINVAL`; the
//!    CB `[cb_handle, cb_handle + cb_size)` must lie inside user SRAM,
//!    physical user DRAM, the DRAM VA range, or the host (or host huge-page)
//!    VA range, else `EFAULT`. A `cb_size` of 0 lies nowhere (`EFAULT`).
//!
//! Ranges are half-open, as upstream's `hl_mem_area_inside_range`.

use crate::{
    asic::{AsicProperties, VaSpan, SRAM_BASE_ADDR},
    cs::device_cs::DropKind,
    hw::engines::queue_engine,
    uapi::*,
};
use kernel::prelude::*;

/// Check one chunk; `Err` carries the errno and the counter to bump. O(1).
pub(crate) fn check_chunk(asic: &AsicProperties, c: &HlCsChunk) -> Result<(), (Error, DropKind)> {
    let q = c.queue_index;
    if q >= GAUDI2_QUEUE_ID_SIZE || q == GAUDI2_QUEUE_ID_CPU_PQ {
        return Err((EINVAL, DropKind::Validation));
    }
    if c.cs_chunk_flags & HL_CS_CHUNK_FLAGS_USER_ALLOC_CB == 0 {
        return Err((EINVAL, DropKind::Validation));
    }
    if queue_engine(q).is_none() {
        return Err((EINVAL, DropKind::Parsing));
    }
    let size = u64::from(c.cb_size);
    let ranges = [
        VaSpan::new(asic.sram_user_base, SRAM_BASE_ADDR + asic.sram_size),
        VaSpan::new(asic.dram_user_base, asic.dram_end()),
        asic.dram_va,
        asic.host_va,
        asic.host_huge_va,
    ];
    if ranges.iter().any(|r| r.contains_area(c.cb_handle, size)) {
        Ok(())
    } else {
        Err((EFAULT, DropKind::Parsing))
    }
}

#[kunit_tests(hlrs_cs_validate)]
mod tests {
    use super::*;
    use crate::asic::SRAM_SIZE;

    fn chunk(cb: u64, size: u32, queue: u32, flags: u32) -> HlCsChunk {
        HlCsChunk {
            cb_handle: cb,
            queue_index: queue,
            cb_size: size,
            cs_chunk_flags: flags,
            ..Default::default()
        }
    }

    #[test]
    fn chunks_get_upstreams_errnos_in_upstreams_order() -> Result {
        let a = AsicProperties::gaudi2(6, 0)?;
        let u = HL_CS_CHUNK_FLAGS_USER_ALLOC_CB;
        let host = 0xFFF0_0000_0010_0008;
        let ok = |c: HlCsChunk| check_chunk(&a, &c);
        assert_eq!(ok(chunk(host, 8, 0, u)), Ok(()));
        for q in [1, 4, 8, 15, 16, 44, 48, 55, 84, 91, 120, 127, 155] {
            assert_eq!(ok(chunk(host, 8, q, u)), Ok(()));
        }
        // Index checks come first, then the CB kind, then the queue state.
        for q in [GAUDI2_QUEUE_ID_CPU_PQ, GAUDI2_QUEUE_ID_SIZE, u32::MAX] {
            assert_eq!(ok(chunk(0, 0, q, 0)), Err((EINVAL, DropKind::Validation)));
        }
        assert_eq!(
            ok(chunk(host, 8, 0, 0)),
            Err((EINVAL, DropKind::Validation))
        );
        for q in [2, 3, 5, 7, 156, 259] {
            assert_eq!(ok(chunk(0, 0, q, u)), Err((EINVAL, DropKind::Parsing)));
        }
        // Addresses: each range, its ends, and outside.
        let sram_end = SRAM_BASE_ADDR + SRAM_SIZE;
        let inside = [
            (SRAM_BASE_ADDR + 8, 24),
            (sram_end - 8, 8),
            (a.dram_user_base, 8),
            (a.dram_end() - 8, 8),
            (a.dram_va.start + 8, 0x1000),
            (a.host_va.end - 16, 16),
            (a.host_huge_va.start, u32::MAX),
        ];
        for (cb, size) in inside {
            assert_eq!(ok(chunk(cb, size, 4, u)), Ok(()));
        }
        let outside = [
            (sram_end - 8, 9),
            (SRAM_BASE_ADDR - 8, 16),
            (a.dram_base, 8),
            (a.dram_va.start, 0),
            (host, 0),
            (0, 8),
            (u64::MAX - 3, 8),
            (a.host_huge_va.end - 8, 9),
        ];
        for (cb, size) in outside {
            assert_eq!(ok(chunk(cb, size, 4, u)), Err((EFAULT, DropKind::Parsing)));
        }
        Ok(())
    }
}
