#pragma once
// The compute backend interface: runs a loaded model's forward pass over a KV cache.
// Implementations: cpu/ (FP32 reference) and cuda/ (BF16 activations, NVFP4 or BF16 weights).
//
// Two ways to run: forward() over one SequenceState (a sequence's own KV cache and length; the
// debugging and oracle path), and forward_batch() over a paged KvCache shared by many sequences
// (the serving path: the engine's block tables say which cache blocks hold which positions).
// Ownership: a Backend owns the model weights it was created with. SequenceState and KvCache
// are created by a backend, owned by the caller, and may only be passed back to that backend.
// Failures: every call throws BackendError on bad arguments (empty or out-of-vocabulary tokens,
// too many positions, a logits buffer of the wrong size, a state from another backend); the
// sequence state is left unchanged when a call fails.
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>

#include "engine/model/model_config.h"
#include "kernels/sampling/sampling_request.h"

namespace nibble::backend {

struct BackendError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class SequenceState {
 public:
  virtual ~SequenceState() = default;
  virtual int length() const = 0;    // positions already in the KV cache
  virtual int capacity() const = 0;  // positions it can hold
};

// Paged KV storage: num_blocks blocks of block_size positions, for every layer.
class KvCache {
 public:
  virtual ~KvCache() = default;
  virtual int num_blocks() const = 0;
  virtual int block_size() const = 0;
  // Recurrent-state slots it holds beside the blocks (hybrid models: Backend::state_slot_bytes
  // each, BatchItem::state_slot indexing them); 0 for a plain KV cache.
  virtual int num_state_slots() const { return 0; }
  // Backend::kv_sliding_window of the backend that made it: > 0 where its sliding-window layers
  // keep blocks of their own (BatchItem::window_block_table).
  virtual int sliding_window() const { return 0; }
};

// Sampling the next token on the device (Backend::samples_on_device()) instead of returning its
// logits: the function kernels/sampling/sampling_types.h defines. The spans must stay valid for
// the call.
using DeviceSampling = kernels::SamplingRequest;

// How a backend stores its KV caches: kAuto is its own choice (BF16 on a GPU, FP32 on the CPU);
// kFp8 is E4M3 with a scale per (token, KV head) row (kernels/attention/kv_fp8_ref.h).
enum class KvCacheDtype { kAuto, kBf16, kFp8 };

// One sequence's share of a batched step.
struct BatchItem {
  std::span<const std::int32_t> tokens;  // computed now, at positions [start, start + size)
  int start = 0;                         // positions [0, start) are already in the cache
  std::span<const int> block_table;      // block i holds positions [i*block_size, (i+1)*block_size)
  std::span<float> logits;               // logits_size floats (vocab_size; an EAGLE-3 head's
                                         // draft_vocab_size) for the last token (num_logits
                                         // rows below), or empty: none
  // Or the next tokens sampled on the device (logits empty): num_logits consecutive requests
  // from sample on, request j for the row of the j-th of the last num_logits tokens (a verify
  // item's row j draws the target's token at draft position j: the engine gives it that
  // position's penalty list and random-stream position). In one step either every item that
  // wants a next token samples on the device or none does.
  const DeviceSampling* sample = nullptr;
  // Rows of logits: the last num_logits tokens' next-token logits in order, vocab_size floats
  // each (logits then holds num_logits * vocab_size floats). More than 1 only where the backend
  // returns logits at several positions (Backend::logits_at_several_positions): speculative
  // decoding verifies a decode row with k drafts as a k+1-token chunk, num_logits k + 1.
  int num_logits = 1;
  // Hybrid models (Backend::state_slot_bytes() > 0): the cache's recurrent-state slot holding
  // this sequence's state (conv windows, delta-rule states), read and advanced by the step; an
  // item with start 0 begins it from zeros, a later chunk continues it. No two items of a step
  // share a slot. -1 (none) for models without recurrent state.
  // Speculative decoding (backends with logits_at_several_positions): a verify item (several
  // tokens, num_logits > 1) keeps the slot's state after each of its tokens, and the slot's next
  // item may start at any of those positions (the accepted length; rejected drafts leave no
  // trace). Any other start but 0 or the slot's current position throws std::logic_error.
  int state_slot = -1;
  // Backends with a sliding group (Backend::kv_sliding_window() > 0): the sliding-window layers'
  // own blocks, block i for the same positions. Entries of blocks wholly before the window of the
  // item's first token (i < max(0, start - window + 1) / block_size) may be anything (the engine
  // writes -1 there: those blocks went back to the pool): the backend reads neither them nor any
  // key before a row's window. Empty for backends with one group.
  std::span<const int> window_block_table;
  // Hidden states, for speculative decoding's mtp and eagle3 methods (backends with
  // returns_hidden_states; any other refuses items that carry them). hidden_out: tokens.size()
  // rows of ModelConfig::hidden_state_width() floats the step writes, each token's last hidden
  // state: the last layer's output before the final norm, or after it for a model whose input is
  // ModelInput::kEmbeddingAndHidden (an MTP module, whose drafts chain on that); or, where the
  // config names hidden_state_layers (an EAGLE-3 head's target), those layers' inputs side by
  // side. Empty: not wanted.
  std::span<float> hidden_out;
  // A model whose input is kEmbeddingAndHidden: tokens.size() rows of hidden_size floats, the
  // hidden state each token's input combines with its embedding; kEagle3: rows of hidden_size
  // (the head's own output) or of 3 * target_hidden_size (the target's). Empty for other models.
  std::span<const float> hidden_in;
};

// Host work a step runs while its forward pass computes (Backend::forward_batch_overlapping).
using HostWork = std::function<void()>;

inline bool wants_next_token(const BatchItem& item) {
  return !item.logits.empty() || item.sample != nullptr;
}

// An item's device sampling requests: num_logits from sample on, or none.
inline std::span<const DeviceSampling> samples_of(const BatchItem& item) {
  if (item.sample == nullptr) return {};
  return {item.sample, std::size_t(item.num_logits)};
}

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  virtual const model::ModelConfig& config() const = 0;

  // A KV cache for up to max_tokens positions (1..config().max_context). The default (and every
  // backend's) is a private paged cache run through forward_batch (own_cache_sequence.h).
  virtual std::unique_ptr<SequenceState> new_sequence(int max_tokens);

  // Runs `tokens` at positions [seq.length(), seq.length() + tokens.size()) (prefill when many,
  // decode when one), appends them to the KV cache, and writes the next-token logits after the
  // last of them to `logits` (exactly vocab_size floats).
  virtual void forward(SequenceState& seq, std::span<const std::int32_t> tokens,
                       std::span<float> logits);

  // The storage of the caches created from now on (call before sizing: kv_block_bytes follows).
  // Returns false, changing nothing, where the backend cannot store that type.
  virtual bool set_kv_cache_dtype(KvCacheDtype dtype) { return dtype == KvCacheDtype::kAuto; }
  virtual std::string kv_cache_dtype() const = 0;  // what it stores: "fp32", "bf16", "fp8"

  // Bytes one cache block of block_size positions takes (for sizing): across all attention
  // layers, or with a sliding group across one group's layers (the larger group's).
  virtual std::size_t kv_block_bytes(int block_size) const = 0;
  // The window of the sliding group where the backend's caches keep the sliding-window layers in
  // blocks of their own (BatchItem::window_block_table; kv_layer_groups.h), so that the engine
  // can free them as they leave the window. 0: one group, every block for every layer.
  virtual int kv_sliding_window() const { return 0; }
  virtual std::unique_ptr<KvCache> new_kv_cache(int num_blocks, int block_size) = 0;
  // Hybrid models (Qwen3-Next's linear-attention layers): bytes one sequence's recurrent state
  // takes across all layers; 0 for models without one.
  virtual std::size_t state_slot_bytes() const { return 0; }
  // new_kv_cache's cache that also holds `state_slots` recurrent-state slots (0..: BatchItem::
  // state_slot), for models with recurrent state. The default serves backends without any:
  // state_slots must be 0.
  virtual std::unique_ptr<KvCache> new_kv_cache_with_state(int num_blocks, int block_size,
                                                           int state_slots);
  // Bytes of device memory left for the KV cache when `utilization` of the device may be used,
  // after the weights and the activations of steps of up to max_tokens tokens and max_sequences
  // sampled sequences, each with up to logits_per_sequence rows of logits (1; k + 1 where
  // speculative decoding verifies k drafts), which this call allocates. 0: the backend has no
  // device memory of its own (the CPU backend), the caller picks a budget.
  virtual std::size_t device_memory_for_kv(double utilization, int max_tokens, int max_sequences,
                                           int logits_per_sequence) {
    (void)utilization, (void)max_tokens, (void)max_sequences, (void)logits_per_sequence;
    return 0;
  }
  // Runs every item's tokens in one step (weights are read once for the whole batch), writing
  // their keys and values into `cache` through the items' block tables. Throws BackendError on
  // bad arguments (a block table too short for its positions, a block id out of range, ...)
  // before anything is written.
  virtual void forward_batch(KvCache& cache, std::span<const BatchItem> items) = 0;

  // forward_batch that calls `host_work` exactly once, on the calling thread, while the step's
  // forward pass runs on the device: after the forward is enqueued and before the step's tokens
  // are sampled (BatchItem::sample) or its logits waited for. host_work may write the contents of
  // the items' sampling inputs (the bitmasks BatchItem::sample points to: their rows and sizes
  // are fixed before the call); the backend reads them only after it returns. The engine loop
  // computes structured outputs' token masks there, as vLLM overlaps xgrammar's with the GPU.
  // Default, for backends that compute synchronously: host_work, then forward_batch. If
  // host_work throws, the exception propagates and the step's tokens are not sampled.
  virtual void forward_batch_overlapping(KvCache& cache, std::span<const BatchItem> items,
                                         const HostWork& host_work) {
    host_work();
    forward_batch(cache, items);
  }

  // Whether forward_batch takes BatchItem::num_logits > 1, which speculative decoding needs (the
  // CPU and CUDA backends; a backend without it refuses such items).
  virtual bool logits_at_several_positions() const { return false; }

  // Whether forward_batch takes BatchItem::hidden_out and hidden_in, which the mtp and eagle3
  // drafters need (the CPU and CUDA backends; the CUDA backend's hidden states are its BF16
  // activations, as floats).
  virtual bool returns_hidden_states() const { return false; }

  // Whether forward_batch takes BatchItem::sample (the CUDA backend; NIBBLE_DEVICE_SAMPLING=0
  // turns it off for an A/B against host sampling).
  virtual bool samples_on_device() const { return false; }

  // Decode steps replayed from captured graphs (the CUDA backend; on unless --enforce-eager).
  // Off: every step runs eagerly. Backends without graphs ignore it.
  virtual void set_decode_graphs(bool enabled) { (void)enabled; }
  // Steps run as graph replays so far (0 for backends without graphs).
  virtual std::uint64_t decode_graph_replays() const { return 0; }
  // Called once for the serving cache, after it is created: prepares what makes its decode steps
  // fast (the CUDA backend captures its graphs, logging progress). Optional: forward_batch works
  // without it, preparing lazily.
  virtual void prepare_decode(KvCache& cache) { (void)cache; }
};

}  // namespace nibble::backend
