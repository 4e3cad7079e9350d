// SPDX-License-Identifier: GPL-2.0

//! The packets of a Gaudi2 command buffer as a QMAN's command processor
//! decodes them (include/gaudi2/gaudi2_packets.h): little endian, every
//! packet starting with a u32 whose meaning depends on the packet and the
//! `ctl` u32 holding the opcode (bits 24-28) and the barrier bits (EB 29, RB
//! 30, MB 31).
//!
//! The simulated engines execute three packets:
//!
//! - `NOP` (8 bytes);
//! - `MSG_LONG` (16 bytes): the u32 `value` written to `addr`;
//! - `LIN_DMA` (24 bytes): `tsize` bytes from `src_addr` to `dst_addr`; in
//!   memset mode `src_addr` is the 64-bit fill value (byte `i` of the
//!   destination gets byte `i % 8` of it, little endian, as upstream's
//!   scrubber fills DRAM with a u64); the endian field swaps the bytes of
//!   each 16-, 32- or 64-bit word on the way (values 1, 2, 3; 0 moves bytes
//!   as they are), which needs `tsize` to be a whole number of words.
//!   `WRCOMP` (a completion write to the engine's configured address) and
//!   the context id are decoded and not acted on: the simulated DMA has no
//!   completion registers, and its ASID comes from the queue.
//!
//! Every other opcode (real ones such as `WREG_32` or `FENCE`, and values
//! no packet has) is refused with [`PacketError::Unsupported`]; a packet
//! cut by the end of the CB with [`PacketError::Truncated`]. The barrier
//! bits need no action: an engine executes its packets one after another.

use crate::uapi::*;
use kernel::prelude::*;

/// How a `LIN_DMA` orders the bytes it moves (its `ENDIAN` field).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Swap {
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
    pub(crate) const fn from_field(field: u32) -> Self {
        match field & 3 {
            0 => Self::None,
            1 => Self::Bits16,
            2 => Self::Bits32,
            _ => Self::Bits64,
        }
    }

    /// Bytes of the word the swap works on (1: none).
    pub(crate) const fn unit(self) -> usize {
        match self {
            Self::None => 1,
            Self::Bits16 => 2,
            Self::Bits32 => 4,
            Self::Bits64 => 8,
        }
    }

    /// Swap every whole word of `buf` in place (a tail shorter than a word,
    /// which a checked packet never leaves, stays as it is). O(len).
    pub(crate) fn apply(self, buf: &mut [u8]) {
        let unit = self.unit();
        if unit > 1 {
            buf.chunks_exact_mut(unit).for_each(<[u8]>::reverse);
        }
    }
}

/// The fields of a `LIN_DMA` packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct LinDma {
    /// Bytes to move (`tsize`, up to 4 GiB - 1).
    pub(crate) tsize: u32,
    /// Source address, or the fill value in memset mode.
    pub(crate) src: u64,
    /// Destination address.
    pub(crate) dst: u64,
    /// Byte order on the way.
    pub(crate) swap: Swap,
    /// Memset mode.
    pub(crate) memset: bool,
    /// A completion write was asked for (not simulated).
    pub(crate) wrcomp: bool,
    /// The context id field (not used: the queue's ASID translates).
    pub(crate) context_id: u16,
}

/// A packet the simulated engines execute.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Packet {
    /// `NOP`.
    Nop,
    /// `MSG_LONG`: write `value` (4 bytes, little endian) at `addr`.
    MsgLong {
        /// The value.
        value: u32,
        /// The address.
        addr: u64,
    },
    /// `LIN_DMA`.
    LinDma(LinDma),
}

pub(crate) use crate::hw::engines::PacketError;

/// The opcode in a `ctl` word.
pub(crate) const fn opcode(ctl: u32) -> u32 {
    (ctl & GAUDI2_PKT_CTL_OPCODE_MASK) >> GAUDI2_PKT_CTL_OPCODE_SHIFT
}

/// Bytes of the packet whose first 8 bytes are `head`, if the engines
/// execute it. O(1).
pub(crate) fn packet_size(head: [u8; 8]) -> Result<usize, PacketError> {
    let ctl = u32::from_le_bytes([head[4], head[5], head[6], head[7]]);
    match opcode(ctl) {
        PACKET_NOP => Ok(PACKET_NOP_SIZE),
        PACKET_MSG_LONG => Ok(PACKET_MSG_LONG_SIZE),
        PACKET_LIN_DMA => Ok(PACKET_LIN_DMA_SIZE),
        opcode => Err(PacketError::Unsupported { opcode }),
    }
}

/// The little-endian u32 at `at` of `b` (0 past its end: callers checked
/// the length).
fn le32(b: &[u8], at: usize) -> u32 {
    let mut w = [0u8; 4];
    if let Some(s) = b.get(at..at.saturating_add(4)) {
        w.copy_from_slice(s);
    }
    u32::from_le_bytes(w)
}

/// The little-endian u64 at `at` of `b` (0 past its end).
fn le64(b: &[u8], at: usize) -> u64 {
    u64::from(le32(b, at)) | u64::from(le32(b, at.saturating_add(4))) << 32
}

/// Decode the packet at the start of `bytes` (the rest of the CB); returns
/// it and its size. O(1).
pub(crate) fn decode(bytes: &[u8]) -> Result<(Packet, usize), PacketError> {
    let mut head = [0u8; 8];
    let ctl_opcode = opcode(le32(bytes, 4));
    let short = |need| PacketError::Truncated {
        opcode: ctl_opcode,
        need,
    };
    head.copy_from_slice(bytes.get(..8).ok_or(short(8))?);
    let size = packet_size(head)?;
    let p = bytes.get(..size).ok_or(short(size))?;
    let (first, ctl) = (le32(p, 0), le32(p, 4));
    let packet = match opcode(ctl) {
        PACKET_MSG_LONG => Packet::MsgLong {
            value: first,
            addr: le64(p, 8),
        },
        PACKET_LIN_DMA => {
            let d = LinDma {
                tsize: first,
                src: le64(p, 8),
                dst: le64(p, 16),
                swap: Swap::from_field(
                    (ctl & GAUDI2_PKT_LIN_DMA_CTL_ENDIAN_MASK)
                        >> GAUDI2_PKT_LIN_DMA_CTL_ENDIAN_SHIFT,
                ),
                memset: ctl & GAUDI2_PKT_LIN_DMA_CTL_MEMSET_MASK != 0,
                wrcomp: ctl & GAUDI2_PKT_LIN_DMA_CTL_WRCOMP_MASK != 0,
                context_id: ((ctl & GAUDI2_PKT_LIN_DMA_CTL_CONTEXT_ID_MASK)
                    >> GAUDI2_PKT_LIN_DMA_CTL_CONTEXT_ID_SHIFT) as u16,
            };
            let unit = d.swap.unit() as u32;
            if !d.memset && d.tsize % unit != 0 {
                return Err(PacketError::SwapSize { tsize: d.tsize });
            }
            Packet::LinDma(d)
        }
        _ => Packet::Nop,
    };
    Ok((packet, size))
}

/// Encoders, for the tests of the engines and of the driver above them.
#[cfg(CONFIG_KUNIT)]
pub(crate) mod build {
    use super::*;

    /// A `NOP` with the barrier bits `eb` and `mb`.
    pub(crate) fn nop(eb: bool, mb: bool) -> [u8; PACKET_NOP_SIZE] {
        let mut p = [0u8; PACKET_NOP_SIZE];
        p[4..8].copy_from_slice(&packet_ctl(PACKET_NOP, eb, mb).to_le_bytes());
        p
    }

    /// A `MSG_LONG` writing `value` at `addr`.
    pub(crate) fn msg_long(addr: u64, value: u32) -> [u8; PACKET_MSG_LONG_SIZE] {
        let mut p = [0u8; PACKET_MSG_LONG_SIZE];
        p[0..4].copy_from_slice(&value.to_le_bytes());
        p[4..8].copy_from_slice(&packet_ctl(PACKET_MSG_LONG, false, true).to_le_bytes());
        p[8..16].copy_from_slice(&addr.to_le_bytes());
        p
    }

    /// A `LIN_DMA` of `tsize` bytes from `src` (memset: the value) to `dst`
    /// with the ENDIAN field `endian`.
    pub(crate) fn lin_dma(
        src: u64,
        dst: u64,
        tsize: u32,
        endian: u32,
        memset: bool,
    ) -> [u8; PACKET_LIN_DMA_SIZE] {
        let mut ctl = packet_ctl(PACKET_LIN_DMA, true, true)
            | (endian << GAUDI2_PKT_LIN_DMA_CTL_ENDIAN_SHIFT) & GAUDI2_PKT_LIN_DMA_CTL_ENDIAN_MASK;
        if memset {
            ctl |= GAUDI2_PKT_LIN_DMA_CTL_MEMSET_MASK;
        }
        let mut p = [0u8; PACKET_LIN_DMA_SIZE];
        p[0..4].copy_from_slice(&tsize.to_le_bytes());
        p[4..8].copy_from_slice(&ctl.to_le_bytes());
        p[8..16].copy_from_slice(&src.to_le_bytes());
        p[16..24].copy_from_slice(&dst.to_le_bytes());
        p
    }
}

#[kunit_tests(hlrs_packets)]
mod tests {
    use super::{build::*, *};

    #[test]
    fn nop_and_msg_long_decode_every_field() -> Result {
        for (eb, mb) in [(false, false), (true, false), (false, true), (true, true)] {
            let mut b = nop(eb, mb);
            // The reserved word is ignored.
            b[0] = 0x5a;
            assert_eq!(decode(&b), Ok((Packet::Nop, 8)));
        }
        let m = msg_long(0xFFF0_0000_1234_5678, 0xDEAD_BEEF);
        assert_eq!(
            decode(&m),
            Ok((
                Packet::MsgLong {
                    value: 0xDEAD_BEEF,
                    addr: 0xFFF0_0000_1234_5678
                },
                16
            ))
        );
        // Extra bytes after the packet belong to the next one.
        let mut two = [0u8; 24];
        two[..16].copy_from_slice(&m);
        two[16..].copy_from_slice(&nop(false, false));
        assert_eq!(decode(&two).map(|(_, n)| n), Ok(16));
        assert_eq!(decode(&two[16..]), Ok((Packet::Nop, 8)));
        Ok(())
    }

    #[test]
    fn lin_dma_decodes_every_field() -> Result {
        let p = lin_dma(0x1000_FFFF_FD00_0010, 0x1001_0018_0000_0008, 4096, 2, false);
        let (pk, n) = decode(&p).map_err(|_| EINVAL)?;
        assert_eq!(n, 24);
        let Packet::LinDma(d) = pk else {
            return Err(EINVAL);
        };
        assert_eq!(d.tsize, 4096);
        assert_eq!(d.src, 0x1000_FFFF_FD00_0010);
        assert_eq!(d.dst, 0x1001_0018_0000_0008);
        assert_eq!(d.swap, Swap::Bits32);
        assert!(!d.memset && !d.wrcomp);
        assert_eq!(d.context_id, 0);
        // WRCOMP, the context id and memset, set by hand.
        let mut q = lin_dma(0xABCD, 0x2000, 7, 0, true);
        let ctl = u32::from_le_bytes([q[4], q[5], q[6], q[7]]) | 1 | (0x1234 << 8);
        q[4..8].copy_from_slice(&ctl.to_le_bytes());
        let Ok((Packet::LinDma(d), 24)) = decode(&q) else {
            return Err(EINVAL);
        };
        assert!(d.memset && d.wrcomp);
        assert_eq!((d.context_id, d.tsize, d.src), (0x1234, 7, 0xABCD));
        // The four ENDIAN values.
        for (f, s) in [
            (0, Swap::None),
            (1, Swap::Bits16),
            (2, Swap::Bits32),
            (3, Swap::Bits64),
        ] {
            assert_eq!(d_of(&lin_dma(0, 8, 64, f, false))?.swap, s);
        }
        Ok(())
    }

    fn d_of(p: &[u8]) -> Result<LinDma> {
        match decode(p) {
            Ok((Packet::LinDma(d), _)) => Ok(d),
            _ => Err(EINVAL),
        }
    }

    #[test]
    fn bad_packets_are_refused() {
        // Every opcode but the three, including 0 and the ones no packet has.
        for op in 0..32u32 {
            let mut b = [0u8; 24];
            b[4..8].copy_from_slice(&packet_ctl(op, false, false).to_le_bytes());
            let r = decode(&b);
            match op {
                PACKET_NOP | PACKET_MSG_LONG | PACKET_LIN_DMA => assert!(r.is_ok()),
                _ => assert_eq!(r, Err(PacketError::Unsupported { opcode: op })),
            }
        }
        // Truncated: a header cut short, a packet cut short.
        let m = msg_long(0x10, 1);
        assert_eq!(
            decode(&m[..15]),
            Err(PacketError::Truncated {
                opcode: PACKET_MSG_LONG,
                need: 16
            })
        );
        assert_eq!(
            decode(&m[..5]),
            Err(PacketError::Truncated { opcode: 0, need: 8 })
        );
        assert_eq!(decode(&[]).map_err(|e| e.opcode()), Err(0));
        let l = lin_dma(0, 8, 16, 0, false);
        assert_eq!(
            decode(&l[..23]),
            Err(PacketError::Truncated {
                opcode: PACKET_LIN_DMA,
                need: 24
            })
        );
        // A swap that does not divide the size; memset ignores the swap.
        assert_eq!(
            decode(&lin_dma(0, 8, 6, 2, false)),
            Err(PacketError::SwapSize { tsize: 6 })
        );
        assert_eq!(
            decode(&lin_dma(0, 8, 7, 1, false)).map_err(|e| e.opcode()),
            Err(PACKET_LIN_DMA)
        );
        assert!(decode(&lin_dma(0, 8, 6, 3, true)).is_ok());
        assert!(decode(&lin_dma(0, 8, 8, 3, false)).is_ok());
    }

    #[test]
    fn swaps_reorder_words() {
        let src: [u8; 8] = [1, 2, 3, 4, 5, 6, 7, 8];
        for (s, want) in [
            (Swap::None, [1, 2, 3, 4, 5, 6, 7, 8]),
            (Swap::Bits16, [2, 1, 4, 3, 6, 5, 8, 7]),
            (Swap::Bits32, [4, 3, 2, 1, 8, 7, 6, 5]),
            (Swap::Bits64, [8, 7, 6, 5, 4, 3, 2, 1]),
        ] {
            let mut b = src;
            s.apply(&mut b);
            assert_eq!(b, want);
            // Twice is the identity.
            s.apply(&mut b);
            assert_eq!(b, src);
        }
        assert_eq!(
            u64::from_le_bytes({
                let mut b = 0x0102_0304_0506_0708u64.to_le_bytes();
                Swap::Bits64.apply(&mut b);
                b
            }),
            0x0102_0304_0506_0708u64.swap_bytes()
        );
    }
}
