// gpt-oss on the CPU backend, on nibble-make-model's tiny gpt_oss (2 layers: a sliding window of
// 8, then full attention; sinks, YaRN, 8 MXFP4 experts of which 4 run): MXFP4 experts compute
// exactly their dequantized values, a prompt longer than the window gives the same logits in one
// chunk, in chunks or token by token and decodes past the window, a sliding layer sees exactly
// its `window` latest positions, and the CUDA backend refuses none of its features.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "engine/backend/backend.h"
#include "engine/backend/cpu/cpu_backend.h"
#include "engine/backend/cpu/cpu_kv_cache.h"
#include "engine/backend/greedy_decode.h"
#include "engine/model/model_weights.h"
#include "tests/backend/chunk_logits.h"
#include "tests/backend/tiny_models.h"
#include "tests/support/child_process.h"
#include "tests/support/temp_dir.h"

namespace nibble::backend {
namespace {

// One tiny gpt_oss per dtype for the whole suite (made once: the vocabulary is the real 201,088).
class GptOssCpu : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new nibble::testing::TempDir();
    nibble::testing::make_tiny_models(dir_->path(), "gpt_oss", 40, {"mxfp4", "bf16"});
  }
  static void TearDownTestSuite() { delete dir_; }
  static model::ModelWeights load(const char* dtype) {
    return model::load_model(dir_->path() / dtype);
  }

  static nibble::testing::TempDir* dir_;
};
nibble::testing::TempDir* GptOssCpu::dir_ = nullptr;

std::vector<float> run(Backend& b, const std::vector<std::vector<std::int32_t>>& chunks) {
  return nibble::testing::logits_after_chunks(b, chunks, 64);
}
using nibble::testing::max_relative_difference;

const std::vector<std::int32_t> kPrompt = {17,    7936,  15855, 23774, 31693, 39612, 47531,
                                           55450, 63369, 71288, 79207, 87126, 95045, 2964,
                                           10883, 18802, 26721, 34640, 42559, 200000};

TEST_F(GptOssCpu, LoadsTheShippedLayout) {
  const model::ModelWeights w = load("mxfp4");
  EXPECT_EQ(w.quant.format, model::QuantFormat::Mxfp4);
  EXPECT_TRUE(w.quant.is_excluded("model.layers.0.self_attn"));
  EXPECT_EQ(w.config.layer_windows, (std::vector<int>{8, 0}));
  ASSERT_EQ(w.layers.size(), 2u);
  for (const auto& l : w.layers) {
    EXPECT_EQ(l.sinks.size(), 4u);
    EXPECT_EQ(l.o.bias.size(), 32u);
    EXPECT_EQ(l.router.bias.size(), 8u);
    ASSERT_EQ(l.experts.size(), 8u);
    for (const auto& e : l.experts) {
      EXPECT_TRUE(e.gate_up.is_mxfp4() && e.down.is_mxfp4());  // kept as shipped
      EXPECT_TRUE(e.gate_up.dense.empty() && e.down.dense.empty());
      EXPECT_EQ(e.gate_up.out_features, 128);
      EXPECT_EQ(e.gate_up.bias.size(), 128u);
      EXPECT_EQ(e.down.bias.size(), 32u);
    }
  }
  const model::ModelWeights b = load("bf16");
  EXPECT_EQ(b.quant.format, model::QuantFormat::None);
  EXPECT_EQ(b.layers[0].experts[0].gate_up.dense.size(), 128u * 32u);
}

TEST_F(GptOssCpu, Mxfp4ExpertsComputeExactlyTheirDequantizedValues) {
  model::ModelWeights mx = load("mxfp4");
  model::ModelWeights dense = mx;
  for (auto& layer : dense.layers)
    for (auto& e : layer.experts)
      for (model::Linear* l : {&e.gate_up, &e.down}) {
        l->dense.resize(std::size_t(l->out_features * l->in_features));
        for (std::int64_t r = 0; r < l->out_features; ++r)
          model::mxfp4::dequantize_row(l->mxfp4, r,
                                       std::span(l->dense).subspan(std::size_t(r * l->in_features),
                                                                   std::size_t(l->in_features)));
        l->mxfp4 = {};
      }
  auto a = make_cpu_backend(std::move(mx), 2);
  auto b = make_cpu_backend(std::move(dense), 1);
  EXPECT_EQ(run(*a, {kPrompt}), run(*b, {kPrompt}));
}

TEST_F(GptOssCpu, ChunksTokensAndDecodePastTheWindowAgree) {
  for (const char* dtype : {"mxfp4", "bf16"}) {
    SCOPED_TRACE(dtype);
    auto backend = make_cpu_backend(load(dtype), 2);
    const auto whole = run(*backend, {kPrompt});
    const std::vector<std::int32_t> a(kPrompt.begin(), kPrompt.begin() + 7),
        b(kPrompt.begin() + 7, kPrompt.begin() + 12), c(kPrompt.begin() + 12, kPrompt.end());
    EXPECT_LT(max_relative_difference(run(*backend, {a, b, c}), whole), 1e-5);
    std::vector<std::vector<std::int32_t>> singles;
    for (auto t : kPrompt) singles.push_back({t});
    EXPECT_LT(max_relative_difference(run(*backend, singles), whole), 1e-5);
    // Decoding 24 more tokens (to position 43, the window left far behind) from one prefill and
    // from a prefill of the prompt plus the first 10 decoded tokens gives the same tokens.
    const GreedyTrace one = greedy_decode(*backend, kPrompt, 24, 1);
    std::vector<std::int32_t> longer = kPrompt;
    for (int i = 0; i < 10; ++i) longer.push_back(one.steps[std::size_t(i)].token);
    const GreedyTrace two = greedy_decode(*backend, longer, 14, 1);
    for (int i = 0; i < 14; ++i)
      EXPECT_EQ(two.steps[std::size_t(i)].token, one.steps[std::size_t(i + 10)].token) << i;
  }
}

// One sliding layer (window 8): the last position p sees [p - 7, p]. Changing the token at p - 8
// leaves the logits bit for bit; changing the one at p - 7 moves them. Full attention sees both.
TEST_F(GptOssCpu, ASlidingLayerSeesExactlyItsWindow) {
  const auto one_layer = [&](int window) {
    model::ModelWeights w = load("bf16");
    w.config.num_layers = 1;
    w.config.layer_windows = {window};
    w.layers.resize(1);
    return make_cpu_backend(std::move(w), 2);
  };
  const int p = int(kPrompt.size()) - 1;
  auto changed_at = [&](int position) {
    std::vector<std::int32_t> x = kPrompt;
    x[std::size_t(position)] = 12345;
    return x;
  };
  auto sliding = one_layer(8);
  const auto base = run(*sliding, {kPrompt});
  EXPECT_EQ(run(*sliding, {changed_at(p - 8)}), base);
  EXPECT_EQ(run(*sliding, {changed_at(0)}), base);
  EXPECT_GT(max_relative_difference(run(*sliding, {changed_at(p - 7)}), base), 1e-4);
  auto full = one_layer(0);
  const auto full_base = run(*full, {kPrompt});
  EXPECT_GT(max_relative_difference(run(*full, {changed_at(p - 8)}), full_base), 1e-4);
  EXPECT_GT(max_relative_difference(full_base, base), 1e-4);
}

// The sliding layer keeps blocks of its own (a second block group): its table's entries before a
// step's window point at a poisoned block (every key and value NaN), as a pool that reused the
// freed block would leave them, through a chunked prefill and 25 decodes past the window. Were
// any of them read, a NaN would reach the logits; they match, bit for bit, a run whose tables
// stay whole. A bad entry inside the window is refused before anything runs.
TEST_F(GptOssCpu, EntriesBeforeTheWindowAreNeverRead) {
  auto backend = make_cpu_backend(load("bf16"), 2);
  ASSERT_EQ(backend->kv_sliding_window(), 8);
  constexpr int kBlock = 4, kPoison = 31;
  auto poisoned = backend->new_kv_cache(32, kBlock);
  auto whole = backend->new_kv_cache(32, kBlock);
  EXPECT_EQ(poisoned->sliding_window(), 8);
  auto& cache = dynamic_cast<cpu::CpuKvCache&>(*poisoned);
  for (auto* group : {&cache.k, &cache.v})
    for (auto& layer : *group) std::fill(layer.begin(), layer.end(), std::nanf(""));
  std::vector<int> full(12), window(12);  // 48 positions
  std::iota(full.begin(), full.end(), 0);
  std::iota(window.begin(), window.end(), 12);
  const int vocab = backend->config().vocab_size;
  std::vector<float> a(static_cast<std::size_t>(vocab)), b(a.size());
  std::vector<std::int32_t> tokens(kPrompt.begin(), kPrompt.begin() + 12);
  int start = 0;
  for (int step = 0; step < 27; ++step) {
    std::vector<int> cut = window;
    for (int i = 0; i < std::max(0, start - 8 + 1) / kBlock; ++i) cut[std::size_t(i)] = kPoison;
    BatchItem item{tokens, start, full, a};
    item.window_block_table = cut;
    backend->forward_batch(*poisoned, std::span(&item, 1));
    BatchItem reference{tokens, start, full, b};
    reference.window_block_table = window;
    backend->forward_batch(*whole, std::span(&reference, 1));
    ASSERT_EQ(a, b) << "step " << step << " from position " << start;
    ASSERT_TRUE(std::none_of(a.begin(), a.end(), [](float x) { return std::isnan(x); }));
    start += int(tokens.size());
    if (step == 0) {  // the prompt's second chunk, its first query's window before it
      tokens.assign(kPrompt.begin() + 12, kPrompt.end());
    } else {
      tokens = {std::int32_t(std::max_element(a.begin(), a.end()) - a.begin())};
    }
  }
  EXPECT_EQ(start, 45);  // 12 + 8 prompt tokens, 25 decodes
  // An entry the window needs is checked.
  std::vector<int> bad = window;
  bad[std::size_t((start - 8 + 1) / kBlock)] = -1;
  BatchItem item{tokens, start, full, a};
  item.window_block_table = bad;
  EXPECT_THROW(backend->forward_batch(*poisoned, std::span(&item, 1)), BackendError);
}

// The sinks take part: a sink far below every score is no sink at all (the model then differs
// from the checkpoint's sinks).
TEST_F(GptOssCpu, SinksMatter) {
  model::ModelWeights w = load("mxfp4");
  model::ModelWeights no_sinks = w;
  for (auto& l : no_sinks.layers) std::fill(l.sinks.begin(), l.sinks.end(), -1e4f);
  auto a = make_cpu_backend(std::move(w), 2);
  auto b = make_cpu_backend(std::move(no_sinks), 2);
  EXPECT_GT(max_relative_difference(run(*a, {kPrompt}), run(*b, {kPrompt})), 1e-4);
}

}  // namespace
}  // namespace nibble::backend
