// SPDX-License-Identifier: GPL-2.0

//! Benchmarks that need more than the code they measure: comparisons with
//! other allocators, and the bench-only transcriptions of upstream code they
//! use. Everything here is KUnit tests and their helpers; the driver never
//! calls it.
//!
//! - [`va_allocators`]: this driver's VA allocator, the kernel's `drm_mm` and
//!   upstream habanalabs' VA list side by side (`make bench`).
//! - [`primitives`]: what an allocation, a mutex, a clock read, a PTE write
//!   and an invalidation cost, to read the ioctls' phase breakdowns against.
//! - [`rng`]: the fixed-seed workload generator both use.
//! - [`upstream_va_list`]: upstream's VA list algorithm in safe Rust, with a
//!   test that it places blocks as this driver's allocator does.

pub(crate) mod primitives;
pub(crate) mod rng;
pub(crate) mod upstream_va_list;
pub(crate) mod va_allocators;
