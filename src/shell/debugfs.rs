// SPDX-License-Identifier: GPL-2.0

//! Debugfs: `/sys/kernel/debug/habanalabs_rs/<device>/`.
//!
//! | file | content |
//! |---|---|
//! | `dram_pool` | pool geometry, usage and a one-character-per-page map |
//! | `memory` | every live handle: owner ASID, size, pages, contiguity, flags, mappings |
//! | `status` | the simulated device's state; writing a state name changes it (tests) |
//! | `va` | the VA ranges of the open compute context: every block, free or allocated |
//! | `userptr` | pinned host buffers of the open context: pid, address, size, pages, huge or not, device VA |
//! | `mmu` | page-table statistics; write a VA, read its translation by the page-walk oracle |
//! | `hw_blocks` | the backed HW blocks' non-zero registers; the open context's block mappings |
//! | `ts_buffers` | the open context's timestamp buffers and the bytes they hold |
//! | `cbs` | command buffers alive in the module; the open context's CBs: id, size, mapped vmas, first non-zero words |
//! | `dmabuf` | the device's live dma-buf exports and mapped importer tables; the open context's exports, with their DRAM pieces |
//! | `bench` | time per phase of host MAPs; write `pin ADDR SIZE` to time pin+unpin of the writer's buffer alone (`make bench`) |
//! | `fail_invalidations` | how many of the next MMU cache invalidations the simulated device fails, and whether a teardown waits for one; write a count (`max`: until changed) to inject failures (tests) |
//! | `skip_invalidations` | how many of the next MMU cache invalidations the device skips (answers success, keeps its STLB entries; on a PCI device the driver writes no invalidation register) and how many it skipped; write a count (`max`: until changed) (tests) |
//! | `stlb` | the simulated device's STLB (statistics, entries), IOMMU map, hop-0 registers and engine faults (first, last, counts, last use of a stale translation) |
//! | `engine` | an engine access through the device's MMUs (tests): write `read ASID VA LEN` to choose what reading shows (read at each read from offset 0, through the STLB), `write ASID VA HEX` to store bytes |
//! | `dram` | simulated DRAM by physical address (tests): write `write ADDR HEX` to store bytes, `read ADDR LEN` to choose what reading shows |
//! | `pci` | a PCI device's bus id, state (`alive`, `dead`, `gone`) and register traffic since its probe: register reads and writes, PTE writes and reads through BAR4, hop-0 commits, invalidations, poll timeouts, DMA maps and unmaps, pages mapped (one `name value` per line) |
//!
//! On a PCI device the files of the simulation (`stlb`, `engine`, the
//! injection switches, `status` writes) answer `ENODEV` to writes and say
//! so when read.
//!
//! Each file is rendered once per read from offset 0, without `seq_file`'s re-rendering
//! at every buffer doubling (`ffi/debugfs.rs`). The files whose size grows
//! with the context's state (`va`, `userptr`, `hw_blocks`, `ts_buffers`)
//! copy their rows out in one pass under the lock, into a buffer sized
//! beforehand (so nothing is allocated under it), and format them after
//! unlocking: a reader holds a context lock for a copy of n small records,
//! never for the formatting.

use crate::{
    device::HlDevice,
    ffi::debugfs::{Dir, FileDef, Prepared},
    hw::{
        backend::{DeviceStatus, MmuKind},
        sim::{
            engine_mem::EngineAccess,
            fault::{EngineFault, Target},
            host_backing, stlb,
        },
    },
    mmu::walk::WalkFault,
    vm::{
        context_vm::ContextVm,
        mapping_table::Backing,
        op_profile::{OP_NAMES, PHASE_NAMES},
        va_range::VaRangeType,
    },
};
use kernel::{
    alloc::KVVec,
    fmt,
    prelude::*,
    str::CString,
    sync::{
        atomic::{Atomic, Relaxed},
        Arc,
    }, //
};

/// What the files of one device share: the device, the VA last written to
/// `mmu`, and the last pinning-floor measurement of `bench`.
pub(crate) struct DeviceFiles {
    dev: Arc<HlDevice>,
    /// The VA last written to `mmu`.
    va: Atomic<u64>,
    /// `[pages, pin ns, unpin ns]` of the last `pin` written to `bench`.
    floor: [Atomic<u64>; 3],
    /// The DRAM window reading `dram` shows: address and length.
    dram: [Atomic<u64>; 2],
    /// The engine read reading `engine` does: ASID, VA and length.
    engine: [Atomic<u64>; 3],
}

/// The files of one device, in `<root>/<index>/`.
static DEVICE_FILES: [FileDef<DeviceFiles>; 18] = [
    FileDef::ro(c"pci", |d, f| show_pci(&d.dev, f)),
    FileDef::ro(c"dram_pool", |d, f| show_dram_pool(&d.dev, f)),
    FileDef::ro(c"memory", |d, f| show_memory(&d.dev, f)),
    FileDef::ro(c"va", |d, f| show_va(&d.dev, f)),
    FileDef::ro(c"userptr", |d, f| show_userptr(&d.dev, f)),
    FileDef::ro(c"hw_blocks", |d, f| show_hw_blocks(&d.dev, f)),
    FileDef::ro(c"ts_buffers", |d, f| show_ts_buffers(&d.dev, f)),
    FileDef::ro(c"cbs", |d, f| show_cbs(&d.dev, f)),
    FileDef::ro(c"dmabuf", |d, f| show_dmabuf(&d.dev, f)),
    FileDef::rw(c"mmu", show_mmu, write_mmu),
    FileDef::rw(c"bench", show_bench, write_bench),
    FileDef::rw(
        c"status",
        |d, f| show_status(&d.dev, f),
        |d, t| write_status(&d.dev, t),
    ),
    FileDef::rw(
        c"fail_invalidations",
        |d, f| show_fail_invalidations(&d.dev, f),
        |d, t| write_fail_invalidations(&d.dev, t),
    ),
    FileDef::rw(c"dram", show_dram, write_dram),
    FileDef::rw(
        c"skip_invalidations",
        |d, f| show_skip_invalidations(&d.dev, f),
        |d, t| write_skip_invalidations(&d.dev, t),
    ),
    FileDef::ro(c"stlb", |d, f| show_stlb(&d.dev, f)),
    FileDef::rw(c"engine", show_engine, write_engine),
    FileDef::rw(
        c"dram_host",
        |d, f| show_dram_host(&d.dev, f),
        |_, t| write_dram_host(t),
    ),
];

/// A PCI device's register traffic since its probe, one `name value` per
/// line (`PciGaudi2::show_counters`); a simulated device has none.
fn show_pci(dev: &Arc<HlDevice>, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    #[cfg(CONFIG_PCI)]
    if let Some(pci) = dev.pci() {
        let bus = dev.bus_id();
        writeln!(f, "bus {}", core::str::from_utf8(&bus).unwrap_or("?"))?;
        return pci.show_counters(f);
    }
    writeln!(f, "not a PCI device: {}", dev.index)
}

/// The host memory behind simulated user DRAM: this device's, all devices',
/// the module-wide limit and the allocations it refused
/// (`hw::sim::host_backing`).
fn show_dram_host(dev: &Arc<HlDevice>, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    let (all, limit, refused) = host_backing::usage();
    let mine = dev.simulated().map_or(0, |s| s.dram_host_bytes());
    writeln!(f, "device bytes:   {}", mine)?;
    writeln!(f, "all bytes:      {}", all)?;
    writeln!(f, "limit bytes:    {}", limit)?;
    writeln!(f, "refused:        {}", refused)
}

/// A new module-wide limit, in bytes (decimal or 0x-hex; `sim_dram_host_mib`
/// at load). Root only, as every file here.
fn write_dram_host(text: &str) -> Result {
    let bytes = match text.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => text.parse::<u64>(),
    }
    .map_err(|_| EINVAL)?;
    host_backing::set_limit_bytes(bytes);
    Ok(())
}

/// The debugfs files of one device; removed when dropped.
pub(crate) type DeviceDebugfs = Dir<DeviceFiles>;

/// The debugfs files of one device, allocated and not created yet.
pub(crate) type PreparedFiles = Prepared<DeviceFiles>;

/// Allocate the files of `dev` (`<root>/<index>/`); nothing is visible until
/// [`Prepared::create`].
pub(crate) fn prepare(dev: &Arc<HlDevice>) -> Result<PreparedFiles> {
    let name = CString::try_from_fmt(fmt!("{}", dev.index))?;
    let files = DeviceFiles {
        dev: dev.clone(),
        va: Atomic::new(0),
        floor: [Atomic::new(0), Atomic::new(0), Atomic::new(0)],
        dram: [Atomic::new(0), Atomic::new(0)],
        engine: [Atomic::new(0), Atomic::new(0), Atomic::new(0)],
    };
    Prepared::new(name, files, &DEVICE_FILES)
}

/// The VA/MMU state of the device's open compute context, if any.
fn active_vm(dev: &HlDevice) -> Option<Arc<ContextVm>> {
    dev.state.lock().active_vm.clone()
}

/// A buffer for `n` rows copied out from under a lock (allocated before the
/// lock is taken).
fn rows<T>(n: usize) -> core::result::Result<KVVec<T>, fmt::Error> {
    KVVec::with_capacity(n, GFP_KERNEL).map_err(|_| fmt::Error)
}

/// Add `row` unless the buffer is full (more rows appeared since they were
/// counted); count what did not fit.
fn keep<T>(rows: &mut KVVec<T>, row: T, missed: &mut usize) {
    if rows.push_within_capacity(row).is_err() {
        *missed += 1;
    }
}

fn note_missed(f: &mut fmt::Formatter<'_>, missed: usize) -> fmt::Result {
    if missed > 0 {
        writeln!(f, "  ... {} more, added while the rows were copied", missed)?;
    }
    Ok(())
}

fn show_dram_pool(dev: &Arc<HlDevice>, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    let pool = dev.vm.pool.lock();
    let (pages, free, size) = (pool.pages(), pool.free_pages(), pool.page_size());
    writeln!(f, "base:        {:#x}", dev.asic.dram_user_base)?;
    writeln!(f, "page size:   {:#x} ({} MiB)", size, size >> 20)?;
    writeln!(
        f,
        "pages:       {} total, {} used, {} free",
        pages,
        pages - free,
        free
    )?;
    writeln!(
        f,
        "used bytes:  {} (DRAM_USAGE: {} used)",
        (pages - free) * size,
        dev.vm.dram_used()
    )?;
    write!(f, "map:         ")?;
    for i in 0..pages {
        f.write_str(if pool.is_used(i) { "U" } else { "." })?;
    }
    writeln!(f)
}

fn show_memory(dev: &Arc<HlDevice>, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    writeln!(
        f,
        "handle  asid  size                pages  contiguous  shared  mappings  first page"
    )?;
    let table = dev.vm.handles.lock();
    let mut result = Ok(());
    table.for_each(|h, e| {
        let p = &e.pack;
        if result.is_ok() {
            result = writeln!(
                f,
                "{:<7} {:<5} {:<#19x} {:<6} {:<11} {:<7} {:<9} {:#x}",
                h,
                p.asid,
                p.total_size,
                p.npages,
                if p.is_contiguous() { "yes" } else { "no" },
                if p.flags & crate::uapi::HL_MEM_SHARED != 0 {
                    "yes"
                } else {
                    "no"
                },
                e.mapping_cnt,
                p.page_addr(0).unwrap_or(0)
            );
        }
    });
    result
}

/// `print_va_list_locked`, for every range of the active context. Each
/// range's blocks are copied out under its lock (24 bytes each) and
/// formatted after.
fn show_va(dev: &Arc<HlDevice>, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    let Some(vm) = active_vm(dev) else {
        return writeln!(f, "no open compute context");
    };
    for kind in VaRangeType::ALL {
        let range = vm.range(kind);
        let n = {
            let alloc = range.lock();
            alloc.free_blocks() + alloc.allocated_blocks()
        };
        let mut blocks = rows::<(u64, u64, bool)>(n)?;
        let mut missed = 0;
        let (span, page_size, free, used, hint) = {
            let alloc = range.lock();
            alloc.for_each_block(|start, end, free| {
                keep(&mut blocks, (start, end, free), &mut missed)
            });
            (
                alloc.span(),
                alloc.page_size(),
                alloc.free_blocks(),
                alloc.allocated_blocks(),
                alloc.hint_reserved(),
            )
        };
        writeln!(
            f,
            "range {}: [{:#x}, {:#x}) page {:#x}, {} free block(s), {} allocation(s)",
            kind.name(),
            span.start,
            span.end,
            page_size,
            free,
            used
        )?;
        if let Some(r) = hint {
            writeln!(f, "  hint-reserved [{:#x}, {:#x})", r.start, r.end)?;
        }
        for &(start, end, free) in blocks.iter() {
            let what = if free { "free" } else { "used" };
            writeln!(
                f,
                "  {} [{:#x}, {:#x}) {:#x}",
                what,
                start,
                end,
                end - start
            )?;
        }
        note_missed(f, missed)?;
    }
    Ok(())
}

/// Upstream's `userptr` file: every pinned host buffer of the open context,
/// copied out under the mapping table's lock and formatted after.
fn show_userptr(dev: &Arc<HlDevice>, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    writeln!(
        f,
        "pid    user address        size          pages    huge  device va"
    )?;
    let Some(vm) = active_vm(dev) else {
        return Ok(());
    };
    let n = vm.mappings.lock().len();
    let mut hosts = rows(n)?;
    let mut missed = 0;
    for (uva, m) in vm.mappings.lock().iter() {
        if let Some(Backing::Host {
            pinned, page_size, ..
        }) = m.backing()
        {
            let row = (
                pinned.pid,
                pinned.addr,
                pinned.size,
                pinned.npages(),
                *page_size > 4096,
                *uva,
            );
            keep(&mut hosts, row, &mut missed);
        }
    }
    for &(pid, addr, size, pages, huge, uva) in hosts.iter() {
        writeln!(
            f,
            "{:<6} {:<#18x} {:<#13x} {:<8} {:<5} {:#x}",
            pid,
            addr,
            size,
            pages,
            if huge { "yes" } else { "no" },
            uva
        )?;
    }
    note_missed(f, missed)
}

/// Most non-zero registers `hw_blocks` lists (all 453 blocks hold about a
/// million registers).
const MAX_REGISTERS_SHOWN: usize = 4096;

/// The registers userspace wrote through HW-block mappings (the simulated
/// configuration space), and the open context's block mappings. Both are
/// copied out under their locks and formatted after.
fn show_hw_blocks(dev: &Arc<HlDevice>, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    match (dev.simulated(), dev.pci()) {
        (Some(sim), _) => show_registers(&sim.cfg_space, f)?,
        (None, Some(pci)) => show_pci_registers(pci, f)?,
        (None, None) => {}
    }
    let Some(vm) = active_vm(dev) else {
        return writeln!(f, "no open compute context");
    };
    let n = vm.hw_blocks.lock().iter().count();
    let mut maps = rows(n)?;
    let mut missed = 0;
    for r in vm.hw_blocks.lock().iter() {
        keep(&mut maps, *r, &mut missed);
    }
    writeln!(f, "mappings: {}", maps.len() + missed)?;
    for r in maps.iter() {
        writeln!(
            f,
            "  block {} at va {:#x} size {:#x}, {} vma(s)",
            r.id, r.va, r.size, r.vmas
        )?;
    }
    note_missed(f, missed)
}

/// A PCI device's blocks mapped since the last release (reset then) and
/// their non-zero registers, read through BAR0. O(their registers) register
/// reads.
fn show_pci_registers(pci: &crate::hw::pci::PciGaudi2, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    let mut regs = rows(MAX_REGISTERS_SHOWN)?;
    let mut more = 0;
    let n = pci.mapped_block_registers(|id, off, value| {
        keep(&mut regs, (id, off as usize, value), &mut more)
    });
    writeln!(
        f,
        "backed blocks: {} of {} (mapped since the last release; BAR0)",
        n,
        crate::asic::NUM_USER_MAPPED_BLOCKS
    )?;
    show_register_rows(&regs, more, f)
}

/// The simulated configuration space's backed blocks and non-zero registers.
fn show_registers(
    cfg: &crate::hw::sim::cfg_space::CfgSpace,
    f: &mut fmt::Formatter<'_>,
) -> fmt::Result {
    writeln!(
        f,
        "backed blocks: {} of {}",
        cfg.backed_blocks(),
        crate::asic::NUM_USER_MAPPED_BLOCKS
    )?;
    let mut regs = rows(MAX_REGISTERS_SHOWN)?;
    let mut more = 0;
    cfg.for_each_nonzero(|id, off, value| keep(&mut regs, (id, off, value), &mut more));
    show_register_rows(&regs, more, f)
}

/// The `non-zero registers:` list of `hw_blocks`.
fn show_register_rows(
    regs: &[(u32, usize, u32)],
    more: usize,
    f: &mut fmt::Formatter<'_>,
) -> fmt::Result {
    writeln!(f, "non-zero registers:")?;
    for &(id, off, value) in regs.iter() {
        let base = crate::asic::user_block(id.into()).map_or(0, |b| b.address);
        writeln!(
            f,
            "  block {} {:#x} +{:#06x} = {:#010x}",
            id,
            crate::asic::CFG_BASE + base,
            off,
            value
        )?;
    }
    if more > 0 {
        writeln!(f, "  ... and {} more", more)?;
    }
    Ok(())
}

/// The open context's timestamp buffers: references to them are taken under
/// the table's lock, and their elements read after it is dropped.
fn show_ts_buffers(dev: &Arc<HlDevice>, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    use crate::vm::{
        one_mmap::OneMmap,
        ts_buffer::{live_buffers, TS_MAX_BYTES},
    };
    writeln!(f, "alive in the module: {}", live_buffers())?;
    let Some(vm) = active_vm(dev) else {
        return writeln!(f, "no open compute context");
    };
    let n = vm.ts_buffers.lock().len();
    let mut bufs = rows(n)?;
    let mut missed = 0;
    let bytes = {
        let table = vm.ts_buffers.lock();
        for b in table.iter() {
            keep(&mut bufs, b.clone(), &mut missed);
        }
        table.charged()
    };
    writeln!(
        f,
        "buffers: {}, bytes: {} of {}",
        bufs.len() + missed,
        bytes,
        TS_MAX_BYTES
    )?;
    for b in bufs.iter() {
        write!(
            f,
            "  id {}: {} element(s), {} mapped vma(s); non-zero:",
            b.id(),
            b.elements(),
            b.mapped_vmas()
        )?;
        // The first few timestamps userspace (or the device) wrote.
        let mut shown = 0;
        for i in 0..b.elements() as usize {
            if shown == 8 {
                write!(f, " ...")?;
                break;
            }
            if let Some(v) = b.timestamp(i).filter(|&v| v != 0) {
                write!(f, " [{}]={:#x}", i, v)?;
                shown += 1;
            }
        }
        writeln!(f)?;
    }
    note_missed(f, missed)
}

/// The open context's command buffers: references to them are taken under
/// the table's lock, and their words read after it is dropped.
fn show_cbs(dev: &Arc<HlDevice>, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    use crate::vm::{
        command_buffer::{live_cbs, CB_MAX_PER_FILE},
        one_mmap::OneMmap,
    };
    writeln!(f, "alive in the module: {}", live_cbs())?;
    let Some(vm) = active_vm(dev) else {
        return writeln!(f, "no open compute context");
    };
    let n = vm.cbs.lock().len();
    let mut cbs = rows(n)?;
    let mut missed = 0;
    for cb in vm.cbs.lock().iter() {
        keep(&mut cbs, cb.clone(), &mut missed);
    }
    writeln!(f, "cbs: {} of {}", cbs.len() + missed, CB_MAX_PER_FILE)?;
    for cb in cbs.iter() {
        write!(
            f,
            "  id {}: size {}, {} mapped vma(s); non-zero:",
            cb.id(),
            cb.size(),
            cb.mapped_vmas()
        )?;
        // The first few words userspace (or the device) wrote.
        let words = cb.memory().1 / 8;
        let nonzero = (0..words).filter_map(|i| cb.word(i).filter(|&v| v != 0).map(|v| (i, v)));
        for (k, (i, v)) in nonzero.enumerate() {
            if k == 8 {
                write!(f, " ...")?;
                break;
            }
            write!(f, " [{}]={:#x}", i * 8, v)?;
        }
        writeln!(f)?;
    }
    note_missed(f, missed)
}

/// The device's dma-buf exports, how many importer sg tables of them are
/// mapped, and for the open context each export's DRAM pieces (physical
/// address and length, consecutive pages merged).
fn show_dmabuf(dev: &Arc<HlDevice>, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    use crate::hw::backend::DramPieces;
    writeln!(f, "exports: {}", dev.vm.dmabuf_exports())?;
    writeln!(f, "importer mappings: {}", dev.vm.dmabuf_mappings())?;
    let Some(vm) = dev.state.lock().active_vm.clone() else {
        return writeln!(f, "no open compute context");
    };
    let list = vm.exports.lock();
    for (r, pack) in list.iter() {
        writeln!(
            f,
            "va {:#x} offset {:#x} size {:#x}:",
            r.va, r.offset, r.size
        )?;
        match DramPieces::new(&**pack, r.offset, r.size) {
            Ok(pieces) => {
                for (pa, len) in pieces {
                    writeln!(f, "  dram {:#x} + {:#x}", pa, len)?;
                }
            }
            Err(_) => writeln!(f, "  (range outside the pack)")?,
        }
    }
    Ok(())
}

/// The `mmu` file's hop lines: hop 0, hops in use and linked per tree,
/// parked, spare and idle hops.
fn write_hop_stats(f: &mut fmt::Formatter<'_>, vm: &ContextVm) -> fmt::Result {
    let (hop0, hops, pmmu_hops, parked, spare, idle) = {
        let mmu = vm.mmu.lock();
        (
            mmu.dmmu.hop0(),
            (mmu.dmmu.hops_in_use(), mmu.dmmu.hop_count()),
            (mmu.pmmu.hops_in_use(), mmu.pmmu.hop_count()),
            (mmu.dmmu.stale_count(), mmu.pmmu.stale_count()),
            (mmu.dmmu.spare_count(), mmu.pmmu.spare_count()),
            (mmu.dmmu.idle_count(), mmu.pmmu.idle_count()),
        )
    };
    writeln!(f, "asid:            {}", vm.asid)?;
    writeln!(
        f,
        "dmmu hop0:       {:#x}, {} more hop(s) in use, {} linked",
        hop0, hops.0, hops.1
    )?;
    writeln!(
        f,
        "pmmu hops:       {} in use, {} linked",
        pmmu_hops.0, pmmu_hops.1
    )?;
    writeln!(
        f,
        "idle hops:       {} dmmu, {} pmmu (emptied, left linked for the next MAP)",
        idle.0, idle.1
    )?;
    writeln!(
        f,
        "parked hops:     {} dmmu, {} pmmu (waiting for an invalidation)",
        parked.0, parked.1
    )?;
    writeln!(
        f,
        "spare hops:      {} dmmu, {} pmmu (emptied, invalidated, kept for the next MAP)",
        spare.0, spare.1
    )?;
    Ok(())
}

/// Upstream's `mmu` debugfs: page-table statistics and the translation of the
/// VA last written, by the page-walk oracle (from device memory, as the
/// hardware reads it).
fn show_mmu(p: &DeviceFiles, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    let dev = &p.dev;
    writeln!(
        f,
        "hop slots free:  {}",
        dev.mmu.dr_hops.lock().free_slots()
    )?;
    writeln!(f, "PTE writes:      {}", dev.pte_writes())?;
    let Some(vm) = dev.state.lock().active_vm.clone() else {
        return writeln!(f, "no open compute context");
    };
    write_hop_stats(f, &vm)?;
    {
        // Kept in step by MAP/UNMAP under one lock: the last two are equal.
        let maps = vm.mappings.lock();
        let hosts = maps
            .iter()
            .filter(|(_, m)| matches!(m.backing(), Some(Backing::Host { .. })))
            .count();
        writeln!(f, "mappings:        {}", maps.len())?;
        writeln!(f, "quarantined:     {}", maps.quarantined_len())?;
        writeln!(f, "host mappings:   {}", hosts)?;
        writeln!(f, "userptr pins:    {}", maps.userptrs().pins())?;
    }
    let va = p.va.load(Relaxed);
    if va == 0 {
        return writeln!(f, "(write a VA to this file to translate it)");
    }
    match vm.translate(va) {
        Ok(t) => {
            write!(
                f,
                "va {:#x} -> pa {:#x} (leaf at hop {}; hops",
                va, t.pa, t.leaf
            )?;
            for h in t.hops.iter().take(t.leaf + 1) {
                write!(f, " {:#x}", h)?;
            }
            write!(f, ")")?;
            // A host page: where the bus address lands (the IOMMU's view on
            // PCI, where the bus address is an IOVA).
            if vm.range_type(va, 1) != Some(VaRangeType::Dram) {
                if let Some(pa) = dev.backend().host_phys(t.pa) {
                    write!(f, " host phys {:#x}", pa)?;
                }
            }
            writeln!(f)
        }
        Err(WalkFault::NotPresent(l)) => {
            writeln!(f, "va {:#x}: fault: not present at hop {}", va, l)
        }
        Err(e) => writeln!(f, "va {:#x}: fault: {:?}", va, e),
    }
}

fn show_bench(p: &DeviceFiles, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    let profile = &p.dev.vm.profile;
    writeln!(f, "profile: {}", u32::from(profile.is_on()))?;
    for (i, name) in OP_NAMES.iter().enumerate() {
        let Some((done, ns)) = profile.snapshot(i) else {
            continue;
        };
        write!(f, "{}: done {}", name, done)?;
        for (phase, v) in PHASE_NAMES.iter().zip(ns) {
            if v > 0 {
                write!(f, " {}_ns {}", phase, v)?;
            }
        }
        writeln!(f)?;
    }
    let [pages, pin, unpin] = &p.floor;
    writeln!(
        f,
        "pin_floor: pages {} pin_ns {} unpin_ns {}",
        pages.load(Relaxed),
        pin.load(Relaxed),
        unpin.load(Relaxed)
    )
}

/// `pin ADDR SIZE` (hexadecimal address with or without `0x`, decimal size):
/// pin and unpin that range of the writer's memory alone and keep the times;
/// `profile 1` / `profile 0`: turn the per-phase clocks of the memory ioctls
/// on or off.
fn write_bench(p: &DeviceFiles, text: &str) -> Result {
    let mut words = text.split_whitespace();
    match words.next() {
        Some("pin") => {}
        Some("profile") => {
            let on = match words.next() {
                Some("1") => true,
                Some("0") => false,
                _ => return Err(EINVAL),
            };
            p.dev.vm.profile.set_on(on);
            return Ok(());
        }
        _ => return Err(EINVAL),
    }
    let addr = parse_hex_u64(words.next().ok_or(EINVAL)?)?;
    let size: u64 = words.next().ok_or(EINVAL)?.parse().map_err(|_| EINVAL)?;
    let (pin, unpin, pages) = crate::ffi::pin::pin_floor(addr, size)?;
    for (slot, v) in p.floor.iter().zip([pages as u64, pin, unpin]) {
        slot.store(v, Relaxed);
    }
    Ok(())
}

fn write_mmu(p: &DeviceFiles, text: &str) -> Result {
    let hex = text.strip_prefix("0x").unwrap_or(text);
    p.va.store(u64::from_str_radix(hex, 16).map_err(|_| EINVAL)?, Relaxed);
    Ok(())
}

const STATUS_NAMES: [(&str, DeviceStatus); 6] = [
    ("operational", DeviceStatus::Operational),
    ("in_reset", DeviceStatus::InReset),
    ("malfunction", DeviceStatus::Malfunction),
    ("needs_reset", DeviceStatus::NeedsReset),
    ("in_device_creation", DeviceStatus::InDeviceCreation),
    (
        "in_reset_after_device_release",
        DeviceStatus::InResetAfterDeviceRelease,
    ),
];

fn show_status(dev: &Arc<HlDevice>, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    let now = dev.status();
    let name = STATUS_NAMES
        .iter()
        .find(|(_, s)| *s == now)
        .map_or("?", |(n, _)| n);
    writeln!(f, "{}", name)
}

fn write_status(dev: &Arc<HlDevice>, text: &str) -> Result {
    let status = STATUS_NAMES
        .iter()
        .find(|(n, _)| *n == text)
        .map(|(_, s)| *s)
        .ok_or(EINVAL)?;
    dev.set_status(status);
    Ok(())
}

fn show_fail_invalidations(dev: &Arc<HlDevice>, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    writeln!(
        f,
        "failing next:     {}",
        dev.simulated()
            .map_or(0, |s| s.invalidation_failures_left())
    )?;
    writeln!(
        f,
        "teardown parked:  {}",
        if dev.release_parked() { "yes" } else { "no" }
    )
}

/// A count written to a fault-injection file: decimal, or `max`.
fn parse_count(text: &str) -> Result<u64> {
    if text == "max" {
        Ok(u64::MAX)
    } else {
        text.parse::<u64>().map_err(|_| EINVAL)
    }
}

fn write_fail_invalidations(dev: &Arc<HlDevice>, text: &str) -> Result {
    dev.sim()?.inject_invalidation_failures(parse_count(text)?);
    Ok(())
}

fn show_skip_invalidations(dev: &Arc<HlDevice>, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    let (left, done) = match (dev.simulated(), dev.pci()) {
        (Some(s), _) => s.invalidation_skips(),
        (None, Some(p)) => p.invalidation_skips(),
        (None, None) => (0, 0),
    };
    writeln!(f, "skipping next:    {}", left)?;
    writeln!(f, "skipped:          {}", done)
}

fn write_skip_invalidations(dev: &Arc<HlDevice>, text: &str) -> Result {
    let n = parse_count(text)?;
    match (dev.simulated(), dev.pci()) {
        (Some(s), _) => s.skip_invalidations(n),
        (None, Some(p)) => p.skip_invalidations(n),
        (None, None) => return Err(ENODEV),
    }
    Ok(())
}

/// Most bytes one `write` stores or one read of `dram` shows (tests; to be
/// superseded by upstream's debugfs `data64`).
const DRAM_PROBE_MAX: usize = 4096;

/// `ADDR: HEX` of the window chosen with `read ADDR LEN`.
fn show_dram(p: &DeviceFiles, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    let [addr, len] = &p.dram;
    let (addr, len) = (addr.load(Relaxed), len.load(Relaxed));
    let Ok(len) = usize::try_from(len) else {
        return Err(fmt::Error);
    };
    if len == 0 {
        return writeln!(f, "(write `read ADDR LEN` or `write ADDR HEX`)");
    }
    let mut buf = KVec::from_elem(0u8, len, GFP_KERNEL).map_err(|_| fmt::Error)?;
    match p.dev.backend().dram_read(addr, &mut buf) {
        Ok(()) => {
            write!(f, "{:#x}:", addr)?;
            for b in buf.iter() {
                write!(f, "{:02x}", b)?;
            }
            writeln!(f)
        }
        Err(e) => writeln!(f, "{:#x}: error {:?}", addr, e),
    }
}

/// `write ADDR HEX` stores the bytes (at most [`DRAM_PROBE_MAX`]) at DRAM
/// physical address `ADDR` (hexadecimal, with or without `0x`); `read ADDR
/// LEN` (`LEN` decimal, at most [`DRAM_PROBE_MAX`]) chooses what reading the
/// file shows.
fn write_dram(p: &DeviceFiles, text: &str) -> Result {
    let mut words = text.split_whitespace();
    let verb = words.next().ok_or(EINVAL)?;
    let addr = parse_hex_u64(words.next().ok_or(EINVAL)?)?;
    let arg = words.next().ok_or(EINVAL)?;
    if words.next().is_some() {
        return Err(EINVAL);
    }
    match verb {
        "read" => {
            let len: u64 = arg.parse().map_err(|_| EINVAL)?;
            if len == 0 || len > DRAM_PROBE_MAX as u64 {
                return Err(EINVAL);
            }
            let [a, l] = &p.dram;
            a.store(addr, Relaxed);
            l.store(len, Relaxed);
            Ok(())
        }
        "write" => p.dev.backend().dram_write(addr, &parse_bytes(arg)?),
        _ => Err(EINVAL),
    }
}

/// Bytes written as hexadecimal digits, two per byte, at most
/// [`DRAM_PROBE_MAX`].
fn parse_bytes(arg: &str) -> Result<KVec<u8>> {
    let hex = arg.as_bytes();
    if hex.is_empty() || hex.len() % 2 != 0 || hex.len() > 2 * DRAM_PROBE_MAX {
        return Err(EINVAL);
    }
    let nibble = |c: u8| char::from(c).to_digit(16).ok_or(EINVAL);
    let mut bytes = KVec::with_capacity(hex.len() / 2, GFP_KERNEL)?;
    for pair in hex.chunks_exact(2) {
        let &[hi, lo] = pair else {
            return Err(EINVAL);
        };
        let b = u8::try_from(nibble(hi)? << 4 | nibble(lo)?).map_err(|_| EINVAL)?;
        bytes.push(b, GFP_KERNEL)?;
    }
    Ok(bytes)
}

/// A hexadecimal number, with or without `0x`.
fn parse_hex_u64(text: &str) -> Result<u64> {
    u64::from_str_radix(text.strip_prefix("0x").unwrap_or(text), 16).map_err(|_| EINVAL)
}

/// The engine id debugfs accesses are made as (no engine of Gaudi2 has it).
const DEBUGFS_ENGINE: u16 = u16::MAX;

fn show_fault(f: &mut fmt::Formatter<'_>, what: &str, fault: Option<EngineFault>) -> fmt::Result {
    let mmu = |k: MmuKind| if k == MmuKind::Dram { "dmmu" } else { "pmmu" };
    match fault {
        None => writeln!(f, "{}none", what),
        Some(EngineFault::Page {
            mmu: k,
            asid,
            va,
            engine,
        }) => writeln!(
            f,
            "{}page fault: {} asid {} va {:#x} engine {}",
            what,
            mmu(k),
            asid,
            va,
            engine
        ),
        Some(EngineFault::Iommu {
            bus,
            asid,
            va,
            engine,
        }) => writeln!(
            f,
            "{}iommu fault: bus {:#x} (asid {} va {:#x}) engine {}",
            what, bus, asid, va, engine
        ),
        Some(EngineFault::Decode { addr, engine }) => {
            writeln!(f, "{}decode error: {:#x} engine {}", what, addr, engine)
        }
        Some(EngineFault::Razwi {
            addr,
            engine,
            access,
        }) => writeln!(
            f,
            "{}decode error: {:#x} engine {} ({:?})",
            what, addr, engine, access
        ),
        Some(EngineFault::Backing { addr, engine }) => {
            writeln!(f, "{}no backing: {:#x} engine {}", what, addr, engine)
        }
    }
}

fn show_stlb(dev: &Arc<HlDevice>, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    let Some(sim) = dev.simulated() else {
        return writeln!(f, "not a simulated device: its STLBs are its own");
    };
    let (st, (valid, stale)) = sim.stlb_stats();
    writeln!(f, "sets x ways:      {} x {}", stlb::SETS, stlb::WAYS)?;
    writeln!(f, "entries:          {} valid, {} stale", valid, stale)?;
    writeln!(f, "hits:             {}", st.hits)?;
    writeln!(f, "misses:           {}", st.misses)?;
    writeln!(
        f,
        "walks:            {} ({} found no page)",
        st.walks, st.walk_faults
    )?;
    writeln!(f, "evictions:        {}", st.evictions)?;
    writeln!(f, "invalidated:      {} entries", st.invalidated)?;
    writeln!(f, "skipped:          {} invalidations", st.skipped)?;
    writeln!(f, "left stale:       {} entries", st.left_stale)?;
    writeln!(f, "stale hits:       {}", st.stale_hits)?;
    writeln!(f, "iommu mapped:     {} pages", sim.dma_mapped_pages())?;
    for asid in 0..crate::asic::MAX_ASID {
        let at = |k| sim.hop0(k, asid).unwrap_or(0);
        writeln!(
            f,
            "hop0 asid {}:      pmmu {:#x}, dmmu {:#x}",
            asid,
            at(MmuKind::Host),
            at(MmuKind::Dram)
        )?;
    }
    let log = sim.engine_faults();
    writeln!(
        f,
        "faults:           {} page, {} iommu, {} other",
        log.page, log.iommu, log.other
    )?;
    show_fault(f, "first fault:      ", log.first)?;
    show_fault(f, "last fault:       ", log.last)?;
    match log.last_stale {
        None => writeln!(f, "last stale use:   none"),
        Some(u) => writeln!(
            f,
            "last stale use:   asid {} va {:#x} -> {}",
            u.asid,
            u.va,
            TargetText(u.target)
        ),
    }
}

/// Where an engine access lands, as text: `dram 0x..`, `sram 0x..`, `host 0x..`.
struct TargetText(Target);

impl core::fmt::Display for TargetText {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self.0 {
            Target::Dram(a) => write!(f, "dram {:#x}", a),
            Target::Sram(a) => write!(f, "sram {:#x}", a),
            Target::Host(a) => write!(f, "host {:#x}", a),
        }
    }
}

/// What reading `engine` shows: the bytes of the engine read chosen by
/// `read ASID VA LEN`, read now, or the fault.
fn show_engine(p: &DeviceFiles, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    let [asid, va, len] = &p.engine;
    let (asid, va, len) = (asid.load(Relaxed), va.load(Relaxed), len.load(Relaxed));
    let (Ok(asid), Ok(len)) = (u32::try_from(asid), usize::try_from(len)) else {
        return Err(fmt::Error);
    };
    if len == 0 {
        return writeln!(f, "(write `read ASID VA LEN` or `write ASID VA HEX`)");
    }
    let mut buf = KVec::from_elem(0u8, len, GFP_KERNEL).map_err(|_| fmt::Error)?;
    let who = EngineAccess::new(DEBUGFS_ENGINE, asid);
    let Some(sim) = p.dev.simulated() else {
        return writeln!(f, "not a simulated device: no engine access");
    };
    if let Ok(t) = sim.engine_translate(who, va) {
        writeln!(f, "{:#x} -> {}", va, TargetText(t))?;
    }
    match sim.engine_read(who, va, &mut buf) {
        Ok(()) => {
            write!(f, "{:#x}:", va)?;
            for b in buf.iter() {
                write!(f, "{:02x}", b)?;
            }
            writeln!(f)
        }
        Err(e) => show_fault(f, "", Some(e)),
    }
}

/// `read ASID VA LEN` chooses what reading `engine` shows (`LEN` at most
/// [`DRAM_PROBE_MAX`]); `write ASID VA HEX` stores the bytes through the
/// device's MMUs, `EFAULT` if the access faults (the fault is in `stlb`).
/// `ASID` decimal, `VA` hexadecimal.
fn write_engine(p: &DeviceFiles, text: &str) -> Result {
    let mut words = text.split_whitespace();
    let (Some(verb), Some(asid), Some(va), Some(arg), None) = (
        words.next(),
        words.next(),
        words.next(),
        words.next(),
        words.next(),
    ) else {
        return Err(EINVAL);
    };
    let asid: u32 = asid.parse().map_err(|_| EINVAL)?;
    let va = parse_hex_u64(va)?;
    match verb {
        "read" => {
            let len: u64 = arg.parse().map_err(|_| EINVAL)?;
            if len == 0 || len > DRAM_PROBE_MAX as u64 {
                return Err(EINVAL);
            }
            let [a, v, l] = &p.engine;
            a.store(u64::from(asid), Relaxed);
            v.store(va, Relaxed);
            l.store(len, Relaxed);
            Ok(())
        }
        "write" => {
            let who = EngineAccess::new(DEBUGFS_ENGINE, asid);
            p.dev
                .sim()?
                .engine_write(who, va, &parse_bytes(arg)?)
                .map_err(|_| EFAULT)
        }
        _ => Err(EINVAL),
    }
}
