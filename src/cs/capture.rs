// SPDX-License-Identifier: GPL-2.0

//! The errors a device captures for its user (upstream
//! `hdev->captured_err_info`, common/device.c:2717-2870): the first MMU page
//! fault with the context's user mappings at that moment
//! (`HL_INFO_PAGE_FAULT_EVENT`, `HL_INFO_USER_MAPPINGS`), the first CS
//! timeout (`HL_INFO_CS_TIMEOUT_EVENT`), the first undefined opcode
//! (`HL_INFO_UNDEFINED_OPCODE_EVENT`), the first access no memory decodes
//! (`HL_INFO_RAZWI_EVENT`), and the notifier events raised
//! (`HL_INFO_GET_EVENTS`). Each is captured once per open of the compute
//! node: a new open clears them all (`hl_enable_err_info_capture`).
//!
//! Page faults are reported as upstream's Gaudi2 handler does
//! (`gaudi2_handle_page_error`, gaudi2/gaudi2.c:9358-9385): a PMMU fault
//! with the VA as the engine issued it, an HMMU fault with the VA's bits
//! 63..26 (`HW_UNSCRAMBLED_BITS_MASK`: the hardware captures the scrambled
//! VA, and the driver can only descramble those). Upstream's handler passes
//! engine id 0; the simulation knows the engine and reports it.
//! `HL_INFO_USER_MAPPINGS` lists, as `hl_capture_user_mappings` does, the
//! host (userptr) mappings for a PMMU fault and the DRAM mappings for an
//! HMMU one, each with the VA the MAP returned and the size of what it
//! maps.
//!
//! Lock order: [`Captured`]'s lock is a leaf; the user mappings are copied
//! under the context's `mappings` lock before it is taken.

use crate::{
    ffi::clock::ktime_ns,
    hw::{backend::MmuKind, sim::fault::EngineFault},
    uapi::*,
    vm::{context_vm::ContextVm, mapping_table::Backing},
};
use kernel::{alloc::KVVec, prelude::*};

/// `HW_UNSCRAMBLED_BITS_MASK` (gaudi2/gaudi2.c:165): what an HMMU fault
/// address keeps.
pub(crate) const HW_UNSCRAMBLED_BITS_MASK: u64 = !((1 << 26) - 1);

/// What was captured since the last open.
#[derive(Default)]
pub(crate) struct Captured {
    /// The first page fault.
    pub(crate) page_fault: Option<HlPageFaultInfo>,
    /// The user mappings at the first page fault.
    pub(crate) user_mappings: KVVec<HlUserMapping>,
    /// The first CS timeout (zeroes if none, as upstream reports it).
    pub(crate) cs_timeout: HlInfoCsTimeoutEvent,
    /// The first undefined opcode.
    pub(crate) undefined_opcode: Option<HlInfoUndefinedOpcodeEvent>,
    /// The first RAZWI (an access no memory decodes).
    pub(crate) razwi: Option<HlInfoRazwiEvent>,
    /// Notifier events (`HL_NOTIFIER_EVENT_*`) not read yet.
    pub(crate) events: u64,
}

/// The page-fault report of `fault`, if it is a page fault: (info, whether
/// it is the PMMU's). O(1).
pub(crate) fn page_fault_info(fault: &EngineFault) -> Option<(HlPageFaultInfo, bool)> {
    let EngineFault::Page {
        mmu, va, engine, ..
    } = *fault
    else {
        return None;
    };
    let pmmu = mmu == MmuKind::Host;
    let addr = if pmmu {
        va
    } else {
        va & HW_UNSCRAMBLED_BITS_MASK
    };
    let info = HlPageFaultInfo {
        timestamp: ktime_ns(),
        addr,
        engine_id: engine,
        pad: [0; 6],
    };
    Some((info, pmmu))
}

/// The user mappings of `vm` upstream captures at a fault of the PMMU
/// (`pmmu`: host mappings) or of the HMMU (DRAM mappings). O(n) in the
/// mappings; allocates the list.
pub(crate) fn user_mappings(vm: &ContextVm, pmmu: bool) -> Result<KVVec<HlUserMapping>> {
    let table = vm.mappings.lock();
    let n = table
        .iter()
        .filter(|(_, m)| match m.backing() {
            Some(Backing::Host { .. }) => pmmu,
            Some(Backing::Dram { .. }) => !pmmu,
            _ => false,
        })
        .count();
    let mut out = KVVec::with_capacity(n, GFP_KERNEL)?;
    for (&va, m) in table.iter() {
        let size = match m.backing() {
            Some(Backing::Host { pinned, .. }) if pmmu => pinned.size,
            Some(Backing::Dram { pack, .. }) if !pmmu => pack.total_size,
            _ => continue,
        };
        out.push_within_capacity(HlUserMapping { dev_va: va, size })
            .map_err(|_| ENOMEM)?;
    }
    Ok(out)
}

/// The RAZWI report of `fault`, if it is an address-decode error
/// (`hl_capture_razwi`: one initiator, a high-bandwidth access; the
/// simulation does not tell reads from writes). O(1).
pub(crate) fn razwi_info(fault: &EngineFault) -> Option<HlInfoRazwiEvent> {
    let EngineFault::Decode { addr, engine } = *fault else {
        return None;
    };
    let mut r = HlInfoRazwiEvent {
        timestamp: ktime_ns(),
        addr,
        num_of_possible_engines: 1,
        flags: HL_RAZWI_HBW,
        ..Default::default()
    };
    if let Some(e) = r.engine_id.get_mut(0) {
        *e = engine;
    }
    Some(r)
}

/// The undefined-opcode report of a bad packet at `cb_addr` on `engine`. O(1).
pub(crate) fn undefined_opcode_info(cb_addr: u64, engine: u16) -> HlInfoUndefinedOpcodeEvent {
    let mut e = HlInfoUndefinedOpcodeEvent {
        timestamp: ktime_ns(),
        cb_addr_streams_len: 1,
        engine_id: u32::from(engine),
        ..Default::default()
    };
    if let Some(s) = e.cb_addr_streams.get_mut(0).and_then(|s| s.get_mut(0)) {
        *s = cb_addr;
    }
    e
}

#[kunit_tests(hlrs_capture)]
mod tests {
    use super::*;

    #[test]
    fn page_faults_are_reported_as_upstream() {
        let pmmu = EngineFault::Page {
            mmu: MmuKind::Host,
            asid: 1,
            va: 0xFFF0_0000_1234_5678,
            engine: 45,
        };
        let (info, host) = page_fault_info(&pmmu).unwrap_or_default();
        assert!(host);
        assert_eq!((info.addr, info.engine_id), (0xFFF0_0000_1234_5678, 45));
        assert!(info.timestamp > 0);
        let hmmu = EngineFault::Page {
            mmu: MmuKind::Dram,
            asid: 1,
            va: 0x1001_0018_0765_4321,
            engine: 11,
        };
        let (info, host) = page_fault_info(&hmmu).unwrap_or_default();
        assert!(!host);
        assert_eq!(info.addr, 0x1001_0018_0400_0000);
        let other = EngineFault::Decode {
            addr: 5,
            engine: 46,
        };
        assert!(page_fault_info(&other).is_none());
        let r = razwi_info(&other).unwrap_or_default();
        assert_eq!(
            (r.addr, r.engine_id[0], r.num_of_possible_engines),
            (5, 46, 1)
        );
        assert!(razwi_info(&pmmu).is_none());
        let u = undefined_opcode_info(0x1000, 46);
        assert_eq!((u.engine_id, u.cb_addr_streams_len), (46, 1));
        assert_eq!(u.cb_addr_streams[0][0], 0x1000);
    }
}
