// SPDX-License-Identifier: GPL-2.0

//! Command buffers: `DRM_IOCTL_HL_CB` CREATE, DESTROY, INFO and the `mmap`
//! of a CB handle (upstream common/command_buffer.c:92-437 on the memory
//! manager of common/memory_mgr.c:20-372).
//!
//! A CB is `max(size, PAGE_SIZE)` bytes of kernel memory, rounded up to whole
//! pages, zeroed, and charged to the caller's memory cgroup. The context's
//! [`CbTable`] holds one reference to each CB, from CREATE to DESTROY (or the
//! file's close); a live mmap holds one per vma, so a CB destroyed while
//! mapped lives on until its last `munmap` (and a mapping keeps the file
//! open: a CB outlives neither its file nor its last vma).
//!
//! Differences from upstream, all deliberate:
//!
//! - a file holds at most [`CB_MAX_PER_FILE`] CBs (`EMFILE` past it; upstream
//!   has no bound, so one file could hold any amount of kernel memory);
//! - a handle whose type bits are not `HL_MMAP_TYPE_CB` is `EINVAL`
//!   (upstream's handle table is shared with timestamp buffers and looks up
//!   the low 32 bits only, so a TS handle given to DESTROY or INFO is taken
//!   for a CB: memory_mgr.c:31-45);
//! - a destroyed handle is gone at once: INFO and DESTROY of it are `EINVAL`
//!   even while a mapping keeps the CB alive (upstream keeps it findable
//!   until the last reference goes, and INFO answers for a destroyed CB);
//!
//! The mapping into the device MMU (`HL_CB_FLAGS_MAP`) is
//! `super::mapping::map_cb_va`, a mapping that holds the CB. A CB created
//! with it is in the table (its id taken, counted against the bound) but
//! not *published* until its mapping is made: DESTROY, INFO and the ioctl
//! paths find only published CBs, so no DESTROY of the new handle (whose
//! id another thread can guess: ids count from 1) can come between the
//! CREATE and its mapping, which would leave the mapping, and the CB it
//! holds, out of the table and past the per-file bound until the close.

use crate::ffi::{host_page::HostPage, vmalloc::vmalloc_page_ref};
use crate::{
    uapi::{mmap_handle, mmap_type, HL_MAX_CB_SIZE, HL_MMAP_PAGE_SHIFT, HL_MMAP_TYPE_CB},
    vm::{
        one_mmap::{self, add, MmapClaim, MmapTable, OneMmap, VmaCount},
        ts_buffer::{zeroed_user_words, WORD},
    },
};
use kernel::{
    alloc::{KVVec, VVec},
    page::PAGE_SIZE,
    prelude::*,
    sync::{
        atomic::{Acquire, Atomic, Relaxed, Release},
        Arc, Mutex,
    }, //
};

/// Most CBs one file may hold at a time (`EMFILE` past it): 256 CBs of the
/// largest size are 512 MiB of kernel memory, all charged to the caller's
/// memory cgroup.
pub(crate) const CB_MAX_PER_FILE: usize = 256;

/// Bytes a CB of `size` requested bytes occupies and maps: `max(size,
/// PAGE_SIZE)` rounded up to whole pages (`hl_cb_mmap_mem_alloc`, and the
/// length `hl_mem_mgr_mmap` requires). O(1).
pub(crate) fn mapped_bytes(size: u32) -> u64 {
    let page = PAGE_SIZE as u64;
    u64::from(size).max(page).div_ceil(page) * page
}

/// One command buffer.
///
/// The memory is shared with userspace (and, on hardware, read by the
/// device's queues), which may write it at any time: the driver only ever
/// sees it as atomics, never as `&[u8]`.
///
/// # Invariants
///
/// `memory` is a vmalloc allocation of exactly `mapped_bytes(size)` bytes,
/// all initialised; `vmas` counts the vmas of its one live mmap (0: not
/// mapped).
pub(crate) struct CommandBuffer {
    id: u32,
    size: u32,
    memory: VVec<Atomic<u64>>,
    vmas: VmaCount,
    /// Device VA of its mapping into the device MMU (`HL_CB_FLAGS_MAP`); 0:
    /// not mapped.
    device_va: Atomic<u64>,
    /// Its CREATE is done: DESTROY and INFO find it.
    published: Atomic<bool>,
}

/// CBs alive in this module (all devices): a leak shows here (debugfs `cbs`)
/// and in the tests.
static LIVE: Atomic<u64> = Atomic::new(0);

/// Number of CBs alive in the module. O(1).
pub(crate) fn live_cbs() -> u64 {
    LIVE.load(Relaxed)
}

impl CommandBuffer {
    /// A zeroed CB of `size` bytes (at least a page), charged to the caller's
    /// memory cgroup. O(size).
    fn new(id: u32, size: u32, published: bool) -> Result<Self> {
        let memory = zeroed_user_words(mapped_bytes(size))?;
        LIVE.fetch_add(1, Relaxed);
        Ok(Self {
            id,
            size: size.max(PAGE_SIZE as u32),
            memory,
            vmas: VmaCount::new(),
            device_va: Atomic::new(0),
            published: Atomic::new(published),
        })
    }

    /// Whether its CREATE is done. O(1).
    fn published(&self) -> bool {
        self.published.load(Acquire)
    }

    /// The CREATE is done (after its mapping, whose device VA a DESTROY
    /// then sees). O(1).
    pub(crate) fn publish(&self) {
        self.published.store(true, Release);
    }

    /// The CB's id (its handle's value). O(1).
    pub(crate) fn id(&self) -> u32 {
        self.id
    }

    /// Size in bytes (`cb->size`: the requested size, at least a page). O(1).
    pub(crate) fn size(&self) -> u32 {
        self.size
    }

    /// Start and length (a page multiple) of the memory, for mapping. O(1).
    pub(crate) fn memory(&self) -> (*const u8, usize) {
        (self.memory.as_ptr().cast(), self.memory.len() * WORD)
    }

    /// A reference to every page of the memory, in order (what the device
    /// is given to reach them by DMA; each keeps its page alive while held).
    /// O(pages).
    pub(crate) fn page_refs(&self) -> Result<KVVec<HostPage>> {
        let n = self.memory().1 / PAGE_SIZE;
        let mut pages = KVVec::with_capacity(n, GFP_KERNEL_ACCOUNT)?;
        for i in 0..n {
            let p = vmalloc_page_ref(&self.memory, i).ok_or(EINVAL)?;
            pages.push_within_capacity(p).map_err(|_| ENOMEM)?;
        }
        Ok(pages)
    }

    /// Physical address of every page of the memory, in order. O(pages).
    #[cfg(CONFIG_KUNIT)]
    pub(crate) fn page_phys(&self) -> Result<KVVec<u64>> {
        let pages = self.page_refs()?;
        let mut phys = KVVec::with_capacity(pages.len(), GFP_KERNEL)?;
        for p in pages.iter() {
            phys.push_within_capacity(p.phys()).map_err(|_| ENOMEM)?;
        }
        Ok(phys)
    }

    /// Device VA of the CB's mapping into the device MMU, if mapped. O(1).
    pub(crate) fn device_va(&self) -> Option<u64> {
        Some(self.device_va.load(Relaxed)).filter(|&va| va != 0)
    }

    /// Record the device VA of the CB's mapping (0: unmapped). O(1).
    pub(crate) fn set_device_va(&self, va: u64) {
        self.device_va.store(va, Relaxed);
    }

    /// Store `v` as the word at byte offset `8 * i` (the driver's own CBs,
    /// `crate::cs::sync_objects`; tests, as the device would write it). O(1).
    pub(crate) fn set_word(&self, i: usize, v: u64) {
        if let Some(w) = self.memory.get(i) {
            w.store(v, Relaxed);
        }
    }

    /// The 64-bit word at byte offset `8 * i`, as the device would read it
    /// (one atomic load: userspace may write it at any time). O(1).
    pub(crate) fn word(&self, i: usize) -> Option<u64> {
        self.memory.get(i).map(|w| w.load(Relaxed))
    }
}

impl OneMmap for CommandBuffer {
    fn vma_count(&self) -> &VmaCount {
        &self.vmas
    }
}

impl Drop for CommandBuffer {
    fn drop(&mut self) {
        LIVE.fetch_sub(1, Relaxed);
    }
}

/// The CBs of one context (upstream's per-file `hl_mem_mgr`): ids from 1,
/// never reused by the file, each charged 1 against [`CB_MAX_PER_FILE`].
pub(crate) type CbTable = MmapTable<CommandBuffer>;

/// The id a CB handle names: its page offset's low 32 bits (as upstream), if
/// its type bits are `HL_MMAP_TYPE_CB`; `EINVAL` otherwise. O(1).
fn handle_id(handle: u64) -> Result<u32> {
    let pgoff = handle >> HL_MMAP_PAGE_SHIFT;
    if mmap_type(pgoff) != HL_MMAP_TYPE_CB {
        return Err(EINVAL);
    }
    Ok(pgoff as u32)
}

/// CREATE: a CB of `size` bytes in `table`; returns its handle,
/// `(id | HL_MMAP_TYPE_CB) << PAGE_SHIFT`.
///
/// Errors: `EINVAL` past [`HL_MAX_CB_SIZE`]; `EMFILE` past
/// [`CB_MAX_PER_FILE`]; `ENOMEM` when memory runs out. On error the table
/// is as before (an id may have been used up). O(size) allocation, O(log n)
/// insertion; the table lock is not held while allocating.
pub(crate) fn cb_create(table: &Mutex<CbTable>, size: u32) -> Result<u64> {
    create(table, size, true).map(|(h, _)| h)
}

/// CREATE of a CB that is not published yet (to be mapped first): its
/// handle and the CB. [`CommandBuffer::publish`] ends the CREATE, or
/// [`cb_withdraw`] undoes it. Errors and cost as [`cb_create`].
pub(crate) fn cb_create_unpublished(
    table: &Mutex<CbTable>,
    size: u32,
) -> Result<(u64, Arc<CommandBuffer>)> {
    create(table, size, false)
}

fn create(table: &Mutex<CbTable>, size: u32, published: bool) -> Result<(u64, Arc<CommandBuffer>)> {
    if size > HL_MAX_CB_SIZE {
        return Err(EINVAL);
    }
    let charge = (1, CB_MAX_PER_FILE as u64, EMFILE);
    let id = add(table, charge, GFP_KERNEL_ACCOUNT, |id| {
        CommandBuffer::new(id, size, published)
    })?;
    // Only the table's owner removes an unpublished CB (and the file's
    // close, which no ioctl of the file runs into).
    let cb = table.lock().get(id).ok_or(EINVAL)?;
    Ok((mmap_handle(u64::from(id), HL_MMAP_TYPE_CB), cb))
}

/// Undo the CREATE of an unpublished CB (its mapping failed): out of the
/// table, its charge back. O(log n).
pub(crate) fn cb_withdraw(table: &Mutex<CbTable>, handle: u64) -> Option<Arc<CommandBuffer>> {
    let id = handle_id(handle).ok()?;
    table.lock().remove(id, 1)
}

/// The published CB `id` of a locked `table`. O(log n).
fn published(table: &CbTable, id: u32) -> Option<Arc<CommandBuffer>> {
    table.get(id).filter(|cb| cb.published())
}

/// DESTROY: the handle goes (once: `EINVAL` for an unknown, foreign,
/// unpublished or already destroyed handle); the CB goes with it unless a
/// mapping holds it. O(log n).
pub(crate) fn cb_destroy(table: &Mutex<CbTable>, handle: u64) -> Result<Arc<CommandBuffer>> {
    let id = handle_id(handle)?;
    let mut t = table.lock();
    published(&t, id).ok_or(EINVAL)?;
    // Freed (if nothing else holds it) by the caller, with the table unlocked.
    t.remove(id, 1).ok_or(EINVAL)
}

/// The published CB of `handle`, if the table has it. O(log n).
pub(crate) fn cb_get(table: &Mutex<CbTable>, handle: u64) -> Result<Arc<CommandBuffer>> {
    published(&table.lock(), handle_id(handle)?).ok_or(EINVAL)
}

/// INFO: the usage count of the CB (the command submissions using it:
/// always 0 here, as there are none), or with `get_device_va` the device VA
/// of its mapping. `EINVAL` for an unknown handle, and with `get_device_va`
/// for a CB that is not mapped. O(log n).
pub(crate) fn cb_info(table: &Mutex<CbTable>, handle: u64, get_device_va: bool) -> Result<u64> {
    let cb = cb_get(table, handle)?;
    if get_device_va {
        return cb.device_va().ok_or(EINVAL);
    }
    Ok(0)
}

/// Claim the one live mmap of the CB named by the page offset `pgoff`
/// (`hl_mem_mgr_mmap`): `EINVAL` for an unknown id (the low 32 bits, as
/// upstream), a length other than the CB's page-rounded size, or a CB that
/// already has a live mmap. O(log n).
pub(crate) fn claim_mmap(
    table: &Mutex<CbTable>,
    pgoff: u64,
    len: u64,
) -> Result<MmapClaim<CommandBuffer>> {
    one_mmap::claim_mmap(table, pgoff, len, |cb| mapped_bytes(cb.size))
}

#[kunit_tests(hlrs_cb)]
mod tests {
    use super::*;
    use crate::uapi::{mmap_value, HL_MMAP_TYPE_TS_BUFF};
    use kernel::new_mutex;

    fn table() -> Result<Pin<KBox<Mutex<CbTable>>>> {
        KBox::pin_init(new_mutex!(CbTable::new()), GFP_KERNEL)
    }

    fn get(t: &Mutex<CbTable>, id: u32) -> Result<Arc<CommandBuffer>> {
        t.lock().get(id).ok_or(EINVAL)
    }

    #[test]
    fn sizes_round_to_pages_and_memory_is_zeroed() -> Result {
        let t = table()?;
        for (size, bytes) in [
            (0u32, 4096u64),
            (1, 4096),
            (77, 4096),
            (4096, 4096),
            (5000, 8192),
            (92517, 94208),
            (1 << 20, 1 << 20),
            (HL_MAX_CB_SIZE, 2 << 20),
        ] {
            let h = cb_create(&t, size)?;
            let cb = get(&t, mmap_value(h >> HL_MMAP_PAGE_SHIFT) as u32)?;
            let (ptr, len) = cb.memory();
            assert_eq!(len as u64, bytes);
            assert_eq!(mapped_bytes(size), bytes);
            assert_eq!(ptr as usize % PAGE_SIZE, 0);
            assert_eq!(cb.size(), size.max(4096));
            assert_eq!(cb.word(0), Some(0));
            assert_eq!(cb.word(len / 8 - 1), Some(0));
            assert_eq!(cb.word(len / 8), None);
        }
        assert_eq!(cb_create(&t, HL_MAX_CB_SIZE + 1), Err(EINVAL));
        assert_eq!(cb_create(&t, u32::MAX), Err(EINVAL));
        assert_eq!(t.lock().len(), 8);
        Ok(())
    }

    #[test]
    fn handles_destroy_once_and_info() -> Result {
        let t = table()?;
        let h = cb_create(&t, 100)?;
        assert_eq!(h, mmap_handle(1, HL_MMAP_TYPE_CB));
        assert_eq!(h >> 60, 1);
        assert_eq!(cb_info(&t, h, false), Ok(0));
        assert_eq!(cb_info(&t, h, true), Err(EINVAL));
        // A TS handle of the same id, and unknown ids, are not CBs.
        let ts = mmap_handle(1, HL_MMAP_TYPE_TS_BUFF);
        assert_eq!(cb_info(&t, ts, false), Err(EINVAL));
        assert!(cb_destroy(&t, ts).is_err());
        assert!(cb_destroy(&t, 0).is_err());
        assert!(cb_destroy(&t, mmap_handle(2, HL_MMAP_TYPE_CB)).is_err());
        cb_destroy(&t, h)?;
        assert!(cb_destroy(&t, h).is_err());
        assert_eq!(cb_info(&t, h, false), Err(EINVAL));
        // Ids are not reused by the file; another table starts at 1.
        assert_eq!(cb_create(&t, 1)?, mmap_handle(2, HL_MMAP_TYPE_CB));
        let u = table()?;
        assert_eq!(cb_create(&u, 1)?, mmap_handle(1, HL_MMAP_TYPE_CB));
        Ok(())
    }

    #[test]
    fn an_unpublished_cb_is_found_by_no_destroy_or_info() -> Result {
        let live0 = live_cbs();
        let t = table()?;
        let (h, cb) = cb_create_unpublished(&t, 100)?;
        assert_eq!(h, mmap_handle(1, HL_MMAP_TYPE_CB));
        // Counted against the bound, but DESTROY and INFO do not see it.
        assert_eq!(t.lock().len(), 1);
        assert_eq!(cb_destroy(&t, h).err(), Some(EINVAL));
        assert_eq!(cb_info(&t, h, false), Err(EINVAL));
        assert!(cb_get(&t, h).is_err());
        cb.set_device_va(0x1000);
        cb.publish();
        assert_eq!(cb_info(&t, h, true), Ok(0x1000));
        assert_eq!(cb_destroy(&t, h)?.device_va(), Some(0x1000));
        // A withdrawn CREATE gives its charge back; its id is used up.
        let (h2, cb2) = cb_create_unpublished(&t, 100)?;
        assert!(cb_withdraw(&t, h2).is_some());
        assert_eq!(t.lock().len(), 0);
        drop((cb, cb2));
        assert_eq!(live_cbs(), live0);
        assert_eq!(cb_create(&t, 1)?, mmap_handle(3, HL_MMAP_TYPE_CB));
        Ok(())
    }

    #[test]
    fn the_per_file_bound() -> Result {
        let live0 = live_cbs();
        let t = table()?;
        for _ in 0..CB_MAX_PER_FILE {
            cb_create(&t, 1)?;
        }
        assert_eq!(cb_create(&t, 1), Err(EMFILE));
        assert_eq!(live_cbs(), live0 + CB_MAX_PER_FILE as u64);
        cb_destroy(&t, mmap_handle(7, HL_MMAP_TYPE_CB))?;
        cb_create(&t, 1)?;
        assert_eq!(cb_create(&t, 1), Err(EMFILE));
        assert_eq!(t.lock().clear(), CB_MAX_PER_FILE);
        assert_eq!(live_cbs(), live0);
        cb_create(&t, 1)?;
        Ok(())
    }

    #[test]
    fn mmap_claims_and_vma_references() -> Result {
        let live0 = live_cbs();
        let t = table()?;
        let h = cb_create(&t, 5000)?;
        let pgoff = h >> HL_MMAP_PAGE_SHIFT;
        // Wrong lengths and unknown ids.
        for len in [4096u64, 12288, 0] {
            assert!(claim_mmap(&t, pgoff, len).is_err());
        }
        assert!(claim_mmap(&t, pgoff + 1, 8192).is_err());
        // One live mmap; a claim given back unused frees the slot.
        let c = claim_mmap(&t, pgoff, 8192)?;
        assert!(claim_mmap(&t, pgoff, 8192).is_err());
        drop(c);
        let first = claim_mmap(&t, pgoff, 8192)?.into_vma_reference();
        assert!(claim_mmap(&t, pgoff, 8192).is_err());
        // Destroyed while mapped: the handle is gone, the CB lives on with
        // its vmas (a split adds one), and goes with the last.
        cb_destroy(&t, h)?;
        assert!(cb_destroy(&t, h).is_err());
        assert_eq!(live_cbs(), live0 + 1);
        first.vma_opened();
        let second = first.clone();
        first.vma_closed();
        drop(first);
        assert_eq!(second.mapped_vmas(), 1);
        second.vma_closed();
        drop(second);
        assert_eq!(live_cbs(), live0);
        Ok(())
    }
}
