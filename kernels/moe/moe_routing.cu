// Device MoE routing (moe_routing.h): top-k per token (one warp each), then per-expert counts and
// the placement of the routed rows (one block per expert, a ballot scan in token order).
#include <cfloat>
#include <climits>
#include <cstdint>
#include <cstring>

#include <cuda_bf16.h>

#include "kernels/dependent_launch.cuh"
#include "kernels/moe/moe_route_device.cuh"
#include "kernels/moe/moe_routing.h"
#include "kernels/nvfp4/w4a16_gemm.h"

namespace nibble::kernels {
namespace {

using namespace moe_device;

constexpr int kRouteWarps = 4;  // tokens per block of the top-k kernel
constexpr int kPlaceThreads = 256;

// One warp routes token t: its k picks and weights to expert / weight [t, :] (and to
// shared_expert[t k + j] when given). Every lane of the warp calls it.
__device__ inline void route_token(const float* __restrict__ logits, int t, int experts, int k,
                                   MoeScoring scoring, std::int32_t* __restrict__ expert,
                                   float* __restrict__ weight, int* shared_expert) {
  const int lane = threadIdx.x % 32;
  float p[kPerLane];
  token_scores(logits, t, experts, !scoring.top_k_first, p);
  float mine_v;
  int mine_e;
  warp_argmax_picks(p, experts, k, mine_v, mine_e);
  // Every lane computes (the shuffles need the whole warp); lane j < k keeps pick j's.
  const float w =
      pick_weight(scoring, k, mine_v, [&](int j) { return __shfl_sync(0xFFFFFFFFu, mine_v, j); });
  if (lane < k) {
    expert[std::int64_t(t) * k + lane] = mine_e;
    weight[std::int64_t(t) * k + lane] = w;
    if (shared_expert != nullptr) shared_expert[t * k + lane] = mine_e;
  }
}

__global__ void __launch_bounds__(32 * kRouteWarps)
    top_k_kernel(const float* __restrict__ logits, int tokens, int experts, int k,
                 MoeScoring scoring, std::int32_t* __restrict__ expert, float* __restrict__ weight,
                 std::int32_t* __restrict__ clear, int clear_count) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < clear_count; i += gridDim.x * blockDim.x)
    clear[i] = 0;
  const int t = blockIdx.x * kRouteWarps + threadIdx.x / 32;
  if (t >= tokens) return;  // whole warps: the shuffles in route_token see full warps
  route_token(logits, t, experts, k, scoring, expert, weight, nullptr);
}

// counts[e] = routed rows of expert e (block e).
__global__ void __launch_bounds__(kPlaceThreads)
    count_kernel(const std::int32_t* __restrict__ expert, std::int64_t routed,
                 std::int32_t* __restrict__ counts) {
  const int e = blockIdx.x;
  int count = 0;
  for (std::int64_t base = 0; base < routed; base += kPlaceThreads) {
    const std::int64_t i = base + threadIdx.x;
    count += __syncthreads_count(i < routed && expert[i] == e);
  }
  if (threadIdx.x == 0) counts[e] = count;
}

// Block e: its offset and first row block from the counts before it, its row blocks (the last
// expert also writes the empty tail of the table), then its rows in (token, pick) order.
__global__ void __launch_bounds__(kPlaceThreads)
    place_kernel(const std::int32_t* __restrict__ expert, std::int64_t routed, int k,
                 const std::int32_t* __restrict__ counts, int block_rows, std::int64_t max_blocks,
                 std::int32_t* __restrict__ offsets, std::int32_t* __restrict__ token,
                 std::int32_t* __restrict__ source, MoeRowBlock* __restrict__ blocks) {
  constexpr int kWarps = kPlaceThreads / 32;
  __shared__ int warp_sums[2][kWarps];
  __shared__ int warp_counts[kWarps];
  const int e = blockIdx.x, experts = gridDim.x;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  int before = 0, blocks_before = 0;
  for (int f = threadIdx.x; f < e; f += kPlaceThreads) {
    before += counts[f];
    blocks_before += (counts[f] + block_rows - 1) / block_rows;
  }
#pragma unroll
  for (int o = 16; o > 0; o /= 2) {
    before += __shfl_xor_sync(0xFFFFFFFFu, before, o);
    blocks_before += __shfl_xor_sync(0xFFFFFFFFu, blocks_before, o);
  }
  if (lane == 0) {
    warp_sums[0][warp] = before;
    warp_sums[1][warp] = blocks_before;
  }
  __syncthreads();
  int offset = 0, first_block = 0;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) {
    offset += warp_sums[0][w];
    first_block += warp_sums[1][w];
  }
  const int count = counts[e];
  const int own_blocks = (count + block_rows - 1) / block_rows;
  if (threadIdx.x == 0) {
    offsets[e] = offset;
    if (e == experts - 1) offsets[experts] = offset + count;
  }
  for (int b = threadIdx.x; b < own_blocks; b += kPlaceThreads) {
    const int begin = offset + b * block_rows;
    const int end = begin + block_rows < offset + count ? begin + block_rows : offset + count;
    blocks[first_block + b] = MoeRowBlock{e, begin, end};
  }
  if (e == experts - 1) {
    for (std::int64_t b = first_block + own_blocks + threadIdx.x; b < max_blocks;
         b += kPlaceThreads)
      blocks[b] = MoeRowBlock{-1, 0, 0};
  }
  if (count == 0) return;  // the whole block: count is the same for every thread

  const unsigned below = (1u << lane) - 1u;
  int placed = 0;
  for (std::int64_t base = 0; base < routed; base += kPlaceThreads) {
    const std::int64_t i = base + threadIdx.x;
    const bool match = i < routed && expert[i] == e;
    const unsigned ballot = __ballot_sync(0xFFFFFFFFu, match);
    if (lane == 0) warp_counts[warp] = __popc(ballot);
    __syncthreads();
    int ahead = placed;  // this block's rows before this thread's
    int chunk = 0;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      ahead += w < warp ? warp_counts[w] : 0;
      chunk += warp_counts[w];
    }
    if (match) {
      const int row = offset + ahead + __popc(ballot & below);
      token[row] = int(i / k);
      source[i] = row;
    }
    placed += chunk;
    __syncthreads();  // warp_counts is rewritten by the next chunk
  }
}

// Small steps (decode): everything in one block of 32 warps, one launch instead of three. The
// routed picks stay in shared memory; counts by shared-memory atomics (integer sums: any order
// gives the same counts); offsets and first row blocks by one warp's scan; then warp w places the
// rows of experts w, w + 32, ... with the same ballot scan in (token, pick) order as place_kernel,
// so the results are those of the three-kernel path.
constexpr int kOneBlockWarps = 32;
constexpr int kOneBlockMaxRouted = 1024;  // routed rows; ballot passes per warp: E / 32 x 32

constexpr int kRankMaxPairs =
    8192;  // tokens x experts: 32 KB of probabilities (T <= 64 at E = 128)

// The whole routing by one block of `warps` warps (every thread of the block calls it); the results
// do not depend on the number of warps. tokens k <= MAX_ROUTED; the rank path when tokens x
// experts <= MAX_PAIRS.
template <int MAX_ROUTED = kOneBlockMaxRouted, int MAX_PAIRS = kRankMaxPairs>
__device__ __forceinline__ void route_in_block(
    const float* __restrict__ logits, int tokens, int experts, int k, MoeScoring scoring,
    int block_rows, int max_blocks, std::int32_t* __restrict__ expert, float* __restrict__ weight,
    std::int32_t* __restrict__ counts, std::int32_t* __restrict__ offsets,
    std::int32_t* __restrict__ token, std::int32_t* __restrict__ source,
    MoeRowBlock* __restrict__ blocks) {
  __shared__ int picks[MAX_ROUTED];
  __shared__ int count_s[kMoeMaxExperts], offset_s[kMoeMaxExperts], first_block_s[kMoeMaxExperts];
  __shared__ int total_blocks;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  const int routed = tokens * k;
  for (int e = threadIdx.x; e < experts; e += blockDim.x) count_s[e] = 0;
  if (tokens * experts <= MAX_PAIRS) {
    rank_picks<MAX_ROUTED, MAX_PAIRS>(logits, tokens, experts, k, scoring, expert, weight, picks);
  } else {
    for (int t = warp; t < tokens; t += warps)
      route_token(logits, t, experts, k, scoring, expert, weight, picks);
  }
  __syncthreads();
  for (int i = threadIdx.x; i < routed; i += blockDim.x) atomicAdd(&count_s[picks[i]], 1);
  __syncthreads();
  if (warp == 0) {  // exclusive scans of the counts and of the row blocks, 32 experts a pass
    int carry = 0, carry_blocks = 0;
    for (int base = 0; base < experts; base += 32) {
      const int e = base + lane;
      const int c = e < experts ? count_s[e] : 0;
      const int b = (c + block_rows - 1) / block_rows;
      int sum = c, sum_blocks = b;
#pragma unroll
      for (int o = 1; o < 32; o *= 2) {
        const int up = __shfl_up_sync(0xFFFFFFFFu, sum, o);
        const int up_blocks = __shfl_up_sync(0xFFFFFFFFu, sum_blocks, o);
        if (lane >= o) {
          sum += up;
          sum_blocks += up_blocks;
        }
      }
      if (e < experts) {
        offset_s[e] = carry + sum - c;
        first_block_s[e] = carry_blocks + sum_blocks - b;
      }
      carry += __shfl_sync(0xFFFFFFFFu, sum, 31);
      carry_blocks += __shfl_sync(0xFFFFFFFFu, sum_blocks, 31);
    }
    if (lane == 0) {
      offsets[experts] = carry;
      total_blocks = carry_blocks;
    }
  }
  __syncthreads();
  for (int e = threadIdx.x; e < experts; e += blockDim.x) {
    counts[e] = count_s[e];
    offsets[e] = offset_s[e];
    const int end = offset_s[e] + count_s[e];
    for (int b = 0, begin = offset_s[e]; begin < end; ++b, begin += block_rows)
      blocks[first_block_s[e] + b] =
          MoeRowBlock{e, begin, begin + block_rows < end ? begin + block_rows : end};
  }
  for (int b = total_blocks + threadIdx.x; b < max_blocks; b += blockDim.x)
    blocks[b] = MoeRowBlock{-1, 0, 0};
  const unsigned below = (1u << lane) - 1u;
  for (int e = warp; e < experts; e += warps) {
    if (count_s[e] == 0) continue;  // the whole warp
    int placed = offset_s[e];
    for (int base = 0; base < routed; base += 32) {
      const int i = base + lane;
      const bool match = i < routed && picks[i] == e;
      const unsigned ballot = __ballot_sync(0xFFFFFFFFu, match);
      if (match) {
        const int row = placed + __popc(ballot & below);
        token[row] = i / k;
        source[i] = row;
      }
      placed += __popc(ballot);
    }
  }
}

__global__ void __launch_bounds__(32 * kOneBlockWarps)
    route_one_block_kernel(const float* __restrict__ logits, int tokens, int experts, int k,
                           MoeScoring scoring, int block_rows, int max_blocks,
                           std::int32_t* __restrict__ expert, float* __restrict__ weight,
                           std::int32_t* __restrict__ counts, std::int32_t* __restrict__ offsets,
                           std::int32_t* __restrict__ token, std::int32_t* __restrict__ source,
                           MoeRowBlock* __restrict__ blocks, std::int32_t* __restrict__ clear,
                           int clear_count) {
  allow_next_grid();  // the fused gate_up may be scheduled now; it waits for this launch's end
  // A dependent launch after the router linear (moe_router_route) waits for its logits here;
  // launched without the attribute, a no-op.
  wait_for_previous_grid();
  for (int i = threadIdx.x; i < clear_count; i += blockDim.x) clear[i] = 0;
  route_in_block(logits, tokens, experts, k, scoring, block_rows, max_blocks, expert, weight,
                 counts, offsets, token, source, blocks);
}

// The router linear (moe_router_route, moe_router_logits): block b computes the logits of
// experts kMoeRouterExpertsPerBlock b + s for every token, its threads over 16-byte pieces of the
// rows (moe_layout.h gives the summation order, the CPU reference's): at H = 2048 a thread takes
// one piece of each of its block's weight rows, so the 512 KB of Qwen3-30B-A3B's router spread
// over 64 blocks instead of 16 (8 KB a block, all in flight before the wait). moe_route's one-block
// kernel follows as a dependent launch.
constexpr int kSpreadWarps = kMoeRouterThreads / 32;
constexpr int kSpreadAhead = 2;  // pieces of each weight row a thread fetches before the wait

// The 8 products of a piece as fmas into 0, in column order (the CPU reference's order).
__device__ inline float dot8_fma(uint4 a, uint4 b) {
  const std::uint32_t wa[4] = {a.x, a.y, a.z, a.w}, wb[4] = {b.x, b.y, b.z, b.w};
  float sum = 0.0f;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    sum = __fmaf_rn(__uint_as_float(wa[i] << 16), __uint_as_float(wb[i] << 16), sum);
    sum =
        __fmaf_rn(__uint_as_float(wa[i] & 0xFFFF0000u), __uint_as_float(wb[i] & 0xFFFF0000u), sum);
  }
  return sum;
}

__global__ void __launch_bounds__(kMoeRouterThreads, 1)
    router_spread_kernel(const std::uint16_t* __restrict__ x, const std::uint16_t* __restrict__ w,
                         int tokens, int hidden, int experts,
                         const std::uint16_t* __restrict__ bias, float* __restrict__ logits) {
  constexpr int kE = kMoeRouterExpertsPerBlock, kT = kMoeRouterMaxTokens;
  __shared__ float warp_sums[kE][kT][kSpreadWarps];
  // The next launch (fused gate_up, or the route) may be scheduled now: it waits for this
  // launch's end before reading anything of it.
  allow_next_grid();
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int e0 = blockIdx.x * kE, pieces = hidden / 8;
  const std::uint16_t* rows[kE];
#pragma unroll
  for (int s = 0; s < kE; ++s) rows[s] = w + std::int64_t(e0 + s < experts ? e0 + s : 0) * hidden;
  // The weights need nothing from the kernel before (the layer's RMSNorm, a dependent launch):
  // the first kSpreadAhead pieces of each row are requested before waiting for it.
  uint4 ahead[kE][kSpreadAhead];
#pragma unroll
  for (int s = 0; s < kE; ++s) {
#pragma unroll
    for (int i = 0; i < kSpreadAhead; ++i) {
      const int p = int(threadIdx.x) + i * kMoeRouterThreads;
      ahead[s][i] = e0 + s < experts && p < pieces
                        ? __ldg(reinterpret_cast<const uint4*>(rows[s]) + p)
                        : make_uint4(0, 0, 0, 0);
    }
  }
  wait_for_previous_grid();
  float acc[kE][kT];
#pragma unroll
  for (int s = 0; s < kE; ++s) {
#pragma unroll
    for (int t = 0; t < kT; ++t) acc[s][t] = 0.0f;
  }
  // Piece p of every token's x (all requested before any is used: L2, written by the kernel
  // before), times the block's weight pieces.
  auto add_piece = [&](const uint4(&wv)[kE], int p) {
    uint4 xv[kT];
#pragma unroll
    for (int t = 0; t < kT; ++t)
      xv[t] = t < tokens ? __ldcg(reinterpret_cast<const uint4*>(x + std::int64_t(t) * hidden) + p)
                         : make_uint4(0, 0, 0, 0);
#pragma unroll
    for (int s = 0; s < kE; ++s) {
#pragma unroll
      for (int t = 0; t < kT; ++t) {
        if (t < tokens) acc[s][t] = __fadd_rn(acc[s][t], dot8_fma(wv[s], xv[t]));
      }
    }
  };
#pragma unroll
  for (int i = 0; i < kSpreadAhead; ++i) {
    const int p = int(threadIdx.x) + i * kMoeRouterThreads;
    if (p < pieces) {
      uint4 wv[kE];
#pragma unroll
      for (int s = 0; s < kE; ++s) wv[s] = ahead[s][i];
      add_piece(wv, p);
    }
  }
  for (int p = int(threadIdx.x) + kSpreadAhead * kMoeRouterThreads; p < pieces;
       p += kMoeRouterThreads) {
    uint4 wv[kE];
#pragma unroll
    for (int s = 0; s < kE; ++s)
      wv[s] = e0 + s < experts ? __ldg(reinterpret_cast<const uint4*>(rows[s]) + p)
                               : make_uint4(0, 0, 0, 0);
    add_piece(wv, p);
  }
  // Lanes by the xor butterfly, then the warps in order (moe_layout.h).
#pragma unroll
  for (int s = 0; s < kE; ++s) {
#pragma unroll
    for (int t = 0; t < kT; ++t) {
      if (t < tokens) {  // the same for the whole block
        float v = acc[s][t];
#pragma unroll
        for (int o = 16; o > 0; o /= 2) v = __fadd_rn(v, __shfl_xor_sync(0xFFFFFFFFu, v, o));
        if (lane == 0) warp_sums[s][t][warp] = v;
      }
    }
  }
  __syncthreads();
  if (threadIdx.x < kE * kT) {
    const int s = int(threadIdx.x) / kT, t = int(threadIdx.x) % kT;
    if (t < tokens && e0 + s < experts) {
      float sum = 0.0f;
#pragma unroll
      for (int v = 0; v < kSpreadWarps; ++v) sum = __fadd_rn(sum, warp_sums[s][t][v]);
      if (bias != nullptr)  // gpt-oss's router bias, after the sum (moe_layout.h)
        sum = __fadd_rn(sum, __bfloat162float(__ushort_as_bfloat16(bias[e0 + s])));
      logits[std::int64_t(t) * experts + e0 + s] = sum;
    }
  }
}

std::int64_t aligned(std::int64_t words) {
  return (words + 3) / 4 * 4;
}

}  // namespace

std::int64_t moe_routing_words(std::int64_t tokens, int experts, int k, int block_rows) {
  const std::int64_t routed = tokens * k;
  return 4 * aligned(routed) + aligned(experts) + aligned(experts + 1) +
         aligned(3 * moe_max_row_blocks(routed, experts, block_rows));
}

MoeRouting moe_routing_views(void* words, std::int64_t tokens, int experts, int k, int block_rows) {
  const std::int64_t routed = tokens * k;
  auto* at = static_cast<std::int32_t*>(words);
  auto take = [&](std::int64_t n) {
    std::int32_t* p = at;
    at += aligned(n);
    return p;
  };
  MoeRouting r;
  r.expert = take(routed);
  r.weight = reinterpret_cast<float*>(take(routed));
  r.counts = take(experts);
  r.offsets = take(experts + 1);
  r.token = take(routed);
  r.source = take(routed);
  r.blocks =
      reinterpret_cast<MoeRowBlock*>(take(3 * moe_max_row_blocks(routed, experts, block_rows)));
  return r;
}

cudaError_t moe_route(const float* logits, std::int64_t tokens, int experts, int k,
                      MoeScoring scoring, int block_rows, const MoeRouting& out,
                      cudaStream_t stream, std::int32_t* clear, std::int64_t clear_count) {
  if (tokens < 0 || experts < 1 || experts > kMoeMaxExperts || k < 1 || k > experts ||
      k > kMoeMaxTopK || block_rows < 1 || tokens * k > INT_MAX || clear_count < 0 ||
      clear_count > INT_MAX || (clear_count > 0 && clear == nullptr))
    return cudaErrorInvalidValue;
  if (tokens == 0) return cudaSuccess;
  const std::int64_t routed = tokens * k;
  const std::int64_t max_blocks = moe_max_row_blocks(routed, experts, block_rows);
  if (routed <= kOneBlockMaxRouted) {
    route_one_block_kernel<<<1, 32 * kOneBlockWarps, 0, stream>>>(
        logits, int(tokens), experts, k, scoring, block_rows, int(max_blocks), out.expert,
        out.weight, out.counts, out.offsets, out.token, out.source, out.blocks, clear,
        int(clear_count));
    return cudaGetLastError();
  }
  top_k_kernel<<<unsigned((tokens + kRouteWarps - 1) / kRouteWarps), 32 * kRouteWarps, 0, stream>>>(
      logits, int(tokens), experts, k, scoring, out.expert, out.weight, clear, int(clear_count));
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) return err;
  count_kernel<<<unsigned(experts), kPlaceThreads, 0, stream>>>(out.expert, routed, out.counts);
  err = cudaGetLastError();
  if (err != cudaSuccess) return err;
  place_kernel<<<unsigned(experts), kPlaceThreads, 0, stream>>>(
      out.expert, routed, k, out.counts, block_rows,
      moe_max_row_blocks(routed, experts, block_rows), out.offsets, out.token, out.source,
      out.blocks);
  return cudaGetLastError();
}

}  // namespace nibble::kernels

namespace nibble::kernels {
namespace {

// The router launches' configuration: dependent launches (kernels/dependent_launch.cuh) where
// `overlap` (MoeGroupedPlan::overlap), so the router's weights stream in while the kernel before
// finishes. Not copyable: the config points at the attribute.
struct RouterLaunch {
  cudaLaunchAttribute attribute{};
  cudaStream_t stream;
  bool overlap;
  RouterLaunch(cudaStream_t s, bool on) : stream(s), overlap(on) {
    attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attribute.val.programmaticStreamSerializationAllowed = 1;
  }
  RouterLaunch(const RouterLaunch&) = delete;
  RouterLaunch& operator=(const RouterLaunch&) = delete;
  cudaLaunchConfig_t config(int grid, int threads) const {
    cudaLaunchConfig_t c{};
    c.gridDim = dim3(unsigned(grid));
    c.blockDim = dim3(unsigned(threads));
    c.stream = stream;
    c.attrs = const_cast<cudaLaunchAttribute*>(&attribute);
    c.numAttrs = overlap ? 1 : 0;
    return c;
  }
};

}  // namespace

cudaError_t moe_router_route(const std::uint16_t* x, const std::uint16_t* router,
                             std::int64_t tokens, int hidden, int experts, int k,
                             MoeScoring scoring, int block_rows, float* logits,
                             const MoeRouting& out, cudaStream_t stream, std::int32_t* clear,
                             std::int64_t clear_count, bool overlap,
                             const std::uint16_t* router_bias) {
  if (tokens < 0 || tokens > kMoeRouterMaxTokens || hidden < 8 || hidden % 8 != 0 || experts < 1 ||
      experts > kMoeMaxExperts || k < 1 || k > experts || k > kMoeMaxTopK || block_rows < 1 ||
      clear_count < 0 || clear_count > INT_MAX || (clear_count > 0 && clear == nullptr) ||
      x == nullptr || router == nullptr || logits == nullptr ||
      reinterpret_cast<std::uintptr_t>(x) % 16 != 0 ||
      reinterpret_cast<std::uintptr_t>(router) % 16 != 0)
    return cudaErrorInvalidValue;
  if (tokens == 0) return cudaSuccess;
  cudaError_t err =
      moe_router_logits(x, router, tokens, hidden, experts, logits, stream, overlap, router_bias);
  if (err != cudaSuccess) return err;
  // The one-block routing as a dependent launch (it waits for the logits).
  const std::int64_t max_blocks = moe_max_row_blocks(tokens * k, experts, block_rows);
  const RouterLaunch launch(stream, overlap);
  const cudaLaunchConfig_t r = launch.config(1, 32 * kOneBlockWarps);
  err = cudaLaunchKernelEx(&r, route_one_block_kernel, static_cast<const float*>(logits),
                           int(tokens), experts, k, scoring, block_rows, int(max_blocks),
                           out.expert, out.weight, out.counts, out.offsets, out.token, out.source,
                           out.blocks, clear, int(clear_count));
  return err != cudaSuccess ? err : cudaGetLastError();
}

cudaError_t moe_router_logits(const std::uint16_t* x, const std::uint16_t* router,
                              std::int64_t tokens, int hidden, int experts, float* logits,
                              cudaStream_t stream, bool overlap, const std::uint16_t* router_bias) {
  if (tokens < 0 || tokens > kMoeRouterMaxTokens || hidden < 8 || hidden % 8 != 0 || experts < 1 ||
      experts > kMoeMaxExperts || x == nullptr || router == nullptr || logits == nullptr ||
      reinterpret_cast<std::uintptr_t>(x) % 16 != 0 ||
      reinterpret_cast<std::uintptr_t>(router) % 16 != 0)
    return cudaErrorInvalidValue;
  if (tokens == 0) return cudaSuccess;
  const RouterLaunch launch(stream, overlap);
  const cudaLaunchConfig_t c = launch.config(
      (experts + kMoeRouterExpertsPerBlock - 1) / kMoeRouterExpertsPerBlock, kMoeRouterThreads);
  const cudaError_t err = cudaLaunchKernelEx(&c, router_spread_kernel, x, router, int(tokens),
                                             hidden, experts, router_bias, logits);
  return err != cudaSuccess ? err : cudaGetLastError();
}

}  // namespace nibble::kernels
