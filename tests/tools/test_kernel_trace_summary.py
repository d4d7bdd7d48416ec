#!/usr/bin/env python3
"""tools/kernel-trace/summarize.py on a synthetic trace whose answer is known by construction.

Four steps, each: embed_kernel [0, 2) us, a linear [1, 10) us (started early under a dependent
launch, so charged 10 - 2 = 8 us), a norm [9, 12) us (overlapping: charged 2 us), a router that
ends before the norm [10, 11) us (charged 0), then the next step starts 30 us after the step's end.
The summary over the last 3 complete steps must say: span 12 us, gap 30 us, and those charges.
"""
import re
import subprocess
import sys
import tempfile


def main():
    script = sys.argv[1]
    kernels = [("embed_kernel", 0, 2), ("linear_kernel<4>", 1, 10), ("norm_kernel", 9, 12),
               ("router_kernel", 10, 11)]
    period = 42_000  # ns: a 12 us span and a 30 us gap
    with tempfile.NamedTemporaryFile("w", suffix=".csv", delete=False) as f:
        f.write("start_ns,end_ns,graph_id,name\n")
        for step in range(4):
            for name, start, end in kernels:
                f.write(f"{step * period + start * 1000},{step * period + end * 1000},5,{name}\n")
        path = f.name
    out = subprocess.run([sys.executable, script, path, "--steps", "3"], capture_output=True,
                         text=True)
    print(out.stdout, out.stderr)
    if out.returncode != 0:
        sys.exit("summarize.py failed")
    span = re.search(r"GPU span ([0-9.]+) us", out.stdout)
    gap = re.search(r"gap to the next step ([0-9.]+) us", out.stdout)
    checks = [span is not None and float(span.group(1)) == 12.0,
              gap is not None and float(gap.group(1)) == 30.0]
    want = {"linear_kernel<4>": 8.0, "norm_kernel": 2.0, "embed_kernel": 2.0, "router_kernel": 0.0}
    for name, charge in want.items():
        line = next((l for l in out.stdout.splitlines() if l.startswith(name + " ")), None)
        fields = line.split() if line else []
        checks.append(len(fields) >= 4 and float(fields[-2]) == charge)
        if not checks[-1]:
            print(f"FAIL {name}: want charge {charge} us, line {line!r}")
    if not all(checks):
        sys.exit(f"checks failed: {checks}")
    print("PASS")


if __name__ == "__main__":
    main()
