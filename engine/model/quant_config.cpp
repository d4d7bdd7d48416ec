#include "engine/model/quant_config.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <fnmatch.h>
#include <pcre2.h>

#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>

#include "engine/model/model_error.h"

namespace nibble::model {
namespace {

using nlohmann::json;

json read_json(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) throw ModelError(path.string() + ": cannot open");
  json j = json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) throw ModelError(path.string() + ": not a JSON object");
  return j;
}

void append_strings(const json& j, const char* key, const std::string& source,
                    std::vector<std::string>& out) {
  if (!j.contains(key) || j[key].is_null()) return;
  if (!j[key].is_array()) throw ModelError(source + ": field '" + key + "' must be a list");
  for (const auto& s : j[key]) {
    if (!s.is_string()) throw ModelError(source + ": field '" + key + "' must hold strings");
    out.push_back(s.get<std::string>());
  }
}

void require_nvfp4_algo(const json& q, const std::string& source) {
  std::string algo = q.value("quant_algo", std::string("NVFP4"));
  if (algo != "NVFP4")
    throw ModelError(source + ": field 'quant_algo': only NVFP4 is supported, got '" + algo + "'");
}

}  // namespace

bool module_pattern_matches(const std::string& pattern, const std::string& module) {
  if (pattern.starts_with("re:")) {
    // PCRE2 rather than std::regex: Python-style syntax, as compressed-tensors writes it.
    const std::string re = pattern.substr(3);
    int error = 0;
    PCRE2_SIZE offset = 0;
    std::unique_ptr<pcre2_code, decltype(&pcre2_code_free)> code(
        pcre2_compile(reinterpret_cast<PCRE2_SPTR>(re.data()), re.size(),
                      PCRE2_ANCHORED | PCRE2_ENDANCHORED, &error, &offset, nullptr),
        &pcre2_code_free);
    if (!code) throw ModelError("invalid module pattern '" + pattern + "'");
    std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)> match(
        pcre2_match_data_create_from_pattern(code.get(), nullptr), &pcre2_match_data_free);
    return pcre2_match(code.get(), reinterpret_cast<PCRE2_SPTR>(module.data()), module.size(), 0, 0,
                       match.get(), nullptr) >= 0;
  }
  return fnmatch(pattern.c_str(), module.c_str(), 0) == 0;
}

bool QuantConfig::is_excluded(const std::string& module) const {
  for (const auto& p : excluded)
    if (module_pattern_matches(p, module)) return true;
  return false;
}

std::string quant_format_name(QuantFormat format) {
  switch (format) {
    case QuantFormat::ModelOpt:
      return "modelopt";
    case QuantFormat::CompressedTensors:
      return "compressed-tensors";
    case QuantFormat::Mxfp4:
      return "mxfp4";
    default:
      return "none";
  }
}

QuantConfig load_quant_config(const std::filesystem::path& dir) {
  QuantConfig qc;
  auto hf_quant = dir / "hf_quant_config.json";
  if (std::filesystem::exists(hf_quant)) {
    json j = read_json(hf_quant);
    const json& q = j.contains("quantization") ? j["quantization"] : j;
    require_nvfp4_algo(q, hf_quant.string());
    qc.format = QuantFormat::ModelOpt;
    append_strings(q, "exclude_modules", hf_quant.string(), qc.excluded);
    return qc;
  }
  auto config_path = dir / "config.json";
  json config = read_json(config_path);
  if (!config.contains("quantization_config") || config["quantization_config"].is_null()) return qc;
  const json& q = config["quantization_config"];
  std::string source = config_path.string() + ": quantization_config";
  if (!q.is_object()) throw ModelError(source + ": expected an object");
  std::string method = q.value("quant_method", std::string());
  if (method == "modelopt") {
    require_nvfp4_algo(q, source);
    qc.format = QuantFormat::ModelOpt;
    append_strings(q, "exclude_modules", source, qc.excluded);
    append_strings(q, "ignore", source, qc.excluded);
  } else if (method == "compressed-tensors") {
    std::string format = q.value("format", std::string());
    if (format != "nvfp4-pack-quantized")
      throw ModelError(source + ": field 'format': only nvfp4-pack-quantized is supported, got '" +
                       format + "'");
    qc.format = QuantFormat::CompressedTensors;
    append_strings(q, "ignore", source, qc.excluded);
  } else if (method == "mxfp4") {
    qc.format = QuantFormat::Mxfp4;
    append_strings(q, "modules_to_not_convert", source, qc.excluded);
  } else {
    throw ModelError(source + ": field 'quant_method': '" + method +
                     "' is not supported (supported: modelopt, compressed-tensors with NVFP4, "
                     "mxfp4)");
  }
  return qc;
}

}  // namespace nibble::model
