#!/usr/bin/env bash
# The README's test command: installs dependencies, configures, builds and runs every test with ctest.
#   scripts/test.sh                 normal build in build/
#   NIBBLE_SANITIZE=1 scripts/test.sh   ASan+UBSan build in build-asan/, unit tests only
# CI=true turns warnings into errors. GPU tests (label gpu) skip themselves without a GPU. The
# libFuzzer harnesses (label fuzz, tests/fuzz) are built with clang and run 15 s each.
# Then, under CI=true (or with NIBBLE_IMAGES=1; NIBBLE_IMAGES=0 skips it), scripts/images.sh builds
# and smoke-tests the two container images. Compiles go through ccache (CCACHE_DIR, default
# ~/.cache/ccache), whose directory images.sh mounts into the image build: the container compiles
# the clone's sources again, with the same compiler, flags and relative paths, so nearly every
# compile is a hit (a cold image build is ~17 min on 2 cores; after this build, see
# docs/kubernetes.md).
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh

build_dir=${NIBBLE_BUILD_DIR:-build}
cmake_args=(-G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo)
ctest_args=(--output-on-failure --timeout 900)
if [ "${CI:-}" = "true" ]; then cmake_args+=(-DNIBBLE_WERROR=ON); fi
if [ "${NIBBLE_SANITIZE:-0}" = "1" ]; then
  build_dir=${NIBBLE_BUILD_DIR:-build-asan}
  cmake_args+=(-DNIBBLE_SANITIZE=ON -DNIBBLE_CUDA=OFF -DNIBBLE_BUILD_BENCHMARKS=OFF -DNIBBLE_FUZZ=OFF)
  ctest_args+=(-L unit)
fi

# Paths relative to the source root and no compile directory in the hash (RelWithDebInfo's -g
# would put it there), so a clone elsewhere and the image build (/src) share the cache.
if command -v ccache >/dev/null; then
  cmake_args+=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
  export CCACHE_BASEDIR=$PWD CCACHE_NOHASHDIR=1
fi

jobs=$(nproc)
# The pinned npm oracles (tokenizers, the OpenAI client), installed once before tests run.
tests/oracle/npm/install.sh || echo "test: npm oracles unavailable; oracle tests will skip (or fail under CI=true)"
cmake -S . -B "$build_dir" "${cmake_args[@]}"
cmake --build "$build_dir" -j "$jobs"
ctest --test-dir "$build_dir" -j "$jobs" "${ctest_args[@]}"
images_default=0
if [ "${CI:-}" = "true" ]; then images_default=1; fi
if [ "${NIBBLE_IMAGES:-$images_default}" = "1" ] && [ "${NIBBLE_SANITIZE:-0}" != "1" ]; then
  scripts/images.sh
fi
