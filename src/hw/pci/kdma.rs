// SPDX-License-Identifier: GPL-2.0

//! The KDMA on a PCI Gaudi2: debugfs `dma_size` as upstream reads device
//! memory (`gaudi2_debugfs_read_dma`, gaudi2/gaudi2.c:11027-11125, and
//! `gaudi2_send_job_to_kdma`, :7263-7325).
//!
//! Per 2 MiB: the source, the destination, the transfer size, the
//! completion address and data in the KDMA's context registers, then
//! `COMMIT` (`LIN | WR_COMP_EN`); the completion word is polled every 1 ms
//! up to `KDMA_TIMEOUT_USEC` (1 s); on a timeout `CFG_1.HALT` and
//! `ETIMEDOUT` (the caller answers `EIO`). The KDMA runs with the compute
//! context's ASID and the MMU on (`gaudi2_kdma_set_mmbp_asid`), and goes
//! back to the kernel ASID with the MMU bypassed after.
//!
//! Two differences from upstream, both for a device without firmware or a
//! second completion queue here:
//!
//! - The bounce buffer (2 MiB and the completion word, coherent DMA memory)
//!   is allocated once at probe, not per read, and freed at unbind.
//! - Upstream maps it into the context's host VA range (`hl_mmu_map_contiguous`)
//!   and gives the KDMA that VA; here the KDMA writes to its bus address,
//!   which Gaudi2's fabric passes to the host untranslated (the host
//!   physical range, `HOST_PHYS_BASE_0`), so no PMMU mapping or
//!   invalidation is made. Its completion goes to a word of that buffer,
//!   not to a SOB whose monitor writes CQ 1 (the model's monitors are the
//!   CS completion slots, `queues.rs`).
//!
//! A fault of the transfer (an unmapped page) is the model's MMU event and
//! then its KDMA core event, which the event queue's handler takes as the
//! KDMA's (`queues.rs`); the read then times out, as upstream's.

use super::{regs::bump, PciGaudi2};
use crate::asic::gaudi2_regs::kdma as k;
use crate::ffi::cpu_dma::CpuDma;
use kernel::{
    device::{Bound, Device},
    io::poll::read_poll_timeout,
    prelude::*,
    time::Delta,
};

/// Bytes per KDMA job (upstream `SZ_2M`).
pub(crate) const KDMA_CHUNK: usize = 2 << 20;
/// The completion word's offset in the buffer.
const COMP_OFF: usize = KDMA_CHUNK;
/// Between two polls of a job's completion word (host memory: a poll
/// costs no bus traffic). Upstream polls `KDMA_CFG_1` every 1 ms; a job of
/// the register restore takes well under that, and 134 of them run per
/// context open.
const KDMA_POLL_US: i64 = 50;
/// `KDMA_TIMEOUT_USEC` (gaudi2/gaudi2.c:87).
const KDMA_TIMEOUT_US: i64 = 1_000_000;

impl PciGaudi2 {
    /// The KDMA's bounce buffer. Probe only; sleeps.
    pub(super) fn init_kdma(&self, dev: &Device<Bound>) -> Result {
        let mem = CpuDma::new(dev, KDMA_CHUNK + 64)?;
        *self.kdma.lock() = Some(mem);
        self.kdma_set_mmbp_asid(true, 0)
    }

    /// `gaudi2_kdma_set_mmbp_asid`: the read and write ASIDs, and the MMU
    /// bypass of both. O(1).
    fn kdma_set_mmbp_asid(&self, bypass: bool, asid: u32) -> Result {
        self.mmio.wreg(k::AXUSER_HB_ASID, asid << 16 | asid)?;
        self.mmio
            .wreg(k::AXUSER_HB_MMU_BP, if bypass { 0x11 } else { 0 })
    }

    /// Read `buf.len()` bytes at the device address `addr` (a DRAM VA of
    /// `asid`, or SRAM) with the KDMA. `ENODEV` once unbound or dead,
    /// `ETIMEDOUT` when a job does not complete (a fault). Sleeps; O(len).
    pub(crate) fn kdma_read(&self, asid: u32, addr: u64, buf: &mut [u8]) -> Result {
        let guard = self.kdma.lock();
        let mem = guard.as_ref().ok_or(ENODEV)?;
        self.alive()?;
        self.kdma_set_mmbp_asid(false, asid)?;
        let mut r = Ok(());
        let mut pos = 0u64;
        for chunk in buf.chunks_mut(KDMA_CHUNK) {
            r = addr
                .checked_add(pos)
                .ok_or(EINVAL)
                .and_then(|src| self.kdma_job(mem, src, chunk.len()))
                .and_then(|()| mem.read(0, chunk));
            if r.is_err() {
                break;
            }
            pos = pos.saturating_add(chunk.len() as u64);
        }
        // Back to the kernel ASID, bypassed (even after a failure).
        let _ = self.kdma_set_mmbp_asid(true, 0);
        r
    }

    /// `gaudi2_send_job_to_kdma` of `len` bytes from `src` into `mem`.
    fn kdma_job(&self, mem: &CpuDma, src: u64, len: usize) -> Result {
        self.kdma_commit(mem, (src, mem.bus()), len, k::COMMIT_LIN)
    }

    /// Run `f` with the KDMA held: one lock and one liveness check for a
    /// series of jobs (a context's restore, [`super::user_state`]).
    /// `ENODEV` once unbound or dead. Sleeps.
    pub(crate) fn with_kdma(&self, f: impl FnOnce(&Kdma<'_>) -> Result) -> Result {
        let guard = self.kdma.lock();
        let mem = guard.as_ref().ok_or(ENODEV)?;
        self.alive()?;
        f(&Kdma { hw: self, mem })
    }

    /// One KDMA job of `len` bytes `src` -> `dst` with `COMMIT` flags
    /// `commit` (plus the completion write into `mem`), polled to its end.
    fn kdma_commit(&self, mem: &CpuDma, (src, dst): (u64, u64), len: usize, commit: u32) -> Result {
        let m = &self.mmio;
        let comp = mem.bus() + COMP_OFF as u64;
        mem.write(COMP_OFF, &[0; 4])?;
        let size = u32::try_from(len).map_err(|_| EINVAL)?;
        for (reg, val) in [
            (k::SRC_BASE_LO, src as u32),
            (k::SRC_BASE_HI, (src >> 32) as u32),
            (k::DST_BASE_LO, dst as u32),
            (k::DST_BASE_HI, (dst >> 32) as u32),
            (k::WR_COMP_ADDR_LO, comp as u32),
            (k::WR_COMP_ADDR_HI, (comp >> 32) as u32),
            (k::WR_COMP_WDATA, 1),
            (k::DST_TSIZE_0, size),
            (k::COMMIT, commit | k::COMMIT_WR_COMP_EN),
        ] {
            m.wreg(reg, val)?;
        }
        let done = read_poll_timeout(
            || mem.read32(COMP_OFF),
            |v| *v == 1,
            Delta::from_micros(KDMA_POLL_US),
            Delta::from_micros(KDMA_TIMEOUT_US),
        );
        if done.is_err() {
            pr_err!("PCI Gaudi2: timeout while waiting for KDMA to be idle\n");
            // Halted, then released for the next job (upstream resets the
            // device after this; the halt bit holds while set).
            let _ = m.wreg(k::CFG_1, 1);
            let _ = m.wreg(k::CFG_1, 0);
            bump(&m.counters.kdma_timeouts);
            return Err(ETIMEDOUT);
        }
        Ok(())
    }
}

/// The KDMA, held for a series of jobs ([`PciGaudi2::with_kdma`]).
pub(crate) struct Kdma<'a> {
    hw: &'a PciGaudi2,
    mem: &'a CpuDma,
}

impl Kdma<'_> {
    /// Fill `bytes` at the device address `dst` with the u32 `val` (a
    /// memset job, `gaudi2_send_job_to_kdma(.., is_memset)`), the KDMA
    /// with the kernel ASID and the MMU bypassed: how the driver writes
    /// ranges of registers (`dst` in the register space, `CFG_BASE` + `mm*`),
    /// where upstream's `gaudi2_memset_device_lbw` writes them one by one
    /// (one KDMA job instead of `bytes / 4` MMIO writes over the bus).
    /// `ENODEV` once unbound or dead, `ETIMEDOUT`. Sleeps; O(1) jobs.
    pub(crate) fn memset(&self, dst: u64, bytes: u32, val: u32) -> Result {
        let fill = u64::from(val) << 32 | u64::from(val);
        self.hw.kdma_commit(
            self.mem,
            (fill, dst),
            bytes as usize,
            k::COMMIT_LIN | k::COMMIT_MEM_SET,
        )
    }

    /// Write `data` (at most [`KDMA_CHUNK`] bytes) at the device address
    /// `dst` with one KDMA job from the bounce buffer, the KDMA with the
    /// kernel ASID and the MMU bypassed: how the driver writes a range of
    /// registers holding different values ([`Self::memset`] fills one).
    /// `EINVAL` for more than a chunk, `ENODEV` once unbound or dead,
    /// `ETIMEDOUT`. Sleeps; O(len) bytes copied, one job.
    pub(crate) fn write(&self, dst: u64, data: &[u8]) -> Result {
        if data.len() > KDMA_CHUNK {
            return Err(EINVAL);
        }
        self.mem.write(0, data)?;
        self.hw
            .kdma_commit(self.mem, (self.mem.bus(), dst), data.len(), k::COMMIT_LIN)
    }
}
