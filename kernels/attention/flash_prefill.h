#pragma once
// Paged causal attention on tensor cores for prefill chunks and mixed steps (flash attention, the
// FA2 scheme on mma.sync m16n8k16 BF16, which sm_90 and sm_120/121 both run). A block takes one
// attention tile (consecutive positions of one sequence) and one KV head; its 128 query rows (64
// for head_dim 256) are the tile's positions x the query heads that share the KV head, so every
// K/V chunk it stages in shared memory serves all of them. Scores and probabilities stay in
// registers (the score accumulators are re-packed as the A operand of P.V), the softmax is online
// in the exp2 domain, the causal mask applies only on chunks that reach the tile's first position.
// Forms (chunk size, score block, softmax arithmetic, block-table lookup) follow the kFlash*
// options of paged_attention.h, selectable per call for A/B measurements (PERF_NOTES.md v3); the
// production library holds the forms the device defaults pick, the dev library the rest
// (flash_prefill_dev.h).
// Shared memory: the query tile plus two K/V chunks, <= 96 KB (GB10 gives a block ~99 KB). Internal
// to kernels/attention: paged_attention() dispatches here; the FP64 reference is
// kernels/attention/attention_ref.h.
#include <cuda_runtime.h>

#include "kernels/attention/paged_attention.h"

namespace nibble::kernels::detail {

// head_dim 64, 128 or 256 with at most a block's query rows (128, or 64 for head_dim 256) of
// query heads per KV head.
bool flash_prefill_supported(const AttentionShape& shape);

// Positions per attention tile: the block's query rows / (query heads per KV head).
int flash_prefill_rows_per_tile(const AttentionShape& shape);

// The call's options: args.flash_options when >= 0, else the device's default: kFlashDefaultOptions
// with the v4 forms (kFlashLazyRescale, kFlashOneBarrier, kFlashMaskFree), and kFlashWideScores on
// Hopper (sm_9x): 127 there, 123 on sm_12x.
int flash_options(const PagedAttentionArgs& args);

// The bs_shift of cache_slot() (cache_slot.cuh) for a block size under the options: log2 of a
// power-of-two block size with kFlashShiftSlots, else -1 (divide).
int block_shift(int block_size, int options);

// Runs every tile with more than one row (tiles of one row are decodes: skip_single_rows leaves
// them to the decode kernel of the same step). splits > 1 writes partial softmaxes to
// args.workspace for merge_splits, as the other kernels do.
cudaError_t flash_prefill(const PagedAttentionArgs& args, int splits, bool skip_single_rows,
                          cudaStream_t stream);

// The forms outside the device defaults (the dev library's flash_enable_dev_forms sets the hook):
// options, splits, skip_single_rows and stream as flash_prefill's.
using FlashFormLaunch = cudaError_t (*)(const PagedAttentionArgs& args, int options, int splits,
                                        bool skip_single_rows, cudaStream_t stream);
void set_flash_dev_forms(FlashFormLaunch launch);

}  // namespace nibble::kernels::detail
