#include "engine/model/nvfp4_checkpoint.h"

#include <cstring>

namespace nibble::model {

std::vector<TensorSpec> nvfp4_linear_specs(QuantFormat format, const std::string& module,
                                           std::int64_t out, std::int64_t in) {
  const std::int64_t blocks = in / nvfp4::kBlockSize;
  if (format == QuantFormat::CompressedTensors)
    return {{module + ".weight_packed", DType::U8, {out, in / 2}},
            {module + ".weight_scale", DType::F8_E4M3, {out, blocks}},
            {module + ".weight_global_scale", DType::F32, {1}},
            {module + ".input_global_scale", DType::F32, {1}}};
  return {{module + ".weight", DType::U8, {out, in / 2}},
          {module + ".weight_scale", DType::F8_E4M3, {out, blocks}},
          {module + ".weight_scale_2", DType::F32, {}},
          {module + ".input_scale", DType::F32, {}}};
}

void fill_nvfp4_linear(QuantFormat format, const nvfp4::QuantizedMatrix& q, float input_scale,
                       std::vector<std::span<std::byte>>& out) {
  std::memcpy(out[0].data(), q.packed.data(), q.packed.size());
  std::memcpy(out[1].data(), q.scales.data(), q.scales.size());
  // compressed-tensors stores reciprocals of the multiply-form factors.
  const bool reciprocal = format == QuantFormat::CompressedTensors;
  const float global = reciprocal ? 1.0f / q.global_factor : q.global_factor;
  const float input = reciprocal ? 1.0f / input_scale : input_scale;
  std::memcpy(out[2].data(), &global, 4);
  std::memcpy(out[3].data(), &input, 4);
}

nlohmann::ordered_json quantization_config_json(QuantFormat format,
                                                const std::vector<std::string>& excluded) {
  if (format == QuantFormat::CompressedTensors) {
    nlohmann::ordered_json fp4 = {
        {"num_bits", 4},     {"type", "float"},  {"strategy", "tensor_group"}, {"group_size", 16},
        {"symmetric", true}, {"dynamic", false}, {"observer", "minmax"}};
    nlohmann::ordered_json act = fp4;
    act["dynamic"] = "local";
    return {{"quant_method", "compressed-tensors"},
            {"format", "nvfp4-pack-quantized"},
            {"quantization_status", "compressed"},
            {"config_groups",
             {{"group_0",
               {{"targets", {"Linear"}},
                {"weights", fp4},
                {"input_activations", act},
                {"output_activations", nullptr},
                {"format", "nvfp4-pack-quantized"}}}}},
            {"ignore", excluded},
            {"kv_cache_scheme", nullptr}};
  }
  return {{"quant_method", "modelopt"},
          {"quant_algo", "NVFP4"},
          {"group_size", 16},
          {"kv_cache_quant_algo", nullptr},
          {"exclude_modules", excluded}};
}

nlohmann::ordered_json hf_quant_config_json(const std::vector<std::string>& excluded) {
  return {{"producer", {{"name", "nibble"}, {"version", "0.1.0"}}},
          {"quantization",
           {{"quant_algo", "NVFP4"},
            {"kv_cache_quant_algo", nullptr},
            {"group_size", 16},
            {"exclude_modules", excluded}}}};
}

}  // namespace nibble::model
