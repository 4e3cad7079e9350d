//! Helpers shared by the in-guest tests.
//!
//! These tests only make sense inside the test guest, where the module is
//! loaded; `scripts/test.sh` builds them statically and runs them there. On
//! the host they skip themselves (see [`in_guest`]).

/// Whether we run inside the test guest (its `/init` exports `HLRS_GUEST=1`).
pub fn in_guest() -> bool {
    std::env::var_os("HLRS_GUEST").is_some()
}

/// Read a sysfs/procfs file as a trimmed string.
pub fn read_trimmed(path: &str) -> std::io::Result<String> {
    Ok(std::fs::read_to_string(path)?.trim().to_owned())
}

/// Skip a test (return) when not in the guest.
#[macro_export]
macro_rules! guest_only {
    () => {
        if !$crate::in_guest() {
            eprintln!("not in the test guest: skipped");
            return;
        }
    };
}

/// Assert that `r` failed with errno `want`.
pub fn expect_errno<T: std::fmt::Debug>(r: std::io::Result<T>, want: i32) {
    match r {
        Ok(v) => panic!("expected errno {want}, got Ok({v:?})"),
        Err(e) => assert_eq!(hlrs::errno(&e), want, "expected errno {want}, got {e}"),
    }
}

/// Contents of a debugfs file of device `dev`.
pub fn debugfs(dev: u32, file: &str) -> String {
    std::fs::read_to_string(format!("/sys/kernel/debug/habanalabs_rs/{dev}/{file}"))
        .unwrap_or_default()
}

/// Start `/bin/hlrs hold ARGS` and wait until it holds its memory; kill the
/// returned child to test teardown of a process that dies.
pub fn spawn_hold(args: &[&str]) -> std::process::Child {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};
    let mut child = Command::new("/bin/hlrs")
        .arg("hold")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    loop {
        let line = lines.next().expect("hlrs hold exited early").unwrap();
        if line == "holding" {
            return child;
        }
    }
}
