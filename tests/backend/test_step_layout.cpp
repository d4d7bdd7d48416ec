// The host side of a CUDA step: rows, positions and cache rows through the block tables,
// attention tiles that never cross a sequence, logits rows, and the packed blob's alignment.
#include "engine/backend/cuda/step_layout.h"

#include <gtest/gtest.h>

#include <cstring>

namespace nibble::backend::cuda {
namespace {

TEST(StepLayout, RowsTilesAndSlotsFollowTheBlockTables) {
  const std::vector<std::int32_t> a_tokens = {7, 8, 9, 10, 11}, b_tokens = {3};
  const std::vector<int> a_table = {5, 2}, b_table = {0, 1, 4};
  std::vector<float> logits(10);
  const BatchItem items[] = {{a_tokens, 2, a_table, {}}, {b_tokens, 9, b_table, logits}};
  const StepLayout s = layout_step(items, /*block_size=*/4, /*rows_per_tile=*/2);
  EXPECT_EQ(s.tokens, (std::vector<std::int32_t>{7, 8, 9, 10, 11, 3}));
  EXPECT_EQ(s.positions, (std::vector<std::int32_t>{2, 3, 4, 5, 6, 9}));
  // Position 2 of a: block 5 row 2 -> 22; position 4: block 2 row 0 -> 8; b's 9: block 4 row 1.
  EXPECT_EQ(s.slots, (std::vector<std::int64_t>{22, 23, 8, 9, 10, 17}));
  ASSERT_EQ(s.tiles.size(), 4u);  // a: rows {0,1}, {2,3}, {4}; b: {5}
  EXPECT_EQ(s.tiles[2].row0, 4);
  EXPECT_EQ(s.tiles[2].rows, 1);
  EXPECT_EQ(s.tiles[2].position0, 6);
  EXPECT_EQ(s.tiles[3].row0, 5);
  EXPECT_EQ(s.tiles[3].table_offset, 2);
  EXPECT_EQ(s.block_tables, (std::vector<std::int32_t>{5, 2, 0, 1, 4}));
  EXPECT_EQ(s.logit_rows, (std::vector<std::int32_t>{5}));

  const PackedStep p = pack_step(s);
  for (std::size_t offset : {p.tokens, p.positions, p.slots, p.tiles, p.block_tables, p.logit_rows})
    EXPECT_EQ(offset % 16, 0u);
  std::int64_t slot = 0;
  std::memcpy(&slot, p.bytes.data() + p.slots + 5 * sizeof(slot), sizeof(slot));
  EXPECT_EQ(slot, 17);
  AttentionTile tile;
  std::memcpy(&tile, p.bytes.data() + p.tiles + 3 * sizeof(tile), sizeof(tile));
  EXPECT_EQ(tile.position0, 9);
}

}  // namespace
}  // namespace nibble::backend::cuda
