#pragma once
// Decode attention on tensor cores for steps of decodes only (one query row per sequence), the
// default for such steps (PagedAttentionArgs::decode_attention, AttentionOptions::decode_attention
// = false turns it off). Per (sequence, KV head), the keys are split over blocks
// (decode_attention_plan.h) and each block's 4 warps take 16-key steps (32 with the FP8 cache) in
// turn. A warp computes S^T = K Q^T with mma.sync m16n8k16 (16 keys as the M rows, the KV head's <=
// 8 query heads as the N columns: no padded query rows), an online softmax per head, and O^T += V^T
// P^T (P^T transposed in registers by movmatrix), reading every K/V row once straight from the
// paged cache into registers. The warps' partial softmaxes merge in shared memory, the blocks of a
// cluster (<= 8 splits) through distributed shared memory; more splits leave one partial per
// cluster for paged_attention's merge kernel. A dependent launch (kernels/dependent_launch.cuh):
// before waiting for the kernel before (the RoPE + KV store) each block asks the L2 for the cache
// rows of its older keys; q and every row are read after the wait (AttentionOptions::decode_overlap
// = false: a plain launch, the A/B). Shapes: head_dim 64/128/256, 1..8 query heads per KV head,
// BF16 or FP8 cache (kernels/attention/kv_fp8_ref.h), sm_90+ (clusters). Attention sinks join
// the last merge; a sliding window's splits share its keys alone (blocks before it are not read).
// Internal to kernels/attention; the CPU model of its decomposition: decode_attention_ref.h; the
// FP64 reference: attention_ref.h.
#include <cuda_runtime.h>

#include "kernels/attention/paged_attention.h"

namespace nibble::kernels::detail {

// Whether the kernel serves the shape on this device (head_dim, group size, cluster launch).
bool decode_attention_supported(const AttentionShape& shape);

// Runs a step of decodes only (args.num_tiles == args.rows, every tile one row) with `splits` key
// splits (a power of two). Sets *partials to the partial softmaxes per (row, head) it left in
// args.workspace for the merge kernel (1: it wrote args.out itself). Splits above a cluster need
// workspace for splits / 8 partials; without it the call runs 8. bs_shift: cache_slot()'s.
cudaError_t decode_attention(const PagedAttentionArgs& args, int splits, int bs_shift,
                             int* partials, cudaStream_t stream);

}  // namespace nibble::kernels::detail
