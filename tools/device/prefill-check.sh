#!/usr/bin/env bash
# Prefill on the device machine (binaries from tools/device/bundle.sh in .device-carry): the
# attention kernels against FP64 (test_attention_gpu), then the time of one forward over a prompt of
# 512 / 2,048 / 8,192 / 32,768 tokens of a Llama-3.1-8B-shaped NVFP4 model (random weights),
# `nibble-engine generate --warmup`, with the flash attention kernel and, as an A/B in the same
# call, with --flash-attention false (the FP32 tile kernel); --peer adds
# tools/device/peer_prefill.py (transformers BF16, sdpa) on the same GPU; a .device-carry/bin/
# nibble-engine-base (an older build, for an A/B of two versions) runs too when present.
# Logs go to $OUT.
# Usage: tools/device/prefill-check.sh [--peer] [--no-ab] [--lengths 512,2048,8192,32768]
source "$(dirname "$0")/device_env.sh"
PEER=0; AB=1; LENGTHS=512,2048,8192,32768
while [ $# -gt 0 ]; do
  case "$1" in --peer) PEER=1 ;; --no-ab) AB=0 ;; --lengths) LENGTHS=$2; shift ;; esac
  shift
done
echo "== attention kernels vs FP64"
"$bin/test_attention_gpu" >"$OUT/test_attention_gpu.log" 2>&1 || status=1
grep -E "^FAIL|passed|seed" "$OUT/test_attention_gpu.log" | head -20

ensure_llama8b
modes=(flash); [ $AB -eq 1 ] && modes=(flash tile)
[ -x "$bin/nibble-engine-base" ] && modes+=(base)
echo "== Llama-3.1-8B NVFP4 prefill, one forward (generate --warmup)"
for n in ${LENGTHS//,/ }; do
  ids=$(python3 -c "print(','.join(str(1 + i % 9) for i in range($n)))")
  for mode in "${modes[@]}"; do
    flash=(); [ $mode = tile ] && flash=(--flash-attention false)  # the base takes no such flag
    engine=$bin/nibble-engine; [ $mode = base ] && engine=$bin/nibble-engine-base
    "$engine" generate --model "$work/llama8b" --device cuda "${flash[@]}" \
      --prompt-ids "$ids" --max-tokens 2 --top-k 1 --warmup >"$OUT/prefill_${mode}_$n.log" 2>&1 ||
      { status=1; tail -3 "$OUT/prefill_${mode}_$n.log"; }
    echo "$mode $n: $(grep -oE 'prefill [0-9]+ tokens in [0-9.]+ s' "$OUT/prefill_${mode}_$n.log")"
  done
done > >(tee "$OUT/prefill.log")  # the loop stays in this shell: its status counts
if [ $PEER -eq 1 ]; then
  echo "== peer: transformers BF16 sdpa, one forward"
  (cd tools/device && PYTHONUNBUFFERED=1 python3 peer_prefill.py --lengths "$LENGTHS") \
    >"$OUT/peer_prefill.log" 2>&1 || { status=1; tail -20 "$OUT/peer_prefill.log"; }
  grep '^{' "$OUT/peer_prefill.log"
fi
echo "status $status"
exit $status
