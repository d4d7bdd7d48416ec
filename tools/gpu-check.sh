#!/usr/bin/env bash
# Builds, tests and benchmarks the NVFP4 kernels in one go on a machine with a GPU (the device
# machine of docs/performance.md): plain nvcc/g++, no CMake dependencies needed there.
# Usage: tools/gpu-check.sh [--no-bench] [--no-sanitizer] [--fast] [--sweep] [--ncu] [--no-w4a4];
# logs go to $OUT (or ./gpu-check-out). --fast: sampled E2M1 check and no sanitizer (intermediate
# runs; the full check is the default). --sweep: the benchmark also sweeps split-K counts.
# --no-w4a4 skips the sm_120a W4A4 build and SASS check. BENCH_LAYERS / BENCH_MS (comma lists)
# restrict the benchmark to those layers / M values (nibble-kernel-bench --layers / --ms).
# --ncu adds an Nsight Compute profile (full set) of the read ceilings and the 8-row, 16-row and
# decode (gemv) tiles (at M >= 256: the 64- and 128-row tiles) in both group orders
# (nibble-kernel-bench --profile; NCU_LAYERS, NCU_MS pick the shapes, default gate_up,qkv at
# M = 1). The benchmark starts with the mma.sync ceiling (registers only, 4/8/16 warps per SM).
# The W4A16 SASS always goes to $OUT/w4a16_sass.txt, its innermost loops' sizes (instructions per
# iteration, tools/sass/loop_sizes.py) to $OUT/w4a16_loops.txt.
# AB_DIRS="DIR ..." (snapshots from tools/device/ab-snapshot.sh) also builds the benchmark from
# the kernels in each DIR and runs those and the working tree's alternately, twice each
# ($OUT/bench-ab.log).
# Exit status: non-zero if the build or a test failed.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/gpu-check-out}"
mkdir -p "$OUT"
BUILD="${BUILD:-$PWD/build-gpu-check}"
mkdir -p "$BUILD"
ARCH="${GPU_ARCH:-90a}"
export PATH="/usr/local/cuda/bin:$PATH"
BENCH=1; SANITIZE=1; NCU=0; W4A4=1; TEST_ARGS=(); BENCH_ARGS=()
for a in "$@"; do
  case "$a" in --no-bench) BENCH=0 ;; --no-sanitizer) SANITIZE=0 ;; --ncu) NCU=1 ;; --no-w4a4) W4A4=0 ;;
    --fast) SANITIZE=0; TEST_ARGS=(--sampled-e2m1) ;; --sweep) BENCH_ARGS=(--sweep-splits) ;; esac
done
[ -n "${BENCH_LAYERS:-}" ] && BENCH_ARGS+=(--layers "$BENCH_LAYERS")
[ -n "${BENCH_MS:-}" ] && BENCH_ARGS+=(--ms "$BENCH_MS")
status=0
step() { echo "== $*"; }

step "environment" | tee "$OUT/env.log"
{ nvidia-smi -L; nvcc --version | tail -1; g++ --version | head -1; date -u; } >>"$OUT/env.log" 2>&1
cat "$OUT/env.log"

step "build (sm_$ARCH)"
NVCC_FLAGS=(-O3 -std=c++17 -I. -gencode "arch=compute_$ARCH,code=sm_$ARCH" -Xptxas -v -Werror all-warnings -Xcompiler -Wall,-Wextra)
CXX_FLAGS=(-O2 -std=c++20 -I. -I/usr/local/cuda/include -Wall -Wextra -Wpedantic -Werror)
build_log="$OUT/build.log"
: >"$build_log"
objs=()
for f in kernels/nvfp4/quantize_activations.cu kernels/nvfp4/w4a16_gemm.cu kernels/nvfp4/w4a16_gemm_dev.cu kernels/nvfp4/w4a16_gemv.cu kernels/nvfp4/w4a16_slice.cu kernels/nvfp4/w4a16_slice_dev.cu kernels/nvfp4/w4a16_dequant.cu kernels/nvfp4/w4a16_wgmma.cu kernels/layer/layer_ops.cu kernels/moe/moe_routing.cu; do
  o="$BUILD/$(basename "$f").o"; objs+=("$o")
  nvcc "${NVCC_FLAGS[@]}" -c "$f" -o "$o" >>"$build_log" 2>&1 &
done
nvcc "${NVCC_FLAGS[@]}" -c tools/kernel-bench/read_ceiling.cu -o "$BUILD/read_ceiling.o" >>"$build_log" 2>&1 &
nvcc "${NVCC_FLAGS[@]}" -c tools/kernel-bench/mma_ceiling.cu -o "$BUILD/mma_ceiling.o" >>"$build_log" 2>&1 &
for f in kernels/nvfp4/nvfp4_ref.cpp kernels/nvfp4/w4a16_layout.cpp kernels/nvfp4_linear.cpp kernels/nvfp4/even_spread.cpp kernels/nvfp4/w4a16_dense.cpp kernels/nvfp4/w4a16_dev_tiles.cpp kernels/moe/moe_experts.cpp kernels/moe/moe_routing_ref.cpp; do
  o="$BUILD/$(basename "$f").o"; objs+=("$o")
  g++ "${CXX_FLAGS[@]}" -c "$f" -o "$o" >>"$build_log" 2>&1 &
done
g++ "${CXX_FLAGS[@]}" -c tests/gpu/test_nvfp4_gpu.cpp -o "$BUILD/test.o" >>"$build_log" 2>&1 &
g++ "${CXX_FLAGS[@]}" -c tests/gpu/test_w4a16_layout.cpp -o "$BUILD/layout_test.o" >>"$build_log" 2>&1 &
g++ "${CXX_FLAGS[@]}" -c tools/kernel-bench/kernel_bench.cpp -o "$BUILD/bench.o" >>"$build_log" 2>&1 &
g++ "${CXX_FLAGS[@]}" -c tools/kernel-bench/layer_chain.cpp -o "$BUILD/layer_chain.o" >>"$build_log" 2>&1 &
g++ "${CXX_FLAGS[@]}" -c tools/kernel-bench/moe_grouped.cpp -o "$BUILD/moe_grouped.o" >>"$build_log" 2>&1 &
wait
nvcc -o "$BUILD/test_nvfp4_gpu" "$BUILD/test.o" "${objs[@]}" -lcublas >>"$build_log" 2>&1 || status=1
nvcc -o "$BUILD/test_w4a16_layout" "$BUILD/layout_test.o" "$BUILD/w4a16_layout.cpp.o" "$BUILD/nvfp4_ref.cpp.o" >>"$build_log" 2>&1 || status=1
nvcc -o "$BUILD/nibble-kernel-bench" "$BUILD/bench.o" "$BUILD/layer_chain.o" "$BUILD/moe_grouped.o" "$BUILD/read_ceiling.o" "$BUILD/mma_ceiling.o" "${objs[@]}" -lcublas >>"$build_log" 2>&1 || status=1
# A/B: one more benchmark binary per snapshot directory (tools/device/ab-snapshot.sh).
ab_names=()
for dir in ${AB_DIRS:-}; do
  name="$(basename "$dir")"; ab_names+=("$name")
  ab_objs=()
  for f in kernels/nvfp4/quantize_activations.cu kernels/nvfp4/w4a16_gemm.cu kernels/nvfp4/w4a16_gemm_dev.cu kernels/nvfp4/w4a16_gemv.cu kernels/nvfp4/w4a16_slice.cu kernels/nvfp4/w4a16_slice_dev.cu; do
    [ -f "$dir/$f" ] || continue  # snapshots from before the slice kernels
    o="$BUILD/ab-$name-$(basename "$f").o"; ab_objs+=("$o")
    nvcc "${NVCC_FLAGS[@]/#-I./-I$dir}" -I. -c "$dir/$f" -o "$o" >>"$build_log" 2>&1 || status=1
  done
  g++ "${CXX_FLAGS[@]/#-I./-I$dir}" -I. -c "$dir/kernels/nvfp4_linear.cpp" -o "$BUILD/ab-$name-linear.o" >>"$build_log" 2>&1 || status=1
  # The bench calls w4a16_enable_dev_tiles (kernels/nvfp4/w4a16_dev_tiles.h): the snapshot's, or a
  # no-op where the snapshot's w4a16_linear still runs kGemv itself.
  if [ -f "$dir/kernels/nvfp4/w4a16_dev_tiles.cpp" ]; then
    g++ "${CXX_FLAGS[@]/#-I./-I$dir}" -I. -c "$dir/kernels/nvfp4/w4a16_dev_tiles.cpp" -o "$BUILD/ab-$name-dev.o" >>"$build_log" 2>&1 || status=1
  else
    echo 'namespace nibble::kernels { void w4a16_enable_dev_tiles() {} }' |
      g++ -x c++ -std=c++20 -c - -o "$BUILD/ab-$name-dev.o" >>"$build_log" 2>&1 || status=1
  fi
  nvcc -o "$BUILD/nibble-kernel-bench-$name" "$BUILD/bench.o" "$BUILD/layer_chain.o" "$BUILD/read_ceiling.o" "$BUILD/mma_ceiling.o" \
    "${ab_objs[@]}" "$BUILD/ab-$name-linear.o" "$BUILD/ab-$name-dev.o" "$BUILD/nvfp4_ref.cpp.o" "$BUILD/w4a16_layout.cpp.o" "$BUILD/even_spread.cpp.o" \
    "$BUILD/w4a16_dequant.cu.o" "$BUILD/w4a16_dense.cpp.o" -lcublas >>"$build_log" 2>&1 || status=1
done
grep -E 'error|warning|registers|spill' "$build_log" | grep -v '^ptxas info    : Compiling' | head -40
[ $status -ne 0 ] && { echo "BUILD FAILED"; tail -40 "$build_log"; exit 1; }

# The W4A16 SASS (instruction mix of the main loops; see kernels/nvfp4/PERF_NOTES.md).
for o in "$BUILD/w4a16_gemm.cu.o" "$BUILD/w4a16_gemm_dev.cu.o" "$BUILD/w4a16_gemv.cu.o" "$BUILD/w4a16_slice.cu.o" "$BUILD/w4a16_slice_dev.cu.o" "$BUILD/w4a16_dequant.cu.o" "$BUILD/w4a16_wgmma.cu.o"; do cuobjdump -sass "$o"; done >"$OUT/w4a16_sass.txt" 2>&1
python3 tools/sass/loop_sizes.py "$OUT/w4a16_sass.txt" >"$OUT/w4a16_loops.txt" 2>&1 || true

step "W4A4 (sm_120a/121a): block-scaled FP4 mma in PTX and SASS"
w4a4_result="not built"
if [ $W4A4 -eq 1 ] && nvcc -std=c++17 -I. -gencode arch=compute_120a,code=sm_120a -cubin kernels/nvfp4/w4a4_sm120.cu -o "$BUILD/w4a4.cubin" >>"$OUT/w4a4.log" 2>&1; then
  cuobjdump -sass "$BUILD/w4a4.cubin" >"$OUT/w4a4_sass.txt" 2>&1
  n=$(grep -c -E 'OMMA|QMMA|MXF4' "$OUT/w4a4_sass.txt")
  w4a4_result="SASS block-scaled FP4 MMA instructions: $n"
  grep -m3 -E 'OMMA|QMMA|MXF4' "$OUT/w4a4_sass.txt"
fi
echo "$w4a4_result"

step "tests"
"$BUILD/test_w4a16_layout" 2>&1 | tee "$OUT/test_layout.log" | tail -3; layout_rc=${PIPESTATUS[0]}
"$BUILD/test_nvfp4_gpu" "${TEST_ARGS[@]}" 2>&1 | tee "$OUT/test_gpu.log" | grep -E 'FAIL|seed|device|passed' ; test_rc=${PIPESTATUS[0]}
[ $layout_rc -ne 0 ] || [ $test_rc -ne 0 ] && status=1

sanitizer_rc=skipped
if [ $SANITIZE -eq 1 ]; then
  step "compute-sanitizer memcheck (test binary, --quick)"
  compute-sanitizer --tool memcheck --error-exitcode 9 "$BUILD/test_nvfp4_gpu" --quick >"$OUT/memcheck.log" 2>&1
  sanitizer_rc=$?
  tail -4 "$OUT/memcheck.log"
  [ $sanitizer_rc -ne 0 ] && status=1
fi

if [ $BENCH -eq 1 ]; then
  step "benchmark"
  if [ ${#ab_names[@]} -gt 0 ]; then
    : >"$OUT/bench-ab.log"
    for i in 1 2; do
      for name in "${ab_names[@]}" current; do
        bin="$BUILD/nibble-kernel-bench-$name"; [ "$name" = current ] && bin="$BUILD/nibble-kernel-bench"
        echo "=== $name (round $i)" >>"$OUT/bench-ab.log"
        "$bin" "${BENCH_ARGS[@]}" >>"$OUT/bench-ab.log" 2>&1
      done
    done
    grep -E '^===|^(llama|qwen|chain)|^ *[0-9]+ \|' "$OUT/bench-ab.log" | grep -v ' 0.0       0.0 ' | cut -c1-130
  else
    "$BUILD/nibble-kernel-bench" --csv "$OUT/bench.csv" "${BENCH_ARGS[@]}" 2>&1 | tee "$OUT/bench.log"
  fi
fi

if [ $NCU -eq 1 ]; then
  step "ncu (nibble-kernel-bench --profile --layers ${NCU_LAYERS:-gate_up,qkv} --ms ${NCU_MS:-1})"
  timeout 200 ncu --set full --kernel-name regex:'w4a16|read_|wgmma' \
    "$BUILD/nibble-kernel-bench" --profile --layers "${NCU_LAYERS:-gate_up,qkv}" \
    --ms "${NCU_MS:-1}" >"$OUT/ncu.log" 2>&1
  echo "ncu rc $?"
  grep -E '^  [a-z_:<>0-9A-Za-z ]+\(|Duration|DRAM Throughput|Memory Throughput|Compute \(SM\) Throughput|Achieved Occupancy|Registers Per|Issue Slots Busy|No Eligible|Warp Cycles Per Issued|L2 Hit Rate|Mem Busy|Max Bandwidth' "$OUT/ncu.log" | head -150
fi

step "summary"
printf '%-28s %s\n' "layout test (rc)" "$layout_rc" "gpu test (rc)" "$test_rc" \
  "memcheck (rc)" "$sanitizer_rc" "w4a4" "$w4a4_result" \
  "gpu test checks" "$(grep -E 'passed, ' "$OUT/test_gpu.log" | tail -1)"
exit $status
