// SPDX-License-Identifier: GPL-2.0

//! The compute-accel device and its control node: every `unsafe` of the
//! registration, the file operations and the ioctl entry points.
//!
//! `kernel::drm` cannot register a `DRIVER_COMPUTE_ACCEL` device (it hard-wires
//! GEM), so this file does what upstream's `habanalabs_drv.c` does through raw
//! `bindings`: a faux parent device per simulated Gaudi, `__drm_dev_alloc` of
//! a container holding the `drm_device` and a pointer to our [`HlDevice`],
//! `drm_dev_register`, the accel fops (`accel_open`, `drm_ioctl`, ...) and an
//! ioctl table in uAPI order. The control node `accel_controlD<N>` is a char
//! device of our own in the accel class, serving INFO only
//! (common/device.c:736-790). Everything behind the entry points is safe Rust.
//!
//! Lifetime of the [`HlDevice`] behind the C objects:
//!
//! - the DRM device's container ([`HlDrm`]) and the control node
//!   ([`ControlNode`]) each own a strong reference (`Arc::into_raw`), released
//!   when the DRM device is released (a `drmm` action) and when the node is
//!   removed; every entry point that finds the device through them takes its
//!   own reference (`Arc` clone), so nothing borrows past the object it came
//!   from;
//! - every fops table has `owner = THIS_MODULE`, so an open file (and later an
//!   exported dma-buf) pins the module: it cannot be unloaded while any file
//!   is open, so [`AccelDevice`]'s `Drop` never races an ioctl;
//! - module init registers nodes only once everything that can fail before
//!   them has succeeded ([`PreparedDevice`]), and a registration that fails
//!   leaves that one device out instead of failing the load: a failed load
//!   frees the module whatever is open, so no node may be visible then;
//! - the control node's `struct device` and `struct cdev` are released by
//!   the driver core and the char-device core, never by module code, so a
//!   late kobject release (`CONFIG_DEBUG_KOBJECT_RELEASE`) is harmless;
//! - sysfs `show` callbacks: the attributes are removed (`device_remove_file`,
//!   then the devices are unregistered and `drm_dev_unplug` runs) before the
//!   references are dropped, and kernfs removal waits for running callbacks;
//! - debugfs files own their data and their fops pin the module
//!   (`ffi/debugfs.rs`); they are removed at unload, which waits for the
//!   callbacks in progress.

use crate::{
    context::Context,
    device::{HlDevice, SysfsAttr},
    ffi,
    file::{ComputeFile, ControlFile, Node},
    ioctl::{
        cs::{cs_ioctl, wait_cs_ioctl, UserChunks},
        info::{info_ioctl, InfoCaller, UserBuffer},
        memory::memory_ioctl,
    },
    shell::drm_file::compute_file,
    uapi::{self, HlCbArgs, HlCsArgs, HlCsChunk, HlInfoArgs, HlMemArgs, HlWaitCsArgs},
};
use core::{
    mem::{offset_of, size_of, ManuallyDrop},
    ptr::{addr_of_mut, NonNull},
};
use kernel::{
    bindings,
    c_str,
    faux,
    prelude::*,
    str::CString,
    sync::{Arc, ArcBorrow},
    transmute::{AsBytes, FromBytes},
    uaccess::{UserPtr, UserSlice}, //
};

// SAFETY: `#[repr(C)]` plain integers and arrays of them, laid out exactly as the
// upstream header with no implicit padding (offsets asserted in `uapi.rs`); any
// bit pattern is a valid value.
unsafe impl FromBytes for HlInfoArgs {}
// SAFETY: as above: no padding, so every byte is initialised.
unsafe impl AsBytes for HlInfoArgs {}
// SAFETY: as above.
unsafe impl FromBytes for HlMemArgs {}
// SAFETY: as above.
unsafe impl AsBytes for HlMemArgs {}
// SAFETY: as above.
unsafe impl FromBytes for HlCbArgs {}
// SAFETY: as above.
unsafe impl AsBytes for HlCbArgs {}
// SAFETY: as above.
unsafe impl FromBytes for HlCsArgs {}
// SAFETY: as above.
unsafe impl AsBytes for HlCsArgs {}
// SAFETY: as above.
unsafe impl FromBytes for HlWaitCsArgs {}
// SAFETY: as above.
unsafe impl AsBytes for HlWaitCsArgs {}
// SAFETY: as above.
unsafe impl FromBytes for HlCsChunk {}
// SAFETY: as above.
unsafe impl FromBytes for uapi::HlDebugArgs {}
// SAFETY: as above.
unsafe impl AsBytes for uapi::HlDebugArgs {}

/// `AsBytes` for uAPI result structs: all are `#[repr(C)]` integers and integer
/// arrays with explicit padding fields, checked against the header in `uapi.rs`.
macro_rules! uapi_as_bytes {
    ($($t:ty),* $(,)?) => {
        $(
            // SAFETY: `#[repr(C)]`, only integer fields, no implicit padding (every
            // offset and the size are asserted in `uapi.rs`).
            unsafe impl AsBytes for $t {}
        )*
    };
}
uapi_as_bytes!(
    uapi::HlInfoHwIpInfo,
    uapi::HlInfoDramUsage,
    uapi::HlInfoHwIdle,
    uapi::HlInfoDeviceStatus,
    uapi::HlInfoResetCount,
    uapi::HlInfoTimeSync,
    uapi::HlInfoCsCounters,
    uapi::HlInfoClkThrottle,
    uapi::HlInfoSyncManager,
    uapi::HlOpenStatsInfo,
    uapi::HlInfoLastErrOpenDevTime,
    uapi::HlInfoCsTimeoutEvent,
    uapi::HlInfoUndefinedOpcodeEvent,
    uapi::HlInfoDevMemallocPageSizes,
    uapi::HlPageFaultInfo,
    uapi::HlUserMapping,
    uapi::HlInfoRazwiEvent,
    uapi::HlInfoEngineErrEvent,
    uapi::HlInfoClkRate,
    uapi::HlInfoDeviceUtilization,
    uapi::HlInfoPciCounters,
    uapi::HlInfoEnergy,
    uapi::HlPllFrequencyInfo,
    uapi::HlPowerInfo,
);

/// Makes one of the immutable C tables below usable in a `static`.
#[repr(transparent)]
struct AssertSync<T>(T);

/// `Sync` only for the C tables this file puts in statics, not for any `T`.
macro_rules! assert_sync {
    ($($t:ty),* $(,)?) => {
        $(
            // SAFETY: a `static` of this table is never written after
            // initialisation: the kernel only reads fops, driver descriptors,
            // ioctl tables and attribute descriptors, from any thread.
            unsafe impl Sync for AssertSync<$t> {}
        )*
    };
}
assert_sync!(
    bindings::file_operations,
    bindings::drm_driver,
    [bindings::drm_ioctl_desc; 6],
    [bindings::device_attribute; 8],
);

#[allow(improper_ctypes)]
extern "C" {
    /// `accel_open` (drivers/accel/drm_accel.c:117), exported GPL but not in `bindings`.
    fn accel_open(inode: *mut bindings::inode, filp: *mut bindings::file) -> c_int;
    /// `__drmm_add_action_or_reset` (drivers/gpu/drm/drm_managed.c), exported
    /// but not in `bindings` (`drm_managed.h` is not in the bindings helper).
    fn __drmm_add_action_or_reset(
        dev: *mut bindings::drm_device,
        action: Option<unsafe extern "C" fn(*mut bindings::drm_device, *mut c_void)>,
        data: *mut c_void,
        name: *const c_char,
    ) -> c_int;
}

/// Habana PCI functions present on this host (real Gaudis), found with
/// `pci_get_device` and never touched: no driver is bound, no BAR mapped.
/// Returns how many there are and the device id of the first. O(PCI devices).
pub(crate) fn real_habana_devices() -> (u32, u16) {
    let (mut n, mut first) = (0u32, 0u16);
    let mut dev: *mut bindings::pci_dev = core::ptr::null_mut();
    loop {
        // SAFETY: `dev` is null or the device the previous call returned with a
        // reference, which this call drops; the result is null or a device with
        // a new reference (the last, null, result leaves none held).
        dev = unsafe {
            bindings::pci_get_device(
                crate::asic::PCI_VENDOR_ID_HABANALABS.into(),
                !0, // PCI_ANY_ID
                dev,
            )
        };
        if dev.is_null() {
            return (n, first);
        }
        if n == 0 {
            // SAFETY: `dev` is a live PCI device we hold a reference to.
            first = unsafe { (*dev).device };
        }
        n += 1;
    }
}

/// What is left of the current task's `/proc/thread-self/fail-nth` count
/// (0: no fault is armed). Module init reports it, so that a sweep of
/// injected faults over module loads (`tests/guest/tests/insmod.rs`) knows
/// which fault points come before the init and which inside it.
#[cfg(CONFIG_FAULT_INJECTION)]
pub(crate) fn fail_nth_left() -> u32 {
    let task = kernel::current!();
    // SAFETY: the current task is alive for the call; `fail_nth` is a plain
    // integer that only this task and writers of its `fail-nth` file change
    // (a racy read gives one value or the other).
    unsafe { core::ptr::addr_of!((*task.as_ptr()).fail_nth).read_volatile() }
}

/// Without `CONFIG_FAULT_INJECTION` no fault is ever armed.
#[cfg(not(CONFIG_FAULT_INJECTION))]
pub(crate) fn fail_nth_left() -> u32 {
    0
}

/// Monotonic time in ns (`ktime_get`).
pub(crate) fn monotonic_ns() -> i64 {
    // SAFETY: `ktime_get` has no preconditions.
    unsafe { bindings::ktime_get() }
}

/// Raw monotonic time in ns (`ktime_get_raw`).
pub(crate) fn monotonic_raw_ns() -> i64 {
    // SAFETY: `ktime_get_raw` has no preconditions.
    unsafe { bindings::ktime_get_raw() }
}

/// The allocation DRM makes for each device: the `drm_device` and our device.
///
/// # Invariants
///
/// Once [`AccelDevice::new`] has set it, `hdev` comes from `Arc::into_raw`:
/// the container owns that strong reference until [`release_hdev`] (a `drmm`
/// action, run when the DRM device is released, before the container is
/// freed) gives it back. So `hdev` is valid for as long as the `drm_device`.
#[repr(C)]
struct HlDrm {
    drm: bindings::drm_device,
    hdev: *const HlDevice,
}

use kernel::str::as_char_ptr_in_const_context as cptr;

/// A `file_operations.compat_ioctl`.
type CompatIoctl = Option<unsafe extern "C" fn(*mut bindings::file, c_uint, c_ulong) -> c_long>;

/// 32-bit processes reach the same ioctls as 64-bit ones: every struct of
/// the uAPI (`include/uapi/drm/habanalabs_accel.h`) has one layout on both,
/// so the ioctl numbers are the same and nothing needs converting. On the
/// compute node `drm_compat_ioctl` passes driver ioctls to `drm_ioctl` (as
/// upstream's fops, common/habanalabs_drv.c:91); on the control node
/// `compat_ptr_ioctl` passes them to `hl_ctrl_ioctl` with the argument as a
/// pointer (upstream uses `hl_ioctl_control` itself). Kernels without
/// `CONFIG_COMPAT` run no 32-bit processes.
#[cfg(CONFIG_COMPAT)]
const ACCEL_COMPAT_IOCTL: CompatIoctl = Some(bindings::drm_compat_ioctl);
#[cfg(not(CONFIG_COMPAT))]
const ACCEL_COMPAT_IOCTL: CompatIoctl = None;
/// See [`ACCEL_COMPAT_IOCTL`] (`None` without `CONFIG_COMPAT`).
const CTRL_COMPAT_IOCTL: CompatIoctl = bindings::compat_ptr_ioctl;

static FOPS: AssertSync<bindings::file_operations> = AssertSync(bindings::file_operations {
    owner: kernel::module::this_module::<crate::LocalModule>().as_ptr(),
    open: Some(accel_open),
    release: Some(bindings::drm_release),
    unlocked_ioctl: Some(bindings::drm_ioctl),
    compat_ioctl: ACCEL_COMPAT_IOCTL,
    poll: Some(bindings::drm_poll),
    read: Some(bindings::drm_read),
    llseek: Some(bindings::noop_llseek),
    // HW blocks and timestamp buffers (`hl_mmap`).
    mmap: Some(crate::shell::mmap::hl_mmap),
    // Without it `drm_open_helper` refuses the open with EINVAL (drm_file.c:329).
    fop_flags: bindings::FOP_UNSIGNED_OFFSET,
    ..pin_init::zeroed()
});

/// One entry of the DRM ioctl table (`DRM_IOCTL_DEF_DRV`).
const fn ioctl_desc(
    cmd: u32,
    func: bindings::drm_ioctl_t,
    name: &'static CStr,
) -> bindings::drm_ioctl_desc {
    bindings::drm_ioctl_desc {
        cmd,
        flags: 0,
        func,
        name: cptr(name),
    }
}

/// The driver's ioctls, indexed by `nr - DRM_COMMAND_BASE` as `drm_ioctl` expects
/// (common/habanalabs_drv.c:77-84).
static IOCTLS: AssertSync<[bindings::drm_ioctl_desc; 6]> = AssertSync([
    ioctl_desc(uapi::DRM_IOCTL_HL_INFO, Some(hl_info_ioctl), c"HL_INFO"),
    ioctl_desc(uapi::DRM_IOCTL_HL_CB, Some(hl_cb_ioctl), c"HL_CB"),
    ioctl_desc(uapi::DRM_IOCTL_HL_CS, Some(hl_cs_ioctl), c"HL_CS"),
    ioctl_desc(
        uapi::DRM_IOCTL_HL_WAIT_CS,
        Some(hl_wait_cs_ioctl),
        c"HL_WAIT_CS",
    ),
    ioctl_desc(
        uapi::DRM_IOCTL_HL_MEMORY,
        Some(hl_memory_ioctl),
        c"HL_MEMORY",
    ),
    ioctl_desc(uapi::DRM_IOCTL_HL_DEBUG, Some(hl_debug_ioctl), c"HL_DEBUG"),
]);

static DRIVER: AssertSync<bindings::drm_driver> = AssertSync(bindings::drm_driver {
    driver_features: bindings::drm_driver_feature_DRIVER_COMPUTE_ACCEL,
    open: Some(hl_device_open),
    postclose: Some(hl_device_postclose),
    name: cptr(c"habanalabs").cast_mut(),
    desc: cptr(c"HabanaLabs Gaudi memory subsystem (Rust, simulated Gaudi2)").cast_mut(),
    major: 7,
    minor: 3,
    patchlevel: 0,
    ioctls: IOCTLS.0.as_ptr(),
    num_ioctls: 6,
    fops: &FOPS.0,
    ..pin_init::zeroed()
});

static CTRL_FOPS: AssertSync<bindings::file_operations> = AssertSync(bindings::file_operations {
    owner: kernel::module::this_module::<crate::LocalModule>().as_ptr(),
    open: Some(hl_ctrl_open),
    release: Some(hl_ctrl_release),
    unlocked_ioctl: Some(hl_ctrl_ioctl),
    compat_ioctl: CTRL_COMPAT_IOCTL,
    llseek: Some(bindings::noop_llseek),
    ..pin_init::zeroed()
});

/// A new reference to the `HlDevice` of a DRM device of ours.
///
/// # Safety
///
/// `drm` must be a live `drm_device` (the caller holds a reference, or runs
/// in one of its callbacks) allocated and set up by [`AccelDevice::new`].
unsafe fn hdev_of_drm(drm: *mut bindings::drm_device) -> Arc<HlDevice> {
    // SAFETY: per the contract `drm` is the `drm` field of a live `HlDrm`.
    let container = unsafe { kernel::container_of!(drm, HlDrm, drm) };
    // SAFETY: by the invariant of `HlDrm`, `hdev` came from `Arc::into_raw` and
    // the container still owns that reference while the `drm_device` lives, so
    // borrowing it here, for no longer than this call, is sound.
    let borrowed = unsafe { ArcBorrow::from_raw((*container).hdev) };
    borrowed.into()
}

/// `drmm` release action of an [`HlDrm`]: give back the container's
/// reference to the `HlDevice`.
///
/// # Safety
///
/// Only called by DRM, once, when the DRM device registered with this action
/// by [`AccelDevice::new`] is released; `data` is that device's `HlDrm`.
unsafe extern "C" fn release_hdev(_drm: *mut bindings::drm_device, data: *mut c_void) {
    let container = data.cast::<HlDrm>();
    // SAFETY: per the contract `data` is our live container (DRM frees it only
    // after the managed actions ran), whose `hdev` came from `Arc::into_raw`
    // and is given back exactly once, here.
    drop(unsafe { Arc::from_raw((*container).hdev) });
}

/// `drm_driver.open`: create the compute context of a new open.
///
/// # Safety
///
/// Only called by DRM (`drm_open_helper`) with a device registered by
/// [`AccelDevice::new`] and the `drm_file` being opened.
unsafe extern "C" fn hl_device_open(
    drm: *mut bindings::drm_device,
    file: *mut bindings::drm_file,
) -> c_int {
    // SAFETY: DRM calls this only for devices registered by `AccelDevice::new`,
    // holding a reference to the device for the open.
    let hdev = unsafe { hdev_of_drm(drm) };
    let result = Context::new(hdev, monotonic_ns())
        .and_then(|ctx| Ok(Arc::new(ctx, GFP_KERNEL)?))
        .and_then(|ctx| KBox::new(ComputeFile { ctx }, GFP_KERNEL).map_err(Into::into));
    match result {
        Ok(f) => {
            // SAFETY: `file` is the valid `drm_file` being opened; `driver_priv` is ours.
            unsafe { (*file).driver_priv = KBox::into_raw(f).cast() };
            0
        }
        Err(e) => e.to_errno(),
    }
}

/// `drm_driver.postclose`: tear the context down.
///
/// # Safety
///
/// Only called by DRM once per successfully opened `drm_file`, after its last use.
unsafe extern "C" fn hl_device_postclose(
    _drm: *mut bindings::drm_device,
    file: *mut bindings::drm_file,
) {
    // SAFETY: `file` is valid; `driver_priv` was set by `hl_device_open` (postclose
    // only runs for files whose open succeeded) and is not used after this.
    let f = unsafe { (*file).driver_priv }.cast::<ComputeFile>();
    if !f.is_null() {
        // SAFETY: see above: it came from `KBox::into_raw` in `hl_device_open`.
        drop(unsafe { KBox::from_raw(f) });
    }
}

/// Run `handler` on the argument of a DRM ioctl of a compute file.
///
/// `drm_ioctl` hands us a zero-filled kernel copy of the argument of at least
/// `size_of::<T>()` bytes; it may not be aligned for `T` (it can be an on-stack
/// char array), so it is read and written back unaligned. DRM copies it back
/// to the caller, also when the handler failed.
///
/// # Safety
///
/// `file` must be a `drm_file` of ours inside one of its ioctls, and `data`
/// must point to at least `size_of::<T>()` writable bytes.
unsafe fn with_compute_args<T: FromBytes + AsBytes>(
    file: *mut bindings::drm_file,
    data: *mut c_void,
    handler: impl FnOnce(&ComputeFile, &mut T) -> Result,
) -> c_int {
    // SAFETY: per the contract we are inside an ioctl of this open file.
    let f = unsafe { compute_file(file) };
    // SAFETY: per the contract `data` holds at least `size_of::<T>()` bytes, and
    // any bit pattern is a valid `T` (`FromBytes`).
    let mut args = unsafe { data.cast::<T>().read_unaligned() };
    let rc = handler(f, &mut args);
    // SAFETY: as above.
    unsafe { data.cast::<T>().write_unaligned(args) };
    to_errno(rc)
}

/// DRM ioctl handler of `DRM_IOCTL_HL_INFO` on the compute node.
///
/// # Safety
///
/// Only called by `drm_ioctl` for an open file of ours, with `data` pointing
/// to a kernel copy of the argument of at least `size_of::<HlInfoArgs>()` bytes.
unsafe extern "C" fn hl_info_ioctl(
    _drm: *mut bindings::drm_device,
    data: *mut c_void,
    file: *mut bindings::drm_file,
) -> c_int {
    // SAFETY: the contract of this function is `with_compute_args`'s.
    unsafe {
        with_compute_args(file, data, |f, args: &mut HlInfoArgs| {
            let caller = InfoCaller {
                dev: f.ctx.device(),
                ctx: Some(&*f.ctx),
                node: Node::Compute,
                now_ns: (monotonic_ns(), monotonic_raw_ns()),
            };
            let mut out = UserBuffer(args.return_pointer);
            info_ioctl(&caller, args, &mut out)
        })
    }
}

/// DRM ioctl handler of `DRM_IOCTL_HL_MEMORY`.
///
/// # Safety
///
/// Only called by `drm_ioctl` for an open file of ours, with `data` pointing
/// to a kernel copy of the argument of at least `size_of::<HlMemArgs>()` bytes.
unsafe extern "C" fn hl_memory_ioctl(
    _drm: *mut bindings::drm_device,
    data: *mut c_void,
    file: *mut bindings::drm_file,
) -> c_int {
    // SAFETY: `file` is the live `drm_file` of this ioctl; DRM set its `filp`
    // before any ioctl can run.
    let filp = unsafe { (*file).filp };
    let open = NonNull::new(filp).map(|f| {
        // SAFETY: the compute node's file, alive for this ioctl; `open` does
        // not outlive it.
        unsafe { crate::shell::dmabuf::OpenFile::new(f) }
    });
    // SAFETY: the contract of this function is `with_compute_args`'s.
    unsafe {
        with_compute_args(file, data, |f, args: &mut HlMemArgs| {
            memory_ioctl(f, args, &crate::shell::dmabuf::FdExporter(open.as_ref()))
        })
    }
}

/// DRM ioctl handler of `DRM_IOCTL_HL_CB` on the compute node.
///
/// # Safety
///
/// Only called by `drm_ioctl` for an open file of ours, with `data` pointing
/// to a kernel copy of the argument of at least `size_of::<HlCbArgs>()` bytes.
unsafe extern "C" fn hl_cb_ioctl(
    _drm: *mut bindings::drm_device,
    data: *mut c_void,
    file: *mut bindings::drm_file,
) -> c_int {
    // SAFETY: the contract of this function is `with_compute_args`'s.
    unsafe { with_compute_args(file, data, crate::ioctl::cb::cb_ioctl) }
}

/// DRM ioctl handler of `DRM_IOCTL_HL_CS`.
///
/// # Safety
///
/// Only called by `drm_ioctl` for an open file of ours, with `data` pointing
/// to a kernel copy of the argument of at least `size_of::<HlCsArgs>()` bytes.
unsafe extern "C" fn hl_cs_ioctl(
    _drm: *mut bindings::drm_device,
    data: *mut c_void,
    file: *mut bindings::drm_file,
) -> c_int {
    // SAFETY: the contract of this function is `with_compute_args`'s.
    unsafe {
        with_compute_args(file, data, |f, args: &mut HlCsArgs| {
            cs_ioctl(f, args, &UserChunks)
        })
    }
}

/// DRM ioctl handler of `DRM_IOCTL_HL_WAIT_CS`.
///
/// # Safety
///
/// Only called by `drm_ioctl` for an open file of ours, with `data` pointing
/// to a kernel copy of the argument of at least `size_of::<HlWaitCsArgs>()` bytes.
unsafe extern "C" fn hl_wait_cs_ioctl(
    _drm: *mut bindings::drm_device,
    data: *mut c_void,
    file: *mut bindings::drm_file,
) -> c_int {
    // SAFETY: the contract of this function is `with_compute_args`'s.
    unsafe { with_compute_args(file, data, wait_cs_ioctl) }
}

/// DRM ioctl handler of `DRM_IOCTL_HL_DEBUG` (`ioctl::debug`).
///
/// # Safety
///
/// Only called by `drm_ioctl` for an open file of ours, with `data` pointing
/// to a kernel copy of the argument of at least `size_of::<HlDebugArgs>()` bytes.
unsafe extern "C" fn hl_debug_ioctl(
    _drm: *mut bindings::drm_device,
    data: *mut c_void,
    file: *mut bindings::drm_file,
) -> c_int {
    // SAFETY: the contract of this function is `with_compute_args`'s.
    unsafe {
        with_compute_args(file, data, |f, args: &mut uapi::HlDebugArgs| {
            crate::ioctl::debug::debug_ioctl(f.ctx.device(), args)
        })
    }
}

fn to_errno(rc: Result) -> c_int {
    match rc {
        Ok(()) => 0,
        Err(e) => e.to_errno(),
    }
}

/// The control node of one device.
///
/// # Invariants
///
/// `dev` was made by `device_create` (so its `release` is the driver
/// core's) with drvdata `hdev`, and holds the attributes; `cdev` came from
/// `cdev_alloc` (so its kobject release, in the char-device core, frees it)
/// with [`CTRL_FOPS`], and was added for `dev`'s devt with `dev` as its
/// kobject parent: it holds a reference to `dev` until that release runs,
/// after the last open file of the node is closed. `hdev` comes from
/// `Arc::into_raw`; the node owns that reference until
/// [`ControlNode::remove`] gives it back.
///
/// No C object of the node is released by module code, so a release the
/// kobject core runs late (`CONFIG_DEBUG_KOBJECT_RELEASE` delays each by 1-4
/// s) neither touches memory the module freed nor runs after the module is
/// gone.
struct ControlNode {
    cdev: NonNull<bindings::cdev>,
    dev: NonNull<bindings::device>,
    hdev: *const HlDevice,
}

/// A control node's char device, allocated but not added (nothing can open
/// it yet): dropping it frees it.
///
/// # Invariants
///
/// `0` came from `cdev_alloc` and was not added; we own its only reference.
struct CdevAlloc(NonNull<bindings::cdev>);

impl CdevAlloc {
    /// `cdev_alloc` with the control node's fops and owner.
    fn new() -> Result<Self> {
        // SAFETY: no preconditions; the result is checked for null.
        let cdev = NonNull::new(unsafe { bindings::cdev_alloc() }).ok_or(ENOMEM)?;
        // SAFETY: a fresh cdev, not yet shared.
        unsafe {
            (*cdev.as_ptr()).ops = &CTRL_FOPS.0;
            (*cdev.as_ptr()).owner = kernel::module::this_module::<crate::LocalModule>().as_ptr();
        }
        Ok(Self(cdev))
    }
}

impl Drop for CdevAlloc {
    fn drop(&mut self) {
        // SAFETY: by the invariant the cdev was never added and this is its
        // only reference; a parent set by a failed `cdev_add` took no
        // reference, so it is cleared first (its release puts the parent).
        unsafe {
            (*self.0.as_ptr()).kobj.parent = core::ptr::null_mut();
            bindings::kobject_put(addr_of_mut!((*self.0.as_ptr()).kobj));
        }
    }
}

/// `open` of the control node: any number of opens, no context.
///
/// # Safety
///
/// Only called by `chrdev_open` for an inode of a control node of ours.
unsafe extern "C" fn hl_ctrl_open(inode: *mut bindings::inode, filp: *mut bindings::file) -> c_int {
    // SAFETY: `chrdev_open` set `i_cdev` to our cdev, and holds a reference
    // to it (hence to its parent, the control device) for the call.
    let cdev = unsafe { (*inode).__bindgen_anon_5.i_cdev };
    // SAFETY: every cdev with `CTRL_FOPS` is the `cdev` of a `ControlNode`,
    // whose kobject parent is the node's control device (invariant).
    let dev = unsafe { kernel::container_of!((*cdev).kobj.parent, bindings::device, kobj) };
    // The control device's drvdata is the node's `hdev`, a reference from
    // `Arc::into_raw` that the node owns until `ControlNode::remove`, which
    // clears the drvdata under the device's lock before it gives the
    // reference back (a PCI device's removal can race this open).
    // SAFETY: `dev` is live (the cdev holds its parent); its mutex is
    // initialised (a registered device).
    let dev: Arc<HlDevice> = match unsafe { ctrl_hdev(dev) } {
        Some(d) => d,
        None => return ENODEV.to_errno(),
    };
    match KBox::new(ControlFile { dev }, GFP_KERNEL) {
        Ok(f) => {
            // SAFETY: `inode` and `filp` are the valid objects of this open.
            unsafe {
                bindings::nonseekable_open(inode, filp);
                (*filp).private_data = KBox::into_raw(f).cast();
            }
            0
        }
        Err(e) => Error::from(e).to_errno(),
    }
}

/// A new reference to the node's `HlDevice` from the control device's
/// drvdata, taken under the device's lock; `None` once the node is removed.
///
/// # Safety
///
/// `dev` is the live control device of a [`ControlNode`].
unsafe fn ctrl_hdev(dev: *mut bindings::device) -> Option<Arc<HlDevice>> {
    // SAFETY: `dev` is live (contract); its mutex is initialised.
    unsafe { bindings::mutex_lock(addr_of_mut!((*dev).mutex)) };
    // SAFETY: as above; the drvdata is null or the node's reference, which
    // `ControlNode::remove` gives back only after clearing it under this lock.
    let raw = unsafe { (*dev).driver_data.cast::<HlDevice>() };
    let hdev = (!raw.is_null()).then(|| {
        // SAFETY: the node's live reference (see above); the borrow ends here.
        let b = unsafe { ArcBorrow::from_raw(raw) };
        Arc::<HlDevice>::from(b)
    });
    // SAFETY: locked above.
    unsafe { bindings::mutex_unlock(addr_of_mut!((*dev).mutex)) };
    hdev
}

/// `release` of the control node.
///
/// # Safety
///
/// Only called by the VFS, once, for a file opened by [`hl_ctrl_open`].
unsafe extern "C" fn hl_ctrl_release(
    _inode: *mut bindings::inode,
    filp: *mut bindings::file,
) -> c_int {
    // SAFETY: `private_data` was set by `hl_ctrl_open` from `KBox::into_raw` and
    // `release` runs once, after every other file operation finished.
    drop(unsafe { KBox::from_raw((*filp).private_data.cast::<ControlFile>()) });
    0
}

/// `unlocked_ioctl` of the control node: only `DRM_IOCTL_HL_INFO`
/// (`hl_ioctl_control`, common/habanalabs_ioctl.c:1297-1316). Like `drm_ioctl`,
/// the argument is copied back even when the op failed.
///
/// # Safety
///
/// Only called by the VFS for a file opened by [`hl_ctrl_open`].
unsafe extern "C" fn hl_ctrl_ioctl(filp: *mut bindings::file, cmd: c_uint, arg: c_ulong) -> c_long {
    // SAFETY: `private_data` is the live `ControlFile` of this open file.
    let f = unsafe { &*(*filp).private_data.cast::<ControlFile>() };
    ctrl_ioctl(f, cmd, arg) as c_long
}

/// The safe body of [`hl_ctrl_ioctl`].
fn ctrl_ioctl(f: &ControlFile, cmd: u32, arg: usize) -> c_int {
    if uapi::ioc_type(cmd) != uapi::DRM_IOCTL_BASE
        || uapi::ioc_nr(cmd) != uapi::DRM_COMMAND_BASE + uapi::HL_IOCTL_INFO
    {
        return ENOTTY.to_errno();
    }
    let n = core::cmp::min(uapi::ioc_size(cmd), size_of::<HlInfoArgs>());
    let mut args = HlInfoArgs::default();
    let Some(bytes) = args.as_bytes_mut().get_mut(..n) else {
        return EINVAL.to_errno();
    };
    if UserSlice::new(UserPtr::from_addr(arg), n)
        .reader()
        .read_slice(bytes)
        .is_err()
    {
        return EFAULT.to_errno();
    }
    let caller = InfoCaller {
        dev: &f.dev,
        ctx: None,
        node: Node::Control,
        now_ns: (monotonic_ns(), monotonic_raw_ns()),
    };
    let mut buf = UserBuffer(args.return_pointer);
    let rc = to_errno(info_ioctl(&caller, &mut args, &mut buf));
    let out = args.as_bytes().get(..n).unwrap_or(&[]);
    if UserSlice::new(UserPtr::from_addr(arg), n)
        .writer()
        .write_slice(out)
        .is_err()
    {
        return EFAULT.to_errno();
    }
    rc
}

/// A new reference to the `HlDevice` behind a sysfs `struct device` of ours:
/// the control device (drvdata = the node's `HlDevice` reference) or the accel
/// minor's kdev (drvdata = `drm_minor`).
///
/// # Safety
///
/// `dev` must be the control device or accel kdev of a live [`AccelDevice`]
/// (true inside a sysfs callback: attributes are removed before teardown, and
/// removal waits for running callbacks).
unsafe fn hdev_of_sysfs(dev: *mut bindings::device) -> Arc<HlDevice> {
    // SAFETY: `dev` is valid per the contract.
    let d = unsafe { &*dev };
    // The accel kdev has the accel device type; our control device has none.
    if d.type_.is_null() {
        // SAFETY: `ControlNode::add` set the drvdata to the node's `hdev`, a
        // reference from `Arc::into_raw` that the node owns while its
        // attributes exist; the borrow ends in this call.
        let borrowed = unsafe { ArcBorrow::from_raw(d.driver_data.cast::<HlDevice>()) };
        borrowed.into()
    } else {
        let minor = d.driver_data.cast::<bindings::drm_minor>();
        // SAFETY: DRM sets an accel kdev's drvdata to its minor (drm_sysfs.c:580),
        // whose `dev` is our registered DRM device.
        unsafe { hdev_of_drm((*minor).dev) }
    }
}

/// Emit a sysfs attribute value.
///
/// # Safety
///
/// `buf` must be the `PAGE_SIZE` buffer of a sysfs `show` callback.
unsafe fn emit(buf: *mut c_char, text: Result<CString>) -> isize {
    match text {
        Ok(s) => {
            let bytes = s.to_bytes();
            let n = core::cmp::min(bytes.len(), kernel::page::PAGE_SIZE - 1);
            // SAFETY: `buf` holds PAGE_SIZE bytes and `n < PAGE_SIZE`; the source is
            // a distinct allocation.
            unsafe { core::ptr::copy_nonoverlapping(bytes.as_ptr(), buf.cast::<u8>(), n) };
            n as isize
        }
        Err(e) => e.to_errno() as isize,
    }
}

macro_rules! sysfs_attrs {
    ($($show:ident => $attr:ident, $name:literal;)*) => {
        $(
            /// `show` of one sysfs attribute.
            ///
            /// # Safety
            ///
            /// Only called by sysfs for a device of ours while the attribute exists.
            unsafe extern "C" fn $show(
                dev: *mut bindings::device,
                _attr: *mut bindings::device_attribute,
                buf: *mut c_char,
            ) -> isize {
                // SAFETY: sysfs calls `show` only on our devices while the attribute
                // exists; `buf` is its PAGE_SIZE buffer.
                unsafe { emit(buf, hdev_of_sysfs(dev).sysfs_value(SysfsAttr::$attr)) }
            }
        )*
        /// The read-only attributes of both nodes (upstream common/sysfs.c:431-451).
        static ATTRS: AssertSync<[bindings::device_attribute; [$($name),*].len()]> = AssertSync([
            $(bindings::device_attribute {
                attr: bindings::attribute {
                    name: cptr(c_str!($name)),
                    mode: 0o444,
                    ..pin_init::zeroed()
                },
                __bindgen_anon_1: bindings::device_attribute__bindgen_ty_1 { show: Some($show) },
                ..pin_init::zeroed()
            },)*
        ]);
    };
}

sysfs_attrs! {
    show_pci_addr => PciAddr, "pci_addr";
    show_device_type => DeviceType, "device_type";
    show_status => Status, "status";
    show_soft_reset_cnt => SoftResetCnt, "soft_reset_cnt";
    show_hard_reset_cnt => HardResetCnt, "hard_reset_cnt";
    show_module_id => ModuleId, "module_id";
    show_security_enabled => SecurityEnabled, "security_enabled";
    show_parent_device => ParentDevice, "parent_device";
}

/// Add the attributes to `dev`; on failure remove those already added.
///
/// # Safety
///
/// `dev` must be a registered device that outlives the attributes.
unsafe fn add_attrs(dev: *mut bindings::device) -> Result {
    for (i, a) in ATTRS.0.iter().enumerate() {
        // SAFETY: `dev` is registered; `a` is static.
        let rc = unsafe { bindings::device_create_file(dev, a) };
        if rc != 0 {
            for b in ATTRS.0.iter().take(i) {
                // SAFETY: `b` was added above.
                unsafe { bindings::device_remove_file(dev, b) };
            }
            return Err(Error::from_errno(rc));
        }
    }
    Ok(())
}

/// Remove the attributes added by [`add_attrs`].
///
/// # Safety
///
/// `add_attrs(dev)` must have succeeded.
unsafe fn remove_attrs(dev: *mut bindings::device) {
    for a in ATTRS.0.iter() {
        // SAFETY: per the contract each was added.
        unsafe { bindings::device_remove_file(dev, a) };
    }
}

/// The char-device region of the control nodes (one minor per accel index).
///
/// # Invariants
///
/// `base` is a region of [`CTRL_MINORS`] minors registered with
/// `alloc_chrdev_region` and not yet released.
pub(crate) struct ChrdevRegion {
    base: bindings::dev_t,
}

/// Minors of the control region: accel minors are 0..=255.
const CTRL_MINORS: u32 = 256;
const MINORBITS: u32 = 20;

impl ChrdevRegion {
    /// Allocate the region.
    pub(crate) fn new() -> Result<Self> {
        let mut base: bindings::dev_t = 0;
        // SAFETY: `base` is a valid out-pointer; the name is a static C string.
        let rc = unsafe {
            bindings::alloc_chrdev_region(
                &mut base,
                0,
                CTRL_MINORS,
                c_str!("habanalabs_rs_ctrl").as_char_ptr(),
            )
        };
        if rc != 0 {
            return Err(Error::from_errno(rc));
        }
        Ok(Self { base })
    }

    fn devt(&self, minor: u32) -> bindings::dev_t {
        // MKDEV(MAJOR(base), minor)
        ((self.base >> MINORBITS) << MINORBITS) | (minor & ((1 << MINORBITS) - 1))
    }
}

impl Drop for ChrdevRegion {
    fn drop(&mut self) {
        // SAFETY: per the type invariant the region is registered.
        unsafe { bindings::unregister_chrdev_region(self.base, CTRL_MINORS) };
    }
}

impl ControlNode {
    /// Create and add `accel_controlD<index>` in `class`: the device (with
    /// its attributes) first, the char device last, so nothing can open the
    /// node before the last step that can fail has succeeded.
    ///
    /// # Safety
    ///
    /// `class` must be the accel class; `hdev` must outlive the node.
    unsafe fn add(
        region: &ChrdevRegion,
        index: u32,
        name: &CStr,
        class: *const bindings::class,
        cdev: CdevAlloc,
        hdev: &Arc<HlDevice>,
    ) -> Result<ControlNode> {
        if index >= CTRL_MINORS {
            return Err(EINVAL);
        }
        let devt = region.devt(index);
        // INVARIANT: the node owns this reference until `remove` (or the error
        // paths below) gives it back.
        let hdev_ref = Arc::into_raw(hdev.clone());
        // SAFETY: `class` is the accel class; the format takes one C string.
        let dev = unsafe {
            bindings::device_create(
                class,
                core::ptr::null_mut(),
                devt,
                hdev_ref.cast_mut().cast(),
                c_str!("%s").as_char_ptr(),
                name.as_char_ptr(),
            )
        };
        let dev = match kernel::error::from_err_ptr(dev) {
            Ok(d) => NonNull::new(d).ok_or(ENOMEM),
            Err(e) => Err(e),
        };
        let dev = match dev {
            Ok(d) => d,
            Err(e) => {
                // SAFETY: nothing else got the reference.
                drop(unsafe { Arc::from_raw(hdev_ref) });
                return Err(e);
            }
        };
        // SAFETY: `dev` is registered; the attributes are removed before it
        // is unregistered.
        let mut rc = unsafe { add_attrs(dev.as_ptr()) }.map_or_else(|e| e.to_errno(), |()| 0);
        if rc == 0 {
            // SAFETY: `dev` is initialised and registered; on success the cdev
            // holds a reference to it (its parent) until its release.
            rc = unsafe {
                bindings::cdev_set_parent(cdev.0.as_ptr(), addr_of_mut!((*dev.as_ptr()).kobj));
                bindings::cdev_add(cdev.0.as_ptr(), devt, 1)
            };
            if rc != 0 {
                // SAFETY: added above.
                unsafe { remove_attrs(dev.as_ptr()) };
            }
        }
        if rc != 0 {
            // `cdev` is dropped unadded. The attributes are gone, and
            // removing them waited for running `show` callbacks, the only
            // users of `hdev_ref` so far.
            // SAFETY: `dev` came from `device_create`; our reference to
            // `hdev` is given back once.
            unsafe {
                bindings::device_unregister(dev.as_ptr());
                drop(Arc::from_raw(hdev_ref));
            }
            return Err(Error::from_errno(rc));
        }
        let cdev = ManuallyDrop::new(cdev).0;
        Ok(ControlNode {
            cdev,
            dev,
            hdev: hdev_ref,
        })
    }

    /// Remove the node. Its C objects are freed by their own releases (driver
    /// and char-device core) once the last reference goes.
    ///
    /// # Safety
    ///
    /// Once. At module exit no open of the node can be in progress (an open
    /// holds a module reference); at a PCI device's removal one can, and
    /// finds the drvdata cleared ([`ctrl_hdev`]).
    unsafe fn remove(&mut self) {
        let dev = self.dev.as_ptr();
        // No `show` runs after `remove_attrs`; an open either took its own
        // reference under the device's lock before the drvdata is cleared
        // under it, or finds it null.
        // SAFETY: the node is registered (type invariant), and by the above
        // the node's reference to `hdev` is given back last, once.
        unsafe {
            remove_attrs(dev);
            bindings::mutex_lock(addr_of_mut!((*dev).mutex));
            (*dev).driver_data = core::ptr::null_mut();
            bindings::mutex_unlock(addr_of_mut!((*dev).mutex));
            bindings::device_unregister(dev);
            bindings::cdev_del(self.cdev.as_ptr());
            drop(Arc::from_raw(self.hdev));
        }
    }
}

/// A DRM device allocated by [`PreparedDevice::new`] and not registered:
/// dropping it drops the allocation reference (`release_hdev` then gives
/// back the container's reference to the `HlDevice`).
///
/// # Invariants
///
/// `0` is an `HlDrm` from `__drm_dev_alloc` whose `hdev` is set and whose
/// `drmm` action is registered; we own one reference to its `drm_device`.
struct DrmAlloc(NonNull<HlDrm>);

impl DrmAlloc {
    fn drm_dev(&self) -> *mut bindings::drm_device {
        // SAFETY: by the invariant the container is alive.
        unsafe { addr_of_mut!((*self.0.as_ptr()).drm) }
    }
}

impl Drop for DrmAlloc {
    fn drop(&mut self) {
        // SAFETY: by the invariant we own this reference.
        unsafe { bindings::drm_dev_put(self.drm_dev()) };
    }
}

/// One device with everything that can fail done except registering its
/// nodes: nothing of it can be opened yet. [`PreparedDevice::publish`]
/// registers them.
///
/// Module init prepares every device first and publishes them last, so
/// that once a user can open a node, no failure makes the module unload
/// (which would free the module under the open file): a device whose
/// registration fails is left out and the others stay, as upstream's PCI
/// probe of one device fails alone.
pub(crate) struct PreparedDevice {
    hdev: Arc<HlDevice>,
    /// The faux parent of a simulated device (a PCI device's parent is its
    /// PCI function).
    faux: Option<faux::Registration>,
    drm: DrmAlloc,
    /// The DRM device's accel minor index, also the control node's.
    index: u32,
    ctrl_name: CString,
    cdev: CdevAlloc,
}

impl PreparedDevice {
    /// The faux parent, the DRM device (allocated, not registered) and the
    /// control node's char device (allocated, not added).
    pub(crate) fn new(hdev: Arc<HlDevice>) -> Result<Self> {
        let name = CString::try_from_fmt(fmt!("habanalabs_rs.{}", hdev.index))?;
        let faux = faux::Registration::new(&name, None)?;
        let parent: &kernel::device::Device = faux.as_ref().as_ref();
        // CAST: `device::Device` is `repr(transparent)` over `Opaque<bindings::device>`.
        let parent = core::ptr::from_ref(parent)
            .cast::<bindings::device>()
            .cast_mut();
        // SAFETY: `parent` is the faux device, bound, kept with the result.
        unsafe { Self::under(hdev, parent, Some(faux)) }
    }

    /// The device of a PCI function, `parent` (the DRM device's parent, as
    /// upstream's: `/sys/class/accel/accel<N>/device` is the function), and
    /// its control node's char device.
    #[cfg(CONFIG_PCI)]
    pub(crate) fn with_parent(
        hdev: Arc<HlDevice>,
        parent: &kernel::device::Device<kernel::device::Bound>,
    ) -> Result<Self> {
        let parent: &kernel::device::Device = parent;
        // CAST: as in `new`.
        let parent = core::ptr::from_ref(parent)
            .cast::<bindings::device>()
            .cast_mut();
        // SAFETY: `parent` is bound to our driver (the probe's device); the
        // DRM core takes its own reference to it.
        unsafe { Self::under(hdev, parent, None) }
    }

    /// The DRM device under `parent` and the control node's char device.
    ///
    /// # Safety
    ///
    /// `parent` is a live, bound device.
    unsafe fn under(
        hdev: Arc<HlDevice>,
        parent: *mut bindings::device,
        faux: Option<faux::Registration>,
    ) -> Result<Self> {
        // SAFETY: `parent` is a bound device; `DRIVER` is static; the size and offset
        // describe `HlDrm`, which starts with its `drm_device`.
        let raw = unsafe {
            bindings::__drm_dev_alloc(
                parent,
                &DRIVER.0,
                size_of::<HlDrm>(),
                offset_of!(HlDrm, drm),
            )
        };
        let drm = kernel::error::from_err_ptr(raw)?.cast::<HlDrm>();
        // INVARIANT: the container owns this reference; `release_hdev` gives it
        // back when the DRM device is released (or at once, if the action
        // cannot be registered).
        // SAFETY: `drm` is a fresh, zero-initialised (past the drm_device) `HlDrm`.
        let drm_dev = unsafe {
            (*drm).hdev = Arc::into_raw(hdev.clone());
            addr_of_mut!((*drm).drm)
        };
        // SAFETY: `drm_dev` is alive; on failure the action has already run and
        // the allocation reference is ours to drop.
        let rc = unsafe {
            __drmm_add_action_or_reset(
                drm_dev,
                Some(release_hdev),
                drm.cast(),
                cptr(c"hlrs_release_hdev"),
            )
        };
        if rc != 0 {
            // SAFETY: not registered; drop the allocation reference.
            unsafe { bindings::drm_dev_put(drm_dev) };
            return Err(Error::from_errno(rc));
        }
        // INVARIANT: set up as `DrmAlloc` requires; the reference is ours.
        // SAFETY: `drm` is not null (not an error pointer).
        let drm = DrmAlloc(unsafe { NonNull::new_unchecked(drm) });
        // SAFETY: an allocated accel device has its accel minor (drm_dev_init).
        let index = unsafe { (*(*drm_dev).accel).index };
        let index = u32::try_from(index).map_err(|_| EINVAL)?;
        let ctrl_name = CString::try_from_fmt(fmt!("accel_controlD{}", index))?;
        Ok(Self {
            hdev,
            faux,
            drm,
            index,
            ctrl_name,
            cdev: CdevAlloc::new()?,
        })
    }

    /// Register `/dev/accel/accel<N>` and `/dev/accel/accel_controlD<N>`:
    /// the accel node, its attributes, the control device and its
    /// attributes, and last the control node's char device. On failure
    /// everything registered is undone; a user may have opened the accel
    /// node meanwhile, which is safe: the open file keeps the DRM device,
    /// its context and the module (and the module stays loaded).
    pub(crate) fn publish(self, region: &ChrdevRegion) -> Result<AccelDevice> {
        let Self {
            hdev,
            faux,
            drm,
            index,
            ctrl_name,
            cdev,
        } = self;
        let drm_dev = drm.drm_dev();
        // SAFETY: `drm_dev` is allocated and not yet registered.
        let rc = unsafe { bindings::drm_dev_register(drm_dev, 0) };
        if rc != 0 {
            return Err(Error::from_errno(rc));
        }
        // SAFETY: a registered accel device has its accel minor and kdev.
        let kdev = unsafe { (*(*drm_dev).accel).kdev };
        // SAFETY: `kdev` is registered and lives until `drm_dev_unplug`; `hdev`
        // outlives the control node (both end in `AccelDevice`'s `Drop`).
        let ctrl = unsafe { AccelDevice::add_nodes(region, index, &ctrl_name, kdev, cdev, &hdev) };
        let ctrl = match ctrl {
            Ok(c) => c,
            Err(e) => {
                // SAFETY: registered above; unplug, then `drm` drops our reference.
                unsafe { bindings::drm_dev_unplug(drm_dev) };
                return Err(e);
            }
        };
        pr_info!(
            "device {}: {} {:04x}:{:04x} rev {}, accel{} and accel_controlD{} (bus {})\n",
            hdev.index,
            if hdev.simulated().is_some() {
                "simulated"
            } else {
                "PCI"
            },
            crate::asic::PCI_VENDOR_ID_HABANALABS,
            hdev.asic.device_id,
            hdev.asic.revision,
            index,
            index,
            core::str::from_utf8(&hdev.bus_id()).unwrap_or("?")
        );
        let drm = ManuallyDrop::new(drm).0;
        Ok(AccelDevice {
            hdev,
            drm,
            index,
            ctrl,
            _faux: faux,
        })
    }

    /// The device being prepared.
    pub(crate) fn hdev(&self) -> &Arc<HlDevice> {
        &self.hdev
    }
}

/// Upstream's debugfs files of one device and the links to them; the links
/// go first, then the files, then the reference to `accel/`.
pub(crate) struct AbiLinks {
    _hl: ffi::debugfs::Symlink,
    _by_minor: Option<ffi::debugfs::Symlink>,
    _files: crate::shell::debugfs_abi::AbiDebugfs,
    _accel: Option<ffi::debugfs::Lookup>,
}

/// One registered device: faux parent, accel node, control node.
///
/// # Invariants
///
/// `drm` is a registered DRM device allocated as an [`HlDrm`] whose `hdev` is
/// a reference to the same device as `hdev`, and we own one reference to it;
/// `ctrl` is the added control node of that device; the attributes are added
/// to the accel kdev.
pub(crate) struct AccelDevice {
    hdev: Arc<HlDevice>,
    drm: NonNull<HlDrm>,
    /// The accel minor index.
    index: u32,
    ctrl: ControlNode,
    _faux: Option<faux::Registration>,
}

// SAFETY: the raw pointers are only used in `Drop`, which the kernel serialises
// with everything else (module exit); the DRM and control objects are
// thread-safe kernel objects.
unsafe impl Send for AccelDevice {}
// SAFETY: `AccelDevice` has no `&self` methods that touch the pointers.
unsafe impl Sync for AccelDevice {}

impl AccelDevice {
    /// Create upstream's debugfs files (`debugfs_abi`) in the DRM core's
    /// directory of this device, `accel/<parent device>/`, and the links
    /// `accel/<minor>` and `<hl_root>/hl<minor>` to it. The result must be
    /// dropped before this device (the DRM core removes its directory when
    /// the device is released) and before `hl_root`.
    pub(crate) fn create_abi_debugfs(
        &self,
        files: crate::shell::debugfs_abi::PreparedAbi,
        hl_root: &ffi::debugfs::Dir<()>,
    ) -> Result<AbiLinks> {
        // SAFETY: the DRM device is alive (we hold a reference); its
        // `debugfs_root` and `unique` were set by `drm_dev_init` and stay
        // until its release.
        let (root, unique) = unsafe {
            let drm_dev = addr_of_mut!((*self.drm.as_ptr()).drm);
            (
                (*drm_dev).debugfs_root,
                CStr::from_char_ptr((*drm_dev).unique),
            )
        };
        // SAFETY: `root` is the DRM core's directory, which outlives the
        // files: the caller drops them before this device's reference.
        let files = unsafe { files.create_in(root) };
        let minor = CString::try_from_fmt(fmt!("{}", self.index))?;
        let hl = CString::try_from_fmt(fmt!("hl{}", self.index))?;
        let up = CString::try_from_fmt(fmt!("../accel/{}", unique))?;
        let accel = ffi::debugfs::Lookup::root(c"accel");
        let by_minor = accel.as_ref().map(|a| {
            // SAFETY: `accel` stays (held by `AbiLinks`) while the link does.
            unsafe { ffi::debugfs::Symlink::new(&minor, a.dentry(), unique) }
        });
        Ok(AbiLinks {
            _hl: ffi::debugfs::Symlink::in_dir(&hl, hl_root, &up),
            _by_minor: by_minor,
            _accel: accel,
            _files: files,
        })
    }

    /// Add the accel kdev's attributes and the control node; all or nothing.
    ///
    /// # Safety
    ///
    /// `kdev` must be the registered accel kdev of `hdev`'s DRM device, and
    /// `hdev` must outlive the node.
    unsafe fn add_nodes(
        region: &ChrdevRegion,
        index: u32,
        name: &CStr,
        kdev: *mut bindings::device,
        cdev: CdevAlloc,
        hdev: &Arc<HlDevice>,
    ) -> Result<ControlNode> {
        // SAFETY: per the contract.
        unsafe { add_attrs(kdev) }?;
        // SAFETY: per the contract; `kdev` is in the accel class.
        let node = unsafe { ControlNode::add(region, index, name, (*kdev).class, cdev, hdev) };
        if node.is_err() {
            // SAFETY: the attributes were added above.
            unsafe { remove_attrs(kdev) };
        }
        node
    }
}

impl Drop for AccelDevice {
    /// At module exit (simulated devices: no file of ours is open) or at the
    /// removal of a PCI device, when files may be open: open control files
    /// and compute files hold their own references to the device (and the
    /// DRM core answers `ENODEV` to a compute file once it is unplugged,
    /// and zaps its CPU mappings), a control-node open in progress finds
    /// the node's reference gone ([`ControlNode::remove`]), and removing the
    /// attributes waits for their callbacks.
    fn drop(&mut self) {
        // SAFETY: per the type invariants everything was registered; nothing
        // uses the node's or the DRM device's reference to `hdev` after
        // this (see above).
        unsafe {
            self.ctrl.remove();
            let drm_dev = addr_of_mut!((*self.drm.as_ptr()).drm);
            remove_attrs((*(*drm_dev).accel).kdev);
            bindings::drm_dev_unplug(drm_dev);
            bindings::drm_dev_put(drm_dev);
        }
        pr_info!("device {} removed\n", self.hdev.index);
    }
}
