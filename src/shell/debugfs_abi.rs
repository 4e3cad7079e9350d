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
    mmu::walk::Translation,
    vm::{context_vm::ContextVm, mapping_table::Backing},
};
use kernel::{
    alloc::KVVec,
    fmt,
    page::PAGE_SIZE,
    prelude::*,
    str::CString,
    sync::{
        atomic::{Atomic, Relaxed},
        Arc,
    }, //
};

/// What the files of one device share (upstream `struct hl_dbg_device_entry`).
pub(crate) struct AbiFiles {
    dev: Arc<HlDevice>,
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

/// The files, in upstream's names.
static ABI_FILES: [FileDef<AbiFiles>; 9] = [
    FileDef::rw(c"addr", show_addr, write_addr),
    FileDef::rw_try(c"data32", show_data32, write_data32),
    FileDef::rw_try(c"data64", show_data64, write_data64),
    FileDef::rw(c"mmu", show_mmu, write_mmu),
    FileDef::rw_try(c"mmu_error", show_mmu_error, write_mmu_error),
    FileDef::ro(c"userptr", show_userptr),
    FileDef::rw(c"userptr_lookup", show_userptr_lookup, write_userptr_lookup),
    FileDef::ro(c"vm", show_vm),
    FileDef::rw(c"clk_gate", |_, _| Ok(()), |_, _| Ok(())),
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

fn show_addr(p: &AbiFiles, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    writeln!(f, "0x{:016x}", p.addr.load(Relaxed))
}

fn write_addr(p: &AbiFiles, text: &str) -> Result {
    p.addr.store(parse_hex(text)?, Relaxed);
    Ok(())
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

/// `vm_show` (debugfs.c:235-348), its first part: the open context's ASID
/// and mappings (VA as returned to the user, size, handle of device memory;
/// host mappings have none). The HW-block mappings, allocations and VA
/// ranges are in this module's own `hw_blocks`, `memory` and `va` files.
fn show_vm(p: &AbiFiles, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    let Some(vm) = p.dev.state.lock().active_vm.clone() else {
        return Ok(());
    };
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
    writeln!(f)
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
