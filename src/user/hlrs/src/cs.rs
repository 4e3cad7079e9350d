//! Command submission: Gaudi2 packets, command buffers built from them, CSs
//! of chunks (`DRM_IOCTL_HL_CS`) and waits for them (`DRM_IOCTL_HL_WAIT_CS`).
//!
//! ```no_run
//! # fn main() -> std::io::Result<()> {
//! use hlrs::{cs::{Cb, Cs}, uapi::GAUDI2_QUEUE_ID_PDMA_0_0, Device, HostBuffer};
//! let dev = Device::open_compute(0)?;
//! let mut src = HostBuffer::new(4096)?;
//! src.as_mut_slice().fill(7);
//! let dst = HostBuffer::new(4096)?;
//! let (s, d) = (dev.map_buffer(src.as_slice(), 0, 0)?, dev.map_buffer(dst.as_slice(), 0, 0)?);
//! // The CB itself lives in host memory, mapped too.
//! let cb = Cb::new().lin_dma(s.va(), d.va(), 4096);
//! let cb_buf = cb.to_host_buffer()?;
//! let cb_map = dev.map_buffer(cb_buf.as_slice(), 0, 0)?;
//! let fence = Cs::new().chunk(GAUDI2_QUEUE_ID_PDMA_0_0, cb_map.va(), cb.len()).submit(&dev)?;
//! fence.wait(&dev, 1_000_000)?;
//! assert!(dst.as_slice().iter().all(|&b| b == 7));
//! # Ok(()) }
//! ```

use crate::{uapi::*, Device, HostBuffer};
use rustix::ioctl::{ioctl, Opcode, Updater};
use std::{io, os::fd::AsFd};

/// The ENDIAN field of a `LIN_DMA`: how the bytes of each word are ordered
/// on the way.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Swap {
    /// As they are.
    None = 0,
    /// Swap the bytes of each 16-bit word.
    Bits16 = 1,
    /// Reverse each 32-bit word.
    Bits32 = 2,
    /// Reverse each 64-bit word.
    Bits64 = 3,
}

/// Packet encoders (include/gaudi2/gaudi2_packets.h, little endian).
pub mod packet {
    use super::Swap;
    use crate::uapi::*;

    fn ctl(opcode: u32) -> u32 {
        // Engine and message barriers, as upstream's own packets set them.
        packet_ctl(opcode, true, true)
    }

    /// A `NOP`.
    pub fn nop() -> [u8; PACKET_NOP_SIZE] {
        let mut p = [0u8; PACKET_NOP_SIZE];
        p[4..8].copy_from_slice(&ctl(PACKET_NOP).to_le_bytes());
        p
    }

    /// A `MSG_LONG`: write `value` at device address `addr`.
    pub fn msg_long(addr: u64, value: u32) -> [u8; PACKET_MSG_LONG_SIZE] {
        let mut p = [0u8; PACKET_MSG_LONG_SIZE];
        p[0..4].copy_from_slice(&value.to_le_bytes());
        p[4..8].copy_from_slice(&ctl(PACKET_MSG_LONG).to_le_bytes());
        p[8..16].copy_from_slice(&addr.to_le_bytes());
        p
    }

    /// A `LIN_DMA` of `tsize` bytes from `src` to `dst` with `swap`; with
    /// `memset`, `src` is the 64-bit fill value.
    pub fn lin_dma(
        src: u64,
        dst: u64,
        tsize: u32,
        swap: Swap,
        memset: bool,
    ) -> [u8; PACKET_LIN_DMA_SIZE] {
        let mut c = ctl(PACKET_LIN_DMA)
            | ((swap as u32) << GAUDI2_PKT_LIN_DMA_CTL_ENDIAN_SHIFT)
                & GAUDI2_PKT_LIN_DMA_CTL_ENDIAN_MASK;
        if memset {
            c |= GAUDI2_PKT_LIN_DMA_CTL_MEMSET_MASK;
        }
        let mut p = [0u8; PACKET_LIN_DMA_SIZE];
        p[0..4].copy_from_slice(&tsize.to_le_bytes());
        p[4..8].copy_from_slice(&c.to_le_bytes());
        p[8..16].copy_from_slice(&src.to_le_bytes());
        p[16..24].copy_from_slice(&dst.to_le_bytes());
        p
    }

    /// A packet of any opcode with the `first` word (a refused one, for tests).
    pub fn raw(opcode: u32, first: u32) -> [u8; 8] {
        let mut p = [0u8; 8];
        p[0..4].copy_from_slice(&first.to_le_bytes());
        p[4..8].copy_from_slice(&packet_ctl(opcode, false, false).to_le_bytes());
        p
    }
}

/// A command buffer under construction: packets appended in order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Cb {
    bytes: Vec<u8>,
}

impl Cb {
    /// An empty CB.
    pub fn new() -> Self {
        Self::default()
    }

    /// Append raw bytes (a packet from [`packet`]).
    pub fn push(mut self, packet: &[u8]) -> Self {
        self.bytes.extend_from_slice(packet);
        self
    }

    /// Append a `NOP`.
    pub fn nop(self) -> Self {
        self.push(&packet::nop())
    }

    /// Append a `MSG_LONG`.
    pub fn msg_long(self, addr: u64, value: u32) -> Self {
        self.push(&packet::msg_long(addr, value))
    }

    /// Append a plain `LIN_DMA` copy.
    pub fn lin_dma(self, src: u64, dst: u64, tsize: u32) -> Self {
        self.push(&packet::lin_dma(src, dst, tsize, Swap::None, false))
    }

    /// Append a `LIN_DMA` copy with a byte swap.
    pub fn lin_dma_swap(self, src: u64, dst: u64, tsize: u32, swap: Swap) -> Self {
        self.push(&packet::lin_dma(src, dst, tsize, swap, false))
    }

    /// Append a `LIN_DMA` memset of `tsize` bytes at `dst` with the 64-bit
    /// `value` (byte `i` gets byte `i % 8` of it, little endian).
    pub fn memset(self, dst: u64, value: u64, tsize: u32) -> Self {
        self.push(&packet::lin_dma(value, dst, tsize, Swap::None, true))
    }

    /// The bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// Bytes of packets, as a chunk's `cb_size`.
    pub fn len(&self) -> u32 {
        u32::try_from(self.bytes.len()).unwrap_or(u32::MAX)
    }

    /// Whether no packet was appended.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// A fresh host buffer (rounded up to a page) holding the CB at its start.
    pub fn to_host_buffer(&self) -> io::Result<HostBuffer> {
        self.to_host_buffer_at(0)
    }

    /// A fresh host buffer holding the CB at byte `offset`.
    pub fn to_host_buffer_at(&self, offset: usize) -> io::Result<HostBuffer> {
        let len = (offset + self.bytes.len()).max(1).div_ceil(4096) * 4096;
        let mut b = HostBuffer::new(len)?;
        b.as_mut_slice()[offset..offset + self.bytes.len()].copy_from_slice(&self.bytes);
        Ok(b)
    }
}

/// One chunk (a job) of a CS: `size` bytes of CB at device address `cb` on
/// `queue`, as a user CB.
pub fn chunk(queue: u32, cb: u64, size: u32) -> HlCsChunk {
    HlCsChunk {
        cb_handle: cb,
        queue_index: queue,
        cb_size: size,
        cs_chunk_flags: HL_CS_CHUNK_FLAGS_USER_ALLOC_CB,
        ..Default::default()
    }
}

/// A command submission under construction.
#[derive(Clone, Debug, Default)]
pub struct Cs {
    execute: Vec<HlCsChunk>,
    restore: Vec<HlCsChunk>,
    flags: u32,
    timeout_s: u32,
}

impl Cs {
    /// An empty CS (flags 0).
    pub fn new() -> Self {
        Self::default()
    }

    /// Add an execute chunk.
    pub fn chunk(mut self, queue: u32, cb: u64, size: u32) -> Self {
        self.execute.push(chunk(queue, cb, size));
        self
    }

    /// Add a raw execute chunk (any flags, for tests).
    pub fn raw_chunk(mut self, c: HlCsChunk) -> Self {
        self.execute.push(c);
        self
    }

    /// Add a restore chunk and set `HL_CS_FLAGS_FORCE_RESTORE`.
    pub fn restore_chunk(mut self, queue: u32, cb: u64, size: u32) -> Self {
        self.restore.push(chunk(queue, cb, size));
        self.flags |= HL_CS_FLAGS_FORCE_RESTORE;
        self
    }

    /// OR `flags` in (`HL_CS_FLAGS_*`).
    pub fn flags(mut self, flags: u32) -> Self {
        self.flags |= flags;
        self
    }

    /// Ask for the completion time (`HL_CS_FLAGS_TIMESTAMP`).
    pub fn timestamp(self) -> Self {
        self.flags(HL_CS_FLAGS_TIMESTAMP)
    }

    /// A timeout of its own, in seconds (`HL_CS_FLAGS_CUSTOM_TIMEOUT`).
    pub fn timeout(mut self, seconds: u32) -> Self {
        self.timeout_s = seconds;
        self.flags(HL_CS_FLAGS_CUSTOM_TIMEOUT)
    }

    /// The ioctl arguments (the arrays must outlive their use).
    pub fn args(&self) -> HlCsArgs {
        HlCsArgs {
            chunks_restore: self.restore.as_ptr() as u64,
            chunks_execute: self.execute.as_ptr() as u64,
            num_chunks_restore: self.restore.len() as u32,
            num_chunks_execute: self.execute.len() as u32,
            timeout: self.timeout_s,
            cs_flags: self.flags,
            ..Default::default()
        }
    }

    /// Submit; the fence of the CS on success.
    pub fn submit(&self, dev: &Device) -> io::Result<Fence> {
        let mut a = self.args();
        dev.cs_args(&mut a)?;
        Ok(Fence { seq: a.out_seq() })
    }
}

/// A submitted CS, by sequence number.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fence {
    /// The sequence number.
    pub seq: u64,
}

/// What a successful WAIT_CS said.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CsDone {
    /// Completed; `gone`: too old to be tracked; `timestamp`: completion
    /// time if the CS asked for it.
    Completed {
        /// `HL_WAIT_CS_STATUS_FLAG_GONE`.
        gone: bool,
        /// Completion time (ktime ns).
        timestamp: Option<i64>,
    },
    /// Still running when the timeout passed.
    Busy,
}

impl Fence {
    /// Wait up to `timeout_us` (see [`Device::wait_cs`]).
    pub fn wait(&self, dev: &Device, timeout_us: u64) -> io::Result<CsDone> {
        dev.wait_cs(self.seq, timeout_us)
    }
}

impl Device {
    /// `DRM_IOCTL_HL_CS` with caller-built arguments (the kernel writes
    /// `out` back, except after `EAGAIN`).
    pub fn cs_args(&self, args: &mut HlCsArgs) -> io::Result<()> {
        // SAFETY: `HlCsArgs` is the argument of DRM_IOCTL_HL_CS (size
        // asserted in `uapi`); its pointers are only read by the kernel,
        // which checks them.
        unsafe {
            ioctl(
                self.as_fd(),
                Updater::<{ DRM_IOCTL_HL_CS as Opcode }, _>::new(args),
            )
        }?;
        Ok(())
    }

    /// `DRM_IOCTL_HL_WAIT_CS` with caller-built arguments.
    pub fn wait_cs_args(&self, args: &mut HlWaitCsArgs) -> io::Result<()> {
        // SAFETY: `HlWaitCsArgs` is the argument of DRM_IOCTL_HL_WAIT_CS.
        unsafe {
            ioctl(
                self.as_fd(),
                Updater::<{ DRM_IOCTL_HL_WAIT_CS as Opcode }, _>::new(args),
            )
        }?;
        Ok(())
    }

    /// Wait for CS `seq` up to `timeout_us` (0: poll). `ETIMEDOUT` if it
    /// ran past its timeout, `EIO` if aborted, `EINVAL` for a future
    /// sequence, `EINTR` on a signal.
    pub fn wait_cs(&self, seq: u64, timeout_us: u64) -> io::Result<CsDone> {
        let mut a = HlWaitCsArgs {
            seq,
            timeout_us,
            ..Default::default()
        };
        self.wait_cs_args(&mut a)?;
        Ok(match a.out_status() {
            HL_WAIT_CS_STATUS_BUSY => CsDone::Busy,
            _ => CsDone::Completed {
                gone: a.out_flags() & HL_WAIT_CS_STATUS_FLAG_GONE != 0,
                timestamp: (a.out_flags() & HL_WAIT_CS_STATUS_FLAG_TIMESTAMP_VLD != 0)
                    .then(|| a.out_timestamp_nsec()),
            },
        })
    }

    /// Submit one chunk of `cb` bytes at device address `cb_va` on `queue`
    /// and wait for it (up to `timeout_us`).
    pub fn run_cb(&self, queue: u32, cb_va: u64, size: u32, timeout_us: u64) -> io::Result<CsDone> {
        Cs::new()
            .chunk(queue, cb_va, size)
            .submit(self)?
            .wait(self, timeout_us)
    }

    /// `HL_INFO_CS_COUNTERS`.
    pub fn cs_counters(&self) -> io::Result<HlInfoCsCounters> {
        self.info_typed(HL_INFO_CS_COUNTERS)
    }

    /// `HL_INFO_PAGE_FAULT_EVENT` (all zero when none was captured).
    pub fn page_fault_event(&self) -> io::Result<HlPageFaultInfo> {
        self.info_typed(HL_INFO_PAGE_FAULT_EVENT)
    }

    /// `HL_INFO_RAZWI_EVENT` (all zero when none was captured).
    pub fn razwi_event(&self) -> io::Result<HlInfoRazwiEvent> {
        self.info_typed(HL_INFO_RAZWI_EVENT)
    }

    /// `HL_INFO_CS_TIMEOUT_EVENT`.
    pub fn cs_timeout_event(&self) -> io::Result<HlInfoCsTimeoutEvent> {
        self.info_typed(HL_INFO_CS_TIMEOUT_EVENT)
    }

    /// `HL_INFO_UNDEFINED_OPCODE_EVENT`.
    pub fn undefined_opcode_event(&self) -> io::Result<HlInfoUndefinedOpcodeEvent> {
        self.info_typed(HL_INFO_UNDEFINED_OPCODE_EVENT)
    }

    /// `HL_INFO_GET_EVENTS`: the notifier events since the last call.
    pub fn events(&self) -> io::Result<u64> {
        let mut v = [0u8; 8];
        self.info_into(HL_INFO_GET_EVENTS, 0, &mut v)?;
        Ok(u64::from_ne_bytes(v))
    }

    /// `HL_INFO_USER_MAPPINGS`: the mappings captured at the page fault
    /// (room for `max` of them).
    pub fn user_mappings(&self, max: usize) -> io::Result<Vec<HlUserMapping>> {
        let mut v = vec![HlUserMapping::default(); max.max(1)];
        let mut args = HlInfoArgs {
            return_pointer: v.as_mut_ptr() as u64,
            return_size: (max * std::mem::size_of::<HlUserMapping>()) as u32,
            op: HL_INFO_USER_MAPPINGS,
            arg: 0,
            pad: 0,
        };
        self.info_args(&mut args)?;
        v.truncate((args.arg as usize).min(max));
        Ok(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packets_have_upstreams_layout() {
        let n = packet::nop();
        assert_eq!(
            u32::from_le_bytes(n[4..8].try_into().unwrap()) >> 24 & 0x1f,
            PACKET_NOP
        );
        let m = packet::msg_long(0x1122_3344_5566_7788, 0xAABB_CCDD);
        assert_eq!(&m[0..4], &0xAABB_CCDDu32.to_le_bytes());
        assert_eq!(&m[8..16], &0x1122_3344_5566_7788u64.to_le_bytes());
        let l = packet::lin_dma(1, 2, 3, Swap::Bits64, true);
        let ctl = u32::from_le_bytes(l[4..8].try_into().unwrap());
        assert_eq!(ctl >> 24 & 0x1f, PACKET_LIN_DMA);
        assert_eq!(ctl >> 1 & 3, 3);
        assert_eq!(ctl & 0x10, 0x10);
        assert_eq!(Cb::new().nop().msg_long(0, 0).lin_dma(0, 0, 0).len(), 48);
    }

    #[test]
    fn cs_args_point_at_the_chunks() {
        let cs = Cs::new()
            .chunk(4, 0x1000, 8)
            .restore_chunk(0, 0x2000, 16)
            .timestamp()
            .timeout(3);
        let a = cs.args();
        assert_eq!(
            (a.num_chunks_execute, a.num_chunks_restore, a.timeout),
            (1, 1, 3)
        );
        assert_eq!(
            a.cs_flags,
            HL_CS_FLAGS_FORCE_RESTORE | HL_CS_FLAGS_TIMESTAMP | HL_CS_FLAGS_CUSTOM_TIMEOUT
        );
        assert_eq!(std::mem::size_of::<HlCsArgs>(), 48);
        assert_eq!(std::mem::size_of::<HlWaitCsArgs>(), 56);
        assert_eq!(std::mem::size_of::<HlCsChunk>(), 64);
        assert_eq!(DRM_IOCTL_HL_CS, 0xC030_6442);
    }
}
