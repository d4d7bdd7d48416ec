// Speculative verify steps as decode rows on the CUDA backend (step_layout.h
// verify_rows_as_decodes), on a small random Llama (BF16 weights): a verify step of one sequence
// (a last token and 4 drafts) and a mixed one (verify items of 4, 2 and 1 drafts beside a plain
// decode)
// - replays one decode graph (graphs on) or none (graphs off), and both give the same k + 1 rows
//   of logits, which match the same tokens decoded one step at a time;
// - sampled on the device (BatchItem::sample: num_logits requests an item), every row draws what
//   the CPU reference of the sampling pass draws from that row's logits with that row's request
//   (each row its own seed position and penalty list), inside the graph.
// Exits 77 (ctest: skipped) without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>

#include "engine/backend/cuda/cuda_backend.h"
#include "kernels/sampling/sampling_ref.h"
#include "tests/backend/chunk_logits.h"
#include "tests/backend/cuda_test_main.h"
#include "tests/backend/random_model.h"

namespace nibble::backend {
namespace {

using nibble::testing::max_difference_over_rms;
using nibble::testing::random_tokens;

std::uint64_t g_seed = 0;  // main: 20261207 unless NIBBLE_TEST_SEED says otherwise

// The largest difference of one logit between two paths of the GPU, as a fraction of the logits'
// RMS (test_cuda_spec_decode.cpp's bound: about three BF16 ulps at the largest logits).
constexpr double kPathTolerance = 0.1;

struct Case {
  const char* name;
  std::vector<int> drafts;  // per sequence: k (0: a plain decode)
};

class VerifyGraphs : public ::testing::TestWithParam<Case> {};

TEST_P(VerifyGraphs, GraphEagerAndSingleStepsAgree) {
  const Case& tc = GetParam();
  const model::ModelConfig c = testing::gpu_test_config(model::Arch::Llama, 64);
  auto gpu = make_cuda_backend(testing::random_model(c, g_seed ^ 0x7667u));
  ASSERT_TRUE(gpu->samples_on_device());
  const std::size_t V = std::size_t(c.vocab_size), n = tc.drafts.size();
  // Graph buckets for 4 sequences of up to 5 rows, as serve sizes them.
  gpu->device_memory_for_kv(0.5, 256, 4, 5);
  constexpr int kBlock = 16, kTable = 8;
  std::mt19937 rng(std::uint32_t(g_seed) + 11);
  std::vector<std::vector<int>> tables(n);
  std::vector<std::vector<std::int32_t>> prompts(n), chunks(n);
  std::vector<int> lengths(n);
  for (std::size_t s = 0; s < n; ++s) {
    for (int b = 0; b < kTable; ++b) tables[s].push_back(int(s) * kTable + b);
    lengths[s] = 13 + 9 * int(s);  // verify chunks crossing a block boundary
    prompts[s] = random_tokens(rng, lengths[s], c.vocab_size);
    chunks[s] = random_tokens(rng, tc.drafts[s] + 1, c.vocab_size);
  }
  auto prefilled = [&] {
    auto cache = gpu->new_kv_cache(int(n) * kTable, kBlock);
    std::vector<BatchItem> prefill;
    for (std::size_t s = 0; s < n; ++s) prefill.push_back({prompts[s], 0, tables[s], {}});
    gpu->forward_batch(*cache, prefill);
    return cache;
  };
  auto items_with = [&](std::vector<std::vector<float>>& logits,
                        std::vector<std::vector<DeviceSampling>>* requests) {
    std::vector<BatchItem> items;
    for (std::size_t s = 0; s < n; ++s) {
      const int rows = int(chunks[s].size());
      BatchItem item{chunks[s], lengths[s], tables[s], {}};
      item.num_logits = rows;
      if (requests != nullptr) {
        item.sample = (*requests)[s].data();
      } else {
        logits[s].assign(std::size_t(rows) * V, NAN);
        item.logits = logits[s];
      }
      items.push_back(item);
    }
    return items;
  };

  // The verify step with graphs on (one replay) and off (none).
  std::vector<std::vector<float>> graph(n), eager(n);
  gpu->set_decode_graphs(true);
  auto graph_cache = prefilled();
  std::uint64_t replays = gpu->decode_graph_replays();
  gpu->forward_batch(*graph_cache, items_with(graph, nullptr));
  EXPECT_EQ(gpu->decode_graph_replays(), replays + 1) << "the verify step replays a decode graph";
  gpu->set_decode_graphs(false);
  auto eager_cache = prefilled();
  replays = gpu->decode_graph_replays();
  gpu->forward_batch(*eager_cache, items_with(eager, nullptr));
  EXPECT_EQ(gpu->decode_graph_replays(), replays);

  // The same tokens one decode step at a time.
  gpu->set_decode_graphs(true);
  auto single_cache = prefilled();
  double worst_eager = 0, worst_single = 0;
  bool bitwise_eager = true;
  for (std::size_t s = 0; s < n; ++s)
    for (std::size_t j = 0; j < chunks[s].size(); ++j) {
      SCOPED_TRACE(::testing::Message() << "sequence " << s << " row " << j);
      std::vector<float> alone(V);
      const std::span<const std::int32_t> one(&chunks[s][j], 1);
      gpu->forward_batch(*single_cache,
                         std::vector<BatchItem>{{one, lengths[s] + int(j), tables[s], alone}});
      const std::span<const float> got = std::span(graph[s]).subspan(j * V, V);
      const std::span<const float> eager_row = std::span(eager[s]).subspan(j * V, V);
      const double vs_eager = max_difference_over_rms(got, eager_row);
      const double vs_single = max_difference_over_rms(got, alone);
      EXPECT_LT(vs_eager, kPathTolerance);
      EXPECT_LT(vs_single, kPathTolerance);
      bitwise_eager = bitwise_eager && std::equal(got.begin(), got.end(), eager_row.begin());
      worst_eager = std::max(worst_eager, vs_eager);
      worst_single = std::max(worst_single, vs_single);
    }
  std::printf(
      "  %s: largest logit difference of the graph's rows vs eager %.3g (bitwise %s), vs single "
      "decode steps %.3g of the RMS\n",
      tc.name, worst_eager, bitwise_eager ? "equal" : "not equal", worst_single);

  // Sampled on the device, in the graph: row j of each sequence with its own request (greedy
  // for the first sequence, seeded for the others, a penalty list on every row after the first).
  std::vector<std::vector<DeviceSampling>> requests(n);
  std::vector<std::vector<kernels::SampledRow>> results(n);
  std::vector<std::vector<std::vector<kernels::TopLogprob>>> tops(n);
  std::vector<std::vector<std::vector<kernels::SamplingPenalty>>> penalties(n);
  for (std::size_t s = 0; s < n; ++s) {
    const std::size_t rows = chunks[s].size();
    requests[s].resize(rows);
    results[s].resize(rows);
    tops[s].assign(rows, std::vector<kernels::TopLogprob>(2));
    penalties[s].resize(rows);
    for (std::size_t j = 0; j < rows; ++j) {
      kernels::SamplingRow p;
      p.temperature = s == 0 ? 0.0f : 0.9f;
      p.top_k = 50;
      p.frequency_penalty = 0.5f;
      p.num_top_logprobs = 2;
      p.seed = 1000 + s;
      p.position = 7 + j;                     // the stream j draws on
      for (std::size_t d = 1; d <= j; ++d) {  // the drafts before row j, tokens unique
        auto& list = penalties[s][j];
        const auto it = std::find_if(list.begin(), list.end(),
                                     [&](const auto& e) { return e.token == chunks[s][d]; });
        if (it != list.end())
          ++it->output_count;
        else
          list.push_back({chunks[s][d], 1});
      }
      requests[s][j].params = p;
      requests[s][j].penalties = penalties[s][j];
      requests[s][j].result = &results[s][j];
      requests[s][j].top = tops[s][j];
    }
  }
  auto sampled_cache = prefilled();
  replays = gpu->decode_graph_replays();
  std::vector<std::vector<float>> unused(n);
  gpu->forward_batch(*sampled_cache, items_with(unused, &requests));
  EXPECT_EQ(gpu->decode_graph_replays(), replays + 1) << "the sampled verify step replays a graph";
  // Greedy rows exactly; a sampled row may draw another kept token where the device's and the
  // CPU's exponentials round a near tie apart (test_cuda_backend.cpp's DeviceSamplingVsHost allows
  // one such row too).
  int mismatches = 0, rows = 0;
  for (std::size_t s = 0; s < n; ++s)
    for (std::size_t j = 0; j < chunks[s].size(); ++j, ++rows) {
      SCOPED_TRACE(::testing::Message() << "sequence " << s << " row " << j);
      const kernels::SamplingRequest& q = requests[s][j];
      const std::span<const float> row_logits = std::span(graph[s]).subspan(j * V, V);
      std::vector<kernels::TopLogprob> top;
      const kernels::SampledRow want =
          kernels::sample_row_reference(row_logits, q.params, q.penalties, {}, top);
      const kernels::SampledRow got = results[s][j];
      if (got.token == want.token) {
        EXPECT_NEAR(got.logprob, want.logprob, 1e-3);
        continue;
      }
      ++mismatches;
      EXPECT_GT(q.params.temperature, 0.0f) << "a greedy row drew " << got.token;
      const auto kept = kernels::kept_tokens_reference(row_logits, q.params, q.penalties, {});
      EXPECT_TRUE(std::binary_search(kept.begin(), kept.end(), got.token));
    }
  EXPECT_LE(mismatches, 1);
  std::printf("  %s: %d of %d device-sampled rows drew the reference's token\n", tc.name,
              rows - mismatches, rows);
}

INSTANTIATE_TEST_SUITE_P(Steps, VerifyGraphs,
                         ::testing::Values(Case{"batch1_k4", {4}},
                                           Case{"mixed_k4_decode_k2_k1", {4, 0, 2, 1}}),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return std::string(info.param.name);
                         });

}  // namespace
}  // namespace nibble::backend

int main(int argc, char** argv) {
  return nibble::backend::testing::run_cuda_tests(argc, argv, nibble::backend::g_seed, 20261207);
}
