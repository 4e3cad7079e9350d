// SPDX-License-Identifier: GPL-2.0

//! Bounded logging to stderr: one line per notable event, and a bound on
//! how many lines any one kind of event can print.
//!
//! Every event has a kind (a `&'static str` such as `"dma.fault"`). A kind
//! prints its first [`FIRST`] occurrences, then only its 32nd, 64th,
//! 128th... (powers of two), each of those lines saying how many there were:
//! a guest that faults a million times costs about 36 lines, not a million.
//! The `log` records of the `vfio_user` crate go through the same bound
//! (one kind per level).

use std::collections::BTreeMap;
use std::fmt;
use std::io::Write;
use std::sync::{Mutex, OnceLock};
use std::time::Instant;

/// Occurrences of a kind that always print.
pub const FIRST: u64 = 16;

/// Occurrences so far, by kind.
static SEEN: Mutex<BTreeMap<&'static str, u64>> = Mutex::new(BTreeMap::new());
/// The process start, for the time stamp of each line.
static START: OnceLock<Instant> = OnceLock::new();

/// Whether occurrence `n` (1-based) of a kind prints.
pub fn prints(n: u64) -> bool {
    n <= FIRST || n.is_power_of_two()
}

/// Count one event of `kind`; print it if the bound allows. O(log kinds).
pub fn note(kind: &'static str, msg: fmt::Arguments<'_>) {
    let n = {
        let mut seen = SEEN.lock().unwrap_or_else(|e| e.into_inner());
        let n = seen.entry(kind).or_insert(0);
        *n = n.saturating_add(1);
        *n
    };
    if !prints(n) {
        return;
    }
    let t = START.get_or_init(Instant::now).elapsed();
    let more = if n > FIRST {
        format!(" [occurrence {n}; earlier ones not all shown]")
    } else {
        String::new()
    };
    let line = format!(
        "gaudi2-model [{:>5}.{:03}] {kind}: {msg}{more}",
        t.as_secs(),
        t.subsec_millis()
    );
    if cfg!(test) {
        // Through libtest's capture: a test's events stay out of the
        // `test NAME ... ok` lines the test summary parses.
        eprintln!("{line}");
    } else {
        // A failed write to stderr has nowhere to be reported.
        let _ = writeln!(std::io::stderr().lock(), "{line}");
    }
}

/// How many events of `kind` were counted. O(log kinds).
#[cfg(test)]
pub fn count(kind: &'static str) -> u64 {
    let seen = SEEN.lock().unwrap_or_else(|e| e.into_inner());
    seen.get(kind).copied().unwrap_or(0)
}

/// `event!("kind", "format", args...)`: count and maybe print one event.
#[macro_export]
macro_rules! event {
    ($kind:expr, $($arg:tt)*) => {
        $crate::events::note($kind, format_args!($($arg)*))
    };
}

/// The `log` facade's records (the `vfio_user` crate's), bounded per level.
struct Logger;

impl log::Log for Logger {
    fn enabled(&self, m: &log::Metadata<'_>) -> bool {
        m.level() <= log::Level::Info
    }

    fn log(&self, r: &log::Record<'_>) {
        if !self.enabled(r.metadata()) {
            return;
        }
        let kind = match r.level() {
            log::Level::Error => "vfio-user.error",
            log::Level::Warn => "vfio-user.warn",
            _ => "vfio-user.info",
        };
        note(kind, format_args!("{}", r.args()));
    }

    fn flush(&self) {}
}

static LOGGER: Logger = Logger;

/// Start the clock of the time stamps and route `log` records here.
pub fn init() {
    START.get_or_init(Instant::now);
    if log::set_logger(&LOGGER).is_ok() {
        log::set_max_level(log::LevelFilter::Info);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bound_is_logarithmic() {
        let printed = (1..=1_000_000u64).filter(|&n| prints(n)).count();
        // 16 first ones, then 32, 64, ..., 2^19.
        assert_eq!(printed, 16 + 15);
    }

    #[test]
    fn kinds_are_counted_apart() {
        for _ in 0..3 {
            note("test.a", format_args!("a"));
        }
        note("test.b", format_args!("b"));
        assert_eq!(count("test.a"), 3);
        assert_eq!(count("test.b"), 1);
    }
}
