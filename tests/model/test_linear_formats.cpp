// NVFP4 weight formats normalize to one Linear: hand-computed values for ModelOpt's multiply-form
// weight_scale_2 and compressed-tensors' reciprocal weight_global_scale (a swap is off by 16x
// here, and by ~10^6 on real checkpoints).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>

#include "engine/model/linear.h"
#include "engine/model/model_error.h"
#include "engine/model/safetensors_writer.h"
#include "kernels/nvfp4/bf16.h"
#include "tests/support/temp_dir.h"

namespace nibble::model {
namespace {

// One row of 16 weights: packed byte 0x72 = [code 2 (1.0), code 7 (6.0)], the rest zero;
// block scale E4M3 0x40 = 2.0.
void fill_fp4_tensor(const TensorSpec& spec, std::span<std::byte> out, float scalar) {
  if (spec.dtype == DType::U8) {
    std::memset(out.data(), 0, out.size());
    out[0] = std::byte(0x72);
  } else if (spec.dtype == DType::F8_E4M3) {
    out[0] = std::byte(0x40);
  } else {
    std::memcpy(out.data(), &scalar, 4);
  }
}

TEST(LinearFormats, ModelOptWeightScale2Multiplies) {
  nibble::testing::TempDir dir;
  std::vector<TensorSpec> specs = {{"l.weight", DType::U8, {1, 8}},
                                   {"l.weight_scale", DType::F8_E4M3, {1, 1}},
                                   {"l.weight_scale_2", DType::F32, {}},
                                   {"l.input_scale", DType::F32, {1}}};
  write_safetensors(
      dir.path() / "model.safetensors", specs, {},
      [&](std::size_t i, std::span<std::byte> out) {
        fill_fp4_tensor(specs[i], out, i == 2 ? 0.5f : 0.25f);
      },
      1);
  auto ck = Checkpoint::open(dir.path());
  Linear l = load_linear(ck, QuantFormat::ModelOpt, "l", 1, 16);
  ASSERT_TRUE(l.quantized);
  EXPECT_FLOAT_EQ(l.fp4.global_factor, 0.5f);
  EXPECT_FLOAT_EQ(nvfp4::dequantize_element(l.fp4, 0, 0), 1.0f);  // 1.0 * 2 * 0.5
  EXPECT_FLOAT_EQ(nvfp4::dequantize_element(l.fp4, 0, 1), 6.0f);  // 6.0 * 2 * 0.5
  EXPECT_FLOAT_EQ(nvfp4::dequantize_element(l.fp4, 0, 2), 0.0f);
  EXPECT_FLOAT_EQ(l.input_scale, 0.25f);
}

TEST(LinearFormats, CompressedTensorsGlobalScaleDivides) {
  nibble::testing::TempDir dir;
  std::vector<TensorSpec> specs = {{"l.weight_packed", DType::U8, {1, 8}},
                                   {"l.weight_scale", DType::F8_E4M3, {1, 1}},
                                   {"l.weight_global_scale", DType::F32, {1}},
                                   {"l.input_global_scale", DType::F32, {1}}};
  write_safetensors(
      dir.path() / "model.safetensors", specs, {},
      [&](std::size_t i, std::span<std::byte> out) {
        fill_fp4_tensor(specs[i], out, i == 2 ? 4.0f : 8.0f);
      },
      1);
  auto ck = Checkpoint::open(dir.path());
  Linear l = load_linear(ck, QuantFormat::CompressedTensors, "l", 1, 16);
  ASSERT_TRUE(l.quantized);
  EXPECT_FLOAT_EQ(l.fp4.global_factor, 0.25f);
  EXPECT_FLOAT_EQ(nvfp4::dequantize_element(l.fp4, 0, 0), 0.5f);  // 1.0 * 2 / 4
  EXPECT_FLOAT_EQ(nvfp4::dequantize_element(l.fp4, 0, 1), 3.0f);  // 6.0 * 2 / 4
  EXPECT_FLOAT_EQ(l.input_scale, 0.125f);
}

TEST(LinearFormats, DenseBf16WithBiasAndShapeErrors) {
  nibble::testing::TempDir dir;
  std::vector<TensorSpec> specs = {{"d.weight", DType::BF16, {2, 3}},
                                   {"d.bias", DType::F32, {2}},
                                   {"bad.weight", DType::U8, {2, 8}}};
  write_safetensors(
      dir.path() / "model.safetensors", specs, {},
      [&](std::size_t i, std::span<std::byte> out) {
        if (i == 0) {
          for (int k = 0; k < 6; ++k) {
            auto b = nvfp4::float_to_bf16(0.5f * float(k) - 1.0f);
            std::memcpy(out.data() + 2 * k, &b, 2);
          }
        } else if (i == 1) {
          float bias[2] = {3.0f, -4.0f};
          std::memcpy(out.data(), bias, 8);
        }
      },
      1);
  auto ck = Checkpoint::open(dir.path());
  Linear d = load_linear(ck, QuantFormat::None, "d", 2, 3);
  EXPECT_FALSE(d.quantized);
  EXPECT_EQ(d.dense, (std::vector<float>{-1.0f, -0.5f, 0.0f, 0.5f, 1.0f, 1.5f}));
  EXPECT_EQ(d.bias, (std::vector<float>{3.0f, -4.0f}));
  try {
    load_linear(ck, QuantFormat::None, "d", 2, 4);
    ADD_FAILURE();
  } catch (const ModelError& e) {
    EXPECT_THAT(e.what(),
                ::testing::HasSubstr("tensor 'd.weight': expected shape [2, 4], got [2, 3]"));
  }
  EXPECT_THROW(load_linear(ck, QuantFormat::None, "bad", 2, 16), ModelError);
  EXPECT_THROW(load_linear(ck, QuantFormat::ModelOpt, "missing", 2, 16), ModelError);
}

TEST(LinearFormats, HalfToFloat) {
  EXPECT_EQ(half_to_float(0x3c00), 1.0f);
  EXPECT_EQ(half_to_float(0xc000), -2.0f);
  EXPECT_EQ(half_to_float(0x0001), 5.960464477539063e-8f);
  EXPECT_EQ(half_to_float(0x7bff), 65504.0f);
}

TEST(QuantConfig, PatternsGlobAndRegex) {
  EXPECT_TRUE(module_pattern_matches("model.layers.*.mlp.gate", "model.layers.3.mlp.gate"));
  EXPECT_FALSE(module_pattern_matches("model.layers.*.mlp.gate", "model.layers.3.mlp.gate_proj"));
  EXPECT_TRUE(module_pattern_matches("re:.*mlp\\.gate$", "model.layers.3.mlp.gate"));
  EXPECT_FALSE(module_pattern_matches("re:.*mlp\\.gate$", "model.layers.3.mlp.gate_proj"));
  EXPECT_TRUE(module_pattern_matches("lm_head", "lm_head"));
}

}  // namespace
}  // namespace nibble::model
