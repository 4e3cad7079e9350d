// SPDX-License-Identifier: GPL-2.0

//! The MMU: page tables of a context, map/unmap of page packs, and a software
//! model of the hardware page walk.
//!
//! - [`pte`]: the PTE format and Gaudi2's DRAM address scrambling.
//! - [`page_table`]: hop tables, one page-table tree per context and MMU.
//! - [`walk`]: the page-walk oracle (reads the tables as the hardware does).
//! - [`invalidate`]: MMU cache invalidation and the proof that gates every
//!   release of memory or hops the MMU could still reach.
//!
//! Lock order (outermost first), for everything under `mmu/` and the MAP and
//! UNMAP paths that call it:
//!
//! 1. `HlDevice::handles` (held only to look up a handle and bump its mapping
//!    count; released before anything below is taken);
//! 2. a VA range's mutex (`ContextVm::range`; released before 3);
//! 3. `ContextVm::mmu`, the page tables of one context (upstream holds one
//!    device-wide `mmu_lock` here for every context);
//! 4. `HlDevice::dr_hops`, the device-resident hop slots (taken inside 3);
//! 5. the backend's leaf locks (simulated DRAM, invalidation log).
//!
//! `ContextVm::mappings` (upstream `mem_hash_lock`, and the userptr index that
//! upstream guards with `userptr_lock`) is taken on its own, never together
//! with 3.

pub(crate) mod device_mmu;
pub(crate) mod hop_pool;
pub(crate) mod invalidate;
pub(crate) mod page_table;
pub(crate) mod pte;
pub(crate) mod walk;
