//! `hlrs fuzz`: a structured ioctl fuzzer for the driver, run inside the
//! guest on the debug kernel (lockdep, KFENCE, kmemleak watch the kernel side).
//!
//! Every INFO op, DEBUG, every MEMORY op, every CB op (CREATE, INFO,
//! DESTROY), CSs of random packets on every queue and WAIT_CS (`fuzz_cs`), memsets that
//! flood the run's DRAM mappings (the host memory behind simulated DRAM is
//! bounded at 32 MiB for the run, and must all come back at its end),
//! INFO answers copied into pages that stall the copy (userfaultfd) while the
//! other threads go on,
//! plus `mmap`/`munmap` of the handles MAP_BLOCK, TS_ALLOC and CB CREATE return, with arguments drawn from boundary values (0, 1,
//! page - 1, page, 2^32 - 1, 2^32, 2^63, 2^64 - 1 and the device's own
//! geometry) or taken from earlier successful calls (handles, VAs, mmap
//! handles), so deep states are reached, not just the argument checks. Host
//! buffers are anonymous, hugetlbfs, transparent-huge-page, memfd (shmem file)
//! or read-only memory, or unmapped addresses; they are shared by the threads
//! of a device, so one thread `munmap`s a buffer while another is inside its
//! MAP or after the device mapped it; children are forked that use the same fd
//! and exit. Several threads share each device's fd, on several devices at once.
//! Host MAPs are counted per backing in the summary.
//!
//! With `--sync`, devices with user interrupts (the Gaudi2 on PCI) also get
//! the sync-manager family (`fuzz_sync`): CSs of SOB writes, monitors,
//! fences, nested CBs and predicates, fences that never release (which must
//! time out, the device going on), interrupt waits; `--sync-only` draws
//! from that family alone.
//!
//! Each thread draws from its own fixed-seed generator (seed ^ thread), so a
//! failure prints a reproducer: `--seed S --threads 1 --thread T --calls K`
//! replays thread T's sequence alone up to the failing call. A failure is
//! an errno outside the op's documented set; the kernel side is judged by the
//! guest log. At the end every fd is closed and the devices must be idle.

use crate::stress::Rng;
use hlrs::{errno, gaudi2, uapi::*, Backing, Device, HostBuffer};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The operations, in summary order. The first [`SELECTABLE`] are drawn; then
/// the host MAPs of buffers with other backings than anonymous memory,
/// counted apart; then the sync-manager family (from [`SYNC_OP`]), drawn
/// only with `--sync` on devices with user interrupts.
const OPS: [&str; 31] = [
    "INFO",
    "ALLOC",
    "FREE",
    "MAP",
    "MAP host",
    "UNMAP",
    "MAP_BLOCK",
    "mmap",
    "munmap",
    "TS_ALLOC",
    "CB CREATE",
    "CB INFO",
    "CB DESTROY",
    "EXPORT",
    "host munmap",
    "fork",
    "fail invalidation",
    "debugfs mem",
    "CS",
    "WAIT_CS",
    "DRAM flood",
    "stalled INFO",
    "DEBUG",
    "MAP hugetlb",
    "MAP thp",
    "MAP memfd",
    "MAP read-only",
    "SYNC CS",
    "SYNC hang",
    "INTR WAIT",
    "SIGNAL/WAIT",
];
/// Index of "SYNC CS" in [`OPS`]; "SYNC hang", "INTR WAIT" and
/// "SIGNAL/WAIT" follow.
const SYNC_OP: usize = 27;
/// How many of [`OPS`] the fuzzer draws from.
const SELECTABLE: usize = 23;
/// Index of "MAP host" in [`OPS`].
const MAP_HOST_OP: usize = 4;

/// What the fuzzer reports when a call succeeded that must not (no op
/// allows it).
const EXDEV: i32 = 18;

/// The errnos each op may answer (besides success).
fn allowed(op: usize, e: i32) -> bool {
    const EPERM: i32 = 1;
    const EINTR: i32 = 4;
    // An MMU invalidation failed ("fail invalidation" injects them): the
    // mapping is quarantined, its memory kept until a later one succeeds.
    const EIO: i32 = 5;
    const ENOEXEC: i32 = 8;
    const EBADF: i32 = 9;
    const EAGAIN: i32 = 11;
    const ENOMEM: i32 = 12;
    const EBUSY: i32 = 16;
    const EFAULT: i32 = 14;
    const EINVAL: i32 = 22;
    const EMFILE: i32 = 24;
    const EOPNOTSUPP: i32 = 95;
    const EADDRINUSE: i32 = 98;
    const ETIMEDOUT: i32 = 110;
    const ERANGE: i32 = 34;
    const ENOSPC: i32 = 28;
    match OPS[op] {
        // ENOMEM: USER_MAPPINGS into a buffer too small for the mappings
        // captured at a page fault (the CSs provoke them); EBADF:
        // REGISTER_EVENTFD of an fd number that is not open; EIO: the
        // firmware (CPU-CP) refused a PLL_FREQUENCY index.
        "INFO" => matches!(e, EINVAL | EFAULT | EOPNOTSUPP | ENOMEM | EBADF | EIO),
        "ALLOC" => matches!(e, EINVAL | ENOMEM),
        "FREE" => matches!(e, EINVAL | EPERM),
        "MAP" => matches!(e, EINVAL | EPERM | ENOMEM | EADDRINUSE | EIO),
        "MAP host" | "MAP hugetlb" | "MAP thp" | "MAP memfd" | "MAP read-only" => {
            matches!(e, EINVAL | ENOMEM | EADDRINUSE | EFAULT | EINTR | EIO)
        }
        "UNMAP" => matches!(e, EINVAL | EIO),
        "MAP_BLOCK" => e == EINVAL,
        "mmap" => matches!(e, EINVAL | ENOMEM),
        "munmap" => e == EINVAL,
        "TS_ALLOC" => matches!(e, EINVAL | ENOMEM),
        // EIO: the invalidation of a HL_CB_FLAGS_MAP mapping failed.
        "CB CREATE" => matches!(e, EINVAL | EMFILE | ENOMEM | EIO),
        "CB INFO" | "CB DESTROY" => e == EINVAL,
        "EXPORT" => matches!(e, EINVAL | EMFILE | EBADF),
        // Upstream's debugfs addr + data32/data64 (root): refused addresses,
        // the driver's own DRAM (read-only), a 32-bit value out of range.
        // EIO: a `dma_size` read reached an unmapped page; EBUSY: a scrub
        // while this run's context is open; ENOSPC: a write to DRAM never
        // written, past the limit on simulated DRAM's host memory.
        "debugfs mem" => matches!(e, EINVAL | EPERM | ERANGE | EIO | EBUSY | ENOSPC),
        // ENOEXEC: a restore CS that did not complete. EIO: a context's
        // first SIGNAL maps its sync-stream CB page, whose invalidation
        // failed (injected); the page goes again, the context as before.
        "CS" => matches!(
            e,
            EINVAL | EFAULT | EAGAIN | EPERM | EOPNOTSUPP | ENOEXEC | ENOMEM | EIO
        ),
        "WAIT_CS" => matches!(e, EINVAL | EIO | ETIMEDOUT | EPERM),
        // A memset CS: as CS (its MAP of the CB failing submits nothing).
        "DRAM flood" => matches!(e, EINVAL | EAGAIN | EPERM | ENOMEM),
        // An INFO whose answer is copied into a page that stalls: as INFO.
        "stalled INFO" => matches!(e, EINVAL | EFAULT | EOPNOTSUPP | ENOMEM | EBADF | EIO),
        // Debug mode entered or left twice, a coresight op outside it or a
        // bad output pointer (EFAULT); the trace blocks (EOPNOTSUPP).
        "DEBUG" => matches!(e, EINVAL | EFAULT | EOPNOTSUPP | ENOMEM),
        // A sync CS: refused at submission (a queue not enabled or past
        // the ids: EINVAL; 64 in flight: EAGAIN; ENOMEM), or at WAIT_CS
        // aborted (a RAZWI, a fault, an undefined opcode: EIO) or timed out
        // (a fence never released, halted by the TDR: ETIMEDOUT).
        "SYNC CS" => matches!(e, EINVAL | EFAULT | EAGAIN | ENOMEM | EIO | ETIMEDOUT),
        // A hang CS refused at submission (EAGAIN, ENOMEM); its timeout and
        // abort are its expected ends (not errors), checked in fuzz_sync.
        "SYNC hang" => matches!(e, EINVAL | EAGAIN | ENOMEM | EFAULT),
        "INTR WAIT" => matches!(e, EINVAL | EINTR | EFAULT | ENOMEM),
        // A SIGNAL or WAIT refused (a queue without a stream, a sequence
        // that is no signal: EINVAL; EAGAIN; ENOMEM), or ended aborted
        // (halted behind another thread's CS: EIO) or timed out (its
        // signal never ran: ETIMEDOUT).
        "SIGNAL/WAIT" => matches!(e, EINVAL | EAGAIN | ENOMEM | EIO | ETIMEDOUT),
        _ => false,
    }
}

/// What the threads of one device share: handles, VAs, mmap handles.
#[derive(Default)]
struct Pool {
    handles: Vec<u64>,
    vas: Vec<u64>,
    mmap_handles: Vec<(u64, usize)>,
    /// Live CB handles.
    cbs: Vec<u64>,
    /// Live mmaps of the device fd: address -> length.
    mmaps: BTreeMap<u64, usize>,
    /// Host buffers, shared by the device's threads (one may munmap a buffer
    /// another is mapping).
    buffers: Vec<HostBuffer>,
}

/// Counts of one op: calls, successes, and each errno seen.
#[derive(Default, Clone)]
pub struct OpStats {
    /// Calls made.
    pub calls: u64,
    /// Calls that succeeded.
    pub ok: u64,
    /// errno -> count.
    pub errnos: BTreeMap<i32, u64>,
}

/// The outcome of a run.
pub struct Report {
    /// Per op, in [`OPS`] order.
    pub ops: Vec<(&'static str, OpStats)>,
    /// Calls made in all.
    pub calls: u64,
    /// The first failure, with its reproducer.
    pub failure: Option<String>,
    /// Wall time.
    pub elapsed: Duration,
}

/// Settings of a run.
pub struct Settings {
    /// Seed of every thread's generator (xored with the thread number).
    pub seed: u64,
    /// Calls in all (across threads).
    pub calls: u64,
    /// Time bound.
    pub seconds: u64,
    /// Threads per device.
    pub threads: u32,
    /// Devices (0 .. devices - 1).
    pub devices: u32,
    /// Run only this thread's sequence (replay).
    pub only_thread: Option<u32>,
    /// The first device (the run's are `first_device ..` + `devices`).
    pub first_device: u32,
    /// Draw the sync-manager family too, on devices with user interrupts.
    pub sync: bool,
    /// Draw only the sync-manager family (every device must have user
    /// interrupts).
    pub sync_only: bool,
}

/// Most live mappings per device before the fuzzer unmaps instead of mapping.
const LIVE_VAS: usize = 128;
/// Most live handles per device before the fuzzer frees instead of
/// allocating (a 5,000,000-call run without it spent most ALLOCs on a full
/// DRAM pool: 240,000 ENOMEM of 383,000).
const LIVE_HANDLES: usize = 32;
/// Indices of ALLOC and FREE in [`OPS`].
const ALLOC_OP: usize = 1;
const FREE_OP: usize = 2;
/// Most live host buffers per device before a new one replaces an old one.
const LIVE_BUFFERS: usize = 24;
/// Index of UNMAP in [`OPS`].
const UNMAP_OP: usize = 5;
/// Most live CBs per device before the fuzzer destroys instead of creating
/// (a destroyed CB that is mapped lives on until its munmap).
const LIVE_CBS: usize = 32;
/// Indices of CB CREATE and CB DESTROY in [`OPS`].
const CB_CREATE_OP: usize = 10;
const CB_DESTROY_OP: usize = 12;
/// CB sizes: upstream's examples, page edges, the largest and past it. The
/// last four are drawn one time in eight: a 2 MiB CB costs about 10 ms to
/// create on the debug kernel under emulation, and drawn as often as the
/// others they tripled the time of the `make test` pass.
const CB_SIZES: [u32; 10] = [
    0,
    1,
    77,
    4096,
    5000,
    92517,
    1 << 20,
    HL_MAX_CB_SIZE,
    HL_MAX_CB_SIZE + 1,
    u32::MAX,
];

/// Boundary values of 64-bit arguments.
const EDGES: [u64; 12] = [
    0,
    1,
    4095,
    4096,
    (1 << 32) - 1,
    1 << 32,
    1 << 63,
    u64::MAX,
    0x3000_0000 - 1,
    0x3000_0000,
    0x3000_0001,
    1 << 40,
];

struct Worker<'a> {
    dev: &'a Device,
    pool: &'a Mutex<Pool>,
    rng: Rng,
    stats: Vec<OpStats>,
    dram_page: u64,
    dram_va: u64,
    info_out: Vec<u8>,
    cs: crate::fuzz_cs::CsState,
    /// The sync-manager family's state (None: not drawn on this device).
    sync: Option<crate::fuzz_sync::SyncState>,
    sync_shared: &'a crate::fuzz_sync::Shared,
    sync_only: bool,
}

/// Lock a pool; a worker that panicked cannot leave it inconsistent (each
/// update is one push or retain), so a poisoned lock is used as it is.
fn lock(pool: &Mutex<Pool>) -> std::sync::MutexGuard<'_, Pool> {
    pool.lock().unwrap_or_else(|e| e.into_inner())
}

impl Worker<'_> {
    /// A random element of one of the pool's lists, picked under the lock.
    fn pick_known<T: Copy>(&mut self, list: impl Fn(&Pool) -> &Vec<T>) -> Option<T> {
        let pool = lock(self.pool);
        let v = list(&pool);
        (!v.is_empty()).then(|| v[self.rng.below(v.len() as u64) as usize])
    }

    fn edge(&mut self) -> u64 {
        EDGES[self.rng.below(EDGES.len() as u64) as usize]
    }

    fn handle(&mut self) -> u64 {
        match self.rng.below(4) {
            0 => self.edge(),
            _ => self.pick_known(|p| &p.handles).unwrap_or(1),
        }
    }

    /// A live CB handle, mostly; sometimes an edge value or a TS handle.
    fn cb_handle(&mut self) -> u64 {
        match self.rng.below(6) {
            0 => self.edge(),
            1 => mmap_handle(self.rng.below(300), HL_MMAP_TYPE_CB),
            _ => self.pick_known(|p| &p.cbs).unwrap_or(1),
        }
    }

    fn va(&mut self) -> u64 {
        match self.rng.below(5) {
            0 => self.edge(),
            1 => self.dram_va + self.rng.below(8) * self.dram_page,
            _ => self.pick_known(|p| &p.vas).unwrap_or(0),
        }
    }

    fn flags(&mut self) -> u32 {
        [
            0,
            HL_MEM_CONTIGUOUS,
            HL_MEM_SHARED,
            HL_MEM_FORCE_HINT,
            HL_MEM_PREFETCH,
            0x10,
            u32::MAX,
        ][self.rng.below(7) as usize]
    }

    /// A new host buffer of a random backing in the device's pool (replacing
    /// a random one past [`LIVE_BUFFERS`]); hugetlbfs pages may run out.
    fn new_buffer(&mut self) {
        let (backing, len) = match self.rng.below(8) {
            0 => (Backing::Hugetlb, 2 << 20),
            1 => (Backing::Thp, 2 << 20),
            2 => (Backing::Memfd, 64 << 10),
            3 => (Backing::ReadOnly, 8192),
            _ => (
                Backing::Anonymous,
                [4096usize, 64 << 10, 2 << 20][self.rng.below(3) as usize],
            ),
        };
        if let Ok(b) = HostBuffer::with_backing(len, backing) {
            let victim = self.rng.below(LIVE_BUFFERS as u64) as usize;
            let mut pool = lock(self.pool);
            let n = pool.buffers.len();
            if n >= LIVE_BUFFERS {
                pool.buffers.swap_remove(victim.min(n - 1));
            }
            pool.buffers.push(b);
        }
    }

    /// A host address and size, and the op index to count the MAP under: a
    /// range of a live buffer (its address read under the pool lock; another
    /// thread may munmap it right after), an unmapped or kernel address, or
    /// our own program text (mapped, read-only).
    fn host_addr(&mut self) -> (u64, u64, usize) {
        if self.rng.below(8) == 0 || lock(self.pool).buffers.is_empty() {
            self.new_buffer();
        }
        let pick = self.rng.next();
        let buf = {
            let pool = lock(self.pool);
            let n = pool.buffers.len() as u64;
            pool.buffers
                .get((pick % n.max(1)) as usize)
                .map(|b| (b.addr(), b.len() as u64, b.backing()))
        };
        match (self.rng.below(10), buf) {
            (0, _) | (_, None) => (0x1000, 4096, MAP_HOST_OP),
            (1, _) => (0xffff_8880_0000_0000, 4096, MAP_HOST_OP),
            (2, _) => (
                (summary as fn(&Report) -> String) as usize as u64 & !0xfff,
                4096,
                MAP_HOST_OP,
            ),
            (_, Some((addr, len, backing))) => {
                let off = match self.rng.below(3) {
                    0 => 0,
                    _ => self.rng.below(len),
                };
                let size = match self.rng.below(4) {
                    0 => self.edge(),
                    1 => len - off,
                    _ => 1 + self.rng.below(len - off),
                };
                let op = match backing {
                    Backing::Anonymous => MAP_HOST_OP,
                    Backing::Hugetlb => SELECTABLE,
                    Backing::Thp => SELECTABLE + 1,
                    Backing::Memfd => SELECTABLE + 2,
                    Backing::ReadOnly => SELECTABLE + 3,
                };
                (addr + off, size, op)
            }
        }
    }

    fn record(&mut self, op: usize, r: Result<(), i32>) -> Result<(), String> {
        let s = &mut self.stats[op];
        s.calls += 1;
        match r {
            Ok(()) => {
                s.ok += 1;
                Ok(())
            }
            Err(e) => {
                *s.errnos.entry(e).or_default() += 1;
                if allowed(op, e) {
                    Ok(())
                } else if let Some(what) = crate::fuzz_sync::describe(e) {
                    Err(format!("{}: {what} (check {e})", OPS[op]))
                } else {
                    Err(format!("{} answered errno {e}", OPS[op]))
                }
            }
        }
    }

    /// One call of the sync-manager family: CSs mostly, an interrupt wait
    /// often, a fence that never releases (a second or more) rarely.
    fn sync_step(&mut self) -> Result<(), String> {
        let Some(st) = self.sync.as_mut() else {
            return Ok(());
        };
        let (dev, shared, rng) = (self.dev, self.sync_shared, &mut self.rng);
        match rng.below(100) {
            0 => {
                let r = crate::fuzz_sync::hang(dev, st, shared, rng);
                self.record(SYNC_OP + 1, r)
            }
            1..=10 => {
                let r = crate::fuzz_sync::signal_wait(dev, shared, rng);
                self.record(SYNC_OP + 3, r)
            }
            11..=35 => {
                let (r, cs) = crate::fuzz_sync::interrupt_wait(dev, st, shared, rng);
                if let Some(cs) = cs {
                    self.record(SYNC_OP, cs)?;
                }
                self.record(SYNC_OP + 2, r)
            }
            _ => {
                let r = crate::fuzz_sync::sync_cs(dev, st, shared, rng);
                self.record(SYNC_OP, r)
            }
        }
    }

    /// One random call.
    fn step(&mut self) -> Result<(), String> {
        // The sync family: every call with --sync-only (nothing if the
        // device reports no sync manager), one in four with --sync (no
        // draw without it: seeds replay as before).
        if self.sync_only || (self.sync.is_some() && self.rng.below(4) == 0) {
            return self.sync_step();
        }
        let mut op = self.rng.below(SELECTABLE as u64) as usize;
        // Bound what the run keeps mapped (and so pinned): past LIVE_VAS live
        // mappings, UNMAP instead. A long run without this bound pins host
        // buffers until the OOM killer ends the fuzzer (found by a 26-minute
        // `make fuzz`; the kernel side handled it correctly).
        {
            let pool = lock(self.pool);
            if pool.vas.len() > LIVE_VAS {
                op = UNMAP_OP;
            } else if pool.handles.len() > LIVE_HANDLES && op == ALLOC_OP {
                op = FREE_OP;
            } else if pool.cbs.len() > LIVE_CBS && op == CB_CREATE_OP {
                op = CB_DESTROY_OP;
            }
        }
        let r: Result<(), i32> = match OPS[op] {
            "INFO" => {
                let info_op = if self.rng.below(10) == 0 {
                    self.rng.next() as u32
                } else {
                    self.rng.below(42) as u32
                };
                let ptr = match self.rng.below(6) {
                    0 => 0,
                    1 => 0x10,
                    _ => self.info_out.as_mut_ptr() as u64,
                };
                // Never more than our buffer when the pointer is ours.
                let size = match (ptr, self.rng.below(4)) {
                    (p, _) if p != self.info_out.as_ptr() as u64 => self.edge() as u32,
                    (_, 0) => 0,
                    _ => 1 + self.rng.below(self.info_out.len() as u64) as u32,
                };
                let mut a = HlInfoArgs {
                    return_pointer: ptr,
                    return_size: size,
                    op: info_op,
                    arg: self.rng.below(16) as u32,
                    pad: if self.rng.below(20) == 0 { 1 } else { 0 },
                };
                self.dev.info_args(&mut a).map_err(|e| errno(&e))
            }
            "ALLOC" => {
                let size = match self.rng.below(3) {
                    0 => self.edge(),
                    _ => 1 + self.rng.below(3 * self.dram_page),
                };
                let flags = self.flags();
                self.dev
                    .alloc(size, flags)
                    .map(|h| lock(self.pool).handles.push(h))
                    .map_err(|e| errno(&e))
            }
            "FREE" => {
                let h = self.handle();
                let r = self.dev.free(h);
                if r.is_ok() {
                    lock(self.pool).handles.retain(|&x| x != h);
                }
                r.map_err(|e| errno(&e))
            }
            "MAP" => {
                let (h, hint, flags) = (self.handle(), self.va(), self.flags());
                self.dev
                    .map(h, hint, flags)
                    .map(|va| lock(self.pool).vas.push(va))
                    .map_err(|e| errno(&e))
            }
            "MAP host" => {
                let (addr, size, count_as) = self.host_addr();
                op = count_as;
                let (hint, flags) = (self.va(), self.flags() & !HL_MEM_CONTIGUOUS);
                self.dev
                    .map_host(addr, size, hint, flags)
                    .map(|va| lock(self.pool).vas.push(va))
                    .map_err(|e| errno(&e))
            }
            "UNMAP" => {
                let va = self.va();
                let r = self.dev.unmap(va);
                if r.is_ok() {
                    lock(self.pool).vas.retain(|&x| x != va);
                }
                r.map_err(|e| errno(&e))
            }
            "MAP_BLOCK" => {
                let id = self.rng.below(gaudi2::user_blocks().len() as u64 + 2) as usize;
                let addr = gaudi2::block_addr(id).unwrap_or(0)
                    + [0, 0, 0, 1, 4096][self.rng.below(5) as usize];
                self.dev
                    .map_block(addr)
                    .map(|(h, s)| lock(self.pool).mmap_handles.push((h, s as usize)))
                    .map_err(|e| errno(&e))
            }
            "mmap" => {
                let (h, len) = self
                    .pick_known(|p| &p.mmap_handles)
                    .unwrap_or((mmap_handle(0, HL_MMAP_TYPE_BLOCK), 4096));
                let (h, len) = match self.rng.below(6) {
                    0 => (h, len + 4096),
                    1 => (
                        mmap_handle(
                            self.rng.below(600),
                            [HL_MMAP_TYPE_BLOCK, HL_MMAP_TYPE_TS_BUFF, HL_MMAP_TYPE_CB]
                                [self.rng.below(3) as usize],
                        ),
                        4096,
                    ),
                    _ => (h, len),
                };
                self.dev
                    .mmap_raw(h, len)
                    .map(|a| {
                        lock(self.pool).mmaps.insert(a, len);
                    })
                    .map_err(|e| errno(&e))
            }
            "munmap" => {
                let mut pool = lock(self.pool);
                let n = pool.mmaps.len() as u64;
                let pick = pool
                    .mmaps
                    .iter()
                    .nth(self.rng.below(n.max(1)) as usize)
                    .map(|(&a, &l)| (a, l));
                match pick {
                    Some((a, l)) => {
                        pool.mmaps.remove(&a);
                        // Sometimes only its first page: the rest stays in the pool.
                        let part = if self.rng.below(3) == 0 && l > 4096 {
                            4096
                        } else {
                            l
                        };
                        if part < l {
                            pool.mmaps.insert(a + part as u64, l - part);
                        }
                        // SAFETY: a mapping this fuzzer made with `mmap_raw`, which
                        // nothing else refers to (it was just taken out of the pool).
                        unsafe { self.dev.munmap(a, part) }.map_err(|e| errno(&e))
                    }
                    None => Ok(()),
                }
            }
            "TS_ALLOC" => {
                let n = [
                    0u32,
                    1,
                    2,
                    511,
                    512,
                    513,
                    4096,
                    1 << 20,
                    (1 << 20) + 1,
                    u32::MAX,
                ][self.rng.below(10) as usize];
                self.dev
                    .ts_alloc(n)
                    .map(|h| {
                        let len = (n as usize * 8).div_ceil(4096) * 4096;
                        lock(self.pool).mmap_handles.push((h, len));
                    })
                    .map_err(|e| errno(&e))
            }
            "CB CREATE" => {
                let pick = match self.rng.below(8) {
                    0 => 6 + self.rng.below(4),
                    _ => self.rng.below(6),
                };
                let size = CB_SIZES[pick as usize];
                let flags = [0u32, 0, 0, HL_CB_FLAGS_MAP, 0x4][self.rng.below(5) as usize];
                self.dev
                    .cb_create(size, flags)
                    .map(|h| {
                        let mut pool = lock(self.pool);
                        pool.cbs.push(h);
                        pool.mmap_handles.push((h, hlrs::cb_mapped_len(size)));
                    })
                    .map_err(|e| errno(&e))
            }
            "CB INFO" => {
                let h = self.cb_handle();
                let flags = [0u32, HL_CB_FLAGS_GET_DEVICE_VA][self.rng.below(2) as usize];
                let mut a = HlCbArgs {
                    cb_handle: h,
                    op: HL_CB_OP_INFO,
                    flags,
                    ..Default::default()
                };
                self.dev.cb_args(&mut a).map_err(|e| errno(&e))
            }
            "CB DESTROY" => {
                let h = self.cb_handle();
                let r = self.dev.cb_destroy(h);
                if r.is_ok() {
                    lock(self.pool).cbs.retain(|&x| x != h);
                }
                r.map_err(|e| errno(&e))
            }
            "EXPORT" => {
                let va = self.va();
                let (size, offset) = match self.rng.below(3) {
                    0 => (self.edge(), self.edge()),
                    _ => (4096 * (1 + self.rng.below(64)), 4096 * self.rng.below(64)),
                };
                let flags = [0u32, hlrs::DMABUF_FLAGS, 1, 0x40][self.rng.below(4) as usize];
                // The fd is closed at once (or kept until this thread ends).
                self.dev
                    .export_dmabuf(va, size, offset, flags)
                    .map(drop)
                    .map_err(|e| errno(&e))
            }
            "host munmap" => {
                // Drop (munmap) a host buffer the device may still map, or
                // that another thread is mapping right now: pinned pages stay
                // pinned until UNMAP or close.
                let pick = self.rng.next();
                let mut pool = lock(self.pool);
                let n = pool.buffers.len() as u64;
                if n > 0 {
                    pool.buffers.swap_remove((pick % n) as usize);
                }
                Ok(())
            }
            "fork" => {
                if self.rng.below(20) == 0 {
                    fork_child(self.dev)
                } else {
                    Ok(())
                }
            }
            "fail invalidation" => {
                // Rarely: the next 1-3 MMU invalidations of the device fail,
                // so MAPs and UNMAPs meet quarantine and its release.
                if self.rng.below(16) == 0 {
                    let n = 1 + self.rng.below(3);
                    fail_invalidations(self.dev.index(), &n.to_string())
                } else {
                    Ok(())
                }
            }
            "debugfs mem" => self.debugfs_mem(),
            "CS" => {
                let (vas, edge) = (lock(self.pool).vas.clone(), self.edge());
                crate::fuzz_cs::cs(self.dev, &mut self.cs, &mut self.rng, &vas, edge)
            }
            "WAIT_CS" => {
                let edge = self.edge();
                crate::fuzz_cs::wait_cs(self.dev, &self.cs, &mut self.rng, edge)
            }
            "stalled INFO" => self.stalled_info(),
            "DEBUG" => self.debug(),
            "DRAM flood" => {
                let vas = lock(self.pool).vas.clone();
                crate::fuzz_cs::dram_flood(self.dev, &mut self.cs, &mut self.rng, &vas)
            }
            _ => Ok(()),
        };
        self.record(op, r)
    }
}

impl Worker<'_> {
    /// A DEBUG call: any op (the valid ones 0-7 most often), debug mode
    /// toggled, an output buffer of ours, none, or a bad one.
    fn debug(&mut self) -> Result<(), i32> {
        let op = if self.rng.below(10) == 0 {
            self.rng.next() as u32
        } else {
            self.rng.below(9) as u32
        };
        let (output_ptr, output_size) = match self.rng.below(3) {
            0 => (0, self.edge() as u32),
            1 => (0x10, self.edge() as u32),
            _ => (
                self.info_out.as_mut_ptr() as u64,
                self.rng.below(self.info_out.len() as u64 + 1) as u32,
            ),
        };
        let mut a = HlDebugArgs {
            input_ptr: if self.rng.below(2) == 0 { 0 } else { 0x10 },
            output_ptr,
            input_size: self.edge() as u32,
            output_size,
            op,
            reg_idx: self.rng.below(64) as u32,
            enable: self.rng.below(2) as u32,
            ctx_id: 0,
        };
        self.dev.debug(&mut a).map_err(|e| errno(&e))
    }

    /// An INFO whose answer goes to a page that stalls the copy (a
    /// userfaultfd page, served after 0-4 ms by another thread), one draw in
    /// eight: the other threads and devices carry on meanwhile, and no lock
    /// of the driver may be held across the copy (a stalled copy under a
    /// device-wide lock would stall them, or deadlock with the serving
    /// thread's own calls). Not supported (no userfaultfd): nothing done.
    fn stalled_info(&mut self) -> Result<(), i32> {
        if self.rng.below(8) != 0 {
            return Ok(());
        }
        let Ok(page) = hlrs::uffd::StalledPage::new() else {
            return Ok(());
        };
        let op = [
            HL_INFO_USER_MAPPINGS,
            HL_INFO_HW_IP_INFO,
            HL_INFO_DRAM_USAGE,
            HL_INFO_CS_COUNTERS,
            HL_INFO_OPEN_STATS,
            HL_INFO_PAGE_FAULT_EVENT,
            HL_INFO_UNDEFINED_OPCODE_EVENT,
        ][self.rng.below(7) as usize];
        let delay = Duration::from_micros(self.rng.below(4000));
        let (dev, returned) = (self.dev, AtomicBool::new(false));
        std::thread::scope(|s| {
            let server = s.spawn(|| {
                // Serve the fault after the delay; or stop looking once the
                // INFO returned without touching the page (an error, or
                // nothing to copy).
                while !returned.load(Ordering::Relaxed) {
                    if page.next_fault(10).is_some() {
                        std::thread::sleep(delay);
                        let _ = page.zeropage();
                        break;
                    }
                }
            });
            let mut a = HlInfoArgs {
                return_pointer: page.addr(),
                return_size: 4096,
                op,
                arg: 0,
                pad: 0,
            };
            let r = dev.info_args(&mut a).map_err(|e| errno(&e));
            returned.store(true, Ordering::Relaxed);
            let _ = server.join();
            r
        })
    }

    /// One access through upstream's debugfs: `addr`, then a read or a write
    /// of `data32`/`data64`, at a known VA (plus an offset), an edge value,
    /// SRAM, DRAM by physical address or anything.
    fn debugfs_mem(&mut self) -> Result<(), i32> {
        const SRAM: u64 = 0x1000_FFFF_FD00_0000;
        const DRAM: u64 = 0x1001_0000_0000_0000;
        let addr = match self.rng.below(6) {
            0 => self.edge(),
            // Bounded windows: every written 4 KiB chunk is backed by guest
            // memory (SRAM's first 1 MiB, 512 KiB of the reserved and of
            // the first user DRAM page).
            1 => SRAM + self.rng.below(1 << 17) * 8,
            2 => DRAM + self.rng.below(2) * self.dram_page + self.rng.below(1 << 16) * 8,
            3 => self.rng.next(),
            _ => self.va().wrapping_add(self.rng.below(1 << 14) * 4),
        };
        let mem = hlrs::debugfs::DebugfsMem::new(self.dev.index());
        let width = if self.rng.below(2) == 0 {
            hlrs::debugfs::Width::W32
        } else {
            hlrs::debugfs::Width::W64
        };
        let r = match self.rng.below(16) {
            // A device read into `data_dma` (`dma_size`): mostly small, at
            // times an edge size (0, past the 128 MiB limit).
            0 => {
                let size = match self.rng.below(8) {
                    0 => 0,
                    1 => (128 << 20) + 1,
                    _ => self.rng.below(1 << 16) as u32 + 1,
                };
                mem.dma_read(addr, size).map(drop)
            }
            // A scrub must be refused (EBUSY) while this run's context is
            // open: success is reported as EXDEV, which no op allows.
            1 => mem
                .scrub(self.rng.next())
                .and_then(|()| Err(std::io::Error::from_raw_os_error(EXDEV))),
            2..=8 => mem.peek(addr, width).map(drop),
            _ => {
                let value = match width {
                    hlrs::debugfs::Width::W32 => self.rng.below(1 << 33),
                    hlrs::debugfs::Width::W64 => self.rng.next(),
                };
                mem.poke(addr, value, width)
            }
        };
        match r {
            Ok(()) => Ok(()),
            // Not root, or no debugfs: nothing to fuzz.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(e.raw_os_error().unwrap_or(5)),
        }
    }
}

/// A field of debugfs `dram_host` of device `index` (bytes), if readable.
fn dram_host_field(index: u32, field: &str) -> Option<u64> {
    let path = format!("/sys/kernel/debug/habanalabs_rs/{index}/dram_host");
    std::fs::read_to_string(path)
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix(field).and_then(|v| v.trim().parse().ok()))
}

/// Set the module-wide limit on simulated DRAM's host memory (root only).
fn dram_host_set_limit(bytes: u64) -> std::io::Result<()> {
    std::fs::write(
        "/sys/kernel/debug/habanalabs_rs/0/dram_host",
        bytes.to_string(),
    )
}

/// Make the next `n` MMU invalidations of device `index` fail (debugfs of
/// the simulated device; root only). A missing file is not an error: the
/// fuzzer also runs where debugfs is not mounted.
fn fail_invalidations(index: u32, n: &str) -> Result<(), i32> {
    let path = format!("/sys/kernel/debug/habanalabs_rs/{index}/fail_invalidations");
    match std::fs::write(path, n) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e.raw_os_error().unwrap_or(5)),
    }
}

/// Fork a child that uses the same fd (an ALLOC, a FREE, an INFO) and exits.
fn fork_child(dev: &Device) -> Result<(), i32> {
    // SAFETY: the child makes only system calls (no allocation: the ioctl
    // arguments are on its stack) and leaves with `_exit`.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Ok(());
    }
    if pid == 0 {
        let ok = dev.alloc(1, 0).map(|h| dev.free(h)).is_ok();
        let _ = dev.device_status();
        // SAFETY: ends the child without running the parent's destructors.
        unsafe { libc::_exit(if ok { 0 } else { 1 }) };
    }
    let mut status = 0;
    // SAFETY: waits for the child forked above.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    Ok(())
}

/// On SIGBUS or SIGSEGV (which the fuzzer never provokes on purpose: it
/// does not touch device mappings), print the faulting address and the
/// process's memory map to stderr, then die with the signal's exit status,
/// so the run's log shows what was hit.
extern "C" fn on_fault(sig: i32, info: *mut libc::siginfo_t, _ctx: *mut libc::c_void) {
    let mut line = [0u8; 64];
    // SAFETY: the kernel passes a valid siginfo to an SA_SIGINFO handler.
    let addr = unsafe { (*info).si_addr() } as u64;
    // SAFETY: as above.
    let code = unsafe { (*info).si_code };
    let text = b"fuzzer: fatal signal at address 0x";
    let mut n = 0;
    for (i, d) in (0..16).rev().enumerate() {
        line[i] = b"0123456789abcdef"[((addr >> (d * 4)) & 0xf) as usize];
        n = i + 1;
    }
    let tail = [
        b' ',
        b'c',
        b'o',
        b'd',
        b'e',
        b' ',
        b'0' + (code.clamp(0, 9) as u8),
        b'\n',
    ];
    // SAFETY: only async-signal-safe system calls on buffers of this frame.
    unsafe {
        libc::write(2, text.as_ptr().cast(), text.len());
        libc::write(2, line.as_ptr().cast(), n);
        libc::write(2, tail.as_ptr().cast(), tail.len());
        let fd = libc::open(c"/proc/self/maps".as_ptr(), libc::O_RDONLY);
        let mut buf = [0u8; 4096];
        loop {
            let got = libc::read(fd, buf.as_mut_ptr().cast(), buf.len());
            if got <= 0 {
                break;
            }
            libc::write(2, buf.as_ptr().cast(), got as usize);
        }
        libc::_exit(128 + sig);
    }
}

fn install_fault_reporter() {
    for sig in [libc::SIGBUS, libc::SIGSEGV] {
        // SAFETY: a zeroed sigaction is valid; the handler only makes
        // async-signal-safe calls.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_fault as *const () as usize;
            sa.sa_flags = libc::SA_SIGINFO;
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
    }
}

/// Run the fuzzer; `progress` gets the calls done so far now and then.
pub fn run(s: &Settings, progress: &(dyn Fn(u64) + Sync)) -> std::io::Result<Report> {
    install_fault_reporter();
    // The DRAM floods meet the limit on simulated DRAM's host memory soon:
    // 32 MiB for the run (restored after).
    let old_limit = dram_host_field(0, "limit bytes:");
    let _ = dram_host_set_limit(32 << 20);
    let t0 = Instant::now();
    let deadline = t0 + Duration::from_secs(s.seconds);
    let done = AtomicU64::new(0);
    let stop = AtomicBool::new(false);
    let failure: Mutex<Option<String>> = Mutex::new(None);
    let mut totals = vec![OpStats::default(); OPS.len()];
    let indices: Vec<u32> = (s.first_device..s.first_device + s.devices).collect();
    let devices: Vec<Device> = indices
        .iter()
        .map(|&i| Device::open_compute(i))
        .collect::<Result<_, _>>()?;
    // The sync family runs where there are user interrupts (the Gaudi2 on
    // PCI); --sync-only needs them on every device of the run.
    let sync_on: Vec<bool> = devices
        .iter()
        .map(|d| {
            (s.sync || s.sync_only)
                && d.hw_ip_info()
                    .is_ok_and(|h| h.number_of_user_interrupts > 0)
        })
        .collect();
    if s.sync_only {
        if let Some(k) = sync_on.iter().position(|&on| !on) {
            return Err(std::io::Error::other(format!(
                "device {}: no user interrupts (no sync manager to fuzz)",
                indices[k]
            )));
        }
    }
    let shared: Vec<crate::fuzz_sync::Shared> =
        (0..s.devices).map(|_| Default::default()).collect();
    let pools: Vec<Mutex<Pool>> = (0..s.devices)
        .map(|_| Mutex::new(Pool::default()))
        .collect();
    let threads = s.threads.max(1);
    let workers = u64::from(threads) * u64::from(s.devices);
    let per_thread = s.calls.div_ceil(workers.max(1));
    std::thread::scope(|scope| {
        let mut handles = Vec::new();
        for (di, dev) in devices.iter().enumerate() {
            for t in 0..threads {
                let thread_no = di as u32 * threads + t;
                let id = s.only_thread.unwrap_or(thread_no);
                let (pool, done, stop, failure) = (&pools[di], &done, &stop, &failure);
                let (sync_shared, sync_on, dev_index) = (&shared[di], sync_on[di], indices[di]);
                handles.push(scope.spawn(move || {
                    let hw = dev.hw_ip_info().ok();
                    let mut w = Worker {
                        dev,
                        pool,
                        rng: Rng::new(s.seed ^ u64::from(id).wrapping_mul(0x9E37_79B9_7F4A_7C15)),
                        stats: vec![OpStats::default(); OPS.len()],
                        dram_page: hw.map_or(0x3000_0000, |h| h.dram_page_size),
                        dram_va: hw.map_or(0, |h| h.dram_base_address),
                        info_out: vec![0u8; 64 << 10],
                        cs: crate::fuzz_cs::CsState::new(),
                        sync: if sync_on {
                            crate::fuzz_sync::SyncState::new(dev, id, s.sync_only)
                        } else {
                            None
                        },
                        sync_shared,
                        sync_only: s.sync_only,
                    };
                    for k in 0..per_thread {
                        if stop.load(Ordering::Relaxed) || Instant::now() > deadline {
                            break;
                        }
                        if let Err(what) = w.step() {
                            stop.store(true, Ordering::Relaxed);
                            failure.lock().unwrap_or_else(|e| e.into_inner()).get_or_insert(format!(
                                "{what} at call {k} of thread {id}; reproduce: hlrs --device {dev_index} fuzz --seed {} --threads 1 --devices 1 --thread {id} --calls {}{}",
                                s.seed,
                                k + 1,
                                match (s.sync_only, s.sync) {
                                    (true, _) => " --sync-only",
                                    (_, true) => " --sync",
                                    _ => "",
                                }
                            ));
                            break;
                        }
                        let n = done.fetch_add(1, Ordering::Relaxed) + 1;
                        if n % 4096 == 0 {
                            progress(n);
                        }
                    }
                    w.stats
                }));
            }
        }
        for h in handles {
            if let Ok(stats) = h.join() {
                for (t, s) in totals.iter_mut().zip(stats) {
                    t.calls += s.calls;
                    t.ok += s.ok;
                    for (e, n) in s.errnos {
                        *t.errnos.entry(e).or_default() += n;
                    }
                }
            }
        }
    });
    // Leftover mmaps go with the process; close every fd now and check that
    // the devices are idle (mappings of the fd keep it open: unmap them).
    for pool in &pools {
        let maps = std::mem::take(&mut lock(pool).mmaps);
        for (a, l) in maps {
            // SAFETY: mappings this fuzzer made and no longer uses.
            let _ = unsafe { devices[0].munmap(a, l) };
        }
    }
    // No injected invalidation failure is left for the teardowns (a parked
    // one would keep the device's memory until the next open).
    for &i in &indices {
        let _ = fail_invalidations(i, "0");
    }
    drop(devices);
    // The host buffers go too: then every hugetlbfs page is free again, or a
    // pin leaked (the driver unpins at UNMAP and at close).
    for pool in &pools {
        lock(pool).buffers.clear();
    }
    let mut failure = failure.into_inner().unwrap_or_else(|e| e.into_inner());
    if let Some(limit) = old_limit {
        let _ = dram_host_set_limit(limit);
    }
    for &i in &indices {
        let left = dram_host_field(i, "device bytes:").unwrap_or(0);
        if left != 0 && failure.is_none() {
            failure = Some(format!(
                "device {i}: {left} bytes of host memory behind its DRAM after the run"
            ));
        }
    }
    if let Some((total, free)) = huge_pages() {
        if total != free && failure.is_none() {
            failure = Some(format!(
                "{free} of {total} hugetlbfs pages free after the run: a pin leaked"
            ));
        }
    }
    for &i in &indices {
        let ctl = Device::open_control(i)?;
        let (u, hw) = (ctl.dram_usage()?, ctl.hw_ip_info()?);
        if u.dram_free_mem != hw.dram_size && failure.is_none() {
            failure = Some(format!(
                "device {i} not idle after the run: {} of {} free",
                u.dram_free_mem, hw.dram_size
            ));
        }
    }
    Ok(Report {
        ops: OPS.iter().copied().zip(totals).collect(),
        calls: done.load(Ordering::Relaxed),
        failure,
        elapsed: t0.elapsed(),
    })
}

/// `HugePages_Total` and `HugePages_Free` of `/proc/meminfo`.
fn huge_pages() -> Option<(u64, u64)> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let field = |name: &str| {
        info.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().parse().ok())
    };
    Some((field("HugePages_Total:")?, field("HugePages_Free:")?))
}

/// The summary table: calls, successes and errnos per op.
pub fn summary(r: &Report) -> String {
    let mut out = format!("{:<12} {:>10} {:>10}  errnos\n", "op", "calls", "ok");
    for (i, (name, s)) in r.ops.iter().enumerate() {
        // The sync family's rows only when it was drawn.
        if i >= SYNC_OP && s.calls == 0 {
            continue;
        }
        let errnos: Vec<String> = s.errnos.iter().map(|(e, n)| format!("{e}:{n}")).collect();
        out += &format!(
            "{name:<12} {:>10} {:>10}  {}\n",
            s.calls,
            s.ok,
            errnos.join(" ")
        );
    }
    out += &format!(
        "{} calls in {:.1} s ({:.0}/s){}\n",
        r.calls,
        r.elapsed.as_secs_f64(),
        r.calls as f64 / r.elapsed.as_secs_f64().max(1e-9),
        match &r.failure {
            Some(f) => format!("\nFAILURE: {f}"),
            None => String::new(),
        }
    );
    out
}
