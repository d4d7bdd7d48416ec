#include "kernels/nvfp4_linear.h"

#include <algorithm>
#include <limits>

#include "kernels/nvfp4/even_spread.h"

namespace nibble::kernels {

cudaError_t query_device_traits(DeviceTraits* traits, const LinearOptions& options) {
  int device = 0;
  cudaError_t err = cudaGetDevice(&device);
  if (err != cudaSuccess) return err;
  if ((err = cudaDeviceGetAttribute(&traits->sm_count, cudaDevAttrMultiProcessorCount, device)) !=
      cudaSuccess) {
    return err;
  }
  if ((err = cudaDeviceGetAttribute(&traits->major, cudaDevAttrComputeCapabilityMajor, device)) !=
      cudaSuccess) {
    return err;
  }
  if ((err = cudaDeviceGetAttribute(&traits->minor, cudaDevAttrComputeCapabilityMinor, device)) !=
      cudaSuccess) {
    return err;
  }
  if ((err = cudaDeviceGetAttribute(&traits->smem_per_sm,
                                    cudaDevAttrMaxSharedMemoryPerMultiprocessor, device)) !=
      cudaSuccess) {
    return err;
  }
  traits->wgmma = w4a16_wgmma_supported() && options.wgmma;
  traits->short_k_uneven = options.slice_short_k;
  traits->wgmma_cluster_sum = options.wgmma_cluster_sum;
  for (int splits = 2; splits <= 8 && traits->wgmma && options.wgmma_cluster_sum; ++splits) {
    traits->wgmma_clusters[0][splits] = w4a16_wgmma_max_clusters(W4A16Tile::kWgmma128, splits);
    traits->wgmma_clusters[1][splits] = w4a16_wgmma_max_clusters(W4A16Tile::kWgmma256, splits);
  }
  return cudaSuccess;
}

namespace {

// Blocks of a slice tile that fit on one SM at m rows: its register cap, and its shared memory
// (plus the 1 KB the runtime reserves per block) where the device says how much an SM has.
std::int64_t slice_blocks_per_sm(W4A16Tile tile, std::int64_t m, const DeviceTraits& device) {
  std::int64_t blocks = w4a16_resident_blocks(tile);
  if (device.smem_per_sm > 0) {
    blocks = std::min<std::int64_t>(blocks,
                                    device.smem_per_sm / (w4a16_slice_smem_bytes(tile, m) + 1024));
  }
  return blocks;
}

std::int64_t slice_blocks(W4A16Tile tile, std::int64_t n) {
  const std::int64_t n_padded = (n + kW4A16TileCols - 1) / kW4A16TileCols * kW4A16TileCols;
  return n_padded / w4a16_slice_rows(tile);
}

// A slice tile for an m <= 8 layer of n rows, or kM8 (x as the mma's B operand, K split over
// blocks; kGemv measured slower than it on every Llama and Qwen shape, PERF_NOTES v2) when neither
// slice's grid runs in one even wave and the 8-warp 32-row slices' waves are not mostly full
// (below). With one slice per block, the busiest SM holds ceil(blocks / SMs) of them, so
// blocks / (SMs x that) is the fraction of the GPU that streams until the end. A second, partial
// wave of 4-warp slices cost more than kM8's split-K tail (gate_up at M = 8: 32-row slices, 6 per
// SM, 32.1 us against kM8's 28.7, PERF_NOTES v20, before v19's leaner loop). A grid smaller than
// the SM count is taken as it is: such layers are too small to stream at bandwidth, and the split-K
// tail is most of kM8's time there (Qwen3-30B-A3B experts at M = 1: 2048 x 1536 3.5 us against
// 4.7, 768 x 2048 2.6 against 4.4).
W4A16Tile decode_slice_tile(std::int64_t m, std::int64_t n, std::int64_t k,
                            const DeviceTraits& device) {
  const std::int64_t sms = device.sm_count;
  // The 16-row slice first (more warps per byte in flight), then the 32-row one.
  struct Family {
    W4A16Tile four_warps, eight_warps;
  };
  constexpr Family kFamilies[] = {{W4A16Tile::kSlice16, W4A16Tile::kSlice16Wide},
                                  {W4A16Tile::kSlice32, W4A16Tile::kSlice32Wide}};
  for (const Family& family : kFamilies) {
    const W4A16Tile tile = family.four_warps;
    const std::int64_t blocks = slice_blocks(tile, n);
    const std::int64_t busiest = (blocks + sms - 1) / sms;
    if (busiest > slice_blocks_per_sm(tile, m, device)) continue;
    // Where every warp's k steps fit in its ring, a block asks for all its weights at once and
    // takes about one memory latency plus its bytes: the SMs holding one block more than others
    // add a fraction of that, not a wave (Qwen3-30B-A3B qkv, 5120 x 2048: 320 16-row slices,
    // 81% even, against kM8's split-K tail at 8.4 us for 5.9 MB, PERF_NOTES v22).
    const bool whole_k = device.short_k_uneven && (k + 63) / 64 <= w4a16_slice_ring_steps(tile);
    if (blocks >= sms && !whole_k && double(blocks) / double(sms * busiest) < kSliceMinEvenness)
      continue;
    // At <= 2 blocks per SM a long K streams through too few warps (down: 8 per SM): the 8-warp
    // form doubles them where each warp still gets kSliceWideMinSteps k steps or more, or where
    // the grid leaves SMs idle anyway (H100, M = 1, 4 -> 8 warps, forced tiles: down 15.1 ->
    // 15.1 us plain, 14.0 -> 13.3 with overlap; Qwen3-30B-A3B experts 2048 x 1536 3.4 -> 2.9,
    // 768 x 2048 2.4 -> 2.3; o, 64 k steps, 6.1 -> 7.0: kept on 4 warps).
    if (busiest <= 2 && (k / 64 >= 8 * kSliceWideMinSteps || blocks < sms) &&
        busiest <= slice_blocks_per_sm(family.eight_warps, m, device)) {
      return family.eight_warps;
    }
    // A short K at 2 blocks per SM (o): one 8-warp 32-row slice per SM instead (H100, with
    // overlap, forced tiles: o at M = 1 / 4 / 8 5.0 / 5.3 / 5.4 -> 4.6 / 4.6 / 4.7 us).
    const W4A16Tile one_per_sm = W4A16Tile::kSlice32Wide;
    if (tile == W4A16Tile::kSlice16 && busiest == 2 && slice_blocks(one_per_sm, n) <= sms &&
        slice_blocks_per_sm(one_per_sm, m, device) >= 1) {
      return one_per_sm;
    }
    return tile;
  }
  // Past one wave: 8-warp 32-row slices where every wave but the last is full and the grid fills
  // kSliceMinWaveFill of its waves' slots (gate_up at M = 8: 896 blocks at 2 per SM, 85%: 24.7 us
  // against kM8's 26.7 with overlap; 4-warp 32-row slices at 6 per SM, 57%: 27.0; PERF_NOTES
  // v20).
  const W4A16Tile wide = W4A16Tile::kSlice32Wide;
  const std::int64_t slots = slice_blocks_per_sm(wide, m, device) * sms;
  const std::int64_t blocks = slice_blocks(wide, n);
  if (slots > 0 && blocks > slots) {
    const std::int64_t waves = (blocks + slots - 1) / slots;
    if (double(blocks) / double(waves * slots) >= kSliceMinWaveFill) return wide;
  }
  return W4A16Tile::kM8;
}

// A slice tile for 9 to 16 rows, or kM16Swap (x as the B operand in two 8-row fragments, K split
// like kM8's). Every block reads all m rows of x, so 16-row slices would pull 3.6x the weight
// bytes from L2 (qkv at M = 16: 11.4 us against 7.8 with 32-row slices, with overlap, PERF_NOTES
// v20 run 2): 32-row slices, 8 warps where the grid has at most one per SM. They beat kM16Swap
// even over more than one wave (gate_up, 896 blocks at 4 per SM: 25.1 against 29.3 us); past
// two waves, which nothing measured yet, kM16Swap stays. Grids that leave SMs idle with 16-row
// slices take those, with 8 warps (Qwen3-30B-A3B experts at M = 16: 2.7 / 2.0 us against 3.1 /
// 2.3 with 32 rows).
W4A16Tile batch_slice_tile(std::int64_t m, std::int64_t n, const DeviceTraits& device) {
  const std::int64_t sms = device.sm_count;
  const W4A16Tile small = W4A16Tile::kSlice16Wide;
  if (slice_blocks(small, n) < sms && slice_blocks_per_sm(small, m, device) >= 1) return small;
  const W4A16Tile wide = W4A16Tile::kSlice32Wide, narrow = W4A16Tile::kSlice32;
  if (slice_blocks(wide, n) <= sms && slice_blocks_per_sm(wide, m, device) >= 1) return wide;
  const std::int64_t per_sm = slice_blocks_per_sm(narrow, m, device);
  if (per_sm >= 1 && slice_blocks(narrow, n) <= 2 * per_sm * sms) return narrow;
  return W4A16Tile::kM16Swap;
}

// A warpgroup-MMA tile and split count for m >= kWgmmaMinRows rows. Whether to take these tiles
// at all: where the 128- or the 256-row grid, split over K up to filling the SM slots once
// (each split keeping >= kWgmmaMinSplitKTiles k steps, so that its partial-sum traffic stays well
// under its weight and x traffic), fills at least half of its waves; below that the grid is too
// small for either. Which tile and split: the least time by wgmma_time.
constexpr std::int64_t kWgmmaMinSplitKTiles = 16;
// Rows up to which the warpgroup-MMA tiles take programmatic dependent launch when allowed, for
// grids of one wave (Llama-3.1-8B layers, three A/B rounds, PERF_NOTES v32: M = 256 qkv 27.2
// -> 26.1, o 19.8 -> 18.5, down 53.3 -> 52.1 us; gate_up, two waves, 92.2
// -> 90.9 / 90.9 / 94.6 and 90.3 -> 95.9 at 10:42; M = 512 gate_up 207.0 -> 209.0, down 78.1 ->
// 80.9).
constexpr std::int64_t kWgmmaOverlapMaxRows = 256;

// The model behind wgmma_time, fitted to `nibble-kernel-bench --sweep-splits` (H200, Llama-3.1-8B
// layers at M = 256 and 512, every split 1..8 of both tiles; PERF_NOTES v28, v30, v32): a lone
// 128 x 128 block costs its k steps plus kWgmmaBlockOverhead (the pipeline's fill, the split
// sum); an SM holding two of them finishes them in kWgmmaTwoBlocks times one block's time alone
// (not twice: one block leaves the tensor cores idle part of each step); a 256-row block (twice
// the work, one an SM) costs kWgmma256Step a k step plus kWgmma256Overhead (its fill and sum
// move twice the bytes but do not take twice as long: down at M = 256 split 1 / 2 / 3 ways ran
// 136.6 / 73.7 / 52.9 us, 0.56 us a step + 10.8, against 0.41 + 8.4 for the 128-row tile). With
// these the planner's pick is the measured fastest tile and split on all 8 layer shapes of the
// sweeps (PERF_NOTES v30 and v32). Every constant sits inside a window that keeps the 8
// picks: kWgmmaTwoBlocks up to 1.59 (above it the 256-row tile takes gate_up at M = 512, 226 us
// against 197, which the model does not explain), kWgmma256Step 1.30-1.45 at these overheads.
constexpr double kWgmmaBlockOverhead = 10.0;
constexpr double kWgmmaTwoBlocks = 1.58;
constexpr double kWgmma256Step = 1.35;
constexpr double kWgmma256Overhead = 20.0;

// Output tiles of a warpgroup-MMA launch: 128 or 256 rows of x by one 128-row weight group.
std::int64_t wgmma_output_tiles(W4A16Tile tile, std::int64_t m, std::int64_t n) {
  const std::int64_t rows = w4a16_tile_rows(tile);
  return (n + kW4A16TileCols - 1) / kW4A16TileCols * ((m + rows - 1) / rows);
}

// The launch's time in units of one lone 128 x 128 block's k step: its blocks run in waves of the
// SM slots, or of device.wgmma_clusters x splits where the splits are summed in a cluster (fewer
// than the slots where the GPCs leave slots no cluster can take: 62 clusters of 4 on an H200, so
// 64 tiles split 4 ways run a wave of 62 and a tail of 2). Splits summed through the workspace are
// planned within one wave only (their atomics grow with them): infinite past it.
// Blocks of a warpgroup-MMA launch split `splits` ways that run at once: the SM slots, or fewer
// where the splits are summed in clusters and the device holds fewer such clusters.
std::int64_t wgmma_wave(W4A16Tile tile, std::int64_t splits, const DeviceTraits& device) {
  const bool wide = tile == W4A16Tile::kWgmma256;
  const std::int64_t slots = std::int64_t(device.sm_count) * w4a16_resident_blocks(tile);
  const int clusters = splits >= 2 && splits <= 8 ? device.wgmma_clusters[wide][splits] : 0;
  return clusters > 0 ? std::min(slots, clusters * splits) : slots;
}

double wgmma_time(W4A16Tile tile, std::int64_t tiles, std::int64_t splits, std::int64_t k_tiles,
                  const DeviceTraits& device) {
  const bool wide = tile == W4A16Tile::kWgmma256;
  const std::int64_t sms = device.sm_count, slots = sms * w4a16_resident_blocks(tile);
  const int clusters = splits >= 2 && splits <= 8 ? device.wgmma_clusters[wide][splits] : 0;
  const std::int64_t wave = wgmma_wave(tile, splits, device);
  std::int64_t left = tiles * splits;
  if (clusters == 0 && splits > 1 && left > slots) return std::numeric_limits<double>::infinity();
  const double steps = double((k_tiles + splits - 1) / splits);
  const double block =
      wide ? steps * kWgmma256Step + kWgmma256Overhead : steps + kWgmmaBlockOverhead;
  double time = 0.0;
  for (; left > 0; left -= wave) {
    const std::int64_t blocks = std::min(left, wave);
    time += block * (!wide && blocks > sms ? kWgmmaTwoBlocks : 1.0);
  }
  return time;
}

// The split count of a warpgroup-MMA tile (the least wgmma_time; ties to fewer splits) and its
// time.
int wgmma_splits(W4A16Tile tile, std::int64_t m, std::int64_t n, std::int64_t k,
                 const DeviceTraits& device, double* time) {
  const std::int64_t tiles = wgmma_output_tiles(tile, m, n);
  const std::int64_t k_tiles = (k + 63) / 64;
  // Up to 8 splits (the largest cluster that sums them), or more where one wave still holds
  // them all (summed through the workspace), each keeping kWgmmaMinSplitKTiles k steps.
  const std::int64_t slots = std::int64_t(device.sm_count) * w4a16_resident_blocks(tile);
  const std::int64_t most = std::max<std::int64_t>(
      1, std::min(std::max<std::int64_t>(8, slots / tiles), k_tiles / kWgmmaMinSplitKTiles));
  std::int64_t best = 1;
  *time = wgmma_time(tile, tiles, 1, k_tiles, device);
  for (std::int64_t splits = 2; splits <= most; ++splits) {
    const double t = wgmma_time(tile, tiles, splits, k_tiles, device);
    if (t < *time * (1.0 - 1e-9)) *time = t, best = splits;
  }
  return int(best);
}

// How full the waves of the tile's grid are when split over K up to filling the SM slots once.
double wgmma_one_wave_fill(W4A16Tile tile, std::int64_t m, std::int64_t n, std::int64_t k,
                           const DeviceTraits& device) {
  const std::int64_t blocks = wgmma_output_tiles(tile, m, n);
  const std::int64_t slots = std::int64_t(device.sm_count) * w4a16_resident_blocks(tile);
  const std::int64_t splits =
      std::max<std::int64_t>(1, std::min(slots / blocks, (k + 63) / 64 / kWgmmaMinSplitKTiles));
  const std::int64_t launched = blocks * splits;
  return double(launched) / double((launched + slots - 1) / slots * slots);
}

bool wgmma_tile(std::int64_t m, std::int64_t n, std::int64_t k, const DeviceTraits& device,
                W4A16Tile* tile, int* splits) {
  if (!device.wgmma || m < kWgmmaMinRows) return false;
  if (std::max(wgmma_one_wave_fill(W4A16Tile::kWgmma128, m, n, k, device),
               wgmma_one_wave_fill(W4A16Tile::kWgmma256, m, n, k, device)) < 0.5) {
    return false;
  }
  double best_time = 0.0;
  *tile = W4A16Tile::kWgmma128;
  *splits = wgmma_splits(*tile, m, n, k, device, &best_time);
  double time = 0.0;
  const int wide_splits = wgmma_splits(W4A16Tile::kWgmma256, m, n, k, device, &time);
  if (time < best_time * (1.0 - 1e-9)) *tile = W4A16Tile::kWgmma256, *splits = wide_splits;
  return true;
}

}  // namespace

int plan_splits(W4A16Tile tile, std::int64_t m, std::int64_t n, std::int64_t k,
                const DeviceTraits& device) {
  if (w4a16_is_slice(tile)) return 1;
  if (w4a16_is_wgmma(tile)) {
    double time = 0.0;
    return wgmma_splits(tile, m, n, k, device, &time);
  }
  if (tile == W4A16Tile::kGemv) {
    // 16 k steps per block (one x slice; 8 per warp stream, against 5 in flight in its ring);
    // 8 or 4 when that leaves SMs idle.
    const std::int64_t tiles_k = (k + 63) / 64;
    const std::int64_t blocks = ((n + kW4A16TileCols - 1) / kW4A16TileCols) * ((m + 15) / 16);
    const std::int64_t slots = std::int64_t(device.sm_count) * w4a16_resident_blocks(tile);
    std::int64_t per = 16;
    while (per > 4 && blocks * ((tiles_k + per - 1) / per) < slots) per /= 2;
    return int((tiles_k + per - 1) / per);
  }
  const std::int64_t rows = w4a16_tile_rows(tile);
  const std::int64_t blocks = ((n + kW4A16TileCols - 1) / kW4A16TileCols) * ((m + rows - 1) / rows);
  const bool swapped = tile == W4A16Tile::kM8 || tile == W4A16Tile::kM16Swap;
  if (tile == W4A16Tile::kM16 || swapped || tile == W4A16Tile::kM16Wide) {
    // From nibble-kernel-bench --sweep-splits on H100 (PERF_NOTES v16, v17): with the
    // swapped tiles (kM8, kM16Swap) and up to 4 rows of the others the split-K sums are cheap and
    // the best count gives each block >= 8 k tiles with at least 2 blocks per SM (at most 7-8
    // fit); the regular 16-row tiles past 4 rows gain nothing beyond ~2 blocks per SM (kM16Wide
    // gate_up M = 16: 1 split 34.0 µs, 2: 37.0; kM16Swap at 4 splits: 31.3).
    const std::int64_t k_tiles = (k + 63) / 64;
    const std::int64_t sms = device.sm_count;
    // Resident blocks per SM. (Halving it with overlap, so that two kernels fit side by side,
    // measured slower: decode chain M = 1 +overlap 65.2 -> 72.2 µs, H100, PERF_NOTES v17.)
    const std::int64_t per_sm = w4a16_resident_blocks(tile);
    std::int64_t splits = 0;
    if (m <= 4 || swapped) {
      const std::int64_t fill = std::min(k_tiles / 2, (2 * sms + blocks - 1) / blocks);
      splits = std::max(std::min(k_tiles / 8, per_sm * sms / blocks), fill);
    } else {
      splits = std::min(k_tiles / 8, 2 * sms / blocks);
    }
    return int(std::max<std::int64_t>(1, splits));
  }
  // 64- and 128-row tiles: about 2 fit per SM. Split K so that the grid fills those slots in
  // ONE wave (a second, partial wave costs as much as a full one).
  const std::int64_t slots = std::int64_t(device.sm_count) * 2;
  const std::int64_t k_tiles = (k + 63) / 64;
  std::int64_t splits = std::max<std::int64_t>(1, slots / blocks);
  // Each split adds m x 128 partial sums per block with atomics: keep that traffic under the
  // block's weight traffic (4.6 KB per k-tile) by giving each split enough k-tiles. The
  // factor comes from nibble-kernel-bench --sweep-splits on H100 (docs/performance.md).
  const std::int64_t atomic_bytes = std::min<std::int64_t>(m, rows) * 128 * 4;
  const std::int64_t min_k_tiles = std::max<std::int64_t>(2, (atomic_bytes * 2 + 4607) / 4608);
  splits = std::min(splits, std::max<std::int64_t>(1, k_tiles / min_k_tiles));
  return int(splits);
}

Nvfp4LinearPlan plan_nvfp4_linear(std::int64_t m, std::int64_t n, std::int64_t k,
                                  const DeviceTraits& device, bool overlap,
                                  const Nvfp4DenseOption* dense) {
  Nvfp4LinearPlan plan;
  const bool dense_ok =
      dense != nullptr && dense->min_rows > 0 && m >= dense->min_rows &&
      w4a16_dense_rows_per_round(dense->scratch, n, k, dense->max_rows_per_round) > 0;
  // Measured on an H200 (Llama-3.1-8B layers; docs/performance.md's dense-path kernel runs,
  // PERF_NOTES v28 at M = 256 and 512): the dense path beats the warpgroup-MMA tiles on every layer
  // at M = 2048 and 8192; the wgmma tiles win every layer at M = 256 and 512.
  if (dense_ok && m >= kNvfp4DenseAllRows) {
    plan.dense = true;
    return plan;
  }
  if (m > 16 && wgmma_tile(m, n, k, device, &plan.tile, &plan.splits)) {
    // One block an SM (or two of the 128-row tile): a next kernel's blocks find no slot until
    // this grid's blocks leave, so overlap hides the launch and the first weight fetches. Worth
    // 0.7-1.3 us a layer for grids of one wave up to kWgmmaOverlapMaxRows; not for a grid of
    // two waves (gate_up at M = 256: 90.3-92.4 us plain, 90.9-95.9 with it) nor at M = 512.
    const std::int64_t blocks = wgmma_output_tiles(plan.tile, m, n) * plan.splits;
    plan.overlap = overlap && m <= kWgmmaOverlapMaxRows &&
                   blocks <= wgmma_wave(plan.tile, plan.splits, device);
    return plan;
  }
  if (dense_ok) {
    plan.dense = true;
    return plan;
  }
  // Measured on H100 (docs/performance.md): 16-row tiles win while bound by weight bytes,
  // 128-row tiles (8 m16 fragments per warp) win once the grid holds >= 2 of them per SM.
  const std::int64_t blocks128 = ((n + kW4A16TileCols - 1) / kW4A16TileCols) * ((m + 127) / 128);
  if (m <= 8) {
    // A slice tile (no split-K tail) where its grid spreads evenly over the SMs, else kM8.
    plan.tile = decode_slice_tile(m, n, k, device);
  } else if (m <= 16) {
    plan.tile = batch_slice_tile(m, n, device);
  } else if (m > 512 && blocks128 >= 2 * std::int64_t(device.sm_count)) {
    plan.tile = W4A16Tile::kM128;
  } else {
    plan.tile = W4A16Tile::kM64;
  }
  // Overlap helps up to 16 rows; the 64- and 128-row grids fill every slot, and a next kernel
  // starting early only delays their last blocks (decode chain M = 64: 160 µs with, 130 without).
  plan.overlap = overlap && w4a16_tile_rows(plan.tile) <= 16;
  plan.splits = plan_splits(plan.tile, m, n, k, device);
  return plan;
}

Nvfp4LinearPlan plan_nvfp4_linear(std::int64_t m, std::int64_t n, std::int64_t k,
                                  const DeviceTraits& device, bool overlap) {
  return plan_nvfp4_linear(m, n, k, device, overlap, nullptr);
}

cudaError_t nvfp4_linear(const std::uint16_t* x, std::int64_t m, const W4A16DeviceWeight& w,
                         const std::uint16_t* residual, std::uint16_t* out, float* workspace,
                         std::size_t workspace_bytes, const DeviceTraits& device,
                         cudaStream_t stream, bool overlap) {
  return nvfp4_linear(x, m, w, residual, out, workspace, workspace_bytes, device, stream, overlap,
                      nullptr);
}

cudaError_t nvfp4_linear(const std::uint16_t* x, std::int64_t m, const W4A16DeviceWeight& w,
                         const std::uint16_t* residual, std::uint16_t* out, float* workspace,
                         std::size_t workspace_bytes, const DeviceTraits& device,
                         cudaStream_t stream, bool overlap, const Nvfp4DenseOption* dense) {
  Nvfp4LinearPlan plan = plan_nvfp4_linear(m, w.n, w.k, device, overlap, dense);
  if (plan.dense) {
    return w4a16_dense_linear(x, m, w, residual, out, dense->scratch, stream,
                              dense->max_rows_per_round);
  }
  if (workspace == nullptr || workspace_bytes < nvfp4_linear_workspace_bytes(m, w.n)) {
    plan.splits = 1;
  }
  return w4a16_linear(x, m, w, residual, out, plan.tile, plan.splits, workspace, stream,
                      plan.overlap, device.wgmma_cluster_sum);
}

}  // namespace nibble::kernels
