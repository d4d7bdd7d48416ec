// gpt-oss on the CUDA backend against the CPU backend (FP32, the reference) on small random models
// (random_model.h's gpt_oss_test_config): a sliding window of 16 positions on layers 0 and 2,
// shorter than the prompts, full attention on layer 1, q/k/v/o biases, attention sinks, YaRN,
// a biased router keeping the top 4 of 8 experts then softmaxing over them, experts with biases,
// interleaved gate/up rows and the clamped SwiGLU; the experts in MXFP4 as shipped (grouped on the
// device, decode graphs), in NVFP4 (grouped, with their biases) and in BF16 (routed on the host),
// the rest in BF16 values. A prompt in one chunk and the decode steps after it, the prompt split
// into chunks, a batch of mixed sequences (first chunks, later chunks, decodes) against each
// alone (the sliding layers in blocks of their own, kv_layer_groups.h, entries before the window
// -1), and decode graphs against eager steps. Fresh random prompts each run (the seed is printed;
// NIBBLE_TEST_SEED reruns it).
// Tolerances as test_cuda_qwen3_next's: BF16 activations through a few layers land near 1e-2 of
// the FP32 logits; the GPU against itself within 1e-2. With top-4 routing a near tie of the 4th
// and 5th router scores now and then picks another expert on the GPU than on the CPU, so the
// median error is held to the tolerance (test_cuda_backend's Errors).
// Exits 77 (ctest: skipped) without a GPU.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <numeric>
#include <random>
#include <string>

#include "engine/backend/cpu/cpu_backend.h"
#include "engine/backend/cuda/cuda_backend.h"
#include "engine/backend/sampled_decode.h"
#include "kernels/nvfp4/bf16.h"
#include "tests/backend/chunk_logits.h"
#include "tests/backend/cuda_test_main.h"
#include "tests/backend/random_model.h"

namespace nibble::backend {
namespace {

using nibble::testing::random_tokens;
using nibble::testing::relative_l2;
using nibble::testing::split;

using model::ModelConfig;

std::uint64_t g_seed = 0;

constexpr int kWindow = 16;
constexpr double kLogitTolerance = 2.5e-2;  // CUDA (BF16 activations) against the CPU (FP32)
constexpr double kSelfTolerance = 1e-2;     // CUDA against CUDA along another path

enum class Experts { kMxfp4, kNvfp4, kBf16 };

struct Case {
  Experts experts;
};
std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  switch (info.param.experts) {
    case Experts::kMxfp4:
      return "Mxfp4Experts";
    case Experts::kNvfp4:
      return "Nvfp4Experts";
    case Experts::kBf16:
      return "Bf16Experts";
  }
  return "";
}

struct Pair {
  std::unique_ptr<Backend> cpu, gpu;
};

// Values as a BF16 checkpoint holds them (the device keeps dense weights, biases and the fused
// router's bias in BF16), so that both backends start from the same numbers.
void round_to_bf16(std::vector<float>& v) {
  for (float& x : v) x = nvfp4::bf16_to_float(nvfp4::float_to_bf16(x));
}
void round_to_bf16(model::Linear& l) {
  round_to_bf16(l.dense);
  round_to_bf16(l.bias);
}

model::ModelWeights make_weights(const Case& p) {
  const ModelConfig c = testing::gpt_oss_test_config(kWindow);
  auto w = testing::random_model(c, g_seed ^ (std::uint64_t(p.experts) * 977 + 40));
  round_to_bf16(w.embed);
  round_to_bf16(w.lm_head);
  for (auto& l : w.layers) {
    for (auto* linear : {&l.q, &l.k, &l.v, &l.o, &l.router}) round_to_bf16(*linear);
    round_to_bf16(l.sinks);
    for (auto& e : l.experts) {
      round_to_bf16(e.gate_up);
      round_to_bf16(e.down);
    }
  }
  if (p.experts == Experts::kMxfp4) testing::quantize_experts_mxfp4(w);
  if (p.experts == Experts::kNvfp4) testing::quantize_experts(w);
  return w;
}

Pair make_pair(const Case& p) {
  auto w = make_weights(p);
  auto copy = w;
  return {make_cpu_backend(std::move(copy), 0), make_cuda_backend(std::move(w))};
}

// Relative errors of a test's logits; with top-4 routing the median is held to the tolerance.
struct Errors {
  std::vector<double> all;
  void add(double e) { all.push_back(e); }
  void check(const char* what, double tolerance = kLogitTolerance) {
    std::vector<double> sorted = all;
    std::sort(sorted.begin(), sorted.end());
    const double median = sorted[sorted.size() / 2], worst = sorted.back();
    std::printf("  %s: relative L2 of logits: median %.3g, worst %.3g over %zu\n", what, median,
                worst, sorted.size());
    EXPECT_LT(median, tolerance) << what;
  }
};

class CudaGptOss : public ::testing::TestWithParam<Case> {};

// A random prompt longer than the window in one prefill chunk, then greedy decode steps (the
// CPU's choice fed to both) past further window boundaries: logits at every step. With MXFP4 or
// NVFP4 experts (routed on the device) the decode steps replay decode graphs.
TEST_P(CudaGptOss, PrefillAndDecodeMatchTheCpu) {
  const Case p = GetParam();
  Pair b = make_pair(p);
  const int V = b.cpu->config().vocab_size;
  std::mt19937 rng(std::uint32_t(g_seed) + 1);
  Errors errors;
  const int prompt_len = std::uniform_int_distribution<int>(2 * kWindow, 150)(rng);
  const auto prompt = random_tokens(rng, prompt_len, V);
  auto cs = b.cpu->new_sequence(256), gs = b.gpu->new_sequence(256);
  std::vector<float> cl(static_cast<std::size_t>(V)), gl(cl.size());
  b.cpu->forward(*cs, prompt, cl);
  b.gpu->forward(*gs, prompt, gl);
  errors.add(relative_l2(gl, cl));
  for (int step = 0; step < 2 * kWindow; ++step) {
    const std::int32_t next = std::int32_t(std::max_element(cl.begin(), cl.end()) - cl.begin());
    b.cpu->forward(*cs, std::span(&next, 1), cl);
    b.gpu->forward(*gs, std::span(&next, 1), gl);
    errors.add(relative_l2(gl, cl));
  }
  errors.check(("prompt " + std::to_string(prompt_len) + " + 32 decode steps").c_str());
  if (p.experts != Experts::kBf16) {
    EXPECT_GT(b.gpu->decode_graph_replays(), 0u) << "decode steps ran eagerly";
  }
}

// A prompt split into chunks at any boundary, window boundaries included, gives the logits of
// one chunk, on the GPU and against the CPU.
TEST_P(CudaGptOss, PrefillInChunksEqualsOneChunk) {
  const Case p = GetParam();
  Pair b = make_pair(p);
  std::mt19937 rng(std::uint32_t(g_seed) + 2);
  const auto prompt = random_tokens(rng, 70, b.cpu->config().vocab_size);
  const auto cpu_whole = nibble::testing::logits_after_chunks(*b.cpu, {prompt}, 128);
  const auto gpu_whole = nibble::testing::logits_after_chunks(*b.gpu, {prompt}, 128);
  Errors errors, self;
  errors.add(relative_l2(gpu_whole, cpu_whole));
  for (const auto& sizes : std::vector<std::vector<int>>{
           {23, 47}, {1, 69}, {16, 54}, {15, 2, 53}, {64, 6}, {3, 2, 60, 5}, {69, 1}}) {
    const auto chunked = nibble::testing::logits_after_chunks(*b.gpu, split(prompt, sizes), 128);
    errors.add(relative_l2(chunked, cpu_whole));
    self.add(relative_l2(chunked, gpu_whole));
  }
  errors.check("70 tokens in chunks against the CPU in one");
  self.check("70 tokens in chunks against one chunk", kSelfTolerance);
}

// Three sequences in one step of a shared cache, the sliding layers in blocks of their own (window
// tables, the entries before the window -1 as the engine leaves them): a first chunk, a later
// chunk and a decode token give each sequence's logits alone.
TEST_P(CudaGptOss, ABatchOfMixedSequencesEqualsEachAlone) {
  const Case p = GetParam();
  Pair b = make_pair(p);
  const int V = b.cpu->config().vocab_size;
  std::mt19937 rng(std::uint32_t(g_seed) + 3);
  const auto a = random_tokens(rng, 40, V), bb = random_tokens(rng, 70, V),
             c = random_tokens(rng, 21, V);
  // The sliding layers' blocks of their own (24..47), as the engine hands them out.
  auto cache = b.gpu->new_kv_cache(6 * 8, 16);
  ASSERT_EQ(cache->sliding_window(), kWindow);
  std::vector<int> ta(8), tb(8), tc(8), wa(8), wb(8), wc(8);
  std::iota(ta.begin(), ta.end(), 16);
  std::iota(tb.begin(), tb.end(), 0);
  std::iota(tc.begin(), tc.end(), 8);
  std::iota(wa.begin(), wa.end(), 40);
  std::iota(wb.begin(), wb.end(), 24);
  std::iota(wc.begin(), wc.end(), 32);
  std::vector<float> la(static_cast<std::size_t>(V)), lb(la.size()), lc(la.size());
  auto item = [](std::span<const std::int32_t> tokens, int start, const std::vector<int>& table,
                 const std::vector<int>& window, std::span<float> logits) {
    BatchItem i{tokens, start, table, logits};
    i.window_block_table = window;
    return i;
  };
  const BatchItem step1[] = {item(std::span(bb).first(50), 0, tb, wb, {}),
                             item(std::span(c).first(20), 0, tc, wc, {})};
  b.gpu->forward_batch(*cache, step1);
  // b's blocks wholly before the window of its position 50 went back to the pool: poisoned ids.
  std::vector<int> wb_later = wb;
  wb_later[0] = wb_later[1] = -1;
  const BatchItem step2[] = {item(std::span(c).subspan(20), 20, tc, wc, lc), item(a, 0, ta, wa, la),
                             item(std::span(bb).subspan(50), 50, tb, wb_later, lb)};
  b.gpu->forward_batch(*cache, step2);
  Errors errors, self;
  for (const auto& [got, tokens] : {std::pair{&la, &a}, std::pair{&lb, &bb}, std::pair{&lc, &c}}) {
    errors.add(relative_l2(*got, nibble::testing::logits_after_chunks(*b.cpu, {*tokens}, 128)));
    self.add(relative_l2(*got, nibble::testing::logits_after_chunks(*b.gpu, {*tokens}, 128)));
  }
  errors.check("3 sequences batched against the CPU alone");
  self.check("3 sequences batched against each alone", kSelfTolerance);
}

INSTANTIATE_TEST_SUITE_P(Models, CudaGptOss,
                         ::testing::Values(Case{Experts::kMxfp4}, Case{Experts::kNvfp4},
                                           Case{Experts::kBf16}),
                         case_name);

// `generate --sample-on-device` (greedy_decode_on_device): its private cache gives the sliding
// layers a block table of their own, so a prompt longer than the window decodes, and its greedy
// tokens are the argmax of the logits path's. Ties aside: a near tie of the top two logits may
// pick either, so each step compares the device's pick with the host's argmax only where the
// host's margin is clear of the GPU's own rounding.
TEST(CudaGptOssGenerate, GreedyOnTheDeviceDecodesPastTheWindow) {
  auto gpu = make_cuda_backend(make_weights(Case{Experts::kMxfp4}));
  const int V = gpu->config().vocab_size;
  std::mt19937 rng(std::uint32_t(g_seed) + 7);
  const auto prompt = random_tokens(rng, 3 * kWindow + 5, V);
  constexpr int kNew = 2 * kWindow;
  const SampledTrace trace = greedy_decode_on_device(*gpu, prompt, kNew, 0, {});
  ASSERT_EQ(trace.steps.size(), std::size_t(kNew));
  auto seq = gpu->new_sequence(int(prompt.size()) + kNew);
  std::vector<float> logits(static_cast<std::size_t>(V));
  gpu->forward(*seq, prompt, logits);
  int compared = 0;
  for (int step = 0; step < kNew; ++step) {
    std::vector<float> sorted = logits;
    std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<float>());
    const auto best = std::int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
    if (sorted[0] - sorted[1] > 1e-2f * std::max(1.0f, std::fabs(sorted[0]))) {
      EXPECT_EQ(trace.steps[std::size_t(step)].token, best) << "step " << step;
      ++compared;
    }
    const std::int32_t next = trace.steps[std::size_t(step)].token;  // follow the device's path
    gpu->forward(*seq, std::span(&next, 1), logits);
  }
  EXPECT_GT(compared, kNew / 2) << "too many near ties to compare";
}

// Decode steps of several sequences past the window replayed from decode graphs (MXFP4 experts
// route on the device, so the steps are capturable), the sliding layers through window tables
// whose entries before the window are -1, agree with the same steps run eagerly, within what
// eager execution agrees with itself (test_cuda_backend's graph test: 1e-3).
TEST(CudaGptOssGraphs, DecodeGraphsMatchEagerSteps) {
  const Case p{Experts::kMxfp4};
  auto graphs = make_cuda_backend(make_weights(p));
  auto eager = make_cuda_backend(make_weights(p));
  eager->set_decode_graphs(false);
  const int V = graphs->config().vocab_size;
  std::mt19937 rng(std::uint32_t(g_seed) + 5);
  constexpr int kSeqs = 3;
  std::vector<std::vector<std::int32_t>> prompts = {
      random_tokens(rng, 20, V), random_tokens(rng, 33, V), random_tokens(rng, 1, V)};
  auto gcache = graphs->new_kv_cache(2 * kSeqs * 8, 16);
  auto ecache = eager->new_kv_cache(2 * kSeqs * 8, 16);
  // Each sequence's full blocks 8 s.., its sliding blocks 24 + 8 s..
  std::vector<std::vector<int>> tables(kSeqs, std::vector<int>(8)), windows = tables;
  for (int s = 0; s < kSeqs; ++s) {
    std::iota(tables[std::size_t(s)].begin(), tables[std::size_t(s)].end(), 8 * s);
    std::iota(windows[std::size_t(s)].begin(), windows[std::size_t(s)].end(), 8 * (kSeqs + s));
  }
  // The window tables as the engine leaves them for a row at `position`: -1 before its window.
  auto window_at = [&](int s, int position) {
    std::vector<int> w = windows[std::size_t(s)];
    for (int i = 0; i < std::max(0, position - kWindow + 1) / 16; ++i) w[std::size_t(i)] = -1;
    return w;
  };
  for (auto* pair : {&graphs, &eager}) {
    auto& cache = pair == &graphs ? gcache : ecache;
    std::vector<BatchItem> items;
    for (int s = 0; s < 2; ++s) {
      items.push_back({prompts[std::size_t(s)], 0, tables[std::size_t(s)], {}});
      items.back().window_block_table = windows[std::size_t(s)];
    }
    (*pair)->forward_batch(*cache, items);
  }
  std::vector<int> length = {20, 33, 0};
  std::vector<std::int32_t> next = {7, 11, prompts[2][0]};  // sequence 2: a one-token prompt
  double worst = 0;
  for (int step = 0; step < kWindow + 4; ++step) {
    std::vector<std::vector<float>> gl(kSeqs, std::vector<float>(std::size_t(V))), el = gl;
    std::vector<std::vector<int>> now(kSeqs);
    std::vector<BatchItem> gitems, eitems;
    for (int s = 0; s < kSeqs; ++s) {
      const std::span<const std::int32_t> tok(&next[std::size_t(s)], 1);
      now[std::size_t(s)] = window_at(s, length[std::size_t(s)]);
      gitems.push_back({tok, length[std::size_t(s)], tables[std::size_t(s)], gl[std::size_t(s)]});
      eitems.push_back({tok, length[std::size_t(s)], tables[std::size_t(s)], el[std::size_t(s)]});
      gitems.back().window_block_table = eitems.back().window_block_table = now[std::size_t(s)];
    }
    graphs->forward_batch(*gcache, gitems);
    eager->forward_batch(*ecache, eitems);
    for (int s = 0; s < kSeqs; ++s) {
      worst = std::max(worst, relative_l2(gl[std::size_t(s)], el[std::size_t(s)]));
      const auto& l = el[std::size_t(s)];
      next[std::size_t(s)] = std::int32_t(std::max_element(l.begin(), l.end()) - l.begin());
      ++length[std::size_t(s)];
    }
  }
  std::printf("  3 sequences, %d decode steps: graph vs eager relative L2 %.3g\n", kWindow + 4,
              worst);
  EXPECT_LT(worst, 1e-3);
  EXPECT_GE(graphs->decode_graph_replays(), std::uint64_t(kWindow + 4));
  EXPECT_EQ(eager->decode_graph_replays(), 0u);
}

// The routing forms agree: NVFP4 experts routed on the host (CudaMoeOptions::host_routing, each
// expert a linear with its bias, clamped_swiglu_interleaved and a linear) against the same experts
// grouped on the device (the fused kernels with the BF16 bias tables), on a prompt and decode
// steps; and MXFP4 experts, which only the grouped kernels run, stay on the device under the
// switch. Top-4 routing: the median within the GPU's self tolerance.
TEST(CudaGptOssRouting, HostRoutedExpertsMatchTheDevicesGroupedOnes) {
  CudaOptions host;
  host.moe.host_routing = true;
  auto device = make_cuda_backend(make_weights(Case{Experts::kNvfp4}));
  auto routed = make_cuda_backend(make_weights(Case{Experts::kNvfp4}), host);
  const int V = device->config().vocab_size;
  std::mt19937 rng(std::uint32_t(g_seed) + 6);
  const auto prompt = random_tokens(rng, 40, V);
  auto ds = device->new_sequence(128), hs = routed->new_sequence(128);
  std::vector<float> dl(static_cast<std::size_t>(V)), hl(dl.size());
  device->forward(*ds, prompt, dl);
  routed->forward(*hs, prompt, hl);
  Errors errors;
  errors.add(relative_l2(hl, dl));
  for (int step = 0; step < 8; ++step) {
    const std::int32_t next = std::int32_t(std::max_element(dl.begin(), dl.end()) - dl.begin());
    device->forward(*ds, std::span(&next, 1), dl);
    routed->forward(*hs, std::span(&next, 1), hl);
    errors.add(relative_l2(hl, dl));
  }
  errors.check("NVFP4 experts routed on the host against grouped on the device", kSelfTolerance);
  EXPECT_GT(device->decode_graph_replays(), 0u);
  EXPECT_EQ(routed->decode_graph_replays(), 0u);  // host routing: no graphs
  auto mxfp4 = make_cuda_backend(make_weights(Case{Experts::kMxfp4}), host);
  auto ms = mxfp4->new_sequence(128);
  mxfp4->forward(*ms, prompt, dl);
  const std::int32_t next = 5;
  mxfp4->forward(*ms, std::span(&next, 1), dl);
  EXPECT_GT(mxfp4->decode_graph_replays(), 0u) << "MXFP4 experts left the device";
}

// The CUDA backend keeps the sliding layers in a block group of their own, as the CPU backend
// (kv_layer_groups.h): the engine frees their blocks as they leave the window, and a block holds
// one group's layers (the larger group: the 2 sliding layers of 3). An item without its window
// table is refused before anything runs.
TEST(CudaGptOssCache, TheSlidingLayersHaveABlockGroupOfTheirOwn) {
  Pair b = make_pair(Case{Experts::kMxfp4});
  EXPECT_EQ(b.gpu->kv_sliding_window(), kWindow);
  EXPECT_EQ(b.cpu->kv_sliding_window(), kWindow);
  // 2 layers x 16 positions x 2 KV heads x (K and V of 64 BF16 values).
  EXPECT_EQ(b.gpu->kv_block_bytes(16), 2u * 16 * 2 * 2 * 64 * 2);
  EXPECT_TRUE(b.gpu->logits_at_several_positions());
  auto cache = b.gpu->new_kv_cache(4, 16);
  EXPECT_EQ(cache->sliding_window(), kWindow);
  const std::vector<std::int32_t> prompt = {1, 2, 3};
  const std::vector<int> table = {0};
  BatchItem missing{prompt, 0, table, {}};
  EXPECT_THROW(b.gpu->forward_batch(*cache, std::span(&missing, 1)), BackendError);
}

}  // namespace
}  // namespace nibble::backend

int main(int argc, char** argv) {
  return nibble::backend::testing::run_cuda_tests(argc, argv, nibble::backend::g_seed, 40);
}
