#pragma once
// Runs the engine loop's scheduled batches on a Backend: one forward_batch per step over a paged
// KV cache that the backend allocated, with the scheduler's block tables.
#include <memory>

#include "engine/backend/backend.h"
#include "engine/runtime/model_runner.h"

namespace nibble::backend {

class BackendModelRunner : public runtime::ModelRunner {
 public:
  // The backend must outlive the runner. state_slots: recurrent-state slots for a hybrid model
  // (one per running sequence: max_num_seqs), 0 for a model without recurrent state.
  BackendModelRunner(Backend& backend, int num_blocks, int block_size, int state_slots = 0);

  int vocab_size() const override { return backend_.config().vocab_size; }
  int num_kv_blocks() const override { return cache_->num_blocks(); }
  int kv_block_size() const override { return cache_->block_size(); }
  int num_state_slots() const override { return cache_->num_state_slots(); }
  int kv_sliding_window() const override { return backend_.kv_sliding_window(); }
  void execute(const runtime::SchedulerOutput& batch, std::vector<float>& logits) override;
  bool verifies_drafts() const override { return backend_.logits_at_several_positions(); }
  bool samples_on_device() const override { return backend_.samples_on_device(); }
  void keep_hidden_states() override;
  std::span<const float> hidden_states() const override { return hidden_; }
  int hidden_size() const override { return backend_.config().hidden_state_width(); }
  void execute_sampled(const runtime::SchedulerOutput& batch,
                       std::span<const kernels::SamplingRequest> requests) override;
  void execute_overlapping(const runtime::SchedulerOutput& batch, std::vector<float>& logits,
                           const HostWork& host_work) override;
  void execute_sampled_overlapping(const runtime::SchedulerOutput& batch,
                                   std::span<const kernels::SamplingRequest> requests,
                                   const HostWork& host_work) override;

 private:
  // One forward_batch (forward_batch_overlapping when host_work is given); each sampling
  // sequence gets its next num_logits() of `logits` rows (vocab floats each) or of `requests`.
  void run(const runtime::SchedulerOutput& batch, std::span<float> logits,
           std::span<const kernels::SamplingRequest> requests, const HostWork* host_work = nullptr);
  // run() into `logits`, sized for the step's sampling sequences.
  void run_to_logits(const runtime::SchedulerOutput& batch, std::vector<float>& logits,
                     const HostWork* host_work);

  Backend& backend_;
  std::unique_ptr<KvCache> cache_;
  bool keep_hidden_ = false;
  std::vector<float> hidden_;  // the last step's rows (keep_hidden_states)
};

// How many blocks of block_size fit in memory_bytes, but no more than max_num_seqs sequences
// of max_model_len need (with a sliding group, each its full-attention blocks and the sliding
// blocks steps of up to max_chunk tokens see: runtime::kv_blocks_per_sequence). Throws
// BackendError if not even one max_model_len sequence fits.
int kv_blocks_for_budget(const Backend& backend, std::size_t memory_bytes, int block_size,
                         int max_model_len, int max_num_seqs, int max_chunk);

}  // namespace nibble::backend
