//! Human-readable tables and JSON output of the CLI (pure functions, tested on the host).

use hlrs::{c_string, uapi::HlInfoHwIpInfo, DeviceStatus};
use std::fmt::Write;

/// Bytes as a short human figure (binary units).
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{n} B")
    } else if v.fract() == 0.0 {
        format!("{v:.0} {}", UNITS[u])
    } else {
        format!("{v:.2} {}", UNITS[u])
    }
}

/// The decoded HW_IP_INFO.
pub fn info(index: u32, bus: &str, hw: &HlInfoHwIpInfo, json: bool) -> String {
    let fields: Vec<(&str, String)> = vec![
        ("device", index.to_string()),
        ("bus_id", bus.to_owned()),
        ("device_id", format!("{:#06x}", hw.device_id)),
        ("revision_id", hw.revision_id.to_string()),
        ("card_name", c_string(&hw.card_name)),
        ("firmware", c_string(&hw.cpucp_version)),
        ("dram_enabled", hw.dram_enabled.to_string()),
        ("dram_base_address", format!("{:#x}", hw.dram_base_address)),
        ("dram_size", hw.dram_size.to_string()),
        ("dram_page_size", hw.dram_page_size.to_string()),
        (
            "device_mem_alloc_default_page_size",
            hw.device_mem_alloc_default_page_size.to_string(),
        ),
        ("reserved_dram_size", hw.reserved_dram_size.to_string()),
        ("sram_base_address", format!("{:#x}", hw.sram_base_address)),
        ("sram_size", hw.sram_size.to_string()),
        ("num_of_events", hw.num_of_events.to_string()),
        ("module_id", hw.module_id.to_string()),
    ];
    if json {
        let body: Vec<String> = fields
            .iter()
            .map(|(k, v)| {
                if v.parse::<u64>().is_ok() {
                    format!("\"{k}\":{v}")
                } else {
                    format!(
                        "\"{k}\":\"{}\"",
                        v.replace('\\', "\\\\").replace('"', "\\\"")
                    )
                }
            })
            .collect();
        return format!("{{{}}}\n", body.join(","));
    }
    let mut out = String::new();
    for (k, v) in &fields {
        let pretty = match *k {
            "dram_size"
            | "dram_page_size"
            | "device_mem_alloc_default_page_size"
            | "reserved_dram_size"
            | "sram_size" => format!("{v} ({})", bytes(v.parse().unwrap_or(0))),
            _ => v.clone(),
        };
        let _ = writeln!(out, "  {k:<36} {pretty}");
    }
    out
}

/// One line of `usage`.
pub struct UsageRow {
    /// Device index.
    pub device: u32,
    /// DRAM users may allocate.
    pub total: u64,
    /// Free DRAM.
    pub free: u64,
    /// DRAM of the open compute context, when one is open and it is known.
    pub context: Option<u64>,
}

/// Sum the sizes of the driver's debugfs `memory` table (third column).
pub fn sum_memory_table(table: &str) -> u64 {
    table
        .lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().nth(2))
        .filter_map(|v| u64::from_str_radix(v.trim_start_matches("0x"), 16).ok())
        .sum()
}

/// The `usage` table.
pub fn usage(rows: &[UsageRow], json: bool) -> String {
    if json {
        let items: Vec<String> = rows
            .iter()
            .map(|r| {
                format!(
                    "{{\"device\":{},\"total\":{},\"used\":{},\"free\":{},\"context\":{}}}",
                    r.device,
                    r.total,
                    r.total.saturating_sub(r.free),
                    r.free,
                    r.context.map_or("null".to_string(), |c| c.to_string())
                )
            })
            .collect();
        return format!("[{}]\n", items.join(","));
    }
    let mut out = format!(
        "  {:<8} {:>14} {:>14} {:>14} {:>6}\n",
        "device", "total", "used", "free", "used%"
    );
    for r in rows {
        let used = r.total.saturating_sub(r.free);
        let pct = if r.total == 0 {
            0.0
        } else {
            used as f64 * 100.0 / r.total as f64
        };
        let _ = writeln!(
            out,
            "  {:<8} {:>14} {:>14} {:>14} {:>5.1}%  {}",
            r.device,
            bytes(r.total),
            bytes(used),
            bytes(r.free),
            pct,
            r.context.map_or("-".to_string(), bytes)
        );
    }
    out
}

/// The `list` table.
pub fn list(rows: &[(u32, String, DeviceStatus)], json: bool) -> String {
    if json {
        let items: Vec<String> = rows
            .iter()
            .map(|(i, bus, st)| {
                format!("{{\"device\":{i},\"bus_id\":\"{bus}\",\"status\":\"{st:?}\"}}")
            })
            .collect();
        return format!("[{}]\n", items.join(","));
    }
    let mut out = format!(
        "  {:<8} {:<14} {:<22} {}\n",
        "device", "bus id", "nodes", "status"
    );
    for (i, bus, st) in rows {
        let nodes = format!("accel{i}, accel_controlD{i}");
        let _ = writeln!(out, "  {i:<8} {bus:<14} {nodes:<22} {st:?}");
    }
    out
}

/// The `mappings` list (HL_INFO_USER_MAPPINGS).
pub fn mappings(maps: &[(u64, u64)], json: bool) -> String {
    if json {
        let items: Vec<String> = maps
            .iter()
            .map(|(va, size)| format!("{{\"dev_va\":{va},\"size\":{size}}}"))
            .collect();
        return format!("[{}]\n", items.join(","));
    }
    if maps.is_empty() {
        return "  no mappings captured (no page fault happened)\n".into();
    }
    let mut out = format!("  {:<20} {}\n", "device va", "size");
    for (va, size) in maps {
        let _ = writeln!(out, "  {va:<#20x} {}", bytes(*size));
    }
    out
}

/// The final tally of `stress`.
pub fn stress(
    t: &crate::stress::Tally,
    devices: u32,
    secs: f64,
    null_per_s: f64,
    json: bool,
) -> String {
    let rate = t.ops as f64 / secs.max(1e-9);
    if json {
        return format!(
            "{{\"devices\":{devices},\"ops\":{},\"mismatches\":{},\"alloc\":{},\"free\":{},\"map\":{},\"unmap\":{},\"info\":{},\"refused\":{},\"seconds\":{secs:.3},\"ops_per_s\":{rate:.0},\"null_ioctl_per_s\":{null_per_s:.0}}}\n",
            t.ops, t.mismatches, t.alloc, t.free, t.map, t.unmap, t.info, t.refused
        );
    }
    format!(
        "  {} operations on {} device(s) in {:.2} s: {:.0} ops/s (a null INFO ioctl: {:.0}/s)\n  alloc {}, free {}, map {}, unmap {}, info {}; refused as expected {}\n  mismatches: {}\n",
        t.ops, devices, secs, rate, null_per_s, t.alloc, t.free, t.map, t.unmap, t.info, t.refused, t.mismatches
    )
}

/// A message for an errno that says what it means for this driver.
pub fn describe_error(e: &std::io::Error) -> String {
    let hint = match hlrs::errno(e) {
        2 => "no such device node (is the habanalabs_rs module loaded?)",
        16 => "the device is busy: another process has its compute node open",
        12 => "out of device memory or of handles",
        22 => "invalid argument",
        95 => "not supported by this driver or by the simulated device",
        14 => "bad address",
        1 => "not permitted",
        _ => "",
    };
    if hint.is_empty() {
        e.to_string()
    } else {
        format!("{e}: {hint}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_figures() {
        assert_eq!(bytes(512), "512 B");
        assert_eq!(bytes(768 << 20), "768 MiB");
        assert_eq!(bytes(127 * (768 << 20)), "95.25 GiB");
    }

    #[test]
    fn usage_table_and_json() {
        let rows = [UsageRow {
            device: 0,
            total: 4 << 30,
            free: 3 << 30,
            context: Some(1 << 30),
        }];
        let t = usage(&rows, false);
        assert!(t.contains("4 GiB"));
        assert!(t.contains("25.0%"));
        assert!(t.contains("1 GiB"));
        assert_eq!(
            usage(&rows, true),
            "[{\"device\":0,\"total\":4294967296,\"used\":1073741824,\"free\":3221225472,\"context\":1073741824}]\n"
        );
        let table =
            "handle  asid  size  ...\n1       1     0x30000000  1\n2       1     0x60000000  2\n";
        assert_eq!(sum_memory_table(table), 0x9000_0000);
    }

    #[test]
    fn info_json_quotes_strings_and_not_numbers() {
        let mut hw = HlInfoHwIpInfo::ZERO;
        hw.device_id = 0x1020;
        hw.dram_size = 42;
        hw.card_name[..4].copy_from_slice(b"G\"2\\");
        let j = info(1, "0000:02:00.0", &hw, true);
        assert!(j.contains("\"device_id\":\"0x1020\""));
        assert!(j.contains("\"dram_size\":42"));
        assert!(j.contains("\"card_name\":\"G\\\"2\\\\\""));
    }

    #[test]
    fn mappings_list() {
        assert!(mappings(&[], false).contains("no mappings"));
        assert_eq!(
            mappings(&[(0x1000, 4096)], true),
            "[{\"dev_va\":4096,\"size\":4096}]\n"
        );
        assert!(mappings(&[(0x1000, 4096)], false).contains("0x1000"));
    }

    #[test]
    fn errors_are_explained() {
        let e = std::io::Error::from_raw_os_error(16);
        assert!(describe_error(&e).contains("another process"));
    }
}
