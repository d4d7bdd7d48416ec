#pragma once
// The compute backend interface: runs a loaded model's forward pass over a KV cache.
// Implementations: cpu/ (FP32 reference, this file's first user) and later CUDA.
//
// Ownership: a Backend owns the model weights it was created with. A SequenceState (one
// sequence's KV cache and length) is created by a backend, owned by the caller, and may only be
// passed back to the backend that created it.
// Failures: every call throws BackendError on bad arguments (empty or out-of-vocabulary tokens,
// too many positions, a logits buffer of the wrong size, a state from another backend); the
// sequence state is left unchanged when a call fails.
#include <cstdint>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>

#include "engine/model/model_config.h"

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

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  virtual const model::ModelConfig& config() const = 0;

  // A KV cache for up to max_tokens positions (1..config().max_context).
  virtual std::unique_ptr<SequenceState> new_sequence(int max_tokens) = 0;

  // Runs `tokens` at positions [seq.length(), seq.length() + tokens.size()) (prefill when many,
  // decode when one), appends them to the KV cache, and writes the next-token logits after the
  // last of them to `logits` (exactly vocab_size floats).
  virtual void forward(SequenceState& seq, std::span<const std::int32_t> tokens,
                       std::span<float> logits) = 0;
};

}  // namespace nibble::backend
