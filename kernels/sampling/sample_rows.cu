#include <algorithm>
#include <cmath>

#include "kernels/sampling/sample_rows.h"
#include "kernels/sampling/sample_rows_split.h"
#include "kernels/sampling/sampling_device.cuh"

namespace nibble::kernels {
namespace {

using namespace sampling_math;
using namespace sampling_device;

struct SharedState {
  unsigned long long hist[kBins];
  unsigned long long u64[kWarps];
  float f0[kWarps], f1[kWarps];
  unsigned long long result;  // a reduction's or a select's answer, broadcast
  unsigned long long select_target;
  unsigned int select_prefix;
  int top_count;
  float chosen_raw;
  RawTop top[kMaxSampledTopLogprobs];
};

__device__ __forceinline__ float processed(const float* x, const std::uint32_t* mask, int i) {
  if (mask != nullptr && ((mask[i >> 5] >> (i & 31)) & 1u) == 0u) return -INFINITY;
  return x[i];
}

__device__ unsigned long long block_max(SharedState& sh, unsigned long long v) {
  for (int o = 16; o > 0; o >>= 1) {
    const unsigned long long other = __shfl_xor_sync(0xffffffffu, v, o);
    v = other > v ? other : v;
  }
  if ((threadIdx.x & 31) == 0) sh.u64[threadIdx.x >> 5] = v;
  __syncthreads();
  if (threadIdx.x == 0) {
    unsigned long long m = sh.u64[0];
    for (int w = 1; w < kWarps; ++w) m = sh.u64[w] > m ? sh.u64[w] : m;
    sh.result = m;
  }
  __syncthreads();
  const unsigned long long m = sh.result;
  __syncthreads();  // sh.result may be reused right after
  return m;
}

__device__ unsigned long long block_sum(SharedState& sh, unsigned long long v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  if ((threadIdx.x & 31) == 0) sh.u64[threadIdx.x >> 5] = v;
  __syncthreads();
  if (threadIdx.x == 0) {
    unsigned long long s = 0;
    for (int w = 0; w < kWarps; ++w) s += sh.u64[w];
    sh.result = s;
  }
  __syncthreads();
  const unsigned long long s = sh.result;
  __syncthreads();
  return s;
}

// log of sum exp(x) over the row (the raw logprobs' normaliser).
__device__ float block_log_sum_exp(SharedState& sh, const float* x, int vocab) {
  float m = -INFINITY, s = 0.0f;
  for (int i = int(threadIdx.x); i < vocab; i += kThreads) add_softmax(m, s, x[i]);
  for (int o = 16; o > 0; o >>= 1)
    merge_softmax(m, s, __shfl_xor_sync(0xffffffffu, m, o), __shfl_xor_sync(0xffffffffu, s, o));
  if ((threadIdx.x & 31) == 0) {
    sh.f0[threadIdx.x >> 5] = m;
    sh.f1[threadIdx.x >> 5] = s;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    float bm = sh.f0[0], bs = sh.f1[0];
    for (int w = 1; w < kWarps; ++w) merge_softmax(bm, bs, sh.f0[w], sh.f1[w]);
    sh.f0[0] = bm + logf(bs);
  }
  __syncthreads();
  const float l = sh.f0[0];
  __syncthreads();
  return l;
}

// The largest key t with sum(weight of elements whose key >= t) >= target, over the elements
// key_weight(i, key, weight) describes (weight 0: not counted). Four passes of 8 bits; warp 0
// finds each pass's bin by a scan from the top bin down.
template <typename KeyWeight>
__device__ std::uint32_t radix_select(SharedState& sh, int vocab, unsigned long long target,
                                      KeyWeight key_weight) {
  std::uint32_t prefix = 0, prefix_mask = 0;
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int b = int(threadIdx.x); b < kBins; b += kThreads) sh.hist[b] = 0;
    __syncthreads();
    for (int i = int(threadIdx.x); i < vocab; i += kThreads) {
      std::uint32_t key;
      unsigned long long weight;
      key_weight(i, key, weight);
      if (weight != 0 && (key & prefix_mask) == prefix)
        atomicAdd(&sh.hist[(key >> shift) & 0xffu], weight);
    }
    __syncthreads();
    if (threadIdx.x < 32)
      choose_bin(sh.hist, target, 0.0f, prefix, shift, sh.select_prefix, sh.select_target);
    __syncthreads();
    prefix = sh.select_prefix;
    target = sh.select_target;
    prefix_mask |= 0xffu << shift;
    __syncthreads();
  }
  return prefix;
}

// Step 1's top-N: the N largest raw logits (ties: lower id), most likely first, into sh.top.
__device__ void top_raw(SharedState& sh, const float* x, int vocab, int n) {
  const std::uint32_t t = radix_select(sh, vocab, (unsigned long long)n,
                                       [x](int i, std::uint32_t& key, unsigned long long& w) {
                                         key = key_of(x[i]);
                                         w = 1;
                                       });
  if (threadIdx.x == 0) sh.top_count = 0;
  __syncthreads();
  for (int i = int(threadIdx.x); i < vocab; i += kThreads) {
    if (key_of(x[i]) > t) {  // fewer than n of them
      const int slot = atomicAdd(&sh.top_count, 1);
      sh.top[slot] = {i, x[i]};
    }
  }
  __syncthreads();
  // Ties at the threshold, lowest ids first: one pass per tied entry needed (usually one).
  int last = -1;
  for (int need = n - sh.top_count; need > 0; --need) {
    unsigned long long best = 0;
    for (int i = int(threadIdx.x); i < vocab; i += kThreads)
      if (i > last && key_of(x[i]) == t) best = umax(best, pack_argmax(0, i));
    best = block_max(sh, best);
    if (best == 0) break;
    last = unpack_argmax_id(best);
    if (threadIdx.x == 0) sh.top[sh.top_count++] = {last, x[last]};
    __syncthreads();
  }
  if (threadIdx.x == 0) sort_top(sh.top, sh.top_count);
  __syncthreads();
}

__global__ void __launch_bounds__(kThreads) sample_rows_kernel(SampleRowsArgs a) {
  __shared__ SharedState sh;
  const int r = int(blockIdx.x);
  const int vocab = a.vocab;
  const SamplingRow row = a.params[r];
  float* x = a.logits + std::size_t(r) * std::size_t(vocab);

  // Step 1 on the raw logits, before anything changes them.
  const float log_sum = block_log_sum_exp(sh, x, vocab);
  const int n_top = min(max(row.num_top_logprobs, 0), min(kMaxSampledTopLogprobs, vocab));
  if (n_top > 0) top_raw(sh, x, vocab, n_top);

  // Step 2, in place; the listed tokens' raw logits are kept for the sampled token's logprob.
  const SamplingPenalty* penalties = a.penalties + row.penalty_offset;
  float* penalty_raw = a.penalty_raw + row.penalty_offset;
  for (int j = int(threadIdx.x); j < row.penalty_count; j += kThreads) {
    const int t = penalties[j].token;
    if (t < 0 || t >= vocab) continue;
    penalty_raw[j] = x[t];
    x[t] = penalized_logit(x[t], row, penalties[j].output_count);
  }
  __syncthreads();

  const std::uint32_t* mask =
      row.bitmask_offset >= 0 && a.bitmask != nullptr ? a.bitmask + row.bitmask_offset : nullptr;
  // Greedy's answer; also the fallback when no token can be drawn (every logit NaN or -inf).
  unsigned long long best = 0;
  for (int i = int(threadIdx.x); i < vocab; i += kThreads)
    best = umax(best, pack_argmax(key_of(processed(x, mask, i)), i));
  const int greedy = unpack_argmax_id(block_max(sh, best));
  int token = greedy;

  if (row.temperature > 0.0f) {
    const float temperature = row.temperature;
    auto y_of = [x, mask, temperature](int i) { return processed(x, mask, i) / temperature; };
    unsigned long long top_key = 0;
    for (int i = int(threadIdx.x); i < vocab; i += kThreads)
      top_key = umax(top_key, key_of(y_of(i)));
    const float max_y = float_of_key(std::uint32_t(block_max(sh, top_key)));

    std::uint32_t t_k = 0;
    if (row.top_k > 0 && row.top_k < vocab)
      t_k = radix_select(sh, vocab, (unsigned long long)row.top_k,
                         [&y_of](int i, std::uint32_t& key, unsigned long long& w) {
                           key = key_of(y_of(i));
                           w = 1;
                         });
    std::uint32_t t_p = 0;
    if (row.top_p < 1.0f) {
      unsigned long long mass = 0;
      for (int i = int(threadIdx.x); i < vocab; i += kThreads) {
        const float y = y_of(i);
        if (key_of(y) >= t_k) mass += fixed_mass(expf(y - max_y));
      }
      mass = block_sum(sh, mass);
      t_p = radix_select(sh, vocab, top_p_target(row.top_p, mass),
                         [&y_of, t_k, max_y](int i, std::uint32_t& key, unsigned long long& w) {
                           const float y = y_of(i);
                           key = key_of(y);
                           w = key >= t_k ? fixed_mass(expf(y - max_y)) : 0;
                         });
    }
    const std::uint32_t threshold = max(t_k, t_p);

    // Step 6: four tokens per Philox call. e = -log(1 - v) >= v, so a token whose v is clearly
    // above w / (this thread's best score) cannot win and skips the logarithm.
    best = 0;
    float best_score = 0.0f;
    for (int g = int(threadIdx.x); 4 * g < vocab; g += kThreads) {
      const Philox4 random = token_randoms(row.seed, row.position, std::uint32_t(g));
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int i = 4 * g + j;
        if (i >= vocab) break;
        const float y = y_of(i);
        const float w = expf(y - max_y);
        if (key_of(y) < threshold || !(w > 0.0f) || (row.min_p > 0.0f && w < row.min_p)) continue;
        const float v = exponential_source(random.v[j]);
        if (best != 0 && v > w / best_score * 1.00001f) continue;
        const float score = w / -log1pf(-v);
        const unsigned long long packed = pack_argmax(key_of(score), i);
        if (packed > best) best = packed, best_score = score;
      }
    }
    best = block_max(sh, best);
    if (best != 0) token = unpack_argmax_id(best);
  }

  // The sampled token's raw logit: its own, or the one saved before its penalty.
  if (threadIdx.x == 0) sh.chosen_raw = x[token];
  __syncthreads();
  for (int j = int(threadIdx.x); j < row.penalty_count; j += kThreads)
    if (penalties[j].token == token) sh.chosen_raw = penalty_raw[j];
  __syncthreads();
  if (threadIdx.x == 0) a.out[r] = {token, sh.chosen_raw - log_sum};
  TopLogprob* top = a.top + std::size_t(r) * kMaxSampledTopLogprobs;
  for (int j = int(threadIdx.x); j < n_top; j += kThreads)
    top[j] = {sh.top[j].token, sh.top[j].logit - log_sum};
}

// The device's SMs and whether it launches clusters (sm_90+), for the current device.
struct DeviceShape {
  int sms = 1;
  bool clusters = false;
};
DeviceShape device_shape() {
  DeviceShape d;
  int device = 0, major = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&d.sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess) {
    (void)cudaGetLastError();
    return DeviceShape{};
  }
  d.clusters = major >= 9;
  return d;
}

// Blocks per row: the largest power of two up to `most` with rows x blocks within the SMs (one
// 1024-thread block fills an SM's registers), so batch 1 spreads over 8 SMs and batch 64 over 128.
int blocks_per_row(int rows, int most) {
  static const DeviceShape shape = device_shape();
  if (!shape.clusters) return 1;
  int blocks = 1;
  while (blocks * 2 <= most && rows * blocks * 2 <= shape.sms) blocks *= 2;
  return blocks;
}

// The most blocks a row when the caller leaves it to the pass (blocks_per_row < 0): 16 for one row,
// 8 for more. test_sampling_gpu --bench on an H200 (PERF_NOTES "The split kernel", vocabulary
// 151,936, "split <=16" against "split <=8"): one row greedy 14.3 vs 15.6 us, temperature 1 25.5
// vs 33.1, T 0.7 + top-k 50 + top-p 0.9 + 5 logprobs 148.8 vs 211.6; eight rows (16 x 8 = 128
// blocks) greedy 24.8 vs 17.9, temperature 41.0 vs 35.5. Where 16-block clusters do not run, the
// launcher takes 8.
int default_most_blocks(int rows) {
  return rows == 1 ? 16 : 8;
}

}  // namespace

cudaError_t sample_rows(const SampleRowsArgs& args, cudaStream_t stream) {
  if (args.rows < 0 || args.vocab < 1 ||
      (args.rows > 0 && (args.logits == nullptr || args.params == nullptr || args.out == nullptr ||
                         args.top == nullptr)))
    return cudaErrorInvalidValue;
  if (args.rows == 0) return cudaSuccess;
  const SampleRowsTuning& tuning = args.tuning;
  if (tuning.split != 0) {
    int most = tuning.blocks_per_row;
    if (most < 0) most = default_most_blocks(args.rows);
    most = std::min(std::max(most, 1), 16);
    const int adds = tuning.aggregate < 0 ? 1 : std::min(tuning.aggregate, 2);
    return sample_rows_split(args, blocks_per_row(args.rows, most), HistAdds(adds), stream);
  }
  sample_rows_kernel<<<args.rows, kThreads, 0, stream>>>(args);
  return cudaGetLastError();
}

}  // namespace nibble::kernels
