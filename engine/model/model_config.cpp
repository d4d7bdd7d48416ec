#include "engine/model/model_config.h"

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/model/model_error.h"

namespace nibble::model {
namespace {

using nlohmann::json;

struct Reader {
  const json& j;
  const std::string& source;

  [[noreturn]] void fail(const std::string& field, const std::string& what) const {
    throw ModelError(source + ": field '" + field + "': " + what);
  }
  bool has(const std::string& key) const { return j.contains(key) && !j[key].is_null(); }
  int integer(const std::string& key) const {
    if (!has(key)) fail(key, "required, missing");
    if (!j[key].is_number_integer()) fail(key, "expected an integer, got " + j[key].dump());
    auto v = j[key].get<long long>();
    if (v <= 0 || v > (1ll << 30)) fail(key, "expected a positive integer, got " + j[key].dump());
    return int(v);
  }
  int integer_or(const std::string& key, int fallback) const {
    return has(key) ? integer(key) : fallback;
  }
  double number_or(const std::string& key, double fallback) const {
    if (!has(key)) return fallback;
    if (!j[key].is_number()) fail(key, "expected a number, got " + j[key].dump());
    return j[key].get<double>();
  }
  bool boolean_or(const std::string& key, bool fallback) const {
    if (!has(key)) return fallback;
    if (!j[key].is_boolean()) fail(key, "expected true or false, got " + j[key].dump());
    return j[key].get<bool>();
  }
  std::string string_or(const std::string& key, const std::string& fallback) const {
    if (!has(key)) return fallback;
    if (!j[key].is_string()) fail(key, "expected a string, got " + j[key].dump());
    return j[key].get<std::string>();
  }
};

Arch parse_arch(const Reader& r, std::string& name) {
  if (!r.has("architectures") || !r.j["architectures"].is_array() ||
      r.j["architectures"].size() != 1 || !r.j["architectures"][0].is_string())
    r.fail("architectures", "expected a list with one architecture name");
  name = r.j["architectures"][0].get<std::string>();
  if (name == "LlamaForCausalLM") return Arch::Llama;
  if (name == "MistralForCausalLM") return Arch::Mistral;
  if (name == "Qwen2ForCausalLM") return Arch::Qwen2;
  if (name == "Qwen3ForCausalLM") return Arch::Qwen3;
  if (name == "Qwen3MoeForCausalLM") return Arch::Qwen3Moe;
  r.fail("architectures",
         "'" + name +
             "' is not supported (supported: LlamaForCausalLM, MistralForCausalLM, "
             "Qwen2ForCausalLM, Qwen3ForCausalLM, Qwen3MoeForCausalLM)");
}

// Reads rope settings from either the legacy rope_theta + rope_scaling fields or the
// transformers v5 rope_parameters object.
RopeConfig parse_rope(const Reader& r) {
  RopeConfig rope;
  rope.theta = r.number_or("rope_theta", 10000.0);
  const json* scaling = nullptr;
  std::string field;
  if (r.has("rope_parameters")) {
    scaling = &r.j["rope_parameters"];
    field = "rope_parameters";
  } else if (r.has("rope_scaling")) {
    scaling = &r.j["rope_scaling"];
    field = "rope_scaling";
  }
  if (!scaling) return rope;
  if (!scaling->is_object()) r.fail(field, "expected an object");
  Reader s{*scaling, r.source};
  rope.theta = s.number_or("rope_theta", rope.theta);
  std::string type = s.string_or("rope_type", s.string_or("type", "default"));
  if (type == "default") return rope;
  if (type != "llama3")
    r.fail(field + ".rope_type", "'" + type + "' is not implemented (supported: default, llama3)");
  rope.llama3 = true;
  rope.factor = s.number_or("factor", 8.0);
  rope.low_freq_factor = s.number_or("low_freq_factor", 1.0);
  rope.high_freq_factor = s.number_or("high_freq_factor", 4.0);
  rope.original_max_position_embeddings = s.integer_or("original_max_position_embeddings", 8192);
  if (rope.factor <= 0 || rope.low_freq_factor <= 0 ||
      rope.high_freq_factor <= rope.low_freq_factor)
    r.fail(field, "llama3 scaling needs factor > 0 and high_freq_factor > low_freq_factor > 0");
  return rope;
}

// Keys that transformers' config classes declare in `attribute_map`: config.json may carry either
// spelling (transformers 5 saves Qwen3-MoE's num_experts as num_local_experts). Of the supported
// architectures only Qwen3MoeConfig declares one; Llama, Mistral, Qwen2 and Qwen3 declare none.
struct KeyAlias {
  Arch arch;
  const char* key;    // the name this file reads
  const char* alias;  // the name transformers may write instead
};
constexpr KeyAlias kKeyAliases[] = {
    {Arch::Qwen3Moe, "num_experts", "num_local_experts"},
};

// The config with every alias of `arch` renamed to its key; both spellings with different
// values is refused, since either choice could run the wrong model.
json resolve_aliases(const json& config, Arch arch, const std::string& source) {
  json resolved = config;
  for (const KeyAlias& a : kKeyAliases) {
    if (a.arch != arch || !resolved.contains(a.alias)) continue;
    if (resolved.contains(a.key) && resolved[a.key] != resolved[a.alias]) {
      throw ModelError(source + ": field '" + a.alias + "': is another name for '" + a.key +
                       "', and the two differ (" + resolved[a.alias].dump() + " vs " +
                       resolved[a.key].dump() + ")");
    }
    resolved[a.key] = resolved[a.alias];
    resolved.erase(a.alias);
  }
  return resolved;
}

}  // namespace

bool ModelConfig::layer_is_moe(int layer) const {
  if (num_experts == 0) return false;
  if (std::find(mlp_only_layers.begin(), mlp_only_layers.end(), layer) != mlp_only_layers.end())
    return false;
  return (layer + 1) % decoder_sparse_step == 0;
}

ModelConfig parse_model_config(const json& config, const std::string& source) {
  if (!config.is_object()) throw ModelError(source + ": expected a JSON object");
  ModelConfig c;
  c.arch = parse_arch(Reader{config, source}, c.architecture);
  const json j = resolve_aliases(config, c.arch, source);
  Reader r{j, source};
  c.vocab_size = r.integer("vocab_size");
  c.hidden_size = r.integer("hidden_size");
  c.num_layers = r.integer("num_hidden_layers");
  c.num_heads = r.integer("num_attention_heads");
  c.num_kv_heads = r.integer_or("num_key_value_heads", c.num_heads);
  c.head_dim = r.integer_or("head_dim", c.hidden_size / c.num_heads);
  c.intermediate_size = r.integer("intermediate_size");
  c.rms_norm_eps = float(r.number_or("rms_norm_eps", 1e-6));
  c.max_position_embeddings = r.integer_or("max_position_embeddings", 4096);
  c.max_context = c.max_position_embeddings;
  c.tie_word_embeddings = r.boolean_or("tie_word_embeddings", false);
  c.rope = parse_rope(r);
  if (c.num_heads % c.num_kv_heads != 0)
    r.fail("num_key_value_heads", "must divide num_attention_heads (" +
                                      std::to_string(c.num_heads) + "), got " +
                                      std::to_string(c.num_kv_heads));
  if (c.head_dim % 2 != 0) r.fail("head_dim", "must be even for RoPE");

  std::string act = r.string_or("hidden_act", "silu");
  if (act != "silu") r.fail("hidden_act", "only 'silu' is implemented, got '" + act + "'");
  if (r.boolean_or("mlp_bias", false)) r.fail("mlp_bias", "MLP biases are not implemented");
  if (r.has("partial_rotary_factor") && r.number_or("partial_rotary_factor", 1.0) != 1.0)
    r.fail("partial_rotary_factor", "partial rotary embeddings are not implemented");

  bool attention_bias = r.boolean_or("attention_bias", false);
  switch (c.arch) {
    case Arch::Qwen2:
      c.qkv_bias = true;
      break;
    case Arch::Qwen3:
    case Arch::Qwen3Moe:
      c.qk_norm = true;
      break;
    default:
      break;
  }
  if (attention_bias && c.arch != Arch::Qwen2)
    r.fail("attention_bias", "attention biases are only implemented for Qwen2 (q, k, v)");

  // Sliding windows: Qwen turns them on with use_sliding_window; Mistral whenever set. Within
  // the window attention is exact, so we cap the context instead of refusing.
  if (r.boolean_or("use_sliding_window", false))
    r.fail("use_sliding_window", "sliding-window attention is not implemented");
  if (c.arch == Arch::Mistral && r.has("sliding_window")) {
    int window = r.integer("sliding_window");
    c.max_context = std::min(c.max_context, window);
  }

  if (c.arch == Arch::Qwen3Moe) {
    c.num_experts = r.integer("num_experts");
    c.num_experts_per_tok = r.integer("num_experts_per_tok");
    c.moe_intermediate_size = r.integer("moe_intermediate_size");
    c.norm_topk_prob = r.boolean_or("norm_topk_prob", false);
    c.decoder_sparse_step = r.integer_or("decoder_sparse_step", 1);
    if (r.has("mlp_only_layers")) {
      if (!j["mlp_only_layers"].is_array()) r.fail("mlp_only_layers", "expected a list of layers");
      for (const auto& l : j["mlp_only_layers"]) {
        if (!l.is_number_integer()) r.fail("mlp_only_layers", "expected integers");
        c.mlp_only_layers.push_back(l.get<int>());
      }
    }
    if (c.num_experts_per_tok > c.num_experts)
      r.fail("num_experts_per_tok", "larger than num_experts");
    if (r.has("shared_expert_intermediate_size") &&
        r.number_or("shared_expert_intermediate_size", 0) != 0)
      r.fail("shared_expert_intermediate_size", "shared experts are not implemented");
  }
  return c;
}

ModelConfig load_model_config(const std::filesystem::path& model_dir) {
  auto path = model_dir / "config.json";
  std::ifstream in(path);
  if (!in) throw ModelError(path.string() + ": cannot open");
  json j = json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) throw ModelError(path.string() + ": not valid JSON");
  return parse_model_config(j, path.string());
}

}  // namespace nibble::model
