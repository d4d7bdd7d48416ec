#pragma once
// CUDA graphs of whole decode steps. A decode step launches about a dozen kernels per layer;
// replaying them as one captured graph removes the launch gaps between them, which at batch 1 cost
// about as much time as the weights take to stream. Graphs are captured per batch-size bucket (a
// step runs as the smallest bucket that holds it, padded) and per attention split count (fixed
// inside a graph), against one KV cache's storage and the backend's activation buffers: a cache
// owns its graphs, and the backend drops them when a buffer they read was reallocated.
#include <cuda_runtime.h>

#include <compare>
#include <cstdint>
#include <map>
#include <vector>

namespace nibble::backend::cuda {

// Batch sizes that get graphs: every size 1..8, then every multiple of 8 up to max_rows (vLLM's
// buckets), the last one max_rows itself. Every small size, not vLLM's 1, 2, 4: a speculative
// verify step of one sequence runs k + 1 decode rows (2..9 for k = 1..8), and a padded row costs
// a row of every linear, the logits and a sampling pass (at k = 4, 5 rows padded to 8 would
// compute 60% more rows); four more buckets cost only their captures at start.
std::vector<int> decode_buckets(int max_rows);
// The smallest bucket of `buckets` (ascending) holding n rows; 0 when none does.
int decode_bucket_for(int n, const std::vector<int>& buckets);

struct DecodeGraphKey {
  int rows = 0;          // the bucket
  int splits = 0;        // attention key splits
  bool sampled = false;  // ends with device sampling (device_sampler.h) rather than logits
  auto operator<=>(const DecodeGraphKey&) const = default;
};

class DecodeGraphs {
 public:
  DecodeGraphs() = default;
  DecodeGraphs(const DecodeGraphs&) = delete;
  DecodeGraphs& operator=(const DecodeGraphs&) = delete;
  ~DecodeGraphs() { clear(); }

  // The graph for key, or nullptr when there is none or it was captured before buffers_epoch.
  cudaGraphExec_t find(const DecodeGraphKey& key, std::uint64_t buffers_epoch);
  void store(const DecodeGraphKey& key, cudaGraphExec_t exec, std::uint64_t buffers_epoch);
  void clear();
  std::size_t size() const { return graphs_.size(); }

 private:
  std::map<DecodeGraphKey, cudaGraphExec_t> graphs_;
  std::uint64_t epoch_ = 0;  // the buffers_epoch every stored graph was captured in
};

}  // namespace nibble::backend::cuda
