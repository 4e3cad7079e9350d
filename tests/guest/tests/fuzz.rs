//! The short, fixed-seed pass of the ioctl fuzzer that `make test` runs
//! (`make fuzz` runs a long one): 200,000 calls on 2 devices with 2 threads
//! each, every errno within its op's documented set, the devices idle after.
//! The kernel side (oops, WARNING, lockdep, KFENCE, kmemleak) is judged on
//! the guest log.

use hlrs_guest_tests::guest_only;

#[test]
fn fuzz_200k_calls_on_2_devices() {
    guest_only!();
    if hlrs::device_indices().unwrap().len() < 2 {
        eprintln!("needs 2 devices: runs in the devices=4 pass");
        return;
    }
    let out = std::process::Command::new("/bin/hlrs")
        .args([
            "fuzz",
            "--seed",
            "1",
            "--calls",
            "200000",
            // A bound far above the 60-100 s the pass takes on an idle
            // machine: a slow or busy one is not a failure (the guest's
            // stall limit catches a hang; the progress bar on stderr is the
            // progress it watches).
            "--seconds",
            "1800",
        ])
        .args(["--devices", "2", "--threads", "2"])
        .stderr(std::process::Stdio::inherit())
        .output()
        .unwrap();
    let summary = String::from_utf8_lossy(&out.stdout);
    for line in summary.lines() {
        std::fs::write("/dev/kmsg", format!("hlrs-fuzz: {line}\n")).unwrap();
    }
    assert!(out.status.success(), "{summary}");
    // The pass really made its calls (not cut short by the time bound).
    assert!(summary.contains("200000 calls in"), "{summary}");
}
