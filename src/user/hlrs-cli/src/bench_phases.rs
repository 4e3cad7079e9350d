//! `hlrs bench`, per-phase breakdowns: the driver's phase clocks (debugfs
//! `bench`, `profile 1`) around a loop of each small memory ioctl, so the
//! table says where an ALLOC+FREE, a MAP+UNMAP of a one-page handle and of a
//! 4 KiB host buffer spend their time, next to their wall time per call.

use crate::bench_common::emit;
use hlrs::{uapi::*, Device, HostBuffer};
use std::collections::BTreeMap;
use std::io;
use std::time::Instant;

/// One snapshot of a device's debugfs `bench` file: `"<op>.<key>"` ->
/// value, e.g. `map_host.pte_ns`, `map_host.done`, `pin_floor.pin_ns`.
pub type Profile = BTreeMap<String, u64>;

/// Parse the `bench` file: lines `<name>: <key> <value> <key> <value>...`.
pub fn parse_profile(text: &str) -> Profile {
    let mut out = Profile::new();
    for line in text.lines() {
        let Some((name, rest)) = line.split_once(':') else {
            continue;
        };
        let words: Vec<&str> = rest.split_whitespace().collect();
        if words.len() == 1 {
            if let Ok(v) = words[0].parse() {
                out.insert(name.to_string(), v);
            }
            continue;
        }
        for kv in words.chunks(2) {
            if let [k, v] = kv {
                if let Ok(v) = v.parse() {
                    out.insert(format!("{name}.{k}"), v);
                }
            }
        }
    }
    out
}

fn path(index: u32) -> String {
    format!("/sys/kernel/debug/habanalabs_rs/{index}/bench")
}

/// Read device `index`'s profile.
pub fn read_profile(index: u32) -> io::Result<Profile> {
    Ok(parse_profile(&std::fs::read_to_string(path(index))?))
}

/// Turn the phase clocks of device `index` on or off.
pub fn set_profiling(index: u32, on: bool) -> io::Result<()> {
    std::fs::write(path(index), if on { "profile 1" } else { "profile 0" })
}

/// Per-key difference `after - before`.
pub fn delta(before: &Profile, after: &Profile) -> Profile {
    after
        .iter()
        .map(|(k, v)| (k.clone(), v.saturating_sub(*before.get(k).unwrap_or(&0))))
        .collect()
}

/// The phases the driver reports, in the order of an operation.
pub const PHASES: [&str; 9] = [
    "handle",
    "pack",
    "pin",
    "lookup",
    "va",
    "pte",
    "invalidate",
    "publish",
    "release",
];

/// Run `pairs` calls of `f` with the clocks on; emit the wall time per pair
/// (`phase.<id>.wall`) and, per operation in `ops`, each phase's
/// nanoseconds per call (`phase.<id>.<op>.<phase>`).
fn profiled(
    index: u32,
    id: &str,
    ops: &[&str],
    pairs: u32,
    mut f: impl FnMut() -> io::Result<()>,
) -> io::Result<()> {
    f()?;
    set_profiling(index, true)?;
    let before = read_profile(index)?;
    let t = Instant::now();
    for _ in 0..pairs {
        f()?;
    }
    let wall = t.elapsed().as_nanos() as f64 / f64::from(pairs);
    let d = delta(&before, &read_profile(index)?);
    set_profiling(index, false)?;
    emit(&format!("phase.{id}.wall"), wall, "ns");
    for op in ops {
        let done = *d.get(&format!("{op}.done")).unwrap_or(&0);
        if done == 0 {
            return Err(io::Error::other(format!("no {op} was profiled")));
        }
        for p in PHASES {
            if let Some(ns) = d.get(&format!("{op}.{p}_ns")) {
                emit(
                    &format!("phase.{id}.{op}.{p}"),
                    *ns as f64 / done as f64,
                    "ns",
                );
            }
        }
    }
    Ok(())
}

/// The section: ALLOC+FREE (contiguous and not), MAP+UNMAP of a one-page
/// handle and of a 4 KiB host buffer, each with its phases.
pub fn phases(index: u32, host_4k: &HostBuffer) -> io::Result<()> {
    let dev = Device::open_compute(index)?;
    let page = dev.hw_ip_info()?.dram_page_size;
    for (name, flags) in [("contiguous", HL_MEM_CONTIGUOUS), ("scattered", 0)] {
        profiled(
            index,
            &format!("alloc_free.{name}"),
            &["alloc", "free"],
            400,
            || dev.free(dev.alloc(page, flags)?),
        )?;
    }
    let h = dev.alloc(page, 0)?;
    profiled(
        index,
        "map_unmap.device_page",
        &["map_device", "unmap_device"],
        400,
        || dev.unmap(dev.map(h, 0, 0)?),
    )?;
    profiled(
        index,
        "map_unmap.host_4k",
        &["map_host", "unmap_host"],
        400,
        || dev.unmap(dev.map_host(host_4k.addr(), 4096, 0, 0)?),
    )?;
    dev.free(h)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bench_file_parses_into_op_keys() {
        let text = "profile: 1\nalloc: done 3 pack_ns 10 handle_ns 20\n\
                    map_host: done 0\npin_floor: pages 4 pin_ns 5 unpin_ns 6\n";
        let p = parse_profile(text);
        assert_eq!(p.get("profile"), Some(&1));
        assert_eq!(p.get("alloc.done"), Some(&3));
        assert_eq!(p.get("alloc.handle_ns"), Some(&20));
        assert_eq!(p.get("map_host.done"), Some(&0));
        assert_eq!(p.get("pin_floor.unpin_ns"), Some(&6));
        let mut later = p.clone();
        later.insert("alloc.done".into(), 5);
        assert_eq!(delta(&p, &later).get("alloc.done"), Some(&2));
        assert_eq!(delta(&p, &later).get("alloc.pack_ns"), Some(&0));
    }
}
