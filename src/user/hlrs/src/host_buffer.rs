//! Page-aligned host buffers for `HL_MEM_USERPTR` mappings, backed by
//! regular pages or by hugetlbfs 2 MiB pages (`MAP_HUGETLB`), as Gaudi
//! runtimes allocate them: the driver maps a buffer whose every 2 MiB piece is
//! one huge page with 2 MiB device-MMU leaves in the HOST_HUGE range. The
//! other [`Backing`]s (transparent huge pages, a shared memfd, read-only
//! memory) are what a runtime may also hand the driver; the fuzzer uses them all.

use rustix::fs::{ftruncate, memfd_create, MemfdFlags};
use rustix::mm::{madvise, mmap, mmap_anonymous, munmap, Advice, MapFlags, ProtFlags};
use std::{ffi::c_void, io, ptr::NonNull};

/// What backs a [`HostBuffer`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backing {
    /// Private anonymous 4 KiB pages.
    Anonymous,
    /// hugetlbfs 2 MiB pages (`MAP_HUGETLB`), faulted in.
    Hugetlb,
    /// Private anonymous memory, 2 MiB aligned, with `MADV_HUGEPAGE` and
    /// faulted in: transparent huge pages where the kernel has them.
    Thp,
    /// A shared mapping of a memfd (shmem file pages), faulted in.
    Memfd,
    /// Private anonymous memory mapped read-only (a write pin must fail).
    ReadOnly,
}

/// The huge-page size of [`HostBuffer::hugetlb`] (x86-64 default hugetlbfs size).
pub const HUGE_PAGE_SIZE: usize = 2 << 20;

/// An anonymous, private, read-write mapping of this process; unmapped on
/// drop.
///
/// # Invariants
///
/// `ptr` is the start of a live mapping of `len` bytes made by `mmap` and
/// owned by this value.
#[derive(Debug)]
pub struct HostBuffer {
    ptr: NonNull<c_void>,
    len: usize,
    backing: Backing,
}

// SAFETY: the mapping is plain memory owned by this value; access goes
// through `&self`/`&mut self` like a `Vec<u8>`.
unsafe impl Send for HostBuffer {}
// SAFETY: as above; shared access only reads.
unsafe impl Sync for HostBuffer {}

impl HostBuffer {
    /// `len` bytes (rounded up to 4 KiB) of regular, zeroed memory.
    pub fn new(len: usize) -> io::Result<Self> {
        Self::map(
            len.div_ceil(4096) * 4096,
            MapFlags::PRIVATE,
            ProtFlags::READ | ProtFlags::WRITE,
            Backing::Anonymous,
        )
    }

    /// `len` bytes with the given backing (see [`Backing`]; `Hugetlb` and
    /// `Thp` round `len` up to 2 MiB, the others to 4 KiB).
    pub fn with_backing(len: usize, backing: Backing) -> io::Result<Self> {
        let rw = ProtFlags::READ | ProtFlags::WRITE;
        match backing {
            Backing::Anonymous => Self::new(len),
            Backing::Hugetlb => Self::hugetlb(len),
            Backing::ReadOnly => Self::map(
                len.div_ceil(4096) * 4096,
                MapFlags::PRIVATE,
                ProtFlags::READ,
                Backing::ReadOnly,
            ),
            Backing::Thp => {
                let len = len.div_ceil(HUGE_PAGE_SIZE) * HUGE_PAGE_SIZE;
                // Over-map by one huge page and trim to a 2 MiB aligned range.
                let mut outer =
                    Self::map(len + HUGE_PAGE_SIZE, MapFlags::PRIVATE, rw, Backing::Thp)?;
                let start = outer.addr().next_multiple_of(HUGE_PAGE_SIZE as u64);
                let (head, tail) = (
                    (start - outer.addr()) as usize,
                    outer.addr() as usize + outer.len,
                );
                // SAFETY: both pieces lie inside `outer`'s mapping, which is
                // shrunk to the aligned middle before anything uses it.
                unsafe {
                    if head > 0 {
                        munmap(outer.ptr.as_ptr(), head)?;
                    }
                    let end = start as usize + len;
                    if tail > end {
                        munmap(end as *mut c_void, tail - end)?;
                    }
                }
                outer.ptr = NonNull::new(start as *mut c_void)
                    .ok_or_else(|| io::Error::from_raw_os_error(12))?;
                outer.len = len;
                // INVARIANT: `outer` now owns exactly the aligned `len` bytes.
                // SAFETY: advice on our own mapping; it changes no contents.
                unsafe { madvise(outer.ptr.as_ptr(), len, Advice::LinuxHugepage) }?;
                for i in (0..len).step_by(4096) {
                    outer.as_mut_slice()[i] = 0;
                }
                Ok(outer)
            }
            Backing::Memfd => {
                let len = len.div_ceil(4096) * 4096;
                if len == 0 {
                    return Err(io::Error::from_raw_os_error(22));
                }
                let fd = memfd_create("hlrs-host-buffer", MemfdFlags::CLOEXEC)?;
                ftruncate(&fd, len as u64)?;
                // SAFETY: a new shared mapping of our own memfd at an address
                // the kernel chooses; the mapping keeps the file alive after
                // `fd` is closed.
                let p = unsafe { mmap(std::ptr::null_mut(), len, rw, MapFlags::SHARED, &fd, 0) }?;
                let ptr = NonNull::new(p).ok_or_else(|| io::Error::from_raw_os_error(12))?;
                // INVARIANT: the mapping was just made, `len` bytes at `ptr`.
                let mut b = Self { ptr, len, backing };
                // Fault the file's pages in now, like the other backings.
                for i in (0..len).step_by(4096) {
                    b.as_mut_slice()[i] = 0;
                }
                Ok(b)
            }
        }
    }

    /// `len` bytes (rounded up to 2 MiB) of hugetlbfs memory, every page
    /// faulted in. `ENOMEM` when the system has too few free huge pages
    /// (`/proc/sys/vm/nr_hugepages` reserves them), never `SIGBUS`.
    pub fn hugetlb(len: usize) -> io::Result<Self> {
        let len = len.div_ceil(HUGE_PAGE_SIZE) * HUGE_PAGE_SIZE;
        let mut b = Self::map(
            len,
            MapFlags::PRIVATE | MapFlags::HUGETLB | MapFlags::HUGE_2MB,
            ProtFlags::READ | ProtFlags::WRITE,
            Backing::Hugetlb,
        )?;
        // Fault every huge page in now, with MADV_POPULATE_WRITE: a hugetlb
        // fault that finds no free page kills the process with SIGBUS, the
        // madvise answers EFAULT instead, reported here as ENOMEM. That happens
        // even though mmap granted a reservation: while a pinned page outlives
        // its vma (a device still maps a buffer that was munmapped) the kernel
        // has already given its reservation back (mm/hugetlb.c; the fuzzer
        // found it, see README "Hostile input"). Kernels before 5.14 do not
        // know the advice (EINVAL): touch the pages there.
        // SAFETY: advice on our own mapping; populating changes no contents.
        match unsafe { madvise(b.ptr.as_ptr(), len, Advice::LinuxPopulateWrite) } {
            Ok(()) => {}
            Err(rustix::io::Errno::INVAL) => {
                for i in (0..len).step_by(HUGE_PAGE_SIZE) {
                    b.as_mut_slice()[i] = 0;
                }
            }
            Err(rustix::io::Errno::FAULT) => return Err(io::Error::from_raw_os_error(12)),
            Err(e) => return Err(e.into()),
        }
        Ok(b)
    }

    fn map(len: usize, flags: MapFlags, prot: ProtFlags, backing: Backing) -> io::Result<Self> {
        if len == 0 {
            return Err(io::Error::from_raw_os_error(22));
        }
        // SAFETY: a new anonymous mapping at an address the kernel chooses;
        // it aliases nothing.
        let p = unsafe { mmap_anonymous(std::ptr::null_mut(), len, prot, flags) }?;
        let ptr = NonNull::new(p).ok_or_else(|| io::Error::from_raw_os_error(12))?;
        // INVARIANT: the mapping was just made, `len` bytes at `ptr`.
        Ok(Self { ptr, len, backing })
    }

    /// Ask for 4 KiB pages only (`MADV_NOHUGEPAGE`): where transparent huge
    /// pages are on by default, an anonymous buffer may otherwise be backed by
    /// 2 MiB pages (and be mapped with 2 MiB PTEs). Call it before the first
    /// touch.
    pub fn no_huge_pages(&self) -> io::Result<()> {
        // SAFETY: advice on our own mapping; it changes no contents.
        unsafe { madvise(self.ptr.as_ptr(), self.len, Advice::LinuxNoHugepage) }?;
        Ok(())
    }

    /// Whether the buffer is backed by hugetlbfs pages.
    pub fn is_hugetlb(&self) -> bool {
        self.backing == Backing::Hugetlb
    }

    /// What backs the buffer.
    pub fn backing(&self) -> Backing {
        self.backing
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the buffer is empty (never: mappings have at least one page).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// User address of the first byte.
    pub fn addr(&self) -> u64 {
        self.ptr.as_ptr() as u64
    }

    /// The bytes.
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: by the invariant `len` readable bytes live at `ptr` for the
        // lifetime of `self`.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr().cast(), self.len) }
    }

    /// The bytes, writable (a [`Backing::ReadOnly`] buffer faults on a write).
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as above, and `&mut self` makes the access exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr().cast(), self.len) }
    }
}

impl Drop for HostBuffer {
    fn drop(&mut self) {
        // SAFETY: by the invariant the mapping is ours and unmapped once, here.
        // A failure cannot be reported from `drop`; it would only leak the range.
        let _ = unsafe { munmap(self.ptr.as_ptr(), self.len) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regular_buffers_are_page_aligned_and_zeroed() {
        let mut b = HostBuffer::new(5000).unwrap();
        assert_eq!(b.len(), 8192);
        assert_eq!(b.addr() % 4096, 0);
        assert!(!b.is_hugetlb());
        assert!(b.as_slice().iter().all(|&x| x == 0));
        b.as_mut_slice()[8191] = 3;
        assert_eq!(b.as_slice()[8191], 3);
        assert_eq!(HostBuffer::new(0).unwrap_err().raw_os_error(), Some(22));
    }

    #[test]
    fn hugetlb_buffers_round_to_2_mib_or_fail_cleanly() {
        // The build host may have no huge pages reserved: then ENOMEM.
        match HostBuffer::hugetlb(1) {
            Ok(b) => {
                assert_eq!(b.len(), HUGE_PAGE_SIZE);
                assert_eq!(b.addr() % HUGE_PAGE_SIZE as u64, 0);
                assert!(b.is_hugetlb());
            }
            Err(e) => assert_eq!(e.raw_os_error(), Some(12), "{e}"),
        }
    }

    #[test]
    fn every_backing_gives_an_aligned_buffer_of_the_rounded_length() {
        for (backing, len, align) in [
            (Backing::Anonymous, 4097, 8192),
            (Backing::Thp, 1, HUGE_PAGE_SIZE),
            (Backing::Memfd, 100, 4096),
            (Backing::ReadOnly, 4096, 4096),
        ] {
            let b = HostBuffer::with_backing(len, backing).unwrap();
            assert_eq!(b.backing(), backing);
            assert_eq!(b.len(), align.max(len.div_ceil(4096) * 4096), "{backing:?}");
            assert_eq!(
                b.addr()
                    % if backing == Backing::Thp {
                        HUGE_PAGE_SIZE as u64
                    } else {
                        4096
                    },
                0
            );
            assert!(b.as_slice().iter().all(|&x| x == 0), "{backing:?}");
        }
        let mut m = HostBuffer::with_backing(8192, Backing::Memfd).unwrap();
        m.as_mut_slice()[8191] = 7;
        assert_eq!(m.as_slice()[8191], 7);
    }
}
