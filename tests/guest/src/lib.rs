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
