#pragma once
// The host-side plan of the decode attention kernel (decode_attention.h): how many key splits a
// step of decodes takes, how the keys of one sequence are shared among the splits and their warps,
// and how the splits group into thread-block clusters. One definition for the launcher, the CPU
// model of the kernel's decomposition (decode_attention_ref.h) and the tests. C++17 (nvcc compiles
// the launcher against it).
#include <algorithm>
#include <cstdint>

#include "kernels/host_device.h"

namespace nibble::kernels::decode_plan {

inline constexpr int kWarps = 4;        // warps a block
inline constexpr int kStepKeys = 16;    // keys of one mma step (the m16 of m16n8k16)
inline constexpr int kMaxCluster = 8;   // blocks a cluster (the portable limit)
inline constexpr int kMaxGroup = 8;     // query heads a KV head (the n8 of m16n8k16)
inline constexpr int kBlocksPerSm = 2;  // at long contexts: all blocks resident at once

// The largest power of two <= n and the smallest >= n (n >= 1).
inline int pow2_at_most(std::int64_t n) {
  int p = 1;
  while (std::int64_t(p) * 2 <= n) p *= 2;
  return p;
}
inline int pow2_at_least(std::int64_t n) {
  int p = 1;
  while (p < n) p *= 2;
  return p;
}

// Keys a warp takes at a time: two mma steps at head_dim <= 128 (their loads in flight together:
// 16 KB of BF16 K/V a warp), one at 256 (registers).
NIBBLE_HOST_DEVICE constexpr int chunk_keys(int head_dim) {
  return head_dim <= 128 ? 2 * kStepKeys : kStepKeys;
}

// Splits for `rows` sequences of `kv_heads` KV heads whose longest holds max_position + 1 keys.
// Short contexts (latency): one chunk a warp, up to a cluster of 8 blocks (1,024 keys at head_dim
// 128); then 8 splits up to 4 chunks a warp, beyond that at least 4 chunks a warp. Capped so that
// rows x kv_heads x splits stays within blocks_per_sm blocks a multiprocessor (sm_count 0: no
// split). A power of two, non-decreasing in max_position and through every power of two up to its
// value at the longest context (paged_decode_splits' contract: the counts a decode graph bucket
// can take).
inline int splits(int kv_heads, int head_dim, int rows, int max_position, int sm_count,
                  int blocks_per_sm = kBlocksPerSm) {
  if (sm_count <= 0 || kv_heads <= 0 || rows <= 0 || head_dim <= 0) return 1;
  const int chunk = chunk_keys(head_dim);
  const std::int64_t chunks = (std::int64_t(max_position) + chunk) / chunk;
  int by_keys = pow2_at_least((chunks + kWarps - 1) / kWarps);
  if (by_keys > kMaxCluster)
    by_keys = std::max(kMaxCluster, pow2_at_least((chunks + 4 * kWarps - 1) / (4 * kWarps)));
  const std::int64_t blocks = std::int64_t(rows) * kv_heads;
  const int by_sm =
      pow2_at_most(std::max<std::int64_t>(1, std::int64_t(blocks_per_sm) * sm_count / blocks));
  return std::min(by_keys, by_sm);
}

// Blocks per cluster: the splits of one (sequence, KV head) merge through distributed shared
// memory up to 8 at a time; beyond, each cluster leaves one partial softmax for the merge kernel.
inline int cluster_size(int splits) {
  return std::min(splits, kMaxCluster);
}
inline int partials(int splits) {
  return splits / cluster_size(splits);
}

// Split `split` of `splits` takes keys [begin, end) of a sequence of `keys` keys: whole chunks,
// as evenly as chunks allow (the last splits may be empty when a graph's split count is above
// what the keys need). Its warp w takes the chunks begin + (w + i * kWarps) * chunk.
struct KeyRange {
  int begin = 0, end = 0;
};
NIBBLE_HOST_DEVICE inline KeyRange split_keys(int keys, int split, int splits, int chunk) {
  const int chunks = (keys + chunk - 1) / chunk;
  const int per = (chunks + splits - 1) / splits;
  const std::int64_t begin = std::int64_t(split) * per * chunk, end = begin + per * chunk;
  return {int(begin < keys ? begin : keys), int(end < keys ? end : keys)};
}

// A range of a sliding window's keys: split_keys over the window's keys, moved to its first key
// (the keys before it are never read: their cache blocks cost no bytes).
NIBBLE_HOST_DEVICE inline KeyRange offset(KeyRange range, int first) {
  return {range.begin + first, range.end + first};
}

// The first key a decode at `position` sees: 0, or with a sliding window (> 0) of `window` keys
// position - window + 1.
NIBBLE_HOST_DEVICE inline int first_key(int position, int window) {
  return window > 0 && position - window + 1 > 0 ? position - window + 1 : 0;
}

}  // namespace nibble::kernels::decode_plan
