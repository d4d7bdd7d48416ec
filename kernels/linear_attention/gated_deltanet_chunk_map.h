#pragma once
// How the chunked delta-rule kernels (gated_deltanet_chunked.cu) find their work in a step's rows
// (gated_deltanet.h's GatedDeltaNetRow, device or host memory): the chunked row holding a token,
// and the (row, chunk) of a block of the per-chunk grid. Shared with the CPU test
// tests/kernels/test_gated_deltanet_chunk_map.cpp.
#include <cstdint>

#include "kernels/host_device.h"
#include "kernels/linear_attention/gated_deltanet.h"

namespace nibble::kernels {

inline constexpr int kGatedDeltaChunk = 64;  // tokens a chunk of the WY form

// Whether a row runs the chunked form: long enough, and not a verify row, whose state after each
// token only the recurrent kernel keeps (GatedDeltaNetRow::snapshot).
NIBBLE_HOST_DEVICE inline bool takes_chunked_form(const GatedDeltaNetRow& row, int min_tokens) {
  return row.count >= min_tokens && row.snapshot == 0;
}

// The index of the row holding token t if that row runs the chunked form (takes_chunked_form),
// else -1 (t in no row, or in a row the recurrent form runs).
NIBBLE_HOST_DEVICE inline int chunked_row_of(const GatedDeltaNetRow* rows, int num_rows,
                                             int min_tokens, std::int64_t t) {
  for (int r = 0; r < num_rows; ++r) {
    const GatedDeltaNetRow row = rows[r];
    if (t >= row.first && t < std::int64_t(row.first) + row.count)
      return takes_chunked_form(row, min_tokens) ? r : -1;
  }
  return -1;
}

// Blocks a per-chunk grid needs for a step of `tokens` packed tokens in num_rows rows: each row's
// partial chunk is at most one more than tokens / chunk.
inline std::int64_t chunk_grid_blocks(std::int64_t tokens, int num_rows) {
  return tokens / kGatedDeltaChunk + num_rows;
}

// Block b's row and chunk among the chunked rows' chunks, rows in order; false past the last.
NIBBLE_HOST_DEVICE inline bool chunk_of_block(const GatedDeltaNetRow* rows, int num_rows,
                                              int min_tokens, int b, int& row, int& chunk) {
  int seen = 0;
  for (int r = 0; r < num_rows; ++r) {
    if (!takes_chunked_form(rows[r], min_tokens)) continue;
    const int count = rows[r].count;
    const int chunks = (count + kGatedDeltaChunk - 1) / kGatedDeltaChunk;
    if (b < seen + chunks) {
      row = r;
      chunk = b - seen;
      return true;
    }
    seen += chunks;
  }
  return false;
}

}  // namespace nibble::kernels
