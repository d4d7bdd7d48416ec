#pragma once
// A model's weights in GPU memory: BF16 embeddings, FP32 norms, every Linear as a DeviceLinear
// (NVFP4 in the W4A16 layout, dense in BF16), and the rotary inverse frequencies.
#include <cstdint>
#include <optional>
#include <vector>

#include "engine/backend/cuda/device_linear.h"
#include "engine/model/model_description.h"
#include "engine/model/model_weights.h"
#include "kernels/moe/moe_experts.h"

namespace nibble::backend::cuda {

// Projections that read the same input run as one matrix when they can be joined: every one
// dense, or every one NVFP4 with the same global factor (ModelOpt exports give fused groups one
// factor for this reason). One launch instead of two or three, the way the kernels were measured.
struct DeviceMlp {
  bool fused = false;
  DeviceLinear gate_up;   // fused: [2 I, H], gate rows first (gpt-oss's experts: interleaved)
  DeviceLinear gate, up;  // otherwise
  DeviceLinear down;
  std::int64_t width() const { return fused ? gate_up.n / 2 : gate.n; }
};

// A MoE layer's experts as the grouped kernels take them (kernels/moe/moe_experts.h): device
// arrays of the experts' W4A16 weights, built when every expert is in the W4A16 layout in one
// format (NVFP4, or MXFP4 as gpt-oss ships them) and one shape and gate/up fusion, without
// biases unless the layer is gpt-oss's (clamped SwiGLU over interleaved gate/up rows), whose
// biases go to BF16 tables [E, 2 I] and [E, H] (kernels::W4A16ClampedSwiglu). `weights` views
// the arrays; `grouped` false: the layer's experts run one by one with routing on the host (e.g.
// BF16 experts).
struct DeviceExpertTables {
  bool grouped = false;
  DeviceBuffer<kernels::W4A16DeviceWeight> gate_up, gate, up, down;
  kernels::MoeExpertWeights weights;
  DeviceBuffer<std::uint16_t> gate_up_bias, down_bias;  // gpt-oss's layers
};

// A Gated DeltaNet layer's weights (model::LinearAttentionWeights) as gated_deltanet_mix takes
// them (kernels/linear_attention/gated_deltanet.h): the conv in BF16, the gates and norm in FP32.
struct DeviceLinearAttention {
  DeviceLinear in_proj_qkvz, in_proj_ba, out_proj;
  DeviceBuffer<std::uint16_t> conv_weight;  // [conv_dim, K]
  DeviceBuffer<float> A_log, dt_bias, norm;
};

struct DeviceLayer {
  // Norms as a plain RMSNorm applies them: zero-centred ones folded (zero_centred_norms.h).
  DeviceBuffer<float> input_norm, post_attention_norm, q_norm, k_norm;
  DeviceBuffer<float> hidden_norm;  // EAGLE-3's first layer (AttentionSpec::reads_embedding)
  bool fused_qkv = false;
  DeviceLinear qkv;      // fused: [(Hq + 2 Hkv) D, H]
  DeviceLinear q, k, v;  // otherwise
  DeviceLinear o;
  DeviceBuffer<float> sinks;  // [Hq] attention sink logits (gpt-oss), or empty
  bool moe = false;
  DeviceMlp mlp;
  DeviceLinear router;
  // The router's bias in BF16 (as checkpoints hold it) for the fused router (moe_experts.h
  // MoeExpertsArgs::router_bias); empty without a bias. The unfused router adds router.bias.
  DeviceBuffer<std::uint16_t> router_bias;
  // gpt-oss's experts (ExpertLayout::kFusedInterleaved): each DeviceMlp is fused, its gate_up's
  // rows interleaving gate and up, with biases.
  std::vector<DeviceMlp> experts;
  DeviceExpertTables expert_tables;  // MoE layers
  // MoE layers with a shared expert (MoeSpec::shared_expert_intermediate_size > 0): its SwiGLU
  // and the [1, H] gate whose sigmoid scales it per token.
  DeviceMlp shared;
  DeviceLinear shared_expert_gate;
  DeviceLinearAttention linear_attention;  // Gated DeltaNet layers (q, k, v, o empty there)
};

// An MTP module's input (model::MtpWeights; ModelInput::kEmbeddingAndHidden): its two norms
// (zero-centred ones folded, as the layers') and fc over [norm(embedding), norm(hidden)].
struct DeviceMtpInput {
  DeviceBuffer<float> embedding_norm, hidden_norm;
  DeviceLinear fc;  // [H, 2 H]
};

struct DeviceModel {
  model::ModelConfig config;
  // What the layers compute, as the device runs them: zero-centred norms folded into their
  // weights, so every norm here is kRms (zero_centred_norms.h).
  model::ModelDescription description;
  DeviceBuffer<std::uint16_t> embed;  // [vocab, H]
  std::vector<DeviceLayer> layers;
  DeviceBuffer<float> final_norm;
  DeviceLinear lm_head;
  std::optional<DeviceMtpInput> mtp;  // a model made by model::take_mtp_module only
  // An EAGLE-3 head's fc (model::Eagle3Weights): [H, 3 target H], the target's hidden states to
  // one.
  std::optional<DeviceLinear> eagle3_fc;
  DeviceBuffer<double> inv_freq;  // [rope_dim / 2] (head_dim / 2 but with partial RoPE)
  std::int64_t widest_nvfp4 = 0;  // largest out_features of an NVFP4 Linear (split-K workspace)
  std::size_t largest_nvfp4 = 0;  // most (padded) weights of one NVFP4 Linear (dense scratch)
  std::size_t bytes = 0;          // device memory the weights take
};

// Uploads every weight, freeing the host copies as it goes; logs progress per layer.
DeviceModel upload_model(model::ModelWeights weights);

}  // namespace nibble::backend::cuda
