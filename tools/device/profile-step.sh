#!/usr/bin/env bash
# Where a decode step's time goes, on the device machine (binaries from tools/device/bundle.sh):
# Nsight Compute times every kernel (one metric, gpu__time_duration) of a short `generate`, the
# kernels are split into forward passes at each embedding launch, and the last passes (decode
# steps replayed from their CUDA graph) are summed per kernel name: the table shows launches and
# µs per step by kernel, beside the step's wall time measured without the profiler. The gap
# between the two is launch latency and idle time between kernels.
# Usage: tools/device/profile-step.sh [--moe] [--no-8b] [--flash N] [--steps N] [--tag T]
#   --moe      also the Qwen3-30B-A3B-shaped model (made here, ~17 GB)
#   --tag T    suffix of the log names, to profile the same model under other NIBBLE_* switches
#   --flash N  an Nsight Compute full-set profile of one flash prefill launch at an N-token prompt
source "$(dirname "$0")/device_env.sh"
MOE=0; BIG=1; FLASH=0; STEPS=4; TAG=
while [ $# -gt 0 ]; do
  case "$1" in --moe) MOE=1 ;; --no-8b) BIG=0 ;; --flash) FLASH=$2; shift ;; --steps) STEPS=$2; shift ;; --tag) TAG=_$2; shift ;; esac
  shift
done

# profile_decode NAME MODEL_DIR: per-kernel table of the last decode steps, and the unprofiled
# decode rate over 128 tokens.
profile_decode() {
  local name=$1$TAG model=$2 ids
  ids=$(seq -s, 1 64)
  "$bin/nibble-engine" generate --model "$model" --device cuda --prompt-ids "$(seq -s, 1 512)" \
    --max-tokens 128 --top-k 1 >"$OUT/generate_$name.log" 2>&1 || status=1
  echo "$name unprofiled: $(grep -oE 'prefill [0-9]+ tokens.*' "$OUT/generate_$name.log")"
  timeout 400 ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum --csv --print-units base \
    "$bin/nibble-engine" generate --model "$model" --device cuda --prompt-ids "$ids" \
    --max-tokens "$STEPS" --top-k 1 >"$OUT/ncu_decode_$name.csv" 2>"$OUT/ncu_decode_$name.err" ||
    { status=1; tail -3 "$OUT/ncu_decode_$name.err"; }
  python3 - "$OUT/ncu_decode_$name.csv" "$((STEPS - 2))" <<'PY' | tee "$OUT/profile_$name.txt"
import csv, sys, collections, re
path, keep = sys.argv[1], max(1, int(sys.argv[2]))
rows = []
with open(path) as f:
    lines = [l for l in f if l.startswith('"')]
for r in csv.DictReader(lines):
    if r.get("Metric Name") != "gpu__time_duration.sum":
        continue
    rows.append((int(r["ID"]), r["Kernel Name"], float(r["Metric Value"].replace(",", ""))))
rows.sort()
starts = [i for i, (_, n, _) in enumerate(rows) if "embed_kernel" in n]
if len(starts) < 2:
    print("no forward passes found"); sys.exit(0)
passes = [rows[a:b] for a, b in zip(starts, starts[1:] + [len(rows)])]
last = passes[-keep:]
per = collections.defaultdict(lambda: [0, 0.0])
for p in last:
    for _, n, ns in p:
        key = re.sub(r"\(anonymous namespace\)::|\bnibble::|\bkernels::|^void ", "", n)
        key = re.sub(r"\(.*$", "", key)[:90]
        per[key][0] += 1
        per[key][1] += ns
total = sum(v[1] for v in per.values()) / len(last)
print(f"{len(passes)} forward passes profiled; the last {len(last)} averaged: "
      f"{sum(len(p) for p in last) / len(last):.0f} kernels, {total / 1000:.1f} us of kernel time a step")
print(f"{'kernel':92s} {'launches':>8s} {'us/step':>9s} {'share':>6s}")
for k, (cnt, ns) in sorted(per.items(), key=lambda kv: -kv[1][1]):
    print(f"{k:92s} {cnt / len(last):8.1f} {ns / len(last) / 1000:9.1f} {100 * ns / len(last) / total:5.1f}%")
PY
}

step() { echo "== $*"; }
step "environment"
{ nvidia-smi -L; date -u; ncu --version | tail -1; } 2>&1 | tee "$OUT/env.log"

if [ $BIG -eq 1 ]; then
  step "Llama-3.1-8B NVFP4: decode step by kernel"
  ensure_llama8b && profile_decode llama8b "$work/llama8b"
  if [ "$FLASH" -gt 0 ]; then
    step "Llama-3.1-8B NVFP4: one flash prefill launch at a $FLASH-token prompt (ncu full set)"
    timeout 300 ncu --clock-control none --set full --import-source yes --kernel-name regex:flash --launch-skip 8 --launch-count 1 \
      "$bin/nibble-engine" generate --model "$work/llama8b" --device cuda \
      --prompt-ids "$(seq -s, 1 "$FLASH")" --max-tokens 1 --top-k 1 >"$OUT/ncu_flash_$FLASH.log" 2>&1 ||
      status=1
    grep -E '^  [a-z_:<>0-9A-Za-z ]+\(|Duration|Throughput|Achieved Occupancy|Registers Per|Issue Slots Busy|No Eligible|Warp Cycles Per Issued|Shared Memory|Bank|Block Limit|Theoretical Occupancy|Stall|Executed Ipc' \
      "$OUT/ncu_flash_$FLASH.log" | head -80
  fi
fi

if [ $MOE -eq 1 ]; then
  step "Qwen3-30B-A3B NVFP4: decode step by kernel"
  [ -f "$work/qwen3moe/config.json" ] ||
    "$bin/nibble-make-model" --arch qwen3_moe --preset qwen3-30b-a3b --dtype nvfp4 --seed 1 \
      --shared-global-scales --threads 16 --tokenizer "$carry/tokenizers/qwen3" \
      --force --output "$work/qwen3moe" >"$OUT/make_moe.log" 2>&1 || { status=1; tail -5 "$OUT/make_moe.log"; }
  profile_decode qwen3moe "$work/qwen3moe"
fi
echo "status $status"
exit $status
