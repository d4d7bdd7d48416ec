#include "engine/backend/cuda/step_layout.h"

#include <algorithm>
#include <cstring>

namespace nibble::backend::cuda {

StepLayout layout_step(std::span<const BatchItem> items, int block_size, int rows_per_tile) {
  StepLayout s;
  for (const BatchItem& item : items) {
    const auto table_offset = std::int32_t(s.block_tables.size());
    s.block_tables.insert(s.block_tables.end(), item.block_table.begin(), item.block_table.end());
    const auto n = std::int32_t(item.tokens.size());
    const auto row0 = std::int32_t(s.tokens.size());
    for (std::int32_t i = 0; i < n; i += rows_per_tile)
      s.tiles.push_back({row0 + i, std::min(rows_per_tile, n - i), item.start + i, table_offset});
    for (std::int32_t i = 0; i < n; ++i) {
      const int p = item.start + i;
      s.tokens.push_back(item.tokens[std::size_t(i)]);
      s.positions.push_back(p);
      s.slots.push_back(std::int64_t(item.block_table[std::size_t(p / block_size)]) * block_size +
                        p % block_size);
    }
    if (!item.logits.empty()) s.logit_rows.push_back(row0 + n - 1);
  }
  return s;
}

PackedStep pack_step(const StepLayout& s) {
  PackedStep p;
  std::size_t at = 0;
  auto place = [&](std::size_t bytes) {
    const std::size_t start = at;
    at = (at + bytes + 15) / 16 * 16;
    return start;
  };
  p.tokens = place(s.tokens.size() * 4);
  p.positions = place(s.positions.size() * 4);
  p.slots = place(s.slots.size() * 8);
  p.tiles = place(s.tiles.size() * sizeof(AttentionTile));
  p.block_tables = place(s.block_tables.size() * 4);
  p.logit_rows = place(s.logit_rows.size() * 4);
  p.bytes.resize(at);
  auto copy = [&](std::size_t offset, const auto& v) {
    if (!v.empty()) std::memcpy(p.bytes.data() + offset, v.data(), v.size() * sizeof(v[0]));
  };
  copy(p.tokens, s.tokens);
  copy(p.positions, s.positions);
  copy(p.slots, s.slots);
  copy(p.tiles, s.tiles);
  copy(p.block_tables, s.block_tables);
  copy(p.logit_rows, s.logit_rows);
  return p;
}

}  // namespace nibble::backend::cuda
