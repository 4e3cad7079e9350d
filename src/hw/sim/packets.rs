// SPDX-License-Identifier: GPL-2.0

//! The packets of a Gaudi2 command buffer on the simulated engines (host
//! 1): the model core decodes and runs them (`crate::model::packets`, and
//! `crate::model::engine`, which runs `NOP`, `MSG_LONG`, `LIN_DMA` and,
//! with the sync manager, `MSG_SHORT`, `MSG_PROT`, `FENCE`, `WREG_32`,
//! `WREG_BULK`, `ARB_POINT`, `STOP`, `CP_DMA`, `CB_LIST` and
//! `LOAD_AND_EXE`, and refuses every other opcode
//! before more than its header is fetched).
//! This file turns the model's refusals into the engine boundary's
//! [`PacketError`] (an undefined opcode is [`PacketError::Unsupported`], a
//! packet cut by the end of the CB [`PacketError::Truncated`]), and holds
//! the encoders the tests of the engines and the driver build CBs with.

use crate::model::packets as model;
use crate::uapi::*;
use kernel::prelude::*;

pub(crate) use crate::hw::engines::PacketError;
pub(crate) use model::{LinDma, Packet};

/// The model core's refusal as the engine boundary reports it. O(1).
pub(crate) fn refused(e: model::PacketError) -> PacketError {
    match e {
        model::PacketError::Undefined { opcode } => PacketError::Unsupported { opcode },
        model::PacketError::Truncated { opcode, need } => PacketError::Truncated {
            opcode,
            need: usize::try_from(need).unwrap_or(usize::MAX),
        },
        model::PacketError::SwapSize { tsize } => PacketError::SwapSize { tsize },
    }
}

/// Decode the packet at the start of `bytes` (the rest of the CB) as the
/// engines do ([`crate::model::engine::decode`]); returns it and its size.
/// KUnit-only: the engines run the model core's CP. O(1).
#[cfg(CONFIG_KUNIT)]
pub(crate) fn decode(bytes: &[u8]) -> Result<(Packet, usize), PacketError> {
    let (packet, size) =
        crate::model::engine::decode(bytes, bytes.len() as u64, true).map_err(refused)?;
    Ok((packet, usize::try_from(size).unwrap_or(usize::MAX)))
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
    use crate::model::packets::Swap;

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
        assert!(!d.memset);
        // WRCOMP and the context id set by hand change nothing; memset.
        let mut q = lin_dma(0xABCD, 0x2000, 7, 0, true);
        let ctl = u32::from_le_bytes([q[4], q[5], q[6], q[7]]) | 1 | (0x1234 << 8);
        q[4..8].copy_from_slice(&ctl.to_le_bytes());
        let Ok((Packet::LinDma(d), 24)) = decode(&q) else {
            return Err(EINVAL);
        };
        assert!(d.memset);
        assert_eq!((d.tsize, d.src, d.dst), (7, 0xABCD, 0x2000));
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
        // Every opcode but the fourteen, including 0 and the ones no
        // packet has.
        for op in 0..32u32 {
            let mut b = [0u8; 24];
            b[4..8].copy_from_slice(&packet_ctl(op, false, false).to_le_bytes());
            let r = decode(&b);
            match op {
                PACKET_NOP | PACKET_MSG_LONG | PACKET_LIN_DMA | PACKET_MSG_SHORT | PACKET_FENCE
                | PACKET_WREG_32 | PACKET_ARB_POINT | PACKET_CP_DMA | PACKET_CB_LIST
                | PACKET_LOAD_AND_EXE | PACKET_STOP | PACKET_MSG_PROT | PACKET_WAIT => {
                    assert!(r.is_ok())
                }
                // 8 bytes and 0 values: a whole WREG_BULK.
                PACKET_WREG_BULK => assert!(r.is_ok()),
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
