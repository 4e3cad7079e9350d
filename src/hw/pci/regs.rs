// SPDX-License-Identifier: GPL-2.0

//! [`Mmio`]: the PCI Gaudi2's BARs as the driver uses them: 32-bit register
//! reads and writes at upstream's `mm*` addresses through BAR0 (`RREG32` /
//! `WREG32`), polls with upstream's `hl_poll_timeout` semantics, 64-bit PTE
//! accesses and byte copies through the DRAM window (BAR4) and SRAM (BAR0),
//! and the device's liveness.
//!
//! **Liveness.** The BARs are device-managed (`kernel::pci::DevresBar`):
//! once the driver is unbound every access finds them revoked and fails with
//! `ENODEV`, and the device is [`Life::Gone`]. A register read that returns
//! all ones means the device has fallen off the bus (a surprise removal, the
//! model process killed): the device is [`Life::Dead`] from then on, its
//! status `Malfunction`, and every later register access fails with
//! `ENODEV` without touching it (upstream's `is_pci_link_healthy` check,
//! common/device.c:1056-1066, reads the config space for the same purpose).
//! None of the registers the driver reads can hold all ones on a live
//! device (status, busy and invalidation bits).
//!
//! **Counters.** Every access is counted ([`Counters`], debugfs `pci` and
//! the PCI guest test): register reads and writes, PTE reads and writes
//! through BAR4, polls and their timeouts.

use crate::asic::gaudi2_regs::bar0_offset;
use crate::ffi::sched;
use kernel::{
    io::{poll::read_poll_timeout, Io},
    pci::DevresBar,
    prelude::*,
    sync::atomic::{Atomic, Relaxed},
    time::Delta,
};

/// Where the device is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Life {
    /// Bound and answering.
    Alive,
    /// A register read returned all ones: off the bus. Still bound.
    Dead,
    /// The driver is unbound: BARs revoked, DMA mappings undone.
    Gone,
}

/// Access counts since probe (each a relaxed atomic: a snapshot may mix
/// counts of concurrent operations).
pub(crate) struct Counters {
    /// 32-bit register reads through BAR0.
    pub(crate) reg_reads: Atomic<u64>,
    /// 32-bit register writes through BAR0.
    pub(crate) reg_writes: Atomic<u64>,
    /// 64-bit PTE writes through BAR4 (`gaudi2_write_pte`).
    pub(crate) pte_writes: Atomic<u64>,
    /// 64-bit PTE reads through BAR4 (`gaudi2_read_pte`).
    pub(crate) pte_reads: Atomic<u64>,
    /// Polls that timed out.
    pub(crate) poll_timeouts: Atomic<u64>,
    /// KDMA jobs whose completion never came (debugfs `dma_size` of an
    /// unmapped page: a fault, not a register that failed to settle).
    pub(crate) kdma_timeouts: Atomic<u64>,
    /// MMU range invalidations (one per call, every HMMU included).
    pub(crate) range_invalidations: Atomic<u64>,
    /// MMU full invalidations.
    pub(crate) full_invalidations: Atomic<u64>,
    /// Hop-0 commits (one per STLB).
    pub(crate) hop0_commits: Atomic<u64>,
    /// Host runs DMA-mapped and unmapped.
    pub(crate) dma_maps: Atomic<u64>,
    /// See `dma_maps`.
    pub(crate) dma_unmaps: Atomic<u64>,
    /// Jobs queued on the PQs.
    pub(crate) cs_jobs: Atomic<u64>,
    /// PQ doorbells rung (`PQ_PI` writes).
    pub(crate) doorbells: Atomic<u64>,
    /// Completion interrupts (MSI-X 21) handled.
    pub(crate) cq_interrupts: Atomic<u64>,
    /// CQ entries consumed.
    pub(crate) cq_entries: Atomic<u64>,
    /// Jobs reported done.
    pub(crate) cs_done: Atomic<u64>,
    /// Jobs reported halted.
    pub(crate) cs_halted: Atomic<u64>,
    /// Jobs reported failed (a fault or a refused packet).
    pub(crate) cs_failed: Atomic<u64>,
    /// Event queue entries consumed (MSI-X 0).
    pub(crate) eq_events: Atomic<u64>,
    /// Errors of transfers users committed on a DMA core by its registers
    /// (a fault, a commit the device refused): the user's own, reported to
    /// nobody else (its completion write never comes).
    pub(crate) dma_core_errors: Atomic<u64>,
}

impl Counters {
    fn new() -> Self {
        let z = || Atomic::new(0);
        Self {
            reg_reads: z(),
            reg_writes: z(),
            pte_writes: z(),
            pte_reads: z(),
            poll_timeouts: z(),
            kdma_timeouts: z(),
            dma_core_errors: z(),
            range_invalidations: z(),
            full_invalidations: z(),
            hop0_commits: z(),
            dma_maps: z(),
            dma_unmaps: z(),
            cs_jobs: z(),
            doorbells: z(),
            cq_interrupts: z(),
            cq_entries: z(),
            cs_done: z(),
            cs_halted: z(),
            cs_failed: z(),
            eq_events: z(),
        }
    }
}

/// Count one more. O(1).
pub(super) fn bump(c: &Atomic<u64>) {
    c.add(1, Relaxed);
}

/// The two BARs the driver maps and the device's liveness.
pub(crate) struct Mmio {
    /// BAR0: registers at `RMMIO_OFFSET`, SRAM at `SRAM_BAR_OFFSET`.
    bar0: DevresBar,
    /// BAR4: the DRAM window at `DRAM_PHYS_BASE`.
    bar4: DevresBar,
    /// Bytes of BAR4.
    bar4_len: u64,
    /// [`Life`] as a number.
    life: Atomic<u32>,
    /// The access counts.
    pub(crate) counters: Counters,
}

const ALIVE: u32 = 0;
const DEAD: u32 = 1;
const GONE: u32 = 2;

/// Bytes copied between two scheduling points.
const COPY_STEP: usize = 1 << 20;

impl Mmio {
    /// The mapped BARs of a live device.
    pub(crate) fn new(bar0: DevresBar, bar4: DevresBar, bar4_len: u64) -> Self {
        Self {
            bar0,
            bar4,
            bar4_len,
            life: Atomic::new(ALIVE),
            counters: Counters::new(),
        }
    }

    /// Where the device is in its life. O(1).
    pub(crate) fn life(&self) -> Life {
        match self.life.load(Relaxed) {
            ALIVE => Life::Alive,
            DEAD => Life::Dead,
            _ => Life::Gone,
        }
    }

    /// The driver is unbound (its BARs are revoked with it). O(1).
    pub(crate) fn set_gone(&self) {
        self.life.store(GONE, Relaxed);
    }

    /// `ENODEV` unless the device is alive.
    fn check_alive(&self) -> Result {
        match self.life() {
            Life::Alive => Ok(()),
            _ => Err(ENODEV),
        }
    }

    /// A read of `reg` returned all ones: the device is off the bus.
    fn set_dead(&self, reg: u32) {
        if self.life.cmpxchg(ALIVE, DEAD, Relaxed).is_ok() {
            pr_err!(
                "PCI Gaudi2: register {:#x} reads all ones: the device is gone (status: disabled)\n",
                reg
            );
        }
    }

    /// `RREG32(reg)`. `ENODEV` if the device is dead or unbound, or the read
    /// returns all ones (which marks it dead). O(1).
    pub(crate) fn rreg(&self, reg: u32) -> Result<u32> {
        let v = self.rreg_user(reg)?;
        if v == u32::MAX {
            self.set_dead(reg);
            return Err(ENODEV);
        }
        Ok(v)
    }

    /// `RREG32(reg)` of a register userspace may write (a user HW block):
    /// all ones is a value here, not a sign of a dead device. `ENODEV` if
    /// the device is dead or unbound. O(1).
    pub(crate) fn rreg_user(&self, reg: u32) -> Result<u32> {
        self.check_alive()?;
        let off = usize::try_from(bar0_offset(reg)).map_err(|_| EINVAL)?;
        let bar = self.bar0.try_access().ok_or(ENODEV)?;
        let v = (&*bar).try_read32(off)?;
        drop(bar);
        bump(&self.counters.reg_reads);
        Ok(v)
    }

    /// `WREG32(reg, val)`. `ENODEV` if the device is dead or unbound. O(1).
    pub(crate) fn wreg(&self, reg: u32, val: u32) -> Result {
        self.check_alive()?;
        let off = usize::try_from(bar0_offset(reg)).map_err(|_| EINVAL)?;
        let bar = self.bar0.try_access().ok_or(ENODEV)?;
        (&*bar).try_write32(val, off)?;
        bump(&self.counters.reg_writes);
        Ok(())
    }

    /// `RMWREG32_SHIFTED(reg, val, mask)` (common/habanalabs.h:2643): the bits
    /// of `mask` set to those of `val`, the others kept. O(1).
    pub(crate) fn rmw(&self, reg: u32, (val, mask): (u32, u32)) -> Result {
        let old = self.rreg(reg)?;
        self.wreg(reg, (old & !mask) | (val & mask))
    }

    /// `hl_poll_timeout(hdev, reg, val, done(val), sleep_us, timeout_us)`
    /// (common/habanalabs.h:2659-2698): read, and while `done` is false and
    /// `timeout_us` has not passed, sleep about `sleep_us` and read again.
    /// `ETIMEDOUT` (counted) if `done` never held; `ENODEV` as [`Self::rreg`].
    /// Sleeps.
    pub(crate) fn poll(
        &self,
        reg: u32,
        done: impl Fn(u32) -> bool,
        sleep_us: u64,
        timeout_us: u64,
    ) -> Result<u32> {
        let us = |v: u64| Delta::from_micros(i64::try_from(v).unwrap_or(i64::MAX));
        let r = read_poll_timeout(
            || self.rreg(reg),
            |v| done(*v),
            us(sleep_us),
            us(timeout_us),
        );
        if r == Err(ETIMEDOUT) {
            bump(&self.counters.poll_timeouts);
        }
        r
    }

    /// The BAR4 offset of `[addr, addr + len)` of device DRAM (BAR4 is the
    /// window at `base`, upstream `dram_bar_cur_addr`); `EINVAL` outside it.
    fn dram_offset(&self, base: u64, addr: u64, len: u64) -> Result<usize> {
        let off = addr.checked_sub(base).ok_or(EINVAL)?;
        if off.checked_add(len).is_none_or(|end| end > self.bar4_len) {
            return Err(EINVAL);
        }
        usize::try_from(off).map_err(|_| EINVAL)
    }

    /// `gaudi2_write_pte`: `writeq(val, BAR4 + addr - base)`
    /// (gaudi2/gaudi2.c:11895-11903). `ENODEV` when the BAR is revoked. O(1).
    pub(crate) fn write_pte(&self, base: u64, addr: u64, val: u64) -> Result {
        let off = self.dram_offset(base, addr, 8)?;
        let bar = self.bar4.try_access().ok_or(ENODEV)?;
        (&*bar).try_write64(val, off)?;
        bump(&self.counters.pte_writes);
        Ok(())
    }

    /// `gaudi2_read_pte`: `readq(BAR4 + addr - base)` (gaudi2/gaudi2.c:11882-11893). O(1).
    pub(crate) fn read_pte(&self, base: u64, addr: u64) -> Result<u64> {
        let off = self.dram_offset(base, addr, 8)?;
        let bar = self.bar4.try_access().ok_or(ENODEV)?;
        let v = (&*bar).try_read64(off)?;
        bump(&self.counters.pte_reads);
        Ok(v)
    }

    /// Copy DRAM `[addr, addr + buf.len())` (window at `base`) into `buf`.
    /// O(len), yielding once per MiB.
    pub(crate) fn dram_read(&self, base: u64, addr: u64, buf: &mut [u8]) -> Result {
        let off = self.dram_offset(base, addr, buf.len() as u64)?;
        copy_in(&self.bar4, off, buf)
    }

    /// Copy `data` to DRAM at `addr` (window at `base`). O(len).
    pub(crate) fn dram_write(&self, base: u64, addr: u64, data: &[u8]) -> Result {
        let off = self.dram_offset(base, addr, data.len() as u64)?;
        copy_out(&self.bar4, off, data)
    }

    /// Copy `buf.len()` bytes of BAR0 from offset `off` (SRAM). O(len).
    pub(crate) fn bar0_read(&self, off: u64, buf: &mut [u8]) -> Result {
        copy_in(&self.bar0, usize::try_from(off).map_err(|_| EINVAL)?, buf)
    }

    /// Copy `data` to BAR0 at offset `off` (SRAM). O(len).
    pub(crate) fn bar0_write(&self, off: u64, data: &[u8]) -> Result {
        copy_out(&self.bar0, usize::try_from(off).map_err(|_| EINVAL)?, data)
    }

    /// Fill `[off, off + len)` of BAR4 with the 64-bit little-endian `val`
    /// (both 8-aligned). O(len), yielding once per MiB.
    pub(crate) fn dram_fill(&self, base: u64, addr: u64, len: u64, val: u64) -> Result {
        let off = self.dram_offset(base, addr, len)?;
        fill64(
            &self.bar4,
            off,
            usize::try_from(len).map_err(|_| EINVAL)?,
            val,
        )
    }

    /// [`Self::dram_fill`] of BAR0 (SRAM), at BAR0 offset `off`.
    pub(crate) fn bar0_fill(&self, off: u64, len: u64, val: u64) -> Result {
        let off = usize::try_from(off).map_err(|_| EINVAL)?;
        fill64(
            &self.bar0,
            off,
            usize::try_from(len).map_err(|_| EINVAL)?,
            val,
        )
    }
}

/// The pieces of a copy of `len` bytes at BAR offset `off`: 8-byte accesses
/// where aligned, byte accesses at the edges. Lazy; O(1) per piece:
/// (offset in the BAR, offset in the buffer, 1 or 8).
fn pieces(off: usize, len: usize) -> impl Iterator<Item = (usize, usize, usize)> {
    let mut done = 0usize;
    core::iter::from_fn(move || {
        let left = len.checked_sub(done).filter(|&l| l > 0)?;
        let at = off.checked_add(done)?;
        let n = if at % 8 == 0 && left >= 8 { 8 } else { 1 };
        let piece = (at, done, n);
        done = done.checked_add(n)?;
        Some(piece)
    })
}

/// Copy from `bar` at `off` into `buf`, re-checking the BAR once per MiB.
fn copy_in(bar: &DevresBar, off: usize, buf: &mut [u8]) -> Result {
    for (k, chunk) in buf.chunks_mut(COPY_STEP).enumerate() {
        if k > 0 {
            sched::cond_resched();
        }
        let base = off.checked_add(k * COPY_STEP).ok_or(EINVAL)?;
        let b = bar.try_access().ok_or(ENODEV)?;
        let io = &*b;
        for (at, pos, n) in pieces(base, chunk.len()) {
            let dst = chunk.get_mut(pos..pos + n).ok_or(EINVAL)?;
            if n == 8 {
                dst.copy_from_slice(&io.try_read64(at)?.to_le_bytes());
            } else if let Some(d) = dst.first_mut() {
                *d = io.try_read8(at)?;
            }
        }
    }
    Ok(())
}

/// Copy `data` to `bar` at `off`, re-checking the BAR once per MiB.
fn copy_out(bar: &DevresBar, off: usize, data: &[u8]) -> Result {
    for (k, chunk) in data.chunks(COPY_STEP).enumerate() {
        if k > 0 {
            sched::cond_resched();
        }
        let base = off.checked_add(k * COPY_STEP).ok_or(EINVAL)?;
        let b = bar.try_access().ok_or(ENODEV)?;
        let io = &*b;
        for (at, pos, n) in pieces(base, chunk.len()) {
            let src = chunk.get(pos..pos + n).ok_or(EINVAL)?;
            if let Ok(q) = <[u8; 8]>::try_from(src) {
                io.try_write64(u64::from_le_bytes(q), at)?;
            } else if let Some(&s) = src.first() {
                io.try_write8(s, at)?;
            }
        }
    }
    Ok(())
}

/// Write `val` over `len` bytes of `bar` from `off` (both 8-aligned).
fn fill64(bar: &DevresBar, off: usize, len: usize, val: u64) -> Result {
    if off % 8 != 0 || len % 8 != 0 {
        return Err(EINVAL);
    }
    let mut done = 0usize;
    while done < len {
        if done > 0 {
            sched::cond_resched();
        }
        let step = COPY_STEP.min(len - done);
        let b = bar.try_access().ok_or(ENODEV)?;
        let io = &*b;
        let base = off.checked_add(done).ok_or(EINVAL)?;
        for q in (0..step).step_by(8) {
            io.try_write64(val, base.checked_add(q).ok_or(EINVAL)?)?;
        }
        drop(b);
        done += step;
    }
    Ok(())
}
