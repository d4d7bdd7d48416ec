// Speculative decoding on the CUDA backend, on small random models:
// - a verify step's k + 1 rows of logits (BatchItem::num_logits) match the CPU backend's same
//   step and the GPU's own token-by-token decoding;
// - the keys and values a rejected draft left in the cache are never read: the steps after a
//   rollback give bit-for-bit the logits of a cache that held other rejected drafts;
// - in the engine loop, greedy generation with the ngram drafter and the test-only oracle and
//   always-wrong drafters (engine/spec/reference_drafter.h) gives the tokens of generation
//   without speculation, and the spec_decode counters show accepted and rejected drafts, also for
//   a hybrid model (Qwen3-Next: recurrent states rolled back past rejected drafts); so does the
//   draft_model drafter on a second CUDA backend, and the mtp and eagle3 drafters (a Qwen3-Next
//   MTP module, an EAGLE-3 head, on a second CUDA backend, drafting from the target's hidden
//   states).
// Exactness on the GPU: a verify step computes a position as one of k + 1 rows (linears of more
// rows; beside a prefill chunk, or for a hybrid model, the flash attention kernel, else decode
// rows in a graph of their row count: test_cuda_verify_graphs.cpp), a plain decode step in a
// graph of one row per sequence, so their logits differ by rounding (bounded below:
// kPathTolerance). Greedy tokens
// are therefore identical except where the two most likely tokens nearly tie; a run may part from
// the baseline only at such a position, and only by taking the baseline's second choice. The
// CPU backend's exact equality: tests/spec/test_spec_decode.cpp.
// Exits 77 (ctest: skipped) without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>

#include "engine/backend/cpu/cpu_backend.h"
#include "engine/backend/cuda/cuda_backend.h"
#include "engine/spec/draft_model_drafter.h"
#include "engine/spec/hidden_state_drafter.h"
#include "engine/spec/ngram_drafter.h"
#include "engine/spec/reference_drafter.h"
#include "tests/backend/chunk_logits.h"
#include "tests/backend/cuda_test_main.h"
#include "tests/backend/random_model.h"
#include "tests/spec/spec_harness.h"

namespace nibble::backend {
namespace {

using nibble::testing::max_difference_over_rms;
using nibble::testing::random_tokens;
using nibble::testing::relative_l2;

using model::Arch;
using model::ModelConfig;
using runtime::testing::Outcome;
using runtime::testing::Request;
using runtime::testing::spec_metric;
using runtime::testing::SpecRun;
using spec::ReferenceDrafter;

std::uint64_t g_seed = 0;  // main: 20261207 unless NIBBLE_TEST_SEED says otherwise

// The CUDA-vs-CPU tolerance of tests/backend/test_cuda_backend.cpp: BF16 activations through a
// few layers land near 1e-2 of the FP32 logits (relative L2).
constexpr double kLogitTolerance = 2.5e-2;
// The GPU against itself, a verify chunk's row against the same position decoded alone: the
// largest difference of one logit, as a fraction of the logits' RMS. Both paths round their
// activations and the logits to BF16 (an ulp is 2^-8..2^-7 of a value): at the largest logits,
// near 4 RMS, an ulp is ~0.03 RMS; this allows about three.
constexpr double kPathTolerance = 0.1;
// Two tokens whose logits are within this (times the logits' RMS) may swap places between the
// two paths: each logit moves by at most kPathTolerance.
constexpr double kNearTie = 2 * kPathTolerance;

// Every expert active (top_k 0): see gpu_test_config. Qwen3-Next: Gated DeltaNet layers 0..2
// (a recurrent state per sequence, rolled back past rejected drafts), gated attention layer 3.
ModelConfig spec_config(Arch arch) {
  if (arch == Arch::Qwen3Next) return testing::qwen3_next_test_config(4, 128, 8);
  return testing::gpu_test_config(arch, 64);
}

// Llama: BF16 weights (cuBLAS linears, bitwise reproducible). Qwen3-MoE and Qwen3-Next: NVFP4
// experts grouped as exported, so that the MoE layers route on the device (the verify chunk's
// rows through the grouped expert kernels) and decode steps replay graphs.
model::ModelWeights spec_model(Arch arch, std::uint64_t salt) {
  auto weights = testing::random_model(spec_config(arch), g_seed ^ salt);
  if (arch != Arch::Llama) testing::quantize_experts(weights);
  return weights;
}

std::span<const float> row(const std::vector<float>& logits, std::size_t r, std::size_t vocab) {
  return std::span<const float>(logits).subspan(r * vocab, vocab);
}

// ---- the backend's verify step --------------------------------------------------------------

class VerifyRows : public ::testing::TestWithParam<Arch> {};

// One step of four sequences on a paged cache: a verify chunk of 1 + 3 drafts crossing a block
// boundary (4 rows of logits), a plain decode, a verify chunk of 1 + 1 draft, and a prefill chunk
// wanting no logits. Every verify row against the CPU backend's same step, and against the GPU
// decoding the same tokens one at a time on a second cache.
TEST_P(VerifyRows, EachRowIsThatPositionsNextTokenLogits) {
  const Arch arch = GetParam();
  const ModelConfig c = spec_config(arch);
  auto weights = spec_model(arch, 0x7665u);
  auto copy = weights;
  auto cpu = make_cpu_backend(std::move(copy), 0);
  auto gpu = make_cuda_backend(std::move(weights));
  ASSERT_TRUE(gpu->logits_at_several_positions());
  const std::size_t V = std::size_t(c.vocab_size);
  constexpr int kBlock = 16, kTable = 8;
  std::mt19937 rng(std::uint32_t(g_seed) + 1);
  // Prompt lengths: the first verify chunk covers positions 14..17 (block 0 into block 1).
  const std::vector<int> lengths = {14, 30, 7, 40};
  const std::vector<int> num_logits = {4, 1, 2, 0};
  const std::vector<int> chunk_sizes = {4, 1, 2, 20};
  std::vector<std::vector<int>> tables(4);
  std::vector<std::vector<std::int32_t>> prompts(4), chunks(4);
  for (std::size_t s = 0; s < 4; ++s) {
    for (int b = 0; b < kTable; ++b) tables[s].push_back(int(s) * kTable + b);
    prompts[s] = random_tokens(rng, lengths[s], c.vocab_size);
    chunks[s] = random_tokens(rng, chunk_sizes[s], c.vocab_size);
  }
  auto gpu_cache = gpu->new_kv_cache(4 * kTable, kBlock);
  auto cpu_cache = cpu->new_kv_cache(4 * kTable, kBlock);
  std::vector<BatchItem> prefill;
  for (std::size_t s = 0; s < 4; ++s) prefill.push_back({prompts[s], 0, tables[s], {}});
  gpu->forward_batch(*gpu_cache, prefill);
  cpu->forward_batch(*cpu_cache, prefill);

  std::vector<std::vector<float>> gpu_rows(4), cpu_rows(4);
  auto verify_step = [&](std::vector<std::vector<float>>& out) {
    std::vector<BatchItem> items;
    for (std::size_t s = 0; s < 4; ++s) {
      out[s].assign(std::size_t(num_logits[s]) * V, NAN);
      BatchItem item{chunks[s], lengths[s], tables[s], out[s]};
      item.num_logits = std::max(num_logits[s], 1);
      items.push_back(item);
    }
    return items;
  };
  gpu->forward_batch(*gpu_cache, verify_step(gpu_rows));
  cpu->forward_batch(*cpu_cache, verify_step(cpu_rows));

  // The same tokens one position at a time (decode graphs where the batch allows).
  auto alone_cache = gpu->new_kv_cache(4 * kTable, kBlock);
  gpu->forward_batch(*alone_cache, prefill);
  double worst_cpu = 0, worst_path = 0;
  for (std::size_t s = 0; s < 4; ++s) {
    const int n = num_logits[s];
    if (n == 0) continue;
    const int first = chunk_sizes[s] - n;  // the first chunk token whose next-token logits come
    std::vector<float> alone(V);
    for (int j = 0; j < chunk_sizes[s]; ++j) {
      const std::span<const std::int32_t> one(&chunks[s][std::size_t(j)], 1);
      gpu->forward_batch(*alone_cache,
                         std::vector<BatchItem>{{one, lengths[s] + j, tables[s], alone}});
      if (j < first) continue;
      SCOPED_TRACE(::testing::Message() << "sequence " << s << " row " << j - first);
      const auto got = row(gpu_rows[s], std::size_t(j - first), V);
      const double vs_cpu = relative_l2(got, row(cpu_rows[s], std::size_t(j - first), V));
      const double vs_alone = max_difference_over_rms(got, alone);
      EXPECT_LT(vs_cpu, kLogitTolerance);
      EXPECT_LT(vs_alone, kPathTolerance);
      worst_cpu = std::max(worst_cpu, vs_cpu);
      worst_path = std::max(worst_path, vs_alone);
    }
  }
  std::printf(
      "  verify rows: relative L2 vs the CPU %.3g; largest logit difference vs decoding alone "
      "%.3g of the RMS\n",
      worst_cpu, worst_path);
}

INSTANTIATE_TEST_SUITE_P(Models, VerifyRows, ::testing::Values(Arch::Llama, Arch::Qwen3Moe),
                         [](const ::testing::TestParamInfo<Arch>& info) {
                           return info.param == Arch::Llama ? std::string("LlamaBf16")
                                                            : std::string("Qwen3MoeNvfp4Experts");
                         });

// Rollback: two caches hold the same prompt and verify the same token and first draft, each
// followed by four drafts of its own that are rejected; the first draft is accepted. The caches
// then differ only at positions past the accepted length, which no later query may read: a
// decode step (a graph replay when graphs are on) and a second verify step at the accepted
// length must give bit for bit the same logits on both (a BF16 model: the same kernels on the same
// values). The rejected keys sit in the block the next steps attend over.
TEST(CudaSpecDecode, KeysOfRejectedDraftsAreNeverRead) {
  const ModelConfig c = spec_config(Arch::Llama);
  auto gpu = make_cuda_backend(spec_model(Arch::Llama, 0x726bu));
  const std::size_t V = std::size_t(c.vocab_size);
  constexpr int kBlock = 16;
  std::mt19937 rng(std::uint32_t(g_seed) + 2);
  const auto prompt = random_tokens(rng, 13, c.vocab_size);  // positions 0..12
  const auto other_prompt = random_tokens(rng, 21, c.vocab_size);
  const std::vector<int> table = {3, 0, 5}, other_table = {1, 2, 4};
  for (const bool graphs : {false, true}) {
    SCOPED_TRACE(graphs ? "graphs on" : "graphs off");
    gpu->set_decode_graphs(graphs);
    auto a = gpu->new_kv_cache(6, kBlock), b = gpu->new_kv_cache(6, kBlock);
    // The last token (17) and 5 drafts at positions 13..18, crossing into the second block;
    // only the first draft (99) is accepted.
    const std::vector<std::int32_t> chunk_a = {17, 99, 5, 6, 7, 8},
                                    chunk_b = {17, 99, 700, 800, 900, 901};
    std::vector<float> rows_a(6 * V), rows_b(6 * V), other_a(V), other_b(V);
    // A second sequence decodes beside it in every step, the same on both caches.
    std::vector<std::int32_t> other_next = {other_prompt.back()};
    int other_length = int(other_prompt.size());
    auto step = [&](KvCache& cache, std::span<const std::int32_t> tokens, int start,
                    std::vector<float>& rows, int num_logits, std::vector<float>& other) {
      BatchItem item{tokens, start, table, std::span(rows).first(std::size_t(num_logits) * V)};
      item.num_logits = num_logits;
      const BatchItem decode{other_next, other_length, other_table, other};
      gpu->forward_batch(cache, std::vector<BatchItem>{item, decode});
    };
    for (KvCache* cache : {a.get(), b.get()})
      gpu->forward_batch(
          *cache,
          std::vector<BatchItem>{
              {prompt, 0, table, {}},
              {std::span(other_prompt).first(other_prompt.size() - 1), 0, other_table, {}}});
    other_length -= 1;
    step(*a, chunk_a, 13, rows_a, 6, other_a);
    step(*b, chunk_b, 13, rows_b, 6, other_b);
    // Causal within the chunk: rows 0 and 1 (positions 13, 14) see the same keys on both.
    const auto two_rows = 2 * std::ptrdiff_t(V);
    EXPECT_TRUE(std::equal(rows_a.begin(), rows_a.begin() + two_rows, rows_b.begin()));
    EXPECT_FALSE(std::equal(rows_a.begin() + two_rows, rows_a.end(), rows_b.begin() + two_rows))
        << "the rejected drafts differ, so must the rows after them";
    EXPECT_EQ(other_a, other_b);
    other_next[0] = 11;
    other_length += 1;
    // Draft 99 accepted: 15 positions computed; the target's token 321 decoded at position 15.
    // Positions 16..18 keep the rejected drafts' keys, different in each cache.
    const std::vector<std::int32_t> bonus = {321};
    const std::uint64_t replays = gpu->decode_graph_replays();
    step(*a, bonus, 15, rows_a, 1, other_a);
    step(*b, bonus, 15, rows_b, 1, other_b);
    EXPECT_EQ(gpu->decode_graph_replays(), replays + (graphs ? 2 : 0));
    EXPECT_TRUE(std::equal(rows_a.begin(), rows_a.begin() + std::ptrdiff_t(V), rows_b.begin()))
        << "a decode after the rollback read a rejected draft's keys";
    EXPECT_EQ(other_a, other_b);
    other_next[0] = 12;
    other_length += 1;
    // The next verify step at 16..17 rewrites those two slots; slot 18 stays stale.
    const std::vector<std::int32_t> next = {40, 41};
    step(*a, next, 16, rows_a, 2, other_a);
    step(*b, next, 16, rows_b, 2, other_b);
    EXPECT_TRUE(std::equal(rows_a.begin(), rows_a.begin() + two_rows, rows_b.begin()))
        << "a verify step after the rollback read a rejected draft's keys";
    EXPECT_EQ(other_a, other_b);
  }
}

// ---- the engine loop ------------------------------------------------------------------------

constexpr int kMaxSeqs = 16;

runtime::testing::EngineShape gpu_shape() {
  runtime::testing::EngineShape shape;
  shape.num_blocks = 256;
  shape.block_size = 16;  // the decode graphs' tables are sized for blocks of 16 or more
  shape.max_model_len = 512;
  shape.max_num_seqs = kMaxSeqs;
  shape.max_num_batched_tokens = 512;
  return shape;
}

// Greedy requests on prompts that repeat a phrase (the ngram drafter finds matches), of mixed
// lengths and max_tokens; each asks for its two most likely tokens' logprobs, whose gap tells a
// near tie.
std::vector<Request> greedy_requests(int batch, int vocab) {
  std::mt19937 gen(std::uint32_t(g_seed) + 3);
  std::vector<Request> requests;
  for (int i = 0; i < batch; ++i) {
    Request r;
    r.prompt = runtime::testing::repeating_prompt(gen, 8 + (i * 13) % 40, vocab);
    r.params.temperature = 0;
    r.params.max_tokens = 12 + (i * 11) % 36;
    r.params.logprobs = 2;
    requests.push_back(r);
  }
  return requests;
}

// The logits' RMS of a model (over a few positions): the scale of kNearTie.
double logit_rms(Backend& gpu, int vocab) {
  std::mt19937 rng(std::uint32_t(g_seed) + 4);
  double sum = 0;
  std::size_t n = 0;
  for (int i = 0; i < 4; ++i) {
    auto seq = gpu.new_sequence(64);
    std::vector<float> logits(std::size_t(vocab), 0.0f);
    gpu.forward(*seq, random_tokens(rng, 5 + 7 * i, vocab), logits);
    for (float v : logits) sum += double(v) * v;
    n += logits.size();
  }
  return std::sqrt(sum / double(n));
}

// Each request's tokens against the baseline's: identical (with the same finish), or identical
// up to a position where the baseline's two most likely tokens are within near_tie and the run
// took the second. Returns how many requests parted so.
int expect_greedy_tokens_match(const SpecRun& baseline, const SpecRun& run, double near_tie,
                               const char* what) {
  int parted = 0;
  for (std::size_t i = 0; i < baseline.outcomes.size(); ++i) {
    const Outcome& e = baseline.outcomes[i][0];
    const Outcome& a = run.outcomes[i][0];
    const auto [left, right] =
        std::mismatch(e.tokens.begin(), e.tokens.end(), a.tokens.begin(), a.tokens.end());
    if (left == e.tokens.end() && right == a.tokens.end()) {
      EXPECT_EQ(e.finish, a.finish) << what << ": request " << i;
      continue;
    }
    const std::size_t j = std::size_t(left - e.tokens.begin());
    ++parted;
    if (j == e.tokens.size() || j == a.tokens.size()) {
      ADD_FAILURE() << what << ": request " << i << " gave " << a.tokens.size()
                    << " tokens, the baseline " << e.tokens.size();
      continue;
    }
    const auto& top = e.samples[j].top_logprobs;
    if (top.size() != 2) {
      ADD_FAILURE() << what << ": the baseline's token " << j << " has no top-2 logprobs";
      continue;
    }
    const double gap = double(top[0].logprob) - double(top[1].logprob);
    EXPECT_LT(gap, near_tie) << what << ": request " << i << " token " << j << " is " << a.tokens[j]
                             << ", the baseline's " << e.tokens[j]
                             << ", whose lead over the next is not a near tie";
    EXPECT_EQ(a.tokens[j], top[1].token)
        << what << ": request " << i << " token " << j << " is not the baseline's second choice";
  }
  std::printf("  %s: %d of %zu requests parted from the baseline at a near tie\n", what, parted,
              baseline.outcomes.size());
  return parted;
}

class SpecEngine : public ::testing::TestWithParam<Arch> {};

TEST_P(SpecEngine, GreedyTokensMatchDecodingWithoutSpeculation) {
  const Arch arch = GetParam();
  const ModelConfig c = spec_config(arch);
  auto gpu = make_cuda_backend(spec_model(arch, 0x656eu));
  ASSERT_TRUE(gpu->samples_on_device());
  const runtime::testing::EngineShape shape = gpu_shape();
  // A hybrid model's sequences each hold a state slot.
  const runtime::testing::SpecTarget target{gpu.get(), gpu->state_slot_bytes() > 0 ? kMaxSeqs : 0};
  // Graph buckets for kMaxSeqs sequences, logits room for 5 rows each, as serve sizes them.
  gpu->device_memory_for_kv(0.5, shape.max_num_batched_tokens, kMaxSeqs, 5);
  const double near_tie = kNearTie * logit_rms(*gpu, c.vocab_size);
  const std::string& model = shape.model_name;
  for (const int batch : {1, 8}) {
    SCOPED_TRACE(::testing::Message() << "batch " << batch);
    const std::vector<Request> requests = greedy_requests(batch, c.vocab_size);
    const std::uint64_t replays = gpu->decode_graph_replays();
    const SpecRun baseline = runtime::testing::run_engine(target, requests, nullptr, 0, shape);
    EXPECT_GT(gpu->decode_graph_replays(), replays) << "the baseline's decode steps replay graphs";
    std::vector<std::vector<int>> refs;
    for (std::size_t i = 0; i < requests.size(); ++i) {
      refs.push_back(requests[i].prompt);
      const auto& out = baseline.outcomes[i][0].tokens;
      refs.back().insert(refs.back().end(), out.begin(), out.end());
    }

    const SpecRun ngram = runtime::testing::run_engine(
        target, requests, std::make_shared<spec::NgramDrafter>(1, 3), 4, shape);
    expect_greedy_tokens_match(baseline, ngram, near_tie, "ngram");
    runtime::testing::expect_counters_add_up(ngram, 4, model);

    const SpecRun oracle = runtime::testing::run_engine(
        target, requests,
        std::make_shared<ReferenceDrafter>(ReferenceDrafter::Mode::kOracle, refs, c.vocab_size), 4,
        shape);
    const int oracle_parted = expect_greedy_tokens_match(baseline, oracle, near_tie, "oracle");
    runtime::testing::expect_counters_add_up(oracle, 4, model);
    const double oracle_drafted = spec_metric(oracle.metrics, "num_draft_tokens", model);
    const double oracle_accepted = spec_metric(oracle.metrics, "num_accepted_tokens", model);
    EXPECT_GT(oracle_accepted, 0) << "the oracle's drafts are the target's own tokens";
    if (oracle_parted == 0) {
      EXPECT_EQ(oracle_accepted, oracle_drafted) << "every oracle draft is the target's token";
    }

    const SpecRun wrong = runtime::testing::run_engine(
        target, requests,
        std::make_shared<ReferenceDrafter>(ReferenceDrafter::Mode::kWrong, refs, c.vocab_size), 3,
        shape);
    const int wrong_parted = expect_greedy_tokens_match(baseline, wrong, near_tie, "wrong");
    runtime::testing::expect_counters_add_up(wrong, 3, model);
    EXPECT_GT(spec_metric(wrong.metrics, "num_draft_tokens", model), 0);
    // A wrong draft is accepted only where a near tie made the target pick it: then the
    // request parts from the baseline and drafts no more.
    EXPECT_LE(spec_metric(wrong.metrics, "num_accepted_tokens", model), wrong_parted);

    if (batch > 1) {  // one short prompt gives prompt lookup little to find
      const double drafted = spec_metric(ngram.metrics, "num_draft_tokens", model);
      const double accepted = spec_metric(ngram.metrics, "num_accepted_tokens", model);
      std::printf("  ngram: %.0f of %.0f draft tokens accepted\n", accepted, drafted);
      // A random Qwen3-Next's greedy tokens need not repeat the prompt's phrases (as on the CPU
      // backend: tests/spec/test_spec_hybrid.cpp): its drafts may all be rejected.
      if (arch != Arch::Qwen3Next) {
        EXPECT_GT(accepted, 0) << "ngram drafts accepted";
      }
      EXPECT_GT(drafted, accepted) << "ngram drafts rejected";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Models, SpecEngine,
                         ::testing::Values(Arch::Llama, Arch::Qwen3Moe, Arch::Qwen3Next),
                         [](const ::testing::TestParamInfo<Arch>& info) {
                           return info.param == Arch::Llama ? std::string("LlamaBf16")
                                  : info.param == Arch::Qwen3Moe
                                      ? std::string("Qwen3MoeNvfp4Experts")
                                      : std::string("Qwen3NextNvfp4Experts");
                         });

// The draft_model drafter (engine/spec/draft_model_drafter.h) on the GPU: the target drafting
// for itself from a second CUDA backend of the same weights, its draft KV cache kept across steps
// and cut back past rejected drafts. Greedy tokens as without speculation (up to near ties), and
// drafts accepted: the draft's greedy tokens are the target's except where the draft's single-row
// steps and the target's verify chunks round a near tie apart.
TEST(CudaSpecDecode, DraftModelDrafterOnTheGpu) {
  const ModelConfig c = spec_config(Arch::Llama);
  auto gpu = make_cuda_backend(spec_model(Arch::Llama, 0x656eu));
  const runtime::testing::EngineShape shape = gpu_shape();
  gpu->device_memory_for_kv(0.5, shape.max_num_batched_tokens, kMaxSeqs, 5);
  const double near_tie = kNearTie * logit_rms(*gpu, c.vocab_size);
  for (const int batch : {1, 8}) {
    SCOPED_TRACE(::testing::Message() << "batch " << batch);
    const std::vector<Request> requests = greedy_requests(batch, c.vocab_size);
    const SpecRun baseline = runtime::testing::run_engine({gpu.get()}, requests, nullptr, 0, shape);
    auto drafter = std::make_shared<spec::DraftModelDrafter>(
        make_cuda_backend(spec_model(Arch::Llama, 0x656eu)), c.vocab_size,
        spec::DraftModelOptions{.max_sequences = kMaxSeqs,
                                .max_tokens_per_sequence = shape.max_model_len,
                                .block_size = 16});
    const SpecRun run = runtime::testing::run_engine({gpu.get()}, requests, drafter, 4, shape);
    expect_greedy_tokens_match(baseline, run, near_tie, "draft_model");
    runtime::testing::expect_counters_add_up(run, 4, shape.model_name);
    const double drafted = spec_metric(run.metrics, "num_draft_tokens", shape.model_name);
    const double accepted = spec_metric(run.metrics, "num_accepted_tokens", shape.model_name);
    std::printf("  draft_model: %.0f of %.0f draft tokens accepted, %llu positions reused\n",
                accepted, drafted, (unsigned long long)drafter->stats().reused_tokens);
    EXPECT_GT(drafted, 0);
    EXPECT_GT(accepted, 0.9 * drafted) << "the target drafting for itself";
    EXPECT_GT(drafter->stats().reused_tokens, 0u) << "the draft KV is kept across steps";
  }
}

// A drafter reading the target's hidden states (mtp, eagle3) on the GPU: greedy tokens as without
// speculation (up to near ties) at batch 1 and 8, k 3, the head made by make_head (its own CUDA
// backend, eager as serve runs it: its steps carry hidden_in). A random head's drafts are mostly
// rejected; the test asks that it drafted from the target's hidden states and chained on its own.
// verify_replays: a dense target's verify steps run as decode rows, replaying graphs whose hidden
// states come back (a hybrid target's verify chunks run eagerly, and nearly every step verifies).
void expect_hidden_state_drafts_exact(
    Backend& gpu, int state_slots,
    const std::function<std::shared_ptr<spec::HiddenStateDrafter>()>& make_head, const char* what,
    bool verify_replays) {
  const int vocab = gpu.config().vocab_size;
  const runtime::testing::EngineShape shape = gpu_shape();
  const runtime::testing::SpecTarget target{&gpu, state_slots};
  gpu.device_memory_for_kv(0.5, shape.max_num_batched_tokens, kMaxSeqs, 4);
  const double near_tie = kNearTie * logit_rms(gpu, vocab);
  for (const int batch : {1, 8}) {
    SCOPED_TRACE(::testing::Message() << what << " batch " << batch);
    const std::vector<Request> requests = greedy_requests(batch, vocab);
    const SpecRun baseline = runtime::testing::run_engine(target, requests, nullptr, 0, shape);
    const std::shared_ptr<spec::HiddenStateDrafter> drafter = make_head();
    const std::uint64_t replays = gpu.decode_graph_replays();
    const SpecRun run = runtime::testing::run_engine(target, requests, drafter, 3, shape);
    expect_greedy_tokens_match(baseline, run, near_tie, what);
    runtime::testing::expect_counters_add_up(run, 3, shape.model_name);
    const double drafted = spec_metric(run.metrics, "num_draft_tokens", shape.model_name);
    const double accepted = spec_metric(run.metrics, "num_accepted_tokens", shape.model_name);
    const spec::HiddenStateDrafter::Stats stats = drafter->stats();
    std::printf(
        "  %s: %.0f of %.0f draft tokens accepted; the head ran %llu positions on the target's "
        "hidden states, %llu chained; %llu decode graph replays\n",
        what, accepted, drafted, (unsigned long long)stats.computed_tokens,
        (unsigned long long)stats.chained_tokens,
        (unsigned long long)(gpu.decode_graph_replays() - replays));
    EXPECT_GT(drafted, 0);
    EXPECT_GT(stats.computed_tokens, 0u);
    EXPECT_GT(stats.chained_tokens, 0u);
    if (verify_replays) {
      EXPECT_GT(gpu.decode_graph_replays(), replays);
    }
  }
}

CudaOptions eager() {
  CudaOptions options;
  options.graphs = false;
  return options;
}

// mtp: a Qwen3-Next target (NVFP4 experts, decode graphs; its verify chunks eager, recurrent
// states rolled back) and a random MTP module of its shape (take_mtp_module), drafting from the
// target's last hidden state. Hidden states against the CPU backend's: test_cuda_hidden_states.
TEST(CudaSpecDecode, MtpDrafterOnTheGpu) {
  const ModelConfig c = spec_config(Arch::Qwen3Next);
  auto weights = spec_model(Arch::Qwen3Next, 0x656eu);
  weights.mtp = testing::random_mtp_module(c, g_seed ^ 0x6d74u);
  model::ModelWeights module = model::take_mtp_module(weights);
  testing::quantize_experts(module);
  auto gpu = make_cuda_backend(std::move(weights));
  ASSERT_TRUE(gpu->returns_hidden_states());
  expect_hidden_state_drafts_exact(
      *gpu, kMaxSeqs,
      [&] {
        return std::make_shared<spec::HiddenStateDrafter>(
            make_cuda_backend(module, eager()),
            spec::HiddenStateDrafterOptions{.max_sequences = kMaxSeqs,
                                            .max_tokens_per_sequence = gpu_shape().max_model_len,
                                            .block_size = 16});
      },
      "mtp", /*verify_replays=*/false);
}

// eagle3: a Llama target handing out the inputs of its three layers (hidden_state_layers: copies
// inside its decode graphs, its verify steps replayed as decode rows) to a random EAGLE-3 head
// over half its vocabulary (d2t), which reads them through fc and then chains on its own output.
TEST(CudaSpecDecode, Eagle3DrafterOnTheGpu) {
  auto weights = spec_model(Arch::Llama, 0x656eu);
  const std::vector<int> layers = {0, 1, 2};
  const model::ModelWeights head = testing::random_eagle3_head(
      weights, layers, /*norm_before_residual=*/false, g_seed ^ 0x6533u);
  weights.config.hidden_state_layers = layers;
  auto gpu = make_cuda_backend(std::move(weights));
  expect_hidden_state_drafts_exact(
      *gpu, 0,
      [&] {
        return std::make_shared<spec::HiddenStateDrafter>(
            make_cuda_backend(head, eager()),
            spec::HiddenStateDrafterOptions{.max_sequences = kMaxSeqs,
                                            .max_tokens_per_sequence = gpu_shape().max_model_len,
                                            .block_size = 16},
            head.eagle3->draft_to_target);
      },
      "eagle3", /*verify_replays=*/true);
}

}  // namespace
}  // namespace nibble::backend

int main(int argc, char** argv) {
  return nibble::backend::testing::run_cuda_tests(argc, argv, nibble::backend::g_seed, 20261207);
}
