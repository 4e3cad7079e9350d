// SPDX-License-Identifier: GPL-2.0

//! Upstream habanalabs' VA block list, transcribed to safe Rust for the VA
//! allocator benchmark ([`super::va_allocators`]); the driver never uses it.
//!
//! Upstream keeps the free VA of a range as a list of free blocks sorted by
//! address (`struct hl_va_range`'s `list` of `struct hl_vm_va_block`, with
//! inclusive ends) and walks it whole on every allocation and free:
//!
//! - `get_va_block` (drivers/accel/habanalabs/common/memory.c:594-739): a
//!   best-fit scan of every free block, `<` so ties stay with the first
//!   (lowest-address) block; without a hint nothing stops the scan early. O(n).
//! - `add_va_block_locked` (memory.c:482-520): a walk of the whole list that
//!   checks the new block against every free block for overlap and remembers
//!   the last block ending before it, then an insertion after that block. O(n).
//! - `merge_va_blocks_locked` (memory.c:446-467): merge with the neighbours
//!   that touch it. O(1).
//!
//! Hints, `HL_MEM_FORCE_HINT` and the hint-reserved span (memory.c:618-646,
//! 668-702) are left out: the benchmark allocates without hints.

use kernel::prelude::*;

/// Index of the list head (upstream's `struct list_head` in the range) in the
/// arena; it holds no block.
const HEAD: usize = 0;

/// One arena slot: a free block (`struct hl_vm_va_block`) and its links.
#[derive(Clone, Copy, Debug, Default)]
struct Slot {
    /// First address.
    start: u64,
    /// Last address (inclusive, as upstream).
    end: u64,
    /// `end - start + 1`.
    size: u64,
    /// Previous slot in the list (`HEAD` for the first block).
    prev: usize,
    /// Next slot in the list (`HEAD` after the last block).
    next: usize,
}

/// The free VA blocks of one range, as upstream's doubly linked list.
///
/// The list is index-linked in an arena (a vector of slots with `prev`/`next`
/// indices and a stack of free slots) and the scans follow the links one by
/// one, like upstream's `list_for_each_entry`. Upstream does a `kmalloc` for
/// every new block and a `kfree` for every block removed or merged; taking a
/// slot from the stack and giving it back is O(1) and cheaper, which favours
/// upstream in the comparison.
///
/// # Invariants
///
/// - `slots[HEAD]` is the list head; following `next` from it visits every
///   block once and comes back to it, and `prev` mirrors `next`.
/// - The blocks are sorted by address, do not overlap and do not touch
///   (`a.end + 1 < b.start`); `size == end - start + 1` for each.
/// - Every slot other than `HEAD` is either on the list or on `spare`, once.
/// - `spare.capacity() >= slots.len()`, so giving a slot back never allocates.
pub(crate) struct UpstreamVaList {
    slots: KVVec<Slot>,
    spare: KVVec<usize>,
    /// Number of blocks on the list.
    blocks: usize,
}

impl UpstreamVaList {
    /// The list with one free block `[start, end]` (inclusive end), as
    /// upstream's `va_range_init` leaves it with `add_va_block`
    /// (memory.c:2430-2470). O(1). `EINVAL` if `end < start`.
    pub(crate) fn new(start: u64, end: u64) -> Result<Self> {
        Self::from_free_blocks(&[(start, end)])
    }

    /// The list holding exactly `blocks` (`(start, end)`, inclusive ends), which
    /// must be sorted, non-empty each and not touching: the state that a series
    /// of [`Self::add_va_block`] calls with them would leave, as none would
    /// merge, built in O(n) instead of O(n^2). `EINVAL` otherwise; `ENOMEM` if
    /// the arena cannot be allocated.
    pub(crate) fn from_free_blocks(blocks: &[(u64, u64)]) -> Result<Self> {
        let n = blocks.len();
        let mut slots = KVVec::with_capacity(n + 1, GFP_KERNEL)?;
        // The spare stack's capacity is at least the arena's (invariant).
        let spare = KVVec::with_capacity(slots.capacity(), GFP_KERNEL)?;
        let mut prev_end: Option<u64> = None;
        for &(start, end) in blocks {
            if end < start {
                return Err(EINVAL);
            }
            if let Some(pe) = prev_end {
                // Sorted and not touching: `pe + 1 < start`.
                if pe.checked_add(1).is_none_or(|x| x >= start) {
                    return Err(EINVAL);
                }
            }
            prev_end = Some(end);
        }
        // Slot i (1..=n) holds block i - 1; the list is circular through HEAD.
        slots.push(
            Slot {
                prev: n,
                next: if n == 0 { HEAD } else { 1 },
                ..Slot::default()
            },
            GFP_KERNEL,
        )?;
        for (i, &(start, end)) in blocks.iter().enumerate() {
            let idx = i + 1;
            slots.push(
                Slot {
                    start,
                    end,
                    size: end - start + 1,
                    prev: i,
                    next: if idx == n { HEAD } else { idx + 1 },
                },
                GFP_KERNEL,
            )?;
        }
        Ok(Self {
            slots,
            spare,
            blocks: n,
        })
    }

    /// The slot at `i`. O(1). Every link on the list is a valid index (type
    /// invariant), so the default is never returned for one.
    fn slot(&self, i: usize) -> Slot {
        self.slots.get(i).copied().unwrap_or_default()
    }

    /// The slot at `i`, to change it. O(1).
    fn slot_mut(&mut self, i: usize) -> Result<&mut Slot> {
        self.slots.get_mut(i).ok_or(EINVAL)
    }

    /// A slot for a new block (upstream: `kmalloc`). O(1) from the spare stack,
    /// amortised O(1) when the arena grows. `ENOMEM` if it cannot grow.
    fn new_slot(&mut self, start: u64, end: u64) -> Result<usize> {
        let slot = Slot {
            start,
            end,
            size: end - start + 1,
            prev: HEAD,
            next: HEAD,
        };
        if let Some(i) = self.spare.pop() {
            *self.slot_mut(i)? = slot;
            return Ok(i);
        }
        let i = self.slots.len();
        self.slots.push(slot, GFP_KERNEL)?;
        if self.spare.capacity() < self.slots.len() {
            let more = self.slots.capacity() - self.spare.len();
            if let Err(e) = self.spare.reserve(more, GFP_KERNEL) {
                self.slots.pop();
                return Err(e.into());
            }
        }
        Ok(i)
    }

    /// Give a slot back (upstream: `kfree`). O(1), never allocates: the spare
    /// stack has room for every slot (type invariant).
    fn put_slot(&mut self, i: usize) {
        if self.spare.push_within_capacity(i).is_err() {
            pr_err!("upstream VA list: spare stack full\n");
        }
    }

    /// Link slot `new` after `at` (`list_add(new, at)`). O(1).
    fn list_add(&mut self, new: usize, at: usize) -> Result {
        let next = self.slot(at).next;
        {
            let s = self.slot_mut(new)?;
            s.prev = at;
            s.next = next;
        }
        self.slot_mut(next)?.prev = new;
        self.slot_mut(at)?.next = new;
        self.blocks += 1;
        Ok(())
    }

    /// Unlink slot `i` (`list_del`) and give it back (`kfree`). O(1).
    fn list_del(&mut self, i: usize) -> Result {
        let Slot { prev, next, .. } = self.slot(i);
        self.slot_mut(prev)?.next = next;
        self.slot_mut(next)?.prev = prev;
        self.blocks -= 1;
        self.put_slot(i);
        Ok(())
    }

    /// `get_va_block` without a hint (memory.c:594-739): the smallest free
    /// block whose part from the first `align`-aligned address holds `size`
    /// bytes, the first (lowest-address) one on a tie, scanning the whole list;
    /// the block is cut from that address, a cut-off front part goes back with
    /// `add_va_block_locked`. O(n) in the number of free blocks.
    ///
    /// `align` must be a power of two (upstream: the page size, or 2 MiB for a
    /// 2 MiB aligned host buffer). Returns the start of the block; `ENOMEM`
    /// when no block holds it (upstream returns 0) or when the front part
    /// cannot be re-added, `EINVAL` for size 0 or a bad alignment.
    pub(crate) fn get_va_block(&mut self, size: u64, align: u64) -> Result<u64> {
        if size == 0 || !align.is_power_of_two() {
            return Err(EINVAL);
        }
        let align_mask = !(align - 1);
        // (slot, valid_start, valid_size) of the best block so far.
        let mut best: Option<(usize, u64, u64)> = None;
        // list_for_each_entry(va_block, &va_range->list, node)
        let mut i = self.slot(HEAD).next;
        while i != HEAD {
            let cur = i;
            let b = self.slot(cur);
            i = b.next;
            let mut valid_start = b.start;
            if valid_start & (align - 1) != 0 {
                valid_start &= align_mask;
                valid_start = valid_start.wrapping_add(align);
                if valid_start > b.end {
                    continue;
                }
            }
            let valid_size = b.end - valid_start + 1;
            if valid_size < size {
                continue;
            }
            // "Pick the minimal length block which has the required size".
            if best.is_none_or(|(_, _, s)| valid_size < s) {
                best = Some((cur, valid_start, valid_size));
            }
        }
        let (idx, valid_start, valid_size) = best.ok_or(ENOMEM)?;
        let blk = self.slot(idx);
        let mut front = None;
        if valid_start > blk.start {
            front = Some((blk.start, valid_start - 1));
            let s = self.slot_mut(idx)?;
            s.start = valid_start;
            s.size = valid_size;
        }
        let blk = self.slot(idx);
        if blk.size > size {
            let s = self.slot_mut(idx)?;
            s.start += size;
            s.size = s.end - s.start + 1;
        } else {
            self.list_del(idx)?;
        }
        if let Some((s, e)) = front {
            // Upstream loses the block's VA if this fails (returns 0 with the
            // list already changed); so does this.
            self.add_va_block(s, e).map_err(|_| ENOMEM)?;
        }
        Ok(valid_start)
    }

    /// `add_va_block_locked` (memory.c:482-520): give `[start, end]` (inclusive)
    /// back. Walks the whole list, failing with `EINVAL` if any free block
    /// overlaps it (upstream's "block crossing ranges") and remembering the last
    /// block that ends before `start`; links the new block after that one (or
    /// first) and merges it with touching neighbours. O(n). `ENOMEM` if no slot
    /// can be had (upstream: `kmalloc` failed); nothing changes on error.
    ///
    /// Upstream passes the size to `hl_mem_area_crosses_range` as `u32`; sizes
    /// here are `u64`, the same for blocks below 4 GiB.
    pub(crate) fn add_va_block(&mut self, start: u64, end: u64) -> Result {
        if end < start {
            return Err(EINVAL);
        }
        let mut res = HEAD;
        let mut i = self.slot(HEAD).next;
        while i != HEAD {
            let b = self.slot(i);
            // hl_mem_area_crosses_range(start, size, b.start, b.end)
            if start <= b.end && b.start <= end {
                return Err(EINVAL);
            }
            if b.end < start {
                res = i;
            }
            i = b.next;
        }
        let new = self.new_slot(start, end)?;
        self.list_add(new, res)?;
        self.merge(new)
    }

    /// `merge_va_blocks_locked` (memory.c:446-467): merge the block in slot `i`
    /// into the previous block when that one ends right before it, then the
    /// result into the next block when that one starts right after. O(1).
    fn merge(&mut self, mut i: usize) -> Result {
        let cur = self.slot(i);
        let prev = cur.prev;
        if prev != HEAD && self.slot(prev).end.wrapping_add(1) == cur.start {
            let p = self.slot_mut(prev)?;
            p.end = cur.end;
            p.size = p.end - p.start + 1;
            self.list_del(i)?;
            i = prev;
        }
        let cur = self.slot(i);
        let next = cur.next;
        if next != HEAD && cur.end.wrapping_add(1) == self.slot(next).start {
            let n = self.slot_mut(next)?;
            n.start = cur.start;
            n.size = n.end - n.start + 1;
            self.list_del(i)?;
        }
        Ok(())
    }

    /// Number of free blocks. O(1).
    pub(crate) fn free_blocks(&self) -> usize {
        self.blocks
    }

    /// Call `f(start, end)` (inclusive end) for every free block in list
    /// order. O(n).
    pub(crate) fn for_each_free(&self, mut f: impl FnMut(u64, u64)) {
        let mut i = self.slot(HEAD).next;
        while i != HEAD {
            let b = self.slot(i);
            f(b.start, b.end);
            i = b.next;
        }
    }
}

#[kunit_tests(hlrs_bench_upstream_va_list)]
mod tests {
    use super::*;
    use crate::{
        asic::{self, AsicProperties},
        bench::rng::XorShift64Star,
        vm::va_alloc::{VaAllocConfig, VaAllocator, VaRequest},
    };

    /// Whether the free blocks of `up` are those of `ours`, as upstream's list
    /// shows them (`for_each_block` joins free space across the edges of the
    /// hint-only span, exclusive ends).
    fn same_free_lists(up: &UpstreamVaList, ours: &VaAllocator) -> Result<bool> {
        let mut ok = true;
        let mut a = KVec::new();
        up.for_each_free(|s, e| {
            ok &= a.push((s, e + 1), GFP_KERNEL).is_ok();
        });
        let mut b = KVec::new();
        ours.for_each_block(|s, e, free| {
            if free {
                ok &= b.push((s, e), GFP_KERNEL).is_ok();
            }
        });
        Ok(ok && a.len() == up.free_blocks() && a == b)
    }

    /// Upstream's list and this driver's allocator make the same choices.
    ///
    /// Both are best fit with ties to the lowest address, so on a random
    /// workload without hints every allocation must return the same address
    /// and the free blocks must be the same. This holds although ours keeps
    /// the hint-reserved span of the HOST range out of no-hint allocations and
    /// the transcription does not: the span is at the top of the range, far
    /// above anything this workload reaches, and ours' free space below it is
    /// one best-fit candidate as upstream's tail is.
    #[test]
    fn places_blocks_as_ours_does() -> Result {
        let asic = AsicProperties::gaudi2(6, 0)?;
        let span = asic.host_va;
        let page = asic.host_page_size;
        let cfg = VaAllocConfig::new(span, page)
            .with_extra_align(asic.host_huge_page_size)
            .with_hint_reserved(asic::HINTS_HOST_RESERVED);
        let mut ours = VaAllocator::new(&cfg)?;
        let mut up = UpstreamVaList::new(span.start, span.end - 1)?;
        let mut rng = XorShift64Star::new(7);
        let mut live: KVec<(u64, u64)> = KVec::new();
        for step in 0..3000u32 {
            if live.is_empty() || rng.below(100) < 55 {
                let size = rng.class_pages() * page;
                let a = ours.alloc(VaRequest::new(size)).map_err(Error::from)?;
                let b = up.get_va_block(size, page)?;
                assert_eq!(a, b);
                live.push((a, size), GFP_KERNEL)?;
            } else {
                let i = rng.below(live.len() as u64) as usize;
                let last = live.pop().ok_or(EINVAL)?;
                let (start, size) = match live.get_mut(i) {
                    Some(slot) => core::mem::replace(slot, last),
                    None => last,
                };
                ours.free(start, size)?;
                up.add_va_block(start, start + size - 1)?;
            }
            if step % 250 == 0 {
                assert!(same_free_lists(&up, &ours)?);
            }
        }
        assert!(same_free_lists(&up, &ours)?);
        assert!(up.free_blocks() > 10);
        // Upstream's overlap check refuses a double free.
        if let Some(&(start, size)) = live.first() {
            up.add_va_block(start, start + size - 1)?;
            assert_eq!(up.add_va_block(start, start + size - 1), Err(EINVAL));
            ours.free(start, size)?;
            live.remove(0).map_err(|_| EINVAL)?;
        }
        for &(start, size) in live.iter() {
            ours.free(start, size)?;
            up.add_va_block(start, start + size - 1)?;
        }
        assert!(ours.is_pristine());
        assert_eq!(up.free_blocks(), 1);
        assert!(same_free_lists(&up, &ours)?);
        Ok(())
    }

    /// The bulk constructor gives the list the same calls would, and refuses
    /// unsorted or touching blocks.
    #[test]
    fn bulk_constructor_matches_the_calls() -> Result {
        let blocks = [(0x1000u64, 0x1fff), (0x3000, 0x5fff), (0x8000, 0xffff)];
        let bulk = UpstreamVaList::from_free_blocks(&blocks)?;
        let mut by_calls = UpstreamVaList::new(0x8000, 0xffff)?;
        by_calls.add_va_block(0x1000, 0x1fff)?;
        by_calls.add_va_block(0x3000, 0x5fff)?;
        let mut ok = true;
        let mut a = KVec::new();
        let mut b = KVec::new();
        bulk.for_each_free(|s, e| {
            ok &= a.push((s, e), GFP_KERNEL).is_ok();
        });
        by_calls.for_each_free(|s, e| {
            ok &= b.push((s, e), GFP_KERNEL).is_ok();
        });
        assert!(ok && a == b && a.len() == 3);
        // Freeing the gap between the first two merges all three into one.
        by_calls.add_va_block(0x2000, 0x2fff)?;
        assert_eq!(by_calls.free_blocks(), 2);
        let touching = [(0x1000u64, 0x1fff), (0x2000, 0x2fff)];
        assert!(UpstreamVaList::from_free_blocks(&touching).is_err());
        let unsorted = [(0x3000u64, 0x3fff), (0x1000, 0x1fff)];
        assert!(UpstreamVaList::from_free_blocks(&unsorted).is_err());
        // Best fit: the smaller of [0x1000, 0x5fff] and [0x8000, 0xffff].
        assert_eq!(by_calls.get_va_block(0x1000, 0x1000), Ok(0x1000));
        assert_eq!(by_calls.get_va_block(0x4000, 0x1000), Ok(0x2000));
        assert_eq!(by_calls.free_blocks(), 1);
        // Ties go to the lowest address.
        let mut ties = UpstreamVaList::from_free_blocks(&[(0x1000, 0x2fff), (0x5000, 0x6fff)])?;
        assert_eq!(ties.get_va_block(0x1000, 0x1000), Ok(0x1000));
        assert_eq!(ties.free_blocks(), 2);
        // An unaligned block start moves to the next aligned address; the front
        // part goes back to the list.
        let mut front = UpstreamVaList::from_free_blocks(&[(0x5000, 0x6fff)])?;
        assert_eq!(front.get_va_block(0x1000, 0x2000), Ok(0x6000));
        let mut left = KVec::new();
        front.for_each_free(|s, e| {
            ok &= left.push((s, e), GFP_KERNEL).is_ok();
        });
        assert!(ok && left.len() == 1 && left.first() == Some(&(0x5000, 0x5fff)));
        let mut bulk = bulk;
        assert_eq!(bulk.get_va_block(0x1000, 0x1000), Ok(0x1000));
        assert_eq!(bulk.get_va_block(0x2000, 0x1000), Ok(0x3000));
        assert_eq!(bulk.free_blocks(), 2);
        Ok(())
    }
}
