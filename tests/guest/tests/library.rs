//! In-guest tests of the userspace library's owning types: what is dropped,
//! also by a panic unwinding, is unmapped and freed in the driver.

use hlrs::{uapi::*, Device};
use hlrs_guest_tests::{debugfs, guest_only};

const PAGE: u64 = 0x3000_0000;

fn used(d: &Device) -> u64 {
    d.dram_usage().unwrap().ctx_dram_mem
}

#[test]
fn dropping_unmaps_and_frees() {
    guest_only!();
    let d = Device::open_compute(0).unwrap();
    {
        let mem = d.allocate(2 * PAGE, HL_MEM_CONTIGUOUS).unwrap();
        let map = mem.map(0, 0).unwrap();
        let buf = vec![3u8; 10_000];
        let host = d.map_buffer(&buf, 0, 0).unwrap();
        assert_eq!(used(&d), 2 * PAGE);
        assert!(map.va() >= 0x1001_0018_0000_0000);
        assert_eq!(host.va() % 4096, buf.as_ptr() as u64 % 4096);
        assert!(debugfs(0, "mmu").contains("mappings:        2"));
    }
    assert_eq!(used(&d), 0);
    assert!(debugfs(0, "mmu").contains("mappings:        0"));
    assert_eq!(debugfs(0, "userptr").lines().count(), 1);
}

#[test]
fn explicit_unmap_and_free_report_results() {
    guest_only!();
    let d = Device::open_compute(0).unwrap();
    let mem = d.allocate(1, 0).unwrap();
    let map = mem.map(0, 0).unwrap();
    map.unmap().unwrap();
    mem.free().unwrap();
    assert_eq!(used(&d), 0);
}

#[test]
fn a_panic_unwinding_releases_everything() {
    guest_only!();
    let d = Device::open_compute(0).unwrap();
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let mem = d.allocate(3 * PAGE, 0).unwrap();
        let _map = mem.map(0, 0).unwrap();
        assert_eq!(used(&d), 3 * PAGE);
        panic!("deliberate");
    }));
    assert!(r.is_err());
    assert_eq!(used(&d), 0);
    assert!(debugfs(0, "mmu").contains("mappings:        0"));
}

#[test]
fn stress_100k_ops_on_2_devices() {
    guest_only!();
    let n = hlrs::device_indices().unwrap().len();
    if n < 2 {
        eprintln!("needs two devices: runs in the devices=4 pass");
        return;
    }
    let out = std::process::Command::new("/bin/hlrs")
        .args(["stress", "--ops", "50000", "--devices", "2", "--seed", "7"])
        .stderr(std::process::Stdio::null())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{text}");
    assert!(text.contains("mismatches: 0"), "{text}");
    assert!(text.contains("100000 operations on 2 device(s)"), "{text}");
    let line = text.lines().next().unwrap_or_default();
    std::fs::write(
        "/dev/kmsg",
        format!("hlrs-bench: stress: {}\n", line.trim()),
    )
    .unwrap();
}

#[test]
fn the_cli_shell_runs_experiments_in_one_process() {
    guest_only!();
    use std::io::Write;
    let mut child = std::process::Command::new("/bin/hlrs")
        .arg("shell")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let script = "alloc 1G contiguous\nmap 1\nusage\nfree 1\nunmap 0x1001001800000000\nfree 1\nmaphost 8K\nfrobnicate\nquit\n";
    child
        .stdin
        .take()
        .unwrap()
        .write_all(script.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "handle 1", "{text}");
    assert_eq!(lines[1], "va 0x1001001800000000", "{text}");
    assert!(lines[2].starts_with("context 1.50 GiB used"), "{text}");
    assert!(lines[3].starts_with("error: Invalid argument"), "{text}");
    assert_eq!(lines[4], "unmapped", "{text}");
    assert_eq!(lines[5], "freed", "{text}");
    assert!(lines[6].starts_with("va 0xfff0"), "{text}");
    assert!(lines[7].starts_with("unknown command"), "{text}");
}
