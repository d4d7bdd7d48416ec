#include "engine/spec/draft_model_drafter.h"

#include <algorithm>
#include <string>

#include "engine/spec/draft_slots.h"
#include "engine/spec/speculative_config.h"

namespace nibble::spec {
namespace {

[[noreturn]] void refuse(const std::string& message) {
  throw SpeculativeConfigError("--speculative-config: draft_model: " + message);
}

std::size_t common_prefix(std::span<const int> a, std::span<const int> b) {
  const std::size_t n = std::min(a.size(), b.size());
  return std::size_t(std::mismatch(a.begin(), a.begin() + std::ptrdiff_t(n), b.begin()).first -
                     a.begin());
}

}  // namespace

DraftModelDrafter::DraftModelDrafter(std::unique_ptr<backend::Backend> draft, int target_vocab_size,
                                     const DraftModelOptions& options)
    : backend_(std::move(draft)), max_chunk_(options.max_chunk_tokens) {
  const model::ModelConfig& c = backend_->config();
  if (c.vocab_size != target_vocab_size)
    refuse("the draft model's vocabulary has " + std::to_string(c.vocab_size) +
           " tokens, the target's " + std::to_string(target_vocab_size) +
           "; a draft model must share the target's tokenizer and vocabulary");
  if (backend_->state_slot_bytes() > 0)
    refuse(
        "the draft model has recurrent state (a hybrid model), which a draft cannot roll "
        "back; use a transformer draft model");
  kv_ = make_draft_slots(*backend_, "draft_model", options.max_sequences,
                         options.max_tokens_per_sequence, options.block_size,
                         options.max_chunk_tokens);
  // Reserves the device buffers of the largest step (one sequence, one row of logits) now,
  // before the target sizes its KV cache from what is left; the budget it returns is the
  // target's business.
  (void)backend_->device_memory_for_kv(1.0, max_chunk_, 1, 1);
  slots_ = slots_with_tables<Slot>(kv_);
  logits_.resize(std::size_t(c.vocab_size));
}

DraftModelDrafter::Stats DraftModelDrafter::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

std::pair<DraftModelDrafter::Slot*, std::size_t> DraftModelDrafter::slot_for(
    std::span<const int> tokens) const {
  Slot* best = nullptr;
  std::size_t best_keep = 0;
  for (Slot& slot : slots_) {
    const std::size_t common = common_prefix(slot.tokens, tokens);
    // The slot's last caller was not this sequence (its tokens are no prefix of these).
    if (common < slot.fed) continue;
    // The last token runs again even when held: its logits are what the draft starts from.
    const std::size_t keep = std::min(common, tokens.size() - 1);
    if (keep > best_keep) best = &slot, best_keep = keep;
  }
  if (best != nullptr) return {best, best_keep};
  Slot* lru = &*std::min_element(slots_.begin(), slots_.end(), [](const Slot& a, const Slot& b) {
    return a.last_use < b.last_use;
  });
  if (!lru->tokens.empty()) ++stats_.evictions;
  return {lru, 0};
}

int DraftModelDrafter::run(Slot& slot, std::span<const int> tokens, std::size_t start) const {
  backend::BatchItem item;
  item.tokens = tokens;
  item.start = int(start);
  item.block_table = slot.block_table;
  item.logits = logits_;
  backend_->forward_batch(*kv_.cache, std::span(&item, 1));
  slot.tokens.insert(slot.tokens.end(), tokens.begin(), tokens.end());
  stats_.computed_tokens += tokens.size();
  return int(std::max_element(logits_.begin(), logits_.end()) - logits_.begin());
}

void DraftModelDrafter::propose(std::span<const int> tokens, int max_tokens,
                                std::vector<int>& draft) const {
  // The draft model runs the tokens and all but the last draft: tokens.size() + n - 1 positions.
  const std::ptrdiff_t n = std::min<std::ptrdiff_t>(
      max_tokens, std::ptrdiff_t(kv_.capacity) - std::ptrdiff_t(tokens.size()) + 1);
  if (n <= 0 || tokens.empty()) return;
  std::lock_guard lock(mutex_);
  auto [slot, keep] = slot_for(tokens);
  slot->last_use = ++clock_;
  slot->tokens.resize(keep);  // rejected drafts and another prefix's positions: overwritten next
  stats_.reused_tokens += keep;
  int next = 0;
  for (std::size_t at = keep; at < tokens.size(); at += std::size_t(max_chunk_)) {
    const std::size_t count = std::min(tokens.size() - at, std::size_t(max_chunk_));
    next = run(*slot, tokens.subspan(at, count), at);
  }
  slot->fed = tokens.size();
  draft.push_back(next);
  for (std::ptrdiff_t i = 1; i < n; ++i) {
    const int fed = next;
    next = run(*slot, std::span(&fed, 1), slot->tokens.size());
    draft.push_back(next);
  }
}

}  // namespace nibble::spec
