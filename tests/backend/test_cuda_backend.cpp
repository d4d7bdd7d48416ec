// The CUDA backend against the CPU backend (FP32, the reference) on random models of every
// architecture, dense and NVFP4, with fresh random prompts, batches and block tables each run
// (the seed is printed). The attention kernels alone: tests/gpu/test_attention_gpu.cpp.
// Tolerances: BF16 activations through a few layers land near 1e-2 of the FP32 logits
// (docs/performance.md, "Method": BF16 operands 1e-3..1e-2 per operation).
// Exits 77 (ctest: skipped) without a GPU.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <random>
#include <set>

#include "engine/backend/cpu/cpu_backend.h"
#include "engine/backend/cuda/cuda_backend.h"
#include "engine/backend/cuda/step_layout.h"
#include "engine/backend/greedy_decode.h"
#include "engine/backend/sampled_decode.h"
#include "engine/model/quantize_on_load.h"
#include "kernels/attention/paged_attention.h"
#include "kernels/nvfp4/bf16.h"
#include "kernels/nvfp4/nvfp4_ref.h"
#include "kernels/sampling/sampling_ref.h"
#include "tests/backend/chunk_logits.h"
#include "tests/backend/cuda_test_main.h"
#include "tests/backend/random_model.h"

namespace nibble::backend {
namespace {

using nibble::testing::random_tokens;
using nibble::testing::relative_l2;

using model::Arch;
using model::ModelConfig;

std::uint64_t g_seed = 0;

// MoE models route each token to top_k of 8 experts; top_k 0 means all 8 (see Errors below).
ModelConfig gpu_config(Arch arch, int head_dim, int top_k = 0) {
  return testing::gpu_test_config(arch, head_dim, top_k);
}

using testing::quantize_experts;
using testing::quantize_group;

struct Pair {
  std::unique_ptr<Backend> cpu, gpu;
};
// nvfp4: quantize the projections per tensor (per_tensor) or per group (fusable on the GPU).
// fp8_kv: the GPU keeps its KV caches in FP8 (kernels/attention/kv_fp8_ref.h).
Pair make_pair(const ModelConfig& c, bool nvfp4, bool per_tensor = false, bool fp8_kv = false) {
  auto weights = testing::random_model(c, g_seed ^ std::uint64_t(c.arch) * 7919);
  if (nvfp4 && !per_tensor) {
    for (auto& layer : weights.layers) {
      quantize_group({&layer.q, &layer.k, &layer.v});
      if (!layer.moe) quantize_group({&layer.gate, &layer.up});
      for (auto& e : layer.experts) quantize_group({&e.gate, &e.up});
    }
  }
  if (nvfp4) model::quantize_weights_nvfp4(weights);  // the rest (o, down), per tensor
  auto copy = weights;
  Pair pair{make_cpu_backend(std::move(copy), 0), make_cuda_backend(std::move(weights))};
  if (fp8_kv) {
    EXPECT_TRUE(pair.gpu->set_kv_cache_dtype(KvCacheDtype::kFp8));
    EXPECT_EQ(pair.gpu->kv_cache_dtype(), "fp8");
  }
  return pair;
}

struct Case {
  Arch arch;
  int head_dim;
  bool nvfp4;
  int top_k = 0;
  bool per_tensor = false;  // NVFP4 global factors per tensor: q/k/v and gate/up run unfused
  bool fp8_kv = false;      // the GPU's KV cache in FP8
};
std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  static const char* const kNames[] = {"Llama", "Mistral", "Qwen2", "Qwen3", "Qwen3Moe"};
  return std::string(kNames[int(info.param.arch)]) + "D" + std::to_string(info.param.head_dim) +
         (info.param.nvfp4 ? "Nvfp4" : "Bf16") +
         (info.param.top_k ? "Top" + std::to_string(info.param.top_k) : "") +
         (info.param.per_tensor ? "PerTensor" : "") + (info.param.fp8_kv ? "Fp8Kv" : "");
}

class CudaBackendVsCpu : public ::testing::TestWithParam<Case> {};

constexpr double kLogitTolerance = 2.5e-2;
// An FP8 cache adds E4M3's rounding (3 mantissa bits: ~2^-5 relative RMS) to every key and value.
constexpr double kFp8KvLogitTolerance = 6e-2;

// Relative errors of the logits of a test's steps. Every one must be within the tolerance, except
// with top-k routing: BF16 activations move router scores by ~1e-2, so where the k-th and the next
// expert nearly tie the GPU picks another expert than the CPU now and then, and that token's
// output differs by far more than rounding (seen: 2.7e-2). There the median must be within it
// (the routing itself is shared code, tested exactly in test_moe_routing); with all experts
// active (top_k 0) nothing is picked and every step must match.
struct Errors {
  std::vector<double> all;
  void add(double e) { all.push_back(e); }
  void check(const Case& p, const char* what) {
    std::vector<double> sorted = all;
    std::sort(sorted.begin(), sorted.end());
    const double median = sorted[sorted.size() / 2], worst = sorted.back();
    std::printf("  %s: relative L2 of logits: median %.3g, worst %.3g over %zu\n", what, median,
                worst, sorted.size());
    EXPECT_LT(p.top_k > 0 ? median : worst, p.fp8_kv ? kFp8KvLogitTolerance : kLogitTolerance);
  }
};

// One sequence: a random prompt in one prefill, then greedy decode steps (the CPU's choice fed
// to both), logits compared at every step.
TEST_P(CudaBackendVsCpu, PrefillAndDecodeMatchTheCpu) {
  const Case p = GetParam();
  const ModelConfig c = gpu_config(p.arch, p.head_dim, p.top_k);
  Pair b = make_pair(c, p.nvfp4, p.per_tensor, p.fp8_kv);
  std::mt19937 rng(std::uint32_t(g_seed) + 1);
  Errors errors;
  const int prompt_len = std::uniform_int_distribution<int>(1, 300)(rng);
  auto prompt = random_tokens(rng, prompt_len, c.vocab_size);
  auto cs = b.cpu->new_sequence(512), gs = b.gpu->new_sequence(512);
  std::vector<float> cl(std::size_t(c.vocab_size)), gl(cl.size());
  b.cpu->forward(*cs, prompt, cl);
  b.gpu->forward(*gs, prompt, gl);
  errors.add(relative_l2(gl, cl));
  for (int step = 0; step < 8; ++step) {
    const std::int32_t next = std::int32_t(std::max_element(cl.begin(), cl.end()) - cl.begin());
    b.cpu->forward(*cs, std::span(&next, 1), cl);
    b.gpu->forward(*gs, std::span(&next, 1), gl);
    errors.add(relative_l2(gl, cl));
  }
  errors.check(p, ("prompt " + std::to_string(prompt_len) + " + 8 decode steps").c_str());
  EXPECT_EQ(gs->length(), prompt_len + 8);
}

// The serving path: one paged cache, block tables drawn from a shuffled pool, a first step of
// prompts of random lengths (some items wanting no logits), then a step mixing decodes with the
// next chunk of a longer prompt. The CPU backend runs the same steps on its own cache.
TEST_P(CudaBackendVsCpu, BatchedPagedStepsMatchTheCpu) {
  const Case p = GetParam();
  const ModelConfig c = gpu_config(p.arch, p.head_dim, p.top_k);
  Pair b = make_pair(c, p.nvfp4, p.per_tensor, p.fp8_kv);
  std::mt19937 rng(std::uint32_t(g_seed) + 2);
  Errors errors;
  constexpr int kBlock = 16, kBlocks = 160, kSeqs = 6;
  auto ccache = b.cpu->new_kv_cache(kBlocks, kBlock), gcache = b.gpu->new_kv_cache(kBlocks, kBlock);
  std::vector<int> pool(kBlocks);
  std::iota(pool.begin(), pool.end(), 0);
  std::shuffle(pool.begin(), pool.end(), rng);
  std::vector<std::vector<int>> tables(kSeqs);
  std::vector<std::vector<std::int32_t>> prompts(kSeqs);
  for (int s = 0; s < kSeqs; ++s) {
    tables[std::size_t(s)].assign(pool.begin() + s * 24, pool.begin() + (s + 1) * 24);
    prompts[std::size_t(s)] =
        random_tokens(rng, std::uniform_int_distribution<int>(1, 150)(rng), c.vocab_size);
  }
  const std::size_t V = std::size_t(c.vocab_size);
  auto run_step = [&](const std::vector<BatchItem>& gpu_items,
                      const std::vector<BatchItem>& cpu_items) {
    b.cpu->forward_batch(*ccache, cpu_items);
    b.gpu->forward_batch(*gcache, gpu_items);
  };
  // Step 1: every prompt but the last in full; the last one's first half only, without logits.
  std::vector<std::vector<float>> cl(kSeqs, std::vector<float>(V)), gl = cl;
  std::vector<BatchItem> citems, gitems;
  const auto& longest = prompts[kSeqs - 1];
  const std::size_t half = longest.size() / 2 + 1;
  for (int s = 0; s < kSeqs; ++s) {
    const auto& pr = prompts[std::size_t(s)];
    const bool partial = s == kSeqs - 1 && half < pr.size();
    std::span<const std::int32_t> toks(pr.data(), partial ? half : pr.size());
    citems.push_back({toks, 0, tables[std::size_t(s)],
                      partial ? std::span<float>() : std::span<float>(cl[std::size_t(s)])});
    gitems.push_back({toks, 0, tables[std::size_t(s)],
                      partial ? std::span<float>() : std::span<float>(gl[std::size_t(s)])});
  }
  run_step(gitems, citems);
  for (int s = 0; s + 1 < kSeqs; ++s)
    errors.add(relative_l2(gl[std::size_t(s)], cl[std::size_t(s)]));
  // Step 2: one decode token for each finished prompt, the rest of the last prompt.
  std::vector<std::int32_t> next(kSeqs);
  citems.clear();
  gitems.clear();
  for (int s = 0; s < kSeqs; ++s) {
    const auto& pr = prompts[std::size_t(s)];
    if (s == kSeqs - 1 && half < pr.size()) {
      std::span<const std::int32_t> rest(pr.data() + half, pr.size() - half);
      citems.push_back({rest, int(half), tables[std::size_t(s)], cl[std::size_t(s)]});
      gitems.push_back({rest, int(half), tables[std::size_t(s)], gl[std::size_t(s)]});
      continue;
    }
    const auto& l = cl[std::size_t(s)];
    next[std::size_t(s)] = std::int32_t(std::max_element(l.begin(), l.end()) - l.begin());
    std::span<const std::int32_t> tok(&next[std::size_t(s)], 1);
    citems.push_back({tok, int(pr.size()), tables[std::size_t(s)], cl[std::size_t(s)]});
    gitems.push_back({tok, int(pr.size()), tables[std::size_t(s)], gl[std::size_t(s)]});
  }
  run_step(gitems, citems);
  for (int s = 0; s < kSeqs; ++s) errors.add(relative_l2(gl[std::size_t(s)], cl[std::size_t(s)]));
  errors.check(p, "6 sequences, 2 steps");
}

INSTANTIATE_TEST_SUITE_P(
    Models, CudaBackendVsCpu,
    ::testing::Values(Case{Arch::Llama, 64, false}, Case{Arch::Llama, 128, true},
                      Case{Arch::Qwen2, 64, false}, Case{Arch::Qwen3, 128, false},
                      Case{Arch::Qwen3, 128, true}, Case{Arch::Qwen3Moe, 64, false},
                      Case{Arch::Qwen3Moe, 128, true}, Case{Arch::Qwen3Moe, 128, true, 2},
                      Case{Arch::Qwen3Moe, 64, true, 0, true}, Case{Arch::Llama, 64, true, 0, true},
                      Case{Arch::Qwen3, 32, true}, Case{Arch::Llama, 128, true, 0, false, true},
                      Case{Arch::Qwen3, 128, false, 0, false, true},
                      Case{Arch::Llama, 64, false, 0, false, true}),
    case_name);

// A prefill long and wide enough that the linears take the large-M paths: on sm_90 gate_up (8192
// x 1024, 64 weight groups) and down (split over K) run the warpgroup-MMA tiles at M = 520 (see
// kernels/nvfp4_linear.h), elsewhere the 64/128-row mma.sync tiles. One layer keeps the FP32 CPU
// reference to a few seconds.
TEST(CudaBackend, LargePrefillMatchesTheCpu) {
  ModelConfig c = gpu_config(Arch::Llama, 128);
  c.hidden_size = 1024;
  c.intermediate_size = 4096;
  c.num_layers = 1;
  const Case p{Arch::Llama, 128, true};
  Pair b = make_pair(c, true);
  std::mt19937 rng(std::uint32_t(g_seed) + 3);
  const int prompt_len = std::uniform_int_distribution<int>(513, 600)(rng);
  const auto prompt = random_tokens(rng, prompt_len, c.vocab_size);
  auto cs = b.cpu->new_sequence(1024), gs = b.gpu->new_sequence(1024);
  std::vector<float> cl(std::size_t(c.vocab_size)), gl(cl.size());
  b.cpu->forward(*cs, prompt, cl);
  b.gpu->forward(*gs, prompt, gl);
  Errors errors;
  errors.add(relative_l2(gl, cl));
  errors.check(p, ("prompt " + std::to_string(prompt_len) + ", hidden 1024").c_str());
}

TEST(CudaBackend, BadCallsThrowAndChangeNothing) {
  const ModelConfig c = gpu_config(Arch::Qwen3, 64);
  Pair b = make_pair(c, false);
  auto cache = b.gpu->new_kv_cache(8, 16);
  auto other = b.cpu->new_kv_cache(8, 16);
  std::vector<float> logits(std::size_t(c.vocab_size)), again(logits.size());
  const std::vector<std::int32_t> prompt = {1, 2, 3, 4, 5};
  const std::vector<int> table = {3}, bad_table = {9};
  const std::vector<std::int32_t> bad_token = {1, 1000};
  EXPECT_THROW(b.gpu->forward_batch(*cache, std::vector<BatchItem>{{prompt, 0, bad_table, logits}}),
               BackendError);
  EXPECT_THROW(b.gpu->forward_batch(*cache, std::vector<BatchItem>{{bad_token, 0, table, logits}}),
               BackendError);
  EXPECT_THROW(b.gpu->forward_batch(*other, std::vector<BatchItem>{{prompt, 0, table, logits}}),
               BackendError);
  auto seq = b.gpu->new_sequence(8);
  EXPECT_THROW(b.cpu->forward(*seq, prompt, logits), BackendError);
  // After the failures the cache still works and gives the logits a fresh one gives.
  b.gpu->forward_batch(*cache, std::vector<BatchItem>{{prompt, 0, table, logits}});
  b.gpu->forward(*seq, prompt, again);
  EXPECT_EQ(logits, again);
}

// ---- device sampling ------------------------------------------------------------------------

// Decode steps sampled on the device (BatchItem::sample) against the CPU reference of the
// sampling pass applied to the logits the same backend returns for the same step on a twin cache
// (same prefill, same tokens fed): BF16 weights, so both runs compute the same logits bit for bit
// (graph replay or eager alike) and only the sampling differs. Rows mix greedy and seeded
// requests with filters, penalties, a token bitmask and top logprobs. Greedy ids and top-logprob
// ids must be identical; a seeded draw may differ only where two candidates are within rounding
// (expf/logf differ by an ulp between the device and glibc): then the device's token must be one
// the reference keeps, and that may happen at most once per case.
struct SamplingCase {
  Arch arch;
  bool graphs;
};

class DeviceSamplingVsHost : public ::testing::TestWithParam<SamplingCase> {};

TEST_P(DeviceSamplingVsHost, SampledTokensMatchTheReferenceOnTheSameLogits) {
  const SamplingCase p = GetParam();
  const ModelConfig c = gpu_config(p.arch, 64, p.arch == Arch::Qwen3Moe ? 2 : 0);
  auto gpu = make_cuda_backend(testing::random_model(c, g_seed ^ 0x5a4d504cu));
  ASSERT_TRUE(gpu->samples_on_device());
  std::mt19937 rng(std::uint32_t(g_seed) + 5);
  constexpr int kBlock = 16, kSeqs = 9, kTable = 8, kSteps = 5;
  auto host_cache = gpu->new_kv_cache(kSeqs * kTable, kBlock);
  auto device_cache = gpu->new_kv_cache(kSeqs * kTable, kBlock);
  const std::size_t V = std::size_t(c.vocab_size);
  std::vector<std::vector<int>> tables(kSeqs);
  std::vector<std::vector<std::int32_t>> tokens(kSeqs);
  std::vector<BatchItem> items;
  for (int s = 0; s < kSeqs; ++s) {
    for (int b = 0; b < kTable; ++b) tables[std::size_t(s)].push_back(s * kTable + b);
    tokens[std::size_t(s)] =
        random_tokens(rng, std::uniform_int_distribution<int>(1, 60)(rng), c.vocab_size);
    items.push_back({tokens[std::size_t(s)], 0, tables[std::size_t(s)], {}});
  }
  gpu->set_decode_graphs(p.graphs);
  gpu->forward_batch(*host_cache, items);
  gpu->forward_batch(*device_cache, items);

  // Row parameters: greedy, seeded with every filter, penalties over the sequence's tokens.
  std::vector<kernels::SamplingRow> rows(kSeqs);
  std::vector<std::uint32_t> mask((V + 31) / 32, 0);
  for (std::size_t t = 0; t < V; t += 3) mask[t / 32] |= 1u << (t % 32);
  for (int s = 0; s < kSeqs; ++s) {
    kernels::SamplingRow& r = rows[std::size_t(s)];
    r.temperature = s % 3 == 0 ? 0.0f : 0.6f + 0.2f * float(s % 4);
    r.top_k = s % 4 == 1 ? 40 : 0;
    r.top_p = s % 5 == 2 ? 0.9f : 1.0f;
    r.min_p = s == 4 ? 0.05f : 0.0f;
    r.repetition_penalty = s % 2 == 1 ? 1.3f : 1.0f;
    r.frequency_penalty = s == 5 ? 0.7f : 0.0f;
    r.presence_penalty = s == 7 ? -0.4f : 0.0f;
    r.num_top_logprobs = s % 3 == 1 ? 5 : 0;
    r.seed = std::uint64_t(rng()) << 20 | std::uint64_t(s);
  }
  int mismatches = 0;
  for (int step = 0; step < kSteps; ++step) {
    std::vector<std::vector<float>> logits(kSeqs, std::vector<float>(V));
    std::vector<std::vector<kernels::SamplingPenalty>> penalties(kSeqs);
    std::vector<kernels::SamplingRequest> requests(kSeqs);
    std::vector<kernels::SampledRow> results(kSeqs, kernels::SampledRow{-1, NAN});
    std::vector<std::vector<kernels::TopLogprob>> tops(kSeqs, std::vector<kernels::TopLogprob>(5));
    std::vector<std::int32_t> last(kSeqs);
    std::vector<BatchItem> host_items, device_items;
    for (int s = 0; s < kSeqs; ++s) {
      auto& seq = tokens[std::size_t(s)];
      last[std::size_t(s)] = seq.back();
      kernels::SamplingRow& r = rows[std::size_t(s)];
      r.position = std::uint64_t(step);
      for (std::int32_t t : std::set<std::int32_t>(seq.begin(), seq.end()))
        penalties[std::size_t(s)].push_back(
            {t, std::int32_t(std::count(seq.begin(), seq.end(), t))});
      kernels::SamplingRequest& q = requests[std::size_t(s)];
      q.params = r;
      q.penalties = penalties[std::size_t(s)];
      if (s == 8) q.bitmask = mask;
      q.result = &results[std::size_t(s)];
      q.top = tops[std::size_t(s)];
      const int start = int(seq.size()) - 1;
      const std::span<const std::int32_t> one(&last[std::size_t(s)], 1);
      host_items.push_back({one, start, tables[std::size_t(s)], logits[std::size_t(s)]});
      device_items.push_back({one, start, tables[std::size_t(s)], {}, &q});
    }
    gpu->forward_batch(*host_cache, host_items);
    const std::uint64_t replays = gpu->decode_graph_replays();
    gpu->forward_batch(*device_cache, device_items);
    if (p.graphs && p.arch != Arch::Qwen3Moe) {
      EXPECT_EQ(gpu->decode_graph_replays(), replays + 1) << "the sampled step did not replay";
    }
    for (int s = 0; s < kSeqs; ++s) {
      const kernels::SamplingRequest& q = requests[std::size_t(s)];
      std::vector<kernels::TopLogprob> want_top;
      const kernels::SampledRow want = kernels::sample_row_reference(
          logits[std::size_t(s)], q.params, q.penalties, q.bitmask, want_top);
      const kernels::SampledRow got = results[std::size_t(s)];
      if (got.token != want.token) {
        const auto kept = kernels::kept_tokens_reference(logits[std::size_t(s)], q.params,
                                                         q.penalties, q.bitmask);
        EXPECT_GT(q.params.temperature, 0.0f) << "greedy row " << s << " step " << step;
        EXPECT_TRUE(std::binary_search(kept.begin(), kept.end(), got.token))
            << "row " << s << " step " << step << ": token " << got.token << " is not kept";
        ++mismatches;
      } else {
        EXPECT_NEAR(got.logprob, want.logprob, 2e-4) << "row " << s << " step " << step;
      }
      for (std::size_t j = 0; j < want_top.size(); ++j) {
        EXPECT_EQ(tops[std::size_t(s)][j].token, want_top[j].token) << "row " << s;
        EXPECT_NEAR(tops[std::size_t(s)][j].logprob, want_top[j].logprob, 2e-4) << "row " << s;
      }
      if (s == 8) {
        EXPECT_EQ(got.token % 3, 0) << "a token the bitmask forbids";
      }
      tokens[std::size_t(s)].push_back(got.token);  // both caches go on with the device's choice
    }
  }
  EXPECT_LE(mismatches, 1);
}

INSTANTIATE_TEST_SUITE_P(Models, DeviceSamplingVsHost,
                         ::testing::Values(SamplingCase{Arch::Llama, true},
                                           SamplingCase{Arch::Llama, false},
                                           SamplingCase{Arch::Qwen3Moe, false}),
                         [](const ::testing::TestParamInfo<SamplingCase>& info) {
                           return std::string(info.param.arch == Arch::Llama ? "Llama"
                                                                             : "Qwen3Moe") +
                                  (info.param.graphs ? "Graphs" : "Eager");
                         });

// generate --sample-on-device's loop (the serving path's greedy pick on the device) against
// greedy_decode's full logits on the same backend: the same forward (graph replays of bucket 1,
// sampled and not), so the same tokens, and each step's log-probability is the log-softmax of the
// logits the host path saw.
TEST(CudaBackend, DeviceGreedyDecodeMatchesTheHostLogitsPath) {
  for (Arch arch : {Arch::Llama, Arch::Qwen3Moe}) {
    const ModelConfig c = gpu_config(arch, 64, arch == Arch::Qwen3Moe ? 2 : 0);
    auto gpu = make_cuda_backend(testing::random_model(c, g_seed ^ 0x67726479u));
    const std::vector<std::int32_t> prompt = {3, 1, 4, 1, 5, 9, 2, 6};
    std::vector<std::vector<float>> logits;
    auto host = greedy_decode(
        *gpu, prompt, 12, 3,
        [&](int, const StepLogits&, const std::vector<float>& l) { logits.push_back(l); });
    auto device = greedy_decode_on_device(*gpu, prompt, 12, 3);
    ASSERT_EQ(device.steps.size(), host.steps.size());
    for (std::size_t i = 0; i < host.steps.size(); ++i) {
      SCOPED_TRACE(::testing::Message() << "arch " << int(arch) << " step " << i);
      ASSERT_EQ(device.steps[i].token, host.steps[i].token);
      ASSERT_EQ(device.steps[i].top.size(), 3u);
      const std::vector<float>& l = logits[i];
      const float top = *std::max_element(l.begin(), l.end());
      double sum = 0;
      for (float v : l) sum += std::exp(double(v) - top);
      for (int j = 0; j < 3; ++j) {
        const auto& t = device.steps[i].top[std::size_t(j)];
        EXPECT_EQ(t.token, host.steps[i].top[std::size_t(j)].first);
        EXPECT_NEAR(t.logprob, double(l[std::size_t(t.token)]) - top - std::log(sum), 1e-3);
      }
      EXPECT_EQ(device.steps[i].logprob, device.steps[i].top[0].logprob);
    }
  }
}

// Structured outputs' masks written by the host while the forward runs
// (forward_batch_overlapping: a forward-only graph, then the sampling pass launched eagerly after
// the host work) against the same steps with the masks written before (forward_batch: the
// sampled graph packs them): a BF16 model, twin caches, the same sampling rows, so the tokens must
// be identical. Masks start all zeros: a backend that read them before the host
// work wrote them would sample from nothing. Graphs on and off, at a bucket's size and between.
TEST(CudaBackend, OverlappedMasksSampleLikeMasksWrittenBefore) {
  const ModelConfig c = gpu_config(Arch::Llama, 64, 0);
  auto gpu = make_cuda_backend(testing::random_model(c, g_seed ^ 0x6f766c70u));
  ASSERT_TRUE(gpu->samples_on_device());
  const std::size_t V = std::size_t(c.vocab_size), words = (V + 31) / 32;
  std::mt19937 rng(std::uint32_t(g_seed) + 9);
  for (const bool graphs : {true, false}) {
    for (const int n : {1, 3, 8}) {
      constexpr int kBlock = 16, kTable = 8, kSteps = 4;
      const auto count = static_cast<std::size_t>(n);
      auto serial_cache = gpu->new_kv_cache(n * kTable, kBlock);
      auto overlap_cache = gpu->new_kv_cache(n * kTable, kBlock);
      std::vector<std::vector<int>> tables(count);
      std::vector<std::vector<std::int32_t>> tokens(count);
      std::vector<BatchItem> prefill;
      for (int s = 0; s < n; ++s) {
        for (int b = 0; b < kTable; ++b) tables[std::size_t(s)].push_back(s * kTable + b);
        tokens[std::size_t(s)] =
            random_tokens(rng, std::uniform_int_distribution<int>(1, 50)(rng), c.vocab_size);
        prefill.push_back({tokens[std::size_t(s)], 0, tables[std::size_t(s)], {}});
      }
      gpu->set_decode_graphs(graphs);
      gpu->forward_batch(*serial_cache, prefill);
      gpu->forward_batch(*overlap_cache, prefill);
      for (int step = 0; step < kSteps; ++step) {
        // Row s allows tokens t with (t + step + s) % 5 == 0, except the last row (no mask).
        std::vector<std::vector<std::uint32_t>> want(count, std::vector<std::uint32_t>(words, 0));
        for (int s = 0; s < n; ++s)
          for (std::size_t t = 0; t < V; ++t)
            if ((t + std::size_t(step + s)) % 5 == 0)
              want[std::size_t(s)][t / 32] |= 1u << (t % 32);
        std::vector<std::vector<std::uint32_t>> late(count, std::vector<std::uint32_t>(words, 0));
        std::vector<kernels::SamplingRequest> serial_q(count), overlap_q(count);
        std::vector<kernels::SampledRow> serial_r(count), overlap_r(count);
        std::vector<std::int32_t> last(count);
        std::vector<BatchItem> serial_items, overlap_items;
        for (int s = 0; s < n; ++s) {
          const auto i = std::size_t(s);
          last[i] = tokens[i].back();
          kernels::SamplingRow r;
          r.temperature = s % 2 == 0 ? 0.0f : 0.9f;
          r.seed = 1000 + std::uint64_t(s);
          r.position = std::uint64_t(step);
          const bool masked = n == 1 || s + 1 < n;
          serial_q[i].params = overlap_q[i].params = r;
          if (masked) {
            serial_q[i].bitmask = want[i];
            overlap_q[i].bitmask = late[i];
          }
          serial_q[i].result = &serial_r[i];
          overlap_q[i].result = &overlap_r[i];
          const int start = int(tokens[i].size()) - 1;
          const std::span<const std::int32_t> one(&last[i], 1);
          serial_items.push_back({one, start, tables[i], {}, &serial_q[i]});
          overlap_items.push_back({one, start, tables[i], {}, &overlap_q[i]});
        }
        gpu->forward_batch(*serial_cache, serial_items);
        const std::uint64_t replays = gpu->decode_graph_replays();
        int calls = 0;
        gpu->forward_batch_overlapping(*overlap_cache, overlap_items, [&] {
          ++calls;
          for (std::size_t i = 0; i < want.size(); ++i)
            std::copy(want[i].begin(), want[i].end(), late[i].begin());
        });
        EXPECT_EQ(calls, 1);
        EXPECT_EQ(gpu->decode_graph_replays(), replays + (graphs ? 1 : 0));
        for (int s = 0; s < n; ++s) {
          const auto i = std::size_t(s);
          EXPECT_EQ(overlap_r[i].token, serial_r[i].token)
              << "graphs " << graphs << " n " << n << " step " << step << " row " << s;
          // Same logits and row parameters: equal but for a sampling kernel whose reduction
          // order depended on the number of rows (the eager pass samples no padding rows).
          EXPECT_NEAR(overlap_r[i].logprob, serial_r[i].logprob, 1e-5) << "row " << s;
          if (!serial_q[i].bitmask.empty()) {
            EXPECT_EQ((std::size_t(serial_r[i].token) + std::size_t(step + s)) % 5, 0u)
                << "a token the mask forbids, row " << s;
          }
          tokens[i].push_back(serial_r[i].token);
        }
      }
    }
  }
}

// ---- decode graphs ------------------------------------------------------------------------

// Decode steps replayed from CUDA graphs against the same steps run eagerly, on two caches holding
// the same prefilled prompts, at batch sizes on and between the graph buckets, over several
// steps (the graphs' inputs change each step). A BF16 model runs the same kernels either way at a
// bucket's size: the logits must be identical bit for bit. So must a MoE model whose experts are
// NVFP4 and the rest BF16: its routing and grouped expert kernels run on the device inside the
// graph, with no atomics. Between buckets the graph computes a
// padded batch (other tile choices), and NVFP4 layers add their split-K partial sums with
// atomics, in no fixed order, so that not even two eager runs agree bitwise: there the graph must
// agree with eager execution as closely as eager execution agrees with itself, within 1e-3.
struct GraphCase {
  Arch arch;
  int head_dim;
  bool nvfp4;  // every projection NVFP4; otherwise BF16 but for MoE experts (always NVFP4)
  int top_k = 0;
  // NVFP4 with one global factor per q/k/v and gate/up group: the fused projections.
  bool grouped = false;
};

class DecodeGraphs : public ::testing::TestWithParam<GraphCase> {};

TEST_P(DecodeGraphs, ReplayMatchesEagerExecution) {
  const GraphCase p = GetParam();
  const ModelConfig c = gpu_config(p.arch, p.head_dim, p.top_k);
  auto weights = testing::random_model(c, g_seed ^ 0x9e3779b9u);
  if (p.grouped) {
    for (auto& layer : weights.layers) {
      quantize_group({&layer.q, &layer.k, &layer.v});
      if (!layer.moe) quantize_group({&layer.gate, &layer.up});
    }
  }
  if (p.nvfp4) {
    model::quantize_weights_nvfp4(weights);
  } else {
    quantize_experts(weights);
  }
  auto gpu = make_cuda_backend(std::move(weights));
  std::mt19937 rng(std::uint32_t(g_seed) + 4);
  constexpr int kBlock = 16, kMaxSeqs = 40, kTable = 12;
  auto eager_cache = gpu->new_kv_cache(kMaxSeqs * kTable, kBlock);
  auto graph_cache = gpu->new_kv_cache(kMaxSeqs * kTable, kBlock);
  const std::size_t V = std::size_t(c.vocab_size);
  for (const int n : {1, 2, 3, 8, 13, 16, 24, 40}) {
    std::vector<int> pool(kMaxSeqs * kTable);
    std::iota(pool.begin(), pool.end(), 0);
    std::shuffle(pool.begin(), pool.end(), rng);
    const auto count = static_cast<std::size_t>(n);
    std::vector<std::vector<int>> tables(count);
    std::vector<std::vector<std::int32_t>> prompts(count);
    std::vector<int> length(count);
    std::vector<std::vector<float>> eager(count, std::vector<float>(V));
    std::vector<std::vector<float>> graph = eager, again = eager;
    std::vector<BatchItem> items;
    for (int s = 0; s < n; ++s) {
      tables[std::size_t(s)].assign(pool.begin() + s * kTable, pool.begin() + (s + 1) * kTable);
      prompts[std::size_t(s)] =
          random_tokens(rng, std::uniform_int_distribution<int>(1, 120)(rng), c.vocab_size);
      length[std::size_t(s)] = int(prompts[std::size_t(s)].size());
      items.push_back({prompts[std::size_t(s)], 0, tables[std::size_t(s)], {}});
    }
    gpu->set_decode_graphs(false);  // both prefills eager, identical
    gpu->forward_batch(*eager_cache, items);
    gpu->forward_batch(*graph_cache, items);
    double worst_graph = 0, worst_eager = 0;
    bool identical = true;
    for (int step = 0; step < 3; ++step) {
      std::vector<std::int32_t> next(count);
      for (int s = 0; s < n; ++s)
        next[std::size_t(s)] = std::uniform_int_distribution<int>(0, c.vocab_size - 1)(rng);
      auto step_items = [&](std::vector<std::vector<float>>& out) {
        std::vector<BatchItem> decode;
        for (int s = 0; s < n; ++s)
          decode.push_back({std::span(&next[std::size_t(s)], 1), length[std::size_t(s)],
                            tables[std::size_t(s)], out[std::size_t(s)]});
        return decode;
      };
      for (auto& l : graph) std::fill(l.begin(), l.end(), NAN);  // poison
      gpu->set_decode_graphs(false);
      gpu->forward_batch(*eager_cache, step_items(eager));
      gpu->set_decode_graphs(true);
      const std::uint64_t replays = gpu->decode_graph_replays();
      gpu->forward_batch(*graph_cache, step_items(graph));
      EXPECT_EQ(gpu->decode_graph_replays(), replays + 1) << "the step did not replay a graph";
      // The eager step again, on a copy of its input state: how far eager agrees with itself.
      gpu->set_decode_graphs(false);
      gpu->forward_batch(*eager_cache, step_items(again));
      for (int s = 0; s < n; ++s) {
        identical &= graph[std::size_t(s)] == eager[std::size_t(s)];
        worst_graph =
            std::max(worst_graph, relative_l2(graph[std::size_t(s)], eager[std::size_t(s)]));
        worst_eager =
            std::max(worst_eager, relative_l2(again[std::size_t(s)], eager[std::size_t(s)]));
        ++length[std::size_t(s)];
      }
    }
    std::printf(
        "  %d sequences, 3 steps: graph vs eager relative L2 %.3g (%s), eager vs eager %.3g\n", n,
        worst_graph, identical ? "bitwise identical" : "not bitwise", worst_eager);
    const bool bucket = n <= 8 || n == 16 || n == 24 || n == 40;  // decode_buckets sizes
    if (!p.nvfp4 && bucket) {
      EXPECT_TRUE(identical) << n << " sequences";
    } else {
      EXPECT_LT(worst_graph, 1e-3) << n << " sequences";
    }
  }
}

std::string graph_case_name(const ::testing::TestParamInfo<GraphCase>& info) {
  return case_name({Case{info.param.arch, info.param.head_dim, info.param.nvfp4, info.param.top_k},
                    info.index}) +
         (info.param.grouped ? "Grouped" : "");
}

INSTANTIATE_TEST_SUITE_P(Models, DecodeGraphs,
                         ::testing::Values(GraphCase{Arch::Llama, 128, false},
                                           GraphCase{Arch::Qwen3, 64, true},
                                           GraphCase{Arch::Llama, 128, true},
                                           GraphCase{Arch::Qwen3Moe, 64, false, 2},
                                           GraphCase{Arch::Qwen3Moe, 128, true, 2},
                                           GraphCase{Arch::Llama, 128, true, 0, true},
                                           GraphCase{Arch::Llama, 64, true, 0, true},
                                           GraphCase{Arch::Qwen3, 64, true, 0, true}),
                         graph_case_name);

// A random NVFP4 Qwen3-MoE model as ModelOpt exports one (q/k/v and each expert's gate/up share a
// global factor).
model::ModelWeights nvfp4_moe_model(const ModelConfig& c, std::uint64_t seed) {
  auto weights = testing::random_model(c, seed);
  for (auto& layer : weights.layers) {
    quantize_group({&layer.q, &layer.k, &layer.v});
    for (auto& e : layer.experts) quantize_group({&e.gate, &e.up});
  }
  model::quantize_weights_nvfp4(weights);
  return weights;
}

// Host routing (CudaMoeOptions::host_routing, the A/B and fallback path: routing on the host, one
// launch chain per expert) against the device routing with grouped experts, on the same NVFP4 MoE
// model: a prefill long enough for the 64-row grouped tiles, then decode steps. The two run
// different kernels over the same routing rule: the logits agree within the CUDA-vs-CPU tolerance
// (median, since a near tie of two experts' BF16 router scores may pick differently).
TEST(CudaMoeRouting, HostRoutedPathMatchesTheDevicePath) {
  const ModelConfig c = gpu_config(Arch::Qwen3Moe, 64, 2);
  auto weights = nvfp4_moe_model(c, g_seed ^ 0x51u);
  auto copy = weights;
  auto device = make_cuda_backend(std::move(weights));
  CudaOptions on_host;
  on_host.moe.host_routing = true;
  auto host = make_cuda_backend(std::move(copy), on_host);
  std::mt19937 rng(std::uint32_t(g_seed) + 5);
  const auto prompt = random_tokens(rng, 200, c.vocab_size);
  auto ds = device->new_sequence(512), hs = host->new_sequence(512);
  std::vector<float> dl(std::size_t(c.vocab_size)), hl(dl.size());
  Errors errors;
  device->forward(*ds, prompt, dl);
  host->forward(*hs, prompt, hl);
  errors.add(relative_l2(hl, dl));
  for (int step = 0; step < 8; ++step) {
    const std::int32_t next = std::int32_t(std::max_element(dl.begin(), dl.end()) - dl.begin());
    device->forward(*ds, std::span(&next, 1), dl);
    host->forward(*hs, std::span(&next, 1), hl);
    errors.add(relative_l2(hl, dl));
  }
  errors.check(Case{Arch::Qwen3Moe, 64, true, 2}, "host vs device routing, 200 + 8 steps");
}

// The MoE decode fusions (kernels/moe/moe_experts.h) against the unfused device path on the same
// NVFP4 MoE model, prefill then decode steps: with the router left to cuBLAS (moe.fused_router
// off) the fusions keep every sum and rounding, so the logits are bitwise those of moe.fused
// off; the fused router sums its logits in another order than cuBLAS, so
// that one agrees within the CUDA-vs-CPU tolerance (a near tie may route differently).
TEST(CudaMoeRouting, FusedDecodePathMatchesTheUnfusedPath) {
  const ModelConfig c = gpu_config(Arch::Qwen3Moe, 64, 2);
  auto weights = nvfp4_moe_model(c, g_seed ^ 0x77u);
  auto copy = weights, copy2 = weights;
  CudaOptions no_fusions, cublas_router;
  no_fusions.moe.fused = false;
  cublas_router.moe.fused_router = false;
  auto unfused = make_cuda_backend(std::move(weights), no_fusions);
  auto fused = make_cuda_backend(std::move(copy), cublas_router);
  auto fused_router = make_cuda_backend(std::move(copy2));
  std::mt19937 rng(std::uint32_t(g_seed) + 7);
  const auto prompt = random_tokens(rng, 37, c.vocab_size);
  auto us = unfused->new_sequence(256), fs = fused->new_sequence(256),
       rs = fused_router->new_sequence(256);
  std::vector<float> ul(std::size_t(c.vocab_size)), fl(ul.size()), rl(ul.size());
  Errors errors;
  unfused->forward(*us, prompt, ul);
  fused->forward(*fs, prompt, fl);
  fused_router->forward(*rs, prompt, rl);
  EXPECT_TRUE(ul == fl) << "prefill of 37 tokens: logits differ";
  errors.add(relative_l2(ul, rl));
  for (int step = 0; step < 8; ++step) {
    const std::int32_t next = std::int32_t(std::max_element(ul.begin(), ul.end()) - ul.begin());
    unfused->forward(*us, std::span(&next, 1), ul);
    fused->forward(*fs, std::span(&next, 1), fl);
    fused_router->forward(*rs, std::span(&next, 1), rl);
    EXPECT_TRUE(ul == fl) << "decode step " << step << ": logits differ";
    errors.add(relative_l2(ul, rl));
  }
  errors.check(Case{Arch::Qwen3Moe, 64, true, 2}, "fused router vs cuBLAS router, 37 + 8 steps");
}

// Decode steps of one token with the routing inside the expert GEMMs (the default) against the
// split router + route launch (moe.route_in_gemm off), eager and replayed from graphs: the
// same experts, weights and sums, so bitwise the same logits.
TEST(CudaMoeRouting, RouteInsideTheExpertGemmsMatchesTheRouteLaunch) {
  const ModelConfig c = gpu_config(Arch::Qwen3Moe, 64, 2);
  auto weights = nvfp4_moe_model(c, g_seed ^ 0x5Cu);
  auto copy = weights;
  CudaOptions route_launch;
  route_launch.moe.route_in_gemm = false;
  auto launch = make_cuda_backend(std::move(weights), route_launch);
  auto in_gemm = make_cuda_backend(std::move(copy));
  for (bool graphs : {false, true}) {
    launch->set_decode_graphs(graphs);
    in_gemm->set_decode_graphs(graphs);
    std::mt19937 rng(std::uint32_t(g_seed) + 13);
    const auto prompt = random_tokens(rng, 9, c.vocab_size);
    auto ls = launch->new_sequence(256), gs = in_gemm->new_sequence(256);
    std::vector<float> ll(std::size_t(c.vocab_size)), gl(ll.size());
    launch->forward(*ls, prompt, ll);
    in_gemm->forward(*gs, prompt, gl);
    EXPECT_TRUE(ll == gl) << "prompt of 9 tokens: logits differ";
    for (int step = 0; step < 12; ++step) {
      const std::int32_t next = std::int32_t(std::max_element(ll.begin(), ll.end()) - ll.begin());
      launch->forward(*ls, std::span(&next, 1), ll);
      in_gemm->forward(*gs, std::span(&next, 1), gl);
      ASSERT_TRUE(ll == gl) << (graphs ? "graphs" : "eager") << ", decode step " << step
                            << ": logits differ";
    }
  }
  EXPECT_GT(in_gemm->decode_graph_replays(), 0u);
}

}  // namespace
}  // namespace nibble::backend

int main(int argc, char** argv) {
  // A fresh seed each run unless NIBBLE_TEST_SEED fixes one.
  return nibble::backend::testing::run_cuda_tests(
      argc, argv, nibble::backend::g_seed,
      std::uint64_t(std::chrono::steady_clock::now().time_since_epoch().count()));
}
