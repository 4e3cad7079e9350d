// SPDX-License-Identifier: GPL-2.0

//! Counters for `--stats`: register traffic by block, and what the device
//! did (doorbells, DMA, faults, MSI-X), written as `key value` lines on
//! exit and on SIGUSR1.
//!
//! Block bases are upstream's (`include/gaudi2/asic_reg/
//! gaudi2_blocks_linux_driver.h`: PSOC global conf :22684, PDMA0/1 QM and
//! core :23119,23188,23245,23314, CPU_IF :23368, PMMU :23410-23416, DCORE0
//! sync manager :8455-8494) and the model's (`regs`) for the HMMUs.

use std::fmt::Write as _;
use std::io;
use std::path::Path;

use gaudi2_model::{regs, Stats};

use crate::env::EnvCounts;

/// Named register blocks: (name, first register, end).
const RANGES: [(&str, u32, u32); 8] = [
    ("psoc", 0x4C4_B000, 0x4C4_C000),
    ("pdma0_qm", 0x4C8_A000, 0x4C8_B000),
    ("pdma0_core", 0x4C8_B000, 0x4C8_C000),
    ("pdma1_qm", 0x4C9_A000, 0x4C9_B000),
    ("pdma1_core", 0x4C9_B000, 0x4C9_C000),
    ("cpu_if", 0x4CC_1000, 0x4CC_2000),
    (
        "pmmu",
        regs::PMMU_MMU_BASE,
        regs::PMMU_MMU_BASE + regs::MMU_SPAN,
    ),
    ("sm", 0x410_0000, 0x412_0000),
];

/// Index of the HMMU block in the per-block counters.
const HMMU: usize = RANGES.len();
/// Index of "any other register".
const OTHER: usize = RANGES.len() + 1;
/// Number of blocks counted.
pub const BLOCKS: usize = RANGES.len() + 2;

/// The name of block `i`.
fn name(i: usize) -> &'static str {
    match RANGES.get(i) {
        Some((n, _, _)) => n,
        None if i == HMMU => "hmmu",
        None => "other",
    }
}

/// The block register `reg` belongs to. O(blocks).
pub fn block(reg: u32) -> usize {
    if let Some(i) = RANGES.iter().position(|&(_, s, e)| (s..e).contains(&reg)) {
        return i;
    }
    if is_hmmu(reg) {
        return HMMU;
    }
    OTHER
}

/// `reg` is in one of the 16 HMMUs' MMU or STLB block
/// (`mmDCORE{d}_HMMU{h}_MMU_BASE` = HMMU0 + d * DCORE_OFFSET + h *
/// DCORE_HMMU_OFFSET, each `MMU_SPAN` long).
fn is_hmmu(reg: u32) -> bool {
    let Some(rel) = reg.checked_sub(regs::HMMU0_MMU_BASE) else {
        return false;
    };
    let (dcore, within) = (rel / regs::DCORE_OFFSET, rel % regs::DCORE_OFFSET);
    let (hmmu, inner) = (
        within / regs::DCORE_HMMU_OFFSET,
        within % regs::DCORE_HMMU_OFFSET,
    );
    dcore < regs::DCORES && hmmu < regs::HMMUS_PER_DCORE && inner < regs::MMU_SPAN
}

/// The server's own counters (the model and the environment keep theirs).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    /// Register reads, by block.
    pub reg_reads: [u64; BLOCKS],
    /// Register writes, by block.
    pub reg_writes: [u64; BLOCKS],
    /// BAR0 accesses outside registers and SRAM (read 0, writes dropped).
    pub bar0_hole: u64,
    /// Register accesses of a size or alignment registers do not have.
    pub bar0_bad: u64,
    /// SRAM/DRAM accesses that came through the socket, not the mmap.
    pub trapped_mem: u64,
    /// Config space reads and writes.
    pub config: u64,
    /// `DMA_MAP` messages applied.
    pub dma_maps: u64,
    /// `DMA_UNMAP` messages applied.
    pub dma_unmaps: u64,
    /// Bytes those unmaps removed.
    pub dma_unmapped_bytes: u64,
    /// `DMA_MAP` messages without a file (BARs, ROMs: not reachable).
    pub dma_maps_without_file: u64,
    /// `DMA_MAP` messages refused.
    pub dma_map_errors: u64,
    /// Device resets.
    pub resets: u64,
}

/// Everything `--stats` writes.
pub struct Snapshot<'a> {
    /// The server's counters.
    pub server: &'a Counters,
    /// The environment's counters.
    pub env: &'a EnvCounts,
    /// The model's counters.
    pub model: Stats,
    /// Live DMA entries, their bytes, and the files they map.
    pub dma_live: (usize, u64, usize),
    /// MSI-X vectors with an eventfd.
    pub msix_assigned: usize,
}

/// `key value` lines, one counter each. O(blocks).
pub fn render(s: &Snapshot<'_>) -> String {
    let mut out = String::new();
    let mut kv = |k: &str, v: u64| {
        let _ = writeln!(out, "{k} {v}");
    };
    let (c, e, m) = (s.server, s.env, &s.model);
    kv("reg_reads", c.reg_reads.iter().sum());
    kv("reg_writes", c.reg_writes.iter().sum());
    for i in 0..BLOCKS {
        kv(&format!("reg_reads.{}", name(i)), c.reg_reads[i]);
        kv(&format!("reg_writes.{}", name(i)), c.reg_writes[i]);
    }
    kv("doorbells", m.doorbells);
    kv("dma_read_bytes", e.dma_read_bytes);
    kv("dma_write_bytes", e.dma_write_bytes);
    kv("dma_faults", e.dma_faults);
    kv("mem_faults", e.mem_faults);
    kv("msix_raised", e.msix_raised);
    kv("msix_dropped", e.msix_dropped);
    kv("msix_assigned", s.msix_assigned as u64);
    kv("dma_maps", c.dma_maps);
    kv("dma_unmaps", c.dma_unmaps);
    kv("dma_unmapped_bytes", c.dma_unmapped_bytes);
    kv("dma_maps_without_file", c.dma_maps_without_file);
    kv("dma_map_errors", c.dma_map_errors);
    kv("dma_live_entries", s.dma_live.0 as u64);
    kv("dma_live_bytes", s.dma_live.1);
    kv("dma_live_files", s.dma_live.2 as u64);
    kv("bar0_hole_accesses", c.bar0_hole);
    kv("bar0_bad_accesses", c.bar0_bad);
    kv("trapped_mem_accesses", c.trapped_mem);
    kv("config_accesses", c.config);
    kv("resets", c.resets);
    model_lines(m, &mut kv);
    out
}

/// The model's own counters, as `model.*`.
fn model_lines(m: &Stats, kv: &mut impl FnMut(&str, u64)) {
    kv("model.reg_reads", m.reg_reads);
    kv("model.reg_writes", m.reg_writes);
    kv("model.regfile_dropped", m.regfile_dropped);
    kv("model.dma_read_bytes", m.dma_read_bytes);
    kv("model.dma_write_bytes", m.dma_write_bytes);
    kv("model.faults", m.faults);
    kv("model.msix", m.msix);
    kv("model.stlb_hits", m.stlb_hits);
    kv("model.stlb_misses", m.stlb_misses);
    kv("model.invalidations", m.invalidations);
    kv("model.cpucp_packets", m.cpucp_packets);
    kv("model.packets", m.packets);
    kv("model.monitors_fired", m.monitors_fired);
    kv("model.sm_dropped", m.sm_dropped);
    kv("model.sm_refused", m.sm_refused);
    kv("model.eq_dropped", m.eq_dropped);
}

/// Write `text` to `path` whole: a reader never sees half a file.
pub fn write(path: &Path, text: &str) -> io::Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    std::fs::write(&tmp, text)?;
    std::fs::rename(&tmp, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_of_known_registers() {
        assert_eq!(name(block(regs::CPU_BOOT_STATUS)), "psoc");
        assert_eq!(name(block(regs::CPU_IF_PF_PQ_PI)), "cpu_if");
        assert_eq!(name(block(0x4D0_1034)), "pmmu", "PMMU STLB INV_ALL_START");
        assert_eq!(name(block(0x408_1000)), "hmmu", "DCORE0 HMMU0 STLB");
        assert_eq!(
            name(block(0x428_0000 + 0x3_0000)),
            "hmmu",
            "DCORE1 HMMU3 MMU"
        );
        assert_eq!(name(block(0x408_2000)), "other", "past an HMMU's span");
        assert_eq!(name(block(0x4C8_A080)), "pdma0_qm", "PQ_PI_0");
        assert_eq!(name(block(0x411_E550)), "sm", "GLBL_LBW_ADDR_L_0");
        assert_eq!(name(block(0)), "other");
    }

    #[test]
    fn render_has_one_line_per_key() {
        let mut c = Counters::default();
        c.reg_writes[block(0x4D0_1034)] = 3;
        let text = render(&Snapshot {
            server: &c,
            env: &EnvCounts::default(),
            model: Stats::default(),
            dma_live: (2, 8192, 1),
            msix_assigned: 128,
        });
        assert!(text.lines().all(|l| l.split(' ').count() == 2));
        assert!(text.contains("\nreg_writes.pmmu 3\n"));
        assert!(text.contains("\nreg_writes 3\n"));
        assert!(text.contains("\ndma_live_bytes 8192\n"));
    }
}
