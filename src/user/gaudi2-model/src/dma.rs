// SPDX-License-Identifier: GPL-2.0

//! The device's view of host memory: the IOVA -> (file, offset) table that
//! QEMU's `VFIO_USER_DMA_MAP`/`DMA_UNMAP` messages keep, and device DMA
//! served from it.
//!
//! With `-device intel-iommu,caching-mode=on` QEMU's VFIO listener mirrors
//! the guest's IOMMU mappings for the device into these messages
//! (hw/vfio/listener.c, `vfio_iommu_map_notify`; hw/vfio-user/container.c
//! `vfio_user_dma_map`/`_unmap`): each live `dma_map_*` of the guest driver
//! is one or more entries here, and an unmap removes them before QEMU's
//! reply. So a device access to an IOVA that is in no entry is exactly a
//! DMA the driver did not map (or already unmapped): it is a fault
//! ([`DmaFault`]), never a read of other memory. The `vfio_user` crate has
//! no server-side `DMA_READ`/`DMA_WRITE`, so such a fault is seen by the
//! model (its fault counters, an event the driver reads), not as a DMAR
//! fault in the guest.
//!
//! Entries carry the file QEMU passed (guest RAM is a shared memfd: the
//! `memory-backend-memfd,share=on` of the command line) and the offset in
//! it. Each file is mapped here once, whole, and shared by all entries of
//! the same file (QEMU sends one descriptor per message, often thousands
//! for the same RAM block); the mapping lives while an entry uses it.
//!
//! Semantics of the edge cases (VFIO's type1 IOMMU refuses some of these;
//! here the rule is "the table always says what QEMU said last"):
//! - a map overlapping live entries replaces the overlapped parts;
//! - an unmap that cuts an entry keeps the parts outside the range;
//! - a map without a file (a RAM region QEMU cannot share) is recorded,
//!   and any access to it faults ([`FaultKind::NoFile`]);
//! - the `READ`/`WRITE` flags of a map are enforced per access.

use std::collections::BTreeMap;
use std::fmt;
use std::fs::File;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::sync::{Arc, Weak};

use rustix::io::Errno;
use vm_memory::mmap::MmapRegion;
use vm_memory::{FileOffset, VolatileMemory};

/// Most entries the table keeps (a guest with IOMMU maps one entry per
/// page it maps for the device: 2^20 entries cover 4 GiB of 4 KiB pages).
pub const MAX_MAPS: usize = 1 << 20;

/// What the device may do through a mapping.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Perm {
    /// Device reads (`VFIO_DMA_MAP_FLAG_READ`).
    pub read: bool,
    /// Device writes (`VFIO_DMA_MAP_FLAG_WRITE`).
    pub write: bool,
}

/// Why a device access to host memory failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultKind {
    /// No entry covers the address: the driver did not map it.
    Unmapped,
    /// An entry covers it, but QEMU gave no file for it.
    NoFile,
    /// An entry covers it, without the permission the access needs.
    Denied,
}

/// A failed device access: the first address that could not be served.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DmaFault {
    /// The first address not served.
    pub addr: u64,
    /// Why.
    pub kind: FaultKind,
}

/// Why a map was refused (nothing changed).
#[derive(Debug)]
pub enum MapError {
    /// The request makes no sense (empty, wrapping, past the file's end).
    Invalid(&'static str),
    /// The table is full ([`MAX_MAPS`]).
    TooMany,
    /// The file could not be examined or mapped.
    Io(io::Error),
}

impl fmt::Display for MapError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Invalid(why) => write!(f, "invalid map: {why}"),
            Self::TooMany => write!(f, "table full ({MAX_MAPS} entries)"),
            Self::Io(e) => write!(f, "file: {e}"),
        }
    }
}

impl From<MapError> for io::Error {
    fn from(e: MapError) -> Self {
        match e {
            MapError::Invalid(_) => Errno::INVAL.into(),
            MapError::TooMany => Errno::NOSPC.into(),
            MapError::Io(e) => e,
        }
    }
}

/// One file QEMU shared, mapped here whole.
struct FileMap {
    map: MmapRegion<()>,
    dev: u64,
    ino: u64,
}

/// One mapping: `len` bytes of IOVA from the key, at `offset` in `file`.
#[derive(Clone)]
struct Entry {
    len: u64,
    file: Option<Arc<FileMap>>,
    offset: u64,
    perm: Perm,
}

/// The IOVA -> (file, offset) table.
#[derive(Default)]
pub struct DmaTable {
    /// Entries by first IOVA; they never overlap.
    maps: BTreeMap<u64, Entry>,
    /// The files mapped so far (dead ones pruned on the next map).
    files: Vec<Weak<FileMap>>,
}

impl DmaTable {
    /// An empty table: every access faults.
    pub fn new() -> Self {
        Self::default()
    }

    /// Map IOVA `[iova, iova + len)` to `file` at `offset` (or to nothing
    /// the device can reach, when `file` is `None`). Returns the bytes of
    /// older entries it replaced. O(log n + overlapped entries + files).
    pub fn map(
        &mut self,
        iova: u64,
        len: u64,
        file: Option<File>,
        offset: u64,
        perm: Perm,
    ) -> Result<u64, MapError> {
        if len == 0 {
            return Err(MapError::Invalid("empty"));
        }
        if iova.checked_add(len).is_none() || offset.checked_add(len).is_none() {
            return Err(MapError::Invalid("range wraps"));
        }
        if self.maps.len() >= MAX_MAPS {
            return Err(MapError::TooMany);
        }
        let file = match file {
            Some(f) => Some(self.file_map(f, offset, len)?),
            None => None,
        };
        let replaced = self.remove_range(iova, iova + len);
        let entry = Entry {
            len,
            file,
            offset,
            perm,
        };
        self.maps.insert(iova, entry);
        Ok(replaced)
    }

    /// The shared mapping of `f`, covering `[offset, offset + len)`.
    /// O(files).
    fn file_map(&mut self, f: File, offset: u64, len: u64) -> Result<Arc<FileMap>, MapError> {
        let meta = f.metadata().map_err(MapError::Io)?;
        let need = offset + len; // checked by the caller
        if need > meta.len() {
            return Err(MapError::Invalid("past the end of the file"));
        }
        self.files.retain(|w| w.strong_count() > 0);
        let known =
            self.files.iter().filter_map(Weak::upgrade).find(|m| {
                m.dev == meta.dev() && m.ino == meta.ino() && m.map.size() as u64 >= need
            });
        if let Some(m) = known {
            return Ok(m);
        }
        let size = usize::try_from(meta.len()).map_err(|_| MapError::Invalid("file too large"))?;
        let map = MmapRegion::<()>::from_file(FileOffset::new(f, 0), size)
            .map_err(|e| MapError::Io(io::Error::other(e.to_string())))?;
        let m = Arc::new(FileMap {
            map,
            dev: meta.dev(),
            ino: meta.ino(),
        });
        self.files.push(Arc::downgrade(&m));
        Ok(m)
    }

    /// Remove IOVA `[iova, iova + len)` (to the end of the space if that
    /// wraps): entries inside go, entries cut keep their outer parts.
    /// Returns the bytes unmapped. O(log n + entries touched).
    pub fn unmap(&mut self, iova: u64, len: u64) -> u64 {
        if len == 0 {
            return 0;
        }
        self.remove_range(iova, iova.saturating_add(len))
    }

    /// Remove every entry. Returns the bytes unmapped. O(n).
    pub fn unmap_all(&mut self) -> u64 {
        let bytes = self.bytes();
        self.maps.clear();
        bytes
    }

    /// Take `[a, b)` out of the table. O(log n + entries touched).
    fn remove_range(&mut self, a: u64, b: u64) -> u64 {
        // Entries do not overlap, so walking down from the last one that
        // starts below `b`, the first that ends at or below `a` ends it.
        let hit: Vec<u64> = self
            .maps
            .range(..b)
            .rev()
            .take_while(|(s, e)| **s + e.len > a)
            .map(|(s, _)| *s)
            .collect();
        let mut removed = 0;
        for s in hit {
            let Some(e) = self.maps.remove(&s) else {
                continue;
            };
            let end = s + e.len;
            if s < a {
                let head = Entry {
                    len: a - s,
                    ..e.clone()
                };
                self.maps.insert(s, head);
            }
            if end > b {
                let tail = Entry {
                    len: end - b,
                    offset: e.offset + (b - s),
                    ..e.clone()
                };
                self.maps.insert(b, tail);
            }
            removed += end.min(b) - s.max(a);
        }
        removed
    }

    /// Device read of `buf.len()` bytes at `addr`. O(log n) per entry
    /// crossed, plus the copy.
    pub fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), DmaFault> {
        let len = buf.len();
        self.walk(addr, len, false, |m, at, done, n| {
            let Some(dst) = buf.get_mut(done..done + n) else {
                return false;
            };
            copy_out(m, at, dst)
        })
    }

    /// Device write of `data` at `addr`: all of it, or (on a fault)
    /// nothing. O(log n) per entry crossed, plus the copy.
    pub fn write(&self, addr: u64, data: &[u8]) -> Result<(), DmaFault> {
        self.walk(addr, data.len(), true, |_, _, _, _| true)?;
        self.walk(addr, data.len(), true, |m, at, done, n| {
            let Some(src) = data.get(done..done + n) else {
                return false;
            };
            copy_in(m, at, src)
        })
    }

    /// Resolve `[addr, addr + len)` piece by piece, calling `f(file, file
    /// offset, offset in the access, bytes)` for each; stop at the first
    /// piece that cannot be served.
    fn walk(
        &self,
        addr: u64,
        len: usize,
        write: bool,
        mut f: impl FnMut(&FileMap, u64, usize, usize) -> bool,
    ) -> Result<(), DmaFault> {
        let mut done = 0usize;
        while done < len {
            let fault = |kind| DmaFault {
                addr: addr.wrapping_add(done as u64),
                kind,
            };
            let a = addr
                .checked_add(done as u64)
                .ok_or(fault(FaultKind::Unmapped))?;
            let (s, e) = self
                .maps
                .range(..=a)
                .next_back()
                .filter(|(s, e)| a - **s < e.len)
                .ok_or(fault(FaultKind::Unmapped))?;
            if !(if write { e.perm.write } else { e.perm.read }) {
                return Err(fault(FaultKind::Denied));
            }
            let file = e.file.as_deref().ok_or(fault(FaultKind::NoFile))?;
            let inside = a - s;
            let n = usize::try_from(e.len - inside)
                .unwrap_or(usize::MAX)
                .min(len - done);
            if !f(file, e.offset + inside, done, n) {
                return Err(fault(FaultKind::Unmapped));
            }
            done += n;
        }
        Ok(())
    }

    /// Live entries. O(1).
    pub fn len(&self) -> usize {
        self.maps.len()
    }

    /// Bytes mapped. O(n).
    pub fn bytes(&self) -> u64 {
        self.maps.values().map(|e| e.len).sum()
    }

    /// Files mapped in this process for the live entries. O(files).
    pub fn files(&self) -> usize {
        self.files.iter().filter(|w| w.strong_count() > 0).count()
    }
}

/// Copy from `m` at `at` into `dst`; false if out of the file's mapping.
fn copy_out(m: &FileMap, at: u64, dst: &mut [u8]) -> bool {
    let Ok(at) = usize::try_from(at) else {
        return false;
    };
    match m.map.get_slice(at, dst.len()) {
        Ok(s) => s.copy_to(dst) == dst.len(),
        Err(_) => false,
    }
}

/// Copy `src` into `m` at `at`; false if out of the file's mapping.
fn copy_in(m: &FileMap, at: u64, src: &[u8]) -> bool {
    let Ok(at) = usize::try_from(at) else {
        return false;
    };
    match m.map.get_slice(at, src.len()) {
        Ok(s) => {
            s.copy_from(src);
            true
        }
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests;
