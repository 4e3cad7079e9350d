// SPDX-License-Identifier: GPL-2.0

//! Upstream's debugfs ABI (`Documentation/ABI/testing/debugfs-driver-habanalabs`,
//! `common/debugfs.c`) in the DRM core's directory of the device,
//! `/sys/kernel/debug/accel/<parent device>/`, also reached as
//! `/sys/kernel/debug/habanalabs/hl<N>/` (the older path Habana's test
//! harness opens) and `/sys/kernel/debug/accel/<N>/` (libhlthunk's helper),
//! both symbolic links to it (`N` = the accel minor).
//!
//! Each file reads and writes as upstream's (see `ffi/debugfs.rs` for the
//! kinds of read): the `seq_file`s and the `x64` attributes render at a read
//! at offset 0; `data32`/`data64` read device memory at every read at offset
//! 0 (so a long-lived fd follows `addr`) and are at end of file at any other
//! offset; writes are parsed by the kernel's `kstrto*` rules on the bounded
//! prefix upstream copies, so a trailing newline and NUL are taken
//! ([`kstrto`]).
//!
//! | file | read | write |
//! |---|---|---|
//! | `addr` | `0x%016llx\n` | `kstrtoull(.., 0)` of the first 23 bytes |
//! | `data32` | `0x%08x\n` of the 32 bits at `addr`, at offset 0 | `kstrtouint(.., 16)`, stored at `addr` |
//! | `data64` | `0x%016llx\n` of the 64 bits at `addr`, at offset 0 | `kstrtoull(.., 16)`, stored at `addr` |
//! | `mmu` | the hop walk of the VA last written (ASID 0: the kernel context, which has no tables here; any other: the compute context) | `<asid> 0x<va>` (at most 49 bytes) |
//! | `mmu_error` | `EINVAL` until a mask was written, then empty (nothing to acknowledge) | `0x<mask>` |
//! | `userptr` | the open context's pinned host buffers | `EINVAL` |
//! | `userptr_lookup` | the DMA address of the user address written, per pinned buffer holding it | `kstrtoull(.., 16)` |
//! | `vm` | the open context's ASID, mappings, HW blocks, allocations and VA ranges | `EINVAL` |
//! | `command_buffers`, `command_submission`, `command_submission_jobs` | the open context's CBs, CSs in flight and their jobs ([`cs_files`]) | `EINVAL` |
//! | `clk_gate` | 0 bytes | accepted and ignored (as upstream) |
//! | `memory_scrub` | `EINVAL` | anything: write `memory_scrub_val` over the user DRAM (`EBUSY` while a compute context exists, `EIO` when not operational) |
//! | `memory_scrub_val` | `0x%016llx\n` | the scrub pattern, as `addr` |
//! | `dma_size` | `EINVAL` | `kstrtouint(.., 16)` size (1..128 MiB): read that much at `addr` (a DRAM VA of the open context or SRAM) into `data_dma`, by the simulated KDMA through the device's MMU model (STLB, hardware walk), as upstream's KDMA reads; `EINVAL` for a bad size or address, `EIO` when the read fails (no context, an unmapped page) |
//! | `data_dma` | the bytes the last `dma_size` read (a blob) | `EPERM` |
//!
//! While the device is in reset, `data32`/`data64` reads and writes and
//! `dma_size` writes do nothing and return 0, as upstream's.
//!
//! `data32`/`data64` follow `hl_access_mem` (debugfs.c:1091-1136): an address
//! in the DMMU, PMMU or PMMU-huge VA range must lie in a live mapping of the
//! open compute context and is translated by the page-walk oracle
//! ([`ContextVm::translate`]) through the context's tables (a DRAM VA reaches
//! the simulated DRAM, a host VA the pinned host page, which is accessed
//! under the context's mapping lock so it cannot be unpinned meanwhile); an
//! SRAM or DRAM physical address is accessed directly; anything else is
//! `EINVAL`. Differences: the access must be naturally aligned (so it never
//! crosses a page), and the DRAM the driver keeps for itself (page tables,
//! below the user DRAM base) is read-only here.

mod cs_files;
mod kstrto;

use crate::{
    asic::{MmuGeometry, VaSpan, SRAM_BASE_ADDR, SRAM_SIZE},
    device::HlDevice,
    ffi::{
        debugfs::{Dir, FileDef, Prepared, Read, Write, Wrote},
        pin::PinnedUserPages,
    },
    hw::{
        backend::{DeviceStatus, MmuKind},
        sim::engine_mem::EngineAccess,
    },
    mmu::walk::Translation,
    uapi::GAUDI2_ENGINE_ID_KDMA,
    vm::{context_vm::ContextVm, mapping_table::Backing, va_range::VaRangeType},
};
use kernel::{
    alloc::KVVec,
    fmt,
    new_mutex,
    page::PAGE_SIZE,
    prelude::*,
    str::CString,
    sync::{
        atomic::{Atomic, Relaxed},
        Arc, Mutex,
    }, //
};
use kstrto::{c_str, kstrtouint, kstrtoull, ATTR_SET_BUF, UINT_FROM_USER, ULL_FROM_USER};

/// What the files of one device share (upstream `struct hl_dbg_device_entry`).
pub(crate) struct AbiFiles {
    dev: Arc<HlDevice>,
    /// `data_dma`: what the last `dma_size` write read, shared with the
    /// open `data_dma` files.
    data_dma: Arc<Mutex<Option<Arc<KVVec<u8>>>>>,
    /// `addr`.
    addr: Atomic<u64>,
    /// `mmu`: the ASID and VA last written.
    mmu_asid: Atomic<u64>,
    mmu_va: Atomic<u64>,
    /// `mmu_error`: the capability mask last written.
    mmu_cap_mask: Atomic<u64>,
    /// `userptr_lookup`: the user address last written.
    userptr_lookup: Atomic<u64>,
}

/// A `seq_file` of upstream's without a `write` (`hl_debugfs_write`).
const NO_WRITE: Write<AbiFiles> = Write::Refuse(EINVAL);

/// Bytes `mmu_asid_va_write` and `mmu_ack_error_value_write` take
/// (`MMU_KBUF_SIZE - 1`; more is `EINVAL`).
const MMU_KBUF: usize = 49;

/// The files, in upstream's names and modes.
static ABI_FILES: [FileDef<AbiFiles>; 16] = [
    FileDef::new(
        c"addr",
        Read::Text(show_addr),
        Write::Raw(ATTR_SET_BUF, write_addr),
    )
    .with_mode(0o644),
    FileDef::new(
        c"data32",
        Read::Value(show_data32),
        Write::Raw(UINT_FROM_USER, write_data32),
    )
    .with_mode(0o644),
    FileDef::new(
        c"data64",
        Read::Value(show_data64),
        Write::Raw(ULL_FROM_USER, write_data64),
    )
    .with_mode(0o644),
    FileDef::new(
        c"mmu",
        Read::Text(show_mmu),
        Write::Raw(MMU_KBUF, write_mmu),
    )
    .with_mode(0o644),
    FileDef::new(
        c"mmu_error",
        Read::TryText(show_mmu_error),
        Write::Raw(MMU_KBUF, write_mmu_error),
    )
    .with_mode(0o644),
    FileDef::new(c"userptr", Read::Text(show_userptr), NO_WRITE).with_mode(0o644),
    FileDef::new(
        c"userptr_lookup",
        Read::Text(show_userptr_lookup),
        Write::Raw(ULL_FROM_USER, write_userptr_lookup),
    )
    .with_mode(0o644),
    FileDef::new(c"vm", Read::Text(show_vm), NO_WRITE).with_mode(0o644),
    FileDef::new(
        c"command_buffers",
        Read::Text(cs_files::show_command_buffers),
        NO_WRITE,
    )
    .with_mode(0o644),
    FileDef::new(
        c"command_submission",
        Read::Text(cs_files::show_command_submission),
        NO_WRITE,
    )
    .with_mode(0o644),
    FileDef::new(
        c"command_submission_jobs",
        Read::Text(cs_files::show_command_submission_jobs),
        NO_WRITE,
    )
    .with_mode(0o644),
    // `hl_clk_gate_read` returns 0, `hl_clk_gate_write` the count.
    FileDef::new(
        c"clk_gate",
        Read::Value(|_, _| Ok(())),
        Write::Raw(0, |_, _, _| Ok(Wrote::All)),
    )
    .with_mode(0o644),
    FileDef::new(
        c"memory_scrub",
        Read::None,
        Write::Raw(0, write_memory_scrub),
    )
    .with_mode(0o200),
    FileDef::new(
        c"memory_scrub_val",
        Read::Text(show_scrub_val),
        Write::Raw(ATTR_SET_BUF, write_scrub_val),
    )
    .with_mode(0o644),
    FileDef::new(
        c"dma_size",
        Read::None,
        Write::Raw(UINT_FROM_USER, write_dma_size),
    )
    .with_mode(0o200),
    FileDef::new(c"data_dma", Read::Blob(data_dma), Write::Refuse(EPERM)).with_mode(0o400),
];

/// The files of one device in the DRM core's directory; removed when dropped.
pub(crate) type AbiDebugfs = Dir<AbiFiles>;

/// The files of one device, allocated and not created yet.
pub(crate) type PreparedAbi = Prepared<AbiFiles>;

/// Allocate the files of `dev`; nothing is visible until they are created
/// in the DRM device's directory.
pub(crate) fn prepare(dev: &Arc<HlDevice>) -> Result<PreparedAbi> {
    let files = AbiFiles {
        dev: dev.clone(),
        data_dma: Arc::pin_init(new_mutex!(None), GFP_KERNEL)?,
        addr: Atomic::new(0),
        mmu_asid: Atomic::new(0),
        mmu_va: Atomic::new(0),
        mmu_cap_mask: Atomic::new(0),
        userptr_lookup: Atomic::new(0),
    };
    Prepared::new(CString::try_from_fmt(fmt!("unused"))?, files, &ABI_FILES)
}

/// Whether the device is in reset (upstream `hdev->reset_info.in_reset`,
/// which `hl_device_status` reports as these two states).
fn in_reset(dev: &HlDevice) -> bool {
    matches!(
        dev.status(),
        DeviceStatus::InReset | DeviceStatus::InResetAfterDeviceRelease
    )
}

/// `debugfs_create_x64`'s format.
fn show_addr(p: &AbiFiles, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    writeln!(f, "0x{:016x}", p.addr.load(Relaxed))
}

/// `addr` is upstream's `debugfs_create_x64`: `simple_attr_write`, base 0.
fn write_addr(p: &AbiFiles, text: &[u8], _count: usize) -> Result<Wrote> {
    p.addr.store(kstrtoull(text, 0)?, Relaxed);
    Ok(Wrote::All)
}

fn show_scrub_val(p: &AbiFiles, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    writeln!(f, "0x{:016x}", p.dev.memory_scrub_val.load(Relaxed))
}

fn write_scrub_val(p: &AbiFiles, text: &[u8], _count: usize) -> Result<Wrote> {
    p.dev.memory_scrub_val.store(kstrtoull(text, 0)?, Relaxed);
    Ok(Wrote::All)
}

/// `hl_memory_scrub`: whatever is written (upstream does not read it),
/// scrub (see [`HlDevice::scrub_dram`]).
fn write_memory_scrub(p: &AbiFiles, _text: &[u8], _count: usize) -> Result<Wrote> {
    let r = p.dev.scrub_dram(p.dev.memory_scrub_val.load(Relaxed));
    if r == Err(EBUSY) {
        hl_err!("device {}: can't scrub dram, context exist\n", p.dev.index);
    }
    r.map(|()| Wrote::All)
}

/// The largest `dma_size` (`SZ_128M`, debugfs.c:1267).
const MAX_DMA_SIZE: u64 = 128 << 20;

/// `hl_dma_size_write` (debugfs.c:1245-1300) with `gaudi2_debugfs_read_dma`:
/// a hexadecimal `u32` size; the read at `addr` replaces `data_dma`.
fn write_dma_size(p: &AbiFiles, text: &[u8], _count: usize) -> Result<Wrote> {
    if in_reset(&p.dev) {
        return Ok(Wrote::Nothing);
    }
    let size = u64::from(kstrtouint(text, 16)?);
    let addr = p.addr.load(Relaxed);
    if size == 0 || size > MAX_DMA_SIZE {
        hl_err!("DMA read failed. size {:#x} not in 1..=128MB\n", size);
        return Err(EINVAL);
    }
    let internal = [
        p.dev.asic.dram_va,
        VaSpan::new(SRAM_BASE_ADDR, SRAM_BASE_ADDR + SRAM_SIZE),
    ];
    if !internal.iter().any(|s| s.contains_area(addr, size)) {
        hl_err!("DMA read failed. Invalid {:#012x} + {:#010x}\n", addr, size);
        return Err(EINVAL);
    }
    // The previous blob goes first, as upstream frees it before reading.
    *p.data_dma.lock() = None;
    let len = usize::try_from(size).map_err(|_| EINVAL)?;
    let mut blob = KVVec::from_elem(0u8, len, GFP_KERNEL)?;
    if read_internal(&p.dev, addr, &mut blob).is_err() {
        hl_err!("Failed to DMA from {:#012x}\n", addr);
        return Err(EIO);
    }
    *p.data_dma.lock() = Some(Arc::new(blob, GFP_KERNEL)?);
    Ok(Wrote::All)
}

fn data_dma(p: &AbiFiles) -> Option<Arc<KVVec<u8>>> {
    p.data_dma.lock().clone()
}

/// What upstream's KDMA read under the compute context reaches. On a PCI
/// device, the device's KDMA by its registers (`hw/pci/kdma.rs`; an
/// unmapped page times out, `ETIMEDOUT`). On a simulated one, read by
/// the simulated KDMA ([`GAUDI2_ENGINE_ID_KDMA`]) as the engines read: SRAM
/// by address; a DRAM VA with the context's ASID through the HMMU's STLB
/// and hardware walk (not the page-walk oracle), so it sees what an engine
/// sees, a skipped invalidation included. A DRAM VA without a compute
/// context is `EINVAL`; an unmapped page `EFAULT` (the KDMA's MMU fault,
/// recorded in the device's engine-fault log like any engine's).
/// O(size / 4 KiB x (ways + hops on a miss)).
fn read_internal(dev: &HlDevice, addr: u64, buf: &mut [u8]) -> Result {
    let asid = if dev.asic.dram_va.contains_area(addr, 1) {
        dev.state.lock().active_vm.as_ref().ok_or(EINVAL)?.asid
    } else {
        0
    };
    match (dev.simulated(), dev.pci()) {
        (Some(sim), _) => sim
            .engine_read(EngineAccess::new(GAUDI2_ENGINE_ID_KDMA, asid), addr, buf)
            .map_err(|_| EFAULT),
        // The device's KDMA by its registers (`hw/pci/kdma.rs`).
        (None, Some(pci)) => pci.kdma_read(asid, addr, buf),
        (None, None) => Err(ENODEV),
    }
}

/// `hl_data_read32`, at offset 0 (the file is a value: see `ffi/debugfs.rs`).
fn show_data32(p: &AbiFiles, f: &mut fmt::Formatter<'_>) -> Result {
    if in_reset(&p.dev) {
        return Ok(());
    }
    let mut b = [0u8; 4];
    access_mem(&p.dev, p.addr.load(Relaxed), Access::Read(&mut b))?;
    writeln!(f, "0x{:08x}", u32::from_le_bytes(b)).map_err(|_| ENOMEM)
}

/// `hl_data_write32`: `kstrtouint_from_user(.., 16)`.
fn write_data32(p: &AbiFiles, text: &[u8], _count: usize) -> Result<Wrote> {
    if in_reset(&p.dev) {
        return Ok(Wrote::Nothing);
    }
    let v = kstrtouint(text, 16)?;
    let at = p.addr.load(Relaxed);
    access_mem(&p.dev, at, Access::Write(&v.to_le_bytes())).map(|()| Wrote::All)
}

/// `hl_data_read64`, at offset 0.
fn show_data64(p: &AbiFiles, f: &mut fmt::Formatter<'_>) -> Result {
    if in_reset(&p.dev) {
        return Ok(());
    }
    let mut b = [0u8; 8];
    access_mem(&p.dev, p.addr.load(Relaxed), Access::Read(&mut b))?;
    writeln!(f, "0x{:016x}", u64::from_le_bytes(b)).map_err(|_| ENOMEM)
}

/// `hl_data_write64`: `kstrtoull_from_user(.., 16)`.
fn write_data64(p: &AbiFiles, text: &[u8], _count: usize) -> Result<Wrote> {
    if in_reset(&p.dev) {
        return Ok(Wrote::Nothing);
    }
    let v = kstrtoull(text, 16)?;
    let at = p.addr.load(Relaxed);
    access_mem(&p.dev, at, Access::Write(&v.to_le_bytes())).map(|()| Wrote::All)
}

/// One access of `data32`/`data64`.
pub(crate) enum Access<'a> {
    /// Read into the buffer.
    Read(&'a mut [u8]),
    /// Write the bytes.
    Write(&'a [u8]),
}

impl Access<'_> {
    fn len(&self) -> usize {
        match self {
            Self::Read(b) => b.len(),
            Self::Write(b) => b.len(),
        }
    }
}

/// `hl_access_mem` (debugfs.c:1091-1136) on the simulated Gaudi2: see the
/// module documentation. `EINVAL` for a misaligned or refused address.
pub(crate) fn access_mem(dev: &HlDevice, addr: u64, acc: Access<'_>) -> Result {
    let len = acc.len() as u64;
    if len == 0 || addr % len != 0 {
        return Err(EINVAL);
    }
    let p = &dev.asic;
    if [p.dram_va, p.host_va, p.host_huge_va]
        .iter()
        .any(|s| s.contains_area(addr, 1))
    {
        let vm = dev.state.lock().active_vm.clone().ok_or(EINVAL)?;
        return access_va(&vm, addr, acc);
    }
    let backend = dev.backend();
    if VaSpan::new(SRAM_BASE_ADDR, SRAM_BASE_ADDR + SRAM_SIZE).contains_area(addr, len) {
        return match acc {
            Access::Read(b) => backend.sram_read(addr, b),
            Access::Write(d) => backend.sram_write(addr, d),
        };
    }
    if VaSpan::new(p.dram_base, p.dram_end()).contains_area(addr, len) {
        return match acc {
            Access::Read(b) => backend.dram_read(addr, b),
            // The driver's own DRAM (page tables) is not for writing.
            Access::Write(_) if addr < p.dram_user_base => Err(EPERM),
            Access::Write(d) => backend.dram_write(addr, d),
        };
    }
    Err(EINVAL)
}

/// The mapping of `vm` holding `[addr, addr + len)` (upstream
/// `device_va_to_pa`'s scan of `mem_hash`): its first VA and whether it maps
/// host memory. O(n) in the mappings, as upstream.
fn live_mapping(vm: &ContextVm, addr: u64, len: u64) -> Option<(u64, bool)> {
    let maps = vm.mappings.lock();
    let (_, m) = maps
        .iter()
        .find(|(_, m)| VaSpan::new(m.va, m.va.saturating_add(m.size)).contains_area(addr, len))?;
    Some((m.va, matches!(m.backing(), Some(Backing::Host { .. }))))
}

/// A VA of the open context: check the mapping, walk the tables, access
/// what the walk reaches.
fn access_va(vm: &ContextVm, addr: u64, acc: Access<'_>) -> Result {
    let len = acc.len() as u64;
    let (first, host) = live_mapping(vm, addr, len).ok_or(EINVAL)?;
    let Translation { pa, .. } = vm.translate(addr).map_err(|_| EINVAL)?;
    let backend = vm.dev.backend();
    if !host {
        return match acc {
            Access::Read(b) => backend.dram_read(pa, b),
            Access::Write(d) => backend.dram_write(pa, d),
        };
    }
    // The host page is touched under the mapping lock, after checking that
    // the mapping is still the one walked: it cannot be unpinned meanwhile.
    let maps = vm.mappings.lock();
    let (_, m) = maps.iter().find(|(_, m)| m.va == first).ok_or(EINVAL)?;
    let Some(Backing::Host { pinned, .. }) = m.backing() else {
        return Err(EINVAL);
    };
    let page = PAGE_SIZE as u64;
    let idx = usize::try_from((addr - first) / page).map_err(|_| EINVAL)?;
    let off = usize::try_from(addr % page).map_err(|_| EINVAL)?;
    // The walk's leaf is a bus address: physical on the simulated device,
    // an IOVA on PCI (where the IOMMU says which page it is).
    let phys = backend.host_phys(pa).ok_or(EINVAL)?;
    if pinned.phys(idx).and_then(|ph| ph.checked_add(off as u64)) != Some(phys) {
        return Err(EINVAL);
    }
    match acc {
        Access::Read(b) => pinned.read_page(idx, off, b),
        Access::Write(d) => pinned.write_page(idx, off, d),
    }
}

/// `mmu_show` (debugfs.c:420-474): the walk of the VA last written. ASID 0
/// names the kernel context, which has no page tables here (nothing shown,
/// as upstream shows for a VA its kernel context does not map); any other
/// ASID names the compute context, as upstream's `hl_get_compute_ctx` (the
/// ASID written is only printed). Nothing without a compute context or for
/// an unmapped VA. Per hop of the walk: its address, the address of the PTE
/// the walk read in it and that PTE. A DRAM VA the device scrambles shows
/// upstream's scrambled line (both physical addresses are the oracle's).
fn show_mmu(p: &AbiFiles, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    let (asid, va) = (p.mmu_asid.load(Relaxed), p.mmu_va.load(Relaxed));
    if asid == 0 {
        return Ok(());
    }
    let Some(vm) = p.dev.state.lock().active_vm.clone() else {
        return Ok(());
    };
    let Some(w) = walk_with_ptes(&vm, va) else {
        return Ok(());
    };
    if w.sva != va {
        writeln!(
            f,
            "asid: {}, virt_addr: 0x{:x}, scrambled virt_addr: 0x{:x},\nphys_addr: 0x{:x}, scrambled_phys_addr: 0x{:x}",
            asid, va, w.sva, w.pa, w.pa
        )?;
    } else {
        writeln!(
            f,
            "asid: {}, virt_addr: 0x{:x}, phys_addr: 0x{:x}",
            asid, va, w.pa
        )?;
    }
    for (i, (hop, pte_addr, pte)) in w.hops.iter().take(w.used).enumerate() {
        writeln!(f, "hop{}_addr: 0x{:x}", i, hop)?;
        writeln!(f, "hop{}_pte_addr: 0x{:x}", i, pte_addr)?;
        writeln!(f, "hop{}_pte: 0x{:x}", i, pte)?;
    }
    Ok(())
}

/// A walk as `mmu` shows it (upstream `struct hl_mmu_hop_info`).
struct HopWalk {
    /// The VA the tables are indexed by (scrambled for the DMMU).
    sva: u64,
    /// The physical address reached.
    pa: u64,
    /// Per hop: its address, the PTE's address and the PTE.
    hops: [(u64, u64, u64); 6],
    /// Hops used, the leaf's included.
    used: usize,
}

/// Walk `va` through `vm`'s tables with the page-walk oracle and read the
/// PTE of each hop, all under the context's page-table lock (so an UNMAP
/// changes none of them meanwhile). `None` for an unmapped VA. O(hops).
fn walk_with_ptes(vm: &ContextVm, va: u64) -> Option<HopWalk> {
    let dram = vm.range_type(va, 1) == Some(VaRangeType::Dram);
    let dmmu = &vm.dev.mmu;
    let (kind, geo, sva) = if dram {
        (
            MmuKind::Dram,
            &MmuGeometry::DMMU,
            dmmu.scrambler.scramble(va),
        )
    } else {
        (MmuKind::Host, &MmuGeometry::PMMU, va)
    };
    let tables = vm.mmu.lock();
    let t: Translation = tables.translate(dmmu, kind, va).ok()?;
    let mut hops = [(0u64, 0u64, 0u64); 6];
    for (lvl, slot) in hops.iter_mut().enumerate().take(t.leaf + 1) {
        let hop = *t.hops.get(lvl)?;
        let at = hop.checked_add(geo.pte_index(lvl, sva)?.checked_mul(8)?)?;
        let pte = if dram {
            dmmu.backend().read_pte(at)
        } else {
            dmmu.hr_hops.lock().read(at)
        };
        *slot = (hop, at, pte.ok()?);
    }
    drop(tables);
    Some(HopWalk {
        sva,
        pa: t.pa,
        hops,
        used: t.leaf + 1,
    })
}

/// `mmu_asid_va_write` (debugfs.c:476-514): at most 49 bytes, `<asid>
/// 0x<va>`: a `kstrtouint(.., 10)` ASID, one space, `0x` and a
/// `kstrtoull(.., 16)` VA (a trailing newline and NUL are fine); anything
/// else `EINVAL`. As upstream, the ASID is stored as soon as it parses.
fn write_mmu(p: &AbiFiles, text: &[u8], count: usize) -> Result<Wrote> {
    if count > MMU_KBUF {
        return Err(EINVAL);
    }
    let s = c_str(text);
    let space = s.iter().position(|&b| b == b' ').ok_or(EINVAL)?;
    let (asid, va) = (
        s.get(..space).ok_or(EINVAL)?,
        s.get(space + 1..).ok_or(EINVAL)?,
    );
    let asid = kstrtouint(asid, 10).map_err(|_| EINVAL)?;
    p.mmu_asid.store(u64::from(asid), Relaxed);
    let va = va.strip_prefix(b"0x").ok_or(EINVAL)?;
    p.mmu_va
        .store(kstrtoull(va, 16).map_err(|_| EINVAL)?, Relaxed);
    Ok(Wrote::All)
}

/// `mmu_ack_error` (debugfs.c:516-535): `EINVAL` with no mask; the
/// simulation has no MMU error to acknowledge.
fn show_mmu_error(p: &AbiFiles, _f: &mut fmt::Formatter<'_>) -> Result {
    if p.mmu_cap_mask.load(Relaxed) == 0 {
        return Err(EINVAL);
    }
    Ok(())
}

/// `mmu_ack_error_value_write` (debugfs.c:537-568): at most 49 bytes, `0x`
/// and a `kstrtoull(.., 16)` mask; anything else `EINVAL`.
fn write_mmu_error(p: &AbiFiles, text: &[u8], count: usize) -> Result<Wrote> {
    if count > MMU_KBUF || !c_str(text).starts_with(b"0x") {
        return Err(EINVAL);
    }
    let mask = kstrtoull(text, 16).map_err(|_| EINVAL)?;
    p.mmu_cap_mask.store(mask, Relaxed);
    Ok(Wrote::All)
}

/// A row made by `row` for each pinned host buffer of the open context that
/// it accepts: copied out under the mapping lock into a buffer sized before
/// it (rows added meanwhile are left out), to be formatted after.
fn host_rows<R>(
    p: &AbiFiles,
    row: impl Fn(&PinnedUserPages) -> Option<R>,
) -> core::result::Result<KVVec<R>, fmt::Error> {
    let Some(vm) = p.dev.state.lock().active_vm.clone() else {
        return Ok(KVVec::new());
    };
    let n = vm.mappings.lock().len();
    let mut rows = KVVec::with_capacity(n, GFP_KERNEL).map_err(|_| fmt::Error)?;
    for (_, m) in vm.mappings.lock().iter() {
        if let Some(r) = match m.backing() {
            Some(Backing::Host { pinned, .. }) => row(pinned),
            _ => None,
        } {
            let _ = rows.push_within_capacity(r);
        }
    }
    Ok(rows)
}

/// `userptr_show` (debugfs.c:204-233): the open context's pinned buffers
/// (copied out under the lock into rows sized before it, formatted after).
fn show_userptr(p: &AbiFiles, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    let rows = host_rows(p, |pinned| Some((pinned.pid, pinned.addr, pinned.size)))?;
    if rows.is_empty() {
        return Ok(());
    }
    writeln!(f)?;
    writeln!(
        f,
        " pid      user virtual address     size             dma dir"
    )?;
    writeln!(
        f,
        "----------------------------------------------------------"
    )?;
    for (pid, addr, size) in rows.iter() {
        writeln!(
            f,
            " {:<7}  0x{:<14x}      {:<10}    {:<30}",
            pid, addr, size, "DMA_BIDIRECTIONAL"
        )?;
    }
    writeln!(f)
}

/// `userptr_lookup_write`: `kstrtoull_from_user(.., 16)`.
fn write_userptr_lookup(p: &AbiFiles, text: &[u8], _count: usize) -> Result<Wrote> {
    p.userptr_lookup.store(kstrtoull(text, 16)?, Relaxed);
    Ok(Wrote::All)
}

/// `userptr_lookup_show` (debugfs.c:350-400): for each pinned buffer of the
/// open context holding the address written, its DMA (here physical)
/// address, the pid and the buffer.
fn show_userptr_lookup(p: &AbiFiles, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    let at = p.userptr_lookup.load(Relaxed);
    let page = PAGE_SIZE as u64;
    let rows = host_rows(p, |pinned| {
        if at < pinned.addr || at - pinned.addr >= pinned.size {
            return None;
        }
        let idx = usize::try_from(at / page - pinned.addr / page).ok()?;
        let pa = pinned.phys(idx)?;
        Some((
            pa.checked_add(at % page)?,
            pinned.pid,
            pinned.addr,
            pinned.size,
        ))
    })?;
    if rows.is_empty() {
        return Ok(());
    }
    writeln!(f)?;
    writeln!(
        f,
        " user virtual address         dma address       pid        region start     region size"
    )?;
    writeln!(
        f,
        "---------------------------------------------------------------------------------------"
    )?;
    for (dma, pid, addr, size) in rows.iter() {
        writeln!(
            f,
            " 0x{:<18x}  0x{:<16x}  {:<8}  0x{:<16x} {:<12}",
            at, dma, pid, addr, size
        )?;
    }
    writeln!(f)
}

/// `vm_show` (debugfs.c:235-348) for the open compute context (the only
/// one with mappings here; the kernel context has none): its ASID and
/// mappings (VA as returned to the user, size, handle of device memory; host
/// mappings have none), its HW-block mappings, its allocations with their
/// pages' physical addresses, and its VA ranges' free blocks. Each table is
/// copied out under its lock and formatted after.
fn show_vm(p: &AbiFiles, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    let Some(vm) = p.dev.state.lock().active_vm.clone() else {
        return Ok(());
    };
    show_vm_mappings(&vm, f)?;
    show_vm_hw_blocks(&vm, f)?;
    show_vm_allocations(p, &vm, f)?;
    show_vm_va_ranges(&vm, f)?;
    writeln!(f)
}

fn show_vm_mappings(vm: &ContextVm, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    let n = vm.mappings.lock().len();
    let mut rows: KVVec<(u64, u64, Option<u32>)> =
        KVVec::with_capacity(n, GFP_KERNEL).map_err(|_| fmt::Error)?;
    for (va, m) in vm.mappings.lock().iter() {
        let row = match m.backing() {
            Some(Backing::Host { pinned, .. }) => (*va, pinned.size, None),
            Some(Backing::Dram { handle, pack }) => (
                *va,
                pack.page_size.saturating_mul(pack.npages),
                Some(*handle),
            ),
            // Upstream maps CBs outside its mapping hash: not listed.
            Some(Backing::Cb { .. }) | None => continue,
        };
        // Rows added since they were counted are left out.
        let _ = rows.push_within_capacity(row);
    }
    writeln!(
        f,
        "\n\n----------------------------------------------------"
    )?;
    writeln!(f, "----------------------------------------------------\n")?;
    writeln!(f, "ctx asid: {}\n\nmappings:\n", vm.asid)?;
    writeln!(f, "    virtual address        size          handle")?;
    writeln!(f, "----------------------------------------------------")?;
    for (va, size, handle) in rows.iter() {
        match handle {
            None => writeln!(f, "    0x{:<14x}      {:<10}", va, size)?,
            Some(h) => writeln!(f, "    0x{:<14x}      {:<10}       {:<4}", va, size, h)?,
        }
    }
    Ok(())
}

fn show_vm_hw_blocks(vm: &ContextVm, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    let n = vm.hw_blocks.lock().iter().count();
    if n == 0 {
        return Ok(());
    }
    let mut rows = KVVec::with_capacity(n, GFP_KERNEL).map_err(|_| fmt::Error)?;
    for r in vm.hw_blocks.lock().iter() {
        let _ = rows.push_within_capacity(*r);
    }
    writeln!(f, "\nhw_block mappings:\n")?;
    writeln!(
        f,
        "    virtual address    block size    mapped size    HW block id"
    )?;
    writeln!(
        f,
        "---------------------------------------------------------------"
    )?;
    for r in rows.iter() {
        // Blocks map whole here: the block and mapped sizes are equal.
        writeln!(
            f,
            "    0x{:<14x}   {:<6}        {:<6}             {:<9}",
            r.va, r.size, r.size, r.id
        )?;
    }
    Ok(())
}

/// The context's allocations: references to the page packs are taken under
/// the handle table's lock and their pages listed after.
fn show_vm_allocations(p: &AbiFiles, vm: &ContextVm, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    let mut packs = KVVec::new();
    {
        let table = p.dev.vm.handles.lock();
        let mut n = 0usize;
        table.for_each(|_, e| n += usize::from(e.pack.asid == vm.asid));
        packs.reserve(n, GFP_KERNEL).map_err(|_| fmt::Error)?;
        table.for_each(|h, e| {
            if e.pack.asid == vm.asid {
                let _ = packs.push_within_capacity((h, e.pack.clone()));
            }
        });
    }
    if packs.is_empty() {
        return Ok(());
    }
    writeln!(f, "\n\nallocations:")?;
    for (h, pack) in packs.iter() {
        writeln!(f, "\nhandle: {}\npage size: {}\n", h, pack.page_size)?;
        writeln!(f, "   physical address\n---------------------")?;
        for j in 0..pack.npages {
            writeln!(f, "    0x{:<14x}", pack.page_addr(j).unwrap_or(0))?;
        }
    }
    Ok(())
}

/// Each VA range's free blocks, `start - end (size)` with `end` inclusive
/// as upstream's `hl_vm_va_block` keeps it, in upstream's range order.
fn show_vm_va_ranges(vm: &ContextVm, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    writeln!(f, "\nVA ranges:\n")?;
    for (i, kind) in VaRangeType::ALL.iter().enumerate() {
        let range = vm.range(*kind);
        let n = range.lock().free_blocks();
        let mut rows = KVVec::with_capacity(n, GFP_KERNEL).map_err(|_| fmt::Error)?;
        range.lock().for_each_block(|start, end, free| {
            if free {
                let _ = rows.push_within_capacity((start, end));
            }
        });
        writeln!(f, "   va_range {}\n---------------------", i)?;
        for &(start, end) in rows.iter() {
            writeln!(
                f,
                "{:>#16x} - {:>#16x} ({:#x})",
                start,
                end - 1,
                end - start
            )?;
        }
        writeln!(f)?;
    }
    Ok(())
}

#[kunit_tests(hlrs_debugfs_abi)]
mod tests {
    use super::*;
    use crate::{
        asic::AsicProperties,
        context::Context,
        vm::{device_memory::alloc_device_memory, mapping::map_device_va},
    };

    fn read64(d: &HlDevice, addr: u64) -> Result<u64> {
        let mut b = [0u8; 8];
        access_mem(d, addr, Access::Read(&mut b))?;
        Ok(u64::from_le_bytes(b))
    }

    fn write64(d: &HlDevice, addr: u64, v: u64) -> Result {
        access_mem(d, addr, Access::Write(&v.to_le_bytes()))
    }

    #[test]
    fn dram_va_sram_and_refusals() -> Result {
        let d = HlDevice::new(0, AsicProperties::gaudi2(6, 0)?)?;
        let page = d.asic.dram_page_size;
        // No context: a VA is refused; SRAM and user DRAM are reachable.
        assert_eq!(read64(&d, d.asic.dram_va.start), Err(EINVAL));
        write64(&d, SRAM_BASE_ADDR + 8, 0x55)?;
        assert_eq!(read64(&d, SRAM_BASE_ADDR + 8)?, 0x55);
        let ctx = Context::new(d.clone(), 1)?;
        let vm = ctx.vm();
        let h = alloc_device_memory(vm, 2 * page, 0)?;
        let va = map_device_va(vm, u64::from(h), 0, 0)?;
        write64(&d, va + page + 16, 0xabcd)?;
        assert_eq!(read64(&d, va + page + 16)?, 0xabcd);
        // The oracle's physical address holds it.
        let pa = vm.translate(va + page + 16).map_err(|_| EINVAL)?.pa;
        assert_eq!(read64(&d, pa)?, 0xabcd);
        let mut b = [0u8; 4];
        d.backend().dram_read(pa, &mut b)?;
        assert_eq!(u32::from_le_bytes(b), 0xabcd);
        // Past the mapping, misaligned, wild, the driver's own DRAM.
        assert_eq!(read64(&d, va + 2 * page), Err(EINVAL));
        assert_eq!(read64(&d, va + 4), Err(EINVAL));
        assert_eq!(read64(&d, 0x1234), Err(EINVAL));
        assert_eq!(read64(&d, u64::MAX - 7), Err(EINVAL));
        assert_eq!(write64(&d, d.asic.dram_base, 1), Err(EPERM));
        assert!(read64(&d, d.asic.dram_base).is_ok());
        // A new context finds SRAM zeroed.
        drop(ctx);
        assert_eq!(read64(&d, SRAM_BASE_ADDR + 8)?, 0);
        Ok(())
    }

    #[test]
    fn dma_read_through_the_context_and_scrub() -> Result {
        let d = HlDevice::new(0, AsicProperties::gaudi2(6, 0)?)?;
        let page = d.asic.dram_page_size;
        d.backend()
            .sram_write(SRAM_BASE_ADDR + 4094, &[1, 2, 3, 4])?;
        let mut b = [0u8; 4];
        read_internal(&d, SRAM_BASE_ADDR + 4094, &mut b)?;
        assert_eq!(b, [1, 2, 3, 4]);
        // A DRAM VA needs the compute context.
        assert_eq!(read_internal(&d, d.asic.dram_va.start, &mut b), Err(EINVAL));
        let ctx = Context::new(d.clone(), 1)?;
        let vm = ctx.vm();
        // No scrub while a compute context exists.
        assert_eq!(d.scrub_dram(5), Err(EBUSY));
        let h = alloc_device_memory(vm, 2 * page, 0)?;
        let va = map_device_va(vm, u64::from(h), 0, 0)?;
        // Across the two pages (each somewhere else in DRAM).
        write64(&d, va + page - 8, 0x0807_0605_0403_0201)?;
        write64(&d, va + page, 0x100f_0e0d_0c0b_0a09)?;
        let mut both = [0u8; 16];
        read_internal(&d, va + page - 8, &mut both)?;
        assert_eq!(
            both,
            [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16]
        );
        // Past the mapping: the read faults.
        assert_eq!(read_internal(&d, va + 2 * page, &mut b), Err(EFAULT));
        drop(ctx);
        // Scrub: user DRAM reads as the pattern, the tables are kept.
        d.scrub_dram(0xdead_beef_0000_0001)?;
        assert_eq!(
            read64(&d, d.asic.dram_user_base + 8 * page)?,
            0xdead_beef_0000_0001
        );
        d.set_status(crate::hw::backend::DeviceStatus::Malfunction);
        assert_eq!(d.scrub_dram(0), Err(EIO));
        Ok(())
    }
}
