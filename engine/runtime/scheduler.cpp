#include "engine/runtime/scheduler.h"

#include <algorithm>
#include <stdexcept>

namespace nibble::runtime {

Scheduler::Scheduler(SchedulerConfig config, KvBlockPool& pool, StateSlotPool* slots)
    : config_(config), pool_(pool), slots_(slots) {
  if (config_.max_num_seqs < 1 || config_.max_num_batched_tokens < 1) {
    throw std::invalid_argument(
        "scheduler needs max_num_seqs >= 1 and max_num_batched_tokens >= 1");
  }
}

void Scheduler::add(Sequence& seq) {
  seq.status = SequenceStatus::kWaiting;
  waiting_.push_back(&seq);
}

void Scheduler::preempt(Sequence& seq, SchedulerOutput& output) {
  pool_.free(seq);                // recompute later: the tokens are kept, the KV is not
  if (slots_) slots_->free(seq);  // nor the recurrent state: it restarts from position 0
  seq.draft_tokens.clear();
  seq.status = SequenceStatus::kWaiting;
  ++seq.num_preemptions;
  ++preemptions_;
  running_.erase(std::find(running_.begin(), running_.end(), &seq));
  waiting_.push_front(&seq);
  output.preempted.push_back(&seq);
}

SchedulerOutput Scheduler::schedule() {
  SchedulerOutput out;
  int budget = config_.max_num_batched_tokens;

  // 1. Running sequences, oldest first: decodes (one token) and unfinished prefill chunks.
  std::vector<Sequence*> candidates(running_.begin(), running_.end());
  for (Sequence* seq : candidates) {
    if (seq->status != SequenceStatus::kRunning) continue;  // preempted below
    if (budget == 0) break;
    const int remaining = seq->num_tokens() - seq->num_computed_tokens;
    int num_new = std::min(remaining, budget);
    if (num_new <= 0) continue;
    // Drafts ride on a decode (one token left) as far as the budget and free blocks allow.
    int drafts = 0;
    if (remaining == 1) drafts = std::min(int(seq->draft_tokens.size()), budget - 1);
    if (drafts > 0 && !pool_.can_append(*seq, num_new + drafts)) drafts = 0;
    seq->draft_tokens.resize(std::size_t(drafts));
    num_new += drafts;
    // Make room by preempting the newest running sequences, possibly this one.
    bool preempted_self = false;
    while (!pool_.can_append(*seq, num_new)) {
      Sequence* victim = running_.back();
      preempt(*victim, out);
      if (victim == seq) {
        preempted_self = true;
        break;
      }
    }
    if (preempted_self) continue;
    pool_.append_slots(*seq, num_new);
    out.scheduled.push_back(
        {seq, num_new, seq->num_computed_tokens + num_new - drafts == seq->num_tokens(), drafts});
    budget -= num_new;
  }

  // 2. Waiting sequences in arrival order, unless this step had to preempt (no room).
  while (out.preempted.empty() && budget > 0 && !waiting_.empty() &&
         int(running_.size()) < config_.max_num_seqs) {
    Sequence& seq = *waiting_.front();
    seq.draft_tokens.clear();  // a prefill runs no drafts
    const int cached = pool_.cached_prefix_tokens(seq);
    const int remaining = seq.num_tokens() - cached;
    if (!config_.enable_chunked_prefill && remaining > budget) break;
    const int num_new = std::min(remaining, budget);
    if (!pool_.can_allocate(seq, num_new)) break;  // first come, first served: no skipping
    if (slots_ && !slots_->can_allocate()) break;
    pool_.allocate(seq, num_new);
    if (slots_) slots_->allocate(seq);
    waiting_.pop_front();
    running_.push_back(&seq);
    seq.status = SequenceStatus::kRunning;
    out.scheduled.push_back({&seq, num_new, seq.num_computed_tokens + num_new == seq.num_tokens()});
    budget -= num_new;
  }

  out.num_batched_tokens = config_.max_num_batched_tokens - budget;
  return out;
}

void Scheduler::complete_step(const SchedulerOutput& output, const std::vector<int>& sampled) {
  std::vector<std::vector<int>> emitted(output.scheduled.size());
  for (std::size_t i = 0; i < emitted.size() && i < sampled.size(); ++i)
    if (sampled[i] >= 0) emitted[i].push_back(sampled[i]);
  complete_step(output, emitted);
}

void Scheduler::complete_step(const SchedulerOutput& output,
                              const std::vector<std::vector<int>>& emitted) {
  for (std::size_t i = 0; i < output.scheduled.size(); ++i) {
    const ScheduledSequence& s = output.scheduled[i];
    Sequence& seq = *s.seq;
    seq.draft_tokens.clear();
    if (seq.status != SequenceStatus::kRunning) continue;  // finished or aborted meanwhile
    const std::vector<int> none;
    const std::vector<int>& tokens = s.samples_next_token && i < emitted.size() ? emitted[i] : none;
    // Every emitted token but the last is an accepted draft whose KV this step computed; the
    // last (the target's own token) is computed by the next step.
    const int accepted = std::max(0, int(tokens.size()) - 1);
    seq.tokens.insert(seq.tokens.end(), tokens.begin(), tokens.end());
    seq.num_computed_tokens += s.num_new_tokens - s.num_draft_tokens + accepted;
    pool_.commit_computed(seq);
    if (s.num_draft_tokens > 0) pool_.release_unused_blocks(seq);
  }
}

void Scheduler::finish(Sequence& seq) {
  if (auto it = std::find(running_.begin(), running_.end(), &seq); it != running_.end()) {
    running_.erase(it);
  }
  if (auto it = std::find(waiting_.begin(), waiting_.end(), &seq); it != waiting_.end()) {
    waiting_.erase(it);
  }
  pool_.free(seq);
  if (slots_) slots_->free(seq);
  seq.status = SequenceStatus::kFinished;
}

}  // namespace nibble::runtime
