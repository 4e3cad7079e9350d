// SPDX-License-Identifier: GPL-2.0

//! The userspace ABI of the Habana accel driver, `include/uapi/drm/habanalabs_accel.h`.
//!
//! This file is the one source of truth for both sides: the kernel module
//! includes it as `mod uapi`, and the userspace library includes the very same
//! file through `#[path]`. It therefore uses only `core`.
//!
//! Every struct is `#[repr(C)]` with the size and field offsets of the upstream
//! header (x86-64 and arm64), checked at compile time at the bottom of the file.
//! C unions whose members all live at fixed offsets are flattened into plain
//! fields with accessors named after the upstream members, so that neither side
//! reads a raw union.

use core::mem::{offset_of, size_of};

// --- ioctl numbers -------------------------------------------------------------------------------

/// The DRM ioctl type byte, `DRM_IOCTL_BASE` (`'d'`).
pub const DRM_IOCTL_BASE: u32 = b'd' as u32;
/// First driver-private DRM ioctl number, `DRM_COMMAND_BASE`.
pub const DRM_COMMAND_BASE: u32 = 0x40;

/// `_IOC_WRITE | _IOC_READ`, the direction bits of `_IOWR`.
const IOC_READ_WRITE: u32 = 3;

/// The `_IOWR('d', DRM_COMMAND_BASE + nr, size)` ioctl command word.
pub const fn drm_iowr(nr: u32, size: usize) -> u32 {
    (IOC_READ_WRITE << 30) | ((size as u32) << 16) | (DRM_IOCTL_BASE << 8) | (DRM_COMMAND_BASE + nr)
}

/// Direction bits (`_IOC_DIR`) of an ioctl command word.
pub const fn ioc_dir(cmd: u32) -> u32 {
    cmd >> 30
}
/// Type byte (`_IOC_TYPE`) of an ioctl command word.
pub const fn ioc_type(cmd: u32) -> u32 {
    (cmd >> 8) & 0xff
}
/// Number (`_IOC_NR`) of an ioctl command word.
pub const fn ioc_nr(cmd: u32) -> u32 {
    cmd & 0xff
}
/// Argument size (`_IOC_SIZE`) of an ioctl command word.
pub const fn ioc_size(cmd: u32) -> usize {
    ((cmd >> 16) & 0x3fff) as usize
}

/// `HL_IOCTL_INFO`: driver command number of the INFO ioctl.
pub const HL_IOCTL_INFO: u32 = 0x00;
/// `HL_IOCTL_CB`: command buffers (CREATE, DESTROY, INFO).
pub const HL_IOCTL_CB: u32 = 0x01;
/// `HL_IOCTL_CS`: command submission.
pub const HL_IOCTL_CS: u32 = 0x02;
/// `HL_IOCTL_WAIT_CS`: wait for a command submission.
pub const HL_IOCTL_WAIT_CS: u32 = 0x03;
/// `HL_IOCTL_MEMORY`: driver command number of the MEMORY ioctl.
pub const HL_IOCTL_MEMORY: u32 = 0x04;
/// `HL_IOCTL_DEBUG`: debug/profiling (not implemented by this driver).
pub const HL_IOCTL_DEBUG: u32 = 0x05;

/// `DRM_IOCTL_HL_INFO` = 0xC0186440.
pub const DRM_IOCTL_HL_INFO: u32 = drm_iowr(HL_IOCTL_INFO, size_of::<HlInfoArgs>());
/// `DRM_IOCTL_HL_MEMORY` = 0xC0286444.
pub const DRM_IOCTL_HL_MEMORY: u32 = drm_iowr(HL_IOCTL_MEMORY, size_of::<HlMemArgs>());
/// `DRM_IOCTL_HL_CB` = 0xC0186441 (`union hl_cb_args`, 24 bytes).
pub const DRM_IOCTL_HL_CB: u32 = drm_iowr(HL_IOCTL_CB, size_of::<HlCbArgs>());
/// `DRM_IOCTL_HL_CS` = 0xC0306442 (`union hl_cs_args`, 48 bytes).
pub const DRM_IOCTL_HL_CS: u32 = drm_iowr(HL_IOCTL_CS, size_of::<HlCsArgs>());
/// `DRM_IOCTL_HL_WAIT_CS` = 0xC0386443 (`union hl_wait_cs_args`, 56 bytes).
pub const DRM_IOCTL_HL_WAIT_CS: u32 = drm_iowr(HL_IOCTL_WAIT_CS, size_of::<HlWaitCsArgs>());
/// `DRM_IOCTL_HL_DEBUG` = 0xC0286445 (`struct hl_debug_args`, 40 bytes).
pub const DRM_IOCTL_HL_DEBUG: u32 = drm_iowr(HL_IOCTL_DEBUG, 40);

// --- device status, INFO op codes ----------------------------------------------------------------

/// `HL_DEVICE_STATUS_OPERATIONAL`.
pub const HL_DEVICE_STATUS_OPERATIONAL: u32 = 0;
/// `HL_DEVICE_STATUS_IN_RESET`.
pub const HL_DEVICE_STATUS_IN_RESET: u32 = 1;
/// `HL_DEVICE_STATUS_MALFUNCTION`.
pub const HL_DEVICE_STATUS_MALFUNCTION: u32 = 2;
/// `HL_DEVICE_STATUS_NEEDS_RESET`.
pub const HL_DEVICE_STATUS_NEEDS_RESET: u32 = 3;
/// `HL_DEVICE_STATUS_IN_DEVICE_CREATION`.
pub const HL_DEVICE_STATUS_IN_DEVICE_CREATION: u32 = 4;
/// `HL_DEVICE_STATUS_IN_RESET_AFTER_DEVICE_RELEASE`.
pub const HL_DEVICE_STATUS_IN_RESET_AFTER_DEVICE_RELEASE: u32 = 5;

/// `HL_SERVER_GAUDI2_HLS2`: the server type of an HLS2 box.
pub const HL_SERVER_GAUDI2_HLS2: u16 = 5;

/// INFO op: `struct hl_info_hw_ip_info`.
pub const HL_INFO_HW_IP_INFO: u32 = 0;
/// INFO op: per-event counters since the last reset (u32 array).
pub const HL_INFO_HW_EVENTS: u32 = 1;
/// INFO op: `struct hl_info_dram_usage`.
pub const HL_INFO_DRAM_USAGE: u32 = 2;
/// INFO op: `struct hl_info_hw_idle`.
pub const HL_INFO_HW_IDLE: u32 = 3;
/// INFO op: `struct hl_info_device_status`.
pub const HL_INFO_DEVICE_STATUS: u32 = 4;
/// INFO op: `struct hl_info_device_utilization`.
pub const HL_INFO_DEVICE_UTILIZATION: u32 = 6;
/// INFO op: per-event counters since load (u32 array).
pub const HL_INFO_HW_EVENTS_AGGREGATE: u32 = 7;
/// INFO op: `struct hl_info_clk_rate`.
pub const HL_INFO_CLK_RATE: u32 = 8;
/// INFO op: `struct hl_info_reset_count`.
pub const HL_INFO_RESET_COUNT: u32 = 9;
/// INFO op: `struct hl_info_time_sync`.
pub const HL_INFO_TIME_SYNC: u32 = 10;
/// INFO op: `struct hl_info_cs_counters`.
pub const HL_INFO_CS_COUNTERS: u32 = 11;
/// INFO op: `struct hl_info_pci_counters`.
pub const HL_INFO_PCI_COUNTERS: u32 = 12;
/// INFO op: `struct hl_info_clk_throttle`.
pub const HL_INFO_CLK_THROTTLE_REASON: u32 = 13;
/// INFO op: `struct hl_info_sync_manager` for `dcore_id`.
pub const HL_INFO_SYNC_MANAGER: u32 = 14;
/// INFO op: `struct hl_info_energy`.
pub const HL_INFO_TOTAL_ENERGY: u32 = 15;
/// INFO op: `struct hl_pll_frequency_info` for `pll_index`.
pub const HL_INFO_PLL_FREQUENCY: u32 = 16;
/// INFO op: `struct hl_power_info`.
pub const HL_INFO_POWER: u32 = 17;
/// INFO op: `struct hl_open_stats_info`.
pub const HL_INFO_OPEN_STATS: u32 = 18;
/// INFO op: firmware `cpucp_hbm_row_info`.
pub const HL_INFO_DRAM_REPLACED_ROWS: u32 = 21;
/// INFO op: number of pending DRAM row replacements (u32).
pub const HL_INFO_DRAM_PENDING_ROWS: u32 = 22;
/// INFO op: `struct hl_info_last_err_open_dev_time`.
pub const HL_INFO_LAST_ERR_OPEN_DEV_TIME: u32 = 23;
/// INFO op: `struct hl_info_cs_timeout_event`.
pub const HL_INFO_CS_TIMEOUT_EVENT: u32 = 24;
/// INFO op: `struct hl_info_razwi_event`.
pub const HL_INFO_RAZWI_EVENT: u32 = 25;
/// INFO op: `struct hl_info_dev_memalloc_page_sizes`.
pub const HL_INFO_DEV_MEM_ALLOC_PAGE_SIZES: u32 = 26;
/// INFO op: `struct hl_info_sec_attest`.
pub const HL_INFO_SECURED_ATTESTATION: u32 = 27;
/// INFO op: register an eventfd for device notifications.
pub const HL_INFO_REGISTER_EVENTFD: u32 = 28;
/// INFO op: unregister the eventfd.
pub const HL_INFO_UNREGISTER_EVENTFD: u32 = 29;
/// INFO op: u64 mask of notifier events, cleared on read.
pub const HL_INFO_GET_EVENTS: u32 = 30;
/// INFO op: `struct hl_info_undefined_opcode_event`.
pub const HL_INFO_UNDEFINED_OPCODE_EVENT: u32 = 31;
/// INFO op: engine status text.
pub const HL_INFO_ENGINE_STATUS: u32 = 32;
/// INFO op: `struct hl_page_fault_info`.
pub const HL_INFO_PAGE_FAULT_EVENT: u32 = 33;
/// INFO op: array of `struct hl_user_mapping` captured at the last page fault.
pub const HL_INFO_USER_MAPPINGS: u32 = 34;
/// INFO op: generic firmware request.
pub const HL_INFO_FW_GENERIC_REQ: u32 = 35;
/// INFO op: `struct hl_info_hw_err_event`.
pub const HL_INFO_HW_ERR_EVENT: u32 = 36;
/// INFO op: `struct hl_info_fw_err_event`.
pub const HL_INFO_FW_ERR_EVENT: u32 = 37;
/// INFO op: `struct hl_info_engine_err_event`.
pub const HL_INFO_USER_ENGINE_ERR_EVENT: u32 = 38;
/// INFO op: `struct hl_info_signed`.
pub const HL_INFO_DEV_SIGNED: u32 = 40;

/// `HL_INFO_VERSION_MAX_LEN`.
pub const HL_INFO_VERSION_MAX_LEN: usize = 128;
/// `HL_INFO_CARD_NAME_MAX_LEN`.
pub const HL_INFO_CARD_NAME_MAX_LEN: usize = 16;
/// `HL_BUSY_ENGINES_MASK_EXT_SIZE`.
pub const HL_BUSY_ENGINES_MASK_EXT_SIZE: usize = 4;
/// `HL_MAX_DCORES` (driver-internal, bounds `dcore_id` of SYNC_MANAGER).
pub const HL_MAX_DCORES: u32 = 8;
/// `HL_CLK_THROTTLE_TYPE_MAX`.
pub const HL_CLK_THROTTLE_TYPE_MAX: usize = 2;
/// `HL_PLL_NUM_OUTPUTS`.
pub const HL_PLL_NUM_OUTPUTS: usize = 4;
/// `HL_RAZWI_MAX_NUM_OF_ENGINES_PER_RTR`.
pub const HL_RAZWI_MAX_NUM_OF_ENGINES_PER_RTR: usize = 128;
/// `MAX_QMAN_STREAMS_INFO`.
pub const MAX_QMAN_STREAMS_INFO: usize = 4;
/// `OPCODE_INFO_MAX_ADDR_SIZE`.
pub const OPCODE_INFO_MAX_ADDR_SIZE: usize = 8;

// --- MEMORY op codes and flags -------------------------------------------------------------------

/// MEMORY op: allocate device memory, returns a handle.
pub const HL_MEM_OP_ALLOC: u32 = 0;
/// MEMORY op: free device memory by handle.
pub const HL_MEM_OP_FREE: u32 = 1;
/// MEMORY op: map a handle (or, with `HL_MEM_USERPTR`, host memory) into the device VA space.
pub const HL_MEM_OP_MAP: u32 = 2;
/// MEMORY op: unmap a device VA.
pub const HL_MEM_OP_UNMAP: u32 = 3;
/// MEMORY op: get an mmap handle for a HW block.
pub const HL_MEM_OP_MAP_BLOCK: u32 = 4;
/// MEMORY op: export device memory as a dma-buf fd.
pub const HL_MEM_OP_EXPORT_DMABUF_FD: u32 = 5;
/// MEMORY op: allocate a timestamp buffer.
pub const HL_MEM_OP_TS_ALLOC: u32 = 6;

// --- mmap offsets (handles of MAP_BLOCK and TS_ALLOC) -------------------------------------------
//
// Not in the uAPI header but part of the ABI: libhlthunk passes the handles
// MAP_BLOCK and TS_ALLOC return as the `offset` of `mmap` on the compute fd.
// The type lives in byte-offset bits 63..59 (common/habanalabs.h:51-58).

/// Page shift the handles are built with (4 KiB pages, as on x86-64).
pub const HL_MMAP_PAGE_SHIFT: u32 = 12;
/// `HL_MMAP_TYPE_SHIFT`: the type field's shift in page units (`vm_pgoff`).
pub const HL_MMAP_TYPE_SHIFT: u32 = 59 - HL_MMAP_PAGE_SHIFT;
/// `HL_MMAP_TYPE_MASK`, in page units.
pub const HL_MMAP_TYPE_MASK: u64 = 0x1f << HL_MMAP_TYPE_SHIFT;
/// `HL_MMAP_TYPE_TS_BUFF`, in page units: a timestamp buffer.
pub const HL_MMAP_TYPE_TS_BUFF: u64 = 0x10 << HL_MMAP_TYPE_SHIFT;
/// `HL_MMAP_TYPE_BLOCK`, in page units: a HW block.
pub const HL_MMAP_TYPE_BLOCK: u64 = 0x4 << HL_MMAP_TYPE_SHIFT;
/// `HL_MMAP_TYPE_CB`, in page units: a command buffer.
pub const HL_MMAP_TYPE_CB: u64 = 0x2 << HL_MMAP_TYPE_SHIFT;
/// `HL_MMAP_OFFSET_VALUE_MASK`, in page units.
pub const HL_MMAP_OFFSET_VALUE_MASK: u64 = 0x1FFF_FFFF_FFFF >> HL_MMAP_PAGE_SHIFT;

/// The mmap offset (bytes) of an object: `(value | type) << PAGE_SHIFT`.
pub const fn mmap_handle(value: u64, kind: u64) -> u64 {
    ((value & HL_MMAP_OFFSET_VALUE_MASK) | kind) << HL_MMAP_PAGE_SHIFT
}

/// The type bits of an mmap page offset (`vm_pgoff`).
pub const fn mmap_type(pgoff: u64) -> u64 {
    pgoff & HL_MMAP_TYPE_MASK
}

/// The value (block id, or buffer id in its low 32 bits) of an mmap page offset.
pub const fn mmap_value(pgoff: u64) -> u64 {
    pgoff & HL_MMAP_OFFSET_VALUE_MASK
}

/// Allocate physically contiguous device memory.
pub const HL_MEM_CONTIGUOUS: u32 = 0x1;
/// Allow other contexts to map the allocation.
pub const HL_MEM_SHARED: u32 = 0x2;
/// MAP host memory (`map_host`) instead of a device handle.
pub const HL_MEM_USERPTR: u32 = 0x4;
/// Fail MAP unless the hint address can be honoured.
pub const HL_MEM_FORCE_HINT: u32 = 0x8;
/// Prefetch the MMU translations after MAP.
pub const HL_MEM_PREFETCH: u32 = 0x40;
/// Every flag bit defined by the uAPI.
pub const HL_MEM_FLAGS_ALL: u32 =
    HL_MEM_CONTIGUOUS | HL_MEM_SHARED | HL_MEM_USERPTR | HL_MEM_FORCE_HINT | HL_MEM_PREFETCH;

/// CB op: create a command buffer.
pub const HL_CB_OP_CREATE: u32 = 0;
/// CB op: destroy a command buffer's handle.
pub const HL_CB_OP_DESTROY: u32 = 1;
/// CB op: a command buffer's usage count or device VA.
pub const HL_CB_OP_INFO: u32 = 2;
/// `HL_MAX_CB_SIZE`: 2 MiB minus 32 bytes (room for two `MSG_PROT` packets).
pub const HL_MAX_CB_SIZE: u32 = 0x20_0000 - 32;
/// CREATE: map the CB into the device MMU (the context's host VA range).
pub const HL_CB_FLAGS_MAP: u32 = 0x1;
/// INFO: return the device VA of a mapped CB instead of its usage count.
pub const HL_CB_FLAGS_GET_DEVICE_VA: u32 = 0x2;

/// `TS_MAX_ELEMENTS_NUM`: maximum elements of one timestamp buffer.
pub const TS_MAX_ELEMENTS_NUM: u32 = 1 << 20;

// --- command submission (CS, WAIT_CS) ------------------------------------------------------------

/// `HL_CS_CHUNK_FLAGS_USER_ALLOC_CB`: `cb_handle` is a device address (a user
/// CB), not a CB handle; the only kind Gaudi2's queues take.
pub const HL_CS_CHUNK_FLAGS_USER_ALLOC_CB: u32 = 0x1;
/// `HL_CS_FLAGS_FORCE_RESTORE`: run the restore chunks first, as their own CS.
pub const HL_CS_FLAGS_FORCE_RESTORE: u32 = 0x1;
/// `HL_CS_FLAGS_SIGNAL`: a signal CS (sync stream).
pub const HL_CS_FLAGS_SIGNAL: u32 = 0x2;
/// `HL_CS_FLAGS_WAIT`: a wait CS (sync stream).
pub const HL_CS_FLAGS_WAIT: u32 = 0x4;
/// `HL_CS_FLAGS_COLLECTIVE_WAIT`: a collective wait CS (sync stream).
pub const HL_CS_FLAGS_COLLECTIVE_WAIT: u32 = 0x8;
/// `HL_CS_FLAGS_TIMESTAMP`: record the completion time for WAIT_CS.
pub const HL_CS_FLAGS_TIMESTAMP: u32 = 0x20;
/// `HL_CS_FLAGS_STAGED_SUBMISSION`.
pub const HL_CS_FLAGS_STAGED_SUBMISSION: u32 = 0x40;
/// `HL_CS_FLAGS_STAGED_SUBMISSION_FIRST`.
pub const HL_CS_FLAGS_STAGED_SUBMISSION_FIRST: u32 = 0x80;
/// `HL_CS_FLAGS_STAGED_SUBMISSION_LAST`.
pub const HL_CS_FLAGS_STAGED_SUBMISSION_LAST: u32 = 0x100;
/// `HL_CS_FLAGS_CUSTOM_TIMEOUT`: `timeout` (seconds) replaces the device's.
pub const HL_CS_FLAGS_CUSTOM_TIMEOUT: u32 = 0x200;
/// `HL_CS_FLAGS_SKIP_RESET_ON_TIMEOUT`.
pub const HL_CS_FLAGS_SKIP_RESET_ON_TIMEOUT: u32 = 0x400;
/// `HL_CS_FLAGS_ENCAP_SIGNALS`.
pub const HL_CS_FLAGS_ENCAP_SIGNALS: u32 = 0x800;
/// `HL_CS_FLAGS_RESERVE_SIGNALS_ONLY`.
pub const HL_CS_FLAGS_RESERVE_SIGNALS_ONLY: u32 = 0x1000;
/// `HL_CS_FLAGS_UNRESERVE_SIGNALS_ONLY`.
pub const HL_CS_FLAGS_UNRESERVE_SIGNALS_ONLY: u32 = 0x2000;
/// `HL_CS_FLAGS_ENGINE_CORE_COMMAND`.
pub const HL_CS_FLAGS_ENGINE_CORE_COMMAND: u32 = 0x4000;
/// `HL_CS_FLAGS_FLUSH_PCI_HBW_WRITES`.
pub const HL_CS_FLAGS_FLUSH_PCI_HBW_WRITES: u32 = 0x8000;
/// `HL_CS_FLAGS_ENGINES_COMMAND`.
pub const HL_CS_FLAGS_ENGINES_COMMAND: u32 = 0x1_0000;
/// The CS type bits, mutually exclusive (`HL_CS_FLAGS_TYPE_MASK`,
/// common/command_submission.c:14).
pub const HL_CS_FLAGS_TYPE_MASK: u32 = HL_CS_FLAGS_SIGNAL
    | HL_CS_FLAGS_WAIT
    | HL_CS_FLAGS_COLLECTIVE_WAIT
    | HL_CS_FLAGS_RESERVE_SIGNALS_ONLY
    | HL_CS_FLAGS_UNRESERVE_SIGNALS_ONLY
    | HL_CS_FLAGS_ENGINE_CORE_COMMAND
    | HL_CS_FLAGS_ENGINES_COMMAND
    | HL_CS_FLAGS_FLUSH_PCI_HBW_WRITES;
/// `HL_CS_STATUS_SUCCESS`.
pub const HL_CS_STATUS_SUCCESS: u32 = 0;
/// `HL_MAX_JOBS_PER_CS`: most chunks in one phase of a CS.
pub const HL_MAX_JOBS_PER_CS: u32 = 512;

/// `HL_WAIT_CS_FLAGS_INTERRUPT`: wait for a user interrupt.
pub const HL_WAIT_CS_FLAGS_INTERRUPT: u32 = 0x2;
/// `HL_WAIT_CS_FLAGS_INTERRUPT_MASK`: the interrupt id (bits 31:20).
pub const HL_WAIT_CS_FLAGS_INTERRUPT_MASK: u32 = 0xFFF0_0000;
/// `HL_WAIT_CS_FLAGS_INTERRUPT_KERNEL_CQ`: the counter is in a CB.
pub const HL_WAIT_CS_FLAGS_INTERRUPT_KERNEL_CQ: u32 = 0x10;
/// `HL_WAIT_CS_FLAGS_REGISTER_INTERRUPT`: register a timestamp instead.
pub const HL_WAIT_CS_FLAGS_REGISTER_INTERRUPT: u32 = 0x20;
/// `HL_WAIT_CS_FLAGS_MULTI_CS`: wait for any of several CSs.
pub const HL_WAIT_CS_FLAGS_MULTI_CS: u32 = 0x4;
/// `HL_WAIT_CS_STATUS_COMPLETED`.
pub const HL_WAIT_CS_STATUS_COMPLETED: u32 = 0;
/// `HL_WAIT_CS_STATUS_BUSY`: still running (the wait timed out).
pub const HL_WAIT_CS_STATUS_BUSY: u32 = 1;
/// `HL_WAIT_CS_STATUS_TIMEDOUT`: the CS ran past its timeout.
pub const HL_WAIT_CS_STATUS_TIMEDOUT: u32 = 2;
/// `HL_WAIT_CS_STATUS_ABORTED`: the CS was aborted (an engine error).
pub const HL_WAIT_CS_STATUS_ABORTED: u32 = 3;
/// `HL_WAIT_CS_STATUS_FLAG_GONE`: the CS is too old to be tracked.
pub const HL_WAIT_CS_STATUS_FLAG_GONE: u32 = 0x1;
/// `HL_WAIT_CS_STATUS_FLAG_TIMESTAMP_VLD`: `timestamp_nsec` is valid.
pub const HL_WAIT_CS_STATUS_FLAG_TIMESTAMP_VLD: u32 = 0x2;

/// `HL_NOTIFIER_EVENT_UNDEFINED_OPCODE` (a bit of HL_INFO_GET_EVENTS).
pub const HL_NOTIFIER_EVENT_UNDEFINED_OPCODE: u64 = 1 << 1;
/// `HL_NOTIFIER_EVENT_DEVICE_RESET`.
pub const HL_NOTIFIER_EVENT_DEVICE_RESET: u64 = 1 << 2;
/// `HL_NOTIFIER_EVENT_CS_TIMEOUT`.
pub const HL_NOTIFIER_EVENT_CS_TIMEOUT: u64 = 1 << 3;
/// `HL_NOTIFIER_EVENT_PAGE_FAULT`.
pub const HL_NOTIFIER_EVENT_PAGE_FAULT: u64 = 1 << 8;

// --- Gaudi2 queues and engines (enum gaudi2_queue_id, enum gaudi2_engine_id) --------------------

/// `GAUDI2_QUEUE_ID_PDMA_0_0`: PDMA 0, stream 0.
pub const GAUDI2_QUEUE_ID_PDMA_0_0: u32 = 0;
/// `GAUDI2_QUEUE_ID_PDMA_0_1`.
pub const GAUDI2_QUEUE_ID_PDMA_0_1: u32 = 1;
/// `GAUDI2_QUEUE_ID_PDMA_1_0`.
pub const GAUDI2_QUEUE_ID_PDMA_1_0: u32 = 4;
/// `GAUDI2_QUEUE_ID_DCORE0_EDMA_0_0`: the first EDMA stream of DCORE 0.
pub const GAUDI2_QUEUE_ID_DCORE0_EDMA_0_0: u32 = 8;
/// `GAUDI2_QUEUE_ID_DCORE1_EDMA_0_0`.
pub const GAUDI2_QUEUE_ID_DCORE1_EDMA_0_0: u32 = 48;
/// `GAUDI2_QUEUE_ID_DCORE2_EDMA_0_0`.
pub const GAUDI2_QUEUE_ID_DCORE2_EDMA_0_0: u32 = 84;
/// `GAUDI2_QUEUE_ID_DCORE3_EDMA_0_0`.
pub const GAUDI2_QUEUE_ID_DCORE3_EDMA_0_0: u32 = 120;
/// `GAUDI2_QUEUE_ID_DCORE0_MME_0_0`.
pub const GAUDI2_QUEUE_ID_DCORE0_MME_0_0: u32 = 16;
/// `GAUDI2_QUEUE_ID_CPU_PQ`: the driver's queue to the device CPU.
pub const GAUDI2_QUEUE_ID_CPU_PQ: u32 = 260;
/// `GAUDI2_QUEUE_ID_SIZE`: number of queue ids.
pub const GAUDI2_QUEUE_ID_SIZE: u32 = 261;
/// `GAUDI2_DCORE0_ENGINE_ID_EDMA_0`; DCORE `d`'s EDMA `e` is `11 * d + e`.
pub const GAUDI2_DCORE0_ENGINE_ID_EDMA_0: u16 = 0;
/// Engine ids per DCORE (`GAUDI2_DCORE1_ENGINE_ID_EDMA_0` - `GAUDI2_DCORE0_ENGINE_ID_EDMA_0`).
pub const GAUDI2_ENGINE_IDS_PER_DCORE: u16 = 11;
/// `GAUDI2_DCORE0_ENGINE_ID_TPC_6` (after DCORE3's engines).
pub const GAUDI2_DCORE0_ENGINE_ID_TPC_6: u16 = 44;
/// `GAUDI2_ENGINE_ID_PDMA_0`.
pub const GAUDI2_ENGINE_ID_PDMA_0: u16 = 45;
/// `GAUDI2_ENGINE_ID_PDMA_1`.
pub const GAUDI2_ENGINE_ID_PDMA_1: u16 = 46;
/// `GAUDI2_ENGINE_ID_KDMA` (the driver's own DMA engine).
pub const GAUDI2_ENGINE_ID_KDMA: u16 = 78;

// --- Gaudi2 packets (include/gaudi2/gaudi2_packets.h) --------------------------------------------
//
// Not in the uAPI header, but the device's ABI: a user CB is a sequence of
// these packets, little endian, each starting with a u32 whose meaning
// depends on the packet and the u32 `ctl` word that holds the opcode.

/// `PACKET_WREG_32`.
pub const PACKET_WREG_32: u32 = 0x1;
/// `PACKET_WREG_BULK`.
pub const PACKET_WREG_BULK: u32 = 0x2;
/// `PACKET_MSG_LONG`: write a u32 `value` to `addr`.
pub const PACKET_MSG_LONG: u32 = 0x3;
/// `PACKET_MSG_SHORT`.
pub const PACKET_MSG_SHORT: u32 = 0x4;
/// `PACKET_CP_DMA`.
pub const PACKET_CP_DMA: u32 = 0x5;
/// `PACKET_REPEAT`.
pub const PACKET_REPEAT: u32 = 0x6;
/// `PACKET_MSG_PROT`.
pub const PACKET_MSG_PROT: u32 = 0x7;
/// `PACKET_FENCE`.
pub const PACKET_FENCE: u32 = 0x8;
/// `PACKET_LIN_DMA`: copy (or memset) `tsize` bytes.
pub const PACKET_LIN_DMA: u32 = 0x9;
/// `PACKET_NOP`.
pub const PACKET_NOP: u32 = 0xA;
/// `PACKET_STOP`.
pub const PACKET_STOP: u32 = 0xB;
/// `PACKET_ARB_POINT`.
pub const PACKET_ARB_POINT: u32 = 0xC;
/// `PACKET_WAIT`.
pub const PACKET_WAIT: u32 = 0xD;
/// `PACKET_CB_LIST`.
pub const PACKET_CB_LIST: u32 = 0xE;
/// `PACKET_LOAD_AND_EXE`.
pub const PACKET_LOAD_AND_EXE: u32 = 0xF;
/// `PACKET_WREG_64_LONG`: the highest packet id.
pub const PACKET_WREG_64_LONG: u32 = 0x13;
/// `GAUDI2_PKT_CTL_OPCODE_SHIFT`.
pub const GAUDI2_PKT_CTL_OPCODE_SHIFT: u32 = 24;
/// `GAUDI2_PKT_CTL_OPCODE_MASK`.
pub const GAUDI2_PKT_CTL_OPCODE_MASK: u32 = 0x1F00_0000;
/// `GAUDI2_PKT_CTL_EB_MASK`: engine barrier.
pub const GAUDI2_PKT_CTL_EB_MASK: u32 = 0x2000_0000;
/// `GAUDI2_PKT_CTL_RB_MASK`: register barrier.
pub const GAUDI2_PKT_CTL_RB_MASK: u32 = 0x4000_0000;
/// `GAUDI2_PKT_CTL_MB_MASK`: message barrier.
pub const GAUDI2_PKT_CTL_MB_MASK: u32 = 0x8000_0000;
/// `GAUDI2_PKT_LIN_DMA_CTL_WRCOMP_MASK`: write a completion when done.
pub const GAUDI2_PKT_LIN_DMA_CTL_WRCOMP_MASK: u32 = 0x1;
/// `GAUDI2_PKT_LIN_DMA_CTL_ENDIAN_SHIFT`.
pub const GAUDI2_PKT_LIN_DMA_CTL_ENDIAN_SHIFT: u32 = 1;
/// `GAUDI2_PKT_LIN_DMA_CTL_ENDIAN_MASK`: 0 none, 1 swap 16-bit, 2 32-bit, 3 64-bit words.
pub const GAUDI2_PKT_LIN_DMA_CTL_ENDIAN_MASK: u32 = 0x6;
/// `GAUDI2_PKT_LIN_DMA_CTL_MEMSET_MASK`: `src_addr` is the 64-bit fill value.
pub const GAUDI2_PKT_LIN_DMA_CTL_MEMSET_MASK: u32 = 0x10;
/// `GAUDI2_PKT_LIN_DMA_CTL_CONTEXT_ID_SHIFT`.
pub const GAUDI2_PKT_LIN_DMA_CTL_CONTEXT_ID_SHIFT: u32 = 8;
/// `GAUDI2_PKT_LIN_DMA_CTL_CONTEXT_ID_MASK`.
pub const GAUDI2_PKT_LIN_DMA_CTL_CONTEXT_ID_MASK: u32 = 0x00FF_FF00;
/// Bytes of `struct packet_nop`.
pub const PACKET_NOP_SIZE: usize = 8;
/// Bytes of `struct packet_msg_long`.
pub const PACKET_MSG_LONG_SIZE: usize = 16;
/// Bytes of `struct packet_lin_dma`.
pub const PACKET_LIN_DMA_SIZE: usize = 24;

/// The `ctl` word of a packet with `opcode` and the barrier bits `eb`, `mb`.
pub const fn packet_ctl(opcode: u32, eb: bool, mb: bool) -> u32 {
    let mut ctl = (opcode << GAUDI2_PKT_CTL_OPCODE_SHIFT) & GAUDI2_PKT_CTL_OPCODE_MASK;
    if eb {
        ctl |= GAUDI2_PKT_CTL_EB_MASK;
    }
    if mb {
        ctl |= GAUDI2_PKT_CTL_MB_MASK;
    }
    ctl
}

// --- structs -------------------------------------------------------------------------------------

/// `struct hl_info_args`: the argument of `DRM_IOCTL_HL_INFO` (24 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HlInfoArgs {
    /// User pointer the result is copied to.
    pub return_pointer: u64,
    /// Size of the buffer at `return_pointer`; the result is truncated to it.
    pub return_size: u32,
    /// One of the `HL_INFO_*` op codes.
    pub op: u32,
    /// The upstream anonymous union of u32s: `dcore_id`, `ctx_id`, `period_ms`,
    /// `pll_index`, `eventfd`, `user_buffer_actual_size`, `sec_attest_nonce`,
    /// `array_size`, `fw_sub_opcode`.
    pub arg: u32,
    /// Must be zero.
    pub pad: u32,
}

impl HlInfoArgs {
    /// `dcore_id` member of the union (SYNC_MANAGER).
    pub const fn dcore_id(&self) -> u32 {
        self.arg
    }
    /// `array_size` member of the union (USER_MAPPINGS writes it back).
    pub fn set_array_size(&mut self, n: u32) {
        self.arg = n;
    }
}

/// `struct hl_info_hw_ip_info` (304 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HlInfoHwIpInfo {
    /// First SRAM address userspace may use.
    pub sram_base_address: u64,
    /// Base of the DRAM userspace sees: the DMMU VA start on ASICs with DRAM VM.
    pub dram_base_address: u64,
    /// DRAM available to users, a whole multiple of `dram_page_size`.
    pub dram_size: u64,
    /// SRAM available to users.
    pub sram_size: u32,
    /// Number of entries of the HW_EVENTS arrays.
    pub num_of_events: u32,
    /// PCI device id.
    pub device_id: u32,
    /// Card location in the server.
    pub module_id: u32,
    /// Mask of enabled decoders.
    pub decoder_enabled_mask: u32,
    /// First user interrupt id.
    pub first_available_interrupt_id: u16,
    /// `enum hl_server_type`.
    pub server_type: u16,
    /// CPLD version.
    pub cpld_version: u32,
    /// PSOC PCI PLL NR.
    pub psoc_pci_pll_nr: u32,
    /// PSOC PCI PLL NF.
    pub psoc_pci_pll_nf: u32,
    /// PSOC PCI PLL OD.
    pub psoc_pci_pll_od: u32,
    /// PSOC PCI PLL divide factor.
    pub psoc_pci_pll_div_factor: u32,
    /// Low 8 bits of the TPC mask.
    pub tpc_enabled_mask: u8,
    /// 1 when the device has DRAM.
    pub dram_enabled: u8,
    /// 1 when firmware security is enabled.
    pub security_enabled: u8,
    /// MME master/slave mode.
    pub mme_master_slave_mode: u8,
    /// Firmware (CPU-CP) version string.
    pub cpucp_version: [u8; HL_INFO_VERSION_MAX_LEN],
    /// Card name string.
    pub card_name: [u8; HL_INFO_CARD_NAME_MAX_LEN],
    /// Full TPC mask.
    pub tpc_enabled_mask_ext: u64,
    /// DRAM page size (not a power of two on Gaudi2).
    pub dram_page_size: u64,
    /// Mask of enabled EDMA engines.
    pub edma_enabled_mask: u32,
    /// Number of user interrupts.
    pub number_of_user_interrupts: u16,
    /// Reserved.
    pub reserved1: u8,
    /// Reserved.
    pub reserved2: u8,
    /// Reserved.
    pub reserved3: u64,
    /// Default page size of ALLOC.
    pub device_mem_alloc_default_page_size: u64,
    /// Reserved.
    pub reserved4: u64,
    /// Reserved.
    pub reserved5: u64,
    /// Reserved.
    pub reserved6: u32,
    /// Reserved.
    pub reserved7: u8,
    /// PCI revision id.
    pub revision_id: u8,
    /// TPC interrupt id.
    pub tpc_interrupt_id: u16,
    /// Mask of enabled rotators.
    pub rotator_enabled_mask: u32,
    /// Reserved.
    pub reserved9: u32,
    /// Engine-core interrupt register address.
    pub engine_core_interrupt_reg_addr: u64,
    /// DRAM reserved for the driver and firmware at the start of DRAM.
    pub reserved_dram_size: u64,
}

impl HlInfoHwIpInfo {
    /// An all-zero value.
    pub const ZERO: Self = Self {
        sram_base_address: 0,
        dram_base_address: 0,
        dram_size: 0,
        sram_size: 0,
        num_of_events: 0,
        device_id: 0,
        module_id: 0,
        decoder_enabled_mask: 0,
        first_available_interrupt_id: 0,
        server_type: 0,
        cpld_version: 0,
        psoc_pci_pll_nr: 0,
        psoc_pci_pll_nf: 0,
        psoc_pci_pll_od: 0,
        psoc_pci_pll_div_factor: 0,
        tpc_enabled_mask: 0,
        dram_enabled: 0,
        security_enabled: 0,
        mme_master_slave_mode: 0,
        cpucp_version: [0; HL_INFO_VERSION_MAX_LEN],
        card_name: [0; HL_INFO_CARD_NAME_MAX_LEN],
        tpc_enabled_mask_ext: 0,
        dram_page_size: 0,
        edma_enabled_mask: 0,
        number_of_user_interrupts: 0,
        reserved1: 0,
        reserved2: 0,
        reserved3: 0,
        device_mem_alloc_default_page_size: 0,
        reserved4: 0,
        reserved5: 0,
        reserved6: 0,
        reserved7: 0,
        revision_id: 0,
        tpc_interrupt_id: 0,
        rotator_enabled_mask: 0,
        reserved9: 0,
        engine_core_interrupt_reg_addr: 0,
        reserved_dram_size: 0,
    };
}

impl Default for HlInfoHwIpInfo {
    fn default() -> Self {
        Self::ZERO
    }
}

/// `struct hl_info_dram_usage` (16 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HlInfoDramUsage {
    /// Free DRAM of the device, in bytes.
    pub dram_free_mem: u64,
    /// DRAM allocated by the caller's context, in bytes.
    pub ctx_dram_mem: u64,
}

/// `struct hl_info_clk_rate` (8 bytes): the MME PLL's clock, MHz.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HlInfoClkRate {
    /// Current clock, MHz.
    pub cur_clk_rate_mhz: u32,
    /// Highest clock, MHz.
    pub max_clk_rate_mhz: u32,
}

/// `struct hl_info_device_utilization` (8 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HlInfoDeviceUtilization {
    /// Percent, 0-100.
    pub utilization: u32,
    /// Padding.
    pub pad: u32,
}

/// `struct hl_info_pci_counters` (24 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HlInfoPciCounters {
    /// Bytes received over PCIe.
    pub rx_throughput: u64,
    /// Bytes sent over PCIe.
    pub tx_throughput: u64,
    /// PCIe replays.
    pub replay_cnt: u64,
}

/// `struct hl_info_energy` (8 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HlInfoEnergy {
    /// Energy since boot, as the firmware counts it.
    pub total_energy_consumption: u64,
}

/// `HL_GAUDI2_PLL_MAX`: the PLL indices of `HL_INFO_PLL_FREQUENCY` on Gaudi2.
pub const HL_GAUDI2_PLL_MAX: u32 = 12;
/// `HL_GAUDI2_MME_PLL`.
pub const HL_GAUDI2_MME_PLL: u32 = 7;

/// `struct hl_pll_frequency_info` (8 bytes): a PLL's outputs, MHz.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HlPllFrequencyInfo {
    /// The four outputs.
    pub output: [u16; HL_PLL_NUM_OUTPUTS],
}

/// `struct hl_power_info` (8 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HlPowerInfo {
    /// Power now, mW.
    pub power: u64,
}

/// `HL_DEBUG_OP_ETR`..`HL_DEBUG_OP_TIMESTAMP`: the coresight ops.
pub const HL_DEBUG_OP_ETR: u32 = 0;
/// `HL_DEBUG_OP_TIMESTAMP` (deprecated, a no-op upstream).
pub const HL_DEBUG_OP_TIMESTAMP: u32 = 6;
/// `HL_DEBUG_OP_SET_MODE`: enter or leave debug mode.
pub const HL_DEBUG_OP_SET_MODE: u32 = 7;

/// `struct hl_debug_args` (40 bytes): the argument of `DRM_IOCTL_HL_DEBUG`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HlDebugArgs {
    /// User input structure of the op.
    pub input_ptr: u64,
    /// User output structure.
    pub output_ptr: u64,
    /// Bytes at `input_ptr`.
    pub input_size: u32,
    /// Bytes at `output_ptr`.
    pub output_size: u32,
    /// `HL_DEBUG_OP_*`.
    pub op: u32,
    /// Register index in the component.
    pub reg_idx: u32,
    /// Enable (non-zero) or disable.
    pub enable: u32,
    /// Not in use.
    pub ctx_id: u32,
}

/// `struct hl_info_hw_idle` (40 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HlInfoHwIdle {
    /// Non-zero when every engine is idle.
    pub is_idle: u32,
    /// Low 32 bits of the busy-engine mask.
    pub busy_engines_mask: u32,
    /// The full busy-engine mask.
    pub busy_engines_mask_ext: [u64; HL_BUSY_ENGINES_MASK_EXT_SIZE],
}

/// `struct hl_info_device_status` (8 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HlInfoDeviceStatus {
    /// One of the `HL_DEVICE_STATUS_*` values.
    pub status: u32,
    /// Padding.
    pub pad: u32,
}

/// `struct hl_info_reset_count` (8 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HlInfoResetCount {
    /// Hard resets since load.
    pub hard_reset_cnt: u32,
    /// Compute (soft) resets since load.
    pub soft_reset_cnt: u32,
}

/// `struct hl_info_time_sync` (24 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HlInfoTimeSync {
    /// Device timestamp.
    pub device_time: u64,
    /// Host `ktime_get_raw_ns()` at the same moment.
    pub host_time: u64,
    /// Host TSC at the same moment.
    pub tsc_time: u64,
}

/// `struct hl_info_cs_counters` (96 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HlInfoCsCounters {
    /// Drop counters: total/ctx pairs for out-of-memory, parsing, queue full,
    /// device in reset, max CS in flight and validation, in that order.
    pub counters: [u64; 12],
}

/// `struct hl_info_clk_throttle` (40 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HlInfoClkThrottle {
    /// Mask of `HL_CLK_THROTTLE_*` reasons.
    pub clk_throttling_reason: u32,
    /// Padding.
    pub pad: u32,
    /// Start of each throttling type, in microseconds.
    pub clk_throttling_timestamp_us: [u64; HL_CLK_THROTTLE_TYPE_MAX],
    /// Duration of each throttling type, in nanoseconds.
    pub clk_throttling_duration_ns: [u64; HL_CLK_THROTTLE_TYPE_MAX],
}

/// `struct hl_info_sync_manager` (16 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HlInfoSyncManager {
    /// First sync object available to users.
    pub first_available_sync_object: u32,
    /// First monitor available to users.
    pub first_available_monitor: u32,
    /// First completion queue available to users.
    pub first_available_cq: u32,
    /// Reserved.
    pub reserved: u32,
}

/// `struct hl_open_stats_info` (24 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HlOpenStatsInfo {
    /// Successful opens of the compute node since load.
    pub open_counter: u64,
    /// Duration of the last finished session, in milliseconds.
    pub last_open_period_ms: u64,
    /// 1 while a compute context exists.
    pub is_compute_ctx_active: u8,
    /// 1 while a compute context is being released.
    pub compute_ctx_in_release: u8,
    /// Padding.
    pub pad: [u8; 6],
}

/// `struct hl_info_last_err_open_dev_time` (8 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HlInfoLastErrOpenDevTime {
    /// Time of the last successful open, ktime in nanoseconds.
    pub timestamp: i64,
}

/// `struct hl_info_cs_timeout_event` (16 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HlInfoCsTimeoutEvent {
    /// Time of the timeout, ktime in nanoseconds.
    pub timestamp: i64,
    /// Sequence number of the timed-out CS.
    pub seq: u64,
}

/// `struct hl_info_undefined_opcode_event` (288 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HlInfoUndefinedOpcodeEvent {
    /// Time of the event, ktime in nanoseconds.
    pub timestamp: i64,
    /// Command-buffer addresses per stream.
    pub cb_addr_streams: [[u64; OPCODE_INFO_MAX_ADDR_SIZE]; MAX_QMAN_STREAMS_INFO],
    /// Completion-queue address.
    pub cq_addr: u64,
    /// Completion-queue size.
    pub cq_size: u32,
    /// Valid entries of `cb_addr_streams`.
    pub cb_addr_streams_len: u32,
    /// Engine that hit the undefined opcode.
    pub engine_id: u32,
    /// Stream that hit the undefined opcode.
    pub stream_id: u32,
}

/// `struct hl_info_dev_memalloc_page_sizes` (8 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HlInfoDevMemallocPageSizes {
    /// Bit n set: ALLOC supports a page size of 2^n. 0: only the default size.
    pub page_order_bitmask: u64,
}

/// `HL_RAZWI_READ`: the access that caused a RAZWI was a read.
pub const HL_RAZWI_READ: u8 = 1 << 0;
/// `HL_RAZWI_WRITE`.
pub const HL_RAZWI_WRITE: u8 = 1 << 1;
/// `HL_RAZWI_HBW`: on the high-bandwidth fabric.
pub const HL_RAZWI_HBW: u8 = 1 << 3;
/// `HL_NOTIFIER_EVENT_RAZWI`.
pub const HL_NOTIFIER_EVENT_RAZWI: u64 = 1 << 7;
/// `HL_NOTIFIER_EVENT_USER_ENGINE_ERR`: an engine is in error.
pub const HL_NOTIFIER_EVENT_USER_ENGINE_ERR: u64 = 1 << 5;

/// `struct hl_info_engine_err_event` (16 bytes): the first engine error
/// (`HL_INFO_USER_ENGINE_ERR_EVENT`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HlInfoEngineErrEvent {
    /// Time of the error, ktime in nanoseconds.
    pub timestamp: i64,
    /// The engine (`GAUDI2_ENGINE_ID_*`).
    pub engine_id: u16,
    /// How many errors the engine reported.
    pub error_count: u16,
    /// Padding.
    pub pad: u32,
}

/// `struct hl_info_razwi_event` (280 bytes): an access to an address no
/// memory decodes.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HlInfoRazwiEvent {
    /// Time of the event, ktime in nanoseconds.
    pub timestamp: i64,
    /// The address.
    pub addr: u64,
    /// The possible initiators.
    pub engine_id: [u16; HL_RAZWI_MAX_NUM_OF_ENGINES_PER_RTR],
    /// How many of `engine_id` are valid.
    pub num_of_possible_engines: u16,
    /// `HL_RAZWI_*`.
    pub flags: u8,
    /// Padding.
    pub pad: [u8; 5],
}

impl Default for HlInfoRazwiEvent {
    fn default() -> Self {
        Self {
            timestamp: 0,
            addr: 0,
            engine_id: [0; HL_RAZWI_MAX_NUM_OF_ENGINES_PER_RTR],
            num_of_possible_engines: 0,
            flags: 0,
            pad: [0; 5],
        }
    }
}

/// `struct hl_page_fault_info` (24 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HlPageFaultInfo {
    /// Time of the fault, ktime in nanoseconds.
    pub timestamp: i64,
    /// Faulting device VA.
    pub addr: u64,
    /// Engine that faulted.
    pub engine_id: u16,
    /// Padding.
    pub pad: [u8; 6],
}

/// `struct hl_user_mapping` (16 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HlUserMapping {
    /// Device VA of the mapping.
    pub dev_va: u64,
    /// Size of the mapping in bytes.
    pub size: u64,
}

/// `union hl_mem_args`: the argument of `DRM_IOCTL_HL_MEMORY` (40 bytes).
///
/// The input view (`struct hl_mem_in`) overlays per-op structs whose members sit
/// at three u64 slots; the output view (`struct hl_mem_out`) overlays the first
/// 16 bytes. The accessors below carry the upstream member names.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HlMemArgs {
    /// Offset 0: `alloc.mem_size`, `free.handle`, `map_device.hint_addr`,
    /// `map_host.host_virt_addr`, `map_block.block_addr`,
    /// `unmap.device_virt_addr`, `export_dmabuf_fd.addr`; out: `handle`,
    /// `device_virt_addr`, `block_handle`, `fd` (low 4 bytes).
    pub arg0: u64,
    /// Offset 8: `alloc.page_size`, `map_device.handle`, `map_host.hint_addr`,
    /// `export_dmabuf_fd.mem_size`; out: `block_size` (low 4 bytes), `pad`.
    pub arg1: u64,
    /// Offset 16: `map_host.mem_size`, `export_dmabuf_fd.offset`.
    pub arg2: u64,
    /// Offset 24: one of the `HL_MEM_OP_*` codes.
    pub op: u32,
    /// Offset 28: `HL_MEM_*` flags (file flags for EXPORT_DMABUF_FD).
    pub flags: u32,
    /// Offset 32: context id, ignored.
    pub ctx_id: u32,
    /// Offset 36: number of elements (TS_ALLOC).
    pub num_of_elements: u32,
}

/// `union hl_cb_args`: the argument of `DRM_IOCTL_HL_CB` (24 bytes). In:
/// `struct hl_cb_in`; out: `struct hl_cb_out`, which overlays `cb_handle`
/// (`out.cb_handle`, `out.usage_cnt` in its low 4 bytes, `out.device_va`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HlCbArgs {
    /// Offset 0: `in.cb_handle`; out: `cb_handle`, `usage_cnt` + `pad`, `device_va`.
    pub cb_handle: u64,
    /// Offset 8: one of the `HL_CB_OP_*` codes.
    pub op: u32,
    /// Offset 12: CREATE's size in bytes (at most [`HL_MAX_CB_SIZE`]).
    pub cb_size: u32,
    /// Offset 16: context id, ignored.
    pub ctx_id: u32,
    /// Offset 20: `HL_CB_FLAGS_*`.
    pub flags: u32,
}

impl HlCbArgs {
    /// `out.usage_cnt` (the low 4 bytes of the out union, in memory order).
    pub const fn out_usage_cnt(&self) -> u32 {
        split_u64(self.cb_handle).0
    }
    /// Set `out.usage_cnt` with `out.pad` zeroed.
    pub fn set_out_usage_cnt(&mut self, n: u32) {
        self.cb_handle = join_u32(n, 0);
    }
}

/// Combine two u32s into the u64 that holds them in memory order.
const fn join_u32(lo_addr: u32, hi_addr: u32) -> u64 {
    let [a, b, c, d] = lo_addr.to_ne_bytes();
    let [e, f, g, h] = hi_addr.to_ne_bytes();
    u64::from_ne_bytes([a, b, c, d, e, f, g, h])
}

/// Split a u64 into the u32 at its lower address and the one at its higher address.
const fn split_u64(v: u64) -> (u32, u32) {
    let [a, b, c, d, e, f, g, h] = v.to_ne_bytes();
    (
        u32::from_ne_bytes([a, b, c, d]),
        u32::from_ne_bytes([e, f, g, h]),
    )
}

impl HlMemArgs {
    /// `in.alloc.mem_size`.
    pub const fn alloc_mem_size(&self) -> u64 {
        self.arg0
    }
    /// `in.alloc.page_size`.
    pub const fn alloc_page_size(&self) -> u64 {
        self.arg1
    }
    /// `in.free.handle`.
    pub const fn free_handle(&self) -> u64 {
        self.arg0
    }
    /// `in.map_device.hint_addr`.
    pub const fn map_device_hint_addr(&self) -> u64 {
        self.arg0
    }
    /// `in.map_device.handle`.
    pub const fn map_device_handle(&self) -> u64 {
        self.arg1
    }
    /// `in.map_host.host_virt_addr`.
    pub const fn map_host_virt_addr(&self) -> u64 {
        self.arg0
    }
    /// `in.map_host.hint_addr`.
    pub const fn map_host_hint_addr(&self) -> u64 {
        self.arg1
    }
    /// `in.map_host.mem_size`.
    pub const fn map_host_mem_size(&self) -> u64 {
        self.arg2
    }
    /// `in.map_block.block_addr`.
    pub const fn map_block_addr(&self) -> u64 {
        self.arg0
    }
    /// `in.unmap.device_virt_addr`.
    pub const fn unmap_device_virt_addr(&self) -> u64 {
        self.arg0
    }
    /// `in.export_dmabuf_fd.addr`.
    pub const fn export_addr(&self) -> u64 {
        self.arg0
    }
    /// `in.export_dmabuf_fd.mem_size`.
    pub const fn export_mem_size(&self) -> u64 {
        self.arg1
    }
    /// `in.export_dmabuf_fd.offset`.
    pub const fn export_offset(&self) -> u64 {
        self.arg2
    }

    /// `out.handle` / `out.device_virt_addr` / `out.block_handle`.
    pub const fn out_u64(&self) -> u64 {
        self.arg0
    }
    /// `out.fd`.
    pub const fn out_fd(&self) -> i32 {
        split_u64(self.arg0).0 as i32
    }
    /// `out.block_size`.
    pub const fn out_block_size(&self) -> u32 {
        split_u64(self.arg1).0
    }

    /// Zero the whole union and set `out.handle` / `out.device_virt_addr`, as
    /// upstream does for ALLOC and MAP.
    pub fn set_out_u64_zeroed(&mut self, v: u64) {
        *self = Self::default();
        self.arg0 = v;
    }

    /// Set `out.handle` alone, leaving the rest of the union (TS_ALLOC).
    pub fn set_out_u64(&mut self, v: u64) {
        self.arg0 = v;
    }
    /// Zero the whole union and set `out.fd`, as upstream does for EXPORT_DMABUF_FD.
    pub fn set_out_fd_zeroed(&mut self, fd: i32) {
        *self = Self::default();
        self.arg0 = join_u32(fd as u32, 0);
    }
    /// Set `out.block_handle` and `out.block_size`, keeping `out.pad` (MAP_BLOCK).
    pub fn set_out_block(&mut self, handle: u64, size: u32) {
        let (_, pad) = split_u64(self.arg1);
        self.arg0 = handle;
        self.arg1 = join_u32(size, pad);
    }
    /// Fill `in.map_host` (USERPTR MAP): host address, size and the hint at offset 8.
    pub fn set_map_host(&mut self, host_virt_addr: u64, mem_size: u64, hint_addr: u64) {
        self.arg0 = host_virt_addr;
        self.arg1 = hint_addr;
        self.arg2 = mem_size;
    }
}

/// `struct hl_cs_chunk` (64 bytes): one job of a CS.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HlCsChunk {
    /// `cb_handle`: on Gaudi2 with [`HL_CS_CHUNK_FLAGS_USER_ALLOC_CB`], the
    /// device address of the CB (host VA, DRAM VA or SRAM).
    pub cb_handle: u64,
    /// The queue (`GAUDI2_QUEUE_ID_*`).
    pub queue_index: u32,
    /// Bytes of packets in the CB.
    pub cb_size: u32,
    /// `HL_CS_CHUNK_FLAGS_*`.
    pub cs_chunk_flags: u32,
    /// Collective wait only.
    pub collective_engine_id: u32,
    /// Padding.
    pub pad: [u32; 10],
}

/// `union hl_cs_args` (48 bytes). In: `struct hl_cs_in`; out: `struct
/// hl_cs_out`, which overlays the first 24 bytes (accessors below).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HlCsArgs {
    /// Offset 0: `in.chunks_restore` (user pointer); out: `seq`.
    pub chunks_restore: u64,
    /// Offset 8: `in.chunks_execute`; out: `status` (low 4 bytes in memory
    /// order), `sob_base_addr_offset`.
    pub chunks_execute: u64,
    /// Offset 16: `in.seq` (staged submissions); out:
    /// `sob_count_before_submission` (2 bytes) and padding.
    pub seq: u64,
    /// Offset 24: restore chunks.
    pub num_chunks_restore: u32,
    /// Offset 28: execute chunks.
    pub num_chunks_execute: u32,
    /// Offset 32: timeout in seconds with [`HL_CS_FLAGS_CUSTOM_TIMEOUT`].
    pub timeout: u32,
    /// Offset 36: `HL_CS_FLAGS_*`.
    pub cs_flags: u32,
    /// Offset 40: context id, ignored.
    pub ctx_id: u32,
    /// Offset 44: must be zero.
    pub pad: [u8; 4],
}

impl HlCsArgs {
    /// `out.seq`.
    pub const fn out_seq(&self) -> u64 {
        self.chunks_restore
    }
    /// `out.status`.
    pub const fn out_status(&self) -> u32 {
        split_u64(self.chunks_execute).0
    }
    /// Zero the union and set `out.seq` and `out.status`, as upstream's
    /// `hl_cs_ioctl` does (except after `EAGAIN`).
    pub fn set_out(&mut self, seq: u64, status: u32) {
        *self = Self::default();
        self.chunks_restore = seq;
        self.chunks_execute = join_u32(status, 0);
    }
    /// Set `out.sob_base_addr_offset` and `out.sob_count_before_submission`
    /// (a SIGNAL CS), after [`Self::set_out`].
    pub fn set_out_sob(&mut self, addr_offset: u32, count: u16) {
        let (status, _) = split_u64(self.chunks_execute);
        self.chunks_execute = join_u32(status, addr_offset);
        let [a, b] = count.to_ne_bytes();
        self.seq = u64::from_ne_bytes([a, b, 0, 0, 0, 0, 0, 0]);
    }
    /// `out.sob_base_addr_offset`.
    pub const fn out_sob_addr_offset(&self) -> u32 {
        split_u64(self.chunks_execute).1
    }
    /// `out.sob_count_before_submission`.
    pub const fn out_sob_count(&self) -> u16 {
        let [a, b, ..] = self.seq.to_ne_bytes();
        u16::from_ne_bytes([a, b])
    }
}

/// `union hl_wait_cs_args` (56 bytes). In: `struct hl_wait_cs_in`; out:
/// `struct hl_wait_cs_out` over the first 24 bytes (accessors below).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HlWaitCsArgs {
    /// Offset 0: `in.seq` (or `addr`); out: `status` and `flags`.
    pub seq: u64,
    /// Offset 8: `in.timeout_us` (or `target`); out: `timestamp_nsec`.
    pub timeout_us: u64,
    /// Offset 16: context id, ignored; out: `cs_completion_map`.
    pub ctx_id: u32,
    /// Offset 20: `HL_WAIT_CS_FLAGS_*`; out: padding.
    pub flags: u32,
    /// Offset 24: `seq_arr_len` (1 byte) and 7 pad bytes, or
    /// `interrupt_timeout_us`.
    pub interrupt_timeout_us: u64,
    /// Offset 32: `cq_counters_offset`.
    pub cq_counters_offset: u64,
    /// Offset 40: `timestamp_handle`.
    pub timestamp_handle: u64,
    /// Offset 48: `timestamp_offset`.
    pub timestamp_offset: u64,
}

impl HlWaitCsArgs {
    /// `out.status`.
    pub const fn out_status(&self) -> u32 {
        split_u64(self.seq).0
    }
    /// `out.flags`.
    pub const fn out_flags(&self) -> u32 {
        split_u64(self.seq).1
    }
    /// `out.timestamp_nsec`.
    pub const fn out_timestamp_nsec(&self) -> i64 {
        self.timeout_us as i64
    }
    /// Zero the union and set the out fields.
    pub fn set_out(&mut self, status: u32, flags: u32, timestamp_nsec: i64) {
        *self = Self::default();
        self.seq = join_u32(status, flags);
        self.timeout_us = timestamp_nsec as u64;
    }
    /// The 7 `in.pad` bytes after `seq_arr_len`, which must be zero for a
    /// multi-CS wait.
    pub const fn multi_cs_pad(&self) -> [u8; 7] {
        let [_, a, b, c, d, e, f, g] = self.interrupt_timeout_us.to_ne_bytes();
        [a, b, c, d, e, f, g]
    }
}

// --- layout checks against the upstream header ---------------------------------------------------

macro_rules! assert_layout {
    ($t:ty, $size:expr $(, $field:ident @ $off:expr)*) => {
        const _: () = assert!(size_of::<$t>() == $size);
        $(const _: () = assert!(offset_of!($t, $field) == $off);)*
    };
}

assert_layout!(HlInfoArgs, 24, return_pointer @ 0, return_size @ 8, op @ 12, arg @ 16, pad @ 20);
assert_layout!(HlInfoHwIpInfo, 304,
    sram_base_address @ 0, dram_base_address @ 8, dram_size @ 16, sram_size @ 24,
    num_of_events @ 28, device_id @ 32, module_id @ 36, decoder_enabled_mask @ 40,
    first_available_interrupt_id @ 44, server_type @ 46, cpld_version @ 48,
    psoc_pci_pll_nr @ 52, psoc_pci_pll_div_factor @ 64, tpc_enabled_mask @ 68,
    dram_enabled @ 69, security_enabled @ 70, mme_master_slave_mode @ 71,
    cpucp_version @ 72, card_name @ 200, tpc_enabled_mask_ext @ 216, dram_page_size @ 224,
    edma_enabled_mask @ 232, number_of_user_interrupts @ 236, reserved1 @ 238,
    reserved2 @ 239, reserved3 @ 240, device_mem_alloc_default_page_size @ 248,
    reserved4 @ 256, reserved5 @ 264, reserved6 @ 272, reserved7 @ 276, revision_id @ 277,
    tpc_interrupt_id @ 278, rotator_enabled_mask @ 280, reserved9 @ 284,
    engine_core_interrupt_reg_addr @ 288, reserved_dram_size @ 296);
assert_layout!(HlInfoDramUsage, 16, dram_free_mem @ 0, ctx_dram_mem @ 8);
assert_layout!(HlInfoClkRate, 8, cur_clk_rate_mhz @ 0, max_clk_rate_mhz @ 4);
assert_layout!(HlInfoDeviceUtilization, 8, utilization @ 0, pad @ 4);
assert_layout!(HlInfoPciCounters, 24, rx_throughput @ 0, tx_throughput @ 8, replay_cnt @ 16);
assert_layout!(HlInfoEnergy, 8, total_energy_consumption @ 0);
assert_layout!(HlPllFrequencyInfo, 8, output @ 0);
assert_layout!(HlPowerInfo, 8, power @ 0);
assert_layout!(HlDebugArgs, 40, input_ptr @ 0, output_ptr @ 8, input_size @ 16,
    output_size @ 20, op @ 24, reg_idx @ 28, enable @ 32, ctx_id @ 36);
assert_layout!(HlInfoHwIdle, 40, is_idle @ 0, busy_engines_mask @ 4, busy_engines_mask_ext @ 8);
assert_layout!(HlInfoDeviceStatus, 8, status @ 0, pad @ 4);
assert_layout!(HlInfoResetCount, 8, hard_reset_cnt @ 0, soft_reset_cnt @ 4);
assert_layout!(HlInfoTimeSync, 24, device_time @ 0, host_time @ 8, tsc_time @ 16);
assert_layout!(HlInfoCsCounters, 96);
assert_layout!(HlInfoClkThrottle, 40, clk_throttling_reason @ 0,
    clk_throttling_timestamp_us @ 8, clk_throttling_duration_ns @ 24);
assert_layout!(HlInfoSyncManager, 16, first_available_sync_object @ 0,
    first_available_monitor @ 4, first_available_cq @ 8, reserved @ 12);
assert_layout!(HlOpenStatsInfo, 24, open_counter @ 0, last_open_period_ms @ 8,
    is_compute_ctx_active @ 16, compute_ctx_in_release @ 17, pad @ 18);
assert_layout!(HlInfoLastErrOpenDevTime, 8, timestamp @ 0);
assert_layout!(HlInfoCsTimeoutEvent, 16, timestamp @ 0, seq @ 8);
assert_layout!(HlInfoUndefinedOpcodeEvent, 288, timestamp @ 0, cb_addr_streams @ 8,
    cq_addr @ 264, cq_size @ 272, cb_addr_streams_len @ 276, engine_id @ 280, stream_id @ 284);
assert_layout!(HlInfoDevMemallocPageSizes, 8, page_order_bitmask @ 0);
assert_layout!(HlInfoRazwiEvent, 280, timestamp @ 0, addr @ 8, engine_id @ 16,
    num_of_possible_engines @ 272, flags @ 274, pad @ 275);
assert_layout!(HlInfoEngineErrEvent, 16, timestamp @ 0, engine_id @ 8, error_count @ 10, pad @ 12);
assert_layout!(HlPageFaultInfo, 24, timestamp @ 0, addr @ 8, engine_id @ 16, pad @ 18);
assert_layout!(HlUserMapping, 16, dev_va @ 0, size @ 8);
assert_layout!(HlCbArgs, 24, cb_handle @ 0, op @ 8, cb_size @ 12, ctx_id @ 16, flags @ 20);
assert_layout!(HlCsChunk, 64, cb_handle @ 0, queue_index @ 8, cb_size @ 12, cs_chunk_flags @ 16,
    collective_engine_id @ 20, pad @ 24);
assert_layout!(HlCsArgs, 48, chunks_restore @ 0, chunks_execute @ 8, seq @ 16,
    num_chunks_restore @ 24, num_chunks_execute @ 28, timeout @ 32, cs_flags @ 36, ctx_id @ 40,
    pad @ 44);
assert_layout!(HlWaitCsArgs, 56, seq @ 0, timeout_us @ 8, ctx_id @ 16, flags @ 20,
    interrupt_timeout_us @ 24, cq_counters_offset @ 32, timestamp_handle @ 40,
    timestamp_offset @ 48);
assert_layout!(HlMemArgs, 40, arg0 @ 0, arg1 @ 8, arg2 @ 16, op @ 24, flags @ 28,
    ctx_id @ 32, num_of_elements @ 36);

const _: () = assert!(DRM_IOCTL_HL_INFO == 0xC018_6440);
const _: () = assert!(DRM_IOCTL_HL_CB == 0xC018_6441);
const _: () = assert!(DRM_IOCTL_HL_CS == 0xC030_6442);
const _: () = assert!(DRM_IOCTL_HL_WAIT_CS == 0xC038_6443);
const _: () = assert!(DRM_IOCTL_HL_MEMORY == 0xC028_6444);
const _: () = assert!(DRM_IOCTL_HL_DEBUG == 0xC028_6445);

#[cfg(CONFIG_KUNIT = "y")]
#[kernel::macros::kunit_tests(hlrs_uapi)]
mod tests {
    use super::*;

    #[test]
    fn ioctl_numbers_decode() {
        assert_eq!(ioc_type(DRM_IOCTL_HL_INFO), DRM_IOCTL_BASE);
        assert_eq!(ioc_nr(DRM_IOCTL_HL_INFO), DRM_COMMAND_BASE + HL_IOCTL_INFO);
        assert_eq!(ioc_size(DRM_IOCTL_HL_INFO), 24);
        assert_eq!(ioc_dir(DRM_IOCTL_HL_INFO), 3);
        assert_eq!(ioc_nr(DRM_IOCTL_HL_MEMORY), 0x44);
        assert_eq!(ioc_size(DRM_IOCTL_HL_MEMORY), 40);
    }

    #[test]
    fn mem_args_out_views_overlay_the_input() {
        let mut a = HlMemArgs {
            arg0: 7,
            arg1: u64::MAX,
            arg2: 3,
            op: 2,
            flags: 4,
            ctx_id: 9,
            num_of_elements: 1,
        };
        a.set_out_block(0x2000_0000_0000_1000, 0x1000);
        assert_eq!(a.out_u64(), 0x2000_0000_0000_1000);
        assert_eq!(a.out_block_size(), 0x1000);
        // MAP_BLOCK keeps `out.pad` (bytes 12..16) and the rest of `in`.
        assert_eq!(split_u64(a.arg1).1, u32::MAX);
        assert_eq!(a.op, 2);
        a.set_out_fd_zeroed(-9);
        assert_eq!(a.out_fd(), -9);
        assert_eq!(a.arg1, 0);
        assert_eq!(a.op, 0);
        a.set_out_u64_zeroed(0x1001_0018_0000_0000);
        assert_eq!(a.out_u64(), 0x1001_0018_0000_0000);
        assert_eq!(a.flags, 0);
    }

    #[test]
    fn mem_args_input_aliases() {
        let mut a = HlMemArgs::default();
        a.set_map_host(0x7000_1000, 0x2000, 0xFFF0_0000_0010_0000);
        // The host hint is at offset 8, the device hint at offset 0.
        assert_eq!(a.map_host_virt_addr(), 0x7000_1000);
        assert_eq!(a.map_host_hint_addr(), 0xFFF0_0000_0010_0000);
        assert_eq!(a.map_host_mem_size(), 0x2000);
        assert_eq!(a.map_device_hint_addr(), 0x7000_1000);
        assert_eq!(a.map_device_handle(), 0xFFF0_0000_0010_0000);
        // `free.handle` aliases `alloc.mem_size`.
        assert_eq!(a.free_handle(), a.alloc_mem_size());
    }

    #[test]
    fn mmap_handles_encode_and_decode_both_types() {
        // Byte offsets as upstream documents them: bit 61 for blocks, bit 63
        // for timestamp buffers, the value from bit 12 up.
        assert_eq!(mmap_handle(0, HL_MMAP_TYPE_BLOCK), 0x2000_0000_0000_0000);
        assert_eq!(mmap_handle(0, HL_MMAP_TYPE_TS_BUFF), 0x8000_0000_0000_0000);
        assert_eq!(mmap_handle(0, HL_MMAP_TYPE_CB), 0x1000_0000_0000_0000);
        for (value, kind) in [
            (0u64, HL_MMAP_TYPE_BLOCK),
            (452, HL_MMAP_TYPE_BLOCK),
            (1, HL_MMAP_TYPE_TS_BUFF),
            (u64::from(u32::MAX), HL_MMAP_TYPE_TS_BUFF),
        ] {
            let h = mmap_handle(value, kind);
            assert_eq!(h & 0xfff, 0);
            let pgoff = h >> HL_MMAP_PAGE_SHIFT;
            assert_eq!(mmap_type(pgoff), kind);
            assert_eq!(mmap_value(pgoff), value);
        }
        // A value never spills into the type bits.
        let h = mmap_handle(u64::MAX, HL_MMAP_TYPE_BLOCK);
        assert_eq!(mmap_type(h >> HL_MMAP_PAGE_SHIFT), HL_MMAP_TYPE_BLOCK);
        // Type bits that are none of the three.
        assert_eq!(
            mmap_type(0x8 << HL_MMAP_TYPE_SHIFT),
            0x8 << HL_MMAP_TYPE_SHIFT
        );
        assert_eq!(mmap_type(7), 0);
    }

    #[test]
    fn flags_are_distinct_bits() {
        assert_eq!(HL_MEM_FLAGS_ALL.count_ones(), 5);
        assert_eq!(HL_MEM_FLAGS_ALL & 0x30, 0);
    }
}
