// SPDX-License-Identifier: GPL-2.0

//! `gaudi2-model`: the Gaudi2 model core served to QEMU's `vfio-user-pci`
//! over a Unix socket (host 2 of issue 31).
//!
//! ```text
//! gaudi2-model --socket PATH [--dram-mib N] [--dram-resident-mib N] [--stats PATH]
//! qemu-system-x86_64 ... -device '{"driver":"vfio-user-pci","socket":{"path":"PATH","type":"unix"}}'
//! ```
//!
//! The process serves one connection: it exits (0) when QEMU disconnects,
//! writing the `--stats` file (or a summary line on stderr); SIGUSR1
//! writes the stats file while running; SIGTERM/SIGINT write it and exit.
//!
//! The pieces: [`pci`] (identity, BARs, config space), [`device`] (the
//! model, its environment and BAR decoding), [`env`] (the model's `Env`),
//! [`dma`] (the IOVA table from DMA_MAP/UNMAP), [`mem`] (SRAM/DRAM
//! memfds), [`irq`] (MSI-X eventfds), [`vfio`] (the vfio-user backend),
//! [`worker`] (the engine thread), [`stats`], [`events`] (bounded logs).

mod device;
mod dma;
mod env;
mod events;
mod irq;
mod mem;
mod pci;
mod stats;
mod vfio;
mod worker;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::{Arc, Mutex};

use clap::Parser;
use signal_hook::consts::{SIGINT, SIGTERM, SIGUSR1};
use signal_hook::iterator::Signals;

use device::Device;
use worker::Kick;

/// Serve a Gaudi2 model to QEMU's vfio-user-pci.
#[derive(Parser, Debug)]
#[command(name = "gaudi2-model", version)]
struct Args {
    /// Unix socket to listen on (must not exist).
    #[arg(long)]
    socket: PathBuf,
    /// Device DRAM in MiB: the BAR4 window (a power of two).
    #[arg(long, default_value_t = 4096)]
    dram_mib: u64,
    /// Most DRAM in MiB the engines may make resident in host memory (0: no
    /// bound); an engine write past it is a device-side fault.
    #[arg(long, default_value_t = 4096)]
    dram_resident_mib: u64,
    /// Write counters here (`key value` lines) on exit and on SIGUSR1.
    #[arg(long)]
    stats: Option<PathBuf>,
}

/// Largest `--dram-mib`: 128 GiB (an HL-225 has 96 GiB; BARs are powers of 2).
const MAX_DRAM_MIB: u64 = 128 << 10;

/// The engine and socket threads' stack: room for the model, fixed-size
/// state built and reset by value (the model's tests keep it under 48 KiB).
const STACK: usize = 16 << 20;

fn main() -> ExitCode {
    let args = Args::parse();
    events::init();
    if !args.dram_mib.is_power_of_two() || args.dram_mib > MAX_DRAM_MIB {
        eprintln!("gaudi2-model: --dram-mib must be a power of two in 1..={MAX_DRAM_MIB}");
        return ExitCode::from(2);
    }
    let t = std::thread::Builder::new()
        .name("vfio-user".into())
        .stack_size(STACK)
        .spawn(move || serve(&args));
    match t.map(|t| t.join()) {
        Ok(Ok(code)) => code,
        _ => {
            eprintln!("gaudi2-model: the server thread failed");
            ExitCode::FAILURE
        }
    }
}

/// Build the device, serve one connection, clean up. Runs on a thread
/// with [`STACK`] bytes of stack.
fn serve(args: &Args) -> ExitCode {
    let dram_bytes = args.dram_mib << 20;
    let dev = match Device::new(dram_bytes) {
        Ok(mut d) => {
            d.env().dram_budget =
                env::DramBudget::new(dram_bytes, args.dram_resident_mib.saturating_mul(1 << 20));
            Arc::new(Mutex::new(d))
        }
        Err(e) => {
            eprintln!("gaudi2-model: cannot create device memory: {e}");
            return ExitCode::FAILURE;
        }
    };
    let regions = {
        let mut d = device::lock(&dev);
        let env = d.env();
        vfio::regions(env.sram.raw_fd(), env.dram.raw_fd(), dram_bytes)
    };
    let server = match vfio_user::Server::new(&args.socket, true, vfio::irqs(), regions) {
        Ok(s) => s,
        Err(e) => {
            eprintln!(
                "gaudi2-model: cannot listen on {}: {e}",
                args.socket.display()
            );
            return ExitCode::FAILURE;
        }
    };
    if let Err(e) = start_signals(&dev, args) {
        eprintln!("gaudi2-model: cannot handle signals: {e}");
        return ExitCode::FAILURE;
    }
    let kick = Arc::new(Kick::new());
    let engine = {
        let (d, k) = (Arc::clone(&dev), Arc::clone(&kick));
        std::thread::Builder::new()
            .name("engine".into())
            .stack_size(STACK)
            .spawn(move || worker::run(d, k))
    };
    let engine = match engine {
        Ok(t) => t,
        Err(e) => {
            eprintln!("gaudi2-model: cannot start the engine thread: {e}");
            return ExitCode::FAILURE;
        }
    };
    event!(
        "server.start",
        "listening on {} (DRAM {} MiB; BAR0 256 MiB, BAR2 16 KiB, BAR4 {} MiB)",
        args.socket.display(),
        args.dram_mib,
        args.dram_mib
    );
    let mut backend = vfio::Backend::new(Arc::clone(&dev), Arc::clone(&kick));
    let result = server.run(&mut backend);
    kick.stop();
    let steps = engine.join().unwrap_or(0);
    finish(&dev, args, result, steps)
}

/// After the connection: log how it ended, write the stats, pick the exit
/// code (0 when QEMU went away, whether cleanly or by a broken socket).
fn finish(
    dev: &Mutex<Device>,
    args: &Args,
    result: Result<(), vfio_user::Error>,
    steps: u64,
) -> ExitCode {
    let code = match result {
        Ok(()) => {
            event!("server.end", "QEMU disconnected; {steps} engine steps run");
            ExitCode::SUCCESS
        }
        Err(
            e @ (vfio_user::Error::StreamRead(_)
            | vfio_user::Error::StreamWrite(_)
            | vfio_user::Error::ReceiveWithFd(_)
            | vfio_user::Error::SendWithFd(_)),
        ) => {
            event!(
                "server.end",
                "connection to QEMU lost ({e}); {steps} engine steps run"
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            event!("server.end", "server failed: {e}");
            ExitCode::FAILURE
        }
    };
    dump_stats(dev, args.stats.as_deref());
    code
}

/// Write the stats file, or without one a summary line on stderr.
fn dump_stats(dev: &Mutex<Device>, path: Option<&Path>) {
    let text = device::lock(dev).stats_text();
    match path {
        Some(p) => {
            if let Err(e) = stats::write(p, &text) {
                event!("stats.error", "cannot write {}: {e}", p.display());
            }
        }
        None => {
            let keep = [
                "reg_reads ",
                "reg_writes ",
                "doorbells ",
                "dma_read_bytes ",
                "dma_write_bytes ",
            ];
            let more = ["dma_faults ", "msix_raised ", "msix_dropped "];
            let summary: Vec<&str> = text
                .lines()
                .filter(|l| keep.iter().chain(more.iter()).any(|k| l.starts_with(k)))
                .collect();
            event!("stats", "{}", summary.join(", "));
        }
    }
}

/// SIGUSR1: write the stats. SIGTERM/SIGINT: write them, remove the
/// socket, exit.
fn start_signals(dev: &Arc<Mutex<Device>>, args: &Args) -> std::io::Result<()> {
    let mut signals = Signals::new([SIGUSR1, SIGTERM, SIGINT])?;
    let dev = Arc::clone(dev);
    let stats = args.stats.clone();
    let socket = args.socket.clone();
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            for sig in signals.forever() {
                dump_stats(&dev, stats.as_deref());
                if sig != SIGUSR1 {
                    event!("server.end", "signal {sig}: exiting");
                    let _ = std::fs::remove_file(&socket);
                    std::process::exit(0);
                }
            }
        })?;
    Ok(())
}
