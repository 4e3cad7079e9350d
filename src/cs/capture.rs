// SPDX-License-Identifier: GPL-2.0

//! The errors a device captures for its user (upstream
//! `hdev->captured_err_info`, common/device.c:2717-2870): the first MMU page
//! fault with the context's user mappings at that moment
//! (`HL_INFO_PAGE_FAULT_EVENT`, `HL_INFO_USER_MAPPINGS`), the first CS
//! timeout (`HL_INFO_CS_TIMEOUT_EVENT`), the first undefined opcode
//! (`HL_INFO_UNDEFINED_OPCODE_EVENT`), the first access no memory decodes
//! (`HL_INFO_RAZWI_EVENT`), the first engine error
//! (`HL_INFO_USER_ENGINE_ERR_EVENT`), and the notifier events raised
//! (`HL_INFO_GET_EVENTS`). Each is captured once per open of the compute
//! node: a new open clears them all (`hl_enable_err_info_capture`).
//!
//! Which fault is reported how:
//!
//! | engine fault | INFO event | notifier event |
//! |---|---|---|
//! | a page fault (no translation) | `PAGE_FAULT_EVENT` + `USER_MAPPINGS` | `PAGE_FAULT` |
//! | an address no memory decodes | `RAZWI_EVENT`, `HL_RAZWI_HBW` and `HL_RAZWI_READ` or `HL_RAZWI_WRITE` (a direction the simulation does not know, the command processor's own address arithmetic, is reported as its fetch: a read) | `RAZWI` |
//! | the IOMMU refused a translated host address | `USER_ENGINE_ERR_EVENT` (the engine, one error) | `USER_ENGINE_ERR` |
//! | the simulation could not back the memory | `USER_ENGINE_ERR_EVENT` | `USER_ENGINE_ERR` |
//! | a `LIN_DMA` whose size is not a whole number of its swap words | `USER_ENGINE_ERR_EVENT` | `USER_ENGINE_ERR` |
//! | any other refused packet | `UNDEFINED_OPCODE_EVENT` | `UNDEFINED_OPCODE` |
//!
//! The three engine errors are what the hardware's DMA core reports for
//! them: a read or write that returned with an error response (`HBW Read
//! returned with error RRESP`, `HBW write returned with error BRESP`: the
//! PCIe side of a refused host access, a memory that failed) or a linear
//! DMA configuration it cannot commit (`WRONG CFG FOR COMMIT IN LIN DMA`),
//! all of which upstream's `gaudi2_handle_dma_core_event` answers with
//! `HL_NOTIFIER_EVENT_USER_ENGINE_ERR` and `hl_capture_engine_err`
//! (gaudi2/gaudi2.c:9248, 10313-10322, 10583-10584). None of them is a page
//! fault: the VA translated.
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
//! under the context's `mappings` lock before it is taken. The mapping list
//! is shared ([`Arc`]), so that INFO takes it under the lock in O(1) and
//! copies it to the user with the lock released.

use crate::{
    ffi::clock::ktime_ns,
    hw::{
        backend::MmuKind,
        engines::{Access, EngineFault},
    },
    uapi::*,
    vm::{context_vm::ContextVm, mapping_table::Backing},
};
use kernel::{alloc::KVVec, prelude::*, sync::Arc};

/// `HW_UNSCRAMBLED_BITS_MASK` (gaudi2/gaudi2.c:165): what an HMMU fault
/// address keeps.
pub(crate) const HW_UNSCRAMBLED_BITS_MASK: u64 = !((1 << 26) - 1);

/// What was captured since the last open.
#[derive(Default)]
pub(crate) struct Captured {
    /// The first page fault.
    pub(crate) page_fault: Option<HlPageFaultInfo>,
    /// The user mappings at the first page fault (`None`: the list could
    /// not be allocated, reported empty as upstream's failed `vzalloc`).
    pub(crate) user_mappings: Option<Arc<KVVec<HlUserMapping>>>,
    /// The first CS timeout (zeroes if none, as upstream reports it).
    pub(crate) cs_timeout: HlInfoCsTimeoutEvent,
    /// The first undefined opcode.
    pub(crate) undefined_opcode: Option<HlInfoUndefinedOpcodeEvent>,
    /// The first RAZWI (an access no memory decodes).
    pub(crate) razwi: Option<HlInfoRazwiEvent>,
    /// The first engine error.
    pub(crate) engine_err: Option<HlInfoEngineErrEvent>,
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
/// (`hl_capture_razwi` as Gaudi2's `gaudi2_razwi_rr_hbw_shared_printf_info`
/// fills it: one initiator, a high-bandwidth access, read or write). O(1).
pub(crate) fn razwi_info(fault: &EngineFault) -> Option<HlInfoRazwiEvent> {
    let (addr, engine, access) = match *fault {
        EngineFault::Razwi {
            addr,
            engine,
            access,
        } => (addr, engine, access),
        // The command processor's own address arithmetic: its fetch.
        EngineFault::Decode { addr, engine } => (addr, engine, Access::Read),
        _ => return None,
    };
    let dir = match access {
        Access::Read => HL_RAZWI_READ,
        Access::Write => HL_RAZWI_WRITE,
    };
    let mut r = HlInfoRazwiEvent {
        timestamp: ktime_ns(),
        addr,
        num_of_possible_engines: 1,
        flags: HL_RAZWI_HBW | dir,
        ..Default::default()
    };
    if let Some(e) = r.engine_id.get_mut(0) {
        *e = engine;
    }
    Some(r)
}

/// The engine of `fault`, if upstream reports it as an engine error (an
/// IOMMU refusal, memory the simulation could not back). O(1).
pub(crate) fn engine_error_of(fault: &EngineFault) -> Option<u16> {
    match *fault {
        EngineFault::Iommu { engine, .. } | EngineFault::Backing { engine, .. } => Some(engine),
        _ => None,
    }
}

/// The engine-error report of one error on `engine`
/// (`hl_capture_engine_err`). O(1).
pub(crate) fn engine_err_info(engine: u16) -> HlInfoEngineErrEvent {
    HlInfoEngineErrEvent {
        timestamp: ktime_ns(),
        engine_id: engine,
        error_count: 1,
        pad: 0,
    }
}

/// The lower CP's stream (`QMAN_STREAMS`): upstream captures an undefined
/// opcode only there.
pub(crate) const LOWER_CP_STREAM: u32 = 4;

/// The undefined-opcode report of a refused packet at `addr` on `engine`,
/// as upstream's Gaudi2 fills it (`handle_lower_qman_data_on_err`,
/// gaudi2/gaudi2.c:8261-8300): the lower CP's stream, its CQ's pointer (the
/// packet's address: where the CP stopped) and size (0: the simulation has
/// no CQ whose remaining size it could read), no CB address list. O(1).
pub(crate) fn undefined_opcode_info(addr: u64, engine: u16) -> HlInfoUndefinedOpcodeEvent {
    HlInfoUndefinedOpcodeEvent {
        timestamp: ktime_ns(),
        cq_addr: addr,
        cq_size: 0,
        cb_addr_streams_len: 0,
        engine_id: u32::from(engine),
        stream_id: LOWER_CP_STREAM,
        ..Default::default()
    }
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
        let other = EngineFault::Razwi {
            addr: 5,
            engine: 46,
            access: Access::Write,
        };
        assert!(page_fault_info(&other).is_none());
        let r = razwi_info(&other).unwrap_or_default();
        assert_eq!(
            (r.addr, r.engine_id[0], r.num_of_possible_engines),
            (5, 46, 1)
        );
        assert_eq!(r.flags, HL_RAZWI_HBW | HL_RAZWI_WRITE);
        let read = EngineFault::Razwi {
            access: Access::Read,
            addr: 5,
            engine: 46,
        };
        assert_eq!(
            razwi_info(&read).map(|r| r.flags),
            Some(HL_RAZWI_HBW | HL_RAZWI_READ)
        );
        let fetch = EngineFault::Decode { addr: 7, engine: 3 };
        assert_eq!(
            razwi_info(&fetch).map(|r| (r.addr, r.flags)),
            Some((7, HL_RAZWI_HBW | HL_RAZWI_READ))
        );
        assert!(razwi_info(&pmmu).is_none());
        assert!(engine_error_of(&other).is_none() && engine_error_of(&pmmu).is_none());
    }

    #[test]
    fn iommu_and_backing_faults_are_engine_errors() {
        let iommu = EngineFault::Iommu {
            bus: 0x1000,
            asid: 1,
            va: 0xFFF0_0000_0000_1000,
            engine: 45,
        };
        let backing = EngineFault::Backing {
            addr: 0x2000,
            engine: 12,
        };
        assert_eq!(engine_error_of(&iommu), Some(45));
        assert_eq!(engine_error_of(&backing), Some(12));
        for f in [iommu, backing] {
            assert!(page_fault_info(&f).is_none() && razwi_info(&f).is_none());
        }
        let e = engine_err_info(12);
        assert_eq!((e.engine_id, e.error_count, e.pad), (12, 1, 0));
        assert!(e.timestamp > 0);
    }

    #[test]
    fn undefined_opcodes_are_reported_as_upstreams_gaudi2() {
        let u = undefined_opcode_info(0x1000, 46);
        assert_eq!((u.engine_id, u.stream_id), (46, 4));
        assert_eq!((u.cq_addr, u.cq_size), (0x1000, 0));
        assert_eq!(u.cb_addr_streams_len, 0);
        assert_eq!(u.cb_addr_streams, [[0; 8]; 4]);
        assert!(u.timestamp > 0);
    }
}
