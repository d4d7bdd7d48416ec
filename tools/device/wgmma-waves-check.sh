#!/usr/bin/env bash
# One device call for the warpgroup-MMA split planner that counts cluster waves (issue 21,
# kernels/nvfp4/PERF_NOTES.md v28), then compute-sanitizer memcheck over issue 20's newest kernels:
#   1. test_nvfp4_gpu --quick (the wgmma tiles split 3 and 7 ways, summed in clusters);
#   2. nibble-kernel-bench on the Llama layers at M = 256 and 512 with --sweep-splits (every split
#      count of both wgmma tiles, the cluster counts the planner reads), then for the A/B
#      .device-carry/tbin/nibble-kernel-bench-base (an older build) and this one again, where
#      carried (the slots-only planner it was first compared with is deleted: PERF_NOTES,
#      "Deleted and moved forms");
#   3. memcheck: test_sampling_gpu --quick (one top logprob from the first pass), test_moe_gpu
#      --quick (the one-launch MoE decode, the route inside the expert GEMMs), test_cuda_backend's
#      device-sampling, MoE routing and graph tests.
# --no-sweep and --no-memcheck leave those out; --backend adds the whole test_cuda_backend (the
# CUDA backend against the CPU backend, prefills of 128+ rows on the planned tiles).
# Carried: .device-carry/tbin (those five binaries, optionally nibble-kernel-bench-base), /lib.
# Usage: tools/device/wgmma-waves-check.sh [--no-sweep] [--no-memcheck] [--backend]
source "$(dirname "$0")/device_env.sh"
tbin=$carry/tbin
sweep=(--sweep-splits); run_memcheck=1; backend=0
for a in "$@"; do
  case "$a" in --no-sweep) sweep=() ;; --no-memcheck) run_memcheck=0 ;; --backend) backend=1 ;;
    *) echo "unknown $a"; exit 2 ;; esac
done
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader

echo "== test_nvfp4_gpu --quick"
timeout 60 "$tbin/test_nvfp4_gpu" --quick >"$OUT/test_nvfp4_gpu.log" 2>&1 ||
  { status=1; grep -E "^FAIL" "$OUT/test_nvfp4_gpu.log" | head -5; }
grep -E "split7" "$OUT/test_nvfp4_gpu.log" | head -3
tail -1 "$OUT/test_nvfp4_gpu.log"

echo "== nibble-kernel-bench (${sweep[*]:-no sweep}), then the A/B"
bench_args=(--layers qkv,o,gate_up,down --ms 256,512)
timeout 150 "$tbin/nibble-kernel-bench" "${bench_args[@]}" "${sweep[@]}" >"$OUT/bench_waves.log" 2>&1 ||
  status=1
runs=(bench_waves)
if [ -x "$tbin/nibble-kernel-bench-base" ]; then
  # An older build's bench (its planner) between two runs of this one.
  timeout 90 "$tbin/nibble-kernel-bench-base" "${bench_args[@]}" >"$OUT/bench_base.log" 2>&1 || status=1
  timeout 90 "$tbin/nibble-kernel-bench" "${bench_args[@]}" >"$OUT/bench_waves2.log" 2>&1 || status=1
  runs+=(bench_base bench_waves2)
fi
for f in "${runs[@]}"; do
  echo "-- $f"
  grep -E "^warpgroup-MMA|^sweep wg|^llama3.1-8b +(qkv|o|gate_up|down) .* (256|512) \|" "$OUT/$f.log"
  grep -A3 "^Llama-3.1-8B layer set" "$OUT/$f.log" | tail -2
done

if [ $backend -eq 1 ]; then
  echo "== test_cuda_backend"
  timeout 200 "$tbin/test_cuda_backend" >"$OUT/test_cuda_backend.log" 2>&1 ||
    { status=1; grep -E "FAILED|Failure" "$OUT/test_cuda_backend.log" | head -5; }
  tail -1 "$OUT/test_cuda_backend.log"
fi
[ $run_memcheck -eq 1 ] || { echo "status $status"; exit $status; }
echo "== compute-sanitizer memcheck"
memcheck() {  # name timeout binary args...
  local name=$1 limit=$2
  shift 2
  timeout "$limit" compute-sanitizer --tool memcheck --error-exitcode 9 "$@" \
    >"$OUT/memcheck_$name.log" 2>&1 || status=1
  echo "$name: $(grep -E "ERROR SUMMARY" "$OUT/memcheck_$name.log" | tail -1) |" \
    "$(grep -E "passed|PASSED|FAILED" "$OUT/memcheck_$name.log" | tail -1)"
}
memcheck sampling 70 "$tbin/test_sampling_gpu" --quick
memcheck moe 110 "$tbin/test_moe_gpu" --quick
memcheck cuda_backend 110 "$tbin/test_cuda_backend" \
  --gtest_filter='*CudaMoeRouting*:*DeviceGreedy*:*Masks*:*DeviceSampling*:*DecodeGraphs*'
echo "status $status"
exit $status
