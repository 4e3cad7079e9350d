// SPDX-License-Identifier: GPL-2.0

//! The C-ABI shell, the top floor: every entry point the kernel calls into
//! this module, each thin (decode the C arguments, call a safe handler,
//! encode the answer).
//!
//! - [`accel`]: accel + control node registration, file operations, ioctl
//!   entry points, sysfs attributes, the `AsBytes`/`FromBytes` impls of the
//!   uAPI structs.
//! - [`debugfs`]: the device's debugfs files (on [`crate::ffi::debugfs`]).
//! - [`dmabuf`]: dma-buf export of device memory (EXPORT_DMABUF_FD) and its
//!   callbacks, plus a test importer for KUnit.
//! - [`drm_file`]: the compute file behind a `drm_file`.
//! - [`mmap`]: `mmap` of the compute node (HW blocks, timestamp buffers) and
//!   its vm operations.
//! - [`pci`] (with `CONFIG_PCI`): the PCI driver of Gaudi2 functions
//!   (module parameter `pci`).

pub(crate) mod accel;
pub(crate) mod debugfs;
pub(crate) mod debugfs_abi;
pub(crate) mod dmabuf;
pub(crate) mod drm_file;
pub(crate) mod mmap;
#[cfg(CONFIG_PCI)]
pub(crate) mod pci;
