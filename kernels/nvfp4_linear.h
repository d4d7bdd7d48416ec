#pragma once
// The one entry point the engine calls for an NVFP4 linear layer:
//   out[M, N] = x[M, K] . W[N, K]^T (+ residual), BF16 in and out, W in NVFP4.
// It picks the kernel by M, N, K and the device:
//   M <= 8            W4A16, slice tiles (kSlice16 / kSlice32: a block streams 16 or 32 weight
//                     rows over all of K, no split-K) where the grid runs in one wave spread
//                     evenly over the SMs (or is smaller than the SM count); 8 warps per block
//                     (kSlice16Wide) at <= 2 blocks per SM for a long K or a grid smaller than
//                     the SM count; one 8-warp 32-row slice per SM (kSlice32Wide) where 16-row
//                     ones would sit 2 per SM with a short K; 8-warp 32-row slices over several
//                     waves where those waves are >= 80% full on average; else
//                     W4A16, 8-row swapped tiles (kM8: x is the mma's B operand, the weights its
//                     A operand, K split over blocks);
//   M <= 16           W4A16, 32-row slices with x as two 8-row fragments (kSlice32, 8 warps where
//                     the grid has at most one per SM; kSlice16Wide for grids smaller than the SM
//                     count) up to two waves; else 16-row swapped tiles (kM16Swap: x is the B
//                     operand in two 8-row fragments, K split like kM8's);
//                     kM8 and kM16Swap split K: >= 8 k tiles per split and >= 2 blocks per SM;
//   M >= 1024         (only where the caller passes an Nvfp4DenseOption) dequantise-then-cuBLAS,
//                     measured faster there on H200;
//   M >= 128 on sm_90 (DeviceTraits::wgmma) where a warpgroup-MMA grid, split over K where it is
//                     small, fills at least half of its waves' slots
//                     W4A16 on wgmma: blocks of 256 rows of x (kWgmma256, one per SM) or 128
//                     (kWgmma128, two per SM) by 128 weight rows, tile and split count by a time
//                     model that counts the waves of clusters the split sums run in (measured on
//                     H200);
//   M >= min_rows     (only where the caller passes an Nvfp4DenseOption) dequantise-then-cuBLAS
//                     (w4a16_dense.h): the weight as BF16 into scratch, then a cuBLAS BF16 GEMM;
//   M > 512 with >= 2 128-row tiles per SM
//                     W4A16, 128-row tiles (8 m16 fragments per warp);
//   otherwise         W4A16, 64-row tiles.
// The thresholds come from nibble-kernel-bench --sweep-splits (kernels/nvfp4/PERF_NOTES.md: the
// mma.sync tiles v16-v20 on H100, the warpgroup-MMA tiles v28-v32 on H200); the dense path's
// are v21's predictions (kNvfp4DenseMinRows, kNvfp4DenseAllRows below).
// The decode kernel W4A16Tile::kGemv (weights straight to registers) is built and tested but not
// chosen: it measured slower than the 8- and 16-row tiles at every M <= 16 shape. So are the
// regular 16-row tiles kM16 and kM16Wide: slower than kM16Swap at M = 9..16 (PERF_NOTES v17),
// and the 64-row slices (kSlice64 / kSlice64Wide), no faster than the 32-row ones at any
// Llama-3.1-8B or Qwen3-30B-A3B shape at M = 1..16 with overlap (PERF_NOTES v20).
// W4A4 (block-scaled FP4 mma.sync, sm_120a/121a, kernels/nvfp4/w4a4_sm120.cu) is built into
// nibble::kernels_dev only, not chosen here: it needs the activation quantizer in front and has
// not run on hardware.
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "kernels/kernel_options.h"
#include "kernels/nvfp4/w4a16_dense.h"
#include "kernels/nvfp4/w4a16_gemm.h"

namespace nibble::kernels {

// How evenly a slice tile's grid of at least one block per SM must cover the SMs (blocks / (SMs x
// the most blocks one SM holds)).
inline constexpr double kSliceMinEvenness = 0.9;
// How full the waves of a slice grid that takes several must be, on average, to be taken at M <= 8
// rather than the split-K tile (blocks / (SMs x blocks per SM x waves)).
inline constexpr double kSliceMinWaveFill = 0.8;
// k steps (64 columns) per warp below which the 8-warp 16-row slice is not taken where the grid
// covers the SMs.
inline constexpr std::int64_t kSliceWideMinSteps = 16;

struct DeviceTraits {
  int sm_count = 1;
  int major = 0, minor = 0;
  int smem_per_sm = 0;  // bytes of shared memory per SM (0: not known, not a limit)
  // The warpgroup-MMA tiles run here (w4a16_wgmma_supported()) and may be planned.
  bool wgmma = false;
  // LinearOptions::slice_short_k.
  bool short_k_uneven = true;
  // LinearOptions::wgmma_cluster_sum: the warpgroup-MMA launches sum their K splits in clusters
  // where one fits (w4a16_wgmma_linear's cluster_sum).
  bool wgmma_cluster_sum = true;
  // wgmma_clusters[t][s]: the most (1, 1, s) clusters of warpgroup-MMA tile t's blocks resident
  // at once (t = 0: kWgmma128, 1: kWgmma256; s = 2..8), the waves of output tiles a launch whose
  // K splits are summed in a cluster runs in; 0 where that path is not taken (the planner then
  // counts SM slots, and the sums go through a workspace). w4a16_wgmma_max_clusters fills it.
  int wgmma_clusters[2][9] = {};
};
// Traits of the current device under the options; cudaError_t from the runtime on failure. wgmma
// is on where supported and options.wgmma.
cudaError_t query_device_traits(DeviceTraits* traits, const LinearOptions& options = {});

// Rows of x from which the warpgroup-MMA tiles are planned (with a grid of at least one block per
// SM); predicted, not yet measured (PERF_NOTES v21).
inline constexpr std::int64_t kWgmmaMinRows = 128;

// Rows of x from which the dequantise-then-cuBLAS path is taken where the caller offers it. The
// crossover predicted for H100 (PERF_NOTES v21: the pass over the weight costs about what cuBLAS
// gains over the 64/128-row tiles at ~250 rows) until nibble-kernel-bench's "dense" column
// measures it; NIBBLE_W4A16_DENSE_MIN_ROWS overrides it in the engine and the benchmark.
inline constexpr std::int64_t kNvfp4DenseMinRows = 256;
// Where the dense path (when offered) comes before the warpgroup-MMA tiles: from this many rows
// (measured better at 2048 and 8192, not between 256 and 2048: 1024 is a guess in between). Below
// it the tiles win every Llama-3.1-8B layer at M = 256 and 512 once their splits count the cluster
// waves, the narrowest (o, 17 M weights) too: 20.6 / 30.5 us against dense 26.6 / 35.6
// (PERF_NOTES v28).
inline constexpr std::int64_t kNvfp4DenseAllRows = 1024;

// The dequantise-then-cuBLAS candidate, offered by a caller that holds its scratch.
struct Nvfp4DenseOption {
  W4A16DenseScratch scratch;
  std::int64_t min_rows = kNvfp4DenseMinRows;  // <= 0: never taken
  std::int64_t max_rows_per_round = 0;         // weight rows per dequantise + GEMM (0: the layer)
};

struct Nvfp4LinearPlan {
  W4A16Tile tile = W4A16Tile::kM8;
  int splits = 1;
  bool overlap = false;  // launched with programmatic dependent launch
  bool dense = false;    // dequantise-then-cuBLAS (tile, splits and overlap unused)
};
// overlap: the caller allows programmatic dependent launch; the plan uses it for tiles of up to
// 16 rows and for the warpgroup-MMA tiles up to 256 rows (it made the 64- and 128-row mma.sync
// grids slower, and the warpgroup tiles at 512 rows). dense: the dequantise-then-cuBLAS
// candidate (null: not offered); taken for m >= dense->min_rows when its scratch holds at least
// one 128-row weight group of this k, unless a warpgroup-MMA tile is planned (it comes first).
Nvfp4LinearPlan plan_nvfp4_linear(std::int64_t m, std::int64_t n, std::int64_t k,
                                  const DeviceTraits& device, bool overlap,
                                  const Nvfp4DenseOption* dense);
// The same without the dense candidate. (Separate overloads rather than a default argument keep
// the older entry points' symbols, which tools/gpu-check.sh's A/B builds link against.)
Nvfp4LinearPlan plan_nvfp4_linear(std::int64_t m, std::int64_t n, std::int64_t k,
                                  const DeviceTraits& device, bool overlap = false);
// The split count the planner would use with a given tile (benchmarks compare tiles with it).
int plan_splits(W4A16Tile tile, std::int64_t m, std::int64_t n, std::int64_t k,
                const DeviceTraits& device);

// Bytes of workspace the plan for (m, n) may use. The caller allocates it once, zeroes it
// once (cudaMemset) and passes it to every call; calls leave it zero. Calls that share one
// workspace must not run concurrently.
inline std::size_t nvfp4_linear_workspace_bytes(std::int64_t m, std::int64_t n) {
  return w4a16_workspace_bytes(m, n);
}

// x: [m, k] BF16 bits; residual: [m, n] or null; out: [m, n]. With workspace_bytes smaller
// than the plan needs, K is not split. Returns the first CUDA error, cudaErrorInvalidValue on
// shapes that disagree with the weight. overlap: programmatic dependent launch allowed
// (w4a16_gemm.h); the plan decides whether to use it (plan_nvfp4_linear). dense: as in
// plan_nvfp4_linear.
cudaError_t nvfp4_linear(const std::uint16_t* x, std::int64_t m, const W4A16DeviceWeight& w,
                         const std::uint16_t* residual, std::uint16_t* out, float* workspace,
                         std::size_t workspace_bytes, const DeviceTraits& device,
                         cudaStream_t stream, bool overlap, const Nvfp4DenseOption* dense);
cudaError_t nvfp4_linear(const std::uint16_t* x, std::int64_t m, const W4A16DeviceWeight& w,
                         const std::uint16_t* residual, std::uint16_t* out, float* workspace,
                         std::size_t workspace_bytes, const DeviceTraits& device,
                         cudaStream_t stream, bool overlap = false);

}  // namespace nibble::kernels
