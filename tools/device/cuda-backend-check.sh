#!/usr/bin/env bash
# Runs on the device machine over the binaries of tools/device/bundle.sh (.device-carry, with the
# Qwen3 and Llama 3.1 tokenizer files in .device-carry/tokenizers): the CUDA backend test, then the
# engine on the GPU end to end: a Llama-3.1-8B-shaped NVFP4 model (random weights) through
# `generate` and through `serve` + nibble-bench, and nibble-controller with the demo recipe,
# checking that its engine chose the GPU and answers through the router. Logs go to $OUT.
# --moe adds a Qwen3-30B-A3B-shaped NVFP4 model through `generate` (its decode speed).
# --overlap-ab times the 8B decode without --cuda-step-timing (whose events sit between the
# kernels) with the linears' programmatic dependent launch on and off (--linear-overlap),
# alternately, twice each.
# --graphs-ab times the 8B decode with CUDA graphs (the default) and --enforce-eager, alternately,
# twice each, and serves it both ways to nibble-bench at concurrency 1 and 8.
# --peer runs tools/device/peer_decode.py (transformers BF16, static cache) on the same GPU, for
# the models this call ran (8B; Qwen3-30B-A3B with --moe).
# Usage: tools/device/cuda-backend-check.sh [--no-8b] [--no-demo] [--sanitizer] [--moe]
#                                           [--overlap-ab] [--graphs-ab] [--peer]
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT="${OUT:-$PWD/device-out}"
mkdir -p "$OUT"
carry=$PWD/.device-carry
bin=$carry/bin
export LD_LIBRARY_PATH="$carry/lib:/usr/local/cuda/lib64:/usr/local/cuda/lib:${LD_LIBRARY_PATH:-}"
BIG=1; SANITIZE=0; MOE=0; DEMO=1; OVERLAP_AB=0; GRAPHS_AB=0; PEER=0
for a in "$@"; do
  case "$a" in --no-8b) BIG=0 ;; --sanitizer) SANITIZE=1 ;; --moe) MOE=1 ;; --no-demo) DEMO=0 ;;
    --overlap-ab) OVERLAP_AB=1 ;; --graphs-ab) GRAPHS_AB=1 ;; --peer) PEER=1 ;; esac
done
status=0
step() { echo "== $*"; }
work=/tmp/nibble-device
mkdir -p "$work"

step "environment"
{ nvidia-smi -L; date -u; } 2>&1 | tee "$OUT/env.log"

step "CUDA backend vs CPU backend, paged attention vs FP64"
"$bin/test_cuda_backend" 2>&1 | tee "$OUT/test_cuda_backend.log" |
  grep -E "seed|relative|FAILED|PASSED|skipped|Failure" ; [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
if [ $SANITIZE -eq 1 ]; then
  step "compute-sanitizer memcheck (MoE NVFP4 and attention cases)"
  compute-sanitizer --tool memcheck --error-exitcode 9 "$bin/test_cuda_backend" \
    --gtest_filter='*Qwen3MoeD128Nvfp4*:*Qwen3D32*:PagedAttention*:CudaBackend.*:DecodeGraphs*' >"$OUT/memcheck.log" 2>&1 ||
    status=1
  tail -3 "$OUT/memcheck.log"
fi

serve_and_wait() {  # model dir, port, log, extra args...
  local model=$1 port=$2 log=$3; shift 3
  "$bin/nibble-engine" serve --model "$model" --port "$port" "$@" >"$log" 2>&1 &
  for _ in $(seq 1 600); do
    curl -sf "http://127.0.0.1:$port/health" >/dev/null 2>&1 && return 0
    kill -0 $! 2>/dev/null || return 1
    sleep 0.5
  done
  return 1
}

if [ $BIG -eq 1 ]; then
  # Shared global factors per fused group, as a ModelOpt export has them: q/k/v and gate/up run
  # as one matrix each.
  step "Llama-3.1-8B shape, NVFP4 random weights (shared global scales): generate"
  "$bin/nibble-make-model" --arch llama --preset llama-3.1-8b --dtype nvfp4 --seed 1 --threads 16 \
    --shared-global-scales \
    --tokenizer "$carry/tokenizers/llama3_1" --force --output "$work/llama8b" >"$OUT/make_8b.log" 2>&1 ||
    { status=1; tail -5 "$OUT/make_8b.log"; }
  ids=$(seq -s, 1 512)
  "$bin/nibble-engine" generate --model "$work/llama8b" --device cuda --prompt-ids "$ids" \
    --max-tokens 128 --top-k 1 --cuda-step-timing true >"$OUT/generate_8b.log" 2>&1 || status=1
  grep -E "cuda backend: [0-9]+ MiB|cuda timing|prefill [0-9]" "$OUT/generate_8b.log" | tail -4
  if [ $OVERLAP_AB -eq 1 ]; then
    step "Llama-3.1-8B shape: decode with the linears' overlap on / off (no timing events)"
    : >"$OUT/overlap_ab.log"
    for overlap in 1 0 1 0; do
      "$bin/nibble-engine" generate --model "$work/llama8b" --device cuda --prompt-ids "$ids" \
        --max-tokens 128 --top-k 1 --linear-overlap "$([ $overlap = 1 ] && echo true || echo false)" >"$OUT/generate_overlap$overlap.log" 2>&1 ||
        status=1
      echo "--linear-overlap $overlap: $(grep -oE "prefill [0-9]+ tokens.*" "$OUT/generate_overlap$overlap.log")" |
        tee -a "$OUT/overlap_ab.log"
    done
  fi
  if [ $GRAPHS_AB -eq 1 ]; then
    step "Llama-3.1-8B shape: decode with CUDA graphs / --enforce-eager (no timing events)"
    : >"$OUT/graphs_ab.log"
    for mode in graphs eager graphs eager; do
      flag=(); [ $mode = eager ] && flag=(--enforce-eager)
      "$bin/nibble-engine" generate --model "$work/llama8b" --device cuda "${flag[@]}" \
        --prompt-ids "$ids" --max-tokens 128 --top-k 1 >"$OUT/generate_$mode.log" 2>&1 || status=1
      echo "$mode: $(grep -oE "prefill [0-9]+ tokens.*" "$OUT/generate_$mode.log")" |
        tee -a "$OUT/graphs_ab.log"
    done
    for mode in graphs eager; do
      flag=(); [ $mode = eager ] && flag=(--enforce-eager)
      if serve_and_wait "$work/llama8b" 8101 "$OUT/serve_8b_$mode.log" --max-model-len 4096 \
          --max-num-seqs 64 "${flag[@]}"; then
        for run in "1 8" "8 64"; do
          set -- $run
          "$bin/nibble-bench" --base-url http://127.0.0.1:8101 --endpoint completions \
            --input-len 512 --output-len 128 --num-prompts "$2" --max-concurrency "$1" \
            --no-progress >>"$OUT/bench_8b_$mode.log" 2>&1 || status=1
        done
        echo "-- served with $mode"
        grep -iE "concurrency|output token throughput|TPOT" "$OUT/bench_8b_$mode.log" | head -12
        grep -E "decode graphs" "$OUT/serve_8b_$mode.log" | tail -2
        kill -TERM %1 2>/dev/null; wait
      else
        status=1; tail -20 "$OUT/serve_8b_$mode.log"
      fi
    done
  fi
  step "Llama-3.1-8B shape: serve + nibble-bench"
  if serve_and_wait "$work/llama8b" 8100 "$OUT/serve_8b.log" --max-model-len 4096 --max-num-seqs 64 \
      --cuda-step-timing true; then
    grep -E "cuda backend|KV cache" "$OUT/serve_8b.log"
    for run in "1 8" "8 64" "32 128"; do
      set -- $run
      "$bin/nibble-bench" --base-url http://127.0.0.1:8100 --endpoint completions --input-len 512 \
        --output-len 128 --num-prompts "$2" --max-concurrency "$1" --no-progress \
        >>"$OUT/bench_8b.log" 2>&1 || status=1
    done
    grep -iE "concurrency|output token throughput|TTFT|TPOT" "$OUT/bench_8b.log" | head -30
    kill -TERM %1 2>/dev/null; wait
    grep "cuda timing" "$OUT/serve_8b.log" | tail -3
  else
    status=1; tail -20 "$OUT/serve_8b.log"
  fi
fi

if [ $MOE -eq 1 ]; then
  step "Qwen3-30B-A3B shape, NVFP4 random weights: generate"
  "$bin/nibble-make-model" --arch qwen3_moe --preset qwen3-30b-a3b --dtype nvfp4 --seed 1 --shared-global-scales \
    --threads 16 --tokenizer "$carry/tokenizers/qwen3" --force --output "$work/qwen3moe" \
    >"$OUT/make_moe.log" 2>&1 || { status=1; tail -5 "$OUT/make_moe.log"; }
  "$bin/nibble-engine" generate --model "$work/qwen3moe" --device cuda --cuda-step-timing true \
    --prompt-ids "$(seq -s, 1 512)" --max-tokens 128 --top-k 1 >"$OUT/generate_moe.log" 2>&1 ||
    status=1
  grep -E "cuda backend: [0-9]+ MiB|cuda timing|prefill [0-9]" "$OUT/generate_moe.log" | tail -4
fi

if [ $PEER -eq 1 ]; then
  models=""; [ $BIG -eq 1 ] && models=llama-3.1-8b
  [ $MOE -eq 1 ] && models="${models:+$models,}qwen3-30b-a3b"
  step "peer: transformers BF16 static-cache decode ($models)"
  PYTHONUNBUFFERED=1 python3 tools/device/peer_decode.py --models "$models" >"$OUT/peer_decode.log" 2>&1 ||
    { status=1; tail -20 "$OUT/peer_decode.log"; }
  grep '^{' "$OUT/peer_decode.log"
fi

[ $DEMO -eq 1 ] || { echo "status $status"; exit $status; }
step "nibble-controller, demo recipe (engine --device auto), through the router"
"$bin/nibble-make-model" --arch qwen3 --preset small --seed 1 --dtype nvfp4 \
  --tokenizer "$carry/tokenizers/qwen3" --force --output "$work/demo-model" >"$OUT/make_demo.log" 2>&1 || status=1
sed "s|source: .cache/demo-model|source: $work/demo-model|" examples/recipes/demo.yaml >"$work/demo.yaml"
"$bin/nibble-controller" --state-dir "$work/state" --port 8200 --api-port 8201 \
  --engine "$bin/nibble-engine" -f "$work/demo.yaml" >"$OUT/controller.log" 2>&1 &
controller=$!
nibble="$bin/nibble --controller http://127.0.0.1:8201"
sleep 1
if $nibble wait recipe/demo --for condition=Ready --timeout 300s; then
  $nibble get recipes -o wide | tee "$OUT/get.log"
  curl -s http://127.0.0.1:8200/v1/chat/completions -H 'Content-Type: application/json' \
    -d '{"model":"demo","messages":[{"role":"user","content":"Hello"}],"max_tokens":32}' |
    tee "$OUT/chat.json" | head -c 400; echo
  grep -q '"completion_tokens":32' "$OUT/chat.json" || status=1
  "$bin/nibble-bench" --base-url http://127.0.0.1:8200 --endpoint chat --input-len 128 --output-len 64 \
    --num-prompts 64 --max-concurrency 1,8,32 --no-progress >"$OUT/bench_demo.log" 2>&1 || status=1
  grep -iE "concurrency|output token throughput" "$OUT/bench_demo.log" | head -12
  $nibble logs recipe/demo --tail 400 >"$OUT/engine_demo.log" 2>&1
  if grep -q "cuda backend: NVIDIA" "$OUT/engine_demo.log"; then echo "engine on the GPU: yes"
  else echo "engine on the GPU: NO"; status=1; fi
else
  status=1; $nibble describe recipe demo; tail -20 "$OUT/controller.log"
fi
kill -TERM $controller 2>/dev/null; wait $controller
echo "status $status"
exit $status
