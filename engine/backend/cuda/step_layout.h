#pragma once
// What the GPU needs to know about one forward_batch step, built on the host and copied over in
// one transfer: each row's token, position and KV cache row, the attention tiles (runs of rows of
// one sequence), the sequences' block tables, and the rows whose logits are wanted (one per item
// that wants a next token, or its last num_logits rows where it verifies drafts). With a sliding
// block group (BatchItem::window_block_table, kv_layer_groups.h) also each row's cache row in it
// and tiles reading its tables, for the sliding layers.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "engine/backend/backend.h"
#include "kernels/attention/paged_attention.h"
#include "kernels/linear_attention/gated_deltanet.h"
#include "kernels/sampling/sampling_types.h"

namespace nibble::backend::cuda {

using kernels::AttentionTile;  // kernels/attention/paged_attention.h

struct StepLayout {
  std::vector<std::int32_t> tokens;     // [T]
  std::vector<std::int32_t> positions;  // [T]
  std::vector<std::int64_t> slots;      // [T] cache row: block_table[p / bs] * bs + p % bs
  std::vector<AttentionTile> tiles;
  // The items' tables, concatenated; then, where the items have them, their window tables.
  std::vector<std::int32_t> block_tables;
  // Items with window tables: [T] each row's cache row through its window table, and the tiles
  // again with table_offset at the window tables. Empty otherwise (the sliding layers, if any,
  // then read `slots` and `tiles`).
  std::vector<std::int64_t> window_slots;
  std::vector<AttentionTile> window_tiles;
  // [R] the rows whose next-token logits the step computes, in item order: each item that wants
  // a next token its last num_logits rows (1, or k + 1 verifying k drafts), in position order.
  // act.logits row r holds row logit_rows[r]'s logits.
  std::vector<std::int32_t> logit_rows;
  // Hybrid models: each item's rows as one Gated DeltaNet row in its state slot (BatchItem::
  // state_slot), in item order, a verify item's keeping snapshots; empty for models without
  // recurrent state.
  std::vector<kernels::GatedDeltaNetRow> state_rows;
};

StepLayout layout_step(std::span<const BatchItem> items, int block_size, int rows_per_tile);

// Speculative verify steps as decode steps. Where every item wants a next token after each of
// its tokens (tokens.size() == num_logits: decodes, and verify items of a decode row and its k
// drafts) and some item has several, writes the step as one-token decode rows into `rows`: item
// i's token j becomes a row at position start + j with the item's block (and window) table and
// its j-th logits row or sampling request (and hidden_out row), in item order. Each row attends to
// positions [0, start + j]: its own key and those of the item's earlier tokens, which the step's KV
// store writes for every row before attention reads any (forward_pass.cpp: two kernels in stream
// order). Rows of one item share its tables: no check refuses that, only state slots must be
// distinct, and an item with one (hybrid models, whose recurrent state runs token after token),
// or with hidden_in (an MTP module's step), is not expanded. Returns false, leaving `rows` empty,
// for any other step (a prefill chunk among the items, or decodes only: they are decode rows
// already).
bool verify_rows_as_decodes(std::span<const BatchItem> items, std::vector<BatchItem>& rows);

// The layout as one blob (each part 16-byte aligned) and where each part starts in it.
struct PackedStep {
  std::vector<std::byte> bytes;
  std::size_t tokens = 0, positions = 0, slots = 0, tiles = 0, block_tables = 0, logit_rows = 0,
              state_rows = 0;
  std::size_t window_slots = 0, window_tiles = 0;  // slots and tiles where the layout has none
};
PackedStep pack_step(const StepLayout& layout);

// A decode step replayed from a captured CUDA graph reads its inputs at addresses fixed at
// capture: each part at an offset that depends only on the largest batch the graphs serve, the
// block tables last (their length varies). Entry 0 of the block tables is a table of one block,
// `scratch_block`, for the rows that pad a batch up to its graph's size: they compute token 0 at
// position 0 and write their keys and values only there.
// `sampling`: room for max_rows kernels::SamplingRow, the rows' device sampling parameters when
// the step samples on the device (device_sampler.h); their penalty lists and bitmasks follow the
// block tables, at offsets counted from block_tables.
// `state_rows`: hybrid models' Gated DeltaNet rows, one a row (padding rows in the cache's scratch
// state slot).
// `window_slots`, `window_tiles`: each row's cache row and tile through its window table (a
// sliding block group's), the window tables after the block tables; a row without one repeats
// its slot and tile, a padding row points at the scratch table as above.
struct DecodeStepOffsets {
  std::size_t tokens = 0, positions = 0, slots = 0, tiles = 0, logit_rows = 0, sampling = 0,
              state_rows = 0, window_slots = 0, window_tiles = 0, block_tables = 0;
};
DecodeStepOffsets decode_step_offsets(int max_rows);

// Writes a decode step (every item one token and wanting logits) padded to `rows` rows into
// `out` (resized as needed) at `at`'s offsets; returns the bytes to copy (a prefix of `out`).
// scratch_state_slot >= 0 (hybrid models): the state rows too, padding rows in that slot.
std::size_t pack_decode_step(std::span<const BatchItem> items, int block_size, int rows,
                             int scratch_block, const DecodeStepOffsets& at,
                             std::vector<std::byte>& out, int scratch_state_slot = -1);

}  // namespace nibble::backend::cuda
