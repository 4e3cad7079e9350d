// SPDX-License-Identifier: GPL-2.0

//! The chunks of a CS as the ioctl reads them from the caller
//! ([`ChunkSource`]; a slice in the tests), for [`super::submit`] and
//! [`super::sync_stream`].

use crate::uapi::HlCsChunk;
use kernel::{alloc::KVVec, prelude::*};

/// Where the chunk arrays of a CS come from (the caller's memory; a slice
/// in the tests).
pub(crate) trait ChunkSource {
    /// The `n` chunks at `addr`: `EFAULT` if they cannot be read, `ENOMEM`.
    fn read(&self, addr: u64, n: u32) -> Result<Chunks>;
    /// The u64 at `addr` (a WAIT's `signal_seq_arr`): `EFAULT`.
    fn read_u64(&self, addr: u64) -> Result<u64>;
}

/// Chunks a CS reads without an allocation.
pub(crate) const INLINE_CHUNKS: usize = 4;

/// The chunks of a CS as read: up to [`INLINE_CHUNKS`] in place (a CS of a
/// few jobs allocates only its record and its jobs: on the debug kernel an
/// allocation costs twice a null ioctl), more in a vector.
pub(crate) struct Chunks {
    inline: [HlCsChunk; INLINE_CHUNKS],
    /// How many of `inline` are chunks (when `heap` is empty).
    n: usize,
    heap: KVVec<HlCsChunk>,
}

impl Chunks {
    /// The first `n` of `inline`.
    pub(crate) fn inline(inline: [HlCsChunk; INLINE_CHUNKS], n: usize) -> Self {
        Self {
            inline,
            n,
            heap: KVVec::new(),
        }
    }

    /// The chunks of `heap`.
    pub(crate) fn heap(heap: KVVec<HlCsChunk>) -> Self {
        Self {
            inline: [HlCsChunk::default(); INLINE_CHUNKS],
            n: 0,
            heap,
        }
    }
}

impl core::ops::Deref for Chunks {
    type Target = [HlCsChunk];

    fn deref(&self) -> &[HlCsChunk] {
        if self.heap.is_empty() {
            self.inline.get(..self.n).unwrap_or(&[])
        } else {
            &self.heap
        }
    }
}
