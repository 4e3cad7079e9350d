//! The all-to-all DMA of libhlthunk's `gaudi2_dma` tests
//! (`test_dma_all2all_dram2sram`, `_dram2dram`, `_sram2sram`), built the
//! same way: one CS of ten chunks in which the eight DCORE EDMAs copy
//! inside the device while the two PDMAs move data in and out, ordered by
//! the sync manager alone.
//!
//! - **PDMA_0_0** sets SOB `sob0` to 1 (the EDMAs' start), copies
//!   `external` bytes host -> DRAM, then adds 1 to SOB `sob0 + 1`.
//! - **Each EDMA** (stream 0 of `DCORE{ch/2}_EDMA_{ch%2}`) runs a one-packet
//!   upper CB, a `CP_DMA` handing its real CB to the QMAN's lower CP. That
//!   CB arms monitor `mon0 + 2 + ch` on `sob0 >= 1` to add 1 to the lower
//!   CP's fence counter, waits at a `FENCE` on it, runs `copies` `LIN_DMA`s
//!   of `size` bytes from its source region to its destination, and adds 1
//!   to SOB `sob0 + 2`.
//! - **PDMA_1_0** waits (monitor `mon0`, a `FENCE`) for `sob0 + 1`, copies
//!   the `external` bytes DRAM -> host, then waits (monitor `mon0 + 1`)
//!   for `sob0 + 2` to reach the number of EDMAs.
//!
//! Where each channel copies ([`channel`]): as libhlthunk splits them,
//! SRAM and the internal DRAM region in eight channels, a channel in two
//! halves when both ends are of one kind; odd channels copy one way, even
//! ones the other. libhlthunk picks a random offset in a DRAM channel;
//! here each copy starts at its channel's start.
//!
//! libhlthunk's sizes on a device that is not its simulator
//! (`hltests_is_simulator()` is false against this driver): 60,000 copies
//! of `sram_size / 8` (DRAM -> SRAM) or `sram_size / 16` (SRAM -> SRAM) per
//! EDMA, and 500 copies of `internal_dram / 16` (DRAM -> DRAM, half the DRAM
//! internal), a 32 MiB external transfer. [`libhlthunk_bytes`] says how many
//! bytes that is; `hlrs bench` (section `all2all`) measures this module's
//! CS and says how long those bytes would take.

use crate::{
    cs::{Cb, Cs, CsDone},
    sync::{cp_dma, Fence, Monitor, Sob},
    uapi::*,
    Device, HostBuffer, Mapping,
};
use std::{
    io,
    time::{Duration, Instant},
};

/// EDMA channels (`GAUDI2_MAX_DMA_CH`; every one of them is enabled).
pub const CHANNELS: u32 = 8;
/// Alignment of every region's start (libhlthunk's `ALIGN_UP(.., 128)`).
const ALIGN: u64 = 128;

/// What the EDMAs copy between.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// `test_dma_all2all_dram2sram`.
    DramToSram,
    /// `test_dma_all2all_dram2dram`.
    DramToDram,
    /// `test_dma_all2all_sram2sram`.
    SramToSram,
}

impl Direction {
    /// All three, in libhlthunk's order.
    pub const ALL: [Direction; 3] = [Self::DramToSram, Self::DramToDram, Self::SramToSram];

    /// A short name (`dram2sram`, ...).
    pub fn name(self) -> &'static str {
        match self {
            Self::DramToSram => "dram2sram",
            Self::DramToDram => "dram2dram",
            Self::SramToSram => "sram2sram",
        }
    }
}

/// Stream 0 of EDMA channel `ch` (libhlthunk's `gaudi2_get_ddma_qid`:
/// DCORE0_EDMA_0, DCORE0_EDMA_1, DCORE1_EDMA_0, ...). O(1).
pub fn edma_queue(ch: u32) -> Option<u32> {
    let dcore = [
        GAUDI2_QUEUE_ID_DCORE0_EDMA_0_0,
        GAUDI2_QUEUE_ID_DCORE1_EDMA_0_0,
        GAUDI2_QUEUE_ID_DCORE2_EDMA_0_0,
        GAUDI2_QUEUE_ID_DCORE3_EDMA_0_0,
    ];
    // EDMA_1's streams follow EDMA_0's four.
    Some(*dcore.get((ch / 2) as usize)? + 4 * (ch % 2))
}

/// Source and destination of channel `ch`'s copies of `size` bytes, with
/// SRAM at `sram` and the internal DRAM region at `dram` (start, bytes),
/// as libhlthunk lays them out (module doc); `None` if `size` does not
/// fit the channel. O(1).
pub fn channel(
    dir: Direction,
    ch: u32,
    size: u64,
    sram: (u64, u64),
    dram: (u64, u64),
) -> Option<(u64, u64)> {
    let split = |(base, len): (u64, u64), halves: u64| {
        let ch_len = len / u64::from(CHANNELS) / halves / ALIGN * ALIGN;
        (base, ch_len)
    };
    let (addr0, addr1, room) = match dir {
        Direction::DramToSram => {
            let (s, s_len) = split(sram, 1);
            let (d, d_len) = split(dram, 1);
            let at = u64::from(ch);
            (s + at * s_len, d + at * d_len, s_len.min(d_len))
        }
        Direction::DramToDram | Direction::SramToSram => {
            let region = if dir == Direction::DramToDram {
                dram
            } else {
                sram
            };
            let (b, len) = split(region, 2);
            let at = 2 * u64::from(ch);
            (b + at * len, b + (at + 1) * len, len)
        }
    };
    if size == 0 || size > room {
        return None;
    }
    // Odd channels copy addr0 -> addr1, even ones addr1 -> addr0.
    Some(if ch % 2 == 1 {
        (addr0, addr1)
    } else {
        (addr1, addr0)
    })
}

/// Bytes libhlthunk's test moves through the EDMAs on a device of this
/// SRAM and DRAM size (module doc), and its external transfer. O(1).
pub fn libhlthunk_bytes(dir: Direction, sram_size: u64, dram_size: u64) -> u64 {
    let per_edma = match dir {
        Direction::DramToSram => 60_000 * (sram_size / 8 / ALIGN * ALIGN),
        Direction::SramToSram => 60_000 * (sram_size / 16 / ALIGN * ALIGN),
        // Internal DRAM: half of it; 16 areas of it.
        Direction::DramToDram => 500 * ((dram_size - dram_size / 2) / 16 / ALIGN * ALIGN),
    };
    per_edma.saturating_mul(u64::from(CHANNELS))
}

/// The SOBs and monitors a run takes, from the first ones users may take.
#[derive(Clone, Copy, Debug)]
pub struct Objects {
    /// `sob0` (EDMAs' start), `+ 1` (PDMA_1_0's start), `+ 2` (EDMAs done).
    pub sob0: u32,
    /// `mon0`, `+ 1` (PDMA_1_0's two), `+ 2 + ch` (each EDMA's).
    pub mon0: u32,
}

/// Channel `ch`'s CB for its lower CP (module doc). O(copies).
pub fn edma_cb(o: Objects, ch: u32, (src, dst): (u64, u64), size: u32, copies: u32) -> Option<Cb> {
    let fence = Fence::lower(edma_queue(ch)?)?;
    let mon = Monitor::new(o.mon0 + 2 + ch);
    let mut cb = Cb::new()
        .push(&mon.fire_into(fence, Sob::new(o.sob0), 1))
        .push(&fence.wait(1));
    for _ in 0..copies {
        cb = cb.lin_dma(src, dst, size);
    }
    Some(cb.push(&Sob::new(o.sob0 + 2).add(1)))
}

/// PDMA_0_0's CB: start the EDMAs, copy in, start PDMA_1_0.
pub fn down_cb(o: Objects, host_src: u64, dev: u64, len: u32) -> Cb {
    Cb::new()
        .push(&Sob::new(o.sob0).set(1))
        .lin_dma(host_src, dev, len)
        .push(&Sob::new(o.sob0 + 1).add(1))
}

/// PDMA_1_0's CB: wait for PDMA_0_0, copy out, wait for the EDMAs.
pub fn up_cb(o: Objects, dev: u64, host_dst: u64, len: u32) -> Option<Cb> {
    let fence = Fence::of(GAUDI2_QUEUE_ID_PDMA_1_0)?;
    Some(
        Cb::new()
            .push(&Monitor::new(o.mon0).fire_into(fence, Sob::new(o.sob0 + 1), 1))
            .push(&fence.wait(1))
            .lin_dma(dev, host_dst, len)
            .push(&Monitor::new(o.mon0 + 1).fire_into(fence, Sob::new(o.sob0 + 2), CHANNELS))
            .push(&fence.wait(1)),
    )
}

/// A run's shape.
#[derive(Clone, Copy, Debug)]
pub struct Plan {
    /// Where the EDMAs copy.
    pub direction: Direction,
    /// `LIN_DMA`s per EDMA.
    pub copies: u32,
    /// Bytes per `LIN_DMA`.
    pub size: u32,
    /// Bytes PDMA_0_0 copies in and PDMA_1_0 out.
    pub external: u32,
    /// The CS's timeout in seconds (0: the device's).
    pub timeout_s: u32,
}

/// What a run did.
#[derive(Clone, Copy, Debug)]
pub struct Outcome {
    /// From the CS ioctl to the return of the WAIT_CS that saw it done.
    pub elapsed: Duration,
    /// Bytes the EDMAs copied (`CHANNELS x copies x size`).
    pub copied: u64,
}

/// The byte pattern of channel `ch` (0..=7; 8 the external transfer).
fn pattern(buf: &mut [u8], ch: u32) {
    for (i, b) in buf.iter_mut().enumerate() {
        *b = (i as u32).wrapping_mul(2_654_435_761).rotate_left(ch + 3) as u8 ^ ch as u8;
    }
}

/// Wait for `f`: it must complete.
fn completed(dev: &Device, f: crate::cs::Fence, what: &str) -> io::Result<()> {
    match f.wait(dev, 600 * 1_000_000)? {
        CsDone::Completed { .. } => Ok(()),
        other => Err(io::Error::other(format!("{what}: {other:?}"))),
    }
}

/// The CBs of a run, each in a host buffer mapped on the device: unmapped
/// (then freed) when dropped, on every path out of [`run`].
struct Cbs<'d> {
    dev: &'d Device,
    vas: Vec<u64>,
    bufs: Vec<HostBuffer>,
}

impl Cbs<'_> {
    /// Map `cb`; its VA and length.
    fn add(&mut self, cb: &Cb) -> io::Result<(u64, u32)> {
        let buf = cb.to_host_buffer()?;
        let va = self.dev.map_host(buf.addr(), buf.len() as u64, 0, 0)?;
        self.vas.push(va);
        self.bufs.push(buf);
        Ok((va, cb.len()))
    }
}

impl Drop for Cbs<'_> {
    fn drop(&mut self) {
        for &va in &self.vas {
            let _ = self.dev.unmap(va);
        }
    }
}

/// `CUSTOM_TIMEOUT` of `s` seconds, or the device's.
fn with_timeout(cs: Cs, s: u32) -> Cs {
    if s == 0 {
        cs
    } else {
        cs.timeout(s)
    }
}

/// Run the all-to-all of `p` on `dev` and check every byte: the sources
/// are filled and the run's three SOBs cleared first (one CS on
/// PDMA_0_0), and after the run
/// every destination region and the external copy are read back and
/// compared. The DRAM taken is `16 x size + external`, rounded up to the
/// DRAM page. `EINVAL` when `size` does not fit a channel of SRAM.
pub fn run(dev: &Device, p: &Plan) -> io::Result<Outcome> {
    let hw = dev.hw_ip_info()?;
    let sm = dev.sync_manager_info(0)?;
    let o = Objects {
        sob0: sm.first_available_sync_object,
        mon0: sm.first_available_monitor,
    };
    let size = u64::from(p.size);
    let page = hw.dram_page_size.max(4096);
    let internal = (2 * u64::from(CHANNELS) * size).div_ceil(ALIGN) * ALIGN + ALIGN;
    let total = (internal + u64::from(p.external)).div_ceil(page) * page;
    let mem = dev.allocate(total, 0)?;
    let map = mem.map(0, 0)?;
    let dram = (map.va(), internal);
    let external = map.va() + internal;
    let sram = (hw.sram_base_address, u64::from(hw.sram_size));
    let mut regions = Vec::with_capacity(CHANNELS as usize);
    for ch in 0..CHANNELS {
        let r = channel(p.direction, ch, size, sram, dram)
            .ok_or_else(|| io::Error::from_raw_os_error(22))?;
        regions.push(r);
    }
    // Host side: each channel's pattern, the external data and room to
    // read everything back.
    let chunk = p.size as usize;
    let mut src = HostBuffer::new(chunk * CHANNELS as usize + p.external as usize)?;
    for (ch, part) in src.as_mut_slice().chunks_mut(chunk.max(1)).enumerate() {
        pattern(part, (ch as u32).min(CHANNELS));
    }
    let back = HostBuffer::new(src.len())?;
    let src_map: Mapping<'_> = dev.map_buffer(src.as_slice(), 0, 0)?;
    let back_map: Mapping<'_> = dev.map_buffer(back.as_slice(), 0, 0)?;
    let ext_off = u64::from(CHANNELS) * size;
    let mut cbs = Cbs {
        dev,
        vas: Vec::new(),
        bufs: Vec::new(),
    };

    // Fill the sources, and clear the run's SOBs (libhlthunk's
    // `hltests_clear_sobs(fd, 3)`), so runs may follow each other.
    let fill = (0..3).fold(Cb::new(), |cb, i| cb.push(&Sob::new(o.sob0 + i).set(0)));
    let fill = regions
        .iter()
        .enumerate()
        .fold(fill, |cb, (ch, &(from, _))| {
            cb.lin_dma(src_map.va() + ch as u64 * size, from, p.size)
        });
    let (fva, flen) = cbs.add(&fill)?;
    let f = with_timeout(
        Cs::new().chunk(GAUDI2_QUEUE_ID_PDMA_0_0, fva, flen),
        p.timeout_s,
    )
    .submit(dev)?;
    completed(dev, f, "filling the sources")?;

    // The all-to-all CS.
    let mut cs = Cs::new();
    for (ch, &r) in regions.iter().enumerate() {
        let ch = ch as u32;
        let lower =
            edma_cb(o, ch, r, p.size, p.copies).ok_or_else(|| io::Error::other("no EDMA"))?;
        let (lva, llen) = cbs.add(&lower)?;
        let (uva, ulen) = cbs.add(&Cb::new().push(&cp_dma(lva, llen, false)))?;
        let q = edma_queue(ch).ok_or_else(|| io::Error::other("no EDMA"))?;
        cs = cs.chunk(q, uva, ulen);
    }
    let down = down_cb(o, src_map.va() + ext_off, external, p.external);
    let up = up_cb(o, external, back_map.va() + ext_off, p.external)
        .ok_or_else(|| io::Error::other("no PDMA_1_0"))?;
    let (dva, dlen) = cbs.add(&down)?;
    let (uva, ulen) = cbs.add(&up)?;
    let cs = with_timeout(
        cs.chunk(GAUDI2_QUEUE_ID_PDMA_0_0, dva, dlen)
            .chunk(GAUDI2_QUEUE_ID_PDMA_1_0, uva, ulen),
        p.timeout_s,
    );
    let t = Instant::now();
    let f = cs.submit(dev)?;
    let r = completed(dev, f, "the all-to-all CS");
    let elapsed = t.elapsed();
    r?;

    // Read every destination back.
    let read = regions
        .iter()
        .enumerate()
        .fold(Cb::new(), |cb, (ch, &(_, to))| {
            cb.lin_dma(to, back_map.va() + ch as u64 * size, p.size)
        });
    let (rva, rlen) = cbs.add(&read)?;
    let f = with_timeout(
        Cs::new().chunk(GAUDI2_QUEUE_ID_PDMA_1_0, rva, rlen),
        p.timeout_s,
    )
    .submit(dev)?;
    completed(dev, f, "reading the destinations back")?;
    drop(cbs);
    if let Some(i) = src
        .as_slice()
        .iter()
        .zip(back.as_slice())
        .position(|(a, b)| a != b)
    {
        return Err(io::Error::other(format!(
            "byte {i} (channel {}) differs after the all-to-all",
            i / chunk.max(1)
        )));
    }
    Ok(Outcome {
        elapsed,
        copied: u64::from(CHANNELS) * u64::from(p.copies) * size,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const SRAM: (u64, u64) = (0x1000_FFFF_FD00_0000, 48 << 20);
    const DRAM: (u64, u64) = (0x1001_0000_0000_0000, 1 << 30);

    #[test]
    fn edma_queues_are_libhlthunks() {
        assert_eq!(edma_queue(0), Some(GAUDI2_QUEUE_ID_DCORE0_EDMA_0_0));
        assert_eq!(edma_queue(1), Some(GAUDI2_QUEUE_ID_DCORE0_EDMA_0_0 + 4));
        assert_eq!(edma_queue(6), Some(GAUDI2_QUEUE_ID_DCORE3_EDMA_0_0));
        assert_eq!(edma_queue(8), None);
    }

    #[test]
    fn channels_split_as_libhlthunk_does_and_never_overlap() {
        for dir in Direction::ALL {
            let mut spans: Vec<(u64, u64)> = Vec::new();
            for ch in 0..CHANNELS {
                let (s, d) = channel(dir, ch, 1 << 20, SRAM, DRAM).unwrap();
                assert_eq!(s % ALIGN, 0);
                assert_eq!(d % ALIGN, 0);
                spans.extend([(s, s + (1 << 20)), (d, d + (1 << 20))]);
            }
            spans.sort();
            assert!(spans.windows(2).all(|w| w[0].1 <= w[1].0), "{dir:?}");
        }
        // DRAM -> SRAM: even channels DRAM -> SRAM, odd SRAM -> DRAM.
        let (s, d) = channel(Direction::DramToSram, 0, 4096, SRAM, DRAM).unwrap();
        assert_eq!((s, d), (DRAM.0, SRAM.0));
        let (s, _) = channel(Direction::DramToSram, 1, 4096, SRAM, DRAM).unwrap();
        assert_eq!(s, SRAM.0 + (6 << 20));
        // Too big for a channel (SRAM / 16 for SRAM -> SRAM).
        assert!(channel(Direction::SramToSram, 0, 3 << 20, SRAM, DRAM).is_some());
        assert!(channel(Direction::SramToSram, 0, (3 << 20) + 1, SRAM, DRAM).is_none());
    }

    #[test]
    fn libhlthunks_sizes() {
        // 48 MiB SRAM: 60,000 x 8 x 6 MiB = 2.8 TiB; 96 GiB DRAM: 8 x 500 x 3 GiB.
        assert_eq!(
            libhlthunk_bytes(Direction::DramToSram, 48 << 20, 96 << 30),
            60_000 * 48 << 20
        );
        assert_eq!(
            libhlthunk_bytes(Direction::DramToDram, 48 << 20, 96 << 30),
            8 * 500 * (3 << 30)
        );
    }

    #[test]
    fn cbs_carry_the_ordering() {
        let o = Objects {
            sob0: 413,
            mon0: 289,
        };
        let cb = edma_cb(o, 3, (1, 2), 64, 5).unwrap();
        // Monitor (payload 4 + arm) + FENCE + 5 LIN_DMAs + SOB add.
        assert_eq!(cb.len() as usize, 5 * 8 + 8 + 5 * 24 + 8);
        let up = up_cb(o, 1, 2, 64).unwrap();
        assert_eq!(up.len() as usize, 2 * (5 * 8 + 8) + 24);
    }
}
