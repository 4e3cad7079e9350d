//! The fuzzer's command submissions: CSs of random packets (valid NOP,
//! MSG_LONG and LIN_DMA with addresses from the device's ranges and the run's
//! own mappings, other opcodes, truncated packets) on every queue, with
//! every flag, and WAIT_CS on recent, old, future and edge sequences. The
//! engines run them while the other ops UNMAP, FREE and munmap what they
//! use, and while the run's devices close at the end.
//!
//! What a DMA writes stays bounded: at most 1 MiB at a time, into SRAM, the
//! run's DRAM mappings (a few pages of them) or its host buffers.

use crate::stress::Rng;
use hlrs::{
    cs::{packet, Cb, Swap},
    uapi::*,
    Device, HostBuffer,
};

/// SRAM's base address.
const SRAM: u64 = 0x1000_FFFF_FD00_0000;
/// Bytes of the CB buffer of a thread.
const CB_BYTES: usize = 64 << 10;
/// The enabled queues.
pub(crate) const QUEUES: [u32; 11] = [0, 1, 4, 8, 11, 12, 50, 55, 87, 120, 127];
/// DMA sizes.
const SIZES: [u32; 9] = [0, 1, 7, 8, 4095, 4096, 65537, 1 << 20, 3];

/// A thread's CB buffer and the sequences it submitted.
pub struct CsState {
    cb: Option<(HostBuffer, u64)>,
    seqs: Vec<u64>,
    /// CB buffers of `dram_flood` CSs that may still run, and their VAs.
    keep: Vec<(HostBuffer, u64)>,
}

impl CsState {
    /// Nothing yet: the CB buffer is made (and mapped) at the first CS.
    pub fn new() -> Self {
        Self {
            cb: None,
            seqs: Vec::new(),
            keep: Vec::new(),
        }
    }
}

/// Where a packet reaches: mostly places that exist.
fn addr(rng: &mut Rng, vas: &[u64], edge: u64) -> u64 {
    match rng.below(6) {
        0 => edge,
        1 => SRAM + rng.below(1 << 20),
        2 | 3 if !vas.is_empty() => vas[rng.below(vas.len() as u64) as usize] + rng.below(1 << 16),
        4 => rng.next(),
        _ => SRAM + (47 << 20),
    }
}

/// A CB of 1..8 random packets.
fn random_cb(rng: &mut Rng, vas: &[u64], edge: u64) -> Cb {
    let mut cb = Cb::new();
    for _ in 0..1 + rng.below(8) {
        cb = match rng.below(12) {
            0..=2 => cb.nop(),
            3..=4 => {
                let a = addr(rng, vas, edge);
                cb.msg_long(a, rng.next() as u32)
            }
            5..=8 => {
                let (src, dst) = (addr(rng, vas, edge), addr(rng, vas, edge));
                let size = SIZES[rng.below(SIZES.len() as u64) as usize];
                let swap =
                    [Swap::None, Swap::Bits16, Swap::Bits32, Swap::Bits64][rng.below(4) as usize];
                cb.push(&packet::lin_dma(src, dst, size, swap, rng.below(4) == 0))
            }
            9 => cb.push(&packet::raw(rng.below(32) as u32, rng.next() as u32)),
            // A cut packet, or garbage.
            _ => {
                let n = 1 + rng.below(23) as usize;
                let bytes: Vec<u8> = (0..n).map(|_| rng.next() as u8).collect();
                cb.push(&bytes)
            }
        };
    }
    cb
}

/// One CS: random packets in the thread's CB buffer, 0..3 chunks (or 513),
/// random queues and flags. Returns the errno on failure.
pub fn cs(
    dev: &Device,
    st: &mut CsState,
    rng: &mut Rng,
    vas: &[u64],
    edge: u64,
) -> Result<(), i32> {
    if st.cb.is_none() {
        let b = HostBuffer::new(CB_BYTES).map_err(|e| hlrs::errno(&e))?;
        // The MAP of the CBs' buffer is the MAP host op's to fuzz: when it
        // fails (an injected invalidation failure: EIO; ENOMEM), this call
        // submits nothing and the next one tries again.
        let Ok(va) = dev.map_host(b.addr(), CB_BYTES as u64, 0, 0) else {
            return Ok(());
        };
        st.cb = Some((b, va));
    }
    let Some((buf, va)) = st.cb.as_mut() else {
        return Ok(());
    };
    let cb = random_cb(rng, vas, edge);
    // Each CS writes its packets at a new place of the buffer: the engines
    // may still be reading an earlier one.
    let at = rng.below((CB_BYTES - 4096) as u64) as usize & !7;
    buf.as_mut_slice()[at..at + cb.bytes().len()].copy_from_slice(cb.bytes());
    let chunk = |rng: &mut Rng| HlCsChunk {
        cb_handle: match rng.below(10) {
            0 => edge,
            1 => *va + at as u64 + 8,
            _ => *va + at as u64,
        },
        queue_index: match rng.below(8) {
            0 => rng.below(300) as u32,
            _ => QUEUES[rng.below(QUEUES.len() as u64) as usize],
        },
        cb_size: match rng.below(8) {
            0 => rng.below(64) as u32,
            _ => cb.len(),
        },
        cs_chunk_flags: if rng.below(10) == 0 {
            0
        } else {
            HL_CS_CHUNK_FLAGS_USER_ALLOC_CB
        },
        ..Default::default()
    };
    let n = match rng.below(20) {
        0 => 0,
        1 => 513,
        _ => 1 + rng.below(3) as usize,
    };
    let chunks: Vec<HlCsChunk> = (0..n).map(|_| chunk(rng)).collect();
    let restore: Vec<HlCsChunk> = (0..rng.below(2) as usize).map(|_| chunk(rng)).collect();
    let flags = [
        0,
        0,
        HL_CS_FLAGS_TIMESTAMP,
        HL_CS_FLAGS_CUSTOM_TIMEOUT,
        HL_CS_FLAGS_FORCE_RESTORE,
        HL_CS_FLAGS_STAGED_SUBMISSION,
        HL_CS_FLAGS_SIGNAL,
        HL_CS_FLAGS_FLUSH_PCI_HBW_WRITES,
        rng.next() as u32 & 0x1_ffff,
    ][rng.below(9) as usize];
    let mut a = HlCsArgs {
        chunks_restore: restore.as_ptr() as u64,
        chunks_execute: if rng.below(30) == 0 {
            edge
        } else {
            chunks.as_ptr() as u64
        },
        num_chunks_restore: restore.len() as u32,
        num_chunks_execute: n as u32,
        timeout: rng.below(3) as u32,
        cs_flags: flags,
        ..Default::default()
    };
    dev.cs_args(&mut a).map_err(|e| hlrs::errno(&e))?;
    if a.out_seq() != u64::MAX {
        st.seqs.push(a.out_seq());
        if st.seqs.len() > 256 {
            st.seqs.remove(0);
        }
    }
    Ok(())
}

/// Host VAs of Gaudi2 (the PMMU's ranges) start here; DRAM VAs are below.
const HOST_VA_BASE: u64 = 0xFFF0_0000_0000_0000;

/// Memory exhaustion: one CS of up to four memsets of up to 1 GiB each, with
/// a non-zero value, at the run's DRAM mappings. The simulated DRAM's host
/// memory must stop at its limit (the CS then ends ABORTED, which a WAIT_CS
/// op or the close meets), whatever UNMAP, FREE and close do meanwhile; the
/// run checks at its end that all of it came back. The CS is not waited
/// for. Nothing is submitted when no DRAM mapping is known.
pub fn dram_flood(dev: &Device, st: &mut CsState, rng: &mut Rng, vas: &[u64]) -> Result<(), i32> {
    let dram: Vec<u64> = vas.iter().copied().filter(|&v| v < HOST_VA_BASE).collect();
    if dram.is_empty() || rng.below(16) != 0 {
        return Ok(());
    }
    let mut cb = Cb::new();
    for _ in 0..1 + rng.below(4) {
        let va = dram[rng.below(dram.len() as u64) as usize];
        let size = [1u32 << 30, 768 << 20, 64 << 20, 1 << 20][rng.below(4) as usize];
        cb = cb.memset(va, rng.next() | 1, size);
    }
    let queue = QUEUES[rng.below(QUEUES.len() as u64) as usize];
    let b = HostBuffer::new(4096).map_err(|e| hlrs::errno(&e))?;
    let mut b = b;
    b.as_mut_slice()[..cb.bytes().len()].copy_from_slice(cb.bytes());
    // The CB's own mapping: its MAP failing (an injected invalidation
    // failure) submits nothing.
    let Ok(va) = dev.map_host(b.addr(), 4096, 0, 0) else {
        return Ok(());
    };
    let r = hlrs::cs::Cs::new().chunk(queue, va, cb.len()).submit(dev);
    if let Ok(f) = &r {
        st.seqs.push(f.seq);
    }
    // The engine may still fetch the CB: the buffer and its mapping stay
    // for the next 16 floods (an UNMAP under a CS still running is fuzzing
    // too: its next fetch faults).
    st.keep.push((b, va));
    if st.keep.len() > 16 {
        let (_, old) = st.keep.remove(0);
        let _ = dev.unmap(old);
    }
    r.map(drop).map_err(|e| hlrs::errno(&e))
}

/// One WAIT_CS: a recent sequence mostly, an old, future or edge one
/// sometimes; a short timeout; sometimes a multi-CS or interrupt wait.
pub fn wait_cs(dev: &Device, st: &CsState, rng: &mut Rng, edge: u64) -> Result<(), i32> {
    let last = st.seqs.last().copied().unwrap_or(0);
    let seq = match rng.below(8) {
        0 => edge,
        1 => last + 1 + rng.below(3),
        2 => last.saturating_sub(64 + rng.below(200)),
        _ if !st.seqs.is_empty() => st.seqs[rng.below(st.seqs.len() as u64) as usize],
        _ => 1,
    };
    let mut a = HlWaitCsArgs {
        seq,
        timeout_us: [0, 0, 0, 1000, 10_000][rng.below(5) as usize],
        flags: match rng.below(20) {
            0 => HL_WAIT_CS_FLAGS_MULTI_CS,
            1 => HL_WAIT_CS_FLAGS_INTERRUPT,
            _ => 0,
        },
        ..Default::default()
    };
    dev.wait_cs_args(&mut a).map_err(|e| hlrs::errno(&e))
}
