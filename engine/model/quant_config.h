#pragma once
// Which NVFP4 checkpoint layout a model directory uses, and which modules it leaves unquantized.
//   ModelOpt:           hf_quant_config.json {"quantization": {"quant_algo": "NVFP4", ...}} or
//                       config.json quantization_config.quant_method == "modelopt"
//   compressed-tensors: config.json quantization_config.quant_method == "compressed-tensors"
//                       with format "nvfp4-pack-quantized"
//   MXFP4 (gpt-oss):    config.json quantization_config.quant_method == "mxfp4", listing
//                       modules_to_not_convert; only the fused experts are MXFP4 (mxfp4.h)
// Other quantization methods are refused (ModelError) rather than misread.
#include <filesystem>
#include <string>
#include <vector>

namespace nibble::model {

enum class QuantFormat { None, ModelOpt, CompressedTensors, Mxfp4 };

struct QuantConfig {
  QuantFormat format = QuantFormat::None;
  // Modules kept in high precision: glob patterns ("model.layers.*.mlp.gate") or, as in
  // compressed-tensors, "re:REGEX" (full match).
  std::vector<std::string> excluded;

  bool is_excluded(const std::string& module) const;
};

QuantConfig load_quant_config(const std::filesystem::path& model_dir);

// Glob ('*' matches any run, '?' one char) or "re:" regex, matched against the whole name.
bool module_pattern_matches(const std::string& pattern, const std::string& module);

std::string quant_format_name(QuantFormat format);

}  // namespace nibble::model
