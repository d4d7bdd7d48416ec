#pragma once
// The CPU backend's paged KV cache: FP32 rows, per layer [num_blocks * block_size, Hkv * D] for
// keys and for values; block b holds positions [b * block_size, (b + 1) * block_size) of
// whichever sequence's block table names it.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "engine/backend/backend.h"

namespace nibble::backend::cpu {

class CpuKvCache : public KvCache {
 public:
  CpuKvCache(const model::ModelConfig& c, int num_blocks, int block_size, const void* owner)
      : owner(owner),
        blocks(num_blocks),
        block(block_size),
        width(std::size_t(c.num_kv_heads) * std::size_t(c.head_dim)) {
    const std::size_t rows = std::size_t(num_blocks) * std::size_t(block_size);
    k.resize(std::size_t(c.num_layers));
    v.resize(std::size_t(c.num_layers));
    for (auto& layer : k) layer.resize(rows * width);
    for (auto& layer : v) layer.resize(rows * width);
  }
  int num_blocks() const override { return blocks; }
  int block_size() const override { return block; }

  // The cache row holding `position` of the sequence whose block table is `table`.
  std::int64_t slot(std::span<const int> table, int position) const {
    return std::int64_t(table[std::size_t(position / block)]) * block + position % block;
  }

  const void* owner;  // the backend that made it
  int blocks, block;
  std::size_t width;  // Hkv * D floats a row
  std::vector<std::vector<float>> k, v;
};

}  // namespace nibble::backend::cpu
