// SPDX-License-Identifier: GPL-2.0

//! Per-open state of the two device nodes.

use crate::{context::Context, device::HlDevice};
use kernel::sync::Arc;

/// Which node a file was opened on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Node {
    /// `/dev/accel/accelN`: has a context, serves INFO and MEMORY.
    Compute,
    /// `/dev/accel/accel_controlDN`: no context, serves INFO only.
    Control,
}

/// The state of one open of the compute node (upstream `struct hl_fpriv`).
pub(crate) struct ComputeFile {
    /// The user context created by the open; HW-block mmaps hold more
    /// references, so the context can outlive the file's release only until
    /// their last `munmap` (in practice never: a mapping keeps the file open).
    pub(crate) ctx: Arc<Context>,
}

impl Drop for ComputeFile {
    /// The close of the file stops the context's jobs and waits for its
    /// CSs in flight, even if an mmap keeps the context itself alive.
    fn drop(&mut self) {
        self.ctx.cs().stop_and_drain();
    }
}

/// The state of one open of the control node.
pub(crate) struct ControlFile {
    /// The device the node belongs to.
    pub(crate) dev: Arc<HlDevice>,
}
