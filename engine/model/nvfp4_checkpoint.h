#pragma once
// How an NVFP4 Linear is laid out in each checkpoint format, for the tools that write them
// (nibble-make-model, nibble-quantize). The loader's side of the same facts is linear.cpp.
//   ModelOpt:           X.weight U8 [N, K/2], X.weight_scale F8_E4M3 [N, K/16],
//                       X.weight_scale_2 F32 [] (multiply), X.input_scale F32 [] (multiply)
//   compressed-tensors: X.weight_packed U8 [N, K/2], X.weight_scale F8_E4M3 [N, K/16],
//                       X.weight_global_scale F32 [1] (reciprocal), X.input_global_scale F32 [1]
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/model/quant_config.h"
#include "engine/model/safetensors_writer.h"
#include "kernels/nvfp4/nvfp4_ref.h"

namespace nibble::model {

std::vector<TensorSpec> nvfp4_linear_specs(QuantFormat format, const std::string& module,
                                           std::int64_t out_features, std::int64_t in_features);

// Fills spans laid out as nvfp4_linear_specs; input_scale is in multiply form.
void fill_nvfp4_linear(QuantFormat format, const nvfp4::QuantizedMatrix& q, float input_scale,
                       std::vector<std::span<std::byte>>& out);

// config.json's "quantization_config" for the format, listing the excluded modules.
nlohmann::ordered_json quantization_config_json(QuantFormat format,
                                                const std::vector<std::string>& excluded);
// hf_quant_config.json (ModelOpt only).
nlohmann::ordered_json hf_quant_config_json(const std::vector<std::string>& excluded);

}  // namespace nibble::model
