// SPDX-License-Identifier: GPL-2.0

//! MMU cache invalidation, and the rule it guards:
//!
//! **A page (DRAM or pinned host) and a hop go back to their owner only after
//! an invalidation that covers every PTE that pointed at them has
//! succeeded.**
//!
//! Upstream breaks it in several places (it unpins and frees hops before, or
//! without, a successful invalidation: common/memory.c:1195-1210, 1361-1385,
//! mmu/mmu.c `hl_mmu_ctx_fini`). Here it holds by construction:
//!
//! - [`Invalidated`] is the proof of a successful invalidation. Only
//!   [`invalidate_range`] and [`invalidate_all`] make one, from the backend's
//!   answer.
//! - [`Held`] wraps what the MMU may still translate to (a mapping's pinned
//!   pages or DRAM page pack). [`Held::release`] gives it back only against a
//!   proof that covers its [`MmuArea`]; dropping a `Held` without one never
//!   releases: it leaks the value and says so (a leak cannot corrupt memory a
//!   device may still write).
//! - Emptied hops are detached into [`crate::mmu::page_table::DetachedHops`],
//!   released the same way.
//!
//! The hardware model behind "covers": a range invalidation of `[start, end)`
//! for an ASID drops every cached translation, and every cached intermediate
//! (hop) entry, used for a VA in that range; a full invalidation drops all of
//! one MMU's caches, for every ASID.

use crate::hw::backend::{Backend, MmuKind};
use kernel::prelude::*;

/// The PTEs something was reachable through: one MMU, one ASID, a VA range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct MmuArea {
    /// Which MMU translates it.
    pub(crate) kind: MmuKind,
    /// The context's ASID.
    pub(crate) asid: u32,
    /// First VA.
    pub(crate) start: u64,
    /// One past the last VA (saturating at `u64::MAX`).
    pub(crate) end: u64,
}

impl MmuArea {
    /// `size` bytes at `va` (saturating). O(1).
    pub(crate) fn new(kind: MmuKind, asid: u32, va: u64, size: u64) -> Self {
        Self {
            kind,
            asid,
            start: va,
            end: va.saturating_add(size),
        }
    }

    /// Every VA of `asid` in `kind` (teardown: the whole page table).
    pub(crate) fn everything(kind: MmuKind, asid: u32) -> Self {
        Self {
            kind,
            asid,
            start: 0,
            end: u64::MAX,
        }
    }

    /// The smallest area holding both (same MMU and ASID; otherwise the whole
    /// space of `self`'s MMU, which only a full invalidation covers). O(1).
    pub(crate) fn join(self, other: Self) -> Self {
        if self.kind != other.kind || self.asid != other.asid {
            return Self {
                asid: u32::MAX,
                ..Self::everything(self.kind, self.asid)
            };
        }
        Self {
            start: self.start.min(other.start),
            end: self.end.max(other.end),
            ..self
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Scope {
    All,
    Range { asid: u32, start: u64, end: u64 },
}

/// Proof that one MMU's caches forgot a range of one ASID, or everything.
///
/// # Invariants
///
/// Made only by [`invalidate_range`] / [`invalidate_all`] after the backend
/// reported success for exactly `kind` and `scope`.
#[derive(Debug)]
pub(crate) struct Invalidated {
    kind: MmuKind,
    scope: Scope,
}

impl Invalidated {
    /// Whether every PTE of `area` was covered. O(1).
    pub(crate) fn covers(&self, area: &MmuArea) -> bool {
        if self.kind != area.kind {
            return false;
        }
        match self.scope {
            Scope::All => true,
            Scope::Range { asid, start, end } => {
                asid == area.asid && start <= area.start && area.end <= end
            }
        }
    }
}

/// Invalidate the caches of `area` (upstream `hl_mmu_invalidate_cache_range`)
/// and return the proof, or the backend's error. O(1) here; the backend's
/// cost.
pub(crate) fn invalidate_range(backend: &dyn Backend, area: MmuArea) -> Result<Invalidated> {
    let size = area.end.saturating_sub(area.start);
    backend.invalidate_range(area.kind, area.asid, area.start, size)?;
    // INVARIANT: the backend invalidated exactly this range.
    Ok(Invalidated {
        kind: area.kind,
        scope: Scope::Range {
            asid: area.asid,
            start: area.start,
            end: area.end,
        },
    })
}

/// Invalidate all of one MMU's caches (upstream `hl_mmu_invalidate_cache`)
/// and return the proof, or the backend's error.
pub(crate) fn invalidate_all(backend: &dyn Backend, kind: MmuKind) -> Result<Invalidated> {
    backend.invalidate_all(kind)?;
    // INVARIANT: the backend invalidated everything of `kind`.
    Ok(Invalidated {
        kind,
        scope: Scope::All,
    })
}

/// Something the MMU may still translate to: given back only against a proof
/// that covers `area`.
///
/// # Invariants
///
/// `value` is `Some` from [`Held::new`] until [`Held::release`] consumes the
/// `Held` or [`Held::take`] empties it, both against a covering proof; a
/// `Held` dropped with its value leaks it (never drops it).
pub(crate) struct Held<T> {
    value: Option<T>,
    area: MmuArea,
}

impl<T> Held<T> {
    /// Hold `value`, reachable through the PTEs of `area`.
    pub(crate) fn new(value: T, area: MmuArea) -> Self {
        Self {
            value: Some(value),
            area,
        }
    }

    /// The held value (always `Some`, see the invariant).
    pub(crate) fn get(&self) -> Option<&T> {
        self.value.as_ref()
    }

    /// The PTEs it was reachable through.
    pub(crate) fn area(&self) -> MmuArea {
        self.area
    }

    /// The value, if `proof` covers its area; otherwise the `Held` unchanged.
    pub(crate) fn release(mut self, proof: &Invalidated) -> Result<T, Self> {
        if !proof.covers(&self.area) {
            return Err(self);
        }
        self.value.take().ok_or(self)
    }

    /// [`Self::release`] in place: the value, if `proof` covers its area,
    /// leaving the `Held` empty (dropping it then releases nothing and
    /// warns of nothing); otherwise `None` and the `Held` unchanged.
    pub(crate) fn take(&mut self, proof: &Invalidated) -> Option<T> {
        if !proof.covers(&self.area) {
            return None;
        }
        self.value.take()
    }
}

impl<T> Drop for Held<T> {
    fn drop(&mut self) {
        if let Some(v) = self.value.take() {
            pr_err!(
                "MMU: memory reachable through ASID {} {:#x}..{:#x} dropped without an invalidation; leaked\n",
                self.area.asid,
                self.area.start,
                self.area.end
            );
            core::mem::forget(v);
        }
    }
}

#[kunit_tests(hlrs_invalidate)]
mod tests {
    use super::*;
    use crate::mmu::device_mmu::TestMmu;
    use kernel::sync::atomic::{Atomic, Relaxed};

    /// Counts its drops.
    struct Token<'a>(&'a Atomic<u32>);
    impl Drop for Token<'_> {
        fn drop(&mut self) {
            self.0.add(1, Relaxed);
        }
    }

    #[test]
    fn held_memory_is_released_only_against_a_covering_proof() -> Result {
        let d = TestMmu::new()?;
        let drops = Atomic::new(0u32);
        let area = MmuArea::new(MmuKind::Host, 1, 0x10_0000, 0x2000);
        let mut h = Held::new(Token(&drops), area);
        // A failed invalidation gives no proof; other ranges, ASIDs and MMUs
        // do not cover it.
        d.sim.inject_invalidation_failure();
        assert!(invalidate_range(d.backend(), area).is_err());
        for other in [
            MmuArea::new(MmuKind::Host, 1, 0x10_1000, 0x2000),
            MmuArea::new(MmuKind::Host, 2, 0x10_0000, 0x2000),
            MmuArea::new(MmuKind::Dram, 1, 0x10_0000, 0x2000),
        ] {
            let p = invalidate_range(d.backend(), other)?;
            h = match h.release(&p) {
                Ok(_) => return Err(EINVAL),
                Err(h) => h,
            };
        }
        h = match h.release(&invalidate_all(d.backend(), MmuKind::Dram)?) {
            Ok(_) => return Err(EINVAL),
            Err(h) => h,
        };
        assert_eq!(drops.load(Relaxed), 0);
        // A covering range, or everything of its MMU, does.
        let wider = MmuArea::new(MmuKind::Host, 1, 0xF_F000, 0x4000);
        let v = h
            .release(&invalidate_range(d.backend(), wider)?)
            .map_err(|_| EINVAL)?;
        drop(v);
        assert_eq!(drops.load(Relaxed), 1);
        let h = Held::new(Token(&drops), area);
        drop(
            h.release(&invalidate_all(d.backend(), MmuKind::Host)?)
                .map_err(|_| EINVAL)?,
        );
        assert_eq!(drops.load(Relaxed), 2);
        Ok(())
    }

    #[test]
    fn joined_areas_of_different_asids_need_a_full_invalidation() -> Result {
        let a = MmuArea::new(MmuKind::Dram, 1, 0x1000, 0x1000);
        let b = MmuArea::new(MmuKind::Dram, 1, 0x8000, 0x1000);
        let j = a.join(b);
        assert_eq!((j.start, j.end), (0x1000, 0x9000));
        let c = MmuArea::new(MmuKind::Dram, 2, 0x1000, 0x1000);
        let d = TestMmu::new()?;
        let p = invalidate_range(d.backend(), MmuArea::everything(MmuKind::Dram, 1))?;
        assert!(p.covers(&j));
        assert!(!p.covers(&a.join(c)));
        assert!(invalidate_all(d.backend(), MmuKind::Dram)?.covers(&a.join(c)));
        Ok(())
    }
}
