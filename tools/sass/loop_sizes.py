#!/usr/bin/env python3
"""Instructions per iteration of each innermost loop in `cuobjdump -sass` output.

Usage: loop_sizes.py SASS_FILE [NAME_FILTER]
Prints, per kernel whose mangled name contains NAME_FILTER (default: all), each innermost loop
(a backward branch whose body holds no other backward branch) as its address range, its
instruction count and how many of them are HMMA / LDGSTS. PERF_NOTES.md quotes these counts as
"SASS instructions per k step".
"""
import re
import sys

INSTR = re.compile(r"^\s+/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;")
FUNC = re.compile(r"Function : (\S+)")
BRANCH = re.compile(r"\bBRA\b.*?(0x[0-9a-f]+)")


def kernels(lines):
    name, body = None, []
    for line in lines:
        m = FUNC.search(line)
        if m:
            if name:
                yield name, body
            name, body = m.group(1), []
            continue
        m = INSTR.match(line)
        if m and name:
            body.append((int(m.group(1), 16), m.group(2)))
    if name:
        yield name, body


def innermost_loops(body):
    loops = []
    for addr, text in body:
        m = BRANCH.search(text)
        if m and int(m.group(1), 16) < addr:
            loops.append((int(m.group(1), 16), addr))
    inner = []
    for lo, hi in loops:
        if not any(lo <= l2 and h2 <= hi and (l2, h2) != (lo, hi) for l2, h2 in loops):
            inner.append((lo, hi))
    return inner


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    name_filter = sys.argv[2] if len(sys.argv) > 2 else ""
    with open(sys.argv[1], errors="replace") as f:
        lines = f.read().splitlines()
    for name, body in kernels(lines):
        if name_filter not in name:
            continue
        print(name)
        for lo, hi in innermost_loops(body):
            ins = [t for a, t in body if lo <= a <= hi]
            hmma = sum("HMMA" in t for t in ins)
            ldgsts = sum("LDGSTS" in t for t in ins)
            print(f"  loop {lo:#06x}-{hi:#06x}: {len(ins)} instructions, {hmma} HMMA, {ldgsts} LDGSTS")


if __name__ == "__main__":
    main()
