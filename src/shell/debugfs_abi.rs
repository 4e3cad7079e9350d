// SPDX-License-Identifier: GPL-2.0

//! Upstream's debugfs ABI (`Documentation/ABI/testing/debugfs-driver-habanalabs`,
//! `common/debugfs.c`) in the DRM core's directory of the device,
//! `/sys/kernel/debug/accel/<parent device>/`, also reached as
//! `/sys/kernel/debug/habanalabs/hl<N>/` (the older path Habana's test
//! harness opens) and `/sys/kernel/debug/accel/<N>/` (libhlthunk's helper),
//! both symbolic links to it (`N` = the accel minor).
//!
//! | file | read | write |
//! |---|---|---|
//! | `addr` | `0x%016llx` of the address | a hexadecimal address (`0x` optional) |
//! | `data32` | `0x%08x` at `addr` | a hexadecimal `u32`, stored at `addr` |
//! | `data64` | `0x%016llx` at `addr` | a hexadecimal `u64`, stored at `addr` |
//! | `mmu` | the hop walk of the VA last written | `<asid> 0x<va>` |
//! | `mmu_error` | `EINVAL` until a mask was written, then empty (nothing to acknowledge) | `0x<mask>` |
//! | `userptr` | the open context's pinned host buffers | - |
//! | `userptr_lookup` | the DMA address of the user address written, per pinned buffer holding it | a hexadecimal user address |
//! | `vm` | the open context's ASID and mappings (VA, size, handle) | - |
//! | `clk_gate` | empty | accepted and ignored (as upstream) |
//! | `memory_scrub` | - | anything: write `memory_scrub_val` over the user DRAM (`EBUSY` while a compute context exists, `EIO` when not operational) |
//! | `memory_scrub_val` | `0x%016llx` | the scrub pattern (`kstrtoull` base 0, as `debugfs_create_x64`) |
//! | `dma_size` | - | a hexadecimal size (1..128 MiB): read that much at `addr` (a DRAM VA of the open context or SRAM) into `data_dma`, by the simulated KDMA through the device's MMU model (STLB, hardware walk), as upstream's KDMA reads; `EINVAL` for a bad size or address, `EIO` when the read fails (no context, an unmapped page) |
//! | `data_dma` | the bytes the last `dma_size` read (a blob) | - |
//!
//! `data32`/`data64` follow `hl_access_mem` (debugfs.c:1091-1136): an address
//! in the DMMU, PMMU or PMMU-huge VA range must lie in a live mapping of the
//! open compute context and is translated by the page-walk oracle
//! ([`ContextVm::translate`]) through the context's tables (a DRAM VA reaches
//! the simulated DRAM, a host VA the pinned host page, which is accessed
//! under the context's mapping lock so it cannot be unpinned meanwhile); an
//! SRAM or DRAM physical address is accessed directly; anything else is
//! `EINVAL`. Differences: the access must be naturally aligned (so it never
//! crosses a page), the DRAM the driver keeps for itself (page tables,
//! below the user DRAM base) is read-only here, and a read that fails fails
//! the `open` (files are rendered at open, see `ffi/debugfs.rs`).

use crate::{
    asic::{VaSpan, SRAM_BASE_ADDR, SRAM_SIZE},
    device::HlDevice,
    ffi::{
        debugfs::{Dir, FileDef, Prepared},
        pin::PinnedUserPages,
    },
    hw::sim::engine_mem::EngineAccess,
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

/// What the files of one device share (upstream `struct hl_dbg_device_entry`).
pub(crate) struct AbiFiles {
    dev: Arc<HlDevice>,
    /// `memory_scrub_val` (upstream keeps it in `hl_device`).
    scrub_val: Atomic<u64>,
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

/// The files, in upstream's names and modes.
static ABI_FILES: [FileDef<AbiFiles>; 13] = [
    FileDef::rw(c"addr", show_addr, write_addr).with_mode(0o644),
    FileDef::rw_try(c"data32", show_data32, write_data32).with_mode(0o644),
    FileDef::rw_try(c"data64", show_data64, write_data64).with_mode(0o644),
    FileDef::rw(c"mmu", show_mmu, write_mmu).with_mode(0o644),
    FileDef::rw_try(c"mmu_error", show_mmu_error, write_mmu_error).with_mode(0o644),
    FileDef::ro(c"userptr", show_userptr).with_mode(0o644),
    FileDef::rw(c"userptr_lookup", show_userptr_lookup, write_userptr_lookup).with_mode(0o644),
    FileDef::ro(c"vm", show_vm).with_mode(0o644),
    FileDef::rw(c"clk_gate", |_, _| Ok(()), |_, _| Ok(())).with_mode(0o644),
    FileDef::rw(c"memory_scrub", |_, _| Ok(()), write_memory_scrub).with_mode(0o200),
    FileDef::rw(c"memory_scrub_val", show_scrub_val, write_scrub_val).with_mode(0o644),
    FileDef::rw(c"dma_size", |_, _| Ok(()), write_dma_size).with_mode(0o200),
    FileDef::blob(c"data_dma", data_dma),
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
        scrub_val: Atomic::new(0),
        data_dma: Arc::pin_init(new_mutex!(None), GFP_KERNEL)?,
        addr: Atomic::new(0),
        mmu_asid: Atomic::new(0),
        mmu_va: Atomic::new(0),
        mmu_cap_mask: Atomic::new(0),
        userptr_lookup: Atomic::new(0),
    };
    Prepared::new(CString::try_from_fmt(fmt!("unused"))?, files, &ABI_FILES)
}

/// Parse a hexadecimal number as `kstrtoull(.., 16, ..)` does: an optional
/// `0x`, at least one digit, nothing else (the text comes trimmed).
fn parse_hex(text: &str) -> Result<u64> {
    let hex = text
        .strip_prefix("0x")
        .or_else(|| text.strip_prefix("0X"))
        .unwrap_or(text);
    if hex.is_empty() || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(EINVAL);
    }
    u64::from_str_radix(hex, 16).map_err(|_| ERANGE)
}

/// Parse a number as `kstrtoull(.., 0, ..)` does (what the `x64` files of
/// `debugfs_create_x64` accept): an optional `+`, then `0x` hexadecimal, a
/// leading `0` octal, or decimal; nothing else (the text comes trimmed).
fn parse_base0(text: &str) -> Result<u64> {
    let t = text.strip_prefix('+').unwrap_or(text);
    let (digits, radix) = match t.get(..2) {
        Some("0x" | "0X") if t.len() > 2 => (t.get(2..).unwrap_or(""), 16),
        _ if t.len() > 1 && t.starts_with('0') => (t.get(1..).unwrap_or(""), 8),
        _ => (t, 10),
    };
    if digits.is_empty() || !digits.bytes().all(|b| (b as char).is_digit(radix)) {
        return Err(EINVAL);
    }
    u64::from_str_radix(digits, radix).map_err(|_| ERANGE)
}

fn show_addr(p: &AbiFiles, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    writeln!(f, "0x{:016x}", p.addr.load(Relaxed))
}

/// `addr` is upstream's `debugfs_create_x64`: base 0.
fn write_addr(p: &AbiFiles, text: &str) -> Result {
    p.addr.store(parse_base0(text)?, Relaxed);
    Ok(())
}

fn show_scrub_val(p: &AbiFiles, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    writeln!(f, "0x{:016x}", p.scrub_val.load(Relaxed))
}

fn write_scrub_val(p: &AbiFiles, text: &str) -> Result {
    p.scrub_val.store(parse_base0(text)?, Relaxed);
    Ok(())
}

/// `hl_memory_scrub`: whatever is written, scrub (see [`HlDevice::scrub_dram`]).
fn write_memory_scrub(p: &AbiFiles, _text: &str) -> Result {
    let r = p.dev.scrub_dram(p.scrub_val.load(Relaxed));
    if r == Err(EBUSY) {
        hl_err!("device {}: can't scrub dram, context exist\n", p.dev.index);
    }
    r
}

/// The largest `dma_size` (`SZ_128M`, debugfs.c:1267).
const MAX_DMA_SIZE: u64 = 128 << 20;

/// `hl_dma_size_write` (debugfs.c:1245-1300) with `gaudi2_debugfs_read_dma`:
/// a hexadecimal `u32` size; the read at `addr` replaces `data_dma`.
fn write_dma_size(p: &AbiFiles, text: &str) -> Result {
    let size = u32::try_from(parse_hex(text)?).map_err(|_| ERANGE)?;
    let size = u64::from(size);
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
    Ok(())
}

fn data_dma(p: &AbiFiles) -> Option<Arc<KVVec<u8>>> {
    p.data_dma.lock().clone()
}

/// What upstream's KDMA read under the compute context reaches, read by
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
    dev.sim
        .engine_read(EngineAccess::new(GAUDI2_ENGINE_ID_KDMA, asid), addr, buf)
        .map_err(|_| EFAULT)
}

fn show_data32(p: &AbiFiles, f: &mut fmt::Formatter<'_>) -> Result {
    let mut b = [0u8; 4];
    access_mem(&p.dev, p.addr.load(Relaxed), Access::Read(&mut b))?;
    writeln!(f, "0x{:08x}", u32::from_le_bytes(b)).map_err(|_| ENOMEM)
}

fn write_data32(p: &AbiFiles, text: &str) -> Result {
    let v = u32::try_from(parse_hex(text)?).map_err(|_| ERANGE)?;
    access_mem(
        &p.dev,
        p.addr.load(Relaxed),
        Access::Write(&v.to_le_bytes()),
    )
}

fn show_data64(p: &AbiFiles, f: &mut fmt::Formatter<'_>) -> Result {
    let mut b = [0u8; 8];
    access_mem(&p.dev, p.addr.load(Relaxed), Access::Read(&mut b))?;
    writeln!(f, "0x{:016x}", u64::from_le_bytes(b)).map_err(|_| ENOMEM)
}

fn write_data64(p: &AbiFiles, text: &str) -> Result {
    let v = parse_hex(text)?;
    access_mem(
        &p.dev,
        p.addr.load(Relaxed),
        Access::Write(&v.to_le_bytes()),
    )
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
    if pinned.phys(idx).and_then(|ph| ph.checked_add(off as u64)) != Some(pa) {
        return Err(EINVAL);
    }
    match acc {
        Access::Read(b) => pinned.read_page(idx, off, b),
        Access::Write(d) => pinned.write_page(idx, off, d),
    }
}

/// `mmu_show` (debugfs.c:420-474): the walk of the VA last written, in the
/// context of the ASID written (only the open compute context has tables
/// here; the kernel context has none). Nothing for an unmapped VA.
fn show_mmu(p: &AbiFiles, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    let (asid, va) = (p.mmu_asid.load(Relaxed), p.mmu_va.load(Relaxed));
    let Some(vm) = p.dev.state.lock().active_vm.clone() else {
        return Ok(());
    };
    if u64::from(vm.asid) != asid {
        return Ok(());
    }
    let Ok(t) = vm.translate(va) else {
        return Ok(());
    };
    writeln!(
        f,
        "asid: {}, virt_addr: 0x{:x}, phys_addr: 0x{:x}",
        asid, va, t.pa
    )?;
    for (i, hop) in t.hops.iter().take(t.leaf + 1).enumerate() {
        writeln!(f, "hop{}_addr: 0x{:x}", i, hop)?;
    }
    Ok(())
}

/// `<asid> 0x<va>`: decimal ASID, a space, `0x` and a hexadecimal VA
/// (`mmu_asid_va_write`, debugfs.c:476-514).
fn write_mmu(p: &AbiFiles, text: &str) -> Result {
    let (asid, va) = text.split_once(' ').ok_or(EINVAL)?;
    let asid: u32 = asid.parse().map_err(|_| EINVAL)?;
    let va = va.strip_prefix("0x").ok_or(EINVAL)?;
    if va.is_empty() || !va.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(EINVAL);
    }
    let va = u64::from_str_radix(va, 16).map_err(|_| EINVAL)?;
    p.mmu_asid.store(u64::from(asid), Relaxed);
    p.mmu_va.store(va, Relaxed);
    Ok(())
}

/// `mmu_ack_error` (debugfs.c:516-535): `EINVAL` with no mask; the
/// simulation has no MMU error to acknowledge.
fn show_mmu_error(p: &AbiFiles, _f: &mut fmt::Formatter<'_>) -> Result {
    if p.mmu_cap_mask.load(Relaxed) == 0 {
        return Err(EINVAL);
    }
    Ok(())
}

fn write_mmu_error(p: &AbiFiles, text: &str) -> Result {
    if !text.starts_with("0x") {
        return Err(EINVAL);
    }
    p.mmu_cap_mask.store(parse_hex(text)?, Relaxed);
    Ok(())
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

fn write_userptr_lookup(p: &AbiFiles, text: &str) -> Result {
    p.userptr_lookup.store(parse_hex(text)?, Relaxed);
    Ok(())
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
    fn base0_parsing_is_kstrtoull() {
        assert_eq!(parse_base0("4096"), Ok(4096));
        assert_eq!(parse_base0("0x1000"), Ok(4096));
        assert_eq!(parse_base0("0X1000"), Ok(4096));
        assert_eq!(parse_base0("010"), Ok(8));
        assert_eq!(parse_base0("0"), Ok(0));
        assert_eq!(parse_base0("+7"), Ok(7));
        assert_eq!(parse_base0("18446744073709551615"), Ok(u64::MAX));
        assert_eq!(parse_base0("18446744073709551616"), Err(ERANGE));
        for bad in ["", "0x", "08", "x1", "-1", "1 2", "0xg", "++1"] {
            assert_eq!(parse_base0(bad), Err(EINVAL));
        }
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
        d.sim
            .set_status(crate::hw::backend::DeviceStatus::Malfunction);
        assert_eq!(d.scrub_dram(0), Err(EIO));
        Ok(())
    }

    #[test]
    fn hex_parsing_is_strict() {
        assert_eq!(parse_hex("0x10"), Ok(16));
        assert_eq!(parse_hex("ff"), Ok(255));
        assert_eq!(parse_hex("0xffffffffffffffff"), Ok(u64::MAX));
        assert_eq!(parse_hex("0x1ffffffffffffffff"), Err(ERANGE));
        for bad in ["", "0x", "x1", "0x-1", "+1", "1 2", "0xg"] {
            assert_eq!(parse_hex(bad), Err(EINVAL));
        }
    }
}
