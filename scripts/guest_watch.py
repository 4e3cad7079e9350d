#!/usr/bin/env python3
"""Run the guest (QEMU) and watch its progress (scripts/guest.sh calls this).

    guest_watch.py --log LOG --live LIVE [options] -- qemu-system-x86_64 ...

QEMU's stdout and stderr (the kernel console, serial port 0) go to LOG; the
guest's init writes its markers and the in-guest tests' output, as they
happen, to serial port 1, which QEMU writes to LIVE. The guest makes
progress when LIVE grows or the console shows a KTAP line (the KUnit suites at
module load print each case as it ends) or an `@@HLRS` marker. Kernel reports
are not progress: a hung test with the hung-task detector repeating itself is
still a stall.

Limits (wall-clock seconds):
  --stall S  the guest made no progress for S s: stop it (HLRS_GUEST_STALL)
  --cap C    the whole run took C s: stop it (HLRS_GUEST_TIMEOUT)
When it stops the guest, or QEMU ends before the guest's `@@HLRS done`, one
line `@@HLRS-HOST guest ...` naming what was running is appended to LOG (the
test binary and libtest case, or the KUnit suite and case at load), and the
exit status is 124 for a stop. scripts/summarize.py reports that line as the
run's one failure instead of everything that could not run after it.

--slow N runs the guest at 1/N of the CPU time it would get: QEMU is stopped
(SIGSTOP) for (1 - 1/N) of every 100 ms, as a cgroup CPU quota (cpu.max)
throttles, without burning CPU (HLRS_GUEST_SLOW; a check that the stall limit
holds on slower machines).

A progress line every 30 s goes to stderr; at the end, the longest quiet
stretch and the slowest test cases, and --times writes every test case's and
suite's duration (TSV: start s, seconds, pass, binary or KUnit suite, case).
"""
import argparse
import ctypes
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

TS = re.compile(r"^\[\s*(\d+\.\d+)\]\s?")
KTAP_SUITE = re.compile(r"^    # Subtest: (\S+)")
KTAP_PLAN = re.compile(r"^    1\.\.(\d+)")
KTAP_CASE = re.compile(r"^    (?:not ok|ok) (\d+) (\S+)")
KTAP_ANY = re.compile(r"^\s*((not )?ok \d+ |# Subtest: |1\.\.\d+|KTAP version)")
CASE_START = re.compile(r"^test (\S+) \.\.\. ")
CASE_END = re.compile(r"^test (\S+) \.\.\. .*\b(ok|FAILED|ignored)\s*$")
PROGRESS_EVERY = 30


def kunit_cases(src):
    """Each KUnit suite's case names in the order the module runs them (the
    order of the `#[test]` functions after `#[kunit_tests(suite)]`)."""
    suites = {}
    for path in Path(src).rglob("*.rs") if src else []:
        text = path.read_text(errors="replace")
        marks = list(re.finditer(r"kunit_tests\((\w+)\)", text))
        for i, m in enumerate(marks):
            end = marks[i + 1].start() if i + 1 < len(marks) else len(text)
            body = text[m.end():end]
            suites[m.group(1)] = re.findall(r"#\[test\][^{;]*?\bfn\s+(\w+)", body, re.S)
    return suites


class Tail:
    """New complete lines of a growing file, and its unfinished last line."""

    def __init__(self, path):
        self.path, self.off, self.part = path, 0, ""

    def read(self):
        try:
            with open(self.path, "rb") as f:
                f.seek(self.off)
                data = f.read()
        except FileNotFoundError:
            return [], False
        self.off += len(data)
        text = (self.part + data.decode(errors="replace")).replace("\r\n", "\n")
        lines = text.split("\n")
        self.part = lines.pop()
        # A progress bar redraws its line with `\r`: keep its last state.
        return [l.split("\r")[-1] for l in lines], bool(data)


class Watch:
    """What the guest is doing, from its two output channels."""

    def __init__(self, suites, t0):
        self.suites, self.t0 = suites, t0
        self.phase, self.label, self.binary = "boot", "", None
        self.case = self.case_t = self.binary_t = None
        self.suite = self.plan = self.last_case = None
        self.index = 0
        self.last, self.case_end_ts = t0, None
        self.done = self.live_seen = False
        self.quiet_max, self.quiet_what = 0.0, ""
        self.times = []

    def progress(self, now, during):
        if now - self.last > self.quiet_max:
            self.quiet_max, self.quiet_what = now - self.last, during
        self.last = now

    def record(self, start, now, where, case):
        self.times.append((start - self.t0, now - start, self.label, where, case))

    def marker(self, text, now):
        word = text.split()[0] if text.split() else ""
        if word == "done":
            self.done = True
        elif word == "running":
            parts = text.split()
            self.binary, self.label = parts[1], " ".join(parts[2:])
            self.binary_t, self.case, self.phase = now, None, "tests"
        elif word == "guest-tests-begin":
            self.end_case(now)
            if self.binary is not None:
                self.record(self.binary_t, now, self.binary, "(whole binary)")
                self.phase = f"after test binary `{self.binary}` ({self.label})"
            self.binary = None
        elif word == "guest-tests-end":
            pass
        elif word == "insmod-begin":
            self.phase, self.label = "KUnit at load", "load"
        elif word == "insmod-end":
            self.suite, self.phase = None, "after the load"
        elif word not in ("check", "hugepages", "boot"):
            self.phase = text

    def end_case(self, now):
        if self.case is not None:
            self.record(self.case_t, now, self.binary or "?", self.case)
        self.case = None

    def live_line(self, line, now, complete=True):
        if line.startswith("@@HLRS "):
            if complete:
                self.marker(line[len("@@HLRS "):], now)
            return
        end = CASE_END.match(line) if complete else None
        start = CASE_START.match(line)
        if start and start.group(1) != self.case:
            self.end_case(now)
            self.case, self.case_t = start.group(1), now
        if end and end.group(1) == self.case:
            self.end_case(now)
        elif complete and line.startswith("test result:"):
            self.end_case(now)

    def console_line(self, line, now):
        # KUnit cases are timed by the kernel's timestamps: the console
        # reaches the host in bursts.
        ts = TS.match(line)
        ts = float(ts.group(1)) if ts else None
        line = TS.sub("", line)
        if line.startswith("@@HLRS "):
            # The markers come on the live channel first; from the console
            # only when there is no live channel (a kernel without ttyS1).
            if not self.live_seen:
                self.marker(line[len("@@HLRS "):], now)
            return True
        if self.phase != "KUnit at load" or not KTAP_ANY.match(line):
            return False
        m = KTAP_SUITE.match(line)
        if m:
            self.suite, self.plan, self.index = m.group(1), None, 0
            self.last_case, self.case_end_ts = None, ts
        elif KTAP_PLAN.match(line):
            self.plan = int(KTAP_PLAN.match(line).group(1))
        elif KTAP_CASE.match(line) and self.suite:
            m = KTAP_CASE.match(line)
            self.index, self.last_case = int(m.group(1)), m.group(2)
            if ts is not None and self.case_end_ts is not None:
                self.times.append((now - self.t0, ts - self.case_end_ts,
                                   "load", "KUnit " + self.suite, self.last_case))
            self.case_end_ts = ts
        elif re.match(r"^(not ok|ok) \d+ ", line):
            self.suite = None
        return True

    def kunit_now(self):
        if self.suite is None:
            return "the module load (insmod), outside the KUnit suites"
        n = self.index + 1
        of = f" of {self.plan}" if self.plan else ""
        names = self.suites.get(self.suite, [])
        if self.plan and len(names) == self.plan and n <= len(names):
            name = f" `{names[n - 1]}`"
        elif self.last_case:
            name = f" (the one after `{self.last_case}`)"
        else:
            name = ""
        return f"KUnit at load: suite `{self.suite}`, case {n}{of}{name}"

    def describe(self, now):
        if self.phase == "KUnit at load":
            return self.kunit_now()
        if self.binary is not None:
            what = f"guest test binary `{self.binary}` ({self.label})"
            if self.case is not None:
                return f"{what}, test case `{self.case}` ({now - self.case_t:.0f} s in it)"
            return f"{what}, between test cases ({now - self.binary_t:.0f} s in the binary)"
        return f"the guest's init, at `{self.phase}`"


def die_with_parent():
    """In QEMU's process before exec: SIGKILL when this watcher dies, so a
    QEMU stopped by --slow is never left behind."""
    try:
        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def stop(proc):
    try:
        proc.send_signal(signal.SIGCONT)
        proc.terminate()
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    except ProcessLookupError:
        pass


def throttle(proc, slow, seconds):
    """Let QEMU run for 1/slow of the next `seconds`, in 100 ms periods."""
    if slow <= 1:
        time.sleep(seconds)
        return
    period = 0.1
    for _ in range(max(1, round(seconds / period))):
        if proc.poll() is not None:
            return
        os.kill(proc.pid, signal.SIGCONT)
        time.sleep(period / slow)
        if proc.poll() is not None:
            return
        os.kill(proc.pid, signal.SIGSTOP)
        time.sleep(period * (1 - 1 / slow))
    os.kill(proc.pid, signal.SIGCONT)


def poll(watch, console, live, now):
    during = watch.describe(now)
    lines, grew = live.read()
    watch.live_seen = watch.live_seen or grew
    for l in lines:
        watch.live_line(l, now)
    if live.part:
        watch.live_line(live.part, now, complete=False)
    seen = grew
    for l in console.read()[0]:
        seen = watch.console_line(l, now) or seen
    if seen:
        watch.progress(now, during)


def report(watch, a, now, rc, why):
    print(f"    {a.label}: {now - watch.t0:.0f} s; longest stretch without progress "
          f"{watch.quiet_max:.0f} s (stall limit {a.stall:.0f} s), during {watch.quiet_what or '-'}",
          file=sys.stderr)
    slow = sorted((t for t in watch.times if t[4] != "(whole binary)" and t[1] >= 1),
                  key=lambda t: -t[1])[:5]
    if slow:
        print(f"    {a.label}: slowest test cases: " + "; ".join(
            f"{w} `{c}` [{p}] {s:.0f} s" for _, s, p, w, c in slow), file=sys.stderr)
    if a.times:
        with open(a.times, "w") as f:
            f.write("start_s\tseconds\tpass\twhere\tcase\n")
            for start, secs, label, where, case in watch.times:
                f.write(f"{start:.0f}\t{secs:.1f}\t{label}\t{where}\t{case}\n")
    if why:
        with open(a.log, "a") as f:
            f.write(f"\n@@HLRS-HOST {why}\n")
        print(f"    {a.label}: {why}", file=sys.stderr)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--log", required=True)
    ap.add_argument("--live", required=True)
    ap.add_argument("--stall", type=float, default=300)
    ap.add_argument("--cap", type=float, default=3600)
    ap.add_argument("--slow", type=float, default=1)
    ap.add_argument("--src", help="the module's sources, for the KUnit case names")
    ap.add_argument("--times", help="write each case's duration here (TSV)")
    ap.add_argument("--label", default="guest",
                    help="what the progress lines call this guest (two may run at once)")
    ap.add_argument("cmd", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    cmd = a.cmd[1:] if a.cmd[:1] == ["--"] else a.cmd
    for p in (a.live,):
        open(p, "w").close()
    t0 = time.monotonic()
    watch = Watch(kunit_cases(a.src), t0)
    console, live = Tail(a.log), Tail(a.live)
    with open(a.log, "w") as out:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                                preexec_fn=die_with_parent)
    signal.signal(signal.SIGTERM, lambda *_: (stop(proc), sys.exit(143)))
    why, next_line = None, t0 + PROGRESS_EVERY
    try:
        while proc.poll() is None:
            throttle(proc, a.slow, 1.0)
            now = time.monotonic()
            poll(watch, console, live, now)
            if now - watch.last >= a.stall:
                why = (f"guest stalled: no progress for {now - watch.last:.0f} s "
                       f"(HLRS_GUEST_STALL={a.stall:.0f}), {now - t0:.0f} s into the run; "
                       f"running: {watch.describe(now)}")
            elif now - t0 >= a.cap:
                why = (f"guest timed out: the run's cap of {a.cap:.0f} s (HLRS_GUEST_TIMEOUT); "
                       f"running: {watch.describe(now)}")
            if why:
                stop(proc)
                break
            if now >= next_line:
                next_line = now + PROGRESS_EVERY
                print(f"    ... {a.label}: {now - t0:.0f} s, {watch.describe(now)}", file=sys.stderr)
    except KeyboardInterrupt:
        stop(proc)
        raise
    now = time.monotonic()
    poll(watch, console, live, now)
    rc = 124 if why else proc.returncode
    if not why and not watch.done:
        why = (f"guest ended before finishing (QEMU exit status {rc}), {now - t0:.0f} s "
               f"into the run; running: {watch.describe(now)}")
    report(watch, a, now, rc, why)
    return rc


if __name__ == "__main__":
    sys.exit(main())
