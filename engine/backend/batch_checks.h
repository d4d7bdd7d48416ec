#pragma once
// The argument checks every backend makes before it runs anything, so that a bad call throws
// BackendError and changes nothing, with the same messages whatever the backend.
#include <cstdint>
#include <span>
#include <string>

#include "engine/backend/backend.h"

namespace nibble::backend {

// forward(): at least one token, within the sequence's capacity, a vocab_size logits buffer.
void check_forward_args(const model::ModelConfig& c, const std::string& backend, int length,
                        int capacity, std::span<const std::int32_t> tokens,
                        std::span<const float> logits);

// forward_batch(): positions within the context, block tables long enough and in range (a
// sliding-window table only where the cache has a sliding group, in range from the window of
// the item's first position on: KvCache::sliding_window), logits buffers empty or num_logits *
// logits_size (vocab_size, an EAGLE-3 head's draft_vocab_size), num_logits 1 unless the backend
// returns several (then 1..tokens), tokens in the vocabulary; device sampling requests only where
// the backend samples on the device, complete, one per logits row, and not mixed with logits in one
// step; hidden states only where the backend returns them (hidden_states), tokens *
// hidden_state_width floats out, hidden_in exactly for a model whose input takes it
// (ModelConfig::mtp_module: tokens * hidden_size; ModelConfig::eagle3: that or tokens * 3 *
// target_hidden_size). Returns the batch's token count.
std::int64_t check_batch(const model::ModelConfig& c, const std::string& backend,
                         const KvCache& cache, std::span<const BatchItem> items,
                         bool device_sampling = false, bool several_logits = false,
                         bool hidden_states = false);

// forward_batch() of a model with recurrent state (needs_state) or without: with, every item
// names a state slot of the cache and no two the same; without, none names one.
void check_state_slots(const std::string& backend, const KvCache& cache,
                       std::span<const BatchItem> items, bool needs_state);

}  // namespace nibble::backend
