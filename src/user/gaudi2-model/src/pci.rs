// SPDX-License-Identifier: GPL-2.0

//! The Gaudi2's PCI face: its identity, BAR layout and the 256-byte config
//! space QEMU's `vfio-user-pci` reads and writes through the config region.
//!
//! Paths are relative to the kernel's `drivers/accel/habanalabs/`.
//!
//! - 1da3:1020 (`PCI_IDS_GAUDI2`, common/habanalabs_drv.c:66), revision 1
//!   (`REV_ID_A` = `ASIC_GAUDI2`, include/hw_ip/pci/pci_general.h:26,
//!   common/habanalabs_drv.c:136-139), class 0x12 (processing accelerator).
//! - BAR0, 64-bit, exactly `CFG_BAR_SIZE` = 256 MiB: CFG (registers) and
//!   SRAM (include/gaudi2/gaudi2.h:11-18, gaudi2/gaudi2.c:3451-3480).
//! - BAR2, 64-bit, exactly `MSIX_BAR_SIZE` = 16 KiB: the MSI-X table (at 0)
//!   and PBA (at 0x2000), 128 vectors (`GAUDI2_MSIX_ENTRIES`,
//!   include/gaudi2/gaudi2.h:68).
//! - BAR4, 64-bit prefetchable: the DRAM window at `DRAM_PHYS_BASE`, the
//!   size of the model's DRAM (a power of two).
//!
//! Config space is plain memory with a write mask per byte, as hardware
//! has: BAR sizing (write all ones, read back the size mask) falls out of
//! the BARs' masks. QEMU emulates most of it on its side (BAR addresses,
//! the MSI-X capability's control bits) and also writes it through to us.

use gaudi2_model::regs;

/// PCI vendor id of Habana Labs.
pub const VENDOR: u16 = 0x1da3;
/// `PCI_IDS_GAUDI2`.
pub const DEVICE: u16 = 0x1020;
/// `REV_ID_A`: upstream's `ASIC_GAUDI2`.
pub const REVISION: u8 = 1;
/// Class code 0x12 (processing accelerator), subclass 0, prog-if 0.
pub const CLASS: u32 = 0x12_0000;

/// `CFG_BAR_SIZE`: BAR0.
pub const BAR0_SIZE: u64 = 0x1000_0000;
/// `MSIX_BAR_SIZE`: BAR2.
pub const BAR2_SIZE: u64 = 0x4000;
/// BAR0 offset of the register space: `rmmio = BAR0 + CFG_BASE -
/// STM_FLASH_BASE_ADDR` (gaudi2/gaudi2.c:2961-2973); register `mmX` is at
/// BAR0 + `CFG_REGS_OFFSET` + `mmX`.
pub const CFG_REGS_OFFSET: u64 = 0x400_0000;
/// BAR0 offset of SRAM (`SRAM_BASE_ADDR`): iATU region 1 maps the 16 MiB
/// `BAR0_RSRVD` and then SRAM after the 192 MiB CFG region
/// (gaudi2/gaudi2.c:3049-3055).
pub const SRAM_OFFSET: u64 = 0xD00_0000;
/// Bytes of SRAM in BAR0.
pub const SRAM_SIZE: u64 = regs::SRAM_SIZE;
/// MSI-X vectors (`GAUDI2_MSIX_ENTRIES`).
pub const MSIX_VECTORS: u16 = 128;
/// BAR2 offset of the MSI-X table.
pub const MSIX_TABLE_OFFSET: u32 = 0;
/// BAR2 offset of the MSI-X pending bit array.
pub const MSIX_PBA_OFFSET: u32 = 0x2000;

/// Bytes of config space.
pub const CONFIG_SIZE: usize = 256;
/// Where the MSI-X capability sits (the only capability).
pub const MSIX_CAP: usize = 0x40;

/// A BAR: memory, 64-bit (PCI type bits 2:1 = 0b10).
const BAR_MEM64: u32 = 0b100;
/// A BAR: prefetchable.
const BAR_PREFETCH: u32 = 0b1000;
/// `PCI_CAP_ID_MSIX`.
const CAP_ID_MSIX: u8 = 0x11;
/// `PCI_STATUS_CAP_LIST`.
const STATUS_CAP_LIST: u16 = 0x10;
/// Command bits a driver may set: memory space, bus master, parity, SERR,
/// INTx disable (no I/O BARs, so no I/O space).
const COMMAND_WRITABLE: u16 = 0x0002 | 0x0004 | 0x0040 | 0x0100 | 0x0400;
/// `PCI_COMMAND_MASTER`.
const COMMAND_MASTER: u8 = 0x04;
/// MSI-X message control bits a driver may set: function mask, enable.
const MSIX_CONTROL_WRITABLE: u16 = 0xC000;

/// The 256 bytes of config space and which bits of each are writable.
pub struct ConfigSpace {
    bytes: [u8; CONFIG_SIZE],
    wmask: [u8; CONFIG_SIZE],
}

impl ConfigSpace {
    /// The config space of a Gaudi2 whose BAR4 (DRAM window) has
    /// `dram_bytes`, a power of two. O(1).
    pub fn new(dram_bytes: u64) -> Self {
        let mut c = Self {
            bytes: [0; CONFIG_SIZE],
            wmask: [0; CONFIG_SIZE],
        };
        c.set16(0x00, VENDOR);
        c.set16(0x02, DEVICE);
        c.set16(0x04, 0);
        c.mask16(0x04, COMMAND_WRITABLE);
        c.set16(0x06, STATUS_CAP_LIST);
        c.set32(0x08, (CLASS << 8) | u32::from(REVISION));
        c.mask8(0x0C, 0xFF); // cache line size
        c.bar(0, BAR0_SIZE, BAR_MEM64);
        c.bar(2, BAR2_SIZE, BAR_MEM64);
        c.bar(4, dram_bytes, BAR_MEM64 | BAR_PREFETCH);
        c.set16(0x2C, VENDOR); // subsystem vendor
        c.set16(0x2E, DEVICE); // subsystem
        c.set8(0x34, MSIX_CAP as u8); // capability list
        c.mask8(0x3C, 0xFF); // interrupt line; pin 0: no INTx
        c.msix();
        c
    }

    /// The MSI-X capability: 128 vectors, table and PBA in BAR2.
    fn msix(&mut self) {
        self.set8(MSIX_CAP, CAP_ID_MSIX);
        self.set8(MSIX_CAP + 1, 0); // last capability
        self.set16(MSIX_CAP + 2, MSIX_VECTORS - 1);
        self.mask16(MSIX_CAP + 2, MSIX_CONTROL_WRITABLE);
        self.set32(MSIX_CAP + 4, MSIX_TABLE_OFFSET | 2);
        self.set32(MSIX_CAP + 8, MSIX_PBA_OFFSET | 2);
    }

    /// A 64-bit memory BAR `index` (and `index + 1`, its upper half) of
    /// `size` bytes (a power of two, at least 16): the address bits under
    /// the size read as zero whatever is written.
    fn bar(&mut self, index: usize, size: u64, kind: u32) {
        let at = 0x10 + 4 * index;
        let addr_mask = !size.wrapping_sub(1);
        self.set32(at, kind);
        self.mask32(at, (addr_mask as u32) & !0xF);
        self.set32(at + 4, 0);
        self.mask32(at + 4, (addr_mask >> 32) as u32);
    }

    /// Bus mastering is on (`PCI_COMMAND_MASTER`): the device may issue
    /// DMA (QEMU likewise drops MSI writes of a device without it).
    pub fn bus_master(&self) -> bool {
        self.bytes[0x04] & COMMAND_MASTER != 0
    }

    /// A function reset clears the command register (memory decode, bus
    /// mastering); QEMU re-programs it.
    pub fn reset(&mut self) {
        self.set16(0x04, 0);
    }

    /// Read `data.len()` bytes from `off`; bytes past the end read 0.
    /// O(len).
    pub fn read(&self, off: u64, data: &mut [u8]) {
        for (i, b) in data.iter_mut().enumerate() {
            *b = byte_at(off, i)
                .and_then(|at| self.bytes.get(at))
                .copied()
                .unwrap_or(0);
        }
    }

    /// Write `data` at `off`, each byte through its write mask; bytes past
    /// the end are dropped. O(len).
    pub fn write(&mut self, off: u64, data: &[u8]) {
        for (i, &v) in data.iter().enumerate() {
            let Some(at) = byte_at(off, i) else { continue };
            let (Some(b), Some(&m)) = (self.bytes.get_mut(at), self.wmask.get(at)) else {
                continue;
            };
            *b = (*b & !m) | (v & m);
        }
    }

    /// The little-endian 32-bit value at `off`.
    #[cfg(test)]
    pub fn dword(&self, off: usize) -> u32 {
        let mut b = [0; 4];
        self.read(off as u64, &mut b);
        u32::from_le_bytes(b)
    }

    fn set8(&mut self, at: usize, v: u8) {
        self.bytes[at] = v;
    }

    fn set16(&mut self, at: usize, v: u16) {
        self.bytes[at..at + 2].copy_from_slice(&v.to_le_bytes());
    }

    fn set32(&mut self, at: usize, v: u32) {
        self.bytes[at..at + 4].copy_from_slice(&v.to_le_bytes());
    }

    fn mask8(&mut self, at: usize, m: u8) {
        self.wmask[at] = m;
    }

    fn mask16(&mut self, at: usize, m: u16) {
        self.wmask[at..at + 2].copy_from_slice(&m.to_le_bytes());
    }

    fn mask32(&mut self, at: usize, m: u32) {
        self.wmask[at..at + 4].copy_from_slice(&m.to_le_bytes());
    }
}

/// Index of byte `i` of an access at `off`, if it is inside config space.
fn byte_at(off: u64, i: usize) -> Option<usize> {
    let at = usize::try_from(off).ok()?.checked_add(i)?;
    (at < CONFIG_SIZE).then_some(at)
}

#[cfg(test)]
mod tests {
    use super::*;

    const DRAM: u64 = 4 << 30;

    fn sized(c: &mut ConfigSpace, at: usize) -> (u32, u32) {
        c.write(at as u64, &[0xFF; 8]);
        (c.dword(at), c.dword(at + 4))
    }

    #[test]
    fn identity() {
        let c = ConfigSpace::new(DRAM);
        assert_eq!(c.dword(0x00), 0x1020_1da3);
        assert_eq!(c.dword(0x08), 0x1200_0001, "class 0x12, revision 1");
        assert_eq!(c.dword(0x0C) >> 16 & 0x7F, 0, "header type 0");
        assert_eq!(c.dword(0x3C) >> 8 & 0xFF, 0, "no INTx pin");
        assert_ne!(c.dword(0x04) >> 16 & u32::from(STATUS_CAP_LIST), 0);
    }

    #[test]
    fn bars_are_64_bit_with_gaudi2_sizes() {
        let mut c = ConfigSpace::new(DRAM);
        assert_eq!(c.dword(0x10) & 0xF, 0x4, "BAR0: mem, 64-bit");
        assert_eq!(c.dword(0x18) & 0xF, 0x4, "BAR2: mem, 64-bit");
        assert_eq!(c.dword(0x20) & 0xF, 0xC, "BAR4: mem, 64-bit, prefetchable");
        assert_eq!(sized(&mut c, 0x10), (0xF000_0004, 0xFFFF_FFFF), "256 MiB");
        assert_eq!(sized(&mut c, 0x18), (0xFFFF_C004, 0xFFFF_FFFF), "16 KiB");
        assert_eq!(sized(&mut c, 0x20), (0x0000_000C, 0xFFFF_FFFF), "4 GiB");
        let mut big = ConfigSpace::new(64 << 30);
        assert_eq!(sized(&mut big, 0x20), (0x0000_000C, 0xFFFF_FFF0), "64 GiB");
    }

    #[test]
    fn bar_address_is_kept_under_the_mask() {
        let mut c = ConfigSpace::new(DRAM);
        c.write(0x10, &0x8000_0000u32.to_le_bytes());
        c.write(0x14, &0x1u32.to_le_bytes());
        assert_eq!((c.dword(0x10), c.dword(0x14)), (0x8000_0004, 1));
        c.write(0x20, &0x1234_5678u32.to_le_bytes());
        assert_eq!(c.dword(0x20), 0xC, "a 4 GiB BAR has no low address bits");
    }

    #[test]
    fn msix_capability() {
        let c = ConfigSpace::new(DRAM);
        assert_eq!(c.dword(0x34) & 0xFF, MSIX_CAP as u32);
        let head = c.dword(MSIX_CAP);
        assert_eq!(head & 0xFF, 0x11, "PCI_CAP_ID_MSIX");
        assert_eq!(head >> 8 & 0xFF, 0, "last capability");
        assert_eq!((head >> 16 & 0x7FF) + 1, 128, "table size");
        assert_eq!(c.dword(MSIX_CAP + 4), 0x0000_0002, "table: BAR2 + 0");
        assert_eq!(c.dword(MSIX_CAP + 8), 0x0000_2002, "PBA: BAR2 + 0x2000");
    }

    #[test]
    fn read_only_fields_ignore_writes() {
        let mut c = ConfigSpace::new(DRAM);
        c.write(0, &[0xFF; 4]);
        c.write(0x08, &[0xFF; 4]);
        c.write(MSIX_CAP as u64, &[0xFF; 12]);
        assert_eq!(c.dword(0x00), 0x1020_1da3);
        assert_eq!(c.dword(0x08), 0x1200_0001);
        assert_eq!(
            c.dword(MSIX_CAP) >> 16,
            0xC07F,
            "only enable and mask stick"
        );
        assert_eq!(c.dword(MSIX_CAP + 4), 2);
    }

    #[test]
    fn command_and_sub_dword_access() {
        let mut c = ConfigSpace::new(DRAM);
        c.write(0x04, &[0x06]);
        assert_eq!(c.dword(0x04) & 0xFFFF, 0x6, "memory + bus master");
        let mut b = [0; 2];
        c.read(0x02, &mut b);
        assert_eq!(u16::from_le_bytes(b), DEVICE);
    }

    #[test]
    fn bus_master_follows_the_command_register() {
        let mut c = ConfigSpace::new(DRAM);
        assert!(!c.bus_master());
        c.write(0x04, &[0x06, 0x00]);
        assert!(c.bus_master());
        c.reset();
        assert!(!c.bus_master());
        assert_eq!(c.dword(0x00), 0x1020_1da3);
    }

    #[test]
    fn accesses_past_the_end() {
        let mut c = ConfigSpace::new(DRAM);
        let mut b = [0xAA; 8];
        c.read(252, &mut b);
        assert_eq!(&b[4..], &[0; 4], "past 256 reads 0");
        c.write(u64::MAX, &[1, 2, 3]);
        c.read(u64::MAX, &mut b);
        assert_eq!(b, [0; 8]);
    }
}
