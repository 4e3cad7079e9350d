// SPDX-License-Identifier: GPL-2.0

//! The edge to C: every raw FFI call of the module lives below this module.
//!
//! - [`accel`]: accel + control node registration, file operations, ioctl
//!   entry points, sysfs attributes, the `AsBytes`/`FromBytes` impls of the
//!   uAPI structs.
//! - [`pin`]: pinning of user pages for host mappings, plus the C helper
//!   `ffi/helpers.c` for `page_to_phys` (a static inline).

pub(crate) mod accel;
pub(crate) mod pin;
