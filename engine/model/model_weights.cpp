#include "engine/model/model_weights.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "engine/model/fused_experts.h"
#include "engine/model/model_description.h"
#include "engine/model/model_error.h"
#include "engine/model/safetensors.h"

namespace nibble::model {
namespace {

constexpr double kLoadProgressSeconds = 5.0;
constexpr int kLoadThreads = 16;

// model.layers.N.linear_attn.* (`p` ends in "linear_attn.").
LinearAttentionWeights load_linear_attention(const Checkpoint& ck, QuantFormat format,
                                             const std::string& p, const LinearAttentionSpec& s,
                                             std::int64_t H) {
  const std::int64_t Kh = s.key_heads, Vh = s.value_heads, Dk = s.key_head_dim,
                     Dv = s.value_head_dim, G = Vh / Kh;
  const std::int64_t conv_dim = 2 * Kh * Dk + Vh * Dv;
  LinearAttentionWeights w;
  w.in_proj_qkvz = load_linear(ck, format, p + "in_proj_qkvz", Kh * (2 * Dk + 2 * G * Dv), H);
  w.in_proj_ba = load_linear(ck, format, p + "in_proj_ba", 2 * Vh, H);
  w.conv_weight = load_floats(ck, p + "conv1d.weight", conv_dim * s.conv_kernel);
  w.A_log = load_floats(ck, p + "A_log", Vh);
  w.dt_bias = load_floats(ck, p + "dt_bias", Vh);
  w.norm = load_floats(ck, p + "norm.weight", Dv);
  w.out_proj = load_linear(ck, format, p + "out_proj", H, Vh * Dv);
  return w;
}

// mtp.*: the module's input (the two norms, fc), its one layer (a full-attention layer of the
// model's architecture, mtp_module_config) and its norm. fc is read as the checkpoint stores it
// (BF16 in NVFP4 exports, whose exclusion lists may not name it: load_linear goes by the
// tensors present).
MtpWeights load_mtp(const Checkpoint& ck, const ModelWeights& m, const std::filesystem::path& dir) {
  const std::int64_t H = m.config.hidden_size;
  if (m.config.num_nextn_predict_layers > 1)
    spdlog::warn(
        "{}: num_nextn_predict_layers {}: only mtp.layers.0 is loaded (one MTP layer, "
        "chained on itself for every draft)",
        dir.string(), m.config.num_nextn_predict_layers);
  MtpWeights w;
  w.embedding_norm = load_floats(ck, "mtp.pre_fc_norm_embedding.weight", H);
  w.hidden_norm = load_floats(ck, "mtp.pre_fc_norm_hidden.weight", H);
  w.fc = load_linear(ck, m.quant.format, "mtp.fc", H, 2 * H);
  const ModelDescription module = describe_model(mtp_module_config(m.config));
  w.layer = load_layer(ck, m, "mtp.layers.0.", module.layers[0], dir);
  w.norm = load_floats(ck, "mtp.norm.weight", H);
  return w;
}

// The decoder layers, read by up to kLoadThreads threads (layer l by whichever takes it next):
// reading a checkpoint is page faults and copies out of the mapped files, a core's worth a
// thread (not yet timed on the device against one thread). Each layer reads only its own tensors
// and writes only its own LayerWeights, so the result is the sequential read's. The first error
// by layer order is the one thrown, as a sequential read would throw it. Progress at most every
// kLoadProgressSeconds, as layers finish.
std::vector<LayerWeights> load_layers(const Checkpoint& ck, const ModelWeights& m,
                                      const ModelDescription& model,
                                      const std::filesystem::path& dir,
                                      const std::function<double()>& since_start) {
  const int layers = m.config.num_layers;
  std::vector<LayerWeights> out(std::size_t(std::max(layers, 0)));
  std::vector<std::exception_ptr> errors(out.size());
  std::atomic<int> next{0}, done{0};
  std::mutex report_mutex;
  double last_report = 0;
  auto work = [&] {
    for (int l = next++; l < layers; l = next++) {
      try {
        out[std::size_t(l)] = load_layer(ck, m, "model.layers." + std::to_string(l) + ".",
                                         model.layers[std::size_t(l)], dir);
      } catch (...) {
        errors[std::size_t(l)] = std::current_exception();
        next = layers;  // nothing later is needed: an earlier error, or this one, is thrown
      }
      const int finished = ++done;
      const std::lock_guard lock(report_mutex);
      if (finished < layers && since_start() - last_report >= kLoadProgressSeconds) {
        last_report = since_start();
        spdlog::info("loading {}: {}/{} layers read ({:.1f} s)", dir.string(), finished, layers,
                     last_report);
      }
    }
  };
  const int threads = std::clamp(int(std::thread::hardware_concurrency()), 1,
                                 std::max(1, std::min(kLoadThreads, layers)));
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  for (const auto& e : errors)
    if (e) std::rethrow_exception(e);
  return out;
}

}  // namespace

LayerWeights load_layer(const Checkpoint& ck, const ModelWeights& m, const std::string& p,
                        const LayerSpec& spec, const std::filesystem::path& dir) {
  const auto& c = m.config;
  const std::int64_t H = c.hidden_size, D = c.head_dim;
  const std::int64_t q_out = std::int64_t(c.num_heads) * D,
                     kv_out = std::int64_t(c.num_kv_heads) * D;
  auto linear = [&](const std::string& name, std::int64_t out, std::int64_t in) {
    return load_linear(ck, m.quant.format, name, out, in);
  };
  LayerWeights w;
  w.input_norm = load_floats(ck, p + "input_layernorm.weight", H);
  // EAGLE-3: q, k and v read the normed embedding and hidden state side by side.
  const std::int64_t attention_in = spec.attention.reads_embedding ? 2 * H : H;
  if (spec.attention.reads_embedding) w.hidden_norm = load_floats(ck, p + "hidden_norm.weight", H);
  w.post_attention_norm = load_floats(ck, p + "post_attention_layernorm.weight", H);
  if (spec.mixer == MixerKind::kGatedDeltaNet) {
    w.linear_attention =
        load_linear_attention(ck, m.quant.format, p + "linear_attn.", spec.linear_attention, H);
  } else {
    w.q = linear(p + "self_attn.q_proj", spec.attention.output_gate ? 2 * q_out : q_out,
                 attention_in);
    w.k = linear(p + "self_attn.k_proj", kv_out, attention_in);
    w.v = linear(p + "self_attn.v_proj", kv_out, attention_in);
    w.o = linear(p + "self_attn.o_proj", H, q_out);
  }
  if (spec.attention.qkv_bias && (w.q.bias.empty() || w.k.bias.empty() || w.v.bias.empty()))
    throw ModelError(dir.string() + ": " + c.architecture + " needs q/k/v biases; missing in " + p +
                     "self_attn");
  if (spec.attention.o_bias && w.o.bias.empty())
    throw ModelError(dir.string() + ": " + c.architecture + " needs an o_proj bias; missing in " +
                     p + "self_attn");
  if (spec.attention.sinks) w.sinks = load_floats(ck, p + "self_attn.sinks", c.num_heads);
  if (spec.attention.qk_norm) {
    w.q_norm = load_floats(ck, p + "self_attn.q_norm.weight", D);
    w.k_norm = load_floats(ck, p + "self_attn.k_norm.weight", D);
  }
  w.moe = spec.ffn.kind == FfnKind::kMoe;
  if (w.moe) {
    const MoeSpec& moe = spec.ffn.moe;
    switch (moe.layout) {
      case ExpertLayout::kPerExpert:
        w.router = linear(p + "mlp.gate", moe.experts, H);
        for (int e = 0; e < moe.experts; ++e) {
          const std::string ep = p + "mlp.experts." + std::to_string(e) + ".";
          ExpertWeights ex;
          ex.gate = linear(ep + "gate_proj", moe.intermediate_size, H);
          ex.up = linear(ep + "up_proj", moe.intermediate_size, H);
          ex.down = linear(ep + "down_proj", H, moe.intermediate_size);
          w.experts.push_back(std::move(ex));
        }
        if (const std::int64_t Is = moe.shared_expert_intermediate_size; Is > 0) {
          w.shared_gate = linear(p + "mlp.shared_expert.gate_proj", Is, H);
          w.shared_up = linear(p + "mlp.shared_expert.up_proj", Is, H);
          w.shared_down = linear(p + "mlp.shared_expert.down_proj", H, Is);
          w.shared_expert_gate = linear(p + "mlp.shared_expert_gate", 1, H);
        }
        break;
      case ExpertLayout::kFusedInterleaved:
        w.router = linear(p + "mlp.router", moe.experts, H);
        w.experts = load_fused_experts(ck, m.quant.format, p + "mlp.experts", moe.experts,
                                       moe.intermediate_size, H);
        break;
    }
    if (moe.router_bias && w.router.bias.empty())
      throw ModelError(dir.string() + ": " + c.architecture + " needs a router bias; missing in " +
                       p + "mlp");
  } else {
    const std::int64_t I = spec.ffn.mlp.intermediate_size;
    w.gate = linear(p + "mlp.gate_proj", I, H);
    w.up = linear(p + "mlp.up_proj", I, H);
    w.down = linear(p + "mlp.down_proj", H, I);
  }
  return w;
}

ModelWeights load_model(const std::filesystem::path& dir) {
  const auto start = std::chrono::steady_clock::now();
  auto since_start = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  ModelWeights m;
  m.config = load_model_config(dir);
  if (m.config.eagle3)
    throw ModelError(dir.string() + ": " + m.config.architecture +
                     " is an EAGLE-3 draft head, not a model to serve; pass it as "
                     "--speculative-config '{\"method\": \"eagle3\", \"model\": \"" +
                     dir.string() + "\", ...}' beside its target");
  m.quant = load_quant_config(dir);
  auto ck = Checkpoint::open(dir);
  const auto& c = m.config;
  const std::int64_t H = c.hidden_size;
  const ModelDescription model = describe_model(c);
  m.embed = load_floats(ck, "model.embed_tokens.weight", std::int64_t(c.vocab_size) * H);
  m.layers = load_layers(ck, m, model, dir, since_start);
  m.final_norm = load_floats(ck, "model.norm.weight", H);
  if (ck.has("mtp.fc.weight")) m.mtp = load_mtp(ck, m, dir);
  if (c.num_nextn_predict_layers > 0 && !m.mtp)
    spdlog::warn(
        "{}: config.json declares num_nextn_predict_layers {} but the checkpoint has no "
        "mtp.* weights; the mtp speculative method is not available",
        dir.string(), c.num_nextn_predict_layers);
  if (c.tie_word_embeddings) {
    m.lm_head.out_features = c.vocab_size;
    m.lm_head.in_features = H;
    m.lm_head.dense = m.embed;
  } else {
    m.lm_head = load_linear(ck, m.quant.format, "lm_head", c.vocab_size, H);
  }
  spdlog::info("loaded {} ({} layers{}, quantization {}) from {} in {:.1f} s", c.architecture,
               c.num_layers, m.mtp ? " and an MTP module" : "", quant_format_name(m.quant.format),
               dir.string(), since_start());
  return m;
}

ModelWeights take_mtp_module(ModelWeights& model) {
  if (!model.mtp)
    throw ModelError(model.config.architecture +
                     ": the checkpoint has no multi-token-prediction module (mtp.* weights)");
  ModelWeights m;
  m.config = mtp_module_config(model.config);
  m.quant = model.quant;
  m.embed = model.embed;
  m.lm_head = model.lm_head;
  MtpWeights& mtp = *model.mtp;
  m.layers.push_back(std::move(mtp.layer));
  m.final_norm = std::move(mtp.norm);
  m.mtp.emplace();
  m.mtp->embedding_norm = std::move(mtp.embedding_norm);
  m.mtp->hidden_norm = std::move(mtp.hidden_norm);
  m.mtp->fc = std::move(mtp.fc);
  model.mtp.reset();
  return m;
}

}  // namespace nibble::model
