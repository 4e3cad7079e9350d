// SPDX-License-Identifier: GPL-2.0

//! Engine memory access on the simulated Gaudi2: how its DMA engines (and
//! any engine that reads or writes memory) reach memory through the MMUs.
//!
//! An access is split at every 4 KiB boundary of its address: no page the
//! MMUs map is smaller, so each piece lies in one translation and in one
//! 4 KiB of DRAM, SRAM or host memory. Each piece is decoded by address as
//! Gaudi2's fabric does, unless the caller names the MMU:
//!
//! - SRAM (`[SRAM_BASE_ADDR, + SRAM_SIZE)`) is physical: no MMU.
//! - The DRAM space (`[DRAM_PHYS_BASE, VA_HBM_SPACE_END)`) goes through the
//!   HMMU: the VA is scrambled, looked up in the STLB (walked on a miss), and
//!   the page found descrambled to a DRAM address.
//! - The host space (`[VA_HOST_SPACE_PAGE_START, VA_HOST_SPACE_HPAGE_END)`)
//!   goes through the PMMU to a bus address, which reaches host memory only
//!   if it is DMA-mapped (the IOMMU map `SimGaudi2::dma_pages`).
//! - Anything else is an address-decode error (upstream reports a RAZWI).
//!
//! **Invalidation against accesses in flight**: each piece is translated and
//! copied under the STLB's lock, which every invalidation takes. So an
//! invalidation returns only after the pieces that used a translation it
//! drops are done, and no piece starts with a dropped translation; the
//! driver releases memory only after that return. Under the STLB's lock only
//! the memories' own locks are taken (leaves; all are mutexes: a piece may
//! back a DRAM chunk, which allocates).
//!
//! **Faults**: an access stops at the first piece that faults (the pieces
//! before it are done), returns the fault and records it ([`FaultLog`]:
//! the first one, as upstream reports it, the last, and counts per kind).

use super::{
    stlb::Stlb,
    walker::{self, Leaf, WalkStop},
    SimGaudi2,
};
use crate::{
    asic::{DRAM_PHYS_BASE, SRAM_BASE_ADDR, SRAM_SIZE, VA_HBM_SPACE_END},
    hw::backend::{Backend, MmuKind},
};
use kernel::prelude::*;

/// `VA_HOST_SPACE_PAGE_START` .. `VA_HOST_SPACE_HPAGE_END` (gaudi2/gaudi2P.h:131-135):
/// the host space the PMMU translates.
const HOST_SPACE: (u64, u64) = (0xFFF0_0000_0000_0000, 0xFFF1_0000_0000_0000);
/// Bytes of one piece of an access.
const PIECE: u64 = 4096;

/// Who accesses memory, and through which MMU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct EngineAccess {
    /// The engine (upstream `GAUDI2_ENGINE_ID_*`), reported with a fault.
    pub(crate) engine: u16,
    /// The ASID the engine's queue runs with.
    pub(crate) asid: u32,
    /// The MMU that translates every piece; `None`: chosen by address.
    pub(crate) mmu: Option<MmuKind>,
}

impl EngineAccess {
    /// `engine` running for `asid`, each address decoded by range.
    pub(crate) fn new(engine: u16, asid: u32) -> Self {
        Self {
            engine,
            asid,
            mmu: None,
        }
    }

    /// The same, with every address translated by the MMU of `kind`
    /// (KUnit-only until an engine needs it).
    #[cfg(CONFIG_KUNIT)]
    pub(crate) fn through(self, kind: MmuKind) -> Self {
        Self {
            mmu: Some(kind),
            ..self
        }
    }
}

/// Where a piece of an access lands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Target {
    /// Device DRAM at this physical address.
    Dram(u64),
    /// SRAM at this address.
    Sram(u64),
    /// Host memory at this bus address.
    Host(u64),
}

/// Why an engine access stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum EngineFault {
    /// No page at `va` in the tables of `asid` (upstream: an MMU page fault,
    /// `HL_INFO_PAGE_FAULT_EVENT`).
    Page {
        /// The MMU.
        mmu: MmuKind,
        /// The ASID.
        asid: u32,
        /// The address the engine issued.
        va: u64,
        /// The engine.
        engine: u16,
    },
    /// The translation of `va` (or a PMMU hop table on the way) is the bus
    /// address `bus`, which is not DMA-mapped: the IOMMU refused it.
    Iommu {
        /// The bus address refused.
        bus: u64,
        /// The ASID.
        asid: u32,
        /// The address the engine issued.
        va: u64,
        /// The engine.
        engine: u16,
    },
    /// `addr` decodes to no memory (upstream: a RAZWI).
    Decode {
        /// The address (as issued, or as translated).
        addr: u64,
        /// The engine.
        engine: u16,
    },
    /// The simulation could not back the memory at `addr` (a host
    /// allocation failed).
    Backing {
        /// The address (as translated).
        addr: u64,
        /// The engine.
        engine: u16,
    },
}

/// A use of a translation whose invalidation was skipped (fault injection).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct StaleUse {
    /// The MMU.
    pub(crate) mmu: MmuKind,
    /// The ASID.
    pub(crate) asid: u32,
    /// The address the engine issued.
    pub(crate) va: u64,
    /// Where the stale translation took it.
    pub(crate) target: Target,
}

/// The engine faults of a device since it was created.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct FaultLog {
    /// The first fault (what upstream reports).
    pub(crate) first: Option<EngineFault>,
    /// The most recent one.
    pub(crate) last: Option<EngineFault>,
    /// Page faults.
    pub(crate) page: u64,
    /// IOMMU faults.
    pub(crate) iommu: u64,
    /// Address-decode errors and failures to back memory.
    pub(crate) other: u64,
    /// The most recent use of a stale translation (their count is the
    /// STLB's `stale_hits`).
    pub(crate) last_stale: Option<StaleUse>,
}

/// One piece of an access.
enum Op<'a> {
    Read(&'a mut [u8]),
    Write(&'a [u8]),
}

/// The pieces of `[va, va + len)`: (address, offset in the caller's
/// buffer, length), none crossing a 4 KiB boundary; `None` if the range
/// wraps.
fn pieces(va: u64, len: usize) -> Option<impl Iterator<Item = (u64, usize, usize)>> {
    va.checked_add(u64::try_from(len).ok()?)?;
    let mut done = 0usize;
    Some(core::iter::from_fn(move || {
        let at = va.checked_add(u64::try_from(done).ok()?)?;
        let left = len.checked_sub(done).filter(|&l| l > 0)?;
        let room = usize::try_from(PIECE - at % PIECE).ok()?;
        let n = left.min(room);
        let piece = (at, done, n);
        done = done.checked_add(n)?;
        Some(piece)
    }))
}

/// Which memory an address reaches before translation: `None` for SRAM
/// (physical), the MMU otherwise; `Err` for no memory.
fn route(addr: u64) -> Result<Option<MmuKind>, ()> {
    if addr >= SRAM_BASE_ADDR && addr - SRAM_BASE_ADDR < SRAM_SIZE {
        Ok(None)
    } else if (DRAM_PHYS_BASE..VA_HBM_SPACE_END).contains(&addr) {
        Ok(Some(MmuKind::Dram))
    } else if (HOST_SPACE.0..HOST_SPACE.1).contains(&addr) {
        Ok(Some(MmuKind::Host))
    } else {
        Err(())
    }
}

impl SimGaudi2 {
    /// Read `buf.len()` bytes at `va` as engine `who`. O(pieces x (ways +
    /// hops on a miss + log n of the memory)).
    pub(crate) fn engine_read(
        &self,
        who: EngineAccess,
        va: u64,
        buf: &mut [u8],
    ) -> Result<(), EngineFault> {
        let wraps = EngineFault::Decode {
            addr: va,
            engine: who.engine,
        };
        for (at, pos, n) in pieces(va, buf.len()).ok_or(wraps)? {
            let dst = buf.get_mut(pos..pos.saturating_add(n)).ok_or(wraps)?;
            self.piece(who, at, Op::Read(dst))?;
        }
        Ok(())
    }

    /// Write `data` at `va` as engine `who` (see [`Self::engine_read`]).
    pub(crate) fn engine_write(
        &self,
        who: EngineAccess,
        va: u64,
        data: &[u8],
    ) -> Result<(), EngineFault> {
        let wraps = EngineFault::Decode {
            addr: va,
            engine: who.engine,
        };
        for (at, pos, n) in pieces(va, data.len()).ok_or(wraps)? {
            let src = data.get(pos..pos.saturating_add(n)).ok_or(wraps)?;
            self.piece(who, at, Op::Write(src))?;
        }
        Ok(())
    }

    /// Where `va` takes engine `who`, through the STLB (filling it on a
    /// miss), without touching memory. A fault is returned, not recorded.
    /// O(ways + hops on a miss).
    pub(crate) fn engine_translate(
        &self,
        who: EngineAccess,
        va: u64,
    ) -> Result<Target, EngineFault> {
        let decode = EngineFault::Decode {
            addr: va,
            engine: who.engine,
        };
        match who.mmu.map_or_else(|| route(va), |k| Ok(Some(k))) {
            Err(()) => Err(decode),
            Ok(None) => Ok(Target::Sram(va)),
            Ok(Some(kind)) => self.translate(&mut self.stlb.lock(), who, kind, va),
        }
    }

    /// The engine faults so far (tests, debugfs, the fault report).
    pub(crate) fn engine_faults(&self) -> FaultLog {
        *self.faults.lock()
    }

    /// One piece: translate and touch memory, recording a fault.
    fn piece(&self, who: EngineAccess, va: u64, op: Op<'_>) -> Result<(), EngineFault> {
        let r = match who.mmu.map_or_else(|| route(va), |k| Ok(Some(k))) {
            Err(()) => Err(EngineFault::Decode {
                addr: va,
                engine: who.engine,
            }),
            Ok(None) => self.touch(who, va, Target::Sram(va), op),
            Ok(Some(kind)) => {
                // Held across the copy: an invalidation waits for it.
                let mut stlb = self.stlb.lock();
                self.translate(&mut stlb, who, kind, va)
                    .and_then(|t| self.touch(who, va, t, op))
            }
        };
        if let Err(f) = r {
            let mut log = self.faults.lock();
            log.first.get_or_insert(f);
            log.last = Some(f);
            let n = match f {
                EngineFault::Page { .. } => &mut log.page,
                EngineFault::Iommu { .. } => &mut log.iommu,
                _ => &mut log.other,
            };
            *n = n.saturating_add(1);
        }
        r
    }

    /// Translate `va` through the MMU of `kind` with `stlb` (locked by the
    /// caller): a hit, or a walk and a fill. Records a use of a stale entry.
    fn translate(
        &self,
        stlb: &mut Stlb,
        who: EngineAccess,
        kind: MmuKind,
        va: u64,
    ) -> Result<Target, EngineFault> {
        // The HMMU sees the VA scrambled.
        let key = match kind {
            MmuKind::Dram => self.scrambler.scramble(va),
            MmuKind::Host => va,
        };
        let (page, shift, stale) = match stlb.lookup(kind, who.asid, key) {
            Some(hit) => (hit.page, hit.shift, hit.stale),
            None => {
                let leaf = self.walk(kind, who.asid, key);
                stlb.count_walk(leaf.is_ok());
                let Leaf { page, shift, .. } = leaf.map_err(|stop| match stop {
                    WalkStop::Unreadable(bus) if kind == MmuKind::Host => EngineFault::Iommu {
                        bus,
                        asid: who.asid,
                        va,
                        engine: who.engine,
                    },
                    _ => EngineFault::Page {
                        mmu: kind,
                        asid: who.asid,
                        va,
                        engine: who.engine,
                    },
                })?;
                stlb.fill(kind, who.asid, key, page, shift);
                (page, shift, false)
            }
        };
        let in_page = 1u64
            .checked_shl(shift)
            .map_or(u64::MAX, |size| size.saturating_sub(1));
        let addr = page | (key & in_page);
        let target = match kind {
            MmuKind::Dram => Target::Dram(self.scrambler.descramble(addr)),
            MmuKind::Host => Target::Host(addr),
        };
        if stale {
            self.faults.lock().last_stale = Some(StaleUse {
                mmu: kind,
                asid: who.asid,
                va,
                target,
            });
        }
        Ok(target)
    }

    /// The hardware walk of `key` (the VA as the MMU sees it) in the tables
    /// of `asid`: DMMU tables in device DRAM, PMMU tables in host memory by
    /// bus address, through the IOMMU. O(hops x log n).
    fn walk(&self, kind: MmuKind, asid: u32, key: u64) -> Result<Leaf, WalkStop> {
        let hop0 = self.hop0(kind, asid).ok_or(WalkStop::NotPresent(0))?;
        match kind {
            MmuKind::Dram => walker::walk(kind, hop0, key, &mut |a| self.read_pte(a).ok()),
            MmuKind::Host => {
                let pages = self.dma_pages.lock();
                let mut read = |a: u64| {
                    let mut b = [0u8; 8];
                    (a % 8 == 0 && pages.read(a, &mut b).is_ok()).then(|| u64::from_le_bytes(b))
                };
                walker::walk(kind, hop0, key, &mut read)
            }
        }
    }

    /// Copy one piece at `target` (what `va` translated to).
    fn touch(
        &self,
        who: EngineAccess,
        va: u64,
        target: Target,
        op: Op<'_>,
    ) -> Result<(), EngineFault> {
        let engine = who.engine;
        let memory_error = |addr: u64, e: Error| {
            if e == EINVAL {
                EngineFault::Decode { addr, engine }
            } else {
                EngineFault::Backing { addr, engine }
            }
        };
        match target {
            Target::Dram(pa) => match op {
                Op::Read(b) => self.dram_read(pa, b),
                Op::Write(d) => self.dram_write(pa, d),
            }
            .map_err(|e| memory_error(pa, e)),
            Target::Sram(a) => match op {
                Op::Read(b) => self.sram_read(a, b),
                Op::Write(d) => self.sram_write(a, d),
            }
            .map_err(|e| memory_error(a, e)),
            Target::Host(bus) => {
                let pages = self.dma_pages.lock();
                match op {
                    Op::Read(b) => pages.read(bus, b),
                    Op::Write(d) => pages.write(bus, d),
                }
                .map_err(|at| EngineFault::Iommu {
                    bus: at,
                    asid: who.asid,
                    va,
                    engine,
                })
            }
        }
    }
}
