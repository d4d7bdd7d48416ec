// Hidden states on the CUDA backend (speculative decoding's mtp and eagle3 methods), on small
// random models, against the CPU backend's same steps:
// - hidden_out, the target's side: the last layer's output before the final norm (Llama,
//   Qwen3-Next), or the inputs of the layers hidden_state_layers names, side by side (an EAGLE-3
//   head's target), through a prefill step, a verify step (k + 1 rows: decode rows, replayed from
//   a graph where graphs are on, except for a hybrid model, whose verify chunks run eagerly) and
//   a decode step (a replay), with decode graphs on and off;
// - hidden_in, the head's side: a Qwen3-Next MTP module (model::take_mtp_module) on given hidden
//   states, its logits and its hidden_out (after its final norm), a prompt chunk and then chained
//   one-token steps on its own output, as HiddenStateDrafter runs it; an EAGLE-3 head the same
//   way, on the target's three hidden states (through fc) and on its own, both widths in one
//   step, with and without norm_before_residual.
// Relative L2 within the CUDA-vs-CPU bound of test_cuda_backend.cpp (BF16 activations against
// the CPU's FP32). Exits 77 (ctest: skipped) without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <string>

#include "engine/backend/cpu/cpu_backend.h"
#include "engine/backend/cuda/cuda_backend.h"
#include "engine/model/model_description.h"
#include "tests/backend/chunk_logits.h"
#include "tests/backend/cuda_test_main.h"
#include "tests/backend/random_model.h"

namespace nibble::backend {
namespace {

using model::Arch;
using model::ModelConfig;
using nibble::testing::random_tokens;
using nibble::testing::relative_l2;

std::uint64_t g_seed = 0;  // main: 20261207 unless NIBBLE_TEST_SEED says otherwise

// test_cuda_backend.cpp's CUDA-vs-CPU bound: BF16 activations through a few layers land near
// 1e-2 of the FP32 values (relative L2).
constexpr double kTolerance = 2.5e-2;
constexpr int kBlock = 16, kTable = 4;

// Qwen3-Next: test_cuda_qwen3_next's worst-row bound (its BF16 activations between the projections
// and the delta rule, which the CPU keeps in FP32: 0.0251 measured on the last layer's output,
// H100 2026-12-07); a wrong row is O(1).
constexpr double kHybridTolerance = 6e-2;

struct Case {
  std::string name;
  ModelConfig config;
  std::vector<int> hidden_state_layers;  // empty: the last layer's output
  double tolerance = kTolerance;
};

std::vector<Case> cases() {
  return {{"Llama", testing::gpu_test_config(Arch::Llama, 64), {}},
          {"LlamaHiddenStateLayers", testing::gpu_test_config(Arch::Llama, 64), {0, 1, 2}},
          {"Qwen3Next", testing::qwen3_next_test_config(4, 128, 8), {}, kHybridTolerance},
          {"Qwen3NextHiddenStateLayers", testing::qwen3_next_test_config(4, 128, 8), {1, 3},
           kHybridTolerance}};
}

// NVFP4 experts (Qwen3-Next): its MoE layers route on the device, so its decode steps replay
// graphs.
model::ModelWeights case_model(const Case& test, std::uint64_t salt) {
  ModelConfig c = test.config;
  c.hidden_state_layers = test.hidden_state_layers;
  auto weights = testing::random_model(c, g_seed ^ salt);
  if (c.num_experts > 0) testing::quantize_experts(weights);
  return weights;
}

// Each step's items' hidden_out and logits, item by item.
struct StepOutputs {
  std::vector<std::vector<float>> hidden, logits;
};

// Two sequences through three steps: prompts of 20 and 9 tokens; a verify step of A's token and
// two drafts beside B's decode; one decode each. Every item hands out its hidden states and wants
// its rows' logits.
std::vector<StepOutputs> run_steps(Backend& backend, const ModelConfig& c) {
  std::mt19937 rng(std::uint32_t(g_seed) + 5);
  const std::size_t width = std::size_t(c.hidden_state_width()), V = std::size_t(c.vocab_size);
  const bool hybrid = backend.state_slot_bytes() > 0;
  auto cache = hybrid ? backend.new_kv_cache_with_state(2 * kTable, kBlock, 2)
                      : backend.new_kv_cache(2 * kTable, kBlock);
  const std::vector<int> tables[2] = {{0, 1, 2, 3}, {4, 5, 6, 7}};
  struct Chunk {
    int length, start, num_logits;
  };
  const std::vector<std::vector<Chunk>> steps = {
      {{20, 0, 1}, {9, 0, 1}}, {{3, 20, 3}, {1, 9, 1}}, {{1, 23, 1}, {1, 10, 1}}};
  std::vector<StepOutputs> out;
  for (const auto& step : steps) {
    StepOutputs o;
    std::vector<std::vector<std::int32_t>> tokens;
    for (const Chunk& chunk : step) {
      tokens.push_back(random_tokens(rng, chunk.length, c.vocab_size));
      o.hidden.emplace_back(std::size_t(chunk.length) * width, NAN);
      o.logits.emplace_back(std::size_t(chunk.num_logits) * V, NAN);
    }
    std::vector<BatchItem> items;
    for (std::size_t s = 0; s < step.size(); ++s) {
      BatchItem item{tokens[s], step[s].start, tables[s], o.logits[s]};
      item.num_logits = step[s].num_logits;
      item.hidden_out = o.hidden[s];
      if (hybrid) item.state_slot = int(s);
      items.push_back(item);
    }
    backend.forward_batch(*cache, items);
    out.push_back(std::move(o));
  }
  return out;
}

class HiddenOut : public ::testing::TestWithParam<Case> {};

TEST_P(HiddenOut, MatchesTheCpuBackendWithGraphsOffAndOn) {
  const Case& test = GetParam();
  auto weights = case_model(test, 0x6869u);
  auto copy = weights;
  auto cpu = make_cpu_backend(std::move(copy), 0);
  auto gpu = make_cuda_backend(std::move(weights));
  ASSERT_TRUE(gpu->returns_hidden_states());
  const ModelConfig& c = cpu->config();
  const std::vector<StepOutputs> want = run_steps(*cpu, c);
  // Graphs off first: the eager steps set up what kernels and cuBLAS set up on first use, which
  // a capture on first use (no prepare_decode here) must not do.
  for (const bool graphs : {false, true}) {
    SCOPED_TRACE(graphs ? "graphs on" : "graphs off");
    gpu->set_decode_graphs(graphs);
    const std::uint64_t replays = gpu->decode_graph_replays();
    const std::vector<StepOutputs> got = run_steps(*gpu, c);
    // The decode step replays a graph; the verify step too where it runs as decode rows.
    if (graphs) {
      EXPECT_GT(gpu->decode_graph_replays(), replays);
    } else {
      EXPECT_EQ(gpu->decode_graph_replays(), replays);
    }
    double worst_hidden = 0, worst_logits = 0;
    for (std::size_t step = 0; step < want.size(); ++step)
      for (std::size_t s = 0; s < want[step].hidden.size(); ++s) {
        SCOPED_TRACE(::testing::Message() << "step " << step << " sequence " << s);
        const double hidden = relative_l2(got[step].hidden[s], want[step].hidden[s]);
        const double logits = relative_l2(got[step].logits[s], want[step].logits[s]);
        EXPECT_LT(hidden, test.tolerance);
        EXPECT_LT(logits, test.tolerance);
        worst_hidden = std::max(worst_hidden, hidden);
        worst_logits = std::max(worst_logits, logits);
      }
    std::printf("  %s, %s: hidden_out relative L2 vs the CPU %.3g (logits %.3g)\n",
                test.name.c_str(), graphs ? "graphs on" : "graphs off", worst_hidden, worst_logits);
  }
}

INSTANTIATE_TEST_SUITE_P(Models, HiddenOut, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return info.param.name;
                         });

// The CUDA backend refuses a hidden_state_layers entry outside the model, as the CPU backend does.
TEST(CudaHiddenStates, HiddenStateLayersOutsideTheModelAreRefused) {
  ModelConfig c = testing::gpu_test_config(Arch::Llama, 64);
  c.hidden_state_layers = {0, 1, c.num_layers};
  EXPECT_THROW(make_cuda_backend(testing::random_model(c, g_seed)), BackendError);
}

// ---- an MTP module on the CUDA backend ------------------------------------------------------

// A Qwen3-Next MTP module (NVFP4 experts, as the target's), on a prompt chunk of given hidden
// states and then three chained one-token steps on its own last output, as the mtp drafter runs
// it: logits and hidden_out against the CPU backend's.
TEST(CudaHiddenStates, AnMtpModuleMatchesTheCpuBackend) {
  const ModelConfig target = testing::qwen3_next_test_config(4, 128, 8);
  model::ModelWeights weights = testing::random_model(target, g_seed ^ 0x6d74u);
  weights.mtp = testing::random_mtp_module(target, g_seed ^ 0x6d75u);
  model::ModelWeights module = model::take_mtp_module(weights);
  testing::quantize_experts(module);
  ASSERT_EQ(model::describe_model(module.config).input, model::ModelInput::kEmbeddingAndHidden);
  auto copy = module;
  auto cpu = make_cpu_backend(std::move(copy), 0);
  auto gpu = make_cuda_backend(std::move(module));
  ASSERT_TRUE(gpu->returns_hidden_states());
  const ModelConfig& c = cpu->config();
  const std::size_t H = std::size_t(c.hidden_size), V = std::size_t(c.vocab_size);
  std::mt19937 rng(std::uint32_t(g_seed) + 6);
  // Hidden states of the residual stream's scale (the target's, before its final norm).
  std::normal_distribution<float> normal(0.0f, 1.0f);
  constexpr int kPrompt = 11, kChained = 3;
  std::vector<float> prompt_hidden(kPrompt * H);
  for (float& v : prompt_hidden) v = normal(rng);
  const auto tokens = random_tokens(rng, kPrompt + kChained, c.vocab_size);
  const std::vector<int> table = {0, 1};
  auto cpu_cache = cpu->new_kv_cache(2, kBlock), gpu_cache = gpu->new_kv_cache(2, kBlock);
  // The chained steps feed each backend the CPU's last output, so that both run the same input.
  std::vector<float> hidden_in = prompt_hidden;
  int start = 0;
  double worst_hidden = 0, worst_logits = 0;
  for (int step = 0; step <= kChained; ++step) {
    SCOPED_TRACE(::testing::Message() << "step " << step);
    const int n = step == 0 ? kPrompt : 1;
    const std::span<const std::int32_t> chunk(tokens.data() + start, std::size_t(n));
    std::vector<float> cpu_logits(V), gpu_logits(V, NAN), cpu_hidden(std::size_t(n) * H),
        gpu_hidden(std::size_t(n) * H, NAN);
    auto run = [&](Backend& b, KvCache& cache, std::vector<float>& logits,
                   std::vector<float>& hidden) {
      BatchItem item{chunk, start, table, logits};
      item.hidden_in = hidden_in;
      item.hidden_out = hidden;
      b.forward_batch(cache, std::span(&item, 1));
    };
    run(*cpu, *cpu_cache, cpu_logits, cpu_hidden);
    run(*gpu, *gpu_cache, gpu_logits, gpu_hidden);
    const double hidden = relative_l2(gpu_hidden, cpu_hidden);
    const double logits = relative_l2(gpu_logits, cpu_logits);
    EXPECT_LT(hidden, kTolerance);
    EXPECT_LT(logits, kTolerance);
    worst_hidden = std::max(worst_hidden, hidden);
    worst_logits = std::max(worst_logits, logits);
    start += n;
    hidden_in.assign(cpu_hidden.end() - std::ptrdiff_t(H), cpu_hidden.end());
  }
  std::printf("  MTP module: relative L2 vs the CPU, hidden_out %.3g, logits %.3g\n", worst_hidden,
              worst_logits);
}

// ---- an EAGLE-3 head on the CUDA backend -----------------------------------------------------

class Eagle3Head : public ::testing::TestWithParam<bool> {};

// A head (norm_before_residual as the parameter) on two sequences: prompt chunks of the target's
// hidden states (3 H a row, through fc); then one sequence chained on its own output (H) beside
// the other's next chunk of the target's (two widths in one step); then both chained. Its logits
// over its own vocabulary and its hidden_out (before its final norm) against the CPU backend's.
TEST_P(Eagle3Head, MatchesTheCpuBackend) {
  const ModelConfig target_config = testing::gpu_test_config(Arch::Llama, 64);
  const model::ModelWeights target = testing::random_model(target_config, g_seed ^ 0x7467u);
  model::ModelWeights head = testing::random_eagle3_head(target, {0, 1, 2}, GetParam(), g_seed);
  ASSERT_EQ(model::describe_model(head.config).input, model::ModelInput::kEagle3);
  auto copy = head;
  auto cpu = make_cpu_backend(std::move(copy), 0);
  auto gpu = make_cuda_backend(std::move(head));
  const ModelConfig& c = cpu->config();
  const std::size_t H = std::size_t(c.hidden_size), W = std::size_t(c.eagle3->fc_inputs()),
                    V = std::size_t(c.logits_size());
  ASSERT_NE(W, H);
  std::mt19937 rng(std::uint32_t(g_seed) + 7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  auto target_rows = [&](int n) {
    std::vector<float> rows(std::size_t(n) * W);
    for (float& v : rows) v = normal(rng);
    return rows;
  };
  const std::vector<int> tables[2] = {{0, 1}, {2, 3}};
  auto cpu_cache = cpu->new_kv_cache(4, kBlock), gpu_cache = gpu->new_kv_cache(4, kBlock);
  // Per step, per sequence: tokens and their hidden_in (empty: chained on the CPU's last output).
  struct Chunk {
    int length;
    bool target_states;
  };
  const std::vector<std::vector<Chunk>> steps = {
      {{9, true}, {6, true}}, {{1, false}, {3, true}}, {{1, false}, {1, false}}};
  int starts[2] = {0, 0};
  std::vector<float> last[2];  // each sequence's last output row (the CPU's)
  double worst_hidden = 0, worst_logits = 0;
  for (std::size_t step = 0; step < steps.size(); ++step) {
    SCOPED_TRACE(::testing::Message() << "step " << step);
    std::vector<std::vector<std::int32_t>> tokens(2);
    std::vector<std::vector<float>> hidden_in(2), cpu_hidden(2), gpu_hidden(2), cpu_logits(2),
        gpu_logits(2);
    for (std::size_t s = 0; s < 2; ++s) {
      const Chunk& chunk = steps[step][s];
      tokens[s] = random_tokens(rng, chunk.length, c.vocab_size);
      hidden_in[s] = chunk.target_states ? target_rows(chunk.length) : last[s];
      cpu_hidden[s].assign(std::size_t(chunk.length) * H, 0.0f);
      gpu_hidden[s].assign(std::size_t(chunk.length) * H, NAN);
      cpu_logits[s].assign(V, 0.0f);
      gpu_logits[s].assign(V, NAN);
    }
    auto run = [&](Backend& b, KvCache& cache, std::vector<std::vector<float>>& logits,
                   std::vector<std::vector<float>>& hidden) {
      std::vector<BatchItem> items;
      for (std::size_t s = 0; s < 2; ++s) {
        BatchItem item{tokens[s], starts[s], tables[s], logits[s]};
        item.hidden_in = hidden_in[s];
        item.hidden_out = hidden[s];
        items.push_back(item);
      }
      b.forward_batch(cache, items);
    };
    run(*cpu, *cpu_cache, cpu_logits, cpu_hidden);
    run(*gpu, *gpu_cache, gpu_logits, gpu_hidden);
    for (std::size_t s = 0; s < 2; ++s) {
      SCOPED_TRACE(::testing::Message() << "sequence " << s);
      const double hidden = relative_l2(gpu_hidden[s], cpu_hidden[s]);
      const double logits = relative_l2(gpu_logits[s], cpu_logits[s]);
      EXPECT_LT(hidden, kTolerance);
      EXPECT_LT(logits, kTolerance);
      worst_hidden = std::max(worst_hidden, hidden);
      worst_logits = std::max(worst_logits, logits);
      starts[s] += int(tokens[s].size());
      last[s].assign(cpu_hidden[s].end() - std::ptrdiff_t(H), cpu_hidden[s].end());
    }
  }
  std::printf("  EAGLE-3 head%s: relative L2 vs the CPU, hidden_out %.3g, logits %.3g\n",
              GetParam() ? " (norm_before_residual)" : "", worst_hidden, worst_logits);
}

INSTANTIATE_TEST_SUITE_P(NormBeforeResidual, Eagle3Head, ::testing::Bool());

}  // namespace
}  // namespace nibble::backend

int main(int argc, char** argv) {
  return nibble::backend::testing::run_cuda_tests(argc, argv, nibble::backend::g_seed, 20261207);
}
