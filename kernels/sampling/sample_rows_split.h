#pragma once
// The split sampling pass (sample_rows_split.cu): the function of sample_rows.h with a row spread
// over a thread-block cluster (1..16 blocks of 1024 threads, each a contiguous slice of the row's
// 4-token Philox groups), the blocks' partials (softmax max/sum, argmax, race winner, radix
// histograms) exchanged through distributed shared memory, vector loads, a fused first pass
// (raw logsumexp with the greedy argmax when nothing changes the logits) and warp-aggregated
// histogram atomics. Internal to kernels/sampling: sample_rows() picks it and its blocks per row.
#include <cuda_runtime.h>

#include "kernels/sampling/sample_rows.h"

namespace nibble::kernels {

// How a select pass adds an element's weight to the 256-bin shared histogram.
enum class HistAdds : int {
  kAtomic = 0,  // one shared atomic per element (the first kernel's way)
  kMatch = 1,   // one atomic per distinct bin of a warp (__match_any_sync)
  kBallot = 2,  // up to 4 rounds of (a lane's bin, the lanes that share it), then per lane
};

// blocks_per_row: 1 (a plain launch) or 2..16 (a cluster launch, sm_90 or newer; above 8 where
// the device runs non-portable cluster sizes, else fewer).
cudaError_t sample_rows_split(const SampleRowsArgs& args, int blocks_per_row, HistAdds adds,
                              cudaStream_t stream);

}  // namespace nibble::kernels
