// SPDX-License-Identifier: GPL-2.0

//! What the building blocks of the memory ioctls cost on the kernel the
//! benchmark runs on, so that the per-phase breakdowns of `make bench` can
//! be read against them: a small and a 4 KiB zeroed allocation with its
//! free, a mutex round trip, a clock read (each phase clock costs one), a
//! PTE write and read of the simulated device-resident page tables, a store
//! into a host-resident hop, a range invalidation of an empty STLB, and a
//! PMMU page-table MAP+UNMAP cycle of one 4 KiB page with and without the
//! remembered walk; and what a context's open costs the simulated device's
//! sync manager (its user objects reset).
//!
//! Prints `@@BENCH prim.<name> <ns> ns` (the mean of 20,000 calls); asserts
//! only that every call succeeded.

use kernel::prelude::*;

#[kunit_tests(hlrs_bench_primitives)]
mod tests {
    use crate::{
        asic::MmuGeometry,
        ffi::host_page::HostPage,
        hw::backend::MmuKind,
        mmu::{
            device_mmu::TestMmu,
            hop_pool::HrHops,
            page_table::{DetachedHops, PageTable},
        },
    };
    use kernel::{
        prelude::*,
        time::{Instant, Monotonic},
    };

    const N: u64 = 20_000;

    /// Print the mean cost of `f` over [`N`] calls.
    fn time(name: &str, f: impl FnMut(u64) -> Result) -> Result {
        time_n(name, N, f)
    }

    /// Print the mean cost of `f` over `n` calls.
    fn time_n(name: &str, n: u64, mut f: impl FnMut(u64) -> Result) -> Result {
        let t = Instant::<Monotonic>::now();
        for i in 0..n {
            f(i)?;
        }
        let ns = u64::try_from(t.elapsed().as_nanos()).unwrap_or(0) / n.max(1);
        pr_info!("@@BENCH prim.{} {} ns\n", name, ns);
        Ok(())
    }

    /// What a context's open costs the simulated device's sync manager:
    /// the reset of every object a user may write (about 50,000 register
    /// writes, `SimSync::reset_user`), the mean of 20.
    #[test]
    fn bench_sim_sync_reset() -> Result {
        let asic = crate::asic::AsicProperties::gaudi2(6, 0)?;
        let sim = kernel::sync::Arc::pin_init(crate::hw::sim::SimGaudi2::new(&asic), GFP_KERNEL)?;
        time_n("sim_sync_reset", 20, |i| {
            sim.sync.reset_user((i % 8 + 1) as u32);
            Ok(())
        })
    }

    #[test]
    fn bench_primitives() -> Result {
        let d = TestMmu::new()?;
        let hop0 = d.mmu.dr_hops.lock().hop0(1).ok_or(EINVAL)?;
        let page = HostPage::new_zeroed()?;
        time("kmalloc_free_8", |_| {
            KBox::new(0u64, GFP_KERNEL).map(drop).map_err(Into::into)
        })?;
        time("kzalloc_free_4k", |_| {
            KBox::new([0u64; 512], GFP_KERNEL)
                .map(drop)
                .map_err(Into::into)
        })?;
        time("mutex", |_| {
            drop(d.mmu.dr_hops.lock());
            Ok(())
        })?;
        time("clock", |_| {
            let _ = Instant::<Monotonic>::now();
            Ok(())
        })?;
        time("dr_write_pte", |i| {
            d.backend().write_pte(hop0 + (i % 512) * 8, 0)
        })?;
        time("dr_read_pte", |i| {
            d.backend().read_pte(hop0 + (i % 512) * 8).map(drop)
        })?;
        time("hr_write_pte", |i| {
            page.write_u64s(((i % 512) * 8) as usize, &[0])
        })?;
        time("invalidate_range_empty_stlb", |_| {
            d.backend()
                .invalidate_range(MmuKind::Dram, 1, 0x1001_0000_0000_0000, 1 << 30)
        })?;
        map_unmap_cycles(&d)
    }

    /// A MAP+UNMAP cycle of one 4 KiB page in a PMMU tree whose chain to
    /// the leaf hop stays linked (an idle hop): with the walk remembered
    /// from the last map or unmap, and walking from hop 0 each time.
    fn map_unmap_cycles(d: &TestMmu) -> Result {
        let hop0 = d.mmu.hr_hops.lock().hop0(1).ok_or(EINVAL)?;
        let mut mem = HrHops {
            pool: &d.mmu.hr_hops,
        };
        let mut t = PageTable::new(MmuGeometry::PMMU, MmuKind::Host, 1, hop0, &mut mem)?;
        let leaf = MmuGeometry::PMMU.leaf_hop(4096).ok_or(EINVAL)?;
        let va = 0xFFF0_0000_0020_0000u64;
        for (name, on) in [
            ("pmmu_cycle_remembered", true),
            ("pmmu_cycle_walked", false),
        ] {
            t.set_remember_walks(on);
            let mut det = DetachedHops::new();
            time(name, |_| {
                t.map(&mut mem, va, 0x1234_5000, leaf)?;
                t.unmap(&mut mem, va, &mut det).map(drop)
            })?;
            // The chain stayed linked: nothing was detached.
            if !det.is_empty() {
                return Err(EINVAL);
            }
        }
        let mut det = DetachedHops::new();
        t.teardown(&mut mem, &mut det);
        let proof = crate::mmu::invalidate::invalidate_all(d.backend(), MmuKind::Host)?;
        det.release(&mut mem, &proof).map(drop).map_err(|_| EINVAL)
    }
}
