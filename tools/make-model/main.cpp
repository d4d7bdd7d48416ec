// nibble-make-model: writes a Hugging Face-layout model with deterministic random weights of a
// real architecture's shape (config.json, safetensors, generation_config.json, tokenizer files).
#include <spdlog/spdlog.h>

#include <chrono>
#include <cmath>
#include <cstdio>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "cli/flag_reader.h"
#include "engine/model/model_config.h"
#include "engine/model/model_description.h"
#include "engine/model/model_error.h"
#include "engine/model/mxfp4.h"
#include "engine/model/nvfp4_checkpoint.h"
#include "engine/model/safetensors_writer.h"
#include "kernels/nvfp4/bf16.h"
#include "kernels/nvfp4/nvfp4_ref.h"
#include "tools/make-model/presets.h"
#include "tools/make-model/random_weights.h"

namespace {

using namespace nibble;
using model::DType;
using model::QuantFormat;
using model::TensorSpec;
using model::WeightJob;

constexpr const char* kUsage =
    R"(usage: nibble-make-model --arch ARCH --preset PRESET --output DIR [options]

Writes a Hugging Face-layout model with deterministic random weights (same seed, same bytes).

  --arch       llama | qwen3 | qwen3_moe | gpt_oss | qwen3_next | llama_eagle3
  --preset     tiny | small | llama-3.1-8b | qwen3-8b | qwen3-30b-a3b (gpt_oss: tiny |
               gpt-oss-20b | gpt-oss-120b; qwen3_next: tiny | tiny-interval2 |
               qwen3-next-80b-a3b | qwen3-next-80b-a3b-16l, its first 16 layers;
               llama_eagle3: tiny | llama-3.1-8b)
  --target DIR llama_eagle3: the model the EAGLE-3 head drafts for (its config.json gives
               tiny's shapes; llama-3.1-8b checks it). A head is written in the public
               layout (midlayer.*, fc, norm, lm_head over the draft vocabulary, d2t, t2d), BF16,
               with no tokenizer and no generation_config.json
  --seed N     random seed (default 0)
  --dtype      bf16 | nvfp4 | mxfp4 (default bf16; gpt_oss: mxfp4, as shipped); nvfp4
               quantizes every attention/MLP/expert projection and keeps embeddings, lm_head,
               norms and MoE routers in BF16; mxfp4 (gpt_oss only) stores the experts as
               *_blocks/*_scales and everything else in BF16, as openai/gpt-oss-* do
  --format     modelopt | compressed-tensors (NVFP4 layout, default modelopt)
  --shared-global-scales  NVFP4 global factors from each projection's value bound, which
               depends only on its input width, so q/k/v and gate/up share one as in ModelOpt
               exports (engines then run each group as one matrix); default: from each
               tensor's own maximum
  --tokenizer DIR   copy tokenizer.json, tokenizer_config.json (and friends) from DIR;
               required, since the engine cannot serve a model without a tokenizer
  --no-tokenizer    write the weights and config only (for tests that load them directly)
  --max-shard-mb N  split safetensors into shards of at most N MB (default 5000)
  --threads N  worker threads (default: all cores)
  --output DIR directory to write (created); an existing one must be empty unless --force
  --force      write into an existing directory, first deleting the model files in it
               (config.json, generation_config.json, hf_quant_config.json, *.safetensors,
               model.safetensors.index.json, tokenizer files); other files are kept
  --version    print the version
)";

// Tokenizer files: copied from --tokenizer, and model files --force deletes.
constexpr const char* kTokenizerFiles[] = {"tokenizer.json", "tokenizer_config.json",
                                           "special_tokens_map.json", "vocab.json", "merges.txt"};

struct Options {
  std::string arch, preset, dtype, format = "modelopt", tokenizer, output;  // dtype: by arch
  std::string target;  // llama_eagle3: the target model's directory
  std::uint64_t seed = 0;
  bool shared_global_scales = false;
  bool no_tokenizer = false, force = false, version = false;
  int threads = int(std::max(1u, std::thread::hardware_concurrency()));
  std::size_t max_shard_bytes = std::size_t(5000) << 20;
};

enum class Init { Embedding, Norm, ZeroCentredNorm, Linear, Bias, Sink };

// How a weight is stored: BF16, NVFP4 (a Linear's module.weight and its scales), or MXFP4
// (gpt-oss's fused experts: NAME_blocks and NAME_scales of the [E, out, in] values).
enum class Storage { Bf16, Nvfp4, Mxfp4 };

// One weight of the model: its tensor name (for MXFP4 the name before _blocks/_scales), shape
// ([out, in], [n], gpt-oss's BF16 experts [E, in, out], MXFP4 experts [E, out, in]), how it is
// initialized (linears by their fan-in) and how it is stored.
struct Weight {
  std::string name;
  std::vector<std::int64_t> shape;
  Init init;
  Storage storage = Storage::Bf16;
  std::int64_t fan_in = 0;  // Init::Linear
};

// gpt-oss's experts (model::ExpertLayout::kFusedInterleaved): as shipped in MXFP4 or as
// transformers writes them in BF16, with their biases (engine/model/fused_experts.h).
void fused_experts(std::vector<Weight>& w, const std::string& p, const model::MoeSpec& moe,
                   std::int64_t H, bool mxfp4) {
  const std::int64_t E = moe.experts, I = moe.intermediate_size;
  const auto projection = [&](const std::string& name, std::int64_t out, std::int64_t in) {
    if (mxfp4)
      w.push_back({name, {E, out, in}, Init::Linear, Storage::Mxfp4, in});
    else
      w.push_back({name, {E, in, out}, Init::Linear, Storage::Bf16, in});
    w.push_back({name + "_bias", {E, out}, Init::Bias});
  };
  projection(p + "mlp.experts.gate_up_proj", 2 * I, H);
  projection(p + "mlp.experts.down_proj", H, I);
}

// Qwen3-Next's Gated DeltaNet layer (model::MixerKind::kGatedDeltaNet): its projections (NVFP4
// with --dtype nvfp4), the depthwise conv [conv_dim, 1, K], the decay's A_log and dt_bias, and
// the gated norm's plain weight.
void linear_attention(std::vector<Weight>& w, const std::string& p,
                      const model::LinearAttentionSpec& s, std::int64_t H, Storage linears) {
  const std::int64_t Kh = s.key_heads, Vh = s.value_heads, Dk = s.key_head_dim,
                     Dv = s.value_head_dim, G = Vh / Kh, conv_dim = 2 * Kh * Dk + Vh * Dv;
  w.push_back(
      {p + "in_proj_qkvz.weight", {Kh * (2 * Dk + 2 * G * Dv), H}, Init::Linear, linears, H});
  w.push_back({p + "in_proj_ba.weight", {2 * Vh, H}, Init::Linear, linears, H});
  w.push_back({p + "conv1d.weight",
               {conv_dim, 1, s.conv_kernel},
               Init::Linear,
               Storage::Bf16,
               s.conv_kernel});
  w.push_back({p + "A_log", {Vh}, Init::Bias});
  w.push_back({p + "dt_bias", {Vh}, Init::Bias});
  w.push_back({p + "norm.weight", {Dv}, Init::Norm});
  w.push_back({p + "out_proj.weight", {H, Vh * Dv}, Init::Linear, linears, Vh * Dv});
}

std::vector<Weight> list_weights(const model::ModelConfig& c, const std::string& dtype) {
  const std::int64_t H = c.hidden_size, D = c.head_dim;
  const std::int64_t q = std::int64_t(c.num_heads) * D, kv = std::int64_t(c.num_kv_heads) * D;
  const Storage linears = dtype == "nvfp4" ? Storage::Nvfp4 : Storage::Bf16;
  std::vector<Weight> w;
  w.push_back({"model.embed_tokens.weight", {c.vocab_size, H}, Init::Embedding});
  auto linear = [&](const std::string& name, std::int64_t out, std::int64_t in, bool bias = false) {
    w.push_back({name + ".weight", {out, in}, Init::Linear, linears, in});
    if (bias) w.push_back({name + ".bias", {out}, Init::Bias});
  };
  const model::ModelDescription description = model::describe_model(c);
  // Zero-centred norms store weights around 0 (the norm scales by 1 + w).
  const auto norm_init = [](model::NormKind kind) {
    return kind == model::NormKind::kRms ? Init::Norm : Init::ZeroCentredNorm;
  };
  // One decoder layer under prefix p ("model.layers.N." or "mtp.layers.0.").
  const auto add_layer = [&](const std::string& p, const model::LayerSpec& spec) {
    const model::AttentionSpec& a = spec.attention;
    const Init norm = norm_init(spec.norm);
    w.push_back({p + "input_layernorm.weight", {H}, norm});
    if (spec.mixer == model::MixerKind::kGatedDeltaNet) {
      linear_attention(w, p + "linear_attn.", spec.linear_attention, H, linears);
    } else {
      linear(p + "self_attn.q_proj", a.output_gate ? 2 * q : q, H, a.qkv_bias);
      linear(p + "self_attn.k_proj", kv, H, a.qkv_bias);
      linear(p + "self_attn.v_proj", kv, H, a.qkv_bias);
      linear(p + "self_attn.o_proj", H, q, a.o_bias);
    }
    if (a.qk_norm) {
      w.push_back({p + "self_attn.q_norm.weight", {D}, norm});
      w.push_back({p + "self_attn.k_norm.weight", {D}, norm});
    }
    if (a.sinks) w.push_back({p + "self_attn.sinks", {c.num_heads}, Init::Sink});
    w.push_back({p + "post_attention_layernorm.weight", {H}, norm});
    if (spec.ffn.kind == model::FfnKind::kMoe) {
      const model::MoeSpec& moe = spec.ffn.moe;
      if (moe.layout == model::ExpertLayout::kFusedInterleaved) {
        w.push_back({p + "mlp.router.weight", {c.num_experts, H}, Init::Linear, Storage::Bf16, H});
        w.push_back({p + "mlp.router.bias", {c.num_experts}, Init::Bias});
        fused_experts(w, p, moe, H, dtype == "mxfp4");
        return;
      }
      w.push_back({p + "mlp.gate.weight", {c.num_experts, H}, Init::Linear, Storage::Bf16, H});
      for (int e = 0; e < c.num_experts; ++e) {
        const std::string ep = p + "mlp.experts." + std::to_string(e) + ".";
        linear(ep + "gate_proj", c.moe_intermediate_size, H);
        linear(ep + "up_proj", c.moe_intermediate_size, H);
        linear(ep + "down_proj", H, c.moe_intermediate_size);
      }
      if (const std::int64_t Is = moe.shared_expert_intermediate_size; Is > 0) {
        linear(p + "mlp.shared_expert.gate_proj", Is, H);
        linear(p + "mlp.shared_expert.up_proj", Is, H);
        linear(p + "mlp.shared_expert.down_proj", H, Is);
        w.push_back({p + "mlp.shared_expert_gate.weight", {1, H}, Init::Linear, Storage::Bf16, H});
      }
    } else {
      linear(p + "mlp.gate_proj", c.intermediate_size, H);
      linear(p + "mlp.up_proj", c.intermediate_size, H);
      linear(p + "mlp.down_proj", H, c.intermediate_size);
    }
  };
  for (int l = 0; l < c.num_layers; ++l)
    add_layer("model.layers." + std::to_string(l) + ".", description.layers[std::size_t(l)]);
  w.push_back({"model.norm.weight", {H}, norm_init(description.final_norm)});
  // The multi-token-prediction module (Qwen3-Next's mtp.*, the layout vLLM's qwen3_next_mtp.py
  // loads) when the config declares one: its norms, fc (BF16 whatever --dtype, as vLLM finds it
  // in NVFP4 exports), one full-attention layer as the model's, its norm.
  if (c.num_nextn_predict_layers > 0) {
    const model::ModelDescription mtp = model::describe_model(model::mtp_module_config(c));
    const Init norm = norm_init(mtp.final_norm);
    w.push_back({"mtp.pre_fc_norm_embedding.weight", {H}, norm});
    w.push_back({"mtp.pre_fc_norm_hidden.weight", {H}, norm});
    w.push_back({"mtp.fc.weight", {H, 2 * H}, Init::Linear, Storage::Bf16, 2 * H});
    add_layer("mtp.layers.0.", mtp.layers[0]);
    w.push_back({"mtp.norm.weight", {H}, norm});
  }
  if (!c.tie_word_embeddings)
    w.push_back({"lm_head.weight", {c.vocab_size, H}, Init::Linear, Storage::Bf16, H});
  return w;
}

// An EAGLE-3 head (engine/model/eagle3_head.h lists the layout): its decoder layer as
// midlayer.* with q/k/v over [embedding, hidden] (2H), fc over the target's three hidden states,
// its norm, and lm_head over the draft vocabulary; BF16. d2t and t2d are eagle3_map_jobs'.
std::vector<Weight> list_eagle3_weights(const model::ModelConfig& c) {
  const std::int64_t H = c.hidden_size, D = c.head_dim, I = c.intermediate_size;
  const std::int64_t q = std::int64_t(c.num_heads) * D, kv = std::int64_t(c.num_kv_heads) * D;
  const std::string p = "midlayer.";
  std::vector<Weight> w;
  const auto linear = [&](const std::string& name, std::int64_t out, std::int64_t in) {
    w.push_back({name + ".weight", {out, in}, Init::Linear, Storage::Bf16, in});
  };
  w.push_back({p + "input_layernorm.weight", {H}, Init::Norm});
  w.push_back({p + "hidden_norm.weight", {H}, Init::Norm});
  linear(p + "self_attn.q_proj", q, 2 * H);
  linear(p + "self_attn.k_proj", kv, 2 * H);
  linear(p + "self_attn.v_proj", kv, 2 * H);
  linear(p + "self_attn.o_proj", H, q);
  w.push_back({p + "post_attention_layernorm.weight", {H}, Init::Norm});
  linear(p + "mlp.gate_proj", I, H);
  linear(p + "mlp.up_proj", I, H);
  linear(p + "mlp.down_proj", H, I);
  linear("fc", H, c.eagle3->fc_inputs());
  w.push_back({"norm.weight", {H}, Init::Norm});
  linear("lm_head", c.eagle3->draft_vocab_size, H);
  return w;
}

// d2t (I64 [draft vocab]: target id - draft id) and t2d (BOOL [vocab]: in the draft vocabulary)
// for a draft vocabulary spread evenly over the target's: draft id i is target id
// i * vocab / draft_vocab, so every part of the vocabulary has draft ids.
std::vector<WeightJob> eagle3_map_jobs(const model::ModelConfig& c) {
  const std::int64_t V = c.vocab_size, Vd = c.eagle3->draft_vocab_size;
  const auto target_id = [V, Vd](std::int64_t i) { return i * V / Vd; };
  std::vector<WeightJob> jobs;
  jobs.push_back({{{"d2t", DType::I64, {Vd}}}, [=](std::vector<std::span<std::byte>>& out) {
                    for (std::int64_t i = 0; i < Vd; ++i) {
                      const std::int64_t offset = target_id(i) - i;
                      std::memcpy(out[0].data() + 8 * i, &offset, 8);
                    }
                  }});
  jobs.push_back({{{"t2d", DType::BOOL, {V}}}, [=](std::vector<std::span<std::byte>>& out) {
                    for (std::int64_t i = 0; i < Vd; ++i)
                      out[0][std::size_t(target_id(i))] = std::byte{1};
                  }});
  return jobs;
}

// Values: embeddings U(-1, 1); norms 1 + U(-0.2, 0.2) (so a wrong norm shows; zero-centred
// ones U(-0.2, 0.2), the same scale as stored); Gated DeltaNet's A_log and dt_bias as biases;
// linears
// U(-a, a) with std 1/sqrt(fan_in), so activations keep their scale through the layers; biases
// U(-0.5, 0.5) and sinks U(-1, 1), on the scale of what they add to.
float init_value(const Weight& w, std::uint64_t stream, std::uint64_t i) {
  const float u = tools::uniform_at(stream, i);
  switch (w.init) {
    case Init::Embedding:
    case Init::Sink:
      return u;
    case Init::Norm:
      return 1.0f + 0.2f * u;
    case Init::ZeroCentredNorm:
      return 0.2f * u;
    case Init::Linear:
      return u * std::sqrt(3.0f / float(w.fan_in));
    case Init::Bias:
      return 0.5f * u;
  }
  return 0.0f;
}

// NAME_blocks U8 [E, out, in/32, 16] and NAME_scales U8 [E, out, in/32] of the [E, out, in]
// values, each block of 32 quantized on its own (engine/model/mxfp4.h).
WeightJob mxfp4_job(const Weight& w, std::uint64_t stream) {
  const std::int64_t E = w.shape[0], out = w.shape[1], in = w.shape[2];
  const std::int64_t groups = in / model::mxfp4::kBlockSize;
  return {{{w.name + "_blocks", DType::U8, {E, out, groups, model::mxfp4::kBlockSize / 2}},
           {w.name + "_scales", DType::U8, {E, out, groups}}},
          [w, stream, groups](std::vector<std::span<std::byte>>& dst) {
            const std::int64_t blocks = w.shape[0] * w.shape[1] * groups;
            std::vector<float> values(std::size_t(model::mxfp4::kBlockSize));
            for (std::int64_t b = 0; b < blocks; ++b) {
              for (std::int64_t i = 0; i < model::mxfp4::kBlockSize; ++i)
                values[std::size_t(i)] =
                    init_value(w, stream, std::uint64_t(b * model::mxfp4::kBlockSize + i));
              auto* packed =
                  reinterpret_cast<std::uint8_t*>(dst[0].data()) + b * model::mxfp4::kBlockSize / 2;
              model::mxfp4::quantize_block(
                  values, std::span(packed, std::size_t(model::mxfp4::kBlockSize / 2)),
                  reinterpret_cast<std::uint8_t*>(dst[1].data())[b]);
            }
          }};
}

WeightJob make_job(const Weight& w, std::uint64_t seed, QuantFormat format, bool shared_scales) {
  std::int64_t numel = 1;
  for (auto d : w.shape) numel *= d;
  const std::uint64_t stream = tools::tensor_stream(seed, w.name);
  if (w.storage == Storage::Mxfp4) return mxfp4_job(w, stream);
  if (w.storage == Storage::Bf16) {
    return {{{w.name, DType::BF16, w.shape}},
            [w, stream, numel](std::vector<std::span<std::byte>>& out) {
              auto* dst = out[0].data();
              for (std::int64_t i = 0; i < numel; ++i) {
                auto b = nvfp4::float_to_bf16(init_value(w, stream, std::uint64_t(i)));
                std::memcpy(dst + 2 * i, &b, 2);
              }
            }};
  }
  const std::string module = w.name.substr(0, w.name.size() - std::string(".weight").size());
  return {model::nvfp4_linear_specs(format, module, w.shape[0], w.shape[1]),
          [w, stream, numel, format, shared_scales](std::vector<std::span<std::byte>>& out) {
            std::vector<float> values(static_cast<std::size_t>(numel));
            for (std::int64_t i = 0; i < numel; ++i)
              values[std::size_t(i)] = init_value(w, stream, std::uint64_t(i));
            // The linear init's bound sqrt(3 / in) (init_value) is >= every value.
            auto q = shared_scales
                         ? nvfp4::quantize_matrix(
                               values, w.shape[0], w.shape[1],
                               nvfp4::global_factor_for_amax(std::sqrt(3.0f / float(w.fan_in))))
                         : nvfp4::quantize_matrix(values, w.shape[0], w.shape[1]);
            // Static activation scale for inputs of magnitude up to ~8 (W4A4 engines use it).
            model::fill_nvfp4_linear(format, q, nvfp4::global_factor_for_amax(8.0f), out);
          }};
}

void write_json(const std::filesystem::path& path, const nlohmann::ordered_json& j) {
  std::ofstream out(path);
  out << j.dump(2) << "\n";
  if (!out) throw model::ModelError(path.string() + ": write failed");
}

bool parse_args(int argc, char** argv, Options& o) {
  const bool ok =
      cli::parse_flags("nibble-make-model", kUsage, argc, argv, [&](cli::FlagReader& f) {
        if (f.is("--arch"))
          o.arch = f.value();
        else if (f.is("--preset"))
          o.preset = f.value();
        else if (f.is("--dtype"))
          o.dtype = f.value();
        else if (f.is("--format"))
          o.format = f.value();
        else if (f.is("--shared-global-scales"))
          o.shared_global_scales = true;
        else if (f.is("--tokenizer"))
          o.tokenizer = f.value();
        else if (f.is("--target"))
          o.target = f.value();
        else if (f.is("--no-tokenizer"))
          o.no_tokenizer = true;
        else if (f.is("--force"))
          o.force = true;
        else if (f.is("--version"))
          o.version = true;
        else if (f.is("--output"))
          o.output = f.value();
        else if (f.is("--seed"))
          o.seed = static_cast<std::uint64_t>(f.integer(0, std::numeric_limits<long long>::max()));
        else
          return cli::take_model_writer_flag(f, o.threads, o.max_shard_bytes);
        return true;
      });
  if (!ok) return false;
  if (o.version) return true;
  if (o.arch.empty() || o.preset.empty() || o.output.empty()) {
    std::fprintf(stderr, "nibble-make-model: --arch, --preset and --output are required\n\n%s",
                 kUsage);
    return false;
  }
  if (o.dtype.empty()) o.dtype = o.arch == "gpt_oss" ? "mxfp4" : "bf16";
  if (o.dtype != "bf16" && o.dtype != "nvfp4" && o.dtype != "mxfp4") {
    std::fprintf(stderr, "nibble-make-model: --dtype must be bf16, nvfp4 or mxfp4, got %s\n",
                 o.dtype.c_str());
    return false;
  }
  if ((o.dtype == "mxfp4") != (o.arch == "gpt_oss") && o.dtype != "bf16") {
    std::fprintf(stderr, "nibble-make-model: --dtype %s is not available for --arch %s (%s)\n",
                 o.dtype.c_str(), o.arch.c_str(),
                 o.arch == "gpt_oss" ? "gpt_oss ships mxfp4 experts; bf16 or mxfp4"
                                     : "mxfp4 is gpt_oss's format");
    return false;
  }
  if (o.format != "modelopt" && o.format != "compressed-tensors") {
    std::fprintf(stderr, "nibble-make-model: --format must be modelopt or compressed-tensors\n");
    return false;
  }
  if (o.arch == "llama_eagle3") {  // a head: BF16 weights only
    if (o.dtype != "bf16" || !o.tokenizer.empty()) {
      std::fprintf(stderr,
                   "nibble-make-model: --arch llama_eagle3 writes a BF16 head without a "
                   "tokenizer (no --dtype other than bf16, no --tokenizer)\n");
      return false;
    }
    return true;
  }
  if (!o.target.empty()) {
    std::fprintf(stderr, "nibble-make-model: --target is for --arch llama_eagle3\n");
    return false;
  }
  if (o.tokenizer.empty() == !o.no_tokenizer) {
    std::fprintf(stderr, "nibble-make-model: %s\n",
                 o.no_tokenizer ? "--tokenizer and --no-tokenizer exclude each other"
                                : "--tokenizer DIR is required: the engine cannot serve a model "
                                  "without a tokenizer (--no-tokenizer for weights only)");
    return false;
  }
  return true;
}

bool is_model_file(const std::string& name) {
  for (const char* n : {"config.json", "generation_config.json", "hf_quant_config.json",
                        "model.safetensors.index.json"})
    if (name == n) return true;
  for (const char* n : kTokenizerFiles)
    if (name == n) return true;
  return name.ends_with(".safetensors");
}

// An existing --output would keep stale files (a shard or a tokenizer of an earlier model) next
// to the new ones: refused unless --force, which deletes the model files directly inside `out`
// (no subdirectory, nothing a symlink points to) and keeps the rest.
void prepare_output(const std::filesystem::path& out, bool force) {
  namespace fs = std::filesystem;
  if (!fs::exists(fs::symlink_status(out))) {
    fs::create_directories(out);
    return;
  }
  if (!fs::is_directory(out))
    throw model::ModelError(out.string() + " exists and is not a directory");
  std::vector<fs::path> model_files;
  std::size_t entries = 0;
  for (const fs::directory_entry& e : fs::directory_iterator(out)) {
    ++entries;
    const fs::file_status st = e.symlink_status();
    if ((fs::is_regular_file(st) || fs::is_symlink(st)) &&
        is_model_file(e.path().filename().string()))
      model_files.push_back(e.path());
  }
  if (entries == 0) return;
  if (!force) {
    throw model::ModelError(out.string() + " already exists and holds " + std::to_string(entries) +
                            " entries; choose a new --output, or pass --force to replace the "
                            "model files in it");
  }
  for (const fs::path& f : model_files) fs::remove(f);
  spdlog::info("--force: deleted {} model files from {}, kept {} other entries", model_files.size(),
               out.string(), entries - model_files.size());
}

// `from` holds tokenizer.json (checked before anything is written).
void copy_tokenizer(const std::filesystem::path& from, const std::filesystem::path& to) {
  for (const char* name : kTokenizerFiles)
    if (std::filesystem::exists(from / name))
      std::filesystem::copy_file(from / name, to / name,
                                 std::filesystem::copy_options::overwrite_existing);
}

nlohmann::ordered_json read_json(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) throw model::ModelError(path.string() + ": cannot open");
  nlohmann::ordered_json j = nlohmann::ordered_json::parse(in, nullptr, false);
  if (j.is_discarded()) throw model::ModelError(path.string() + ": not valid JSON");
  return j;
}

// --arch llama_eagle3: config.json and the head's safetensors, nothing else.
int write_eagle3_head(const Options& o, std::chrono::steady_clock::time_point start) {
  std::optional<nlohmann::ordered_json> target;
  if (!o.target.empty()) target = read_json(std::filesystem::path(o.target) / "config.json");
  const auto config = tools::make_eagle3_head_config(o.preset, target ? &*target : nullptr);
  const auto parsed = model::parse_model_config(config, "generated config.json");
  const std::filesystem::path out = o.output;
  prepare_output(out, o.force);
  std::vector<WeightJob> jobs;
  for (const auto& w : list_eagle3_weights(parsed))
    jobs.push_back(make_job(w, o.seed, QuantFormat::None, false));
  for (auto& job : eagle3_map_jobs(parsed)) jobs.push_back(std::move(job));
  spdlog::info("writing an EAGLE-3 head ({}, seed {}) to {} with {} threads", o.preset, o.seed,
               out.string(), o.threads);
  model::write_checkpoint(out, jobs, o.max_shard_bytes, o.threads);
  write_json(out / "config.json", config);
  spdlog::info("done in {:.1f} s",
               std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  try {
    if (!parse_args(argc, argv, o)) return 2;
    if (o.version) {
      std::printf("nibble-make-model %s\n", NIBBLE_VERSION);
      return 0;
    }
    const auto start = std::chrono::steady_clock::now();
    if (o.arch == "llama_eagle3") return write_eagle3_head(o, start);
    auto config = tools::make_preset_config(o.arch, o.preset);
    const bool nvfp4 = o.dtype == "nvfp4";
    const auto format =
        o.format == "modelopt" ? QuantFormat::ModelOpt : QuantFormat::CompressedTensors;
    std::vector<std::string> excluded = {"lm_head", "model.embed_tokens"};
    if (o.arch == "qwen3_moe" || o.arch == "qwen3_next")
      excluded.push_back(format == QuantFormat::ModelOpt ? "model.layers.*.mlp.gate"
                                                         : "re:.*mlp\\.gate$");
    if (o.arch == "qwen3_next")  // the shared expert's scalar gate, as nibble-quantize keeps it
      excluded.push_back(format == QuantFormat::ModelOpt ? "model.layers.*.mlp.shared_expert_gate"
                                                         : "re:.*mlp\\.shared_expert_gate$");
    if (o.arch == "qwen3_next" && format == QuantFormat::ModelOpt) {
      // The MTP layer's router and shared-expert gate (the patterns above name model.layers
      // only); mtp.fc stays unlisted though BF16, as vLLM reports of the public exports.
      excluded.push_back("mtp.layers.*.mlp.gate");
      excluded.push_back("mtp.layers.*.mlp.shared_expert_gate");
    }
    if (nvfp4) config["quantization_config"] = model::quantization_config_json(format, excluded);
    if (o.dtype == "mxfp4") {  // openai/gpt-oss-*'s quantization_config, key for key
      config["quantization_config"] = {{"modules_to_not_convert",
                                        {"model.layers.*.self_attn", "model.layers.*.mlp.router",
                                         "model.embed_tokens", "lm_head"}},
                                       {"quant_method", "mxfp4"}};
    }
    // Our own parser checks what we are about to write.
    const auto parsed = model::parse_model_config(config, "generated config.json");

    const std::filesystem::path out = o.output;
    if (!o.tokenizer.empty() && !std::filesystem::exists(o.tokenizer + "/tokenizer.json"))
      throw model::ModelError(o.tokenizer + ": no tokenizer.json in the --tokenizer directory");
    prepare_output(out, o.force);
    std::vector<WeightJob> jobs;
    for (const auto& w : list_weights(parsed, o.dtype))
      jobs.push_back(make_job(w, o.seed, format, o.shared_global_scales));
    spdlog::info("writing {} {} ({}{}, seed {}) to {} with {} threads", o.arch, o.preset, o.dtype,
                 nvfp4 ? " " + o.format : "", o.seed, out.string(), o.threads);
    model::write_checkpoint(out, jobs, o.max_shard_bytes, o.threads);

    write_json(out / "config.json", config);
    write_json(out / "generation_config.json", tools::make_generation_config(config));
    if (nvfp4 && format == QuantFormat::ModelOpt)
      write_json(out / "hf_quant_config.json", model::hf_quant_config_json(excluded));
    if (!o.tokenizer.empty()) copy_tokenizer(o.tokenizer, out);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    spdlog::info("done in {:.1f} s", seconds);
    return 0;
  } catch (const std::exception& e) {
    spdlog::error("nibble-make-model: {}", e.what());
    return 1;
  }
}
