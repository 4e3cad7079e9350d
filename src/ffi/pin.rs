// SPDX-License-Identifier: GPL-2.0

//! Pinning of user pages (upstream `hl_pin_host_memory` / `get_user_memory` /
//! `hl_unpin_host_memory`, common/memory.c:2315-2460): the only `unsafe` of
//! the host-memory path.
//!
//! Pages are pinned with `FOLL_WRITE | FOLL_LONGTERM` (as upstream) and
//! accounted against the process's `RLIMIT_MEMLOCK` with `account_locked_vm`
//! (which lets `CAP_IPC_LOCK` through); upstream does not account them, so a
//! process could pin all of RAM. A request for more pages than the machine
//! has is refused before anything is charged or allocated (upstream sizes a
//! `kvmalloc` by the user's size first, memory.c:2336). Pages are pinned in
//! chunks, and a fatal signal stops the pin between two of them. A partial
//! pin is undone and reported as `ENOMEM`, as upstream does; unpinning marks
//! the pages dirty.

use crate::small_array::SmallArray;
use kernel::{
    bindings,
    mm::Mm,
    page::PAGE_SIZE,
    prelude::*,
    sync::aref::ARef,
    time::{Instant, Monotonic},
};

#[allow(improper_ctypes)]
extern "C" {
    // Prototypes in `ffi/helpers.h`, bodies in `ffi/helpers.c`.
    /// `page_to_phys`.
    fn hlrs_page_to_phys(page: *mut bindings::page) -> u64;
    /// `totalram_pages()`.
    fn hlrs_totalram_pages() -> c_ulong;
}

/// Pages pinned by one `pin_user_pages_fast` call: between chunks a fatal
/// signal ends the pin (so a killed process inside a 1 GiB MAP exits soon).
const PIN_CHUNK: usize = 4096;

/// Pages of a buffer whose page array (and bus-address array) is kept
/// inline: a buffer of up to 16 KiB costs no allocation for them. Every
/// mapping record carries the room, and records are moved by value on the
/// MAP path: 16 inline pages (256 bytes more per record) made a 4 KiB
/// MAP+UNMAP about 10% slower than 4 do (`make bench`, production kernel).
pub(crate) const INLINE_PAGES: usize = 4;

/// The page array of a pinned buffer.
type PageArray = SmallArray<*mut bindings::page, INLINE_PAGES>;

/// Bytes of RAM the machine has (`totalram_pages`). O(1).
pub(crate) fn totalram_bytes() -> u64 {
    // SAFETY: `totalram_pages` only reads a counter.
    let pages = unsafe { hlrs_totalram_pages() } as u64;
    pages.saturating_mul(PAGE_SIZE as u64)
}

/// The first page and the page count of `[addr, addr + size)`: `EINVAL` for
/// a zero size or a range that wraps (also after rounding to pages), `ENOMEM`
/// for more pages than the machine has RAM. O(1).
fn page_span(addr: u64, size: u64) -> Result<(u64, usize)> {
    let page = PAGE_SIZE as u64;
    if size == 0 {
        return Err(EINVAL);
    }
    let end = addr.checked_add(size).ok_or(EINVAL)?;
    let end = end.checked_add(page - 1).ok_or(EINVAL)? / page * page;
    let start = addr / page * page;
    let npages = (end - start) / page;
    // SAFETY: `totalram_pages` only reads a counter.
    if npages > unsafe { hlrs_totalram_pages() } as u64 {
        return Err(ENOMEM);
    }
    Ok((start, usize::try_from(npages).map_err(|_| ENOMEM)?))
}

/// Pinned pages of one user buffer.
///
/// # Invariants
///
/// `pages` holds `pages.len()` pages pinned by `pin_user_pages_fast`;
/// `accounted` pages are charged to `mm`'s `locked_vm`. Both are undone
/// exactly once, in `Drop`.
pub(crate) struct PinnedUserPages {
    pages: PageArray,
    accounted: usize,
    mm: ARef<Mm>,
    /// User address as given.
    pub(crate) addr: u64,
    /// Size in bytes as given.
    pub(crate) size: u64,
    /// Offset of `addr` in its first page.
    pub(crate) offset: u64,
    /// Pid of the process that pinned the pages.
    pub(crate) pid: i32,
}

// SAFETY: the page pointers are only used to unpin and to compute physical
// addresses, both allowed from any thread; `Mm` is thread safe.
unsafe impl Send for PinnedUserPages {}
// SAFETY: see above; `&self` only reads the array.
unsafe impl Sync for PinnedUserPages {}

impl PinnedUserPages {
    /// Pin `[addr, addr + size)` of the current process.
    ///
    /// `EINVAL` for a zero size or a range that wraps (also after rounding to
    /// pages); `ENOMEM` for more pages than the machine has RAM, past
    /// `RLIMIT_MEMLOCK`, or when only part could be pinned; `EINTR` when a
    /// fatal signal arrives part-way; the pinning error otherwise (`EFAULT`
    /// for memory that is not mapped writable, or a kernel address). Nothing
    /// stays pinned or charged on error.
    ///
    /// Nothing is sized by the request before it passed both bounds (RAM and
    /// `RLIMIT_MEMLOCK`, charged first): the page array is then at most 8
    /// bytes per page of RAM. O(npages).
    pub(crate) fn pin(addr: u64, size: u64) -> Result<Self> {
        let page = PAGE_SIZE as u64;
        let (start, nr) = page_span(addr, size)?;
        let npages = nr as u64;

        let task = kernel::current!();
        let mm: ARef<Mm> = ARef::from(&**task.mm().ok_or(EFAULT)?);
        let pid = task.pid();
        // Charge the limit before anything is allocated for the request.
        // SAFETY: `mm` is the current process's mm, kept alive by `ARef`.
        let rc = unsafe { bindings::account_locked_vm(mm.as_raw(), npages as c_ulong, true) };
        if rc != 0 {
            return Err(Error::from_errno(rc));
        }
        // INVARIANT: `nr` pages are charged and none is pinned yet; from here
        // on `Drop` undoes whatever was done.
        let mut this = Self {
            pages: PageArray::new(core::ptr::null_mut()),
            accounted: nr,
            mm,
            addr,
            size,
            offset: addr - start,
            pid,
        };
        this.pages =
            PageArray::with_capacity(nr, core::ptr::null_mut(), GFP_KERNEL | __GFP_NOWARN)?;
        while this.pages.len() < nr {
            if super::sched::fatal_signal_pending() {
                return Err(EINTR);
            }
            let done = this.pages.len();
            let chunk = (nr - done).min(PIN_CHUNK);
            let at = start + done as u64 * page;
            let got = pin_into(&mut this.pages, at, chunk)?;
            if got < chunk {
                // Upstream reports a partial pin as ENOMEM (memory.c:2352-2362).
                return Err(ENOMEM);
            }
        }
        Ok(this)
    }

    /// Number of pinned pages.
    pub(crate) fn npages(&self) -> usize {
        self.pages.len()
    }

    /// Whether the buffer can be mapped with `huge`-byte pages: its user address
    /// is `huge`-aligned, it covers whole huge pages, and each huge page is
    /// physically contiguous and aligned (upstream checks the same on the DMA
    /// segments, common/memory.c:864-884). O(npages); yields once per huge page.
    pub(crate) fn fits_huge_pages(&self, huge: u64) -> bool {
        let page = PAGE_SIZE as u64;
        let per = usize::try_from(huge / page).unwrap_or(0);
        if per <= 1
            || self.offset != 0
            || self.addr.checked_rem(huge) != Some(0)
            || self.pages.len().checked_rem(per) != Some(0)
        {
            return false;
        }
        // One physical address per huge page: inside a `huge`-aligned
        // physical range the `struct page`s are consecutive in every memory
        // model (a sparsemem section is larger), so page `k` of the piece is
        // physically `k` pages after its first exactly when its `struct page`
        // is `k` after the first's: a pointer comparison, no call.
        (0..self.pages.len()).all(|i| {
            let k = i.checked_rem(per).unwrap_or(0);
            if k != 0 {
                let first = self.pages.at(i - k);
                return first.is_some_and(|f| self.pages.at(i) == Some(f.wrapping_add(k)));
            }
            if i > 0 {
                // Once per huge page (512 small ones): a 1 GiB buffer is
                // 262,144 pages.
                super::sched::cond_resched();
            }
            self.phys(i)
                .is_some_and(|first| first.checked_rem(huge) == Some(0))
        })
    }

    /// Copy `dst.len()` bytes from offset `off` of pinned page `i` (debugfs
    /// `data32`/`data64` through a host mapping). `EINVAL` past the pages or
    /// out of the page. The copy is the C `memcpy` through a local mapping:
    /// the process may write the page meanwhile, as with `copy_to_user`.
    pub(crate) fn read_page(&self, i: usize, off: usize, dst: &mut [u8]) -> Result {
        let page = self.page_at(i, off, dst.len())?;
        // SAFETY: `page` is pinned by us for the lifetime of `self`; the
        // local mapping is undone below; `off + len` is inside the page.
        unsafe {
            let addr = bindings::kmap_local_page(page).cast::<u8>();
            bindings::memcpy(dst.as_mut_ptr().cast(), addr.add(off).cast(), dst.len());
            bindings::kunmap_local(addr.cast());
        }
        Ok(())
    }

    /// Copy `src` to offset `off` of pinned page `i` (see [`Self::read_page`]).
    pub(crate) fn write_page(&self, i: usize, off: usize, src: &[u8]) -> Result {
        let page = self.page_at(i, off, src.len())?;
        // SAFETY: as in `read_page`, the copy going the other way (the pages
        // are pinned for write and unpinned dirty).
        unsafe {
            let addr = bindings::kmap_local_page(page).cast::<u8>();
            bindings::memcpy(addr.add(off).cast(), src.as_ptr().cast(), src.len());
            bindings::kunmap_local(addr.cast());
        }
        Ok(())
    }

    /// The pinned page `i` (for the DMA map of `super::dma_pages`, which
    /// takes its own reference to it), `None` past the pages. O(1).
    pub(super) fn page_ptr(&self, i: usize) -> Option<*mut bindings::page> {
        self.pages.at(i)
    }

    fn page_at(&self, i: usize, off: usize, len: usize) -> Result<*mut bindings::page> {
        if off.checked_add(len).is_none_or(|end| end > PAGE_SIZE) {
            return Err(EINVAL);
        }
        self.pages.at(i).ok_or(EINVAL)
    }

    /// Physical (device) address of pinned page `i`; the simulated Gaudi2 has
    /// no IOMMU, so this is what a DMA mapping would return.
    pub(crate) fn phys(&self, i: usize) -> Option<u64> {
        let p = self.pages.at(i)?;
        // SAFETY: `p` is a page pinned by us for the lifetime of `self`.
        Some(unsafe { hlrs_page_to_phys(p) })
    }
}

impl Drop for PinnedUserPages {
    fn drop(&mut self) {
        let n = self.pages.len();
        if n > 0 {
            // SAFETY: by the type invariant these pages are pinned by us and
            // released exactly once, here.
            unsafe {
                bindings::unpin_user_pages_dirty_lock(
                    self.pages.as_mut_slice().as_mut_ptr(),
                    n as c_ulong,
                    true,
                )
            };
        }
        // SAFETY: by the type invariant `accounted` pages were charged to this
        // mm; the charge is undone exactly once, here.
        unsafe { bindings::account_locked_vm(self.mm.as_raw(), self.accounted as c_ulong, false) };
    }
}

/// Pin `chunk` pages of the current process from user address `at` into the
/// spare room of `pages` (at most the room there is); returns how many were
/// pinned, each now an element of `pages`. The pinning errno if none could
/// be. O(chunk).
fn pin_into(pages: &mut PageArray, at: u64, chunk: usize) -> Result<usize> {
    let (spare, room) = match pages {
        SmallArray::Inline { items, len } => {
            let s = items.get_mut(*len..).ok_or(EINVAL)?;
            (s.as_mut_ptr(), s.len())
        }
        SmallArray::Heap(vec) => {
            let s = vec.spare_capacity_mut();
            (s.as_mut_ptr().cast::<*mut bindings::page>(), s.len())
        }
    };
    let chunk = chunk.min(room);
    let flags = bindings::FOLL_WRITE | bindings::FOLL_LONGTERM;
    // SAFETY: `spare` has room for `chunk` pointers (at most the room left);
    // `chunk <= PIN_CHUNK` fits a `c_int`; the kernel checks the user range.
    let got = unsafe { bindings::pin_user_pages_fast(at as c_ulong, chunk as c_int, flags, spare) };
    if got < 0 {
        return Err(Error::from_errno(got));
    }
    let got = usize::try_from(got).unwrap_or(0).min(chunk);
    match pages {
        // INVARIANT: the first `got` spare slots hold pages pinned just above.
        SmallArray::Inline { len, .. } => *len += got,
        // SAFETY: `pin_user_pages_fast` initialised the first `got` spare
        // entries with pinned pages, and `got <= chunk <= room`.
        // INVARIANT: they are pinned and become part of `pages`.
        SmallArray::Heap(vec) => unsafe { vec.inc_len(got) },
    }
    Ok(got)
}

/// The floor a host MAP+UNMAP is measured against (debugfs `bench`, `make
/// bench`): `pin_user_pages_fast` of `[addr, addr + size)` of the current
/// process with the driver's flags, then `unpin_user_pages_dirty_lock`, and
/// nothing else (no `locked_vm` charge, no page-table work). The page array is
/// allocated before the clock starts. Returns the nanoseconds of the pin and
/// of the unpin, and the page count. Same bounds and errnos as
/// [`PinnedUserPages::pin`] (without `RLIMIT_MEMLOCK`: debugfs is root's).
/// O(npages).
pub(crate) fn pin_floor(addr: u64, size: u64) -> Result<(u64, u64, usize)> {
    let (start, nr) = page_span(addr, size)?;
    let nr_int = c_int::try_from(nr).map_err(|_| ENOMEM)?;
    let mut pages: KVVec<*mut bindings::page> =
        KVVec::with_capacity(nr, GFP_KERNEL | __GFP_NOWARN)?;
    let flags = bindings::FOLL_WRITE | bindings::FOLL_LONGTERM;
    let t0 = Instant::<Monotonic>::now();
    // SAFETY: `pages` has room for `nr` pointers; the kernel checks the range.
    let got = unsafe {
        bindings::pin_user_pages_fast(
            start as c_ulong,
            nr_int,
            flags,
            pages.spare_capacity_mut().as_mut_ptr().cast(),
        )
    };
    let t1 = Instant::<Monotonic>::now();
    if got < 0 {
        return Err(Error::from_errno(got));
    }
    let got = usize::try_from(got).unwrap_or(0).min(nr);
    // SAFETY: the first `got` entries were initialised with pinned pages.
    unsafe { pages.inc_len(got) };
    if got > 0 {
        // SAFETY: these `got` pages were pinned just above, and are unpinned
        // exactly once, here.
        unsafe { bindings::unpin_user_pages_dirty_lock(pages.as_mut_ptr(), got as c_ulong, true) };
    }
    let t2 = Instant::<Monotonic>::now();
    if got < nr {
        return Err(ENOMEM);
    }
    let ns = |d: kernel::time::Delta| u64::try_from(d.as_nanos()).unwrap_or(0);
    Ok((ns(t1 - t0), ns(t2 - t1), nr))
}
