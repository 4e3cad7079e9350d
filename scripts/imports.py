#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""The module's file-level import graph, from its `use` lines and `crate::`
paths, without test code (`#[kunit_tests]` suites, `#[cfg(CONFIG_KUNIT)]`
items, `#[cfg(test)]`).

    scripts/imports.py            print the graph, floor by floor
    scripts/imports.py --check    also fail (exit 1) on a cycle or an import
                                  of a higher floor
    scripts/imports.py --dot      the graph in Graphviz dot
    scripts/imports.py --with-tests   count the imports of test code too
    scripts/imports.py --sizes    also fail on a production (non-test)
                                  function over 80 lines or a file over
                                  1,200 lines of non-test code

Floors (each file imports only its own floor or those below; within a floor
the files must not import each other in a cycle) are the table FLOORS below,
the same table as the README's layout section.

Floor 0, the model core (src/model.rs, src/model/), is also compiled into
the userspace server src/user/gaudi2-model: its files import only each other
and only by `super::`/`self::` paths (no `crate::`, which would name the
kernel crate's root), and use neither `kernel`, `alloc`, `std` nor `unsafe`.
"""

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src"
CRATE_ROOT = SRC / "hlrs.rs"

# (path prefix relative to src/, floor, name). The first matching prefix wins.
FLOORS = [
    ("model", 0, "model core (kernel-free)"),
    ("uapi.rs", 1, "ground"),
    ("asic", 1, "ground"),
    ("params.rs", 1, "ground"),
    ("small_array.rs", 1, "ground"),
    ("sort.rs", 1, "ground"),
    ("ffi", 2, "ffi wrappers"),
    ("hw", 3, "hardware"),
    ("mmu", 4, "mmu"),
    ("vm", 5, "vm, cs"),
    ("cs", 5, "vm, cs"),
    ("context.rs", 6, "context, device"),
    ("device.rs", 6, "context, device"),
    ("file.rs", 6, "context, device"),
    ("ioctl", 7, "ioctl"),
    ("shell", 8, "shell"),
    ("hlrs.rs", 8, "shell"),
    ("bench", 9, "benchmarks (KUnit builds only)"),
]


def floor_of(rel):
    for prefix, floor, name in FLOORS:
        if rel == prefix or rel.startswith(prefix.rstrip("/") + "/") or rel.startswith(
            prefix.removesuffix(".rs") + ".rs"
        ):
            return floor, name
    return None, None


def strip_comments(text):
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            i = n if j < 0 else j + 2
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append('""')
            i = j + 1
        elif c == "'" and i + 2 < n and (text[i + 2] == "'" or text[i + 1] == "\\"):
            j = text.find("'", i + 2 if text[i + 1] == "\\" else i + 1)
            out.append("' '")
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


TEST_ATTR = re.compile(
    r"#\[(?:(?:kernel::macros::)?kunit_tests\([^)]*\)|cfg\((?:test|CONFIG_KUNIT(?:\s*=\s*\"y\")?|\"\"|kunit)\))\]"
)


def skip_item(text, i):
    """The end of the item that starts at i: its matching brace, or its ';'."""
    n = len(text)
    depth = 0
    while i < n:
        c = text[i]
        if c in "([":
            depth += 1
        elif c in ")]":
            depth -= 1
        elif c == ";" and depth == 0:
            return i + 1
        elif c == "{" and depth == 0:
            d = 0
            while i < n:
                if text[i] == "{":
                    d += 1
                elif text[i] == "}":
                    d -= 1
                    if d == 0:
                        return i + 1
                i += 1
            return n
        i += 1
    return n


def strip_tests(text):
    while True:
        m = TEST_ATTR.search(text)
        if not m:
            return text
        text = text[: m.start()] + text[skip_item(text, m.end()) :]


def module_path(f):
    rel = f.relative_to(SRC).with_suffix("")
    if f == CRATE_ROOT:
        return []
    return list(rel.parts)


def file_of(segments):
    """The file that defines the module named by the longest prefix of segments."""
    for k in range(len(segments), 0, -1):
        p = SRC.joinpath(*segments[:k]).with_suffix(".rs")
        if p.exists():
            return p
    return CRATE_ROOT


def expand_use(body):
    """`a::{b, c::{d}}` -> [a::b, a::c::d]."""
    body = re.sub(r"\s+", "", body)
    out = []

    def rec(prefix, s):
        depth, start, parts = 0, 0, []
        for i, c in enumerate(s):
            if c == "{":
                depth += 1
            elif c == "}":
                depth -= 1
            elif c == "," and depth == 0:
                parts.append(s[start:i])
                start = i + 1
        parts.append(s[start:])
        for p in parts:
            if not p:
                continue
            if "{" in p:
                head, rest = p.split("{", 1)
                rec(prefix + head, rest[: rest.rfind("}")])
            else:
                out.append(prefix + p.split(" as ")[0])

    rec("", body)
    return out


def resolve(path, here, inner=0):
    """The file `path` names, used in file `here` inside `inner` inline
    modules (`mod tests { .. }`: its `super` is the file itself)."""
    segs = path.split("::")
    base = module_path(here) + ["<inline>"] * inner
    # A file `foo.rs` is the module foo; `super` of it is its parent.
    if segs[0] == "crate":
        segs = segs[1:]
    elif segs[0] in ("super", "self"):
        cur = list(base)
        while segs and segs[0] in ("super", "self"):
            if segs[0] == "super":
                cur = cur[:-1]
            segs = segs[1:]
        segs = cur + segs
    else:
        return None
    segs = [s for s in segs if s and s != "self" and s != "*" and s != "<inline>"]
    return file_of(segs)


def edges_of(f):
    text = strip_comments(f.read_text())
    if "--with-tests" not in sys.argv:
        text = strip_tests(text)
    # `crate::LocalModule`, `THIS_MODULE` and `module_parameters` are made by
    # the `module!` macro for the kernel (`owner` fields, parameter values),
    # not project code.
    text = re.sub(r"crate::(LocalModule|THIS_MODULE|module_parameters)\b", "", text)
    # Inside an inline module (`mod tests { .. }`) `super` is the file itself.
    inline = [(m.end(), skip_item(text, m.end() - 1)) for m in re.finditer(r"\bmod\s+\w+\s*\{", text)]
    depth = lambda pos: sum(1 for a, b in inline if a <= pos < b)
    targets = set()
    for m in re.finditer(r"\buse\s+([^;]+);", text):
        for p in expand_use(m.group(1)):
            t = resolve(p, f, depth(m.start()))
            if t:
                targets.add(t)
    for m in re.finditer(r"(?<![\w:])((?:crate|super)(?:::\w+)+)", text):
        t = resolve(m.group(1), f, depth(m.start()))
        if t:
            targets.add(t)
    targets.discard(f)
    return targets


MAX_FN_LINES = 80
MAX_FILE_LINES = 1200


def size_problems(f, rel):
    """Functions over MAX_FN_LINES (all their lines) and files over
    MAX_FILE_LINES (non-blank lines outside comments), test code left out."""
    text = strip_tests(strip_comments(f.read_text()))
    lines = [l for l in text.split("\n") if l.strip()]
    out = []
    if len(lines) > MAX_FILE_LINES:
        out.append(f"size: {rel} has {len(lines)} lines of non-test code (max {MAX_FILE_LINES})")
    for m in re.finditer(r"(?m)^[ \t]*(?:pub(?:\([^)]*\))?\s+)?(?:const\s+)?(?:unsafe\s+)?(?:extern\s+\"C\"\s+)?fn\s+(\w+)", text):
        start = m.start()
        brace = text.find("{", m.end())
        semi = text.find(";", m.end())
        if brace < 0 or (0 <= semi < brace):
            continue
        end = skip_item(text, brace)
        # Every line from `fn` to the closing brace, comments and blank
        # lines included (as an editor counts them).
        body = text[start:end].split("\n")
        if len(body) > MAX_FN_LINES:
            out.append(f"size: {rel}: fn {m.group(1)} has {len(body)} lines (max {MAX_FN_LINES})")
    return out


MODEL_FORBIDDEN = re.compile(r"(?<![\w:])(crate::|kernel::|alloc::|std::|unsafe\b|extern\s+crate)")


def model_problems(f, rel):
    """What keeps a model-core file from building outside the kernel crate."""
    text = strip_tests(strip_comments(f.read_text()))
    found = sorted(set(m.group(1) for m in MODEL_FORBIDDEN.finditer(text)))
    return [f"model: {rel} uses {w!r} (the model core is core-only, super:: paths only)" for w in found]


def sccs(nodes, graph):
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in nodes:
        if v not in index:
            visit(v)
    return out


def main():
    files = sorted(p for p in SRC.rglob("*.rs") if "user" not in p.relative_to(SRC).parts)
    graph = {f: edges_of(f) for f in files}
    rel = lambda p: str(p.relative_to(SRC))
    problems = []
    if "--dot" in sys.argv:
        print("digraph imports {\n  rankdir=BT;")
        for f in files:
            for t in sorted(graph[f]):
                print(f'  "{rel(f)}" -> "{rel(t)}";')
        print("}")
        return 0
    by_floor = {}
    for f in files:
        fl, name = floor_of(rel(f))
        if fl is None:
            problems.append(f"{rel(f)}: on no floor (add it to FLOORS in {Path(__file__).name})")
            fl, name = -1, "none"
        by_floor.setdefault((fl, name), []).append(f)
    for (fl, name), fs in sorted(by_floor.items(), reverse=True):
        print(f"floor {fl}  {name}")
        for f in fs:
            deps = ", ".join(rel(t) for t in sorted(graph[f])) or "-"
            print(f"  {rel(f)} -> {deps}")
    for f in files:
        ff, _ = floor_of(rel(f))
        for t in graph[f]:
            tf, _ = floor_of(rel(t))
            if ff is not None and tf is not None and tf > ff:
                problems.append(f"up: {rel(f)} (floor {ff}) imports {rel(t)} (floor {tf})")
    for f in files:
        if floor_of(rel(f))[0] == 0:
            problems += model_problems(f, rel(f))
    if "--sizes" in sys.argv:
        for f in files:
            problems += size_problems(f, rel(f))
    for comp in sccs(files, graph):
        problems.append("cycle: " + ", ".join(rel(c) for c in comp))
    n_edges = sum(len(v) for v in graph.values())
    print(f"{len(files)} files, {n_edges} imports, {len(problems)} problem(s)")
    for p in problems:
        print("  " + p)
    return 1 if problems and "--check" in sys.argv else 0


if __name__ == "__main__":
    sys.exit(main())
