//! Userspace client of the habanalabs_rs accel device.
//!
//! The uAPI types are the kernel module's own `src/uapi.rs`, compiled here
//! unchanged, so the two sides cannot drift apart. Each device has two nodes:
//! the compute node `/dev/accel/accel<N>` (one open at a time; INFO and
//! MEMORY) and the control node `/dev/accel/accel_controlD<N>` (any number of
//! opens; INFO only). Errors are [`std::io::Error`]s carrying the kernel's
//! errno.
//!
//! ```no_run
//! let dev = hlrs::Device::open_control(0)?;
//! let hw = dev.hw_ip_info()?;
//! assert_eq!(hw.device_id, 0x1020);
//! # Ok::<(), std::io::Error>(())
//! ```

#[path = "../../../uapi.rs"]
#[allow(missing_docs, dead_code)]
pub mod uapi;

pub mod all_to_all;
pub mod cs;
pub mod debugfs;
pub mod gaudi2;
mod host_buffer;
mod mmap;
pub mod sync;
pub mod uffd;
pub use host_buffer::{Backing, HostBuffer, HUGE_PAGE_SIZE};
pub use mmap::{cb_mapped_len, CbMapping, CommandBuffer, HwBlock, TimestampBuffer};

use rustix::ioctl::{ioctl, Opcode, Updater};
use std::{
    fs::{File, OpenOptions},
    io,
    os::{fd::AsFd, unix::fs::OpenOptionsExt},
    path::{Path, PathBuf},
};
use uapi::*;

/// Which of a device's two nodes a [`Device`] has open.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Node {
    /// `/dev/accel/accel<N>`.
    Compute,
    /// `/dev/accel/accel_controlD<N>`.
    Control,
}

/// The state a device reports (`HL_INFO_DEVICE_STATUS`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeviceStatus {
    /// Ready for work.
    Operational,
    /// A reset is in progress.
    InReset,
    /// Disabled after a failure.
    Malfunction,
    /// Needs a reset before use.
    NeedsReset,
    /// Still initialising.
    InDeviceCreation,
    /// Resetting after the last user left.
    InResetAfterDeviceRelease,
    /// A value this library does not know.
    Unknown(u32),
}

impl From<u32> for DeviceStatus {
    fn from(v: u32) -> Self {
        match v {
            HL_DEVICE_STATUS_OPERATIONAL => Self::Operational,
            HL_DEVICE_STATUS_IN_RESET => Self::InReset,
            HL_DEVICE_STATUS_MALFUNCTION => Self::Malfunction,
            HL_DEVICE_STATUS_NEEDS_RESET => Self::NeedsReset,
            HL_DEVICE_STATUS_IN_DEVICE_CREATION => Self::InDeviceCreation,
            HL_DEVICE_STATUS_IN_RESET_AFTER_DEVICE_RELEASE => Self::InResetAfterDeviceRelease,
            other => Self::Unknown(other),
        }
    }
}

/// Path of a node of device `index`.
pub fn node_path(node: Node, index: u32) -> PathBuf {
    match node {
        Node::Compute => PathBuf::from(format!("/dev/accel/accel{index}")),
        Node::Control => PathBuf::from(format!("/dev/accel/accel_controlD{index}")),
    }
}

/// Indices of the accel devices present, from `/sys/class/accel` (sorted).
pub fn device_indices() -> io::Result<Vec<u32>> {
    let mut v: Vec<u32> = std::fs::read_dir("/sys/class/accel")?
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().to_str()?.strip_prefix("accel")?.parse().ok())
        .collect();
    v.sort_unstable();
    Ok(v)
}

/// Normalise a PCI bus id to `DDDD:BB:DD.F`, as libhlthunk does (a 7-character
/// `BB:DD.F` gets the `0000:` domain).
pub fn normalize_bus_id(bus_id: &str) -> String {
    if bus_id.len() == 7 {
        format!("0000:{bus_id}")
    } else {
        bus_id.to_owned()
    }
}

/// An open node of one device.
#[derive(Debug)]
pub struct Device {
    file: File,
    node: Node,
    index: u32,
}

impl Device {
    /// Open `node` of device `index` (`O_RDWR | O_CLOEXEC`, as libhlthunk).
    pub fn open(node: Node, index: u32) -> io::Result<Self> {
        Self::open_path(&node_path(node, index), node, index)
    }

    fn open_path(path: &Path, node: Node, index: u32) -> io::Result<Self> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(rustix::fs::OFlags::CLOEXEC.bits() as i32)
            .open(path)?;
        Ok(Self { file, node, index })
    }

    /// Open the compute node of device `index`. Fails with `EBUSY` while another
    /// open of it exists.
    pub fn open_compute(index: u32) -> io::Result<Self> {
        Self::open(Node::Compute, index)
    }

    /// Open the control node of device `index`.
    pub fn open_control(index: u32) -> io::Result<Self> {
        Self::open(Node::Control, index)
    }

    /// Open the compute node of the device with PCI bus id `bus_id`
    /// (libhlthunk's `hlthunk_open` with a bus id: scans `/sys/class/accel`).
    pub fn open_by_bus_id(bus_id: &str) -> io::Result<Self> {
        let want = normalize_bus_id(bus_id);
        for index in device_indices()? {
            let got = std::fs::read_to_string(format!("/sys/class/accel/accel{index}/pci_addr"))?;
            if got.trim() == want {
                return Self::open_compute(index);
            }
        }
        Err(io::Error::from_raw_os_error(
            rustix::io::Errno::NODEV.raw_os_error(),
        ))
    }

    /// Which node this is.
    pub fn node(&self) -> Node {
        self.node
    }

    /// The device index.
    pub fn index(&self) -> u32 {
        self.index
    }

    /// The PCI bus id from the node's own sysfs directory (`pci_addr`), found
    /// from the open file as libhlthunk does (`/sys/dev/char/<maj>:<min>`).
    pub fn bus_id(&self) -> io::Result<String> {
        let st = rustix::fs::fstat(&self.file)?;
        let (maj, min) = (rustix::fs::major(st.st_rdev), rustix::fs::minor(st.st_rdev));
        Ok(
            std::fs::read_to_string(format!("/sys/dev/char/{maj}:{min}/pci_addr"))?
                .trim()
                .to_owned(),
        )
    }

    /// `DRM_IOCTL_HL_INFO` with caller-built arguments (the kernel may update
    /// them, e.g. `array_size`). The lowest-level INFO call, for tools and tests.
    pub fn info_args(&self, args: &mut HlInfoArgs) -> io::Result<()> {
        // SAFETY: `HlInfoArgs` is the argument type of DRM_IOCTL_HL_INFO (size
        // asserted in `uapi`); the kernel reads and writes exactly it. The caller's
        // `return_pointer` is only dereferenced by the kernel, which checks it.
        unsafe {
            ioctl(
                self.file.as_fd(),
                Updater::<{ DRM_IOCTL_HL_INFO as Opcode }, _>::new(args),
            )
        }?;
        Ok(())
    }

    /// INFO op `op` into `out`: returns how the kernel left the arguments.
    pub fn info_into(&self, op: u32, arg: u32, out: &mut [u8]) -> io::Result<HlInfoArgs> {
        let mut args = HlInfoArgs {
            return_pointer: out.as_mut_ptr() as u64,
            return_size: u32::try_from(out.len()).unwrap_or(u32::MAX),
            op,
            arg,
            pad: 0,
        };
        self.info_args(&mut args)?;
        Ok(args)
    }

    /// INFO op `op` returning a `T` (a uAPI result struct).
    fn info_typed<T: Copy + Default>(&self, op: u32) -> io::Result<T> {
        let mut value = T::default();
        let mut args = HlInfoArgs {
            return_pointer: &mut value as *mut T as u64,
            return_size: std::mem::size_of::<T>() as u32,
            op,
            arg: 0,
            pad: 0,
        };
        self.info_args(&mut args)?;
        Ok(value)
    }

    /// INFO op `op` with the union argument `arg` (e.g. `pll_index`),
    /// returning a `T` (a uAPI result struct, or an integer).
    pub fn info_value<T: Copy + Default>(&self, op: u32, arg: u32) -> io::Result<T> {
        let mut value = T::default();
        let mut args = HlInfoArgs {
            return_pointer: &mut value as *mut T as u64,
            return_size: std::mem::size_of::<T>() as u32,
            op,
            arg,
            pad: 0,
        };
        self.info_args(&mut args)?;
        Ok(value)
    }

    /// `DRM_IOCTL_HL_DEBUG` with `args` (compute node).
    pub fn debug(&self, args: &mut HlDebugArgs) -> io::Result<()> {
        // SAFETY: `HlDebugArgs` is the argument type of DRM_IOCTL_HL_DEBUG
        // (size asserted in `uapi`); the kernel reads and writes exactly it;
        // the pointers in it are only dereferenced by the kernel, which checks them.
        unsafe {
            ioctl(
                self.file.as_fd(),
                Updater::<{ DRM_IOCTL_HL_DEBUG as Opcode }, _>::new(args),
            )
        }?;
        Ok(())
    }

    /// `HL_INFO_HW_IP_INFO`.
    pub fn hw_ip_info(&self) -> io::Result<HlInfoHwIpInfo> {
        self.info_typed(HL_INFO_HW_IP_INFO)
    }

    /// `HL_INFO_SYNC_MANAGER` of `dcore`: the first SOB, monitor and CQ
    /// the driver leaves to users.
    pub fn sync_manager_info(&self, dcore: u32) -> io::Result<HlInfoSyncManager> {
        self.info_value(HL_INFO_SYNC_MANAGER, dcore)
    }

    /// `HL_INFO_DRAM_USAGE`: free DRAM of the device and DRAM of this context.
    pub fn dram_usage(&self) -> io::Result<HlInfoDramUsage> {
        self.info_typed(HL_INFO_DRAM_USAGE)
    }

    /// `HL_INFO_HW_IDLE`.
    pub fn hw_idle(&self) -> io::Result<HlInfoHwIdle> {
        self.info_typed(HL_INFO_HW_IDLE)
    }

    /// `HL_INFO_DEVICE_STATUS`.
    pub fn device_status(&self) -> io::Result<DeviceStatus> {
        Ok(self
            .info_typed::<HlInfoDeviceStatus>(HL_INFO_DEVICE_STATUS)?
            .status
            .into())
    }

    /// `HL_INFO_DEV_MEM_ALLOC_PAGE_SIZES`: bit n set = ALLOC supports 2^n pages.
    pub fn dev_mem_alloc_page_sizes(&self) -> io::Result<u64> {
        Ok(self
            .info_typed::<HlInfoDevMemallocPageSizes>(HL_INFO_DEV_MEM_ALLOC_PAGE_SIZES)?
            .page_order_bitmask)
    }

    /// Average cost of a null ioctl (INFO `DEVICE_STATUS`) over `n` calls, in
    /// nanoseconds: the baseline benchmarks compare against.
    pub fn null_ioctl_ns(&self, n: u32) -> io::Result<f64> {
        let t = std::time::Instant::now();
        for _ in 0..n {
            self.device_status()?;
        }
        Ok(t.elapsed().as_nanos() as f64 / f64::from(n.max(1)))
    }

    /// `HL_INFO_OPEN_STATS`.
    pub fn open_stats(&self) -> io::Result<HlOpenStatsInfo> {
        self.info_typed(HL_INFO_OPEN_STATS)
    }

    /// `DRM_IOCTL_HL_MEMORY` with caller-built arguments; the kernel writes the
    /// union back (also on failure, as DRM always copies back).
    pub fn memory_args(&self, args: &mut HlMemArgs) -> io::Result<()> {
        // SAFETY: `HlMemArgs` is the argument type of DRM_IOCTL_HL_MEMORY (size
        // asserted in `uapi`); the kernel reads and writes exactly it.
        unsafe {
            ioctl(
                self.file.as_fd(),
                Updater::<{ DRM_IOCTL_HL_MEMORY as Opcode }, _>::new(args),
            )
        }?;
        Ok(())
    }

    /// `HL_MEM_OP_ALLOC`: allocate `size` bytes of device memory (rounded up to
    /// whole DRAM pages) with `HL_MEM_*` `flags`; returns the handle (>= 1).
    pub fn alloc(&self, size: u64, flags: u32) -> io::Result<u64> {
        let mut args = HlMemArgs {
            arg0: size,
            op: HL_MEM_OP_ALLOC,
            flags,
            ..Default::default()
        };
        self.memory_args(&mut args)?;
        Ok(args.out_u64())
    }

    /// `HL_MEM_OP_FREE`: free the device memory of `handle`.
    pub fn free(&self, handle: u64) -> io::Result<()> {
        let mut args = HlMemArgs {
            arg0: handle,
            op: HL_MEM_OP_FREE,
            ..Default::default()
        };
        self.memory_args(&mut args)
    }

    /// `HL_MEM_OP_MAP` of a device handle at a driver-chosen VA, or at `hint` when
    /// it is free and aligned (`HL_MEM_FORCE_HINT` in `flags`: only there).
    pub fn map(&self, handle: u64, hint: u64, flags: u32) -> io::Result<u64> {
        let mut args = HlMemArgs {
            arg0: hint,
            arg1: handle,
            op: HL_MEM_OP_MAP,
            flags,
            ..Default::default()
        };
        self.memory_args(&mut args)?;
        Ok(args.out_u64())
    }

    /// `HL_MEM_OP_MAP` with `HL_MEM_USERPTR`: pin `size` bytes of this process's
    /// memory at `addr` and map them; the VA keeps `addr`'s offset in its page.
    pub fn map_host(&self, addr: u64, size: u64, hint: u64, flags: u32) -> io::Result<u64> {
        let mut args = HlMemArgs {
            op: HL_MEM_OP_MAP,
            flags: flags | HL_MEM_USERPTR,
            ..Default::default()
        };
        args.set_map_host(addr, size, hint);
        self.memory_args(&mut args)?;
        Ok(args.out_u64())
    }

    /// `HL_MEM_OP_EXPORT_DMABUF_FD`: export `size` bytes from `offset` of the
    /// DRAM mapping that starts at device VA `addr` as a dma-buf; `flags` may
    /// hold `O_RDWR` and `O_CLOEXEC`. Returns the dma-buf fd.
    pub fn export_dmabuf(
        &self,
        addr: u64,
        size: u64,
        offset: u64,
        flags: u32,
    ) -> io::Result<std::os::fd::OwnedFd> {
        let mut args = HlMemArgs {
            arg0: addr,
            arg1: size,
            arg2: offset,
            op: HL_MEM_OP_EXPORT_DMABUF_FD,
            flags,
            ..Default::default()
        };
        self.memory_args(&mut args)?;
        let fd = args.out_fd();
        if fd < 0 {
            return Err(io::Error::from_raw_os_error(-fd));
        }
        // SAFETY: the kernel just installed `fd` for this process; nothing
        // else owns it.
        Ok(unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) })
    }

    /// `HL_MEM_OP_UNMAP` of the exact VA a MAP returned.
    pub fn unmap(&self, va: u64) -> io::Result<()> {
        let mut args = HlMemArgs {
            arg0: va,
            op: HL_MEM_OP_UNMAP,
            ..Default::default()
        };
        self.memory_args(&mut args)
    }

    /// Issue an ioctl with any `_IOWR` opcode on a 64-byte buffer (tests of
    /// how the driver refuses numbers it does not serve).
    pub fn raw_ioctl<const OPCODE: Opcode>(&self, buf: &mut [u8; 64]) -> io::Result<()> {
        // SAFETY: the buffer is 64 bytes, at least the size any of our opcodes
        // encodes (callers pass opcodes of at most 64 bytes of argument); the
        // kernel reads and writes at most `_IOC_SIZE(OPCODE)` bytes of it.
        unsafe { ioctl(self.file.as_fd(), Updater::<OPCODE, [u8; 64]>::new(buf)) }?;
        Ok(())
    }
}

/// Device memory owned by this process: freed when dropped (`HL_MEM_OP_FREE`).
///
/// ```no_run
/// # fn main() -> std::io::Result<()> {
/// let dev = hlrs::Device::open_compute(0)?;
/// let mem = dev.allocate(1 << 30, hlrs::uapi::HL_MEM_CONTIGUOUS)?;
/// let map = mem.map(0, 0)?;
/// println!("1 GiB of DRAM at device VA {:#x}", map.va());
/// // `map` is unmapped, then `mem` freed, when they go out of scope.
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct DeviceMemory<'d> {
    dev: &'d Device,
    handle: u64,
}

impl<'d> DeviceMemory<'d> {
    /// The handle (>= 1).
    pub fn handle(&self) -> u64 {
        self.handle
    }

    /// Map the memory (see [`Device::map`]); the mapping borrows the memory,
    /// so it is always unmapped before the memory is freed.
    pub fn map(&self, hint: u64, flags: u32) -> io::Result<Mapping<'_>> {
        let va = self.dev.map(self.handle, hint, flags)?;
        Ok(Mapping { dev: self.dev, va })
    }

    /// Free now and report the result (dropping frees too, ignoring errors).
    pub fn free(self) -> io::Result<()> {
        let this = std::mem::ManuallyDrop::new(self);
        this.dev.free(this.handle)
    }
}

impl Drop for DeviceMemory<'_> {
    fn drop(&mut self) {
        let _ = self.dev.free(self.handle);
    }
}

/// A device VA mapping: unmapped when dropped (`HL_MEM_OP_UNMAP`).
#[derive(Debug)]
pub struct Mapping<'a> {
    dev: &'a Device,
    va: u64,
}

impl Mapping<'_> {
    /// The device VA (for a host buffer: including its offset in the page).
    pub fn va(&self) -> u64 {
        self.va
    }

    /// Export `size` bytes from `offset` of this (DRAM) mapping as a dma-buf
    /// (`O_RDWR | O_CLOEXEC`), for another device to import. While the fd
    /// lives, the mapping cannot be unmapped.
    pub fn export_dmabuf(&self, offset: u64, size: u64) -> io::Result<std::os::fd::OwnedFd> {
        self.dev.export_dmabuf(self.va, size, offset, DMABUF_FLAGS)
    }

    /// Unmap now and report the result (dropping unmaps too, ignoring errors).
    pub fn unmap(self) -> io::Result<()> {
        let this = std::mem::ManuallyDrop::new(self);
        this.dev.unmap(this.va)
    }
}

impl Drop for Mapping<'_> {
    fn drop(&mut self) {
        let _ = self.dev.unmap(self.va);
    }
}

impl Device {
    /// `HL_MEM_OP_ALLOC` returning an owner that frees on drop.
    pub fn allocate(&self, size: u64, flags: u32) -> io::Result<DeviceMemory<'_>> {
        Ok(DeviceMemory {
            dev: self,
            handle: self.alloc(size, flags)?,
        })
    }

    /// Map a host buffer (`HL_MEM_USERPTR`); the mapping borrows the buffer, so
    /// the memory stays valid while the device can reach it.
    pub fn map_buffer<'a>(
        &'a self,
        buf: &'a [u8],
        hint: u64,
        flags: u32,
    ) -> io::Result<Mapping<'a>> {
        let va = self.map_host(buf.as_ptr() as u64, buf.len() as u64, hint, flags)?;
        Ok(Mapping { dev: self, va })
    }
}

impl AsFd for Device {
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.file.as_fd()
    }
}

impl From<Device> for std::os::fd::OwnedFd {
    /// The node's fd (closing it closes the device).
    fn from(d: Device) -> Self {
        d.file.into()
    }
}

/// The flags [`Mapping::export_dmabuf`] exports with: `O_RDWR | O_CLOEXEC`.
pub const DMABUF_FLAGS: u32 = 0o2 | 0o2000000;

/// The errno of an [`io::Error`] (0 if it has none).
pub fn errno(e: &io::Error) -> i32 {
    e.raw_os_error().unwrap_or(0)
}

/// A printable string from a NUL-padded uAPI byte array.
pub fn c_string(bytes: &[u8]) -> String {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    String::from_utf8_lossy(&bytes[..end]).into_owned()
}

#[cfg(test)]
mod tests {
    use super::uapi::*;
    use super::*;
    use std::mem::size_of;

    #[test]
    fn ioctl_numbers_match_the_upstream_header() {
        assert_eq!(DRM_IOCTL_HL_INFO, 0xC018_6440);
        assert_eq!(DRM_IOCTL_HL_MEMORY, 0xC028_6444);
        assert_eq!(ioc_size(DRM_IOCTL_HL_MEMORY), size_of::<HlMemArgs>());
    }

    #[test]
    fn struct_sizes_match_the_upstream_header() {
        assert_eq!(size_of::<HlInfoArgs>(), 24);
        assert_eq!(size_of::<HlInfoHwIpInfo>(), 304);
        assert_eq!(size_of::<HlInfoDramUsage>(), 16);
        assert_eq!(size_of::<HlInfoHwIdle>(), 40);
        assert_eq!(size_of::<HlMemArgs>(), 40);
    }

    #[test]
    fn out_fd_is_the_low_four_bytes() {
        let mut a = HlMemArgs::default();
        a.set_out_fd_zeroed(5);
        let bytes = a.arg0.to_ne_bytes();
        assert_eq!(
            i32::from_ne_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]),
            5
        );
    }

    #[test]
    fn node_paths_follow_the_accel_layout() {
        assert_eq!(
            node_path(Node::Compute, 3),
            PathBuf::from("/dev/accel/accel3")
        );
        assert_eq!(
            node_path(Node::Control, 0),
            PathBuf::from("/dev/accel/accel_controlD0")
        );
    }

    #[test]
    fn bus_ids_are_normalised_like_libhlthunk() {
        assert_eq!(normalize_bus_id("01:00.0"), "0000:01:00.0");
        assert_eq!(normalize_bus_id("0000:01:00.0"), "0000:01:00.0");
    }

    #[test]
    fn device_status_values() {
        assert_eq!(DeviceStatus::from(0), DeviceStatus::Operational);
        assert_eq!(
            DeviceStatus::from(5),
            DeviceStatus::InResetAfterDeviceRelease
        );
        assert_eq!(DeviceStatus::from(9), DeviceStatus::Unknown(9));
    }

    #[test]
    fn c_strings_stop_at_the_first_nul() {
        assert_eq!(c_string(b"GAUDI2\0\0junk"), "GAUDI2");
        assert_eq!(c_string(b"full"), "full");
    }
}
