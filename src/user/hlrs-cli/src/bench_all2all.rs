//! `hlrs bench`, the all-to-all section: libhlthunk's `gaudi2_dma` CS
//! (`hlrs::all_to_all`: eight EDMAs copying inside the device while the
//! PDMAs copy in and out, ordered by SOBs, monitors and fences) on a
//! device, in each of its three directions, and what that rate means for
//! libhlthunk's own test sizes.
//!
//! Per direction, [`RUNS`] runs of [`COPIES`] copies of [`SIZE`] bytes per
//! EDMA (every byte checked after each, untimed), after one warm-up run:
//!
//! - `<prefix>.<dir>.mib_s`: the median run's EDMA bytes per second (MiB/s),
//!   from the CS ioctl to the WAIT_CS that saw it done;
//! - `<prefix>.<dir>.libhlthunk_s`: the seconds libhlthunk's test (60,000
//!   copies of `sram_size / 8` per EDMA, ...: `all_to_all::libhlthunk_bytes`
//!   with the sizes this device reports) would take at that rate;
//! - `<prefix>.tdr_s`: the TDR those seconds are held against (the CS
//!   timeout a runtime gets: 30 s, upstream's `timeout_locked`).
//!
//! `<prefix>` is `a2a_sim` on simulated device 0 and `a2a` on the Gaudi2
//! on PCI.

use crate::bench_common::{emit, median_best};
use hlrs::{
    all_to_all::{self, Direction, Plan},
    Device,
};
use std::io;

/// Timed runs per direction (odd: the median is one run).
const RUNS: usize = 3;
/// Copies per EDMA in a run.
const COPIES: u32 = 8;
/// Bytes per copy: 1 MiB (an SRAM -> SRAM channel of a 48 MiB SRAM holds 3).
const SIZE: u32 = 1 << 20;
/// The TDR: upstream's default CS timeout (`timeout_locked`, 30 s).
const TDR_S: f64 = 30.0;

/// The section on device `index`, its figures' ids starting with `prefix`.
pub fn run(index: u32, prefix: &str) -> io::Result<()> {
    let dev = Device::open_compute(index)?;
    let hw = dev.hw_ip_info()?;
    for dir in Direction::ALL {
        let plan = Plan {
            direction: dir,
            copies: COPIES,
            size: SIZE,
            external: SIZE,
            timeout_s: 0,
        };
        all_to_all::run(&dev, &plan)?;
        let mut rates = Vec::with_capacity(RUNS);
        for _ in 0..RUNS {
            let out = all_to_all::run(&dev, &plan)?;
            rates.push(out.copied as f64 / out.elapsed.as_secs_f64().max(1e-9));
        }
        let (rate, _) = median_best(rates);
        let name = dir.name();
        emit(
            &format!("{prefix}.{name}.mib_s"),
            rate / f64::from(1u32 << 20),
            "MiB/s",
        );
        let bytes = all_to_all::libhlthunk_bytes(dir, u64::from(hw.sram_size), hw.dram_size);
        emit(
            &format!("{prefix}.{name}.libhlthunk_s"),
            bytes as f64 / rate,
            "s",
        );
    }
    emit(&format!("{prefix}.tdr_s"), TDR_S, "s");
    Ok(())
}
