// The host side of a CUDA step: rows, positions and cache rows through the block tables,
// attention tiles that never cross a sequence, logits rows (several per item verifying drafts),
// the logits buffer's rows, the packed blob's alignment, and a sliding block group's window
// tables.
#include "engine/backend/cuda/step_layout.h"

#include <gtest/gtest.h>

#include "engine/backend/cuda/decode_graphs.h"
#include "engine/backend/cuda/step_buffers.h"

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

// Speculative decoding's verify rows: an item with num_logits n wants the logits of its last n
// rows, in position order, after the rows of the items before it; an item without logits (a
// prefill chunk) wants none.
TEST(StepLayout, VerifyItemsWantTheirLastNumLogitsRows) {
  const std::vector<std::int32_t> verify_tokens = {4, 70, 71, 72, 73}, chunk = {1, 2, 3},
                                  decode = {9}, whole = {5, 6};
  const std::vector<int> table = {0, 1, 2};
  std::vector<float> v_logits(4 * 10), d_logits(10), w_logits(2 * 10);
  BatchItem verify{verify_tokens, 6, table, v_logits};
  verify.num_logits = 4;  // the last token and 3 drafts of 4: rows 1..4
  BatchItem whole_chunk{whole, 0, table, w_logits};
  whole_chunk.num_logits = 2;  // every row of the item
  const BatchItem items[] = {
      verify, {chunk, 0, table, {}}, {decode, 3, table, d_logits}, whole_chunk};
  const StepLayout s = layout_step(items, /*block_size=*/4, /*rows_per_tile=*/8);
  EXPECT_EQ(s.logit_rows, (std::vector<std::int32_t>{1, 2, 3, 4, 8, 9, 10}));
  // The verify chunk is one tile of consecutive positions: its query at position 6 + i sees keys
  // [0, 6 + i] only, so keys a rejected draft left past the accepted length are never read.
  ASSERT_EQ(s.tiles.size(), 4u);
  EXPECT_EQ(s.tiles[0].rows, 5);
  EXPECT_EQ(s.tiles[0].position0, 6);
  EXPECT_EQ(s.positions[4], 10);
  EXPECT_EQ(s.slots[4], 2 * 4 + 2);  // position 10: block 2, row 2

  const PackedStep p = pack_step(s);
  std::vector<std::int32_t> rows(s.logit_rows.size());
  std::memcpy(rows.data(), p.bytes.data() + p.logit_rows, rows.size() * 4);
  EXPECT_EQ(rows, s.logit_rows);
}

// Room for the logits of a step: a row per sequence for decode graphs and device sampling, k + 1
// per sequence verifying k drafts, capped by the step's tokens.
TEST(StepBuffers, LogitRowsCoverVerifyStepsWithinTheTokenBudget) {
  EXPECT_EQ(max_logit_rows(/*max_tokens=*/8192, /*max_sequences=*/256, 1), 256);
  EXPECT_EQ(max_logit_rows(8192, 256, 5), 1280);
  EXPECT_EQ(max_logit_rows(1024, 256, 5), 1024);  // no more rows than the step has tokens
  EXPECT_EQ(max_logit_rows(128, 256, 5), 256);    // but always a row per decode graph row
  EXPECT_EQ(max_logit_rows(8192, 1, 33), 33);
}

// A graph's inputs: the same offsets for every step up to the largest bucket, the real rows as
// layout_step would lay them out, padding rows confined to the scratch block.
TEST(StepLayout, DecodeStepsPadToTheirBucketAtFixedOffsets) {
  const std::vector<std::int32_t> a_token = {41}, b_token = {42};
  const std::vector<int> a_table = {5, 2}, b_table = {0, 1, 4};
  std::vector<float> la(10), lb(10);
  const BatchItem items[] = {{a_token, 6, a_table, la}, {b_token, 9, b_table, lb}};
  const DecodeStepOffsets at = decode_step_offsets(/*max_rows=*/8);
  for (std::size_t offset :
       {at.tokens, at.positions, at.slots, at.tiles, at.logit_rows, at.sampling, at.block_tables})
    EXPECT_EQ(offset % 16, 0u);
  EXPECT_GE(at.sampling, at.logit_rows + 8 * 4);
  EXPECT_GE(at.block_tables, at.sampling + 8 * sizeof(kernels::SamplingRow));
  std::vector<std::byte> bytes;
  const std::size_t used =
      pack_decode_step(items, /*block_size=*/4, /*rows=*/4, /*scratch_block=*/9, at, bytes);
  EXPECT_EQ(used, at.block_tables + (1 + 2 + 3) * 4);
  auto read = [&](std::size_t offset, auto& value, int index) {
    std::memcpy(&value, bytes.data() + offset + std::size_t(index) * sizeof(value), sizeof(value));
  };
  std::int32_t i32 = 0;
  std::int64_t slot = 0;
  AttentionTile tile;
  read(at.tokens, i32, 1);
  EXPECT_EQ(i32, 42);
  read(at.positions, i32, 0);
  EXPECT_EQ(i32, 6);
  read(at.slots, slot, 0);  // a's position 6: block 2, row 2
  EXPECT_EQ(slot, 10);
  read(at.slots, slot, 1);  // b's position 9: block 4, row 1
  EXPECT_EQ(slot, 17);
  read(at.tiles, tile, 1);
  EXPECT_EQ(tile.row0, 1);
  EXPECT_EQ(tile.position0, 9);
  EXPECT_EQ(tile.table_offset, 3);  // after the scratch table and a's two blocks
  for (int pad : {2, 3}) {
    read(at.tokens, i32, pad);
    EXPECT_EQ(i32, 0);
    read(at.slots, slot, pad);
    EXPECT_EQ(slot, 9 * 4);
    read(at.tiles, tile, pad);
    EXPECT_EQ(tile.table_offset, 0);
    EXPECT_EQ(tile.position0, 0);
    read(at.logit_rows, i32, pad);
    EXPECT_EQ(i32, pad);
  }
  read(at.block_tables, i32, 0);
  EXPECT_EQ(i32, 9);
  read(at.block_tables, i32, 5);
  EXPECT_EQ(i32, 4);
}

// A cache with a sliding block group (gpt-oss, kv_layer_groups.h): the window tables follow the
// block tables, each row's cache row through its window table and the tiles again pointing at
// them, for the sliding layers; entries before the window (-1) are never read. A step without
// window tables packs none (the sliding views alias the full ones); a decode step always fills
// them, padding rows in the scratch block.
TEST(StepLayout, WindowTablesGiveTheSlidingLayersTheirRowsAndTiles) {
  const std::vector<std::int32_t> a_tokens = {7, 8, 9, 10, 11}, b_tokens = {3};
  const std::vector<int> a_table = {5, 2}, b_table = {0, 1, 4};
  const std::vector<int> a_window = {6, 3}, b_window = {-1, 7, 8};
  std::vector<float> logits(10);
  BatchItem a{a_tokens, 2, a_table, {}}, b{b_tokens, 9, b_table, logits};
  a.window_block_table = a_window;
  b.window_block_table = b_window;
  const BatchItem items[] = {a, b};
  const StepLayout s = layout_step(items, /*block_size=*/4, /*rows_per_tile=*/2);
  EXPECT_EQ(s.slots, (std::vector<std::int64_t>{22, 23, 8, 9, 10, 17}));
  // a's positions 2, 3 in block 6, 4..6 in block 3; b's 9 in block 8, row 1.
  EXPECT_EQ(s.window_slots, (std::vector<std::int64_t>{26, 27, 12, 13, 14, 33}));
  EXPECT_EQ(s.block_tables, (std::vector<std::int32_t>{5, 2, 0, 1, 4, 6, 3, -1, 7, 8}));
  ASSERT_EQ(s.window_tiles.size(), s.tiles.size());
  for (std::size_t t = 0; t < s.tiles.size(); ++t) {
    EXPECT_EQ(s.window_tiles[t].row0, s.tiles[t].row0);
    EXPECT_EQ(s.window_tiles[t].rows, s.tiles[t].rows);
    EXPECT_EQ(s.window_tiles[t].position0, s.tiles[t].position0);
    EXPECT_EQ(s.window_tiles[t].table_offset, t < 3 ? 5 : 7) << "tile " << t;
  }
  const PackedStep p = pack_step(s);
  EXPECT_EQ(p.window_slots % 16, 0u);
  EXPECT_EQ(p.window_tiles % 16, 0u);
  std::int64_t slot = 0;
  std::memcpy(&slot, p.bytes.data() + p.window_slots + 5 * sizeof(slot), sizeof(slot));
  EXPECT_EQ(slot, 33);
  AttentionTile tile;
  std::memcpy(&tile, p.bytes.data() + p.window_tiles + 3 * sizeof(tile), sizeof(tile));
  EXPECT_EQ(tile.table_offset, 7);

  const BatchItem plain[] = {{a_tokens, 2, a_table, {}}};
  const StepLayout none = layout_step(plain, 4, 2);
  EXPECT_TRUE(none.window_slots.empty());
  EXPECT_TRUE(none.window_tiles.empty());
  const PackedStep q = pack_step(none);
  EXPECT_EQ(q.window_slots, q.slots);
  EXPECT_EQ(q.window_tiles, q.tiles);

  const std::vector<std::int32_t> a_token = {41}, b_token = {42};
  std::vector<float> la(10), lb(10);
  BatchItem da{a_token, 6, a_table, la}, db{b_token, 9, b_table, lb};
  da.window_block_table = a_window;
  db.window_block_table = b_window;
  const BatchItem decodes[] = {da, db};
  const DecodeStepOffsets at = decode_step_offsets(/*max_rows=*/8);
  EXPECT_EQ(at.window_slots % 16, 0u);
  EXPECT_EQ(at.window_tiles % 16, 0u);
  EXPECT_GE(at.window_slots, at.state_rows + 8 * sizeof(kernels::GatedDeltaNetRow));
  EXPECT_GE(at.window_tiles, at.window_slots + 8 * 8);
  EXPECT_GE(at.block_tables, at.window_tiles + 8 * sizeof(AttentionTile));
  std::vector<std::byte> bytes;
  const std::size_t used =
      pack_decode_step(decodes, /*block_size=*/4, /*rows=*/4, /*scratch_block=*/9, at, bytes);
  EXPECT_EQ(used, at.block_tables + (1 + 2 + 3 + 2 + 3) * 4);
  auto read = [&](std::size_t offset, auto& value, int index) {
    std::memcpy(&value, bytes.data() + offset + std::size_t(index) * sizeof(value), sizeof(value));
  };
  std::int32_t entry = 0;
  read(at.window_slots, slot, 0);  // a's position 6: window block 3, row 2
  EXPECT_EQ(slot, 14);
  read(at.window_slots, slot, 1);  // b's position 9: window block 8, row 1
  EXPECT_EQ(slot, 33);
  read(at.window_tiles, tile, 0);
  EXPECT_EQ(tile.table_offset, 6);  // after the scratch table and both block tables
  EXPECT_EQ(tile.position0, 6);
  read(at.window_tiles, tile, 1);
  EXPECT_EQ(tile.table_offset, 8);
  for (int pad : {2, 3}) {
    read(at.window_slots, slot, pad);
    EXPECT_EQ(slot, 9 * 4);
    read(at.window_tiles, tile, pad);
    EXPECT_EQ(tile.table_offset, 0);
  }
  read(at.block_tables, entry, 6);
  EXPECT_EQ(entry, 6);
  read(at.block_tables, entry, 8);
  EXPECT_EQ(entry, -1);
}

// Hybrid models: one Gated DeltaNet row per sequence in its state slot (its rows of the step),
// packed beside the rest; a decode graph's padding rows run in the cache's scratch slot; models
// without state slots get none.
TEST(StepLayout, HybridStepsGiveEachSequenceOneStateRow) {
  const std::vector<std::int32_t> a_tokens = {1, 2, 3}, b_token = {4};
  const std::vector<int> a_table = {0, 1}, b_table = {2};
  std::vector<float> la(10), lb(10);
  BatchItem a{a_tokens, 0, a_table, la}, b{b_token, 2, b_table, lb};
  a.state_slot = 3;
  b.state_slot = 0;
  const BatchItem items[] = {a, b};
  const StepLayout layout = layout_step(items, /*block_size=*/4, /*rows_per_tile=*/16);
  ASSERT_EQ(layout.state_rows.size(), 2u);
  EXPECT_EQ(layout.state_rows[0].slot, 3);
  EXPECT_EQ(layout.state_rows[0].first, 0);
  EXPECT_EQ(layout.state_rows[0].count, 3);
  EXPECT_EQ(layout.state_rows[1].slot, 0);
  EXPECT_EQ(layout.state_rows[1].first, 3);
  EXPECT_EQ(layout.state_rows[1].count, 1);
  const PackedStep packed = pack_step(layout);
  kernels::GatedDeltaNetRow row;
  std::memcpy(&row, packed.bytes.data() + packed.state_rows + sizeof(row), sizeof(row));
  EXPECT_EQ(row.slot, 0);
  EXPECT_EQ(row.first, 3);
  BatchItem plain{b_token, 2, b_table, lb};
  EXPECT_TRUE(layout_step(std::span(&plain, 1), 4, 16).state_rows.empty());

  const DecodeStepOffsets at = decode_step_offsets(/*max_rows=*/8);
  EXPECT_EQ(at.state_rows % 16, 0u);
  EXPECT_GE(at.state_rows, at.sampling + 8 * sizeof(kernels::SamplingRow));
  EXPECT_GE(at.block_tables, at.state_rows + 8 * sizeof(kernels::GatedDeltaNetRow));
  BatchItem decode = b;
  std::vector<std::byte> bytes;
  pack_decode_step(std::span(&decode, 1), 4, /*rows=*/2, /*scratch_block=*/9, at, bytes,
                   /*scratch_state_slot=*/5);
  for (int r : {0, 1}) {
    std::memcpy(&row, bytes.data() + at.state_rows + std::size_t(r) * sizeof(row), sizeof(row));
    EXPECT_EQ(row.slot, r == 0 ? 0 : 5) << "row " << r;
    EXPECT_EQ(row.first, r);
    EXPECT_EQ(row.count, 1);
    EXPECT_EQ(row.snapshot, 0) << "decode graphs' rows keep no snapshots";
  }
}

// Speculative decoding of a hybrid model: a verify item (several tokens, logits at several
// positions) is a state row that snapshots its state after each token; a prompt chunk (one row of
// logits) and a decode row are not.
TEST(StepLayout, VerifyItemsAreSnapshottingStateRows) {
  const std::vector<std::int32_t> verify = {1, 2, 3, 4}, prompt = {5, 6, 7}, decode = {8};
  const std::vector<int> table = {0, 1, 2};
  std::vector<float> rows(40), last(10), next(10);
  BatchItem v{verify, 6, table, rows}, p{prompt, 0, table, last}, d{decode, 9, table, next};
  v.num_logits = 4;
  v.state_slot = 2;
  p.state_slot = 0;
  d.state_slot = 1;
  const BatchItem items[] = {p, v, d};
  const StepLayout layout = layout_step(items, /*block_size=*/4, /*rows_per_tile=*/16);
  ASSERT_EQ(layout.state_rows.size(), 3u);
  EXPECT_EQ(layout.state_rows[0].snapshot, 0);
  EXPECT_EQ(layout.state_rows[1].snapshot, 1);
  EXPECT_EQ(layout.state_rows[1].slot, 2);
  EXPECT_EQ(layout.state_rows[1].first, 3);
  EXPECT_EQ(layout.state_rows[1].count, 4);
  EXPECT_EQ(layout.state_rows[2].snapshot, 0);
}

// Every size up to 8 (a verify step of one sequence is k + 1 rows), then vLLM's multiples of 8.
TEST(DecodeGraphs, BucketsAreEverySmallSizeThenMultiplesOfEight) {
  EXPECT_EQ(decode_buckets(1), (std::vector<int>{1}));
  EXPECT_EQ(decode_buckets(5), (std::vector<int>{1, 2, 3, 4, 5}));
  EXPECT_EQ(decode_buckets(8), (std::vector<int>{1, 2, 3, 4, 5, 6, 7, 8}));
  EXPECT_EQ(decode_buckets(12), (std::vector<int>{1, 2, 3, 4, 5, 6, 7, 8, 12}));
  EXPECT_EQ(decode_buckets(16), (std::vector<int>{1, 2, 3, 4, 5, 6, 7, 8, 16}));
  EXPECT_EQ(decode_buckets(20), (std::vector<int>{1, 2, 3, 4, 5, 6, 7, 8, 16, 20}));
  EXPECT_EQ(decode_buckets(32), (std::vector<int>{1, 2, 3, 4, 5, 6, 7, 8, 16, 24, 32}));
  const auto b = decode_buckets(64);
  EXPECT_EQ(decode_bucket_for(1, b), 1);
  EXPECT_EQ(decode_bucket_for(3, b), 3);
  EXPECT_EQ(decode_bucket_for(5, b), 5);
  EXPECT_EQ(decode_bucket_for(9, b), 16);
  EXPECT_EQ(decode_bucket_for(17, b), 24);
  EXPECT_EQ(decode_bucket_for(64, b), 64);
  EXPECT_EQ(decode_bucket_for(65, b), 0);
}

}  // namespace
}  // namespace nibble::backend::cuda
