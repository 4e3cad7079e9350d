// SPDX-License-Identifier: GPL-2.0

//! The per-open state behind a DRM file of the compute node, for the entry
//! points that get a `drm_file` (ioctls, `mmap`).

use crate::file::ComputeFile;
use kernel::bindings;

/// The compute file of a DRM file.
///
/// # Safety
///
/// `file` must be a `drm_file` of ours whose open succeeded and that is not
/// closed for the lifetime `'a` (true inside an ioctl or `mmap` of that file).
pub(crate) unsafe fn compute_file<'a>(file: *mut bindings::drm_file) -> &'a ComputeFile {
    // SAFETY: per the contract `driver_priv` is the live `ComputeFile` of the open.
    unsafe { &*(*file).driver_priv.cast::<ComputeFile>() }
}
