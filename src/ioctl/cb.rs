// SPDX-License-Identifier: GPL-2.0

//! `DRM_IOCTL_HL_CB` (upstream `hl_cb_ioctl`, common/command_buffer.c:364-426).
//!
//! What each op writes back follows upstream (DRM copies the union back even
//! when the op fails): CREATE zeroes the union and sets `out.cb_handle` (0 on
//! failure); INFO zeroes `out` and sets `out.usage_cnt` on success only;
//! DESTROY writes nothing.

use crate::{
    file::ComputeFile,
    uapi::*,
    vm::{
        command_buffer::{cb_create, cb_create_unpublished, cb_destroy, cb_info, cb_withdraw},
        context_vm::ContextVm,
        mapping::{map_cb_va, unmap_cb_va},
    },
};
use kernel::prelude::*;

/// Serve one CB ioctl for a compute file: `EBUSY` unless the device is
/// operational, `EINVAL` for an unknown op. O(size) for CREATE, O(log n)
/// for the others (n: the file's CBs).
pub(crate) fn cb_ioctl(file: &ComputeFile, args: &mut HlCbArgs) -> Result {
    let ctx = &file.ctx;
    if !ctx.device().status().is_operational() {
        return Err(EBUSY);
    }
    let table = &ctx.vm().cbs;
    match args.op {
        HL_CB_OP_CREATE => {
            let rc = create(ctx.vm(), args.cb_size, args.flags & HL_CB_FLAGS_MAP != 0);
            *args = HlCbArgs {
                cb_handle: *rc.as_ref().unwrap_or(&0),
                ..Default::default()
            };
            rc.map(|_| ())
        }
        HL_CB_OP_DESTROY => destroy(ctx.vm(), args.cb_handle),
        HL_CB_OP_INFO => {
            let va = args.flags & HL_CB_FLAGS_GET_DEVICE_VA != 0;
            let n = cb_info(table, args.cb_handle, va)?;
            if va {
                args.cb_handle = n;
            } else {
                args.set_out_usage_cnt(n as u32);
            }
            Ok(())
        }
        _ => Err(EINVAL),
    }
}

/// CREATE, and with `map` the mapping into the device MMU: the CB is
/// published (DESTROY and INFO find its handle) only once it is mapped, so
/// that a DESTROY of the new handle cannot come between and leave the
/// mapping behind; a CB whose mapping fails is withdrawn. O(size + log n).
fn create(vm: &ContextVm, size: u32, map: bool) -> Result<u64> {
    if !map {
        return cb_create(&vm.cbs, size);
    }
    let (h, cb) = cb_create_unpublished(&vm.cbs, size)?;
    match map_cb_va(vm, &cb) {
        Ok(_) => {
            cb.publish();
            Ok(h)
        }
        Err(e) => {
            drop(cb_withdraw(&vm.cbs, h));
            Err(e)
        }
    }
}

/// DESTROY, and the unmap of a mapped CB. The handle is gone either way:
/// an unmap whose invalidation fails leaves the mapping (and the CB it
/// holds) quarantined until one succeeds, and DESTROY still succeeds, as
/// upstream's release ignores it. O(log n + pages).
fn destroy(vm: &ContextVm, handle: u64) -> Result {
    let cb = cb_destroy(&vm.cbs, handle)?;
    let _ = unmap_cb_va(vm, &cb);
    Ok(())
}

#[kunit_tests(hlrs_cb_ioctl)]
mod tests {
    use super::*;
    use crate::vm::command_buffer::live_cbs;
    use crate::{asic::AsicProperties, context::Context, device::HlDevice};
    use kernel::sync::Arc;

    fn file(index: u32) -> Result<(Arc<HlDevice>, ComputeFile)> {
        let d = HlDevice::new(index, AsicProperties::gaudi2(6, 0)?)?;
        let ctx = Context::new(d.clone(), 1)?;
        let file = ComputeFile {
            ctx: Arc::new(ctx, GFP_KERNEL)?,
        };
        Ok((d, file))
    }

    fn args(op: u32, handle: u64, size: u32, flags: u32) -> HlCbArgs {
        HlCbArgs {
            cb_handle: handle,
            op,
            cb_size: size,
            ctx_id: 9,
            flags,
        }
    }

    #[test]
    fn ioctl_writes_the_union_back_as_upstream() -> Result {
        let live0 = live_cbs();
        let (d, file) = file(0)?;
        let mut a = args(HL_CB_OP_CREATE, 77, 5000, 0);
        cb_ioctl(&file, &mut a)?;
        let h = a.cb_handle;
        assert_eq!(h, mmap_handle(1, HL_MMAP_TYPE_CB));
        assert_eq!((a.op, a.cb_size, a.ctx_id, a.flags), (0, 0, 0, 0));
        // A failed CREATE leaves handle 0 and the rest zeroed.
        for (size, flags) in [(HL_MAX_CB_SIZE + 1, 0), (u32::MAX, HL_CB_FLAGS_MAP)] {
            let mut a = args(HL_CB_OP_CREATE, 77, size, flags);
            assert_eq!(cb_ioctl(&file, &mut a), Err(EINVAL));
            assert_eq!(a, HlCbArgs::default());
        }
        // INFO: usage count 0 with pad zeroed; the device VA of an unmapped
        // CB is EINVAL and writes nothing.
        let mut i = args(HL_CB_OP_INFO, h, 3, 0);
        cb_ioctl(&file, &mut i)?;
        assert_eq!((i.cb_handle, i.op, i.cb_size), (0, HL_CB_OP_INFO, 3));
        let mut i = args(HL_CB_OP_INFO, h, 3, HL_CB_FLAGS_GET_DEVICE_VA);
        let before = i;
        assert_eq!(cb_ioctl(&file, &mut i), Err(EINVAL));
        assert_eq!(i, before);
        // DESTROY writes nothing, once.
        let mut x = args(HL_CB_OP_DESTROY, h, 0, 0);
        cb_ioctl(&file, &mut x)?;
        assert_eq!(x, args(HL_CB_OP_DESTROY, h, 0, 0));
        assert_eq!(cb_ioctl(&file, &mut x), Err(EINVAL));
        assert_eq!(cb_ioctl(&file, &mut args(3, h, 0, 0)), Err(EINVAL));
        // Closing the file with live CBs frees them.
        cb_ioctl(&file, &mut args(HL_CB_OP_CREATE, 0, HL_MAX_CB_SIZE, 0))?;
        cb_ioctl(&file, &mut args(HL_CB_OP_CREATE, 0, 1, 0))?;
        assert_eq!(live_cbs(), live0 + 2);
        d.sim()?
            .set_status(crate::hw::backend::DeviceStatus::NeedsReset);
        assert_eq!(
            cb_ioctl(&file, &mut args(HL_CB_OP_CREATE, 0, 1, 0)),
            Err(EBUSY)
        );
        drop(file);
        assert_eq!(live_cbs(), live0);
        Ok(())
    }
}
