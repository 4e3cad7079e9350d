// SPDX-License-Identifier: GPL-2.0

//! Timestamp buffers: `HL_MEM_OP_TS_ALLOC` and their `mmap` (upstream
//! `allocate_timestamps_buffers`, `hl_ts_alloc_buf`, `hl_ts_mmap`,
//! common/memory.c:2093-2192, on the generic memory manager of
//! common/memory_mgr.c:20-372).
//!
//! A buffer has a user part, `n x 8` bytes that userspace maps and the
//! device writes timestamps into, and a kernel part, one registration record
//! per element (what the wait-for-interrupt path would fill). The context's
//! table holds one reference to each buffer; a live mmap holds one per vma.
//! There is no TS_FREE op: buffers go when the file is closed and no mmap is
//! left (a mapping keeps the file open, so that is at the last `munmap`).
//!
//! Differences from upstream, both deliberate:
//!
//! - `n == 0` is `EINVAL` (upstream reaches `vmalloc_user(0)`, which WARNs,
//!   and answers `ENOMEM`);
//! - the memory one context holds in timestamp buffers is bounded by
//!   [`TS_MAX_BYTES`] (`ENOMEM` past it; upstream allows 2^20 elements per
//!   call and any number of calls), and it is charged to the caller's memory
//!   cgroup (`GFP_KERNEL_ACCOUNT`).

use crate::{
    uapi::{mmap_handle, HL_MMAP_TYPE_TS_BUFF, TS_MAX_ELEMENTS_NUM},
    vm::one_mmap::{self, add, MmapClaim, MmapTable, OneMmap, VmaCount},
};
use kernel::{
    alloc::VVec,
    page::PAGE_SIZE,
    prelude::*,
    sync::{
        atomic::{Atomic, Relaxed},
        Mutex,
    }, //
};

/// Most bytes (user and kernel parts) one context may hold in timestamp
/// buffers: one buffer of the largest size (2^20 elements: 8 MiB + 32 MiB)
/// fits, two do not.
pub(crate) const TS_MAX_BYTES: u64 = 64 << 20;

/// The kernel part of one element (upstream `struct hl_user_pending_interrupt`
/// holds the same facts): where the completion counter is, which value ends
/// the wait, and where in the user part the timestamp goes.
#[derive(Clone, Copy, Default)]
// The wait-for-interrupt path that fills these is command submission, not
// part of this driver: the records are allocated (and charged) as upstream.
#[allow(dead_code)]
pub(crate) struct TsRegistration {
    /// Device address of the completion-queue counter.
    pub(crate) cq_counter: u64,
    /// Value that completes the wait.
    pub(crate) cq_target: u64,
    /// Offset of the element in the user part.
    pub(crate) user_offset: u64,
    /// Whether the element is armed.
    pub(crate) armed: u64,
}

/// Bytes of one element of the user part: the mapping exposes the atomics'
/// memory as plain `u64`s.
pub(crate) const WORD: usize = core::mem::size_of::<Atomic<u64>>();
const _: () = assert!(WORD == 8 && core::mem::align_of::<Atomic<u64>>() == 8);

/// Bytes of the user part of an `n`-element buffer, as mapped (page rounded).
fn user_bytes(n: u32) -> u64 {
    (u64::from(n) * 8).div_ceil(PAGE_SIZE as u64) * PAGE_SIZE as u64
}

/// Bytes of both parts of an `n`-element buffer (what [`TS_MAX_BYTES`] counts).
pub(crate) fn buffer_bytes(n: u32) -> u64 {
    user_bytes(n) + u64::from(n) * core::mem::size_of::<TsRegistration>() as u64
}

/// `bytes` (a page multiple) of zeroed vmalloc memory that userspace may
/// map, as 64-bit atomics, charged to the caller's memory cgroup
/// (`vmalloc_user` with `GFP_KERNEL_ACCOUNT`): the user part of a timestamp
/// buffer, the memory of a command buffer. O(bytes).
pub(crate) fn zeroed_user_words(bytes: u64) -> Result<VVec<Atomic<u64>>> {
    let flags = GFP_KERNEL_ACCOUNT | __GFP_ZERO | __GFP_NOWARN;
    let words = usize::try_from(bytes / WORD as u64).map_err(|_| EINVAL)?;
    let mut user = VVec::with_capacity(words, flags)?;
    for _ in 0..words {
        // Within the capacity reserved above: cannot fail.
        user.push_within_capacity(Atomic::new(0))
            .map_err(|_| ENOMEM)?;
    }
    Ok(user)
}

/// One timestamp buffer.
///
/// The user part is shared with userspace (and, on hardware, with the
/// device), which may write any element at any time: the driver only ever
/// sees it as atomics (`Atomic<u64>` has interior mutability, so a shared
/// reference to it allows concurrent writers), never as `&[u64]`.
///
/// # Invariants
///
/// `user` is a vmalloc allocation of exactly `user_bytes(elements)` bytes,
/// all initialised (so its pages can be mapped whole); `vmas` counts the vmas
/// of its one live mmap (0: not mapped).
pub(crate) struct TsBuffer {
    id: u32,
    elements: u32,
    user: VVec<Atomic<u64>>,
    kernel: VVec<TsRegistration>,
    vmas: VmaCount,
}

impl TsBuffer {
    /// Allocate both parts, zeroed and charged to the caller's memory cgroup.
    fn new(id: u32, elements: u32) -> Result<Self> {
        let flags = GFP_KERNEL_ACCOUNT | __GFP_ZERO | __GFP_NOWARN;
        let n = usize::try_from(elements).map_err(|_| EINVAL)?;
        let user = zeroed_user_words(user_bytes(elements))?;
        let kernel = VVec::from_elem(TsRegistration::default(), n, flags)?;
        LIVE.fetch_add(1, Relaxed);
        Ok(Self {
            id,
            elements,
            user,
            kernel,
            vmas: VmaCount::new(),
        })
    }

    /// The buffer's id (its handle's value).
    pub(crate) fn id(&self) -> u32 {
        self.id
    }

    /// Number of elements.
    pub(crate) fn elements(&self) -> u32 {
        self.elements
    }

    /// Start and length (a page multiple) of the user part, for mapping.
    pub(crate) fn user_memory(&self) -> (*const u8, usize) {
        (self.user.as_ptr().cast(), self.user.len() * WORD)
    }

    /// Element `i` of the user part as the device would read it: one atomic
    /// load (`READ_ONCE`), since userspace may write it at any time.
    pub(crate) fn timestamp(&self, i: usize) -> Option<u64> {
        self.user.get(i).map(|w| w.load(Relaxed))
    }

    /// Write element `i` of the user part (a timestamp registration's
    /// time): one atomic store. O(1).
    pub(crate) fn set_timestamp(&self, i: usize, v: u64) {
        if let Some(w) = self.user.get(i) {
            w.store(v, Relaxed);
        }
    }

    /// Registration records (the kernel part).
    pub(crate) fn registrations(&self) -> usize {
        self.kernel.len()
    }
}

impl OneMmap for TsBuffer {
    fn vma_count(&self) -> &VmaCount {
        &self.vmas
    }
}

/// Timestamp buffers alive in this module (all devices): a leak shows here
/// (debugfs `ts_buffers`) and in the tests.
static LIVE: Atomic<u64> = Atomic::new(0);

/// Number of timestamp buffers alive in the module.
pub(crate) fn live_buffers() -> u64 {
    LIVE.load(Relaxed)
}

impl Drop for TsBuffer {
    fn drop(&mut self) {
        LIVE.fetch_sub(1, Relaxed);
    }
}

/// The timestamp buffers of one context (upstream's per-file `hl_mem_mgr`
/// with its IDR): ids from 1, each charged its [`buffer_bytes`], never more
/// than [`TS_MAX_BYTES`] in all.
pub(crate) type TsBufferTable = MmapTable<TsBuffer>;

/// `TS_ALLOC`: a buffer of `elements` timestamps in `table`; returns its mmap
/// handle, `(id | HL_MMAP_TYPE_TS_BUFF) << PAGE_SHIFT`.
///
/// Errors: `EINVAL` for 0 or more than 2^20 elements; `ENOMEM` past
/// [`TS_MAX_BYTES`] for the context, or when memory runs out. On error the
/// table is as before. O(n) allocation, O(log b) insertion; the table lock is
/// not held while allocating.
pub(crate) fn ts_alloc(table: &Mutex<TsBufferTable>, elements: u32) -> Result<u64> {
    if elements == 0 || elements > TS_MAX_ELEMENTS_NUM {
        return Err(EINVAL);
    }
    let charge = (buffer_bytes(elements), TS_MAX_BYTES, ENOMEM);
    let id = add(table, charge, GFP_KERNEL, |id| TsBuffer::new(id, elements))?;
    Ok(mmap_handle(u64::from(id), HL_MMAP_TYPE_TS_BUFF))
}

/// Claim the one live mmap of the buffer named by the page offset `pgoff`
/// (`hl_mem_mgr_mmap`): `EINVAL` for an unknown id (its low 32 bits, as
/// upstream), a length other than the page-rounded user part, or a buffer
/// that already has a live mmap. O(log b).
pub(crate) fn claim_mmap(
    table: &Mutex<TsBufferTable>,
    pgoff: u64,
    len: u64,
) -> Result<MmapClaim<TsBuffer>> {
    one_mmap::claim_mmap(table, pgoff, len, |b| user_bytes(b.elements))
}

#[kunit_tests(hlrs_ts_buffer)]
mod tests {
    use super::*;
    use crate::uapi::{mmap_type, mmap_value, HL_MMAP_PAGE_SHIFT};
    use crate::vm::one_mmap::claim;
    use kernel::new_mutex;

    fn table() -> Result<Pin<KBox<Mutex<TsBufferTable>>>> {
        KBox::pin_init(new_mutex!(TsBufferTable::new()), GFP_KERNEL)
    }

    #[test]
    fn handles_count_from_one_and_carry_the_type() -> Result {
        let t = table()?;
        for want in 1..=3u64 {
            let h = ts_alloc(&t, 1)?;
            assert_eq!(h & 0xfff, 0);
            let pgoff = h >> HL_MMAP_PAGE_SHIFT;
            assert_eq!(mmap_type(pgoff), HL_MMAP_TYPE_TS_BUFF);
            assert_eq!(mmap_value(pgoff), want);
            assert_eq!(h >> 63, 1);
        }
        // A new table (a new file) starts again at 1.
        let u = table()?;
        assert_eq!(mmap_value(ts_alloc(&u, 7)? >> HL_MMAP_PAGE_SHIFT), 1);
        Ok(())
    }

    #[test]
    fn element_counts_and_the_byte_bound() -> Result {
        let t = table()?;
        assert_eq!(ts_alloc(&t, 0), Err(EINVAL));
        assert_eq!(ts_alloc(&t, TS_MAX_ELEMENTS_NUM + 1), Err(EINVAL));
        assert_eq!(t.lock().len(), 0);
        ts_alloc(&t, TS_MAX_ELEMENTS_NUM)?;
        let big = buffer_bytes(TS_MAX_ELEMENTS_NUM);
        assert_eq!(t.lock().charged(), big);
        // A second buffer of the largest size does not fit; small ones do,
        // up to the bound.
        assert_eq!(ts_alloc(&t, TS_MAX_ELEMENTS_NUM), Err(ENOMEM));
        assert_eq!(t.lock().charged(), big);
        let small = buffer_bytes(512);
        let room = (TS_MAX_BYTES - big) / small;
        for _ in 0..room {
            ts_alloc(&t, 512)?;
        }
        assert_eq!(ts_alloc(&t, 512), Err(ENOMEM));
        assert_eq!(t.lock().len() as u64, 1 + room);
        assert_eq!(t.lock().clear() as u64, 1 + room);
        assert_eq!(t.lock().charged(), 0);
        ts_alloc(&t, TS_MAX_ELEMENTS_NUM)?;
        Ok(())
    }

    #[test]
    fn user_part_is_page_rounded_and_zeroed() -> Result {
        for (n, bytes) in [(1u32, 4096usize), (512, 4096), (513, 8192)] {
            let b = TsBuffer::new(1, n)?;
            let (ptr, len) = b.user_memory();
            assert_eq!(len, bytes);
            assert_eq!(ptr as usize % PAGE_SIZE, 0);
            assert_eq!(b.registrations(), n as usize);
            assert_eq!(b.timestamp(0), Some(0));
            assert_eq!(b.timestamp(len / 8), None);
        }
        Ok(())
    }

    #[test]
    fn references_of_the_table_and_of_mappings() -> Result {
        let live0 = live_buffers();
        let t = table()?;
        let h = ts_alloc(&t, 10)?;
        assert_eq!(mmap_value(h >> HL_MMAP_PAGE_SHIFT), 1);
        assert_eq!(live_buffers(), live0 + 1);
        let buf = t.lock().get(1).ok_or(EINVAL)?;
        // A claim that is given back unused leaves the buffer unmapped.
        let c = claim(buf.clone())?;
        assert_eq!(buf.mapped_vmas(), 1);
        assert!(claim(buf.clone()).is_err());
        drop(c);
        assert_eq!(buf.mapped_vmas(), 0);
        // Closing the file (clearing the table) with no mmap frees the buffer
        // once the last other reference goes.
        t.lock().clear();
        assert_eq!(live_buffers(), live0 + 1);
        drop(buf);
        assert_eq!(live_buffers(), live0);
        // With a live mmap: the vma's reference outlives the table; a split
        // adds a vma, and the buffer goes with the last one.
        ts_alloc(&t, 10)?;
        let buf = t.lock().get(2).ok_or(EINVAL)?;
        let first = claim(buf.clone())?.into_vma_reference();
        drop(buf);
        t.lock().clear();
        assert_eq!(live_buffers(), live0 + 1);
        first.vma_opened();
        let second = first.clone();
        first.vma_closed();
        drop(first);
        assert_eq!(second.mapped_vmas(), 1);
        assert_eq!(live_buffers(), live0 + 1);
        second.vma_closed();
        assert_eq!(second.mapped_vmas(), 0);
        drop(second);
        assert_eq!(live_buffers(), live0);
        Ok(())
    }
}
