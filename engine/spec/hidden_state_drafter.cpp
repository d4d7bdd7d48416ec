#include "engine/spec/hidden_state_drafter.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "engine/spec/draft_slots.h"
#include "engine/spec/speculative_config.h"

namespace nibble::spec {
namespace {

[[noreturn]] void refuse(const std::string& method, const std::string& message) {
  throw SpeculativeConfigError("--speculative-config: " + method + ": " + message);
}

}  // namespace

HiddenStateDrafter::HiddenStateDrafter(std::unique_ptr<backend::Backend> head,
                                       const HiddenStateDrafterOptions& options,
                                       std::vector<int> draft_to_target)
    : backend_(std::move(head)),
      draft_to_target_(std::move(draft_to_target)),
      max_chunk_(options.max_chunk_tokens) {
  const model::ModelConfig& c = backend_->config();
  if (!c.mtp_module && !c.eagle3)
    refuse("mtp or eagle3",
           "the drafter's model is neither a multi-token-prediction module "
           "(model::take_mtp_module) nor an EAGLE-3 head (model::load_eagle3_head)");
  name_ = c.eagle3 ? "eagle3" : "mtp";
  if (!backend_->returns_hidden_states())
    refuse(name_, "the " + backend_->name() + " backend does not hand over hidden states, which " +
                      name_ + " drafts are made from; run the model with --device cpu or cuda");
  if (!draft_to_target_.empty() && int(draft_to_target_.size()) != c.logits_size())
    refuse(name_, "d2t maps " + std::to_string(draft_to_target_.size()) +
                      " draft ids; the head predicts " + std::to_string(c.logits_size()));
  if (draft_to_target_.empty() && c.logits_size() != c.vocab_size)
    refuse(name_, "the head predicts " + std::to_string(c.logits_size()) + " of the target's " +
                      std::to_string(c.vocab_size) + " ids and no d2t maps them");
  kv_ = make_draft_slots(*backend_, name_, options.max_sequences, options.max_tokens_per_sequence,
                         options.block_size, options.max_chunk_tokens);
  hidden_size_ = std::size_t(c.hidden_size);
  target_row_ = c.eagle3 ? std::size_t(c.eagle3->fc_inputs()) : hidden_size_;
  slots_ = slots_with_tables<Slot>(kv_);
  logits_.resize(std::size_t(c.logits_size()));
}

HiddenStateDrafter::Stats HiddenStateDrafter::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

HiddenStateDrafter::Slot* HiddenStateDrafter::find(std::int64_t sequence) const {
  auto it = by_sequence_.find(sequence);
  return it == by_sequence_.end() ? nullptr : &slots_[it->second];
}

void HiddenStateDrafter::observe(std::int64_t sequence, std::span<const int> tokens, int start,
                                 std::span<const float> hidden_states) const {
  (void)tokens;
  const int rows = int(hidden_states.size() / target_row_);
  std::lock_guard lock(mutex_);
  Slot* slot = find(sequence);
  if (start == 0) {
    if (slot == nullptr) {
      // A free slot, else the least recently used one.
      auto it = std::min_element(slots_.begin(), slots_.end(), [](const Slot& a, const Slot& b) {
        return (a.sequence >= 0) != (b.sequence >= 0) ? a.sequence < 0 : a.last_use < b.last_use;
      });
      if (it->sequence >= 0) {
        by_sequence_.erase(it->sequence);
        ++stats_.evictions;
      }
      it->sequence = sequence;
      by_sequence_[sequence] = std::size_t(it - slots_.begin());
      slot = &*it;
    }
    slot->usable = true;
    slot->observed = slot->ran = 0;
    slot->pending.clear();
    slot->last_row.clear();
  }
  if (slot == nullptr || !slot->usable) return;
  slot->last_use = ++clock_;
  // Positions the head never saw (a start past what it was handed), or more than it holds.
  if (start != slot->observed || slot->observed + rows > kv_.capacity) {
    slot->usable = false;
    slot->pending.clear();
    return;
  }
  slot->pending.insert(slot->pending.end(), hidden_states.begin(), hidden_states.end());
  slot->observed += rows;
}

void HiddenStateDrafter::forget(std::int64_t sequence) const {
  std::lock_guard lock(mutex_);
  auto it = by_sequence_.find(sequence);
  if (it == by_sequence_.end()) return;
  Slot& slot = slots_[it->second];
  slot.sequence = -1;
  slot.usable = false;
  slot.pending.clear();
  by_sequence_.erase(it);
}

int HiddenStateDrafter::run(Slot& slot, std::span<const int> tokens, int start,
                            std::span<const float> hidden) const {
  hidden_out_.resize(tokens.size() * hidden_size_);
  backend::BatchItem item;
  item.tokens = tokens;
  item.start = start;
  item.block_table = slot.block_table;
  item.logits = logits_;
  item.hidden_in = hidden;
  item.hidden_out = hidden_out_;
  backend_->forward_batch(*kv_.cache, std::span(&item, 1));
  last_hidden_.assign(hidden_out_.end() - std::ptrdiff_t(hidden_size_), hidden_out_.end());
  const int best = int(std::max_element(logits_.begin(), logits_.end()) - logits_.begin());
  return draft_to_target_.empty() ? best : draft_to_target_[std::size_t(best)];
}

void HiddenStateDrafter::propose_for(std::int64_t sequence, std::span<const int> tokens,
                                     int max_tokens, std::vector<int>& draft) const {
  std::lock_guard lock(mutex_);
  Slot* slot = find(sequence);
  const int n = int(tokens.size());
  // Hidden states of every position but the last token's, which the step verifying the drafts
  // computes.
  if (slot == nullptr || !slot->usable || slot->observed != n - 1 || n < 2) return;
  slot->last_use = ++clock_;
  // The head runs positions up to n - 2 on the target's hidden states, then k - 1 chained.
  const int k = std::min(max_tokens, kv_.capacity - n + 2);
  if (k <= 0) return;
  const std::size_t H = target_row_;
  // Position i reads token i + 1: positions [ran, n - 1) read tokens [ran + 1, n).
  int next = -1;
  const int first = slot->ran;
  for (int at = first; at < n - 1; at += max_chunk_) {
    const int count = std::min(n - 1 - at, max_chunk_);
    next = run(*slot, tokens.subspan(std::size_t(at + 1), std::size_t(count)), at,
               std::span<const float>(slot->pending)
                   .subspan(std::size_t(at - first) * H, std::size_t(count) * H));
    stats_.computed_tokens += std::uint64_t(count);
  }
  if (next < 0) {
    // Nothing new since the last call (the sequence was not scheduled): the head's output at
    // n - 2 again, from the hidden state kept for it.
    next = run(*slot, tokens.subspan(std::size_t(n - 1), 1), n - 2, slot->last_row);
    stats_.computed_tokens += 1;
  } else {
    slot->last_row.assign(slot->pending.end() - std::ptrdiff_t(H), slot->pending.end());
    slot->pending.clear();
    slot->ran = n - 1;
  }
  draft.push_back(next);
  std::vector<float> hidden = last_hidden_;
  for (int j = 1; j < k; ++j) {
    const int fed = next;
    next = run(*slot, std::span(&fed, 1), n - 2 + j, hidden);
    hidden = last_hidden_;
    ++stats_.chained_tokens;
    draft.push_back(next);
  }
}

void HiddenStateDrafter::propose(std::span<const int>, int, std::vector<int>&) const {
  throw std::logic_error("the " + name_ + " drafter drafts per sequence: call propose_for");
}

}  // namespace nibble::spec
