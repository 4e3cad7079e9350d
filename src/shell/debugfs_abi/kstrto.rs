// SPDX-License-Identifier: GPL-2.0

//! The kernel's `kstrtoull`/`kstrtouint` (lib/kstrtox.c) on the bytes a
//! write to one of upstream's files carries, as its `*_from_user` helpers
//! and `simple_attr_write` see them: at most a bounded prefix (the `cap`s
//! below, which `ffi::debugfs` applies), ended by the first NUL (the
//! helpers NUL-terminate their copy, so a writer's own NUL ends the text
//! too: libhlthunk writes `strlen + 1` bytes).
//!
//! The text is an optional `+`, digits in the base (base 16 takes an
//! optional `0x`/`0X`; base 0 picks 16 after `0x` followed by a hex digit, 8
//! after a leading `0`, else 10), then at most one `\n`, then the end.
//! Nothing else: no leading blank, no `-`. No digit is `EINVAL`, too large
//! `ERANGE` (even with junk after the digits, as the kernel checks the
//! overflow first).

use kernel::prelude::*;

/// Bytes `kstrtoull_from_user` copies (`char buf[1 + 64 + 1 + 1]`, less
/// the NUL it adds).
pub(super) const ULL_FROM_USER: usize = 66;

/// Bytes `kstrtouint_from_user` copies (`char buf[1 + 32 + 1 + 1]`, less
/// the NUL).
pub(super) const UINT_FROM_USER: usize = 34;

/// Bytes `simple_attr_write` copies (`set_buf[24]`, less the NUL): what
/// `addr` and `memory_scrub_val` (`debugfs_create_x64`) parse.
pub(super) const ATTR_SET_BUF: usize = 23;

/// The C string in `buf`: up to its first NUL.
pub(super) fn c_str(buf: &[u8]) -> &[u8] {
    buf.split(|&b| b == 0).next().unwrap_or(&[])
}

/// `_parse_integer_fixup_radix`: the base and the digits after its prefix.
fn fixup_radix(s: &[u8], base: u32) -> (&[u8], u32) {
    let zero_x = s.first() == Some(&b'0') && s.get(1).map(u8::to_ascii_lowercase) == Some(b'x');
    let base = match base {
        0 if zero_x && s.get(2).is_some_and(u8::is_ascii_hexdigit) => 16,
        0 if s.first() == Some(&b'0') => 8,
        0 => 10,
        b => b,
    };
    if base == 16 && zero_x {
        return (s.get(2..).unwrap_or(&[]), base);
    }
    (s, base)
}

/// `kstrtoull(buf, base)`, `buf` ending at its first NUL. O(length).
pub(super) fn kstrtoull(buf: &[u8], base: u32) -> Result<u64> {
    let s = c_str(buf);
    let s = s.strip_prefix(b"+").unwrap_or(s);
    let (s, base) = fixup_radix(s, base);
    let (mut value, mut used, mut overflow) = (0u64, 0usize, false);
    for &c in s {
        let digit = match c.to_ascii_lowercase() {
            d @ b'0'..=b'9' => u32::from(d - b'0'),
            d @ b'a'..=b'f' => u32::from(d - b'a') + 10,
            _ => break,
        };
        if digit >= base {
            break;
        }
        match value
            .checked_mul(u64::from(base))
            .and_then(|v| v.checked_add(u64::from(digit)))
        {
            Some(v) => value = v,
            None => {
                value = u64::MAX;
                overflow = true;
            }
        }
        used += 1;
    }
    if overflow {
        return Err(ERANGE);
    }
    if used == 0 {
        return Err(EINVAL);
    }
    let rest = s.get(used..).unwrap_or(&[]);
    let rest = rest.strip_prefix(b"\n").unwrap_or(rest);
    if !rest.is_empty() {
        return Err(EINVAL);
    }
    Ok(value)
}

/// `kstrtouint(buf, base)`: as [`kstrtoull`], `ERANGE` past `u32`.
pub(super) fn kstrtouint(buf: &[u8], base: u32) -> Result<u32> {
    u32::try_from(kstrtoull(buf, base)?).map_err(|_| ERANGE)
}

#[kunit_tests(hlrs_debugfs_kstrto)]
mod tests {
    use super::*;

    #[test]
    fn base0_is_kstrtoull() {
        for (text, v) in [
            (&b"4096"[..], 4096),
            (b"0x1000", 4096),
            (b"0X1000", 4096),
            (b"010", 8),
            (b"0", 0),
            (b"+7", 7),
            (b"7\n", 7),
            (b"0x10\0", 16),
            (b"0x10\n\0junk", 16),
            (b"18446744073709551615", u64::MAX),
        ] {
            assert_eq!(kstrtoull(text, 0), Ok(v));
        }
        assert_eq!(kstrtoull(b"18446744073709551616", 0), Err(ERANGE));
        for bad in [
            &b""[..],
            b"\0",
            b"0x",
            b"08",
            b"x1",
            b"-1",
            b"1 2",
            b"0xg",
            b"++1",
            b" 1",
            b"1\n\n",
            b"1\r\n",
        ] {
            assert_eq!(kstrtoull(bad, 0), Err(EINVAL));
        }
    }

    #[test]
    fn base16_takes_an_optional_0x_and_a_nul() {
        assert_eq!(kstrtoull(b"0x10", 16), Ok(16));
        assert_eq!(kstrtoull(b"ff", 16), Ok(255));
        assert_eq!(kstrtoull(b"+ff\n", 16), Ok(255));
        assert_eq!(kstrtoull(b"0xdeadbeef\0", 16), Ok(0xdead_beef));
        assert_eq!(kstrtoull(b"0xffffffffffffffff", 16), Ok(u64::MAX));
        assert_eq!(kstrtoull(b"0x1ffffffffffffffff", 16), Err(ERANGE));
        assert_eq!(kstrtoull(b"0x1ffffffffffffffffzz", 16), Err(ERANGE));
        for bad in [&b""[..], b"0x", b"x1", b"0x-1", b"1 2", b"0xg", b"0x0x1"] {
            assert_eq!(kstrtoull(bad, 16), Err(EINVAL));
        }
        assert_eq!(kstrtouint(b"0xffffffff\0", 16), Ok(u32::MAX));
        assert_eq!(kstrtouint(b"0x100000000", 16), Err(ERANGE));
        assert_eq!(kstrtouint(b"12", 10), Ok(12));
    }
}
