#pragma once
// How a mixture-of-experts layer's routed rows are laid out for the grouped expert GEMMs, shared by
// the device routing (moe_routing.h), its CPU reference (moe_routing_ref.h) and the grouped W4A16
// kernels (kernels/nvfp4/w4a16_grouped.h). Plain C++: builds without CUDA.
//
// Routed rows: T * k of them, grouped by expert (expert 0's first), tokens in increasing order
// inside each expert: the same order as engine/backend/moe_routing.h. A grouped GEMM launch runs
// over "row blocks" of at most `block_rows` routed rows, each inside one expert; expert e's rows
// [offsets[e], offsets[e + 1]) are its ceil(count / block_rows) blocks, experts in order. The
// number of blocks depends on the routing, so the table has a fixed size (moe_max_row_blocks: it
// depends on T, E, k and block_rows only, so a captured graph stays valid for any routing) and the
// entries past the real ones have expert = -1 (their GEMM blocks exit at once).
#include <algorithm>
#include <cstdint>

namespace nibble::kernels {

struct MoeRowBlock {
  std::int32_t expert;     // -1: no work
  std::int32_t row_begin;  // routed rows [row_begin, row_end), all of `expert`
  std::int32_t row_end;
};

// Device arrays of one layer's routing, sized for `tokens` (moe_routing.h's moe_routing_words
// gives the room).
struct MoeRouting {
  std::int32_t* expert = nullptr;   // [T, k]: token t's j-th pick
  float* weight = nullptr;          // [T, k]: its mixing weight
  std::int32_t* counts = nullptr;   // [E]: routed rows per expert
  std::int32_t* offsets = nullptr;  // [E + 1]
  std::int32_t* token = nullptr;    // [T k]: the token of each routed row (gather index)
  std::int32_t* source = nullptr;   // [T, k]: the routed row of token t's j-th pick
  MoeRowBlock* blocks = nullptr;    // [moe_max_row_blocks(T k, E, block_rows)]
};

// sum over active experts of ceil(c_e / B) <= sum (c_e / B + 1) = T k / B + active experts, and at
// most min(E, T k) experts are active; and every block holds at least one routed row, so there are
// at most T k of them (decode: k blocks, not k + 1, so the grouped launches have no row of grid
// blocks that is always empty).
inline std::int64_t moe_max_row_blocks(std::int64_t routed_rows, int experts, int block_rows) {
  return std::min(routed_rows, (routed_rows + block_rows - 1) / block_rows +
                                   std::min<std::int64_t>(experts, routed_rows));
}

// How router logits become a token's k picks and their mixing weights (the engine's
// model::MoeRouting): by default a softmax over all experts, the k highest probabilities, divided
// by their sum when norm_topk_prob (Qwen, Mixtral); with top_k_first the k highest logits, then a
// softmax over those k alone (gpt-oss; norm_topk_prob does not apply: the weights sum to 1).
// Ties go to the lower expert id either way.
struct MoeScoring {
  bool norm_topk_prob = false;
  bool top_k_first = false;
};

// Limits of the device routing: one warp per token holds up to 16 logits per lane.
inline constexpr int kMoeMaxExperts = 512;
inline constexpr int kMoeMaxTopK = 16;

// The device router linear (moe_routing.h moe_router_logits) sums logit [t, e] = x[t] . w[e] in
// this order, which its CPU reference (moe_routing_ref.h) repeats bitwise: the row in 16-byte
// pieces of 8 BF16 columns, piece p to thread p % kMoeRouterThreads of the block; a piece's 8
// products as FP32 fmas into 0 in column order, added to the thread's running sum; the 32 lanes of
// a warp by an xor butterfly (offsets 16, 8, 4, 2, 1); the warps' sums in warp order; then the
// router's bias where it has one (gpt-oss: BF16 [E]), one FP32 add.
inline constexpr int kMoeRouterThreads = 256;
inline constexpr int kMoeRouterExpertsPerBlock = 2;  // logit columns per block

}  // namespace nibble::kernels
