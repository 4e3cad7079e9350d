// SPDX-License-Identifier: GPL-2.0

//! Device virtual memory: the DRAM page pool, physical page packs, the handle
//! table, ALLOC/FREE of device memory, VA ranges and their block allocator.

pub(crate) mod device_memory;
pub(crate) mod dram_pool;
pub(crate) mod handles;
pub(crate) mod page_pack;
