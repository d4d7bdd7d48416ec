#pragma once
// Decides, each engine step, which sequences run and how many of their tokens to compute:
// continuous batching under a token budget, with chunked prefill mixed into decodes.
// Running sequences go first (oldest first); a decoding sequence with draft tokens runs them
// after its last token when the budget and the KV cache allow, else without them (drafts are
// never a reason to preempt). When the KV cache is full the newest running
// sequence is preempted (its blocks freed, recomputed later from its tokens). Waiting
// sequences are admitted in arrival order while the budget, the sequence limit and the KV
// cache allow. The scheduler decides; KvBlockPool owns blocks; StateSlotPool (hybrid models
// only) owns recurrent-state slots, one per running sequence; the engine owns sequences.
#include <cstdint>
#include <deque>
#include <vector>

#include "engine/runtime/kv_block_pool.h"
#include "engine/runtime/sequence.h"
#include "engine/runtime/state_slot_pool.h"
#include "engine/structured/token_bitmask.h"

namespace nibble::runtime {

struct SchedulerConfig {
  int max_num_seqs = 256;              // running sequences at once
  int max_num_batched_tokens = 2048;   // tokens computed per step, prefill and decode together
  bool enable_chunked_prefill = true;  // a long prompt may take several steps
};

struct ScheduledSequence {
  Sequence* seq = nullptr;
  int num_new_tokens = 0;  // compute tokens [num_computed_tokens, + num_new_tokens)
  // This step computes the last known token, so its logits yield the next token.
  bool samples_next_token = false;
  // Speculative decoding: the last num_draft_tokens of the new tokens are seq->draft_tokens
  // (a decode row with k drafts is a k+1-token chunk), and the step returns logits at each of
  // the chunk's last num_draft_tokens + 1 positions.
  int num_draft_tokens = 0;
  int num_logits() const { return samples_next_token ? num_draft_tokens + 1 : 0; }
};

struct SchedulerOutput {
  std::vector<ScheduledSequence> scheduled;
  std::vector<Sequence*> preempted;  // moved back to waiting this step
  int num_batched_tokens = 0;
  // Structured outputs: one token bitmask row per logits row (the sequences that sample, in
  // batch order), filled by the engine loop before execute when any of them is constrained;
  // empty otherwise. The CPU path applies it in the sampler; a device backend may copy it and
  // mask its logits the same way (structured::apply_token_bitmask is the reference).
  structured::TokenBitmaskBatch token_bitmask;
  bool empty() const { return scheduled.empty(); }
};

class Scheduler {
 public:
  // slots: a hybrid model's state slots (taken at admission, freed at preemption and finish),
  // nullptr for a model without recurrent state. Both pools must outlive the scheduler.
  Scheduler(SchedulerConfig config, KvBlockPool& pool, StateSlotPool* slots = nullptr);

  void add(Sequence& seq);  // to the back of the waiting queue
  SchedulerOutput schedule();
  // After the step ran: append each sequence's emitted tokens, advance computed counts, register
  // full blocks of computed tokens with the prefix cache. emitted[i] belongs to
  // output.scheduled[i] (empty when it did not sample or failed): without drafts one token; with
  // drafts the accepted drafts and then the target's own token. The accepted drafts keep their
  // KV; the rejected drafts' slots are dropped without a copy (the computed count is rolled
  // back past them) and blocks left holding none of the sequence's tokens are freed. Only full
  // blocks of accepted tokens reach the prefix cache. Clears every sequence's drafts.
  void complete_step(const SchedulerOutput& output, const std::vector<std::vector<int>>& emitted);
  // The same with at most one token each (-1: none).
  void complete_step(const SchedulerOutput& output, const std::vector<int>& sampled);
  // Frees the sequence's blocks and state slot and forgets it, whether waiting or running.
  void finish(Sequence& seq);

  std::size_t num_waiting() const { return waiting_.size(); }
  Sequence* first_waiting() const { return waiting_.empty() ? nullptr : waiting_.front(); }
  std::size_t num_running() const { return running_.size(); }
  bool idle() const { return waiting_.empty() && running_.empty(); }
  std::uint64_t num_preemptions() const { return preemptions_; }

 private:
  void preempt(Sequence& seq, SchedulerOutput& output);

  SchedulerConfig config_;
  KvBlockPool& pool_;
  StateSlotPool* slots_;
  std::deque<Sequence*> waiting_;
  std::deque<Sequence*> running_;  // admission order: front is oldest
  std::uint64_t preemptions_ = 0;
};

}  // namespace nibble::runtime
