#pragma once
// Backend::new_sequence() and forward() in terms of forward_batch(): a sequence owns a private
// KV cache whose block table is the identity. Backend's default new_sequence() and forward()
// are these (defined in own_cache_sequence.cpp).
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "engine/backend/backend.h"

namespace nibble::backend {

// One sequence's private cache for `positions` positions in blocks of block_size: identity block
// tables (the sliding group's, where the backend keeps one, after the full group's blocks, all
// kept: nothing here frees), and the one recurrent-state slot of a hybrid model.
struct PrivateCache {
  std::unique_ptr<KvCache> cache;
  std::vector<int> table, window_table;
  int state_slot = -1;  // 0 for a hybrid model
  // An item over these tables (BatchItem's other fields left to the caller).
  BatchItem item(std::span<const std::int32_t> tokens, int start) const;
};
PrivateCache new_private_cache(Backend& backend, int positions, int block_size);

// Throws BackendError unless 1 <= max_tokens <= max_context.
std::unique_ptr<SequenceState> new_own_cache_sequence(Backend& backend, int max_tokens);

// Throws BackendError for a sequence of another backend or bad arguments (batch_checks.h),
// leaving the sequence unchanged.
void forward_own_cache_sequence(Backend& backend, SequenceState& sequence,
                                std::span<const std::int32_t> tokens, std::span<float> logits);

}  // namespace nibble::backend
