#include "engine/backend/cpu/cpu_ops.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "engine/model/mxfp4.h"
#include "kernels/nvfp4/nvfp4_ref.h"
#include "kernels/softmax_ref.h"

namespace nibble::backend::cpu {
namespace {

float dot(const float* a, const float* b, std::int64_t n) {
  // Eight partial sums: vectorizes without -ffast-math and loses less precision.
  float acc[8] = {};
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) acc[j] += a[i + j] * b[i + j];
  float sum = 0.0f;
  for (; i < n; ++i) sum += a[i] * b[i];
  for (float v : acc) sum += v;
  return sum;
}

// Decode tables built once from the reference codecs (kernels/nvfp4/nvfp4_ref.h), so the hot
// loop is two lookups and a multiply per weight while staying bit-identical to dequantize_row.
struct Nvfp4Tables {
  float e2m1[16];
  float e4m3[256];
  Nvfp4Tables() {
    for (int i = 0; i < 16; ++i) e2m1[i] = nvfp4::e2m1_to_float(std::uint8_t(i));
    for (int i = 0; i < 256; ++i) e4m3[i] = nvfp4::e4m3_to_float(std::uint8_t(i));
  }
};

void dequantize_row_fast(const nvfp4::QuantizedMatrix& q, std::int64_t row, float* out) {
  static const Nvfp4Tables tables;
  const std::int64_t k = q.cols;
  const std::uint8_t* packed = q.packed.data() + row * k / 2;
  const std::uint8_t* scales = q.scales.data() + row * k / nvfp4::kBlockSize;
  for (std::int64_t b = 0; b < k / nvfp4::kBlockSize; ++b) {
    // Same operation order as the reference: (e2m1 * block scale) * global factor.
    const float scale = tables.e4m3[scales[b]];
    const float global = q.global_factor;
    for (int i = 0; i < nvfp4::kBlockSize / 2; ++i) {
      const std::uint8_t byte = packed[b * nvfp4::kBlockSize / 2 + i];
      out[b * nvfp4::kBlockSize + 2 * i] = tables.e2m1[byte & 0xf] * scale * global;
      out[b * nvfp4::kBlockSize + 2 * i + 1] = tables.e2m1[byte >> 4] * scale * global;
    }
  }
}

// YaRN (transformers' _compute_yarn_parameters): each frequency blends its original value
// (extrapolation) with it divided by `factor` (interpolation), by a ramp over the dimensions
// between those that turn beta_fast and beta_slow times over original_max_position_embeddings.
std::vector<double> yarn_frequencies(const model::RopeConfig& rope, std::vector<double> inv) {
  const double dim = double(inv.size() * 2);
  const auto correction_dim = [&](double rotations) {
    return dim *
           std::log(double(rope.original_max_position_embeddings) /
                    (rotations * 2.0 * std::numbers::pi)) /
           (2.0 * std::log(rope.theta));
  };
  double low = correction_dim(rope.beta_fast), high = correction_dim(rope.beta_slow);
  if (rope.truncate) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  low = std::max(low, 0.0);
  high = std::min(high, dim - 1);
  if (low == high) high += 0.001;  // as transformers: no division by zero
  for (std::size_t i = 0; i < inv.size(); ++i) {
    const double ramp = std::clamp((double(i) - low) / (high - low), 0.0, 1.0);
    inv[i] = inv[i] / rope.factor * ramp + inv[i] * (1.0 - ramp);
  }
  return inv;
}

}  // namespace

void linear_forward(const model::Linear& w, std::span<const float> x, std::int64_t tokens,
                    std::span<float> y, ThreadPool& pool) {
  const std::int64_t in = w.in_features, out = w.out_features;
  pool.parallel_for(out, [&](std::int64_t begin, std::int64_t end) {
    std::vector<float> row(w.quantized || w.is_mxfp4() ? std::size_t(in) : 0);
    for (std::int64_t n = begin; n < end; ++n) {
      const float* wrow;
      if (w.quantized) {
        dequantize_row_fast(w.fp4, n, row.data());
        wrow = row.data();
      } else if (w.is_mxfp4()) {
        model::mxfp4::dequantize_row(w.mxfp4, n, row);
        wrow = row.data();
      } else {
        wrow = w.dense.data() + n * in;
      }
      const float b = w.bias.empty() ? 0.0f : w.bias[std::size_t(n)];
      for (std::int64_t t = 0; t < tokens; ++t)
        y[std::size_t(t * out + n)] = dot(x.data() + t * in, wrow, in) + b;
    }
  });
}

void rms_norm(std::span<float> x, std::int64_t dim, std::span<const float> weight, float eps,
              float weight_offset) {
  for (std::size_t r = 0; r < x.size() / std::size_t(dim); ++r) {
    float* v = x.data() + r * std::size_t(dim);
    double sum = 0.0;
    for (std::int64_t i = 0; i < dim; ++i) sum += double(v[i]) * v[i];
    const float scale = float(1.0 / std::sqrt(sum / double(dim) + double(eps)));
    for (std::int64_t i = 0; i < dim; ++i)
      v[i] = v[i] * scale * (weight[std::size_t(i)] + weight_offset);
  }
}

std::vector<double> rope_inverse_frequencies(const model::RopeConfig& rope, int head_dim) {
  std::vector<double> inv(std::size_t(head_dim / 2));
  for (int i = 0; i < head_dim / 2; ++i)
    inv[std::size_t(i)] = 1.0 / std::pow(rope.theta, double(2 * i) / double(head_dim));
  if (rope.yarn) return yarn_frequencies(rope, inv);
  if (!rope.llama3) return inv;
  // Llama 3.1: long wavelengths slowed by `factor`, short ones kept, the band between blended.
  const double old_len = rope.original_max_position_embeddings;
  const double low_wavelen = old_len / rope.low_freq_factor;
  const double high_wavelen = old_len / rope.high_freq_factor;
  for (auto& f : inv) {
    const double wavelen = 2.0 * std::numbers::pi / f;
    if (wavelen > low_wavelen) {
      f = f / rope.factor;
    } else if (wavelen >= high_wavelen) {
      const double smooth = (old_len / wavelen - rope.low_freq_factor) /
                            (rope.high_freq_factor - rope.low_freq_factor);
      f = (1.0 - smooth) * f / rope.factor + smooth * f;
    }
  }
  return inv;
}

void apply_rope(std::span<float> head, std::span<const double> inv_freq, int position,
                double scale) {
  const std::size_t half = inv_freq.size();
  for (std::size_t i = 0; i < half; ++i) {
    const double angle = double(position) * inv_freq[i];
    const float c = float(std::cos(angle) * scale), s = float(std::sin(angle) * scale);
    const float a = head[i], b = head[i + half];
    head[i] = a * c - b * s;
    head[i + half] = b * c + a * s;
  }
}

float silu(float x) {
  return x / (1.0f + std::exp(-x));
}

float sigmoid(float x) {
  return 1.0f / (1.0f + std::exp(-x));
}

void softmax_with_sink(std::span<float> x, float sink) {
  float m = sink;
  for (float v : x) m = std::max(m, v);
  double sum = std::exp(double(sink) - m);
  for (auto& v : x) {
    v = std::exp(v - m);
    sum += v;
  }
  for (auto& v : x) v = float(v / sum);
}

float clamped_swiglu_value(float gate, float up, float alpha, float limit) {
  const float g = std::min(gate, limit), u = std::clamp(up, -limit, limit);
  return (u + 1.0f) * (g / (1.0f + std::exp(-alpha * g)));
}

void softmax(std::span<float> x) {
  kernels::softmax_ref(x);
}

}  // namespace nibble::backend::cpu
