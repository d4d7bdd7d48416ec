// GPU checks of the NVFP4 kernels against the CPU reference (kernels/nvfp4/nvfp4_ref.h):
//   * E2M1 conversion over every float32 bit pattern (--quick or --sampled-e2m1: selected
//     ranges only; --quick also drops the largest linear-layer shapes);
//   * BF16 -> NVFP4 activation quantization, byte for byte, and its global factor;
//   * the W4A16 linear layer (every tile family incl. the decode and slice kernels, split-K,
//     fused residual, the dequantise-then-cuBLAS path, and the dispatcher)
//   * the layout's dequantisation to BF16, bit for bit;
//     at Llama-3.1-8B / Qwen3-30B-A3B shapes and awkward ones, relative error <= 1e-2.
// Fresh random inputs each run (the seed is printed); outputs poisoned before each launch.
// --linear NAME runs only the linear-layer variants whose name contains NAME (e.g. `wgmma256`
// under compute-sanitizer, where the whole run would take too long).
// Exits 77 (ctest: skipped) when no GPU is present.
#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "kernels/nvfp4/bf16.h"
#include "kernels/nvfp4/nvfp4_ref.h"
#include "kernels/nvfp4/quantize_activations.h"
#include "kernels/nvfp4/w4a16_dense.h"
#include "kernels/nvfp4/w4a16_dequant.h"
#include "kernels/nvfp4/w4a16_dev_tiles.h"
#include "kernels/nvfp4/w4a16_layout.h"
#include "kernels/nvfp4_linear.h"
#include "tests/gpu/gpu_check_support.h"
#include "tests/gpu/nvfp4_test_data.h"

namespace nibble::gpu_test {
namespace {

using nvfp4::bf16_bits;

void check_e2m1(Results& results, bool quick) {
  constexpr std::uint32_t kChunk = 1u << 26;
  DeviceBuffer<std::uint8_t> codes(kChunk);
  std::vector<std::uint32_t> starts;
  std::uint32_t chunk = kChunk;
  if (quick) {
    chunk = 1u << 20;
    for (std::uint32_t s : {0x00000000u, 0x3E700000u, 0x3F3F0000u, 0x3F9F0000u, 0x3FDF0000u,
                            0x401F0000u, 0x405F0000u, 0x409F0000u, 0x7F700000u}) {
      starts.push_back(s);
      starts.push_back(s | 0x80000000u);
    }
  } else {
    for (std::uint64_t s = 0; s < (1ull << 32); s += kChunk) starts.push_back(std::uint32_t(s));
  }
  std::uint64_t checked = 0, mismatches = 0;
  std::uint32_t first_bad = 0;
  std::vector<std::uint8_t> host(chunk);
  for (std::uint32_t start : starts) {
    codes.poison();
    NIBBLE_CUDA_CHECK(kernels::e2m1_codes_for_bit_range(start, chunk, codes.ptr, nullptr));
    NIBBLE_CUDA_CHECK(cudaMemcpy(host.data(), codes.ptr, chunk, cudaMemcpyDeviceToHost));
    std::vector<std::uint64_t> bad(std::thread::hardware_concurrency() + 1, 0);
    std::vector<std::uint32_t> where(bad.size(), 0);
    std::atomic<int> slot{0};
    parallel_for(chunk, [&](std::int64_t b, std::int64_t e) {
      const int me = slot++;
      for (std::int64_t i = b; i < e; ++i) {
        const float x = std::bit_cast<float>(std::uint32_t(start + std::uint32_t(i)));
        if (nvfp4::float_to_e2m1(x) != host[std::size_t(i)]) {
          if (bad[me]++ == 0) where[me] = start + std::uint32_t(i);
        }
      }
    });
    for (std::size_t t = 0; t < bad.size(); ++t) {
      if (bad[t] && !mismatches) first_bad = where[t];
      mismatches += bad[t];
    }
    checked += chunk;
  }
  char detail[160];
  std::snprintf(detail, sizeof detail, "%llu bit patterns, %llu mismatches (first 0x%08x)",
                (unsigned long long)checked, (unsigned long long)mismatches, first_bad);
  results.record(mismatches == 0 && checked > 0, quick ? "e2m1_sampled" : "e2m1_exhaustive",
                 detail);
}

std::vector<bf16_bits> random_activations(std::mt19937_64& rng, std::int64_t rows, std::int64_t k) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  std::vector<bf16_bits> x(std::size_t(rows * k));
  for (std::int64_t b = 0; b < rows * k / 16; ++b) {
    const float roll = unit(rng);
    // Mostly N(0,1); some blocks zero, some tiny, some with outliers.
    const float scale = roll < 0.03f ? 0.0f : (roll < 0.06f ? 1e-6f : (roll < 0.1f ? 50.0f : 1.0f));
    for (int i = 0; i < 16; ++i)
      x[std::size_t(b * 16 + i)] = nvfp4::float_to_bf16(normal(rng) * scale);
  }
  return x;
}

void check_quantize(Results& results, std::mt19937_64& rng) {
  const std::int64_t shapes[][2] = {{1, 16}, {3, 48}, {7, 4096}, {16, 14336}, {33, 2064}};
  for (const auto& s : shapes) {
    const std::int64_t rows = s[0], k = s[1];
    const auto x = random_activations(rng, rows, k);
    DeviceBuffer<bf16_bits> dx(x.size());
    dx.upload(x);
    DeviceBuffer<float> scratch(1), g(1);
    g.poison();
    NIBBLE_CUDA_CHECK(
        kernels::nvfp4_global_factor_bf16(dx.ptr, rows * k, scratch.ptr, g.ptr, nullptr));
    DeviceBuffer<std::uint8_t> packed(std::size_t(rows * k / 2)),
        scales(std::size_t(rows * k / 16));
    packed.poison();
    scales.poison();
    NIBBLE_CUDA_CHECK(
        kernels::quantize_bf16_to_nvfp4(dx.ptr, rows, k, g.ptr, packed.ptr, scales.ptr, nullptr));
    NIBBLE_CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<float> xf(x.size());
    float amax = 0.0f;
    for (std::size_t i = 0; i < x.size(); ++i) {
      xf[i] = nvfp4::bf16_to_float(x[i]);
      amax = std::max(amax, std::fabs(xf[i]));
    }
    const float g_ref = nvfp4::global_factor_for_amax(amax);
    const float g_dev = g.download()[0];
    std::vector<std::uint8_t> p_ref(packed.count), s_ref(scales.count);
    for (std::int64_t r = 0; r < rows; ++r) {
      nvfp4::quantize_row(std::span(xf).subspan(std::size_t(r * k), std::size_t(k)), g_ref,
                          std::span(p_ref).subspan(std::size_t(r * k / 2), std::size_t(k / 2)),
                          std::span(s_ref).subspan(std::size_t(r * k / 16), std::size_t(k / 16)));
    }
    const auto p_dev = packed.download();
    const auto s_dev = scales.download();
    std::size_t bad_p = 0, bad_s = 0;
    for (std::size_t i = 0; i < p_ref.size(); ++i) bad_p += p_ref[i] != p_dev[i];
    for (std::size_t i = 0; i < s_ref.size(); ++i) bad_s += s_ref[i] != s_dev[i];
    char detail[200];
    std::snprintf(detail, sizeof detail,
                  "[%lld x %lld]: global %.9g vs %.9g, %zu/%zu packed and %zu/%zu scales differ",
                  (long long)rows, (long long)k, double(g_dev), double(g_ref), bad_p, p_ref.size(),
                  bad_s, s_ref.size());
    results.record(g_dev == g_ref && bad_p == 0 && bad_s == 0, "quantize_activations", detail);
  }
}

// A random but well-formed NVFP4 weight: every E2M1 code, E4M3 scales over a wide range (some
// negative), some zero blocks (codes of a zero block are arbitrary here, as in a careless
// exporter).

// A repacked weight in device memory, and its view for the kernels.
struct UploadedWeight {
  DeviceBuffer<std::uint8_t> tiles, scales;
  kernels::W4A16DeviceWeight weight;
  explicit UploadedWeight(const nvfp4::W4A16Weight& w)
      : tiles(w.tiles.size()),
        scales(w.scales.size()),
        weight{tiles.ptr,  scales.ptr,      w.n,      w.k, w.n_padded,
               w.k_padded, w.global_factor, w.k_major} {
    tiles.upload(w.tiles);
    scales.upload(w.scales);
  }
};

struct LinearCase {
  std::int64_t m, n, k;
  bool residual;
};

void check_linear(Results& results, std::mt19937_64& rng, const LinearCase& c,
                  const kernels::DeviceTraits& device, DeviceBuffer<float>& workspace,
                  const kernels::W4A16DenseScratch& dense_scratch, const std::string& only) {
  const auto q = random_weight(rng, c.n, c.k);
  const auto packed = nvfp4::repack_for_w4a16(q.packed, q.scales, c.n, c.k, q.global_factor);
  const auto packed_k =
      nvfp4::repack_for_w4a16(q.packed, q.scales, c.n, c.k, q.global_factor, /*k_major=*/true);
  // The layout's CPU decode must equal the reference dequantization (spot check).
  std::uniform_int_distribution<std::int64_t> rn(0, c.n - 1), rk(0, c.k - 1);
  int layout_bad = 0;
  for (int i = 0; i < 2000; ++i) {
    const std::int64_t r = rn(rng), col = rk(rng);
    layout_bad += nvfp4::w4a16_element(packed, r, col) != nvfp4::dequantize_element(q, r, col);
    layout_bad += nvfp4::w4a16_element(packed_k, r, col) != nvfp4::dequantize_element(q, r, col);
  }
  const UploadedWeight uploaded(packed), uploaded_k(packed_k);
  const kernels::W4A16DeviceWeight& weight_gm = uploaded.weight;
  const kernels::W4A16DeviceWeight& weight_km = uploaded_k.weight;

  const auto x = random_activations(rng, c.m, c.k);
  std::vector<bf16_bits> res;
  if (c.residual) res = random_activations(rng, c.m, c.n);
  DeviceBuffer<bf16_bits> dx(x.size()), dres(res.size()), dout(std::size_t(c.m * c.n));
  dx.upload(x);
  if (c.residual) dres.upload(res);

  // Reference on a sample of rows (all of them when m is small): double accumulation.
  std::vector<std::int64_t> rows;
  if (c.m <= 64) {
    for (std::int64_t r = 0; r < c.m; ++r) rows.push_back(r);
  } else {
    std::uniform_int_distribution<std::int64_t> rm(0, c.m - 1);
    rows = {0, c.m - 1};
    for (int i = 0; i < 30; ++i) rows.push_back(rm(rng));
  }
  std::vector<float> wf(std::size_t(c.n * c.k));
  parallel_for(c.n, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t r = b; r < e; ++r) {
      nvfp4::dequantize_row(
          std::span(q.packed).subspan(std::size_t(r * c.k / 2), std::size_t(c.k / 2)),
          std::span(q.scales).subspan(std::size_t(r * c.k / 16), std::size_t(c.k / 16)),
          q.global_factor, std::span(wf).subspan(std::size_t(r * c.k), std::size_t(c.k)));
    }
  });
  std::vector<double> ref(rows.size() * std::size_t(c.n));
  parallel_for(c.n, [&](std::int64_t b, std::int64_t e) {
    for (std::size_t ri = 0; ri < rows.size(); ++ri) {
      const bf16_bits* xr = x.data() + rows[ri] * c.k;
      for (std::int64_t col = b; col < e; ++col) {
        const float* wr = wf.data() + col * c.k;
        double s = 0.0;
        for (std::int64_t i = 0; i < c.k; ++i) s += double(nvfp4::bf16_to_float(xr[i])) * wr[i];
        if (c.residual) s += nvfp4::bf16_to_float(res[std::size_t(rows[ri] * c.n + col)]);
        ref[ri * std::size_t(c.n) + std::size_t(col)] = s;
      }
    }
  });

  struct Variant {
    std::string name;
    bool dispatcher;
    kernels::W4A16Tile tile;
    int splits;
    bool k_major = false, overlap = false;
    // The dispatcher offered the dequantise-then-cuBLAS path: from this many rows (0: not
    // offered), in rounds of at most dense_rounds weight rows (0: the whole layer).
    std::int64_t dense_min_rows = 0, dense_rounds = 0;
  };
  // The dispatcher in both layouts (and with programmatic dependent launch); the tile families
  // forced, both layouts, on the smaller shapes.
  std::vector<Variant> variants = {
      {"dispatch", true, kernels::W4A16Tile::kM16, 1},
      {"dispatch/k-major", true, kernels::W4A16Tile::kM16, 1, true},
      {"dispatch/k-major/pdl", true, kernels::W4A16Tile::kM16, 1, true, true}};
  if (c.n * c.k <= 4096 * 4096) {
    for (auto [tile, tname] :
         {std::pair{kernels::W4A16Tile::kM8, "m8"}, std::pair{kernels::W4A16Tile::kM16, "m16"},
          std::pair{kernels::W4A16Tile::kM16Swap, "m16swap"},
          std::pair{kernels::W4A16Tile::kM16Wide, "m16wide"},
          std::pair{kernels::W4A16Tile::kM64, "m64"}, std::pair{kernels::W4A16Tile::kM128, "m128"},
          std::pair{kernels::W4A16Tile::kGemv, "gemv"}}) {
      for (bool k_major : {false, true}) {
        const std::string suffix = k_major ? "/k-major" : "";
        variants.push_back({std::string(tname) + "/split1" + suffix, false, tile, 1, k_major});
        variants.push_back({std::string(tname) + "/split3" + suffix, false, tile, 3, k_major});
      }
    }
  }
  if (c.m <= 16) {
    // The slice tiles never split K (splits is ignored); both layouts at every shape, one x
    // fragment up to 8 rows and two above.
    for (auto [tile, tname] : {std::pair{kernels::W4A16Tile::kSlice16, "slice16"},
                               std::pair{kernels::W4A16Tile::kSlice32, "slice32"},
                               std::pair{kernels::W4A16Tile::kSlice64, "slice64"},
                               std::pair{kernels::W4A16Tile::kSlice16Wide, "slice16wide"},
                               std::pair{kernels::W4A16Tile::kSlice32Wide, "slice32wide"},
                               std::pair{kernels::W4A16Tile::kSlice64Wide, "slice64wide"}}) {
      variants.push_back({tname, false, tile, 1});
      variants.push_back({std::string(tname) + "/k-major/pdl", false, tile, 1, true, true});
    }
  }
  // The warpgroup-MMA tiles (sm_90a), forced at every shape and M, both layouts, and split-K.
  if (kernels::w4a16_wgmma_supported()) {
    for (auto [tile, tname] : {std::pair{kernels::W4A16Tile::kWgmma128, "wgmma128"},
                               std::pair{kernels::W4A16Tile::kWgmma256, "wgmma256"}}) {
      variants.push_back({tname, false, tile, 1});
      variants.push_back({std::string(tname) + "/k-major", false, tile, 1, true});
      variants.push_back({std::string(tname) + "/split3", false, tile, 3});
      // Programmatic dependent launch together with the cluster launch of the split sum.
      variants.push_back({std::string(tname) + "/split3/pdl", false, tile, 3, false, true});
      // Seven K splits summed in a cluster of seven: an odd split of K and a cluster bigger
      // than the planner takes today (it took 7 for down at M = 256 before it counted waves).
      variants.push_back({std::string(tname) + "/split7", false, tile, 7});
    }
  }
  // Dequantise-then-cuBLAS, forced (from 1 row), in one round and in 128-row rounds; and the
  // dispatcher with the path offered at its default threshold.
  variants.push_back({"dense", true, kernels::W4A16Tile::kM16, 1, false, false, 1});
  variants.push_back({"dense/k-major", true, kernels::W4A16Tile::kM16, 1, true, false, 1});
  if (c.n > 128)
    variants.push_back(
        {"dense/rounds128", true, kernels::W4A16Tile::kM16, 1, false, false, 1, 128});
  variants.push_back({"dispatch/dense-offered", true, kernels::W4A16Tile::kM16, 1, false, false,
                      kernels::kNvfp4DenseMinRows});
  if (c.n * c.k > 4096 * 4096 && c.m <= 16) {
    // One split over a long K walks the decode kernel's x slice through several chunks.
    variants.push_back({"gemv/split1", false, kernels::W4A16Tile::kGemv, 1});
    variants.push_back({"gemv/split1/k-major", false, kernels::W4A16Tile::kGemv, 1, true});
  }
  for (const auto& v : variants) {
    if (v.name.find(only) == std::string::npos) continue;
    dout.poison();
    const kernels::W4A16DeviceWeight& w = v.k_major ? weight_km : weight_gm;
    if (v.dispatcher) {
      kernels::Nvfp4DenseOption dense{dense_scratch, v.dense_min_rows, v.dense_rounds};
      // Forcing the dense path (from 1 row) takes the wgmma tiles out of the plan: they come first.
      kernels::DeviceTraits traits = device;
      if (v.dense_min_rows == 1) traits.wgmma = false;
      NIBBLE_CUDA_CHECK(kernels::nvfp4_linear(dx.ptr, c.m, w, c.residual ? dres.ptr : nullptr,
                                              dout.ptr, workspace.ptr,
                                              workspace.count * sizeof(float), traits, nullptr,
                                              v.overlap, v.dense_min_rows > 0 ? &dense : nullptr));
    } else {
      NIBBLE_CUDA_CHECK(kernels::w4a16_linear(dx.ptr, c.m, w, c.residual ? dres.ptr : nullptr,
                                              dout.ptr, v.tile, v.splits, workspace.ptr, nullptr,
                                              v.overlap));
    }
    NIBBLE_CUDA_CHECK(cudaDeviceSynchronize());
    const auto out = dout.download();
    std::size_t unwritten = 0;
    for (bf16_bits o : out) unwritten += !std::isfinite(nvfp4::bf16_to_float(o));
    std::vector<double> got(ref.size());
    for (std::size_t ri = 0; ri < rows.size(); ++ri) {
      for (std::int64_t col = 0; col < c.n; ++col) {
        got[ri * std::size_t(c.n) + std::size_t(col)] =
            nvfp4::bf16_to_float(out[std::size_t(rows[ri] * c.n + col)]);
      }
    }
    const double err = relative_error(ref, got);
    char detail[200];
    std::snprintf(detail, sizeof detail,
                  "M=%lld N=%lld K=%lld%s: rel err %.2e over %zu rows, %zu non-finite/unwritten, "
                  "layout mismatches %d",
                  (long long)c.m, (long long)c.n, (long long)c.k, c.residual ? " +res" : "", err,
                  rows.size(), unwritten, layout_bad);
    results.record(err <= 1e-2 && unwritten == 0 && layout_bad == 0, "linear/" + v.name, detail);
  }
}

// x [m, k] as doubles.
std::vector<double> reference_input(const std::vector<bf16_bits>& x) {
  std::vector<double> in(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) in[i] = nvfp4::bf16_to_float(x[i]);
  return in;
}

// in [m, k] (doubles) . W^T in double, W dequantized by the CPU reference: [m, n].
std::vector<double> reference_product_of(const nvfp4::QuantizedMatrix& q,
                                         const std::vector<double>& in, std::int64_t m) {
  const std::int64_t n = q.rows, k = q.cols;
  std::vector<double> y(std::size_t(m * n));
  parallel_for(n, [&](std::int64_t b, std::int64_t e) {
    std::vector<float> wr(static_cast<std::size_t>(k));
    for (std::int64_t col = b; col < e; ++col) {
      nvfp4::dequantize_row(
          std::span(q.packed).subspan(std::size_t(col * k / 2), std::size_t(k / 2)),
          std::span(q.scales).subspan(std::size_t(col * k / 16), std::size_t(k / 16)),
          q.global_factor, wr);
      for (std::int64_t r = 0; r < m; ++r) {
        double sum = 0.0;
        for (std::int64_t i = 0; i < k; ++i) sum += in[std::size_t(r * k + i)] * wr[std::size_t(i)];
        y[std::size_t(r * n + col)] = sum;
      }
    }
  });
  return y;
}

// The layout's dequantisation (w4a16_dequant.h) against its CPU reference, bit for bit: both
// group orders, slices from a group boundary, shapes with padded rows and columns, NVFP4 and
// MXFP4 weights. One row past
// the slice stays poisoned (nothing written outside it).
void check_dequantize(Results& results, std::mt19937_64& rng) {
  struct Case {
    std::int64_t n, k, row_begin, rows;
  };
  const Case cases[] = {{1, 16, 0, 1},           {130, 1040, 0, 130}, {130, 1040, 128, 100},
                        {257, 208, 128, 128},    {300, 4112, 0, 256}, {1536, 2048, 256, 1000},
                        {4096, 14336, 3968, 128}};
  // MXFP4 (gpt-oss's experts): random codes and E8M0 exponents over the whole range, so the
  // decode's exponent placement meets both ends of the layout's [5, 138] and the zeroed blocks.
  auto mxfp4_weight = [&](std::int64_t n, std::int64_t k, bool k_major) {
    std::vector<std::uint8_t> packed(std::size_t(n * k / 2)), e8m0(std::size_t(n * k / 32));
    std::uniform_int_distribution<int> byte(0, 255), exponent(0, 254);
    for (auto& v : packed) v = std::uint8_t(byte(rng));
    for (auto& v : e8m0) v = std::uint8_t(exponent(rng));
    return nvfp4::repack_mxfp4_for_w4a16(packed, e8m0, n, k, k_major);
  };
  for (const Case& c : cases) {
    const auto q = random_weight(rng, c.n, c.k);
    for (const bool mxfp4 : {false, true}) {
      if (mxfp4 && c.k % 32 != 0) continue;
      for (bool k_major : {false, true}) {
        const auto w =
            mxfp4 ? mxfp4_weight(c.n, c.k, k_major)
                  : nvfp4::repack_for_w4a16(q.packed, q.scales, c.n, c.k, q.global_factor, k_major);
        DeviceBuffer<std::uint8_t> tiles(w.tiles.size()), scales(w.scales.size());
        tiles.upload(w.tiles);
        scales.upload(w.scales);
        const kernels::W4A16DeviceWeight dw{
            tiles.ptr,  scales.ptr,      w.n,     w.k,     w.n_padded,
            w.k_padded, w.global_factor, k_major, w.format};
        const auto ref = nvfp4::w4a16_dequantize_rows(w, c.row_begin, c.rows);
        DeviceBuffer<bf16_bits> out(ref.size() + std::size_t(c.k));  // + one guard row
        out.poison();
        NIBBLE_CUDA_CHECK(kernels::w4a16_dequantize(dw, c.row_begin, c.rows, out.ptr, nullptr));
        NIBBLE_CUDA_CHECK(cudaDeviceSynchronize());
        const auto got = out.download();
        std::size_t bad = 0, guard = 0;
        for (std::size_t i = 0; i < ref.size(); ++i) bad += got[i] != ref[i];
        for (std::size_t i = ref.size(); i < got.size(); ++i) guard += got[i] != 0xFFFF;
        char detail[200];
        std::snprintf(detail, sizeof detail,
                      "%s[%lld x %lld] rows %lld + %lld%s: %zu of %zu differ, %zu guard writes",
                      mxfp4 ? "MXFP4 " : "", (long long)c.n, (long long)c.k, (long long)c.row_begin,
                      (long long)c.rows, k_major ? " k-major" : "", bad, ref.size(), guard);
        results.record(bad == 0 && guard == 0 && !ref.empty(), "dequantize", detail);
      }
    }
  }
  // A slice that does not start on a 128-row group is refused.
  const kernels::W4A16DeviceWeight dw{nullptr, nullptr, 256, 64, 256, 64, 1.0f, false};
  DeviceBuffer<bf16_bits> out(64 * 64);
  results.record(kernels::w4a16_dequantize(dw, 64, 64, out.ptr, nullptr) == cudaErrorInvalidValue,
                 "dequantize/refuses_unaligned_rows", "row_begin 64");
}

// out[r, :] = x[r, :] . W^T in double, W dequantized by the CPU reference.
std::vector<double> reference_product(const nvfp4::QuantizedMatrix& q,
                                      const std::vector<bf16_bits>& x, std::int64_t m) {
  return reference_product_of(q, reference_input(x), m);
}

// Programmatic dependent launch: y1 = x W1^T, then y2 = y1 W2^T launched with overlap right
// behind it (sharing the split-K workspace). If the second kernel read y1 or touched the
// workspace before the first finished, y2 would hold poison or wrong sums. At M = 4 the slice
// tiles run; at M = 128 the warpgroup-MMA tiles where the device has them (the case fails if the
// plan does not take them with overlap there).
void check_overlap_chain(Results& results, std::mt19937_64& rng,
                         const kernels::DeviceTraits& device, DeviceBuffer<float>& workspace,
                         std::int64_t m, std::int64_t k, std::int64_t n1, std::int64_t n2,
                         int rounds) {
  const auto q1 = random_weight(rng, n1, k), q2 = random_weight(rng, n2, n1);
  const auto p1 = nvfp4::repack_for_w4a16(q1.packed, q1.scales, n1, k, q1.global_factor, true);
  const auto p2 = nvfp4::repack_for_w4a16(q2.packed, q2.scales, n2, n1, q2.global_factor, true);
  DeviceBuffer<std::uint8_t> t1(p1.tiles.size()), s1(p1.scales.size()), t2(p2.tiles.size()),
      s2(p2.scales.size());
  t1.upload(p1.tiles);
  s1.upload(p1.scales);
  t2.upload(p2.tiles);
  s2.upload(p2.scales);
  const kernels::W4A16DeviceWeight w1{t1.ptr,      s1.ptr,           n1,  k, p1.n_padded,
                                      p1.k_padded, p1.global_factor, true};
  const kernels::W4A16DeviceWeight w2{t2.ptr,      s2.ptr,           n2,  n1, p2.n_padded,
                                      p2.k_padded, p2.global_factor, true};
  const auto plan1 = kernels::plan_nvfp4_linear(m, n1, k, device, true);
  const auto plan2 = kernels::plan_nvfp4_linear(m, n2, n1, device, true);
  const auto x = random_activations(rng, m, k);
  DeviceBuffer<bf16_bits> dx(x.size()), y1(std::size_t(m * n1)), y2(std::size_t(m * n2));
  dx.upload(x);
  const std::size_t ws_bytes = workspace.count * sizeof(float);
  double worst1 = 0.0, worst2 = 0.0;
  std::size_t unwritten = 0;
  for (int round = 0; round < rounds; ++round) {
    y1.poison();
    y2.poison();
    NIBBLE_CUDA_CHECK(kernels::nvfp4_linear(dx.ptr, m, w1, nullptr, y1.ptr, workspace.ptr, ws_bytes,
                                            device, nullptr, true));
    NIBBLE_CUDA_CHECK(kernels::nvfp4_linear(y1.ptr, m, w2, nullptr, y2.ptr, workspace.ptr, ws_bytes,
                                            device, nullptr, true));
    NIBBLE_CUDA_CHECK(cudaDeviceSynchronize());
    const auto h1 = y1.download(), h2 = y2.download();
    std::vector<double> g1(h1.size()), g2(h2.size());
    for (std::size_t i = 0; i < h1.size(); ++i) g1[i] = nvfp4::bf16_to_float(h1[i]);
    for (std::size_t i = 0; i < h2.size(); ++i) g2[i] = nvfp4::bf16_to_float(h2[i]);
    for (double v : g1) unwritten += !std::isfinite(v);
    for (double v : g2) unwritten += !std::isfinite(v);
    // y2's reference starts from the y1 the GPU produced (the chain's real input).
    worst1 = std::max(worst1, relative_error(reference_product(q1, x, m), g1));
    worst2 = std::max(worst2, relative_error(reference_product(q2, h1, m), g2));
  }
  char detail[240];
  std::snprintf(detail, sizeof detail,
                "M=%lld, %lldx%lld then %lldx%lld (tiles %d/%d, splits %d/%d, overlap %d/%d), %d "
                "rounds: worst rel err %.2e / %.2e, %zu non-finite",
                (long long)m, (long long)k, (long long)n1, (long long)n1, (long long)n2,
                int(plan1.tile), int(plan2.tile), plan1.splits, plan2.splits, int(plan1.overlap),
                int(plan2.overlap), rounds, worst1, worst2, unwritten);
  const bool wgmma_case = m > 16 && kernels::w4a16_wgmma_supported();
  const bool planned =
      !wgmma_case || (kernels::w4a16_is_wgmma(plan1.tile) && kernels::w4a16_is_wgmma(plan2.tile) &&
                      plan1.overlap && plan2.overlap);
  results.record(worst1 <= 1e-2 && worst2 <= 1e-2 && unwritten == 0 && planned,
                 "linear/overlap_chain/m" + std::to_string(m), detail);
}

// The dense path with the residual in out itself (residual == out: the engine's in-place add).
void check_dense_in_place(Results& results, std::mt19937_64& rng,
                          const kernels::W4A16DenseScratch& scratch) {
  const std::int64_t m = 300, n = 520, k = 1040;
  const auto q = random_weight(rng, n, k);
  const auto p = nvfp4::repack_for_w4a16(q.packed, q.scales, n, k, q.global_factor);
  DeviceBuffer<std::uint8_t> tiles(p.tiles.size()), scales(p.scales.size());
  tiles.upload(p.tiles);
  scales.upload(p.scales);
  const kernels::W4A16DeviceWeight w{tiles.ptr,  scales.ptr,      n,    k, p.n_padded,
                                     p.k_padded, p.global_factor, false};
  const auto x = random_activations(rng, m, k);
  const auto res = random_activations(rng, m, n);
  DeviceBuffer<bf16_bits> dx(x.size()), dout(res.size());
  dx.upload(x);
  dout.upload(res);
  NIBBLE_CUDA_CHECK(
      kernels::w4a16_dense_linear(dx.ptr, m, w, dout.ptr, dout.ptr, scratch, nullptr, 256));
  NIBBLE_CUDA_CHECK(cudaDeviceSynchronize());
  auto ref = reference_product(q, x, m);
  for (std::size_t i = 0; i < ref.size(); ++i) ref[i] += nvfp4::bf16_to_float(res[i]);
  const auto out = dout.download();
  std::vector<double> got(out.size());
  for (std::size_t i = 0; i < out.size(); ++i) got[i] = nvfp4::bf16_to_float(out[i]);
  const double err = relative_error(ref, got);
  char detail[160];
  std::snprintf(detail, sizeof detail,
                "M=%lld N=%lld K=%lld, residual == out, 256-row rounds: "
                "rel err %.2e",
                (long long)m, (long long)n, (long long)k, err);
  results.record(err <= 1e-2, "linear/dense/in_place_residual", detail);
}

int run(int argc, char** argv) {
  kernels::w4a16_enable_dev_tiles();  // the kGemv checks
  const std::string reason = no_gpu_reason();
  if (!reason.empty()) {
    std::printf("SKIP: %s; the NVFP4 GPU checks need a CUDA GPU\n", reason.c_str());
    return kSkipExitCode;
  }
  bool quick = false, sampled_e2m1 = false;
  std::string only;  // --linear NAME: those linear-layer variants alone
  for (int i = 1; i < argc; ++i) {
    quick |= std::string(argv[i]) == "--quick";
    sampled_e2m1 |= std::string(argv[i]) == "--sampled-e2m1";
    if (std::string(argv[i]) == "--linear" && i + 1 < argc) only = argv[++i];
  }
  const std::uint64_t seed = std::random_device{}() ^ (std::uint64_t(std::random_device{}()) << 32);
  std::printf("seed %llu%s\n", (unsigned long long)seed, quick ? " (quick)" : "");
  std::mt19937_64 rng(seed);
  kernels::DeviceTraits device;
  NIBBLE_CUDA_CHECK(kernels::query_device_traits(&device));
  std::printf("device sm_%d%d, %d SMs, wgmma tiles %s\n", device.major, device.minor,
              device.sm_count, device.wgmma ? "planned" : "not planned");

  Results results;
  if (only.empty()) {
    check_e2m1(results, quick || sampled_e2m1);
    check_quantize(results, rng);
  }

  std::vector<LinearCase> cases = {
      // awkward: N = 1, K not a multiple of 64, M not a multiple of any tile
      {1, 1, 16, false},
      {2, 1, 48, true},
      {5, 17, 80, false},
      {8, 130, 1040, true},
      {9, 257, 208, false},
      {17, 300, 528, true},
      {65, 129, 1008, false},
      {130, 64, 64, true},
      {2048, 200, 96, false},
      {1100, 300, 208, true},  // row tiles not a multiple of the raster band (8), 3 column tiles
      {3, 1, 3088, true},      // N = 1, K = 48 tiles + 16: chunk and stream tails (decode kernel)
      {12, 260, 1104, false},
      // Qwen3-30B-A3B experts and Llama-3.1-8B layers
      {1, 1536, 2048, false},
      {16, 2048, 768, true},
      {64, 1536, 2048, false},
      {1, 6144, 4096, true},
      {4, 4096, 4096, false},
      {16, 4096, 4096, false},
      {256, 2048, 768, false},
      // Large M (the 64/128-row tiles, dequantise-then-cuBLAS): M around the tile sizes and the
      // planner's thresholds, N and K not multiples of the tile (N % 128, K % 64 != 0).
      {63, 1000, 1040, true},
      {64, 1000, 1040, false},
      {513, 1100, 2064, false},
      {1000, 2100, 1040, true},
  };
  if (!quick) {
    cases.push_back({8, 4096, 14336, true});
    cases.push_back({13, 6144, 4096, true});
    cases.push_back({2048, 4096, 4096, false});
    cases.push_back({1, 28672, 4096, false});
    cases.push_back({256, 6144, 4096, true});
    cases.push_back({4096, 1100, 4112, true});
    cases.push_back({2048, 4096, 14336, false});
  }
  std::size_t ws = kernels::nvfp4_linear_workspace_bytes(128, 6144) / 4;  // overlap chains
  for (const auto& c : cases)
    ws = std::max(ws, kernels::nvfp4_linear_workspace_bytes(c.m, c.n) / 4);
  DeviceBuffer<float> workspace(ws);
  NIBBLE_CUDA_CHECK(cudaMemset(workspace.ptr, 0, ws * sizeof(float)));
  // The dequantise-then-cuBLAS scratch, sized by the largest weight of the cases.
  std::size_t dense_elements = 0;
  for (const auto& c : cases) dense_elements = std::max(dense_elements, std::size_t(c.n * c.k));
  DeviceBuffer<bf16_bits> dense_weight(dense_elements);
  kernels::W4A16DenseScratch dense{nullptr, dense_weight.ptr, dense_elements};
  if (cublasCreate(&dense.cublas) != CUBLAS_STATUS_SUCCESS) {
    std::printf("FAIL: cublasCreate\n");
    return 1;
  }
  if (only.empty()) check_dequantize(results, rng);
  for (const auto& c : cases) check_linear(results, rng, c, device, workspace, dense, only);
  if (!only.empty()) {
    cublasDestroy(dense.cublas);
    return results.exit_code();
  }
  check_dense_in_place(results, rng, dense);
  cublasDestroy(dense.cublas);
  check_overlap_chain(results, rng, device, workspace, 4, 4096, 4096, 6144, 4);
  check_overlap_chain(results, rng, device, workspace, 128, 2048, 6144, 2048, 2);
  const auto left = workspace.download();
  const auto nonzero = std::count_if(left.begin(), left.end(), [](float v) { return v != 0.0f; });
  results.record(nonzero == 0, "split_workspace_left_zero",
                 std::to_string(nonzero) + " non-zero floats left");
  return results.exit_code();
}

}  // namespace
}  // namespace nibble::gpu_test

int main(int argc, char** argv) {
  return nibble::gpu_test::run_reporting_failures(nibble::gpu_test::run, argc, argv);
}
