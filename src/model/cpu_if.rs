// SPDX-License-Identifier: GPL-2.0

//! The CPU interface block as the device CPU's firmware (CPU-CP) runs it:
//! the queue handshake, the CPU PQ doorbell and the event queue
//! (`gaudi2_init_cpu_queues`, gaudi2/gaudi2.c:5299-5365).
//!
//! - The driver writes the PQ/EQ/CQ bases and lengths, then `QUEUE_INIT` =
//!   `READY_FOR_CP`; the firmware answers `READY_FOR_HOST` at once, or
//!   `LEN_NOT_POWER_OF_TWO_ERR` / `ILLEGAL_Q_ADDR_ERR` for a PQ or EQ whose
//!   length is not a power of two or whose base is 0 (as firmware checks).
//! - `PF_PQ_PI` is the CPU PQ's doorbell: the firmware fetches the BDs from
//!   its consumer index up to the new PI (16-byte `ptr/len/ctl` BDs,
//!   include/common/qman_if.h:17-21, index = PI mod entries; upstream's PI runs
//!   modulo twice the queue length, common/hw_queue.c:83-106) and answers
//!   each packet ([`super::cpucp`]) before the write returns.
//! - The event queue: the firmware writes 64-byte `hl_eq_entry`s at its
//!   producer index with the READY bit and a running index, and raises
//!   MSI-X vector 0 (`GAUDI2_IRQ_NUM_EVENT_QUEUE`, gaudi2/gaudi2P.h:400);
//!   the driver clears READY and writes its consumer index to `EQ_RD_OFFS`
//!   (`gaudi2_update_eq_ci`, gaudi2/gaudi2.c:7897-7900). A full queue drops
//!   the event (counted).
//! - `mmHW_STATE` (`KMD_HW_DIRTY_STATUS`) holds what the driver writes,
//!   clean after boot.

use super::events;
use super::regs;
use super::{Env, Gaudi2};

/// Bytes of a PQ entry (`struct hl_bd`: `ptr` u64, `len` u32, `ctl` u32;
/// include/common/qman_if.h:17-21).
pub const BD_BYTES: u64 = 16;
/// `GAUDI2_IRQ_NUM_EVENT_QUEUE` (gaudi2/gaudi2P.h:400).
pub const MSIX_EVENT_QUEUE: u16 = 0;

/// The CPU interface registers and the firmware's queue state.
pub struct CpuIf {
    pq_base: u64,
    pq_len: u32,
    cq_base: u64,
    cq_len: u32,
    eq_base: u64,
    eq_len: u32,
    eq_ci: u32,
    queue_init: u32,
    /// The last `PF_PQ_PI` written.
    pub pq_pi: u32,
    /// The firmware's consumer index (modulo twice the entries, as the PI).
    pub pq_ci: u32,
    hw_state: u32,
    /// The firmware's EQ producer index (entries) and running index.
    eq_pi: u32,
    eq_index: u32,
    /// Events dropped because the EQ was full or not set up.
    pub eq_dropped: u64,
    /// The MSI-X doorbell page of `ENABLE_PCI_ACCESS` (0: not told).
    pub msix_db: u64,
}

/// Set the low or high 32 bits of `v`.
fn set_half(v: &mut u64, high: bool, val: u32) {
    *v = if high {
        (*v & 0xFFFF_FFFF) | u64::from(val) << 32
    } else {
        (*v & !0xFFFF_FFFF) | u64::from(val)
    };
}

impl Default for CpuIf {
    fn default() -> Self {
        Self::new()
    }
}

impl CpuIf {
    /// After boot: no queues, hardware state clean. O(1).
    pub const fn new() -> Self {
        Self {
            pq_base: 0,
            pq_len: 0,
            cq_base: 0,
            cq_len: 0,
            eq_base: 0,
            eq_len: 0,
            eq_ci: 0,
            queue_init: 0,
            pq_pi: 0,
            pq_ci: 0,
            hw_state: regs::HW_STATE_CLEAN,
            eq_pi: 0,
            eq_index: 0,
            eq_dropped: 0,
            msix_db: 0,
        }
    }

    /// The register `reg` of this block, if it is one. O(1).
    pub fn read(&self, reg: u32) -> Option<u32> {
        Some(match reg {
            regs::CPU_IF_PF_PQ_PI => self.pq_pi,
            regs::CPU_IF_PQ_BASE_ADDR_LOW => self.pq_base as u32,
            regs::CPU_IF_PQ_BASE_ADDR_HIGH => (self.pq_base >> 32) as u32,
            regs::CPU_IF_PQ_LENGTH => self.pq_len,
            regs::CPU_IF_CQ_BASE_ADDR_LOW => self.cq_base as u32,
            regs::CPU_IF_CQ_BASE_ADDR_HIGH => (self.cq_base >> 32) as u32,
            regs::CPU_IF_CQ_LENGTH => self.cq_len,
            regs::CPU_IF_EQ_BASE_ADDR_LOW => self.eq_base as u32,
            regs::CPU_IF_EQ_BASE_ADDR_HIGH => (self.eq_base >> 32) as u32,
            regs::CPU_IF_EQ_LENGTH => self.eq_len,
            regs::CPU_IF_EQ_RD_OFFS => self.eq_ci,
            regs::CPU_IF_QUEUE_INIT => self.queue_init,
            regs::HW_STATE => self.hw_state,
            _ => return None,
        })
    }

    /// Write `reg` if it is this block's, except the doorbell (the caller
    /// runs the firmware on it). Returns whether `reg` was this block's.
    /// O(1).
    pub fn write(&mut self, reg: u32, val: u32) -> bool {
        match reg {
            regs::CPU_IF_PQ_BASE_ADDR_LOW => set_half(&mut self.pq_base, false, val),
            regs::CPU_IF_PQ_BASE_ADDR_HIGH => set_half(&mut self.pq_base, true, val),
            regs::CPU_IF_PQ_LENGTH => self.pq_len = val,
            regs::CPU_IF_CQ_BASE_ADDR_LOW => set_half(&mut self.cq_base, false, val),
            regs::CPU_IF_CQ_BASE_ADDR_HIGH => set_half(&mut self.cq_base, true, val),
            regs::CPU_IF_CQ_LENGTH => self.cq_len = val,
            regs::CPU_IF_EQ_BASE_ADDR_LOW => set_half(&mut self.eq_base, false, val),
            regs::CPU_IF_EQ_BASE_ADDR_HIGH => set_half(&mut self.eq_base, true, val),
            regs::CPU_IF_EQ_LENGTH => self.eq_len = val,
            regs::CPU_IF_EQ_RD_OFFS => self.eq_ci = val,
            regs::CPU_IF_QUEUE_INIT => self.queue_init(val),
            regs::HW_STATE => self.hw_state = val,
            _ => return false,
        }
        true
    }

    /// `QUEUE_INIT` = `val`: the firmware's side of the handshake.
    fn queue_init(&mut self, val: u32) {
        self.queue_init = val;
        if val != regs::PQ_INIT_STATUS_READY_FOR_CP
            && val != regs::PQ_INIT_STATUS_READY_FOR_CP_SINGLE_MSI
        {
            return;
        }
        let pow2 = |n: u32| n.is_power_of_two() && u64::from(n) >= BD_BYTES;
        self.queue_init = if !pow2(self.pq_len) || !pow2(self.eq_len) {
            regs::PQ_INIT_STATUS_LEN_NOT_POWER_OF_TWO_ERR
        } else if self.pq_base == 0 || self.eq_base == 0 {
            regs::PQ_INIT_STATUS_ILLEGAL_Q_ADDR_ERR
        } else {
            self.pq_ci = self.pq_pi;
            self.eq_pi = 0;
            self.eq_index = 0;
            regs::PQ_INIT_STATUS_READY_FOR_HOST
        };
    }

    /// Whether the queues are up (the handshake answered READY_FOR_HOST).
    pub fn ready(&self) -> bool {
        self.queue_init == regs::PQ_INIT_STATUS_READY_FOR_HOST
    }

    /// Entries of the CPU PQ (0 before the handshake).
    pub fn pq_entries(&self) -> u64 {
        u64::from(self.pq_len) / BD_BYTES
    }

    /// The bus address of PQ entry `index` (taken modulo the entries).
    pub fn pq_entry_addr(&self, index: u32) -> Option<u64> {
        let n = self.pq_entries();
        let slot = u64::from(index).checked_rem(n)?;
        self.pq_base.checked_add(slot.checked_mul(BD_BYTES)?)
    }
}

impl Gaudi2 {
    /// Report `event` on the event queue: an entry at the firmware's
    /// producer index, then MSI-X vector 0. Dropped (counted) before the
    /// handshake or when the queue is full. O(1).
    pub(super) fn post_event(&mut self, env: &mut dyn Env, event: u16) {
        self.post_event_data(env, event, [0; 2]);
    }

    /// [`Self::post_event`] with `data` in the entry's first two data
    /// words (the firmware's event data: a RAZWI's address and channel, a
    /// DMA core's cause). O(1).
    pub(super) fn post_event_data(&mut self, env: &mut dyn Env, event: u16, data: [u64; 2]) {
        let q = &mut self.cpu_if;
        let entries = u64::from(q.eq_len) / events::ENTRY_BYTES as u64;
        let full = entries == 0
            || !q.ready()
            || u64::from(q.eq_pi.wrapping_add(1)) % entries == u64::from(q.eq_ci) % entries;
        let at = (u64::from(q.eq_pi) % entries.max(1))
            .checked_mul(events::ENTRY_BYTES as u64)
            .and_then(|o| q.eq_base.checked_add(o));
        let (false, Some(at)) = (full, at) else {
            q.eq_dropped = q.eq_dropped.wrapping_add(1);
            return;
        };
        q.eq_index = q.eq_index.wrapping_add(1);
        let entry = events::entry(event, q.eq_index, data);
        if env.dma_write(at, &entry).is_err() {
            q.eq_dropped = q.eq_dropped.wrapping_add(1);
            return;
        }
        q.eq_pi = (u64::from(q.eq_pi) + 1).checked_rem(entries).unwrap_or(0) as u32;
        self.stats.dma_write_bytes = self.stats.dma_write_bytes.wrapping_add(entry.len() as u64);
        self.raise(env, MSIX_EVENT_QUEUE);
    }

    /// Raise MSI-X vector `vector` (counted). O(1).
    pub(super) fn raise(&mut self, env: &mut dyn Env, vector: u16) {
        self.stats.msix = self.stats.msix.wrapping_add(1);
        env.msix(vector);
    }
}
