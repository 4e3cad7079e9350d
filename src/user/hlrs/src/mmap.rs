//! mmap of the compute node: HW blocks (`HL_MEM_OP_MAP_BLOCK`) and timestamp
//! buffers (`HL_MEM_OP_TS_ALLOC`), as libhlthunk's `hlthunk_get_hw_block` and
//! `hlthunk_allocate_timestamp_elements` use them: the op returns a handle,
//! and the handle is the `offset` of a shared `mmap` of the device fd.

use crate::Device;
use rustix::mm::{mmap, munmap, MapFlags, ProtFlags};
use std::{ffi::c_void, io, os::fd::AsFd, ptr::NonNull};

/// A shared mapping of the device fd; unmapped on drop.
///
/// # Invariants
///
/// `ptr` is the start of a live `len`-byte mapping owned by this value.
#[derive(Debug)]
struct Region {
    ptr: NonNull<c_void>,
    len: usize,
}

impl Region {
    fn map(dev: &Device, offset: u64, len: usize) -> io::Result<Self> {
        // SAFETY: a new shared mapping of the device at an address the kernel
        // chooses; it aliases no Rust object.
        let p = unsafe {
            mmap(
                std::ptr::null_mut(),
                len,
                ProtFlags::READ | ProtFlags::WRITE,
                MapFlags::SHARED,
                dev.file.as_fd(),
                offset,
            )
        }?;
        let ptr = NonNull::new(p).ok_or_else(|| io::Error::from_raw_os_error(12))?;
        Ok(Self { ptr, len })
    }

    /// The `T` at byte offset `off`, if it lies inside and is aligned.
    fn slot<T>(&self, off: usize) -> Option<*mut T> {
        let size = std::mem::size_of::<T>();
        if off % size != 0 || off.checked_add(size)? > self.len {
            return None;
        }
        // SAFETY: `off + size <= len`: inside the live mapping.
        Some(unsafe { self.ptr.as_ptr().cast::<u8>().add(off).cast::<T>() })
    }

    fn read<T: Copy>(&self, off: usize) -> Option<T> {
        // SAFETY: inside the live mapping and aligned; volatile, since the
        // device (or the driver) reads and writes the same memory.
        self.slot::<T>(off).map(|p| unsafe { p.read_volatile() })
    }

    fn write<T: Copy>(&self, off: usize, value: T) -> io::Result<()> {
        let p = self
            .slot::<T>(off)
            .ok_or_else(|| io::Error::from_raw_os_error(22))?;
        // SAFETY: as in `read`.
        unsafe { p.write_volatile(value) };
        Ok(())
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        // SAFETY: by the invariant the mapping is ours and unmapped once, here.
        let _ = unsafe { munmap(self.ptr.as_ptr(), self.len) };
    }
}

/// The registers of one HW block, mapped into this process
/// ([`Device::map_hw_block`]); unmapped on drop.
#[derive(Debug)]
pub struct HwBlock<'d> {
    region: Region,
    handle: u64,
    _dev: std::marker::PhantomData<&'d Device>,
}

impl HwBlock<'_> {
    /// The block's mmap handle (from MAP_BLOCK).
    pub fn handle(&self) -> u64 {
        self.handle
    }

    /// Size in bytes.
    pub fn len(&self) -> usize {
        self.region.len
    }

    /// Whether the block is empty (never).
    pub fn is_empty(&self) -> bool {
        self.region.len == 0
    }

    /// User address of the mapping.
    pub fn addr(&self) -> u64 {
        self.region.ptr.as_ptr() as u64
    }

    /// Read the 32-bit register at byte offset `off`.
    pub fn read(&self, off: usize) -> Option<u32> {
        self.region.read(off)
    }

    /// Write the 32-bit register at byte offset `off`.
    pub fn write(&self, off: usize, value: u32) -> io::Result<()> {
        self.region.write(off, value)
    }
}

/// A timestamp buffer of `n` 64-bit elements, mapped into this process
/// ([`Device::timestamp_buffer`]); unmapped on drop (the kernel frees the
/// buffer when the device fd is closed).
#[derive(Debug)]
pub struct TimestampBuffer<'d> {
    region: Region,
    handle: u64,
    elements: u32,
    _dev: std::marker::PhantomData<&'d Device>,
}

impl TimestampBuffer<'_> {
    /// The buffer's mmap handle (from TS_ALLOC).
    pub fn handle(&self) -> u64 {
        self.handle
    }

    /// Number of elements.
    pub fn elements(&self) -> u32 {
        self.elements
    }

    /// Bytes mapped (the elements, rounded up to whole pages).
    pub fn mapped_len(&self) -> usize {
        self.region.len
    }

    /// User address of the mapping.
    pub fn addr(&self) -> u64 {
        self.region.ptr.as_ptr() as u64
    }

    /// Element `i`, as the device last wrote it.
    pub fn get(&self, i: u32) -> Option<u64> {
        if i >= self.elements {
            return None;
        }
        self.region.read(i as usize * 8)
    }

    /// Set element `i` (for example, clear it before arming a wait).
    pub fn set(&self, i: u32, value: u64) -> io::Result<()> {
        if i >= self.elements {
            return Err(io::Error::from_raw_os_error(22));
        }
        self.region.write(i as usize * 8, value)
    }
}

impl Device {
    /// `HL_MEM_OP_MAP_BLOCK`: the mmap handle and size of the HW block at
    /// device address `block_addr` (`CFG_BASE` + the block's offset).
    pub fn map_block(&self, block_addr: u64) -> io::Result<(u64, u32)> {
        let mut args = crate::uapi::HlMemArgs {
            arg0: block_addr,
            op: crate::uapi::HL_MEM_OP_MAP_BLOCK,
            ..Default::default()
        };
        self.memory_args(&mut args)?;
        Ok((args.out_u64(), args.out_block_size()))
    }

    /// `HL_MEM_OP_TS_ALLOC`: a timestamp buffer of `elements` elements; returns
    /// its mmap handle.
    pub fn ts_alloc(&self, elements: u32) -> io::Result<u64> {
        let mut args = crate::uapi::HlMemArgs {
            op: crate::uapi::HL_MEM_OP_TS_ALLOC,
            num_of_elements: elements,
            ..Default::default()
        };
        self.memory_args(&mut args)?;
        Ok(args.out_u64())
    }

    /// MAP_BLOCK of the block at `block_addr`, then a shared read-write mmap
    /// of the whole block (`hlthunk_get_hw_block`).
    pub fn map_hw_block(&self, block_addr: u64) -> io::Result<HwBlock<'_>> {
        let (handle, size) = self.map_block(block_addr)?;
        Ok(HwBlock {
            region: Region::map(self, handle, size as usize)?,
            handle,
            _dev: std::marker::PhantomData,
        })
    }

    /// TS_ALLOC of `elements` elements, then its mmap.
    pub fn timestamp_buffer(&self, elements: u32) -> io::Result<TimestampBuffer<'_>> {
        let handle = self.ts_alloc(elements)?;
        let len = (elements as usize * 8).div_ceil(4096) * 4096;
        Ok(TimestampBuffer {
            region: Region::map(self, handle, len)?,
            handle,
            elements,
            _dev: std::marker::PhantomData,
        })
    }

    /// A raw `mmap` of the device fd at `offset` (tests of the refusals);
    /// returns the address, to be given to [`Device::munmap`].
    pub fn mmap_raw(&self, offset: u64, len: usize) -> io::Result<u64> {
        let r = Region::map(self, offset, len)?;
        let addr = r.ptr.as_ptr() as u64;
        std::mem::forget(r);
        Ok(addr)
    }

    /// `munmap` of part or all of a mapping made by [`Device::mmap_raw`].
    ///
    /// # Safety
    ///
    /// `[addr, addr + len)` must lie in mappings made by `mmap_raw` that no
    /// Rust object refers to.
    pub unsafe fn munmap(&self, addr: u64, len: usize) -> io::Result<()> {
        // SAFETY: per the contract nothing refers to the range.
        unsafe { munmap(addr as *mut c_void, len) }?;
        Ok(())
    }
}

/// A command buffer (`DRM_IOCTL_HL_CB` CREATE), destroyed on drop
/// (libhlthunk's `hlthunk_request_command_buffer` and
/// `hlthunk_destroy_command_buffer`). Its memory is reached through
/// [`CommandBuffer::mmap`].
#[derive(Debug)]
pub struct CommandBuffer<'d> {
    dev: &'d Device,
    handle: u64,
    size: u32,
}

impl<'d> CommandBuffer<'d> {
    /// The CB's handle (also its mmap offset).
    pub fn handle(&self) -> u64 {
        self.handle
    }

    /// The size asked for at CREATE.
    pub fn size(&self) -> u32 {
        self.size
    }

    /// Bytes an mmap of the CB must cover: `max(size, 4096)` rounded up to
    /// whole pages.
    pub fn mapped_len(&self) -> usize {
        cb_mapped_len(self.size)
    }

    /// INFO: the CB's usage count (command submissions using it).
    pub fn usage_count(&self) -> io::Result<u32> {
        self.dev.cb_info(self.handle)
    }

    /// A shared read-write mmap of the whole CB; unmapped on drop (the CB
    /// lives on until both it and the mapping are gone).
    pub fn mmap(&self) -> io::Result<CbMapping<'d>> {
        self.dev.cb_mmap(self.handle, self.size)
    }

    /// DESTROY now, reporting the error (drop does it silently).
    pub fn destroy(self) -> io::Result<()> {
        let rc = self.dev.cb_destroy(self.handle);
        std::mem::forget(self);
        rc
    }
}

impl Drop for CommandBuffer<'_> {
    fn drop(&mut self) {
        let _ = self.dev.cb_destroy(self.handle);
    }
}

/// Bytes an mmap of a CB of `size` bytes must cover.
pub fn cb_mapped_len(size: u32) -> usize {
    (size as usize).max(4096).div_ceil(4096) * 4096
}

/// The mmap of a command buffer ([`CommandBuffer::mmap`]); unmapped on drop.
#[derive(Debug)]
pub struct CbMapping<'d> {
    region: Region,
    _dev: std::marker::PhantomData<&'d Device>,
}

impl CbMapping<'_> {
    /// Bytes mapped.
    pub fn len(&self) -> usize {
        self.region.len
    }

    /// Whether nothing is mapped (never).
    pub fn is_empty(&self) -> bool {
        self.region.len == 0
    }

    /// User address of the mapping.
    pub fn addr(&self) -> u64 {
        self.region.ptr.as_ptr() as u64
    }

    /// The 64-bit word at byte offset `off` (aligned, inside).
    pub fn read(&self, off: usize) -> Option<u64> {
        self.region.read(off)
    }

    /// Write the 64-bit word at byte offset `off` (aligned, inside).
    pub fn write(&self, off: usize, value: u64) -> io::Result<()> {
        self.region.write(off, value)
    }
}

impl Device {
    /// `DRM_IOCTL_HL_CB` with caller-built arguments; the kernel writes the
    /// union back (also on failure, as DRM always copies back).
    pub fn cb_args(&self, args: &mut crate::uapi::HlCbArgs) -> io::Result<()> {
        // SAFETY: `HlCbArgs` is the argument type of DRM_IOCTL_HL_CB (size
        // asserted in `uapi`); the kernel reads and writes exactly it.
        unsafe {
            rustix::ioctl::ioctl(
                self.file.as_fd(),
                rustix::ioctl::Updater::<
                    { crate::uapi::DRM_IOCTL_HL_CB as rustix::ioctl::Opcode },
                    _,
                >::new(args),
            )
        }?;
        Ok(())
    }

    /// CB CREATE of `size` bytes with `HL_CB_FLAGS_*` `flags`; returns the handle.
    pub fn cb_create(&self, size: u32, flags: u32) -> io::Result<u64> {
        let mut a = crate::uapi::HlCbArgs {
            op: crate::uapi::HL_CB_OP_CREATE,
            cb_size: size,
            flags,
            ..Default::default()
        };
        self.cb_args(&mut a)?;
        Ok(a.cb_handle)
    }

    /// CB DESTROY of `handle`.
    pub fn cb_destroy(&self, handle: u64) -> io::Result<()> {
        let mut a = crate::uapi::HlCbArgs {
            cb_handle: handle,
            op: crate::uapi::HL_CB_OP_DESTROY,
            ..Default::default()
        };
        self.cb_args(&mut a)
    }

    /// CB INFO of `handle`: its usage count.
    pub fn cb_info(&self, handle: u64) -> io::Result<u32> {
        let mut a = crate::uapi::HlCbArgs {
            cb_handle: handle,
            op: crate::uapi::HL_CB_OP_INFO,
            ..Default::default()
        };
        self.cb_args(&mut a)?;
        Ok(a.out_usage_cnt())
    }

    /// CB INFO with `HL_CB_FLAGS_GET_DEVICE_VA`: the device VA of a mapped CB.
    pub fn cb_device_va(&self, handle: u64) -> io::Result<u64> {
        let mut a = crate::uapi::HlCbArgs {
            cb_handle: handle,
            op: crate::uapi::HL_CB_OP_INFO,
            flags: crate::uapi::HL_CB_FLAGS_GET_DEVICE_VA,
            ..Default::default()
        };
        self.cb_args(&mut a)?;
        Ok(a.cb_handle)
    }

    /// A shared read-write mmap of the CB `handle` of `size` bytes (its
    /// whole page-rounded memory); unmapped on drop.
    pub fn cb_mmap(&self, handle: u64, size: u32) -> io::Result<CbMapping<'_>> {
        Ok(CbMapping {
            region: Region::map(self, handle, cb_mapped_len(size))?,
            _dev: std::marker::PhantomData,
        })
    }

    /// A command buffer of `size` bytes (RAII: destroyed on drop).
    pub fn command_buffer(&self, size: u32) -> io::Result<CommandBuffer<'_>> {
        let handle = self.cb_create(size, 0)?;
        Ok(CommandBuffer {
            dev: self,
            handle,
            size,
        })
    }
}
