// SPDX-License-Identifier: GPL-2.0

//! A few spare tree-node reservations kept by a table, so that a steady
//! insert/remove cycle (ALLOC+FREE, MAP+UNMAP) reuses the node the last
//! removal freed instead of a `kmalloc` and a `kfree` per pair, which under
//! plain emulation cost as much as a null ioctl (`make bench`, "building
//! blocks").

/// Spares a table keeps of one kind.
pub(crate) const SPARES: usize = 4;

/// Up to [`SPARES`] values (node reservations), in a fixed array: keeping
/// and taking never allocates. O(SPARES) per call.
pub(crate) struct Spares<T>([Option<T>; SPARES]);

impl<T> Spares<T> {
    /// None.
    pub(crate) const fn new() -> Self {
        Self([const { None }; SPARES])
    }

    /// One of them, if any.
    pub(crate) fn take(&mut self) -> Option<T> {
        self.0.iter_mut().find_map(Option::take)
    }

    /// Whether there is one.
    pub(crate) fn has(&self) -> bool {
        self.0.iter().any(Option::is_some)
    }

    /// Keep `v` if there is room; otherwise it is dropped (freed).
    pub(crate) fn put(&mut self, v: T) {
        if let Some(slot) = self.0.iter_mut().find(|s| s.is_none()) {
            *slot = Some(v);
        }
    }
}

#[kernel::prelude::kunit_tests(hlrs_spares)]
mod tests {
    use super::*;
    use kernel::prelude::*;

    #[test]
    fn keeps_at_most_spares_and_gives_each_back_once() {
        let mut s = Spares::new();
        assert!(!s.has());
        for i in 0..SPARES + 2 {
            s.put(i);
        }
        let mut got = KVec::new();
        while let Some(v) = s.take() {
            assert!(got.push(v, GFP_KERNEL).is_ok());
        }
        assert_eq!(got.len(), SPARES);
        assert!(got.iter().all(|&v| v < SPARES));
        assert!(!s.has());
    }
}
