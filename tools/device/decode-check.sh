#!/usr/bin/env bash
# Batch-1 decode of one model shape under several variants, then (optionally) the transformers
# peer, all in one device call: the A/B behind issue 20's decode targets. Each variant is
# `label|ENV=V ENV2=V2|generate flags|engine` (any part but the label may be empty; engine is
# another nibble-engine binary, say a carried snapshot of main, instead of $bin's) and runs
# `nibble-engine generate --prompt-ids 1..512 --max-tokens 128 --top-k 1 --warmup` once.
# Usage: tools/device/decode-check.sh [--model qwen3-30b-a3b|llama-3.1-8b] [--peer] VARIANT...
# e.g.   tools/device/decode-check.sh --peer 'host||' 'device||--sample-on-device'
source "$(dirname "$0")/device_env.sh"
MODEL=qwen3-30b-a3b; PEER=0; variants=()
while [ $# -gt 0 ]; do
  case "$1" in --model) MODEL=$2; shift ;; --peer) PEER=1 ;; *) variants+=("$1") ;; esac
  shift
done
[ ${#variants[@]} -gt 0 ] || variants=('host||' 'device||--sample-on-device')

case "$MODEL" in
  qwen3-30b-a3b) dir=$work/qwen3moe
    [ -f "$dir/config.json" ] || timeout 300 "$bin/nibble-make-model" --arch qwen3_moe \
      --preset qwen3-30b-a3b --dtype nvfp4 --seed 1 --shared-global-scales --threads 16 \
      --tokenizer "$carry/tokenizers/qwen3" --force --output "$dir" >"$OUT/make_model.log" 2>&1 ;;
  llama-3.1-8b) dir=$work/llama8b; ensure_llama8b ;;
  *) echo "unknown model $MODEL"; exit 2 ;;
esac
[ -f "$dir/config.json" ] || { echo "making the model failed"; tail -5 "$OUT/make_model.log"; exit 1; }

for v in "${variants[@]}"; do
  IFS='|' read -r label envs flags engine <<<"$v"
  log="$OUT/generate_$label.log"
  # shellcheck disable=SC2086
  env $envs timeout 240 "${engine:-$bin/nibble-engine}" generate --model "$dir" --device cuda \
    --prompt-ids "$(seq -s, 1 512)" --max-tokens 128 --top-k 1 --warmup $flags >"$log" 2>&1 ||
    { status=1; tail -3 "$log"; }
  echo "$MODEL $label [$envs $flags]: $(grep -oE 'decode [0-9.]+ tokens/s.*' "$log" | tail -1)"
  grep -E "cuda timing" "$log" | tail -1
done

if [ $PEER -eq 1 ]; then
  PYTHONUNBUFFERED=1 timeout ${PEER_TIMEOUT:-300} python3 tools/device/peer_decode.py --models "$MODEL" \
    >"$OUT/peer_decode.log" 2>&1 || { status=1; tail -5 "$OUT/peer_decode.log"; }
  grep '^{' "$OUT/peer_decode.log"
fi
echo "status $status"
exit $status
