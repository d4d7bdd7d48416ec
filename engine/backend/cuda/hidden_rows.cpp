#include "engine/backend/cuda/hidden_rows.h"

#include <algorithm>

#include "kernels/nvfp4/bf16.h"

namespace nibble::backend::cuda {

std::size_t hidden_in_elements(std::span<const BatchItem> items) {
  std::size_t n = 0;
  for (const BatchItem& item : items) n += item.hidden_in.size();
  return n;
}

std::vector<HiddenInRun> pack_hidden_in(std::span<const BatchItem> items, std::uint16_t* out) {
  std::vector<HiddenInRun> runs;
  std::int64_t row = 0;
  std::size_t offset = 0;
  for (const BatchItem& item : items) {
    const auto rows = std::int64_t(item.tokens.size());
    if (rows == 0) continue;
    const std::int64_t width = std::int64_t(item.hidden_in.size()) / rows;
    std::transform(item.hidden_in.begin(), item.hidden_in.end(), out + offset,
                   nvfp4::float_to_bf16);
    if (!runs.empty() && runs.back().width == width)
      runs.back().rows += rows;
    else
      runs.push_back({row, rows, width, offset});
    row += rows;
    offset += item.hidden_in.size();
  }
  return runs;
}

void scatter_hidden_out(std::span<const BatchItem> items, const std::uint16_t* rows,
                        std::size_t width) {
  for (const BatchItem& item : items) {
    const std::size_t n = item.tokens.size() * width;
    if (!item.hidden_out.empty())
      std::transform(rows, rows + n, item.hidden_out.begin(), nvfp4::bf16_to_float);
    rows += n;
  }
}

}  // namespace nibble::backend::cuda
