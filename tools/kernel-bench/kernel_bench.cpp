// nibble-kernel-bench: NVFP4 linear kernels against the two ceilings measured in the same run
// (device copy bandwidth, read + write; cuBLAS BF16 GEMM at the same shapes).
// Shapes: Llama-3.1-8B linear layers, Qwen3-30B-A3B experts and attention qkv / o ("attn.*"),
// M = 1, 4, 8, 16, 32, 64, 256, 512, 2048, 4096, 8192. The dispatcher ("nvfp4") is offered the
// dequantise-then-cuBLAS path as the engine is (threshold kNvfp4DenseMinRows, or
// NIBBLE_W4A16_DENSE_MIN_ROWS); "w4 us" is the dispatcher without it (W4A16 kernels only), "dense"
// / "dense/r" that path forced in one round / in rounds of ~32 MB of BF16 weight
// (kDenseRoundBytes); "wg128" / "wg256" the warpgroup-MMA tiles forced (sm_90a;
// --no-wgmma keeps the planner off them). Per M and layer the ratio to cuBLAS BF16
// ("speedup" = cuBLAS time / ours); the set table repeats it per path. Weights rotate over enough
// copies to exceed L2; each time is the median of CUDA-event timings of graph replays (20 calls per
// graph), per call. Also per shape: the read ceilings of read_ceiling.h (the weight read once, no
// arithmetic); once per run: the mma.sync ceiling of mma_ceiling.h (4, 8 and 16 warps per SM).
// Last, when all four Llama layers are selected: the set chained as a decode step runs it
// (layer_chain.h) at M = 1, 4, 8, 16, 64 (those --ms keeps). Usage: nibble-kernel-bench [--reps N]
// [--csv FILE] [--sweep-splits] [--layers a,b] [--ms 1,16]
//                            [--profile] [--tiles-overlap] [--moe] [--moe-gptoss]
//                            [--no-wgmma] [--no-wgmma-cluster] [--no-short-k]
// --sweep-splits also times, for each split-K count, the 8-row tile at M = 1 and 8, the swapped
// and wide 16-row tiles at M = 16, the 16- and 64-row tiles at M = 64, the 64- and 128-row
// tiles at M = 256 and on sm_90a the warpgroup-MMA tiles at M = 256 and 512, split 1..8 ways (the
// evidence behind the planner's choice). --layers / --ms keep only those
// layers (names as printed) and M values. --profile launches each variant once, eagerly, in a
// fixed order (read linear, read grouped group-major, read grouped k-major, then kM8, kM16Swap,
// kM16Wide and at M <= 16 the six slice tiles, or at M >= 256 the 64- and 128-row tiles and on
// sm_90a the two warpgroup-MMA tiles, all group-major) and times nothing: for Nsight Compute.
// --tiles-overlap times the forced tile columns with programmatic dependent launch, as the engine
// launches them (the planner's evidence). --moe times only the grouped MoE expert GEMMs and the
// device MoE layer (moe_grouped.h) after the copy ceiling. --no-wgmma, --no-wgmma-cluster and
// --no-short-k turn the planner's LinearOptions (nvfp4_linear.h) off, for A/B runs.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/nvfp4/w4a16_dense.h"
#include "kernels/nvfp4/w4a16_dev_tiles.h"
#include "kernels/nvfp4/w4a16_layout.h"
#include "kernels/nvfp4_linear.h"
#include "tools/kernel-bench/bench_util.h"
#include "tools/kernel-bench/layer_chain.h"
#include "tools/kernel-bench/mma_ceiling.h"
#include "tools/kernel-bench/moe_grouped.h"
#include "tools/kernel-bench/read_ceiling.h"

namespace {

using nibble::bench::fill_random_bf16;
using nibble::bench::kRotateBytes;
using nibble::bench::median_us;

struct Shape {
  const char* model;
  const char* layer;
  std::int64_t k, n;
};

// "a,b,c" -> {"a", "b", "c"}.
std::vector<std::string> split_list(const char* list) {
  std::vector<std::string> out;
  std::string cur;
  for (const char* p = list;; ++p) {
    if (*p == ',' || *p == '\0') {
      if (!cur.empty()) out.push_back(cur);
      cur.clear();
      if (*p == '\0') break;
    } else {
      cur += *p;
    }
  }
  return out;
}

bool selected(const std::vector<std::string>& filter, const std::string& name) {
  return filter.empty() || std::find(filter.begin(), filter.end(), name) != filter.end();
}

// Weight rows per round of the "dense/r" column: a round's BF16 slice of ~32 MB may stay in L2
// (50 MB on H100) between its dequantisation and its GEMM, and still makes a GEMM of >= 1024
// weight rows (one wave of 128 x 128 output tiles at M = 2048 on down's K = 14336).
constexpr std::int64_t kDenseRoundBytes = 32ll << 20;

// The dense path's threshold for the dispatcher column: NIBBLE_W4A16_DENSE_MIN_ROWS (0: never)
// or the planner's default.
std::int64_t dense_min_rows() {
  const char* env = std::getenv("NIBBLE_W4A16_DENSE_MIN_ROWS");
  return env != nullptr ? std::atoll(env) : nibble::kernels::kNvfp4DenseMinRows;
}

const char* const kUsage =
    "usage: nibble-kernel-bench [--reps N] [--csv FILE] [--sweep-splits] [--layers a,b]\n"
    "                           [--ms 1,16] [--profile] [--tiles-overlap] [--moe | --moe-gptoss | --moe-shape S]\n"
    "                           [--no-wgmma] [--no-wgmma-cluster] [--no-short-k]\n"
    "\n"
    "NVFP4 linear kernels against the device's copy bandwidth and cuBLAS BF16, on the first CUDA\n"
    "device (exit 77 without one). The comment at the top of tools/kernel-bench/kernel_bench.cpp\n"
    "explains each column and flag.\n"
    "  --reps N             timed repetitions per measurement (default 15)\n"
    "  --csv FILE           also write the results as CSV\n"
    "  --sweep-splits       time each split-K count of the tiles the planner picks from\n"
    "  --layers a,b         only these layers (names as printed)\n"
    "  --ms 1,16            only these M values\n"
    "  --profile            launch each variant once, eagerly, timing nothing (Nsight Compute)\n"
    "  --tiles-overlap      time forced tiles with programmatic dependent launch\n"
    "  --moe                only the grouped MoE expert GEMMs and the device MoE layer\n"
    "  --moe-gptoss         the same at gpt-oss-20b's MXFP4 experts (E 32, k 4, 2880 x 2880)\n"
    "  --moe-shape S        the same at qwen3-30b-a3b (--moe), qwen3-next (E 512, k 10, 2048 x\n"
    "                       512), gpt-oss-20b (--moe-gptoss) or gpt-oss-120b (E 128, k 4)\n"
    "  --no-wgmma, --no-wgmma-cluster, --no-short-k\n"
    "                       turn the planner's LinearOptions off, for A/B runs\n";

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--help") || !std::strcmp(argv[i], "-h")) {
      std::fputs(kUsage, stdout);
      return 0;
    }
  }
  nibble::kernels::w4a16_enable_dev_tiles();  // the forced kGemv columns
  int reps = 15;
  const char* csv_path = nullptr;
  bool sweep_splits = false, profile = false, tiles_overlap = false, moe_only = false;
  nibble::bench::MoeBenchShape moe_shape = nibble::bench::kQwen3MoeBench;
  std::vector<std::string> layer_filter, m_filter;
  nibble::kernels::LinearOptions linear_options;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--reps") && i + 1 < argc) {
      reps = std::atoi(argv[++i]);
    } else if (!std::strcmp(argv[i], "--csv") && i + 1 < argc) {
      csv_path = argv[++i];
    } else if (!std::strcmp(argv[i], "--sweep-splits")) {
      sweep_splits = true;
    } else if (!std::strcmp(argv[i], "--tiles-overlap")) {
      tiles_overlap = true;
    } else if (!std::strcmp(argv[i], "--moe")) {
      moe_only = true;
    } else if (!std::strcmp(argv[i], "--moe-gptoss")) {
      moe_only = true;
      moe_shape = nibble::bench::kGptOss20bMoeBench;
    } else if (!std::strcmp(argv[i], "--moe-shape") && i + 1 < argc) {
      const std::string name = argv[++i];
      moe_only = true;
      if (name == "qwen3-30b-a3b") {
        moe_shape = nibble::bench::kQwen3MoeBench;
      } else if (name == "qwen3-next") {
        moe_shape = nibble::bench::kQwen3NextMoeBench;
      } else if (name == "gpt-oss-20b") {
        moe_shape = nibble::bench::kGptOss20bMoeBench;
      } else if (name == "gpt-oss-120b") {
        moe_shape = nibble::bench::kGptOss120bMoeBench;
      } else {
        std::fprintf(stderr, "--moe-shape: unknown shape '%s'\n%s", name.c_str(), kUsage);
        return 2;
      }
    } else if (!std::strcmp(argv[i], "--profile")) {
      profile = true;
    } else if (!std::strcmp(argv[i], "--no-wgmma")) {
      linear_options.wgmma = false;
    } else if (!std::strcmp(argv[i], "--no-wgmma-cluster")) {
      linear_options.wgmma_cluster_sum = false;
    } else if (!std::strcmp(argv[i], "--no-short-k")) {
      linear_options.slice_short_k = false;
    } else if (!std::strcmp(argv[i], "--layers") && i + 1 < argc) {
      layer_filter = split_list(argv[++i]);
    } else if (!std::strcmp(argv[i], "--ms") && i + 1 < argc) {
      m_filter = split_list(argv[++i]);
    }
  }
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    std::printf("nibble-kernel-bench: no CUDA device\n");
    return 77;
  }
  cudaDeviceProp prop{};
  CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  nibble::kernels::DeviceTraits device;
  CHECK_CUDA(nibble::kernels::query_device_traits(&device, linear_options));
  std::mt19937_64 rng(12345);

  // Ceiling 1: device-to-device copy of 1 GiB, bytes read + written.
  const std::size_t copy_bytes = 1ull << 30;
  void *src = nullptr, *dst = nullptr;
  CHECK_CUDA(cudaMalloc(&src, copy_bytes));
  CHECK_CUDA(cudaMalloc(&dst, copy_bytes));
  CHECK_CUDA(cudaMemset(src, 1, copy_bytes));
  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  // Plain event timing: one 1 GiB copy dwarfs any launch gap.
  std::vector<double> copies_us;
  cudaEvent_t c0, c1;
  CHECK_CUDA(cudaEventCreate(&c0));
  CHECK_CUDA(cudaEventCreate(&c1));
  for (int i = 0; i < 12; ++i) {
    CHECK_CUDA(cudaEventRecord(c0, stream));
    CHECK_CUDA(cudaMemcpyAsync(dst, src, copy_bytes, cudaMemcpyDeviceToDevice, stream));
    CHECK_CUDA(cudaEventRecord(c1, stream));
    CHECK_CUDA(cudaEventSynchronize(c1));
    float ms = 0;
    CHECK_CUDA(cudaEventElapsedTime(&ms, c0, c1));
    if (i >= 2) copies_us.push_back(ms * 1000.0);
  }
  std::sort(copies_us.begin(), copies_us.end());
  const double copy_us = copies_us[copies_us.size() / 2];
  const double copy_gbs = 2.0 * copy_bytes / copy_us / 1e3;
  CHECK_CUDA(cudaFree(src));
  CHECK_CUDA(cudaFree(dst));
  std::printf("device: %s (sm_%d%d, %d SMs, L2 %d MB)\n", prop.name, prop.major, prop.minor,
              prop.multiProcessorCount, prop.l2CacheSize >> 20);
  std::printf("copy bandwidth (read+write): %.0f GB/s\n\n", copy_gbs);
  if (moe_only) {
    nibble::bench::bench_moe_grouped(reps, copy_gbs, stream, moe_shape);
    return 0;
  }

  unsigned* sink = nullptr;
  CHECK_CUDA(cudaMalloc(&sink, sizeof(unsigned)));
  if (!profile) {
    // Ceiling 3: the tensor-core rate of the mma.sync path the W4A16 kernels use.
    std::printf("mma.sync ceiling (m16n8k16 BF16 -> FP32 from registers, all SMs):");
    // Not fatal: a failure here is reported and the kernels are still measured.
    for (int warps : {4, 8, 16}) {
      double tflops = 0.0;
      const cudaError_t err =
          nibble::bench::mma_sync_ceiling(device.sm_count, warps, 5, sink, stream, &tflops);
      if (err == cudaSuccess) {
        std::printf(" %d warps/SM %.1f TFLOP/s%s", warps, tflops, warps == 16 ? "" : ",");
      } else {
        std::printf(" %d warps/SM failed (%s)", warps, cudaGetErrorString(err));
      }
    }
    std::printf("\n\n");
  }

  cublasHandle_t cublas;
  CHECK_CUBLAS(cublasCreate(&cublas));
  CHECK_CUBLAS(cublasSetStream(cublas, stream));

  const Shape shapes[] = {
      {"llama3.1-8b", "qkv", 4096, 6144},           {"llama3.1-8b", "o", 4096, 4096},
      {"llama3.1-8b", "gate_up", 4096, 28672},      {"llama3.1-8b", "down", 14336, 4096},
      {"qwen3-30b-a3b", "exp.gate_up", 2048, 1536}, {"qwen3-30b-a3b", "exp.down", 768, 2048},
      {"qwen3-30b-a3b", "attn.qkv", 2048, 5120},    {"qwen3-30b-a3b", "attn.o", 4096, 2048},
  };
  const std::int64_t ms[] = {1, 4, 8, 16, 32, 64, 256, 512, 2048, 4096, 8192};
  std::int64_t max_m = 1;
  for (std::int64_t m : ms) {
    if (selected(m_filter, std::to_string(m))) max_m = std::max(max_m, m);
  }
  // The dense path's scratch: the largest selected weight, BF16, allocated once.
  std::size_t dense_elements = 0;
  for (const Shape& s : shapes) {
    if (selected(layer_filter, s.layer))
      dense_elements = std::max(dense_elements, std::size_t(s.n * s.k));
  }
  std::uint16_t* dense_weight = nullptr;
  CHECK_CUDA(cudaMalloc(&dense_weight, std::max<std::size_t>(1, dense_elements) * 2));
  nibble::kernels::Nvfp4DenseOption dense_option{
      {cublas, dense_weight, dense_elements}, dense_min_rows(), 0};
  std::printf("dequantise-then-cuBLAS offered to the dispatcher from M = %lld\n",
              (long long)dense_option.min_rows);
  if (device.wgmma) {
    // The waves the planner counts for split K summed in a cluster (DeviceTraits).
    for (int t = 0; t < 2; ++t) {
      std::printf("warpgroup-MMA %s: most clusters of s blocks resident (s = 2..8):",
                  t == 0 ? "128 rows" : "256 rows");
      for (int splits = 2; splits <= 8; ++splits) {
        std::printf(" %d:%d", splits, device.wgmma_clusters[t][splits]);
      }
      std::printf("\n");
    }
  }
  std::printf("\n");

  FILE* csv = csv_path ? std::fopen(csv_path, "w") : nullptr;
  if (csv) {
    std::fprintf(csv,
                 "model,layer,K,N,M,nvfp4_us,cublas_bf16_us,weight_GBps,copy_frac,"
                 "nvfp4_TFLOPs,cublas_TFLOPs,speedup,nvfp4_overlap_us,w4_us,dense_us,"
                 "dense_rounds_us\n");
  }
  std::printf(
      "%-14s %-12s %6s %6s %5s | %9s %9s %7s | %8s %6s | %7s %7s %6s | %7s | %6s %6s %6s %6s | "
      "%6s %6s %6s %6s %6s %6s %6s %6s %6s %6s %6s %6s %6s | %8s %8s %8s %7s %7s\n",
      "model", "layer", "K", "N", "M", "nvfp4 us", "cuBLAS us", "+P us", "wGB/s", "%copy",
      "TFLOP/s", "cuBLAS", "%cuB", "speedup", "t16 us", "t64 us", "t128us", "tgemv", "t16K", "t16P",
      "t16KP", "gemvK", "t8 us", "t16W", "tS16", "tS32", "tS16W", "tS16WP", "tS32W", "tS64",
      "tS64W", "w4 us", "dense", "dense/r", "wg128", "wg256");
  std::printf(
      "(nvfp4 = the dispatcher; t16/t64/t128/tgemv/t8/t16W/tS16/tS32/tS16W/tS32W/tS64/tS64W = each "
      "W4A16 tile "
      "family forced, 0 = not run; K = k-major layout, P = programmatic dependent launch; +P = the "
      "dispatcher with "
      "it, = nvfp4 where the plan declines it; w4 = the dispatcher without the dense "
      "path; dense, dense/r = dequantise-then-cuBLAS forced, one round / ~32 MB rounds, from M = "
      "32; wg128, wg256 = the warpgroup-MMA tiles forced, from M = 32 where planned at all)\n");
  if (tiles_overlap) std::printf("(forced tile columns with programmatic dependent launch)\n");

  // Per-M sums over the Llama layer set.
  std::vector<double> llama_ours(std::size(ms), 0.0), llama_cublas(std::size(ms), 0.0),
      llama_overlap(std::size(ms), 0.0), llama_w4(std::size(ms), 0.0),
      llama_dense(std::size(ms), 0.0), llama_dense_rounds(std::size(ms), 0.0),
      llama_wg128(std::size(ms), 0.0), llama_wg256(std::size(ms), 0.0);
  double llama_bytes = 0.0;

  for (const Shape& s : shapes) {
    if (!selected(layer_filter, s.layer)) continue;
    // NVFP4 weights: random codes and scales (no zeros), repacked, rotated.
    const auto [packed, scales] = nibble::bench::random_nvfp4(s.n, s.k, rng);
    const auto w = nibble::nvfp4::repack_for_w4a16(packed, scales, s.n, s.k, 1e-3f);
    const auto wk = nibble::nvfp4::repack_for_w4a16(packed, scales, s.n, s.k, 1e-3f, true);
    const std::size_t wbytes = w.tiles.size() + w.scales.size();
    const int copies = int(std::max<std::size_t>(2, kRotateBytes / wbytes + 1));
    std::vector<nibble::kernels::W4A16DeviceWeight> dw(static_cast<std::size_t>(copies)),
        dwk(static_cast<std::size_t>(copies));
    std::vector<void*> allocations;
    for (auto& d : dw) d = nibble::bench::upload_w4a16(w, allocations);
    for (auto& d : dwk) d = nibble::bench::upload_w4a16(wk, allocations);
    // BF16 weights for cuBLAS, rotated the same way.
    const std::size_t bf16_bytes = std::size_t(s.n * s.k * 2);
    const int bf16_copies =
        profile ? 0 : int(std::max<std::size_t>(2, kRotateBytes / bf16_bytes + 1));
    std::vector<std::uint16_t*> wb(static_cast<std::size_t>(bf16_copies));
    for (auto& p : wb) {
      CHECK_CUDA(cudaMalloc(&p, bf16_bytes));
      fill_random_bf16(p, std::size_t(s.n * s.k), rng);
      allocations.push_back(p);
    }
    std::uint16_t *x = nullptr, *out = nullptr;
    float* workspace = nullptr;
    CHECK_CUDA(cudaMalloc(&x, std::size_t(max_m * s.k * 2)));
    CHECK_CUDA(cudaMalloc(&out, std::size_t(max_m * s.n * 2)));
    const std::size_t ws_bytes = nibble::kernels::nvfp4_linear_workspace_bytes(max_m, s.n);
    CHECK_CUDA(cudaMalloc(&workspace, ws_bytes));
    CHECK_CUDA(cudaMemset(workspace, 0, ws_bytes));
    fill_random_bf16(x, std::size_t(max_m * s.k), rng);

    const bool llama = std::string(s.model) == "llama3.1-8b";
    const double real_wbytes = double(s.n * s.k) / 2 + double(s.n * s.k) / 16;
    if (llama) llama_bytes += real_wbytes;
    using nibble::kernels::W4A16Tile;
    if (profile) {
      for (std::int64_t m : ms) {
        if (!selected(m_filter, std::to_string(m))) continue;
        const int s16 = nibble::kernels::plan_splits(W4A16Tile::kM16, m, s.n, s.k, device);
        CHECK_CUDA(nibble::bench::read_weight_linear(dw[0], sink, device.sm_count, stream));
        CHECK_CUDA(nibble::bench::read_weight_grouped(dw[0], s16, sink, stream));
        CHECK_CUDA(nibble::bench::read_weight_grouped(dwk[0], s16, sink, stream));
        // The dispatcher's candidates at this M, in the default (group-major) layout.
        std::vector<W4A16Tile> tiles =
            m >= 256
                ? std::vector<W4A16Tile>{W4A16Tile::kM64, W4A16Tile::kM128}
                : std::vector<W4A16Tile>{W4A16Tile::kM8, W4A16Tile::kM16Swap, W4A16Tile::kM16Wide};
        if (m >= 256 && device.wgmma) {
          tiles.insert(tiles.end(), {W4A16Tile::kWgmma128, W4A16Tile::kWgmma256});
        }
        if (m <= 16) {
          tiles.insert(tiles.end(),
                       {W4A16Tile::kSlice16, W4A16Tile::kSlice32, W4A16Tile::kSlice16Wide,
                        W4A16Tile::kSlice32Wide, W4A16Tile::kSlice64, W4A16Tile::kSlice64Wide});
        }
        for (W4A16Tile tile : tiles) {
          const int splits = nibble::kernels::plan_splits(tile, m, s.n, s.k, device);
          CHECK_CUDA(nibble::kernels::w4a16_linear(x, m, dw[0], nullptr, out, tile, splits,
                                                   workspace, stream));
        }
        CHECK_CUDA(cudaStreamSynchronize(stream));
        std::printf("profile %s %s M=%lld: %zu launches\n", s.model, s.layer, (long long)m,
                    3 + tiles.size());
      }
    } else {
      // Read ceilings: the weight read once (all copies rotate), no arithmetic.
      const int s16 = nibble::kernels::plan_splits(W4A16Tile::kM16, 1, s.n, s.k, device);
      const double r_lin = median_us(reps, stream, [&](int i, cudaStream_t st) {
        CHECK_CUDA(nibble::bench::read_weight_linear(dw[std::size_t(i % copies)], sink,
                                                     device.sm_count, st));
      });
      const double r_gm = median_us(reps, stream, [&](int i, cudaStream_t st) {
        CHECK_CUDA(nibble::bench::read_weight_grouped(dw[std::size_t(i % copies)], s16, sink, st));
      });
      const double r_km = median_us(reps, stream, [&](int i, cudaStream_t st) {
        CHECK_CUDA(nibble::bench::read_weight_grouped(dwk[std::size_t(i % copies)], s16, sink, st));
      });
      const double layout_bytes = double(w.tiles.size() + w.scales.size());
      std::printf(
          "read %s %s (%.1f MB): linear %.1f us (%.0f GB/s), grouped group-major %.1f us (%.0f "
          "GB/s), grouped k-major %.1f us (%.0f GB/s), split %d\n",
          s.model, s.layer, layout_bytes / 1e6, r_lin, layout_bytes / r_lin / 1e3, r_gm,
          layout_bytes / r_gm / 1e3, r_km, layout_bytes / r_km / 1e3, s16);
    }
    for (std::size_t mi = 0; mi < std::size(ms) && !profile; ++mi) {
      const std::int64_t m = ms[mi];
      if (!selected(m_filter, std::to_string(m))) continue;
      const double ours = median_us(reps, stream, [&](int i, cudaStream_t st) {
        CHECK_CUDA(nibble::kernels::nvfp4_linear(x, m, dw[std::size_t(i % copies)], nullptr, out,
                                                 workspace, ws_bytes, device, st, false,
                                                 &dense_option));
      });
      // Where the plan declines overlap: the same launches as `ours`.
      const bool overlap_planned =
          nibble::kernels::plan_nvfp4_linear(m, s.n, s.k, device, true, &dense_option).overlap;
      const double ours_overlap =
          !overlap_planned ? ours : median_us(reps, stream, [&](int i, cudaStream_t st) {
            CHECK_CUDA(nibble::kernels::nvfp4_linear(x, m, dw[std::size_t(i % copies)], nullptr,
                                                     out, workspace, ws_bytes, device, st, true,
                                                     &dense_option));
          });
      const bool dense_planned =
          nibble::kernels::plan_nvfp4_linear(m, s.n, s.k, device, false, &dense_option).dense;
      const double w4 =
          !dense_planned ? ours : median_us(reps, stream, [&](int i, cudaStream_t st) {
            CHECK_CUDA(nibble::kernels::nvfp4_linear(x, m, dw[std::size_t(i % copies)], nullptr,
                                                     out, workspace, ws_bytes, device, st));
          });
      auto dense_us = [&](std::int64_t rows_per_round) {
        return median_us(reps, stream, [&](int i, cudaStream_t st) {
          CHECK_CUDA(nibble::kernels::w4a16_dense_linear(x, m, dw[std::size_t(i % copies)], nullptr,
                                                         out, dense_option.scratch, st,
                                                         rows_per_round));
        });
      };
      const std::int64_t round_rows = std::max<std::int64_t>(128, kDenseRoundBytes / (2 * s.k));
      const double dense = m >= 32 ? dense_us(0) : 0.0;
      const double dense_rounds = m >= 32 && round_rows < s.n ? dense_us(round_rows) : dense;
      const float alpha = 1.0f, beta = 0.0f;
      const double theirs = median_us(reps, stream, [&](int i, cudaStream_t) {
        // Row-major out[M,N] = x[M,K] W[N,K]^T is column-major out^T = W^T(op T) x^T.
        CHECK_CUBLAS(cublasGemmEx(cublas, CUBLAS_OP_T, CUBLAS_OP_N, int(s.n), int(m), int(s.k),
                                  &alpha, wb[std::size_t(i % bf16_copies)], CUDA_R_16BF, int(s.k),
                                  x, CUDA_R_16BF, int(s.k), &beta, out, CUDA_R_16BF, int(s.n),
                                  CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
      });
      // The other tile families at the same shape, to keep the dispatcher's choice honest.
      auto tile_us = [&](nibble::kernels::W4A16Tile tile, bool k_major = false,
                         bool overlap = false) {
        const int splits = nibble::kernels::plan_splits(tile, m, s.n, s.k, device);
        const auto& weights = k_major ? dwk : dw;
        return median_us(reps, stream, [&](int i, cudaStream_t st) {
          CHECK_CUDA(nibble::kernels::w4a16_linear(
              x, m, weights[std::size_t(i % copies)], nullptr, out, tile, splits, workspace, st,
              overlap || tiles_overlap, device.wgmma_cluster_sum));
        });
      };
      const double t16 = m <= 64 ? tile_us(nibble::kernels::W4A16Tile::kM16) : 0.0;
      const double t64 = tile_us(nibble::kernels::W4A16Tile::kM64);
      const double t128 = m >= 16 ? tile_us(nibble::kernels::W4A16Tile::kM128) : 0.0;
      const double tgemv = m <= 64 ? tile_us(nibble::kernels::W4A16Tile::kGemv) : 0.0;
      const double t16k = m <= 64 ? tile_us(W4A16Tile::kM16, true) : 0.0;
      const double t16p = m <= 64 ? tile_us(W4A16Tile::kM16, false, true) : 0.0;
      const double t16kp = m <= 64 ? tile_us(W4A16Tile::kM16, true, true) : 0.0;
      const double tgemvk = m <= 64 ? tile_us(W4A16Tile::kGemv, true) : 0.0;
      const double t8 = m <= 16 ? tile_us(W4A16Tile::kM8) : 0.0;
      const double t16w = m <= 64 ? tile_us(W4A16Tile::kM16Wide) : 0.0;
      const double ts16 = m <= 16 ? tile_us(W4A16Tile::kSlice16) : 0.0;
      const double ts32 = m <= 16 ? tile_us(W4A16Tile::kSlice32) : 0.0;
      const double ts16w = m <= 16 ? tile_us(W4A16Tile::kSlice16Wide) : 0.0;
      const double ts16wp = m <= 16 ? tile_us(W4A16Tile::kSlice16Wide, false, true) : 0.0;
      const double ts32w = m <= 16 ? tile_us(W4A16Tile::kSlice32Wide) : 0.0;
      const double ts64 = m <= 16 ? tile_us(W4A16Tile::kSlice64) : 0.0;
      const double ts64w = m <= 16 ? tile_us(W4A16Tile::kSlice64Wide) : 0.0;
      const bool wgmma = device.wgmma && m >= 32;
      const double wg128 = wgmma ? tile_us(W4A16Tile::kWgmma128) : 0.0;
      const double wg256 = wgmma ? tile_us(W4A16Tile::kWgmma256) : 0.0;
      const double flops = 2.0 * double(m) * double(s.n) * double(s.k);
      const double gbs = real_wbytes / ours / 1e3;
      const double tf = flops / ours / 1e6, tf_cub = flops / theirs / 1e6;
      if (llama) {
        llama_ours[mi] += ours;
        llama_overlap[mi] += ours_overlap;
        llama_cublas[mi] += theirs;
        llama_w4[mi] += w4;
        llama_dense[mi] += dense;
        llama_dense_rounds[mi] += dense_rounds;
        llama_wg128[mi] += wg128;
        llama_wg256[mi] += wg256;
      }
      std::printf(
          "%-14s %-12s %6lld %6lld %5lld | %9.1f %9.1f %7.1f | %8.0f %5.1f%% | %7.1f %7.1f %5.1f%% "
          "| "
          "%6.2fx | %6.1f %6.1f %6.1f %6.1f | %6.1f %6.1f %6.1f %6.1f %6.1f %6.1f %6.1f %6.1f "
          "%6.1f "
          "%6.1f %6.1f %6.1f %6.1f | %8.1f %8.1f %8.1f %7.1f %7.1f\n",
          s.model, s.layer, (long long)s.k, (long long)s.n, (long long)m, ours, theirs,
          ours_overlap, gbs, 100.0 * gbs / copy_gbs, tf, tf_cub, 100.0 * tf / tf_cub, theirs / ours,
          t16, t64, t128, tgemv, t16k, t16p, t16kp, tgemvk, t8, t16w, ts16, ts32, ts16w, ts16wp,
          ts32w, ts64, ts64w, w4, dense, dense_rounds, wg128, wg256);
      if (csv) {
        std::fprintf(
            csv, "%s,%s,%lld,%lld,%lld,%.2f,%.2f,%.1f,%.4f,%.2f,%.2f,%.3f,%.2f,%.2f,%.2f,%.2f\n",
            s.model, s.layer, (long long)s.k, (long long)s.n, (long long)m, ours, theirs, gbs,
            gbs / copy_gbs, tf, tf_cub, theirs / ours, ours_overlap, w4, dense, dense_rounds);
      }
    }
    if (sweep_splits) {
      struct SweepCase {
        W4A16Tile tile;
        const char* tname;
        std::int64_t m;
      };
      for (auto [tile, tname, m] :
           {SweepCase{W4A16Tile::kM8, "m8", 1}, SweepCase{W4A16Tile::kM8, "m8", 8},
            SweepCase{W4A16Tile::kM16Swap, "m16swap", 16},
            SweepCase{W4A16Tile::kM16Wide, "m16wide", 16}, SweepCase{W4A16Tile::kM16, "m16", 64},
            SweepCase{W4A16Tile::kM64, "m64", 64}, SweepCase{W4A16Tile::kM64, "m64", 256},
            SweepCase{W4A16Tile::kM128, "m128", 256}, SweepCase{W4A16Tile::kWgmma128, "wg128", 256},
            SweepCase{W4A16Tile::kWgmma256, "wg256", 256},
            SweepCase{W4A16Tile::kWgmma128, "wg128", 512},
            SweepCase{W4A16Tile::kWgmma256, "wg256", 512}}) {
        if (!selected(m_filter, std::to_string(m))) continue;
        const bool wgmma = nibble::kernels::w4a16_is_wgmma(tile);
        if (wgmma && !device.wgmma) continue;
        std::printf("sweep %s %s %s M=%lld planner=%d:", tname, s.model, s.layer, (long long)m,
                    nibble::kernels::plan_splits(tile, m, s.n, s.k, device));
        // The warpgroup-MMA tiles sum 2..8 splits in a cluster: every count there.
        static constexpr int kSplits[] = {1, 2, 4, 8, 12, 16, 24, 32, 48, 64};
        static constexpr int kWgmmaSplits[] = {1, 2, 3, 4, 5, 6, 7, 8};
        const std::vector<int> counts =
            wgmma ? std::vector<int>(std::begin(kWgmmaSplits), std::end(kWgmmaSplits))
                  : std::vector<int>(std::begin(kSplits), std::end(kSplits));
        for (int splits : counts) {
          if (splits > w.k_padded / 64) break;
          const double t = median_us(reps, stream, [&](int i, cudaStream_t st) {
            CHECK_CUDA(nibble::kernels::w4a16_linear(x, m, dw[std::size_t(i % copies)], nullptr,
                                                     out, tile, splits, workspace, st, false,
                                                     device.wgmma_cluster_sum));
          });
          std::printf(" %d:%.1f", splits, t);
        }
        std::printf("\n");
      }
    }
    for (void* p : allocations) CHECK_CUDA(cudaFree(p));
    allocations.clear();
    CHECK_CUDA(cudaFree(x));
    CHECK_CUDA(cudaFree(out));
    CHECK_CUDA(cudaFree(workspace));
  }

  std::printf("\nLlama-3.1-8B layer set (4 linears, %.1f MB of NVFP4 weights incl. scales):\n",
              llama_bytes / 1e6);
  std::printf(
      "%5s | %9s %9s | %8s %6s | %7s | %9s %6s | %9s %6s | %9s %6s | %9s %6s | %9s %6s | %9s "
      "%6s\n",
      "M", "nvfp4 us", "cuBLAS us", "wGB/s", "%copy", "speedup", "+P us", "%copy", "w4 us", "xcuB",
      "dense us", "xcuB", "dense/r", "xcuB", "wg128 us", "xcuB", "wg256 us", "xcuB");
  for (std::size_t mi = 0; mi < std::size(ms); ++mi) {
    if (llama_ours[mi] == 0.0) continue;  // M not selected (--ms) or no Llama layer (--layers)
    const double gbs = llama_bytes / llama_ours[mi] / 1e3;
    const double gbs_p = llama_bytes / llama_overlap[mi] / 1e3;
    auto ratio = [&](double us) { return us > 0.0 ? llama_cublas[mi] / us : 0.0; };
    std::printf(
        "%5lld | %9.1f %9.1f | %8.0f %5.1f%% | %6.2fx | %9.1f %5.1f%% | %9.1f %5.2fx | %9.1f "
        "%5.2fx | %9.1f %5.2fx | %9.1f %5.2fx | %9.1f %5.2fx\n",
        (long long)ms[mi], llama_ours[mi], llama_cublas[mi], gbs, 100.0 * gbs / copy_gbs,
        llama_cublas[mi] / llama_ours[mi], llama_overlap[mi], 100.0 * gbs_p / copy_gbs,
        llama_w4[mi], ratio(llama_w4[mi]), llama_dense[mi], ratio(llama_dense[mi]),
        llama_dense_rounds[mi], ratio(llama_dense_rounds[mi]), llama_wg128[mi],
        ratio(llama_wg128[mi]), llama_wg256[mi], ratio(llama_wg256[mi]));
  }
  // The same set chained as a decode step runs it (layer_chain.h), for the decode sizes.
  const bool whole_set =
      layer_filter.empty() || (selected(layer_filter, "qkv") && selected(layer_filter, "o") &&
                               selected(layer_filter, "gate_up") && selected(layer_filter, "down"));
  std::vector<std::int64_t> chain_ms;
  for (std::int64_t m : {1, 4, 8, 16, 64}) {
    if (selected(m_filter, std::to_string(m))) chain_ms.push_back(m);
  }
  if (!profile && whole_set && !chain_ms.empty()) {
    double set_bytes = 0;
    const auto chain =
        nibble::bench::time_llama_chain(chain_ms, reps, device, cublas, stream, &set_bytes);
    std::printf(
        "\nLlama-3.1-8B layer set chained (qkv, o, gate_up, down back to back in one graph, per "
        "set; +P = programmatic dependent launch; read = read-only kernels, no arithmetic):\n");
    std::printf("%-5s %5s | %9s %6s | %9s %6s | %9s %6s | %9s | %7s\n", "", "M", "nvfp4 us",
                "%copy", "+P us", "%copy", "read us", "%copy", "cuBLAS us", "speedup");
    for (const auto& t : chain) {
      auto pct = [&](double us) { return 100.0 * set_bytes / us / 1e3 / copy_gbs; };
      std::printf("chain %5lld | %9.1f %5.1f%% | %9.1f %5.1f%% | %9.1f %5.1f%% | %9.1f | %6.2fx\n",
                  (long long)t.m, t.ours_us, pct(t.ours_us), t.ours_overlap_us,
                  pct(t.ours_overlap_us), t.read_us, pct(t.read_us), t.cublas_us,
                  t.cublas_us / std::min(t.ours_us, t.ours_overlap_us));
    }
  }
  if (csv) std::fclose(csv);
  CHECK_CUDA(cudaFree(dense_weight));
  CHECK_CUDA(cudaFree(sink));
  CHECK_CUBLAS(cublasDestroy(cublas));
  CHECK_CUDA(cudaStreamDestroy(stream));
  return 0;
}
