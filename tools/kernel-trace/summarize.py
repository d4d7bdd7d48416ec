#!/usr/bin/env python3
"""Per-step critical path of a decode from a kernel trace (kernel_trace.cpp's CSV).

Steps start at each `--step-kernel` (default: the embedding kernel). Over the last `--steps`
complete steps (skipping the warm-up), every kernel of a step is charged the time by which it
moved the step's end forward: max(0, end - latest end before it). The charges of a step add up to
its GPU span (first start to last end); the rest of the wall time between steps is the host's.
Prints the step's GPU span and the gap to the next step's first kernel, then per kernel name
(largest charge first) launches a step, mean duration (start to end, which includes waiting
under a dependent launch) and mean charge.
Usage: summarize.py TRACE.csv [--steps N] [--step-kernel SUBSTRING] [--names-width W]
(default step kernel: layer_ops' embed_kernel, the first of every forward pass)
"""
import argparse
import csv
import re
import shutil
import statistics
import subprocess
import sys


def readable(names):
    """Demangled (c++filt, where installed) and without namespaces or parameter lists."""
    names = sorted(set(names))
    plain = names
    if shutil.which("c++filt"):
        out = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True)
        if out.returncode == 0 and len(out.stdout.splitlines()) == len(names):
            plain = out.stdout.splitlines()
    short = {}
    for mangled, name in zip(names, plain):
        name = re.sub(r"\(anonymous namespace\)::|\b[A-Za-z_0-9]+::", "", name)
        depth, cut = 0, len(name)
        for i, ch in enumerate(name):  # the first '(' outside template brackets
            depth += ch == "<"
            depth -= ch == ">"
            if ch == "(" and depth == 0:
                cut = i
                break
        name = name[:cut].replace("void ", "", 1)
        short[mangled] = name
    return short


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("trace")
    ap.add_argument("--steps", type=int, default=64)
    ap.add_argument("--step-kernel", default="embed_kernel")
    ap.add_argument("--names-width", type=int, default=90)
    a = ap.parse_args()
    rows = []
    with open(a.trace) as f:
        for r in csv.DictReader(f):
            rows.append((int(r["start_ns"]), int(r["end_ns"]), r["name"]))
    rows.sort()
    short_of = readable(r[2] for r in rows)
    starts = [i for i, r in enumerate(rows) if a.step_kernel in r[2]]
    if len(starts) < 3:
        sys.exit(f"fewer than 3 steps marked by '{a.step_kernel}' in {a.trace}")
    steps = [(starts[i], starts[i + 1]) for i in range(len(starts) - 1)]
    steps = steps[-a.steps:]
    per_name = {}
    order = []
    spans, gaps = [], []
    for lo, hi in steps:
        latest = rows[lo][0]
        for start, end, name in rows[lo:hi]:
            short = short_of[name][: a.names_width]
            if short not in per_name:
                per_name[short] = {"count": 0, "dur": 0.0, "charge": 0.0}
                order.append(short)
            e = per_name[short]
            e["count"] += 1
            e["dur"] += end - start
            e["charge"] += max(0, end - latest)
            latest = max(latest, end)
        spans.append(latest - rows[lo][0])
        gaps.append(rows[hi][0] - latest)
    n = len(steps)
    print(f"{n} steps; per step: GPU span {statistics.mean(spans) / 1e3:.1f} us "
          f"(median {statistics.median(spans) / 1e3:.1f}), gap to the next step "
          f"{statistics.mean(gaps) / 1e3:.1f} us (median {statistics.median(gaps) / 1e3:.1f})")
    print(f"{'kernel':<{a.names_width}} {'n/step':>7} {'dur us':>9} {'charge us':>10} {'share':>6}")
    total = sum(per_name[k]["charge"] for k in order) / n
    for k in sorted(order, key=lambda k: -per_name[k]["charge"]):
        e = per_name[k]
        print(f"{k:<{a.names_width}} {e['count'] / n:7.1f} {e['dur'] / n / 1e3:9.1f} "
              f"{e['charge'] / n / 1e3:10.1f} {100 * e['charge'] / n / total if total else 0:5.1f}%")


if __name__ == "__main__":
    main()
