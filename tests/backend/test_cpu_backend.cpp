// The CPU backend on small in-memory models of each architecture: a prompt run in one prefill,
// in chunks, or token by token gives the same logits (the KV cache and positions are right),
// NVFP4 weights give exactly the dense model of their dequantized values, and bad calls fail
// without changing the sequence.
#include "engine/backend/batch_checks.h"
#include "engine/backend/cpu/cpu_backend.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "engine/backend/greedy_decode.h"
#include "engine/backend/sampled_decode.h"
#include "tests/backend/chunk_logits.h"
#include "tests/backend/random_model.h"

namespace nibble::backend {
namespace {

using model::Linear;
using model::ModelConfig;
using model::ModelWeights;

ModelConfig small_config(model::Arch arch) {
  ModelConfig c;
  c.arch = arch;
  c.vocab_size = 97;
  c.hidden_size = 32;
  c.intermediate_size = 48;
  c.num_layers = 2;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = arch == model::Arch::Llama ? 8 : 16;
  c.max_position_embeddings = c.max_context = 64;
  c.rope.theta = 10000.0;
  if (arch == model::Arch::Llama) {
    c.rope.llama3 = true;
    c.rope.factor = 8.0;
    c.rope.original_max_position_embeddings = 16;
  }
  if (arch == model::Arch::Qwen3Moe) {
    c.num_experts = 4;
    c.num_experts_per_tok = 2;
    c.moe_intermediate_size = 16;
    c.norm_topk_prob = true;
  }
  return c;
}

ModelWeights random_model(const ModelConfig& c) {
  return testing::random_model(c, 20261123);
}

std::vector<float> run(Backend& b, const std::vector<std::vector<std::int32_t>>& chunks) {
  return nibble::testing::logits_after_chunks(b, chunks, 32);
}
using nibble::testing::max_relative_difference;

class CpuBackendArch : public ::testing::TestWithParam<model::Arch> {};

TEST_P(CpuBackendArch, PrefillChunkedPrefillAndDecodeAgree) {
  auto backend = make_cpu_backend(random_model(small_config(GetParam())), 2);
  const std::vector<std::int32_t> prompt = {5, 17, 3, 96, 0, 42, 42, 8, 61};
  auto whole = run(*backend, {prompt});
  auto chunked = run(*backend, {{5, 17, 3, 96}, {0, 42}, {42, 8, 61}});
  std::vector<std::vector<std::int32_t>> singles;
  for (auto t : prompt) singles.push_back({t});
  auto one_by_one = run(*backend, singles);
  EXPECT_LT(max_relative_difference(chunked, whole), 1e-5);
  EXPECT_LT(max_relative_difference(one_by_one, whole), 1e-5);
  // The logits depend on earlier tokens (attention works), not only on the last one.
  auto last_only = run(*backend, {{61}});
  EXPECT_GT(max_relative_difference(last_only, whole), 1e-2);
}

std::string arch_name(const ::testing::TestParamInfo<model::Arch>& info) {
  static const char* const kNames[] = {"Llama", "Mistral", "Qwen2", "Qwen3", "Qwen3Moe"};
  return kNames[int(info.param)];
}

INSTANTIATE_TEST_SUITE_P(Archs, CpuBackendArch,
                         ::testing::Values(model::Arch::Llama, model::Arch::Qwen2,
                                           model::Arch::Qwen3, model::Arch::Qwen3Moe),
                         arch_name);

TEST(CpuBackend, Nvfp4WeightsComputeTheirDequantizedValues) {
  auto dense = random_model(small_config(model::Arch::Qwen3Moe));
  auto quantized = dense;
  auto quantize = [](Linear& l) {
    l.fp4 = nvfp4::quantize_matrix(l.dense, l.out_features, l.in_features);
    l.quantized = true;
    l.dense = nvfp4::dequantize_matrix(l.fp4);
  };
  for (std::size_t i = 0; i < dense.layers.size(); ++i) {
    auto& q = quantized.layers[i];
    for (Linear* l : {&q.q, &q.k, &q.v, &q.o, &q.gate, &q.up, &q.down})
      if (!l->dense.empty()) quantize(*l);
    for (auto& e : q.experts)
      for (Linear* l : {&e.gate, &e.up, &e.down}) quantize(*l);
  }
  auto dequantized = quantized;  // same values, dense
  for (auto& layer : dequantized.layers) {
    for (Linear* l : {&layer.q, &layer.k, &layer.v, &layer.o, &layer.gate, &layer.up, &layer.down})
      l->quantized = false;
    for (auto& e : layer.experts)
      for (Linear* l : {&e.gate, &e.up, &e.down}) l->quantized = false;
  }
  for (auto& layer : quantized.layers) {
    for (Linear* l : {&layer.q, &layer.k, &layer.v, &layer.o, &layer.gate, &layer.up, &layer.down})
      if (l->quantized) l->dense.clear();  // the FP4 path must not fall back to dense
    for (auto& e : layer.experts)
      for (Linear* l : {&e.gate, &e.up, &e.down}) l->dense.clear();
  }
  auto a = make_cpu_backend(std::move(quantized), 2);
  auto b = make_cpu_backend(std::move(dequantized), 1);
  auto c = make_cpu_backend(std::move(dense), 1);
  const std::vector<std::int32_t> prompt = {1, 2, 3, 50, 60};
  auto la = run(*a, {prompt}), lb = run(*b, {prompt}), lc = run(*c, {prompt});
  EXPECT_LT(max_relative_difference(la, lb), 1e-6);
  // Quantization changes the model measurably but not wildly (~20 dB per weight).
  const double quant_effect = max_relative_difference(la, lc);
  EXPECT_GT(quant_effect, 1e-4);
  EXPECT_LT(quant_effect, 0.5);
}

TEST(CpuBackend, BadCallsFailAndLeaveTheSequenceUnchanged) {
  auto backend = make_cpu_backend(random_model(small_config(model::Arch::Qwen3)), 1);
  auto other = make_cpu_backend(random_model(small_config(model::Arch::Qwen3)), 1);
  auto seq = backend->new_sequence(4);
  std::vector<float> logits(97), short_logits(5);
  std::vector<std::int32_t> ok = {1, 2}, bad_id = {1, 97}, negative = {-1}, too_many = {1, 2, 3};
  backend->forward(*seq, ok, logits);
  EXPECT_EQ(seq->length(), 2);
  EXPECT_THROW(backend->forward(*seq, bad_id, logits), BackendError);
  EXPECT_THROW(backend->forward(*seq, negative, logits), BackendError);
  EXPECT_THROW(backend->forward(*seq, too_many, logits), BackendError);
  EXPECT_THROW(backend->forward(*seq, ok, short_logits), BackendError);
  EXPECT_THROW(backend->forward(*seq, {}, logits), BackendError);
  EXPECT_THROW(other->forward(*seq, ok, logits), BackendError);
  EXPECT_EQ(seq->length(), 2);
  EXPECT_THROW(backend->new_sequence(0), BackendError);
  EXPECT_THROW(backend->new_sequence(65), BackendError);
}

// Device sampling requests (BatchItem::sample): refused by a backend that returns logits, and
// checked (complete, not mixed with logits in one step) for one that samples on the device.
TEST(BatchChecks, DeviceSamplingRequestsAreCompleteAndNotMixedWithLogits) {
  const auto config = small_config(model::Arch::Qwen3);
  auto backend = make_cpu_backend(random_model(config), 1);
  auto cache = backend->new_kv_cache(4, 16);
  const std::vector<std::int32_t> tokens = {1, 2};
  const std::vector<int> table = {0}, other_table = {1};
  std::vector<float> logits(97);
  kernels::SampledRow result;
  std::vector<kernels::TopLogprob> top(3);
  std::vector<std::uint32_t> mask(4, ~0u);  // 97 tokens: 4 words
  DeviceSampling request;
  request.result = &result;
  request.top = top;
  request.params.num_top_logprobs = 3;
  request.bitmask = mask;
  const BatchItem sampled{tokens, 0, table, {}, &request};
  EXPECT_THROW(backend->forward_batch(*cache, std::vector<BatchItem>{sampled}), BackendError);
  auto checks = [&](std::vector<BatchItem> items) {
    return check_batch(config, "test", *cache, items, /*device_sampling=*/true);
  };
  EXPECT_EQ(checks({sampled}), 2);
  EXPECT_THROW(checks({{tokens, 0, table, logits, &request}}), BackendError);       // both
  EXPECT_THROW(checks({sampled, {tokens, 0, other_table, logits}}), BackendError);  // mixed
  EXPECT_EQ(checks({sampled, {tokens, 0, other_table, {}}}), 4);  // a prefill chunk beside it
  DeviceSampling bad = request;
  bad.params.num_top_logprobs = 4;  // more than its buffer holds
  EXPECT_THROW(checks({{tokens, 0, table, {}, &bad}}), BackendError);
  bad = request;
  bad.params.num_top_logprobs = kernels::kMaxSampledTopLogprobs + 1;
  EXPECT_THROW(checks({{tokens, 0, table, {}, &bad}}), BackendError);
  bad = request;
  bad.bitmask = std::span(mask).first(3);
  EXPECT_THROW(checks({{tokens, 0, table, {}, &bad}}), BackendError);
  bad = request;
  bad.result = nullptr;
  EXPECT_THROW(checks({{tokens, 0, table, {}, &bad}}), BackendError);

  // A verify item (num_logits 2): one request a row, each checked.
  auto several = [&](std::vector<BatchItem> items) {
    return check_batch(config, "test", *cache, items, true, /*several_logits=*/true);
  };
  const std::vector<DeviceSampling> rows = {request, request};
  BatchItem verify{tokens, 0, table, {}, rows.data()};
  verify.num_logits = 2;
  EXPECT_EQ(several({verify}), 2);
  EXPECT_THROW(checks({verify}), BackendError);  // a backend without several logits
  std::vector<DeviceSampling> bad_row = rows;
  bad_row[1].result = nullptr;
  verify.sample = bad_row.data();
  EXPECT_THROW(several({verify}), BackendError);
}

TEST(GreedyDecode, FeedsBackTheArgmaxAndReportsTopLogits) {
  auto backend = make_cpu_backend(random_model(small_config(model::Arch::Llama)), 2);
  auto trace = greedy_decode(*backend, {3, 4, 5}, 5, 3);
  ASSERT_EQ(trace.steps.size(), 5u);
  // Replaying prompt + generated tokens as one prefill reproduces the last step's logits.
  std::vector<std::int32_t> all = {3, 4, 5};
  for (std::size_t i = 0; i + 1 < trace.steps.size(); ++i) all.push_back(trace.steps[i].token);
  auto logits = run(*backend, {all});
  auto top = top_logits(logits, 3);
  EXPECT_EQ(top[0].first, trace.steps.back().token);
  EXPECT_NEAR(top[0].second, trace.steps.back().top[0].second, 1e-4);
  EXPECT_GE(trace.steps[0].top[0].second, trace.steps[0].top[1].second);
  EXPECT_EQ(top_logits({1.0f, 3.0f, 3.0f, 2.0f}, 2),
            (std::vector<std::pair<std::int32_t, float>>{{1, 3.0f}, {2, 3.0f}}));
}

// top_logits (one pass) against a stable sort of every id: largest first, ties by the lower id,
// NaN below every number; rows with many ties and a few NaNs, k from 1 to past the row.
TEST(GreedyDecode, TopLogitsMatchesAStableSort) {
  std::mt19937 gen(7);
  for (int trial = 0; trial < 200; ++trial) {
    const int n = 1 + int(gen() % 300);
    std::vector<float> logits(static_cast<std::size_t>(n));
    for (float& v : logits) v = float(int(gen() % 9)) - 4.0f;  // runs of equal values
    if (trial % 3 == 0) logits[gen() % std::size_t(n)] = std::nanf("");
    if (trial % 5 == 0) logits[gen() % std::size_t(n)] = -INFINITY;
    std::vector<std::int32_t> ids(static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) ids[std::size_t(i)] = i;
    std::stable_sort(ids.begin(), ids.end(), [&](std::int32_t a, std::int32_t b) {
      const float va = logits[std::size_t(a)], vb = logits[std::size_t(b)];
      if (std::isnan(va) != std::isnan(vb)) return std::isnan(vb);  // numbers before NaN
      return va > vb;
    });
    for (int k : {1, 2, 5, n, n + 3}) {
      const auto top = top_logits(logits, k);
      ASSERT_EQ(int(top.size()), std::min(k, n)) << "trial " << trial << " k " << k;
      for (std::size_t j = 0; j < top.size(); ++j) {
        ASSERT_EQ(top[j].first, ids[j]) << "trial " << trial << " k " << k << " entry " << j;
      }
    }
  }
}

// The device-sampled loop needs a backend that samples on the device: the CPU one refuses it.
TEST(GreedyDecode, OnDeviceRefusesABackendWithoutDeviceSampling) {
  auto backend = make_cpu_backend(random_model(small_config(model::Arch::Llama)), 1);
  ASSERT_FALSE(backend->samples_on_device());
  try {
    (void)greedy_decode_on_device(*backend, {3, 4, 5}, 2, 1);
    FAIL() << "expected BackendError";
  } catch (const BackendError& e) {
    EXPECT_NE(std::string(e.what()).find("does not sample on the device"), std::string::npos);
  }
}

// Speculative verification: an item asks for the logits of its last num_logits tokens; each row
// is exactly the logits a sequence run token by token has after that position.
TEST(CpuBackend, LogitsAtSeveralPositionsOfAChunk) {
  const auto config = small_config(model::Arch::Llama);
  auto backend = make_cpu_backend(random_model(config), 2);
  ASSERT_TRUE(backend->logits_at_several_positions());
  const std::vector<std::int32_t> prompt = {5, 17, 3}, chunk = {96, 0, 42, 8};
  auto cache = backend->new_kv_cache(4, 4);
  const std::vector<int> table = {0, 1};
  std::vector<float> ignored(97);
  backend->forward_batch(*cache, std::vector<BatchItem>{{prompt, 0, table, ignored}});
  std::vector<float> rows(3 * 97);
  BatchItem verify{chunk, 3, table, rows};
  verify.num_logits = 3;
  backend->forward_batch(*cache, std::vector<BatchItem>{verify});

  auto seq = backend->new_sequence(16);
  std::vector<float> logits(97);
  backend->forward(*seq, prompt, logits);
  backend->forward(*seq, std::vector<std::int32_t>{chunk[0]}, logits);
  for (std::size_t j = 1; j < chunk.size(); ++j) {
    backend->forward(*seq, std::vector<std::int32_t>{chunk[j]}, logits);
    EXPECT_EQ(std::vector<float>(rows.begin() + std::ptrdiff_t((j - 1) * 97),
                                 rows.begin() + std::ptrdiff_t(j * 97)),
              logits)
        << "row " << j - 1;
  }

  // More rows than tokens, or a buffer of the wrong size, is refused; so is any row beyond one
  // where the backend does not return several (the CUDA backend's checks today).
  verify.num_logits = 5;
  EXPECT_THROW(backend->forward_batch(*cache, std::vector<BatchItem>{verify}), BackendError);
  verify.num_logits = 2;
  EXPECT_THROW(backend->forward_batch(*cache, std::vector<BatchItem>{verify}), BackendError);
  verify.num_logits = 3;
  EXPECT_THROW(check_batch(config, "test", *cache, std::vector<BatchItem>{verify}), BackendError);
}

}  // namespace
}  // namespace nibble::backend
