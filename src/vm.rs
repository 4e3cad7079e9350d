// SPDX-License-Identifier: GPL-2.0

//! Device virtual memory: the per-context VA ranges and what lives in them.
//!
//! Upstream keeps this in `common/memory.c`; here each concept gets its own file
//! under `vm/`. So far: [`va_alloc`], the VA block allocator of one VA range.

pub(crate) mod va_alloc;
