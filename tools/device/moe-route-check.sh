#!/usr/bin/env bash
# Issue 20, the single token routed inside the expert GEMMs: its checks and its A/B in one call.
# test_moe_gpu --quick (bitwise against the route launch), the backend's MoE and decode tests, the
# MoE bench (T = 1 row: +r.gemm against +r.split), then Qwen3-30B-A3B decode with it on and off.
# Usage: tools/device/moe-route-check.sh [--peer] [--no-bench]
source "$(dirname "$0")/device_env.sh"
PEER=; BENCH=1
for a in "$@"; do case "$a" in --peer) PEER=--peer ;; --no-bench) BENCH=0 ;; esac; done
step() { echo "== $*"; }
step "test_moe_gpu --quick"
timeout 120 "$bin/test_moe_gpu" --quick >"$OUT/test_moe_gpu.log" 2>&1 || { status=1; grep -E "FAIL|DIFFER" "$OUT/test_moe_gpu.log" | head; }
grep -E "passed|failed|checks" "$OUT/test_moe_gpu.log" | tail -2
grep -E "T1_" "$OUT/test_moe_gpu.log" | head -8
step "test_cuda_backend (MoE, decode graphs, device greedy)"
timeout 150 "$bin/test_cuda_backend" --gtest_filter='CudaMoe*:DecodeGraphs*:*DeviceGreedy*' \
  >"$OUT/test_cuda_backend.log" 2>&1 || { status=1; grep -E "FAILED|Failure" "$OUT/test_cuda_backend.log" | head; }
tail -3 "$OUT/test_cuda_backend.log"
if [ $BENCH -eq 1 ]; then
  step "nibble-kernel-bench --moe"
  timeout 120 "$bin/nibble-kernel-bench" --moe >"$OUT/bench_moe.log" 2>&1 || status=1
  grep -A3 -E "^ +T +active" "$OUT/bench_moe.log" | head -8
fi
step "Qwen3-30B-A3B decode: routed in the GEMMs (default) vs the route launch"
tools/device/decode-check.sh $PEER 'in-gemm||' 'launch||--moe-route-in-gemm false' || status=1
echo "status $status"
exit $status
