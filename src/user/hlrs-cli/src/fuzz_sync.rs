//! The fuzzer's sync-manager family (`hlrs fuzz --sync`), drawn only on
//! devices with user interrupts (the Gaudi2 on PCI: the simulated devices
//! have no sync manager yet).
//!
//! Four ops:
//!
//! - `SYNC CS`: a CS of 1..3 chunks. Half of them are *clean*: writes only
//!   to the thread's own SOBs and monitors, fences that a SOB write in the
//!   same or a later chunk releases (through a monitor whose payload adds
//!   to the waiting stream's fence counter), nested CBs (`CP_DMA`,
//!   `CB_LIST`) and predicates loaded from valid addresses. A clean CS must
//!   not time out (EIO is tolerated: a stray monitor of a *loose* CS may
//!   fault while it runs). The other half are *loose*: random SOB writes
//!   (set, add, long, `MSG_LONG`; mostly the thread's own, sometimes the
//!   driver's below the user range or the driver's monitors "far above" the
//!   SOBs: RAZWIs), random monitor payloads (fence counters of random
//!   queues' CPs, SRAM, CQs, SOBs, host memory; random `CONFIG` bits) and
//!   arms (random groups, masks, values), CQ set-ups, `CP_DMA`, `CB_LIST`,
//!   `LOAD_AND_EXE` and predicated `MSG_LONG`s with random
//!   (sometimes bad) addresses, writes to random config registers (RAZWI),
//!   and now and then a fence nothing releases. Every CS has a short CS
//!   timeout (`HL_CS_FLAGS_CUSTOM_TIMEOUT`) and is waited for: Ok, or EIO,
//!   ETIMEDOUT, EINVAL.
//! - `SYNC hang`: a CS whose stream waits at a fence counter nothing writes
//!   (counter 3: no other op of this family writes it), with a 1 s timeout:
//!   it must end ETIMEDOUT (or EIO), never complete; then a NOP CS on the
//!   same queue must complete (the device keeps working).
//! - `SIGNAL/WAIT`: a SIGNAL CS and a WAIT CS for it (or for a bad
//!   sequence) on queues no clean CS uses; see [`signal_wait`].
//! - `INTR WAIT`: WAIT_CS with `HL_WAIT_CS_FLAGS_INTERRUPT` on random
//!   interrupt ids (user ones mostly, the common CQ id, others: EINVAL),
//!   counters (the thread's CQ counter CB at a random index, bad handles,
//!   indices, user addresses), targets and timeouts of 0..50 ms; a quarter
//!   of them while a CS sets up a CQ on the counter and fires a monitor
//!   into it. Ok (BUSY or COMPLETED), EINVAL, EINTR, EFAULT, ENOMEM.
//!
//! Each worker thread owns a block of 64 SOBs and 16 monitors (by its
//! thread number): the clean CSs' releases cannot be disarmed by another
//! thread's random writes. Whether a clean CS was alone on the device
//! (no loose or hanging CS of another thread in flight, which may hold
//! its queue until its timeout) is tracked in [`Shared`]; only then, and
//! only with `--sync-only` (mixed with the CS op's random packets, only the
//! errnos are checked), is a timeout of a clean CS (or of the CS after a
//! hang) a failure. A hang CS that completes, or any CS still BUSY 150 s
//! after its submission, is a failure always. Loose CSs never write the
//! clean objects, fence counters directly, counter 3, or large adds into
//! fence counters, and give the lower CP (which runs on after its CS) only
//! the valid nested CB; the unit tests below check the generators for it.
//!
//! What the family holds is bounded: per thread one 64 KiB host buffer
//! (mapped once) and one CB; every CS it submits ends within the op.

use crate::stress::Rng;
use hlrs::{
    cs::{packet, Cb, Cs, CsDone},
    errno,
    sync::{self, config, Compare, Cq, Fence, LoadAndExe, Monitor, Sob},
    uapi::*,
    Device, HostBuffer,
};
use std::sync::atomic::{AtomicU64, Ordering};

/// SRAM's base address.
const SRAM: u64 = 0x1000_FFFF_FD00_0000;
/// Queues a clean CS runs on (the ones `tests/guest/tests/sync.rs` runs).
const SAFE_QUEUES: [u32; 4] = [
    GAUDI2_QUEUE_ID_PDMA_0_0,
    GAUDI2_QUEUE_ID_PDMA_0_0 + 1,
    GAUDI2_QUEUE_ID_PDMA_1_0,
    GAUDI2_QUEUE_ID_DCORE0_EDMA_0_0,
];
const SEC: u64 = 1_000_000;
/// How long a CS of this family may stay BUSY before it is a hang: its own
/// timeout is at most 10 s, but other threads' CSs (the CS op's, with the
/// device timeout, capped at `cs_max_run_s`, 60 s) may be ahead of it.
const WAIT_US: u64 = 150 * SEC;
/// Thread blocks of SOBs and monitors (thread number modulo this).
const BLOCKS: u32 = 96;
/// SOBs per block: 0..16 releases, 16..32 clean extras, 32..64 loose.
const SOBS_PER: u32 = 64;
/// Monitors per block: 0..4 releases, 4..8 clean extras, 8..16 loose.
const MONS_PER: u32 = 16;
/// The fence counter only the hang op waits on (nothing writes it).
const HANG_COUNTER: u32 = 3;
/// Bytes of a thread's host buffer: CBs in the first half, then the nested
/// CB, the `CB_LIST` table and index, predicates and scalars, and host
/// words for interrupt waits.
const MEM: usize = 64 << 10;
const RING: usize = 32 << 10;
const NESTED: usize = 32 << 10;
const TABLE: usize = 36 << 10;
const INDEX: usize = 40 << 10;
const PREDICATES: usize = 44 << 10;
const SCALARS: usize = 48 << 10;
const WORDS: usize = 56 << 10;

/// Failures of the family's own checks, reported as errnos no op allows.
pub const HUNG: i32 = 1001;
/// A clean CS (every fence released) timed out while alone on the device.
pub const NOT_RELEASED: i32 = 1002;
/// A CS waiting on a fence nothing releases completed.
pub const RELEASED: i32 = 1003;
/// No CS completed after a timed-out one.
pub const DEAD: i32 = 1004;
/// An interrupt wait succeeded with a status other than BUSY or COMPLETED.
pub const BAD_STATUS: i32 = 1005;

/// DCORE0's objects no user CB may write (upstream's CS-completion, KDMA
/// and decoder SOBs and monitors): a loose CS's writes to them are RAZWIs.
/// Between them and the first user objects lie the sync streams' (SIGNAL
/// and WAIT CSs, which the `SIGNAL`/`WAIT` ops submit): writable, as on
/// silicon, and left alone by loose CSs.
const DRIVER_SOBS: u32 = 85;
const DRIVER_MONS: u32 = 125;

/// What a sentinel errno of this family means.
pub fn describe(e: i32) -> Option<&'static str> {
    Some(match e {
        HUNG => "a CS still busy 150 s after its submission (its timeout is at most 10 s)",
        NOT_RELEASED => "a CS whose fences are all released timed out",
        RELEASED => "a CS waiting on a fence nothing releases completed",
        DEAD => "no CS completed on the queue after a timed-out one",
        BAD_STATUS => "an interrupt wait returned a status other than BUSY or COMPLETED",
        _ => return None,
    })
}

/// What the threads of one device share: CSs in flight that may hold a
/// queue until their timeout (loose and hang CSs), and how many began.
#[derive(Default)]
pub struct Shared {
    risky: AtomicU64,
    epoch: AtomicU64,
}

/// A risky CS in flight (until dropped).
struct Risk<'a>(&'a Shared);

impl Drop for Risk<'_> {
    fn drop(&mut self) {
        self.0.risky.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Shared {
    fn risk(&self) -> Risk<'_> {
        self.risky.fetch_add(1, Ordering::SeqCst);
        self.epoch.fetch_add(1, Ordering::SeqCst);
        Risk(self)
    }

    fn snapshot(&self) -> (u64, u64) {
        (
            self.risky.load(Ordering::SeqCst),
            self.epoch.load(Ordering::SeqCst),
        )
    }
}

/// A thread's share of the sync manager and its buffers.
pub struct SyncState {
    /// Its first SOB (a group boundary), first monitor.
    sob0: u32,
    mon0: u32,
    /// The driver's first user SOB, CQ.
    first_sob: u32,
    first_cq: u32,
    /// Whether a timeout of a clean CS alone on the device is a failure
    /// (not when the run mixes in the CS op's random packets).
    strict: bool,
    /// The host buffer and its device VA (made at the first use).
    mem: Option<(HostBuffer, u64)>,
    /// Next CB offset in the ring.
    ring: usize,
    /// The CQ counter CB: handle and device VA.
    counter: Option<(u64, u64)>,
}

impl SyncState {
    /// The state of thread `id` on `dev` (None if the device reports no
    /// sync manager).
    pub fn new(dev: &Device, id: u32, strict: bool) -> Option<Self> {
        let sm = dev.sync_manager_info(0).ok()?;
        let first_sob = sm.first_available_sync_object;
        let block = id % BLOCKS;
        Some(Self {
            sob0: first_sob.div_ceil(8) * 8 + block * SOBS_PER,
            mon0: sm.first_available_monitor + block * MONS_PER,
            first_sob,
            first_cq: sm.first_available_cq,
            strict,
            mem: None,
            ring: 0,
            counter: None,
        })
    }

    /// The host buffer (made, filled and mapped at the first call). None
    /// when that failed (the MAP is the MAP host op's to fuzz: the call
    /// submits nothing and the next one tries again).
    fn mem(&mut self, dev: &Device) -> Option<u64> {
        if let Some((_, va)) = &self.mem {
            return Some(*va);
        }
        let mut b = HostBuffer::new(MEM).ok()?;
        let va = dev.map_host(b.addr(), MEM as u64, 0, 0).ok()?;
        let s = b.as_mut_slice();
        let nested = Cb::new().nop().msg_long(self.sram(0xF00), 0x4E57);
        s[NESTED..NESTED + nested.bytes().len()].copy_from_slice(nested.bytes());
        let entry = sync::cp_dma(va + NESTED as u64, nested.len(), true);
        for i in 0..16 {
            s[TABLE + 16 * i..TABLE + 16 * i + 16].copy_from_slice(&entry);
        }
        s[INDEX..INDEX + 4].copy_from_slice(&3u32.to_le_bytes());
        s[PREDICATES..PREDICATES + 4].copy_from_slice(&0x5555_5554u32.to_le_bytes());
        s[PREDICATES + 4..PREDICATES + 8].copy_from_slice(&u32::MAX.to_le_bytes());
        let scalars = packet::msg_long(self.sram(0xF80), 0x5CA1);
        s[SCALARS..SCALARS + 16].copy_from_slice(&scalars);
        self.mem = Some((b, va));
        Some(va)
    }

    /// The counter CB (created at the first call), if it could be.
    fn counter(&mut self, dev: &Device) -> Option<(u64, u64)> {
        if self.counter.is_none() {
            let h = dev.cb_create(4096, HL_CB_FLAGS_MAP).ok()?;
            match dev.cb_device_va(h) {
                Ok(va) => self.counter = Some((h, va)),
                Err(_) => {
                    let _ = dev.cb_destroy(h);
                }
            }
        }
        self.counter
    }

    /// An address in the thread's SRAM window.
    fn sram(&self, off: u64) -> u64 {
        SRAM + 0x20_0000 + u64::from(self.sob0) * 0x40 + (off & 0xFFC)
    }

    fn release_sob(&self, i: u32) -> Sob {
        Sob::new(self.sob0 + i % 16)
    }
    fn extra_sob(&self, rng: &mut Rng) -> Sob {
        Sob::new(self.sob0 + 16 + rng.below(16) as u32)
    }
    fn loose_sob(&self, rng: &mut Rng, span: u32) -> Sob {
        Sob::new(self.sob0 + 32 + rng.below(u64::from(32 - span)) as u32)
    }

    /// Put `cbs` in the ring; their (VA, length).
    fn place(&mut self, va: u64, cbs: &[Cb]) -> Vec<(u64, u32)> {
        let mut out = Vec::with_capacity(cbs.len());
        for cb in cbs {
            let len = cb.bytes().len();
            if self.ring + len > RING {
                self.ring = 0;
            }
            if let Some((b, _)) = self.mem.as_mut() {
                b.as_mut_slice()[self.ring..self.ring + len].copy_from_slice(cb.bytes());
            }
            out.push((va + self.ring as u64, cb.len()));
            self.ring = (self.ring + len).div_ceil(64) * 64;
        }
        out
    }
}

/// A fence counter (0..2) of a random queue's CP: a safe queue's mostly.
fn random_fence(rng: &mut Rng) -> Fence {
    let q = match rng.below(4) {
        0 => crate::fuzz_cs::QUEUES[rng.below(crate::fuzz_cs::QUEUES.len() as u64) as usize],
        _ => SAFE_QUEUES[rng.below(SAFE_QUEUES.len() as u64) as usize],
    };
    let f = match rng.below(5) {
        0 => Fence::lower(q),
        _ => Fence::of(q),
    };
    f.unwrap_or(Fence {
        qman: 0x4C8_A000,
        cp: 0,
        id: 0,
    })
    .counter(rng.below(3) as u32)
}

/// A random config register, mostly one no user CB may write (a RAZWI):
/// never DCORE0's sync manager objects (its user part is the clean CSs'),
/// nor a CP's message bases or fence counters. Until 2026-12-06 only the
/// `RDATA`s and two of the twenty `CNT`s were left out: a rare draw could
/// set a CP's fence counter 2 or 3 (`CNT`, a set, not an add) to 0 right
/// after a clean CS's monitor paid it, and that CS waited at its `FENCE`
/// until the run-time cap, the CSs queued behind it after it; or repoint
/// a CP's message base 1, so every later `MSG_SHORT` to a SOB from that
/// CP went astray.
fn random_reg(rng: &mut Rng) -> u64 {
    let off = rng.below(0x500_0000) as u32 & !3;
    let sm = (0x410_0000..0x412_0000).contains(&off);
    // Nor a CP's message bases (`0x1F0..0x290`) or fence counters (their
    // `RDATA` adds, `0x290..0x2E0`, and their `CNT` sets, `0x2E0..0x330`):
    // users may write them, and a clean CS's (or the driver's sync-stream)
    // `MSG_SHORT` through a repointed base 1 would never reach its SOB, and
    // a fence counter set to 0 under a clean CS's `FENCE` would never
    // release it.
    let cp = (0x1F0..0x330).contains(&(off & 0xFFF));
    sync::reg_addr(if sm || cp { 0x4C8_A010 } else { off })
}

/// An address for a nested CB, table, predicates or scalars: the valid
/// one mostly, else SRAM no op of the family writes (SRAM + 40 MiB: what
/// the CP runs from there is whatever it holds), garbage (unmapped: a
/// fault), 0 or an unmapped host VA.
fn maybe_bad(rng: &mut Rng, good: u64) -> u64 {
    match rng.below(8) {
        0 => SRAM + (40 << 20) + (rng.below(1 << 20) & !7),
        1 => rng.next(),
        2 => 0,
        3 => 0xFFF0_0000_0000_0000 + (rng.below(1 << 30) & !7),
        _ => good,
    }
}

/// Packets of a clean CS that release nothing and wait for nothing.
fn clean_extra(st: &SyncState, rng: &mut Rng, va: u64) -> Vec<u8> {
    match rng.below(9) {
        0 => packet::nop().to_vec(),
        1 => packet::msg_long(st.sram(rng.below(0xE00)), rng.next() as u32).to_vec(),
        2 => st.extra_sob(rng).set(rng.below(8) as u32).to_vec(),
        3 => st.extra_sob(rng).add(1 + rng.below(3) as u32).to_vec(),
        4 => {
            let mon = Monitor::new(st.mon0 + 4 + rng.below(4) as u32);
            let cmp = [Compare::AtLeast, Compare::Equal][rng.below(2) as usize];
            let mut p = mon.payload(0, st.sram(0xE00 + 4 * rng.below(32)), rng.next() as u32);
            p.extend_from_slice(&mon.arm(st.extra_sob(rng), cmp, rng.below(4) as u32));
            p
        }
        5 => {
            let len = Cb::new().nop().msg_long(0, 0).len();
            sync::cp_dma(va + NESTED as u64, len, true).to_vec()
        }
        6 => sync::cb_list(va + INDEX as u64, va + TABLE as u64).to_vec(),
        7 => {
            let mut p = sync::load_and_exe(
                LoadAndExe::Predicates { bitmap: true },
                va + PREDICATES as u64,
            )
            .to_vec();
            let pred = 1 + rng.below(31) as u32;
            p.extend_from_slice(&sync::msg_long_pred(
                st.sram(0xE80 + 4 * u64::from(pred)),
                pred,
                pred,
            ));
            p
        }
        _ => {
            // The driver's own packets are never predicated: give the CP
            // its all-true predicates back (predicate 0 always holds).
            sync::load_and_exe(
                LoadAndExe::Predicates { bitmap: true },
                va + PREDICATES as u64 + 4,
            )
            .to_vec()
        }
    }
}

/// One packet (or a few) of a loose CS.
fn loose_packet(st: &SyncState, rng: &mut Rng, va: u64, counter: Option<(u64, u64)>) -> Vec<u8> {
    match rng.below(16) {
        0 => packet::nop().to_vec(),
        // SOB writes: the thread's own mostly; the driver's (RAZWI).
        1..=3 => {
            let sob = match rng.below(8) {
                0 => Sob::new(rng.below(u64::from(DRIVER_SOBS - 3)) as u32),
                // Past the 8,192 SOBs: the driver's monitors' PAY_ADDRL.
                // (A long set writes 4: it stays below the users' ones.)
                1 => Sob::new(8192 + rng.below(u64::from(DRIVER_MONS - 3)) as u32),
                _ => st.loose_sob(rng, 4),
            };
            match rng.below(5) {
                0 => sob.set(rng.next() as u32).to_vec(),
                1 => sob.add(rng.below(4) as u32).to_vec(),
                2 => sob.long_add(rng.below(1 << 15) as u32).to_vec(),
                3 => sob.long_set(rng.next()).concat(),
                _ => packet::msg_long(sob.addr(), rng.next() as u32).to_vec(),
            }
        }
        // A monitor's payload: the thread's loose ones mostly.
        4..=5 => {
            let (mon, idx) = match rng.below(10) {
                0 => (Monitor::new(rng.below(u64::from(DRIVER_MONS)) as u32), 7),
                _ => {
                    let i = rng.below(8) as u32;
                    (Monitor::new(st.mon0 + 8 + i), i)
                }
            };
            let mut cfg = 0;
            // A long monitor takes the ARMs of the next three as its high
            // SOD bits (they arm nothing): its tail stays in the block, or
            // the next thread's first (clean) monitors would never arm.
            if rng.below(4) == 0 && idx + 3 < 8 {
                cfg |= config::LONG_SOB;
            }
            if rng.below(4) == 0 {
                // Only from monitors of the thread's loose block.
                cfg |= config::wr_num(rng.below(u64::from(8 - idx).min(4)) as u32);
            }
            let addr = match rng.below(6) {
                0 => {
                    cfg |= config::CQ_EN;
                    if rng.below(2) == 0 {
                        cfg |= config::LBW_EN;
                    }
                    match rng.below(6) {
                        0 => rng.below(64),
                        _ => {
                            u64::from(st.first_cq) + rng.below(u64::from(64 - st.first_cq.min(63)))
                        }
                    }
                }
                1 => SRAM + (rng.below(1 << 22) & !3),
                2 => st.loose_sob(rng, 1).addr(),
                3 => va + WORDS as u64 + 8 * rng.below(64),
                _ => random_fence(rng).addr(),
            };
            // Into a fence counter only small adds: a large one wraps it
            // (a subtraction), and a clean CS's fence would wait for ever.
            let data = match rng.below(3) {
                0 if cfg & config::CQ_EN != 0 || addr & 0xFFF < 0x280 || addr & 0xFFF >= 0x300 => {
                    rng.next() as u32
                }
                _ => 1 + rng.below(3) as u32,
            };
            mon.payload(cfg, addr, data)
        }
        // An arm: a group of the thread's loose SOBs (random mask, SOP,
        // value) mostly, of the driver's SOBs sometimes.
        6..=7 => {
            let mon = Monitor::new(st.mon0 + 8 + rng.below(8) as u32);
            let group = match rng.below(8) {
                0 => rng.below(u64::from(st.first_sob / 8)) as u32,
                _ => (st.sob0 + 32) / 8 + rng.below(4) as u32,
            };
            let value = match rng.below(3) {
                0 => rng.below(1 << 15) as u32,
                _ => rng.below(4) as u32,
            };
            let arm = (group & 0xFF)
                | (rng.below(256) as u32) << 8
                | (rng.below(2) as u32) << 16
                | value << 17;
            mon.arm_raw(arm).to_vec()
        }
        // A CQ: a counter in the thread's counter CB (or anywhere), raising
        // a user interrupt; a CQ of the driver's sometimes (RAZWI).
        8 => {
            let cq = match rng.below(8) {
                0 => Cq(rng.below(u64::from(st.first_cq)) as u32),
                _ => Cq(st.first_cq + rng.below(u64::from(64 - st.first_cq.min(63))) as u32),
            };
            let at = match (rng.below(4), counter) {
                (0, _) | (_, None) => maybe_bad(rng, va + WORDS as u64),
                (_, Some((_, cva))) => cva + 8 * rng.below(512),
            };
            cq.counter(at, sync::FIRST_USER_INTERRUPT + rng.below(64) as u32)
        }
        9 => {
            let len = Cb::new().nop().msg_long(0, 0).len();
            let size = match rng.below(4) {
                0 => rng.below(256) as u32,
                1 => rng.below(1 << 20) as u32,
                _ => len,
            };
            // The lower CP runs on after the CS ends: only the valid nested
            // CB for it; anything for the upper CP (bounded by the CS's
            // timeout).
            match rng.below(3) {
                0 => sync::cp_dma(va + NESTED as u64, len, false).to_vec(),
                _ => sync::cp_dma(maybe_bad(rng, va + NESTED as u64), size, true).to_vec(),
            }
        }
        10 => sync::cb_list(
            maybe_bad(rng, va + INDEX as u64),
            maybe_bad(rng, va + TABLE as u64),
        )
        .to_vec(),
        11 => {
            let what = match rng.below(5) {
                0 => LoadAndExe::Predicates { bitmap: false },
                1 => LoadAndExe::Predicates { bitmap: true },
                2 => LoadAndExe::Scalars { exe: None },
                3 => LoadAndExe::Scalars {
                    exe: Some(rng.below(2) as u32),
                },
                _ => LoadAndExe::Exe {
                    etype: rng.below(2) as u32,
                },
            };
            let good = match what {
                LoadAndExe::Predicates { .. } => va + PREDICATES as u64,
                _ => va + SCALARS as u64,
            };
            sync::load_and_exe(what, maybe_bad(rng, good)).to_vec()
        }
        12 => sync::msg_long_pred(
            SRAM + (rng.below(1 << 22) & !3),
            rng.next() as u32,
            rng.below(32) as u32,
        )
        .to_vec(),
        // A config register no user CB may write: RAZWI. (No ARB_POINT:
        // an arbitration taken and never released would outlive the CS and
        // hold the QMAN's other streams.)
        13..=14 => packet::msg_long(random_reg(rng), rng.next() as u32).to_vec(),
        _ => packet::msg_long(st.sram(rng.below(0xE00)), rng.next() as u32).to_vec(),
    }
}

/// Submit `chunks` ((queue, CB)) with a timeout of `timeout_s` and wait
/// for the CS: Ok(true) completed, Ok(false) busy past [`WAIT_US`], or the
/// errno of the submission or the wait.
fn run(
    dev: &Device,
    st: &mut SyncState,
    va: u64,
    chunks: &[(u32, Cb)],
    (timeout_s, diag): (u32, bool),
) -> Result<bool, i32> {
    let cbs: Vec<Cb> = chunks.iter().map(|(_, c)| c.clone()).collect();
    let placed = st.place(va, &cbs);
    let cs = chunks
        .iter()
        .zip(&placed)
        .fold(Cs::new(), |cs, ((q, _), &(cva, len))| {
            cs.chunk(*q, cva, len)
        })
        .timeout(timeout_s);
    let f = cs.submit(dev).map_err(|e| errno(&e))?;
    let r = match f.wait(dev, WAIT_US).map_err(|e| errno(&e)) {
        Ok(CsDone::Completed { .. }) => Ok(true),
        Ok(CsDone::Busy) => Ok(false),
        Err(e) => Err(e),
    };
    if diag && st.strict && r == Err(110) {
        // A timed-out clean CS of a strict run: its chunks on the log, to follow
        // next to the model's record of the halt (`gaudi2-model: halt`).
        for ((q, cb), (cva, len)) in chunks.iter().zip(&placed) {
            let words: Vec<String> = cb
                .bytes()
                .chunks(4)
                .map(|w| format!("{:08x}", u32::from_le_bytes(w.try_into().unwrap_or([0; 4]))))
                .collect();
            eprintln!(
                "hlrs-fuzz: timed out: CS {} queue {q} CB {cva:#x}+{len}: {}",
                f.seq,
                words.join(" ")
            );
        }
    }
    r
}

/// The `SYNC CS` op.
pub fn sync_cs(
    dev: &Device,
    st: &mut SyncState,
    shared: &Shared,
    rng: &mut Rng,
) -> Result<(), i32> {
    let Some(va) = st.mem(dev) else {
        return Ok(());
    };
    if rng.below(2) == 0 {
        clean_cs(dev, st, shared, rng, va)
    } else {
        let counter = st.counter(dev);
        let chunks = loose_chunks(st, rng, va, counter);
        let _risk = shared.risk();
        match run(dev, st, va, &chunks, (1 + rng.below(2) as u32, false))? {
            true => Ok(()),
            false => Err(HUNG),
        }
    }
}

/// 1..3 chunks of random packets on random queues.
fn loose_chunks(
    st: &SyncState,
    rng: &mut Rng,
    va: u64,
    counter: Option<(u64, u64)>,
) -> Vec<(u32, Cb)> {
    (0..1 + rng.below(3))
        .map(|_| {
            let q = match rng.below(8) {
                0 => rng.below(160) as u32,
                1..=3 => {
                    crate::fuzz_cs::QUEUES[rng.below(crate::fuzz_cs::QUEUES.len() as u64) as usize]
                }
                _ => SAFE_QUEUES[rng.below(SAFE_QUEUES.len() as u64) as usize],
            };
            let mut cb = Cb::new();
            for _ in 0..1 + rng.below(12) {
                cb = cb.push(&loose_packet(st, rng, va, counter));
            }
            // Now and then a fence that may never be released.
            if rng.below(64) == 0 {
                if let Some(f) = Fence::of(q) {
                    // Never more taken off than waited for (a counter taken
                    // below 0 would hold a clean CS's fence for ever).
                    let f = f.counter(rng.below(3) as u32);
                    let target = rng.below(256) as u32;
                    let dec = rng.below(u64::from(target.min(15)) + 1) as u32;
                    cb = cb.push(&f.wait_dec(target, dec));
                }
            }
            (q, cb.nop())
        })
        .collect()
}

/// The chunks of a clean CS ((queue, CB)).
fn clean_chunks(st: &SyncState, rng: &mut Rng, va: u64) -> Vec<(u32, Cb)> {
    let k = 1 + rng.below(3) as usize;
    let mut free = SAFE_QUEUES.to_vec();
    let queues: Vec<u32> = (0..k)
        .map(|_| free.swap_remove(rng.below(free.len() as u64) as usize))
        .collect();
    // Per chunk: its arm (if it waits), the release writes it makes, its fence.
    let mut arms: Vec<Vec<u8>> = vec![Vec::new(); k];
    let mut releases: Vec<Vec<u8>> = vec![Vec::new(); k];
    let mut fences: Vec<Vec<u8>> = vec![Vec::new(); k];
    let rot = rng.below(16) as u32;
    for i in 0..k {
        if rng.below(3) == 0 {
            continue;
        }
        let r = i + rng.below((k - i) as u64) as usize;
        let sob = st.release_sob(rot + i as u32);
        let mon = Monitor::new(st.mon0 + i as u32);
        let Some(fence) = Fence::of(queues[i]) else {
            continue;
        };
        let fence = fence.counter(rng.below(3) as u32);
        let data = 1 + rng.below(3) as u32;
        let target = 1 + rng.below(u64::from(data)) as u32;
        arms[i] = mon.payload(0, fence.addr(), data);
        arms[i].extend_from_slice(&mon.arm(sob, Compare::AtLeast, 1));
        let write = match rng.below(3) {
            0 => sob.set(1).to_vec(),
            1 => sob.add(1).to_vec(),
            _ => packet::msg_long(sob.addr(), 1).to_vec(),
        };
        releases[r].extend_from_slice(&write);
        fences[i] = fence.wait(target).to_vec();
    }
    (0..k)
        .map(|i| {
            let mut cb = Cb::new();
            for _ in 0..rng.below(4) {
                cb = cb.push(&clean_extra(st, rng, va));
            }
            cb = cb.push(&arms[i]);
            for _ in 0..rng.below(3) {
                cb = cb.push(&clean_extra(st, rng, va));
            }
            cb = cb.push(&releases[i]).push(&fences[i]);
            for _ in 0..rng.below(3) {
                cb = cb.push(&clean_extra(st, rng, va));
            }
            (queues[i], cb.nop())
        })
        .collect()
}

/// A clean CS: chunk i on its own queue may wait at a fence that chunk
/// r >= i releases (r == i: the same chunk, before its fence).
fn clean_cs(
    dev: &Device,
    st: &mut SyncState,
    shared: &Shared,
    rng: &mut Rng,
    va: u64,
) -> Result<(), i32> {
    let chunks = clean_chunks(st, rng, va);
    let before = shared.snapshot();
    let r = run(dev, st, va, &chunks, (10, true));
    let after = shared.snapshot();
    let alone = st.strict && before.0 == 0 && after.0 == 0 && before.1 == after.1;
    match r {
        Ok(true) => Ok(()),
        Ok(false) => Err(HUNG),
        Err(110) if alone => Err(NOT_RELEASED),
        Err(e) => Err(e),
    }
}

/// Queues of the `SIGNAL/WAIT` op: none a clean CS runs on (a WAIT CS's
/// monitor pays into fence 2 of its stream, which clean CSs also use).
const SIGNAL_QUEUES: [u32; 4] = [
    GAUDI2_QUEUE_ID_DCORE0_EDMA_0_0 + 4,
    GAUDI2_QUEUE_ID_DCORE0_EDMA_0_0 + 5,
    GAUDI2_QUEUE_ID_DCORE1_EDMA_0_0,
    GAUDI2_QUEUE_ID_DCORE1_EDMA_0_0 + 1,
];

/// The `SIGNAL/WAIT` op: a SIGNAL CS on a queue (now and then one without
/// a sync stream the device runs: EINVAL), then a WAIT CS on another for
/// it, or for a sequence that is no signal, not given yet, two of them or
/// encapsulated signals; both with a short timeout, both waited for. A
/// signal behind another thread's CS that the TDR halts is aborted (EIO),
/// and the waits for it (and for its queue's later signals, whose values
/// it never reached) time out: risky, as a loose CS.
pub fn signal_wait(dev: &Device, shared: &Shared, rng: &mut Rng) -> Result<(), i32> {
    let pick = |rng: &mut Rng| match rng.below(16) {
        0 => rng.below(300) as u32,
        _ => SIGNAL_QUEUES[rng.below(SIGNAL_QUEUES.len() as u64) as usize],
    };
    let _risk = shared.risk();
    let flags = HL_CS_FLAGS_CUSTOM_TIMEOUT
        | if rng.below(4) == 0 {
            HL_CS_FLAGS_TIMESTAMP
        } else {
            0
        };
    let sig = dev
        .signal_with(pick(rng), flags, 2)
        .map_err(|e| errno(&e))?;
    let seq = sig.fence.seq;
    let signals: Vec<u64> = match rng.below(10) {
        0 => vec![rng.below(seq + 64)],
        1 => vec![seq, seq],
        2 => vec![],
        _ => vec![seq],
    };
    let wflags = flags
        | if rng.below(10) == 0 {
            HL_CS_FLAGS_ENCAP_SIGNALS
        } else {
            0
        };
    let w = dev.wait_signals_raw(pick(rng), &signals, (wflags, 2));
    let ended = |f: hlrs::cs::Fence| match f.wait(dev, WAIT_US).map_err(|e| errno(&e))? {
        CsDone::Completed { .. } => Ok(()),
        CsDone::Busy => Err(HUNG),
    };
    let first = ended(sig.fence);
    match w {
        Ok(Some(f)) => ended(f).and(first),
        Ok(None) => first,
        Err(e) => first.and(Err(errno(&e))),
    }
}

/// The `SYNC hang` op: a fence nothing releases, then a CS that must
/// complete on the same queue.
pub fn hang(dev: &Device, st: &mut SyncState, shared: &Shared, rng: &mut Rng) -> Result<(), i32> {
    const ETIMEDOUT: i32 = 110;
    const EIO: i32 = 5;
    let Some(va) = st.mem(dev) else {
        return Ok(());
    };
    let q = SAFE_QUEUES[rng.below(SAFE_QUEUES.len() as u64) as usize];
    let Some(fence) = Fence::of(q) else {
        return Ok(());
    };
    let mut cb = Cb::new();
    for _ in 0..rng.below(3) {
        cb = cb.push(&clean_extra(st, rng, va));
    }
    let cb = cb
        .push(&fence.counter(HANG_COUNTER).wait(1 + rng.below(255) as u32))
        .nop();
    {
        let _risk = shared.risk();
        match run(dev, st, va, &[(q, cb)], (1, false)) {
            Ok(true) => return Err(RELEASED),
            Ok(false) => return Err(HUNG),
            Err(ETIMEDOUT | EIO) => {}
            // Refused at submission (EAGAIN, ENOMEM): nothing hung.
            Err(e) => return Err(e),
        }
    }
    // The device goes on: a NOP on the same queue completes (three tries:
    // another thread's CS may fault or time out meanwhile).
    for _ in 0..3 {
        let before = shared.snapshot();
        let r = run(dev, st, va, &[(q, Cb::new().nop())], (10, true));
        let after = shared.snapshot();
        let alone = st.strict && before.0 == 0 && after.0 == 0 && before.1 == after.1;
        match r {
            Ok(true) => return Ok(()),
            Ok(false) => return Err(HUNG),
            Err(ETIMEDOUT) if alone => return Err(DEAD),
            Err(_) => {}
        }
    }
    Err(DEAD)
}

/// The `INTR WAIT` op: the wait's outcome, and that of the CS that fired
/// a monitor into the counter meanwhile (if one was submitted).
pub fn interrupt_wait(
    dev: &Device,
    st: &mut SyncState,
    shared: &Shared,
    rng: &mut Rng,
) -> (Result<(), i32>, Option<Result<(), i32>>) {
    let Some(va) = st.mem(dev) else {
        return (Ok(()), None);
    };
    let counter = st.counter(dev);
    let irq = match rng.below(10) {
        0 => sync::ANY_CQ_INTERRUPT,
        1 => rng.below(u64::from(sync::FIRST_USER_INTERRUPT)) as u32,
        2 => 112 + rng.below(0xFFF - 112) as u32,
        _ => sync::FIRST_USER_INTERRUPT + rng.below(64) as u32,
    };
    let index = match rng.below(8) {
        0 => 512 + rng.below(1 << 20),
        1 => u64::MAX - rng.below(8),
        _ => rng.below(4),
    };
    let target = match rng.below(6) {
        0 => 0,
        1 => u64::MAX,
        2 => 1 << 32,
        _ => 1 + rng.below(8),
    };
    let timeout = match rng.below(4) {
        0 => 0,
        _ => rng.below(50_001),
    };
    // A CS that sets up a CQ on the counter (at the index waited on) and
    // fires a monitor adding to it, raising the interrupt.
    let mut fired = None;
    if rng.below(4) == 0 {
        if let Some((_, cva)) = counter {
            let cq = Cq(st.first_cq + rng.below(u64::from(64 - st.first_cq.min(63))) as u32);
            let sob = st.loose_sob(rng, 1);
            let mon = Monitor::new(st.mon0 + 8 + rng.below(8) as u32);
            let user_irq = irq.clamp(sync::FIRST_USER_INTERRUPT, sync::FIRST_USER_INTERRUPT + 63);
            let cb = Cb::new()
                .push(&cq.counter(cva + 8 * (index & 511), user_irq))
                .push(&mon.fire_into_cq(cq, sob, 1, 1 + rng.below(4) as u32))
                .push(&sob.add(1))
                .nop();
            let q = SAFE_QUEUES[rng.below(SAFE_QUEUES.len() as u64) as usize];
            let placed = st.place(va, std::slice::from_ref(&cb));
            let risk = shared.risk();
            fired = Some((
                Cs::new()
                    .chunk(q, placed[0].0, placed[0].1)
                    .timeout(2)
                    .submit(dev)
                    .map_err(|e| errno(&e)),
                risk,
            ));
        }
    }
    let r = match (rng.below(5), counter) {
        (0, _) | (_, None) => {
            let addr = match rng.below(4) {
                0 => 0x10,
                1 => 0xFFFF_8880_0000_0000,
                2 => st.mem.as_ref().map_or(0, |(b, _)| b.addr()) + WORDS as u64 + 4,
                _ => st.mem.as_ref().map_or(0, |(b, _)| b.addr()) + WORDS as u64,
            };
            dev.wait_interrupt_addr(irq, addr, target, timeout)
        }
        (1, _) => {
            let h = [0u64, 1, u64::MAX, 1 << 32][rng.below(4) as usize];
            dev.wait_interrupt_cb(irq, (h, index), target, timeout)
        }
        (_, Some((h, _))) => dev.wait_interrupt_cb(irq, (h, index), target, timeout),
    };
    let r = match r {
        Ok(w)
            if matches!(
                w.status,
                HL_WAIT_CS_STATUS_BUSY | HL_WAIT_CS_STATUS_COMPLETED
            ) =>
        {
            Ok(())
        }
        Ok(_) => Err(BAD_STATUS),
        Err(e) => Err(errno(&e)),
    };
    let cs = fired.map(|(f, _risk)| {
        let f = f?;
        match f.wait(dev, WAIT_US).map_err(|e| errno(&e))? {
            CsDone::Completed { .. } => Ok(()),
            CsDone::Busy => Err(HUNG),
        }
    });
    (r, cs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use hlrs::sync::{MON_PAY_ADDRL_0, SOB_OBJ_0};
    use std::collections::HashSet;

    fn state(block: u32) -> SyncState {
        SyncState {
            sob0: 416 + block * SOBS_PER,
            mon0: 289 + block * MONS_PER,
            first_sob: 413,
            first_cq: 2,
            strict: true,
            mem: None,
            ring: 0,
            counter: None,
        }
    }

    fn word(b: &[u8], at: usize) -> u32 {
        u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
    }

    /// The packets of a CB: (opcode, bytes).
    fn packets(bytes: &[u8]) -> Vec<(u32, &[u8])> {
        let (mut out, mut at) = (Vec::new(), 0);
        while at < bytes.len() {
            let op = (word(bytes, at + 4) >> 24) & 0x1F;
            let n = match op {
                PACKET_MSG_LONG | PACKET_CP_DMA | PACKET_LOAD_AND_EXE => 16,
                PACKET_CB_LIST => 24,
                _ => 8,
            };
            out.push((op, &bytes[at..at + n]));
            at += n;
        }
        assert_eq!(at, bytes.len());
        out
    }

    /// A register a packet writes (offset in the config space), if any.
    fn target(op: u32, p: &[u8]) -> Option<u32> {
        match op {
            PACKET_MSG_SHORT => {
                let c = word(p, 4);
                // Bases 2 and 3 point at SRAM (or nowhere), not a register.
                let base = *[MON_PAY_ADDRL_0, SOB_OBJ_0].get(((c >> 22) & 3) as usize)?;
                Some(base + (c & 0xFFFF))
            }
            PACKET_MSG_LONG => {
                let a = u64::from_le_bytes(p[8..16].try_into().unwrap());
                (sync::CFG_BASE..sync::CFG_BASE + 0x800_0000)
                    .contains(&a)
                    .then(|| (a - sync::CFG_BASE) as u32)
            }
            _ => None,
        }
    }

    /// SOB id, or (monitor array, monitor id), of a register.
    fn sob_of(reg: u32) -> Option<u32> {
        (SOB_OBJ_0..SOB_OBJ_0 + 0x8000)
            .contains(&reg)
            .then(|| (reg - SOB_OBJ_0) / 4)
    }
    fn mon_of(reg: u32) -> Option<(u32, u32)> {
        (MON_PAY_ADDRL_0..MON_PAY_ADDRL_0 + 0xA000)
            .contains(&reg)
            .then(|| ((reg - MON_PAY_ADDRL_0) / 0x2000, (reg % 0x2000) / 4))
    }

    /// Low 32 bits of every counter-3 fence register (the hang op's).
    fn hang_fences() -> HashSet<u32> {
        (0..156)
            .filter_map(sync::qman_of)
            .flat_map(|(qman, _)| (0..5).map(move |cp| Fence { qman, cp, id: 3 }.addr() as u32))
            .collect()
    }

    #[test]
    fn loose_cses_keep_off_the_clean_objects_and_the_hang_counter() {
        let hang = hang_fences();
        let mut rng = Rng::new(7);
        for block in [0, 5, BLOCKS - 1] {
            let st = state(block);
            let own_sobs = st.sob0 + 32..st.sob0 + 64;
            let own_mons = st.mon0 + 8..st.mon0 + 16;
            for _ in 0..5000 {
                let counter = Some((1, 0xFFF0_0000_1000_0000));
                for (_, cb) in loose_chunks(&st, &mut rng, 0xFFF0_0000_0000_0000, counter) {
                    assert!(cb.bytes().len() <= RING / 8);
                    for (op, p) in packets(cb.bytes()) {
                        if op == PACKET_FENCE {
                            let cfg = word(p, 0);
                            assert_ne!(cfg >> 30, HANG_COUNTER);
                            assert!(cfg & 0xF <= (cfg >> 16) & 0xFF, "{cfg:#x}");
                        }
                        let Some(reg) = target(op, p) else { continue };
                        // No fence counter written directly, `RDATA` or
                        // `CNT` (outside the sync manager, whose CQ
                        // registers share the low bits).
                        let sm = (0x410_0000..0x412_0000).contains(&reg);
                        assert!(sm || !(0x290..0x330).contains(&(reg & 0xFFF)), "{reg:#x}");
                        // No message base the clean CSs use (0 and 1) of a
                        // QMAN (every QMAN block is 0xA000 into its 64 KiB).
                        let qm = !sm && reg & 0xF000 == 0xA000;
                        assert!(!qm || !(0x1F0..0x240).contains(&(reg & 0xFFF)), "{reg:#x}");
                        if let Some(id) = sob_of(reg) {
                            assert!(id < DRIVER_SOBS || own_sobs.contains(&id), "SOB {id}");
                        }
                        if let Some((array, id)) = mon_of(reg) {
                            assert!(id < DRIVER_MONS || own_mons.contains(&id), "monitor {id}");
                            if array == 0 && op == PACKET_MSG_SHORT {
                                assert!(!hang.contains(&word(p, 0)), "payload into counter 3");
                            }
                            // A long monitor's tail (the next three) in the block.
                            let long = word(p, 0) & config::LONG_SOB != 0;
                            if array == 4 && op == PACKET_MSG_SHORT && long && id >= DRIVER_MONS {
                                assert!(id + 3 < own_mons.end, "long monitor {id}");
                            }
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn clean_cses_arm_a_payload_into_each_fence_they_wait_at() {
        let hang = hang_fences();
        let mut rng = Rng::new(11);
        let st = state(3);
        for _ in 0..5000 {
            let chunks = clean_chunks(&st, &mut rng, 0xFFF0_0000_0000_0000);
            let queues: HashSet<u32> = chunks.iter().map(|(q, _)| *q).collect();
            assert_eq!(queues.len(), chunks.len(), "one chunk per queue");
            for (q, cb) in &chunks {
                let mut payloads = Vec::new();
                let mut fences = 0;
                for (op, p) in packets(cb.bytes()) {
                    if op == PACKET_FENCE {
                        let cfg = word(p, 0);
                        let id = cfg >> 30;
                        assert_ne!(id, HANG_COUNTER);
                        let addr = Fence::of(*q).unwrap().counter(id).addr() as u32;
                        assert!(
                            payloads.contains(&addr),
                            "a fence no payload of its chunk adds to"
                        );
                        fences += 1;
                    }
                    let Some(reg) = target(op, p) else { continue };
                    if let Some(id) = sob_of(reg) {
                        assert!((st.sob0..st.sob0 + 32).contains(&id), "SOB {id}");
                    } else if let Some((array, id)) = mon_of(reg) {
                        assert!((st.mon0..st.mon0 + 8).contains(&id), "monitor {id}");
                        if array == 0 {
                            assert!(!hang.contains(&word(p, 0)));
                            payloads.push(word(p, 0));
                        }
                    } else {
                        panic!("a clean CS writes register {reg:#x}");
                    }
                }
                assert!(fences <= 1);
            }
        }
    }
}
