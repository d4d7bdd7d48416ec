#pragma once
// The drafters that run a draft head on the target's hidden states, as vLLM's EAGLE proposer
// runs its "mtp" and "eagle3" methods:
//   mtp: the target's own multi-token-prediction module (Qwen3-Next's mtp.*,
//     model::take_mtp_module), reading the target's last hidden state (before its final norm);
//   eagle3: an EAGLE-3 head (model::load_eagle3_head), reading the inputs of three of the
//     target's layers side by side (ModelConfig::hidden_state_layers), which its fc reduces.
// At position i the head reads token i + 1's embedding and the target's hidden state at i and
// predicts token i + 2. So after a step whose sequence holds tokens [0, n) with the target's
// hidden states of positions [0, n - 1), the head runs the positions it has not run yet, up to
// n - 2, and its prediction there is the first draft. Drafts 2..k chain the head on itself, as
// vLLM does: the next position reads the draft just made and the head's own output hidden state
// (mtp: after mtp.norm, what vLLM's Qwen3-Next MTP returns; eagle3: its layer's output before
// the final norm, vLLM's hidden_prenorm). An EAGLE-3 head predicts over its own vocabulary,
// whose ids d2t maps to the target's (the drafts are target ids).
//
// Per sequence (by the engine's sequence id; drafter.h) a slot keeps the head's KV cache (one
// attention layer) and the target's hidden states it has not run yet. The head's KV holds
// positions computed from the target's hidden states; chained positions beyond them are written
// and then overwritten by the next call's run before anything reads them, so rejected drafts
// need no rollback of their own: the target's rejections show as the next observe's start. A
// sequence first observed past position 0 (a prefix-cache hit, a slot lost to eviction) gets no
// drafts: the head has no hidden states for its prefix.
//
// Memory: max_sequences slots of max_tokens_per_sequence positions, allocated at construction
// (kv_bytes()); beyond max_sequences the least recently used sequence loses its slot (and its
// drafts until it restarts). Thread-safe: one mutex.
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/spec/draft_slots.h"
#include "engine/spec/drafter.h"

namespace nibble::spec {

struct HiddenStateDrafterOptions {
  int max_sequences = 64;             // slots: the engine's max_num_seqs
  int max_tokens_per_sequence = 256;  // positions per slot (the target's max_model_len)
  int block_size = 16;                // positions per KV block of the head
  int max_chunk_tokens = 512;         // the most positions one forward pass of the head runs
};

// Throws SpeculativeConfigError where the head cannot serve: a backend that does not return
// hidden states, a model that is neither an MTP module (ModelConfig::mtp_module) nor an EAGLE-3
// head (ModelConfig::eagle3), a draft_to_target (an EAGLE-3 head's d2t, Eagle3Weights) that is
// not one target id per draft id (or missing where the head's vocabulary is smaller), options
// out of range.
class HiddenStateDrafter : public Drafter {
 public:
  HiddenStateDrafter(std::unique_ptr<backend::Backend> head,
                     const HiddenStateDrafterOptions& options,
                     std::vector<int> draft_to_target = {});
  std::string_view name() const override { return name_; }
  bool reads_hidden_states() const override { return true; }
  void observe(std::int64_t sequence, std::span<const int> tokens, int start,
               std::span<const float> hidden_states) const override;
  void forget(std::int64_t sequence) const override;
  // Greedy: at most max_tokens drafts, fewer where the slot's capacity ends first; none for a
  // sequence whose hidden states do not reach its last token.
  void propose_for(std::int64_t sequence, std::span<const int> tokens, int max_tokens,
                   std::vector<int>& draft) const override;
  // Throws std::logic_error: the head drafts per sequence (propose_for).
  void propose(std::span<const int> tokens, int max_tokens, std::vector<int>& draft) const override;

  struct Stats {
    std::uint64_t computed_tokens = 0;  // positions the head ran on the target's hidden states
    std::uint64_t chained_tokens = 0;   // positions it ran on its own drafts
    std::uint64_t evictions = 0;        // slots taken from another sequence
  };
  Stats stats() const;
  std::size_t kv_bytes() const { return kv_.bytes; }
  const model::ModelConfig& config() const { return backend_->config(); }

 private:
  struct Slot {
    std::int64_t sequence = -1;
    bool usable = false;  // observed from position 0 on, every step since
    int observed = 0;     // the target's hidden states of positions [0, observed) were handed
    int ran = 0;          // the head's KV holds positions [0, ran) (ran <= observed)
    std::vector<float> pending;   // the target's hidden states of positions [ran, observed)
    std::vector<float> last_row;  // and of position ran - 1 (a call with nothing new reruns it)
    std::uint64_t last_use = 0;
    std::vector<int> block_table;  // its fixed blocks of the cache
  };
  Slot* find(std::int64_t sequence) const;
  // Runs positions [start, start + tokens.size()) of `slot` on `hidden` (a row per token); the
  // last row's greedy next token (a target id) and output hidden state (into last_hidden_).
  int run(Slot& slot, std::span<const int> tokens, int start, std::span<const float> hidden) const;

  std::unique_ptr<backend::Backend> backend_;
  std::string name_;                  // "mtp" or "eagle3"
  std::vector<int> draft_to_target_;  // empty: the head's ids are the target's
  DraftSlots kv_;                     // the draft's KV cache and each slot's blocks
  int max_chunk_;
  std::size_t hidden_size_;  // the head's own hidden state (chained drafts)
  std::size_t target_row_;   // floats of the target's hidden states per token (observe)
  mutable std::mutex mutex_;
  mutable std::vector<Slot> slots_;
  mutable std::map<std::int64_t, std::size_t> by_sequence_;
  mutable std::vector<float> logits_, hidden_out_, last_hidden_;
  mutable std::uint64_t clock_ = 0;
  mutable Stats stats_;
};

}  // namespace nibble::spec
