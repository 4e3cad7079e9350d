// SPDX-License-Identifier: GPL-2.0

//! Device memory shared with QEMU: a memfd the guest maps through a BAR
//! (QEMU mmaps it as a sparse-mmap area, so guest loads and stores go
//! straight to it), and the model reaches through this process's own
//! mapping of the same pages.
//!
//! A memfd is sparse: a page nobody wrote costs nothing, so a 4 GiB DRAM
//! window is cheap until used. The mapping is `vm-memory`'s `MmapRegion`,
//! whose accessors are bounds-checked volatile copies (the guest writes
//! the same pages concurrently from QEMU's process).

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, RawFd};

use rustix::fs::{memfd_create, MemfdFlags};
use rustix::io::Errno;
use vm_memory::mmap::MmapRegion;
use vm_memory::{FileOffset, VolatileMemory};

/// A memfd of `file_len` bytes of which the window
/// `[window_offset, window_offset + window_len)` is mapped here.
pub struct SharedMem {
    /// The memfd itself (its fd is what QEMU gets for the BAR region).
    file: File,
    /// This process's mapping of the window.
    map: MmapRegion<()>,
}

impl SharedMem {
    /// A fresh zero-filled memfd named `name` of `file_len` bytes, with the
    /// window `[window_offset, +window_len)` mapped. O(1): nothing is
    /// touched until used.
    pub fn create(
        name: &str,
        file_len: u64,
        window_offset: u64,
        window_len: u64,
    ) -> io::Result<Self> {
        let end = window_offset.checked_add(window_len);
        if window_len == 0 || end.is_none_or(|e| e > file_len) {
            return Err(Errno::INVAL.into());
        }
        let file = File::from(memfd_create(name, MemfdFlags::CLOEXEC)?);
        file.set_len(file_len)?;
        let len = usize::try_from(window_len).map_err(|_| io::Error::from(Errno::INVAL))?;
        let map =
            MmapRegion::<()>::from_file(FileOffset::new(file.try_clone()?, window_offset), len)
                .map_err(|e| io::Error::other(format!("mmap {name}: {e}")))?;
        Ok(Self { file, map })
    }

    /// The memfd's descriptor (owned by `self`, open as long as it lives).
    pub fn raw_fd(&self) -> RawFd {
        self.file.as_raw_fd()
    }

    /// Read `buf.len()` bytes at window offset `off`. Err (nothing read):
    /// the range is not inside the window. O(len).
    pub fn read(&self, off: u64, buf: &mut [u8]) -> Result<(), OutOfRange> {
        let off = usize::try_from(off).map_err(|_| OutOfRange)?;
        let s = self.map.get_slice(off, buf.len()).map_err(|_| OutOfRange)?;
        s.copy_to(buf);
        Ok(())
    }

    /// Write `data` at window offset `off`. Err (nothing written): the
    /// range is not inside the window. O(len).
    pub fn write(&self, off: u64, data: &[u8]) -> Result<(), OutOfRange> {
        let off = usize::try_from(off).map_err(|_| OutOfRange)?;
        let s = self
            .map
            .get_slice(off, data.len())
            .map_err(|_| OutOfRange)?;
        s.copy_from(data);
        Ok(())
    }
}

/// An access outside a [`SharedMem`] window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OutOfRange;

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::FileExt;

    #[test]
    fn window_is_the_files_bytes() {
        let m = SharedMem::create("t", 1 << 20, 0x8000, 0x4000).unwrap();
        m.write(0x10, b"sram").unwrap();
        let mut b = [0; 4];
        m.file.read_exact_at(&mut b, 0x8010).unwrap();
        assert_eq!(&b, b"sram", "written through the window, seen in the file");
        m.file.write_all_at(b"qemu", 0x8020).unwrap();
        m.read(0x20, &mut b).unwrap();
        assert_eq!(&b, b"qemu", "written in the file, seen through the window");
    }

    #[test]
    fn out_of_window_accesses_fail() {
        let m = SharedMem::create("t", 1 << 20, 0, 0x1000).unwrap();
        let mut b = [0; 8];
        assert_eq!(m.read(0xFFC, &mut b), Err(OutOfRange));
        assert_eq!(m.write(u64::MAX, &b), Err(OutOfRange));
        assert!(m.read(0xFF8, &mut b).is_ok());
    }

    #[test]
    fn bad_windows_are_refused() {
        assert!(SharedMem::create("t", 0x1000, 0x1000, 0x1000).is_err());
        assert!(SharedMem::create("t", 0x1000, 0, 0).is_err());
        assert!(SharedMem::create("t", 0x1000, u64::MAX, 2).is_err());
    }
}
