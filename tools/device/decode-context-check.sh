#!/usr/bin/env bash
# Batch-1 decode speed against context length on the device machine (binaries from
# tools/device/bundle.sh in .device-carry): a Llama-3.1-8B-shaped NVFP4 model (random weights),
# `nibble-engine generate` after prompts of 512 and 32,768 tokens, with the BF16 and the FP8 KV
# cache, for the current build and, when carried, .device-carry/bin/nibble-engine-base (an A/B in
# one call), alternately. Logs go to $OUT.
source "$(dirname "$0")/device_env.sh"
ensure_llama8b
engines=(nibble-engine); [ -x "$bin/nibble-engine-base" ] && engines+=(nibble-engine-base)
echo "== Llama-3.1-8B NVFP4 batch-1 decode (128 tokens) after a prompt of N tokens"
for n in 512 32768; do
  ids=$(python3 -c "print(','.join(str(1 + i % 9) for i in range($n)))")
  for dtype in bf16 fp8; do
    for engine in "${engines[@]}"; do
      log="$OUT/decode_${engine}_${dtype}_$n.log"
      "$bin/$engine" generate --model "$work/llama8b" --device cuda --kv-cache-dtype $dtype \
        --prompt-ids "$ids" --max-tokens 128 --top-k 1 >"$log" 2>&1 || status=1
      echo "$engine $dtype context $n: $(grep -oE 'decode [0-9.]+ tokens/s' "$log")"
    done
  done
done > >(tee "$OUT/decode_context.log")  # the loop stays in this shell: its status counts
echo "status $status"
exit $status
