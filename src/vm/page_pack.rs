// SPDX-License-Identifier: GPL-2.0

//! Physical page packs (upstream `struct hl_vm_phys_pg_pack`): the DRAM pages
//! of one ALLOC.
//!
//! A contiguous pack stores only its base address; a non-contiguous pack
//! stores one 8-byte address per page. The pages go back to the device's pool
//! when the last reference to the pack goes away (`free_phys_pg_pack`), so no
//! error path can leak them.

use crate::{
    asic::AsicProperties,
    vm::dram_pool::{DramPool, PoolPages}, //
};
use kernel::{
    prelude::*,
    sync::{Arc, Mutex}, //
};

/// Where the pages of a pack are.
#[derive(Debug)]
pub(crate) enum PackPages {
    /// `npages` consecutive pages from `base`.
    Contiguous {
        /// Physical address of the first page.
        base: u64,
    },
    /// One physical address per page.
    Scattered(KVec<u64>),
}

/// The DRAM pages of one allocation.
///
/// # Invariants
///
/// The pages are allocated in `pool` and owned by this pack; they are
/// returned exactly once, in `Drop`. `total_size == npages * page_size`.
pub(crate) struct PhysPgPack {
    pool: Arc<Mutex<DramPool>>,
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
        pool: &Arc<Mutex<DramPool>>,
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
        // Allocate the address array before touching the pool.
        let mut addrs = if contiguous {
            None
        } else {
            Some(KVec::with_capacity(
                usize::try_from(npages).map_err(|_| ENOMEM)?,
                GFP_KERNEL,
            )?)
        };
        let pool_ref = pool;
        let mut pool = pool_ref.lock();
        let pages = match addrs.as_mut() {
            None => match pool.alloc_contiguous(npages)? {
                PoolPages::Contiguous { first, .. } => PackPages::Contiguous {
                    base: pool.page_addr(first),
                },
                other => {
                    // Cannot happen; give the pages back rather than leak them.
                    if pool.free(&other).is_err() {
                        pr_err!("page pack: could not give back pages of an unknown kind\n");
                    }
                    return Err(EINVAL);
                }
            },
            Some(v) => {
                let taken = pool.alloc_scattered(npages)?;
                if let PoolPages::Scattered(mut mask) = taken {
                    while mask != 0 {
                        let index = u64::from(mask.trailing_zeros());
                        mask &= mask - 1;
                        // Capacity was reserved for exactly `npages` entries.
                        v.push_within_capacity(pool.page_addr(index))
                            .map_err(|_| ENOMEM)?;
                    }
                }
                PackPages::Scattered(core::mem::take(v))
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

    /// Physical address of page `i`. O(1).
    pub(crate) fn page_addr(&self, i: u64) -> Option<u64> {
        if i >= self.npages {
            return None;
        }
        match &self.pages {
            PackPages::Contiguous { base } => Some(base + i * self.page_size),
            PackPages::Scattered(v) => v.get(usize::try_from(i).ok()?).copied(),
        }
    }

    /// Host memory used to describe the pages, in bytes.
    pub(crate) fn descriptor_bytes(&self) -> usize {
        match &self.pages {
            PackPages::Contiguous { .. } => 0,
            PackPages::Scattered(v) => v.len() * core::mem::size_of::<u64>(),
        }
    }
}

impl Drop for PhysPgPack {
    fn drop(&mut self) {
        let mut pool = self.pool.lock();
        let pages = match &self.pages {
            PackPages::Contiguous { base } => {
                pool.page_index(*base).map(|first| PoolPages::Contiguous {
                    first,
                    count: self.npages,
                })
            }
            PackPages::Scattered(v) => Some(PoolPages::Scattered(
                v.iter()
                    .filter_map(|&a| pool.page_index(a))
                    .fold(0u128, |m, i| m | (1u128 << i)),
            )),
        };
        // By the type invariant the pages are ours; a failure would be a bug.
        if pages.is_none_or(|p| pool.free(&p).is_err()) {
            pr_err!("page pack: DRAM pages could not be returned to the pool\n");
        }
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
