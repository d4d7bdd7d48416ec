#!/usr/bin/env bash
# Issue 39's targets in one device call, Qwen3-Next-80B-A3B NVFP4 with random weights:
#   1. the whole 48-layer model: batch-1 decode (generate, the pick on the device) against the
#      bandwidth roofline (tools/device/decode_bytes.py: the bytes a step reads, over the copy
#      bandwidth nibble-kernel-bench measures in the same call);
#   2. its first 16 layers (make-model's qwen3-next-80b-a3b-16l) against transformers BF16 on the
#      same cut (peer_decode.py, peer_prefill.py): batch-1 decode and the 8,192-token TTFT;
#   3. the whole model served, 512 in / 128 out at concurrency 32 (nibble-bench).
# Carried: .device-carry/bin (nibble-engine, nibble-make-model, nibble-bench,
# nibble-kernel-bench), /lib, /tokenizers(.tar.xz). Usage: tools/device/qwen3-next-targets.sh
# [--skip-served]
source "$(dirname "$0")/device_env.sh"
served=1
[ "${1:-}" = --skip-served ] && served=0
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv,noheader
started=$(date +%s)
el() { echo $(($(date +%s) - started)); }
make_model() {  # PRESET DIR
  [ -f "$2/config.json" ] || timeout 400 "$bin/nibble-make-model" --arch qwen3_next --preset "$1" \
    --dtype nvfp4 --seed 1 --shared-global-scales --threads 16 --tokenizer "$carry/tokenizers/qwen3" \
    --force --output "$2" >"$OUT/make_$1.log" 2>&1 || { status=1; tail -3 "$OUT/make_$1.log"; }
}
full=$work/qwen3next80b cut=$work/qwen3next80b16l
make_model qwen3-next-80b-a3b-16l "$cut" &
cut_pid=$!
copy=$(timeout 90 "$bin/nibble-kernel-bench" --moe 2>&1 | tee "$OUT/kbench.log" |
  grep -oE 'copy bandwidth \(read\+write\): [0-9.]+' | grep -oE '[0-9.]+$')
echo "copy bandwidth ${copy:-?} GB/s ($(el) s)"
wait $cut_pid
gen() {  # DIR PROMPT_LEN MAX_TOKENS LOG
  timeout 300 "$bin/nibble-engine" generate --model "$1" --device cuda \
    --prompt-ids "$(seq -s, 1 "$2")" --max-tokens "$3" --top-k 1 --warmup --sample-on-device \
    >"$OUT/$4.log" 2>&1 || { status=1; tail -3 "$OUT/$4.log"; }
  grep -oE 'prefill [0-9]+ tokens.*' "$OUT/$4.log"
}
echo "== the 16-layer cut ($(el) s)"
gen "$cut" 512 128 gen_cut_b1
gen "$cut" 8192 2 gen_cut_ttft8k
rm -rf "$cut"  # the disk holds one of the two
make_model qwen3-next-80b-a3b "$full" &
full_pid=$!
# The peer on the same GPU while the whole model is written (the peer is GPU-bound; the writer
# uses the CPUs): decode, then prefill of 8,192 tokens.
PYTHONUNBUFFERED=1 timeout 300 python3 tools/device/peer_decode.py --models qwen3-next-80b-a3b-16l \
  >"$OUT/peer_decode.log" 2>&1 || { status=1; tail -3 "$OUT/peer_decode.log"; }
PYTHONUNBUFFERED=1 timeout 200 python3 tools/device/peer_prefill.py --models qwen3-next-80b-a3b-16l \
  --lengths 8192 >"$OUT/peer_prefill.log" 2>&1 || { status=1; tail -3 "$OUT/peer_prefill.log"; }
grep -h '^{' "$OUT/peer_decode.log" "$OUT/peer_prefill.log"
wait $full_pid
echo "== the whole model ($(el) s)"
gen "$full" 512 128 gen_full_b1
rate=$(grep -oE 'decode [0-9.]+ tokens/s' "$OUT/gen_full_b1.log" | grep -oE '[0-9.]+' | tail -1)
[ -n "$copy" ] && python3 tools/device/decode_bytes.py "$full" --context 640 --copy-gbps "$copy" \
  ${rate:+--tok-s "$rate"} | tee "$OUT/roofline.json"
rate_cut=$(grep -oE 'decode [0-9.]+ tokens/s' "$OUT/gen_cut_b1.log" | grep -oE '[0-9.]+' | tail -1)
[ -n "$copy" ] && python3 tools/device/decode_bytes.py "$cut" --context 640 --copy-gbps "$copy" \
  ${rate_cut:+--tok-s "$rate_cut"} | tee "$OUT/roofline_cut.json"
if [ $served -eq 1 ]; then
  echo "== served, 512 / 128 at concurrency 32 ($(el) s)"
  "$bin/nibble-engine" serve --model "$full" --port 8410 --max-model-len 4096 --max-num-seqs 64 \
    >"$OUT/serve_full.log" 2>&1 &
  server_pid=$!
  up=0
  for _ in $(seq 1 400); do
    curl -sf http://127.0.0.1:8410/health >/dev/null 2>&1 && { up=1; break; }
    kill -0 $server_pid 2>/dev/null || break
    sleep 0.5
  done
  if [ $up -eq 1 ]; then
    timeout 240 "$bin/nibble-bench" --base-url http://127.0.0.1:8410 --endpoint completions \
      --input-len 512 --output-len 128 --num-prompts 96 --max-concurrency 32 --no-progress \
      >"$OUT/bench_full_c32.log" 2>&1 || status=1
    grep -E 'Output token throughput|Median TTFT|Median TPOT|P99 TTFT' "$OUT/bench_full_c32.log"
  else
    status=1
    echo "the server did not start"; tail -5 "$OUT/serve_full.log"
  fi
  stop_server
fi
echo "elapsed $(el) s, status $status"
exit $status
