#pragma once
// Backend::new_sequence() and forward() in terms of forward_batch(): a sequence owns a private
// KV cache whose block table is the identity. Backend's default new_sequence() and forward()
// are these (defined in own_cache_sequence.cpp).
#include <cstdint>
#include <memory>
#include <span>

#include "engine/backend/backend.h"

namespace nibble::backend {

// Throws BackendError unless 1 <= max_tokens <= max_context.
std::unique_ptr<SequenceState> new_own_cache_sequence(Backend& backend, int max_tokens);

// Throws BackendError for a sequence of another backend or bad arguments (batch_checks.h),
// leaving the sequence unchanged.
void forward_own_cache_sequence(Backend& backend, SequenceState& sequence,
                                std::span<const std::int32_t> tokens, std::span<float> logits);

}  // namespace nibble::backend
