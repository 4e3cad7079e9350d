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
//! - [`hop_pool`]: where hops live (device-resident and host-resident pools,
//!   the [`hop_pool::HopMemory`] a page table writes through).
//! - [`context_mmu`]: the two page tables of one context: map, unmap,
//!   translate and teardown of a run of pages.
//! - [`device_mmu`]: the device-wide owner of the hop pools, scrambler and
//!   backend.
//!
//! Lock order: the table at the crate root (`hlrs.rs`).

pub(crate) mod context_mmu;
pub(crate) mod device_mmu;
pub(crate) mod hop_pool;
pub(crate) mod invalidate;
pub(crate) mod page_table;
pub(crate) mod pte;
pub(crate) mod walk;
