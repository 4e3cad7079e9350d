// SPDX-License-Identifier: GPL-2.0

//! The benchmarks' random workload generator.

/// Block sizes of the workloads, in pages.
pub(crate) const SIZE_CLASSES: [u64; 8] = [1, 2, 3, 4, 8, 16, 32, 64];

/// xorshift64* (Vigna): a tiny fixed-seed generator, the same sequence on
/// every run. Not for anything but workloads.
pub(crate) struct XorShift64Star(u64);

impl XorShift64Star {
    /// A generator with `seed` (0 is replaced by 1: the state must not be 0). O(1).
    pub(crate) fn new(seed: u64) -> Self {
        Self(if seed == 0 { 1 } else { seed })
    }

    /// The next 64 random bits. O(1).
    pub(crate) fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A number in `0..n` (`n > 0`; 0 for `n == 0`), from the high bits. O(1).
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64() >> 32) * u128::from(n)) >> 32) as u64
    }

    /// A random size class, in pages. O(1).
    pub(crate) fn class_pages(&mut self) -> u64 {
        let i = self.below(SIZE_CLASSES.len() as u64) as usize;
        SIZE_CLASSES.get(i).copied().unwrap_or(1)
    }
}
