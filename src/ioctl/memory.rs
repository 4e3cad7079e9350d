// SPDX-License-Identifier: GPL-2.0

//! `DRM_IOCTL_HL_MEMORY` (upstream `hl_mem_ioctl`, common/memory.c:2194-2313).
//!
//! What each op writes back follows upstream (DRM copies the union back even
//! when the op fails): ALLOC zeroes the union and sets `out.handle` (0 on
//! failure); MAP zeroes it and sets `out.device_virt_addr` (0 on failure); FREE
//! and UNMAP write nothing; MAP_BLOCK sets `out.block_handle` and
//! `out.block_size` (0 and 0 on failure) and nothing else; TS_ALLOC sets
//! `out.handle` on success only.

use crate::{
    file::ComputeFile,
    uapi::*,
    vm::{
        device_memory::{alloc_device_memory, free_device_memory},
        dmabuf::{prepare_export, DmabufExport},
        hw_block::map_block,
        mapping::{map_device_va, map_host_va, unmap_device_va},
        ts_buffer::ts_alloc,
    },
};
use kernel::prelude::*;

/// What turns a prepared export into a dma-buf and its fd: the shell's
/// dma-buf glue (`shell::dmabuf`), which this floor does not import.
pub(crate) trait DmabufExporter {
    /// Export `export` as a dma-buf with file flags `flags` and install an fd
    /// for it; on failure the export is dropped (nothing stays exported).
    fn export_fd(&self, export: KBox<DmabufExport>, flags: u32) -> Result<i32>;
}

/// Serve one MEMORY ioctl for a compute file. `exporter` makes the dma-buf
/// of an EXPORT_DMABUF_FD (the shell's, holding the compute node's `struct
/// file`; KUnit's holds none).
pub(crate) fn memory_ioctl(
    file: &ComputeFile,
    args: &mut HlMemArgs,
    exporter: &dyn DmabufExporter,
) -> Result {
    let ctx = &file.ctx;
    if !ctx.device().status().is_operational() {
        return Err(EBUSY);
    }
    match args.op {
        HL_MEM_OP_ALLOC => {
            let size = args.alloc_mem_size();
            let flags = args.flags;
            let rc = alloc_device_memory(ctx.vm(), size, flags);
            args.set_out_u64_zeroed(rc.as_ref().map_or(0, |&h| u64::from(h)));
            rc.map(|_| ())
        }
        HL_MEM_OP_FREE => free_device_memory(ctx.vm(), args.free_handle()),
        HL_MEM_OP_MAP => {
            let flags = args.flags;
            let rc = if flags & HL_MEM_USERPTR != 0 {
                map_host_va(
                    ctx.vm(),
                    args.map_host_virt_addr(),
                    args.map_host_mem_size(),
                    args.map_host_hint_addr(),
                    flags,
                )
            } else {
                map_device_va(
                    ctx.vm(),
                    args.map_device_handle(),
                    args.map_device_hint_addr(),
                    flags,
                )
            };
            args.set_out_u64_zeroed(*rc.as_ref().unwrap_or(&0));
            rc.map(|_| ())
        }
        HL_MEM_OP_UNMAP => unmap_device_va(ctx.vm(), args.unmap_device_virt_addr()),
        HL_MEM_OP_MAP_BLOCK => {
            let rc = map_block(args.map_block_addr());
            let (handle, size) = *rc.as_ref().unwrap_or(&(0, 0));
            args.set_out_block(handle, size);
            rc.map(|_| ())
        }
        HL_MEM_OP_TS_ALLOC => {
            let handle = ts_alloc(&ctx.vm().ts_buffers, args.num_of_elements)?;
            args.set_out_u64(handle);
            Ok(())
        }
        HL_MEM_OP_EXPORT_DMABUF_FD => {
            let flags = args.flags;
            let rc = prepare_export(
                ctx.vm(),
                ctx.clone(),
                args.export_addr(),
                args.export_mem_size(),
                args.export_offset(),
                flags,
            )
            .and_then(|e| exporter.export_fd(e, flags));
            // As upstream: the union is zeroed and `out.fd` is -EBADF on failure.
            args.set_out_fd_zeroed(*rc.as_ref().unwrap_or(&EBADF.to_errno()));
            rc.map(|_| ())
        }
        _ => Err(EINVAL),
    }
}

#[kunit_tests(hlrs_memory_ioctl)]
mod tests {
    use super::*;
    use crate::{asic::AsicProperties, context::Context, device::HlDevice};

    /// An exporter for the suite, which exports nothing.
    struct NoExport;

    impl DmabufExporter for NoExport {
        fn export_fd(&self, _export: KBox<DmabufExport>, _flags: u32) -> Result<i32> {
            Err(EOPNOTSUPP)
        }
    }
    use kernel::sync::Arc;

    const PAGE: u64 = 0x3000_0000;

    fn setup(index: u32) -> Result<(Arc<HlDevice>, Context)> {
        let d = HlDevice::new(index, AsicProperties::gaudi2(6, 0)?)?;
        let ctx = Context::new(d.clone(), 1)?;
        Ok((d, ctx))
    }

    #[test]
    fn ioctl_writes_the_union_back_as_upstream() -> Result {
        let (d, ctx) = setup(0)?;
        let file = ComputeFile {
            ctx: Arc::new(ctx, GFP_KERNEL)?,
        };
        // ALLOC zeroes the union and sets the handle; page_size is ignored.
        for page_size in [0u64, 3, 4096, 1 << 40] {
            let mut a = HlMemArgs {
                arg0: 1,
                arg1: page_size,
                arg2: 9,
                op: HL_MEM_OP_ALLOC,
                flags: 0,
                ctx_id: 5,
                num_of_elements: 7,
            };
            memory_ioctl(&file, &mut a, &NoExport)?;
            assert!(a.out_u64() >= 1);
            assert_eq!((a.arg1, a.arg2, a.op, a.ctx_id), (0, 0, 0, 0));
        }
        assert_eq!(d.vm.dram_used(), 4 * PAGE);
        // A failed ALLOC leaves handle 0.
        let mut a = HlMemArgs {
            arg0: 0,
            arg1: 5,
            op: HL_MEM_OP_ALLOC,
            ..Default::default()
        };
        assert_eq!(memory_ioctl(&file, &mut a, &NoExport), Err(EINVAL));
        assert_eq!(a, HlMemArgs::default());
        // FREE writes nothing back.
        let mut f = HlMemArgs {
            arg0: 2,
            arg1: 77,
            op: HL_MEM_OP_FREE,
            ..Default::default()
        };
        let before = f;
        memory_ioctl(&file, &mut f, &NoExport)?;
        assert_eq!(f, before);
        // Unknown op, and the device not operational.
        let mut u = HlMemArgs {
            op: 7,
            ..Default::default()
        };
        assert_eq!(memory_ioctl(&file, &mut u, &NoExport), Err(EINVAL));
        d.sim()?
            .set_status(crate::hw::backend::DeviceStatus::NeedsReset);
        let mut a = HlMemArgs {
            arg0: 1,
            op: HL_MEM_OP_ALLOC,
            ..Default::default()
        };
        assert_eq!(memory_ioctl(&file, &mut a, &NoExport), Err(EBUSY));
        assert_eq!(d.vm.dram_used(), 3 * PAGE);
        Ok(())
    }
}
