#!/usr/bin/env python3
"""Turn a guest console log (and optionally host `cargo test` output) into one
verdict.

Prints every suite and test with its result, every problem found, then a final
line exactly `N passed, N failed` (`, N skipped` when any were skipped). Exits
non-zero when any test failed, a KTAP or libtest plan is short, the guest log
shows a kernel bug report (oops, BUG, WARNING, try faulted, lockdep, KFENCE,
kmemleak), a required marker is missing, or the guest timed out.

When the host stopped the guest (scripts/guest_watch.py: no progress for the
stall limit, the run's cap) or QEMU ended before the guest finished, the log
ends with one `@@HLRS-HOST guest ...` line naming the test that was running:
that line is the failure, and what could not happen after it (markers,
checks, the rest of the load's KTAP) is not reported as more failures.
Everything that did finish is judged as usual.

KTAP is parsed only from the module's own section (between the insmod markers):
the boot prints a built-in KTAP block of its own, which must not be mistaken
for the module's suites.
"""
import argparse
import re
import sys

TS = re.compile(r"^\[\s*\d+\.\d+\]\s?")
RESULT = re.compile(r"^(not ok|ok) (\d+) (\S+)(?:\s*#\s*(SKIP|skip)\b.*)?")
PLAN = re.compile(r"^1\.\.(\d+)")
LIBTEST = re.compile(r"^test (.+?) \.\.\. (ok|FAILED|ignored)")
# A test that wrote to fd 2 itself (a progress bar) splits its line: the
# name, then the result alone on a later line.
LIBTEST_PENDING = re.compile(r"^test (\S+) \.\.\. (?!(ok|FAILED|ignored)\b)")
LIBTEST_LATE = re.compile(r"^(ok|FAILED|ignored)$")
LIBTEST_RUNNING = re.compile(r"^running (\d+) tests?")
STOPPED = re.compile(r"^@@HLRS-HOST guest (stalled|timed out|ended before finishing)")
LIBTEST_RESULT = re.compile(r"^test result: (ok|FAILED)\. (\d+) passed; (\d+) failed; (\d+) ignored")

# Kernel reports that fail a run wherever they appear in the guest log.
BUG_PATTERNS = [
    r"\bOops\b", r"BUG:", r"WARNING:", r"try faulted", r"Kernel panic",
    r"general protection fault", r"rust_kernel: panicked", r"KFENCE:",
    r"possible recursive locking", r"possible circular locking",
    r"inconsistent lock state", r"suspicious RCU usage",
    r"turning off the locking correctness validator",
    r"unreferenced object 0x", r"Call Trace:", r"page allocation failure",
    r"vmalloc error", r"disables this message", r"soft lockup",
    # issue 19: the lowered lockup thresholds and object debugging
    r"blocked for more than \d+ seconds", r"rcu_sched self-detected stall",
    r"rcu: INFO: .* detected stalls", r"ODEBUG:",
]
BUG_RE = re.compile("|".join(BUG_PATTERNS))


class Tally:
    def __init__(self):
        self.passed = self.failed = self.skipped = 0
        self.problems = []

    def add(self, status):
        setattr(self, status, getattr(self, status) + 1)


def strip(line):
    return TS.sub("", line.rstrip("\r\n"))


def sections(lines, begin, end):
    """Every run of lines between a marker starting with `begin` and the next
    one starting with `end`, as (text after `begin`, lines)."""
    out, cur, label = [], None, None
    for raw in lines:
        line = strip(raw)
        if line.startswith("@@HLRS " + begin):
            cur, label = [], line[len("@@HLRS " + begin):].strip()
            continue
        if cur is not None and line.startswith("@@HLRS " + end):
            out.append((label, cur))
            cur = None
            continue
        if cur is not None:
            cur.append(line)
    if cur is not None:
        out.append((label, cur))
    return out


def section(lines, begin, end):
    """Lines strictly between the first marker starting with `begin` and the
    next one starting with `end`; None if `begin` is missing."""
    out, inside = [], False
    for raw in lines:
        line = strip(raw)
        if line.startswith("@@HLRS " + begin):
            inside = True
            continue
        if inside and line.startswith("@@HLRS " + end):
            return out
        if inside:
            out.append(line)
    return out if inside else None


def parse_ktap(lines, tally, title, complete=True):
    """Parse the module's KTAP: a top-level plan of suites, each with nested
    test results at 4-space indent. `complete=False`: the load was cut short
    (the guest was stopped), so an unfinished suite and a short top-level
    plan are expected, not more failures."""
    try:
        start = next(i for i, l in enumerate(lines) if l == "KTAP version 1")
    except StopIteration:
        tally.problems.append(f"{title}: no KTAP output (did the module's suites run?)")
        return
    top_plan, suites = None, 0
    suite, diag, results, plan = None, [], 0, None
    for line in lines[start + 1:]:
        if top_plan is None and PLAN.match(line):
            top_plan = int(PLAN.match(line).group(1))
            continue
        if line.startswith("    "):
            inner = line[4:]
            if inner.startswith("# Subtest: "):
                suite, diag, results, plan = inner[len("# Subtest: "):], [], 0, None
                print(f"suite {suite}")
            elif PLAN.match(inner):
                plan = int(PLAN.match(inner).group(1))
            elif RESULT.match(inner):
                m = RESULT.match(inner)
                results += 1
                status = "skipped" if m.group(4) else ("passed" if m.group(1) == "ok" else "failed")
                tally.add(status)
                print(f"  {status.upper():7} {m.group(3)}")
                if status == "failed":
                    for d in diag:
                        print(f"          {d}")
                diag = []
            elif inner.strip().startswith("#"):
                diag.append(inner.strip())
            continue
        m = RESULT.match(line)
        if m:
            suites += 1
            if plan is None:
                tally.problems.append(f"{title}: suite {m.group(3)} printed no plan")
            elif results != plan:
                tally.problems.append(
                    f"{title}: suite {m.group(3)} planned {plan} tests but reported {results}")
            if m.group(1) != "ok" and not m.group(4):
                print(f"  suite {m.group(3)} reported not ok")
            suite, results, plan = None, 0, None
    if not complete:
        return
    if top_plan is None:
        tally.problems.append(f"{title}: no KTAP plan")
    elif suites != top_plan:
        tally.problems.append(f"{title}: KTAP plan announced {top_plan} suites, {suites} reported")
    if suite is not None:
        tally.problems.append(f"{title}: suite {suite} never finished")


def parse_libtest(lines, tally, title, prefix=""):
    """Parse libtest's plain output: `running N tests`, `test x ... ok`,
    `test result: ...`. Every announced test must report."""
    announced, seen, results = 0, 0, 0
    failures = []
    capture = None
    pending = None
    for line in lines:
        m = LIBTEST_RUNNING.match(line)
        if m:
            announced += int(m.group(1))
            continue
        m = LIBTEST.match(line)
        late = LIBTEST_LATE.match(line.strip()) if pending else None
        if m or late:
            name, result = (m.group(1), m.group(2)) if m else (pending, late.group(1))
            pending = None
            seen += 1
            status = {"ok": "passed", "FAILED": "failed", "ignored": "skipped"}[result]
            tally.add(status)
            print(f"  {status.upper():7} {prefix}{name}")
            continue
        m = LIBTEST_PENDING.match(line)
        if m:
            pending = m.group(1)
            continue
        if LIBTEST_RESULT.match(line):
            results += 1
            continue
        if line.startswith("---- ") and line.endswith(" stdout ----"):
            capture = []
            failures.append((line, capture))
            continue
        if capture is not None:
            if line.startswith("failures:") or line.startswith("test result"):
                capture = None
            else:
                capture.append(line)
    for head, body in failures:
        print(f"  {head}")
        for b in body[:20]:
            print(f"    {b}")
    if seen != announced:
        tally.problems.append(f"{title}: {announced} tests announced, {seen} reported")
    if announced and not results:
        tally.problems.append(f"{title}: no `test result` line (test binary crashed?)")


def parse_guest(path, tally, where, kunit, expect_tests, expect_check):
    """One guest boot's console log: its KUnit suites (when `kunit`), its
    in-guest test binaries, its init's checks and markers, and any kernel
    report in its log. `where` names the boot in section titles and problems."""
    with open(path, errors="replace") as f:
        raw = f.readlines()
    lines = [strip(l) for l in raw]

    # The host stopped the guest, or it ended early: the one line naming what
    # ran is the failure; what would have come after it is not.
    stopped = [l for l in lines if STOPPED.match(l)]
    if stopped:
        tally.problems.append(f"{where}: " + stopped[0][len("@@HLRS-HOST "):])

    def marker(prefix):
        return [l for l in lines if l.startswith("@@HLRS " + prefix)]

    ktap = section(raw, "insmod-begin", "insmod-end")
    if ktap is None:
        if not stopped:
            tally.problems.append(f"{where}: module was never loaded (no insmod marker)")
    elif kunit:
        print(f"== {where}: KUnit suites of the module")
        parse_ktap(ktap, tally, "KUnit", complete=bool(marker("insmod-end")) or not stopped)

    if expect_tests:
        print(f"== {where}: userspace tests against the device nodes")
        runs = sections(raw, "guest-tests-begin", "guest-tests-end")
        if not runs and not stopped:
            tally.problems.append(f"{where}: userspace tests did not run")
        for label, g in runs:
            parse_libtest(g, tally, f"guest tests ({label})", prefix=f"[{label}] ")

    # One-line checks of the guest's init: `@@HLRS check NAME rc=N ...`.
    checks = {}
    for l in lines:
        if l.startswith("@@HLRS check "):
            parts = l.split()
            checks[parts[2]] = "rc=0" in parts[3:4]
    if checks or expect_check:
        print(f"== {where}: checks of the guest's init")
    for name, ok in checks.items():
        tally.add("passed" if ok else "failed")
        print(f"  {'PASSED' if ok else 'FAILED':7} {name}")
    for name in expect_check:
        if name not in checks and not stopped:
            tally.problems.append(f"{where}: check {name} did not run")

    for l in lines:
        if l.startswith("@@HLRS reload") and "rc=0" not in l:
            tally.problems.append(f"{where}: {l[len('@@HLRS '):]}")
    for prefix, what in [("insmod-end", "insmod failed"),
                         ("rmmod-end", "rmmod failed (module unload not clean)"),
                         ("done", "guest did not finish (crash, hang or timeout)")]:
        seen = marker(prefix)
        if seen and not any(l.startswith(f"@@HLRS {prefix} rc=0") or prefix == "done" for l in seen):
            tally.problems.append(f"{where}: {what}")
        elif not seen and not stopped:
            tally.problems.append(f"{where}: {what}")
    for l in lines:
        if l.startswith("@@HLRS-HOST") and not STOPPED.match(l):
            tally.problems.append(f"{where}: " + l[len("@@HLRS-HOST "):])
    # Userspace test output is not kernel output: skip that section.
    user = {l for _, g in sections(raw, "guest-tests-begin", "guest-tests-end") for l in g}
    bugs = [l for l in lines if BUG_RE.search(l) and not l.startswith("@@HLRS") and l not in user]
    for b in dict.fromkeys(bugs):
        tally.problems.append(f"{where} log: kernel report: {b.strip()}")



def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--guest", required=True, help="guest console log")
    ap.add_argument("--host", help="host cargo test output")
    ap.add_argument("--expect-guest-tests", action="store_true")
    ap.add_argument("--pci-guest", help="console log of the boot with the PCI Gaudi2")
    ap.add_argument("--lint", help="file with one lint failure per line")
    ap.add_argument("--expect-check", action="append", default=[],
                    help="a `@@HLRS check NAME rc=N` marker that must be present")
    a = ap.parse_args()
    tally = Tally()

    if a.host:
        print("== host: cargo test")
        with open(a.host, errors="replace") as f:
            parse_libtest([l.rstrip("\n") for l in f], tally, "host cargo test")

    parse_guest(a.guest, tally, "guest", True, a.expect_guest_tests, a.expect_check)
    if a.pci_guest:
        # The boot with the PCI Gaudi2 (HLRS_PCI=1): its KUnit ran in the first.
        parse_guest(a.pci_guest, tally, "PCI guest", False, True, [])

    if a.lint:
        with open(a.lint) as f:
            tally.problems += [l.strip() for l in f if l.strip()]

    if tally.problems:
        print("== problems")
        for p in tally.problems:
            print(f"  - {p}")
    # Each problem counts as one failed check: the run is not green.
    failed = tally.failed + len(tally.problems)
    line = f"{tally.passed} passed, {failed} failed"
    if tally.skipped:
        line += f", {tally.skipped} skipped"
    print(line)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
