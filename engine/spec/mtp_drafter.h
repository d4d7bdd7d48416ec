#pragma once
// vLLM's "mtp" method: the target's own multi-token-prediction module (Qwen3-Next's mtp.*,
// model::take_mtp_module) drafts from the target's hidden states. At position i the module
// reads token i + 1's embedding and the target's last hidden state at i (before its final
// norm) and predicts token i + 2. So after a step whose sequence holds tokens [0, n) with the
// target's hidden states of positions [0, n - 1), the module runs the positions it has not run
// yet, up to n - 2, and its prediction there is the first draft. Drafts 2..k chain the module on
// itself, as vLLM does: the next position reads the draft just made and the module's own output
// hidden state (after mtp.norm, what vLLM's Qwen3-Next MTP returns and its proposer feeds back).
//
// Per sequence (by the engine's sequence id; drafter.h) a slot keeps the module's KV cache (one
// attention layer) and the target's hidden states it has not run yet. The module's KV holds
// positions computed from the target's hidden states; chained positions beyond them are written
// and then overwritten by the next call's run before anything reads them, so rejected drafts
// need no rollback of their own: the target's rejections show as the next observe's start. A
// sequence first observed past position 0 (a prefix-cache hit, a slot lost to eviction) gets no
// drafts: the module has no hidden states for its prefix.
//
// Memory: max_sequences slots of max_tokens_per_sequence positions, allocated at construction
// (kv_bytes()); beyond max_sequences the least recently used sequence loses its slot (and its
// drafts until it restarts). Thread-safe: one mutex.
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/spec/draft_slots.h"
#include "engine/spec/drafter.h"

namespace nibble::spec {

struct MtpOptions {
  int max_sequences = 64;             // slots: the engine's max_num_seqs
  int max_tokens_per_sequence = 256;  // positions per slot (the target's max_model_len)
  int block_size = 16;                // positions per KV block of the module
  int max_chunk_tokens = 512;         // the most positions one forward pass of the module runs
};

// Throws SpeculativeConfigError where the module cannot serve: a backend that does not return
// hidden states, a model that is not an MTP module (ModelConfig::mtp_module), options out of range.
class MtpDrafter : public Drafter {
 public:
  MtpDrafter(std::unique_ptr<backend::Backend> module, const MtpOptions& options);
  std::string_view name() const override { return "mtp"; }
  bool reads_hidden_states() const override { return true; }
  void observe(std::int64_t sequence, std::span<const int> tokens, int start,
               std::span<const float> hidden_states) const override;
  void forget(std::int64_t sequence) const override;
  // Greedy: at most max_tokens drafts, fewer where the slot's capacity ends first; none for a
  // sequence whose hidden states do not reach its last token.
  void propose_for(std::int64_t sequence, std::span<const int> tokens, int max_tokens,
                   std::vector<int>& draft) const override;
  // Throws std::logic_error: mtp drafts per sequence (propose_for).
  void propose(std::span<const int> tokens, int max_tokens, std::vector<int>& draft) const override;

  struct Stats {
    std::uint64_t computed_tokens = 0;  // positions the module ran on the target's hidden states
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
    int ran = 0;          // the module's KV holds positions [0, ran) (ran <= observed)
    std::vector<float> pending;   // the target's hidden states of positions [ran, observed)
    std::vector<float> last_row;  // and of position ran - 1 (a call with nothing new reruns it)
    std::uint64_t last_use = 0;
    std::vector<int> block_table;  // its fixed blocks of the cache
  };
  Slot* find(std::int64_t sequence) const;
  // Runs positions [start, start + tokens.size()) of `slot` on `hidden` (a row per token); the
  // last row's greedy next token and output hidden state (into hidden_out_).
  int run(Slot& slot, std::span<const int> tokens, int start, std::span<const float> hidden) const;

  std::unique_ptr<backend::Backend> backend_;
  DraftSlots kv_;  // the draft's KV cache and each slot's blocks
  int max_chunk_;
  std::size_t hidden_size_;
  mutable std::mutex mutex_;
  mutable std::vector<Slot> slots_;
  mutable std::map<std::int64_t, std::size_t> by_sequence_;
  mutable std::vector<float> logits_, hidden_out_, last_hidden_;
  mutable std::uint64_t clock_ = 0;
  mutable Stats stats_;
};

}  // namespace nibble::spec
