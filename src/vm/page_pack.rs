// SPDX-License-Identifier: GPL-2.0

//! Physical page packs (upstream `struct hl_vm_phys_pg_pack`): the DRAM pages
//! of one ALLOC.
//!
//! A contiguous pack stores only its base address; a non-contiguous pack
//! stores the pool's bitmap of its pages (the pool has at most 128 pages):
//! no allocation besides the pack itself, where upstream keeps an array of
//! 8-byte addresses per pack. The pages go back to the device's pool
//! when the last reference to the pack goes away (`free_phys_pg_pack`), so no
//! error path can leak them.

use crate::{
    asic::AsicProperties,
    vm::dram_pool::{PoolPages, SharedPool}, //
};
use core::pin::Pin;
use kernel::{
    prelude::*,
    sync::{Arc, UniqueArc}, //
};

/// Where the pages of a pack are.
#[derive(Debug)]
pub(crate) enum PackPages {
    /// `npages` consecutive pages from `base`.
    Contiguous {
        /// Physical address of the first page.
        base: u64,
    },
    /// The pages whose bits are set, in increasing order: bit `i` is the
    /// pool page at `base + i x page_size`.
    Scattered {
        /// The pool's first page.
        base: u64,
        /// Which pool pages.
        mask: u128,
    },
}

/// Index of the `n`-th (from 0) set bit of `mask`. O(n) bit operations.
fn nth_set_bit(mask: u128, n: u64) -> Option<u64> {
    let lo = mask as u64;
    let (mut word, base, mut n) = match u64::from(lo.count_ones()) {
        c if n < c => (lo, 0, n),
        c => ((mask >> 64) as u64, 64, n - c),
    };
    while n > 0 && word != 0 {
        word &= word - 1;
        n -= 1;
    }
    (word != 0).then(|| base + u64::from(word.trailing_zeros()))
}

/// The DRAM pages of one allocation.
///
/// # Invariants
///
/// The pages are allocated in `pool` and owned by this pack; they are
/// returned exactly once, in `Drop` (or by [`PhysPgPack::vacate`], which
/// leaves `npages == 0`: a pack with no pages, which only a [`VacantPack`]
/// holds). `total_size == npages * page_size`.
pub(crate) struct PhysPgPack {
    pool: Arc<SharedPool>,
    /// ASID of the allocating context.
    pub(crate) asid: u32,
    /// The `HL_MEM_*` flags given to ALLOC.
    pub(crate) flags: u32,
    /// Page size in bytes (the DRAM page size).
    pub(crate) page_size: u64,
    /// Number of pages.
    pub(crate) npages: u64,
    /// `npages * page_size`.
    pub(crate) total_size: u64,
    /// The pages.
    pub(crate) pages: PackPages,
}

impl PhysPgPack {
    /// Take `npages` pages from `pool` (the DRAM pool of a device with
    /// `asic`'s geometry; `alloc_device_memory` steps 3-6): one contiguous run
    /// or any pages. `ENOMEM` when the pool cannot satisfy it; nothing is
    /// taken then. O(npages).
    pub(crate) fn alloc(
        pool: &Arc<SharedPool>,
        asic: &AsicProperties,
        asid: u32,
        flags: u32,
        npages: u64,
        contiguous: bool,
    ) -> Result<Self> {
        let page_size = asic.dram_page_size;
        let total_size = npages.checked_mul(page_size).ok_or(ENOMEM)?;
        // More than the whole pool can never succeed: refuse before sizing
        // anything by the user's request.
        if npages > asic.user_dram_pages() {
            return Err(ENOMEM);
        }
        let pool_ref = pool;
        let mut pool = pool_ref.lock();
        let taken = if contiguous {
            pool.alloc_contiguous(npages)?
        } else {
            pool.alloc_scattered(npages)?
        };
        let pages = match taken {
            PoolPages::Contiguous { first, .. } if contiguous => PackPages::Contiguous {
                base: pool.page_addr(first),
            },
            PoolPages::Scattered(mask) if !contiguous => PackPages::Scattered {
                base: pool.page_addr(0),
                mask,
            },
            other => {
                // Cannot happen; give the pages back rather than leak them.
                if pool.free(&other).is_err() {
                    pr_err!("page pack: could not give back pages of an unknown kind\n");
                }
                return Err(EINVAL);
            }
        };
        drop(pool);
        // INVARIANT: the pages were just taken from `pool` for this pack.
        Ok(Self {
            pool: pool_ref.clone(),
            asid,
            flags,
            page_size,
            npages,
            total_size,
            pages,
        })
    }

    /// Whether the pages are physically contiguous.
    pub(crate) fn is_contiguous(&self) -> bool {
        matches!(self.pages, PackPages::Contiguous { .. })
    }

    /// Physical address of page `i`. O(1) for a contiguous pack, O(i) bit
    /// operations (at most 64) for a scattered one.
    pub(crate) fn page_addr(&self, i: u64) -> Option<u64> {
        if i >= self.npages {
            return None;
        }
        match self.pages {
            PackPages::Contiguous { base } => Some(base + i * self.page_size),
            PackPages::Scattered { base, mask } => {
                Some(base + nth_set_bit(mask, i)? * self.page_size)
            }
        }
    }
}

/// The allocation of a pack whose pages went back to the pool, kept (by the
/// handle table) for the next ALLOC, so that an ALLOC+FREE pair allocates
/// nothing in the steady state.
pub(crate) struct VacantPack(Pin<UniqueArc<PhysPgPack>>);

impl PhysPgPack {
    /// Give `this` pack's pages back now and keep its allocation, if `this`
    /// is the last reference; otherwise drop the reference (the pages go
    /// with the last one) and `None`. O(1).
    pub(crate) fn vacate(this: Arc<Self>) -> Option<VacantPack> {
        let mut unique = Arc::into_unique_or_drop(this)?;
        let pack = Pin::get_mut(unique.as_mut());
        pack.return_pages();
        pack.npages = 0;
        pack.total_size = 0;
        Some(VacantPack(unique))
    }

    /// [`Self::alloc`] into `spare`'s allocation if given, else a new one.
    /// On an error `spare` is freed.
    pub(crate) fn alloc_shared(
        pool: &Arc<SharedPool>,
        asic: &AsicProperties,
        (asid, flags): (u32, u32),
        (npages, contiguous): (u64, bool),
        spare: Option<VacantPack>,
    ) -> Result<Arc<Self>> {
        let pack = Self::alloc(pool, asic, asid, flags, npages, contiguous)?;
        match spare {
            Some(VacantPack(mut unique)) => {
                // The vacant pack dropped in place has no pages to return.
                *Pin::get_mut(unique.as_mut()) = pack;
                Ok(unique.into())
            }
            None => Ok(Arc::new(pack, GFP_KERNEL)?),
        }
    }

    /// Return the pages to the pool (once: `Drop` and `vacate` only), their
    /// contents given back first. O(1) besides that.
    fn return_pages(&mut self) {
        if self.npages == 0 {
            return;
        }
        for i in 0..self.npages {
            if let Some(pa) = self.page_addr(i) {
                self.pool.release_contents(pa, self.page_size);
            }
        }
        let mut pool = self.pool.lock();
        let pages = match self.pages {
            PackPages::Contiguous { base } => {
                pool.page_index(base).map(|first| PoolPages::Contiguous {
                    first,
                    count: self.npages,
                })
            }
            PackPages::Scattered { mask, .. } => Some(PoolPages::Scattered(mask)),
        };
        // By the type invariant the pages are ours; a failure would be a bug.
        if pages.is_none_or(|p| pool.free(&p).is_err()) {
            pr_err!("page pack: DRAM pages could not be returned to the pool\n");
        }
    }
}

impl Drop for PhysPgPack {
    fn drop(&mut self) {
        self.return_pages();
    }
}

impl crate::hw::backend::DramPages for PhysPgPack {
    fn page_size(&self) -> u64 {
        self.page_size
    }

    fn total_size(&self) -> u64 {
        self.total_size
    }

    fn page_addr(&self, i: u64) -> Option<u64> {
        PhysPgPack::page_addr(self, i)
    }
}
