#include "engine/model/model_config.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/model/architectures/architecture.h"
#include "engine/model/config_reader.h"
#include "engine/model/model_error.h"

namespace nibble::model {
namespace {

using nlohmann::json;
using Reader = ConfigReader;

const Architecture& parse_arch(const Reader& r, std::string& name) {
  if (!r.has("architectures") || !r.j["architectures"].is_array() ||
      r.j["architectures"].size() != 1 || !r.j["architectures"][0].is_string())
    r.fail("architectures", "expected a list with one architecture name");
  name = r.j["architectures"][0].get<std::string>();
  if (const Architecture* a = find_architecture(name)) return *a;
  std::string supported;
  for (const Architecture* a : supported_architectures())
    supported += std::string(supported.empty() ? "" : ", ") + a->hf_name;
  r.fail("architectures", "'" + name + "' is not supported (supported: " + supported + ")");
}

// YaRN's attention factor when config.json gives none: transformers' get_mscale.
double yarn_mscale(double factor, double mscale) {
  return factor <= 1.0 ? 1.0 : 0.1 * mscale * std::log(factor) + 1.0;
}

// transformers 4.5x falls back to max_position_embeddings for a missing
// original_max_position_embeddings (`max_positions`).
RopeConfig parse_yarn(const Reader& s, const std::string& field, int max_positions,
                      RopeConfig rope) {
  rope.yarn = true;
  if (!s.has("factor")) s.fail(field + ".factor", "required for yarn, missing");
  rope.factor = s.number_or("factor", 1.0);
  rope.original_max_position_embeddings =
      s.integer_or("original_max_position_embeddings", max_positions);
  // transformers reads `x or default`, so a 0 means the default too.
  rope.beta_fast = s.number_or("beta_fast", 0.0);
  rope.beta_slow = s.number_or("beta_slow", 0.0);
  if (rope.beta_fast == 0.0) rope.beta_fast = 32.0;
  if (rope.beta_slow == 0.0) rope.beta_slow = 1.0;
  rope.truncate = s.boolean_or("truncate", true);
  if (rope.factor <= 0 || rope.beta_fast <= 0 || rope.beta_slow <= 0)
    s.fail(field, "yarn needs factor, beta_fast and beta_slow > 0");
  const double mscale = s.number_or("mscale", 0.0), all_dim = s.number_or("mscale_all_dim", 0.0);
  if (s.has("attention_factor"))
    rope.attention_factor = s.number_or("attention_factor", 1.0);
  else if (mscale != 0.0 && all_dim != 0.0)
    rope.attention_factor = yarn_mscale(rope.factor, mscale) / yarn_mscale(rope.factor, all_dim);
  else
    rope.attention_factor = yarn_mscale(rope.factor, 1.0);
  return rope;
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
  if (type == "yarn")
    return parse_yarn(s, field, r.integer_or("max_position_embeddings", 4096), rope);
  if (type != "llama3")
    r.fail(field + ".rope_type",
           "'" + type + "' is not implemented (supported: default, llama3, yarn)");
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

// The config with every alias of the architecture renamed to its key; both spellings with
// different values is refused, since either choice could run the wrong model.
json resolve_aliases(const json& config, const Architecture& arch, const std::string& source) {
  json resolved = config;
  for (const KeyAlias& a : arch.aliases) {
    if (!resolved.contains(a.alias)) continue;
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

int read_rotary_dim(const ConfigReader& r, int head_dim, double default_factor) {
  // transformers 5 moves the factor into rope_parameters; older configs carry it at the top.
  std::string field = "partial_rotary_factor";
  double factor = r.number_or(field, default_factor);
  if (r.has("rope_parameters") && r.j["rope_parameters"].is_object() &&
      r.j["rope_parameters"].contains("partial_rotary_factor")) {
    field = "rope_parameters.partial_rotary_factor";
    factor =
        ConfigReader{r.j["rope_parameters"], r.source}.number_or("partial_rotary_factor", factor);
  }
  if (!(factor > 0.0 && factor <= 1.0))
    r.fail(field, "expected a number in (0, 1], got " + std::to_string(factor));
  // transformers: dim = int(head_dim * partial_rotary_factor), rotated in pairs.
  const int dim = int(double(head_dim) * factor);
  if (dim < 2 || dim % 2 != 0)
    r.fail(field, "head_dim " + std::to_string(head_dim) + " times " + std::to_string(factor) +
                      " gives " + std::to_string(dim) +
                      " rotary dimensions; expected an even number");
  return dim;
}

ModelConfig parse_model_config(const json& config, const std::string& source) {
  if (!config.is_object()) throw ModelError(source + ": expected a JSON object");
  ModelConfig c;
  const Architecture& arch = parse_arch(Reader{config, source}, c.architecture);
  c.arch = arch.arch;
  const json j = resolve_aliases(config, arch, source);
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
  c.rotary_dim = read_rotary_dim(r, c.head_dim, 1.0);

  // Sliding windows: Qwen turns them on with use_sliding_window (Mistral's caps the context,
  // architectures/mistral.cpp).
  if (r.boolean_or("use_sliding_window", false))
    r.fail("use_sliding_window", "sliding-window attention is not implemented");
  arch.read_config(r, c);
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
