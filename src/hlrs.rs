// SPDX-License-Identifier: GPL-2.0

//! habanalabs_rs: the Habana Gaudi device-memory subsystem in Rust.
//!
//! Without Gaudi hardware the module creates simulated Gaudi2 devices, each
//! behind a compute-accel node `/dev/accel/accelN` and its control node
//! `/dev/accel/accel_controlDN`, speaking the upstream uAPI of
//! `include/uapi/drm/habanalabs_accel.h`. With the module parameter `pci`
//! set it also drives Gaudi2 functions on the PCI bus (1da3:1020, through
//! [`hw::pci::PciGaudi2`], registered by [`shell::pci`]) that no other
//! driver owns, each one more such pair of nodes.
//!
//! # Floors
//!
//! Each file imports only files of its own floor or of floors below it, and
//! no import cycle exists (`scripts/imports.py --check`, run by `make test`):
//!
//! | floor | files | what |
//! |---|---|---|
//! | 8 | `hlrs.rs`, `shell/` | C-ABI entry points: accel registration, fops, ioctl, mmap and dma-buf callbacks, debugfs, sysfs, module init |
//! | 7 | `ioctl/` | typed ioctl handlers |
//! | 6 | `context.rs`, `device.rs`, `file.rs` | aggregates: one open, one device |
//! | 5 | `vm/`, `cs/` | device-wide [`vm::device_vm::DeviceVm`]; per context [`vm::context_vm::ContextVm`] and the operations on it; command submission: [`cs::device_cs::DeviceCs`], per context [`cs::tracker::ContextCs`], CS and WAIT_CS |
//! | 4 | `mmu/` | device-wide [`mmu::device_mmu::DeviceMmu`]; page tables, hop pools, invalidation proofs |
//! | 3 | `hw/` | the sealed [`hw::backend::Backend`] trait, the engine boundary ([`hw::engines`]: submit, halt, busy mask, events) and the simulated Gaudi2, its MMUs' engine side and its engines (QMANs, command processor); the PCI Gaudi2 (`hw/pci`: BARs, registers, DMA API) |
//! | 2 | `ffi/` | safe wrappers of kernel C APIs the `kernel` crate lacks (leaves) |
//! | 1 | `uapi.rs`, `asic/`, `params.rs` | uAPI structs, Gaudi2 constants, module parameters |
//! | 0 | `model.rs`, `model/` | the Gaudi2 model core: kernel-free (`core` only), imports nothing of the driver; also compiled into the userspace server `src/user/gaudi2-model` |
//!
//! `bench/` (KUnit builds only) stands above them all.
//!
//! # Lock order
//!
//! Every lock of the module, outermost first. A lock is only taken while
//! holding locks above it in this table; "alone" means nothing else of ours
//! is held while it is.
//!
//! | # | lock | guards | notes |
//! |---|---|---|---|
//! | 1 | `HlDevice::state` | open/ASID bookkeeping, the parked VM | held by `open_compute` across the retry of a parked teardown (which takes 6-16) and the ASID purge (15, 16); an open clears the captured errors (18) after releasing it |
//! | 2 | `ContextCs::restore` | a context's restore phase (upstream `restore_phase_mutex`) | held across the submission of a restore CS, the copy of its chunk array from the user included (takes 2a-5, 17, 18a) |
//! | 2 | `ContextCs::sync` | a context's sync streams (SIGNAL and WAIT CSs, `cs/sync_stream.rs`) | held across one sync-stream CS after its user copies: the lookup of a WAIT's signal (takes 3 and 17 briefly), the creation and mapping of the context's sync CB page at its first one (takes 7-14), its watchdog (2a) and its submission (3); never together with `ContextCs::restore` |
//! | 2a | `ContextCs::watch` | a context's watchdog thread (the TDR timer) | held by a submission while it creates the watchdog (then released before 3a and 3); by the close after its drain, to stop it (the watchdog takes 3 alone) |
//! | 3 | `ContextCs::track` | a context's sequence numbers, window of 64 fences, CSs in flight, outcome store, the watchdog's next deadline | held across a submission, jobs queued included (takes 3a, 4, 5, 18a (the device's state), 17 (a new CS polls the fence of its window slot, a refused CS signals its own); allocates); taken alone when a CS ends (an engine reports with none of its locks held), by WAIT_CS, by an abort (to mark its CSs; the halt after it takes no lock), by the watchdog (released before it times a CS out) and by the close's drain |
//! | 3a | `SimQueues::workers` | a context's engine threads (simulated engines) | taken alone by a submission's creation of missing threads (before 3) and by the close's quiesce (after its drain, to stop them); inside 3 to queue a batch (takes 4, 5) |
//! | 4 | `Qman::submit` | a batch of jobs' room check and queueing | takes only 5 |
//! | 5 | `Engine::fifo` (a worker's `Feed`) | a context's queued jobs for one stream | leaf |
//! | 6 | `ContextVm::exports` | a context's export records | alone (taken and released around 8 in EXPORT and the dma-buf release) |
//! | 7 | `ContextVm::hw_blocks`, `ContextVm::ts_buffers`, `ContextVm::cbs` | a context's HW-block records, TS buffers, command buffers | alone; taken under the mm's `mmap_lock` (`mmap`, vma close) |
//! | 8 | `ContextVm::mappings` | mappings by VA, userptr index, quarantine (upstream `mem_hash_lock` + `userptr_lock`) | never together with 10; released before a mapping is released (9, 14); taken alone by a page-fault report (its copy of the user mappings) |
//! | 9 | a VA range's mutex (`VaRanges::{host, host_huge, dram}`) | one VA allocator | alone: only inside the allocator's calls, never across an allocation |
//! | 10 | `ContextVm::mmu` | the context's two page tables (upstream: one device-wide `mmu_lock`) | held across the mapping of one pack |
//! | 11 | `DeviceMmu::dr_hops`, `DeviceMmu::hr_hops` | the hop pools | inside 10 |
//! | 12 | `WorkerBody::scratch`, `LowerBody::scratch` | a stream's (a lower CP's) CB window and DMA bounce buffer | taken only by the stream's (lower CP's) own thread, held across one job's (handed CB's) execution (takes 12a-14, and 12c to hand a CB), with none of 1-11 held; released before the job is reported (a halt is seen through atomics, no lock) |
//! | 12a | `SimSync::sm` | the simulated device's sync manager | taken by an engine's write to it and while its monitors fire (takes 12b, and 13-14 for a message into memory); by a context's open (its reset) and a halt, alone |
//! | 12b | `SimSync::cps` | the simulated QMANs' CP registers (message bases, fence counters, predicates, scalars) | leaf; a `FENCE` sleeps on it (`SimSync::fenced`); `SimSync::msix` is a leaf taken alone, and user interrupts are raised with none of 12a-12b held |
//! | 12c | `LowerBody::feed`, then `Handoff::state` | a lower CP's queue of handed CBs; what a stream's running job handed | a hand (under 12) takes `feed`, then `state` inside it, never the other way; the lower CP's thread, a job's settle and a drop of its queued CBs take each alone; the close's stop takes `feed` alone under 3a |
//! | 13 | `SimGaudi2::stlb` | the device's STLB | held across each engine access piece (translate, walk, copy) and by every invalidation, which so waits for the piece in flight; taken with none of 6-11 held (invalidations come after the page-table lock is released); takes only 14 |
//! | 14 | `SimGaudi2::dram`, `SimGaudi2::sram`, `SimGaudi2::dma_pages`, `SimGaudi2::invalidations`, `SimGaudi2::faults`, `CfgSpace::blocks` | simulated DRAM and SRAM, the IOMMU's map, invalidation log, engine faults, register blocks | leaves, inside 11 (PTE writes, host-resident hops mapped and unmapped), 13 (engine accesses, walks) or alone |
//! | 14a | `PciGaudi2::mmu_regs`, `DmaStreams::table`, `PciGaudi2::cpu_q` (PCI device) | the MMU register sequences (held across their polls, which sleep), the host pages DMA-mapped for the function, the CPU queues (held across one CPU-CP packet and its fence poll, taken alone by INFO) | leaves, inside 11 (hop-0 tables mapped) or alone; the PCI probe's `PCI_HOME` (`shell/pci.rs`) is a leaf taken alone |
//! | 15 | `DeviceVm::handles` | handle -> page pack | held only to look up, count or remove handles; packs dropped under it take 14 (`SimGaudi2::dram`: their pages' contents given back) then 16 |
//! | 16 | `DeviceVm::pool` (shared by every page pack) | the DRAM page pool | leaf |
//! | 17 | `Fence::state`, `VaQuarantine::ring`, `VaQuarantine::progress` | a CS's completion; a context's held VA blocks, the wait for its CSs' progress | leaves; `Fence::state` taken alone (WAIT_CS, a CS's end) or inside 3, `ring` alone, `progress` alone or inside 3 (the tracker publishing progress) |
//! | 18 | `DeviceCs::captured` | the errors captured for INFO | leaf; taken alone (INFO, a job's report, the watchdog's timeout, an open once it released 1); never across a user copy |
//! | 18a | `DeviceCs::status` | the device status the driver keeps | leaf; taken alone or inside 3 (a submission checks the device's state) |
//! | 19 | `DeviceCs::notifier` | the eventfd the compute file registered | leaf (the eventfd's own wait-queue lock inside, `eventfd_signal`); taken alone, never together with 18 |
//! | 20 | an open debugfs file's kept rendering (`ffi::debugfs::Kept`), `AbiFiles::data_dma` | the rendering reads continue from; the last `dma_size` blob | leaves, taken alone, only to swap or clone a reference (never across a rendering or a copy to user memory) |
//!
//! **User copies.** A copy to or from user memory can sleep for as long as
//! the memory's owner likes (a buffer backed by FUSE or userfaultfd), so no
//! lock another user, an engine or a close could wait for is held across
//! one. Every copy of the module, and what is held:
//!
//! | copy | where | locks of ours held |
//! |---|---|---|
//! | ioctl arguments in and out, compute node | the DRM core (`drm_ioctl`), around our handlers | none |
//! | INFO arguments in and out, control node | `shell/accel.rs` `ctrl_ioctl` | none |
//! | every INFO answer (`InfoSink::write`) | `ioctl/info.rs` | none: OPEN_STATS and LAST_ERR_OPEN_DEV_TIME are copied out after 1 is released, the captured events after 18, USER_MAPPINGS's list is taken by reference under 18 and copied after |
//! | a CS's execute chunk array (`UserChunks::read`) | `ioctl/cs.rs` | none (read before 3) |
//! | a SIGNAL/WAIT CS's chunk and a WAIT's `signal_seq_arr` (`ChunkSource::read_u64`) | `ioctl/cs.rs`, from `cs/sync_stream.rs` | none (read before 2) |
//! | a CS's restore chunk array | `ioctl/cs.rs`, from `cs/submit.rs` | 2 (as upstream's `restore_phase_mutex`): only the same context's other restore CSs wait |
//! | debugfs writes (the text) and reads (a rendering made at a read at offset 0, kept by the open file) | `ffi/debugfs.rs` | none (20 only to take a reference to the rendering) |
//! | host MAP's `pin_user_pages_fast`, which may fault pages in | `ffi/pin.rs`, from `vm/mapping.rs` | none (the kernel takes the mm's `mmap_lock`) |
//!
//! The kernel's own locks around our entry points: `mmap` runs under the
//! mm's `mmap_lock` (write), the dma-buf `map`/`unmap` callbacks under the
//! buffer's `dma_resv` lock; host MAP pins pages and accounts them with no
//! lock of ours held. No spinlock is used: every lock above is a mutex, and
//! nothing allocates or sleeps under a spinlock.

use kernel::{prelude::*, str::CString, sync::Arc};

/// `pr_err!` for what only a driver bug or a failing device can cause,
/// which some KUnit cases provoke on purpose (injected failures, planted
/// leftovers): printed from a KUnit case, the line goes out at info level
/// and starts with `KUnit, on purpose:`, so that a real report stands out
/// in the kernel log (and the log of `make run` does not look alarming).
macro_rules! hl_err {
    ($($arg:tt)*) => {
        if ::kernel::kunit::in_kunit_test() {
            ::kernel::pr_info!("KUnit, on purpose: {}", ::core::format_args!($($arg)*))
        } else {
            ::kernel::pr_err!($($arg)*)
        }
    };
}

pub mod uapi;

mod asic;
#[cfg(CONFIG_KUNIT)]
mod bench;
mod context;
mod cs;
mod device;
mod ffi;
mod file;
mod hw;
mod ioctl;
mod mmu;
mod model;
mod params;
mod shell;
mod small_array;
mod sort;
mod vm;

module! {
    type: HabanaLabsRs,
    name: "habanalabs_rs",
    authors: ["habanalabs_rs developers"],
    description: "Habana Gaudi device-memory subsystem (Rust), simulated Gaudi2 (and PCI Gaudi2s with pci=1)",
    license: "GPL",
    imports_ns: ["DMA_BUF"],
    params: {
        devices: u32 {
            default: 1,
            description: "Number of simulated Gaudi2 devices to create (1..=8; 0 with pci=1: none)",
        },
        hbms: u32 {
            default: 6,
            description: "Working HBM stacks per simulated Gaudi2 (5 or 6); DRAM page = 16 x hbms x 8 MiB",
        },
        dram_mib: u64 {
            default: 0,
            description: "Simulated DRAM size in MiB (0: hbms x 16 GiB); at least two DRAM pages",
        },
        kunit_mappings: u64 {
            default: 10000,
            description: "Mappings the KUnit teardown test creates (make run uses 1000)",
        },
        bench_va_blocks: u64 {
            default: 1000,
            description: "Live VA blocks of the KUnit VA benchmark (make bench uses 100000)",
        },
        timeout_locked: u32 {
            default: 30,
            description: "Seconds a command submission may run before it is aborted (0: never); upstream's timeout_locked",
        },
        memory_scrub: bool {
            default: false,
            description: "Scrub device memory with memory_scrub_val (debugfs; default 0x1122334455667788) when the compute context is released, as upstream (0 = no, 1 = yes, default no; released DRAM never holds a previous user's bytes either way)",
        },
        sim_dram_host_mib: u64 {
            default: 0,
            description: "Most host memory, in MiB, behind the user DRAM of all simulated devices (0: an eighth of RAM); past it the access faults",
        },
        reset_on_page_fault: bool {
            default: false,
            description: "Answer an engine page fault as upstream Gaudi2 does: the device needs a reset until its user closes it (default: abort the CS only)",
        },
        pci: bool {
            default: false,
            description: "Also drive Gaudi2 PCI functions (1da3:1020) no other driver owns, as devices after the simulated ones (0 = no, 1 = yes, default no: the module only creates simulated devices and never touches PCI)",
        },
    },
}

struct HabanaLabsRs {
    config: params::Config,
    /// The PCI driver (`pci=1`); unregistered first, which removes its
    /// devices.
    #[cfg(CONFIG_PCI)]
    pci: Option<shell::pci::PciRegistration>,
    /// The registered devices and their debugfs files; dropped (unregistered)
    /// before `_region` and `_debugfs`.
    devices: KVec<RegisteredDevice>,
    _region: Arc<shell::accel::ChrdevRegion>,
    /// `/sys/kernel/debug/habanalabs_rs/` with `pci_scan`; removed after the
    /// devices' directories in it.
    _debugfs: Arc<ffi::debugfs::Dir<PciScan>>,
    /// `/sys/kernel/debug/habanalabs/`, upstream's old root, holding a link
    /// `hl<N>` per device; removed after the devices' links.
    _hl_debugfs: Arc<ffi::debugfs::Dir<()>>,
}

/// The files at the debugfs root.
static ROOT_FILES: [ffi::debugfs::FileDef<PciScan>; 1] =
    [ffi::debugfs::FileDef::ro(c"pci_scan", show_pci_scan)];

impl kernel::Module for HabanaLabsRs {
    /// Two phases. First everything that can fail, with nothing a user can
    /// open: the devices, their DRM devices and control char devices
    /// (allocated, not registered), their debugfs files (allocated, not
    /// created). A failure there fails the load and undoes it all. Then the
    /// nodes are registered: from the first one on, a process may have a
    /// node open, and a failed load frees the module whatever is open, so
    /// nothing from there on fails the load: a device whose registration
    /// fails is left out (and its registration undone) and the others stay,
    /// as upstream's PCI probes of its devices fail one by one.
    fn init(module: &'static ThisModule) -> Result<Self> {
        // A load under systematic fault injection (the insmod sweep of the
        // guest tests) learns where the init, its registration phase and its
        // end fall among the load's fault points.
        let armed = shell::accel::fail_nth_left() > 0;
        let mark = |phase: &str, index: u32| {
            if armed {
                let left = shell::accel::fail_nth_left();
                pr_info!(
                    "fault injection armed: {} point(s) to go at {} {}\n",
                    left,
                    phase,
                    index
                );
            }
        };
        mark("init", 0);
        let config = params::Config::validate_with_pci(
            module_parameters::devices.value(),
            module_parameters::hbms.value(),
            module_parameters::dram_mib.value(),
            pci_enabled(),
        )
        .inspect_err(|e| pr_err!("invalid module parameters: {}\n", e.msg()))
        .map_err(|e| e.errno())?;
        let p = &config.asic;
        pr_info!(
            "{} simulated Gaudi2 device(s): {} HBMs, DRAM {} MiB, DRAM page {} MiB\n",
            config.devices,
            p.hbms,
            p.dram_size >> 20,
            p.dram_page_size >> 20
        );
        // On a host with real Gaudis this module stays away from them unless
        // `pci=1`: it only creates simulated devices, and says so (kernel log
        // and debugfs).
        let pci = PciScan(shell::accel::real_habana_devices());
        pr_info!("{}\n", pci);
        // Phase 1: everything that can fail; nothing can be opened yet.
        let region = shell::accel::ChrdevRegion::new()?;
        let root = ffi::debugfs::Prepared::new(
            CString::try_from_fmt(fmt!("habanalabs_rs"))?,
            pci,
            &ROOT_FILES,
        )?;
        let region = Arc::new(region, GFP_KERNEL)?;
        let hl_root =
            ffi::debugfs::Prepared::new(CString::try_from_fmt(fmt!("habanalabs"))?, (), &[])?;
        let n = config.devices as usize;
        let prepared = prepare_devices(&config)?;
        let mut devices = KVec::with_capacity(n, GFP_KERNEL)?;
        // Phase 2: register; nothing from here on fails the load.
        mark("registration", 0);
        let root = Arc::new(root.create::<PciScan>(None), GFP_KERNEL)?;
        let hl_root = Arc::new(hl_root.create::<()>(None), GFP_KERNEL)?;
        for (dev, files, abi) in prepared {
            mark("publish", dev.hdev().index);
            let roots = (&*root, &*hl_root);
            publish_device(dev, (files, abi), &region, roots, &mut devices);
        }
        if devices.len() < n {
            pr_err!("{} of {} device(s) registered\n", devices.len(), n);
        }
        #[cfg(CONFIG_PCI)]
        let pci = register_pci(module, &config, (&region, &root, &hl_root));
        #[cfg(not(CONFIG_PCI))]
        let _ = module;
        mark("end", 0);
        Ok(Self {
            config,
            #[cfg(CONFIG_PCI)]
            pci,
            devices,
            _region: region,
            _debugfs: root,
            _hl_debugfs: hl_root,
        })
    }
}

/// Register the PCI driver if `pci=1` (after the simulated devices: its
/// devices' indices and accel minors come after theirs). A failure leaves
/// the module loaded without it.
#[cfg(CONFIG_PCI)]
fn register_pci(
    module: &'static ThisModule,
    config: &params::Config,
    (region, root, hl_root): (
        &Arc<shell::accel::ChrdevRegion>,
        &Arc<ffi::debugfs::Dir<PciScan>>,
        &Arc<ffi::debugfs::Dir<()>>,
    ),
) -> Option<shell::pci::PciRegistration> {
    shell::pci::init_home();
    if !pci_enabled() {
        return None;
    }
    let home = shell::pci::PciHome {
        region: region.clone(),
        root: root.clone(),
        hl_root: hl_root.clone(),
        next_index: config.devices,
    };
    shell::pci::register(home, module)
        .inspect_err(|e| pr_err!("the PCI driver could not be registered ({:?})\n", e))
        .ok()
}

/// The bound on host memory behind simulated user DRAM, from
/// `sim_dram_host_mib` (0: an eighth of RAM).
fn set_dram_host_limit() {
    let limit = match module_parameters::sim_dram_host_mib.value() {
        0 => hw::sim::host_backing::default_limit_bytes(ffi::pin::totalram_bytes()),
        mib => mib.saturating_mul(1 << 20),
    };
    hw::sim::host_backing::set_limit_bytes(limit);
    pr_info!(
        "simulated DRAM takes at most {} MiB of host memory (sim_dram_host_mib)\n",
        limit >> 20
    );
}

/// A device and its debugfs files (ours and upstream's), allocated and not
/// registered.
type PreparedDevice = (
    shell::accel::PreparedDevice,
    shell::debugfs::PreparedFiles,
    shell::debugfs_abi::PreparedAbi,
);

/// A registered device and its debugfs files. Dropped in this order:
/// upstream's files and links first (they live in the DRM core's directory
/// of the device, which goes with it), then the device, then ours.
pub(crate) type RegisteredDevice = (
    Option<shell::accel::AbiLinks>,
    shell::accel::AccelDevice,
    shell::debugfs::DeviceDebugfs,
);

/// Phase 1 of the load for every device: everything that can fail, with
/// nothing a user can open (and the module-wide bound on simulated DRAM's
/// host memory, before any device exists).
fn prepare_devices(config: &params::Config) -> Result<KVec<PreparedDevice>> {
    set_dram_host_limit();
    let mut prepared = KVec::with_capacity(config.devices as usize, GFP_KERNEL)?;
    for index in 0..config.devices {
        let hdev = device::HlDevice::new(index, config.asic.clone())?;
        hdev.cs.configure(
            module_parameters::timeout_locked.value(),
            module_parameters::reset_on_page_fault.value(),
        );
        let files = shell::debugfs::prepare(&hdev)?;
        let abi = shell::debugfs_abi::prepare(&hdev)?;
        let dev = shell::accel::PreparedDevice::new(hdev)?;
        prepared.push((dev, files, abi), GFP_KERNEL)?;
    }
    Ok(prepared)
}

/// Phase 2 for one device: register its nodes and create its debugfs files
/// under `root`, or leave it out (its registration undone) if that fails.
/// Never fails the load. `devices` has room for it (reserved in phase 1).
fn publish_device(
    dev: shell::accel::PreparedDevice,
    (files, abi): (
        shell::debugfs::PreparedFiles,
        shell::debugfs_abi::PreparedAbi,
    ),
    region: &shell::accel::ChrdevRegion,
    (root, hl_root): (&ffi::debugfs::Dir<PciScan>, &ffi::debugfs::Dir<()>),
    devices: &mut KVec<RegisteredDevice>,
) {
    let index = dev.hdev().index;
    match publish(dev, (files, abi), region, (root, hl_root)) {
        Ok(entry) => {
            if let Err(e) = devices.push_within_capacity(entry) {
                // Never reached; unregistering a published device here could
                // pull it from under an opener.
                pr_err!("device {}: no room in the device list\n", index);
                core::mem::forget(e);
            }
        }
        Err(e) => pr_err!(
            "device {}: registration failed ({}); left out, the module stays loaded\n",
            index,
            e.to_errno()
        ),
    }
}

/// Register `dev`'s nodes and create its debugfs files under `root` (and
/// upstream's, with their links, under `hl_root`): the device as
/// registered, or the registration's errno (everything undone).
pub(crate) fn publish(
    dev: shell::accel::PreparedDevice,
    (files, abi): (
        shell::debugfs::PreparedFiles,
        shell::debugfs_abi::PreparedAbi,
    ),
    region: &shell::accel::ChrdevRegion,
    (root, hl_root): (&ffi::debugfs::Dir<PciScan>, &ffi::debugfs::Dir<()>),
) -> Result<RegisteredDevice> {
    let dev = dev.publish(region)?;
    // Only the links' names can fail (allocation): left out then.
    let abi = dev.create_abi_debugfs(abi, hl_root).ok();
    Ok((abi, dev, files.create(Some(root))))
}

/// Whether Gaudi2 PCI functions are driven: `pci=1` on a kernel with PCI.
fn pci_enabled() -> bool {
    cfg!(CONFIG_PCI) && module_parameters::pci.value()
}

/// What the module found on the host's PCI bus: Habana functions (count,
/// device id of the first), which it touches only with `pci=1`.
pub(crate) struct PciScan((u32, u16));

const NO_HABANA_PCI: &str = "no Habana PCI device on this host; creating simulated devices only";
const HABANA_PCI_LEFT_ALONE: &str = "not touched; this module only creates simulated devices";
const HABANA_PCI_BOUND: &str =
    "pci=1: the Gaudi2 (1da3:1020) functions no other driver owns are driven too";

impl kernel::fmt::Display for PciScan {
    fn fmt(&self, f: &mut kernel::fmt::Formatter<'_>) -> kernel::fmt::Result {
        let what = if pci_enabled() {
            HABANA_PCI_BOUND
        } else {
            HABANA_PCI_LEFT_ALONE
        };
        match self.0 {
            (0, _) if !pci_enabled() => write!(f, "{}", NO_HABANA_PCI),
            (n, id) => write!(
                f,
                "{} Habana PCI function(s) on this host (first: device {:#06x}): {}",
                n, id, what
            ),
        }
    }
}

fn show_pci_scan(scan: &PciScan, f: &mut kernel::fmt::Formatter<'_>) -> kernel::fmt::Result {
    kernel::fmt::Display::fmt(scan, f)?;
    writeln!(f)
}

impl Drop for HabanaLabsRs {
    fn drop(&mut self) {
        // The PCI driver first: its devices are removed with it, then what
        // they shared is released.
        #[cfg(CONFIG_PCI)]
        {
            drop(self.pci.take());
            shell::pci::clear_home();
        }
        // Unregister the devices before the char-device region goes.
        self.devices.clear();
        pr_info!("unloaded ({} device(s))\n", self.config.devices);
    }
}
