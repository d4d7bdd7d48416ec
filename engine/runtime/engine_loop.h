#pragma once
// The engine thread: owns the scheduler, the KV block pool and the model runner. HTTP threads
// only submit requests and read their OutputChannel; everything else happens here, one step at
// a time: admit new requests, drop cancelled ones, schedule, run the model, sample, emit.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "engine/runtime/engine_metrics.h"
#include "engine/runtime/kv_block_pool.h"
#include "engine/runtime/model_runner.h"
#include "engine/runtime/output_channel.h"
#include "engine/runtime/scheduler.h"
#include "engine/runtime/spec_decode_metrics.h"
#include "engine/runtime/thread_pool.h"
#include "engine/spec/drafter.h"
#include "engine/structured/token_constraint.h"

namespace nibble::runtime {

struct EngineConfig {
  std::string model_name = "model";
  SchedulerConfig scheduler;
  int max_model_len = 4096;
  int max_queue_len = 1024;  // waiting requests beyond this are refused
  bool enable_prefix_caching = true;
  std::vector<int> eos_token_ids;  // from generation_config.json / the tokenizer
  // Structured outputs: compute a step's token masks on the host while its forward pass runs on
  // the device (ModelRunner::execute_overlapping), not before it; serve's
  // --token-mask-overlap false turns it off (an A/B: the tokens are the same either way).
  bool overlap_token_masks = true;
  // Threads (the engine thread included) computing one step's masks, one constrained sequence
  // each at a time (serve's --token-mask-threads; 1..64): 1, all on the engine thread.
  int token_mask_threads = 4;
  // Speculative decoding (serve's --speculative-config; off when drafter is null): before each
  // step the drafter proposes up to num_speculative_tokens tokens for every decoding sequence,
  // and the step verifies them (engine/spec/verify.h). Needs a runner that verifies drafts
  // (ModelRunner::verifies_drafts). Sequences under a structured-output constraint get no
  // drafts: their token masks are computed for one position per step. A drafter that reads
  // hidden states (mtp) needs a runner that keeps them (ModelRunner::keep_hidden_states).
  std::shared_ptr<const spec::Drafter> drafter;
  int num_speculative_tokens = 0;
};

struct GenerationRequest {
  std::string id;
  std::vector<int> prompt;
  SamplingParams params;
  std::shared_ptr<OutputChannel> channel;
  std::chrono::steady_clock::time_point arrival{};  // set by submit()
  // Structured outputs: each choice's tokens are constrained by one constraint made here.
  std::shared_ptr<const structured::TokenConstraintFactory> constraint;
};

enum class SubmitStatus { kAccepted, kQueueFull, kNotAccepting, kInvalid };
struct SubmitResult {
  SubmitStatus status = SubmitStatus::kAccepted;
  std::string message;
};

class EngineLoop {
 public:
  EngineLoop(EngineConfig config, ModelRunner& runner, metrics::Registry& registry);
  ~EngineLoop();
  EngineLoop(const EngineLoop&) = delete;
  EngineLoop& operator=(const EngineLoop&) = delete;

  void start();
  // Thread-safe. Refuses when the waiting queue is full, when draining, or for a prompt that
  // can never fit (longer than max_model_len or than the whole KV cache).
  SubmitResult submit(GenerationRequest request);
  // Stops accepting, lets running requests finish for up to timeout, aborts the rest, joins.
  void drain_and_stop(std::chrono::milliseconds timeout);

  bool accepting() const { return accepting_.load(); }
  const EngineConfig& config() const { return config_; }
  int vocab_size() const { return runner_.vocab_size(); }  // the width of a logits row
  // Largest prompt + output the KV cache can hold for one sequence.
  int max_tokens_per_sequence() const;

 private:
  struct ActiveRequest;
  using Clock = std::chrono::steady_clock;

  void run();
  void admit_inbox();
  void drop_cancelled();
  void execute_step();
  // Fills each decoding sequence's draft_tokens (speculative decoding), within what its
  // max_tokens and the context leave: every accepted draft and the target's token must fit.
  void propose_drafts();
  // Hands a drafter that reads hidden states (mtp) the step's rows each sequence kept; starts:
  // each scheduled sequence's num_computed_tokens before the step.
  void observe_hidden_states(const SchedulerOutput& out, const std::vector<int>& starts);
  // Sizes out.token_bitmask for the sequences that sample this step (unconstrained rows all
  // ones, constrained rows all zeros until filled); false when none is constrained.
  bool prepare_token_masks(SchedulerOutput& out);
  // Fills the constrained rows (in parallel over token_mask_pool_). A constraint that throws
  // leaves its row empty: the sequence then fails with "allows no next token".
  void fill_token_masks(SchedulerOutput& out);
  // A step's device sampling requests (num_logits() rows per sampling sequence, batch order: a
  // verify sequence's row j draws the target's token at draft position j) and results.
  struct DeviceSamples {
    std::vector<kernels::SamplingRequest> requests;
    std::vector<kernels::SampledRow> results;
    std::vector<kernels::TopLogprob> top;  // kMaxSampledTopLogprobs per row
    std::vector<int> logprobs;             // the row's SamplingParams::logprobs
    // Verify rows after the first, with penalties: the list with the drafts before the row.
    std::vector<std::vector<kernels::SamplingPenalty>> penalties;
    SampledToken take(std::size_t row);
  };
  // Whether this step samples on the device (the runner can, no sequence asks for more top
  // logprobs than the device returns, and none with drafts is constrained); if so, fills
  // `device` (penalty lists brought up to date).
  bool prepare_device_sampling(const SchedulerOutput& out, DeviceSamples& device);
  void finish_sequence(Sequence& seq, FinishReason reason, const std::string& error = {});
  void abort_everything(FinishReason reason, const std::string& error);
  void erase_finished_requests();
  void update_gauges();
  // Adds what the KV pool and scheduler counted since the last call to the Prometheus counters.
  void fold_counters();

  EngineConfig config_;
  ModelRunner& runner_;
  EngineMetrics metrics_;
  std::unique_ptr<SpecDecodeMetrics> spec_metrics_;  // with a drafter only
  KvBlockPool pool_;
  std::unique_ptr<StateSlotPool> slots_;  // hybrid models only (ModelRunner::num_state_slots)
  Scheduler scheduler_;
  std::unique_ptr<ThreadPool> token_mask_pool_;  // made at the first constrained step

  std::mutex inbox_mutex_;
  std::condition_variable inbox_ready_;
  std::deque<GenerationRequest> inbox_;
  std::atomic<int> unscheduled_requests_{0};  // admitted but never scheduled, for the queue limit
  std::atomic<bool> accepting_{true};
  Clock::time_point drain_deadline_{};
  std::atomic<bool> draining_{false};
  std::thread thread_;

  // Engine-thread state.
  std::map<std::string, std::unique_ptr<ActiveRequest>> requests_;
  std::map<std::int64_t, std::pair<ActiveRequest*, int>> owner_;  // sequence id -> request, choice
  std::int64_t next_sequence_id_ = 0;
  PrefixCacheStats reported_prefix_{};
  std::uint64_t reported_preemptions_ = 0;
};

}  // namespace nibble::runtime
