//! `hlrs`: operator CLI for habanalabs_rs devices.

use clap::{Parser, Subcommand};
use hlrs::{uapi::HlInfoHwIpInfo, Device};
use std::process::ExitCode;

mod bench;
mod bench_all2all;
mod bench_common;
mod bench_dma;
mod bench_pci;
mod bench_phases;
mod bench_sync;
mod dma;
mod format;
mod fuzz;
mod fuzz_cs;
mod fuzz_sync;
mod sensors;
mod shell;
mod stress;
mod sync;
mod walk;

/// Inspect and exercise habanalabs_rs (Gaudi) devices.
#[derive(Parser, Debug)]
#[command(name = "hlrs", version, about)]
struct Cli {
    /// Device index (the N of /dev/accel/accelN).
    #[arg(short, long, default_value_t = 0, global = true)]
    device: u32,
    /// Machine-readable JSON instead of tables.
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Decoded HW_IP_INFO of the device (through the control node).
    Info,
    /// DRAM used and free, per device.
    Usage,
    /// What the device's firmware (CPU-CP) reports: clock, utilization,
    /// power, energy, PLLs, PCIe counters, DRAM rows.
    Sensors,
    /// List the devices present.
    List,
    /// A bounded random mix of ALLOC/FREE/MAP/UNMAP/INFO with a fixed seed on
    /// several devices at once (one thread each), every result checked.
    Stress {
        /// Operations per device.
        #[arg(long, default_value_t = 10_000)]
        ops: u64,
        /// Seed of the random mix.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Number of devices to use (0, 1, ... N-1).
        #[arg(long, default_value_t = 1)]
        devices: u32,
    },
    /// HL_INFO_USER_MAPPINGS: the mappings captured at the last page fault.
    Mappings,
    /// Read device memory through upstream's debugfs (`addr` + `data32` or
    /// `data64`): a device VA of the open compute context, or an SRAM or
    /// DRAM physical address. Root only.
    Peek {
        /// Address (hexadecimal, `0x` optional).
        #[arg(value_parser = parse_hex)]
        addr: u64,
        /// 64 bits (`data64`) instead of 32.
        #[arg(long = "64")]
        wide: bool,
    },
    /// Write device memory through upstream's debugfs (see `peek`).
    Poke {
        /// Address (hexadecimal, `0x` optional).
        #[arg(value_parser = parse_hex)]
        addr: u64,
        /// Value (hexadecimal, `0x` optional).
        #[arg(value_parser = parse_hex)]
        value: u64,
        /// 64 bits (`data64`) instead of 32.
        #[arg(long = "64")]
        wide: bool,
    },
    /// Read SIZE bytes at a DRAM VA of the open compute context or in SRAM
    /// through upstream's debugfs `dma_size` + `data_dma` (one device read),
    /// printed as a hex dump. Root only.
    Dump {
        /// Address (hexadecimal, `0x` optional).
        #[arg(value_parser = parse_hex)]
        addr: u64,
        /// Bytes (hexadecimal, `0x` optional; at most 0x8000000).
        #[arg(value_parser = parse_hex)]
        size: u64,
    },
    /// The host memory behind each device's simulated user DRAM, the
    /// module-wide limit and the allocations refused at it (debugfs
    /// `dram_host`); `--limit BYTES` sets a new limit. Root only.
    DramHost {
        /// A new module-wide limit in bytes.
        #[arg(long)]
        limit: Option<u64>,
    },
    /// Write VALUE over the device's whole user DRAM (upstream's debugfs
    /// `memory_scrub_val` + `memory_scrub`); refused while a compute context
    /// is open. Root only.
    Scrub {
        /// The 64-bit pattern (hexadecimal, `0x` optional).
        #[arg(value_parser = parse_hex, default_value = "0")]
        value: u64,
    },
    /// A structured ioctl fuzzer: every INFO and MEMORY op and the fd's mmap,
    /// with boundary values and handles/VAs from earlier calls, threads on
    /// each device's fd, forks; fixed seed, bounded calls and time; prints a
    /// summary per op and a reproducer for any failure.
    Fuzz {
        /// Seed (each thread uses seed ^ its number).
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Calls in all.
        #[arg(long, default_value_t = 200_000)]
        calls: u64,
        /// Stop after this many seconds.
        #[arg(long, default_value_t = 600)]
        seconds: u64,
        /// Threads per device (sharing its fd).
        #[arg(long, default_value_t = 2)]
        threads: u32,
        /// Devices (--device .. --device + N - 1), each with its own fd.
        #[arg(long, default_value_t = 1)]
        devices: u32,
        /// Replay: run only this thread's sequence (with --threads 1).
        #[arg(long)]
        thread: Option<u32>,
        /// Also draw the sync-manager family (SOBs, monitors, fences, CQs,
        /// interrupt waits) on devices with user interrupts (the Gaudi2 on
        /// PCI); the run's devices start at --device.
        #[arg(long)]
        sync: bool,
        /// Draw only the sync-manager family (every device of the run must
        /// have user interrupts).
        #[arg(long)]
        sync_only: bool,
    },
    /// Benchmarks (`make bench` runs this in the guest): ioctl costs next to a
    /// null ioctl, MAP+UNMAP with many host mappings live and teardown, a 1 GiB
    /// MAP next to the pinning floor, 1 vs 2 threads on 2 devices, command
    /// submission, a Gaudi2 on PCI next to a simulated one. Prints
    /// `@@BENCH <id> <value> <unit>` lines. Needs debugfs and root.
    Bench {
        /// Live host mappings for the scaling figures (comma-separated).
        #[arg(long, value_delimiter = ',', default_value = "100,10000,100000")]
        live: Vec<usize>,
        /// Skip the 1 GiB pinning-floor section.
        #[arg(long)]
        skip_pin: bool,
        /// Run only these sections (comma-separated: ioctl, phases, scaling,
        /// pin, parallelism, cs, pci, sync).
        #[arg(long, value_delimiter = ',')]
        only: Vec<String>,
    },
    /// A DMA round trip host -> device memory -> host through the device
    /// MMUs (one CS of two LIN_DMAs), checked with a checksum and timed next
    /// to memcpy; `--fault` shows a DMA to an unmapped VA aborted and the
    /// page fault reported.
    Dma {
        /// Bytes each way.
        #[arg(long, default_value_t = 64 << 20)]
        size: usize,
        /// Through DRAM (a DRAM VA) or SRAM (at most 48 MiB).
        #[arg(long, value_enum, default_value_t = dma::Via::Dram)]
        via: dma::Via,
        /// The queue (GAUDI2_QUEUE_ID_*: 0, 1, 4, and the EDMAs' 8-15, 48-55, 84-91, 120-127).
        #[arg(long, default_value_t = dma::DEFAULT_QUEUE)]
        queue: u32,
        /// A DMA to an unmapped VA instead.
        #[arg(long)]
        fault: bool,
    },
    /// Two queues in a pipeline ordered by the sync manager: PDMA_0_0
    /// copies into SRAM and signals a SOB, a monitor releases a FENCE on
    /// PDMA_1_0, which copies back; the output is checked.
    Sync {
        /// Rounds (one CS of two chunks each).
        #[arg(long, default_value_t = 16)]
        rounds: u32,
        /// Bytes per round.
        #[arg(long, default_value_t = 65536)]
        block: u32,
    },
    /// libhlthunk's gaudi2_dma all-to-all: one CS in which the 8 EDMAs copy
    /// inside the device (each through its lower CP, started by a fence)
    /// while PDMA_0_0 copies in and PDMA_1_0 out, ordered by SOBs and
    /// monitors; every byte checked.
    AllToAll {
        /// dram2sram, dram2dram or sram2sram.
        #[arg(long, default_value = "dram2sram")]
        direction: String,
        /// LIN_DMAs per EDMA (libhlthunk: 50 on its simulator, 60,000 on silicon).
        #[arg(long, default_value_t = 50)]
        copies: u32,
        /// Bytes per LIN_DMA.
        #[arg(long, default_value_t = 256 << 10)]
        size: u32,
        /// Bytes PDMA_0_0 copies in and PDMA_1_0 out.
        #[arg(long, default_value_t = 1 << 20)]
        external: u32,
    },
    /// Back-to-back NOP CSs, each waited for, then pipelined: the cost of
    /// CS + WAIT_CS next to the null ioctl.
    Cs {
        /// Number of CSs.
        #[arg(long, default_value_t = 10_000)]
        count: u64,
        /// The queue.
        #[arg(long, default_value_t = dma::DEFAULT_QUEUE)]
        queue: u32,
    },
    /// Memory experiments in one process: alloc, map, maphost, unmap, free,
    /// usage, mappings, read from standard input (type `help`).
    Shell,
    /// A guided walk through the memory ioctls in one process: allocate, map
    /// (with and without a hint), map a host buffer, show usage and
    /// translations, unmap, free, and check that usage is back to idle.
    Walk,
    /// Allocate and map device memory, then hold it until killed or until
    /// standard input closes (to test teardown of a process that dies).
    Hold {
        /// Bytes per allocation.
        #[arg(long, default_value_t = 1 << 30)]
        size: u64,
        /// Number of allocations, each mapped once.
        #[arg(long, default_value_t = 2)]
        count: u32,
        /// Also pin and map a host buffer of this many bytes.
        #[arg(long, default_value_t = 0)]
        host: u64,
        /// Back the host buffer with hugetlbfs 2 MiB pages (`MAP_HUGETLB`).
        #[arg(long)]
        hugetlb: bool,
        /// Also map this HW block (id 0..452) with MAP_BLOCK + mmap.
        #[arg(long)]
        hw_block: Option<usize>,
        /// Also allocate and map a timestamp buffer of this many elements.
        #[arg(long)]
        ts: Option<u32>,
        /// Also export the first device mapping's first 4 KiB as a dma-buf.
        #[arg(long)]
        export: bool,
        /// Also create a command buffer of this many bytes, mmap it and
        /// write its first word; neither is undone before exit.
        #[arg(long)]
        cb: Option<u32>,
        /// Also submit a CS that runs for tens of seconds (LIN_DMAs from
        /// the host buffer, or SRAM memsets), to die with it in flight.
        #[arg(long)]
        busy: bool,
        /// Also submit a CS of one LIN_DMA of this many bytes from the
        /// second device mapping to the first (needs --count 2): DRAM never
        /// written, which the simulated device does not back until written.
        #[arg(long)]
        busy_dram: Option<u32>,
    },
}

fn run(cli: &Cli) -> std::io::Result<String> {
    match cli.command {
        Command::Info => {
            let dev = Device::open_control(cli.device)?;
            let hw: HlInfoHwIpInfo = dev.hw_ip_info()?;
            let bus = dev.bus_id().unwrap_or_default();
            Ok(format::info(cli.device, &bus, &hw, cli.json))
        }
        Command::Usage => {
            let mut rows = Vec::new();
            for i in hlrs::device_indices()? {
                let dev = Device::open_control(i)?;
                let hw = dev.hw_ip_info()?;
                let usage = dev.dram_usage()?;
                let stats = dev.open_stats()?;
                rows.push(format::UsageRow {
                    device: i,
                    total: hw.dram_size,
                    free: usage.dram_free_mem,
                    context: (stats.is_compute_ctx_active != 0)
                        .then(|| context_usage(i))
                        .flatten(),
                });
            }
            Ok(format::usage(&rows, cli.json))
        }
        Command::Sensors => sensors::run(cli.device, cli.json),
        Command::Walk => walk::run(cli.device),
        Command::DramHost { limit } => dram_host(limit),
        Command::Peek { addr, wide } => {
            let v = hlrs::debugfs::DebugfsMem::new(cli.device).peek(addr, width(wide))?;
            Ok(if wide {
                format!("0x{v:016x}\n")
            } else {
                format!("0x{v:08x}\n")
            })
        }
        Command::Poke { addr, value, wide } => {
            hlrs::debugfs::DebugfsMem::new(cli.device).poke(addr, value, width(wide))?;
            Ok(String::new())
        }
        Command::Dump { addr, size } => {
            let size = u32::try_from(size).map_err(|_| std::io::Error::from_raw_os_error(22))?;
            let bytes = hlrs::debugfs::DebugfsMem::new(cli.device).dma_read(addr, size)?;
            Ok(hex_dump(addr, &bytes))
        }
        Command::Scrub { value } => {
            hlrs::debugfs::DebugfsMem::new(cli.device).scrub(value)?;
            Ok(String::new())
        }
        Command::Shell => shell::run(cli.device),
        Command::Dma {
            size,
            via,
            queue,
            fault,
        } => dma::run_dma(cli.device, size, via, queue, fault),
        Command::Cs { count, queue } => dma::run_cs(cli.device, count, queue),
        Command::Sync { rounds, block } => sync::run(cli.device, rounds, block),
        Command::AllToAll {
            ref direction,
            copies,
            size,
            external,
        } => {
            use hlrs::all_to_all::{self, Direction, Plan};
            let dir = Direction::ALL
                .into_iter()
                .find(|d| d.name() == direction.as_str())
                .ok_or_else(|| std::io::Error::other(format!("no direction {direction}")))?;
            let dev = Device::open_compute(cli.device)?;
            let plan = Plan {
                direction: dir,
                copies,
                size,
                external,
                timeout_s: 0,
            };
            let out = all_to_all::run(&dev, &plan)?;
            let rate = out.copied as f64 / out.elapsed.as_secs_f64().max(1e-9);
            let hw = dev.hw_ip_info()?;
            let full = all_to_all::libhlthunk_bytes(dir, u64::from(hw.sram_size), hw.dram_size);
            Ok(format!(
                "{}: 8 EDMAs x {copies} copies of {size} bytes, {external} bytes in and out: \
                 {:.1} ms, {:.0} MiB/s, every byte checked\n\
                 libhlthunk's test at this device's sizes moves {:.1} GiB: \
                 {:.0} s at this rate (TDR 30 s)",
                dir.name(),
                out.elapsed.as_secs_f64() * 1e3,
                rate / f64::from(1u32 << 20),
                full as f64 / f64::from(1u32 << 30),
                full as f64 / rate
            ))
        }
        Command::Mappings => {
            let dev = Device::open_compute(cli.device)?;
            let mut buf = vec![0u8; 16 * 1024];
            let a = dev.info_into(hlrs::uapi::HL_INFO_USER_MAPPINGS, 0, &mut buf)?;
            let maps: Vec<(u64, u64)> = buf
                .chunks_exact(16)
                .take(a.arg as usize)
                .map(|c| {
                    let (va, size) = c.split_at(8);
                    (
                        u64::from_ne_bytes(va.try_into().unwrap_or([0; 8])),
                        u64::from_ne_bytes(size.try_into().unwrap_or([0; 8])),
                    )
                })
                .collect();
            Ok(format::mappings(&maps, cli.json))
        }
        Command::Fuzz {
            seed,
            calls,
            seconds,
            threads,
            devices,
            thread,
            sync,
            sync_only,
        } => {
            let settings = fuzz::Settings {
                seed,
                calls,
                seconds,
                threads,
                devices,
                only_thread: thread,
                first_device: cli.device,
                sync,
                sync_only,
            };
            let report = fuzz::run(&settings, &|n| stress::progress_bar(n.min(calls), calls))?;
            stress::progress_bar(calls, calls);
            let out = fuzz::summary(&report);
            if report.failure.is_some() {
                print!("{out}");
                return Err(std::io::Error::other("the fuzzer found a failure"));
            }
            Ok(out)
        }
        Command::Bench {
            ref live,
            skip_pin,
            ref only,
        } => {
            let settings = bench::Settings {
                live: live.clone(),
                devices: hlrs::device_indices()?.len() as u32,
                skip_pin,
                only: only.clone(),
            };
            bench::run(&settings)?;
            Ok(String::new())
        }
        Command::Stress { ops, seed, devices } => {
            let total = ops * u64::from(devices);
            let done = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
            let t0 = std::time::Instant::now();
            let workers: Vec<_> = (0..devices)
                .map(|i| {
                    let done = done.clone();
                    std::thread::spawn(move || {
                        let mut last = 0;
                        stress::run(i, ops, seed, &mut |n| {
                            let now =
                                done.fetch_add(n - last, std::sync::atomic::Ordering::Relaxed) + n
                                    - last;
                            last = n;
                            stress::progress_bar(now, total);
                        })
                    })
                })
                .collect();
            let mut tally = stress::Tally::default();
            for w in workers {
                let t = w
                    .join()
                    .map_err(|_| std::io::Error::other("worker panicked"))??;
                tally.ops += t.ops;
                tally.mismatches += t.mismatches;
                tally.alloc += t.alloc;
                tally.free += t.free;
                tally.map += t.map;
                tally.unmap += t.unmap;
                tally.info += t.info;
                tally.refused += t.refused;
            }
            let secs = t0.elapsed().as_secs_f64();
            let null = stress::null_ioctl_rate(0, 20_000)?;
            let out = format::stress(&tally, devices, secs, null, cli.json);
            if tally.mismatches > 0 {
                print!("{out}");
                return Err(std::io::Error::other(format!(
                    "{} mismatches",
                    tally.mismatches
                )));
            }
            Ok(out)
        }
        Command::Hold {
            size,
            count,
            host,
            hugetlb,
            hw_block,
            ts,
            export,
            cb,
            busy,
            busy_dram,
        } => {
            let dev = Device::open_compute(cli.device)?;
            let mut vas = Vec::new();
            for _ in 0..count {
                let h = dev.alloc(size, 0)?;
                let va = dev.map(h, 0, 0)?;
                vas.push(va);
                println!("mapped handle {h} at {va:#x}");
            }
            let first = vas.first().copied();
            let dmabuf = match (export, first) {
                (true, Some(va)) => {
                    let fd = dev.export_dmabuf(va, 4096, 0, hlrs::DMABUF_FLAGS)?;
                    println!("exported {va:#x} as a dma-buf");
                    Some(fd)
                }
                _ => None,
            };
            let buffer = match (host, hugetlb) {
                (0, _) => None,
                (n, false) => Some(hlrs::HostBuffer::new(n as usize)?),
                (n, true) => Some(hlrs::HostBuffer::hugetlb(n as usize)?),
            };
            let mut host_va = None;
            if let Some(b) = &buffer {
                let va = dev.map_host(b.addr(), host, 0, 0)?;
                let kind = if b.is_hugetlb() { "hugetlbfs " } else { "" };
                println!("mapped {host} {kind}host bytes at {va:#x}");
                host_va = Some(va);
            }
            let busy_cb = match busy {
                true => {
                    let cb = dma::busy_cb(host_va.zip(first).map(|(h, d)| (h, d, host)));
                    Some(dma::submit_mapped(&dev, &cb, "busy")?)
                }
                false => None,
            };
            let busy_dram_cb = match (busy_dram, vas.as_slice()) {
                (None, _) => None,
                (Some(n), [dst, src, ..]) => {
                    let cb = hlrs::cs::Cb::new().lin_dma(*src, *dst, n);
                    let what = format!("a {n}-byte DRAM -> DRAM LIN_DMA");
                    Some(dma::submit_mapped(&dev, &cb, &what)?)
                }
                (Some(_), _) => return Err(std::io::Error::from_raw_os_error(22)),
            };
            let block = match hw_block {
                Some(id) => {
                    let addr = hlrs::gaudi2::block_addr(id)
                        .ok_or_else(|| std::io::Error::from_raw_os_error(22))?;
                    let b = dev.map_hw_block(addr)?;
                    println!("mapped HW block {id} at {:#x}", b.addr());
                    Some(b)
                }
                None => None,
            };
            let stamps = match ts {
                Some(n) => {
                    let t = dev.timestamp_buffer(n)?;
                    println!("mapped {n} timestamps, handle {:#x}", t.handle());
                    Some(t)
                }
                None => None,
            };
            if let Some(n) = cb {
                let c = dev.command_buffer(n)?;
                let m = c.mmap()?;
                m.write(0, 0xc0ffee)?;
                println!("mapped a {n}-byte CB, handle {:#x}", c.handle());
                // Left to the kernel: the file's close and the exit's munmap.
                std::mem::forget((c, m));
            }
            println!("holding");
            use std::io::{Read, Write};
            std::io::stdout().flush()?;
            let mut sink = Vec::new();
            std::io::stdin().read_to_end(&mut sink)?;
            drop((block, stamps, dmabuf));
            drop((busy_cb, busy_dram_cb));
            drop(buffer);
            Ok(String::new())
        }
        Command::List => {
            let mut rows = Vec::new();
            for i in hlrs::device_indices()? {
                let dev = Device::open_control(i)?;
                rows.push((i, dev.bus_id().unwrap_or_default(), dev.device_status()?));
            }
            Ok(format::list(&rows, cli.json))
        }
    }
}

fn width(wide: bool) -> hlrs::debugfs::Width {
    if wide {
        hlrs::debugfs::Width::W64
    } else {
        hlrs::debugfs::Width::W32
    }
}

/// A hexadecimal number, `0x` optional.
fn parse_hex(s: &str) -> Result<u64, String> {
    let hex = s.strip_prefix("0x").unwrap_or(s);
    u64::from_str_radix(hex, 16).map_err(|e| format!("{s}: {e}"))
}

/// DRAM allocated by the open compute context of device `i`, from the
/// driver's debugfs `memory` table (root only; `None` when unreadable).
fn context_usage(i: u32) -> Option<u64> {
    let table =
        std::fs::read_to_string(format!("/sys/kernel/debug/habanalabs_rs/{i}/memory")).ok()?;
    Some(format::sum_memory_table(&table))
}

/// `hlrs dram-host`: debugfs `dram_host` of every device, after setting a
/// new limit if asked.
fn dram_host(limit: Option<u64>) -> std::io::Result<String> {
    let file = |i: u32| format!("/sys/kernel/debug/habanalabs_rs/{i}/dram_host");
    if let Some(bytes) = limit {
        std::fs::write(file(0), bytes.to_string())?;
    }
    let mut out = String::new();
    for i in hlrs::device_indices()? {
        out.push_str(&format!("device {i}\n"));
        for line in std::fs::read_to_string(file(i))?.lines() {
            out.push_str(&format!("  {line}\n"));
        }
    }
    Ok(out)
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(&cli) {
        Ok(out) => {
            print!("{out}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("hlrs: {}", format::describe_error(&e));
            ExitCode::FAILURE
        }
    }
}

/// `addr: 16 bytes in hex, then as ASCII`, one line per 16 bytes.
fn hex_dump(addr: u64, bytes: &[u8]) -> String {
    let mut out = String::new();
    for (i, line) in bytes.chunks(16).enumerate() {
        let hex: Vec<String> = line.iter().map(|b| format!("{b:02x}")).collect();
        let text: String = line
            .iter()
            .map(|&b| if b.is_ascii_graphic() { b as char } else { '.' })
            .collect();
        let at = addr.wrapping_add(16 * i as u64);
        out.push_str(&format!("0x{at:016x}  {:<48}  {text}\n", hex.join(" ")));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_global_options_after_the_subcommand() {
        let cli = Cli::try_parse_from(["hlrs", "info", "--device", "3", "--json"]);
        assert!(cli.is_ok_and(|c| c.device == 3 && c.json && matches!(c.command, Command::Info)));
    }

    #[test]
    fn parses_peek_and_poke() {
        let cli = Cli::try_parse_from(["hlrs", "peek", "0x1000FFFFFD000000", "--64"]).unwrap();
        assert!(matches!(
            cli.command,
            Command::Peek {
                addr: 0x1000_FFFF_FD00_0000,
                wide: true
            }
        ));
        let cli = Cli::try_parse_from(["hlrs", "poke", "ff", "0x12"]).unwrap();
        assert!(matches!(
            cli.command,
            Command::Poke {
                addr: 0xff,
                value: 0x12,
                wide: false
            }
        ));
        assert!(Cli::try_parse_from(["hlrs", "peek", "zz"]).is_err());
    }

    #[test]
    fn parses_dump_and_scrub_and_dumps_hex() {
        let cli = Cli::try_parse_from(["hlrs", "dump", "0x1000FFFFFD000000", "20"]).unwrap();
        assert!(matches!(
            cli.command,
            Command::Dump {
                addr: 0x1000_FFFF_FD00_0000,
                size: 0x20
            }
        ));
        let cli = Cli::try_parse_from(["hlrs", "scrub"]).unwrap();
        assert!(matches!(cli.command, Command::Scrub { value: 0 }));
        let text = hex_dump(0x10, &[0x41, 0, 0xff]);
        assert_eq!(
            text,
            "0x0000000000000010  41 00 ff                                          A..\n"
        );
    }

    #[test]
    fn rejects_unknown_subcommands() {
        assert!(Cli::try_parse_from(["hlrs", "frobnicate"]).is_err());
    }
}
