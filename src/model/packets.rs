// SPDX-License-Identifier: GPL-2.0

//! The packets of a Gaudi2 command buffer as a QMAN's command processor
//! decodes them (include/gaudi2/gaudi2_packets.h): little endian, each
//! packet starting with a u32 whose meaning depends on the packet and the
//! `ctl` u32 holding the opcode (bits 28:24) and the barrier bits (EB 29,
//! RB 30, MB 31, :40-50). Ported from the in-module simulation's decoder
//! (`src/hw/sim/packets.rs`) and extended to the packets a PDMA QMAN runs
//! on silicon.
//!
//! | packet | bytes | what the model does |
//! |---|---|---|
//! | `NOP`, `ARB_POINT`, `WAIT` | 8 | nothing (one engine, no arbitration, no cycles to wait) |
//! | `STOP` | 8 | ends the CB |
//! | `WREG_32` | 8 | `value` to register `block + ctl[15:0]` (the QMAN's block) |
//! | `WREG_BULK` | 8 + 8n | `n = size64` u64s to consecutive registers from `block + ctl[15:0]` |
//! | `MSG_LONG`, `MSG_PROT` | 16 | the u32 `value` to `addr` |
//! | `MSG_SHORT` | 8 | `value` to `CP_MSG_BASE[ctl[23:22]] + ctl[15:0]` (:110-114) |
//! | `FENCE` | 8 | waits until fence counter `cfg[31:30]` reaches `cfg[23:16]`, then takes `cfg[3:0]` off it (:127-137) |
//! | `LIN_DMA` | 24 | `tsize` bytes `src_addr` -> `dst_addr`, or a memset with the u64 `src_addr` (:144-161) |
//!
//! Any other opcode (`CP_DMA`, `REPEAT`, `CB_LIST`, `LOAD_AND_EXE`,
//! `WREG_64_*`, the ARC ones, and values no packet has) is refused as an
//! undefined opcode; a packet cut by the end of the CB as truncated.

/// `PACKET_*` opcodes (gaudi2_packets.h:17-35).
pub mod op {
    /// `PACKET_WREG_32`.
    pub const WREG_32: u32 = 0x1;
    /// `PACKET_WREG_BULK`.
    pub const WREG_BULK: u32 = 0x2;
    /// `PACKET_MSG_LONG`.
    pub const MSG_LONG: u32 = 0x3;
    /// `PACKET_MSG_SHORT`.
    pub const MSG_SHORT: u32 = 0x4;
    /// `PACKET_MSG_PROT`.
    pub const MSG_PROT: u32 = 0x7;
    /// `PACKET_FENCE`.
    pub const FENCE: u32 = 0x8;
    /// `PACKET_LIN_DMA`.
    pub const LIN_DMA: u32 = 0x9;
    /// `PACKET_NOP`.
    pub const NOP: u32 = 0xA;
    /// `PACKET_STOP`.
    pub const STOP: u32 = 0xB;
    /// `PACKET_ARB_POINT`.
    pub const ARB_POINT: u32 = 0xC;
    /// `PACKET_WAIT`.
    pub const WAIT: u32 = 0xD;
}

/// `GAUDI2_PKT_CTL_OPCODE_SHIFT` / `_MASK` (gaudi2_packets.h:40-41).
pub const CTL_OPCODE_SHIFT: u32 = 24;
/// The opcode field of `ctl`.
pub const CTL_OPCODE_MASK: u32 = 0x1F00_0000;
/// `GAUDI2_PKT_CTL_EB_MASK` (:44).
pub const CTL_EB: u32 = 1 << 29;
/// `GAUDI2_PKT_CTL_MB_MASK` (:50).
pub const CTL_MB: u32 = 1 << 31;
/// `GAUDI2_PKT_LIN_DMA_CTL_ENDIAN_SHIFT` / `_MASK` (:147-148).
pub const LIN_DMA_ENDIAN_SHIFT: u32 = 1;
/// `GAUDI2_PKT_LIN_DMA_CTL_MEMSET_MASK` (:151).
pub const LIN_DMA_MEMSET: u32 = 1 << 4;

/// How a `LIN_DMA` orders the bytes it moves (its `ENDIAN` field).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Swap {
    /// Bytes as they are (0).
    None,
    /// The two bytes of every 16-bit word swapped (1).
    Bits16,
    /// The four bytes of every 32-bit word reversed (2).
    Bits32,
    /// The eight bytes of every 64-bit word reversed (3).
    Bits64,
}

impl Swap {
    /// The swap the 2-bit `ENDIAN` field `field` selects.
    pub const fn from_field(field: u32) -> Self {
        match field & 3 {
            0 => Self::None,
            1 => Self::Bits16,
            2 => Self::Bits32,
            _ => Self::Bits64,
        }
    }

    /// Bytes of the word the swap works on (1: none).
    pub const fn unit(self) -> usize {
        match self {
            Self::None => 1,
            Self::Bits16 => 2,
            Self::Bits32 => 4,
            Self::Bits64 => 8,
        }
    }

    /// Swap every whole word of `buf` in place. O(len).
    pub fn apply(self, buf: &mut [u8]) {
        let unit = self.unit();
        if unit > 1 {
            buf.chunks_exact_mut(unit).for_each(<[u8]>::reverse);
        }
    }
}

/// The fields of a `LIN_DMA` packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LinDma {
    /// Bytes to move.
    pub tsize: u32,
    /// Source address, or the fill value in memset mode.
    pub src: u64,
    /// Destination address.
    pub dst: u64,
    /// Byte order on the way.
    pub swap: Swap,
    /// Memset mode.
    pub memset: bool,
}

/// A decoded packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Packet {
    /// `NOP`, `ARB_POINT`, `WAIT`.
    Nop,
    /// `STOP`.
    Stop,
    /// `WREG_32`: `value` to the register at `offset` in the QMAN's block.
    Wreg32 {
        /// Offset from the block base.
        offset: u32,
        /// The value.
        value: u32,
    },
    /// `WREG_BULK`: `count` u64s (in the packet after its header) to
    /// consecutive registers from `offset`.
    WregBulk {
        /// Offset from the block base.
        offset: u32,
        /// u64 values that follow.
        count: u32,
    },
    /// `MSG_LONG`/`MSG_PROT`: `value` to `addr`.
    MsgLong {
        /// The value.
        value: u32,
        /// The address.
        addr: u64,
    },
    /// `MSG_SHORT`: `value` to message base `base` + `offset`.
    MsgShort {
        /// The value.
        value: u32,
        /// Which `CP_MSG_BASE` (0..4).
        base: u32,
        /// Offset from it.
        offset: u32,
    },
    /// `FENCE`: wait for counter `id` to reach `target`, then take `dec`.
    Fence {
        /// The fence counter (0..4).
        id: u32,
        /// The value to wait for.
        target: u32,
        /// What to take off once reached.
        dec: u32,
    },
    /// `LIN_DMA`.
    LinDma(LinDma),
}

/// Why a packet cannot be executed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PacketError {
    /// An opcode the model does not execute, or no packet has.
    Undefined {
        /// The opcode field.
        opcode: u32,
    },
    /// The packet needs more bytes than the CB has left.
    Truncated {
        /// The opcode field.
        opcode: u32,
        /// Bytes the packet needs.
        need: u64,
    },
    /// A `LIN_DMA` whose `tsize` is not a whole number of its swap words.
    SwapSize {
        /// The transfer size.
        tsize: u32,
    },
}

/// The opcode in a `ctl` word.
pub const fn opcode(ctl: u32) -> u32 {
    (ctl & CTL_OPCODE_MASK) >> CTL_OPCODE_SHIFT
}

/// The little-endian u32 at `at` of `b` (0 past its end: callers checked
/// the length).
pub fn le32(b: &[u8], at: usize) -> u32 {
    b.get(at..at.saturating_add(4))
        .and_then(|s| <[u8; 4]>::try_from(s).ok())
        .map_or(0, u32::from_le_bytes)
}

/// The little-endian u64 at `at` of `b` (0 past its end).
pub fn le64(b: &[u8], at: usize) -> u64 {
    u64::from(le32(b, at)) | u64::from(le32(b, at.saturating_add(4))) << 32
}

/// Bytes of the packet whose first 8 bytes are `head`. O(1).
pub fn packet_size(head: &[u8; 8]) -> Result<u64, PacketError> {
    let (first, ctl) = (le32(head, 0), le32(head, 4));
    match opcode(ctl) {
        op::NOP | op::STOP | op::ARB_POINT | op::WAIT | op::WREG_32 | op::MSG_SHORT | op::FENCE => {
            Ok(8)
        }
        op::MSG_LONG | op::MSG_PROT => Ok(16),
        op::LIN_DMA => Ok(24),
        op::WREG_BULK => Ok(8 + 8 * u64::from(first)),
        opcode => Err(PacketError::Undefined { opcode }),
    }
}

/// Decode the packet whose first bytes (up to 24) are `p`; `have` is what
/// the CB has left from the packet's start. Returns it and its size. O(1).
pub fn decode(p: &[u8], have: u64) -> Result<(Packet, u64), PacketError> {
    let mut head = [0u8; 8];
    let ctl = le32(p, 4);
    let opcode = opcode(ctl);
    let short = |need| PacketError::Truncated { opcode, need };
    head.copy_from_slice(p.get(..8).ok_or(short(8))?);
    let size = packet_size(&head)?;
    if size > have || usize::try_from(size).is_ok_and(|s| s <= 24 && p.len() < s) {
        return Err(short(size));
    }
    let first = le32(p, 0);
    let packet = match opcode {
        op::STOP => Packet::Stop,
        op::WREG_32 => Packet::Wreg32 {
            offset: ctl & 0xFFFF,
            value: first,
        },
        op::WREG_BULK => Packet::WregBulk {
            offset: ctl & 0xFFFF,
            count: first,
        },
        op::MSG_LONG | op::MSG_PROT => Packet::MsgLong {
            value: first,
            addr: le64(p, 8),
        },
        op::MSG_SHORT => Packet::MsgShort {
            value: first,
            base: (ctl >> 22) & 3,
            offset: ctl & 0xFFFF,
        },
        op::FENCE => Packet::Fence {
            id: (first >> 30) & 3,
            target: (first >> 16) & 0xFF,
            dec: first & 0xF,
        },
        op::LIN_DMA => {
            let d = LinDma {
                tsize: first,
                src: le64(p, 8),
                dst: le64(p, 16),
                swap: Swap::from_field(ctl >> LIN_DMA_ENDIAN_SHIFT),
                memset: ctl & LIN_DMA_MEMSET != 0,
            };
            if !d.memset && d.tsize as usize % d.swap.unit() != 0 {
                return Err(PacketError::SwapSize { tsize: d.tsize });
            }
            Packet::LinDma(d)
        }
        _ => Packet::Nop,
    };
    Ok((packet, size))
}

/// Encoders, for tests and hosts that build command buffers.
pub mod build {
    use super::*;

    /// The `ctl` word of `opcode` with EB and MB set.
    pub const fn ctl(opcode: u32) -> u32 {
        (opcode << CTL_OPCODE_SHIFT) & CTL_OPCODE_MASK | CTL_EB | CTL_MB
    }

    /// A `NOP`.
    pub fn nop() -> [u8; 8] {
        let mut p = [0u8; 8];
        p[4..8].copy_from_slice(&ctl(op::NOP).to_le_bytes());
        p
    }

    /// A `MSG_LONG` writing `value` at `addr`.
    pub fn msg_long(addr: u64, value: u32) -> [u8; 16] {
        let mut p = [0u8; 16];
        p[0..4].copy_from_slice(&value.to_le_bytes());
        p[4..8].copy_from_slice(&ctl(op::MSG_LONG).to_le_bytes());
        p[8..16].copy_from_slice(&addr.to_le_bytes());
        p
    }

    /// A `LIN_DMA` of `tsize` bytes from `src` (memset: the value) to `dst`.
    pub fn lin_dma(src: u64, dst: u64, tsize: u32, memset: bool) -> [u8; 24] {
        let c = ctl(op::LIN_DMA) | if memset { LIN_DMA_MEMSET } else { 0 };
        let mut p = [0u8; 24];
        p[0..4].copy_from_slice(&tsize.to_le_bytes());
        p[4..8].copy_from_slice(&c.to_le_bytes());
        p[8..16].copy_from_slice(&src.to_le_bytes());
        p[16..24].copy_from_slice(&dst.to_le_bytes());
        p
    }
}
