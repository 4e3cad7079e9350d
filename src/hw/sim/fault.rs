// SPDX-License-Identifier: GPL-2.0

//! What an engine access of the simulated Gaudi2 can end in: where it landed
//! ([`Target`]), why it stopped ([`EngineFault`]), a use of a translation an
//! invalidation should have dropped ([`StaleUse`]), and the device's record
//! of them ([`FaultLog`]).

use crate::hw::backend::MmuKind;
use kernel::prelude::*;

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

pub(crate) use crate::hw::engines::{Access, EngineFault};

impl From<EngineFault> for Error {
    /// `EFAULT` for what a fault report describes, `ENOMEM` when the
    /// simulation ran out of memory.
    fn from(f: EngineFault) -> Self {
        match f {
            EngineFault::Backing { .. } => ENOMEM,
            _ => EFAULT,
        }
    }
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

impl FaultLog {
    /// Count `f` and keep it as the last (and the first, if none yet). O(1).
    pub(crate) fn record(&mut self, f: EngineFault) {
        self.first.get_or_insert(f);
        self.last = Some(f);
        let n = match f {
            EngineFault::Page { .. } => &mut self.page,
            EngineFault::Iommu { .. } => &mut self.iommu,
            _ => &mut self.other,
        };
        *n = n.saturating_add(1);
    }
}
