#!/usr/bin/env bash
# Issue 21's targets in one device call (binaries from tools/device/bundle.sh in .device-carry;
# a Llama-3.1-8B-shaped NVFP4 model with random weights):
#   1. the W4A16 layer set against cuBLAS BF16 at M = 1, 16, 256 and 2,048 (nibble-kernel-bench),
#      with .device-carry/tbin/nibble-kernel-bench-base (main before the change) for M = 1 and
#      16 not regressing;
#   2. TTFT of one forward over 2,048 / 8,192 / 32,768 prompt tokens (`generate --warmup`) against
#      tools/device/peer_prefill.py (transformers BF16, sdpa);
#   3. the FP8 KV cache: decode after a 32,768-token prompt with the BF16 and the FP8 cache, and
#      the tokens each holds in 8 GiB (serve start-up);
#   4. served output throughput, 512 in / 128 out at concurrency 32 and 64 and 8,192 in / 256 out
#      at concurrency 8, against .device-carry/bin/nibble-engine-base (main before issue 21):
#      tools/device/serve-ab.sh's default runs.
# Logs go to $OUT. Usage: tools/device/issue21-targets.sh
source "$(dirname "$0")/device_env.sh"
tbin=$carry/tbin
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader

echo "== 1. W4A16 layer set (us, against cuBLAS BF16 in the same run)"
for b in nibble-kernel-bench nibble-kernel-bench-base; do
  [ -x "$tbin/$b" ] || continue
  timeout 120 "$tbin/$b" --layers qkv,o,gate_up,down --ms 1,16,256,2048 >"$OUT/$b.log" 2>&1 ||
    status=1
  echo "-- $b"
  # +P: the same launches with programmatic dependent launch, as the engine makes them.
  grep -A6 "^Llama-3.1-8B layer set" "$OUT/$b.log" | awk '$1 ~ /^[0-9]+$/ {
    printf "M %s %s us (+P %s), cuBLAS %s us: %s (+P %.2fx)\n", $1, $3, $11, $4, $9, $4 / $11}'
done

ensure_llama8b
ids() { python3 -c "print(','.join(str(1 + i % 9) for i in range($1)))"; }
echo "== 2. TTFT, one forward (generate --warmup --max-tokens 2)"
for n in 2048 8192 32768; do
  timeout 90 "$bin/nibble-engine" generate --model "$work/llama8b" --device cuda \
    --prompt-ids "$(ids $n)" --max-tokens 2 --top-k 1 --warmup >"$OUT/prefill_$n.log" 2>&1 ||
    { status=1; tail -3 "$OUT/prefill_$n.log"; }
  echo "nibble $n: $(grep -oE 'prefill [0-9]+ tokens in [0-9.]+ s' "$OUT/prefill_$n.log")"
done
(cd tools/device && PYTHONUNBUFFERED=1 timeout 150 python3 peer_prefill.py \
  --lengths 2048,8192,32768) >"$OUT/peer_prefill.log" 2>&1 ||
  { status=1; tail -5 "$OUT/peer_prefill.log"; }
grep '^{' "$OUT/peer_prefill.log"

echo "== 3. FP8 KV cache: decode after 32,768 prompt tokens; tokens in 8 GiB"
for dtype in bf16 fp8; do
  timeout 90 "$bin/nibble-engine" generate --model "$work/llama8b" --device cuda \
    --kv-cache-dtype $dtype --prompt-ids "$(ids 32768)" --max-tokens 128 --top-k 1 --warmup \
    >"$OUT/decode32k_$dtype.log" 2>&1 || { status=1; tail -3 "$OUT/decode32k_$dtype.log"; }
  echo "$dtype: $(grep -oE 'decode [0-9.]+ tokens/s' "$OUT/decode32k_$dtype.log")"
done
for dtype in bf16 fp8; do
  log=$OUT/capacity_$dtype.log
  if start_server nibble-engine 8401 "$log" --kv-cache-memory-bytes 8589934592 \
    --kv-cache-dtype $dtype --max-model-len 10240; then
    echo "$dtype: $(grep -oE 'KV cache: .*' "$log" | head -1)"
  else
    status=1; tail -3 "$log"
  fi
  stop_server
done

echo "== 4. served Llama-3.1-8B against nibble-engine-base (tools/device/serve-ab.sh)"
bash "$(dirname "$0")/serve-ab.sh" || status=1
echo "status $status"
exit $status
