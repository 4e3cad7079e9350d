// SPDX-License-Identifier: GPL-2.0

//! [`CpuDma`]: a buffer of coherent DMA memory the device and the driver
//! share (upstream's CPU-accessible pool and the CPU queues,
//! `hl_cpu_accessible_dma_pool_alloc` / `hl_asic_dma_alloc_coherent`),
//! with volatile byte accesses: the device may write it at any time, so no
//! reference to its contents is ever made.

use kernel::{
    device::{Bound, Device},
    dma::Coherent,
    prelude::*,
};

/// `len` bytes of coherent DMA memory of one device.
///
/// # Invariants
///
/// `mem` is `len` bytes long, mapped for its device.
pub(crate) struct CpuDma {
    mem: Coherent<[u8]>,
    len: usize,
}

impl CpuDma {
    /// `len` zeroed bytes for `dev`. Sleeps.
    pub(crate) fn new(dev: &Device<Bound>, len: usize) -> Result<Self> {
        let mem = Coherent::<u8>::zeroed_slice(dev, len, GFP_KERNEL)?;
        // INVARIANT: just allocated, `len` bytes.
        Ok(Self { mem, len })
    }

    /// The bus address of byte 0, as the device reaches it.
    pub(crate) fn bus(&self) -> u64 {
        self.mem.dma_address()
    }

    /// The CPU address of `[off, off + n)`; `EINVAL` outside the buffer.
    fn at(&self, off: usize, n: usize) -> Result<*mut u8> {
        if off.checked_add(n).is_none_or(|end| end > self.len) {
            return Err(EINVAL);
        }
        // SAFETY: `off + n <= len` (checked above): inside the allocation
        // (type invariant), so the offset pointer stays in bounds.
        Ok(unsafe { self.mem.as_mut_ptr().cast::<u8>().add(off) })
    }

    /// Write `data` at `off`, byte by byte (volatile). O(len).
    pub(crate) fn write(&self, off: usize, data: &[u8]) -> Result {
        let p = self.at(off, data.len())?;
        for (i, b) in data.iter().enumerate() {
            // SAFETY: `p..p + data.len()` is inside the allocation (`at`);
            // coherent memory the device may access concurrently, hence
            // volatile, never a reference.
            unsafe { p.add(i).write_volatile(*b) };
        }
        Ok(())
    }

    /// Read `buf.len()` bytes at `off` (volatile). O(len).
    pub(crate) fn read(&self, off: usize, buf: &mut [u8]) -> Result {
        let p = self.at(off, buf.len())?;
        for (i, b) in buf.iter_mut().enumerate() {
            // SAFETY: as in `write`.
            *b = unsafe { p.add(i).read_volatile() };
        }
        Ok(())
    }

    /// The little-endian u32 at `off` (4-byte aligned), one volatile read
    /// (the fence the device writes last). O(1).
    pub(crate) fn read32(&self, off: usize) -> Result<u32> {
        if off % 4 != 0 {
            return Err(EINVAL);
        }
        let p = self.at(off, 4)?;
        // SAFETY: inside the allocation (`at`), 4-byte aligned (the
        // allocation is page aligned and `off` is a multiple of 4).
        Ok(u32::from_le(unsafe { p.cast::<u32>().read_volatile() }))
    }
}
