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
         a.k_major == b.k_major && a.format == b.format;
}

// One projection of every expert as a device table; false when one of them is not in the W4A16
// layout, has a bias where `biased` is false, or differs in shape or format from the first.
bool grouped_table(const std::vector<DeviceMlp>& experts, DeviceLinear DeviceMlp::*projection,
                   bool biased, DeviceBuffer<kernels::W4A16DeviceWeight>& table,
                   kernels::W4A16GroupedWeights& view) {
  std::vector<kernels::W4A16DeviceWeight> weights;
  for (const DeviceMlp& e : experts) {
    const DeviceLinear& l = e.*projection;
    if (!l.nvfp4 || (!biased && !l.bias.empty()) ||
        (!weights.empty() && !same_shape(l.weight, weights[0])))
      return false;
    weights.push_back(l.weight);
  }
  if (weights.empty()) return false;
  table = DeviceBuffer<kernels::W4A16DeviceWeight>::from(weights);
  view = {table.get(), weights[0]};
  return true;
}

// biased: gpt-oss's experts, whose biases the fused kernels add (the caller uploads them).
DeviceExpertTables expert_tables(const std::vector<DeviceMlp>& experts, bool biased) {
  DeviceExpertTables t;
  if (experts.empty()) return t;
  const bool fused = experts[0].fused;
  for (const DeviceMlp& e : experts)
    if (e.fused != fused) return t;
  t.weights.fused = fused;
  const bool tables =
      (fused ? grouped_table(experts, &DeviceMlp::gate_up, biased, t.gate_up, t.weights.gate_up)
             : grouped_table(experts, &DeviceMlp::gate, biased, t.gate, t.weights.gate) &&
                   grouped_table(experts, &DeviceMlp::up, biased, t.up, t.weights.up)) &&
      grouped_table(experts, &DeviceMlp::down, biased, t.down, t.weights.down);
  t.grouped = tables;
  return t;
}

// Every expert's bias of one projection, [E, n] in BF16 (zeros for an expert without one).
std::vector<std::uint16_t> bias_table(const std::vector<model::ExpertWeights>& experts,
                                      model::Linear model::ExpertWeights::*projection) {
  std::vector<std::uint16_t> table;
  for (const model::ExpertWeights& e : experts) {
    const model::Linear& l = e.*projection;
    for (std::int64_t i = 0; i < l.out_features; ++i)
      table.push_back(l.bias.empty() ? 0 : nvfp4::float_to_bf16(l.bias[std::size_t(i)]));
  }
  return table;
}

bool mxfp4_experts(const std::vector<model::ExpertWeights>& experts) {
  for (const model::ExpertWeights& e : experts)
    if (e.gate_up.is_mxfp4() || e.gate.is_mxfp4() || e.up.is_mxfp4() || e.down.is_mxfp4())
      return true;
  return false;
}

// Uploads and keeps the tallies (bytes, widest and largest NVFP4 layer) of what it uploaded.
struct Uploader {
  std::size_t bytes = 0;
  std::int64_t widest_nvfp4 = 0;
  std::size_t largest_nvfp4 = 0;

  DeviceLinear linear(model::Linear& host) {
    DeviceLinear d = upload_linear(host);
    // MXFP4 runs in the grouped MoE kernels only: no split-K workspace or dense scratch.
    if (d.nvfp4 && d.weight.format == nvfp4::W4A16Format::kNvfp4) {
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
  DeviceBuffer<std::uint16_t> bf16s(const std::vector<std::uint16_t>& host) {
    bytes += host.size() * 2;
    return DeviceBuffer<std::uint16_t>::from(host);
  }
  DeviceLayer layer(model::LayerWeights& h, const model::LayerSpec& spec, int index) {
    DeviceLayer d;
    d.input_norm = floats(h.input_norm);
    d.post_attention_norm = floats(h.post_attention_norm);
    if (!h.q_norm.empty()) d.q_norm = floats(h.q_norm);
    if (!h.k_norm.empty()) d.k_norm = floats(h.k_norm);
    if (!h.hidden_norm.empty()) d.hidden_norm = floats(h.hidden_norm);
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
      if (!h.sinks.empty()) d.sinks = floats(h.sinks);
    }
    d.moe = h.moe;
    if (h.moe) {
      if (!h.router.bias.empty()) {
        std::vector<std::uint16_t> bias(h.router.bias.size());
        for (std::size_t i = 0; i < bias.size(); ++i)
          bias[i] = nvfp4::float_to_bf16(h.router.bias[i]);
        d.router_bias = bf16s(bias);
      }
      d.router = linear(h.router);
      // gpt-oss: one gate_up per expert, its rows interleaved, and biases (moe_block.h).
      const bool interleaved = spec.ffn.moe.layout == model::ExpertLayout::kFusedInterleaved;
      const bool mxfp4 = mxfp4_experts(h.experts);
      std::vector<std::uint16_t> gate_up_bias, down_bias;
      if (interleaved) {
        gate_up_bias = bias_table(h.experts, &model::ExpertWeights::gate_up);
        down_bias = bias_table(h.experts, &model::ExpertWeights::down);
      }
      for (auto& e : h.experts)
        d.experts.push_back(interleaved ? interleaved_mlp(e) : mlp(e.gate, e.up, e.down));
      d.expert_tables = expert_tables(d.experts, interleaved);
      if (mxfp4 && !d.expert_tables.grouped)
        throw BackendError("cuda backend: layer " + std::to_string(index) +
                           "'s MXFP4 experts differ in shape or format; the CUDA backend runs "
                           "MXFP4 experts only as one grouped table per layer");
      if (interleaved && d.expert_tables.grouped) {
        d.expert_tables.gate_up_bias = bf16s(gate_up_bias);
        d.expert_tables.down_bias = bf16s(down_bias);
      }
      // MXFP4 experts run only grouped, from the BF16 bias tables: their FP32 copies are freed
      // (gpt-oss-120b: 159 MB). NVFP4 ones keep theirs for the host-routing path.
      if (mxfp4)
        for (DeviceMlp& e : d.experts) {
          bytes -= (e.gate_up.bias.size() + e.down.bias.size()) * sizeof(float);
          e.gate_up.bias = {};
          e.down.bias = {};
        }
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
  // gpt-oss's expert: gate_up as it is (rows interleaved), with its bias; down with its bias.
  DeviceMlp interleaved_mlp(model::ExpertWeights& e) {
    DeviceMlp d;
    d.fused = true;
    d.gate_up = linear(e.gate_up);
    d.down = linear(e.down);
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
        m.layers[std::size_t(l)] =
            mine.layer(w.layers[std::size_t(l)], m.description.layers[std::size_t(l)], l);
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
  // A target that still carries its module (not taken out) never runs it: not uploaded.
  if (m.description.input == model::ModelInput::kEmbeddingAndHidden) {
    if (!w.mtp) throw BackendError("cuda backend: an MTP module without its input weights");
    m.mtp.emplace();
    m.mtp->embedding_norm = up.floats(w.mtp->embedding_norm);
    m.mtp->hidden_norm = up.floats(w.mtp->hidden_norm);
    m.mtp->fc = up.linear(w.mtp->fc);
  }
  if (m.description.input == model::ModelInput::kEagle3) {
    if (!w.eagle3) throw BackendError("cuda backend: an EAGLE-3 head without its fc");
    m.eagle3_fc = up.linear(w.eagle3->fc);
  }
  m.bytes = up.bytes;
  m.widest_nvfp4 = up.widest_nvfp4;
  m.largest_nvfp4 = up.largest_nvfp4;
  spdlog::info("cuda backend: {} MiB of weights on the device in {:.1f} s", m.bytes >> 20,
               std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  return m;
}

}  // namespace nibble::backend::cuda
