// SPDX-License-Identifier: GPL-2.0

//! `DRM_IOCTL_HL_MEMORY` (upstream `hl_mem_ioctl`, common/memory.c:2194-2313).

use crate::{backend::DeviceStatus, file::ComputeFile, uapi::HlMemArgs};
use kernel::prelude::*;

/// Serve one MEMORY ioctl for a compute file.
///
/// Device memory is not implemented yet: every op answers `EOPNOTSUPP` after
/// the checks upstream makes first (device operational -> `EBUSY`, op in
/// range -> `EINVAL`).
pub(crate) fn memory_ioctl(file: &ComputeFile, args: &mut HlMemArgs) -> Result {
    let status: DeviceStatus = file.ctx.device().status();
    if !status.is_operational() {
        return Err(EBUSY);
    }
    match args.op {
        crate::uapi::HL_MEM_OP_ALLOC..=crate::uapi::HL_MEM_OP_TS_ALLOC => Err(EOPNOTSUPP),
        _ => Err(EINVAL),
    }
}
