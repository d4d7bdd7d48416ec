#pragma once
// vLLM's "draft_model" method: a small model of the target's tokenizer (a Qwen3-0.6B for a larger
// Qwen3) proposes k tokens greedily, each the argmax of its logits after the one before. It runs
// on its own Backend (the same kind as the target's) and its own paged KV cache.
//
// Why the draft KV is keyed by token content and not by a sequence id: the Drafter interface
// (drafter.h) sees only a sequence's tokens, and everything a sequence id would need the engine
// to report (finish, abort, preemption and its recompute, n > 1 choices) is covered by content
// alone. The cache holds `max_sequences` slots, each the KV of one token prefix (its `tokens`:
// the tokens of the call that last used it, then the drafts it fed). A call picks the slot
// whose last caller's tokens are a prefix of its own (the same sequence, some steps on, or
// recomputed after a preemption) sharing the longest prefix with it. The slot is truncated to
// the common prefix, which drops the drafts the target rejected (no copy: the next tokens
// overwrite those positions), and only the rest is computed. A call that matches no slot so
// takes a free slot or evicts the least recently used one and computes its whole prefix: a
// finished sequence's slot ages out; two choices of one prompt share the prompt's slot until their
// outputs differ.
//
// Memory: max_sequences slots of max_tokens_per_sequence positions (capped at the draft model's
// context), allocated once at construction: kv_bytes(); with the activations of a step of
// max_chunk_tokens, reserved then too (Backend::device_memory_for_kv). Sequences beyond
// max_sequences still get drafts, at the price of recomputing their prefix when their slot was
// evicted. Thread-safe: one mutex around propose (the engine loop calls it from its one thread).
// Models with recurrent state (hybrid) are refused as drafts: their state cannot be truncated.
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/spec/draft_slots.h"
#include "engine/spec/drafter.h"

namespace nibble::spec {

struct DraftModelOptions {
  int max_sequences = 16;             // slots: sequences whose draft KV is kept (LRU beyond)
  int max_tokens_per_sequence = 256;  // positions per slot (the target's max_model_len)
  int block_size = 16;                // positions per draft KV block
  // The most tokens of a prefix run in one forward pass (longer prefixes run in chunks): bounds
  // the draft's activations, which the constructor reserves on the device.
  int max_chunk_tokens = 512;
};

// Throws SpeculativeConfigError where the draft cannot serve the target: a vocabulary size
// other than the target's (the draft's token ids must mean the target's tokens), a hybrid
// model, options out of range.
class DraftModelDrafter : public Drafter {
 public:
  DraftModelDrafter(std::unique_ptr<backend::Backend> draft, int target_vocab_size,
                    const DraftModelOptions& options);
  std::string_view name() const override { return "draft_model"; }
  // Greedy: at most max_tokens tokens, fewer where the slot's capacity ends first.
  void propose(std::span<const int> tokens, int max_tokens, std::vector<int>& draft) const override;

  struct Stats {
    std::uint64_t computed_tokens = 0;  // positions the draft model ran (prefixes and drafts)
    std::uint64_t reused_tokens = 0;    // prefix positions found in a slot, not recomputed
    std::uint64_t evictions = 0;        // slots taken from another prefix
  };
  Stats stats() const;
  std::size_t kv_bytes() const { return kv_.bytes; }
  int max_sequences() const { return int(slots_.size()); }
  int max_tokens_per_sequence() const { return kv_.capacity; }
  const model::ModelConfig& config() const { return backend_->config(); }

 private:
  struct Slot {
    std::vector<int> tokens;  // what the slot's positions [0, tokens.size()) hold
    std::size_t fed = 0;      // how many of them its last call's tokens were (the rest: drafts)
    std::uint64_t last_use = 0;
    std::vector<int> block_table;  // its fixed blocks of the cache
  };
  // The slot for `tokens` and how many of its positions stay valid.
  std::pair<Slot*, std::size_t> slot_for(std::span<const int> tokens) const;
  // Runs tokens at positions [start, ...) of `slot` and returns the argmax after the last.
  int run(Slot& slot, std::span<const int> tokens, std::size_t start) const;

  std::unique_ptr<backend::Backend> backend_;
  DraftSlots kv_;  // the draft's KV cache and each slot's blocks
  int max_chunk_;
  mutable std::mutex mutex_;
  mutable std::vector<Slot> slots_;
  mutable std::vector<float> logits_;
  mutable std::uint64_t clock_ = 0;
  mutable Stats stats_;
};

}  // namespace nibble::spec
