// SPDX-License-Identifier: GPL-2.0

//! The ioctls, as safe functions over typed arguments. The FFI layer
//! (`shell::accel`) copies the argument in and out and calls these.

pub(crate) mod cb;
pub(crate) mod cs;
pub(crate) mod debug;
pub(crate) mod info;
pub(crate) mod info_fw;
pub(crate) mod memory;
