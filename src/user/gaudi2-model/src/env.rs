// SPDX-License-Identifier: GPL-2.0

//! The model's [`Env`] in this process: host memory through the DMA table,
//! DRAM and SRAM through the memfds QEMU maps into the BARs, MSI-X through
//! the eventfds of `SET_IRQS`, time from `CLOCK_MONOTONIC`.

use gaudi2_model::{regs, BusFault, Env};
use rustix::time::{clock_gettime, ClockId};

use crate::dma::{DmaTable, FaultKind};
use crate::event;
use crate::irq::Msix;
use crate::mem::SharedMem;

/// What went through the environment, for `--stats`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EnvCounts {
    /// Bytes the device read from host memory.
    pub dma_read_bytes: u64,
    /// Bytes the device wrote to host memory.
    pub dma_write_bytes: u64,
    /// Device accesses to host memory that faulted.
    pub dma_faults: u64,
    /// Device accesses to DRAM or SRAM past their end.
    pub mem_faults: u64,
    /// MSI-X vectors raised (eventfd written).
    pub msix_raised: u64,
    /// MSI-X vectors dropped (no eventfd assigned).
    pub msix_dropped: u64,
}

/// The world the model runs in, as this server provides it.
pub struct HostEnv {
    /// Host memory the guest mapped for the device.
    pub dma: DmaTable,
    /// SRAM: the BAR0 memfd's window at `SRAM_OFFSET`.
    pub sram: SharedMem,
    /// DRAM: the BAR4 memfd.
    pub dram: SharedMem,
    /// The MSI-X eventfds.
    pub msix: Msix,
    /// Bus mastering is on (the config space's command register): DMA
    /// with it off faults, as a PCI function issues no requests then.
    pub bus_master: bool,
    /// Counters.
    pub counts: EnvCounts,
    /// The bound on DRAM the engines make resident.
    pub dram_budget: DramBudget,
}

/// Bytes of a DRAM chunk the budget counts.
const CHUNK: u64 = 2 << 20;

/// How much of the sparse DRAM memfd the engines may make resident: the
/// 2 MiB chunks they wrote, at most `max` (`--dram-resident-mib`). An
/// engine write to a new chunk past the bound is a device-side fault (the
/// CS ends ABORTED), as the simulation's bounded DRAM backing (issue 30):
/// the host's memory is not the guest's to take. CPU writes through BAR4
/// (QEMU maps the memfd) are not counted; the driver writes little there
/// (PTEs, debugfs). A chunk stays counted once written.
#[derive(Debug, Default)]
pub struct DramBudget {
    written: Vec<u64>,
    used: u64,
    max: u64,
}

impl DramBudget {
    /// A bound of `max_bytes` (0: none) over `dram_bytes` of DRAM.
    pub fn new(dram_bytes: u64, max_bytes: u64) -> Self {
        let chunks = dram_bytes.div_ceil(CHUNK);
        Self {
            written: vec![0; usize::try_from(chunks.div_ceil(64)).unwrap_or(0)],
            used: 0,
            max: max_bytes / CHUNK,
        }
    }

    /// Whether `len` bytes at DRAM offset `off` may be written (counting
    /// the new chunks). O(chunks of the write).
    pub fn admit(&mut self, off: u64, len: usize) -> bool {
        if self.max == 0 || len == 0 {
            return true;
        }
        let last = off.saturating_add(len as u64 - 1) / CHUNK;
        for c in off / CHUNK..=last {
            let (w, b) = (usize::try_from(c / 64).unwrap_or(usize::MAX), c % 64);
            let Some(word) = self.written.get_mut(w) else {
                return false;
            };
            if *word & (1 << b) == 0 {
                if self.used >= self.max {
                    return false;
                }
                *word |= 1 << b;
                self.used += 1;
            }
        }
        true
    }

    /// Bytes made resident so far.
    pub fn used_bytes(&self) -> u64 {
        self.used * CHUNK
    }
}

fn add(c: &mut u64, n: usize) {
    *c = c.saturating_add(n as u64);
}

impl HostEnv {
    /// Count and log a faulting DMA of `len` bytes.
    fn dma_fault(&mut self, dir: &str, f: crate::dma::DmaFault, len: usize) -> BusFault {
        add(&mut self.counts.dma_faults, 1);
        let why = match f.kind {
            FaultKind::Unmapped => "not mapped",
            FaultKind::NoFile => "mapped without a shared file",
            FaultKind::Denied => "not permitted by the map",
        };
        event!(
            "dma.fault",
            "device {dir} of {len} bytes faults at IOVA {:#x}: {why}",
            f.addr
        );
        BusFault { addr: f.addr }
    }

    /// Count and log a DMA attempted with bus mastering off.
    fn master_off(&mut self, dir: &str, addr: u64, len: usize) -> BusFault {
        add(&mut self.counts.dma_faults, 1);
        event!(
            "dma.master_off",
            "device {dir} of {len} bytes at IOVA {addr:#x}: bus mastering is off"
        );
        BusFault { addr }
    }

    /// Count and log an access past DRAM or SRAM.
    fn mem_fault(&mut self, what: &str, pa: u64, len: usize) -> BusFault {
        add(&mut self.counts.mem_faults, 1);
        event!(
            "mem.fault",
            "device access of {len} bytes at {what} {pa:#x} is outside it"
        );
        BusFault { addr: pa }
    }
}

/// `pa - base` if `pa` is at or above `base`.
fn offset(pa: u64, base: u64) -> Option<u64> {
    pa.checked_sub(base)
}

impl Env for HostEnv {
    fn dma_read(&mut self, addr: u64, buf: &mut [u8]) -> Result<(), BusFault> {
        if !self.bus_master {
            return Err(self.master_off("read", addr, buf.len()));
        }
        match self.dma.read(addr, buf) {
            Ok(()) => {
                add(&mut self.counts.dma_read_bytes, buf.len());
                Ok(())
            }
            Err(f) => Err(self.dma_fault("read", f, buf.len())),
        }
    }

    fn dma_write(&mut self, addr: u64, data: &[u8]) -> Result<(), BusFault> {
        if !self.bus_master {
            return Err(self.master_off("write", addr, data.len()));
        }
        match self.dma.write(addr, data) {
            Ok(()) => {
                add(&mut self.counts.dma_write_bytes, data.len());
                Ok(())
            }
            Err(f) => Err(self.dma_fault("write", f, data.len())),
        }
    }

    fn dram_read(&mut self, pa: u64, buf: &mut [u8]) -> Result<(), BusFault> {
        let r = offset(pa, regs::DRAM_PHYS_BASE)
            .ok_or(())
            .and_then(|o| self.dram.read(o, buf).map_err(|_| ()));
        r.map_err(|()| self.mem_fault("DRAM", pa, buf.len()))
    }

    fn dram_write(&mut self, pa: u64, data: &[u8]) -> Result<(), BusFault> {
        let budget = &mut self.dram_budget;
        let r = offset(pa, regs::DRAM_PHYS_BASE)
            .filter(|&o| budget.admit(o, data.len()))
            .ok_or(())
            .and_then(|o| self.dram.write(o, data).map_err(|_| ()));
        r.map_err(|()| self.mem_fault("DRAM", pa, data.len()))
    }

    fn sram_read(&mut self, pa: u64, buf: &mut [u8]) -> Result<(), BusFault> {
        let r = offset(pa, regs::SRAM_BASE_ADDR)
            .ok_or(())
            .and_then(|o| self.sram.read(o, buf).map_err(|_| ()));
        r.map_err(|()| self.mem_fault("SRAM", pa, buf.len()))
    }

    fn sram_write(&mut self, pa: u64, data: &[u8]) -> Result<(), BusFault> {
        let r = offset(pa, regs::SRAM_BASE_ADDR)
            .ok_or(())
            .and_then(|o| self.sram.write(o, data).map_err(|_| ()));
        r.map_err(|()| self.mem_fault("SRAM", pa, data.len()))
    }

    fn msix(&mut self, vector: u16) {
        match self.msix.raise(vector) {
            Ok(()) => add(&mut self.counts.msix_raised, 1),
            Err(_) => {
                add(&mut self.counts.msix_dropped, 1);
                event!(
                    "msix.dropped",
                    "MSI-X vector {vector} has no eventfd: dropped"
                );
            }
        }
    }

    fn now_ns(&mut self) -> u64 {
        let t = clock_gettime(ClockId::Monotonic);
        let secs = u64::try_from(t.tv_sec).unwrap_or(0);
        let nsec = u64::try_from(t.tv_nsec).unwrap_or(0);
        secs.saturating_mul(1_000_000_000).saturating_add(nsec)
    }
}

#[cfg(test)]
mod budget_tests {
    use super::DramBudget;

    #[test]
    fn the_budget_counts_new_chunks_and_refuses_past_it() {
        let mut b = DramBudget::new(64 << 20, 4 << 20);
        assert!(b.admit(0, 4096));
        assert!(b.admit(4096, 2 << 20), "crosses into the second chunk");
        assert_eq!(b.used_bytes(), 4 << 20);
        assert!(b.admit(100, 8), "chunks already written stay admitted");
        assert!(!b.admit(8 << 20, 1), "a third chunk is past the bound");
        assert!(!b.admit(64 << 20, 1), "past the DRAM");
        let mut free = DramBudget::new(64 << 20, 0);
        assert!(free.admit(60 << 20, 4 << 20));
    }
}
