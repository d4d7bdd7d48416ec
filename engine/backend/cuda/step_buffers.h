#pragma once
// The device memory a step reads and writes besides the weights and the KV cache: activations,
// the attention workspace and the staging of its inputs. Buffers grow to the largest step seen
// (or are reserved up front); a growth moves buffers that captured decode graphs read, so it
// bumps `epoch` and the graphs captured before it are retired (decode_graphs.h).
#include <cstddef>
#include <cstdint>

#include "engine/backend/cuda/device_buffer.h"
#include "engine/model/model_config.h"

namespace nibble::backend::cuda {

// Activations of one step of T rows, R of them sampled. Row-major, BF16 unless noted; H hidden,
// D head_dim, I the widest MLP (or top-k experts' middles), E experts.
struct Activations {
  using bf16 = std::uint16_t;
  DeviceBuffer<bf16> x, x2, h;              // [T, H] residual, after attention, normed
  DeviceBuffer<bf16> q, k, v, qkv, attn;    // projections [T, heads * D], attention out [T, Hq D]
                                            // (q [T, Hq 2 D] with Qwen3-Next's output gate)
  DeviceBuffer<bf16> gate, up;              // [T, 2 I] a gate_up projection, [T, I] its SwiGLU
  DeviceBuffer<bf16> routed, expert_out;    // MoE: [T * top_k, H] rows per routed pair
  DeviceBuffer<bf16> last, scratch;         // [R, H] sampled rows normed; BF16 logits or scores
  DeviceBuffer<float> router, logits;       // [T, E] FP32 router scores, [R, vocab] FP32 logits
  DeviceBuffer<std::int32_t> moe_routing;   // the device routing's arrays (kernels/moe)
  DeviceBuffer<std::int32_t> moe_arrivals;  // the fused combine's counts (zeroed by the route)
  // Gated DeltaNet layers (hybrid models only): in_proj_qkvz's and in_proj_ba's outputs, the
  // mixing's output [T, Vh Dv] (kernels/linear_attention/gated_deltanet_shape.h).
  DeviceBuffer<bf16> qkvz, ba, mixed;
  // The chunked delta rule's workspace for T tokens (gated_deltanet_chunked.h; decode graphs never
  // read it).
  DeviceBuffer<std::byte> deltanet_work;
  // Hidden states (speculative decoding's mtp and eagle3). A model whose config names
  // hidden_state_layers: [T, hidden_state_width] those layers' inputs side by side, written in the
  // step (inside decode graphs too) and read back after it. An MTP module (ModelConfig::
  // mtp_module) or an EAGLE-3 head (ModelConfig::eagle3): the hidden_in rows the step takes
  // ([T, H]; an EAGLE-3 head's may be the target's, [T, 3 target H]), [T, 2 H] two normed halves
  // side by side (the MTP module's fc input, the EAGLE-3 layer's q/k/v input); an EAGLE-3 head's
  // [T, H] embeddings, kept for its first attention.
  DeviceBuffer<bf16> kept, hidden_in, pair, embedding;

  // Grows every buffer for steps of T rows, R sampled; true when one was reallocated.
  bool ensure(const model::ModelConfig& c, std::int64_t T, std::int64_t R);
};

// The most rows of logits a step can ask for: one per sequence (a decode graph's bucket), or
// logits_per_sequence (k + 1 verifying k drafts) per sequence, but never more than the step's
// max_tokens rows hold.
std::int64_t max_logit_rows(int max_tokens, int max_sequences, int logits_per_sequence);

struct StepBuffers {
  Activations act;
  DeviceBuffer<float> attention_work;  // split-key partial softmaxes (decode steps)
  PinnedBuffer<std::byte> staging;     // a step's inputs on their way to the device
  DeviceBuffer<std::byte> step;        // an eager step's inputs (step_layout.h)
  std::uint64_t epoch = 0;             // bumped whenever a buffer graphs read is reallocated

  // Grows the activations and attention workspace for steps of T rows (R sampled).
  void reserve(const model::ModelConfig& c, std::int64_t T, std::int64_t R,
               std::size_t attention_floats);
};

}  // namespace nibble::backend::cuda
