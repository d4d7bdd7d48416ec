#include "engine/backend/cuda/step_layout.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "engine/backend/state_slot_positions.h"

namespace nibble::backend::cuda {

StepLayout layout_step(std::span<const BatchItem> items, int block_size, int rows_per_tile) {
  StepLayout s;
  // Where each item's rows and tiles start, for the window tables' pass below.
  std::vector<std::int32_t> first_row, first_tile;
  for (const BatchItem& item : items) {
    const auto table_offset = std::int32_t(s.block_tables.size());
    s.block_tables.insert(s.block_tables.end(), item.block_table.begin(), item.block_table.end());
    const auto n = std::int32_t(item.tokens.size());
    const auto row0 = std::int32_t(s.tokens.size());
    first_row.push_back(row0);
    first_tile.push_back(std::int32_t(s.tiles.size()));
    for (std::int32_t i = 0; i < n; i += rows_per_tile)
      s.tiles.push_back({row0 + i, std::min(rows_per_tile, n - i), item.start + i, table_offset});
    for (std::int32_t i = 0; i < n; ++i) {
      const int p = item.start + i;
      s.tokens.push_back(item.tokens[std::size_t(i)]);
      s.positions.push_back(p);
      s.slots.push_back(std::int64_t(item.block_table[std::size_t(p / block_size)]) * block_size +
                        p % block_size);
    }
    if (wants_next_token(item))
      for (std::int32_t i = n - item.num_logits; i < n; ++i) s.logit_rows.push_back(row0 + i);
    if (item.state_slot >= 0)
      s.state_rows.push_back(
          {item.state_slot, row0, n, StateSlotPositions::keeps_states(item) ? 1 : 0});
  }
  // The sliding group's rows and tiles: each item's through its window table (the engine gives
  // every item one where the cache has the group; batch_checks.h), the others' as they are.
  for (std::size_t k = 0; k < items.size(); ++k) {
    const BatchItem& item = items[k];
    if (item.window_block_table.empty()) continue;
    if (s.window_slots.empty()) {
      s.window_slots = s.slots;
      s.window_tiles = s.tiles;
    }
    const auto table_offset = std::int32_t(s.block_tables.size());
    s.block_tables.insert(s.block_tables.end(), item.window_block_table.begin(),
                          item.window_block_table.end());
    const auto n = std::int32_t(item.tokens.size());
    for (std::int32_t i = 0; i < n; ++i) {
      const int p = item.start + i;
      s.window_slots[std::size_t(first_row[k] + i)] =
          std::int64_t(item.window_block_table[std::size_t(p / block_size)]) * block_size +
          p % block_size;
    }
    for (std::int32_t i = 0, t = first_tile[k]; i < n; i += rows_per_tile, ++t)
      s.window_tiles[std::size_t(t)].table_offset = table_offset;
  }
  return s;
}

bool verify_rows_as_decodes(std::span<const BatchItem> items, std::vector<BatchItem>& rows) {
  rows.clear();
  bool several = false;
  for (const BatchItem& item : items) {
    if (!wants_next_token(item) || item.tokens.size() != std::size_t(item.num_logits) ||
        item.state_slot >= 0 || !item.hidden_in.empty())
      return false;
    several = several || item.num_logits > 1;
  }
  if (!several) return false;
  for (const BatchItem& item : items) {
    const std::size_t n = item.tokens.size();
    const std::size_t width = item.logits.size() / n;       // logits_size, or 0 (sampled)
    const std::size_t hidden = item.hidden_out.size() / n;  // hidden_state_width, or 0
    for (std::size_t j = 0; j < n; ++j) {
      BatchItem row;
      row.tokens = item.tokens.subspan(j, 1);
      row.start = item.start + int(j);
      row.block_table = item.block_table;
      row.window_block_table = item.window_block_table;
      if (item.sample != nullptr) row.sample = item.sample + j;
      if (!item.logits.empty()) row.logits = item.logits.subspan(j * width, width);
      if (!item.hidden_out.empty()) row.hidden_out = item.hidden_out.subspan(j * hidden, hidden);
      rows.push_back(row);
    }
  }
  return true;
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
  p.state_rows = place(s.state_rows.size() * sizeof(kernels::GatedDeltaNetRow));
  p.window_slots = s.window_slots.empty() ? p.slots : place(s.window_slots.size() * 8);
  p.window_tiles =
      s.window_tiles.empty() ? p.tiles : place(s.window_tiles.size() * sizeof(AttentionTile));
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
  copy(p.state_rows, s.state_rows);
  copy(p.window_slots, s.window_slots);
  copy(p.window_tiles, s.window_tiles);
  return p;
}

DecodeStepOffsets decode_step_offsets(int max_rows) {
  DecodeStepOffsets o;
  const auto rows = std::size_t(max_rows);
  auto aligned = [](std::size_t bytes) { return (bytes + 15) / 16 * 16; };
  o.tokens = 0;
  o.positions = o.tokens + aligned(rows * 4);
  o.slots = o.positions + aligned(rows * 4);
  o.tiles = o.slots + aligned(rows * 8);
  o.logit_rows = o.tiles + aligned(rows * sizeof(AttentionTile));
  o.sampling = o.logit_rows + aligned(rows * 4);
  o.state_rows = o.sampling + aligned(rows * sizeof(kernels::SamplingRow));
  o.window_slots = o.state_rows + aligned(rows * sizeof(kernels::GatedDeltaNetRow));
  o.window_tiles = o.window_slots + aligned(rows * 8);
  o.block_tables = o.window_tiles + aligned(rows * sizeof(AttentionTile));
  return o;
}

std::size_t pack_decode_step(std::span<const BatchItem> items, int block_size, int rows,
                             int scratch_block, const DecodeStepOffsets& at,
                             std::vector<std::byte>& out, int scratch_state_slot) {
  std::size_t table_entries = 1;  // the scratch table
  for (const BatchItem& item : items)
    table_entries += item.block_table.size() + item.window_block_table.size();
  const std::size_t used = at.block_tables + table_entries * 4;
  if (out.size() < used) out.resize(used);
  auto* tokens = reinterpret_cast<std::int32_t*>(out.data() + at.tokens);
  auto* positions = reinterpret_cast<std::int32_t*>(out.data() + at.positions);
  auto* slots = reinterpret_cast<std::int64_t*>(out.data() + at.slots);
  auto* tiles = reinterpret_cast<AttentionTile*>(out.data() + at.tiles);
  auto* logit_rows = reinterpret_cast<std::int32_t*>(out.data() + at.logit_rows);
  auto* tables = reinterpret_cast<std::int32_t*>(out.data() + at.block_tables);
  auto* state_rows = reinterpret_cast<kernels::GatedDeltaNetRow*>(out.data() + at.state_rows);
  auto* window_slots = reinterpret_cast<std::int64_t*>(out.data() + at.window_slots);
  auto* window_tiles = reinterpret_cast<AttentionTile*>(out.data() + at.window_tiles);
  tables[0] = scratch_block;
  std::int32_t table_offset = 1;
  for (int r = 0; r < rows; ++r) {
    const bool real = std::size_t(r) < items.size();
    const int p = real ? items[std::size_t(r)].start : 0;
    tokens[r] = real ? items[std::size_t(r)].tokens[0] : 0;
    positions[r] = p;
    logit_rows[r] = r;
    if (scratch_state_slot >= 0)
      state_rows[r] = {real ? items[std::size_t(r)].state_slot : scratch_state_slot, r, 1};
    if (real) {
      const auto& table = items[std::size_t(r)].block_table;
      std::memcpy(tables + table_offset, table.data(), table.size() * 4);
      slots[r] = std::int64_t(table[std::size_t(p / block_size)]) * block_size + p % block_size;
      tiles[r] = {r, 1, p, table_offset};
      table_offset += std::int32_t(table.size());
    } else {
      slots[r] = std::int64_t(scratch_block) * block_size;
      tiles[r] = {r, 1, 0, 0};
    }
    window_slots[r] = slots[r];
    window_tiles[r] = tiles[r];
  }
  // The window tables after every block table.
  for (std::size_t r = 0; r < items.size(); ++r) {
    const auto& window = items[r].window_block_table;
    if (window.empty()) continue;
    const int p = items[r].start;
    std::memcpy(tables + table_offset, window.data(), window.size() * 4);
    window_slots[r] =
        std::int64_t(window[std::size_t(p / block_size)]) * block_size + p % block_size;
    window_tiles[r].table_offset = table_offset;
    table_offset += std::int32_t(window.size());
  }
  return used;
}

}  // namespace nibble::backend::cuda
