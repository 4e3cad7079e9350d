// SPDX-License-Identifier: GPL-2.0

//! [`sort_by_key`]: an in-place heapsort for the module's few sorts (the
//! debugfs list of CSs in flight, the benchmarks' samples and live blocks).
//!
//! Why not `core`'s `sort_unstable`: its pattern-defeating quicksort calls
//! `panic_on_ord_violation`, which objtool does not know as a function that
//! never returns, so on the production kernel it reports core's quicksort as
//! "falls through to next function" (2026-12-05, rustc 1.96, kernel 7.3).
//! A heapsort has no such path, needs no memory and is O(n log n) in the
//! worst case; it is not stable.

use kernel::prelude::*;

/// Sort `v` by `key`, ascending, in place. O(n log n), no allocation, never
/// panics (every index is checked; a key function that is not a total order
/// leaves some order, never a fault).
pub(crate) fn sort_by_key<T, K: Ord>(v: &mut [T], key: impl Fn(&T) -> K) {
    let n = v.len();
    for start in (0..n / 2).rev() {
        sift_down(v, start, n, &key);
    }
    for end in (1..n).rev() {
        v.swap(0, end);
        sift_down(v, 0, end, &key);
    }
}

/// Move `v[root]` down the max-heap `v[..end]` to where it belongs. O(log n).
fn sift_down<T, K: Ord>(v: &mut [T], mut root: usize, end: usize, key: &impl Fn(&T) -> K) {
    let k = |v: &[T], i: usize| v.get(i).map(key);
    loop {
        let left = root.saturating_mul(2).saturating_add(1);
        if left >= end {
            return;
        }
        let right = left + 1;
        let child = if right < end && k(v, right) > k(v, left) {
            right
        } else {
            left
        };
        if k(v, child) <= k(v, root) {
            return;
        }
        v.swap(root, child);
        root = child;
    }
}

#[kunit_tests(hlrs_sort)]
mod tests {
    use super::*;

    #[test]
    fn sorts_any_order_of_any_length() {
        for n in 0..40u64 {
            let mut v = KVec::new();
            let mut x = n.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
            for _ in 0..n {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                if v.push(x % 17, GFP_KERNEL).is_err() {
                    return;
                }
            }
            let sum: u64 = v.iter().sum();
            sort_by_key(&mut v, |&e| e);
            assert!(v.windows(2).all(|w| w[0] <= w[1]));
            assert_eq!(v.iter().sum::<u64>(), sum);
        }
        // By a key, descending through Reverse.
        let mut v = [(1, 'a'), (3, 'b'), (2, 'c')];
        sort_by_key(&mut v, |&(k, _)| core::cmp::Reverse(k));
        assert_eq!(v, [(3, 'b'), (2, 'c'), (1, 'a')]);
    }
}
