//! In-guest tests of the loaded module.

use hlrs_guest_tests::{in_guest, read_trimmed};

macro_rules! guest_only {
    () => {
        if !in_guest() {
            eprintln!("not in the test guest: skipped");
            return;
        }
    };
}

#[test]
fn module_is_live() {
    guest_only!();
    assert_eq!(
        read_trimmed("/sys/module/habanalabs_rs/initstate").unwrap(),
        "live"
    );
}

#[test]
fn kernel_is_not_tainted_by_warnings_or_oopses() {
    guest_only!();
    let taint: u64 = read_trimmed("/proc/sys/kernel/tainted")
        .unwrap()
        .parse()
        .unwrap();
    // TAINT_DIE (D, bit 7) and TAINT_WARN (W, bit 9) must be clear; TAINT_OOT_MODULE
    // (O, bit 12) is expected for an out-of-tree module.
    assert_eq!(taint & (1 << 7), 0, "kernel oopsed (taint {taint:#x})");
    assert_eq!(taint & (1 << 9), 0, "kernel warned (taint {taint:#x})");
}
