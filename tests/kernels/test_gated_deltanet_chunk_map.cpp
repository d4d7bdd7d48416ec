// kernels/linear_attention/gated_deltanet_chunk_map.h: on random steps of mixed rows (decode
// rows, short and long prompt chunks, rows on and off chunk multiples), the per-chunk grid of
// chunk_grid_blocks covers every chunk of every chunked row exactly once and nothing else, and
// chunked_row_of finds each token's row when (and only when) that row is chunked.
#include "kernels/linear_attention/gated_deltanet_chunk_map.h"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <utility>
#include <vector>

namespace nibble::kernels {
namespace {

TEST(GatedDeltaNetChunkMap, GridCoversEveryChunkOnce) {
  std::mt19937 rng(std::random_device{}());
  std::uniform_int_distribution<int> rows_n(1, 12), kind(0, 3), long_len(64, 300), short_len(2, 63);
  for (int trial = 0; trial < 200; ++trial) {
    const int min_tokens = trial % 3 == 0 ? 1 : 64;
    std::vector<GatedDeltaNetRow> rows;
    std::int32_t first = 0;
    const int n = rows_n(rng);
    for (int r = 0; r < n; ++r) {
      const int k = kind(rng);
      const int count = k == 0   ? 1
                        : k == 1 ? short_len(rng)
                        : k == 2 ? 64 * (1 + r % 3)
                                 : long_len(rng);
      rows.push_back({r + 5, first, count});
      first += count;
    }
    const std::int64_t tokens = first;
    std::map<std::pair<int, int>, int> covered;
    const auto blocks = chunk_grid_blocks(tokens, n);
    for (int b = 0; b < blocks; ++b) {
      int row = -1, chunk = -1;
      if (chunk_of_block(rows.data(), n, min_tokens, b, row, chunk)) ++covered[{row, chunk}];
    }
    int chunks = 0;
    for (int r = 0; r < n; ++r) {
      if (rows[std::size_t(r)].count < min_tokens) continue;
      for (int c = 0; c * kGatedDeltaChunk < rows[std::size_t(r)].count; ++c, ++chunks)
        EXPECT_EQ((covered[{r, c}]), 1) << "row " << r << " chunk " << c;
    }
    EXPECT_EQ(int(covered.size()), chunks);  // nothing else
    for (std::int64_t t = 0; t < tokens; ++t) {
      const int r = chunked_row_of(rows.data(), n, min_tokens, t);
      int holder = 0;
      while (!(t >= rows[std::size_t(holder)].first &&
               t < rows[std::size_t(holder)].first + rows[std::size_t(holder)].count))
        ++holder;
      EXPECT_EQ(r, rows[std::size_t(holder)].count >= min_tokens ? holder : -1) << "token " << t;
    }
    EXPECT_EQ(chunked_row_of(rows.data(), n, min_tokens, tokens), -1);  // past the step
  }
}

}  // namespace
}  // namespace nibble::kernels
