#!/usr/bin/env bash
# The README's test command: installs dependencies, configures, builds and runs every test with ctest.
#   scripts/test.sh                 normal build in build/
#   NIBBLE_SANITIZE=1 scripts/test.sh   ASan+UBSan build in build-asan/, unit tests only
# CI=true turns warnings into errors. GPU tests (label gpu) skip themselves without a GPU. The
# libFuzzer harnesses (label fuzz, tests/fuzz) are built with clang and run 15 s each.
# NIBBLE_IMAGES=1 then builds and smoke-tests the two container images (scripts/images.sh). Off by
# default: a cold image build compiles the engine and controller again inside the container
# (~17 min on 2 cores), which would take CI past its 45-minute budget.
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

jobs=$(nproc)
# The pinned npm oracles (tokenizers, the OpenAI client), installed once before tests run.
tests/oracle/npm/install.sh || echo "test: npm oracles unavailable; oracle tests will skip (or fail under CI=true)"
cmake -S . -B "$build_dir" "${cmake_args[@]}"
cmake --build "$build_dir" -j "$jobs"
ctest --test-dir "$build_dir" -j "$jobs" "${ctest_args[@]}"
if [ "${NIBBLE_IMAGES:-0}" = "1" ] && [ "${NIBBLE_SANITIZE:-0}" != "1" ]; then
  scripts/images.sh
fi
