#!/usr/bin/env bash
# Issue 20's targets in one device call: batch-1 decode of Llama-3.1-8B and Qwen3-30B-A3B, each
# with the pick on the host and/or on the device (the serving path); with --served, Llama-3.1-8B
# served at 512 in / 128 out, concurrency 1 and 8, by this build and (when carried) by
# .device-carry/bin/nibble-engine-base, an older main; then the transformers peer for each model in
# its own process. Ends with every figure beside its target. Also prints how long making each
# model and uploading its weights took (load-time work).
# Carried: .device-carry/bin (nibble-engine, nibble-make-model; nibble-bench and nibble-engine-base
# for --served), /lib, /tokenizers or /tokenizers.tar.xz (qwen3, llama3_1); optionally
# /tbin/test_nvfp4_gpu, run --quick at the end.
# Usage: tools/device/decode-targets.sh [--picks host,device] [--served]
source "$(dirname "$0")/device_env.sh"
picks=host,device
served=0
while [ $# -gt 0 ]; do
  case "$1" in --picks) picks=$2; shift ;; --served) served=1 ;; *) echo "unknown $1"; exit 2 ;; esac
  shift
done
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader

decode() {
  local model=$1 start variants=()
  start=$(date +%s)
  [[ ,$picks, == *,host,* ]] && variants+=("$model-host||")
  [[ ,$picks, == *,device,* ]] && variants+=("$model-device||--sample-on-device")
  tools/device/decode-check.sh --model "$model" "${variants[@]}" || status=1
  echo "$model: $(($(date +%s) - start)) s for making the model and the runs"
  grep -ho "weights on the device in [0-9.]* s" "$OUT"/generate_"$model"-*.log | tail -1
}

decode llama-3.1-8b
if [ $served -eq 1 ]; then
  # The default serve flags of each build; 16 and 64 prompts keep both loads short.
  RUNS="1:16:512:128 8:64:512:128" tools/device/serve-ab.sh >/dev/null || status=1
  grep -v '^status' "$OUT/serve_ab.log"
fi
decode qwen3-30b-a3b
grep -H "done in" "$OUT"/make_8b.log "$OUT"/make_model.log 2>/dev/null

# One process per model: Qwen3-30B-A3B after Llama in one process ran at 83.0 tok/s (2026-11-29
# 04:14 UTC), against 96-119 alone in every earlier call.
for model in qwen3-30b-a3b llama-3.1-8b; do
  PYTHONUNBUFFERED=1 timeout 240 python3 tools/device/peer_decode.py --models "$model" \
    >>"$OUT/peer_decode.log" 2>&1 || { status=1; tail -5 "$OUT/peer_decode.log"; }
done
grep '^{' "$OUT/peer_decode.log"

# Every figure beside its target, from the logs above.
python3 - "$OUT" <<'EOF' || status=1
import json, pathlib, re, sys
out = pathlib.Path(sys.argv[1])
def last(pattern, path):
    found = re.findall(pattern, path.read_text()) if path.exists() else []
    return float(found[-1]) if found else None
peer = {}
for line in (out / "peer_decode.log").read_text().splitlines():
    if line.startswith("{"):
        row = json.loads(line)
        peer[row["model"]] = row["decode_tok_s"]
for model, target in (("llama-3.1-8b", 3.0), ("qwen3-30b-a3b", 4.0)):
    for pick in ("host", "device"):
        rate = last(r"decode ([0-9.]+) tokens/s", out / f"generate_{model}-{pick}.log")
        if rate is None or model not in peer:
            continue
        ratio = rate / peer[model]
        print(f"{model} batch-1 decode, pick on the {pick}: {rate:.2f} tok/s, peer "
              f"{peer[model]:.1f}, {ratio:.2f}x (target >= {target:.0f}x: "
              f"{'met' if ratio >= target else 'NOT met'})")
def field(path, label):
    """The number ending nibble-bench's report line that starts with label."""
    lines = path.read_text().splitlines() if path.exists() else []
    found = [line.split()[-1] for line in lines if line.startswith(label)]
    return float(found[-1]) if found else None
rate = last(r"decode ([0-9.]+) tokens/s", out / "generate_llama-3.1-8b-device.log")
tpot = field(out / "bench_nibble-engine_c1_in512.log", "Median TPOT")
if rate and tpot:
    step = 1e3 / rate
    print(f"served concurrency 1: TPOT median {tpot:.2f} ms against the batch-1 decode step "
          f"{step:.3f} ms: {100 * (tpot / step - 1):+.1f}% (target within 10%: "
          f"{'met' if tpot <= 1.1 * step else 'NOT met'})")
now = field(out / "bench_nibble-engine_c8_in512.log", "Output token throughput")
base = field(out / "bench_nibble-engine-base_c8_in512.log", "Output token throughput")
if now and base:
    print(f"served concurrency 8: {now:.1f} output tok/s against the base build's {base:.1f}: "
          f"{now / base:.2f}x (target >= 1.5x: {'met' if now >= 1.5 * base else 'NOT met'})")
EOF

# The W4A16 kernels on the load-time repack's bytes (when the test binary is carried).
if [ -x "$carry/tbin/test_nvfp4_gpu" ]; then
  timeout 90 "$carry/tbin/test_nvfp4_gpu" --quick >"$OUT/test_nvfp4_gpu.log" 2>&1 || status=1
  tail -2 "$OUT/test_nvfp4_gpu.log"
fi
echo "status $status"
exit $status
