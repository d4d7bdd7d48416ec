#!/usr/bin/env bash
# Structured outputs on the GPU (issue 24), over the binaries of tools/device/bundle.sh
# (.device-carry; the Llama-3.1 tokenizer in .device-carry/tokenizers/llama3_1):
#  1. test_cuda_backend's cases for constrained sampling on the device: masks written by the host
#     while the forward runs (forward-only graph + eager sampling) against masks written before
#     (the sampled graph), tokens identical; the device sampler against its reference; decode
#     graphs against eager steps.
#  2. The Llama-3.1-8B-shaped NVFP4 model (random weights, real Llama-3.1 tokenizer: 128,256
#     logits) served, and nibble-bench --structured-schema (decode tok/s per request without and
#     with examples/structured/person.schema.json, the server's mask time per token with its
#     p50/p90/p99, mask time / decode step, and the schema's compile time) at concurrency 1 and
#     8, with the masks overlapped with the forward (the default) and computed before it
#     (--token-mask-overlap false), each on a fresh server (cold grammar and mask caches), in
#     one call. The vocabulary preparation and grammar compile lines of each server's log are
#     printed: the first structured request pays both.
# --timing adds a third server with the masks overlapped and --cuda-step-timing true at concurrency 1:
# its log's phase table has "idle for host work", the GPU time spent waiting for masks the host
# had not finished (what overlapping left exposed).
# Usage: tools/device/structured-check.sh [--timing] [--prompts N]   (logs and JSON go to $OUT)
source "$(dirname "$0")/device_env.sh"
TIMING=0
PROMPTS=16
while [ $# -gt 0 ]; do
  case "$1" in
    --timing) TIMING=1 ;;
    --prompts) PROMPTS=$2; shift ;;
  esac
  shift
done
schema=examples/structured/person.schema.json
{ nvidia-smi -L; date -u; } 2>&1 | tee "$OUT/env.log"

echo "== test_cuda_backend: overlapped masks vs masks written before; device sampling vs reference;"
echo "   decode graphs vs eager (the graph entry changed)"
"$bin/test_cuda_backend" --gtest_filter='CudaBackend.*:*DeviceSamplingVsHost*:*DecodeGraphs*' \
  >"$OUT/test_cuda_backend_structured.log" 2>&1 || status=1
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED|Failure" "$OUT/test_cuda_backend_structured.log" | head -20

ensure_llama8b || { echo "status $status"; exit $status; }

# serve_and_bench NAME CONCURRENCIES OVERLAP TIMING: a fresh server, one bench command.
serve_and_bench() {
  local name=$1 concurrency=$2 log=$OUT/serve_$1.log
  local overlap=true timing=false
  [ "$3" = 0 ] && overlap=false
  [ "$4" = 1 ] && timing=true
  if start_server nibble-engine 8510 "$log" --max-model-len 4096 --max-num-seqs 64 \
      --token-mask-overlap $overlap --cuda-step-timing $timing; then
    "$bin/nibble-bench" --base-url http://127.0.0.1:8510 --endpoint completions --input-len 512 \
      --output-len 128 --num-prompts "$PROMPTS" --max-concurrency "$concurrency" --seed 0 \
      --structured-schema "$schema" --json "$OUT/bench_$name.json" --no-progress \
      >"$OUT/bench_$name.log" 2>&1 || status=1
    echo "-- $name: --token-mask-overlap $overlap --cuda-step-timing $timing"
    grep -E "^=+ Structured|tokens/s per request|Ratio|Mean output|Server|Mask time|First request" \
      "$OUT/bench_$name.log"
    grep -E "vocabulary of .* prepared|compiled a .* grammar" "$log" | head -3 |
      sed 's/^/   server: /'
  else
    status=1
    echo "-- $name: the server did not start"
    tail -5 "$log"
  fi
  stop_server
}

echo "== Llama-3.1-8B NVFP4 served, $PROMPTS prompts of 512 tokens, 128 out, person.schema.json"
{
  serve_and_bench overlap 1,8 1 0
  serve_and_bench serial 1,8 0 0
  if [ $TIMING -eq 1 ]; then
    serve_and_bench timing 1 1 1
    grep -E "cuda timing over" "$OUT/serve_timing.log" | tail -4
  fi
} > >(tee "$OUT/structured_check.log")  # the block stays in this shell: its status counts
echo "status $status"
exit $status
