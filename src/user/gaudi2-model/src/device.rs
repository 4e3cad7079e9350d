// SPDX-License-Identifier: GPL-2.0

//! The device behind the socket: the model core, its environment and the
//! PCI config space, and the decoding of each trapped BAR access.
//!
//! BAR0 (256 MiB): `[CFG_REGS_OFFSET, + CFG_SIZE)` are the registers
//! (access at offset `o` is register `o - CFG_REGS_OFFSET`, 32 bits each, a
//! 64-bit access is two 32-bit ones, low first); `[SRAM_OFFSET, +48 MiB)`
//! is SRAM (normally mmap'ed by QEMU, so accesses arrive here only if that
//! mapping failed); anything else reads 0 and drops writes. BAR2: the MSI-X
//! table and PBA are emulated by QEMU; the PBA reads it forwards read 0
//! (pending bits of masked vectors are QEMU's, see `irq`). BAR4: DRAM
//! (mmap'ed by QEMU; trapped accesses are served from the same memfd).

use std::io;

use gaudi2_model::{regs, Config, Gaudi2};
use vfio_bindings::bindings::vfio::{
    VFIO_PCI_BAR0_REGION_INDEX, VFIO_PCI_BAR2_REGION_INDEX, VFIO_PCI_BAR4_REGION_INDEX,
    VFIO_PCI_CONFIG_REGION_INDEX,
};

use crate::dma::DmaTable;
use crate::env::HostEnv;
use crate::event;
use crate::irq::Msix;
use crate::mem::SharedMem;
use crate::pci::{self, ConfigSpace};
use crate::stats::{self, Counters, Snapshot};

/// Where a BAR0 access lands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Bar0 {
    /// The register space, at this register address.
    Regs(u32),
    /// SRAM, at this offset.
    Sram(u64),
    /// Nothing.
    Hole,
}

/// Decode a BAR0 access of `len` bytes at `off`.
fn decode(off: u64, len: usize) -> Bar0 {
    let Some(end) = off.checked_add(len as u64) else {
        return Bar0::Hole;
    };
    let inside = |start: u64, size: u64| off >= start && end <= start + size;
    if inside(pci::SRAM_OFFSET, pci::SRAM_SIZE) {
        Bar0::Sram(off - pci::SRAM_OFFSET)
    } else if inside(pci::CFG_REGS_OFFSET, regs::CFG_SIZE) {
        // CFG_SIZE is 128 MiB, so the register address fits in 32 bits.
        u32::try_from(off - pci::CFG_REGS_OFFSET).map_or(Bar0::Hole, Bar0::Regs)
    } else {
        Bar0::Hole
    }
}

/// One Gaudi2 as served over vfio-user.
pub struct Device {
    /// On the heap: about 360 KiB.
    model: Box<Gaudi2>,
    cfg: Config,
    env: HostEnv,
    config: ConfigSpace,
    counts: Counters,
}

impl Device {
    /// A booted Gaudi2 with `dram_bytes` of DRAM (a power of two): its
    /// memfds created, nothing mapped for DMA, no MSI-X eventfd yet.
    pub fn new(dram_bytes: u64) -> io::Result<Self> {
        let cfg = Config::with_dram(dram_bytes);
        let sram = SharedMem::create(
            "gaudi2-bar0",
            pci::BAR0_SIZE,
            pci::SRAM_OFFSET,
            pci::SRAM_SIZE,
        )?;
        let dram = SharedMem::create("gaudi2-dram", dram_bytes, 0, dram_bytes)?;
        let env = HostEnv {
            dma: DmaTable::new(),
            sram,
            dram,
            msix: Msix::new(pci::MSIX_VECTORS),
            bus_master: false,
            counts: Default::default(),
            dram_budget: crate::env::DramBudget::new(dram_bytes, 0),
        };
        Ok(Self {
            model: Box::new(Gaudi2::new(&cfg)),
            cfg,
            env,
            config: ConfigSpace::new(dram_bytes),
            counts: Counters::default(),
        })
    }

    /// The environment (DMA table, memories, MSI-X).
    pub fn env(&mut self) -> &mut HostEnv {
        &mut self.env
    }

    /// The server's counters.
    pub fn counts(&mut self) -> &mut Counters {
        &mut self.counts
    }

    /// A trapped read of `data.len()` bytes at `off` of `region`. Never
    /// fails: what has no backing reads 0. O(len).
    pub fn region_read(&mut self, region: u32, off: u64, data: &mut [u8]) {
        data.fill(0);
        match region {
            VFIO_PCI_CONFIG_REGION_INDEX => {
                self.counts.config += 1;
                self.config.read(off, data);
            }
            VFIO_PCI_BAR0_REGION_INDEX => self.bar0_read(off, data),
            VFIO_PCI_BAR2_REGION_INDEX => {}
            VFIO_PCI_BAR4_REGION_INDEX => {
                self.trapped_mem("BAR4", off, data.len());
                if self.env.dram.read(off, data).is_err() {
                    data.fill(0);
                }
            }
            _ => event!(
                "region.other",
                "read of region {region} at {off:#x}: reads 0"
            ),
        }
    }

    /// A trapped write of `data` at `off` of `region`. Never fails: what
    /// has no backing drops it. O(len).
    pub fn region_write(&mut self, region: u32, off: u64, data: &[u8]) {
        match region {
            VFIO_PCI_CONFIG_REGION_INDEX => {
                self.counts.config += 1;
                self.config.write(off, data);
                self.env.bus_master = self.config.bus_master();
            }
            VFIO_PCI_BAR0_REGION_INDEX => self.bar0_write(off, data),
            VFIO_PCI_BAR2_REGION_INDEX => {}
            VFIO_PCI_BAR4_REGION_INDEX => {
                self.trapped_mem("BAR4", off, data.len());
                let _ = self.env.dram.write(off, data);
            }
            _ => event!(
                "region.other",
                "write of region {region} at {off:#x}: dropped"
            ),
        }
    }

    /// Count (and log, bounded) a memory access that missed the mmap.
    fn trapped_mem(&mut self, bar: &str, off: u64, len: usize) {
        self.counts.trapped_mem += 1;
        event!(
            "bar.trapped_mem",
            "{bar} memory access of {len} bytes at {off:#x} came through the socket"
        );
    }

    fn bar0_read(&mut self, off: u64, data: &mut [u8]) {
        match decode(off, data.len()) {
            Bar0::Sram(o) => {
                self.trapped_mem("BAR0 SRAM", off, data.len());
                if self.env.sram.read(o, data).is_err() {
                    data.fill(0);
                }
            }
            Bar0::Regs(reg) if reg % 4 == 0 && data.len() % 4 == 0 => {
                for (i, chunk) in data.chunks_exact_mut(4).enumerate() {
                    let v = self.reg_read(reg + 4 * i as u32);
                    chunk.copy_from_slice(&v.to_le_bytes());
                }
            }
            Bar0::Regs(reg) if (reg % 4) as usize + data.len() <= 4 => {
                // A narrow read of one register: its bytes, as byte enables give.
                let v = self.reg_read(reg & !3).to_le_bytes();
                let at = (reg % 4) as usize;
                if let Some(src) = v.get(at..at + data.len()) {
                    data.copy_from_slice(src);
                }
            }
            Bar0::Regs(reg) => self.bad_access("read", reg, data.len()),
            Bar0::Hole => self.counts.bar0_hole += 1,
        }
    }

    fn bar0_write(&mut self, off: u64, data: &[u8]) {
        match decode(off, data.len()) {
            Bar0::Sram(o) => {
                self.trapped_mem("BAR0 SRAM", off, data.len());
                let _ = self.env.sram.write(o, data);
            }
            Bar0::Regs(reg) if reg % 4 == 0 && data.len() % 4 == 0 => {
                for (i, chunk) in data.chunks_exact(4).enumerate() {
                    let v = u32::from_le_bytes(chunk.try_into().unwrap_or([0; 4]));
                    self.reg_write(reg + 4 * i as u32, v);
                }
            }
            // Registers take whole 32-bit writes only.
            Bar0::Regs(reg) => self.bad_access("write", reg, data.len()),
            Bar0::Hole => self.counts.bar0_hole += 1,
        }
    }

    fn bad_access(&mut self, dir: &str, reg: u32, len: usize) {
        self.counts.bar0_bad += 1;
        event!(
            "bar0.bad_access",
            "{len}-byte register {dir} at {reg:#x}: not a 32-bit access, ignored"
        );
    }

    /// Read register `reg` of the model, counted by block.
    pub fn reg_read(&mut self, reg: u32) -> u32 {
        if let Some(b) = self.counts.reg_reads.get_mut(stats::block(reg)) {
            *b = b.saturating_add(1);
        }
        self.model.reg_read(&mut self.env, reg)
    }

    /// Write register `reg` of the model, counted by block.
    pub fn reg_write(&mut self, reg: u32, val: u32) {
        if let Some(b) = self.counts.reg_writes.get_mut(stats::block(reg)) {
            *b = b.saturating_add(1);
        }
        self.log_halt(reg, val);
        self.model.reg_write(&mut self.env, reg, val);
    }

    /// A `GLBL_CFG1` write that flushes a stream with work (the driver's
    /// halt: a CS timed out or was aborted): what the stream's CP and the
    /// QMAN's lower CP were doing, on the model's log (one line each), so
    /// a CS that should have completed can be followed to the packet it
    /// stopped at. O(streams).
    fn log_halt(&self, reg: u32, val: u32) {
        let Some((m, off)) = gaudi2_model::qman::decode(reg) else {
            return;
        };
        if off != gaudi2_model::regs::qm::GLBL_CFG1 || val == 0 {
            return;
        }
        let Some(qm) = self.model.qman(m) else {
            return;
        };
        for c in 0..gaudi2_model::qman::CPS {
            let flushed = c == gaudi2_model::qman::LOWER || val & (1 << (16 + c)) != 0;
            let Some(cp) = qm.cp(c).filter(|cp| flushed && cp.depth > 0) else {
                continue;
            };
            eprintln!(
                "gaudi2-model: halt: QMAN {m} CP {c}: depth {}, fenced {}, stalled {}, halted {}, fences {:?}, frame {:x?}, pred {:#x}",
                cp.depth,
                cp.fenced,
                cp.stalled,
                cp.halted,
                cp.fence,
                cp.top(),
                cp.pred
            );
        }
    }

    /// Engine work is queued.
    pub fn pending(&self) -> bool {
        self.model.pending()
    }

    /// Run one bounded slice of engine work; true while more is left.
    pub fn step(&mut self) -> bool {
        self.model.step(&mut self.env)
    }

    /// A device reset (`VFIO_USER_DEVICE_RESET`): the model as after
    /// power-up and boot, the command register cleared (no memory decode,
    /// no bus mastering). Memories keep their bytes (a reset does not
    /// clear HBM), DMA maps and eventfds are QEMU's to change.
    pub fn reset(&mut self) {
        self.counts.resets += 1;
        *self.model = Gaudi2::new(&self.cfg);
        self.config.reset();
        self.env.bus_master = false;
    }

    /// The model's counters.
    #[cfg(test)]
    pub fn model_stats(&self) -> gaudi2_model::Stats {
        self.model.stats()
    }

    /// The `--stats` text. O(blocks).
    pub fn stats_text(&self) -> String {
        let mut text = stats::render(&Snapshot {
            server: &self.counts,
            env: &self.env.counts,
            model: self.model.stats(),
            dma_live: (
                self.env.dma.len(),
                self.env.dma.bytes(),
                self.env.dma.files(),
            ),
            msix_assigned: self.env.msix.assigned(),
        });
        text.push_str(&format!(
            "dram_resident_bytes {}\n",
            self.env.dram_budget.used_bytes()
        ));
        text
    }
}

/// Lock the device, whatever a panicking holder left (its state is plain
/// data, valid between any two accesses).
pub fn lock(dev: &std::sync::Mutex<Device>) -> std::sync::MutexGuard<'_, Device> {
    dev.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests;
