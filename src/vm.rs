// SPDX-License-Identifier: GPL-2.0

//! Device virtual memory: the DRAM page pool, physical page packs, the handle
//! table, ALLOC/FREE of device memory, and the per-context VA ranges with their
//! block allocator.
//!
//! Upstream keeps all of this in `common/memory.c`; here each concept has its
//! own file.

pub(crate) mod device_memory;
pub(crate) mod dram_pool;
pub(crate) mod handles;
pub(crate) mod mapping;
pub(crate) mod page_pack;
pub(crate) mod userptr;
pub(crate) mod va_alloc;
pub(crate) mod va_range;
