#pragma once
// Decides, each engine step, which sequences run and how many of their tokens to compute:
// continuous batching under a token budget, with chunked prefill mixed into decodes.
// Running sequences go first (oldest first); when the KV cache is full the newest running
// sequence is preempted (its blocks freed, recomputed later from its tokens). Waiting
// sequences are admitted in arrival order while the budget, the sequence limit and the KV
// cache allow. The scheduler decides; KvBlockPool owns blocks; the engine owns sequences.
#include <cstdint>
#include <deque>
#include <vector>

#include "engine/runtime/kv_block_pool.h"
#include "engine/runtime/sequence.h"
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
  Scheduler(SchedulerConfig config, KvBlockPool& pool);

  void add(Sequence& seq);  // to the back of the waiting queue
  SchedulerOutput schedule();
  // After the step ran: advance computed counts, register full blocks with the prefix cache,
  // append each sampled token (sampled[i] belongs to output.scheduled[i]; ignored when that
  // sequence did not sample).
  void complete_step(const SchedulerOutput& output, const std::vector<int>& sampled);
  // Frees the sequence's blocks and forgets it, whether waiting or running.
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
  std::deque<Sequence*> waiting_;
  std::deque<Sequence*> running_;  // admission order: front is oldest
  std::uint64_t preemptions_ = 0;
};

}  // namespace nibble::runtime
