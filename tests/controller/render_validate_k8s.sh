#!/usr/bin/env bash
# Every object `nibble render` prints validates against the official Kubernetes schemas, with
# no unknown field (tests/manifests/validate_k8s.mjs: npm kubernetes-models and
# @kubernetes-models/prometheus-operator, pinned in tests/oracle/npm).
#   render_validate_k8s.sh NIBBLE_BINARY SOURCE_DIR
# Exit 77 (skipped) when the npm oracles cannot be installed, unless CI=true.
set -euo pipefail
nibble=$1
src=$2
if [ -z "${NIBBLE_NPM_MODULES:-}" ]; then
  if ! msg=$("$src/tests/oracle/npm/install.sh"); then
    echo "$msg"
    [ "${CI:-}" = true ] && exit 1
    exit 77
  fi
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
recipes=("$src/tests/controller/recipes/render-placement.yaml")
for f in "$src"/examples/recipes/*.yaml; do
  # Recipes marked local mode only (demo.yaml: a relative path) cannot run on Kubernetes.
  head -1 "$f" | grep -q '^# local mode only' || recipes+=("$f")
done
n=0
for f in "${recipes[@]}"; do
  for flags in "" \
    "--namespace ml --owner-uid 0b7c3f4e-1d2a-4c5b-9e8f-1a2b3c4d5e6f --pod-monitor --model-cache-pvc models --hf-token-secret hf-token --hf-endpoint https://hf-mirror.example" \
    "--model-cache-host-path /var/lib/nibble/models --engine-image registry.example/nibble-engine:1.2.3 --image-pull-policy Always --engine-drain-seconds 300" \
    "--model-cache-size-limit 200Gi --engine-startup-timeout 3600 --replicas 3" \
    "--engine-cpu-request 8 --engine-memory-request 100Gi --engine-ephemeral-storage-request 20Gi --engine-runtime-class nvidia --engine-image-pull-secret regcred"; do
    n=$((n + 1))
    # shellcheck disable=SC2086 # flags are words on purpose
    "$nibble" render -f "$f" $flags >"$out/render-$n.yaml"
  done
done
node "$src/tests/manifests/validate_k8s.mjs" "$out"/render-*.yaml
