#!/usr/bin/env bash
# Installs Nibble's build and test dependencies from Debian 12 packages.
# Idempotent: packages already present are skipped; works as root or through sudo.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git ca-certificates curl ccache
  libcpp-httplib-dev libssl-dev zlib1g-dev libbrotli-dev
  libyaml-cpp-dev nlohmann-json3-dev libspdlog-dev libfmt-dev libpcre2-dev prometheus-cpp-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  clang-format prometheus unzip
  clang libclang-rt-14-dev  # the libFuzzer harnesses (tests/fuzz)
  # The container images (scripts/images.sh): rootful podman with runc (crun refuses hybrid
  # cgroups), its overlay and network helpers, and mmdebstrap for the Debian 12 base.
  podman runc mmdebstrap uidmap fuse-overlayfs slirp4netns
)
# Oracles that may already come from elsewhere (a newer Node, a Python with its own modules):
# ask Debian for them only when the command or module is missing.
command -v node >/dev/null && command -v npm >/dev/null || packages+=(nodejs npm)
command -v python3 >/dev/null || packages+=(python3)
python3 -c 'import jinja2' 2>/dev/null || packages+=(python3-jinja2)
python3 -c 'import regex' 2>/dev/null || packages+=(python3-regex)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "install-deps: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  sudo_cmd=(sudo)
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
# The prometheus package would start a system service where systemd runs; tests start their own.
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
