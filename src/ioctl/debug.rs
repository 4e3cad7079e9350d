// SPDX-License-Identifier: GPL-2.0

//! `DRM_IOCTL_HL_DEBUG` (upstream `hl_debug_ioctl`,
//! common/habanalabs_ioctl.c:1180-1225), compute node only.
//!
//! - Not operational: `EBUSY`.
//! - `SET_MODE` (`hl_device_set_debug_mode`, common/device.c:1216-1250):
//!   `enable` enters debug mode (`EFAULT` if already in it), 0 leaves it
//!   (`EFAULT` if not in it). The compute context's end leaves it too
//!   (common/context.c:111).
//! - The coresight ops (`ETR`, `ETF`, `STM`, `FUNNEL`, `BMON`, `SPMU`,
//!   `TIMESTAMP`): `EFAULT` outside debug mode, as upstream. In debug mode
//!   `TIMESTAMP` succeeds and does nothing (deprecated,
//!   gaudi2/gaudi2_coresight.c:2569-2571; its input size is 0, its output
//!   buffer, if given, is written with zeros as upstream's zeroed
//!   `output` is copied back, `ENOMEM` above what `kzalloc` gives,
//!   `EFAULT` on a bad pointer). The others program Gaudi2's coresight
//!   blocks (trace routers, bus monitors, PMUs: `gaudi2_config_*`,
//!   gaudi2/gaudi2_coresight.c), which neither host models: in debug mode
//!   they answer `EOPNOTSUPP` (before upstream's copies of their input and
//!   output buffers), an honest "no such hardware" instead of a success
//!   that configured nothing.
//! - Any other op: `EINVAL`.

use crate::{device::HlDevice, uapi::*};
use kernel::{
    prelude::*,
    uaccess::{UserPtr, UserSlice},
};

/// The largest `output_size` upstream's `kzalloc` can give
/// (`KMALLOC_MAX_SIZE` with 4 KiB pages: 4 MiB); more is `ENOMEM`.
const OUTPUT_MAX: u32 = 4 << 20;

/// Serve one DEBUG ioctl on `dev`.
pub(crate) fn debug_ioctl(dev: &HlDevice, args: &mut HlDebugArgs) -> Result {
    if !dev.status().is_operational() {
        return Err(EBUSY);
    }
    match args.op {
        HL_DEBUG_OP_SET_MODE => set_debug_mode(dev, args.enable != 0),
        op @ HL_DEBUG_OP_ETR..=HL_DEBUG_OP_TIMESTAMP => {
            if !dev.state.lock().in_debug {
                return Err(EFAULT);
            }
            if op != HL_DEBUG_OP_TIMESTAMP {
                return Err(EOPNOTSUPP);
            }
            // TIMESTAMP's input is 0 bytes (`hl_debug_struct_size`): nothing read.
            args.input_size = 0;
            zero_output(args)
        }
        _ => Err(EINVAL),
    }
}

/// `hl_device_set_debug_mode`. O(1).
fn set_debug_mode(dev: &HlDevice, enable: bool) -> Result {
    let mut st = dev.state.lock();
    if st.in_debug == enable {
        return Err(EFAULT);
    }
    st.in_debug = enable;
    Ok(())
}

/// Copy `output_size` zero bytes to `output_ptr` (both given), as upstream
/// copies its zeroed output buffer back. O(output_size).
fn zero_output(args: &HlDebugArgs) -> Result {
    if args.output_ptr == 0 || args.output_size == 0 {
        return Ok(());
    }
    if args.output_size > OUTPUT_MAX {
        return Err(ENOMEM);
    }
    const ZEROS: [u8; 4096] = [0; 4096];
    let addr = usize::try_from(args.output_ptr).map_err(|_| EFAULT)?;
    let mut w = UserSlice::new(UserPtr::from_addr(addr), args.output_size as usize).writer();
    let mut left = args.output_size as usize;
    while left > 0 {
        let n = left.min(ZEROS.len());
        w.write_slice(ZEROS.get(..n).ok_or(EINVAL)?)?;
        left -= n;
    }
    Ok(())
}
