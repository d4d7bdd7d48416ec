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

// blocks_per_row: 1 (a plain launch) or 2..16 (a cluster launch, sm_90 or newer; above 8 the
// device must allow non-portable cluster sizes). aggregate: histogram adds combined within each
// warp (__match_any_sync) instead of one shared atomic per element.
cudaError_t sample_rows_split(const SampleRowsArgs& args, int blocks_per_row, bool aggregate,
                              cudaStream_t stream);

}  // namespace nibble::kernels
