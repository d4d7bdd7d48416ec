#include <cooperative_groups.h>

#include <array>
#include <cmath>
#include <cstdint>

#include "kernels/sampling/sample_rows_split.h"
#include "kernels/sampling/sampling_device.cuh"

namespace nibble::kernels {
namespace {

using namespace sampling_math;
using namespace sampling_device;

constexpr int kUnroll = 4;  // float4 loads a thread keeps in flight (64 KB a block)
constexpr unsigned kFull = 0xffffffffu;

// Every block of a row's cluster runs the same sequence of reductions, so the alternating slots
// (slot/hist parity) agree across blocks; a slot is rewritten two reductions later, after a
// cluster barrier every reader of it has passed.
struct SplitShared {
  unsigned long long hist[2][kBins];  // this block's histogram of a select pass
  unsigned long long total[kBins];    // the cluster's histogram
  unsigned long long warp_u64[kWarps];
  float warp_m[kWarps], warp_s[kWarps];
  unsigned long long slot[2][3];  // this block's partial of a cluster reduction
  unsigned long long result[3];   // the cluster's answer, broadcast in the block
  unsigned long long select_target;
  unsigned int select_prefix;
  int top_count;
  RawTop top[kMaxSampledTopLogprobs];
};

// The block's place in its row's cluster and the parity counters of the alternating slots.
struct Split {
  int rank;
  int size;
  int g0, g1;  // the block's Philox groups [g0, g1): tokens [4 g0, min(4 g1, vocab))
  unsigned phase;
  unsigned hist_phase;
};

__device__ __forceinline__ void cluster_barrier(const Split& c) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (c.size > 1) {
    // Release/acquire at cluster scope: shared and global writes before it are visible after it.
    cooperative_groups::this_cluster().sync();
    return;
  }
#endif
  __syncthreads();
}

__device__ __forceinline__ const SplitShared* at_rank(SplitShared& sh, const Split& c, int rank) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (c.size > 1) return cooperative_groups::this_cluster().map_shared_rank(&sh, rank);
#endif
  (void)c;
  (void)rank;
  return &sh;
}

// Calls f(g, v, n) for each of the block's groups g, v its 4 logits, n how many of them exist
// (0: a padding call). Every thread makes the same number of calls, so f may use warp intrinsics
// over the full warp. kUnroll groups' loads are issued before any is used.
template <typename F>
__device__ __forceinline__ void for_each_group(const Split& c, const float* x, int vocab,
                                               bool vector_loads, F f) {
  const int span = c.g1 - c.g0;
  for (int base = 0; base < span; base += kThreads * kUnroll) {
    float v[kUnroll][4];
    int n[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int g = c.g0 + base + u * kThreads + int(threadIdx.x);
      n[u] = g < c.g1 ? min(4, vocab - 4 * g) : 0;
      if (n[u] == 4 && vector_loads) {
        const float4 q = *reinterpret_cast<const float4*>(x + 4 * g);
        v[u][0] = q.x, v[u][1] = q.y, v[u][2] = q.z, v[u][3] = q.w;
      } else {
#pragma unroll
        for (int j = 0; j < 4; ++j) v[u][j] = j < n[u] ? x[4 * g + j] : 0.0f;
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      // Passes with no warp intrinsics skip padding calls (uniform per warp only at the end).
      if (base + u * kThreads >= span) break;
      f(c.g0 + base + u * kThreads + int(threadIdx.x), v[u], n[u]);
    }
  }
}

// A u64 max (kSum false) or sum over every thread of the cluster; every thread gets it.
template <bool kSum>
__device__ unsigned long long cluster_reduce(SplitShared& sh, Split& c, unsigned long long v) {
  for (int o = 16; o > 0; o >>= 1) {
    const unsigned long long other = __shfl_xor_sync(kFull, v, o);
    v = kSum ? v + other : umax(v, other);
  }
  if ((threadIdx.x & 31) == 0) sh.warp_u64[threadIdx.x >> 5] = v;
  __syncthreads();
  const unsigned slot = c.phase++ & 1u;
  if (threadIdx.x == 0) {
    unsigned long long b = sh.warp_u64[0];
    for (int w = 1; w < kWarps; ++w) b = kSum ? b + sh.warp_u64[w] : umax(b, sh.warp_u64[w]);
    sh.slot[slot][0] = b;
  }
  cluster_barrier(c);
  if (threadIdx.x < 32) {
    const int lane = int(threadIdx.x);
    unsigned long long p = lane < c.size ? at_rank(sh, c, lane)->slot[slot][0] : 0;
    for (int o = 16; o > 0; o >>= 1) {
      const unsigned long long other = __shfl_xor_sync(kFull, p, o);
      p = kSum ? p + other : umax(p, other);
    }
    if (lane == 0) sh.result[0] = p;
  }
  __syncthreads();
  return sh.result[0];
}

// The row's raw log-sum-exp and the max of `best` (packed argmax) in one exchange.
__device__ void cluster_softmax_argmax(SplitShared& sh, Split& c, float m, float s,
                                       unsigned long long best, float& log_sum,
                                       unsigned long long& best_out) {
  for (int o = 16; o > 0; o >>= 1) {
    merge_softmax(m, s, __shfl_xor_sync(kFull, m, o), __shfl_xor_sync(kFull, s, o));
    best = umax(best, __shfl_xor_sync(kFull, best, o));
  }
  if ((threadIdx.x & 31) == 0) {
    sh.warp_m[threadIdx.x >> 5] = m;
    sh.warp_s[threadIdx.x >> 5] = s;
    sh.warp_u64[threadIdx.x >> 5] = best;
  }
  __syncthreads();
  const unsigned slot = c.phase++ & 1u;
  if (threadIdx.x == 0) {
    float bm = sh.warp_m[0], bs = sh.warp_s[0];
    unsigned long long bb = sh.warp_u64[0];
    for (int w = 1; w < kWarps; ++w) {
      merge_softmax(bm, bs, sh.warp_m[w], sh.warp_s[w]);
      bb = umax(bb, sh.warp_u64[w]);
    }
    sh.slot[slot][0] = __float_as_uint(bm);
    sh.slot[slot][1] = __float_as_uint(bs);
    sh.slot[slot][2] = bb;
  }
  cluster_barrier(c);
  if (threadIdx.x < 32) {
    const int lane = int(threadIdx.x);
    float pm = -INFINITY, ps = 0.0f;
    unsigned long long pb = 0;
    if (lane < c.size) {
      const SplitShared* other = at_rank(sh, c, lane);
      pm = __uint_as_float(std::uint32_t(other->slot[slot][0]));
      ps = __uint_as_float(std::uint32_t(other->slot[slot][1]));
      pb = other->slot[slot][2];
    }
    for (int o = 16; o > 0; o >>= 1) {
      merge_softmax(pm, ps, __shfl_xor_sync(kFull, pm, o), __shfl_xor_sync(kFull, ps, o));
      pb = umax(pb, __shfl_xor_sync(kFull, pb, o));
    }
    if (lane == 0) {
      sh.result[0] = __float_as_uint(pm + logf(ps));
      sh.result[2] = pb;
    }
  }
  __syncthreads();
  log_sum = __uint_as_float(std::uint32_t(sh.result[0]));
  best_out = sh.result[2];
}

// Adds weight w of bin `bin` where `in`. Called by all 32 lanes together. A row's 152k keys fall
// in 2-3 bins of a select's first pass, and same-address shared atomics serialise, so the adds
// are combined within the warp first: kMatch, one atomic per distinct bin of the warp's lanes
// (__match_any_sync); kBallot, the first lane's bin and those equal to it, up to 4 rounds, then
// one atomic per lane left. 64-bit masses (w <= 2^32) are summed as two 16-bit halves, each sum of
// 32 lanes within 32 bits: exact, in any order.
template <bool kCount, HistAdds adds>
__device__ __forceinline__ void hist_add(unsigned long long* hist, unsigned bin,
                                         unsigned long long w, bool in) {
  if (adds == HistAdds::kAtomic) {
    if (in) atomicAdd(&hist[bin], w);
    return;
  }
  const int lane = int(threadIdx.x & 31);
  if (adds == HistAdds::kMatch) {
    if (!__any_sync(kFull, in)) return;
    const unsigned peers = __match_any_sync(kFull, in ? bin : 0x100u);
    unsigned long long total;
    if (kCount) {
      total = unsigned(__popc(peers));
    } else {
      const unsigned high = __reduce_add_sync(peers, unsigned(w >> 16));
      const unsigned low = __reduce_add_sync(peers, unsigned(w) & 0xffffu);
      total = (static_cast<unsigned long long>(high) << 16) + low;
    }
    if (in && __ffs(int(peers)) - 1 == lane) atomicAdd(&hist[bin], total);
    return;
  }
  unsigned todo = __ballot_sync(kFull, in);
  for (int round = 0; round < 4 && todo != 0u; ++round) {
    const int leader = __ffs(int(todo)) - 1;
    const unsigned leader_bin = __shfl_sync(kFull, bin, leader);
    const bool mine = ((todo >> lane) & 1u) != 0u && bin == leader_bin;
    const unsigned group = __ballot_sync(kFull, mine);
    unsigned long long total;
    if (kCount) {
      total = unsigned(__popc(group));
    } else {
      const unsigned high = __reduce_add_sync(kFull, mine ? unsigned(w >> 16) : 0u);
      const unsigned low = __reduce_add_sync(kFull, mine ? unsigned(w) & 0xffffu : 0u);
      total = (static_cast<unsigned long long>(high) << 16) + low;
    }
    if (lane == leader) atomicAdd(&hist[leader_bin], total);
    todo &= ~group;
  }
  if (((todo >> lane) & 1u) != 0u) atomicAdd(&hist[bin], w);
}

// The largest key t with sum(weight of elements whose key >= t) >= target over the row, the
// weights from key_weight(i, v, prefix, mask, key, weight) (weight 0: not counted; kCount: weights
// are 0 or 1; the weight may be left 0 where key & mask != prefix, which this pass ignores).
// top_p > 0: the target is top_p_target(top_p, total weight), the total taken from the first
// pass's histogram. Four passes of 8 bits; every block of the cluster finds the same bins.
template <bool kCount, HistAdds adds, typename KeyWeight>
__device__ std::uint32_t cluster_select(SplitShared& sh, Split& c, const float* x, int vocab,
                                        bool vector_loads, unsigned long long target, float top_p,
                                        KeyWeight key_weight) {
  std::uint32_t prefix = 0, prefix_mask = 0;
  for (int shift = 24; shift >= 0; shift -= 8) {
    const unsigned buffer = c.hist_phase++ & 1u;
    unsigned long long* hist = sh.hist[buffer];
    for (int b = int(threadIdx.x); b < kBins; b += kThreads) hist[b] = 0;
    __syncthreads();
    for_each_group(c, x, vocab, vector_loads, [&](int g, const float* v, int n) {
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        std::uint32_t key = 0;
        unsigned long long w = 0;
        if (j < n) key_weight(4 * g + j, v[j], prefix, prefix_mask, key, w);
        const bool in = w != 0 && (key & prefix_mask) == prefix;
        hist_add<kCount, adds>(hist, (key >> shift) & 0xffu, w, in);
      }
    });
    cluster_barrier(c);
    for (int b = int(threadIdx.x); b < kBins; b += kThreads) {
      unsigned long long t = 0;
      for (int r = 0; r < c.size; ++r) t += at_rank(sh, c, r)->hist[buffer][b];
      sh.total[b] = t;
    }
    __syncthreads();
    if (threadIdx.x < 32)
      choose_bin(sh.total, target, shift == 24 ? top_p : 0.0f, prefix, shift, sh.select_prefix,
                 sh.select_target);
    __syncthreads();
    prefix = sh.select_prefix;
    target = sh.select_target;
    prefix_mask |= 0xffu << shift;
  }
  return prefix;
}

// Step 1's top-N: the N largest raw logits (ties: lower id), most likely first, into rank 0's
// sh.top (the other ranks' lists are partial).
template <HistAdds adds>
__device__ void top_raw(SplitShared& sh, Split& c, const float* x, int vocab, bool vector_loads,
                        int n) {
  const std::uint32_t t = cluster_select<true, adds>(
      sh, c, x, vocab, vector_loads, (unsigned long long)n, 0.0f,
      [](int, float v, std::uint32_t, std::uint32_t, std::uint32_t& key, unsigned long long& w) {
        key = key_of(v);
        w = 1;
      });
  if (threadIdx.x == 0) sh.top_count = 0;
  __syncthreads();
  for_each_group(c, x, vocab, vector_loads, [&](int g, const float* v, int count) {
#pragma unroll
    for (int j = 0; j < 4; ++j)
      if (j < count && key_of(v[j]) > t) {  // fewer than n of them in the row
        const int slot = atomicAdd(&sh.top_count, 1);
        sh.top[slot] = {4 * g + j, v[j]};
      }
  });
  __syncthreads();
  // After this exchange every block's list is complete and visible to rank 0.
  const int above = int(cluster_reduce<true>(sh, c, threadIdx.x == 0 ? sh.top_count : 0));
  // Ties at the threshold, lowest ids first: one exchange per tied entry needed (usually one).
  // Tied entries have the threshold's bits exactly.
  int last = -1;
  for (int need = n - above; need > 0; --need) {
    unsigned long long best = 0;
    for_each_group(c, x, vocab, vector_loads, [&](int g, const float* v, int count) {
#pragma unroll
      for (int j = 0; j < 4; ++j)
        if (j < count && 4 * g + j > last && key_of(v[j]) == t)
          best = umax(best, pack_argmax(0, 4 * g + j));
    });
    best = cluster_reduce<false>(sh, c, best);
    if (best == 0) break;
    last = unpack_argmax_id(best);
    if (c.rank == 0 && threadIdx.x == 0) sh.top[sh.top_count++] = {last, float_of_key(t)};
  }
  if (c.rank == 0 && threadIdx.x == 0) {
    // The other blocks' entries (they wait at the kernel's last barrier before exiting).
    for (int r = 1; r < c.size; ++r) {
      const SplitShared* other = at_rank(sh, c, r);
      for (int e = 0; e < other->top_count && sh.top_count < kMaxSampledTopLogprobs; ++e)
        sh.top[sh.top_count++] = other->top[e];
    }
    sort_top(sh.top, sh.top_count);
  }
  __syncthreads();
}

__device__ __forceinline__ float processed(float v, const std::uint32_t* mask, int i) {
  if (mask != nullptr && ((mask[i >> 5] >> (i & 31)) & 1u) == 0u) return -INFINITY;
  return v;
}

template <HistAdds adds>
__global__ void __launch_bounds__(kThreads)
    sample_rows_split_kernel(SampleRowsArgs a, int blocks_per_row) {
  __shared__ SplitShared sh;
  Split c;
  c.size = blocks_per_row;
  c.rank = int(blockIdx.x) % blocks_per_row;
  c.phase = 0;
  c.hist_phase = 0;
  const int r = int(blockIdx.x) / blocks_per_row;
  const int vocab = a.vocab;
  const int groups = (vocab + 3) / 4;
  c.g0 = int(static_cast<long long>(groups) * c.rank / c.size);
  c.g1 = int(static_cast<long long>(groups) * (c.rank + 1) / c.size);
  const SamplingRow row = a.params[r];
  float* x = a.logits + std::size_t(r) * std::size_t(vocab);
  const bool vector_loads = vocab % 4 == 0 && (reinterpret_cast<std::uintptr_t>(x) & 15u) == 0;
  const int first = 4 * c.g0, end = min(4 * c.g1, vocab);  // the block's tokens

  const std::uint32_t* mask =
      row.bitmask_offset >= 0 && a.bitmask != nullptr ? a.bitmask + row.bitmask_offset : nullptr;
  const bool raw_is_processed = row.penalty_count <= 0 && mask == nullptr;
  const int n_top = min(max(row.num_top_logprobs, 0), min(kMaxSampledTopLogprobs, vocab));
  // One top logprob is the raw argmax (top_raw's order is pack_argmax's): no select passes.
  const bool raw_argmax = raw_is_processed || n_top == 1;

  // Step 1 on the raw logits, before anything changes them; their argmax with it (the greedy
  // answer when the raw logits are the processed ones, the top logprob when one is asked for).
  float log_sum;
  unsigned long long best;
  {
    float m = -INFINITY, s = 0.0f;
    unsigned long long b = 0;
    for_each_group(c, x, vocab, vector_loads, [&](int g, const float* v, int n) {
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        if (j >= n) continue;
        add_softmax(m, s, v[j]);
        if (raw_argmax) b = umax(b, pack_argmax(key_of(v[j]), 4 * g + j));
      }
    });
    cluster_softmax_argmax(sh, c, m, s, b, log_sum, best);
  }
  if (n_top == 1) {
    if (threadIdx.x == 0)
      sh.top[0] = {unpack_argmax_id(best), float_of_key(std::uint32_t(best >> 32))};
  } else if (n_top > 1) {
    top_raw<adds>(sh, c, x, vocab, vector_loads, n_top);
  }

  // Step 2, in place, each block on its own tokens; the listed tokens' raw logits are kept for
  // the sampled token's logprob.
  const SamplingPenalty* penalties = a.penalties + row.penalty_offset;
  float* penalty_raw = a.penalty_raw + row.penalty_offset;
  if (row.penalty_count > 0) {
    for (int j = int(threadIdx.x); j < row.penalty_count; j += kThreads) {
      const int t = penalties[j].token;
      if (t < first || t >= end) continue;
      penalty_raw[j] = x[t];
      x[t] = penalized_logit(x[t], row, penalties[j].output_count);
    }
    __syncthreads();
  }

  // Greedy's answer; also the fallback when no token can be drawn (every logit NaN or -inf).
  if (!raw_is_processed) {
    unsigned long long b = 0;
    for_each_group(c, x, vocab, vector_loads, [&](int g, const float* v, int n) {
#pragma unroll
      for (int j = 0; j < 4; ++j)
        if (j < n) b = umax(b, pack_argmax(key_of(processed(v[j], mask, 4 * g + j)), 4 * g + j));
    });
    best = cluster_reduce<false>(sh, c, b);
  }
  int token = unpack_argmax_id(best);

  if (row.temperature > 0.0f) {
    const float temperature = row.temperature;
    // max y = (max z) / T: division by T > 0 keeps the order, and max z is greedy's logit.
    const float max_y = float_of_key(std::uint32_t(best >> 32)) / temperature;
    auto y_of = [mask, temperature](float v, int i) { return processed(v, mask, i) / temperature; };

    std::uint32_t t_k = 0;
    if (row.top_k > 0 && row.top_k < vocab)
      t_k = cluster_select<true, adds>(sh, c, x, vocab, vector_loads, (unsigned long long)row.top_k,
                                       0.0f,
                                       [&y_of](int i, float v, std::uint32_t, std::uint32_t,
                                               std::uint32_t& key, unsigned long long& w) {
                                         key = key_of(y_of(v, i));
                                         w = 1;
                                       });
    std::uint32_t t_p = 0;
    if (row.top_p < 1.0f)  // the kept mass is the first pass's histogram total
      t_p = cluster_select<false, adds>(
          sh, c, x, vocab, vector_loads, 1, row.top_p,
          [&y_of, t_k, max_y](int i, float v, std::uint32_t prefix, std::uint32_t mask,
                              std::uint32_t& key, unsigned long long& w) {
            const float y = y_of(v, i);
            key = key_of(y);
            // The exponential only where this pass counts the element (after the first pass,
            // a small part of the row).
            w = key >= t_k && (key & mask) == prefix ? fixed_mass(expf(y - max_y)) : 0;
          });
    const std::uint32_t threshold = max(t_k, t_p);

    // Step 6: four tokens per Philox call. e = -log(1 - v) >= v, so a token whose v is clearly
    // above w / (this thread's best score) cannot win and skips the logarithm.
    unsigned long long won = 0;
    float best_score = 0.0f;
    for_each_group(c, x, vocab, vector_loads, [&](int g, const float* v, int n) {
      if (n == 0) return;
      const Philox4 random = token_randoms(row.seed, row.position, std::uint32_t(g));
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        if (j >= n) continue;
        const int i = 4 * g + j;
        const float y = y_of(v[j], i);
        if (key_of(y) < threshold) continue;  // before the exponential: most tokens under top-k/p
        const float w = expf(y - max_y);
        if (!(w > 0.0f) || (row.min_p > 0.0f && w < row.min_p)) continue;
        const float e = exponential_source(random.v[j]);
        if (won != 0 && e > w / best_score * 1.00001f) continue;
        const float score = w / -log1pf(-e);
        const unsigned long long packed = pack_argmax(key_of(score), i);
        if (packed > won) won = packed, best_score = score;
      }
    });
    won = cluster_reduce<false>(sh, c, won);
    if (won != 0) token = unpack_argmax_id(won);
  }

  // The sampled token's block writes it: its raw logit is its own, or the one this block saved
  // before its penalty.
  if (token >= first && token < end) {
    if (threadIdx.x == 0) sh.result[1] = __float_as_uint(x[token]);
    __syncthreads();
    for (int j = int(threadIdx.x); j < row.penalty_count; j += kThreads)
      if (penalties[j].token == token) sh.result[1] = __float_as_uint(penalty_raw[j]);
    __syncthreads();
    if (threadIdx.x == 0)
      a.out[r] = {token, __uint_as_float(std::uint32_t(sh.result[1])) - log_sum};
  }
  if (c.rank == 0) {
    TopLogprob* top = a.top + std::size_t(r) * kMaxSampledTopLogprobs;
    for (int j = int(threadIdx.x); j < n_top; j += kThreads)
      top[j] = {sh.top[j].token, sh.top[j].logit - log_sum};
  }
  // No block leaves while another may still read its shared memory.
  cluster_barrier(c);
}

}  // namespace

namespace {

cudaLaunchConfig_t launch_config(int rows, int blocks_per_row, cudaStream_t stream,
                                 cudaLaunchAttribute* cluster) {
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(unsigned(rows) * unsigned(blocks_per_row));
  config.blockDim = dim3(kThreads);
  config.dynamicSmemBytes = 0;
  config.stream = stream;
  if (blocks_per_row > 1) {
    cluster->id = cudaLaunchAttributeClusterDimension;
    cluster->val.clusterDim.x = unsigned(blocks_per_row);
    cluster->val.clusterDim.y = 1;
    cluster->val.clusterDim.z = 1;
    config.attrs = cluster;
    config.numAttrs = 1;
  }
  return config;
}

using Kernel = void (*)(SampleRowsArgs, int);

Kernel kernel_for(HistAdds adds) {
  switch (adds) {
    case HistAdds::kAtomic:
      return sample_rows_split_kernel<HistAdds::kAtomic>;
    case HistAdds::kBallot:
      return sample_rows_split_kernel<HistAdds::kBallot>;
    case HistAdds::kMatch:
      break;
  }
  return sample_rows_split_kernel<HistAdds::kMatch>;
}

// Whether the device runs clusters of `blocks` of the kernel's blocks at all (host queries only,
// no stream work: safe while a graph is being captured).
bool cluster_runs(Kernel kernel, int blocks) {
  if (blocks > 8 && cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed,
                                         1) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  cudaLaunchAttribute cluster;
  const cudaLaunchConfig_t config = launch_config(1, blocks, nullptr, &cluster);
  int clusters = 0;
  if (cudaOccupancyMaxActiveClusters(&clusters, kernel, &config) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return clusters > 0;
}

// The largest power of two up to `wanted` the device runs as a cluster of the kernel's blocks
// (found once per kernel).
int runnable_blocks_per_row(HistAdds adds, int wanted) {
  using Sizes = std::array<bool, 5>;  // clusters of 1, 2, 4, 8, 16
  static const std::array<Sizes, 3> runs = [] {
    std::array<Sizes, 3> all{};
    for (int a = 0; a < 3; ++a) {
      Sizes& r = all[std::size_t(a)];
      r[0] = true;
      for (int k = 1; k < 5; ++k)
        r[std::size_t(k)] = r[std::size_t(k - 1)] && cluster_runs(kernel_for(HistAdds(a)), 1 << k);
    }
    return all;
  }();
  const Sizes& r = runs[std::size_t(adds)];
  int k = 0;
  while (k < 4 && (2 << k) <= wanted && r[std::size_t(k + 1)]) ++k;
  return 1 << k;
}

}  // namespace

cudaError_t sample_rows_split(const SampleRowsArgs& args, int blocks_per_row, HistAdds adds,
                              cudaStream_t stream) {
  if (blocks_per_row < 1 || blocks_per_row > 16 || int(adds) < 0 || int(adds) > 2)
    return cudaErrorInvalidValue;
  if (args.rows == 0) return cudaSuccess;
  if (blocks_per_row > 1) blocks_per_row = runnable_blocks_per_row(adds, blocks_per_row);
  cudaLaunchAttribute cluster;
  const cudaLaunchConfig_t config = launch_config(args.rows, blocks_per_row, stream, &cluster);
  const cudaError_t err = cudaLaunchKernelEx(&config, kernel_for(adds), args, blocks_per_row);
  return err != cudaSuccess ? err : cudaGetLastError();
}

}  // namespace nibble::kernels
