#!/usr/bin/env bash
# Issue 40's targets in one device call, gpt-oss in its shipped MXFP4 layout with random weights
# (nibble-make-model --arch gpt_oss --preset gpt-oss-20b|gpt-oss-120b --dtype mxfp4):
#   1. gpt-oss-20b batch-1 decode (512-token prompt, 128 tokens) and TTFT at 8,192 tokens, against
#      transformers BF16 on the same shapes (peer_decode.py / peer_prefill.py read the made
#      model's own config.json) and against the bandwidth roofline (decode_bytes.py over the copy
#      bandwidth nibble-kernel-bench measures in the same call);
#   2. gpt-oss-20b served, 512 in / 128 out at concurrency 1, 8 and 32 (nibble-bench);
#   3. with --with-120b, gpt-oss-120b batch-1 decode against its roofline. Its ~65 GB of weights
#      do not fit the 64 GiB disk of a one-GPU machine: it is written to /dev/shm where that has
#      the room, and skipped with a message otherwise.
# Carried: .device-carry/bin (nibble-engine, nibble-make-model, nibble-bench, nibble-kernel-bench),
# /lib, /tokenizers(.tar.xz). Usage: tools/device/gpt-oss-targets.sh [--skip-peer]
# [--skip-served] [--with-120b]
source "$(dirname "$0")/device_env.sh"
peer=1 served=1 big=0
for arg in "$@"; do
  case $arg in
    --skip-peer) peer=0 ;;
    --skip-served) served=0 ;;
    --with-120b) big=1 ;;
    *) echo "unknown argument $arg" && exit 2 ;;
  esac
done
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv,noheader
started=$(date +%s)
el() { echo $(($(date +%s) - started)); }
make_model() {  # PRESET DIR SECONDS
  [ -f "$2/config.json" ] || timeout "$3" "$bin/nibble-make-model" --arch gpt_oss --preset "$1" \
    --dtype mxfp4 --seed 1 --threads 16 --tokenizer "$carry/tokenizers/gptoss" --force \
    --output "$2" >"$OUT/make_$1.log" 2>&1 || { status=1; tail -3 "$OUT/make_$1.log"; return 1; }
}
gen() {  # DIR PROMPT_LEN MAX_TOKENS LOG
  timeout 300 "$bin/nibble-engine" generate --model "$1" --device cuda \
    --prompt-ids "$(seq -s, 1 "$2")" --max-tokens "$3" --top-k 1 --warmup --sample-on-device \
    >"$OUT/$4.log" 2>&1 || { status=1; tail -3 "$OUT/$4.log"; }
  grep -oE 'prefill [0-9]+ tokens.*' "$OUT/$4.log"
}
roofline() {  # DIR GEN_LOG JSON
  local rate
  rate=$(grep -oE 'decode [0-9.]+ tokens/s' "$OUT/$2.log" | grep -oE '[0-9.]+' | tail -1)
  [ -n "$copy" ] && python3 tools/device/decode_bytes.py "$1" --context 640 --copy-gbps "$copy" \
    ${rate:+--tok-s "$rate"} | tee "$OUT/$3.json"
}
small=$work/gptoss20b
make_model gpt-oss-20b "$small" 400 &
make_pid=$!
copy=$(timeout 90 "$bin/nibble-kernel-bench" --moe 2>&1 | tee "$OUT/kbench.log" |
  grep -oE 'copy bandwidth \(read\+write\): [0-9.]+' | grep -oE '[0-9.]+$')
echo "copy bandwidth ${copy:-?} GB/s ($(el) s)"
wait $make_pid || { echo "gpt-oss-20b was not written"; exit 1; }
echo "== gpt-oss-20b ($(el) s)"
gen "$small" 512 128 gen_20b_b1
gen "$small" 8192 2 gen_20b_ttft8k
roofline "$small" gen_20b_b1 roofline_20b
if [ $peer -eq 1 ]; then
  echo "== the transformers peer ($(el) s)"
  PYTHONUNBUFFERED=1 timeout 330 python3 tools/device/peer_decode.py --models "$small" \
    >"$OUT/peer_decode.log" 2>&1 || { status=1; tail -3 "$OUT/peer_decode.log"; }
  PYTHONUNBUFFERED=1 timeout 200 python3 tools/device/peer_prefill.py --models "$small" \
    --lengths 8192 >"$OUT/peer_prefill.log" 2>&1 || { status=1; tail -3 "$OUT/peer_prefill.log"; }
  grep -h '^{' "$OUT/peer_decode.log" "$OUT/peer_prefill.log"
fi
if [ $served -eq 1 ]; then
  echo "== gpt-oss-20b served, 512 / 128 ($(el) s)"
  "$bin/nibble-engine" serve --model "$small" --port 8420 --max-model-len 4096 \
    --max-num-seqs 64 >"$OUT/serve_20b.log" 2>&1 &
  server_pid=$! up=0
  for _ in $(seq 1 400); do
    curl -sf http://127.0.0.1:8420/health >/dev/null 2>&1 && { up=1; break; }
    kill -0 $server_pid 2>/dev/null || break
    sleep 0.5
  done
  if [ $up -eq 1 ]; then
    for c in 1 8 32; do
      timeout 200 "$bin/nibble-bench" --base-url http://127.0.0.1:8420 --endpoint completions \
        --input-len 512 --output-len 128 --num-prompts $((c < 8 ? 8 : 3 * c)) \
        --max-concurrency $c --no-progress >"$OUT/bench_20b_c$c.log" 2>&1 || status=1
      echo "c=$c: $(grep -E 'Output token throughput|Median TTFT' "$OUT/bench_20b_c$c.log" |
        tr -s ' ' | tr '\n' ';')"
    done
  else
    status=1
    echo "the server did not start"; tail -5 "$OUT/serve_20b.log"
  fi
  stop_server
fi
if [ $big -eq 1 ]; then
  rm -rf "$small"
  free_shm=$(df --output=avail -B1G /dev/shm 2>/dev/null | tail -1 | tr -d ' ')
  if [ "${free_shm:-0}" -lt 70 ]; then
    echo "gpt-oss-120b skipped: /dev/shm has ${free_shm:-0} GiB free, its weights need ~65"
  else
    big_dir=/dev/shm/gptoss120b
    echo "== gpt-oss-120b ($(el) s)"
    if make_model gpt-oss-120b "$big_dir" 420; then
      gen "$big_dir" 512 128 gen_120b_b1
      roofline "$big_dir" gen_120b_b1 roofline_120b
    fi
    rm -rf "$big_dir"
  fi
fi
echo "elapsed $(el) s, status $status"
exit $status
