# Set-up shared by the device scripts, sourced first: strict mode, the repository root as the
# working folder, $OUT (packed into $OUT/00-logs.tar.gz at exit), the carried binaries and
# libraries of tools/device/bundle.sh, a scratch folder, the status flag, and helpers for the test
# model and a served engine.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
OUT="${OUT:-$PWD/device-out}"
mkdir -p "$OUT"
carry=$PWD/.device-carry
bin=$carry/bin
export LD_LIBRARY_PATH="$carry/lib:/usr/local/cuda/lib64:/usr/local/cuda/lib:${LD_LIBRARY_PATH:-}"
status=0
work=/tmp/nibble-device
mkdir -p "$work"
# Tokenizers may travel packed (.device-carry/tokenizers.tar.xz, from bundle.sh).
[ -d "$carry/tokenizers" ] || [ ! -f "$carry/tokenizers.tar.xz" ] ||
  tar -xJf "$carry/tokenizers.tar.xz" -C "$carry"
# The device tool returns at most 8 files of $OUT (the first by name): every log also travels in
# one archive named to sort first, so none is lost however many a script writes.
# (The archive is written outside $OUT: written inside it, tar saw the folder change and failed.)
pack_out() {
  tar -czf "$work/logs.tar.gz" -C "$OUT" --exclude='00-logs.tar.gz' . 2>/dev/null &&
    mv "$work/logs.tar.gz" "$OUT/00-logs.tar.gz"
}
trap pack_out EXIT

# The Llama-3.1-8B-shaped NVFP4 model with random weights (shared global scales per fused group,
# as a ModelOpt export has them) in $work/llama8b, made once per machine.
ensure_llama8b() {
  [ -f "$work/llama8b/config.json" ] && return 0
  "$bin/nibble-make-model" --arch llama --preset llama-3.1-8b --dtype nvfp4 --seed 1 --threads 16 \
    --shared-global-scales --tokenizer "$carry/tokenizers/llama3_1" --force --output "$work/llama8b" \
    >"$OUT/make_8b.log" 2>&1 || { status=1; tail -5 "$OUT/make_8b.log"; return 1; }
}

# start_server BINARY PORT LOG [serve flags...]: `BINARY serve` on the 8B model in the background
# (its pid in $server_pid) until /health answers; non-zero when it exits or stays unhealthy 300 s.
start_server() {
  local binary=$1 port=$2 log=$3
  shift 3
  "$bin/$binary" serve --model "$work/llama8b" --port "$port" "$@" >"$log" 2>&1 &
  server_pid=$!
  for _ in $(seq 1 600); do
    curl -sf "http://127.0.0.1:$port/health" >/dev/null 2>&1 && return 0
    kill -0 "$server_pid" 2>/dev/null || return 1
    sleep 0.5
  done
  return 1
}

stop_server() {
  kill -TERM "$server_pid" 2>/dev/null
  wait "$server_pid" 2>/dev/null
}
