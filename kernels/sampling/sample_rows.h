#pragma once
// Device sampling: one launch samples the next token of every row of a step's FP32 logits, as
// sampling_types.h defines it (CPU reference: sampling_ref.h). Only the sampled ids, their
// logprobs and the requested top logprobs leave the device. No host synchronisation and fixed
// buffers: capturable in a CUDA graph.
//
// Two kernels compute it (the switches are below). The split kernel (sample_rows_split.h, the
// default) spreads a row over a cluster of blocks, exchanges partials through distributed shared
// memory and combines histogram adds within each warp; otherwise it follows the method of the
// first kernel, described here.
// Method (one 1024-thread block per row, several passes over the row, which stays in L2):
// raw max and sum of exponentials (online softmax); top-N raw logprobs by a radix select of the
// N-th largest logit then a gather; penalties applied in place; greedy rows end with one argmax
// pass. Sampled rows: the max of y = z / T, then each threshold of step 5 by a 4-pass radix
// select over the order-preserving 32-bit key of y (8 bits a pass, a 256-bin histogram in shared
// memory), counting tokens for top-k and summing 32.32 fixed-point masses for top-p (integer
// atomics: the same sums in any order), and one race pass drawing the token. A greedy row reads
// the row about 3 times, a temperature-only row 3, top-k and top-p add 4 each (top-p 5).
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/sampling/sampling_types.h"

namespace nibble::kernels {

// The pass's A/B switches (the engine's options, tests and benchmarks set them; the defaults are
// the production forms). split = 0 runs the first kernel (one block a row, scalar loads, one
// shared atomic per element in the selects); otherwise the split kernel (sample_rows_split.h) over
// at most blocks_per_row blocks a row (1..16; < 0: up to 16 for one row, up to 8 for more, as many
// as keep rows x blocks within the device's SMs), its selects adding to their histograms as
// `aggregate` says: 0 one shared atomic per element, 1 one per distinct bin of a warp by
// __match_any_sync, 2 by up to 4 ballot rounds (< 0: 1).
struct SampleRowsTuning {
  int split = 1;            // 0: the first kernel; 1: the split kernel
  int blocks_per_row = -1;  // the split kernel's most blocks a row (1..16; < 0: by the rows)
  int aggregate = 1;        // 0, 1, 2: sample_rows_split.h HistAdds (split kernel)
};

struct SampleRowsArgs {
  float* logits = nullptr;  // [rows, vocab]; the penalties are applied in place
  int rows = 0;
  int vocab = 0;
  const SamplingRow* params = nullptr;         // [rows]
  const SamplingPenalty* penalties = nullptr;  // the step's lists, rows' slices by offset/count
  float* penalty_raw = nullptr;                // as long as the lists: listed tokens' raw logits
  const std::uint32_t* bitmask = nullptr;      // rows' masks at their bitmask_offset, or null
  SampledRow* out = nullptr;                   // [rows]
  TopLogprob* top = nullptr;  // [rows, kMaxSampledTopLogprobs]; row r's first num_top_logprobs
  SampleRowsTuning tuning;
};

// Enqueues the pass on `stream`; returns the launch error (cudaErrorInvalidValue for bad sizes).
cudaError_t sample_rows(const SampleRowsArgs& args, cudaStream_t stream);

}  // namespace nibble::kernels
