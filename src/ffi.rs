// SPDX-License-Identifier: GPL-2.0

//! Safe wrappers of the kernel C APIs the `kernel` crate lacks: leaves that
//! import nothing of the project (floor 2). Their `unsafe` stays here.
//!
//! - [`clock`]: the monotonic clock in nanoseconds.
//! - [`debugfs`]: debugfs directories and files rendered once per open, with
//!   writes parsed by a safe callback.
//! - [`eventfd`]: an eventfd a process registered, signalled on device events.
//! - [`dma`]: the importer side of a dma-buf attachment and the sg table
//!   DMA-mapped for it.
//! - [`dma_pages`]: the host pages a simulated device may reach by DMA (its
//!   IOMMU's map), each holding a page reference.
//! - [`drm_mm`] (KUnit builds only): the kernel's `drm_mm` range allocator
//!   behind a safe type, for the VA allocator benchmark.
//! - [`host_page`]: a counted reference to a host page.
//! - [`kthread`]: kernel threads in their creator's cgroups (the engines'
//!   workers), and the run-time cap `cs_max_run_s` (`ffi/engines.c`).
//! - [`memcg`]: a reference to a memory cgroup and the scope that charges
//!   allocations to it.
//! - [`pci`] (with `CONFIG_PCI`): a PCI function enabled for the driver and
//!   disabled again when dropped.
//! - [`pci_dma`] (with `CONFIG_PCI`): host pages DMA-mapped for a bound PCI
//!   function with the DMA API, unmapped at the latest when it is unbound.
//! - [`pin`]: pinning of user pages (`pin_user_pages_fast`) and their
//!   accounting against `RLIMIT_MEMLOCK`.
//! - [`register_page`]: contiguous zeroed memory standing for a window of
//!   device registers, for `remap_pfn_range`.
//! - [`sched`]: `cond_resched` and `fatal_signal_pending` for long loops.
//! - [`vmalloc`]: the physical pages behind vmalloc memory.
//! - [`workqueue`]: whether the current task is alone on its CPU (polls).
//! - [`zeroable`]: the model core's sync manager made in place, zeroed
//!   (its idle state).
//!
//! `ffi/helpers.c` (prototypes in `ffi/helpers.h`) wraps the static inlines
//! these and the shell need (`page_to_phys`, `totalram_pages`,
//! `pfn_to_page`, `fatal_signal_pending`, `access_ok`, `virt_to_pfn`, `get_page`,
//! `put_page`, `page_count`, `sg_page`, `dma_get_max_seg_size`,
//! `dma_mapping_error`,
//! `cond_resched`, `get_mem_cgroup_from_mm`, `mem_cgroup_put`,
//! `set_active_memcg`); `ffi/engines.c` (prototypes in `ffi/engines.h`) the
//! engines' threads and the `cs_max_run_s` parameter.

pub(crate) mod clock;
#[cfg(CONFIG_PCI)]
pub(crate) mod cpu_dma;
pub(crate) mod debugfs;
pub(crate) mod dma;
pub(crate) mod dma_pages;
#[cfg(CONFIG_KUNIT)]
pub(crate) mod drm_mm;
pub(crate) mod eventfd;
pub(crate) mod host_page;
pub(crate) mod irq;
pub(crate) mod kthread;
pub(crate) mod memcg;
#[cfg(CONFIG_PCI)]
pub(crate) mod pci;
#[cfg(CONFIG_PCI)]
pub(crate) mod pci_dma;
pub(crate) mod pin;
pub(crate) mod register_page;
pub(crate) mod sched;
pub(crate) mod vmalloc;
pub(crate) mod workqueue;
pub(crate) mod zeroable;
