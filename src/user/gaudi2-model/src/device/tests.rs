// SPDX-License-Identifier: GPL-2.0

//! Host tests of BAR decoding and the device's region accesses.

use super::*;
use gaudi2_model::Env;

const BAR0: u32 = VFIO_PCI_BAR0_REGION_INDEX;
const BAR4: u32 = VFIO_PCI_BAR4_REGION_INDEX;

fn dev() -> Device {
    Device::new(64 << 20).unwrap()
}

/// BAR0 offset of register `reg`.
fn at(reg: u32) -> u64 {
    pci::CFG_REGS_OFFSET + u64::from(reg)
}

fn read32(d: &mut Device, region: u32, off: u64) -> u32 {
    let mut b = [0; 4];
    d.region_read(region, off, &mut b);
    u32::from_le_bytes(b)
}

#[test]
fn decode_bar0() {
    assert_eq!(decode(0x400_0000, 4), Bar0::Regs(0));
    assert_eq!(
        decode(at(regs::CPU_BOOT_STATUS), 4),
        Bar0::Regs(regs::CPU_BOOT_STATUS)
    );
    assert_eq!(
        decode(0xBFF_FFFC, 4),
        Bar0::Regs(0x7FF_FFFC),
        "last register"
    );
    assert_eq!(decode(0xBFF_FFFC, 8), Bar0::Hole, "runs past the registers");
    assert_eq!(decode(0x3FF_FFFC, 4), Bar0::Hole, "below the registers");
    assert_eq!(decode(0xC00_0000, 4), Bar0::Hole, "BAR0_RSRVD");
    assert_eq!(decode(0xD00_0000, 8), Bar0::Sram(0));
    assert_eq!(
        decode(0xFFF_FFF8, 8),
        Bar0::Sram((48 << 20) - 8),
        "last SRAM bytes"
    );
    assert_eq!(decode(u64::MAX, 4), Bar0::Hole);
}

#[test]
fn boot_status_reads_through_bar0() {
    let mut d = dev();
    assert_eq!(
        read32(&mut d, BAR0, at(regs::CPU_BOOT_STATUS)),
        regs::BOOT_STATUS_SRAM_AVAIL
    );
    let mut half = [0; 2];
    d.region_read(BAR0, at(regs::CPU_BOOT_STATUS), &mut half);
    assert_eq!(
        u16::from_le_bytes(half),
        regs::BOOT_STATUS_SRAM_AVAIL as u16
    );
    assert_eq!(d.counts().reg_reads[stats::block(regs::CPU_BOOT_STATUS)], 2);
}

#[test]
fn a_register_write_reads_back_and_64_bit_is_two_registers() {
    let mut d = dev();
    let pq_base_lo = 0x4C8_A050;
    d.region_write(
        BAR0,
        at(pq_base_lo),
        &0x1122_3344_5566_7788u64.to_le_bytes(),
    );
    assert_eq!(read32(&mut d, BAR0, at(pq_base_lo)), 0x5566_7788);
    assert_eq!(read32(&mut d, BAR0, at(pq_base_lo + 4)), 0x1122_3344);
    let mut b = [0; 8];
    d.region_read(BAR0, at(pq_base_lo), &mut b);
    assert_eq!(u64::from_le_bytes(b), 0x1122_3344_5566_7788);
    assert_eq!(d.model_stats().reg_writes, 2);
}

#[test]
fn narrow_and_misaligned_register_writes_are_ignored() {
    let mut d = dev();
    let reg = 0x4C8_A050;
    d.region_write(BAR0, at(reg), &[0xAA]);
    d.region_write(BAR0, at(reg) + 2, &[0xAA; 4]);
    assert_eq!(read32(&mut d, BAR0, at(reg)), 0);
    assert_eq!(d.model_stats().reg_writes, 0);
    assert_eq!(d.counts().bar0_bad, 2);
}

#[test]
fn holes_read_zero_and_drop_writes() {
    let mut d = dev();
    d.region_write(BAR0, 0x100, &[1; 4]);
    d.region_write(BAR0, 0xC00_0000, &[1; 4]);
    assert_eq!(read32(&mut d, BAR0, 0x100), 0);
    assert_eq!(read32(&mut d, BAR0, 0xC00_0000), 0);
    assert_eq!(read32(&mut d, VFIO_PCI_BAR2_REGION_INDEX, 0x2000), 0, "PBA");
    assert_eq!(d.model_stats().reg_writes + d.model_stats().reg_reads, 0);
}

#[test]
fn sram_through_the_bar_is_the_models_sram() {
    let mut d = dev();
    d.region_write(BAR0, pci::SRAM_OFFSET + 0x40, b"sram");
    let mut b = [0; 4];
    d.env()
        .sram_read(regs::SRAM_BASE_ADDR + 0x40, &mut b)
        .unwrap();
    assert_eq!(&b, b"sram");
    d.env()
        .sram_write(regs::SRAM_BASE_ADDR + (48 << 20) - 4, b"last")
        .unwrap();
    d.region_read(BAR0, 0xFFF_FFFC, &mut b);
    assert_eq!(&b, b"last");
    assert!(d
        .env()
        .sram_read(regs::SRAM_BASE_ADDR + (48 << 20), &mut b)
        .is_err());
}

#[test]
fn dram_through_bar4_is_the_models_dram() {
    let mut d = dev();
    d.region_write(BAR4, 0x1000, b"pte!");
    let mut b = [0; 4];
    d.env()
        .dram_read(regs::DRAM_PHYS_BASE + 0x1000, &mut b)
        .unwrap();
    assert_eq!(&b, b"pte!");
    assert!(d
        .env()
        .dram_read(regs::DRAM_PHYS_BASE + (64 << 20), &mut b)
        .is_err());
    assert!(d.env().dram_read(regs::DRAM_PHYS_BASE - 1, &mut b).is_err());
    assert_eq!(d.env().counts.mem_faults, 2);
}

#[test]
fn config_space_through_the_region() {
    let mut d = dev();
    let cfg = VFIO_PCI_CONFIG_REGION_INDEX;
    assert_eq!(read32(&mut d, cfg, 0), 0x1020_1da3);
    let mut all = [0; 256];
    d.region_read(cfg, 0, &mut all);
    assert_eq!(all[0x40], 0x11, "MSI-X capability");
}

#[test]
fn dma_and_msix_without_maps_or_eventfds() {
    let mut d = dev();
    let mut b = [0; 16];
    assert_eq!(
        d.env().dma_read(0x1000, &mut b),
        Err(gaudi2_model::BusFault { addr: 0x1000 })
    );
    d.env().msix(21);
    let c = d.env().counts;
    assert_eq!((c.dma_faults, c.msix_dropped, c.msix_raised), (1, 1, 0));
    let text = d.stats_text();
    assert!(text.contains("\ndma_faults 1\n") && text.contains("\nmsix_dropped 1\n"));
}

#[test]
fn dma_needs_bus_mastering() {
    use std::os::unix::fs::FileExt;
    let mut d = dev();
    let ram = std::fs::File::from(
        rustix::fs::memfd_create("ram", rustix::fs::MemfdFlags::CLOEXEC).unwrap(),
    );
    ram.set_len(0x1000).unwrap();
    ram.write_all_at(b"host", 0x10).unwrap();
    let rw = crate::dma::Perm {
        read: true,
        write: true,
    };
    d.env()
        .dma
        .map(0x8000, 0x1000, Some(ram.try_clone().unwrap()), 0, rw)
        .unwrap();
    let mut b = [0; 4];
    assert!(
        d.env().dma_read(0x8010, &mut b).is_err(),
        "bus mastering is off after reset"
    );
    d.region_write(VFIO_PCI_CONFIG_REGION_INDEX, 4, &[0x06, 0]);
    d.env().dma_read(0x8010, &mut b).unwrap();
    assert_eq!(&b, b"host");
    d.env().dma_write(0x8014, b"dev!").unwrap();
    ram.read_exact_at(&mut b, 0x14).unwrap();
    assert_eq!(&b, b"dev!");
    d.reset();
    assert!(
        d.env().dma_read(0x8010, &mut b).is_err(),
        "a reset clears bus mastering"
    );
    assert_eq!(d.env().counts.dma_faults, 2);
    assert_eq!(
        (
            d.env().counts.dma_read_bytes,
            d.env().counts.dma_write_bytes
        ),
        (4, 4)
    );
}

#[test]
fn reset_rebuilds_the_model() {
    let mut d = dev();
    d.region_write(BAR0, at(0x4C8_A050), &7u32.to_le_bytes());
    d.reset();
    assert_eq!(read32(&mut d, BAR0, at(0x4C8_A050)), 0);
    assert_eq!(d.counts().resets, 1);
}
