#!/usr/bin/env bash
# Two builds, one call: the current tree's nibble-engine against .device-carry/bin/
# nibble-engine-base (tools/device/build-here.sh builds it from .ab/base-src.tar.gz), alternating
# ROUNDS times (default 3), on random-weight NVFP4 models of the real shapes:
#   decode   Llama-3.1-8B and Qwen3-30B-A3B, batch 1 (generate --warmup, 512-token prompt,
#            128 tokens, the pick on the device as the server makes it)
#   ttft     Llama-3.1-8B, one forward over 8,192 prompt tokens (generate --warmup)
#   served   Llama-3.1-8B, 512 in / 128 out at concurrency 64 (nibble-bench, 256 prompts)
# Every line of $OUT/ab.log is "round build measurement value unit"; the summary prints each
# measurement's values per build and the ratio of the medians.
# Usage: tools/device/build-ab.sh [--rounds N] [--only decode,ttft,served]
source "$(dirname "$0")/device_env.sh"
rounds=3 only=decode,ttft,served
while [ $# -gt 0 ]; do
  case "$1" in --rounds) rounds=$2; shift ;; --only) only=$2; shift ;; *) echo "unknown $1"; exit 2 ;; esac
  shift
done
[ -x "$bin/nibble-engine-base" ] || { echo "no $bin/nibble-engine-base (build-here.sh with .ab/base-src.tar.gz)"; exit 2; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
ensure_llama8b || exit 1
if [[ ,$only, == *,decode,* ]] && [ ! -f "$work/qwen3moe/config.json" ]; then
  timeout 400 "$bin/nibble-make-model" --arch qwen3_moe --preset qwen3-30b-a3b --dtype nvfp4 \
    --seed 1 --shared-global-scales --threads 16 --tokenizer "$carry/tokenizers/qwen3" \
    --output "$work/qwen3moe" >"$OUT/make_moe.log" 2>&1 || { tail -5 "$OUT/make_moe.log"; exit 1; }
fi
ids() { python3 -c "print(','.join(str(1 + i % 9000) for i in range($1)))"; }
prompt512=$(ids 512) prompt8k=$(ids 8192)
record() { echo "$1 $2 $3 $4 $5" | tee -a "$OUT/ab.log"; }

for round in $(seq 1 "$rounds"); do
  for build in base new; do
    engine=$bin/nibble-engine; [ $build = base ] && engine=$bin/nibble-engine-base
    if [[ ,$only, == *,decode,* ]]; then
      for model in llama8b qwen3moe; do
        log=$OUT/decode_${model}_${build}_$round.log
        timeout 300 "$engine" generate --model "$work/$model" --device cuda --prompt-ids "$prompt512" \
          --max-tokens 128 --top-k 1 --warmup --sample-on-device >"$log" 2>&1 || { status=1; tail -3 "$log"; }
        record "$round" $build "decode-$model" "$(grep -oE 'decode [0-9.]+ tokens/s' "$log" | tail -1 | grep -oE '[0-9.]+')" tok/s
      done
    fi
    if [[ ,$only, == *,ttft,* ]]; then
      log=$OUT/ttft_${build}_$round.log
      timeout 300 "$engine" generate --model "$work/llama8b" --device cuda --prompt-ids "$prompt8k" \
        --max-tokens 2 --top-k 1 --warmup >"$log" 2>&1 || { status=1; tail -3 "$log"; }
      record "$round" $build ttft-8192 "$(grep -oE 'prefill [0-9]+ tokens in [0-9.]+ s' "$log" | grep -oE '[0-9.]+ s' | grep -oE '[0-9.]+')" s
    fi
    if [[ ,$only, == *,served,* ]]; then
      log=$OUT/serve_${build}_$round.log
      bin_name=nibble-engine; [ $build = base ] && bin_name=nibble-engine-base
      if start_server "$bin_name" 8400 "$log" --max-model-len 4096 --max-num-seqs 64; then
        "$bin/nibble-bench" --base-url http://127.0.0.1:8400 --endpoint completions --input-len 512 \
          --output-len 128 --num-prompts 256 --max-concurrency 64 --no-progress \
          >"$OUT/bench_${build}_$round.log" 2>&1 || status=1
        record "$round" $build served-c64 "$(grep -E 'Output token throughput' "$OUT/bench_${build}_$round.log" | grep -oE '[0-9.]+$')" tok/s
      else
        status=1; tail -5 "$log"
      fi
      stop_server
    fi
  done
done

python3 - "$OUT/ab.log" <<'PY'
import collections, statistics, sys
values = collections.defaultdict(lambda: collections.defaultdict(list))
for line in open(sys.argv[1]):
    parts = line.split()
    if len(parts) == 5 and parts[3] not in ("", "None"):
        try: values[parts[2]][parts[1]].append(float(parts[3]))
        except ValueError: pass
for m, by in values.items():
    base, new = by.get("base", []), by.get("new", [])
    ratio = statistics.median(new) / statistics.median(base) if base and new else float("nan")
    print(f"{m}: base {base} new {new} new/base (medians) {ratio:.3f}")
PY
echo "status $status"
exit $status
