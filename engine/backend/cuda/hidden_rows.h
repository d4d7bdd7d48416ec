#pragma once
// Hidden states between the host and a CUDA step (speculative decoding's mtp and eagle3), host
// code: the items' hidden_in rows packed as BF16 in item order with the runs of one width they
// form, and the step's BF16 hidden-state rows handed back to the items' hidden_out as floats.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "engine/backend/backend.h"

namespace nibble::backend::cuda {

// Rows of a step's hidden_in (act.hidden_in) of one width, in row order: an EAGLE-3 head takes
// the target's hidden states (3 target H a row, through fc) or its own (H) item by item.
struct HiddenInRun {
  std::int64_t row0 = 0, rows = 0, width = 0;
  std::size_t offset = 0;  // elements into the packed rows
};

// The elements every item's hidden_in holds together (pack_hidden_in's output size).
std::size_t hidden_in_elements(std::span<const BatchItem> items);

// Writes the items' hidden_in rows as BF16 to `out` (hidden_in_elements of them), item after
// item, and returns the runs they form: consecutive items of one row width share a run.
std::vector<HiddenInRun> pack_hidden_in(std::span<const BatchItem> items, std::uint16_t* out);

// `rows`: the step's BF16 hidden-state rows of `width`, items' rows in item order (as the step
// laid them out). Each item that wants them gets its rows in its hidden_out as floats.
void scatter_hidden_out(std::span<const BatchItem> items, const std::uint16_t* rows,
                        std::size_t width);

}  // namespace nibble::backend::cuda
