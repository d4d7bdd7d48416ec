// Hidden states between the host and a CUDA step (engine/backend/cuda/hidden_rows.h), host code
// that runs without a GPU: hidden_in packed as BF16 in item order with runs of one width (an
// EAGLE-3 head's items mixing the target's and its own), and the step's BF16 rows handed to the
// items that want them.
#include <gtest/gtest.h>

#include <vector>

#include "engine/backend/cuda/hidden_rows.h"
#include "kernels/nvfp4/bf16.h"

namespace nibble::backend::cuda {
namespace {

float bf16_round(float v) {
  return nvfp4::bf16_to_float(nvfp4::float_to_bf16(v));
}

TEST(HiddenRows, HiddenInPacksInItemOrderInRunsOfOneWidth) {
  // Widths 6 (the target's), 6, 2 (the head's own), 6 over 2, 1, 3 and 1 tokens; an empty item.
  const std::vector<std::int32_t> t2 = {1, 2}, t1 = {3}, t3 = {4, 5, 6}, t1b = {7};
  std::vector<std::vector<float>> in = {std::vector<float>(12), std::vector<float>(6),
                                        std::vector<float>(6), std::vector<float>(6)};
  float v = 0.1f;
  for (auto& rows : in)
    for (float& x : rows) x = (v += 0.37f);
  std::vector<BatchItem> items(5);
  items[0].tokens = t2;
  items[0].hidden_in = in[0];
  items[1].tokens = t1;
  items[1].hidden_in = in[1];
  items[2].tokens = t3;
  items[2].hidden_in = in[2];
  // items[3]: no tokens, no rows
  items[4].tokens = t1b;
  items[4].hidden_in = in[3];
  ASSERT_EQ(hidden_in_elements(items), 30u);
  std::vector<std::uint16_t> packed(30);
  const std::vector<HiddenInRun> runs = pack_hidden_in(items, packed.data());
  ASSERT_EQ(runs.size(), 3u);
  EXPECT_EQ(runs[0].row0, 0);  // items 0 and 1: three rows of 6
  EXPECT_EQ(runs[0].rows, 3);
  EXPECT_EQ(runs[0].width, 6);
  EXPECT_EQ(runs[0].offset, 0u);
  EXPECT_EQ(runs[1].row0, 3);  // item 2: three rows of 2
  EXPECT_EQ(runs[1].rows, 3);
  EXPECT_EQ(runs[1].width, 2);
  EXPECT_EQ(runs[1].offset, 18u);
  EXPECT_EQ(runs[2].row0, 6);  // item 4: one row of 6
  EXPECT_EQ(runs[2].rows, 1);
  EXPECT_EQ(runs[2].width, 6);
  EXPECT_EQ(runs[2].offset, 24u);
  std::size_t at = 0;
  for (const auto& rows : in)
    for (float x : rows) EXPECT_EQ(nvfp4::bf16_to_float(packed[at++]), bf16_round(x));
}

TEST(HiddenRows, HiddenOutGoesToTheItemsThatWantIt) {
  constexpr std::size_t kWidth = 3;
  const std::vector<std::int32_t> t2 = {1, 2}, t1 = {3}, t3 = {4, 5, 6};
  std::vector<float> a(2 * kWidth, -1.0f), c(3 * kWidth, -1.0f);
  std::vector<BatchItem> items(3);
  items[0].tokens = t2;
  items[0].hidden_out = a;
  items[1].tokens = t1;  // wants none: its row is skipped
  items[2].tokens = t3;
  items[2].hidden_out = c;
  std::vector<std::uint16_t> rows;
  for (int i = 0; i < 6 * int(kWidth); ++i) rows.push_back(nvfp4::float_to_bf16(0.5f * float(i)));
  scatter_hidden_out(items, rows.data(), kWidth);
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i], 0.5f * float(i));
  for (std::size_t i = 0; i < c.size(); ++i) EXPECT_EQ(c[i], 0.5f * float(i + 3 * kWidth));
}

}  // namespace
}  // namespace nibble::backend::cuda
