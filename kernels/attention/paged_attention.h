#pragma once
// Causal grouped-query attention over a paged BF16 KV cache (the serving path's attention).
// Rows of the batch are grouped into tiles: up to rows_per_tile consecutive rows of ONE sequence
// (consecutive positions), so that every K/V chunk a block loads serves all of the tile's queries
// and all the query heads that share a KV head. A query at position p sees keys [0, p] of its own
// sequence, found through the sequence's block table (with a sliding window, its latest `window`
// of them; attention sinks may join the softmax: PagedAttentionArgs::sinks, window). Kernels behind
// one call: steps of decodes only take the decode attention kernel (decode_attention.h: tensor
// cores, keys split over clusters of blocks; AttentionOptions::decode_attention = false: the flash
// kernel or the CUDA-core decode kernel, keys split over blocks); prefill chunks and mixed steps
// the flash kernel on tensor cores (flash_prefill.h) for head_dim 64/128/256, else a tile kernel in
// FP32. The CPU reference: kernels/attention/attention_ref.h (FP64).
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/kernel_options.h"

namespace nibble::kernels {

struct AttentionTile {
  std::int32_t row0 = 0;          // first row of the batch in this tile
  std::int32_t rows = 0;          // 1..rows_per_tile
  std::int32_t position0 = 0;     // position of row0; row0 + i is at position0 + i
  std::int32_t table_offset = 0;  // where the sequence's block table starts in block_tables
};

struct AttentionShape {
  int q_heads = 0, kv_heads = 0, head_dim = 0;
};

// Rows per tile for a shape: as many as keep a block's queries x head_dim within its registers.
int attention_rows_per_tile(const AttentionShape& shape, const AttentionOptions& options = {});

// The flash kernel's forms (flash_prefill.h), chosen per call by PagedAttentionArgs::flash_options
// (-1: the device's default), so that each change can be measured against the form before it in
// one process (test_attention_gpu --bench). 0 is the v2 kernel (PERF_NOTES.md).
// head_dim 128: 64-key K/V chunks (v2: 32).
inline constexpr int kFlashChunk64 = 1;
// One FFMA + ex2 per score; O rescaled only when a row's max grows.
inline constexpr int kFlashFastSoftmax = 2;
// With kFlashChunk64: score the 64 keys at once instead of two blocks of 32.
inline constexpr int kFlashWideScores = 4;
// Block-table lookups by shift and mask when the block size is a power of two (v2: division), in
// the flash and the decode kernel.
inline constexpr int kFlashShiftSlots = 8;
// With kFlashFastSoftmax at head_dim 128: lazy rescale (O and the row sums move to a new max only
// when a row's max passes the one they use by more than 2^8) and the exponentials computed inside
// the P.V step, so that the ex2 work overlaps the P.V mma.sync (flash_prefill.cu).
inline constexpr int kFlashLazyRescale = 16;
// BF16 cache: one barrier per K/V chunk instead of two (the next chunk's copies start right after
// the barrier that says this one landed and the previous one is consumed).
inline constexpr int kFlashOneBarrier = 32;
// With kFlashLazyRescale: score blocks off the causal diagonal run a copy of the block without any
// masking code, so that QK^T, the row max and its vote share one basic block.
inline constexpr int kFlashMaskFree = 64;
inline constexpr int kFlashAllOptions = 127;
inline constexpr int kFlashDefaultOptions = kFlashChunk64 | kFlashFastSoftmax | kFlashShiftSlots;

struct PagedAttentionArgs {
  const std::uint16_t* q = nullptr;        // [T, Hq, D], rotated
  const std::uint16_t* k_cache = nullptr;  // [cache rows, Hkv, D]
  const std::uint16_t* v_cache = nullptr;
  const std::int32_t* block_tables = nullptr;  // concatenated block tables
  int block_size = 0;
  const AttentionTile* tiles = nullptr;
  int num_tiles = 0;
  AttentionShape shape;
  float scale = 1.0f;            // applied to q.k (1 / sqrt(D))
  std::uint16_t* out = nullptr;  // [T, Hq, D]
  // Splitting the keys over several blocks (flash-decoding) when the tiles alone leave SMs idle,
  // as a decode step of few sequences does: each block's partial softmax goes to the workspace
  // and a second kernel merges them. Without a workspace (or sm_count 0) keys are not split.
  int rows = 0;          // T
  int max_position = 0;  // the batch's largest position
  int sm_count = 0;
  // 0: splits chosen from max_position; > 0: exactly this many (a captured decode graph keeps the
  // count it was captured with; blocks whose share of the keys is empty write nothing to merge).
  int splits = 0;
  float* workspace = nullptr;
  std::size_t workspace_floats = 0;
  // Tiles of one row (decodes) among num_tiles; -1: unknown. In a step that also has longer tiles
  // they run in the decode kernel beside the flash kernel; 0 saves that kernel's launch.
  int decode_tiles = -1;
  // Steps of decodes only: 1 runs the flash kernel, 0 the decode kernel, -1 the default
  // (options.flash_decode: the flash kernel where it serves the shape).
  int flash_decode = -1;
  // The FP8 cache (kernels/attention/kv_fp8_ref.h) instead of k_cache / v_cache when k_cache8 is
  // set: E4M3 codes [cache rows, Hkv, D], BF16 scales [cache rows, Hkv]. Shapes:
  // paged_attention_fp8_supported.
  const std::uint8_t* k_cache8 = nullptr;
  const std::uint8_t* v_cache8 = nullptr;
  const std::uint16_t* k_scale = nullptr;
  const std::uint16_t* v_scale = nullptr;
  // The flash kernel's form: a mask of the kFlash* options above; -1: the device's default
  // (flash_prefill.h). For A/B measurements and tests: a mask whose form the defaults do not pick
  // needs the dev library's flash_enable_dev_forms (flash_prefill_dev.h), else
  // cudaErrorNotSupported.
  int flash_options = -1;
  // Steps of decodes only: 1 runs the decode attention kernel (decode_attention.h: tensor cores,
  // keys split finely over clusters of blocks) where it serves the shape, 0 the choice above
  // (flash_decode), -1 the default (options.decode_attention).
  int decode_attention = -1;
  // gpt-oss's attention features (the CPU reference: attention_ref.h's RefAttentionFeatures), off
  // by default and free when off; every kernel behind paged_attention() takes them.
  // Attention sinks: [Hq] FP32 logits in the units of the scaled scores (q.k * scale), one per
  // query head, each joining its head's softmax denominators and weighing no value; nullptr: none.
  const float* sinks = nullptr;
  // Sliding window: > 0, a query at position p sees keys [p - window + 1, p] only (transformers'
  // kv_idx > q_idx - sliding_window); 0, keys [0, p]. Keys before a tile's window (its first
  // row's: position0 - window + 1) are not read, nor their block-table entries: a sliding-window
  // cache may return the blocks wholly before it to the pool.
  int window = 0;
  // The process's switches (the per-call fields above override three of them).
  AttentionOptions options;
};

// Whether an FP8 cache can serve this shape (both the decode and the flash kernel have it: head_dim
// 64/128/256 with 1, 2, 4 or 8 query heads per KV head, 8 at head_dim 256 included).
bool paged_attention_fp8_supported(const AttentionShape& shape);

// How many key splits a call would use (a power of two, so that a decode graph captured for one
// count serves a range of context lengths and matches eager execution), and the workspace floats
// they need.
int paged_attention_splits(const AttentionShape& shape, int num_tiles, int max_position,
                           int sm_count);
std::size_t paged_attention_workspace_floats(const AttentionShape& shape, int rows, int splits);

// The split count for a step of decodes only (one query row per sequence, `rows` sequences):
// about four blocks a multiprocessor where the keys allow, each split at least one step of every
// warp of the decode kernel. A few sequences at short contexts otherwise run one block per KV
// head, each warp walking every key in turn with no other warp on its scheduler to hide the
// latency (Qwen3-30B-A3B, 66 keys: 4 blocks, 25 us a layer on an H200). Power of two, as above.
// `flash_decode` and `decode_attention` as in PagedAttentionArgs (-1: the options' value), options
// as the calls will pass them: each kernel has its own best
// split (the decode attention kernel's: decode_attention_plan.h). Non-decreasing in max_position,
// through every power of two up to its value at the longest context (the split counts a decode
// graph bucket can take are those).
int paged_decode_splits(const AttentionShape& shape, int rows, int max_position, int sm_count,
                        int flash_decode = -1, int decode_attention = -1,
                        const AttentionOptions& options = {});

// Returns cudaErrorInvalidValue for shapes it cannot run (head_dim not a multiple of 8 or above
// 256: two K/V chunks must fit GB10's ~100 KB of shared memory per block, Hq not a multiple of
// Hkv), else the launch error. The KV cache rows must be 16-byte aligned (cudaMalloc'd caches are).
cudaError_t paged_attention(const PagedAttentionArgs& args, cudaStream_t stream);

}  // namespace nibble::kernels
