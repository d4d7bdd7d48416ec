#!/usr/bin/env bash
# Issue 20, the single token's gate_up and down as one launch (MoeGroupedPlan::one_launch,
# kernels/nvfp4/w4a16_moe_decode.cu), in two calls of the device tool:
#   tools/device/one-launch-check.sh tests    test_moe_gpu --quick (bitwise against the two routed
#                                             launches, counts left zero), the backend's MoE and
#                                             decode-graph tests, nibble-kernel-bench --moe (T = 1:
#                                             +r.one against +r.gemm)
#   tools/device/one-launch-check.sh decode   Qwen3-30B-A3B generate, one launch vs two
#                                             (--moe-one-launch false), then the transformers peer
# Carried: .device-carry/tbin (test_moe_gpu, test_cuda_backend, nibble-kernel-bench) and /lib for
# tests; .device-carry/bin (nibble-engine, nibble-make-model), /lib and /tokenizers for decode.
source "$(dirname "$0")/device_env.sh"
tbin=$carry/tbin
case "${1:-}" in
  tests)
    echo "== test_moe_gpu --quick"
    timeout 150 "$tbin/test_moe_gpu" --quick >"$OUT/test_moe_gpu.log" 2>&1 ||
      { status=1; grep -E "FAIL|DIFFER" "$OUT/test_moe_gpu.log" | head; }
    tail -1 "$OUT/test_moe_gpu.log"
    grep -E "T1_" "$OUT/test_moe_gpu.log" | head -4
    echo "== test_cuda_backend (MoE, decode graphs, device greedy, Qwen3)"
    timeout 200 "$tbin/test_cuda_backend" --gtest_filter='CudaMoe*:DecodeGraphs*:*DeviceGreedy*:*Qwen3*' \
      >"$OUT/test_cuda_backend.log" 2>&1 ||
      { status=1; grep -E "FAILED|Failure" "$OUT/test_cuda_backend.log" | head; }
    tail -3 "$OUT/test_cuda_backend.log"
    echo "== nibble-kernel-bench --moe"
    timeout 150 "$tbin/nibble-kernel-bench" --moe >"$OUT/bench_moe.log" 2>&1 || status=1
    grep -A3 -E "^ +T +active" "$OUT/bench_moe.log" | head -4 ;;
  decode)
    tools/device/decode-check.sh --peer 'one-launch||' 'two-launches||--moe-one-launch false' ||
      status=1 ;;
  *) echo "usage: $0 tests|decode"; exit 2 ;;
esac
echo "status $status"
exit $status
