//! Upstream's debugfs ABI of a device (`Documentation/ABI/testing/debugfs-driver-habanalabs`):
//! reading and writing device memory through `addr` + `data32`/`data64`.
//! Root only (debugfs).
//!
//! A device VA (DRAM or host range) must be mapped by the device's open
//! compute context and is translated through its page tables; an SRAM or
//! DRAM physical address is accessed directly; anything else is refused
//! (`EINVAL`).

use std::{io, path::PathBuf};

/// The directories that reach device `index`'s files: the DRM core's
/// `accel/<N>` link (to `accel/<parent device>/`) and the older
/// `habanalabs/hl<N>`.
pub fn abi_dirs(index: u32) -> [PathBuf; 2] {
    [
        PathBuf::from(format!("/sys/kernel/debug/accel/{index}")),
        PathBuf::from(format!("/sys/kernel/debug/habanalabs/hl{index}")),
    ]
}

/// Access width: `data32` or `data64`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Width {
    /// 32 bits (`data32`).
    W32,
    /// 64 bits (`data64`).
    W64,
}

impl Width {
    fn file(self) -> &'static str {
        match self {
            Self::W32 => "data32",
            Self::W64 => "data64",
        }
    }
}

/// The `addr` + `data32`/`data64` files of one device directory.
#[derive(Clone, Debug)]
pub struct DebugfsMem {
    dir: PathBuf,
}

impl DebugfsMem {
    /// Device `index` through `accel/<N>`.
    pub fn new(index: u32) -> Self {
        let [dir, _] = abi_dirs(index);
        Self { dir }
    }

    /// Through another directory (`habanalabs/hl<N>`, `accel/<parent>`).
    pub fn at(dir: PathBuf) -> Self {
        Self { dir }
    }

    fn set_addr(&self, addr: u64) -> io::Result<()> {
        std::fs::write(self.dir.join("addr"), format!("{addr:#x}"))
    }

    /// Read `width` bits at `addr` (upstream `0x%08x` / `0x%016llx`).
    pub fn peek(&self, addr: u64, width: Width) -> io::Result<u64> {
        self.set_addr(addr)?;
        let text = std::fs::read_to_string(self.dir.join(width.file()))?;
        let hex = text.trim().trim_start_matches("0x");
        u64::from_str_radix(hex, 16).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
    }

    /// Read `size` bytes (1..=128 MiB) at `addr`, a DRAM VA of the open
    /// compute context or an SRAM address, the way upstream's `dma_size` +
    /// `data_dma` do (one device DMA into a blob). `EINVAL` for a bad size
    /// or address, `EIO` when the read fails (an unmapped page, no context).
    pub fn dma_read(&self, addr: u64, size: u32) -> io::Result<Vec<u8>> {
        self.set_addr(addr)?;
        std::fs::write(self.dir.join("dma_size"), format!("{size:#x}"))?;
        std::fs::read(self.dir.join("data_dma"))
    }

    /// Write `value` over the device's whole user DRAM (upstream's
    /// `memory_scrub_val` + `memory_scrub`). `EBUSY` while a compute context
    /// is open.
    pub fn scrub(&self, value: u64) -> io::Result<()> {
        std::fs::write(self.dir.join("memory_scrub_val"), format!("{value:#x}"))?;
        std::fs::write(self.dir.join("memory_scrub"), "1")
    }

    /// Write `value` (`width` bits) at `addr`.
    pub fn poke(&self, addr: u64, value: u64, width: Width) -> io::Result<()> {
        if width == Width::W32 && value > u64::from(u32::MAX) {
            return Err(io::Error::from_raw_os_error(34));
        }
        self.set_addr(addr)?;
        std::fs::write(self.dir.join(width.file()), format!("{value:#x}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths() {
        let [a, b] = abi_dirs(3);
        assert_eq!(a, PathBuf::from("/sys/kernel/debug/accel/3"));
        assert_eq!(b, PathBuf::from("/sys/kernel/debug/habanalabs/hl3"));
        assert_eq!(Width::W64.file(), "data64");
    }
}
