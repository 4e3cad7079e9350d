// SPDX-License-Identifier: GPL-2.0

//! The edge to C: every `unsafe` of the module lives below this module.
//!
//! - [`accel`]: accel + control node registration, file operations, ioctl
//!   entry points, sysfs attributes, the `AsBytes`/`FromBytes` impls of the
//!   uAPI structs.

pub(crate) mod accel;
