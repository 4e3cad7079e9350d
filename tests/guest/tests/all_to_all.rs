//! libhlthunk's `gaudi2_dma` all-to-all tests (`test_dma_all2all_dram2sram`,
//! `_dram2dram`, `_sram2sram`), as their CS is built (`hlrs::all_to_all`):
//! the eight DCORE EDMAs each hand a CB to their lower CP, which waits at a
//! fence for PDMA_0_0's start signal, copies `copies` times, and signals its
//! end; PDMA_1_0 waits for PDMA_0_0's copy-in, copies out, and waits for
//! all eight EDMAs. One CS of ten chunks, ordered by SOBs, monitors and
//! fences only; every byte of every destination is checked.
//!
//! The counts are the ones libhlthunk takes on its own simulator (50 copies
//! per EDMA, a 1 MiB external transfer); its silicon counts (60,000 copies
//! of `sram_size / 8`) move terabytes, which `hlrs bench` (section
//! `all2all`) measures the rate of and turns into a time.

use hlrs::{
    all_to_all::{self, Direction, Plan},
    Device,
};
use hlrs_guest_tests::guest_only;

fn all_to_all(direction: Direction) {
    guest_only!();
    let d = Device::open_compute(0).unwrap();
    let plan = Plan {
        direction,
        copies: 50,
        size: 256 << 10,
        external: 1 << 20,
        timeout_s: 0,
    };
    let out = all_to_all::run(&d, &plan).unwrap();
    eprintln!(
        "{}: {} MiB copied by 8 EDMAs in {:?} ({:.0} MiB/s)",
        direction.name(),
        out.copied >> 20,
        out.elapsed,
        out.copied as f64 / (1 << 20) as f64 / out.elapsed.as_secs_f64()
    );
    assert_eq!(out.copied, 8 * 50 * (256 << 10));
    // Nothing of the run is left running.
    assert_eq!(d.hw_idle().unwrap().is_idle, 1);
}

#[test]
fn all_to_all_dram_to_sram() {
    all_to_all(Direction::DramToSram);
}

#[test]
fn all_to_all_dram_to_dram() {
    all_to_all(Direction::DramToDram);
}

#[test]
fn all_to_all_sram_to_sram() {
    all_to_all(Direction::SramToSram);
}

/// A copy larger than an SRAM channel is refused before anything runs.
#[test]
fn a_copy_larger_than_a_channel_is_einval() {
    guest_only!();
    let d = Device::open_compute(0).unwrap();
    let sram = u64::from(d.hw_ip_info().unwrap().sram_size);
    let plan = Plan {
        direction: Direction::SramToSram,
        copies: 1,
        size: u32::try_from(sram / 16 + 128).unwrap(),
        external: 4096,
        timeout_s: 0,
    };
    let e = all_to_all::run(&d, &plan).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(22), "{e}");
}
