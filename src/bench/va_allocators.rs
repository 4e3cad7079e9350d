// SPDX-License-Identifier: GPL-2.0

//! KUnit benchmark: three VA allocators side by side on the same workload, in
//! the same run, with fixed seeds.
//!
//! - `ours`: this driver's allocator, through [`ContextVm::alloc`] and
//!   [`ContextVm::free`] on the HOST range (O(log n)).
//! - `drm_mm`: the kernel's `drm_mm` in best-fit mode (`DRM_MM_INSERT_BEST`),
//!   through [`DrmMm`] (O(log n)).
//! - `upstream`: upstream habanalabs' sorted list of free blocks,
//!   [`UpstreamVaList`] (O(n) per allocation and per free).
//!
//! The range is the Gaudi2 HOST VA range with 4 KiB pages. Each allocator is
//! called under one mutex per call, as the real ones are (ours locks inside
//! [`ContextVm`]).
//!
//! Population for `live` blocks: `2 x live` blocks allocated in address order,
//! sizes drawn from [`SIZE_CLASSES`](super::rng::SIZE_CLASSES) with seed 1, then every other one freed
//! (the first, third, ...): `live` allocated blocks, `live` holes of varied
//! sizes, and the free tail. `ours` and `drm_mm` build it with their own
//! allocate and free calls (checked to land at the same addresses); `upstream`
//! with [`UpstreamVaList::from_free_blocks`] (the same free list: the holes do
//! not touch each other).
//!
//! Measured operation: one allocation of a random size class followed by the
//! free of that block. The sizes of a batch are drawn once (seed 2) and are the
//! same for every allocator and every batch; a batch has
//! `clamp(2,000,000 / live, 20, 2000)` pairs. [`BATCHES`] batches each,
//! alternating between the allocators so that emulator noise hits all alike;
//! each one's best and median batch are reported, in ns per allocate+free pair.
//!
//! Fragmentation: a fixed random workload from an empty range (seed 3), the
//! same for all three; then the largest free block over all free space,
//! computed from the workload's own sorted list of live blocks (the gaps
//! between them and the range edges), so allocator-independent. The free tail
//! of the 128 TiB range dwarfs the gaps, so that figure is about 1000 per mille
//! for any allocator; the same ratio over the gaps below the highest live block
//! alone, and that block's end, tell the allocators apart.
//!
//! Output, one figure a line, for the host side to parse:
//! `@@BENCH <id> <value> <unit>`, with ids
//! `va.<allocator>.live<N>.best|median` (`ns`), `va.frag.<allocator>`
//! (`permille`), `va.frag_holes.<allocator>` (`permille`) and
//! `va.frag_top.<allocator>` (`pages`).

use crate::{
    asic::{AsicProperties, VaSpan},
    bench::{rng::XorShift64Star, upstream_va_list::UpstreamVaList},
    device::HlDevice,
    ffi::drm_mm::DrmMm,
    vm::{context_vm::ContextVm, va_alloc::VaRequest, va_range::VaRangeType},
};
use kernel::{
    new_mutex,
    prelude::*,
    sync::{Arc, Mutex},
    time::{Instant, Monotonic},
};

/// Seed of the population's sizes.
const SEED_POPULATION: u64 = 1;
/// Seed of the measured operations' sizes.
const SEED_OPS: u64 = 2;
/// Seed of the fragmentation workload.
const SEED_FRAG: u64 = 3;

/// Live-block counts of the sweep; those above `bench_va_blocks` are skipped.
const SWEEP: [u64; 4] = [100, 1_000, 10_000, 100_000];
/// Timed batches per allocator and live-block count.
const BATCHES: usize = 7;
/// Steps of the fragmentation workload.
const FRAG_STEPS: u32 = 20_000;
/// Per-mille chance that a fragmentation step allocates (else it frees).
const FRAG_ALLOC_PERMILLE: u64 = 550;

/// One allocator under test, each call under its lock.
trait BenchAllocator {
    /// Its name in the `@@BENCH` ids.
    const NAME: &'static str;
    /// Allocate `size` bytes (whole pages) by best fit; the start and a handle
    /// for [`Self::free`].
    fn alloc(&self, size: u64) -> Result<(u64, usize)>;
    /// Free what [`Self::alloc`] returned.
    fn free(&self, start: u64, size: u64, handle: usize) -> Result;
}

/// This driver's allocator: the HOST range of a context.
struct Ours {
    _dev: Arc<HlDevice>,
    vm: Arc<ContextVm>,
}

impl Ours {
    /// A device and a context with empty ranges.
    fn new(asic: &AsicProperties) -> Result<Self> {
        let dev = HlDevice::new(0, asic.clone())?;
        let vm = Arc::pin_init(ContextVm::new(&dev.vm, 1)?, GFP_KERNEL)?;
        Ok(Self { _dev: dev, vm })
    }

    /// Number of live allocations of the HOST range. O(1).
    fn live(&self) -> usize {
        self.vm.range(VaRangeType::Host).lock().allocated_blocks()
    }
}

impl BenchAllocator for Ours {
    const NAME: &'static str = "ours";

    fn alloc(&self, size: u64) -> Result<(u64, usize)> {
        let start = self
            .vm
            .alloc(VaRangeType::Host, VaRequest::new(size))
            .map_err(Error::from)?;
        Ok((start, 0))
    }

    fn free(&self, start: u64, size: u64, _handle: usize) -> Result {
        self.vm.free(VaRangeType::Host, start, size)
    }
}

/// `drm_mm` over the same range, under a mutex.
struct DrmMmBench(Pin<KBox<Mutex<DrmMm>>>);

impl DrmMmBench {
    /// An empty `drm_mm` over `span` with room for `nodes` nodes.
    fn new(span: VaSpan, nodes: usize) -> Result<Self> {
        let mm = DrmMm::new(span.start, span.len(), nodes)?;
        Ok(Self(KBox::pin_init(new_mutex!(mm), GFP_KERNEL)?))
    }
}

impl BenchAllocator for DrmMmBench {
    const NAME: &'static str = "drm_mm";

    fn alloc(&self, size: u64) -> Result<(u64, usize)> {
        let (slot, start) = self.0.lock().insert_best(size)?;
        Ok((start, slot))
    }

    fn free(&self, _start: u64, _size: u64, handle: usize) -> Result {
        self.0.lock().remove(handle)
    }
}

/// Upstream's list over the same range, under a mutex.
struct UpstreamBench {
    list: Pin<KBox<Mutex<UpstreamVaList>>>,
    /// Alignment passed to `get_va_block`: the page size, as upstream's MAP of
    /// a host buffer that is not 2 MiB aligned.
    page: u64,
}

impl UpstreamBench {
    /// The list holding `free` (inclusive ends).
    fn new(free: &[(u64, u64)], page: u64) -> Result<Self> {
        let list = UpstreamVaList::from_free_blocks(free)?;
        Ok(Self {
            list: KBox::pin_init(new_mutex!(list), GFP_KERNEL)?,
            page,
        })
    }
}

impl BenchAllocator for UpstreamBench {
    const NAME: &'static str = "upstream";

    fn alloc(&self, size: u64) -> Result<(u64, usize)> {
        Ok((self.list.lock().get_va_block(size, self.page)?, 0))
    }

    fn free(&self, start: u64, size: u64, _handle: usize) -> Result {
        self.list.lock().add_va_block(start, start + size - 1)
    }
}

/// The population's `2 x live` blocks, `(start, size)` in address order from
/// `base`, sizes from [`SIZE_CLASSES`](super::rng::SIZE_CLASSES) with [`SEED_POPULATION`]. O(live).
fn population_layout(live: u64, base: u64, page: u64) -> Result<KVVec<(u64, u64)>> {
    let mut rng = XorShift64Star::new(SEED_POPULATION);
    let mut v = KVVec::with_capacity(2 * live as usize, GFP_KERNEL)?;
    let mut at = base;
    for _ in 0..2 * live {
        let size = rng.class_pages() * page;
        v.push((at, size), GFP_KERNEL)?;
        at += size;
    }
    Ok(v)
}

/// Build the population in `a` with its own calls: allocate every block of
/// `layout`, then free the even ones. Returns the `(start, size, handle)` of
/// the blocks left allocated; `EINVAL` if a block does not land where the
/// layout says. O(live x allocator op).
fn populate<A: BenchAllocator>(a: &A, layout: &[(u64, u64)]) -> Result<KVVec<(u64, u64, usize)>> {
    let mut all = KVVec::with_capacity(layout.len(), GFP_KERNEL)?;
    for &(start, size) in layout {
        let (got, handle) = a.alloc(size)?;
        if got != start {
            pr_err!(
                "{}: population block at {:#x}, not {:#x}\n",
                A::NAME,
                got,
                start
            );
            return Err(EINVAL);
        }
        all.push((start, size, handle), GFP_KERNEL)?;
    }
    let mut kept = KVVec::with_capacity(layout.len() / 2, GFP_KERNEL)?;
    for (i, &(start, size, handle)) in all.iter().enumerate() {
        if i % 2 == 0 {
            a.free(start, size, handle)?;
        } else {
            kept.push((start, size, handle), GFP_KERNEL)?;
        }
    }
    Ok(kept)
}

/// The free list the population leaves (inclusive ends): the even blocks of
/// `layout`, which do not touch each other, then the tail up to `span.end`.
/// O(live).
fn population_free_list(layout: &[(u64, u64)], span: VaSpan) -> Result<KVVec<(u64, u64)>> {
    let mut free = KVVec::with_capacity(layout.len() / 2 + 1, GFP_KERNEL)?;
    let mut top = span.start;
    for (i, &(start, size)) in layout.iter().enumerate() {
        if i % 2 == 0 {
            free.push((start, start + size - 1), GFP_KERNEL)?;
        }
        top = start + size;
    }
    if top < span.end {
        free.push((top, span.end - 1), GFP_KERNEL)?;
    }
    Ok(free)
}

/// One timed batch: allocate and free each size of `sizes` in turn. Returns
/// ns per allocate+free pair.
fn batch(a: &impl BenchAllocator, sizes: &[u64]) -> Result<i64> {
    let t0 = Instant::<Monotonic>::now();
    for &size in sizes {
        let (start, handle) = a.alloc(size)?;
        a.free(start, size, handle)?;
    }
    let ns = t0.elapsed().as_nanos();
    Ok(ns / (sizes.len().max(1) as i64))
}

/// Best and median of `times`, sorted in place. O(n log n).
fn best_median(times: &mut [i64]) -> (i64, i64) {
    crate::sort::sort_by_key(times, |&t| t);
    let best = times.first().copied().unwrap_or(0);
    let median = times.get(times.len() / 2).copied().unwrap_or(0);
    (best, median)
}

/// Print `@@BENCH va.<name>.live<live>.best|median`.
fn report(name: &str, live: u64, times: &mut [i64]) {
    let (best, median) = best_median(times);
    pr_info!("@@BENCH va.{}.live{}.best {} ns\n", name, live, best);
    pr_info!("@@BENCH va.{}.live{}.median {} ns\n", name, live, median);
}

/// Fragmentation figures of one allocator after the workload.
struct Frag {
    /// Largest free block over all free space, gaps and tail (per mille).
    all: u64,
    /// The same, counting only the gaps below the highest live block's end.
    holes: u64,
    /// Pages from the range start to the highest live block's end.
    top_pages: u64,
}

/// `num / den` in per mille, for `num <= den` (0 for `den == 0`). O(1).
fn permille(num: u64, den: u64) -> u64 {
    match num.checked_mul(1000) {
        Some(n) => n.checked_div(den).unwrap_or(0),
        // Only past 2^54 bytes, far above any VA range here.
        None => num.checked_div(den / 1000).unwrap_or(0),
    }
}

/// The fragmentation workload on `a` over `span`: [`FRAG_STEPS`] steps, each
/// allocating a random size class with probability [`FRAG_ALLOC_PERMILLE`]
/// (always when nothing is live) or else freeing a random live block; the
/// decisions depend only on the generator, so all allocators see the same
/// sequence. Measures the gaps, then frees everything. O(steps x allocator op
/// + live log live).
fn fragmentation(a: &impl BenchAllocator, span: VaSpan, page: u64) -> Result<Frag> {
    let mut rng = XorShift64Star::new(SEED_FRAG);
    let mut live: KVVec<(u64, u64, usize)> = KVVec::new();
    for _ in 0..FRAG_STEPS {
        let r = rng.below(1000);
        if live.is_empty() || r < FRAG_ALLOC_PERMILLE {
            let size = rng.class_pages() * page;
            let (start, handle) = a.alloc(size)?;
            live.push((start, size, handle), GFP_KERNEL)?;
        } else {
            let i = rng.below(live.len() as u64) as usize;
            // Swap-remove block i: the last one takes its place.
            let last = live.pop().ok_or(EINVAL)?;
            let victim = match live.get_mut(i) {
                Some(slot) => core::mem::replace(slot, last),
                None => last,
            };
            let (start, size, handle) = victim;
            a.free(start, size, handle)?;
        }
    }
    crate::sort::sort_by_key(&mut live, |&(start, _, _)| start);
    let (mut largest_hole, mut holes) = (0u64, 0u64);
    let mut prev = span.start;
    for &(start, size, _) in live.iter() {
        if start < prev {
            pr_err!("fragmentation: live blocks overlap at {:#x}\n", start);
            return Err(EINVAL);
        }
        let gap = start - prev;
        largest_hole = largest_hole.max(gap);
        holes += gap;
        prev = start + size;
    }
    let tail = span.end.checked_sub(prev).ok_or(EINVAL)?;
    let frag = Frag {
        all: permille(largest_hole.max(tail), holes + tail),
        holes: permille(largest_hole, holes),
        top_pages: (prev - span.start) / page,
    };
    for &(start, size, handle) in live.iter() {
        a.free(start, size, handle)?;
    }
    Ok(frag)
}

/// Print the fragmentation figures of allocator `name`.
fn report_frag(name: &str, f: &Frag) {
    pr_info!("@@BENCH va.frag.{} {} permille\n", name, f.all);
    pr_info!("@@BENCH va.frag_holes.{} {} permille\n", name, f.holes);
    pr_info!("@@BENCH va.frag_top.{} {} pages\n", name, f.top_pages);
}

#[kunit_tests(hlrs_bench)]
mod tests {
    use super::*;

    /// Not a timed assertion: prints the cost of one allocate+free pair of the
    /// three allocators at 100 to `bench_va_blocks` live blocks (default 1000;
    /// `make bench`: 100,000) and their fragmentation after a random workload,
    /// and checks that every operation succeeded and everything was given back.
    #[test]
    fn bench_va_allocators_side_by_side() -> Result {
        let t_all = Instant::<Monotonic>::now();
        let asic = AsicProperties::gaudi2(6, 0)?;
        let span = asic.host_va;
        let page = asic.host_page_size;
        let max_live = crate::module_parameters::bench_va_blocks.value();
        for live in SWEEP.into_iter().filter(|&l| l <= max_live) {
            let layout = population_layout(live, span.start, page)?;
            let ours = Ours::new(&asic)?;
            let ours_kept = populate(&ours, &layout)?;
            let drm = DrmMmBench::new(span, 2 * live as usize + 1)?;
            let drm_kept = populate(&drm, &layout)?;
            let up = UpstreamBench::new(&population_free_list(&layout, span)?, page)?;
            drop(layout);
            assert_eq!(ours.live() as u64, live);
            assert_eq!(drm.0.lock().live() as u64, live);
            assert_eq!(up.list.lock().free_blocks() as u64, live + 1);

            // The same sizes for every allocator and batch.
            let rounds = (2_000_000 / live).clamp(20, 2000);
            let mut rng = XorShift64Star::new(SEED_OPS);
            let mut sizes = KVec::with_capacity(rounds as usize, GFP_KERNEL)?;
            for _ in 0..rounds {
                sizes.push(rng.class_pages() * page, GFP_KERNEL)?;
            }
            let (mut t_ours, mut t_drm, mut t_up) =
                ([0i64; BATCHES], [0i64; BATCHES], [0i64; BATCHES]);
            for ((x, y), z) in t_ours.iter_mut().zip(t_drm.iter_mut()).zip(t_up.iter_mut()) {
                *x = batch(&ours, &sizes)?;
                *y = batch(&drm, &sizes)?;
                *z = batch(&up, &sizes)?;
            }
            report(Ours::NAME, live, &mut t_ours);
            report(DrmMmBench::NAME, live, &mut t_drm);
            report(UpstreamBench::NAME, live, &mut t_up);

            // Nothing leaked by the measured pairs; then give everything back.
            assert_eq!(ours.live() as u64, live);
            assert_eq!(drm.0.lock().live() as u64, live);
            assert_eq!(up.list.lock().free_blocks() as u64, live + 1);
            for &(start, size, handle) in ours_kept.iter() {
                ours.free(start, size, handle)?;
            }
            assert!(ours.vm.is_pristine());
            for &(start, size, handle) in drm_kept.iter() {
                drm.free(start, size, handle)?;
            }
            assert_eq!(drm.0.lock().live(), 0);
        }

        // Fragmentation, from empty ranges.
        let ours = Ours::new(&asic)?;
        let f = fragmentation(&ours, span, page)?;
        assert!(ours.vm.is_pristine());
        report_frag(Ours::NAME, &f);
        let drm = DrmMmBench::new(span, FRAG_STEPS as usize)?;
        let f = fragmentation(&drm, span, page)?;
        assert_eq!(drm.0.lock().live(), 0);
        report_frag(DrmMmBench::NAME, &f);
        let up = UpstreamBench::new(&[(span.start, span.end - 1)], page)?;
        let f = fragmentation(&up, span, page)?;
        assert_eq!(up.list.lock().free_blocks(), 1);
        report_frag(UpstreamBench::NAME, &f);

        pr_info!(
            "bench va allocators side by side (live <= {}): {} ms in total\n",
            max_live,
            t_all.elapsed().as_nanos() / 1_000_000
        );
        Ok(())
    }
}
