#!/usr/bin/env python3
"""Check that every in-guest test that needs several devices runs in the
second pass (devices=4) of `make test`.

The second pass runs only what scripts/guest/multi-device lists (a test
binary, or a binary and some of its cases). A test that lists the devices
(`hlrs::device_indices`) depends on their count: it must be listed, itself or
its whole binary, and a binary whose helper functions list them must be
listed whole. Prints one line per test left out and exits 1 if any.
"""
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TESTS = ROOT / "tests/guest/tests"
LIST = ROOT / "scripts/guest/multi-device"


def listed():
    """{binary: set of cases, or None for the whole binary}."""
    out = {}
    for line in LIST.read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        name, *cases = line.split()
        out[name] = set(cases) or None
    return out


def functions(text):
    """(name, is a test, body) of each top-level `fn`, the body running to the
    next top-level item."""
    heads = list(re.finditer(r"^(?:#\[test\]\s*\n)?(?:pub(?:\(\w+\))? )?fn (\w+)", text, re.M))
    for i, m in enumerate(heads):
        end = heads[i + 1].start() if i + 1 < len(heads) else len(text)
        yield m.group(1), m.group(0).startswith("#[test]"), text[m.end():end]


def main():
    want = listed()
    bad = []
    for path in sorted(TESTS.glob("*.rs")):
        binary, text = path.stem, path.read_text()
        cases = want.get(binary, set())
        for name, is_test, body in functions(text):
            if "device_indices" not in body or cases is None:
                continue
            if not is_test:
                bad.append(f"{binary}: helper `{name}` lists the devices: list the whole binary")
            elif name not in cases:
                bad.append(f"{binary}: test `{name}` lists the devices but does not run with four")
    for b in bad:
        print(f"multi-device: {b} (scripts/guest/multi-device)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
