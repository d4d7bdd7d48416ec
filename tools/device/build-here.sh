#!/usr/bin/env bash
# Runs ON the device machine: builds Nibble there (Release, one GPU architecture) from the Debian
# packages tools/device/fetch-debs.sh carried in .device-debs/, and lays the binaries out as
# tools/device/bundle.sh does (.device-carry/bin, .device-carry/lib), so that every device script
# runs them. With a snapshot of another revision in .ab/base-src.tar.gz (git archive REV | gzip),
# that tree is built too and its engine installed as .device-carry/bin/nibble-engine-base: an A/B
# of two builds in one call.
#   tools/device/build-here.sh [TARGET...]   (default: test_cuda_backend nibble-engine
#                                             nibble-make-model nibble-bench)
# NIBBLE_DEVICE_ARCH (default 90a), NIBBLE_BASE_TARGETS (default nibble-engine).
set -uo pipefail
cd "$(dirname "$0")/../.."
root=/tmp/nibble-debsys
arch=${NIBBLE_DEVICE_ARCH:-90a}
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(test_cuda_backend nibble-engine nibble-make-model nibble-bench)
mkdir -p "$root/.unpacked"
for deb in .device-debs/*.deb; do
  stamp=$root/.unpacked/$(basename "$deb")
  [ -f "$stamp" ] && continue
  if command -v dpkg-deb >/dev/null; then
    dpkg-deb -x "$deb" "$root"
  else  # a .deb is an ar archive holding data.tar.*
    (cd "$root" && ar p "$OLDPWD/$deb" "$(ar t "$OLDPWD/$deb" | grep '^data.tar')" | tar -xJ)
  fi && touch "$stamp"
done
lib=$root/usr/lib/x86_64-linux-gnu
export PKG_CONFIG_SYSROOT_DIR=$root
export PKG_CONFIG_LIBDIR=$lib/pkgconfig:$root/usr/share/pkgconfig
export LD_LIBRARY_PATH=$lib:${LD_LIBRARY_PATH:-}
configure() {  # SRC BUILD
  cmake -S "$1" -B "$2" -G Ninja -DCMAKE_BUILD_TYPE=Release -DNIBBLE_CUDA=ON \
    -DNIBBLE_CUDA_ARCHITECTURES="$arch" -DNIBBLE_BUILD_TESTS=ON -DNIBBLE_BUILD_BENCHMARKS=OFF \
    -DCMAKE_PREFIX_PATH="$root/usr;$lib/cmake" -DPKG_CONFIG_EXECUTABLE="$root/usr/bin/pkgconf" \
    -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc >"$2.configure.log" 2>&1 ||
    { tail -30 "$2.configure.log"; return 1; }
}
status=0
mkdir -p .device-carry/bin .device-carry/lib
configure . build-device && cmake --build build-device -j "$(nproc)" --target "${targets[@]}" \
  >build-device.log 2>&1 || { status=1; grep -E "error|FAILED" build-device.log | head -30; }
for t in "${targets[@]}"; do
  f=$(find build-device -type f -name "$t" -perm -u+x | head -1)
  [ -n "$f" ] && cp "$f" ".device-carry/bin/$t"
  # A shared-library target (nibble-kernel-trace) lands beside the carried libraries.
  f=$(find build-device -type f -name "lib$t.so" | head -1)
  [ -n "$f" ] && cp "$f" ".device-carry/lib/lib$t.so"
done
if [ -f .ab/base-src.tar.gz ]; then
  rm -rf /tmp/nibble-base && mkdir -p /tmp/nibble-base
  tar -xzf .ab/base-src.tar.gz -C /tmp/nibble-base
  read -r -a base_targets <<<"${NIBBLE_BASE_TARGETS:-nibble-engine}"
  configure /tmp/nibble-base /tmp/nibble-base/build &&
    cmake --build /tmp/nibble-base/build -j "$(nproc)" --target "${base_targets[@]}" \
      >build-base.log 2>&1 || { status=1; grep -E "error|FAILED" build-base.log | head -30; }
  for t in "${base_targets[@]}"; do
    f=$(find /tmp/nibble-base/build -type f -name "$t" -perm -u+x | head -1)
    [ -n "$f" ] && cp "$f" ".device-carry/bin/$t-base"
  done
fi
# The libraries the image lacks (not OpenSSL, zlib or PCRE2: its own serve its Python too).
for name in spdlog fmt yaml-cpp cpp-httplib prometheus-cpp-core brotli; do
  cp -L "$lib"/lib$name*.so.* .device-carry/lib/ 2>/dev/null
done
ls .device-carry/bin
exit $status
