#!/usr/bin/env bash
# Served throughput on the device machine (binaries from tools/device/bundle.sh in .device-carry):
# a Llama-3.1-8B-shaped NVFP4 model (random weights) behind `nibble-engine serve`, measured with
# nibble-bench at 512 in / 128 out (concurrency 32 and 64) and 8,192 in / 256 out (concurrency 8),
# for the current build and, when carried, .device-carry/bin/nibble-engine-base (an older build:
# an A/B in one call). Extra serve flags: SERVE_ARGS. VARIANTS="name:flags;name:flags" serves the
# current build once per variant instead (e.g. --max-num-batched-tokens choices). RUNS="c:prompts:in:out
# ..." replaces the default loads. Logs go to $OUT.
source "$(dirname "$0")/device_env.sh"
ensure_llama8b
# Runs: "label|binary|flags".
runs=("nibble-engine|nibble-engine|")
[ -x "$bin/nibble-engine-base" ] && runs+=("nibble-engine-base|nibble-engine-base|")
if [ -n "${VARIANTS:-}" ]; then
  runs=()
  IFS=';' read -r -a variants <<<"$VARIANTS"
  for v in "${variants[@]}"; do runs+=("${v%%:*}|nibble-engine|${v#*:}"); done
fi
for spec in "${runs[@]}"; do
  IFS='|' read -r engine binary flags <<<"$spec"
  log=$OUT/serve_$engine.log
  ok=0
  # shellcheck disable=SC2086  # flags are words
  start_server "$binary" 8400 "$log" --max-model-len 10240 --max-num-seqs 64 ${SERVE_ARGS:-} \
    $flags && ok=1
  if [ $ok -eq 1 ]; then
    for run in ${RUNS:-32:128:512:128 64:256:512:128 8:16:8192:256}; do
      set -- ${run//:/ }
      "$bin/nibble-bench" --base-url http://127.0.0.1:8400 --endpoint completions --input-len "$3" \
        --output-len "$4" --num-prompts "$2" --max-concurrency "$1" --no-progress \
        >"$OUT/bench_${engine}_c$1_in$3.log" 2>&1 || status=1
      echo "$engine c=$1 in=$3 out=$4: $(grep -E 'Output token throughput' "$OUT/bench_${engine}_c$1_in$3.log" | grep -oE '[0-9.]+$') tok/s out, TTFT median $(grep -E 'Median TTFT' "$OUT/bench_${engine}_c$1_in$3.log" | grep -oE '[0-9.]+$') ms, p99 $(grep -E 'P99 TTFT' "$OUT/bench_${engine}_c$1_in$3.log" | grep -oE '[0-9.]+$') ms, TPOT median $(grep -E 'Median TPOT' "$OUT/bench_${engine}_c$1_in$3.log" | grep -oE '[0-9.]+$') ms"
    done
  else
    status=1; tail -5 "$log"
  fi
  stop_server
done > >(tee "$OUT/serve_ab.log")  # the loop stays in this shell: its status counts
echo "status $status"
exit $status
