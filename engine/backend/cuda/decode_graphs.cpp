#include "engine/backend/cuda/decode_graphs.h"

#include <algorithm>

namespace nibble::backend::cuda {

std::vector<int> decode_buckets(int max_rows) {
  std::vector<int> buckets;
  for (int b = 1; b < std::min(max_rows, 9); ++b) buckets.push_back(b);
  for (int b = 16; b < max_rows; b += 8) buckets.push_back(b);
  if (max_rows >= 1) buckets.push_back(max_rows);
  return buckets;
}

int decode_bucket_for(int n, const std::vector<int>& buckets) {
  const auto it = std::lower_bound(buckets.begin(), buckets.end(), n);
  return it == buckets.end() ? 0 : *it;
}

cudaGraphExec_t DecodeGraphs::find(const DecodeGraphKey& key, std::uint64_t buffers_epoch) {
  if (buffers_epoch != epoch_) {
    clear();
    epoch_ = buffers_epoch;
  }
  const auto it = graphs_.find(key);
  return it == graphs_.end() ? nullptr : it->second;
}

void DecodeGraphs::store(const DecodeGraphKey& key, cudaGraphExec_t exec,
                         std::uint64_t buffers_epoch) {
  if (buffers_epoch != epoch_) {
    clear();
    epoch_ = buffers_epoch;
  }
  auto& slot = graphs_[key];
  if (slot != nullptr) (void)cudaGraphExecDestroy(slot);
  slot = exec;
}

void DecodeGraphs::clear() {
  for (auto& [key, exec] : graphs_) (void)cudaGraphExecDestroy(exec);
  graphs_.clear();
}

}  // namespace nibble::backend::cuda
