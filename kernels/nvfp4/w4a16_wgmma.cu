// W4A16 GEMM for large M on Hopper's warpgroup MMA (sm_90a only): wgmma with the A operand from
// registers. The weights are A: each warp dequantises its 16 weight rows of a k16 step straight
// into the m16 x k16 register fragment (the same lane words and decode as the swapped 8-row
// tiles, w4a16_layout.h), and x is B, read by the tensor cores from the TMA's 128-byte-swizzled
// x box in shared memory (K-major, no ldmatrix). The wgmma runs asynchronously, so the decode of
// the next k step overlaps the tensor-core work of the current one. See w4a16_gemm.h
// (W4A16Tile::kWgmma128 / kWgmma256) and kernels/nvfp4/PERF_NOTES.md v21, v30.
//
// Block: 2 warpgroups (256 threads) on one 128-row weight group; warpgroup h owns weight rows
// 64h..64h+63, its warp q rows 16q..16q+15 (tiles 8h + 2q, 8h + 2q + 1): one m64 x BMX wgmma per
// k16 step, BMX = 128 or 256 rows of x (the wgmma N). Output tile = out[BMX x rows, 128 weight
// rows], staged through shared memory for coalesced stores. Stages: [x box BMX x 64 | 4 KB codes
// | 512 B scales], 1 KB aligned, filled by thread 0 with TMA and counted by one mbarrier each.
// Why BMX = 256 (one block an SM) beats two 128-row blocks an SM where the grid allows: the
// same tensor work with half the wgmma instructions and half the decode (a warp's 16 decoded
// registers feed a 256-column product instead of a 128-column one), and 11% fewer bytes into
// shared memory per FLOP (a 32 KB x box and 4.6 KB of weights a k step, against twice 16 + 4.6
// KB). PERF_NOTES v30: the tensor pipe busy 68% of gate_up's time at M = 256, against 58%.
#include <cooperative_groups.h>

#include <type_traits>

#include "kernels/dependent_launch.cuh"
#include "kernels/nvfp4/tma.cuh"
#include "kernels/nvfp4/w4a16_device.cuh"
#include "kernels/nvfp4/w4a16_gemm.h"

namespace nibble::kernels {
namespace {

using namespace w4a16_detail;

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define NIBBLE_HAVE_WGMMA 1
#endif

template <int BMX_, int STAGES_, int MIN_BLOCKS_>
struct WgmmaShape {
  static constexpr int BMX = BMX_;  // rows of x per block (the wgmma's N)
  static constexpr int THREADS = 256, STAGES = STAGES_;
  static constexpr int X_BYTES = BMX * 128, W_BYTES = 4096, S_BYTES = 512;
  static constexpr int STAGE_BYTES = (X_BYTES + W_BYTES + S_BYTES + 1023) / 1024 * 1024;
  static constexpr int SMEM = STAGE_BYTES * STAGES + 1024;  // + slack to align the base to 1 KB
  static constexpr int MIN_BLOCKS = MIN_BLOCKS_;
  static constexpr int BN = 128;  // weight rows per block
  // The output tile as floats [BMX][kOutStride]: BN + 4 puts the 8 rows x 4 column pairs of one
  // store on 32 different banks.
  static constexpr int kOutStride = BN + 4;
  static_assert(BMX * kOutStride * 4 <= STAGE_BYTES * STAGES, "the output tile fits the stages");
  static_assert(BMX == 128 || BMX == 256, "wgmma N of 128 or 256 (the shapes written out here)");
  static_assert(SMEM <= 227 * 1024, "fits one Hopper block");
};
using Wgmma128 = WgmmaShape<128, 4, 2>;  // 128 x 128, 87 KB, 2 blocks/SM, 122 registers
using Wgmma256 = WgmmaShape<256, 5, 1>;  // 256 rows of x, 186 KB, 1 block/SM, 186 registers

#if defined(NIBBLE_HAVE_WGMMA)
// Accumulators d[i] .. d[i + 7] / d[i + 31] as "+f" asm operands, in order (the wgmma wrappers
// below list 64 or 128).
#define NIBBLE_WGMMA_ACC8(d, i)                                                               \
  "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), \
      "+f"(d[i + 6]), "+f"(d[i + 7])
#define NIBBLE_WGMMA_ACC32(d, i)                                                      \
  NIBBLE_WGMMA_ACC8(d, i), NIBBLE_WGMMA_ACC8(d, i + 8), NIBBLE_WGMMA_ACC8(d, i + 16), \
      NIBBLE_WGMMA_ACC8(d, i + 24)

__device__ inline void wgmma_m64n128k16_rs(float (&d)[64], const std::uint32_t (&a)[4],
                                           std::uint64_t b_desc) {
  asm volatile(
      "{\n .reg .pred p;\n setp.ne.b32 p, %69, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
      "{"
      "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,"
      "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,"
      "%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,"
      "%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63"
      "}, {%64,%65,%66,%67}, %68, p, 1, 1, 0;\n"
      "}\n"
      : NIBBLE_WGMMA_ACC32(d, 0), NIBBLE_WGMMA_ACC32(d, 32)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b_desc), "r"(1));
}

__device__ inline void wgmma_m64n256k16_rs(float (&d)[128], const std::uint32_t (&a)[4],
                                           std::uint64_t b_desc) {
  asm volatile(
      "{\n .reg .pred p;\n setp.ne.b32 p, %133, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 "
      "{"
      "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,"
      "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,"
      "%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,"
      "%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63,"
      "%64,%65,%66,%67,%68,%69,%70,%71,%72,%73,%74,%75,%76,%77,%78,%79,"
      "%80,%81,%82,%83,%84,%85,%86,%87,%88,%89,%90,%91,%92,%93,%94,%95,"
      "%96,%97,%98,%99,%100,%101,%102,%103,%104,%105,%106,%107,%108,%109,%110,%111,"
      "%112,%113,%114,%115,%116,%117,%118,%119,%120,%121,%122,%123,%124,%125,%126,%127"
      "}, {%128,%129,%130,%131}, %132, p, 1, 1, 0;\n"
      "}\n"
      : NIBBLE_WGMMA_ACC32(d, 0), NIBBLE_WGMMA_ACC32(d, 32), NIBBLE_WGMMA_ACC32(d, 64),
        NIBBLE_WGMMA_ACC32(d, 96)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b_desc), "r"(1));
}
// The wgmma of one k16 step for a BMX-row x box (the wgmma's N).
template <int BMX>
__device__ inline void wgmma_rs(float (&d)[BMX / 2], const std::uint32_t (&a)[4],
                                std::uint64_t b_desc) {
  if constexpr (BMX == 256) {
    wgmma_m64n256k16_rs(d, a, b_desc);
  } else {
    wgmma_m64n128k16_rs(d, a, b_desc);
  }
}

__device__ inline void wgmma_fence() {
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
__device__ inline void wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
template <int N>
__device__ inline void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}

// Shared-memory matrix descriptor of a K-major operand in the 128-byte swizzle (rows of 128
// bytes, 8-row atoms of 1 KB, the layout the TMA writes): start address >> 4, leading byte offset
// 16 (unused by this swizzle), stride byte offset 1024 (between 8-row atoms), swizzle mode 1 =
// 128 B. A k16 step inside the 64-column box starts 32 bytes further (the hardware applies the
// swizzle to the full address, so the atom base must be 1 KB aligned).
__device__ inline std::uint64_t sw128_kmajor_desc(unsigned smem_address) {
  return std::uint64_t((smem_address & 0x3FFFFu) >> 4) | (std::uint64_t(16 >> 4) << 16) |
         (std::uint64_t(1024 >> 4) << 32) | (std::uint64_t(1) << 62);
}
#endif

// CLUSTER: the K splits of an output tile are the blocks of one (1, 1, splits) cluster (<= 8): each
// leaves its partial tile in its own shared memory and block r of the cluster sums rows r, r +
// splits, ... of the tile across the cluster through distributed shared memory (splits in rank
// order) and writes them: no workspace, no atomics, no re-zeroing pass (PERF_NOTES v23).
template <class S, bool CLUSTER = false>
__global__ void __launch_bounds__(S::THREADS, S::MIN_BLOCKS)
    wgmma_kernel(std::int64_t m, std::int64_t n, const std::uint8_t* __restrict__ tiles,
                 const std::uint8_t* __restrict__ scales, int tiles_k, W4A16Strides strides,
                 float out_scale, const std::uint16_t* __restrict__ residual,
                 std::uint16_t* __restrict__ out, float* __restrict__ workspace, int kt_per_split,
                 bool early_weights, const __grid_constant__ CUtensorMap x_map) {
#if defined(NIBBLE_HAVE_WGMMA)
  extern __shared__ __align__(128) std::uint8_t smem_raw[];
  __shared__ __align__(8) std::uint64_t stage_full[S::STAGES];
  std::uint8_t* smem = smem_raw + ((1024 - (__cvta_generic_to_shared(smem_raw) & 1023)) & 1023);
  const unsigned smem_base = unsigned(__cvta_generic_to_shared(smem));
  const unsigned bars = unsigned(__cvta_generic_to_shared(stage_full));
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int wg = warp / 4, wq = warp % 4;  // warpgroup, warp in it
  const OutputTile tile = output_tile(kRasterBand);
  const std::int64_t m0 = std::int64_t(tile.row) * S::BMX, n0 = std::int64_t(tile.col) * S::BN;
  const std::int64_t w_stride = strides.kt * 4096;
  // Split K (grid z): this block's k steps [kt_begin, kt_begin + nk).
  const int kt_begin = int(blockIdx.z) * kt_per_split;
  const int nk = tiles_k - kt_begin < kt_per_split ? tiles_k - kt_begin : kt_per_split;

  // Thread 0 fills stage st with this block's k step `local`: the x box, the weight group's codes
  // and scales, one barrier for the three.
  auto expect = [&](int st) {
    tma::mbarrier_arrive_expect_bytes(bars + 8 * st, S::X_BYTES + S::W_BYTES + S::S_BYTES);
  };
  auto copy_x = [&](int st, int local) {
    const unsigned dst = smem_base + unsigned(st * S::STAGE_BYTES);
    tma::copy_box_2d(dst, &x_map, (kt_begin + local) * 64, int(m0), bars + 8 * st);
  };
  auto copy_weights = [&](int st, int local) {
    const unsigned bar = bars + 8 * st, dst = smem_base + unsigned(st * S::STAGE_BYTES);
    const std::int64_t at =
        std::int64_t(tile.col) * strides.group * 4096 + (kt_begin + local) * w_stride;
    tma::copy_bytes(dst + S::X_BYTES, tiles + at, 4096, bar);
    tma::copy_bytes(dst + S::X_BYTES + S::W_BYTES, scales + at / 8, 512, bar);
  };
  if (threadIdx.x == 0) {
    for (int st = 0; st < S::STAGES; ++st) tma::mbarrier_init(bars + 8 * st, 1);
    tma::fence_mbarrier_init();
    // The weights need nothing from the previous kernel: under programmatic dependent launch
    // they are on their way while it finishes; x only after it has. (Launched plainly, stage 0
    // fills first instead: its x box behind every stage's weights cost gate_up ~1 us.)
    for (int st = 0; st < S::STAGES && st < nk && early_weights; ++st) {
      expect(st), copy_weights(st, st);
    }
  }
  wait_for_previous_grid();  // x, residual, out and workspace are the previous kernel's
  // One kernel of a chain waits behind this one at a time: its blocks take the SMs this grid
  // leaves idle or frees, fetch their first weights and wait (dependent_launch.cuh).
  allow_next_grid();
  if (threadIdx.x == 0) {
    for (int st = 0; st < S::STAGES && st < nk; ++st) {
      if (!early_weights) expect(st);
      copy_x(st, st);
      if (!early_weights) copy_weights(st, st);
    }
  }
  __syncthreads();  // the barriers are initialized before anyone waits on them

  // f32 accumulators per thread: m64 x BMX per warpgroup.
  float acc[S::BMX / 2];
#pragma unroll
  for (int i = 0; i < S::BMX / 2; ++i) acc[i] = 0.0f;
  // This lane's 8 bytes of its two tiles, and their scales (w4a16_layout.h).
  const int tile0 = wg * 8 + wq * 2;
  const int code_off = S::X_BYTES + tile0 * 256 + lane * 8;
  const int scale_off = S::X_BYTES + S::W_BYTES + tile0 * 32 + (lane / 4) * 4;
  // The A fragments of two k steps: those of step i stay untouched until its wgmmas are done
  // (wgmma_wait<1> in step i + 1), while step i + 1 decodes into the other set.
  std::uint32_t a[2][4][4];
  auto k_step = [&](auto parity, int i) {
    constexpr int P = decltype(parity)::value;
    const int st = i % S::STAGES;
    tma::mbarrier_wait(bars + 8 * st, unsigned(i / S::STAGES) & 1u);
    const std::uint8_t* stage = smem + st * S::STAGE_BYTES;
    const std::uint8_t* codes = stage + code_off;
    const std::uint8_t* sc = stage + scale_off;
    const uint2 codes0 = *reinterpret_cast<const uint2*>(codes);
    const uint2 codes1 = *reinterpret_cast<const uint2*>(codes + 256);
    const std::uint32_t sc0 = *reinterpret_cast<const std::uint32_t*>(sc);
    const std::uint32_t sc1 = *reinterpret_cast<const std::uint32_t*>(sc + 32);
    const std::uint32_t s0_01 = e4m3x2_to_scaled_bf16x2(sc0),
                        s0_23 = e4m3x2_to_scaled_bf16x2(sc0 >> 16);
    const std::uint32_t s1_01 = e4m3x2_to_scaled_bf16x2(sc1),
                        s1_23 = e4m3x2_to_scaled_bf16x2(sc1 >> 16);
#pragma unroll
    for (int s = 0; s < 4; ++s) {
      // Rows g (tile0) and g + 8 (tile0 + 1): a0 / a2 and a1 / a3 of the m16 x k16 fragment.
      decode_fragment_pair(codes0, s0_01, s0_23, s, a[P][s][0], a[P][s][2]);
      decode_fragment_pair(codes1, s1_01, s1_23, s, a[P][s][1], a[P][s][3]);
    }
    // Every input of the four wgmmas is ready before the first: a register defined between them
    // makes ptxas serialize the wgmmas (C7513).
    const unsigned x_box = smem_base + unsigned(st * S::STAGE_BYTES);
    std::uint64_t desc[4];
#pragma unroll
    for (int s = 0; s < 4; ++s) desc[s] = sw128_kmajor_desc(x_box + s * 32);
    wgmma_fence();  // the A registers were just written
#pragma unroll
    for (int s = 0; s < 4; ++s) wgmma_rs<S::BMX>(acc, a[P][s], desc[s]);
    wgmma_commit();
    // Step i - 1's wgmmas are done: its stage and A set are free.
    wgmma_wait<1>();
    __syncthreads();  // both warpgroups are past step i - 1
    if (threadIdx.x == 0 && i >= 1 && i - 1 + S::STAGES < nk) {
      const int st = (i - 1) % S::STAGES, local = i - 1 + S::STAGES;
      expect(st), copy_x(st, local), copy_weights(st, local);
    }
  };
  // Pairs of k steps (the two A sets by parity), then an odd last one. (A k step under a branch
  // inside the loop made ptxas serialize every wgmma, C7513.)
  int i = 0;
  for (; i + 1 < nk; i += 2) {
    k_step(std::integral_constant<int, 0>{}, i);
    k_step(std::integral_constant<int, 1>{}, i + 1);
  }
  if (i < nk) k_step(std::integral_constant<int, 0>{}, i);
  wgmma_wait<0>();
  __syncthreads();  // every stage is consumed: the output tile may overwrite them

  // acc[4j + e]: weight row g (+8 for e >= 2) of this warp's 16, x row 8j + 2t + (e & 1).
  float* staged = reinterpret_cast<float*>(smem);  // [BMX][kOutStride]
  const int g = lane / 4, t = lane % 4;
  const int w_row = wg * 64 + wq * 16 + g;
#pragma unroll
  for (int j = 0; j < S::BMX / 8; ++j) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      staged[(8 * j + 2 * t + (e & 1)) * S::kOutStride + w_row + (e >> 1) * 8] = acc[4 * j + e];
    }
  }
  __syncthreads();
  // Each pass takes one x row's BN outputs, 4 per thread.
  constexpr int kItems = S::BN / 4;
  const int rows = int(m - m0 < S::BMX ? m - m0 : S::BMX);
  const bool vec = n % 4 == 0 && (reinterpret_cast<std::uintptr_t>(out) & 7) == 0;
  // Scaled outputs q[0..cols) of row `row`, columns col.., plus the residual, to BF16 in `out`.
  auto store = [&](std::int64_t row, std::int64_t col, int cols, float(&q)[4]) {
    std::uint16_t h[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      if (residual != nullptr && i < cols) {
        q[i] += __bfloat162float(__ushort_as_bfloat16(residual[row * n + col + i]));
      }
      h[i] = __bfloat16_as_ushort(__float2bfloat16_rn(q[i]));
    }
    if (vec && cols == 4) {
      *reinterpret_cast<uint2*>(out + row * n + col) =
          make_uint2(h[0] | (std::uint32_t(h[1]) << 16), h[2] | (std::uint32_t(h[3]) << 16));
    } else {
      for (int i = 0; i < cols; ++i) out[row * n + col + i] = h[i];
    }
  };
  if constexpr (CLUSTER) {
    namespace cg = cooperative_groups;
    cg::cluster_group cluster = cg::this_cluster();
    cluster.sync();  // every split's partial tile is staged
    const int parts = int(cluster.num_blocks()), rank = int(cluster.block_rank());
    const int my_rows = rows > rank ? (rows - rank + parts - 1) / parts : 0;
    // Four items a thread at a time, every peer's four loads in flight together: one at a time,
    // each pass waited a distributed-shared-memory round trip per peer.
    constexpr int kUnroll = 4;
    const int items = my_rows * kItems;
    for (int first = threadIdx.x; first < items; first += kUnroll * S::THREADS) {
      float4 v[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) v[u] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      for (int b = 0; b < parts; ++b) {
        float4 p[kUnroll];
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
          const int idx = first + u * S::THREADS;
          const int r = rank + (idx / kItems) * parts, c = (idx % kItems) * 4;
          p[u] = idx < items ? *reinterpret_cast<const float4*>(
                                   cluster.map_shared_rank(staged + r * S::kOutStride + c, b))
                             : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        }
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
          v[u].x += p[u].x, v[u].y += p[u].y, v[u].z += p[u].z, v[u].w += p[u].w;
        }
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int idx = first + u * S::THREADS;
        const int r = rank + (idx / kItems) * parts, c = (idx % kItems) * 4;
        const std::int64_t row = m0 + r, col = n0 + c;
        if (idx >= items || col >= n) continue;
        float q[4] = {v[u].x * out_scale, v[u].y * out_scale, v[u].z * out_scale,
                      v[u].w * out_scale};
        store(row, col, n - col < 4 ? int(n - col) : 4, q);
      }
    }
    cluster.sync();  // the peers' tiles stay until every block has read them
    return;
  }
  if (workspace != nullptr) {
    // Split K: add the partial tile into the workspace (16-byte reds where n allows); the last
    // block of this output tile then writes it out and leaves the workspace zero.
    for (int idx = threadIdx.x; idx < rows * kItems; idx += S::THREADS) {
      const int r = idx / kItems, c = (idx % kItems) * 4;
      const std::int64_t row = m0 + r, col = n0 + c;
      if (col >= n) continue;
      const float4 v = *reinterpret_cast<const float4*>(staged + r * S::kOutStride + c);
      float* at = workspace + row * n + col;
      if (n % 4 == 0) {
        atomicAdd(reinterpret_cast<float4*>(at),
                  make_float4(v.x * out_scale, v.y * out_scale, v.z * out_scale, v.w * out_scale));
      } else {
        const float q[4] = {v.x, v.y, v.z, v.w};
        for (int i = 0; i < 4 && col + i < n; ++i) atomicAdd(at + i, q[i] * out_scale);
      }
    }
    unsigned* counter =
        reinterpret_cast<unsigned*>(workspace + m * n) + tile.row * gridDim.x + tile.col;
    if (!last_split_to_arrive(counter)) return;
  }
  for (int idx = threadIdx.x; idx < rows * kItems; idx += S::THREADS) {
    const int r = idx / kItems, c = (idx % kItems) * 4;
    const std::int64_t row = m0 + r, col = n0 + c;
    if (col >= n) continue;
    const int cols = n - col < 4 ? int(n - col) : 4;
    float q[4];
    if (workspace == nullptr) {
      const float4 v = *reinterpret_cast<const float4*>(staged + r * S::kOutStride + c);
      q[0] = v.x * out_scale, q[1] = v.y * out_scale, q[2] = v.z * out_scale,
      q[3] = v.w * out_scale;
    } else {
      // The summed tile (already scaled); re-zeroed for the next call.
      float* at = workspace + row * n + col;
      for (int i = 0; i < 4; ++i) {
        q[i] = i < cols ? __ldcg(at + i) : 0.0f;
        if (i < cols) __stcg(at + i, 0.0f);
      }
    }
    store(row, col, cols, q);
  }
  if (workspace != nullptr && threadIdx.x == 0) {
    *(reinterpret_cast<unsigned*>(workspace + m * n) + tile.row * gridDim.x + tile.col) = 0;
  }
#endif
}

// The most (1, 1, splits) clusters of S's blocks resident at once (once per splits; 0 where none
// fits). Fewer than SM slots / splits where the GPCs' SM counts leave slots no cluster can take:
// 62 clusters of four 128 x 128 blocks on an H200's 132 SMs (ncu, PERF_NOTES v28), so the 64 tiles
// of o and down at M = 256 split 4 ways ran as a wave of 62 and a tail of 2.
template <class S>
int max_clusters(int splits) {
  static int clusters[9] = {-1, -1, -1, -1, -1, -1, -1, -1, -1};
  if (splits < 2 || splits > 8) return 0;
  if (clusters[splits] < 0) {
    LaunchWithOverlap with(dim3(1, 1, unsigned(splits)), S::THREADS, S::SMEM, nullptr, false);
    with.cluster(1, 1, unsigned(splits));
    int count = 0;
    if (cudaFuncSetAttribute(wgmma_kernel<S, true>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             S::SMEM) != cudaSuccess ||
        cudaOccupancyMaxActiveClusters(&count, wgmma_kernel<S, true>, &with.config) !=
            cudaSuccess) {
      count = 0;
    }
    (void)cudaGetLastError();
    clusters[splits] = count;
  }
  return clusters[splits];
}

template <class S>
cudaError_t launch(const std::uint16_t* x, std::int64_t m, const W4A16DeviceWeight& w,
                   const std::uint16_t* residual, std::uint16_t* out, int splits, float* workspace,
                   cudaStream_t stream, bool overlap, bool cluster_sum) {
  static const cudaError_t attribute_err = [] {
    cudaError_t err = cudaFuncSetAttribute(wgmma_kernel<S, false>,
                                           cudaFuncAttributeMaxDynamicSharedMemorySize, S::SMEM);
    if (err == cudaSuccess)
      err = cudaFuncSetAttribute(wgmma_kernel<S, true>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 S::SMEM);
    return err;
  }();
  if (attribute_err != cudaSuccess) return attribute_err;
  const std::int64_t tiles_k = w.k_padded / 64;
  const std::int64_t row_tiles = (m + S::BMX - 1) / S::BMX;
  if (tiles_k > 0x7FFFFFFF / 64 || row_tiles > 65535) return cudaErrorInvalidValue;
  CUtensorMap x_map{};
  const cudaError_t map_err = tma::cached_bf16_rows_map<S::BMX>(&x_map, x, m, w.k);
  if (map_err != cudaSuccess) return map_err;
  const int kt_per_split = whole_step_splits(tiles_k, &splits);  // as the other tiles
  const std::int64_t groups = w.n_padded / 128;
  const dim3 grid{unsigned(groups), unsigned(row_tiles), unsigned(splits)};
  const bool cluster = splits > 1 && cluster_sum && max_clusters<S>(splits) > 0;
  if (splits > 1 && !cluster && workspace == nullptr) return cudaErrorInvalidValue;
  LaunchWithOverlap with(grid, S::THREADS, S::SMEM, stream, overlap);
  if (cluster) with.cluster(1, 1, unsigned(splits));
  const cudaError_t err = cudaLaunchKernelEx(
      &with.config, cluster ? wgmma_kernel<S, true> : wgmma_kernel<S, false>, m, w.n, w.tiles,
      w.scales, int(tiles_k), w4a16_strides(w), w.global_factor * 1024.0f, residual, out,
      splits > 1 && !cluster ? workspace : nullptr, kt_per_split, overlap, x_map);
  return err != cudaSuccess ? err : cudaGetLastError();
}

}  // namespace

bool w4a16_wgmma_supported() {
  // Once per process (one device per engine process). The kernel body exists only in the sm_90a
  // image; on another device the launch would find no image or run an empty kernel.
  static const bool supported = [] {
    int device = 0, major = 0, minor = 0;
    if (cudaGetDevice(&device) != cudaSuccess ||
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess ||
        cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) != cudaSuccess) {
      return false;
    }
    cudaFuncAttributes attributes{};
    return major == 9 && minor == 0 &&
           cudaFuncGetAttributes(&attributes, wgmma_kernel<Wgmma128>) == cudaSuccess &&
           attributes.binaryVersion == 90;
  }();
  return supported;
}

int w4a16_wgmma_resident_blocks(W4A16Tile tile) {
  return tile == W4A16Tile::kWgmma256 ? Wgmma256::MIN_BLOCKS : Wgmma128::MIN_BLOCKS;
}

int w4a16_wgmma_max_clusters(W4A16Tile tile, int splits) {
  if (!w4a16_wgmma_supported()) return 0;
  switch (tile) {
    case W4A16Tile::kWgmma128:
      return max_clusters<Wgmma128>(splits);
    case W4A16Tile::kWgmma256:
      return max_clusters<Wgmma256>(splits);
    default:
      return 0;
  }
}

cudaError_t w4a16_wgmma_linear(const std::uint16_t* x, std::int64_t m, const W4A16DeviceWeight& w,
                               const std::uint16_t* residual, std::uint16_t* out, W4A16Tile tile,
                               int splits, float* workspace, cudaStream_t stream, bool overlap,
                               bool cluster_sum) {
  if (!w4a16_wgmma_supported()) return cudaErrorNotSupported;
  if ((reinterpret_cast<std::uintptr_t>(x) & 15) != 0 || w.k % 8 != 0) return cudaErrorInvalidValue;
  switch (tile) {
    case W4A16Tile::kWgmma128:
      return launch<Wgmma128>(x, m, w, residual, out, splits, workspace, stream, overlap,
                              cluster_sum);
    case W4A16Tile::kWgmma256:
      return launch<Wgmma256>(x, m, w, residual, out, splits, workspace, stream, overlap,
                              cluster_sum);
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace nibble::kernels
