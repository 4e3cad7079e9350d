//! `hlrs walk`: the scripted demonstration `make run` shows.

use crate::format::bytes;
use hlrs::{uapi::*, Device};
use std::fmt::Write;
use std::io;

/// The page-walk oracle's answer for `va` on device `index` (debugfs `mmu`).
fn translate(index: u32, va: u64) -> String {
    let path = format!("/sys/kernel/debug/habanalabs_rs/{index}/mmu");
    if std::fs::write(&path, format!("{va:#x}")).is_err() {
        return "(debugfs not available)".into();
    }
    std::fs::read_to_string(&path)
        .ok()
        .and_then(|s| s.lines().last().map(str::to_owned))
        .unwrap_or_default()
}

/// Upstream's debugfs `data64` on a host buffer's device VA: write through
/// the device's page tables, read it back in the process's own memory.
fn poke_host_through_debugfs(out: &mut String, index: u32, buf: &[u8], host: u64, va: u64) {
    // The 8-byte aligned word at buffer offset 128, inside the mapping.
    let off = 128 - (host - buf.as_ptr() as u64);
    let at = va + off;
    let mem = hlrs::debugfs::DebugfsMem::new(index);
    let value = 0x0123_4567_89ab_cdefu64;
    let r = mem.poke(at, value, hlrs::debugfs::Width::W64);
    let Some(word) = buf.get(128..136) else {
        return;
    };
    // SAFETY: reads 8 bytes of our own live buffer, which the kernel wrote.
    let seen = unsafe { std::ptr::read_volatile(word.as_ptr().cast::<[u8; 8]>()) };
    let _ = match r {
        Ok(()) => writeln!(
            out,
            "  debugfs data64 <- {value:#x} at device VA {at:#x}; the process reads {:#x} at {:#x}{}",
            u64::from_ne_bytes(seen),
            buf.as_ptr() as u64 + 128,
            if u64::from_ne_bytes(seen) == value { " (same)" } else { " (DIFFERENT!)" }
        ),
        Err(e) => writeln!(out, "  debugfs data64 at {at:#x}: {e}"),
    };
}

fn usage_line(out: &mut String, dev: &Device, total: u64) -> io::Result<()> {
    let u = dev.dram_usage()?;
    let _ = writeln!(
        out,
        "  DRAM: {} used by this context, {} free of {}",
        bytes(u.ctx_dram_mem),
        bytes(u.dram_free_mem),
        bytes(total)
    );
    Ok(())
}

/// Run the walk on device `index`; returns the report.
pub fn run(index: u32) -> io::Result<String> {
    let mut out = String::new();
    let dev = Device::open_compute(index)?;
    let hw = dev.hw_ip_info()?;
    let page = hw.dram_page_size;
    let _ = writeln!(out, "Opened /dev/accel/accel{index}: a Gaudi2 (device id {:#06x}) with {} of DRAM in pages of {}.", hw.device_id, bytes(hw.dram_size), bytes(page));
    usage_line(&mut out, &dev, hw.dram_size)?;

    let _ = writeln!(
        out,
        "\n1. ALLOC: 2 pages contiguous, 3 pages anywhere (sizes round up to whole pages)"
    );
    let a = dev.alloc(2 * page, HL_MEM_CONTIGUOUS)?;
    let b = dev.alloc(2 * page + 1, 0)?;
    let _ = writeln!(
        out,
        "  handle {a}: {} contiguous; handle {b}: {} + 1 byte -> 3 pages",
        bytes(2 * page),
        bytes(2 * page)
    );
    usage_line(&mut out, &dev, hw.dram_size)?;

    let _ = writeln!(
        out,
        "\n2. MAP into the DRAM VA range (starts at {:#x})",
        hw.dram_base_address
    );
    let va_a = dev.map(a, 0, 0)?;
    let hint = hw.dram_base_address + 16 * page;
    let va_b = dev.map(b, hint, 0)?;
    let _ = writeln!(out, "  handle {a} without a hint -> VA {va_a:#x}");
    let _ = writeln!(
        out,
        "  handle {b} with hint {hint:#x} -> VA {va_b:#x} ({})",
        if va_b == hint {
            "hint honoured"
        } else {
            "hint not honoured"
        }
    );
    let _ = writeln!(
        out,
        "  page-walk oracle (reads the device-resident page tables like the MMU):"
    );
    let _ = writeln!(out, "    {}", translate(index, va_a + 0x1234));
    let _ = writeln!(out, "    {}", translate(index, va_b + 2 * page + 5));
    match dev.free(a) {
        Err(e) => {
            let _ = writeln!(out, "  FREE of handle {a} while mapped is refused: {e}");
        }
        Ok(()) => {
            let _ = writeln!(
                out,
                "  FREE of handle {a} while mapped unexpectedly succeeded!"
            );
        }
    }

    let _ = writeln!(
        out,
        "\n3. MAP a host buffer (HL_MEM_USERPTR): 64 KiB at an odd address"
    );
    let buf = vec![0x5au8; 80 << 10];
    let host = buf.as_ptr() as u64 + 123;
    let va_h = dev.map_host(host, 64 << 10, 0, 0)?;
    let _ = writeln!(
        out,
        "  host {host:#x} -> device VA {va_h:#x} (same offset in the page: {:#x})",
        va_h % 4096
    );
    let _ = writeln!(out, "    {}", translate(index, va_h));
    if let Ok(list) =
        std::fs::read_to_string(format!("/sys/kernel/debug/habanalabs_rs/{index}/userptr"))
    {
        for l in list.lines() {
            let _ = writeln!(out, "    userptr: {l}");
        }
    }
    poke_host_through_debugfs(&mut out, index, &buf, host, va_h);

    let _ = writeln!(
        out,
        "\n4. A HW block (MAP_BLOCK + mmap): block 4, an ARC's DCCM, written from userspace"
    );
    let addr = hlrs::gaudi2::block_addr(4).ok_or_else(|| io::Error::other("no block 4"))?;
    let block = dev.map_hw_block(addr)?;
    block.write(0x10, 0xc0ffee)?;
    let _ = writeln!(
        out,
        "  block at {addr:#x} ({}) -> handle {:#x}, mapped at {:#x}; wrote 0xc0ffee at +0x10",
        bytes(block.len() as u64),
        block.handle(),
        block.addr()
    );
    let debugfs = |file: &str| {
        std::fs::read_to_string(format!("/sys/kernel/debug/habanalabs_rs/{index}/{file}"))
            .unwrap_or_default()
    };
    for l in debugfs("hw_blocks")
        .lines()
        .filter(|l| l.contains("block 4"))
    {
        let _ = writeln!(out, "    the driver reads: {}", l.trim());
    }
    let _ = writeln!(
        out,
        "\n5. A timestamp buffer (TS_ALLOC + mmap): 16 elements, element 3 written"
    );
    let ts = dev.timestamp_buffer(16)?;
    ts.set(3, 0x1234_5678_9abc)?;
    let _ = writeln!(
        out,
        "  handle {:#x}, {} mapped",
        ts.handle(),
        bytes(ts.mapped_len() as u64)
    );
    for l in debugfs("ts_buffers").lines().skip(1) {
        let _ = writeln!(out, "    ts_buffers: {}", l.trim());
    }
    drop(block);
    drop(ts);
    command_buffer(&mut out, &dev, &debugfs)?;

    let _ = writeln!(
        out,
        "\n6. EXPORT_DMABUF_FD: 1 MiB from offset 4 KiB of handle {b}'s mapping, for an importer"
    );
    let fd = dev.export_dmabuf(va_b, 1 << 20, 4096, hlrs::DMABUF_FLAGS)?;
    {
        use std::os::fd::AsRawFd;
        let _ = writeln!(out, "  dma-buf fd {}", fd.as_raw_fd());
    }
    match dev.unmap(va_b) {
        Err(e) => {
            let _ = writeln!(out, "  UNMAP while exported is refused: {e}");
        }
        Ok(()) => return Err(io::Error::other("UNMAP of an exported mapping succeeded")),
    }
    for l in debugfs("dmabuf").lines() {
        let _ = writeln!(out, "    dmabuf: {l}");
    }
    drop(fd);

    let _ = writeln!(
        out,
        "\n7. An UNMAP whose MMU invalidation fails (injected): the pages stay pinned until one succeeds"
    );
    let path = format!("/sys/kernel/debug/habanalabs_rs/{index}/fail_invalidations");
    let buf = hlrs::HostBuffer::new(64 << 10)?;
    let va = dev.map_host(buf.addr(), 64 << 10, 0, 0)?;
    let locked = || vm_locked_kb().unwrap_or(0);
    let before = locked();
    if std::fs::write(&path, "1").is_ok() {
        let r = dev.unmap(va);
        let quarantined = debugfs("mmu")
            .lines()
            .find(|l| l.starts_with("quarantined:"))
            .map(|l| l.trim().to_owned())
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "  UNMAP {va:#x}: {}; {quarantined}; VmLck {} kB (was {before} kB)",
            r.err().map_or("ok".into(), |e| e.to_string()),
            locked()
        );
        // The next successful MAP+UNMAP invalidates everything and releases it.
        dev.unmap(dev.map_host(buf.addr(), 4096, 0, 0)?)?;
        let _ = writeln!(
            out,
            "  after a successful MAP+UNMAP: VmLck {} kB (the quarantined 64 KiB unpinned)",
            locked()
        );
    } else {
        dev.unmap(va)?;
        let _ = writeln!(out, "  (debugfs not writable here: skipped)");
    }

    let _ = writeln!(out, "\n8. UNMAP everything, FREE everything");
    dev.unmap(va_h)?;
    dev.unmap(va_a)?;
    dev.unmap(va_b)?;
    let _ = writeln!(
        out,
        "  after UNMAP the oracle finds nothing: {}",
        translate(index, va_a)
    );
    dev.free(a)?;
    dev.free(b)?;
    usage_line(&mut out, &dev, hw.dram_size)?;
    let u = dev.dram_usage()?;
    let idle = u.ctx_dram_mem == 0 && u.dram_free_mem == hw.dram_size;
    let _ = writeln!(
        out,
        "  usage back to idle: {}",
        if idle { "yes" } else { "NO" }
    );
    if !idle {
        return Err(io::Error::other("usage did not return to idle"));
    }
    Ok(out)
}

/// Locked (pinned) memory of this process in kB (`VmLck`).
/// Step 5b: a command buffer created, written through its mmap, read by
/// the driver, destroyed while mapped (it lives on until the munmap), and a
/// second DESTROY refused.
fn command_buffer(
    out: &mut String,
    dev: &Device,
    debugfs: &dyn Fn(&str) -> String,
) -> io::Result<()> {
    let _ = writeln!(
        out,
        "\n5b. A command buffer (CB CREATE + mmap): 5000 bytes, word 2 written, then DESTROY"
    );
    let cb = dev.command_buffer(5000)?;
    let h = cb.handle();
    let m = cb.mmap()?;
    m.write(16, 0x0c0d_e0f0)?;
    let _ = writeln!(
        out,
        "  handle {h:#x}, usage count {}, {} mapped at {:#x}",
        cb.usage_count()?,
        bytes(m.len() as u64),
        m.addr()
    );
    for l in debugfs("cbs").lines().skip(1) {
        let _ = writeln!(out, "    debugfs cbs: {}", l.trim());
    }
    cb.destroy()?;
    let again = dev.cb_destroy(h).err().map(|e| hlrs::errno(&e));
    let _ = writeln!(
        out,
        "  destroyed (a second DESTROY: errno {}); the mapping still reads {:#x}",
        again.unwrap_or(0),
        m.read(16).unwrap_or(0)
    );
    drop(m);
    let alive = debugfs("cbs");
    let _ = writeln!(
        out,
        "  after munmap: {}",
        alive.lines().next().unwrap_or("")
    );
    // HL_CB_FLAGS_MAP: the CB in the device MMU, as the oracle walks it.
    let h = dev.cb_create(5000, HL_CB_FLAGS_MAP)?;
    let va = dev.cb_device_va(h)?;
    let _ = writeln!(out, "  a mapped CB (HL_CB_FLAGS_MAP): device VA {va:#x}");
    let _ = writeln!(out, "    {}", translate(dev.index(), va + 4096));
    dev.cb_destroy(h)?;
    let _ = writeln!(
        out,
        "    after DESTROY: {}",
        translate(dev.index(), va + 4096)
    );
    Ok(())
}

fn vm_locked_kb() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmLck:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}
