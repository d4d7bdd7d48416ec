#!/usr/bin/env python3
"""tools/projection/mtp_spark.py: its pieces on values worked by hand, then the whole table.

Expected tokens per step (1 - a^(k+1)) / (1 - a): k 2, a 0.8 -> 2.44; every draft kept -> k + 1.
Distinct experts of t tokens picking 10 of 512 independently: t 1 -> 10, t 3 -> 29.42; shared
routing keeps 10. One routed expert of the 80B in NVFP4: 3 x 2048 x 512 x 0.5625 B = 1.769 MB.
The decode step: 48 x 43.3 MB + 0.622 GB = 2.7004 GB at 273 GB/s is 9.892 ms, + 4.8 ms fixed.
"""
import importlib.util
import math
import re
import subprocess
import sys


def check(ok, what):
    if not ok:
        sys.exit("FAIL " + what)
    print("ok   " + what)


def main():
    script = sys.argv[1]
    spec = importlib.util.spec_from_file_location("mtp_spark", script)
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    check(math.isclose(m.tokens_per_step(2, 0.8), 2.44), "tokens per step, k 2, a 0.8")
    check(m.tokens_per_step(3, 1.0) == 4, "tokens per step when every draft is kept")
    check(math.isclose(m.distinct_experts(1, True), 10), "one token picks top_k experts")
    check(abs(m.distinct_experts(3, True) - 29.418) < 0.001, "three independent tokens' experts")
    check(m.distinct_experts(3, False) == 10, "shared routing reads top_k experts")
    check(abs(m.expert_mb() - 1.769) < 0.001, "one NVFP4 expert's bytes")

    out = subprocess.run([sys.executable, script, "--accept", "0.8", "--ks", "2"],
                         capture_output=True, text=True)
    print(out.stdout, out.stderr)
    check(out.returncode == 0, "the script runs")
    check("2.70 GB" in out.stdout and "14.7 ms, 68.1 tok/s" in out.stdout, "the decode step line")
    rows = [line.split() for line in out.stdout.splitlines() if re.match(r"\s*2\s+0\.80", line)]
    check(len(rows) == 2, "one row per routing bound")
    shared, independent = ({r[4]: r for r in rows}[b] for b in ("shared", "independent"))
    # Columns: k a tok/step | routing GB ms | today x | graphs x (bars are their own fields).
    check(float(independent[6]) > float(shared[6]) and float(independent[5]) > float(shared[5]), "independent routing makes the verify slower")
    for r in rows:
        check(float(r[11]) > float(r[8]), r[4] + ": graphs beat today's eager verify")
        check(math.isclose(float(r[12]), float(r[11]) / 68.1, rel_tol=0.02),
              r[4] + ": the ratio is against decoding alone")


if __name__ == "__main__":
    main()
