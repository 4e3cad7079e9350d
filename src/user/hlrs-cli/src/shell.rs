//! `hlrs shell`: memory experiments in one process. Commands are read from
//! standard input, one per line, on one open compute node, so handles and VAs
//! stay valid from one command to the next.

use crate::format::{bytes, describe_error};
use hlrs::{uapi::*, Device};
use std::fmt::Write;
use std::io::BufRead;

/// Help text of the shell.
pub const HELP: &str = "commands:
  alloc SIZE [contiguous] [shared]   allocate device memory (SIZE: bytes or 512M, 2G, ...)
  free HANDLE                         free device memory
  map HANDLE [HINT] [force]           map a handle into the DRAM VA range
  maphost SIZE [HINT] [force]         allocate a host buffer of SIZE bytes and map it
  unmap VA                            unmap
  block ID [OFFSET VALUE]             MAP_BLOCK + mmap of HW block ID (0..452); write a 32-bit register
  ts N                                TS_ALLOC of N timestamps + mmap
  cb create SIZE [map] | cb info HANDLE [va] | cb destroy HANDLE
                                      command buffers (CB ioctl): create, usage count or device VA, destroy
  cb mmap HANDLE SIZE [OFFSET VALUE]  mmap a CB of SIZE bytes; write a 64-bit word
  export VA OFFSET SIZE               EXPORT_DMABUF_FD of a DRAM mapping (the fd is held until quit)
  held                                what the shell holds mapped (host buffers, blocks, timestamp buffers)
  usage                               DRAM usage of this context and the device
  mappings                            HL_INFO_USER_MAPPINGS (mappings captured at a page fault)
  help | quit";

/// Parse a size: a number (decimal or 0x hex) with an optional K/M/G suffix.
pub fn parse_size(s: &str) -> Option<u64> {
    let (num, mul) = match s.chars().last()? {
        'K' | 'k' => (&s[..s.len() - 1], 1u64 << 10),
        'M' | 'm' => (&s[..s.len() - 1], 1 << 20),
        'G' | 'g' => (&s[..s.len() - 1], 1 << 30),
        _ => (s, 1),
    };
    parse_u64(num)?.checked_mul(mul)
}

/// Parse a decimal or 0x-prefixed hexadecimal number.
pub fn parse_u64(s: &str) -> Option<u64> {
    match s.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => s.parse().ok(),
    }
}

/// What the shell keeps alive between commands: host buffers it mapped, and
/// its mmaps of HW blocks and timestamp buffers.
pub enum Held<'d> {
    /// A host buffer mapped with `maphost`.
    Host(Vec<u8>),
    /// A HW block mapped with `block`.
    Block(hlrs::HwBlock<'d>),
    /// A timestamp buffer mapped with `ts`.
    Ts(hlrs::TimestampBuffer<'d>),
    /// A dma-buf exported with `export`.
    DmaBuf(std::os::fd::OwnedFd),
    /// A command buffer mapped with `cb mmap`.
    Cb(hlrs::CbMapping<'d>),
}

/// Run one command line; returns the output and whether to stop.
pub fn command<'d>(dev: &'d Device, held: &mut Vec<Held<'d>>, line: &str) -> (String, bool) {
    let words: Vec<&str> = line.split_whitespace().collect();
    let mut out = String::new();
    let arg = |i: usize| words.get(i).copied().unwrap_or("");
    let flag = |f: &str| words.iter().skip(1).any(|w| *w == f);
    let result: std::io::Result<()> = (|| {
        match arg(0) {
            "" => {}
            "help" => out.push_str(HELP),
            "quit" | "exit" => return Ok(()),
            "alloc" => {
                let size = parse_size(arg(1)).ok_or_else(bad)?;
                let mut flags = 0;
                if flag("contiguous") {
                    flags |= HL_MEM_CONTIGUOUS;
                }
                if flag("shared") {
                    flags |= HL_MEM_SHARED;
                }
                let h = dev.alloc(size, flags)?;
                let _ = write!(out, "handle {h}");
            }
            "free" => {
                dev.free(parse_u64(arg(1)).ok_or_else(bad)?)?;
                out.push_str("freed");
            }
            "map" => {
                let h = parse_u64(arg(1)).ok_or_else(bad)?;
                let hint = parse_u64(arg(2)).unwrap_or(0);
                let flags = if flag("force") { HL_MEM_FORCE_HINT } else { 0 };
                let va = dev.map(h, hint, flags)?;
                let _ = write!(out, "va {va:#x}");
            }
            "maphost" => {
                let size = parse_size(arg(1)).ok_or_else(bad)?;
                let hint = parse_u64(arg(2)).unwrap_or(0);
                let flags = if flag("force") { HL_MEM_FORCE_HINT } else { 0 };
                let buf = vec![0u8; usize::try_from(size).map_err(|_| bad())?];
                let va = dev.map_host(buf.as_ptr() as u64, size, hint, flags)?;
                held.push(Held::Host(buf));
                let _ = write!(out, "va {va:#x}");
            }
            "unmap" => {
                dev.unmap(parse_u64(arg(1)).ok_or_else(bad)?)?;
                out.push_str("unmapped");
            }
            "block" => {
                let id = parse_u64(arg(1)).ok_or_else(bad)?;
                let addr = usize::try_from(id)
                    .ok()
                    .and_then(hlrs::gaudi2::block_addr)
                    .ok_or_else(bad)?;
                let block = dev.map_hw_block(addr)?;
                let _ = write!(
                    out,
                    "block {id} ({addr:#x}, {}) mapped at {:#x}, handle {:#x}",
                    bytes(block.len() as u64),
                    block.addr(),
                    block.handle()
                );
                if let (Some(off), Some(v)) = (parse_u64(arg(2)), parse_u64(arg(3))) {
                    let off = usize::try_from(off).map_err(|_| bad())?;
                    block.write(off, u32::try_from(v).map_err(|_| bad())?)?;
                    let _ = write!(out, "; +{off:#x} = {:#x}", block.read(off).unwrap_or(0));
                }
                held.push(Held::Block(block));
            }
            "ts" => {
                let n = u32::try_from(parse_u64(arg(1)).ok_or_else(bad)?).map_err(|_| bad())?;
                let ts = dev.timestamp_buffer(n)?;
                let _ = write!(
                    out,
                    "{n} timestamps mapped ({}), handle {:#x}",
                    bytes(ts.mapped_len() as u64),
                    ts.handle()
                );
                held.push(Held::Ts(ts));
            }
            "cb" => cb_command(dev, held, &words, &mut out)?,
            "export" => {
                let va = parse_u64(arg(1)).ok_or_else(bad)?;
                let offset = parse_size(arg(2)).ok_or_else(bad)?;
                let size = parse_size(arg(3)).ok_or_else(bad)?;
                let fd = dev.export_dmabuf(va, size, offset, hlrs::DMABUF_FLAGS)?;
                use std::os::fd::AsRawFd;
                let _ = write!(
                    out,
                    "dma-buf fd {} ({} from offset {offset:#x})",
                    fd.as_raw_fd(),
                    bytes(size)
                );
                held.push(Held::DmaBuf(fd));
            }
            "held" => {
                for (i, h) in held.iter().enumerate() {
                    let _ = match h {
                        Held::Host(b) => {
                            writeln!(out, "{i}: host buffer of {}", bytes(b.len() as u64))
                        }
                        Held::Block(b) => writeln!(
                            out,
                            "{i}: HW block handle {:#x} at {:#x}, +0x0 = {:#x}",
                            b.handle(),
                            b.addr(),
                            b.read(0).unwrap_or(0)
                        ),
                        Held::DmaBuf(fd) => {
                            use std::os::fd::AsRawFd;
                            writeln!(out, "{i}: dma-buf fd {}", fd.as_raw_fd())
                        }
                        Held::Cb(m) => writeln!(
                            out,
                            "{i}: command buffer mapped at {:#x}, {}, [0] = {:#x}",
                            m.addr(),
                            bytes(m.len() as u64),
                            m.read(0).unwrap_or(0)
                        ),
                        Held::Ts(t) => writeln!(
                            out,
                            "{i}: timestamp buffer handle {:#x}, {} elements, [0] = {:#x}",
                            t.handle(),
                            t.elements(),
                            t.get(0).unwrap_or(0)
                        ),
                    };
                }
                let _ = write!(out, "{} held", held.len());
            }
            "usage" => {
                let u = dev.dram_usage()?;
                let _ = write!(
                    out,
                    "context {} used, device {} free",
                    bytes(u.ctx_dram_mem),
                    bytes(u.dram_free_mem)
                );
            }
            "mappings" => {
                let mut buf = vec![0u8; 16 * 64];
                let a = dev.info_into(HL_INFO_USER_MAPPINGS, 0, &mut buf)?;
                let _ = write!(out, "{} mapping(s) captured at the last page fault", a.arg);
            }
            other => {
                let _ = write!(out, "unknown command '{other}' (try help)");
            }
        }
        Ok(())
    })();
    if let Err(e) = result {
        out = format!("error: {}", describe_error(&e));
    }
    (out, matches!(arg(0), "quit" | "exit"))
}

/// `cb create|info|destroy|mmap ...`.
fn cb_command<'d>(
    dev: &'d Device,
    held: &mut Vec<Held<'d>>,
    words: &[&str],
    out: &mut String,
) -> std::io::Result<()> {
    let arg = |i: usize| words.get(i).copied().unwrap_or("");
    let num = |i: usize| parse_size(arg(i)).ok_or_else(bad);
    let size32 = |i: usize| num(i).and_then(|v| u32::try_from(v).map_err(|_| bad()));
    match arg(1) {
        "create" => {
            let map = if arg(3) == "map" { HL_CB_FLAGS_MAP } else { 0 };
            let h = dev.cb_create(size32(2)?, map)?;
            let _ = write!(out, "command buffer handle {h:#x}");
        }
        "info" if arg(3) == "va" => {
            let va = dev.cb_device_va(num(2)?)?;
            let _ = write!(out, "device VA {va:#x}");
        }
        "info" => {
            let n = dev.cb_info(num(2)?)?;
            let _ = write!(out, "usage count {n}");
        }
        "destroy" => {
            dev.cb_destroy(num(2)?)?;
            out.push_str("destroyed");
        }
        "mmap" => {
            let m = dev.cb_mmap(num(2)?, size32(3)?)?;
            let _ = write!(out, "mapped at {:#x} ({})", m.addr(), bytes(m.len() as u64));
            if !arg(4).is_empty() {
                let (off, v) = (num(4)? as usize, parse_u64(arg(5)).ok_or_else(bad)?);
                m.write(off, v)?;
                let _ = write!(out, "; +{off:#x} = {:#x}", m.read(off).unwrap_or(0));
            }
            held.push(Held::Cb(m));
        }
        _ => return Err(bad()),
    }
    Ok(())
}

fn bad() -> std::io::Error {
    std::io::Error::from_raw_os_error(22)
}

/// Read commands from standard input until EOF or `quit`.
pub fn run(index: u32) -> std::io::Result<String> {
    let dev = Device::open_compute(index)?;
    let mut held = Vec::new();
    for line in std::io::stdin().lock().lines() {
        let (out, stop) = command(&dev, &mut held, &line?);
        if !out.is_empty() {
            println!("{out}");
        }
        if stop {
            break;
        }
    }
    Ok(String::new())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_with_suffixes() {
        assert_eq!(parse_size("4096"), Some(4096));
        assert_eq!(parse_size("0x1000"), Some(4096));
        assert_eq!(parse_size("512M"), Some(512 << 20));
        assert_eq!(parse_size("2g"), Some(2 << 30));
        assert_eq!(parse_size("x"), None);
        assert_eq!(parse_size(""), None);
        assert_eq!(parse_size("99999999999999G"), None);
    }
}
