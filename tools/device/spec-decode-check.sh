#!/usr/bin/env bash
# Speculative decoding on the CUDA backend in one device call (issue 42):
#   1. test_cuda_spec_decode: verify rows against the CPU and against decoding alone, rejected
#      drafts' keys never read after a rollback, greedy exactness in the engine loop (ngram,
#      oracle and always-wrong drafters) with the spec_decode counters;
#   2. the Llama-3.1-8B-shaped NVFP4 model (random weights) served with and without
#      --speculative-config ngram: the same greedy request on a prompt that repeats itself to
#      both, the two answers and the spec_decode counters side by side (random weights: the
#      acceptance says nothing of a real model; the point is that serve runs it on the GPU).
# Carried: .device-carry/bin (test_cuda_spec_decode, nibble-engine, nibble-make-model), /lib,
# /tokenizers (tools/device/bundle.sh with NIBBLE_DEVICE_TARGETS naming them).
source "$(dirname "$0")/device_env.sh"
echo "== test_cuda_spec_decode"
timeout 400 "$bin/test_cuda_spec_decode" >"$OUT/test_cuda_spec_decode.log" 2>&1 ||
  { status=1; grep -E "FAILED|Failure" "$OUT/test_cuda_spec_decode.log" | head -20; }
grep -E "verify rows|parted|ngram:|PASSED|FAILED" "$OUT/test_cuda_spec_decode.log" | head -40

echo "== Llama-3.1-8B NVFP4 served, without and with --speculative-config ngram (k = 4)"
ensure_llama8b || exit 1
phrase="The quick brown fox jumps over the lazy dog near the river bank. "
prompt=$(printf '%.0s'"$phrase" {1..12})
body=$(printf '{"model": "spec8b", "prompt": "%s", "max_tokens": 96, "temperature": 0}' "$prompt")
spec='{"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_min": 1, "prompt_lookup_max": 3}'
for mode in plain ngram; do
  flags=(--served-model-name spec8b --max-model-len 2048 --max-num-seqs 8)
  [ "$mode" = ngram ] && flags+=(--speculative-config "$spec")
  if start_server nibble-engine 8520 "$OUT/serve_$mode.log" "${flags[@]}"; then
    start=$(date +%s.%N)
    curl -sf http://127.0.0.1:8520/v1/completions -H 'Content-Type: application/json' \
      -d "$body" >"$OUT/answer_$mode.json" || status=1
    echo "-- $mode: $(awk "BEGIN {printf \"%.2f\", $(date +%s.%N) - $start}") s for the request"
    curl -sf http://127.0.0.1:8520/metrics | grep -E "^nibble_spec_decode_num_(drafts|draft_tokens|accepted_tokens)_total" |
      sed 's/^/   /' | tee "$OUT/metrics_$mode.txt"
    grep -E "speculative decoding|KV cache:" "$OUT/serve_$mode.log" | sed 's/^/   server: /'
  else
    status=1
    echo "-- $mode: the server did not start"
    tail -5 "$OUT/serve_$mode.log"
  fi
  stop_server
done
if cmp -s <(grep -o '"text":"[^"]*"' "$OUT/answer_plain.json") \
  <(grep -o '"text":"[^"]*"' "$OUT/answer_ngram.json"); then
  echo "-- the two answers are identical"
else
  echo "-- the answers differ (a BF16 near tie, or a defect: compare answer_*.json)"
fi
echo "status $status"
exit $status
