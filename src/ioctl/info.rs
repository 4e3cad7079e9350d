// SPDX-License-Identifier: GPL-2.0

//! `DRM_IOCTL_HL_INFO` (upstream `_hl_info_ioctl`, common/habanalabs_ioctl.c:1005-1156).
//!
//! Upstream rules kept here: `pad` must be 0; a first set of ops is answered in
//! any device state, the rest only while the device is operational (`EBUSY`
//! otherwise, also for unknown ops); results are copied truncated to
//! `return_size`; `return_size == 0` or a NULL `return_pointer` is `EINVAL`.
//! The control node refuses the eventfd/notifier ops with `EOPNOTSUPP`; on
//! the compute node they register an eventfd that the device's notifier
//! events signal (`cs::device_cs`).
//!
//! The ops upstream answers through the device CPU's firmware (CPU-CP) are
//! [`super::info_fw`]'s; the few firmware ops the model's firmware does not
//! answer (attestation, signed info, generic requests) and ENGINE_STATUS
//! answer `EOPNOTSUPP` after the same argument checks (see the README's
//! table).
//!
//! **No lock across a user copy.** The answer goes to the user buffer
//! ([`InfoSink::write`]) with no lock of the module held: an op takes what
//! it reports out of its lock (a copy, or for the user mappings a reference
//! to the captured list) and writes after unlocking. A user buffer backed
//! by FUSE or userfaultfd can hold the copy for as long as its owner likes;
//! it then holds nothing anyone else waits for.

use crate::{
    context::Context,
    device::HlDevice,
    file::Node,
    uapi::*, //
};
use kernel::{
    prelude::*,
    transmute::AsBytes,
    uaccess::{UserPtr, UserSlice}, //
};

/// Where an INFO answer goes: the buffer `[return_pointer, return_pointer + return_size)`.
pub(crate) trait InfoSink {
    /// Copy `data` to the start of the buffer; `EFAULT` if that faults.
    fn write(&mut self, data: &[u8]) -> Result;
}

/// The user buffer of an INFO call.
pub(crate) struct UserBuffer(pub(crate) u64);

impl InfoSink for UserBuffer {
    fn write(&mut self, data: &[u8]) -> Result {
        let addr = usize::try_from(self.0).map_err(|_| EFAULT)?;
        UserSlice::new(UserPtr::from_addr(addr), data.len())
            .writer()
            .write_slice(data)
    }
}

/// What the caller of an INFO op is.
pub(crate) struct InfoCaller<'a> {
    /// The device.
    pub(crate) dev: &'a HlDevice,
    /// The caller's context (compute node only).
    pub(crate) ctx: Option<&'a Context>,
    /// Which node the ioctl came through.
    pub(crate) node: Node,
    /// Current monotonic time in ns and raw monotonic time in ns (TIME_SYNC).
    pub(crate) now_ns: (i64, i64),
}

/// The usual argument check of almost every op: a buffer must be given.
fn check_buffer(args: &HlInfoArgs) -> Result {
    if args.return_size == 0 || args.return_pointer == 0 {
        return Err(EINVAL);
    }
    Ok(())
}

/// Copy `value` truncated to `return_size` bytes, after the usual checks.
pub(super) fn reply<T: AsBytes>(args: &HlInfoArgs, out: &mut dyn InfoSink, value: &T) -> Result {
    check_buffer(args)?;
    let bytes = value.as_bytes();
    let n = core::cmp::min(bytes.len(), args.return_size as usize);
    out.write(bytes.get(..n).ok_or(EINVAL)?)
}

/// Copy `len` zero bytes truncated to `return_size` (event counters that never counted).
fn reply_zeros(args: &HlInfoArgs, out: &mut dyn InfoSink, len: usize) -> Result {
    check_buffer(args)?;
    const ZEROS: [u8; 8192] = [0; 8192];
    let n = core::cmp::min(len, args.return_size as usize);
    out.write(ZEROS.get(..n).ok_or(EINVAL)?)
}

/// `HL_INFO_SYNC_MANAGER` (`sync_manager_info`, habanalabs_ioctl.c:441-465):
/// the first SOB, monitor and CQ users may take. Upstream fills DCORE0's
/// only (gaudi2/gaudi2.c:2925-2935); the other dcores answer 0.
fn sync_manager_info(args: &HlInfoArgs, out: &mut dyn InfoSink) -> Result {
    check_buffer(args)?;
    if args.dcore_id() >= HL_MAX_DCORES {
        return Err(EINVAL);
    }
    let sm = if args.dcore_id() == 0 {
        HlInfoSyncManager {
            first_available_sync_object: crate::asic::GAUDI2_FIRST_USER_SOB,
            first_available_monitor: crate::asic::GAUDI2_FIRST_USER_MON,
            first_available_cq: crate::asic::GAUDI2_FIRST_USER_CQ,
            reserved: 0,
        }
    } else {
        HlInfoSyncManager::default()
    };
    reply(args, out, &sm)
}

/// `HL_INFO_HW_IP_INFO` of a device (`hw_ip_info`, habanalabs_ioctl.c:49-117).
pub(crate) fn hw_ip_info(dev: &HlDevice) -> HlInfoHwIpInfo {
    let p = &dev.asic;
    let mut hw = HlInfoHwIpInfo::ZERO;
    hw.device_id = u32::from(p.device_id);
    hw.revision_id = p.revision;
    // User SRAM: what the driver keeps for itself is not reported (ioc:60-73).
    hw.sram_base_address = p.sram_user_base;
    let sram_kmd = p.sram_user_base.saturating_sub(crate::asic::SRAM_BASE_ADDR);
    hw.sram_size = u32::try_from(p.sram_size.saturating_sub(sram_kmd)).unwrap_or(u32::MAX);
    // Every EDMA engine (ioc:107; gaudi2.c:3218 without binning).
    hw.edma_enabled_mask = crate::asic::GAUDI2_EDMA_FULL_MASK;
    // Every TPC QMAN (ioc:84-85: the low 8 bits, then all 25 in `_ext`;
    // no binning). Their queues run packets; no TPC kernel runs.
    hw.tpc_enabled_mask = (crate::asic::GAUDI2_TPC_FULL_MASK & 0xFF) as u8;
    hw.tpc_enabled_mask_ext = crate::asic::GAUDI2_TPC_FULL_MASK;
    // With DRAM virtual memory userspace sees the DMMU VA range (ioc:66-68).
    hw.dram_base_address = p.dram_va.start;
    hw.dram_size = p.user_dram_size();
    hw.dram_enabled = u8::from(hw.dram_size > kernel::page::PAGE_SIZE as u64);
    hw.dram_page_size = p.dram_page_size;
    hw.device_mem_alloc_default_page_size = p.dram_page_size;
    hw.reserved_dram_size = p.reserved_dram_size();
    hw.num_of_events = crate::asic::GAUDI2_EVENT_SIZE;
    hw.server_type = HL_SERVER_GAUDI2_HLS2;
    // User interrupts where the device raises them (the PCI Gaudi2's
    // MSI-X 48..111; ioc:101-105, gaudi2/gaudi2.c:2801-2802, 2931-2932).
    if dev.cs.interrupts().is_ok() {
        hw.first_available_interrupt_id = crate::cs::user_interrupt::FIRST_USER_INTERRUPT as u16;
        hw.number_of_user_interrupts = crate::cs::user_interrupt::USER_INTERRUPTS as u16;
        hw.tpc_interrupt_id = crate::cs::user_interrupt::TPC_ASSERT_INTERRUPT as u16;
    }
    hw.module_id = dev.index;
    // What the firmware said of itself (ioc:88-91): the model core's CPU-CP
    // on both hosts ("HL-225", "gaudi2-model cpucp stand-in").
    hw.cpucp_version = dev.fw_identity.cpucp_version;
    hw.card_name = dev.fw_identity.card_name;
    hw
}

/// `HL_INFO_DRAM_USAGE` (`dram_usage_info`, habanalabs_ioctl.c:155-177).
pub(crate) fn dram_usage(dev: &HlDevice, ctx: Option<&Context>) -> HlInfoDramUsage {
    HlInfoDramUsage {
        dram_free_mem: dev.asic.user_dram_size().saturating_sub(dev.vm.dram_used()),
        ctx_dram_mem: ctx.map_or(0, |c| c.dram_phys_mem()),
    }
}

/// Serve one INFO ioctl. `args` may be updated (USER_MAPPINGS sets `array_size`).
pub(crate) fn info_ioctl(
    caller: &InfoCaller<'_>,
    args: &mut HlInfoArgs,
    out: &mut dyn InfoSink,
) -> Result {
    if args.pad != 0 {
        return Err(EINVAL);
    }
    if caller.node == Node::Control
        && matches!(
            args.op,
            HL_INFO_GET_EVENTS | HL_INFO_REGISTER_EVENTFD | HL_INFO_UNREGISTER_EVENTFD
        )
    {
        return Err(EOPNOTSUPP);
    }
    // Answered whatever the device state is (ioc:1022-1090).
    if let Some(r) = device_state_info(caller, args, out) {
        return r;
    }
    if let Some(r) = event_info(caller, args, out) {
        return r;
    }
    if !caller.dev.status().is_operational() {
        return Err(EBUSY);
    }
    operational_info(caller, args, out)
}

/// The always-answered ops about the device and its opens; `None` for
/// another op.
fn device_state_info(
    caller: &InfoCaller<'_>,
    args: &mut HlInfoArgs,
    out: &mut dyn InfoSink,
) -> Option<Result> {
    let dev = caller.dev;
    Some(match args.op {
        HL_INFO_HW_IP_INFO => reply(args, out, &hw_ip_info(dev)),
        HL_INFO_DEVICE_STATUS => {
            let st = HlInfoDeviceStatus {
                status: dev.status().uapi(),
                pad: 0,
            };
            reply(args, out, &st)
        }
        HL_INFO_RESET_COUNT => {
            let counts = HlInfoResetCount {
                hard_reset_cnt: dev.cs.hard_resets(),
                soft_reset_cnt: 0,
            };
            reply(args, out, &counts)
        }
        HL_INFO_OPEN_STATS => {
            let st = dev.state.lock();
            let stats = HlOpenStatsInfo {
                open_counter: st.open_counter,
                last_open_period_ms: st.last_session_ms,
                is_compute_ctx_active: u8::from(st.compute_ctx_active),
                compute_ctx_in_release: u8::from(st.in_release),
                pad: [0; 6],
            };
            drop(st);
            reply(args, out, &stats)
        }
        HL_INFO_LAST_ERR_OPEN_DEV_TIME => {
            let t = HlInfoLastErrOpenDevTime {
                timestamp: dev.state.lock().last_open_ktime_ns,
            };
            reply(args, out, &t)
        }
        HL_INFO_DEV_MEM_ALLOC_PAGE_SIZES => {
            // Only the default page size is supported, as upstream (ioc:653-672).
            reply(args, out, &HlInfoDevMemallocPageSizes::default())
        }
        HL_INFO_DRAM_USAGE => reply(args, out, &dram_usage(dev, caller.ctx)),
        _ => return None,
    })
}

/// The always-answered ops about CSs, events and errors; `None` for
/// another op.
fn event_info(
    caller: &InfoCaller<'_>,
    args: &mut HlInfoArgs,
    out: &mut dyn InfoSink,
) -> Option<Result> {
    let cs = &caller.dev.cs;
    Some(match args.op {
        HL_INFO_HW_EVENTS | HL_INFO_HW_EVENTS_AGGREGATE => {
            // No event ever fired on the simulation: all counters are zero.
            let len = crate::asic::GAUDI2_EVENT_SIZE as usize * core::mem::size_of::<u32>();
            reply_zeros(args, out, len)
        }
        HL_INFO_CS_COUNTERS => reply(args, out, &cs_counters(caller)),
        HL_INFO_CLK_THROTTLE_REASON => reply(args, out, &HlInfoClkThrottle::default()),
        HL_INFO_SYNC_MANAGER => sync_manager_info(args, out),
        HL_INFO_CS_TIMEOUT_EVENT => {
            let t = cs.with_captured(|c| c.cs_timeout);
            reply(args, out, &t)
        }
        HL_INFO_UNDEFINED_OPCODE_EVENT => {
            let u = cs.with_captured(|c| c.undefined_opcode.unwrap_or_default());
            reply(args, out, &u)
        }
        HL_INFO_GET_EVENTS => {
            if (args.return_size as usize) < core::mem::size_of::<u64>() || args.return_pointer == 0
            {
                return Some(Err(EINVAL));
            }
            // Read and cleared, as upstream's per-file notifier mask.
            let events = cs.with_captured(|c| core::mem::take(&mut c.events));
            out.write(&events.to_ne_bytes())
        }
        HL_INFO_PAGE_FAULT_EVENT => check_buffer(args).and_then(|()| {
            // Nothing captured: success without copying (ioc:843-859).
            match cs.with_captured(|c| c.page_fault) {
                Some(pf) => reply(args, out, &pf),
                None => Ok(()),
            }
        }),
        HL_INFO_USER_MAPPINGS => user_mappings(caller, args, out),
        HL_INFO_RAZWI_EVENT => check_buffer(args).and_then(|()| {
            // Nothing captured: success without copying (ioc:613-629).
            match cs.with_captured(|c| c.razwi) {
                Some(r) => reply(args, out, &r),
                None => Ok(()),
            }
        }),
        HL_INFO_USER_ENGINE_ERR_EVENT => {
            // `engine_err_info` (ioc:929-949): nothing captured, nothing
            // copied; else the whole struct, `ENOMEM` if it does not fit.
            if args.return_pointer == 0 {
                return Some(Err(EINVAL));
            }
            match cs.with_captured(|c| c.engine_err) {
                None => Ok(()),
                Some(e) if (args.return_size as usize) < core::mem::size_of_val(&e) => Err(ENOMEM),
                Some(e) => out.write(e.as_bytes()),
            }
        }
        HL_INFO_HW_ERR_EVENT | HL_INFO_FW_ERR_EVENT => {
            // Only the pointer is checked; nothing captured, nothing copied
            // and `array_size` untouched (ioc:885-927).
            if args.return_pointer == 0 {
                Err(EINVAL)
            } else {
                Ok(())
            }
        }
        HL_INFO_UNREGISTER_EVENTFD => cs.unregister_eventfd(),
        _ => return None,
    })
}

/// `HL_INFO_CS_COUNTERS` (`cs_counters_info`, ioc:390-440): the device's
/// drops and, on the compute node, the caller's context's.
fn cs_counters(caller: &InfoCaller<'_>) -> HlInfoCsCounters {
    let total = caller.dev.cs.counters.values();
    let ctx = caller.ctx.map_or([0; 6], |c| c.cs().counters.values());
    let mut counters = [0u64; 12];
    for (i, pair) in counters.chunks_exact_mut(2).enumerate() {
        if let (Some(t), Some(c), [a, b]) = (total.get(i), ctx.get(i), pair) {
            (*a, *b) = (*t, *c);
        }
    }
    HlInfoCsCounters { counters }
}

/// `HL_INFO_USER_MAPPINGS` (`user_mappings_info`, ioc:861-884): nothing
/// without a captured page fault; else `array_size` is set to the number of
/// mappings and the whole list copied, `ENOMEM` if it does not fit. The
/// list is taken (a reference, O(1)) under the capture's lock and copied to
/// the user after it is released; a new open meanwhile clears the capture
/// without waiting, and the list goes with the last reference. O(mappings)
/// for the copy.
fn user_mappings(caller: &InfoCaller<'_>, args: &mut HlInfoArgs, out: &mut dyn InfoSink) -> Result {
    if args.return_pointer == 0 {
        return Err(EINVAL);
    }
    let Some(maps) = caller
        .dev
        .cs
        .with_captured(|c| c.page_fault.map(|_| c.user_mappings.clone()))
    else {
        return Ok(());
    };
    let list: &[HlUserMapping] = maps.as_deref().map_or(&[], |m| m.as_slice());
    args.set_array_size(u32::try_from(list.len()).unwrap_or(u32::MAX));
    let bytes = core::mem::size_of_val(list);
    if (args.return_size as usize) < bytes {
        return Err(ENOMEM);
    }
    out.write(list.as_bytes())
}

/// The ops answered only while the device is operational.
fn operational_info(
    caller: &InfoCaller<'_>,
    args: &mut HlInfoArgs,
    out: &mut dyn InfoSink,
) -> Result {
    if super::info_fw::is_firmware_op(args.op) {
        check_buffer(args)?;
        let answer = super::info_fw::ask(&*caller.dev.cpucp, args.op, args.arg)?;
        let bytes = answer.bytes();
        let n = core::cmp::min(bytes.len(), args.return_size as usize);
        return out.write(bytes.get(..n).ok_or(EINVAL)?);
    }
    match args.op {
        HL_INFO_HW_IDLE => {
            // Busy: an engine runs a job or has one queued (`hw_idle`, ioc:179-196).
            let mask = caller.dev.cs.busy_mask();
            let idle = HlInfoHwIdle {
                is_idle: u32::from(caller.dev.backend().is_idle() && mask.iter().all(|&w| w == 0)),
                busy_engines_mask: mask.first().map_or(0, |&w| w as u32),
                busy_engines_mask_ext: mask,
            };
            reply(args, out, &idle)
        }
        HL_INFO_TIME_SYNC => {
            // The simulated device clock is the host's monotonic raw clock.
            let (_, raw) = caller.now_ns;
            let raw = u64::try_from(raw).unwrap_or(0);
            reply(
                args,
                out,
                &HlInfoTimeSync {
                    device_time: raw,
                    host_time: raw,
                    tsc_time: 0,
                },
            )
        }
        HL_INFO_SECURED_ATTESTATION
        | HL_INFO_ENGINE_STATUS
        | HL_INFO_FW_GENERIC_REQ
        | HL_INFO_DEV_SIGNED => {
            // Attestation, signed info and generic requests need firmware
            // the model does not stand in for; the engines' status text is
            // not produced.
            check_buffer(args)?;
            Err(EOPNOTSUPP)
        }
        // The union's `eventfd` member: the caller's fd number.
        HL_INFO_REGISTER_EVENTFD => caller.dev.cs.register_eventfd(args.arg as i32),
        _ => Err(EINVAL),
    }
}

#[kunit_tests(hlrs_info)]
mod tests {
    use super::*;
    use crate::{
        asic::AsicProperties,
        hw::{
            backend::{DeviceStatus, MmuKind},
            sim::{
                fault::{Access, EngineFault},
                packets::PacketError,
            },
        },
        vm::{device_memory::alloc_device_memory, mapping::map_device_va},
    };
    use kernel::sync::Arc;

    /// A sink that records what would reach the user buffer.
    struct Recorder {
        written: KVec<u8>,
        fault: bool,
    }

    impl InfoSink for Recorder {
        fn write(&mut self, data: &[u8]) -> Result {
            if self.fault {
                return Err(EFAULT);
            }
            self.written.extend_from_slice(data, GFP_KERNEL)?;
            Ok(())
        }
    }

    const ALWAYS_OPS: [u32; 20] = [
        HL_INFO_HW_IP_INFO,
        HL_INFO_DEVICE_STATUS,
        HL_INFO_RESET_COUNT,
        HL_INFO_HW_EVENTS,
        HL_INFO_HW_EVENTS_AGGREGATE,
        HL_INFO_CS_COUNTERS,
        HL_INFO_CLK_THROTTLE_REASON,
        HL_INFO_SYNC_MANAGER,
        HL_INFO_OPEN_STATS,
        HL_INFO_LAST_ERR_OPEN_DEV_TIME,
        HL_INFO_CS_TIMEOUT_EVENT,
        HL_INFO_RAZWI_EVENT,
        HL_INFO_UNDEFINED_OPCODE_EVENT,
        HL_INFO_DEV_MEM_ALLOC_PAGE_SIZES,
        HL_INFO_PAGE_FAULT_EVENT,
        HL_INFO_DRAM_USAGE,
        HL_INFO_USER_MAPPINGS,
        HL_INFO_HW_ERR_EVENT,
        HL_INFO_FW_ERR_EVENT,
        HL_INFO_USER_ENGINE_ERR_EVENT,
    ];
    const FIRMWARE_OPS: [u32; 12] = [
        HL_INFO_DEVICE_UTILIZATION,
        HL_INFO_CLK_RATE,
        HL_INFO_PCI_COUNTERS,
        HL_INFO_TOTAL_ENERGY,
        HL_INFO_PLL_FREQUENCY,
        HL_INFO_POWER,
        HL_INFO_DRAM_REPLACED_ROWS,
        HL_INFO_DRAM_PENDING_ROWS,
        // Not answered (EOPNOTSUPP) from here on.
        HL_INFO_SECURED_ATTESTATION,
        HL_INFO_ENGINE_STATUS,
        HL_INFO_FW_GENERIC_REQ,
        HL_INFO_DEV_SIGNED,
    ];

    #[test]
    fn hw_ip_info_describes_a_gaudi2() -> Result {
        let d = dev()?;
        let (rc, out, _) = call(&d, None, Node::Control, HL_INFO_HW_IP_INFO, 304, 0)?;
        assert_eq!(rc, Ok(()));
        assert_eq!(out.len(), 304);
        let hw = hw_ip_info(&d);
        assert_eq!(hw.device_id, 0x1020);
        assert_eq!(hw.dram_base_address, 0x1001_0018_0000_0000);
        assert_eq!(hw.dram_size, 0x17_D000_0000);
        assert_eq!(hw.dram_page_size, 0x3000_0000);
        assert_eq!(hw.device_mem_alloc_default_page_size, 0x3000_0000);
        assert_eq!(hw.reserved_dram_size, 0x3000_0000);
        assert_eq!(hw.dram_enabled, 1);
        assert_eq!(hw.sram_size, 48 << 20);
        assert_eq!(hw.sram_base_address, 0x1000_FFFF_FD00_0000);
        assert_eq!(hw.edma_enabled_mask, 0xFF);
        assert_eq!(hw.revision_id, 1);
        assert!(hw.dram_size % hw.dram_page_size == 0);
        // The bytes on the wire are the struct's.
        assert!(out.get(32..36) == Some(&0x1020u32.to_ne_bytes()[..]));
        Ok(())
    }

    #[test]
    fn results_are_truncated_to_return_size() -> Result {
        let d = dev()?;
        let (rc, out, _) = call(&d, None, Node::Compute, HL_INFO_HW_IP_INFO, 8, 0)?;
        assert_eq!(rc, Ok(()));
        assert_eq!(out.len(), 8);
        let (rc, out, _) = call(&d, None, Node::Compute, HL_INFO_HW_EVENTS, 100_000, 0)?;
        assert_eq!(rc, Ok(()));
        assert_eq!(out.len(), 1329 * 4);
        assert!(out.iter().all(|&b| b == 0));
        Ok(())
    }

    #[test]
    fn pad_must_be_zero_for_every_op() -> Result {
        let d = dev()?;
        for op in 0..45u32 {
            let (rc, out, _) = call(&d, None, Node::Compute, op, 64, 1)?;
            assert_eq!(rc, Err(EINVAL));
            assert!(out.is_empty());
        }
        Ok(())
    }

    #[test]
    fn zero_size_or_null_pointer_is_einval() -> Result {
        let d = dev()?;
        let all = Iterator::chain(ALWAYS_OPS.iter(), FIRMWARE_OPS.iter());
        for op in Iterator::chain(all, [HL_INFO_HW_IDLE, HL_INFO_TIME_SYNC].iter()) {
            let (rc, _, _) = call_at(&d, None, Node::Compute, *op, 0, 0, 0x1000)?;
            // The USER_MAPPINGS and error-event ops only check the pointer.
            let pointer_only = matches!(
                *op,
                HL_INFO_USER_MAPPINGS
                    | HL_INFO_HW_ERR_EVENT
                    | HL_INFO_FW_ERR_EVENT
                    | HL_INFO_USER_ENGINE_ERR_EVENT
            );
            assert_eq!(rc.is_ok(), pointer_only);
            let (rc, out, _) = call_at(&d, None, Node::Compute, *op, 64, 0, 0)?;
            assert_eq!(rc, Err(EINVAL));
            assert!(out.is_empty());
        }
        Ok(())
    }

    #[test]
    fn unknown_ops_are_einval_or_ebusy_in_reset() -> Result {
        let d = dev()?;
        for op in [5u32, 19, 20, 39, 41, 1000, u32::MAX] {
            let (rc, _, _) = call(&d, None, Node::Compute, op, 64, 0)?;
            assert_eq!(rc, Err(EINVAL));
        }
        d.set_status(DeviceStatus::InReset);
        for op in [
            5u32,
            39,
            u32::MAX,
            HL_INFO_HW_IDLE,
            HL_INFO_TIME_SYNC,
            HL_INFO_CLK_RATE,
        ] {
            let (rc, _, _) = call(&d, None, Node::Compute, op, 64, 0)?;
            assert_eq!(rc, Err(EBUSY));
        }
        // These are answered in any state.
        for op in ALWAYS_OPS {
            let (rc, _, _) = call(&d, None, Node::Compute, op, 64, 0)?;
            assert_eq!(rc, Ok(()));
        }
        Ok(())
    }

    #[test]
    fn device_status_follows_the_device() -> Result {
        let d = dev()?;
        for (st, v) in [
            (DeviceStatus::Operational, 0u32),
            (DeviceStatus::InReset, 1),
            (DeviceStatus::Malfunction, 2),
            (DeviceStatus::NeedsReset, 3),
            (DeviceStatus::InDeviceCreation, 4),
            (DeviceStatus::InResetAfterDeviceRelease, 5),
        ] {
            d.set_status(st);
            let (rc, out, _) = call(&d, None, Node::Control, HL_INFO_DEVICE_STATUS, 8, 0)?;
            assert_eq!(rc, Ok(()));
            assert!(out.get(0..4) == Some(&v.to_ne_bytes()[..]));
        }
        Ok(())
    }

    #[test]
    fn hw_idle_and_time_sync() -> Result {
        let d = dev()?;
        let (rc, out, _) = call(&d, None, Node::Compute, HL_INFO_HW_IDLE, 40, 0)?;
        assert_eq!(rc, Ok(()));
        assert!(out.get(0..4) == Some(&1u32.to_ne_bytes()[..]));
        let (rc, out, _) = call(&d, None, Node::Compute, HL_INFO_TIME_SYNC, 24, 0)?;
        assert_eq!(rc, Ok(()));
        assert!(out.get(8..16) == Some(&77u64.to_ne_bytes()[..]));
        Ok(())
    }

    #[test]
    fn cpucp_ops_answer_from_the_model_the_rest_are_not_supported() -> Result {
        let d = dev()?;
        for (i, op) in FIRMWARE_OPS.into_iter().enumerate() {
            let (rc, out, _) = call(&d, None, Node::Compute, op, 64, 0)?;
            if i < 8 {
                assert_eq!((op, rc), (op, Ok(())));
                assert!(!out.is_empty() && out.len() <= 24);
            } else {
                assert_eq!(rc, Err(EOPNOTSUPP));
                assert!(out.is_empty());
            }
        }
        // The MME PLL's clock of an HL-225, MHz; 16 % utilization.
        let (_, out, _) = call(&d, None, Node::Compute, HL_INFO_CLK_RATE, 8, 0)?;
        assert!(out.get(0..4) == Some(&1650u32.to_ne_bytes()[..]));
        assert!(out.get(4..8) == Some(&1650u32.to_ne_bytes()[..]));
        let (_, out, _) = call(&d, None, Node::Compute, HL_INFO_DEVICE_UTILIZATION, 8, 0)?;
        assert!(out.get(0..4) == Some(&16u32.to_ne_bytes()[..]));
        // A PLL index past Gaudi2's: the firmware refuses it, EIO.
        let args = HlInfoArgs {
            return_pointer: 0x1000,
            return_size: 8,
            op: HL_INFO_PLL_FREQUENCY,
            arg: HL_GAUDI2_PLL_MAX,
            pad: 0,
        };
        let (rc, out, _) = run(&d, None, Node::Compute, args, false)?;
        assert_eq!((rc, out.len()), (Err(EIO), 0));
        Ok(())
    }

    #[test]
    fn eventfd_and_notifier_ops() -> Result {
        let d = dev()?;
        for op in [
            HL_INFO_GET_EVENTS,
            HL_INFO_REGISTER_EVENTFD,
            HL_INFO_UNREGISTER_EVENTFD,
        ] {
            let (rc, _, _) = call(&d, None, Node::Control, op, 64, 0)?;
            assert_eq!(rc, Err(EOPNOTSUPP));
        }
        let (rc, _, _) = call(&d, None, Node::Compute, HL_INFO_GET_EVENTS, 4, 0)?;
        assert_eq!(rc, Err(EINVAL));
        let (rc, out, _) = call(&d, None, Node::Compute, HL_INFO_GET_EVENTS, 64, 0)?;
        assert_eq!(rc, Ok(()));
        assert_eq!(out.len(), 8);
        let (rc, _, _) = call(&d, None, Node::Compute, HL_INFO_UNREGISTER_EVENTFD, 0, 0)?;
        assert_eq!(rc, Err(EINVAL));
        // fd 0 is not open in the test's kernel thread.
        let (rc, _, _) = call(&d, None, Node::Compute, HL_INFO_REGISTER_EVENTFD, 0, 0)?;
        assert_eq!(rc, Err(EBADF));
        Ok(())
    }

    #[test]
    fn captured_error_ops_copy_nothing() -> Result {
        let d = dev()?;
        for op in [
            HL_INFO_RAZWI_EVENT,
            HL_INFO_PAGE_FAULT_EVENT,
            HL_INFO_USER_MAPPINGS,
            HL_INFO_HW_ERR_EVENT,
        ] {
            let (rc, out, args) = call(&d, None, Node::Compute, op, 64, 0)?;
            assert_eq!(rc, Ok(()));
            assert!(out.is_empty());
            assert_eq!(args.arg, 0);
        }
        Ok(())
    }

    #[test]
    fn sync_manager_checks_the_dcore() -> Result {
        let d = dev()?;
        let args = |arg| HlInfoArgs {
            return_pointer: 0x1000,
            return_size: 16,
            op: HL_INFO_SYNC_MANAGER,
            arg,
            pad: 0,
        };
        let (rc, _, _) = run(&d, None, Node::Compute, args(8), false)?;
        assert_eq!(rc, Err(EINVAL));
        let (rc, out, _) = run(&d, None, Node::Compute, args(7), false)?;
        assert_eq!(rc, Ok(()));
        assert_eq!(out.len(), 16);
        assert!(out.iter().all(|&b| b == 0));
        let (rc, out, _) = run(&d, None, Node::Compute, args(0), false)?;
        assert_eq!(rc, Ok(()));
        let word = |i: usize| {
            out.get(i * 4..i * 4 + 4)
                .and_then(|w| <[u8; 4]>::try_from(w).ok())
                .map(u32::from_ne_bytes)
        };
        assert_eq!((word(0), word(1), word(2)), (Some(413), Some(289), Some(2)));
        Ok(())
    }

    #[test]
    fn dram_usage_and_open_stats_follow_the_context() -> Result {
        let d = dev()?;
        let (rc, out, _) = call(&d, None, Node::Control, HL_INFO_DRAM_USAGE, 16, 0)?;
        assert_eq!(rc, Ok(()));
        assert!(out.get(0..8) == Some(&0x17_D000_0000u64.to_ne_bytes()[..]));
        assert!(out.get(8..16) == Some(&0u64.to_ne_bytes()[..]));
        let ctx = Context::new(d.clone(), 1234)?;
        let (rc, out, _) = call(&d, Some(&ctx), Node::Compute, HL_INFO_OPEN_STATS, 24, 0)?;
        assert_eq!(rc, Ok(()));
        assert!(out.get(0..8) == Some(&1u64.to_ne_bytes()[..]));
        assert_eq!(out.get(16).copied(), Some(1));
        let (_, out, _) = call(
            &d,
            Some(&ctx),
            Node::Compute,
            HL_INFO_LAST_ERR_OPEN_DEV_TIME,
            8,
            0,
        )?;
        assert!(out.get(0..8) == Some(&1234i64.to_ne_bytes()[..]));
        drop(ctx);
        let (_, out, _) = call(&d, None, Node::Control, HL_INFO_OPEN_STATS, 24, 0)?;
        assert_eq!(out.get(16).copied(), Some(0));
        Ok(())
    }

    #[test]
    fn a_faulting_user_buffer_is_efault() -> Result {
        let d = dev()?;
        let args = HlInfoArgs {
            return_pointer: 0x1000,
            return_size: 304,
            op: 0,
            arg: 0,
            pad: 0,
        };
        let (rc, _, _) = run(&d, None, Node::Compute, args, true)?;
        assert_eq!(rc, Err(EFAULT));
        Ok(())
    }

    /// A sink that records whether the device's locks were free when the
    /// answer reached the user buffer.
    struct Probe<'a> {
        dev: &'a HlDevice,
        locked: bool,
        written: usize,
    }

    impl InfoSink for Probe<'_> {
        fn write(&mut self, data: &[u8]) -> Result {
            let state_free = self.dev.state.try_lock().is_some();
            self.locked |= !state_free || !self.dev.cs.captured_is_free();
            self.written += data.len();
            Ok(())
        }
    }

    /// Capture one of each error on `d` (a page fault of `ctx` with its
    /// user mappings, a RAZWI, an engine error, an undefined opcode, a CS
    /// timeout).
    fn capture_everything(d: &HlDevice, ctx: &Context) {
        let page = EngineFault::Page {
            mmu: MmuKind::Dram,
            asid: ctx.asid(),
            va: 0x1001_0018_0765_4321,
            engine: 12,
        };
        let razwi = EngineFault::Razwi {
            addr: 0x1000,
            engine: 45,
            access: Access::Write,
        };
        let iommu = EngineFault::Iommu {
            bus: 0x1000,
            asid: ctx.asid(),
            va: 0xFFF0_0000_0000_0000,
            engine: 12,
        };
        for f in [page, razwi, iommu] {
            d.cs.record_fault(&f, ctx.vm());
        }
        d.cs.record_bad_packet(0x2000, 45, &PacketError::Unsupported { opcode: 9 });
        d.cs.record_timeout(7);
    }

    #[test]
    fn no_info_op_copies_to_the_user_with_a_lock_held() -> Result {
        let d = dev()?;
        let ctx = Context::new(d.clone(), 1)?;
        // A DRAM mapping, so that USER_MAPPINGS (of an HMMU fault) has
        // something to copy.
        let h = alloc_device_memory(ctx.vm(), d.asic.dram_page_size, 0)?;
        map_device_va(ctx.vm(), u64::from(h), 0, 0)?;
        capture_everything(&d, &ctx);
        let ops = Iterator::chain(
            ALWAYS_OPS.iter(),
            [HL_INFO_GET_EVENTS, HL_INFO_HW_IDLE].iter(),
        );
        for &op in ops {
            let mut args = HlInfoArgs {
                return_pointer: 0x1000,
                return_size: 8192,
                op,
                arg: 0,
                pad: 0,
            };
            let mut probe = Probe {
                dev: &d,
                locked: false,
                written: 0,
            };
            let c = InfoCaller {
                dev: &d,
                ctx: Some(&ctx),
                node: Node::Compute,
                now_ns: (1, 77),
            };
            let rc = info_ioctl(&c, &mut args, &mut probe);
            // (The op is in the pair, so that a failure names it.)
            assert_eq!((op, rc, probe.locked), (op, Ok(()), false));
            if op == HL_INFO_USER_MAPPINGS {
                assert_eq!((args.arg, probe.written), (1, 16));
            }
        }
        Ok(())
    }

    /// INFO `HL_INFO_USER_ENGINE_ERR_EVENT` on the control node with a
    /// buffer of `size` bytes.
    fn engine_err(d: &HlDevice, size: u32) -> Result<Outcome> {
        call(
            d,
            None,
            Node::Control,
            HL_INFO_USER_ENGINE_ERR_EVENT,
            size,
            0,
        )
    }

    #[test]
    fn engine_errors_are_captured_once_and_reported() -> Result {
        let d = dev()?;
        let ctx = Context::new(d.clone(), 1)?;
        let (rc, out, _) = engine_err(&d, 16)?;
        assert_eq!((rc, out.len()), (Ok(()), 0));
        // A LIN_DMA whose size does not fit its swap: an engine error, no
        // undefined opcode.
        d.cs.record_bad_packet(0x2000, 12, &PacketError::SwapSize { tsize: 6 });
        let backing = EngineFault::Backing {
            addr: 0x1000,
            engine: 45,
        };
        d.cs.record_fault(&backing, ctx.vm());
        let (rc, out, _) = engine_err(&d, 16)?;
        assert_eq!((rc, out.len()), (Ok(()), 16));
        // The first one: engine 12, one error.
        assert!(out.get(8..12) == Some(&[12, 0, 1, 0][..]));
        let (rc, _, _) = engine_err(&d, 15)?;
        assert_eq!(rc, Err(ENOMEM));
        assert!(d
            .cs
            .with_captured(|c| c.undefined_opcode.is_none() && c.page_fault.is_none()));
        let events = d.cs.with_captured(|c| c.events);
        assert_eq!(events, HL_NOTIFIER_EVENT_USER_ENGINE_ERR);
        // A new open forgets it.
        d.cs.enable_capture();
        let (rc, out, _) = engine_err(&d, 16)?;
        assert_eq!((rc, out.len()), (Ok(()), 0));
        Ok(())
    }

    fn dev() -> Result<Arc<HlDevice>> {
        HlDevice::new(0, AsicProperties::gaudi2(6, 0)?)
    }

    type Outcome = (Result, KVec<u8>, HlInfoArgs);

    fn call(
        d: &HlDevice,
        ctx: Option<&Context>,
        node: Node,
        op: u32,
        size: u32,
        pad: u32,
    ) -> Result<Outcome> {
        call_at(d, ctx, node, op, size, pad, 0x1000)
    }

    fn call_at(
        d: &HlDevice,
        ctx: Option<&Context>,
        node: Node,
        op: u32,
        size: u32,
        pad: u32,
        ptr: u64,
    ) -> Result<Outcome> {
        let args = HlInfoArgs {
            return_pointer: ptr,
            return_size: size,
            op,
            arg: 0,
            pad,
        };
        run(d, ctx, node, args, false)
    }

    /// Run one INFO call into a recorder (that faults if `fault`).
    fn run(
        d: &HlDevice,
        ctx: Option<&Context>,
        node: Node,
        mut args: HlInfoArgs,
        fault: bool,
    ) -> Result<Outcome> {
        let mut rec = Recorder {
            written: KVec::new(),
            fault,
        };
        let c = InfoCaller {
            dev: d,
            ctx,
            node,
            now_ns: (1, 77),
        };
        let rc = info_ioctl(&c, &mut args, &mut rec);
        Ok((rc, rec.written, args))
    }
}
