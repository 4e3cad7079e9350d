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
//! | `NOP`, `WAIT` | 8 | nothing (no cycles to wait) |
//! | `ARB_POINT` | 8 | nothing: the model's arbitration is round robin, whatever `priority`/`rls` say |
//! | `STOP` | 8 | ends the CP's work (every nested CB) |
//! | `WREG_32` | 8 | `value` to register `block + ctl[23:8]` (the QMAN's block; the `reg` bit 5, a value from a register, is not modelled: `value` is written) |
//! | `WREG_BULK` | 8 + 8n | `n = size64` (`[15:0]`) u64s to consecutive registers from `block + ctl[23:8]` |
//! | `MSG_LONG`, `MSG_PROT` | 16 | the u32 `value` to `addr` (the timestamp `op` is not modelled) |
//! | `MSG_SHORT` | 8 | `value` to `CP_MSG_BASE[ctl[23:22]] + ctl[15:0]` of the executing CP (:110-114) |
//! | `CP_DMA` | 16 | the CB `[src_addr, + tsize)` to the lower CP (`upper_cp` = ctl bit 5 clear) or run by this CP as a call (set) |
//! | `FENCE` | 8 | waits until fence counter `cfg[31:30]` reaches `cfg[23:16]`, then takes `cfg[3:0]` off it (:127-137) |
//! | `LIN_DMA` | 24 | `tsize` bytes `src_addr` -> `dst_addr`, or a memset with the u64 `src_addr` (:144-161) |
//! | `CB_LIST` | 24 | the 16-byte entry `index_addr` names in the table at `table_addr` (`size_desc` 0), a `CP_DMA`, run in its place |
//! | `LOAD_AND_EXE` | 16 | loads predicates or scalars from `src_addr`, executes the scalars as a packet |
//!
//! Field layouts the kernel's header leaves out (WREG offsets, `pred`,
//! `upper_cp`, `size_desc`, `LOAD_AND_EXE`'s `cfg`) are libhlthunk's
//! bitfields (hl-thunk include/specs/gaudi2/gaudi2_packets.h): `pred` is
//! ctl bits 4:0 of `WREG_32`, `WREG_BULK`, `MSG_LONG`, `MSG_PROT`,
//! `FENCE`, `ARB_POINT`, `REPEAT`, `CB_LIST`, `LOAD_AND_EXE` and `CP_DMA`
//! ([`pred`]).
//!
//! Any other opcode (`REPEAT`, `WREG_64_*`, the ARC ones, and values no
//! packet has) is refused as an undefined opcode; a packet cut by the end
//! of the CB as truncated.

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
    /// `PACKET_CP_DMA`.
    pub const CP_DMA: u32 = 0x5;
    /// `PACKET_REPEAT`.
    pub const REPEAT: u32 = 0x6;
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
    /// `PACKET_CB_LIST`.
    pub const CB_LIST: u32 = 0xE;
    /// `PACKET_LOAD_AND_EXE`.
    pub const LOAD_AND_EXE: u32 = 0xF;
}

/// The `pred` field of a packet's `ctl` (bits 4:0), for the packets that
/// have one (see the module doc); 0 (always) for the others. O(1).
pub const fn pred(ctl: u32) -> u32 {
    match opcode(ctl) {
        op::WREG_32
        | op::WREG_BULK
        | op::MSG_LONG
        | op::MSG_PROT
        | op::FENCE
        | op::ARB_POINT
        | op::REPEAT
        | op::CB_LIST
        | op::LOAD_AND_EXE
        | op::CP_DMA => ctl & 0x1F,
        _ => 0,
    }
}

/// `upper_cp` of a `CP_DMA`'s ctl (libhlthunk's `packet_cp_dma`).
pub const CP_DMA_UPPER_CP: u32 = 1 << 5;
/// `size_desc` of a `CB_LIST`'s ctl: 0 for 16-byte table entries, the
/// only size libhlthunk uses (`gaudi2_add_cb_list_pkt`).
pub const CB_LIST_SIZE_DESC: u32 = 1 << 5;
/// Bytes of a `CB_LIST` table entry.
pub const CB_LIST_ENTRY: u64 = 16;
/// `LOAD_AND_EXE` `cfg` bits (libhlthunk's `packet_load_and_exe`): `dst`
/// (0 predicates, 1 scalars).
pub const LAE_DST: u32 = 1 << 0;
/// `pmap`: predicates as one bitmap u32 (1), or one u32 per predicate
/// whose bit 0 counts (0).
pub const LAE_PMAP: u32 = 1 << 1;
/// `load`.
pub const LAE_LOAD: u32 = 1 << 8;
/// `exe`.
pub const LAE_EXE: u32 = 1 << 9;
/// `etype`: 0 runs R0..R3 as a packet (16 bytes, or 8 from R0-R1), 1 the
/// 8-byte packet in R2-R3.
pub const LAE_ETYPE: u32 = 1 << 10;

/// Bytes a `LOAD_AND_EXE` with `cfg` loads from its source: the scalars
/// (16), a predicate bitmap (4) or one u32 per predicate (128). O(1).
pub const fn lae_load_len(cfg: u32) -> usize {
    if cfg & LAE_DST != 0 {
        16
    } else if cfg & LAE_PMAP != 0 {
        4
    } else {
        128
    }
}

/// A CP's predicates (bit `p` predicate `p`, P0 always set) and scalar
/// registers R0..R3 after a `LOAD_AND_EXE` with `cfg` loaded `bytes`
/// ([`lae_load_len`] of them). O(1).
pub fn lae_load(cfg: u32, bytes: &[u8], (pred, scalars): (&mut u32, &mut [u32; 4])) {
    if cfg & LAE_DST != 0 {
        for (i, r) in scalars.iter_mut().enumerate() {
            *r = le32(bytes, 4 * i);
        }
    } else if cfg & LAE_PMAP != 0 {
        *pred = le32(bytes, 0) | 1;
    } else {
        *pred = (1..32).fold(1, |acc, p| acc | (le32(bytes, 4 * p) & 1) << p);
    }
}

/// The packet a `LOAD_AND_EXE`'s `exe` runs, decoded from the scalars
/// (R0.. with `etype` 0, R2-R3 with 1), and its `ctl` word; `None` if
/// they hold no packet an `exe` may run (`NOP`, `ARB_POINT`, `WREG_32`,
/// `MSG_LONG`, `MSG_SHORT`). O(1).
pub fn lae_exe(scalars: [u32; 4], etype: bool) -> Option<(Packet, u32)> {
    let mut b = [0u8; 16];
    for (d, s) in b.chunks_exact_mut(4).zip(scalars) {
        d.copy_from_slice(&s.to_le_bytes());
    }
    let bytes = if etype { b.get(8..) } else { b.get(..) }?;
    let (p, _) = decode(bytes, bytes.len() as u64).ok()?;
    match p {
        Packet::Nop
        | Packet::ArbPoint
        | Packet::Wreg32 { .. }
        | Packet::MsgLong { .. }
        | Packet::MsgShort { .. } => Some((p, le32(bytes, 4))),
        _ => None,
    }
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
    /// `NOP`, `WAIT`.
    Nop,
    /// `ARB_POINT`: accepted, orders nothing.
    ArbPoint,
    /// `CP_DMA`: the CB `[src, src + tsize)` for the lower CP (`upper`
    /// false) or this CP's call (`upper`).
    CpDma {
        /// Bytes of the CB.
        tsize: u32,
        /// Its device address.
        src: u64,
        /// Run by the upper CP itself.
        upper: bool,
    },
    /// `CB_LIST`: run the table entry the index names.
    CbList {
        /// Where the u32 index is.
        index: u64,
        /// The table of 16-byte entries.
        table: u64,
    },
    /// `LOAD_AND_EXE`: its `cfg` (`LAE_*`) and source.
    LoadAndExe {
        /// The `cfg` word.
        cfg: u32,
        /// Where predicates or scalars load from.
        src: u64,
    },
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
        op::MSG_LONG | op::MSG_PROT | op::CP_DMA | op::LOAD_AND_EXE => Ok(16),
        op::LIN_DMA | op::CB_LIST => Ok(24),
        op::WREG_BULK => Ok(8 + 8 * u64::from(first & 0xFFFF)),
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
            offset: (ctl >> 8) & 0xFFFF,
            value: first,
        },
        op::WREG_BULK => Packet::WregBulk {
            offset: (ctl >> 8) & 0xFFFF,
            count: first & 0xFFFF,
        },
        op::ARB_POINT => Packet::ArbPoint,
        op::CP_DMA => Packet::CpDma {
            tsize: first,
            src: le64(p, 8),
            upper: ctl & CP_DMA_UPPER_CP != 0,
        },
        op::CB_LIST if ctl & CB_LIST_SIZE_DESC != 0 => {
            return Err(PacketError::Undefined { opcode })
        }
        op::CB_LIST => Packet::CbList {
            index: le64(p, 8),
            table: le64(p, 16),
        },
        op::LOAD_AND_EXE => Packet::LoadAndExe {
            cfg: first,
            src: le64(p, 8),
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

    /// A `MSG_SHORT` writing `value` at `CP_MSG_BASE[base] + offset`.
    pub fn msg_short(base: u32, offset: u32, value: u32) -> [u8; 8] {
        let c = ctl(op::MSG_SHORT) | (base & 3) << 22 | (offset & 0xFFFF);
        let mut p = [0u8; 8];
        p[0..4].copy_from_slice(&value.to_le_bytes());
        p[4..8].copy_from_slice(&c.to_le_bytes());
        p
    }

    /// The packet `p` with predicate `pred` in its ctl.
    pub fn with_pred<const N: usize>(mut p: [u8; N], pred: u32) -> [u8; N] {
        if let Some(c) = p.get_mut(4) {
            *c = (*c & !0x1F) | (pred & 0x1F) as u8;
        }
        p
    }

    /// A `WREG_32` of `value` to the register at `offset` in the QMAN's block.
    pub fn wreg32(offset: u32, value: u32) -> [u8; 8] {
        let c = ctl(op::WREG_32) | (offset & 0xFFFF) << 8;
        let mut p = [0u8; 8];
        p[0..4].copy_from_slice(&value.to_le_bytes());
        p[4..8].copy_from_slice(&c.to_le_bytes());
        p
    }

    /// A `FENCE` on counter `id` for `target`, taking `dec` off.
    pub fn fence(id: u32, target: u32, dec: u32) -> [u8; 8] {
        let cfg = (id & 3) << 30 | (target & 0xFF) << 16 | (dec & 0xF);
        let mut p = [0u8; 8];
        p[0..4].copy_from_slice(&cfg.to_le_bytes());
        p[4..8].copy_from_slice(&ctl(op::FENCE).to_le_bytes());
        p
    }

    /// A `CP_DMA` of the CB `[src, src + tsize)`, to the upper CP itself
    /// (`upper`) or to the lower CP.
    pub fn cp_dma(src: u64, tsize: u32, upper: bool) -> [u8; 16] {
        let c = ctl(op::CP_DMA) | if upper { CP_DMA_UPPER_CP } else { 0 };
        let mut p = [0u8; 16];
        p[0..4].copy_from_slice(&tsize.to_le_bytes());
        p[4..8].copy_from_slice(&c.to_le_bytes());
        p[8..16].copy_from_slice(&src.to_le_bytes());
        p
    }

    /// A `CB_LIST` of the index at `index` and the table at `table`.
    pub fn cb_list(index: u64, table: u64) -> [u8; 24] {
        let mut p = [0u8; 24];
        p[4..8].copy_from_slice(&ctl(op::CB_LIST).to_le_bytes());
        p[8..16].copy_from_slice(&index.to_le_bytes());
        p[16..24].copy_from_slice(&table.to_le_bytes());
        p
    }

    /// A `LOAD_AND_EXE` with `cfg` (`LAE_*` bits) from `src`.
    pub fn load_and_exe(cfg: u32, src: u64) -> [u8; 16] {
        let mut p = [0u8; 16];
        p[0..4].copy_from_slice(&cfg.to_le_bytes());
        p[4..8].copy_from_slice(&ctl(op::LOAD_AND_EXE).to_le_bytes());
        p[8..16].copy_from_slice(&src.to_le_bytes());
        p
    }

    /// An `ARB_POINT`.
    pub fn arb_point(priority: u32, release: bool) -> [u8; 8] {
        let cfg = (priority & 0xFF_FFFF) | u32::from(release) << 31;
        let mut p = [0u8; 8];
        p[0..4].copy_from_slice(&cfg.to_le_bytes());
        p[4..8].copy_from_slice(&ctl(op::ARB_POINT).to_le_bytes());
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
