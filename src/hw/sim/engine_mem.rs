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
//! before it are done), returns the fault and records it
//! ([`SimGaudi2::engine_faults`]: the first one, as upstream reports it, the
//! last, and counts per kind).

use super::{
    fault::{Access, EngineFault, StaleUse, Target},
    stlb::{self, Stlb},
    SimGaudi2,
};
use crate::{
    asic::SRAM_SIZE,
    ffi::dma_pages::page_pieces,
    hw::backend::{Backend, MmuKind},
    model::{
        bus::{space, Space},
        stlb::Miss,
        walker::WalkStop,
    },
};
use kernel::prelude::*;

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

/// An access, or one piece of it.
enum Op<'a> {
    Read(&'a mut [u8]),
    Write(&'a [u8]),
}

impl Op<'_> {
    /// Which way it goes.
    fn access(&self) -> Access {
        match self {
            Self::Read(_) => Access::Read,
            Self::Write(_) => Access::Write,
        }
    }

    fn len(&self) -> usize {
        match self {
            Self::Read(b) => b.len(),
            Self::Write(d) => d.len(),
        }
    }

    /// Bytes `pos..pos + n` of the access.
    fn sub(&mut self, pos: usize, n: usize) -> Option<Op<'_>> {
        let end = pos.checked_add(n)?;
        match self {
            Self::Read(b) => b.get_mut(pos..end).map(Op::Read),
            Self::Write(d) => d.get(pos..end).map(Op::Write),
        }
    }
}

/// Which memory an address reaches before translation, by the model
/// core's decode: `None` for SRAM (physical), the MMU otherwise; `Err` for
/// what this host's engines do not reach. User CBs here reach no register
/// (the register space is a RAZWI, as every configuration-space access of
/// a CB on upstream's secured device until the sync manager opens some,
/// issue 32) and no raw bus address (only the QMANs' own fetches use those
/// on silicon). O(1).
fn route(addr: u64) -> Result<Option<MmuKind>, ()> {
    match space(addr, SRAM_SIZE) {
        Space::Sram => Ok(None),
        Space::Dram => Ok(Some(MmuKind::Dram)),
        Space::HostVa => Ok(Some(MmuKind::Host)),
        Space::HostBus | Space::Cfg(_) | Space::None => Err(()),
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
        self.access(who, va, Op::Read(buf))
    }

    /// Write `data` at `va` as engine `who` (see [`Self::engine_read`]).
    pub(crate) fn engine_write(
        &self,
        who: EngineAccess,
        va: u64,
        data: &[u8],
    ) -> Result<(), EngineFault> {
        self.access(who, va, Op::Write(data))
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

    /// One piece: translate and touch memory, recording a fault.
    fn piece(&self, who: EngineAccess, va: u64, op: Op<'_>) -> Result<(), EngineFault> {
        let r = match who.mmu.map_or_else(|| route(va), |k| Ok(Some(k))) {
            Err(()) => Err(EngineFault::Razwi {
                addr: va,
                engine: who.engine,
                access: op.access(),
            }),
            Ok(None) => self.touch(who, va, Target::Sram(va), op),
            Ok(Some(kind)) => {
                // Held across the copy: an invalidation waits for it.
                let mut stlb = self.stlb.lock();
                self.translate(&mut stlb, who, kind, va)
                    .and_then(|t| self.touch(who, va, t, op))
            }
        };
        r.inspect_err(|f| self.record(*f))
    }

    /// Record a fault in the log. O(1).
    fn record(&self, f: EngineFault) {
        self.faults.lock().record(f);
    }

    /// Run `op` at `va` piece by piece; a range that wraps is a decode
    /// error (recorded).
    fn access(&self, who: EngineAccess, va: u64, mut op: Op<'_>) -> Result<(), EngineFault> {
        let len = op.len();
        let wraps = EngineFault::Razwi {
            addr: va,
            engine: who.engine,
            access: op.access(),
        };
        if u64::try_from(len)
            .ok()
            .and_then(|l| va.checked_add(l))
            .is_none()
        {
            self.record(wraps);
            return Err(wraps);
        }
        for (at, pos, n) in page_pieces(va, len) {
            let piece = op.sub(pos, n).ok_or(wraps)?;
            self.piece(who, at, piece)?;
        }
        Ok(())
    }

    /// Translate `va` through the MMU of `kind` with `stlb` (locked by the
    /// caller), by the model core's STLB and walker: a hit, or a walk and a
    /// fill. Records a use of a stale entry. O(ways + hops on a miss).
    fn translate(
        &self,
        stlb: &mut Stlb,
        who: EngineAccess,
        kind: MmuKind,
        va: u64,
    ) -> Result<Target, EngineFault> {
        let hop0 = self.hop0(kind, who.asid);
        let side = (stlb::side(kind), &self.scrambler);
        let t = match kind {
            MmuKind::Dram => {
                let mut read = |a: u64| self.read_pte(a).ok();
                stlb.translate(side, who.asid, va, hop0, &mut read)
            }
            // PMMU tables are host memory, read by bus address through
            // the IOMMU.
            MmuKind::Host => {
                let pages = self.dma_pages.lock();
                let mut read = |a: u64| {
                    let mut b = [0u8; 8];
                    (a % 8 == 0 && pages.read(a, &mut b).is_ok()).then(|| u64::from_le_bytes(b))
                };
                stlb.translate(side, who.asid, va, hop0, &mut read)
            }
        };
        let t = t.map_err(|miss| match miss {
            Miss::Walk(WalkStop::Unreadable(bus)) if kind == MmuKind::Host => EngineFault::Iommu {
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
        let target = match kind {
            MmuKind::Dram => Target::Dram(t.addr),
            MmuKind::Host => Target::Host(t.addr),
        };
        if t.stale {
            self.faults.lock().last_stale = Some(StaleUse {
                mmu: kind,
                asid: who.asid,
                va,
                target,
            });
        }
        Ok(target)
    }

    /// Copy one piece at `target` (what `va` translated to).
    fn touch(
        &self,
        who: EngineAccess,
        va: u64,
        target: Target,
        op: Op<'_>,
    ) -> Result<(), EngineFault> {
        let (engine, access) = (who.engine, op.access());
        let memory_error = |addr: u64, e: Error| {
            if e == EINVAL {
                EngineFault::Razwi {
                    addr,
                    engine,
                    access,
                }
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

#[kunit_tests(hlrs_sim_engine)]
mod tests {
    use super::*;
    use crate::{
        asic::{AsicProperties, DRAM_PHYS_BASE, SRAM_BASE_ADDR},
        ffi::host_page::HostPage,
    };
    use kernel::{alloc::KVVec, sync::Arc};

    fn sim() -> Result<(Arc<SimGaudi2>, AsicProperties)> {
        let asic = AsicProperties::gaudi2(6, 0)?;
        Ok((Arc::pin_init(SimGaudi2::new(&asic), GFP_KERNEL)?, asic))
    }

    /// Map `pages` for the device; their bus addresses.
    fn map(s: &SimGaudi2, pages: &[&HostPage]) -> Result<crate::hw::backend::BusAddrs> {
        let mut v = KVVec::new();
        for p in pages {
            v.push((*p).clone(), GFP_KERNEL)?;
        }
        s.dma_map_kernel(v)
    }

    #[test]
    fn hand_written_hmmu_tables_reach_dram_through_the_scrambler() -> Result {
        let (s, asic) = sim()?;
        let base = asic.dram_base;
        // 6 HBMs: the DRAM VA range starts at base + 96 GiB, which the HMMU
        // sees scrambled as base + 128 GiB: hop indices 8, 1, 0, 128.
        let va = asic.dram_va.start;
        assert_eq!(va, base + (96 << 30));
        let hop = |slot: u64| asic.mmu_pgt_addr + slot * 4096;
        s.set_hop0(MmuKind::Dram, 1, hop(1))?;
        s.write_pte(hop(1) + 8 * 8, hop(10) | 1)?;
        s.write_pte(hop(10) + 8, hop(11) | 1)?;
        s.write_pte(hop(11), hop(12) | 1)?;
        // DRAM page 1 (base + 768 MiB) is MMU page 1 GiB, scrambled.
        s.write_pte(hop(12) + 128 * 8, (base + (1 << 30)) | 0x801)?;
        let who = EngineAccess::new(3, 1);
        // 100 MiB into the page: the third 48 MiB unit, descrambled.
        let at = va + (100 << 20);
        s.engine_write(who, at - 2, &[1, 2, 3, 4])?;
        let mut b = [0u8; 4];
        s.dram_read(base + (768 << 20) + (100 << 20) - 2, &mut b)?;
        assert_eq!(b, [1, 2, 3, 4]);
        assert_eq!(
            s.engine_translate(who, at)?,
            Target::Dram(base + (868 << 20))
        );
        // The next DRAM page of VA has no PTE: a page fault, recorded.
        let next = va + (768 << 20);
        let fault = EngineFault::Page {
            mmu: MmuKind::Dram,
            asid: 1,
            va: next,
            engine: 3,
        };
        assert_eq!(s.engine_read(who, next, &mut b), Err(fault));
        // ASID 0 has no hop 0 set.
        assert!(s.engine_read(EngineAccess::new(3, 0), va, &mut b).is_err());
        let log = s.engine_faults();
        assert_eq!((log.first, log.page), (Some(fault), 2));
        let (st, _) = s.stlb_stats();
        assert_eq!((st.misses, st.hits, st.walks, st.walk_faults), (3, 2, 3, 2));
        Ok(())
    }

    #[test]
    fn hand_written_pmmu_tables_in_host_memory_through_the_iommu() -> Result {
        let (s, _) = sim()?;
        let mut hops = KVec::new();
        for _ in 0..6 {
            hops.push(HostPage::new_zeroed()?, GFP_KERNEL)?;
        }
        let data = HostPage::new_zeroed()?;
        let refs: KVec<&HostPage> = {
            let mut r = KVec::new();
            for h in hops.iter() {
                r.push(h, GFP_KERNEL)?;
            }
            r.push(&data, GFP_KERNEL)?;
            r
        };
        let bus = map(&s, &refs)?;
        // VA 0xFFF0_0000_0020_3000: hop indices 127, 0x1F0, 0, 0, 1, 3.
        let va = 0xFFF0_0000_0020_3000u64;
        let idx = [127usize, 0x1F0, 0, 0, 1, 3];
        for (level, i) in idx.iter().enumerate() {
            let (Some(h), Some(next)) = (hops.get(level), bus.get(level + 1)) else {
                return Err(EINVAL);
            };
            let pte = if level == 5 { next | 0x801 } else { next | 1 };
            h.write_u64s(i * 8, &[pte])?;
        }
        s.set_hop0(MmuKind::Host, 1, *bus.first().ok_or(EINVAL)?)?;
        let who = EngineAccess::new(7, 1);
        s.engine_write(who, va + 0x10, &[9, 8, 7])?;
        let mut b = [0u8; 3];
        data.read(0x10, &mut b)?;
        assert_eq!(b, [9, 8, 7]);
        assert_eq!(
            s.engine_translate(who, va + 5)?,
            Target::Host(data.phys() + 5)
        );
        // The data page unmapped: the cached translation still leads there,
        // and the IOMMU refuses it.
        let data_bus = *bus.get(6).ok_or(EINVAL)?;
        s.dma_unmap_host(&[data_bus], 4096);
        let refused = EngineFault::Iommu {
            bus: data.phys() + 0x10,
            asid: 1,
            va: va + 0x10,
            engine: 7,
        };
        assert_eq!(s.engine_read(who, va + 0x10, &mut b), Err(refused));
        // A hop table unmapped: the walk cannot read it.
        let hop5 = *bus.get(5).ok_or(EINVAL)?;
        s.dma_unmap_host(&[hop5], 4096);
        s.invalidate_all(MmuKind::Host)?;
        let r = s.engine_read(who, va, &mut b);
        assert_eq!(
            r,
            Err(EngineFault::Iommu {
                bus: hop5 + 3 * 8,
                asid: 1,
                va,
                engine: 7
            })
        );
        assert_eq!(s.engine_faults().iommu, 2);
        for a in bus.iter().take(5) {
            s.dma_unmap_host(&[*a], 4096);
        }
        assert_eq!(s.dma_mapped_pages(), 0);
        Ok(())
    }

    #[test]
    fn sram_is_physical_and_other_addresses_decode_to_nothing() -> Result {
        let (s, _) = sim()?;
        let who = EngineAccess::new(1, 1);
        // Across a 4 KiB boundary of SRAM: two pieces, no MMU.
        let at = SRAM_BASE_ADDR + 4096 - 3;
        s.engine_write(who, at, &[1, 2, 3, 4, 5, 6])?;
        let mut b = [0u8; 6];
        s.sram_read(at, &mut b)?;
        assert_eq!(b, [1, 2, 3, 4, 5, 6]);
        assert_eq!(s.engine_translate(who, at)?, Target::Sram(at));
        assert_eq!(s.stlb_stats().0.misses, 0);
        // SRAM ends where the DRAM space begins: past its end the HMMU
        // translates (and faults here, no tables), after the last bytes of
        // SRAM were written.
        let end = SRAM_BASE_ADDR + SRAM_SIZE;
        assert_eq!(end, DRAM_PHYS_BASE);
        let r = s.engine_write(who, end - 2, &[9; 4]);
        let fault = EngineFault::Page {
            mmu: MmuKind::Dram,
            asid: 1,
            va: end,
            engine: 1,
        };
        assert_eq!(r, Err(fault));
        s.sram_read(end - 2, &mut b[..2])?;
        assert_eq!(&b[..2], &[9, 9]);
        // Below SRAM, low addresses, and a range that wraps decode to
        // nothing.
        for addr in [SRAM_BASE_ADDR - 2, 0x1000, u64::MAX - 1] {
            let r = s.engine_write(who, addr, &[0; 4]);
            let access = Access::Write;
            assert_eq!(
                r,
                Err(EngineFault::Razwi {
                    addr,
                    engine: 1,
                    access
                })
            );
        }
        // An SRAM address forced through an MMU is translated (and faults).
        let r = s.engine_read(who.through(MmuKind::Host), at, &mut b);
        assert!(matches!(r, Err(EngineFault::Page { .. })));
        let log = s.engine_faults();
        assert_eq!((log.page, log.iommu, log.other), (2, 0, 3));
        Ok(())
    }
}
