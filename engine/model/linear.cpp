#include "engine/model/linear.h"

#include <cmath>
#include <cstring>

#include "engine/model/model_error.h"
#include "kernels/nvfp4/bf16.h"

namespace nibble::model {
namespace {

[[noreturn]] void fail(const TensorView& t, const std::string& what) {
  throw ModelError(t.file + ": tensor '" + t.name + "': " + what);
}

std::string shape_string(const std::vector<std::int64_t>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

void expect_shape(const TensorView& t, std::vector<std::int64_t> shape) {
  if (t.shape != shape)
    fail(t, "expected shape " + shape_string(shape) + ", got " + shape_string(t.shape));
}

void expect_dtype(const TensorView& t, DType dtype) {
  if (t.dtype != dtype)
    fail(t, "expected dtype " + std::string(dtype_name(dtype)) + ", got " +
                std::string(dtype_name(t.dtype)));
}

// A one-element FP32 scale ([] or [1]); must be finite and positive.
float load_scalar(const TensorView& t) {
  expect_dtype(t, DType::F32);
  if (t.numel() != 1) fail(t, "expected one value, got shape " + shape_string(t.shape));
  float v;
  std::memcpy(&v, t.bytes.data(), sizeof v);
  if (!std::isfinite(v) || v <= 0.0f)
    fail(t, "expected a positive finite scale, got " + std::to_string(v));
  return v;
}

std::vector<std::uint8_t> load_bytes(const TensorView& t) {
  std::vector<std::uint8_t> out(t.bytes.size());
  std::memcpy(out.data(), t.bytes.data(), out.size());
  return out;
}

void load_fp4(const Checkpoint& ck, const TensorView& packed, const std::string& scale_name,
              Linear& lin) {
  expect_dtype(packed, DType::U8);
  if (lin.in_features % nvfp4::kBlockSize != 0)
    fail(packed, "NVFP4 needs in_features divisible by 16, got " + std::to_string(lin.in_features));
  expect_shape(packed, {lin.out_features, lin.in_features / 2});
  const auto& scales = ck.require(scale_name);
  expect_dtype(scales, DType::F8_E4M3);
  expect_shape(scales, {lin.out_features, lin.in_features / nvfp4::kBlockSize});
  lin.quantized = true;
  lin.fp4.rows = lin.out_features;
  lin.fp4.cols = lin.in_features;
  lin.fp4.packed = load_bytes(packed);
  lin.fp4.scales = load_bytes(scales);
}

}  // namespace

void expect_tensor(const TensorView& t, DType dtype, const std::vector<std::int64_t>& shape) {
  expect_dtype(t, dtype);
  expect_shape(t, shape);
}

float half_to_float(std::uint16_t h) {
  std::uint32_t sign = std::uint32_t(h & 0x8000) << 16;
  int exp = (h >> 10) & 0x1f;
  std::uint32_t mant = h & 0x3ff;
  float magnitude;
  if (exp == 0) {
    magnitude = std::ldexp(float(mant), -24);
  } else if (exp == 31) {
    magnitude = mant ? NAN : INFINITY;
  } else {
    magnitude = std::ldexp(float(mant | 0x400), exp - 25);
  }
  std::uint32_t bits;
  std::memcpy(&bits, &magnitude, sizeof bits);
  bits |= sign;
  std::memcpy(&magnitude, &bits, sizeof bits);
  return magnitude;
}

std::vector<float> load_floats(const TensorView& t, std::int64_t expected_numel) {
  if (t.numel() != expected_numel)
    fail(t, "expected " + std::to_string(expected_numel) + " elements, got shape " +
                shape_string(t.shape));
  std::vector<float> out(std::size_t(t.numel()));
  const auto* p = t.bytes.data();
  for (std::size_t i = 0; i < out.size(); ++i) {
    switch (t.dtype) {
      case DType::BF16: {
        std::uint16_t b;
        std::memcpy(&b, p + 2 * i, 2);
        out[i] = nvfp4::bf16_to_float(b);
        break;
      }
      case DType::F16: {
        std::uint16_t b;
        std::memcpy(&b, p + 2 * i, 2);
        out[i] = half_to_float(b);
        break;
      }
      case DType::F32:
        std::memcpy(&out[i], p + 4 * i, 4);
        break;
      default:
        fail(t, "expected BF16, F16 or F32, got " + std::string(dtype_name(t.dtype)));
    }
  }
  return out;
}

std::vector<float> load_floats(const Checkpoint& ck, const std::string& name,
                               std::int64_t expected_numel) {
  return load_floats(ck.require(name), expected_numel);
}

Linear load_linear(const Checkpoint& ck, QuantFormat format, const std::string& module,
                   std::int64_t out_features, std::int64_t in_features) {
  Linear lin;
  lin.out_features = out_features;
  lin.in_features = in_features;
  if (const auto* b = ck.find(module + ".bias")) lin.bias = load_floats(*b, out_features);

  if (format == QuantFormat::CompressedTensors && ck.has(module + ".weight_packed")) {
    load_fp4(ck, ck.require(module + ".weight_packed"), module + ".weight_scale", lin);
    // compressed-tensors stores the reciprocal: value = e2m1 * block / global_scale.
    lin.fp4.global_factor = 1.0f / load_scalar(ck.require(module + ".weight_global_scale"));
    if (const auto* s = ck.find(module + ".input_global_scale"))
      lin.input_scale = 1.0f / load_scalar(*s);
    return lin;
  }
  const auto& weight = ck.require(module + ".weight");
  if (format == QuantFormat::ModelOpt && ck.has(module + ".weight_scale")) {
    load_fp4(ck, weight, module + ".weight_scale", lin);
    // ModelOpt stores the multiply form: value = e2m1 * block * weight_scale_2.
    lin.fp4.global_factor = load_scalar(ck.require(module + ".weight_scale_2"));
    if (const auto* s = ck.find(module + ".input_scale")) lin.input_scale = load_scalar(*s);
    return lin;
  }
  if (weight.dtype == DType::U8)
    fail(weight,
         "is packed (U8) but the checkpoint declares no NVFP4 quantization or the scales "
         "are missing");
  expect_shape(weight, {out_features, in_features});
  lin.dense = load_floats(weight, out_features * in_features);
  return lin;
}

}  // namespace nibble::model
