#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Every relative Markdown link in README.md and docs/*.md resolves: the file
exists, and a #anchor names a heading of the target (GitHub's slugs)."""
import os, re, sys, glob
root = sys.argv[1] if len(sys.argv) > 1 else '.'
os.chdir(root)
def slugs(path):
    out, seen, fence = set(), {}, False
    for line in open(path):
        if line.startswith('```'): fence = not fence; continue
        m = None if fence else re.match(r'^(#{1,6})\s+(.*?)\s*#*\s*$', line)
        if not m: continue
        s = m.group(2).strip().lower()
        s = re.sub(r'[^\w\- ]', '', s).replace(' ', '-')
        n = seen.get(s, 0); seen[s] = n + 1
        out.add(s if n == 0 else f'{s}-{n}')
    return out
bad = n = 0
for f in ['README.md'] + sorted(glob.glob('docs/*.md')):
    text = open(f).read()
    text = re.sub(r'```.*?```', '', text, flags=re.S)
    for m in re.finditer(r'\]\(([^)\s]+)\)', text):
        target = m.group(1)
        if re.match(r'[a-z]+:', target): continue
        n += 1
        path, _, anchor = target.partition('#')
        dest = os.path.normpath(os.path.join(os.path.dirname(f), path)) if path else f
        if not os.path.exists(dest):
            print(f'{f}: {target}: no file {dest}'); bad += 1; continue
        if anchor and anchor not in slugs(dest):
            print(f'{f}: {target}: no heading #{anchor} in {dest}'); bad += 1
print(f'{n} links checked, {bad} broken')
sys.exit(1 if bad else 0)
