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
//! - sysfs `show` callbacks: the attributes are removed (`device_remove_file`,
//!   then `cdev_device_del`/`drm_dev_unplug` delete the devices) before the
//!   references are dropped, and kernfs removal waits for running callbacks;
//! - debugfs readers hold their own `Arc<HlDevice>` (the files' data), and
//!   the files are removed at unload, which waits for readers in progress.

use crate::{
    context::Context,
    device::{HlDevice, SysfsAttr},
    file::{ComputeFile, ControlFile, Node},
    ioctl::{
        info::{info_ioctl, InfoCaller, UserBuffer},
        memory::memory_ioctl,
    },
    uapi::{self, HlInfoArgs, HlMemArgs},
};
use core::{
    mem::{offset_of, size_of},
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

static FOPS: AssertSync<bindings::file_operations> = AssertSync(bindings::file_operations {
    owner: kernel::module::this_module::<crate::LocalModule>().as_ptr(),
    open: Some(accel_open),
    release: Some(bindings::drm_release),
    unlocked_ioctl: Some(bindings::drm_ioctl),
    poll: Some(bindings::drm_poll),
    read: Some(bindings::drm_read),
    llseek: Some(bindings::noop_llseek),
    // HW blocks and timestamp buffers (`hl_mmap`).
    mmap: Some(crate::ffi::mmap::hl_mmap),
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
    ioctl_desc(uapi::DRM_IOCTL_HL_CB, Some(hl_unsupported_ioctl), c"HL_CB"),
    ioctl_desc(uapi::DRM_IOCTL_HL_CS, Some(hl_unsupported_ioctl), c"HL_CS"),
    ioctl_desc(
        uapi::DRM_IOCTL_HL_WAIT_CS,
        Some(hl_unsupported_ioctl),
        c"HL_WAIT_CS",
    ),
    ioctl_desc(
        uapi::DRM_IOCTL_HL_MEMORY,
        Some(hl_memory_ioctl),
        c"HL_MEMORY",
    ),
    ioctl_desc(
        uapi::DRM_IOCTL_HL_DEBUG,
        Some(hl_unsupported_ioctl),
        c"HL_DEBUG",
    ),
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
        unsafe { crate::ffi::dmabuf::OpenFile::new(f) }
    });
    // SAFETY: the contract of this function is `with_compute_args`'s.
    unsafe {
        with_compute_args(file, data, |f, args: &mut HlMemArgs| {
            memory_ioctl(f, args, open.as_ref())
        })
    }
}

/// CB, CS, WAIT_CS and DEBUG: command submission is not part of the memory subsystem.
///
/// # Safety
///
/// Only called by `drm_ioctl`; touches none of its arguments.
unsafe extern "C" fn hl_unsupported_ioctl(
    _drm: *mut bindings::drm_device,
    _data: *mut c_void,
    _file: *mut bindings::drm_file,
) -> c_int {
    EOPNOTSUPP.to_errno()
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
/// `cdev` was initialised with [`CTRL_FOPS`] and added together with `dev`;
/// `hdev` comes from `Arc::into_raw`, and the node owns that strong reference
/// until [`ControlNode::remove`] gives it back (the control device's drvdata
/// is the same pointer). The node is heap-allocated and never moves while
/// registered.
#[repr(C)]
struct ControlNode {
    cdev: bindings::cdev,
    dev: *mut bindings::device,
    hdev: *const HlDevice,
}

/// `release` of the control node's `struct device`: frees it.
///
/// # Safety
///
/// Only called by the device core, once, when the last reference to a
/// control device made by [`ControlNode::add`] is dropped.
unsafe extern "C" fn ctrl_dev_release(dev: *mut bindings::device) {
    // SAFETY: the control `device` was allocated by `KBox::into_raw` in
    // `ControlNode::add`, and the device core calls `release` exactly once.
    drop(unsafe { KBox::from_raw(dev) });
}

/// `open` of the control node: any number of opens, no context.
///
/// # Safety
///
/// Only called by `chrdev_open` for an inode of a control node of ours.
unsafe extern "C" fn hl_ctrl_open(inode: *mut bindings::inode, filp: *mut bindings::file) -> c_int {
    // SAFETY: `chrdev_open` set `i_cdev` to our cdev before calling us.
    let cdev = unsafe { (*inode).__bindgen_anon_5.i_cdev };
    // SAFETY: every cdev with `CTRL_FOPS` is the `cdev` field of a `ControlNode`,
    // alive while it can be opened (the open holds a module reference, so the
    // node cannot be removed under it).
    let node = unsafe { kernel::container_of!(cdev, ControlNode, cdev) };
    // SAFETY: by the invariant of `ControlNode`, `hdev` came from `Arc::into_raw`
    // and the node still owns that reference; the borrow ends in this call.
    let dev: Arc<HlDevice> = unsafe { ArcBorrow::from_raw((*node).hdev) }.into();
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
    /// Create and add `accel_controlD<index>` in the class of `accel_kdev`.
    ///
    /// # Safety
    ///
    /// `accel_kdev` must be the registered accel kdev of the device `hdev`
    /// belongs to; `hdev` must outlive the node.
    unsafe fn add(
        region: &ChrdevRegion,
        index: u32,
        accel_kdev: *mut bindings::device,
        hdev: &Arc<HlDevice>,
    ) -> Result<NonNull<ControlNode>> {
        if index >= CTRL_MINORS {
            return Err(EINVAL);
        }
        let name = CString::try_from_fmt(fmt!("accel_controlD{}", index))?;
        let dev = KBox::into_raw(KBox::new(bindings::device::default(), GFP_KERNEL)?);
        let node = KBox::into_raw(
            KBox::new(
                ControlNode {
                    cdev: bindings::cdev::default(),
                    dev,
                    hdev: core::ptr::null(),
                },
                GFP_KERNEL,
            )
            .inspect_err(|_| {
                // SAFETY: `dev` came from `KBox::into_raw` above and was never shared.
                drop(unsafe { KBox::from_raw(dev) });
            })?,
        );
        // INVARIANT: the node owns this reference until `remove` (or the error
        // path below) gives it back.
        let hdev_ref = Arc::into_raw(hdev.clone());
        // SAFETY: `node` is a fresh allocation of ours, not yet shared.
        unsafe { (*node).hdev = hdev_ref };
        // SAFETY: `node` and `dev` are fresh heap allocations owned by us; `dev` is
        // initialised with `device_initialize` before any other use and from then on
        // released only through `put_device` (whose `release` frees it).
        unsafe {
            bindings::cdev_init(addr_of_mut!((*node).cdev), &CTRL_FOPS.0);
            (*node).cdev.owner = kernel::module::this_module::<crate::LocalModule>().as_ptr();
            bindings::device_initialize(dev);
            (*dev).devt = region.devt(index);
            (*dev).class = (*accel_kdev).class;
            (*dev).release = Some(ctrl_dev_release);
            (*dev).driver_data = hdev_ref.cast_mut().cast();
            let mut rc =
                bindings::dev_set_name(dev, c_str!("%s").as_char_ptr(), name.as_char_ptr());
            if rc == 0 {
                rc = bindings::cdev_device_add(addr_of_mut!((*node).cdev), dev);
            }
            if rc == 0 {
                if let Err(e) = add_attrs(dev) {
                    bindings::cdev_device_del(addr_of_mut!((*node).cdev), dev);
                    rc = e.to_errno();
                }
            }
            if rc != 0 {
                bindings::put_device(dev);
                drop(KBox::from_raw(node));
                drop(Arc::from_raw(hdev_ref));
                return Err(Error::from_errno(rc));
            }
        }
        // SAFETY: `node` came from `KBox::into_raw`, so it is not null.
        Ok(unsafe { NonNull::new_unchecked(node) })
    }

    /// Remove and free a node made by [`ControlNode::add`].
    ///
    /// # Safety
    ///
    /// `node` must come from a successful `add` and not be used afterwards.
    unsafe fn remove(node: NonNull<ControlNode>) {
        let node = node.as_ptr();
        // After `cdev_device_del` no new open can start and none is running
        // (the module is being unloaded, so no file of ours is open), and the
        // attributes, the only other users of `hdev`, are gone.
        // SAFETY: per the contract the node is registered; its reference to
        // `hdev` is given back exactly once, here.
        unsafe {
            let dev = (*node).dev;
            remove_attrs(dev);
            bindings::cdev_device_del(addr_of_mut!((*node).cdev), dev);
            bindings::put_device(dev);
            let node = KBox::from_raw(node);
            drop(Arc::from_raw(node.hdev));
        }
    }
}

/// One registered device: faux parent, accel node, control node.
///
/// # Invariants
///
/// `drm` is a registered DRM device allocated as an [`HlDrm`] whose `hdev` is
/// a reference to the same device as `hdev`; `ctrl` is the added control node
/// of that device; the attributes are added to the accel kdev.
pub(crate) struct AccelDevice {
    hdev: Arc<HlDevice>,
    drm: NonNull<HlDrm>,
    ctrl: NonNull<ControlNode>,
    _faux: faux::Registration,
}

// SAFETY: the raw pointers are only used in `Drop`, which the kernel serialises
// with everything else (module exit); the DRM and control objects are
// thread-safe kernel objects.
unsafe impl Send for AccelDevice {}
// SAFETY: `AccelDevice` has no `&self` methods that touch the pointers.
unsafe impl Sync for AccelDevice {}

impl AccelDevice {
    /// Register `hdev` as `/dev/accel/accel<N>` + `/dev/accel/accel_controlD<N>`.
    pub(crate) fn new(hdev: Arc<HlDevice>, region: &ChrdevRegion) -> Result<Self> {
        let name = CString::try_from_fmt(fmt!("habanalabs_rs.{}", hdev.index))?;
        let faux = faux::Registration::new(&name, None)?;
        let parent: &kernel::device::Device = faux.as_ref().as_ref();
        // CAST: `device::Device` is `repr(transparent)` over `Opaque<bindings::device>`.
        let parent = core::ptr::from_ref(parent)
            .cast::<bindings::device>()
            .cast_mut();
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
        // SAFETY: `drm_dev` is allocated and not yet registered.
        let rc = unsafe { bindings::drm_dev_register(drm_dev, 0) };
        if rc != 0 {
            // SAFETY: drop the allocation reference.
            unsafe { bindings::drm_dev_put(drm_dev) };
            return Err(Error::from_errno(rc));
        }
        // SAFETY: a registered accel device has its accel minor.
        let (index, kdev) = unsafe { ((*(*drm_dev).accel).index, (*(*drm_dev).accel).kdev) };
        let index = u32::try_from(index).map_err(|_| EINVAL)?;
        // SAFETY: `kdev` is registered and lives until `drm_dev_unplug`; `hdev`
        // outlives the control node (both end in `Drop`).
        let ctrl = unsafe { Self::add_nodes(region, index, kdev, &hdev) };
        let ctrl = match ctrl {
            Ok(c) => c,
            Err(e) => {
                // SAFETY: registered above; unplug then drop our reference.
                unsafe {
                    bindings::drm_dev_unplug(drm_dev);
                    bindings::drm_dev_put(drm_dev);
                }
                return Err(e);
            }
        };
        pr_info!(
            "device {}: simulated {:04x}:{:04x} rev {}, accel{} and accel_controlD{} (bus {})\n",
            hdev.index,
            crate::asic::PCI_VENDOR_ID_HABANALABS,
            hdev.asic.device_id,
            hdev.asic.revision,
            index,
            index,
            core::str::from_utf8(&hdev.bus_id()).unwrap_or("?")
        );
        // SAFETY: `drm` is not null (not an error pointer).
        let drm = unsafe { NonNull::new_unchecked(drm) };
        Ok(Self {
            hdev,
            drm,
            ctrl,
            _faux: faux,
        })
    }
}

impl AccelDevice {
    /// Add the accel kdev's attributes and the control node; all or nothing.
    ///
    /// # Safety
    ///
    /// `kdev` must be the registered accel kdev of `hdev`'s DRM device, and
    /// `hdev` must outlive the node.
    unsafe fn add_nodes(
        region: &ChrdevRegion,
        index: u32,
        kdev: *mut bindings::device,
        hdev: &Arc<HlDevice>,
    ) -> Result<NonNull<ControlNode>> {
        // SAFETY: per the contract.
        unsafe { add_attrs(kdev) }?;
        // SAFETY: per the contract.
        let node = unsafe { ControlNode::add(region, index, kdev, hdev) };
        if node.is_err() {
            // SAFETY: the attributes were added above.
            unsafe { remove_attrs(kdev) };
        }
        node
    }
}

impl Drop for AccelDevice {
    fn drop(&mut self) {
        // SAFETY: per the type invariants everything was registered; no file of ours
        // is open (the module is going away), so nothing uses `hdev` through the
        // DRM or control objects after this.
        unsafe {
            ControlNode::remove(self.ctrl);
            let drm_dev = addr_of_mut!((*self.drm.as_ptr()).drm);
            remove_attrs((*(*drm_dev).accel).kdev);
            bindings::drm_dev_unplug(drm_dev);
            bindings::drm_dev_put(drm_dev);
        }
        pr_info!("device {} removed\n", self.hdev.index);
    }
}
