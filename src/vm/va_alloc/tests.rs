// SPDX-License-Identifier: GPL-2.0

//! The KUnit suite `hlrs_va_alloc` of the VA block allocator
//! ([`super::VaAllocator`]): unit cases, the node accounting of the spare
//! cache, and random operations compared with a simple model.
//!
//! `#[kunit_tests]` takes only an inline module, hence the one below.

use kernel::prelude::*;

#[kunit_tests(hlrs_va_alloc)]
mod suite {
    use crate::asic::{AsicProperties, HINTS_DRAM_RESERVED, HINTS_HOST_RESERVED};
    use crate::vm::va_alloc::{
        spare::{SPARE_BLOCK_NODES, SPARE_SIZE_NODES},
        test_api::NodeStats,
        tree::{size_key, Block, SizeKey, State},
        *,
    };

    const K4: u64 = 1 << 12;
    const M2: u64 = 1 << 21;
    const G1: u64 = 1 << 30;
    const HOST: u64 = 0xFFF0_0000_0000_0000;
    const DRAM_PAGE: u64 = 0x3000_0000;
    const DRAM_START: u64 = 0x1001_0018_0000_0000;
    /// `crate::asic::DRAM_HINTS_ALIGN_MASK` (not referenced: it is still marked
    /// dead code there).
    const LOW48_IGNORED: u64 = !0xFFFF_FFFF_FFFF;

    #[test]
    fn construction_rounds_and_validates() -> Result {
        let a = VaAllocator::new(&VaAllocConfig::new(VaSpan::new(0x1001, 0x5fff), K4))?;
        assert_eq!(a.span(), VaSpan::new(0x2000, 0x5000));
        assert_eq!(a.page_size(), K4);
        assert!(a.is_pristine());
        assert_eq!(a.free_blocks(), 1);
        assert_eq!(a.allocated_blocks(), 0);
        assert!(a.check_invariants());

        let new = |start: u64, end: u64, page: u64| {
            VaAllocator::new(&VaAllocConfig::new(VaSpan::new(start, end), page)).err()
        };
        // Empty after rounding, empty, reversed, page 0.
        assert_eq!(new(0x1001, 0x1fff, K4), Some(EINVAL));
        assert_eq!(new(0x2000, 0x2000, K4), Some(EINVAL));
        assert_eq!(new(0x3000, 0x2000, K4), Some(EINVAL));
        assert_eq!(new(0x2000, 0x3000, 0), Some(EINVAL));
        // Rounding the start up near the top of the address space does not wrap.
        assert_eq!(new(u64::MAX - 0x1000, u64::MAX, K4), Some(EINVAL));
        // A non-power-of-two page: whole pages only, and the start must be a
        // valid hint.
        let dram = |len: u64, ignored: u64| {
            VaAllocator::new(
                &VaAllocConfig::new(VaSpan::new(DRAM_START, DRAM_START + len), DRAM_PAGE)
                    .with_hint_ignored_bits(ignored),
            )
            .err()
        };
        assert_eq!(dram(10 * DRAM_PAGE, LOW48_IGNORED), None);
        assert_eq!(dram(10 * DRAM_PAGE + K4, LOW48_IGNORED), Some(EINVAL));
        // DRAM_START is a whole number of pages only in its low 48 bits.
        assert_eq!(dram(10 * DRAM_PAGE, 0), Some(EINVAL));
        assert_eq!(
            new(DRAM_START + K4, DRAM_START + K4 + DRAM_PAGE, DRAM_PAGE),
            Some(EINVAL)
        );
        // The extra class: a power of two above a power-of-two page.
        let extra = |page: u64, align: u64| {
            VaAllocator::new(
                &VaAllocConfig::new(VaSpan::new(0, 64 * DRAM_PAGE), page).with_extra_align(align),
            )
            .err()
        };
        assert_eq!(extra(K4, M2), None);
        assert_eq!(extra(K4, 3 * M2), Some(EINVAL));
        assert_eq!(extra(K4, K4), Some(EINVAL));
        assert_eq!(extra(M2, K4), Some(EINVAL));
        assert_eq!(extra(DRAM_PAGE, 2 * G1), Some(EINVAL));
        Ok(())
    }

    // Helpers live after the first test so that their asserts report to KUnit.

    /// A 4 KiB-page range of `pages` pages at HOST.
    fn host(pages: u64) -> Result<VaAllocator> {
        VaAllocator::new(&VaAllocConfig::new(
            VaSpan::new(HOST, HOST + pages * K4),
            K4,
        ))
    }

    /// The same with the 2 MiB class.
    fn host_2m(pages: u64) -> Result<VaAllocator> {
        VaAllocator::new(
            &VaAllocConfig::new(VaSpan::new(HOST, HOST + pages * K4), K4).with_extra_align(M2),
        )
    }

    /// A small Gaudi2-like DRAM range of `pages` pages.
    fn dram(pages: u64) -> Result<VaAllocator> {
        VaAllocator::new(
            &VaAllocConfig::new(
                VaSpan::new(DRAM_START, DRAM_START + pages * DRAM_PAGE),
                DRAM_PAGE,
            )
            .with_hint_ignored_bits(LOW48_IGNORED),
        )
    }

    /// `a`'s blocks as `(start, end, is_free)`.
    fn dump(a: &VaAllocator) -> Result<KVec<(u64, u64, bool)>> {
        let mut v = KVec::new();
        let mut err = Ok(());
        a.for_each_block(|s, e, f| {
            if err.is_ok() {
                err = v.push((s, e, f), GFP_KERNEL);
            }
        });
        err?;
        Ok(v)
    }

    /// Allocate `pages` pages of `a` with no hint.
    fn pages(a: &mut VaAllocator, pages: u64) -> Result<u64> {
        Ok(a.alloc(VaRequest::new(pages * a.page_size()))?)
    }

    #[test]
    fn host_range_basics_and_alignment() -> Result {
        let mut a = host_2m(1024)?;
        // One byte takes a whole page; allocations follow each other.
        assert_eq!(a.alloc(VaRequest::new(1)), Ok(HOST));
        assert_eq!(a.alloc(VaRequest::new(K4 + 1)), Ok(HOST + K4));
        assert_eq!(a.alloc(VaRequest::new(K4)), Ok(HOST + 3 * K4));
        // Alignments at or below the page size mean the page size.
        assert_eq!(
            a.alloc(VaRequest::new(K4).with_align(512)),
            Ok(HOST + 4 * K4)
        );
        assert_eq!(
            a.alloc(VaRequest::new(K4).with_align(K4)),
            Ok(HOST + 5 * K4)
        );
        // The 2 MiB class starts at the next 2 MiB boundary...
        assert_eq!(a.alloc(VaRequest::new(K4).with_align(M2)), Ok(HOST + M2));
        // ...and the hole in front of it stays usable.
        assert_eq!(a.alloc(VaRequest::new(K4)), Ok(HOST + 6 * K4));
        assert_eq!(
            a.alloc(VaRequest::new(M2).with_align(M2)),
            Err(VaAllocError::NoSpace)
        );
        // Alignments that are not classes of the range.
        for align in [3, 8 * K4, G1, u64::MAX] {
            assert_eq!(
                a.alloc(VaRequest::new(K4).with_align(align)),
                Err(VaAllocError::InvalidAlign)
            );
        }
        let mut b = host(1024)?;
        assert_eq!(
            b.alloc(VaRequest::new(K4).with_align(M2)),
            Err(VaAllocError::InvalidAlign)
        );
        assert_eq!(a.allocated_blocks(), 7);
        assert!(a.check_invariants());
        assert_eq!(a.clear(), 7);
        assert!(a.is_pristine());
        assert!(a.check_invariants());
        Ok(())
    }

    #[test]
    fn two_mib_class_has_its_own_best_fit() -> Result {
        let mut a = host_2m(2048)?;
        // Free holes A = [2M - 4K, 4M - 4K) (2 MiB long, 2 MiB - 4 KiB usable at
        // 2 MiB alignment) and B = [5M, 8M) (3 MiB long, 2 MiB usable).
        assert_eq!(
            a.alloc(VaRequest::new(M2 - K4).with_forced_hint(HOST)),
            Ok(HOST)
        );
        let x2 = HOST + 2 * M2 - K4;
        assert_eq!(
            a.alloc(VaRequest::new(M2 / 2 + K4).with_forced_hint(x2)),
            Ok(x2)
        );
        // 2 MiB at 2 MiB alignment only fits in B; at page alignment A is best.
        let b = a.alloc(VaRequest::new(M2).with_align(M2))?;
        assert_eq!(b, HOST + 3 * M2);
        a.free(b, M2)?;
        assert_eq!(a.alloc(VaRequest::new(M2)), Ok(HOST + M2 - K4));
        // B is still the only block with 2 MiB usable at 2 MiB alignment.
        assert_eq!(
            a.alloc(VaRequest::new(M2).with_align(M2)),
            Ok(HOST + 3 * M2)
        );
        assert!(a.check_invariants());
        Ok(())
    }

    #[test]
    fn gaudi2_dram_range() -> Result {
        let p = AsicProperties::gaudi2(6, 0)?;
        assert_eq!(p.dram_va.start, DRAM_START);
        assert_eq!(p.dram_page_size, DRAM_PAGE);
        let mut a = VaAllocator::new(
            &VaAllocConfig::new(p.dram_va, p.dram_page_size)
                .with_hint_reserved(HINTS_DRAM_RESERVED)
                .with_hint_ignored_bits(LOW48_IGNORED),
        )?;
        assert_eq!(a.span(), p.dram_va);
        // The first block is the range start; later ones follow directly.
        assert_eq!(a.alloc(VaRequest::new(1)), Ok(DRAM_START));
        assert_eq!(
            a.alloc(VaRequest::new(DRAM_PAGE)),
            Ok(DRAM_START + DRAM_PAGE)
        );
        assert_eq!(
            a.alloc(VaRequest::new(2 * DRAM_PAGE + 1)),
            Ok(DRAM_START + 2 * DRAM_PAGE)
        );
        // The alignment argument does not apply to a non-power-of-two page.
        assert_eq!(
            a.alloc(VaRequest::new(DRAM_PAGE).with_align(G1)),
            Ok(DRAM_START + 5 * DRAM_PAGE)
        );
        assert_eq!(
            a.alloc(VaRequest::new(DRAM_PAGE).with_align(3)),
            Ok(DRAM_START + 6 * DRAM_PAGE)
        );
        // Freeing takes the requested or the rounded size.
        a.free(DRAM_START, 1)?;
        a.free(DRAM_START + 2 * DRAM_PAGE, 3 * DRAM_PAGE)?;
        assert_eq!(a.alloc(VaRequest::new(DRAM_PAGE)), Ok(DRAM_START));
        assert!(a.check_invariants());
        assert_eq!(a.clear(), 4);
        assert_eq!(
            dump(&a)?.as_slice(),
            &[(p.dram_va.start, p.dram_va.end, true)]
        );
        Ok(())
    }

    #[test]
    fn best_fit_picks_the_smallest_hole() -> Result {
        let mut a = host(64)?;
        // Blocks of 1, 1, 1, 3, 1, 2, 1 pages; then holes of 1, 3 and 2 pages.
        let mut starts = [0u64; 7];
        for (s, n) in starts.iter_mut().zip([1, 1, 1, 3, 1, 2, 1]) {
            *s = pages(&mut a, n)?;
        }
        a.free(starts[1], K4)?;
        a.free(starts[3], 3 * K4)?;
        a.free(starts[5], 2 * K4)?;
        assert_eq!(pages(&mut a, 2)?, HOST + 7 * K4);
        assert_eq!(pages(&mut a, 1)?, HOST + K4);
        assert_eq!(pages(&mut a, 3)?, HOST + 3 * K4);
        assert_eq!(pages(&mut a, 1)?, HOST + 10 * K4);
        assert!(a.check_invariants());
        Ok(())
    }

    #[test]
    fn best_fit_tie_goes_to_the_lowest_address() -> Result {
        let mut a = host(64)?;
        let mut starts = [0u64; 5];
        for (s, n) in starts.iter_mut().zip([1, 2, 1, 2, 1]) {
            *s = pages(&mut a, n)?;
        }
        a.free(starts[3], 2 * K4)?;
        a.free(starts[1], 2 * K4)?;
        assert_eq!(pages(&mut a, 2)?, HOST + K4);
        assert_eq!(pages(&mut a, 2)?, HOST + 4 * K4);
        assert_eq!(pages(&mut a, 2)?, HOST + 7 * K4);
        assert!(a.check_invariants());
        Ok(())
    }

    #[test]
    fn va_is_reused_after_free() -> Result {
        let mut a = host(64)?;
        let x = pages(&mut a, 3)?;
        let y = pages(&mut a, 5)?;
        assert_eq!(y, x + 3 * K4);
        a.free(x, 3 * K4)?;
        assert_eq!(pages(&mut a, 3)?, x);
        let mut d = dram(16)?;
        let x = pages(&mut d, 2)?;
        pages(&mut d, 1)?;
        d.free(x, 2 * DRAM_PAGE)?;
        assert_eq!(pages(&mut d, 2)?, x);
        Ok(())
    }

    #[test]
    fn freeing_everything_merges_back_in_any_order() -> Result {
        let sizes = [1u64, 3, 2, 5, 1, 4, 2, 7];
        let orders: [[usize; 8]; 5] = [
            [0, 1, 2, 3, 4, 5, 6, 7],
            [7, 6, 5, 4, 3, 2, 1, 0],
            [0, 2, 4, 6, 1, 3, 5, 7],
            [3, 4, 2, 5, 1, 6, 0, 7],
            [7, 0, 6, 1, 5, 2, 4, 3],
        ];
        for order in orders {
            let mut a = VaAllocator::new(
                &VaAllocConfig::new(VaSpan::new(HOST, HOST + 64 * K4), K4)
                    .with_extra_align(M2)
                    .with_hint_reserved(VaSpan::new(HOST + 10 * K4 + 5, HOST + 12 * K4)),
            )?;
            let first = dump(&a)?;
            let mut starts = [0u64; 8];
            for (s, &n) in starts.iter_mut().zip(sizes.iter()) {
                *s = pages(&mut a, n)?;
            }
            // Nothing went into the reserved span's pages [10, 12).
            for (&s, &n) in starts.iter().zip(sizes.iter()) {
                assert!(!a.is_hint_crossing_range(s, n * K4));
            }
            for i in order {
                let (Some(&s), Some(&n)) = (starts.get(i), sizes.get(i)) else {
                    return Err(EINVAL);
                };
                a.free(s, n * K4)?;
                assert!(a.check_invariants());
            }
            assert!(a.is_pristine());
            assert_eq!(a.free_blocks(), 1);
            assert_eq!(dump(&a)?.as_slice(), first.as_slice());
            assert_eq!(pages(&mut a, 1)?, HOST);
        }
        Ok(())
    }

    #[test]
    fn hints_are_honoured() -> Result {
        let mut a = host(64)?;
        let h = HOST + 10 * K4;
        assert_eq!(a.alloc(VaRequest::new(2 * K4).with_hint(h)), Ok(h));
        let h2 = HOST + 20 * K4;
        assert_eq!(a.alloc(VaRequest::new(K4).with_forced_hint(h2)), Ok(h2));
        // A hint at the start of a free block.
        assert_eq!(
            a.alloc(VaRequest::new(K4).with_forced_hint(HOST + 12 * K4)),
            Ok(HOST + 12 * K4)
        );
        assert!(a.check_invariants());
        Ok(())
    }

    #[test]
    fn hint_ending_at_the_end_of_a_free_block_is_honoured() -> Result {
        // Upstream refuses these (behaviour 28): the fit test is off by one.
        let mut a = host(64)?;
        assert_eq!(pages(&mut a, 1)?, HOST);
        // The last two pages of the range: the free block [1, 64) starts below.
        let h = HOST + 62 * K4;
        assert_eq!(a.alloc(VaRequest::new(2 * K4).with_hint(h)), Ok(h));
        // The last page before an allocated block, forced.
        assert_eq!(
            a.alloc(VaRequest::new(K4).with_forced_hint(HOST + 20 * K4)),
            Ok(HOST + 20 * K4)
        );
        let h = HOST + 18 * K4;
        assert_eq!(a.alloc(VaRequest::new(2 * K4).with_forced_hint(h)), Ok(h));
        // DRAM: the last page of the range.
        let mut d = dram(8)?;
        pages(&mut d, 1)?;
        let h = DRAM_START + 7 * DRAM_PAGE;
        assert_eq!(
            d.alloc(VaRequest::new(DRAM_PAGE).with_forced_hint(h)),
            Ok(h)
        );
        assert!(a.check_invariants() && d.check_invariants());
        Ok(())
    }

    #[test]
    fn misaligned_hints_are_ignored_or_rejected_when_forced() -> Result {
        let mut a = host_2m(1024)?;
        let before = dump(&a)?;
        for (hint, align) in [(HOST + 10 * K4 + 1, 0), (HOST + K4, M2), (HOST + 0x800, K4)] {
            let req = VaRequest::new(K4).with_align(align);
            assert_eq!(
                a.alloc(req.with_forced_hint(hint)),
                Err(VaAllocError::MisalignedHint)
            );
            assert_eq!(dump(&a)?.as_slice(), before.as_slice());
        }
        // Without force the hint is ignored: best fit.
        assert_eq!(
            a.alloc(VaRequest::new(K4).with_hint(HOST + 10 * K4 + 1)),
            Ok(HOST)
        );
        assert_eq!(
            a.alloc(VaRequest::new(K4).with_align(M2).with_hint(HOST + 3 * K4)),
            Ok(HOST + M2)
        );
        assert!(a.check_invariants());
        Ok(())
    }

    #[test]
    fn unusable_forced_hints_fail_with_distinct_errors() -> Result {
        let mut a = host(64)?;
        let x = pages(&mut a, 4)?;
        let before = dump(&a)?;
        let forced = |h: u64| VaRequest::new(2 * K4).with_forced_hint(h);
        // Occupied, entirely and in part.
        assert_eq!(a.alloc(forced(x)), Err(VaAllocError::HintInUse));
        assert_eq!(a.alloc(forced(x + 2 * K4)), Err(VaAllocError::HintInUse));
        assert_eq!(
            a.alloc(VaRequest::new(8 * K4).with_forced_hint(x + 3 * K4)),
            Err(VaAllocError::HintInUse)
        );
        assert_eq!(VaAllocError::HintInUse.to_errno(), EADDRINUSE);
        // Hint 0.
        assert_eq!(a.alloc(forced(0)), Err(VaAllocError::NoHint));
        // Outside the range, or running past its end.
        assert_eq!(
            a.alloc(forced(HOST - 4 * K4)),
            Err(VaAllocError::HintOutOfRange)
        );
        assert_eq!(
            a.alloc(forced(HOST + 63 * K4)),
            Err(VaAllocError::HintOutOfRange)
        );
        assert_eq!(
            a.alloc(forced(HOST + 64 * K4)),
            Err(VaAllocError::HintOutOfRange)
        );
        assert_eq!(dump(&a)?.as_slice(), before.as_slice());
        assert!(a.check_invariants());
        // Without force each of them falls back to best fit.
        assert_eq!(a.alloc(VaRequest::new(2 * K4).with_hint(x)), Ok(x + 4 * K4));
        assert_eq!(
            a.alloc(VaRequest::new(2 * K4).with_hint(HOST + 63 * K4)),
            Ok(x + 6 * K4)
        );
        Ok(())
    }

    #[test]
    fn dram_hint_alignment_checks_only_the_low_48_bits() -> Result {
        let mut a = dram(16)?;
        let h = DRAM_START + 5 * DRAM_PAGE;
        // The full address is not a multiple of the page, its low 48 bits are.
        assert!(h % DRAM_PAGE != 0);
        assert!((h & !LOW48_IGNORED) % DRAM_PAGE == 0);
        assert_eq!(
            a.alloc(VaRequest::new(DRAM_PAGE).with_forced_hint(h)),
            Ok(h)
        );
        // Misaligned low bits.
        assert_eq!(
            a.alloc(VaRequest::new(DRAM_PAGE).with_forced_hint(h + 2 * DRAM_PAGE + K4)),
            Err(VaAllocError::MisalignedHint)
        );
        // Aligned low bits, other high bits: aligned, but outside the range.
        let far = (h + 2 * DRAM_PAGE) ^ (1 << 62);
        assert_eq!(
            a.alloc(VaRequest::new(DRAM_PAGE).with_forced_hint(far)),
            Err(VaAllocError::HintOutOfRange)
        );
        assert_eq!(
            a.alloc(VaRequest::new(DRAM_PAGE).with_hint(far)),
            Ok(DRAM_START)
        );
        assert!(a.check_invariants());
        Ok(())
    }

    #[test]
    fn no_hint_allocations_avoid_the_reserved_span() -> Result {
        // The real Gaudi2 DRAM range: the reserved span covers pages
        // [109098, 152790) once rounded out to whole pages.
        let p = AsicProperties::gaudi2(6, 0)?;
        let mut a = VaAllocator::new(
            &VaAllocConfig::new(p.dram_va, p.dram_page_size)
                .with_hint_reserved(HINTS_DRAM_RESERVED)
                .with_hint_ignored_bits(LOW48_IGNORED),
        )?;
        let page = |n: u64| DRAM_START + n * DRAM_PAGE;
        let (lo, hi) = (109_098, 152_790);
        assert_eq!(a.hint_only_span(), Some(VaSpan::new(page(lo), page(hi))));
        assert!(a.is_hint_crossing_range(page(lo), DRAM_PAGE));
        assert!(!a.is_hint_crossing_range(page(lo - 1), DRAM_PAGE));
        assert!(a.is_hint_crossing_range(page(hi - 1), DRAM_PAGE));
        assert!(!a.is_hint_crossing_range(page(hi), DRAM_PAGE));
        // All but two pages below the span in one (forced) block.
        assert_eq!(
            a.alloc(VaRequest::new((lo - 2) * DRAM_PAGE).with_forced_hint(DRAM_START)),
            Ok(DRAM_START)
        );
        // Three pages do not fit below: they go above the span, not into it.
        assert_eq!(a.alloc(VaRequest::new(3 * DRAM_PAGE)), Ok(page(hi)));
        // Two pages fit exactly below it.
        assert_eq!(a.alloc(VaRequest::new(2 * DRAM_PAGE)), Ok(page(lo - 2)));
        // A hint inside the span is honoured, with and without force.
        assert_eq!(
            a.alloc(VaRequest::new(DRAM_PAGE).with_hint(page(lo + 10))),
            Ok(page(lo + 10))
        );
        assert_eq!(
            a.alloc(VaRequest::new(DRAM_PAGE).with_forced_hint(page(lo))),
            Ok(page(lo))
        );
        // A hint across the span's start edge, and its free.
        a.free(page(lo), DRAM_PAGE)?;
        a.free(page(lo - 2), 2 * DRAM_PAGE)?;
        let before = dump(&a)?;
        assert_eq!(
            a.alloc(VaRequest::new(3 * DRAM_PAGE).with_forced_hint(page(lo - 1))),
            Ok(page(lo - 1))
        );
        assert!(a.check_invariants());
        a.free(page(lo - 1), 3 * DRAM_PAGE)?;
        assert_eq!(dump(&a)?.as_slice(), before.as_slice());
        assert!(a.check_invariants());
        // A hint across both edges, as one allocation.
        let mut s = VaAllocator::new(
            &VaAllocConfig::new(VaSpan::new(HOST, HOST + 10 * K4), K4)
                .with_hint_reserved(VaSpan::new(HOST + 4 * K4 + 1, HOST + 6 * K4 - 1)),
        )?;
        assert_eq!(
            s.alloc(VaRequest::new(4 * K4).with_forced_hint(HOST + 3 * K4)),
            Ok(HOST + 3 * K4)
        );
        assert!(s.check_invariants());
        assert_eq!(dump(&s)?.len(), 3);
        assert_eq!(s.free(HOST + 4 * K4, 3 * K4), Err(EINVAL));
        s.free(HOST + 3 * K4, 4 * K4)?;
        assert!(s.is_pristine() && s.check_invariants());
        // Filling the range by best fit leaves the span's pages [4, 6) free.
        for i in [0, 1, 2, 3, 6, 7, 8, 9] {
            assert_eq!(pages(&mut s, 1)?, HOST + i * K4);
        }
        assert_eq!(s.alloc(VaRequest::new(K4)), Err(VaAllocError::NoSpace));
        assert_eq!(s.free_blocks(), 1);
        assert_eq!(
            s.alloc(VaRequest::new(2 * K4).with_hint(HOST + 4 * K4)),
            Ok(HOST + 4 * K4)
        );
        assert!(s.check_invariants());
        Ok(())
    }

    #[test]
    fn bad_frees_fail_without_changing_anything() -> Result {
        let mut a = host(64)?;
        let x = pages(&mut a, 4)?;
        let y = pages(&mut a, 2)?;
        let before = dump(&a)?;
        for (s, n) in [
            (x, 3 * K4),
            (x, 5 * K4),
            (x, 6 * K4),
            (x + K4, 3 * K4),
            (x + K4, K4),
            (HOST + 10 * K4, K4),
            (HOST - K4, K4),
            (HOST + 64 * K4, K4),
            (0, K4),
            (x, 0),
            (u64::MAX - 10, 20),
            (!(K4 - 1), K4),
            (x, u64::MAX),
        ] {
            assert_eq!(a.free(s, n), Err(EINVAL));
            assert_eq!(a.unreserve(s, n), Err(EINVAL));
        }
        assert_eq!(dump(&a)?.as_slice(), before.as_slice());
        assert_eq!(a.allocated_blocks(), 2);
        assert!(a.check_invariants());
        a.free(x, 4 * K4)?;
        // Double free.
        assert_eq!(a.free(x, 4 * K4), Err(EINVAL));
        // The requested size rounds to the allocation's size.
        a.free(y, K4 + 1)?;
        assert!(a.is_pristine() && a.check_invariants());
        Ok(())
    }

    #[test]
    fn overflowing_sizes_and_hints_fail_cleanly() -> Result {
        let mut a = host_2m(64)?;
        let before = dump(&a)?;
        for size in [0, u64::MAX, u64::MAX - K4 + 2] {
            assert_eq!(
                a.alloc(VaRequest::new(size)),
                Err(VaAllocError::InvalidSize)
            );
        }
        // Rounds to the largest page multiple without wrapping: just too big.
        assert_eq!(
            a.alloc(VaRequest::new(u64::MAX - K4 + 1)),
            Err(VaAllocError::NoSpace)
        );
        assert_eq!(
            a.alloc(VaRequest::new(!(M2 - 1)).with_align(M2)),
            Err(VaAllocError::NoSpace)
        );
        let top = !(K4 - 1);
        assert_eq!(
            a.alloc(VaRequest::new(2 * K4).with_forced_hint(top)),
            Err(VaAllocError::HintOutOfRange)
        );
        assert_eq!(
            a.alloc(VaRequest::new(u64::MAX - K4 + 1).with_forced_hint(HOST)),
            Err(VaAllocError::HintOutOfRange)
        );
        assert_eq!(dump(&a)?.as_slice(), before.as_slice());
        assert_eq!(a.alloc(VaRequest::new(2 * K4).with_hint(top)), Ok(HOST));
        assert!(!a.is_hint_crossing_range(u64::MAX - 5, u64::MAX));
        let mut d = dram(4)?;
        assert_eq!(
            d.alloc(VaRequest::new(u64::MAX)),
            Err(VaAllocError::InvalidSize)
        );
        assert_eq!(
            d.alloc(VaRequest::new(u64::MAX - DRAM_PAGE)),
            Err(VaAllocError::NoSpace)
        );
        assert_eq!(d.free(DRAM_START, u64::MAX), Err(EINVAL));
        assert!(a.check_invariants() && d.check_invariants());
        Ok(())
    }

    #[test]
    fn exhaustion_is_enomem() -> Result {
        let mut a = host(8)?;
        for i in 0..8 {
            assert_eq!(pages(&mut a, 1)?, HOST + i * K4);
        }
        assert_eq!(a.alloc(VaRequest::new(K4)), Err(VaAllocError::NoSpace));
        assert_eq!(VaAllocError::NoSpace.to_errno(), ENOMEM);
        a.free(HOST + 2 * K4, K4)?;
        a.free(HOST + 4 * K4, K4)?;
        // Two free pages, but not next to each other.
        assert_eq!(a.alloc(VaRequest::new(2 * K4)), Err(VaAllocError::NoSpace));
        a.free(HOST + 3 * K4, K4)?;
        assert_eq!(pages(&mut a, 3)?, HOST + 2 * K4);
        assert_eq!(a.free_blocks(), 0);
        assert!(a.check_invariants());
        Ok(())
    }

    #[test]
    fn sizes_of_4_gib_and_more_work() -> Result {
        let p = AsicProperties::gaudi2(6, 0)?;
        let mut a = VaAllocator::new(
            &VaAllocConfig::new(p.host_va, p.host_page_size)
                .with_extra_align(p.host_huge_page_size)
                .with_hint_reserved(HINTS_HOST_RESERVED),
        )?;
        let g4 = 4 * G1;
        // The command-buffer pool: 4 GiB at 2 MiB alignment.
        assert_eq!(a.reserve(g4, M2), Ok(HOST));
        assert_eq!(a.alloc(VaRequest::new(g4 + K4)), Ok(HOST + g4));
        assert_eq!(pages(&mut a, 1)?, HOST + 2 * g4 + K4);
        a.free(HOST + g4, g4 + K4)?;
        assert_eq!(a.alloc(VaRequest::new(g4 + K4)), Ok(HOST + g4));
        assert_eq!(a.alloc(VaRequest::new(1 << 40)), Ok(HOST + 2 * g4 + 2 * K4));
        // 4 GiB + 1 below the reserved span overlaps it (upstream: 1 byte, no).
        let r = HINTS_HOST_RESERVED;
        assert!(a.is_hint_crossing_range(r.start - g4, g4 + 1));
        assert!(!a.is_hint_crossing_range(r.start - g4, g4));
        // A 4 GiB block forced to end at the span start, then more by best fit.
        assert_eq!(
            a.alloc(VaRequest::new(g4).with_forced_hint(r.start - g4)),
            Ok(r.start - g4)
        );
        assert!(a.check_invariants());
        assert_eq!(a.clear(), 5);
        assert!(a.is_pristine());
        Ok(())
    }

    #[test]
    fn reserve_and_unreserve_up_to_the_last_byte() -> Result {
        let mut a = host_2m(1024)?;
        assert_eq!(a.reserve(M2, M2), Ok(HOST));
        // The rest of the range: it ends on the range's last byte.
        assert_eq!(a.reserve(M2, 0), Ok(HOST + M2));
        assert_eq!(a.reserve(K4, 0), Err(VaAllocError::NoSpace));
        assert_eq!(a.reserve(K4, 3), Err(VaAllocError::InvalidAlign));
        // Upstream refuses this unreserve (off by one at the range end).
        a.unreserve(HOST + M2, M2)?;
        assert_eq!(a.unreserve(HOST + M2, M2), Err(EINVAL));
        a.unreserve(HOST, M2)?;
        assert!(a.is_pristine() && a.check_invariants());
        Ok(())
    }

    #[test]
    fn errors_map_to_distinct_errnos() {
        use VaAllocError::*;
        for e in [
            InvalidSize,
            InvalidAlign,
            NoHint,
            MisalignedHint,
            HintOutOfRange,
        ] {
            assert_eq!(e.to_errno(), EINVAL);
            assert_eq!(Error::from(e), EINVAL);
        }
        assert_eq!(HintInUse.to_errno(), EADDRINUSE);
        assert_eq!(NoSpace.to_errno(), ENOMEM);
        assert_eq!(NoMemory.to_errno(), ENOMEM);
        for e in [
            InvalidSize,
            InvalidAlign,
            NoHint,
            MisalignedHint,
            HintOutOfRange,
            HintInUse,
            NoSpace,
            NoMemory,
        ] {
            assert_eq!(e.upstream_errno(), ENOMEM);
        }
    }

    #[test]
    fn prepared_nodes_are_enough_and_failures_change_nothing() -> Result {
        let mut a = VaAllocator::new(
            &VaAllocConfig::new(VaSpan::new(HOST, HOST + 1024 * K4), K4)
                .with_extra_align(M2)
                .with_hint_reserved(VaSpan::new(HOST + 600 * K4, HOST + 700 * K4)),
        )?;
        // Best fit prefers the smaller free block above the span.
        assert_eq!(pages(&mut a, 1)?, HOST + 700 * K4);
        a.free(HOST + 700 * K4, K4)?;
        assert_eq!(a.alloc(VaRequest::new(K4).with_forced_hint(HOST)), Ok(HOST));
        // The worst case for nodes: a free front and a free tail, in one block.
        let res = VaAllocator::prepare(GFP_KERNEL)?;
        assert_eq!(
            a.alloc_with(VaRequest::new(K4).with_align(M2), res),
            Ok(HOST + M2)
        );
        // Across both span edges with a free front and tail.
        let res = VaAllocator::prepare(GFP_KERNEL)?;
        let h = HOST + 590 * K4;
        assert_eq!(
            a.alloc_with(VaRequest::new(120 * K4).with_forced_hint(h), res),
            Ok(h)
        );
        assert!(a.check_invariants());
        let before = dump(&a)?;
        let res = VaAllocator::prepare(GFP_KERNEL)?;
        assert_eq!(
            a.alloc_with(VaRequest::new(K4).with_forced_hint(h), res),
            Err(VaAllocError::HintInUse)
        );
        assert_eq!(dump(&a)?.as_slice(), before.as_slice());
        assert_eq!(a.free_blocks(), 3);
        assert_eq!(a.allocated_blocks(), 3);
        a.free(h, 120 * K4)?;
        a.free(HOST + M2, K4)?;
        a.free(HOST, K4)?;
        assert!(a.is_pristine() && a.check_invariants());
        Ok(())
    }

    /// Tree nodes held in `a`'s trees: a block-tree node and one size-tree node
    /// per class for every block (linked in a size tree or held by the block).
    fn nodes_in_trees(a: &VaAllocator) -> usize {
        a.blocks.iter().count() * (1 + a.classes())
    }

    /// Every node `a` was given is in its trees, in its spare cache or counted
    /// as freed: no node is lost or freed uncounted.
    fn nodes_accounted(a: &VaAllocator) -> bool {
        let s = a.node_stats();
        s.fresh == s.freed + s.spare_block_nodes + s.spare_size_nodes + nodes_in_trees(a)
    }

    #[test]
    fn steady_state_cycles_do_not_allocate() -> Result {
        let mut a = VaAllocator::new(
            &VaAllocConfig::new(VaSpan::new(HOST, HOST + 4096 * K4), K4)
                .with_extra_align(M2)
                .with_hint_reserved(VaSpan::new(HOST + 3000 * K4, HOST + 3500 * K4)),
        )?;
        // Live blocks with one-page holes between them, as in the benchmark
        // (best fit puts them above the span, at page 3500).
        for i in 0..16 {
            assert_eq!(pages(&mut a, 1)?, HOST + (3500 + i) * K4);
        }
        for i in (0..16).step_by(2) {
            a.free(HOST + (3500 + i) * K4, K4)?;
        }
        let mut reserved = 0u32;
        let mut d = dram(16)?;
        let mut p = host(64)?;
        // An exact fit in a hole (no node), a cut off a free block (one piece),
        // a 2 MiB aligned page with a free front and tail (two pieces), a hint
        // across the span's start edge and one inside the span (two pieces);
        // then a DRAM range and a range without the extra class.
        let cases = [
            (0, VaRequest::new(K4)),
            (0, VaRequest::new(3 * K4)),
            (0, VaRequest::new(2 * K4).with_align(M2)),
            (0, VaRequest::new(4 * K4).with_forced_hint(HOST + 2998 * K4)),
            (0, VaRequest::new(K4).with_hint(HOST + 3200 * K4)),
            (
                1,
                VaRequest::new(DRAM_PAGE).with_forced_hint(DRAM_START + 5 * DRAM_PAGE),
            ),
            (1, VaRequest::new(2 * DRAM_PAGE)),
            (2, VaRequest::new(K4).with_forced_hint(HOST + 7 * K4)),
            (2, VaRequest::new(K4)),
        ];
        for (which, req) in cases {
            let x = match which {
                0 => &mut a,
                1 => &mut d,
                _ => &mut p,
            };
            // The first cycle may miss the cache; its free fills it.
            let s = x.alloc(req)?;
            x.free(s, req.size)?;
            let stats = x.node_stats();
            let shape = dump(x)?;
            for _ in 0..50 {
                let got = x.alloc_or_reserve(req, || {
                    reserved += 1;
                    Err(ENOMEM)
                });
                assert_eq!(got, Ok(s));
                assert!(x.check_invariants());
                x.free(s, req.size)?;
            }
            // No reservation, nothing freed, the same cache and blocks.
            assert_eq!(x.node_stats(), stats);
            assert_eq!(dump(x)?.as_slice(), shape.as_slice());
            assert!(nodes_accounted(x));
        }
        assert_eq!(reserved, 0);
        Ok(())
    }

    #[test]
    fn spare_cache_is_bounded_and_every_node_is_accounted_for() -> Result {
        // The node sizes the module documentation quotes.
        assert_eq!(core::mem::size_of::<Block>(), 40);
        assert_eq!(core::mem::size_of::<SizeKey>(), 16);
        assert_eq!(core::mem::size_of::<kernel::bindings::rb_node>(), 24);
        let mut a = host_2m(1024)?;
        let empty = NodeStats {
            fresh: 3,
            freed: 0,
            spare_block_nodes: 0,
            spare_size_nodes: 0,
        };
        assert_eq!(a.node_stats(), empty);
        // 64 one-page blocks: every other allocation misses the cache and leaves
        // one piece of its reservation there for the next.
        let mut starts = KVec::new();
        for _ in 0..64 {
            starts.push(pages(&mut a, 1)?, GFP_KERNEL)?;
            assert!(nodes_accounted(&a));
        }
        assert_eq!(a.node_stats().fresh, 3 + 32 * VaReservations::NODES);
        assert_eq!(a.node_stats().freed, 0);
        // Freeing every other block merges nothing; freeing the rest merges on
        // both sides every time: 64 pieces come back, the cache keeps 4.
        for s in starts.iter().step_by(2) {
            a.free(*s, K4)?;
        }
        assert_eq!(a.node_stats().spare_block_nodes, 0);
        for s in starts.iter().skip(1).step_by(2) {
            a.free(*s, K4)?;
            assert!(a.check_invariants() && nodes_accounted(&a));
        }
        let st = a.node_stats();
        assert_eq!(st.spare_block_nodes, SPARE_BLOCK_NODES);
        assert_eq!(st.spare_size_nodes, SPARE_SIZE_NODES);
        assert_eq!(st.freed, 64 * 3 - SPARE_BLOCK_NODES - SPARE_SIZE_NODES);
        assert!(a.is_pristine() && a.check_invariants());
        // `clear` gives nodes back within the bound too.
        for i in 1..=8 {
            a.alloc(VaRequest::new(3 * K4).with_forced_hint(HOST + i * 10 * K4))?;
        }
        assert_eq!(a.clear(), 8);
        assert_eq!(a.node_stats().spare_block_nodes, SPARE_BLOCK_NODES);
        assert_eq!(a.node_stats().spare_size_nodes, SPARE_SIZE_NODES);
        assert!(a.is_pristine() && a.check_invariants() && nodes_accounted(&a));
        // Without the extra class the extra-class nodes of a reservation are
        // cached or freed, never held by a block.
        let mut b = host(64)?;
        for _ in 0..6 {
            let res = VaAllocator::prepare(GFP_KERNEL)?;
            b.alloc_with(VaRequest::new(K4), res)?;
            assert!(b.check_invariants() && nodes_accounted(&b));
        }
        assert_eq!(b.node_stats().spare_block_nodes, SPARE_BLOCK_NODES);
        assert_eq!(b.node_stats().spare_size_nodes, SPARE_SIZE_NODES);
        assert_eq!(b.clear(), 6);
        assert!(b.is_pristine() && b.check_invariants() && nodes_accounted(&b));
        Ok(())
    }

    #[test]
    fn cache_misses_and_failed_reservations_change_nothing() -> Result {
        use VaAllocError::*;
        let fail = || Err(ENOMEM);
        let mut a = host_2m(1024)?;
        let before = dump(&a)?;
        let stats = a.node_stats();
        // The cache starts empty: a cut needs a piece.
        assert_eq!(
            a.alloc_cached(VaRequest::new(K4)),
            Err(AllocOutcome::NeedNodes)
        );
        assert_eq!(a.alloc_or_reserve(VaRequest::new(K4), fail), Err(NoMemory));
        // A request that cannot be served fails as such, whatever the cache holds.
        assert_eq!(
            a.alloc_cached(VaRequest::new(0)),
            Err(AllocOutcome::Failed(InvalidSize))
        );
        assert_eq!(
            a.alloc_cached(VaRequest::new(K4).with_align(3)),
            Err(AllocOutcome::Failed(InvalidAlign))
        );
        assert_eq!(
            a.alloc_cached(VaRequest::new(K4).with_forced_hint(HOST + 1024 * K4)),
            Err(AllocOutcome::Failed(HintOutOfRange))
        );
        assert_eq!(
            a.alloc_or_reserve(VaRequest::new(2048 * K4), fail),
            Err(NoSpace)
        );
        assert_eq!(dump(&a)?.as_slice(), before.as_slice());
        assert_eq!(a.node_stats(), stats);
        // An exact fit needs no node: served without a reservation.
        assert_eq!(
            a.alloc_or_reserve(VaRequest::new(1024 * K4), fail),
            Ok(HOST)
        );
        a.free(HOST, 1024 * K4)?;
        assert_eq!(a.node_stats(), stats);
        // A miss reserves; the piece it does not use stays in the cache.
        assert_eq!(a.alloc(VaRequest::new(K4)), Ok(HOST));
        assert_eq!(a.node_stats().spare_block_nodes, 1);
        assert_eq!(a.node_stats().spare_size_nodes, 2);
        // One piece is not enough for a 2 MiB aligned page with a free front.
        let before = dump(&a)?;
        let stats = a.node_stats();
        let m2 = VaRequest::new(K4).with_align(M2);
        assert_eq!(a.alloc_cached(m2), Err(AllocOutcome::NeedNodes));
        assert_eq!(a.alloc_or_reserve(m2, fail), Err(NoMemory));
        assert_eq!(dump(&a)?.as_slice(), before.as_slice());
        assert_eq!(a.node_stats(), stats);
        assert!(a.check_invariants() && nodes_accounted(&a));
        // It is enough for a plain cut.
        assert_eq!(a.alloc_or_reserve(VaRequest::new(K4), fail), Ok(HOST + K4));
        // A failed `alloc_with` changes no block; its nodes go to the cache
        // within its bound, the rest is freed.
        let before = dump(&a)?;
        for _ in 0..3 {
            let res = VaAllocator::prepare(GFP_KERNEL)?;
            assert_eq!(
                a.alloc_with(VaRequest::new(K4).with_forced_hint(HOST), res),
                Err(HintInUse)
            );
            assert_eq!(dump(&a)?.as_slice(), before.as_slice());
            assert!(a.check_invariants() && nodes_accounted(&a));
        }
        let st = a.node_stats();
        assert_eq!(st.spare_block_nodes, SPARE_BLOCK_NODES);
        assert_eq!(st.spare_size_nodes, SPARE_SIZE_NODES);
        assert_eq!(st.freed, 3 * VaReservations::NODES - 12);
        // The ContextVm flow: a miss, then `alloc_with` places the request
        // afresh; here the state did not change in between, so the same block.
        let mut b = host_2m(1024)?;
        assert_eq!(b.alloc_cached(m2), Err(AllocOutcome::NeedNodes));
        let res = VaAllocator::prepare(GFP_KERNEL)?;
        assert_eq!(b.alloc_with(m2, res), Ok(HOST));
        assert!(b.check_invariants() && nodes_accounted(&b));
        Ok(())
    }

    /// Whether the allocation at `start` has parked its page-class entry
    /// (see `best_fit`): it holds no page-class node, and the page-class tree
    /// holds its `(length, start)`.
    fn parked(a: &VaAllocator, start: u64) -> bool {
        a.blocks.get(&start).is_some_and(|b| match &b.state {
            State::Allocated { nodes, .. } => {
                nodes.base.is_none() && a.trees.base.get(&size_key(b.end - start, start)).is_some()
            }
            _ => false,
        })
    }

    #[test]
    fn exact_fits_park_their_entry_and_best_fit_reclaims_it() -> Result {
        for extra in [false, true] {
            let mut a = if extra { host_2m(64)? } else { host(64)? };
            // Five one-page blocks, the second and the fourth freed: two holes.
            for i in 0..5 {
                assert_eq!(pages(&mut a, 1)?, HOST + i * K4);
            }
            a.free(HOST + K4, K4)?;
            a.free(HOST + 3 * K4, K4)?;
            let linked = a.trees.base.iter().count();
            // An exact fit parks: no size-tree change, and its free finds the
            // entry in place (no size-tree change either).
            assert_eq!(pages(&mut a, 1)?, HOST + K4);
            assert!(parked(&a, HOST + K4) && a.check_invariants());
            assert_eq!(a.trees.base.iter().count(), linked);
            a.free(HOST + K4, K4)?;
            assert!(a.check_invariants() && nodes_accounted(&a));
            assert_eq!(a.trees.base.iter().count(), linked);
            // Park the first hole; the next best fit meets its stale entry
            // first, gives the node back to the allocation, and takes the
            // second hole (the same choice as without the stale entry).
            assert_eq!(pages(&mut a, 1)?, HOST + K4);
            assert_eq!(pages(&mut a, 1)?, HOST + 3 * K4);
            assert!(!parked(&a, HOST + K4) && parked(&a, HOST + 3 * K4));
            assert!(a.check_invariants() && nodes_accounted(&a));
            // Only stale entries of the size: the search goes past them all
            // to the free tail, which it cuts.
            assert_eq!(pages(&mut a, 1)?, HOST + 5 * K4);
            assert!(!parked(&a, HOST + 3 * K4) && a.check_invariants());
            // A parked allocation that merges on both sides takes its entry
            // out first.
            assert_eq!(pages(&mut a, 1)?, HOST + 6 * K4);
            assert_eq!(pages(&mut a, 1)?, HOST + 7 * K4);
            a.free(HOST + 6 * K4, K4)?;
            assert_eq!(pages(&mut a, 1)?, HOST + 6 * K4);
            assert!(parked(&a, HOST + 6 * K4));
            a.free(HOST + 5 * K4, K4)?;
            a.free(HOST + 7 * K4, K4)?;
            assert!(a.check_invariants() && parked(&a, HOST + 6 * K4));
            a.free(HOST + 6 * K4, K4)?;
            assert!(a.check_invariants() && nodes_accounted(&a));
            assert_eq!(
                dump(&a)?.last().copied(),
                Some((HOST + 5 * K4, HOST + 64 * K4, true))
            );
            // Everything back merges into one free block.
            assert_eq!(a.clear(), 5);
            assert!(a.is_pristine() && a.check_invariants() && nodes_accounted(&a));
            assert_eq!(a.trees.base.iter().count(), 1);
        }
        Ok(())
    }

    #[test]
    fn a_cache_miss_after_stale_entries_changes_no_block() -> Result {
        let mut a = host_2m(64)?;
        // A two-page hole at page 1 and a one-page hole at page 4, parked by
        // an exact fit.
        for (i, n) in [(0, 1), (1, 2), (3, 1), (4, 1), (5, 1)] {
            assert_eq!(pages(&mut a, n)?, HOST + i * K4);
        }
        a.free(HOST + K4, 2 * K4)?;
        a.free(HOST + 4 * K4, K4)?;
        assert_eq!(pages(&mut a, 1)?, HOST + 4 * K4);
        assert!(parked(&a, HOST + 4 * K4));
        // Empty the cache: a one-page request now meets the stale entry, then
        // must cut the two-page hole, and has no piece for it.
        while a.spare.blocks.pop().is_some() {}
        while a.spare.sizes.pop().is_some() {}
        let before = dump(&a)?;
        assert_eq!(
            a.alloc_cached(VaRequest::new(K4)),
            Err(AllocOutcome::NeedNodes)
        );
        assert_eq!(dump(&a)?.as_slice(), before.as_slice());
        // The stale entry is gone all the same, its node back with its owner.
        assert!(!parked(&a, HOST + 4 * K4) && a.check_invariants());
        let res = VaAllocator::prepare(GFP_KERNEL)?;
        assert_eq!(a.alloc_with(VaRequest::new(K4), res), Ok(HOST + K4));
        assert!(a.check_invariants());
        assert_eq!(a.clear(), 5);
        assert!(a.is_pristine() && a.check_invariants());
        Ok(())
    }

    #[test]
    fn dump_shows_whole_allocations_and_merged_free_blocks() -> Result {
        let mut a = VaAllocator::new(
            &VaAllocConfig::new(VaSpan::new(HOST, HOST + 16 * K4), K4)
                .with_hint_reserved(VaSpan::new(HOST + 8 * K4, HOST + 12 * K4)),
        )?;
        // The span splits the free space internally, but it shows as one block.
        assert_eq!(dump(&a)?.as_slice(), &[(HOST, HOST + 16 * K4, true)]);
        assert_eq!(a.free_blocks(), 1);
        a.alloc(VaRequest::new(2 * K4).with_forced_hint(HOST))?;
        a.alloc(VaRequest::new(2 * K4).with_forced_hint(HOST + 7 * K4))?;
        assert_eq!(
            dump(&a)?.as_slice(),
            &[
                (HOST, HOST + 2 * K4, false),
                (HOST + 2 * K4, HOST + 7 * K4, true),
                (HOST + 7 * K4, HOST + 9 * K4, false),
                (HOST + 9 * K4, HOST + 16 * K4, true),
            ]
        );
        assert_eq!(a.free_blocks(), 2);
        assert_eq!(a.allocated_blocks(), 2);
        assert!(a.check_invariants());
        Ok(())
    }

    /// A deliberately simple reference: a sorted list of maximal free blocks and
    /// allocations, searched linearly.
    struct Model {
        span: VaSpan,
        page: u64,
        pow2: bool,
        extra: Option<u64>,
        ignored: u64,
        hint_only: Option<VaSpan>,
        blocks: KVec<(u64, u64, bool)>,
    }

    impl Model {
        fn new(cfg: &VaAllocConfig, span: VaSpan) -> Result<Self> {
            let page = cfg.page_size;
            let hint_only = cfg.hint_reserved.and_then(|r| {
                let lo = r.start.max(span.start);
                let hi = r.end.min(span.end);
                (lo < hi).then(|| {
                    VaSpan::new(
                        span.start + (lo - span.start) / page * page,
                        span.start + (hi - span.start).div_ceil(page) * page,
                    )
                })
            });
            let mut blocks = KVec::new();
            blocks.push((span.start, span.end, true), GFP_KERNEL)?;
            Ok(Self {
                span,
                page,
                pow2: page.is_power_of_two(),
                extra: cfg.extra_align,
                ignored: cfg.hint_ignored_bits,
                hint_only,
                blocks,
            })
        }

        fn round(&self, size: u64) -> Option<u64> {
            if size == 0 {
                None
            } else if self.pow2 {
                size.checked_next_multiple_of(self.page)
            } else {
                size.div_ceil(self.page).checked_mul(self.page)
            }
        }

        fn alloc(&mut self, req: VaRequest) -> Result<Result<u64, VaAllocError>> {
            let Some(size) = self.round(req.size) else {
                return Ok(Err(VaAllocError::InvalidSize));
            };
            let align = if self.pow2 {
                if req.align != 0 && !req.align.is_power_of_two() {
                    return Ok(Err(VaAllocError::InvalidAlign));
                }
                let al = req.align.max(self.page);
                if al != self.page && Some(al) != self.extra {
                    return Ok(Err(VaAllocError::InvalidAlign));
                }
                al
            } else {
                self.page
            };
            let aligned = if self.pow2 {
                req.hint % align == 0
            } else {
                (req.hint & !self.ignored) % self.page == 0
                    && (!(self.span.start..self.span.end).contains(&req.hint)
                        || (req.hint - self.span.start) % self.page == 0)
            };
            let mut hint = req.hint;
            if hint != 0 && !aligned {
                if req.force_hint {
                    return Ok(Err(VaAllocError::MisalignedHint));
                }
                hint = 0;
            }
            if hint == 0 && req.force_hint {
                return Ok(Err(VaAllocError::NoHint));
            }
            let mut chosen = None;
            if hint != 0 {
                match hint.checked_add(size) {
                    Some(he) if hint >= self.span.start && he <= self.span.end => {
                        if self
                            .blocks
                            .iter()
                            .any(|&(s, e, free)| free && s <= hint && he <= e)
                        {
                            chosen = Some(hint);
                        } else if req.force_hint {
                            return Ok(Err(VaAllocError::HintInUse));
                        }
                    }
                    _ => {
                        if req.force_hint {
                            return Ok(Err(VaAllocError::HintOutOfRange));
                        }
                    }
                }
            }
            if chosen.is_none() {
                // Linear best fit over the free blocks cut at the span.
                let mut best: Option<(u64, u64)> = None;
                for &(s, e, free) in self.blocks.iter() {
                    if !free {
                        continue;
                    }
                    let pieces = match self.hint_only {
                        Some(h) => [(s, e.min(h.start)), (s.max(h.end), e)],
                        None => [(s, e), (0, 0)],
                    };
                    for (ps, pe) in pieces {
                        if ps >= pe {
                            continue;
                        }
                        let a = if self.pow2 {
                            match ps.checked_next_multiple_of(align) {
                                Some(a) => a,
                                None => continue,
                            }
                        } else {
                            ps
                        };
                        if a >= pe || pe - a < size {
                            continue;
                        }
                        if best.is_none_or(|(v, _)| pe - a < v) {
                            best = Some((pe - a, a));
                        }
                    }
                }
                chosen = best.map(|(_, a)| a);
            }
            let Some(a) = chosen else {
                return Ok(Err(VaAllocError::NoSpace));
            };
            let ae = a + size;
            let mut out = KVec::with_capacity(self.blocks.len() + 2, GFP_KERNEL)?;
            for &(s, e, free) in self.blocks.iter() {
                if free && s <= a && ae <= e {
                    if s < a {
                        out.push((s, a, true), GFP_KERNEL)?;
                    }
                    out.push((a, ae, false), GFP_KERNEL)?;
                    if ae < e {
                        out.push((ae, e, true), GFP_KERNEL)?;
                    }
                } else {
                    out.push((s, e, free), GFP_KERNEL)?;
                }
            }
            self.blocks = out;
            Ok(Ok(a))
        }

        fn free(&mut self, start: u64, size: u64) -> Result<Result> {
            let Some(end) = self.round(size).and_then(|n| start.checked_add(n)) else {
                return Ok(Err(EINVAL));
            };
            let Some(idx) = self
                .blocks
                .iter()
                .position(|&(s, e, free)| !free && s == start && e == end)
            else {
                return Ok(Err(EINVAL));
            };
            let mut out: KVec<(u64, u64, bool)> =
                KVec::with_capacity(self.blocks.len(), GFP_KERNEL)?;
            for (i, &(s, e, free)) in self.blocks.iter().enumerate() {
                let free = free || i == idx;
                let merged = match out.last_mut() {
                    Some(last) if free && last.2 && last.1 == s => {
                        last.1 = e;
                        true
                    }
                    _ => false,
                };
                if !merged {
                    out.push((s, e, free), GFP_KERNEL)?;
                }
            }
            self.blocks = out;
            Ok(Ok(()))
        }

        fn clear(&mut self) -> Result<usize> {
            let n = self.blocks.iter().filter(|b| !b.2).count();
            self.blocks.clear();
            self.blocks
                .push((self.span.start, self.span.end, true), GFP_KERNEL)?;
            Ok(n)
        }

        /// The `k`-th allocation (modulo their number), if any.
        fn nth_allocation(&self, k: u64) -> Option<(u64, u64)> {
            let n = self.blocks.iter().filter(|b| !b.2).count();
            if n == 0 {
                return None;
            }
            let k = usize::try_from(k % n as u64).ok()?;
            self.blocks
                .iter()
                .filter(|b| !b.2)
                .nth(k)
                .map(|&(s, e, _)| (s, e))
        }
    }

    /// xorshift64: a tiny deterministic PRNG.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            let mut x = self.0;
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            self.0 = x;
            x
        }

        fn below(&mut self, n: u64) -> u64 {
            if n == 0 {
                0
            } else {
                self.next() % n
            }
        }
    }

    /// Outcome counters, to show the random runs reach every path.
    #[derive(Default)]
    struct Stats {
        ok: u32,
        by_hint: u32,
        no_space: u32,
        in_use: u32,
        misaligned: u32,
        out_of_range: u32,
        freed: u32,
        bad_free: u32,
        crossing: u32,
        cache_hits: u32,
        cache_misses: u32,
    }

    /// `ops` random operations on an allocator and the model, compared after
    /// every step.
    fn differential(cfg: &VaAllocConfig, seed: u64, ops: u32) -> Result<Stats> {
        let mut a = VaAllocator::new(cfg)?;
        let mut m = Model::new(cfg, a.span())?;
        let mut rng = Rng(seed);
        let mut st = Stats::default();
        let span = a.span();
        let page = a.page_size();
        let npages = span.len() / page;
        for op in 0..ops {
            let r = rng.below(100);
            let what;
            if r < 52 {
                let size = match rng.below(20) {
                    0 => 0,
                    1 => u64::MAX - rng.below(3) * page,
                    2 => (1 + rng.below(npages)) * page,
                    3..=5 => (1 + rng.below(16)) * page - rng.below(page),
                    _ => (1 + rng.below(8)) * page,
                };
                let align = match (cfg.extra_align, rng.below(20)) {
                    (_, 0..=11) => 0,
                    (_, 12..=14) => page,
                    (Some(x), 15..=17) => x,
                    (_, 18) => 3,
                    _ => page * 2,
                };
                let aligned = |n: u64| span.start + n * page;
                let hint = match rng.below(12) {
                    0..=4 => 0,
                    5..=7 => aligned(rng.below(npages)),
                    8 => aligned(rng.below(npages)) + 1 + rng.below(page - 1),
                    9 => match (m.hint_only, cfg.extra_align) {
                        (Some(h), _) if rng.below(2) == 0 => {
                            h.start + rng.below(h.len() / page) * page
                        }
                        (_, Some(x)) => span.start + rng.below(span.len() / x) * x,
                        _ => aligned(npages - 1 - rng.below(4)),
                    },
                    10 => match rng.below(4) {
                        0 => span.start.wrapping_sub(page),
                        1 => span.end,
                        2 => !(page - 1),
                        _ => aligned(rng.below(npages)) ^ (1 << 62),
                    },
                    _ => match m.nth_allocation(rng.next()) {
                        Some((s, _)) => s,
                        None => 0,
                    },
                };
                let req = VaRequest {
                    size,
                    align,
                    hint,
                    force_hint: rng.below(3) == 0,
                };
                // The three ways in: `alloc`, `alloc_with` with fresh nodes, and
                // the ContextVm flow (`alloc_cached`, and on a miss `alloc_with`).
                let fresh = a.node_stats().fresh;
                let got = match op % 3 {
                    0 => a.alloc(req),
                    1 => a.alloc_with(req, VaAllocator::prepare(GFP_KERNEL)?),
                    _ => match a.alloc_cached(req) {
                        Ok(s) => Ok(s),
                        Err(AllocOutcome::Failed(e)) => Err(e),
                        Err(AllocOutcome::NeedNodes) => {
                            a.alloc_with(req, VaAllocator::prepare(GFP_KERNEL)?)
                        }
                    },
                };
                // Served from the cache, or reserved on a miss.
                if op % 3 != 1 {
                    if a.node_stats().fresh != fresh {
                        st.cache_misses += 1;
                    } else if got.is_ok() {
                        st.cache_hits += 1;
                    }
                }
                let want = m.alloc(req)?;
                if got != want {
                    pr_err!("op {}: {:?}: got {:?}, model {:?}\n", op, req, got, want);
                    return Err(EINVAL);
                }
                match got {
                    Ok(s) => {
                        st.ok += 1;
                        if hint != 0 && s == hint {
                            st.by_hint += 1;
                        }
                        let rounded = m.round(size).ok_or(EINVAL)?;
                        if a.is_hint_crossing_range(s, rounded) {
                            st.crossing += 1;
                            // Only a hint reaches the reserved span.
                            assert_eq!(s, hint);
                        }
                    }
                    Err(VaAllocError::NoSpace) => st.no_space += 1,
                    Err(VaAllocError::HintInUse) => st.in_use += 1,
                    Err(VaAllocError::MisalignedHint) => st.misaligned += 1,
                    Err(VaAllocError::HintOutOfRange) => st.out_of_range += 1,
                    Err(_) => {}
                }
                what = "alloc";
            } else if r < 90 {
                let Some((s, e)) = m.nth_allocation(rng.next()) else {
                    continue;
                };
                // The requested size of an allocation may be below the rounded one.
                let size = if rng.below(4) == 0 {
                    e - s - rng.below(page)
                } else {
                    e - s
                };
                let got = a.free(s, size);
                let want = m.free(s, size)?;
                if got != want || got.is_err() {
                    pr_err!("op {}: free({:#x}, {:#x}): {:?}\n", op, s, size, got);
                    return Err(EINVAL);
                }
                st.freed += 1;
                what = "free";
            } else if r < 99 {
                let (s, size) = match (m.nth_allocation(rng.next()), rng.below(5)) {
                    (Some((s, e)), 0) => (s, e - s + page),
                    (Some((s, e)), 1) => (s + page, e - s - page),
                    (Some((s, e)), 2) => (s, (e - s) * 2),
                    (Some((s, _)), 3) => (s.wrapping_sub(page), page),
                    _ => (span.start + rng.below(npages) * page, page),
                };
                let got = a.free(s, size);
                let want = m.free(s, size)?;
                if got != want {
                    pr_err!("op {}: bad free({:#x}, {:#x}): {:?}\n", op, s, size, got);
                    return Err(EINVAL);
                }
                if got.is_err() {
                    st.bad_free += 1;
                }
                what = "bad free";
            } else {
                let got = a.clear();
                let want = m.clear()?;
                if got != want {
                    pr_err!("op {}: clear: {} vs {}\n", op, got, want);
                    return Err(EINVAL);
                }
                what = "clear";
            }
            let d = dump(&a)?;
            let free = m.blocks.iter().filter(|b| b.2).count();
            let allocated = m.blocks.len() - free;
            if d.as_slice() != m.blocks.as_slice()
                || !a.check_invariants()
                || !nodes_accounted(&a)
                || a.free_blocks() != free
                || a.allocated_blocks() != allocated
                || a.is_pristine() != (allocated == 0)
            {
                pr_err!("op {} ({}): allocator and model differ\n", op, what);
                return Err(EINVAL);
            }
        }
        a.clear();
        assert!(a.is_pristine() && a.check_invariants());
        Ok(st)
    }

    #[test]
    fn random_ops_match_the_model_in_a_host_range() -> Result {
        // 4096 pages of 4 KiB with the 2 MiB class and a span that is not page
        // aligned at either end.
        let cfg = VaAllocConfig::new(VaSpan::new(HOST, HOST + 4096 * K4), K4)
            .with_extra_align(M2)
            .with_hint_reserved(VaSpan::new(HOST + 3000 * K4 + 100, HOST + 3500 * K4 - 100));
        let st = differential(&cfg, 0x9E37_79B9_7F4A_7C15, 2500)?;
        assert!(st.ok > 0 && st.by_hint > 0 && st.no_space > 0 && st.in_use > 0);
        assert!(st.misaligned > 0 && st.out_of_range > 0 && st.freed > 0 && st.bad_free > 0);
        assert!(st.crossing > 0);
        assert!(st.cache_hits > 0 && st.cache_misses > 0);
        Ok(())
    }

    #[test]
    fn random_ops_match_the_model_in_a_dram_range() -> Result {
        let cfg = VaAllocConfig::new(
            VaSpan::new(DRAM_START, DRAM_START + 256 * DRAM_PAGE),
            DRAM_PAGE,
        )
        .with_hint_ignored_bits(LOW48_IGNORED)
        .with_hint_reserved(VaSpan::new(
            DRAM_START + 100 * DRAM_PAGE + 0x1234,
            DRAM_START + 140 * DRAM_PAGE - 0x10,
        ));
        let st = differential(&cfg, 0x2545_F491_4F6C_DD1D, 2500)?;
        assert!(st.ok > 0 && st.by_hint > 0 && st.no_space > 0 && st.in_use > 0);
        assert!(st.misaligned > 0 && st.out_of_range > 0 && st.freed > 0 && st.bad_free > 0);
        assert!(st.crossing > 0);
        assert!(st.cache_hits > 0 && st.cache_misses > 0);
        Ok(())
    }

    #[test]
    fn random_ops_match_the_model_in_a_plain_range() -> Result {
        let cfg = VaAllocConfig::new(VaSpan::new(HOST + 0x123, HOST + 512 * M2), M2);
        let st = differential(&cfg, 0xD1B5_4A32_D192_ED03, 2000)?;
        assert!(st.ok > 0 && st.by_hint > 0 && st.no_space > 0 && st.in_use > 0);
        assert!(st.misaligned > 0 && st.out_of_range > 0 && st.freed > 0 && st.bad_free > 0);
        assert!(st.cache_hits > 0 && st.cache_misses > 0);
        Ok(())
    }
}
