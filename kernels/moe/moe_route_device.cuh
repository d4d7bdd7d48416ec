#pragma once
// Device pieces of the MoE routing (moe_routing.h) that other kernels run too: a token's
// scores (one warp), the top-k picks by rank and their weights (one block), and a single token's
// whole routing inside one block, which the grouped expert GEMMs compute for themselves at decode
// (kernels/nvfp4/w4a16_grouped.h W4A16GroupedRoute). All give moe_route's results bitwise.
// CUDA only (included by .cu files).
#include <cfloat>
#include <climits>
#include <cstdint>

#include "kernels/moe/moe_layout.h"

namespace nibble::kernels::moe_device {

inline constexpr int kPerLane = kMoeMaxExperts / 32;  // logits a lane holds

// (v, e) ranks above (cv, ce): higher score (probability or logit), then the lower expert id.
__device__ inline bool ranks_above(float v, int e, float cv, int ce) {
  return v > cv || (v == cv && e < ce);
}

// One warp: token t's scores, p[i] of expert lane + 32 i (entries past `experts` are not scores):
// its probabilities, or its logits as they are where the picks come first (MoeScoring::
// top_k_first). Every lane of the warp calls it.
__device__ inline void token_scores(const float* __restrict__ logits, int t, int experts,
                                    bool softmax, float (&p)[kPerLane]) {
  const int lane = threadIdx.x % 32;
  const float* row = logits + std::int64_t(t) * experts;
  float max = -FLT_MAX;
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) {
    const int e = lane + 32 * i;
    p[i] = e < experts ? __ldcg(row + e) : -FLT_MAX;  // L2: other blocks may have written it
    max = fmaxf(max, p[i]);
  }
  if (!softmax) return;
#pragma unroll
  for (int o = 16; o > 0; o /= 2) max = fmaxf(max, __shfl_xor_sync(0xFFFFFFFFu, max, o));
  // As the CPU's softmax: exp in float, the sum in double, the quotient rounded to float.
  double sum = 0.0;
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) {
    if (lane + 32 * i < experts) {
      p[i] = expf(p[i] - max);
      sum += double(p[i]);
    }
  }
#pragma unroll
  for (int o = 16; o > 0; o /= 2) sum += __shfl_xor_sync(0xFFFFFFFFu, sum, o);
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) {
    if (lane + 32 * i < experts) p[i] = float(double(p[i]) / sum);
  }
}

// Pick j's mixing weight from the k picked scores in pick order (value(j), j < k; v = value(j)),
// as the CPU computes it (engine/backend/moe_routing.cpp): top_k_first, a softmax over the k
// logits (the first pick is their maximum; exp in float, the sum in double in pick order, the
// quotient rounded to float); else the probability, divided by the float sum of the k in pick
// order when norm_topk_prob. Every lane of a warp calls it where value() shuffles.
template <class Value>
__device__ inline float pick_weight(MoeScoring scoring, int k, float v, const Value& value) {
  if (scoring.top_k_first) {
    const float max = value(0);
    double sum = 0.0;
    for (int j = 0; j < k; ++j) sum += double(expf(value(j) - max));
    return float(double(expf(v - max)) / sum);
  }
  float picked = 0.0f;
  for (int j = 0; j < k; ++j) picked += value(j);
  return scoring.norm_topk_prob ? v / picked : v;
}

// k rounds of a warp arg-max over p (p[i] is expert lane + 32 i's score; entries from `experts`
// on are never picked) in ranks_above order; lane j < k gets pick j (its score and id). A lane's
// candidate is always a real, untaken expert when it has one (even with NaN scores), so every
// pick is a valid id and no expert is picked twice (k <= experts, k <= 32). Every lane calls it.
__device__ inline void warp_argmax_picks(const float (&p)[kPerLane], int experts, int k,
                                         float& mine_v, int& mine_e) {
  const int lane = threadIdx.x % 32;
  unsigned taken = 0;
  mine_v = 0.0f;
  mine_e = 0;
  for (int j = 0; j < k; ++j) {
    float cv = -FLT_MAX;
    int ce = INT_MAX;
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) {
      const int e = lane + 32 * i;
      if (e < experts && !(taken & (1u << i)) && (ce == INT_MAX || ranks_above(p[i], e, cv, ce))) {
        cv = p[i];
        ce = e;
      }
    }
#pragma unroll
    for (int o = 16; o > 0; o /= 2) {
      const float ov = __shfl_xor_sync(0xFFFFFFFFu, cv, o);
      const int oe = __shfl_xor_sync(0xFFFFFFFFu, ce, o);
      if (oe != INT_MAX && (ce == INT_MAX || ranks_above(ov, oe, cv, ce))) {
        cv = ov;
        ce = oe;
      }
    }
    if (ce % 32 == lane) taken |= 1u << (ce / 32);
    if (lane == j) {
      mine_v = cv;
      mine_e = ce;
    }
  }
}

// Above this many experts rank_picks takes its picks by warp_argmax_picks: counting ranks costs
// experts^2 / threads comparisons a thread (512 experts: 2,048 a thread, in every one of the
// ~640 blocks of Qwen3-Next's decode MoE launch, ~5 of them an SM), the rounds k short chains
// in one warp a token. At 128 experts the ranks were measured the faster (Qwen3-30B-A3B: ~2.4
// us against ~550 cycles a round for k = 8; PERF_NOTES v4, v8).
inline constexpr int kRankPicksMaxExperts = 128;

// Small steps: the picks by rank instead of k rounds of a warp arg-max (a chain of ~550 cycles a
// round: k = 8 made the one-block route ~12 us at T = 1 on H200). A warp per token writes its
// scores to shared memory (a NaN probability as -1, a NaN logit as -Inf: below every other score,
// so the order stays total);
// then each (token, expert) pair counts the experts that rank above it (ranks_above: the same
// order as the arg-max rounds), and rank j < k is pick j; the weights then follow in pick order as
// in route_token. Every thread of the block calls it; picks[t k + j] gets the ids.
// MAX_ROUTED / MAX_PAIRS: the shared arrays' sizes (routed rows; tokens x experts of the rank
// path), smaller for the router kernels' T <= kMoeRouterMaxTokens. phase(0) once the
// probabilities are in shared memory, phase(1) once the ranks are (a dev timeline's marks).
struct NoPhaseMarks {
  __device__ void operator()(int) const {}
};
template <int MAX_ROUTED, int MAX_PAIRS, class PhaseMarks = NoPhaseMarks>
__device__ __forceinline__ void rank_picks(const float* __restrict__ logits, int tokens,
                                           int experts, int k, MoeScoring scoring,
                                           std::int32_t* __restrict__ expert,
                                           float* __restrict__ weight, int* picks,
                                           const PhaseMarks& phase = {}) {
  __shared__ float prob_s[MAX_PAIRS];
  __shared__ float pick_prob_s[MAX_ROUTED];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  const bool by_rounds = experts > kRankPicksMaxExperts;
  // A NaN score keeps its weight: the logit read again, or the probability's -1 turned back.
  const auto pick_prob = [&](int t, int e, float v) {
    return scoring.top_k_first ? __ldcg(logits + std::int64_t(t) * experts + e)
           : v == -1.0f        ? NAN
                               : v;
  };
  for (int t = warp; t < tokens; t += warps) {
    float p[kPerLane];
    token_scores(logits, t, experts, !scoring.top_k_first, p);
    const float nan_rank = scoring.top_k_first ? -INFINITY : -1.0f;
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) {
      const int e = lane + 32 * i;
      p[i] = isnan(p[i]) ? nan_rank : p[i];
      if (e < experts && !by_rounds) prob_s[t * experts + e] = p[i];
    }
    if (by_rounds) {  // the same total order as the ranks below, so the same picks
      float v;
      int e;
      warp_argmax_picks(p, experts, k, v, e);
      if (lane < k) {
        picks[t * k + lane] = e;
        pick_prob_s[t * k + lane] = pick_prob(t, e, v);
      }
    }
  }
  __syncthreads();
  phase(0);
  for (int pair = threadIdx.x; !by_rounds && pair < tokens * experts; pair += blockDim.x) {
    const int t = pair / experts, e = pair % experts;
    const float* row = prob_s + t * experts;
    const float v = row[e];
    int rank = 0;
#pragma unroll 8
    for (int f = 0; f < experts; ++f) rank += ranks_above(row[f], f, v, e) ? 1 : 0;
    if (rank < k) {
      picks[t * k + rank] = e;
      pick_prob_s[t * k + rank] = pick_prob(t, e, v);
    }
  }
  __syncthreads();
  phase(1);
  for (int i = threadIdx.x; i < tokens * k; i += blockDim.x) {
    const float* picked = pick_prob_s + (i / k) * k;
    expert[i] = picks[i];
    weight[i] = pick_weight(scoring, k, pick_prob_s[i], [&](int j) { return picked[j]; });
  }
}

// One token's routing, as route_in_block writes it for T = 1 (then every pick is its own row
// block of one row, in expert order): pick j (rank order) is expert[j] with weight[j] and sits in
// routed row source[j] = the number of picks with a lower id; row block r is the r-th picked id.
struct SingleTokenRoute {
  int expert[kMoeMaxTopK];
  float weight[kMoeMaxTopK];
  int source[kMoeMaxTopK];
  int token[kMoeMaxTopK];           // routed row -> token: all 0
  MoeRowBlock blocks[kMoeMaxTopK];  // entries k.. hold no expert
};

// Every thread of the block calls it (>= 32 threads); `route` in shared memory, complete on return.
template <class PhaseMarks = NoPhaseMarks>
__device__ __forceinline__ void route_single_token(const float* __restrict__ logits, int experts,
                                                   int k, MoeScoring scoring,
                                                   SingleTokenRoute& route,
                                                   const PhaseMarks& phase = {}) {
  __shared__ int picks[kMoeMaxTopK];
  rank_picks<kMoeMaxTopK, kMoeMaxExperts>(logits, 1, experts, k, scoring, route.expert,
                                          route.weight, picks, phase);
  __syncthreads();
  const int j = int(threadIdx.x);
  if (j < kMoeMaxTopK) {
    route.token[j] = 0;
    if (j >= k) route.blocks[j] = MoeRowBlock{-1, 0, 0};
  }
  if (j < k) {
    const int e = picks[j];
    int row = 0;
    for (int i = 0; i < k; ++i) row += picks[i] < e ? 1 : 0;
    route.source[j] = row;
    route.blocks[row] = MoeRowBlock{e, row, row + 1};
  }
  __syncthreads();
}

// The routing arrays moe_route would write for this token (MoeRouting of T = 1, its row-block
// table k entries long), from one block.
__device__ __forceinline__ void write_single_token_route(const SingleTokenRoute& route, int experts,
                                                         int k, const MoeRouting& out) {
  for (int e = int(threadIdx.x); e <= experts; e += int(blockDim.x)) {
    int below = 0, count = 0;
    for (int j = 0; j < k; ++j) {
      below += route.expert[j] < e ? 1 : 0;
      count += route.expert[j] == e ? 1 : 0;
    }
    out.offsets[e] = below;
    if (e < experts) out.counts[e] = count;
  }
  const int j = int(threadIdx.x);
  if (j < k) {
    out.expert[j] = route.expert[j];
    out.weight[j] = route.weight[j];
    out.source[j] = route.source[j];
    out.token[j] = 0;
    out.blocks[j] = route.blocks[j];
  }
}

}  // namespace nibble::kernels::moe_device
