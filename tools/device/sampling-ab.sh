#!/usr/bin/env bash
# Device sampling on the device machine (binaries from tools/device/bundle.sh in .device-carry):
# test_sampling_gpu (the kernel against its CPU reference, then --bench), then a
# Llama-3.1-8B-shaped NVFP4 model (random weights) served and measured with nibble-bench at 512 in
# / 128 out, concurrency 1 and 8, sampling on the device (the default) and on the host
# (--device-sampling false) in one call. Logs go to $OUT.
source "$(dirname "$0")/device_env.sh"
echo "== sampling kernel vs its CPU reference"
"$bin/test_sampling_gpu" >"$OUT/test_sampling_gpu.log" 2>&1 || status=1
grep -E "^FAIL|passed|near-tie" "$OUT/test_sampling_gpu.log" | head -10
"$bin/test_sampling_gpu" --bench >"$OUT/sampling_bench.log" 2>&1 || status=1
tail -8 "$OUT/sampling_bench.log"
ensure_llama8b
echo "== served 512 in / 128 out: device sampling vs host sampling"
for device_sampling in 1 0; do
  log=$OUT/serve_sampling$device_sampling.log
  ok=0
  on=true; [ $device_sampling = 0 ] && on=false
  start_server nibble-engine 8500 "$log" --max-model-len 4096 --max-num-seqs 64 \
    --device-sampling $on && ok=1
  if [ $ok -eq 1 ]; then
    for run in "1 16" "8 64"; do
      set -- $run
      bench=$OUT/bench_sampling${device_sampling}_c$1.log
      "$bin/nibble-bench" --base-url http://127.0.0.1:8500 --endpoint completions --input-len 512 \
        --output-len 128 --num-prompts "$2" --max-concurrency "$1" --no-progress >"$bench" 2>&1 ||
        status=1
      echo "device_sampling=$device_sampling c=$1: $(grep -E 'Output token throughput' "$bench" | grep -oE '[0-9.]+$') tok/s out, TPOT median $(grep -E 'Median TPOT' "$bench" | grep -oE '[0-9.]+$') ms"
    done
  else
    status=1; tail -5 "$log"
  fi
  stop_server
done > >(tee "$OUT/sampling_ab.log")  # the loop stays in this shell: its status counts
echo "status $status"
exit $status
