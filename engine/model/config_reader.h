#pragma once
// Typed reads of config.json fields with errors that name the file and the field: what the
// common config parser and each architecture's own fields (architectures/) read through.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/model/model_error.h"

namespace nibble::model {

struct ConfigReader {
  const nlohmann::json& j;
  const std::string& source;  // the config's path, for messages

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
  // `layer_types` (present: check has() first), a list of num_layers entries each `marked` or
  // "full_attention": true where a layer is `marked` ("sliding_attention", "linear_attention").
  std::vector<bool> layer_types_marking(int num_layers, const std::string& marked) const {
    const auto& types = j["layer_types"];
    if (!types.is_array() || int(types.size()) != num_layers)
      fail("layer_types",
           "expected a list of num_hidden_layers (" + std::to_string(num_layers) + ") layer types");
    std::vector<bool> out(std::size_t(num_layers), false);
    for (int l = 0; l < num_layers; ++l) {
      const auto& t = types[std::size_t(l)];
      if (t == marked)
        out[std::size_t(l)] = true;
      else if (t != "full_attention")
        fail("layer_types", "layer " + std::to_string(l) + ": expected \"" + marked +
                                "\" or \"full_attention\", got " + t.dump());
    }
    return out;
  }
};

// The dimensions of each head RoPE rotates: head_dim * partial_rotary_factor (read at the top
// level or in rope_parameters; default_factor when absent), refused unless even and >= 2.
int read_rotary_dim(const ConfigReader& reader, int head_dim, double default_factor);

}  // namespace nibble::model
