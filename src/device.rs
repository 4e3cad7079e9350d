// SPDX-License-Identifier: GPL-2.0

//! One Gaudi device (upstream `struct hl_device`, the memory-relevant part).
//!
//! Lock order: the table at the crate root (`hlrs.rs`). FREE drops its page
//! pack after unlocking the handle table; context teardown and the
//! recycled-ASID check drop packs (and so take the pool lock) with the table
//! locked.

#[cfg(CONFIG_PCI)]
use crate::hw::pci::PciGaudi2;
use crate::{
    asic::{AsicProperties, MAX_ASID},
    cs::{device_cs::DeviceCs, tracker::ContextCs, user_interrupt::UserInterrupts},
    hw::{
        backend::{Backend, DeviceStatus},
        cpucp::{identity, CpuCp, FwIdentity, SimCpuCp},
        engines::Engines,
        sim::{qman::queues::SimEngines, SimGaudi2},
    },
    mmu::device_mmu::DeviceMmu,
    vm::{context_vm::ContextVm, device_vm::DeviceVm},
};
use kernel::{
    new_mutex,
    prelude::*,
    str::CString,
    sync::{
        atomic::{Atomic, Relaxed},
        Arc, Mutex,
    },
    time::{Instant, Monotonic}, //
};

/// `HL_KERNEL_ASID_ID`: ASID 0 belongs to the driver (common/habanalabs.h:1785).
pub(crate) const KERNEL_ASID: u32 = 0;

/// The sysfs attributes of the device nodes (upstream common/sysfs.c).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SysfsAttr {
    /// `pci_addr`: the bus id, as libhlthunk reads it.
    PciAddr,
    /// `device_type`: the ASIC name.
    DeviceType,
    /// `status`: the device state.
    Status,
    /// `soft_reset_cnt`.
    SoftResetCnt,
    /// `hard_reset_cnt`.
    HardResetCnt,
    /// `module_id`: the card location (the device index on the simulation).
    ModuleId,
    /// `security_enabled`.
    SecurityEnabled,
    /// `parent_device`: name of the PCI device (the bus id).
    ParentDevice,
}

/// The PCI-style bus id of a device, `DDDD:BB:DD.F` (12 bytes, no NUL).
pub(crate) type BusId = [u8; 12];

/// Bookkeeping of who uses the device, under [`HlDevice::state`].
pub(crate) struct DeviceState {
    /// A compute context exists (`is_compute_ctx_active`).
    pub(crate) compute_ctx_active: bool,
    /// The compute context is being torn down, or its teardown waits for an
    /// MMU invalidation (`compute_ctx_in_release`): opens answer `EAGAIN`.
    pub(crate) in_release: bool,
    /// The VM of a torn-down context whose teardown invalidation failed: it
    /// still holds what the MMU may reach (pins, DRAM pages, hops) and its
    /// ASID, until [`HlDevice::open_compute`] invalidates successfully.
    parked: Option<Arc<ContextVm>>,
    /// Bit `n` set: ASID `n` is in use. ASID 0 is always the kernel's.
    asids: u64,
    /// A DRAM scrub runs (`is_in_dram_scrub`): opens answer `EAGAIN`.
    in_dram_scrub: bool,
    /// Successful compute opens since load (`open_counter`).
    pub(crate) open_counter: u64,
    /// ktime (ns) of the last successful compute open (`last_successful_open_ktime`).
    pub(crate) last_open_ktime_ns: i64,
    /// When the current compute session started.
    session_start: Option<Instant<Monotonic>>,
    /// Length of the last finished compute session in ms (`last_open_session_duration_jif`).
    pub(crate) last_session_ms: u64,
    /// The VA ranges of the active compute context (debugfs). Not the context
    /// itself: the context holds the device, and this must not make a cycle.
    pub(crate) active_vm: Option<Arc<ContextVm>>,
    /// The CSs of the active compute context (debugfs), as `active_vm`.
    pub(crate) active_cs: Option<Arc<ContextCs>>,
    /// Debug mode (upstream `in_debug`, DEBUG `SET_MODE`): left when the
    /// compute context goes (common/context.c:111).
    pub(crate) in_debug: bool,
}

/// The hardware behind a device.
pub(crate) enum Hardware {
    /// The simulated Gaudi2 in the module.
    Simulated(Arc<SimGaudi2>),
    /// A Gaudi2 on the PCI bus.
    #[cfg(CONFIG_PCI)]
    Pci(Arc<PciGaudi2>),
}

/// One Gaudi2, simulated or on the PCI bus: identity, open bookkeeping, and
/// the device-wide owners of the floors below (hardware, MMUs, memory).
///
/// # Invariants
///
/// `index` is unique among the devices of this module load; `asic` never
/// changes; `mmu` and `vm.mmu` are the same owner, on `hw`, which is the
/// hardware of `hardware`.
#[pin_data(PinnedDrop)]
pub(crate) struct HlDevice {
    /// Index of the device within this module (0-based): the simulated
    /// devices first, then the PCI ones in probe order; a simulated
    /// device's fake PCI bus.
    pub(crate) index: u32,
    /// The ASIC model.
    pub(crate) asic: AsicProperties,
    /// The hardware.
    pub(crate) hardware: Hardware,
    /// The same hardware, as the layers below use it.
    hw: Arc<dyn Backend>,
    /// The device CPU's firmware (CPU-CP), as the INFO ops ask it.
    pub(crate) cpucp: Arc<dyn CpuCp>,
    /// What the firmware said of itself at creation (HW_IP_INFO's
    /// `cpucp_version` and `card_name`).
    pub(crate) fw_identity: FwIdentity,
    /// A PCI device's bus id (`None`: simulated, a fake one from the index).
    pci_bus: Option<BusId>,
    /// The MMUs: hop pools, scrambler.
    pub(crate) mmu: Arc<DeviceMmu>,
    /// The memory: DRAM pool, handles, usage counters.
    pub(crate) vm: Arc<DeviceVm>,
    /// Command submission: engines, CS counters, captured errors.
    pub(crate) cs: Arc<DeviceCs>,
    /// Open/ASID bookkeeping.
    #[pin]
    pub(crate) state: Mutex<DeviceState>,
    /// The pattern device memory is scrubbed with (upstream
    /// `hdev->memory_scrub_val`, debugfs `memory_scrub_val`).
    pub(crate) memory_scrub_val: Atomic<u64>,
}

/// Upstream's initial `memory_scrub_val` (common/device.c `MEM_SCRUB_DEFAULT_VAL`).
pub(crate) const MEM_SCRUB_DEFAULT_VAL: u64 = 0x1122_3344_5566_7788;

impl HlDevice {
    /// A new, operational simulated device.
    pub(crate) fn new(index: u32, asic: AsicProperties) -> Result<Arc<Self>> {
        let (sim, mmu, vm) = DeviceVm::simulated(&asic)?;
        let hw: Arc<dyn Backend> = sim.clone();
        let engines: Arc<dyn Engines> = SimEngines::new(&sim)?;
        // The sync manager's CQ interrupts (MSI-X 48..111) reach the
        // user interrupts as the PCI device's vectors do.
        let interrupts = UserInterrupts::new()?;
        sim.sync.connect(interrupts.clone());
        let cs = DeviceCs::new(hw.clone(), Some(engines), Some(interrupts))?;
        let fw: Arc<dyn CpuCp> = Arc::new(SimCpuCp::new(asic.dram_size), GFP_KERNEL)?;
        Self::assemble(
            index,
            asic,
            (Hardware::Simulated(sim), hw, fw, None),
            mmu,
            vm,
            cs,
        )
    }

    /// The device of the PCI Gaudi2 `pci` with `asic`'s geometry at bus id
    /// `bus`: its MMU owner commits every ASID's hop 0 to the hardware, its
    /// command submission has no engines (`EOPNOTSUPP`).
    #[cfg(CONFIG_PCI)]
    pub(crate) fn new_pci(
        index: u32,
        asic: AsicProperties,
        pci: Arc<PciGaudi2>,
        (engines, interrupts): (Arc<dyn Engines>, Arc<UserInterrupts>),
        bus: BusId,
    ) -> Result<Arc<Self>> {
        let hw: Arc<dyn Backend> = pci.clone();
        let (mmu, vm) = DeviceVm::on(&asic, hw.clone())?;
        let cs = DeviceCs::new(hw.clone(), Some(engines), Some(interrupts))?;
        let fw: Arc<dyn CpuCp> = pci.clone();
        Self::assemble(
            index,
            asic,
            (Hardware::Pci(pci), hw, fw, Some(bus)),
            mmu,
            vm,
            cs,
        )
    }

    fn assemble(
        index: u32,
        asic: AsicProperties,
        (hardware, hw, cpucp, pci_bus): (Hardware, Arc<dyn Backend>, Arc<dyn CpuCp>, Option<BusId>),
        mmu: Arc<DeviceMmu>,
        vm: Arc<DeviceVm>,
        cs: Arc<DeviceCs>,
    ) -> Result<Arc<Self>> {
        // `hl_fw_cpucp_info_get` at late init; a device whose firmware does
        // not answer stays usable, with upstream's default card name.
        let fw_identity = identity(&*cpucp).unwrap_or_else(|e| {
            pr_warn!("device {index}: no CPU-CP info ({e:?}); card name HL225\n");
            FwIdentity::unknown()
        });
        Arc::pin_init(
            pin_init!(Self {
                hardware,
                hw,
                cpucp,
                fw_identity,
                pci_bus,
                mmu,
                vm,
                cs,
                index,
                asic,
                state <- new_mutex!(DeviceState {
                    compute_ctx_active: false,
                    in_release: false,
                    parked: None,
                    asids: 1 << KERNEL_ASID,
                    in_dram_scrub: false,
                    open_counter: 0,
                    last_open_ktime_ns: 0,
                    session_start: None,
                    last_session_ms: 0,
                    active_vm: None,
                    active_cs: None,
                    in_debug: false,
                }),
                memory_scrub_val: Atomic::new(MEM_SCRUB_DEFAULT_VAL),
            }),
            GFP_KERNEL,
        )
    }

    /// The hardware behind this device.
    pub(crate) fn backend(&self) -> &dyn Backend {
        &*self.hw
    }

    /// The simulated Gaudi2 of a simulated device; `None` on a PCI one.
    pub(crate) fn simulated(&self) -> Option<&Arc<SimGaudi2>> {
        match &self.hardware {
            Hardware::Simulated(s) => Some(s),
            #[cfg(CONFIG_PCI)]
            Hardware::Pci(_) => None,
        }
    }

    /// [`Self::simulated`], `ENODEV` on a PCI device (tests, debugfs
    /// switches of the simulation).
    pub(crate) fn sim(&self) -> Result<&Arc<SimGaudi2>> {
        self.simulated().ok_or(ENODEV)
    }

    /// PTE writes the hardware received since the device was created
    /// (debugfs `mmu`). O(1).
    pub(crate) fn pte_writes(&self) -> u64 {
        match &self.hardware {
            Hardware::Simulated(s) => s.pte_writes(),
            #[cfg(CONFIG_PCI)]
            Hardware::Pci(p) => p
                .mmio
                .counters
                .pte_writes
                .load(kernel::sync::atomic::Relaxed),
        }
    }

    /// The PCI Gaudi2 of a PCI device; `None` on a simulated one.
    #[cfg(CONFIG_PCI)]
    pub(crate) fn pci(&self) -> Option<&Arc<PciGaudi2>> {
        match &self.hardware {
            Hardware::Pci(p) => Some(p),
            Hardware::Simulated(_) => None,
        }
    }

    /// The device state (`hl_device_status`).
    pub(crate) fn status(&self) -> DeviceStatus {
        self.cs.status()
    }

    /// Set the device state the driver keeps (debugfs, tests). O(1).
    pub(crate) fn set_status(&self, status: DeviceStatus) {
        self.cs.set_status(status);
    }

    /// The bus id: a PCI device's own, or the stable fake one of a
    /// simulated device: `0000:BB:00.0` with bus `BB = index + 1` (hex).
    pub(crate) fn bus_id(&self) -> BusId {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        if let Some(bus) = self.pci_bus {
            return bus;
        }
        let bus = ((self.index + 1) & 0xff) as usize;
        let mut id = *b"0000:00:00.0";
        for (pos, digit) in [(5, bus >> 4), (6, bus & 0xf)] {
            if let (Some(slot), Some(&c)) = (id.get_mut(pos), HEX.get(digit)) {
                *slot = c;
            }
        }
        id
    }

    /// The text of a sysfs attribute (newline-terminated, as upstream).
    pub(crate) fn sysfs_value(&self, attr: SysfsAttr) -> Result<CString> {
        let bus = self.bus_id();
        let bus = core::str::from_utf8(&bus).map_err(|_| EINVAL)?;
        match attr {
            SysfsAttr::PciAddr | SysfsAttr::ParentDevice => {
                CString::try_from_fmt(fmt!("{}\n", bus))
            }
            SysfsAttr::DeviceType => CString::try_from_fmt(fmt!("GAUDI2\n")),
            SysfsAttr::Status => CString::try_from_fmt(fmt!("{}\n", self.status().name())),
            SysfsAttr::SoftResetCnt | SysfsAttr::HardResetCnt | SysfsAttr::SecurityEnabled => {
                CString::try_from_fmt(fmt!("0\n"))
            }
            SysfsAttr::ModuleId => CString::try_from_fmt(fmt!("{}\n", self.index)),
        }
    }

    /// Mark a compute context as open and give it a user ASID, or fail as
    /// upstream's `hl_device_open` does (common/habanalabs_drv.c:200-236):
    /// `EAGAIN` while in reset or while the previous context is being torn
    /// down, `EPERM` when not operational, `EBUSY` when another compute
    /// context is active. A teardown parked on a failed invalidation is
    /// finished first (one invalidation per MMU; `EAGAIN` while it still
    /// fails). O(1) otherwise.
    pub(crate) fn open_compute(&self, now_ns: i64) -> Result<u32> {
        let status = self.status();
        if !status.is_operational() {
            return Err(match status {
                DeviceStatus::InReset | DeviceStatus::InResetAfterDeviceRelease => EAGAIN,
                _ => EPERM,
            });
        }
        let mut st = self.state.lock();
        if let Some(vm) = st.parked.take() {
            if !vm.settle_quarantine(true) {
                st.parked = Some(vm);
                return Err(EAGAIN);
            }
            vm.clear();
            Self::end_session(&mut st, vm.asid);
            pr_info!(
                "device {}: the teardown of ASID {} finished after a failed invalidation\n",
                self.index,
                vm.asid
            );
        }
        if st.in_release || st.in_dram_scrub {
            return Err(EAGAIN);
        }
        if st.compute_ctx_active {
            return Err(EBUSY);
        }
        // The lowest free ASID below MAX_ASID.
        let asid = (!st.asids).trailing_zeros();
        if asid >= MAX_ASID {
            return Err(EBUSY);
        }
        self.purge_leftovers(asid);
        st.asids |= 1 << asid;
        st.compute_ctx_active = true;
        st.open_counter += 1;
        st.last_open_ktime_ns = now_ns;
        st.session_start = Some(Instant::now());
        // The captured errors are cleared by the caller (`Context::new`),
        // with this lock released.
        Ok(asid)
    }

    /// A recycled ASID starts with nothing: any handle still owned by `asid`
    /// (which context teardown makes impossible, see `free_all_of`) is freed
    /// and reported before a new context can pass the owner checks with it.
    /// O(1) when there is nothing to purge.
    fn purge_leftovers(&self, asid: u32) {
        let n = self.vm.purge_owned_by(asid);
        if n == 0 {
            return;
        }
        hl_err!(
            "device {}: ASID {} recycled with {} handle(s) of a previous context; freed\n",
            self.index,
            asid,
            n
        );
    }

    /// `hl_memory_scrub` (common/debugfs.c:798-829): write `val` over the
    /// whole user DRAM. `EIO` when the device is not operational, `EBUSY`
    /// while a compute context exists (also, unlike upstream, while one is
    /// being torn down or waits for an invalidation: its pages may still be
    /// reachable); opens answer `EAGAIN` meanwhile. O(backed DRAM chunks).
    pub(crate) fn scrub_dram(&self, val: u64) -> Result {
        if !self.status().is_operational() {
            return Err(EIO);
        }
        {
            let mut st = self.state.lock();
            if st.compute_ctx_active || st.in_release || st.parked.is_some() || st.in_dram_scrub {
                return Err(EBUSY);
            }
            st.in_dram_scrub = true;
        }
        let r = self.backend().scrub_dram(self.asic.dram_user_base, val);
        self.state.lock().in_dram_scrub = false;
        r
    }

    /// The compute context is being released (`hl_device_release`): with
    /// the `memory_scrub` parameter set, scrub SRAM and the user DRAM with
    /// `memory_scrub_val` as upstream's `gaudi2_scrub_device_mem` does (its
    /// pages read as the pattern from then on). Without it nothing is needed:
    /// every page pack's contents went when it returned to the pool. O(backed
    /// chunks).
    pub(crate) fn scrub_at_release(&self) {
        if !crate::module_parameters::memory_scrub.value() {
            return;
        }
        let val = self.memory_scrub_val.load(Relaxed);
        self.backend().scrub_sram(val);
        if let Err(e) = self.backend().scrub_dram(self.asic.dram_user_base, val) {
            hl_err!(
                "device {}: scrubbing DRAM at release failed ({:?})\n",
                self.index,
                e
            );
        }
    }

    /// Publish the VA/MMU state and the CSs of the active compute context
    /// (debugfs).
    pub(crate) fn set_active_vm(&self, vm: Option<Arc<ContextVm>>, cs: Option<Arc<ContextCs>>) {
        let mut st = self.state.lock();
        st.active_vm = vm;
        st.active_cs = cs;
    }

    /// The compute context's teardown started: opens answer `EAGAIN` and
    /// OPEN_STATS reports `compute_ctx_in_release` until it ends. O(1).
    pub(crate) fn begin_release(&self) {
        self.state.lock().in_release = true;
    }

    /// Undo [`Self::open_compute`] when the context goes away. O(1).
    pub(crate) fn close_compute(&self, asid: u32) {
        Self::end_session(&mut self.state.lock(), asid);
    }

    /// End a teardown whose invalidation failed with `vm` (and its ASID)
    /// still held: the next open retries the invalidation. O(1), no allocation.
    pub(crate) fn park_release(&self, asid: u32, vm: Arc<ContextVm>) {
        let mut st = self.state.lock();
        if asid != vm.asid {
            pr_err!(
                "device {}: parking ASID {} with the VM of {}\n",
                self.index,
                asid,
                vm.asid
            );
        }
        st.parked = Some(vm);
        st.compute_ctx_active = false;
        st.in_debug = false;
        if let Some(start) = st.session_start.take() {
            st.last_session_ms = u64::try_from(start.elapsed().as_millis()).unwrap_or(0);
        }
    }

    /// Whether a teardown waits for an invalidation (tests, debugfs).
    pub(crate) fn release_parked(&self) -> bool {
        self.state.lock().parked.is_some()
    }

    fn end_session(st: &mut DeviceState, asid: u32) {
        if asid != KERNEL_ASID && asid < MAX_ASID {
            st.asids &= !(1 << asid);
        }
        st.compute_ctx_active = false;
        st.in_release = false;
        st.in_debug = false;
        st.active_vm = None;
        st.active_cs = None;
        if let Some(start) = st.session_start.take() {
            st.last_session_ms = u64::try_from(start.elapsed().as_millis()).unwrap_or(0);
        }
    }
}

#[pinned_drop]
impl PinnedDrop for HlDevice {
    /// `hl_vm_fini`: every DRAM page must be back in the pool when the device
    /// goes away (upstream warns "pool not destroyed", common/memory.c:2898).
    fn drop(self: Pin<&mut Self>) {
        // A teardown still waiting for an invalidation: one last try; if it
        // fails too, what the MMU may reach stays allocated for good (its
        // `Held` values leak it), which a device that cannot invalidate is
        // owed.
        let parked = self.state.lock().parked.take();
        if let Some(vm) = parked {
            if vm.settle_quarantine(true) {
                vm.clear();
            } else {
                pr_err!(
                    "device {}: removed with ASID {}'s memory unreleasable (MMU invalidation fails)\n",
                    self.index,
                    vm.asid
                );
            }
        }
        // Contexts free their handles at teardown, so any left here (a kernel
        // ASID allocation, or a bug) are reported and released now.
        let left = self.vm.handles.lock().remove_owned_by(|_| true, |_, _| {});
        if left > 0 {
            pr_warn!(
                "device {}: {} handle(s) still allocated at removal\n",
                self.index,
                left
            );
        }
        let pool = self.vm.pool.lock();
        if pool.free_pages() != pool.pages() {
            pr_warn!(
                "device {}: {} DRAM page(s) not back in the pool at removal\n",
                self.index,
                pool.pages() - pool.free_pages()
            );
        }
    }
}

#[kunit_tests(hlrs_device)]
mod tests {
    use super::*;
    use kernel::sync::Arc;

    fn dev(index: u32) -> Result<Arc<HlDevice>> {
        HlDevice::new(index, AsicProperties::gaudi2(6, 0)?)
    }

    #[test]
    fn bus_ids_are_stable_and_formatted() -> Result {
        assert_eq!(&dev(0)?.bus_id(), b"0000:01:00.0");
        assert_eq!(&dev(3)?.bus_id(), b"0000:04:00.0");
        assert_eq!(&dev(0x1e)?.bus_id(), b"0000:1f:00.0");
        Ok(())
    }

    #[test]
    fn one_compute_context_at_a_time() -> Result {
        let d = dev(0)?;
        let asid = d.open_compute(5)?;
        assert_eq!(asid, 1);
        assert_eq!(d.open_compute(6), Err(EBUSY));
        d.close_compute(asid);
        assert_eq!(d.open_compute(7)?, 1);
        let st = d.state.lock();
        assert_eq!(st.open_counter, 2);
        assert_eq!(st.last_open_ktime_ns, 7);
        Ok(())
    }

    #[test]
    fn open_fails_when_not_operational() -> Result {
        let d = dev(0)?;
        d.set_status(DeviceStatus::InReset);
        assert_eq!(d.open_compute(1), Err(EAGAIN));
        d.set_status(DeviceStatus::Malfunction);
        assert_eq!(d.open_compute(1), Err(EPERM));
        d.set_status(DeviceStatus::InDeviceCreation);
        let asid = d.open_compute(1)?;
        d.close_compute(asid);
        Ok(())
    }
}
