#!/usr/bin/env bash
# Where a batch-1 decode step's time goes, with the GPU's own timestamps: `generate` under
# tools/kernel-trace (CUPTI records of every kernel, graph replays included, so dependent launches
# show their overlap) and summarize.py's charges per kernel over the last 64 steps.
# Needs build-here.sh's nibble-engine and nibble-kernel-trace.
# Usage: tools/device/trace-step.sh NAME MODEL_DIR [generate flags...]
source "$(dirname "$0")/device_env.sh"
name=$1 model=$2
shift 2
trace_lib=$carry/lib/libnibble-kernel-trace.so
[ -f "$trace_lib" ] || { echo "no $trace_lib: build-here.sh nibble-kernel-trace first"; exit 1; }
args=(generate --model "$model" --device cuda --prompt-ids "$(seq -s, 1 512)" --max-tokens 96
  --top-k 1 --warmup --sample-on-device "$@")
# NIBBLE_TRACE_ONLY=1: no untraced run (a large model's load is a minute or more).
if [ "${NIBBLE_TRACE_ONLY:-0}" != 1 ]; then
  "$bin/nibble-engine" "${args[@]}" >"$OUT/untraced_$name.log" 2>&1 || status=1
  echo "$name untraced: $(grep -oE 'prefill [0-9]+ tokens.*' "$OUT/untraced_$name.log")"
fi
CUDA_INJECTION64_PATH=$trace_lib NIBBLE_TRACE_OUT=$OUT/trace_$name.csv \
  "$bin/nibble-engine" "${args[@]}" >"$OUT/traced_$name.log" 2>&1 || status=1
python3 tools/kernel-trace/summarize.py "$OUT/trace_$name.csv" --steps 64 | tee "$OUT/trace_$name.txt"
gzip -f "$OUT/trace_$name.csv"
exit $status
