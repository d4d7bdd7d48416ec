#include "engine/backend/cuda/device_model.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <exception>
#include <mutex>
#include <thread>

#include "engine/backend/cpu/cpu_ops.h"
#include "engine/backend/zero_centred_norms.h"
#include "kernels/nvfp4/bf16.h"

namespace nibble::backend::cuda {
namespace {

bool joinable(std::initializer_list<const model::Linear*> parts) {
  const model::Linear& first = **parts.begin();
  for (const model::Linear* l : parts) {
    if (l->in_features != first.in_features || l->quantized != first.quantized ||
        l->bias.empty() != first.bias.empty())
      return false;
    if (l->quantized && l->fp4.global_factor != first.fp4.global_factor) return false;
  }
  return true;
}

// The parts' rows one after another (their host copies are released).
model::Linear join(std::initializer_list<model::Linear*> parts) {
  model::Linear j;
  const model::Linear& first = **parts.begin();
  j.in_features = first.in_features;
  j.quantized = first.quantized;
  j.input_scale = first.input_scale;
  j.fp4.cols = first.fp4.cols;
  j.fp4.global_factor = first.fp4.global_factor;
  auto append = [](auto& to, auto& from) {
    to.insert(to.end(), from.begin(), from.end());
    from = {};
  };
  for (model::Linear* l : parts) {
    j.out_features += l->out_features;
    append(j.dense, l->dense);
    append(j.bias, l->bias);
    j.fp4.rows += l->fp4.rows;
    append(j.fp4.packed, l->fp4.packed);
    append(j.fp4.scales, l->fp4.scales);
  }
  return j;
}

bool same_shape(const kernels::W4A16DeviceWeight& a, const kernels::W4A16DeviceWeight& b) {
  return a.n == b.n && a.k == b.k && a.n_padded == b.n_padded && a.k_padded == b.k_padded &&
         a.k_major == b.k_major;
}

// One projection of every expert as a device table; false when one of them is not NVFP4 without
// bias or differs in shape from the first.
bool grouped_table(const std::vector<DeviceMlp>& experts, DeviceLinear DeviceMlp::*projection,
                   DeviceBuffer<kernels::W4A16DeviceWeight>& table,
                   kernels::W4A16GroupedWeights& view) {
  std::vector<kernels::W4A16DeviceWeight> weights;
  for (const DeviceMlp& e : experts) {
    const DeviceLinear& l = e.*projection;
    if (!l.nvfp4 || !l.bias.empty() || (!weights.empty() && !same_shape(l.weight, weights[0])))
      return false;
    weights.push_back(l.weight);
  }
  if (weights.empty()) return false;
  table = DeviceBuffer<kernels::W4A16DeviceWeight>::from(weights);
  view = {table.get(), weights[0]};
  return true;
}

DeviceExpertTables expert_tables(const std::vector<DeviceMlp>& experts) {
  DeviceExpertTables t;
  if (experts.empty()) return t;
  const bool fused = experts[0].fused;
  for (const DeviceMlp& e : experts)
    if (e.fused != fused) return t;
  t.weights.fused = fused;
  const bool tables =
      (fused ? grouped_table(experts, &DeviceMlp::gate_up, t.gate_up, t.weights.gate_up)
             : grouped_table(experts, &DeviceMlp::gate, t.gate, t.weights.gate) &&
                   grouped_table(experts, &DeviceMlp::up, t.up, t.weights.up)) &&
      grouped_table(experts, &DeviceMlp::down, t.down, t.weights.down);
  t.grouped = tables;
  return t;
}

// Uploads and keeps the tallies (bytes, widest and largest NVFP4 layer) of what it uploaded.
struct Uploader {
  std::size_t bytes = 0;
  std::int64_t widest_nvfp4 = 0;
  std::size_t largest_nvfp4 = 0;

  DeviceLinear linear(model::Linear& host) {
    DeviceLinear d = upload_linear(host);
    if (d.nvfp4) {
      widest_nvfp4 = std::max(widest_nvfp4, d.n);
      largest_nvfp4 =
          std::max(largest_nvfp4, std::size_t(d.weight.n_padded) * std::size_t(d.weight.k_padded));
    }
    bytes += d.tiles.size() + d.scales.size() + d.dense.size() * 2 + d.bias.size() * 4;
    return d;
  }
  DeviceBuffer<float> floats(std::vector<float>& host) {
    bytes += host.size() * sizeof(float);
    auto d = DeviceBuffer<float>::from(host);
    host = {};
    return d;
  }
  DeviceLayer layer(model::LayerWeights& h) {
    DeviceLayer d;
    d.input_norm = floats(h.input_norm);
    d.post_attention_norm = floats(h.post_attention_norm);
    if (!h.q_norm.empty()) d.q_norm = floats(h.q_norm);
    if (!h.k_norm.empty()) d.k_norm = floats(h.k_norm);
    if (h.linear_attention.in_proj_qkvz.out_features > 0) {
      d.linear_attention = linear_attention(h.linear_attention);
    } else {
      d.fused_qkv = joinable({&h.q, &h.k, &h.v});
      if (d.fused_qkv) {
        auto qkv = join({&h.q, &h.k, &h.v});
        d.qkv = linear(qkv);
      } else {
        d.q = linear(h.q);
        d.k = linear(h.k);
        d.v = linear(h.v);
      }
      d.o = linear(h.o);
    }
    d.moe = h.moe;
    if (h.moe) {
      d.router = linear(h.router);
      for (auto& e : h.experts) d.experts.push_back(mlp(e.gate, e.up, e.down));
      d.expert_tables = expert_tables(d.experts);
      if (h.shared_gate.out_features > 0) {
        d.shared = mlp(h.shared_gate, h.shared_up, h.shared_down);
        d.shared_expert_gate = linear(h.shared_expert_gate);
      }
    } else {
      d.mlp = mlp(h.gate, h.up, h.down);
    }
    h = {};
    return d;
  }
  DeviceLinearAttention linear_attention(model::LinearAttentionWeights& h) {
    DeviceLinearAttention d;
    d.in_proj_qkvz = linear(h.in_proj_qkvz);
    d.in_proj_ba = linear(h.in_proj_ba);
    d.out_proj = linear(h.out_proj);
    std::vector<std::uint16_t> conv(h.conv_weight.size());
    for (std::size_t i = 0; i < conv.size(); ++i) conv[i] = nvfp4::float_to_bf16(h.conv_weight[i]);
    h.conv_weight = {};
    d.conv_weight = DeviceBuffer<std::uint16_t>::from(conv);
    bytes += conv.size() * 2;
    d.A_log = floats(h.A_log);
    d.dt_bias = floats(h.dt_bias);
    d.norm = floats(h.norm);
    return d;
  }
  DeviceMlp mlp(model::Linear& gate, model::Linear& up, model::Linear& down) {
    DeviceMlp d;
    d.fused = joinable({&gate, &up});
    if (d.fused) {
      auto gate_up = join({&gate, &up});
      d.gate_up = linear(gate_up);
    } else {
      d.gate = linear(gate);
      d.up = linear(up);
    }
    d.down = linear(down);
    return d;
  }
};

}  // namespace

DeviceModel upload_model(model::ModelWeights w) {
  const auto start = std::chrono::steady_clock::now();
  DeviceModel m;
  m.config = w.config;
  m.description = fold_zero_centred_norms(w, model::describe_model(w.config));
  Uploader up;
  {
    std::vector<std::uint16_t> embed(w.embed.size());
    for (std::size_t i = 0; i < embed.size(); ++i) embed[i] = nvfp4::float_to_bf16(w.embed[i]);
    w.embed = {};
    m.embed = DeviceBuffer<std::uint16_t>::from(embed);
    up.bytes += embed.size() * 2;
  }
  m.inv_freq =
      DeviceBuffer<double>::from(cpu::rope_inverse_frequencies(w.config.rope, w.config.rope_dim()));

  // Layers in parallel: repacking NVFP4 weights for the W4A16 kernels is host work that would
  // otherwise dominate loading a large model.
  const int layers = int(w.layers.size());
  m.layers.resize(std::size_t(layers));
  std::atomic<int> next{0}, done{0};
  std::mutex mu;
  std::exception_ptr failure;
  auto work = [&] {
    Uploader mine;
    for (int l; (l = next++) < layers;) {
      try {
        m.layers[std::size_t(l)] = mine.layer(w.layers[std::size_t(l)]);
      } catch (...) {
        std::lock_guard lock(mu);
        if (!failure) failure = std::current_exception();
        next = layers;
        break;
      }
      const int finished = ++done;
      std::lock_guard lock(mu);
      const bool quarter = finished * 4 / layers != (finished - 1) * 4 / layers;
      spdlog::log(quarter ? spdlog::level::info : spdlog::level::debug,
                  "cuda backend: {}/{} layers on the device", finished, layers);
    }
    std::lock_guard lock(mu);
    up.bytes += mine.bytes;
    up.widest_nvfp4 = std::max(up.widest_nvfp4, mine.widest_nvfp4);
    up.largest_nvfp4 = std::max(up.largest_nvfp4, mine.largest_nvfp4);
  };
  const int threads = std::max(1, std::min({int(std::thread::hardware_concurrency()), layers, 16}));
  std::vector<std::thread> pool;
  for (int i = 1; i < threads; ++i) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  if (failure) std::rethrow_exception(failure);

  m.final_norm = up.floats(w.final_norm);
  m.lm_head = up.linear(w.lm_head);
  m.bytes = up.bytes;
  m.widest_nvfp4 = up.widest_nvfp4;
  m.largest_nvfp4 = up.largest_nvfp4;
  spdlog::info("cuda backend: {} MiB of weights on the device in {:.1f} s", m.bytes >> 20,
               std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  return m;
}

}  // namespace nibble::backend::cuda
