#include "tests/backend/random_model.h"

#include "engine/model/model_description.h"
#include "engine/model/mxfp4.h"
#include "kernels/linear_attention/gated_deltanet_shape.h"
#include "kernels/nvfp4/bf16.h"
#include "kernels/nvfp4/nvfp4_ref.h"

#include <algorithm>
#include <cmath>
#include <span>

namespace nibble::backend::testing {

std::vector<float> Rng::values(std::int64_t n, float scale, float offset) {
  std::uniform_real_distribution<float> u(-scale, scale);
  std::vector<float> v(static_cast<std::size_t>(n));
  for (auto& x : v) x = offset + u(gen);
  return v;
}

model::Linear Rng::linear(std::int64_t out, std::int64_t in, bool bias) {
  model::Linear l;
  l.out_features = out;
  l.in_features = in;
  l.dense = values(out * in, std::sqrt(3.0f / float(in)));
  if (bias) l.bias = values(out, 0.5f);
  return l;
}

namespace {

// A Gated DeltaNet layer's weights: projections as Rng::linear, the conv in BF16 values (as
// checkpoints hold it, so that a backend keeping it in BF16 computes with the same numbers),
// decays exp(A_log) * softplus(a + dt_bias) of order 1.
model::LinearAttentionWeights random_linear_attention(Rng& rng, const model::LinearAttentionSpec& s,
                                                      std::int64_t H) {
  const kernels::GatedDeltaNetShape shape{
      {s.key_heads, s.value_heads, s.key_head_dim, s.value_head_dim}, s.conv_kernel};
  model::LinearAttentionWeights w;
  w.in_proj_qkvz = rng.linear(shape.qkvz_width(), H);
  w.in_proj_ba = rng.linear(shape.ba_width(), H);
  w.conv_weight = rng.values(std::int64_t(shape.conv_dim()) * s.conv_kernel, 0.5f);
  for (float& x : w.conv_weight) x = nvfp4::bf16_to_float(nvfp4::float_to_bf16(x));
  w.A_log = rng.values(s.value_heads, 0.5f);
  w.dt_bias = rng.values(s.value_heads, 0.5f);
  w.norm = rng.values(s.value_head_dim, 0.2f, 1.0f);
  w.out_proj = rng.linear(H, shape.value_dim());
  return w;
}

}  // namespace

model::ModelWeights random_model(const model::ModelConfig& c, std::uint64_t seed) {
  Rng rng(seed);
  model::ModelWeights m;
  m.config = c;
  const std::int64_t H = c.hidden_size, D = c.head_dim;
  const model::ModelDescription description = model::describe_model(c);
  m.embed = rng.values(std::int64_t(c.vocab_size) * H, 1.0f);
  for (int l = 0; l < c.num_layers; ++l) {
    const model::LayerSpec& spec = description.layers[std::size_t(l)];
    model::LayerWeights w;
    // Zero-centred norms (x * (1 + w)) store their weights around 0, plain ones around 1.
    const float norm_offset = spec.norm == model::NormKind::kRmsZeroCentred ? 0.0f : 1.0f;
    w.input_norm = rng.values(H, 0.2f, norm_offset);
    w.post_attention_norm = rng.values(H, 0.2f, norm_offset);
    if (spec.mixer == model::MixerKind::kGatedDeltaNet) {
      w.linear_attention = random_linear_attention(rng, spec.linear_attention, H);
    } else {
      const bool bias = spec.attention.qkv_bias;
      // EAGLE-3's first layer: q, k and v read the embedding's and the hidden state's norms side
      // by side.
      const std::int64_t in = spec.attention.reads_embedding ? 2 * H : H;
      // With an output gate q_proj yields each head's query then its gate.
      w.q = rng.linear(c.num_heads * D * (spec.attention.output_gate ? 2 : 1), in, bias);
      w.k = rng.linear(c.num_kv_heads * D, in, bias);
      w.v = rng.linear(c.num_kv_heads * D, in, bias);
      if (spec.attention.reads_embedding) w.hidden_norm = rng.values(H, 0.2f, norm_offset);
      w.o = rng.linear(H, c.num_heads * D, spec.attention.o_bias);
      if (spec.attention.sinks) w.sinks = rng.values(c.num_heads, 1.0f);
      if (spec.attention.qk_norm) {
        w.q_norm = rng.values(D, 0.2f, norm_offset);
        w.k_norm = rng.values(D, 0.2f, norm_offset);
      }
    }
    w.moe = spec.ffn.kind == model::FfnKind::kMoe;
    if (w.moe) {
      const model::MoeSpec& moe = spec.ffn.moe;
      w.router = rng.linear(c.num_experts, H, moe.router_bias);
      for (int e = 0; e < c.num_experts; ++e) {
        model::ExpertWeights ex;
        if (moe.layout == model::ExpertLayout::kFusedInterleaved) {  // gpt-oss
          ex.gate_up = rng.linear(2 * c.moe_intermediate_size, H, moe.expert_bias);
          ex.down = rng.linear(H, c.moe_intermediate_size, moe.expert_bias);
        } else {
          ex.gate = rng.linear(c.moe_intermediate_size, H);
          ex.up = rng.linear(c.moe_intermediate_size, H);
          ex.down = rng.linear(H, c.moe_intermediate_size);
        }
        w.experts.push_back(std::move(ex));
      }
      if (const int I = moe.shared_expert_intermediate_size; I > 0) {
        w.shared_gate = rng.linear(I, H);
        w.shared_up = rng.linear(I, H);
        w.shared_down = rng.linear(H, I);
        w.shared_expert_gate = rng.linear(1, H);
      }
    } else {
      w.gate = rng.linear(c.intermediate_size, H);
      w.up = rng.linear(c.intermediate_size, H);
      w.down = rng.linear(H, c.intermediate_size);
    }
    m.layers.push_back(std::move(w));
  }
  m.final_norm =
      rng.values(H, 0.2f, description.final_norm == model::NormKind::kRmsZeroCentred ? 0.0f : 1.0f);
  m.lm_head = rng.linear(c.logits_size(), H);
  return m;
}

model::ModelWeights random_eagle3_head(const model::ModelWeights& target,
                                       const std::vector<int>& aux_layers,
                                       bool norm_before_residual, std::uint64_t seed) {
  model::ModelConfig c = target.config;
  c.arch = model::Arch::LlamaEagle3;
  c.architecture = "LlamaForCausalLMEagle3";
  c.num_layers = 1;
  c.hidden_state_layers = {};
  c.eagle3 = model::Eagle3HeadConfig{.draft_vocab_size = c.vocab_size / 2,
                                     .target_hidden_size = c.hidden_size,
                                     .aux_layers = aux_layers,
                                     .norm_before_residual = norm_before_residual};
  model::ModelWeights head = random_model(c, seed);
  head.embed = target.embed;  // as load_eagle3_head gives a head without its own
  Rng rng(seed ^ 0x653333u);
  head.eagle3.emplace();
  head.eagle3->fc = rng.linear(c.hidden_size, c.eagle3->fc_inputs());
  for (int i = 0; i < c.eagle3->draft_vocab_size; ++i)
    head.eagle3->draft_to_target.push_back(2 * i);
  return head;
}

model::MtpWeights random_mtp_module(const model::ModelConfig& target, std::uint64_t seed) {
  model::ModelWeights module = random_model(model::mtp_module_config(target), seed);
  Rng rng(seed ^ 0x6d7470u);
  const std::int64_t H = target.hidden_size;
  const float norm_offset =
      model::describe_model(target).final_norm == model::NormKind::kRmsZeroCentred ? 0.0f : 1.0f;
  model::MtpWeights mtp;
  mtp.embedding_norm = rng.values(H, 0.2f, norm_offset);
  mtp.hidden_norm = rng.values(H, 0.2f, norm_offset);
  mtp.fc = rng.linear(H, 2 * H);
  mtp.layer = std::move(module.layers[0]);
  mtp.norm = std::move(module.final_norm);
  return mtp;
}

void quantize_group(std::initializer_list<model::Linear*> group) {
  float amax = 0.0f;
  for (model::Linear* l : group)
    for (float v : l->dense) amax = std::max(amax, std::fabs(v));
  const float global = nvfp4::global_factor_for_amax(amax);
  for (model::Linear* l : group) {
    l->fp4 = nvfp4::quantize_matrix(l->dense, l->out_features, l->in_features, global);
    l->quantized = true;
    l->dense = {};
  }
}

void quantize_experts(model::ModelWeights& weights) {
  for (auto& layer : weights.layers)
    for (auto& e : layer.experts) {
      if (e.gate_up.out_features > 0) {
        quantize_group({&e.gate_up});
      } else {
        quantize_group({&e.gate, &e.up});
      }
      quantize_group({&e.down});
    }
}

namespace {
void to_mxfp4(model::Linear& l) {
  const std::int64_t blocks = l.in_features / model::mxfp4::kBlockSize;
  model::mxfp4::Matrix& m = l.mxfp4;
  m.rows = l.out_features;
  m.cols = l.in_features;
  m.packed.resize(std::size_t(m.rows * m.cols / 2));
  m.scales.resize(std::size_t(m.rows * blocks));
  for (std::int64_t r = 0; r < m.rows; ++r)
    for (std::int64_t b = 0; b < blocks; ++b) {
      const std::int64_t at = r * m.cols + b * model::mxfp4::kBlockSize;
      model::mxfp4::quantize_block(
          std::span<const float>(l.dense).subspan(std::size_t(at), model::mxfp4::kBlockSize),
          std::span(m.packed).subspan(std::size_t(at / 2), model::mxfp4::kBlockSize / 2),
          m.scales[std::size_t(r * blocks + b)]);
    }
  l.dense = {};
}
}  // namespace

void quantize_experts_mxfp4(model::ModelWeights& weights) {
  for (auto& layer : weights.layers)
    for (auto& e : layer.experts) {
      to_mxfp4(e.gate_up);
      to_mxfp4(e.down);
    }
  weights.quant.format = model::QuantFormat::Mxfp4;
}

model::ModelConfig gpu_test_config(model::Arch arch, int head_dim, int top_k) {
  model::ModelConfig c;
  c.arch = arch;
  c.vocab_size = 1000;
  c.hidden_size = 256;
  c.intermediate_size = 512;
  c.num_layers = 3;
  c.num_heads = 8;
  c.num_kv_heads = 2;
  c.head_dim = head_dim;
  c.max_position_embeddings = c.max_context = 1024;
  c.rms_norm_eps = 1e-6f;
  c.rope.theta = 500000.0;
  if (arch == model::Arch::Llama) {
    c.rope.llama3 = true;
    c.rope.factor = 8.0;
    c.rope.original_max_position_embeddings = 256;
  }
  if (arch == model::Arch::Qwen3Moe || arch == model::Arch::Qwen3Next) {
    c.num_experts = 8;
    c.num_experts_per_tok = top_k > 0 ? top_k : 8;
    c.moe_intermediate_size = 128;
    c.norm_topk_prob = true;
    c.mlp_only_layers = {0};
  }
  return c;
}

model::ModelConfig gpt_oss_test_config(int window, int top_k) {
  model::ModelConfig c = gpu_test_config(model::Arch::GptOss, 64);
  c.architecture = "GptOssForCausalLM";
  c.attention_bias = true;
  c.layer_windows = {window, 0, window};
  c.rope.theta = 150000.0;
  c.rope.yarn = true;
  c.rope.factor = 4.0;
  c.rope.original_max_position_embeddings = 256;
  c.rope.beta_fast = 32.0;
  c.rope.beta_slow = 1.0;
  c.rope.attention_factor = 0.1 * std::log(4.0) + 1.0;  // transformers' get_mscale(4)
  c.num_experts = 8;
  c.num_experts_per_tok = top_k;
  c.intermediate_size = c.moe_intermediate_size = 128;
  c.swiglu_limit = 7.0;
  return c;
}

model::ModelConfig qwen3_next_test_config(int full_attention_interval, int head_dim, int experts,
                                          int top_k) {
  model::ModelConfig c = gpu_test_config(model::Arch::Qwen3Next, head_dim);
  c.architecture = "Qwen3NextForCausalLM";
  c.num_layers = 4;
  c.rope.theta = 10000000.0;
  c.rotary_dim = head_dim / 4;  // partial_rotary_factor 0.25
  c.linear_num_key_heads = 2;
  c.linear_num_value_heads = 4;
  c.linear_key_head_dim = 64;
  c.linear_value_head_dim = 64;
  c.linear_conv_kernel_dim = 4;
  c.linear_attention_layers.assign(std::size_t(c.num_layers), false);
  for (int l = 0; l < c.num_layers; ++l)
    c.linear_attention_layers[std::size_t(l)] = (l + 1) % full_attention_interval != 0;
  c.num_experts = experts;
  c.num_experts_per_tok = top_k > 0 ? top_k : experts;
  c.moe_intermediate_size = 64;
  c.shared_expert_intermediate_size = 128;
  c.mlp_only_layers = {1};
  return c;
}

}  // namespace nibble::backend::testing
