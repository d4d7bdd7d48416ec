#!/usr/bin/env bash
# The decode step's pick, host against device, in one device call (issue 20):
#   test_sampling_gpu (the pass against its CPU reference: one top logprob now comes from the
#   first pass's argmax, no select passes) and its --bench ("greedy lp1" rows), the CUDA backend's
#   device-greedy tests, then Qwen3-30B-A3B `generate` with the pick on the host (its time now
#   counted in the step: host_pick_seconds_per_token) and on the device, and the transformers peer.
# Carried: .device-carry/tbin (test_sampling_gpu, test_cuda_backend), /bin (nibble-engine,
# nibble-make-model), /lib, /tokenizers.
source "$(dirname "$0")/device_env.sh"
tbin=$carry/tbin
echo "== test_sampling_gpu"
timeout 120 "$tbin/test_sampling_gpu" >"$OUT/test_sampling_gpu.log" 2>&1 ||
  { status=1; grep -E "^FAIL" "$OUT/test_sampling_gpu.log" | head; }
grep -E "passed|near-tie" "$OUT/test_sampling_gpu.log" | tail -2
timeout 90 "$tbin/test_sampling_gpu" --bench >"$OUT/sampling_bench.log" 2>&1 || status=1
grep -E "^(vocab|151936 +1 )" "$OUT/sampling_bench.log"
echo "== test_cuda_backend (device greedy, sampling)"
timeout 120 "$tbin/test_cuda_backend" --gtest_filter='*DeviceGreedy*:*Sampl*:*Masks*' \
  >"$OUT/test_cuda_backend.log" 2>&1 || { status=1; grep -E "FAILED|Failure" "$OUT/test_cuda_backend.log" | head; }
tail -1 "$OUT/test_cuda_backend.log"
echo "== generate, pick on the host / on the device; the peer"
tools/device/decode-check.sh --peer 'host||' 'device||--sample-on-device' || status=1
grep -ho '"host_pick_seconds_per_token":[0-9.e-]*' "$OUT"/generate_host.log
echo "status $status"
exit $status
