#pragma once
// One Linear layer y = x W^T (+ b) in memory, whatever the checkpoint format was.
// NVFP4 layers from either ModelOpt or compressed-tensors normalize to the same form:
// packed E2M1 [out, in/2], E4M3 block scales [out, in/16], and one FP32 global factor in the
// multiply form (value = e2m1 * e4m3 * global_factor). MXFP4 layers (gpt-oss's experts) keep
// their checkpoint bytes as they are (mxfp4.h); no layer is converted between formats at load.
#include <cstdint>
#include <string>
#include <vector>

#include "engine/model/mxfp4.h"
#include "engine/model/quant_config.h"
#include "engine/model/safetensors.h"
#include "kernels/nvfp4/nvfp4_ref.h"

namespace nibble::model {

struct Linear {
  std::int64_t out_features = 0;
  std::int64_t in_features = 0;
  bool quantized = false;      // NVFP4: the weights are in `fp4`
  std::vector<float> dense;    // [out, in] row-major, when neither NVFP4 nor MXFP4
  nvfp4::QuantizedMatrix fp4;  // when quantized
  mxfp4::Matrix mxfp4;         // [out, in] when is_mxfp4()
  std::vector<float> bias;     // [out] or empty
  float input_scale = 0.0f;    // static activation global factor (multiply form), 0 if none

  bool is_mxfp4() const { return mxfp4.rows > 0; }
};

// Reads `module`.weight (dense BF16/F16/F32) or its NVFP4 tensors in the checkpoint's format and
// checks the shape is [out, in]. Throws ModelError naming the tensor.
Linear load_linear(const Checkpoint& ck, QuantFormat format, const std::string& module,
                   std::int64_t out_features, std::int64_t in_features);

// A BF16/F16/F32 tensor as floats; `expected_numel` checked (ModelError otherwise).
std::vector<float> load_floats(const TensorView& t, std::int64_t expected_numel);
std::vector<float> load_floats(const Checkpoint& ck, const std::string& name,
                               std::int64_t expected_numel);

// ModelError naming `t` unless it has this dtype and shape.
void expect_tensor(const TensorView& t, DType dtype, const std::vector<std::int64_t>& shape);

float half_to_float(std::uint16_t h);

}  // namespace nibble::model
