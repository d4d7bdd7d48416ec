#pragma once
// Random in-memory models for backend tests: every weight uniform from a seeded generator, linear
// layers scaled to keep activations near unit variance, norms near 1; and their NVFP4 forms.
#include <cstdint>
#include <initializer_list>
#include <random>
#include <vector>

#include "engine/model/model_weights.h"

namespace nibble::backend::testing {

struct Rng {
  explicit Rng(std::uint64_t seed) : gen(seed) {}
  std::mt19937 gen;
  std::vector<float> values(std::int64_t n, float scale, float offset = 0.0f);
  model::Linear linear(std::int64_t out, std::int64_t in, bool bias = false);
};

model::ModelWeights random_model(const model::ModelConfig& c, std::uint64_t seed);

// A random multi-token-prediction module for a model of config `target` (model::MtpWeights, as
// Qwen3-Next's mtp.*): input norms of the final norm's kind, fc [H, 2 H], one layer as
// mtp_module_config describes it, and its norm. Set it as the target's `mtp` and take it with
// model::take_mtp_module.
model::MtpWeights random_mtp_module(const model::ModelConfig& target, std::uint64_t seed);

// A random EAGLE-3 head for `target` (as model::load_eagle3_head gives one: ModelConfig::eagle3,
// one Llama layer whose q, k and v read 2 H, fc over the target's three hidden states, the
// target's embedding): half the target's vocabulary, draft id i being target id 2 i. Set the
// target's hidden_state_layers to aux_layers.
model::ModelWeights random_eagle3_head(const model::ModelWeights& target,
                                       const std::vector<int>& aux_layers,
                                       bool norm_before_residual, std::uint64_t seed);

// The GPU tests' small model (vocabulary 1,000, hidden 256, 3 layers, 8 query and 2 KV heads of
// head_dim, 1,024 positions; Llama with llama3 RoPE scaling). Qwen3-MoE: 8 experts of 128, top_k
// of them per token (0: all 8, so that a near tie of two BF16 router scores picks nothing and two
// paths differ by rounding only), the first layer dense.
model::ModelConfig gpu_test_config(model::Arch arch, int head_dim, int top_k = 0);

// A small Qwen3-Next (gpu_test_config's sizes, 4 layers): every full_attention_interval-th layer
// gated full attention (8 query and 2 KV heads of head_dim, RoPE on a quarter of it), the others
// Gated DeltaNet (2 key heads and 4 value heads of 64 x 64, conv kernel 4); layer 1 a dense MLP,
// the others top_k (0: all) of `experts` experts of 64 with a shared expert of 128.
model::ModelConfig qwen3_next_test_config(int full_attention_interval, int head_dim, int experts,
                                          int top_k = 0);

// A small gpt-oss (gpt_oss's layers at gpu_test_config's sizes, head_dim 64 as the real ones):
// 3 layers alternating a sliding window of `window` positions with full attention (sliding,
// full, sliding), biases on q/k/v/o, sinks, YaRN (factor 4 over 256 original positions, theta
// 150,000), 8 experts of 128 with biases of which the top `top_k` run (top-k-then-softmax over
// a biased router), the clamped SwiGLU (limit 7).
model::ModelConfig gpt_oss_test_config(int window, int top_k = 4);

// NVFP4 with one global factor per projection group (q/k/v, gate/up), as ModelOpt exports them:
// the CUDA backend then runs each group as one fused matrix.
void quantize_group(std::initializer_list<model::Linear*> group);
// A MoE model's experts in NVFP4 (one global factor for gate and up, as exported; gpt-oss's
// fused gate_up one of its own), the CUDA backend's device routing needs them so; the rest stays
// as it is.
void quantize_experts(model::ModelWeights& weights);
// gpt-oss's experts in MXFP4 as the checkpoints ship them (model::mxfp4::quantize_block: 32
// values per E8M0 scale), their biases kept; quant.format becomes Mxfp4.
void quantize_experts_mxfp4(model::ModelWeights& weights);

}  // namespace nibble::backend::testing
