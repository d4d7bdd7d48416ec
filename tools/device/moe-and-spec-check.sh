#!/usr/bin/env bash
# Issues 39, 41 and 42 in one device call, after tools/device/build-here.sh built nibble-engine,
# nibble-make-model, nibble-kernel-bench, nibble-kernel-trace, nibble-spec-bench,
# test_cuda_qwen3_next, test_cuda_hidden_states, test_cuda_spec_decode and test_moe_gpu (and, with
# .ab/base-src.tar.gz holding an older revision and NIBBLE_BASE_TARGETS=nibble-kernel-bench, that
# revision's bench as nibble-kernel-bench-base). Within NIBBLE_CHECK_SECONDS (default 540) of its
# start:
#   1. the GPU suites, in parallel, while the CPUs write the Qwen3-Next 16-layer cut and the
#      Qwen3-30B-A3B-shaped model (correctness, not timing);
#   2. the MoE block at Qwen3-Next's shape (E 512, k 10): nibble-kernel-bench --moe-shape
#      qwen3-next, the base build's and this tree's alternately, two rounds each (the A/B of the
#      routing form; both print the block at T = 1, 4, 8 against the copy bandwidth);
#   3. the cut's decode step under tools/kernel-trace (charges per kernel, batch 1);
#   4. the verify path's ceiling on Qwen3-30B-A3B (nibble-spec-bench: oracle k = 1, 2, 4 and the
#      always-wrong drafter at k = 4 against decoding alone).
# Usage: tools/device/moe-and-spec-check.sh
source "$(dirname "$0")/device_env.sh"
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv,noheader
started=$(date +%s)
el() { echo $(($(date +%s) - started)); }
deadline=$((started + ${NIBBLE_CHECK_SECONDS:-540}))
left() { echo $((deadline - $(date +%s))); }
cut=$work/q3ncut moe=$work/qwen3moe
(
  [ -f "$cut/config.json" ] || timeout 200 "$bin/nibble-make-model" --arch qwen3_next \
    --preset qwen3-next-80b-a3b-16l --dtype nvfp4 --seed 1 --shared-global-scales --threads 8 \
    --tokenizer "$carry/tokenizers/qwen3" --force --output "$cut" >"$OUT/make_cut.log" 2>&1
  [ -f "$moe/config.json" ] || timeout 200 "$bin/nibble-make-model" --arch qwen3_moe \
    --preset qwen3-30b-a3b --dtype nvfp4 --seed 1 --shared-global-scales --threads 8 \
    --tokenizer "$carry/tokenizers/qwen3" --force --output "$moe" >"$OUT/make_moe.log" 2>&1
) &
makers=$!
echo "== GPU suites ($(el) s)"
suites=(test_cuda_qwen3_next test_cuda_hidden_states test_cuda_spec_decode "test_moe_gpu --quick")
pids=()
for suite in "${suites[@]}"; do
  read -r -a cmd <<<"$suite"
  (timeout 180 "$bin/${cmd[0]}" "${cmd[@]:1}" >"$OUT/t_${cmd[0]}.log" 2>&1
    echo "rc $?" >>"$OUT/t_${cmd[0]}.log") &
  pids+=($!)
done
wait "${pids[@]}"
for suite in "${suites[@]}"; do
  name=${suite%% *} log=$OUT/t_${suite%% *}.log
  rc=$(tail -1 "$log" | grep -oE '[0-9]+$')
  [ "$rc" = 0 ] || status=1
  echo "$name: rc $rc $(grep -E "PASSED|FAILED  *\]|passed, [0-9]+ failed" "$log" | tail -2 | tr '\n' ' ')"
  [ "$rc" = 0 ] || grep -E "^\[  FAILED|Failure|Expected|actual" "$log" | head -10
done
wait $makers
echo "== MoE block at Qwen3-Next's shape ($(el) s)"
benches=(nibble-kernel-bench)
[ -x "$bin/nibble-kernel-bench-base" ] && benches=(nibble-kernel-bench-base nibble-kernel-bench)
for round in 1 2; do
  for b in "${benches[@]}"; do
    [ "$(left)" -gt 200 ] || break 2
    echo "-- $b, round $round"
    timeout 90 "$bin/$b" --moe-shape qwen3-next --reps 20 >"$OUT/kb_${b}_$round.log" 2>&1 || status=1
    grep -E "^ +(1|4|8) " "$OUT/kb_${b}_$round.log" | head -8  # the block's rows, then the route's
  done
done
echo "== the cut's decode step traced ($(el) s)"
[ "$(left)" -gt 150 ] && NIBBLE_TRACE_ONLY=1 timeout $(($(left) - 100)) tools/device/trace-step.sh \
  q3ncut "$cut" 2>&1 | head -40
echo "== nibble-spec-bench, Qwen3-30B-A3B NVFP4 ($(el) s)"
[ "$(left)" -gt 60 ] && timeout $(($(left) - 5)) "$bin/nibble-spec-bench" --model "$moe" --device cuda \
  --prompt-len 512 --tokens 128 --ks 1,2,4 --wrong-k 4 --rounds 1 >"$OUT/spec_moe.log" 2>&1
tail -7 "$OUT/spec_moe.log"
echo "elapsed $(el) s, status $status"
exit $status
