// SPDX-License-Identifier: GPL-2.0

//! The edge to C: every raw FFI call of the module lives below this module.
//!
//! - [`accel`]: accel + control node registration, file operations, ioctl
//!   entry points, sysfs attributes, the `AsBytes`/`FromBytes` impls of the
//!   uAPI structs.
//! - [`debugfs`]: the debugfs directories and files, rendered once per open.
//! - [`dmabuf`]: dma-buf export of device memory (EXPORT_DMABUF_FD) and its
//!   callbacks, plus a test importer for KUnit.
//! - [`host_page`]: a counted reference to a host page, the backing of
//!   simulated DRAM that dma-buf importers and CPU mappings of exports get.
//! - [`drm_mm`]: the kernel's `drm_mm` range allocator behind a safe type, for
//!   the VA allocator benchmark.
//! - [`mmap`]: `mmap` of the compute node (HW blocks, timestamp buffers),
//!   its vm operations, and the register memory user mappings reach.
//! - [`pin`]: pinning of user pages for host mappings.
//! - [`sched`]: `cond_resched` and `fatal_signal_pending` for long loops.
//!
//! `ffi/helpers.c` (prototypes in `ffi/helpers.h`) wraps the static inlines
//! these need (`page_to_phys`, `totalram_pages`, `fatal_signal_pending`,
//! `access_ok`, `virt_to_pfn`, `get_page`, `put_page`, `page_count`,
//! `sg_page`, `dma_get_max_seg_size`, `cond_resched`).

pub(crate) mod accel;
pub(crate) mod debugfs;
pub(crate) mod dmabuf;
pub(crate) mod drm_mm;
pub(crate) mod host_page;
pub(crate) mod mmap;
pub(crate) mod pin;
pub(crate) mod sched;
