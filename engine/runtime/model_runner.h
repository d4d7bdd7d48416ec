#pragma once
// What the engine loop needs from a model on a device: run one scheduled batch.
// Implementations (engine/backend/cpu, engine/backend/cuda) own the weights and the KV cache
// memory; the block ids in each sequence's block_table index that memory.
#include <functional>
#include <span>
#include <stdexcept>
#include <vector>

#include "engine/runtime/scheduler.h"
#include "kernels/sampling/sampling_request.h"

namespace nibble::runtime {

class ModelRunner {
 public:
  virtual ~ModelRunner() = default;

  virtual int vocab_size() const = 0;
  // Blocks of kv_block_size tokens the runner allocated room for.
  virtual int num_kv_blocks() const = 0;
  virtual int kv_block_size() const = 0;
  // Recurrent-state slots the runner allocated room for (hybrid models, e.g. Qwen3-Next: one per
  // running sequence, Sequence::state_slot indexing them); 0: the model keeps no such state.
  virtual int num_state_slots() const { return 0; }
  // Sliding-window models whose cache keeps the sliding layers in their own blocks: the window,
  // and the KV block pool then frees those blocks as they leave it (kv_block_pool.h; the runner
  // reads Sequence::window_block_table). 0: one group of blocks for every layer.
  virtual int kv_sliding_window() const { return 0; }

  // Computes tokens [num_computed_tokens, + num_new_tokens) of every scheduled sequence
  // (Sequence::token_at: its tokens, then its draft tokens), writing their keys and values into
  // the sequence's blocks, and writes ScheduledSequence::num_logits() rows of vocab_size() logits
  // per sequence (one for a plain decode or the last prefill chunk; k + 1 for a decode with k
  // drafts, for its last k + 1 positions in order), in batch order.
  // Throws on device failure; the engine then fails the batch's requests.
  virtual void execute(const SchedulerOutput& batch, std::vector<float>& logits) = 0;

  // Whether execute returns logits at several positions of a sequence (num_draft_tokens > 0):
  // speculative decoding needs it; execute_sampled then samples those positions too.
  // With state slots, a runner that verifies also rolls a sequence's recurrent state back to
  // its accepted length when its next step starts there (rejected drafts leave no trace).
  virtual bool verifies_drafts() const { return false; }

  // Speculative decoding's mtp and eagle3 methods read the target's hidden states. After
  // keep_hidden_states (called once, before the first step), every execute also fills
  // hidden_states(): for each scheduled sequence in batch order, num_new_tokens rows of
  // hidden_size() floats, each token's last hidden state before the final norm, or the inputs of
  // the layers an EAGLE-3 head reads side by side (ModelConfig::hidden_state_layers,
  // Backend::returns_hidden_states). Throws
  // std::logic_error where the runner cannot (the default).
  virtual void keep_hidden_states() {
    throw std::logic_error("this model runner does not return hidden states (the mtp method)");
  }
  virtual std::span<const float> hidden_states() const { return {}; }
  virtual int hidden_size() const { return 0; }

  // Whether execute_sampled can run: the model's device samples (Backend::samples_on_device).
  virtual bool samples_on_device() const { return false; }
  // Like execute, but each sequence whose samples_next_token is set samples its num_logits()
  // rows on the device, by the next num_logits() of `requests` (in batch order, a verify
  // sequence's rows in position order; results written through the requests): no logits cross
  // to the host.
  virtual void execute_sampled(const SchedulerOutput& batch,
                               std::span<const kernels::SamplingRequest> requests) {
    (void)batch, (void)requests;
    throw std::logic_error("this model runner does not sample on the device");
  }

  // execute / execute_sampled that call `host_work` once while the step's forward pass runs
  // (Backend::forward_batch_overlapping): the engine loop computes the constrained sequences'
  // token masks there, which the requests' bitmask spans point to. Default: host_work first.
  using HostWork = std::function<void()>;
  virtual void execute_overlapping(const SchedulerOutput& batch, std::vector<float>& logits,
                                   const HostWork& host_work) {
    host_work();
    execute(batch, logits);
  }
  virtual void execute_sampled_overlapping(const SchedulerOutput& batch,
                                           std::span<const kernels::SamplingRequest> requests,
                                           const HostWork& host_work) {
    host_work();
    execute_sampled(batch, requests);
  }
};

}  // namespace nibble::runtime
