#!/usr/bin/env bash
# Issue 42's verify path and issue 39's chunked delta rule in one device call, after
# tools/device/build-here.sh built the targets below.
# Everything within NIBBLE_CHECK_SECONDS (default 540) of its start, in this order:
#   1. nibble-spec-bench on Llama-3.1-8B NVFP4 alone on the GPU (issue 42's targets: the oracle
#      at k = 1, 2, 4 and the always-wrong drafter at k = 4 against decoding alone);
#   2. the GPU suites of the change, in parallel on the one GPU (correctness, not timing):
#      test_cuda_verify_graphs (verify steps as decode rows, replayed from graphs, sampled on the
#      device), test_cuda_spec_decode (engine-loop exactness for every drafter, Qwen3-Next's
#      rollback), test_cuda_qwen3_next (rollback, the chunked form beside the recurrent one),
#      test_gated_deltanet_gpu (both forms and the snapshots against the CPU), test_cuda_gpt_oss,
#      test_sampling_gpu and test_cuda_backend's graph and device-sampling tests;
#   3. with the time left: test_gated_deltanet_gpu --bench (recurrent against chunked per prompt
#      length: where kGatedDeltaChunkedMinTokens belongs), the Qwen3-Next-80B 16-layer cut's TTFT
#      at 8,192 tokens, gpt-oss-20b's TTFT at 8,192 tokens and its batch-1 decode with its BF16
#      projections as shipped and quantized to NVFP4 at load (--quantization nvfp4).
# Usage: tools/device/verify-and-chunked-check.sh [--skip-tests] [--skip-benches] [--skip-extras]
#   --skip-extras: of the benches, the spec bench only (3. is skipped; only the 20b is written)
source "$(dirname "$0")/device_env.sh"
tests=1 benches=1 extras=1
for arg in "$@"; do
  case $arg in
    --skip-tests) tests=0 ;;
    --skip-benches) benches=0 ;;
    --skip-extras) extras=0 ;;
    *) echo "unknown argument $arg" && exit 2 ;;
  esac
done
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
started=$(date +%s)
el() { echo $(($(date +%s) - started)); }
# The 8B first; the other models are written while the GPU runs the tests, never during a timed
# run: the first call (2026-12-07 14:08) timed the spec bench while 16 writer threads ran, and its
# always-wrong drafter, whose steps are host-bound, read 0.70x in one round and 0.92x in the next.
cut=$work/qwen3next80b16l small=$work/gptoss20b
ensure_llama8b
start_makers() {
  (
    [ $extras -eq 0 ] || [ -f "$cut/config.json" ] || timeout 300 "$bin/nibble-make-model" --arch qwen3_next \
      --preset qwen3-next-80b-a3b-16l --dtype nvfp4 --seed 1 --shared-global-scales --threads 16 \
      --tokenizer "$carry/tokenizers/qwen3" --force --output "$cut" >"$OUT/make_cut.log" 2>&1
    [ -f "$small/config.json" ] || timeout 300 "$bin/nibble-make-model" --arch gpt_oss \
      --preset gpt-oss-20b --dtype mxfp4 --seed 1 --threads 16 --tokenizer "$carry/tokenizers/gptoss" \
      --force --output "$small" >"$OUT/make_20b.log" 2>&1
  ) &
  makers=$!
}
deadline=$((started + ${NIBBLE_CHECK_SECONDS:-540}))
left() { echo $((deadline - $(date +%s))); }
gen() {  # DIR PROMPT_LEN MAX_TOKENS LOG [generate flags...]
  [ "$(left)" -gt 45 ] || { echo "$4: skipped, $(left) s left"; return; }
  timeout $(($(left) - 5)) "$bin/nibble-engine" generate --model "$1" --device cuda \
    --prompt-ids "$(seq -s, 1 "$2")" --max-tokens "$3" --top-k 1 --warmup --sample-on-device \
    "${@:5}" >"$OUT/$4.log" 2>&1 || { status=1; tail -3 "$OUT/$4.log"; }
  echo "$4: $(grep -oE 'prefill [0-9]+ tokens.*' "$OUT/$4.log")"
}
if [ $benches -eq 1 ]; then
  echo "== nibble-spec-bench, Llama-3.1-8B NVFP4 ($(el) s)"
  timeout 200 "$bin/nibble-spec-bench" --model "$work/llama8b" --device cuda --prompt-len 512 \
    --tokens 128 --ks 1,2,4 --wrong-k 4 --rounds 3 >"$OUT/spec_bench.log" 2>&1 || status=1
  tail -12 "$OUT/spec_bench.log"
fi
start_makers
if [ $tests -eq 1 ]; then
  suite_seconds=$(($(left) - 150))
  [ $suite_seconds -gt 240 ] && suite_seconds=240
  echo "== GPU suites ($(el) s, ${suite_seconds} s each at most)"
  declare -A suites=(
    [verify_graphs]="test_cuda_verify_graphs"
    [spec_decode]="test_cuda_spec_decode"
    [qwen3_next]="test_cuda_qwen3_next"
    [deltanet]="test_gated_deltanet_gpu"
    [gpt_oss]="test_cuda_gpt_oss"
    [sampling]="test_sampling_gpu"
    [backend]="test_cuda_backend --gtest_filter=DecodeGraphs*:DeviceSampling*:CudaBackend.*"
  )
  pids=()
  for name in "${!suites[@]}"; do
    read -r -a cmd <<<"${suites[$name]}"
    (timeout "$suite_seconds" "$bin/${cmd[0]}" "${cmd[@]:1}" >"$OUT/t_$name.log" 2>&1; echo "rc $?" >>"$OUT/t_$name.log") &
    pids+=($!)
  done
  wait "${pids[@]}"
  for name in "${!suites[@]}"; do
    log=$OUT/t_$name.log
    rc=$(tail -1 "$log" | grep -oE '[0-9]+$')
    [ "$rc" = 0 ] || status=1
    summary=$(grep -E "PASSED|FAILED|passed, [0-9]+ failed" "$log" | tail -2 | tr '\n' ' ')
    echo "$name: rc $rc $summary"
    [ "$rc" = 0 ] || grep -E "FAIL|Failure|Expected|actual|error" "$log" | head -12
  done
fi
if [ $benches -eq 1 ] && [ $extras -eq 1 ]; then
  if [ "$(left)" -gt 60 ]; then
    echo "== gated deltanet bench ($(el) s)"
    timeout 60 "$bin/test_gated_deltanet_gpu" --bench >"$OUT/deltanet_bench.log" 2>&1 || status=1
    grep -vE "^\[|^$" "$OUT/deltanet_bench.log" | tail -20
  fi
  wait $makers
  echo "== generate ($(el) s)"
  gen "$cut" 8192 2 gen_cut_ttft8k
  gen "$small" 8192 2 gen_20b_ttft8k
  # gpt-oss's BF16 attention projections are a third of its decode bytes: quantized at load.
  gen "$small" 512 128 gen_20b_b1
  gen "$small" 512 128 gen_20b_b1_nvfp4 --quantization nvfp4
fi
wait $makers
echo "elapsed $(el) s, status $status"
exit $status
