#!/usr/bin/env bash
# The FP8 KV cache on the device machine (binaries from tools/device/bundle.sh in .device-carry):
# the attention kernels and the FP8 store against their references (test_attention_gpu), then on a
# Llama-3.1-8B-shaped NVFP4 model (random weights): greedy generation with --kv-cache-dtype bf16
# and fp8 from the same 2,048-token prompt (the first step's top-20 logits compared, the tokens
# until the first difference counted), decode speed at a 32,768-token context with each cache,
# and the KV cache each holds in the same memory (serve's start-up line). Logs go to $OUT.
source "$(dirname "$0")/device_env.sh"
echo "== attention kernels (BF16 and FP8 caches) and the FP8 store vs references"
"$bin/test_attention_gpu" >"$OUT/test_attention_gpu.log" 2>&1 || status=1
grep -E "^FAIL|passed|seed|fp8 store" "$OUT/test_attention_gpu.log" | head -20
ensure_llama8b
prompt() { python3 -c "import random; r=random.Random($2); print(','.join(str(r.randrange(128000)) for _ in range($1)))"; }
echo "== greedy generation, 2,048-token prompt, 128 tokens: bf16 vs fp8 cache"
ids=$(prompt 2048 7)
for dtype in bf16 fp8; do
  "$bin/nibble-engine" generate --model "$work/llama8b" --device cuda --kv-cache-dtype $dtype \
    --prompt-ids "$ids" --max-tokens 128 --top-k 20 >"$OUT/gen_$dtype.log" 2>&1 || status=1
done
python3 - "$OUT/gen_bf16.log" "$OUT/gen_fp8.log" <<'PY' | tee "$OUT/fp8_accuracy.log"
import json, sys
def steps(path):
    return [json.loads(l) for l in open(path) if l.startswith('{"step"')]
a, b = steps(sys.argv[1]), steps(sys.argv[2])
first = next((i for i, (x, y) in enumerate(zip(a, b)) if x["token"] != y["token"]), None)
ta, tb = dict((t, v) for t, v in a[0]["top"]), dict((t, v) for t, v in b[0]["top"])
common = [t for t in ta if t in tb]
diff = max(abs(ta[t] - tb[t]) for t in common)
span = max(ta.values()) - min(ta.values())
print(f"step 0 top-20: {len(common)}/20 ids shared, largest logit difference {diff:.4f} "
      f"(top-20 logits span {span:.3f}); greedy tokens identical for "
      f"{first if first is not None else len(a)} of {len(a)} steps")
PY
echo "== decode at a 32,768-token context: bf16 vs fp8 cache"
ids=$(python3 -c "print(','.join(str(1 + i % 9) for i in range(32768)))")
for dtype in bf16 fp8 bf16 fp8; do
  "$bin/nibble-engine" generate --model "$work/llama8b" --device cuda --kv-cache-dtype $dtype \
    --prompt-ids "$ids" --max-tokens 64 --top-k 1 >"$OUT/gen32k_$dtype.log" 2>&1 || status=1
  echo "$dtype: $(grep -oE 'prefill [0-9]+ tokens in [0-9.]+ s; decode [0-9.]+ tokens/s' "$OUT/gen32k_$dtype.log")"
done > >(tee "$OUT/fp8_decode32k.log")  # the loop stays in this shell: its status counts
echo "== KV cache capacity in the same memory (serve start-up, --kv-cache-memory-bytes 8 GiB)"
for dtype in bf16 fp8; do
  "$bin/nibble-engine" serve --model "$work/llama8b" --port 8300 --max-model-len 32768 \
    --kv-cache-memory-bytes 8589934592 --kv-cache-dtype $dtype >"$OUT/serve_$dtype.log" 2>&1 &
  pid=$!
  for _ in $(seq 1 120); do grep -q "KV cache:" "$OUT/serve_$dtype.log" && break; sleep 0.5; done
  kill -TERM $pid 2>/dev/null; wait $pid 2>/dev/null
  echo "$dtype: $(grep -oE 'KV cache: .*' "$OUT/serve_$dtype.log")"
done > >(tee "$OUT/fp8_capacity.log")  # the loop stays in this shell: its status counts
echo "status $status"
exit $status
