#include "engine/backend/own_cache_sequence.h"

#include <numeric>
#include <string>
#include <vector>

#include "engine/backend/batch_checks.h"

namespace nibble::backend {
namespace {

constexpr int kBlockSize = 16;

class OwnCacheSequence : public SequenceState {
 public:
  OwnCacheSequence(Backend& backend, int capacity)
      : owner(&backend),
        capacity_(capacity),
        cache(new_private_cache(backend, capacity, kBlockSize)) {}
  int length() const override { return length_; }
  int capacity() const override { return capacity_; }

  const Backend* owner;
  int capacity_;
  int length_ = 0;
  PrivateCache cache;
};

}  // namespace

PrivateCache new_private_cache(Backend& backend, int positions, int block_size) {
  const int blocks = (positions + block_size - 1) / block_size;
  const bool sliding = backend.kv_sliding_window() > 0;
  const bool hybrid = backend.state_slot_bytes() > 0;
  PrivateCache c;
  c.cache = backend.new_kv_cache_with_state(blocks * (sliding ? 2 : 1), block_size, hybrid ? 1 : 0);
  c.table.resize(std::size_t(blocks));
  std::iota(c.table.begin(), c.table.end(), 0);
  if (sliding) {
    c.window_table.resize(std::size_t(blocks));
    std::iota(c.window_table.begin(), c.window_table.end(), blocks);
  }
  if (hybrid) c.state_slot = 0;
  return c;
}

BatchItem PrivateCache::item(std::span<const std::int32_t> tokens, int start) const {
  BatchItem item{tokens, start, table};
  item.window_block_table = window_table;
  item.state_slot = state_slot;
  return item;
}

std::unique_ptr<SequenceState> new_own_cache_sequence(Backend& backend, int max_tokens) {
  const int context = backend.config().max_context;
  if (max_tokens < 1 || max_tokens > context)
    throw BackendError(backend.name() + " backend: a sequence needs 1.." + std::to_string(context) +
                       " positions, asked for " + std::to_string(max_tokens));
  return std::make_unique<OwnCacheSequence>(backend, max_tokens);
}

void forward_own_cache_sequence(Backend& backend, SequenceState& state,
                                std::span<const std::int32_t> tokens, std::span<float> logits) {
  auto* seq = dynamic_cast<OwnCacheSequence*>(&state);
  if (!seq || seq->owner != &backend)
    throw BackendError(backend.name() + " backend: sequence state belongs to another backend");
  check_forward_args(backend.config(), backend.name(), seq->length_, seq->capacity_, tokens,
                     logits);
  BatchItem item = seq->cache.item(tokens, seq->length_);
  item.logits = logits;
  backend.forward_batch(*seq->cache.cache, std::span(&item, 1));
  seq->length_ += int(tokens.size());
}

std::unique_ptr<KvCache> Backend::new_kv_cache_with_state(int num_blocks, int block_size,
                                                          int state_slots) {
  if (state_slots != 0)
    throw BackendError(name() + " backend: " + config().architecture +
                       " keeps no recurrent state; a cache for it takes 0 state slots, not " +
                       std::to_string(state_slots));
  return new_kv_cache(num_blocks, block_size);
}

std::unique_ptr<SequenceState> Backend::new_sequence(int max_tokens) {
  return new_own_cache_sequence(*this, max_tokens);
}

void Backend::forward(SequenceState& sequence, std::span<const std::int32_t> tokens,
                      std::span<float> logits) {
  forward_own_cache_sequence(*this, sequence, tokens, logits);
}

}  // namespace nibble::backend
