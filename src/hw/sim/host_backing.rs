// SPDX-License-Identifier: GPL-2.0

//! The host memory behind simulated device memory: bounded, charged to its
//! user, given back when its user gives the device memory back.
//!
//! A simulated Gaudi2 backs each 4 KiB chunk of DRAM or SRAM that is written
//! with a host page ([`SparseMem`]). Without a bound, one user with a few
//! memset CSs could make the engines allocate the whole DRAM size (96 GiB
//! per device) of host memory. So:
//!
//! - **Bounded**: the chunks of *user* DRAM (from `dram_user_base` on, what
//!   ALLOC hands out) backed on all devices together count against one
//!   module-wide limit (module parameter `sim_dram_host_mib`; default an
//!   eighth of the host's RAM; debugfs `dram_host` changes it at run time).
//!   Past it, the access that needed a new chunk fails with `ENOSPC`: an
//!   engine's access faults and its CS ends ABORTED, a debugfs write or an
//!   importer's map fails. Writing what the chunk already reads as (zeros,
//!   or the scrub pattern) backs nothing, so a memset of 0 costs no memory.
//!   The page tables (below the user base, bounded by the hop area) and SRAM
//!   (48 MiB per device, dropped when its context goes) are not counted.
//! - **Charged**: user chunks are allocated `GFP_KERNEL_ACCOUNT` inside the
//!   remote charging scope of the memory cgroup of the process that opened
//!   the device ([`SparseMem::set_owner`], captured at open), whatever thread
//!   (an engine worker, an importer, a CPU fault) needs them.
//! - **Given back**: when a page pack returns to the DRAM pool (FREE, the
//!   last mapping or export of a freed handle going, context teardown), the
//!   chunks of its pages are dropped ([`SparseMem::drop_range`]): the memory
//!   returns to the host and its cgroup, and the next user reads what
//!   never-written DRAM reads (zeros, or the pattern of the last scrub),
//!   never the previous user's bytes.
//!
//! Lock order: the counters here are atomics; [`SparseMem`] lives inside the
//! device's `dram` / `sram` mutexes (leaves of the crate root's table).

use crate::ffi::{dma_pages::page_pieces, host_page::HostPage, memcg::MemCgroup};
use kernel::{
    page::PAGE_SIZE,
    prelude::*,
    rbtree::{RBTree, RBTreeNodeReservation},
    sync::atomic::{Atomic, Relaxed},
};

/// Bytes of host memory backing one touched piece of simulated memory: one
/// host page.
pub(crate) const CHUNK: usize = 4096;
/// [`CHUNK`] as a `u64`.
pub(crate) const CHUNK_U64: u64 = CHUNK as u64;
const _: () = assert!(CHUNK == PAGE_SIZE);

/// User DRAM chunks backed on every device together.
static BACKED: Atomic<u64> = Atomic::new(0);
/// The most user DRAM chunks that may be backed (`u64::MAX`: no bound,
/// until the module's init sets it).
static LIMIT: Atomic<u64> = Atomic::new(u64::MAX);
/// Chunk allocations refused at the limit since load.
static REFUSED: Atomic<u64> = Atomic::new(0);

/// The default limit for a host with `totalram` bytes of RAM: an eighth. O(1).
pub(crate) fn default_limit_bytes(totalram: u64) -> u64 {
    totalram / 8
}

/// Set the module-wide limit on host memory behind user DRAM, in bytes
/// (rounded down to whole chunks). Lowering it below what is backed frees
/// nothing: it refuses new chunks until enough are given back. O(1).
pub(crate) fn set_limit_bytes(bytes: u64) {
    LIMIT.store(bytes / CHUNK_U64, Relaxed);
}

/// (backed bytes, limit in bytes, chunk allocations refused) module-wide. O(1).
pub(crate) fn usage() -> (u64, u64, u64) {
    let limit = LIMIT.load(Relaxed);
    (
        BACKED.load(Relaxed).saturating_mul(CHUNK_U64),
        limit.saturating_mul(CHUNK_U64),
        REFUSED.load(Relaxed),
    )
}

/// Count one more backed chunk, or `ENOSPC` at the limit. O(1) (a
/// compare-and-swap loop).
fn reserve() -> Result {
    let mut now = BACKED.load(Relaxed);
    loop {
        if now >= LIMIT.load(Relaxed) {
            let first = REFUSED.fetch_add(1, Relaxed) == 0;
            if first {
                pr_info!("simulated DRAM: host-memory limit reached (sim_dram_host_mib); the access faults\n");
            }
            return Err(ENOSPC);
        }
        match BACKED.cmpxchg(now, now + 1, Relaxed) {
            Ok(_) => return Ok(()),
            Err(seen) => now = seen,
        }
    }
}

/// Count `n` chunks given back. O(1).
fn unreserve(n: u64) {
    if n != 0 {
        BACKED.fetch_sub(n, Relaxed);
    }
}

/// What never-written chunks of a sparse memory hold: `Some((from, val))`
/// means chunks from index `from` on repeat the little-endian `val` (a
/// scrub's pattern), the others and `None` are zeros.
pub(crate) type Fill = Option<(u64, u64)>;

/// The pattern byte of `fill` at byte address `at` of chunk `chunk`.
fn fill_byte(fill: Fill, chunk: u64, at: u64) -> u8 {
    match fill {
        Some((from, val)) if chunk >= from => (val >> ((at % 8) * 8)) as u8,
        _ => 0,
    }
}

/// Fill `dst`, the bytes from `at` of chunk `chunk`, with `fill`'s pattern.
/// O(len).
pub(crate) fn fill_bytes(dst: &mut [u8], chunk: u64, at: u64, fill: Fill) {
    for (i, b) in dst.iter_mut().enumerate() {
        *b = fill_byte(fill, chunk, at.wrapping_add(i as u64));
    }
}

/// Whether `src`, at byte `at` of chunk `chunk`, is what `fill` makes that
/// chunk read as. O(len).
fn is_fill(src: &[u8], chunk: u64, at: u64, fill: Fill) -> bool {
    match fill {
        Some((from, val)) if chunk >= from && val != 0 => src
            .iter()
            .enumerate()
            .all(|(i, &b)| b == fill_byte(fill, chunk, at.wrapping_add(i as u64))),
        _ => src.iter().all(|&b| b == 0),
    }
}

/// Write the little-endian `val` over the whole of `page`. O(CHUNK).
pub(crate) fn write_pattern(page: &HostPage, val: u64) -> Result {
    let mut line = [0u8; 64];
    fill_bytes(&mut line, 0, 0, Some((0, val)));
    for off in (0..CHUNK).step_by(line.len()) {
        page.write(off, &line)?;
    }
    Ok(())
}

/// Give a new page of chunk `chunk` what never-written memory there holds
/// (nothing to do for zeros: pages come zeroed). O(CHUNK).
fn fill_page(page: &HostPage, chunk: u64, fill: Fill) -> Result {
    match fill {
        Some((from, val)) if chunk >= from && val != 0 => write_pattern(page, val),
        _ => Ok(()),
    }
}

/// Split `[addr, addr + len)` into per-chunk pieces: (chunk index, offset in
/// chunk, offset in the caller's buffer, length).
pub(crate) fn pieces(addr: u64, len: usize) -> impl Iterator<Item = (u64, usize, usize, usize)> {
    page_pieces(addr, len).map(|(a, pos, n)| (a / CHUNK_U64, (a % CHUNK_U64) as usize, pos, n))
}

/// A sparse memory: the host pages behind its written chunks, keyed by chunk
/// index.
///
/// # Invariants
///
/// `counted` is the number of keys at or above `user_from` when `limited`
/// (0 otherwise), and is included in [`BACKED`].
pub(crate) struct SparseMem {
    chunks: RBTree<u64, HostPage>,
    /// Chunks from this index on are user memory: charged to `owner` and,
    /// if `limited`, counted against the module-wide limit.
    user_from: u64,
    limited: bool,
    counted: u64,
    /// The memory cgroup user chunks are charged to (the device's opener);
    /// `None`: the allocating thread's own.
    owner: Option<MemCgroup>,
}

impl SparseMem {
    /// An empty memory whose chunks from `user_from` on are user memory,
    /// counted against the limit if `limited`.
    pub(crate) fn new(user_from: u64, limited: bool) -> Self {
        Self {
            chunks: RBTree::new(),
            user_from,
            limited,
            counted: 0,
            owner: None,
        }
    }

    /// Charge user chunks allocated from now on to `owner` (the new opener's
    /// cgroup; `None` when the device has no user). O(1).
    pub(crate) fn set_owner(&mut self, owner: Option<MemCgroup>) -> Option<MemCgroup> {
        core::mem::replace(&mut self.owner, owner)
    }

    /// The page of `chunk`, if backed. O(log n).
    pub(crate) fn get(&self, chunk: u64) -> Option<&HostPage> {
        self.chunks.get(&chunk)
    }

    /// Backed user chunks counted against the limit. O(1).
    pub(crate) fn counted(&self) -> u64 {
        self.counted
    }

    /// Number of backed chunks. O(n): tests and debugfs only.
    pub(crate) fn len(&self) -> usize {
        self.chunks.iter().count()
    }

    /// The page backing `chunk`, allocated, filled with `fill`'s pattern and
    /// inserted if missing: charged to the owner and counted when it is user
    /// memory (`ENOSPC` at the limit, `ENOMEM`). O(log n).
    pub(crate) fn chunk_or_insert(&mut self, chunk: u64, fill: Fill) -> Result<&HostPage> {
        if self.chunks.get(&chunk).is_none() {
            let user = chunk >= self.user_from;
            let counted = user && self.limited;
            if counted {
                reserve()?;
            }
            let made = match (&self.owner, user) {
                (_, false) => Self::new_node(chunk, fill, HostPage::new_zeroed, GFP_KERNEL),
                (Some(memcg), true) => memcg.charge(|| {
                    Self::new_node(
                        chunk,
                        fill,
                        HostPage::new_zeroed_accounted,
                        GFP_KERNEL_ACCOUNT,
                    )
                }),
                (None, true) => Self::new_node(
                    chunk,
                    fill,
                    HostPage::new_zeroed_accounted,
                    GFP_KERNEL_ACCOUNT,
                ),
            };
            match made {
                Ok(node) => {
                    self.chunks.insert(node);
                    if counted {
                        self.counted += 1;
                    }
                }
                Err(e) => {
                    if counted {
                        unreserve(1);
                    }
                    return Err(e);
                }
            }
        }
        self.chunks.get(&chunk).ok_or(ENOMEM)
    }

    fn new_node(
        chunk: u64,
        fill: Fill,
        alloc: fn() -> Result<HostPage>,
        gfp: kernel::alloc::Flags,
    ) -> Result<kernel::rbtree::RBTreeNode<u64, HostPage>> {
        let page = alloc()?;
        fill_page(&page, chunk, fill)?;
        Ok(RBTreeNodeReservation::new(gfp)?.into_node(chunk, page))
    }

    /// Copy `buf.len()` bytes at byte `at` (chunk index = `at / CHUNK`);
    /// unbacked chunks read as `fill`. O(chunks x log n).
    pub(crate) fn read(&self, at: u64, buf: &mut [u8], fill: Fill) -> Result {
        for (chunk, off, pos, n) in pieces(at, buf.len()) {
            let dst = buf
                .get_mut(pos..pos.checked_add(n).ok_or(EINVAL)?)
                .ok_or(EINVAL)?;
            match self.chunks.get(&chunk) {
                Some(page) => page.read(off, dst)?,
                None => fill_bytes(dst, chunk, off as u64, fill),
            }
        }
        Ok(())
    }

    /// Copy `data` to byte `at`, backing the chunks it changes (filled with
    /// `fill` first). A piece equal to what its unbacked chunk reads as backs
    /// nothing. On an error the pieces before it are written. O(chunks x
    /// log n).
    pub(crate) fn write(&mut self, at: u64, data: &[u8], fill: Fill) -> Result {
        for (chunk, off, pos, n) in pieces(at, data.len()) {
            let src = data
                .get(pos..pos.checked_add(n).ok_or(EINVAL)?)
                .ok_or(EINVAL)?;
            if self.chunks.get(&chunk).is_none() && is_fill(src, chunk, off as u64, fill) {
                continue;
            }
            self.chunk_or_insert(chunk, fill)?.write(off, src)?;
        }
        Ok(())
    }

    /// Give back the chunks from index `first` up to (not including) `end`,
    /// at most `budget` of them: a chunk only this memory holds goes back to
    /// the host; one someone else also holds (an importer, a CPU mapping) is
    /// overwritten with `fill`'s pattern in place, so what they see stays
    /// the device's memory. Returns the next chunk index to continue from
    /// (`None`: done). O(budget x log n).
    pub(crate) fn drop_range(
        &mut self,
        first: u64,
        end: u64,
        fill: Fill,
        budget: usize,
    ) -> Result<Option<u64>> {
        let mut cursor = self.chunks.cursor_lower_bound_mut(&first);
        let mut dropped = 0u64;
        let mut left = budget;
        let r = loop {
            let Some(mut c) = cursor else { break Ok(None) };
            let (&chunk, page) = c.current_mut();
            if chunk >= end {
                break Ok(None);
            }
            if left == 0 {
                break Ok(Some(chunk));
            }
            left -= 1;
            if page.ref_count() > 1 {
                let val = match fill {
                    Some((from, val)) if chunk >= from => val,
                    _ => 0,
                };
                if let Err(e) = write_pattern(page, val) {
                    break Err(e);
                }
                cursor = c.move_next();
                continue;
            }
            let (next, _) = c.remove_current();
            if chunk >= self.user_from {
                dropped += 1;
            }
            // Removing the last node moves back to one already visited.
            cursor = next.filter(|n| n.current().0 > &chunk);
        };
        if self.limited {
            self.counted = self.counted.saturating_sub(dropped);
            unreserve(dropped);
        }
        r
    }

    /// Drop every chunk (the caller gives the whole memory back). Returns how
    /// many there were. O(n).
    pub(crate) fn clear(&mut self) -> usize {
        let old = core::mem::take(&mut self.chunks);
        let n = old.iter().count();
        drop(old);
        if self.limited {
            unreserve(self.counted);
            self.counted = 0;
        }
        n
    }
}

impl Drop for SparseMem {
    fn drop(&mut self) {
        if self.limited {
            unreserve(self.counted);
        }
    }
}
