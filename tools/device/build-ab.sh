#!/usr/bin/env bash
# Two builds, one call: the current tree's nibble-engine against .device-carry/bin/
# nibble-engine-base (tools/device/build-here.sh builds it from .ab/base-src.tar.gz), alternating
# ROUNDS times (default 3), on random-weight NVFP4 models of the real shapes. Each round and build:
#   Llama-3.1-8B served (one server): batch-1 decode (concurrency 1, 512 in / 128 out, 4 prompts:
#     1000 / median TPOT), TTFT of an 8,192-token prompt (median of 3, concurrency 1), and
#     512 in / 128 out at concurrency 64 (256 prompts, output tokens/s);
#   Qwen3-30B-A3B batch-1 decode (generate --warmup, 512-token prompt, 128 tokens, the pick on
#     the device as the server makes it).
# Every line of $OUT/ab.log is "round build measurement value unit"; the summary prints each
# measurement's values per build and the ratio of the medians.
# Usage: tools/device/build-ab.sh [--rounds N]
source "$(dirname "$0")/device_env.sh"
rounds=3
while [ $# -gt 0 ]; do
  case "$1" in --rounds) rounds=$2; shift ;; *) echo "unknown $1"; exit 2 ;; esac
  shift
done
[ -x "$bin/nibble-engine-base" ] || { echo "no $bin/nibble-engine-base (build-here.sh with .ab/base-src.tar.gz)"; exit 2; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
ensure_llama8b || exit 1
if [ ! -f "$work/qwen3moe/config.json" ]; then
  timeout 400 "$bin/nibble-make-model" --arch qwen3_moe --preset qwen3-30b-a3b --dtype nvfp4 \
    --seed 1 --shared-global-scales --threads 16 --tokenizer "$carry/tokenizers/qwen3" \
    --output "$work/qwen3moe" >"$OUT/make_moe.log" 2>&1 || { tail -5 "$OUT/make_moe.log"; exit 1; }
fi
prompt512=$(python3 -c "print(','.join(str(1 + i % 9000) for i in range(512)))")
record() { echo "$1 $2 $3 $4 $5" | tee -a "$OUT/ab.log"; }
# bench NAME C PROMPTS IN OUT: nibble-bench against the server on 8400, its report in $OUT.
bench() {
  "$bin/nibble-bench" --base-url http://127.0.0.1:8400 --endpoint completions --input-len "$4" \
    --output-len "$5" --num-prompts "$3" --max-concurrency "$2" --no-progress \
    >"$OUT/bench_$1.log" 2>&1 || status=1
}
field() { grep -E "$2" "$OUT/bench_$1.log" | grep -oE '[0-9.]+$' | head -1; }

for round in $(seq 1 "$rounds"); do
  for build in base new; do
    engine=nibble-engine; [ $build = base ] && engine=nibble-engine-base
    if start_server "$engine" 8400 "$OUT/serve_${build}_$round.log" --max-model-len 10240 \
        --max-num-seqs 64; then
      bench "c1_${build}_$round" 1 4 512 128
      tpot=$(field "c1_${build}_$round" 'Median TPOT')
      record "$round" $build decode-llama8b "$(python3 -c "print(round(1000 / $tpot, 1))" 2>/dev/null)" tok/s
      bench "ttft_${build}_$round" 1 3 8192 1
      record "$round" $build ttft-8192 "$(field "ttft_${build}_$round" 'Median TTFT')" ms
      bench "c64_${build}_$round" 64 256 512 128
      record "$round" $build served-c64 "$(field "c64_${build}_$round" 'Output token throughput')" tok/s
    else
      status=1; tail -5 "$OUT/serve_${build}_$round.log"
    fi
    stop_server
    log=$OUT/decode_qwen3moe_${build}_$round.log
    timeout 300 "$bin/$engine" generate --model "$work/qwen3moe" --device cuda \
      --prompt-ids "$prompt512" --max-tokens 128 --top-k 1 --warmup --sample-on-device \
      >"$log" 2>&1 || { status=1; tail -3 "$log"; }
    record "$round" $build decode-qwen3moe "$(grep -oE 'decode [0-9.]+ tokens/s' "$log" | tail -1 | grep -oE '[0-9.]+')" tok/s
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
