#include "engine/model/fused_experts.h"

#include <cstring>

#include "engine/model/model_error.h"

namespace nibble::model {
namespace {

using I64 = std::int64_t;

// Expert e's [out, in] MXFP4 matrix: its slice of the layer's blocks and scales, bytes as stored.
Linear mxfp4_slice(const Checkpoint& ck, const std::string& name, int experts, int e, I64 out,
                   I64 in) {
  const TensorView& blocks = ck.require(name + "_blocks");
  const TensorView& scales = ck.require(name + "_scales");
  if (in % mxfp4::kBlockSize != 0)
    throw ModelError(blocks.file + ": tensor '" + blocks.name +
                     "': MXFP4 needs inputs in blocks of 32, got " + std::to_string(in));
  const I64 groups = in / mxfp4::kBlockSize;
  expect_tensor(blocks, DType::U8, {experts, out, groups, mxfp4::kBlockSize / 2});
  expect_tensor(scales, DType::U8, {experts, out, groups});
  Linear lin;
  lin.out_features = out;
  lin.in_features = in;
  lin.mxfp4.rows = out;
  lin.mxfp4.cols = in;
  const auto copy = [e](const TensorView& t, std::vector<std::uint8_t>& to) {
    const std::size_t per_expert = t.bytes.size() / std::size_t(t.shape[0]);
    to.resize(per_expert);
    std::memcpy(to.data(), t.bytes.data() + std::size_t(e) * per_expert, per_expert);
  };
  copy(blocks, lin.mxfp4.packed);
  copy(scales, lin.mxfp4.scales);
  return lin;
}

// Expert e's [out, in] dense matrix from transformers' [E, in, out] parameter.
Linear dense_slice(const std::vector<float>& all, int e, I64 out, I64 in) {
  Linear lin;
  lin.out_features = out;
  lin.in_features = in;
  lin.dense.resize(std::size_t(out * in));
  const float* src = all.data() + I64(e) * in * out;
  for (I64 i = 0; i < in; ++i)
    for (I64 o = 0; o < out; ++o) lin.dense[std::size_t(o * in + i)] = src[i * out + o];
  return lin;
}

std::vector<Linear> load_projection(const Checkpoint& ck, QuantFormat format,
                                    const std::string& name, int experts, I64 out, I64 in) {
  std::vector<Linear> per_expert;
  const bool packed = ck.has(name + "_blocks");
  if (packed && format != QuantFormat::Mxfp4) {
    const TensorView& t = ck.require(name + "_blocks");
    throw ModelError(t.file + ": tensor '" + t.name +
                     "' is MXFP4 but config.json's quantization_config does not declare "
                     "quant_method \"mxfp4\"");
  }
  std::vector<float> dense;
  if (!packed) {
    const TensorView& t = ck.require(name);
    expect_tensor(t, t.dtype, {experts, in, out});
    dense = load_floats(t, I64(experts) * in * out);
  }
  const TensorView& bias = ck.require(name + "_bias");
  expect_tensor(bias, bias.dtype, {experts, out});
  const std::vector<float> biases = load_floats(bias, I64(experts) * out);
  for (int e = 0; e < experts; ++e) {
    Linear lin =
        packed ? mxfp4_slice(ck, name, experts, e, out, in) : dense_slice(dense, e, out, in);
    lin.bias.assign(biases.begin() + I64(e) * out, biases.begin() + I64(e + 1) * out);
    per_expert.push_back(std::move(lin));
  }
  return per_expert;
}

}  // namespace

std::vector<ExpertWeights> load_fused_experts(const Checkpoint& ck, QuantFormat format,
                                              const std::string& prefix, int experts,
                                              std::int64_t intermediate, std::int64_t hidden) {
  auto gate_up =
      load_projection(ck, format, prefix + ".gate_up_proj", experts, 2 * intermediate, hidden);
  auto down = load_projection(ck, format, prefix + ".down_proj", experts, hidden, intermediate);
  std::vector<ExpertWeights> out(static_cast<std::size_t>(experts));
  for (std::size_t e = 0; e < out.size(); ++e) {
    out[e].gate_up = std::move(gate_up[e]);
    out[e].down = std::move(down[e]);
  }
  return out;
}

}  // namespace nibble::model
