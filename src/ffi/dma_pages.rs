// SPDX-License-Identifier: GPL-2.0

//! [`DmaPages`]: the host pages a simulated device may reach by DMA, by bus
//! address: the map of a software IOMMU.
//!
//! The simulated Gaudi2 gives out a host page's physical address as its bus
//! address (an identity IOMMU, so the addresses the driver and the tests see
//! are the ones `/proc/self/pagemap` shows), but only the pages mapped here
//! are reachable: an access to any other address is refused, and the caller
//! records an IOMMU fault. Each mapping holds its own reference to the page
//! (`get_page`), dropped when it is unmapped, so a page the device can reach
//! is never freed under it, whatever the order in which its owner unpins it
//! and unmaps it. The same page may be mapped several times (two MAPs of one
//! user buffer); it stays reachable until the last is undone.
//!
//! Layout: the count of mappings of each page frame, in leaves of 64 frames
//! (one tree node each, 128 bytes of counts) keyed by `pfn / 64`, so a
//! buffer of neighbouring frames costs one node per 256 KiB.

use super::{host_page::HostPage, pin::PinnedUserPages};
use kernel::{
    bindings,
    page::PAGE_SIZE,
    prelude::*,
    rbtree::{RBTree, RBTreeNodeReservation},
};

#[allow(improper_ctypes)]
extern "C" {
    // Prototypes in `ffi/helpers.h`, bodies in `ffi/helpers.c`.
    fn hlrs_page_to_phys(page: *mut bindings::page) -> u64;
    fn hlrs_pfn_to_page(pfn: c_ulong) -> *mut bindings::page;
    fn hlrs_get_page(page: *mut bindings::page);
    fn hlrs_put_page(page: *mut bindings::page);
}

/// Page frames per leaf.
const LEAF_FRAMES: u64 = 64;
const PAGE: u64 = PAGE_SIZE as u64;

/// The mapping counts of 64 neighbouring page frames.
struct Leaf {
    counts: [u16; LEAF_FRAMES as usize],
    /// Frames with a non-zero count.
    live: u32,
}

impl Leaf {
    fn empty() -> Self {
        Self {
            counts: [0; LEAF_FRAMES as usize],
            live: 0,
        }
    }

    /// One more mapping of frame `slot`; `false` (nothing changed) if its
    /// count is full.
    fn add(&mut self, slot: u64) -> bool {
        let Some(c) = usize::try_from(slot)
            .ok()
            .and_then(|s| self.counts.get_mut(s))
        else {
            return false;
        };
        let Some(next) = c.checked_add(1) else {
            return false;
        };
        if *c == 0 {
            self.live = self.live.saturating_add(1);
        }
        *c = next;
        true
    }

    /// One mapping fewer of frame `slot`; `false` if it had none.
    fn sub(&mut self, slot: u64) -> bool {
        let Some(c) = usize::try_from(slot)
            .ok()
            .and_then(|s| self.counts.get_mut(s))
        else {
            return false;
        };
        if *c == 0 {
            return false;
        }
        *c -= 1;
        if *c == 0 {
            self.live = self.live.saturating_sub(1);
        }
        true
    }
}

/// Host pages mapped for a device's DMA, by bus (= physical) address.
///
/// # Invariants
///
/// For every frame whose count in `leaves` is `c > 0`, this value owns `c`
/// references to the page of that frame (taken with `get_page` on a live
/// page); `mapped` is the sum of the counts; no leaf has `live == 0`.
pub(crate) struct DmaPages {
    leaves: RBTree<u64, Leaf>,
    mapped: u64,
    /// The node of the last leaf emptied, for the next new leaf: a MAP+UNMAP
    /// of a small buffer allocates no leaf.
    spare: Option<RBTreeNodeReservation<u64, Leaf>>,
}

// SAFETY: the references it owns may be used and dropped from any thread.
unsafe impl Send for DmaPages {}
// SAFETY: `&self` only copies in and out of pages it holds references to.
unsafe impl Sync for DmaPages {}

impl DmaPages {
    /// Nothing mapped.
    pub(crate) fn new() -> Self {
        Self {
            leaves: RBTree::new(),
            mapped: 0,
            spare: None,
        }
    }

    /// Mappings held (a page mapped twice counts twice). O(1).
    pub(crate) fn mapped(&self) -> u64 {
        self.mapped
    }

    /// Whether no leaf is left (tests). O(1).
    #[cfg(CONFIG_KUNIT)]
    pub(crate) fn leaves_is_empty(&self) -> bool {
        self.leaves.is_empty()
    }

    /// Whether the page holding bus address `addr` is mapped. O(log n).
    pub(crate) fn is_mapped(&self, addr: u64) -> bool {
        self.count(addr / PAGE) > 0
    }

    fn count(&self, pfn: u64) -> u16 {
        let slot = usize::try_from(pfn % LEAF_FRAMES).unwrap_or(usize::MAX);
        self.leaves
            .get(&(pfn / LEAF_FRAMES))
            .and_then(|l| l.counts.get(slot).copied())
            .unwrap_or(0)
    }

    /// Count one more mapping of each of the `n` pages `page(0)`, ..,
    /// `page(n - 1)` and take a reference for each, then give `sink` its
    /// index and bus address. Pages whose frames share a leaf one after the
    /// other share its lookup. On an error (`EINVAL`: no page `k`; `ENOMEM`:
    /// no leaf, or a count is full; or `sink`'s), returns it with how many
    /// pages were taken (the first ones). O(n + leaves x log m).
    ///
    /// # Safety
    ///
    /// Every page `page` gives is live for the duration of the call.
    unsafe fn take_pages(
        &mut self,
        n: usize,
        page: &dyn Fn(usize) -> Option<*mut bindings::page>,
        sink: &mut dyn FnMut(usize, u64) -> Result,
    ) -> Result<(), (Error, usize)> {
        // SAFETY: the pages `page` gives are live (safety contract).
        let phys = |p: *mut bindings::page| unsafe { hlrs_page_to_phys(p) };
        let mut next = page(0).map(|p| (p, phys(p)));
        let mut k = 0;
        while k < n {
            let (mut p, mut at) = next.ok_or((EINVAL, k))?;
            let key = at / PAGE / LEAF_FRAMES;
            if self.leaves.get(&key).is_none() {
                let node = match self.spare.take() {
                    Some(n) => n,
                    None => RBTreeNodeReservation::new(GFP_KERNEL).map_err(|_| (ENOMEM, k))?,
                };
                self.leaves.insert(node.into_node(key, Leaf::empty()));
            }
            let leaf = self.leaves.get_mut(&key).ok_or((ENOMEM, k))?;
            // Page `k` and those after it in the same leaf.
            loop {
                if !leaf.add(at / PAGE % LEAF_FRAMES) {
                    return Err((ENOMEM, k));
                }
                self.mapped = self.mapped.saturating_add(1);
                // SAFETY: `p` is live (safety contract).
                // INVARIANT: the reference that goes with the count added.
                unsafe { hlrs_get_page(p) };
                sink(k, at).map_err(|e| (e, k + 1))?;
                k += 1;
                next = if k < n {
                    page(k).map(|q| (q, phys(q)))
                } else {
                    None
                };
                match next {
                    Some((q, a)) if a / PAGE / LEAF_FRAMES == key => (p, at) = (q, a),
                    _ => break,
                }
            }
        }
        Ok(())
    }

    /// Undo one mapping of each frame of `frames`, dropping its reference;
    /// frames that are not mapped are left alone. Neighbouring frames share
    /// a leaf lookup. Returns how many were mapped. Never allocates.
    /// O(n + leaves x log m).
    fn put_frames(&mut self, frames: impl Iterator<Item = u64>) -> usize {
        let mut frames = frames.peekable();
        let mut done = 0usize;
        while let Some(first) = frames.next() {
            let key = first / LEAF_FRAMES;
            let Some(leaf) = self.leaves.get_mut(&key) else {
                continue;
            };
            let mut pfn = first;
            loop {
                if leaf.sub(pfn % LEAF_FRAMES) {
                    self.mapped = self.mapped.saturating_sub(1);
                    // The count was non-zero: we owned a reference to the
                    // page of `pfn` (invariant); it goes with the count.
                    // SAFETY: that page is live; `pfn_to_page` of it is it.
                    unsafe { hlrs_put_page(hlrs_pfn_to_page(pfn as c_ulong)) };
                    done += 1;
                }
                match frames.peek() {
                    Some(&next) if next / LEAF_FRAMES == key => {
                        pfn = next;
                        frames.next();
                    }
                    _ => break,
                }
            }
            if leaf.live == 0 {
                if let Some(node) = self.leaves.remove_node(&key) {
                    let node = node.into_reservation();
                    if self.spare.is_none() {
                        self.spare = Some(node);
                    }
                }
            }
        }
        done
    }

    /// Map the `n` pinned pages of `pinned` from page `first` on, each on
    /// its own (at its physical address), giving `sink` the index (from 0)
    /// and bus address of each once it is mapped. On an error (`EINVAL` past
    /// the pages, `ENOMEM`, or `sink`'s) nothing of it stays mapped.
    /// O(n + leaves x log m).
    pub(crate) fn map_pinned(
        &mut self,
        pinned: &PinnedUserPages,
        (first, n): (usize, usize),
        sink: &mut dyn FnMut(usize, u64) -> Result,
    ) -> Result {
        let page = |k: usize| first.checked_add(k).and_then(|i| pinned.page_ptr(i));
        // SAFETY: the pages of `pinned` are pinned, live while it is borrowed.
        let taken = unsafe { self.take_pages(n, &page, sink) };
        taken.map_err(|(e, done)| {
            let frames = (0..done)
                .filter_map(|k| first.checked_add(k).and_then(|i| pinned.phys(i)))
                .map(|a| a / PAGE);
            self.put_frames(frames);
            e
        })
    }

    /// Map one page given by a reference (kept by the caller or dropped:
    /// the mapping takes a reference of its own); its bus address. O(log n).
    pub(crate) fn map_page(&mut self, page: &HostPage) -> Result<u64> {
        let p = page.as_ptr();
        let mut bus = 0;
        let mut sink = |_, a| {
            bus = a;
            Ok(())
        };
        // SAFETY: `page` holds a reference: the page is live.
        unsafe { self.take_pages(1, &|k| (k == 0).then_some(p), &mut sink) }.map_err(|(e, _)| e)?;
        Ok(bus)
    }

    /// Undo one mapping of each of the `n` pages from bus address `addr` on
    /// (page aligned), dropping its reference. Returns how many were mapped
    /// (the others are left alone: an unmap of an address never mapped).
    /// Never allocates. O(n + leaves x log m).
    pub(crate) fn unmap(&mut self, addr: u64, n: usize) -> usize {
        let first = addr / PAGE;
        self.put_frames((0..n as u64).map_while(|k| first.checked_add(k)))
    }

    /// [`Self::unmap`] of `per` pages at each of `addrs`. O(pages + leaves x
    /// log m).
    pub(crate) fn unmap_each(&mut self, addrs: &[u64], per: usize) -> usize {
        let frames = addrs
            .iter()
            .flat_map(|a| (0..per as u64).map_while(move |k| (a / PAGE).checked_add(k)));
        self.put_frames(frames)
    }

    /// Run `f` on the kernel address of byte `addr % PAGE` of the page at
    /// `addr`, if that page is mapped.
    fn with_page<T>(&self, addr: u64, f: impl FnOnce(*mut u8) -> T) -> Option<T> {
        let pfn = addr / PAGE;
        if self.count(pfn) == 0 {
            return None;
        }
        let off = usize::try_from(addr % PAGE).ok()?;
        // SAFETY: the frame's count is non-zero, so we own a reference to its
        // page (invariant): it is live. The local mapping is undone below.
        let base = unsafe { bindings::kmap_local_page(hlrs_pfn_to_page(pfn as c_ulong)) };
        // SAFETY: `off < PAGE`: inside the mapped page.
        let r = f(unsafe { base.cast::<u8>().add(off) });
        // SAFETY: the mapping made above, undone once.
        unsafe { bindings::kunmap_local(base) };
        Some(r)
    }

    /// Copy `buf.len()` bytes from bus address `addr`. Stops at the first
    /// page that is not mapped, returning its address (what was before it
    /// is copied). O(pages x log n).
    pub(crate) fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), u64> {
        if addr.checked_add(buf.len() as u64).is_none() {
            return Err(addr);
        }
        for (at, pos, n) in page_pieces(addr, buf.len()) {
            let dst = buf.get_mut(pos..pos.saturating_add(n)).ok_or(at)?;
            // SAFETY: `src` points at `n` bytes inside a live mapped page
            // (the piece does not leave it); `dst` is `n` writable bytes. The
            // C `memcpy` copies: the page's owner may write it meanwhile.
            self.with_page(at, |src| unsafe {
                bindings::memcpy(dst.as_mut_ptr().cast(), src.cast_const().cast(), n)
            })
            .ok_or(at)?;
        }
        Ok(())
    }

    /// Copy `data` to bus address `addr` (see [`Self::read`]).
    pub(crate) fn write(&self, addr: u64, data: &[u8]) -> Result<(), u64> {
        if addr.checked_add(data.len() as u64).is_none() {
            return Err(addr);
        }
        for (at, pos, n) in page_pieces(addr, data.len()) {
            let src = data.get(pos..pos.saturating_add(n)).ok_or(at)?;
            // SAFETY: as in `read`, the copy going the other way.
            self.with_page(at, |dst| unsafe {
                bindings::memcpy(dst.cast(), src.as_ptr().cast(), n)
            })
            .ok_or(at)?;
        }
        Ok(())
    }
}

/// The pieces of `[addr, addr + len)` that lie in one 4 KiB page each:
/// (address, offset from `addr`, length). Stops early if the range wraps
/// (callers check). Lazy: O(1) per piece.
pub(crate) fn page_pieces(addr: u64, len: usize) -> impl Iterator<Item = (u64, usize, usize)> {
    let mut done = 0usize;
    core::iter::from_fn(move || {
        let at = addr.checked_add(done as u64)?;
        let left = len.checked_sub(done).filter(|&l| l > 0)?;
        let room = usize::try_from(PAGE - at % PAGE).ok()?;
        let n = left.min(room);
        let piece = (at, done, n);
        done = done.checked_add(n)?;
        Some(piece)
    })
}

impl Drop for DmaPages {
    fn drop(&mut self) {
        // What was never unmapped: its references go back.
        for (key, leaf) in self.leaves.iter() {
            for (slot, &count) in (0u64..).zip(leaf.counts.iter()) {
                let pfn = key * LEAF_FRAMES + slot;
                for _ in 0..count {
                    // SAFETY: one of the `count` references we own to the
                    // page of `pfn` (invariant), dropped once.
                    unsafe { hlrs_put_page(hlrs_pfn_to_page(pfn as c_ulong)) };
                }
            }
        }
    }
}
