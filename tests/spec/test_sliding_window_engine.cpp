// Sliding-window KV through the engine on nibble-make-model's tiny gpt_oss (a sliding layer of
// window 8, then full attention) on the CPU backend: with the sliding blocks freed as they leave
// the window, greedy tokens, finish reasons and logprobs are bit for bit those of a run whose
// pool keeps every block (EngineShape::free_window_blocks false), at batch 1 and in a mixed
// batch of 24 through a pool that preempts, with chunked prefill (steps of 16 tokens: chunks
// start past the window) and with speculative decoding (ngram, oracle, always-wrong drafters).
// A request longer than the pool could hold without freeing completes only because blocks leave.
// With prefix caching on, hits reuse the sliding blocks still cached, bit for bit as with it off.
#include <gtest/gtest.h>

#include <random>

#include "engine/backend/cpu/cpu_backend.h"
#include "engine/model/model_weights.h"
#include "engine/spec/ngram_drafter.h"
#include "engine/spec/reference_drafter.h"
#include "tests/backend/tiny_models.h"
#include "tests/spec/spec_harness.h"
#include "tests/support/temp_dir.h"

namespace nibble::runtime {
namespace {

using spec::ReferenceDrafter;
using testing::EngineShape;

class SlidingWindowEngine : public ::testing::TestWithParam<int> {
 protected:
  static void SetUpTestSuite() {
    dir_ = new nibble::testing::TempDir();
    nibble::testing::make_tiny_models(dir_->path(), "gpt_oss", 44, {"bf16"});
    if (::testing::Test::HasFatalFailure()) return;
    backend_ = backend::make_cpu_backend(model::load_model(dir_->path() / "bf16"), 2).release();
  }
  static void TearDownTestSuite() {
    delete backend_;
    delete dir_;
  }
  static testing::SpecTarget target() { return {backend_, 0}; }
  static nibble::testing::TempDir* dir_;
  static backend::Backend* backend_;
};
nibble::testing::TempDir* SlidingWindowEngine::dir_ = nullptr;
backend::Backend* SlidingWindowEngine::backend_ = nullptr;

// Most prompts of the mixed batch, and the one at batch 1, are longer than the window.
TEST_P(SlidingWindowEngine, FreeingMatchesKeepingEveryBlock) {
  ASSERT_EQ(backend_->kv_sliding_window(), 8);
  const int batch = GetParam();
  std::vector<testing::Request> requests = testing::mixed_greedy_requests(batch);
  if (batch == 1) {  // its one mixed request (3 + 7 tokens) would barely reach past the window
    std::mt19937 gen(3);
    requests[0].prompt = testing::repeating_prompt(gen, 30);
    requests[0].params.max_tokens = 30;
    requests[0].params.logprobs = 2;
  }
  EngineShape keep;
  keep.free_window_blocks = false;
  const testing::SpecRun reference = testing::run_engine(target(), requests, nullptr, 0, keep);
  EngineShape tight;  // batch 24 preempts: 96 blocks of 4 for up to 24 sequences of 70 tokens
  tight.num_blocks = 96;
  tight.max_num_batched_tokens = 16;
  const testing::SpecRun freed = testing::run_engine(target(), requests, nullptr, 0, tight);
  testing::expect_same(reference, freed, "freed");
  if (batch > 1) {
    EXPECT_GT(testing::metric(freed.metrics, "nibble_preemptions_total{model_name=\"tiny\"}"), 0);
  }
  const testing::SpecRun ngram =
      testing::run_engine(target(), requests, std::make_shared<spec::NgramDrafter>(1, 3), 4, tight);
  testing::expect_same(reference, ngram, "freed with ngram drafts");
  testing::expect_counters_add_up(ngram, 4);
  const auto refs = testing::greedy_references(target(), requests);
  const int vocab = backend_->config().vocab_size;
  const testing::SpecRun oracle = testing::run_engine(
      target(), requests,
      std::make_shared<ReferenceDrafter>(ReferenceDrafter::Mode::kOracle, refs, vocab), 4, tight);
  testing::expect_same(reference, oracle, "freed with oracle drafts");
  EXPECT_GT(testing::spec_metric(oracle.metrics, "num_accepted_tokens"), 0);
  const testing::SpecRun wrong = testing::run_engine(
      target(), requests,
      std::make_shared<ReferenceDrafter>(ReferenceDrafter::Mode::kWrong, refs, vocab), 3, tight);
  testing::expect_same(reference, wrong, "freed with rejected drafts");
}

INSTANTIATE_TEST_SUITE_P(Batch, SlidingWindowEngine, ::testing::Values(1, 24));

// 40 blocks of 4: keeping every block, a sequence holds two per 4 tokens (80 tokens at most);
// freeing, its full blocks and 7 sliding ones (132 tokens). A 120-token request completes,
// drafts and all, as it does in a pool that keeps everything.
TEST_F(SlidingWindowEngine, ARequestLongerThanAKeepingPoolHoldsCompletes) {
  std::mt19937 gen(7);
  testing::Request r;
  r.prompt = testing::repeating_prompt(gen, 60);
  r.params.temperature = 0;
  r.params.max_tokens = 60;
  r.params.ignore_eos = true;
  r.params.logprobs = 2;
  EngineShape keep;
  keep.free_window_blocks = false;
  const testing::SpecRun reference = testing::run_engine(target(), {r}, nullptr, 0, keep);
  EngineShape small;
  small.num_blocks = 40;
  small.max_num_batched_tokens = 16;
  const testing::SpecRun freed =
      testing::run_engine(target(), {r}, std::make_shared<spec::NgramDrafter>(1, 3), 4, small);
  ASSERT_EQ(freed.outcomes[0][0].tokens.size(), 60u);
  testing::expect_same(reference, freed, "a long request in a small pool");
  EXPECT_EQ(testing::metric(freed.metrics, "nibble_preemptions_total{model_name=\"tiny\"}"), 0);
}

// Prefix caching with the window: prompts sharing prefixes of every length around the window
// (8) and the block (4) boundaries, each prompt sent twice, through a pool that preempts with
// 16-token chunks: tokens, finish reasons and logprobs bit for bit those of prefix caching off,
// with prefix hits taken (only where the sliding group still had the window before the hit).
TEST_F(SlidingWindowEngine, PrefixCachingMatchesPrefixCachingOff) {
  std::mt19937 gen(11);
  const std::vector<int> shared = testing::repeating_prompt(gen, 40);
  std::vector<testing::Request> requests;
  for (int length : {3, 4, 5, 7, 8, 9, 11, 12, 13, 15, 16, 17, 20, 23, 24, 25, 31, 32, 33}) {
    testing::Request r;
    r.prompt.assign(shared.begin(), shared.begin() + length);
    const int suffix = 1 + length % 7;
    for (int t = 0; t < suffix; ++t) r.prompt.push_back(int(gen() % testing::kPromptVocab));
    r.params.temperature = 0;
    r.params.max_tokens = 6 + length % 9;
    r.params.ignore_eos = true;
    if (length % 3 == 0) r.params.logprobs = 2;
    requests.push_back(r);
    requests.push_back(r);  // the same prompt again: a hit up to its last block
  }
  testing::EngineShape off;  // 64 blocks of 4 for 38 requests of up to 56 tokens: preempts
  off.num_blocks = 64;
  off.max_num_batched_tokens = 16;
  off.enable_prefix_caching = false;
  testing::EngineShape on = off;
  on.enable_prefix_caching = true;
  const testing::SpecRun reference = testing::run_engine(target(), requests, nullptr, 0, off);
  const testing::SpecRun cached = testing::run_engine(target(), requests, nullptr, 0, on);
  testing::expect_same(reference, cached, "prefix caching on");
  EXPECT_GT(testing::metric(cached.metrics, "nibble_preemptions_total{model_name=\"tiny\"}"), 0);
  const double hits =
      testing::metric(cached.metrics, "nibble_prefix_cache_hits_total{model_name=\"tiny\"}");
  EXPECT_GT(hits, 0) << cached.metrics;
  EXPECT_EQ(
      testing::metric(reference.metrics, "nibble_prefix_cache_hits_total{model_name=\"tiny\"}"), 0);
  // With drafts too (a verify step's rejected slots are never cached).
  const testing::SpecRun ngram =
      testing::run_engine(target(), requests, std::make_shared<spec::NgramDrafter>(1, 3), 4, on);
  testing::expect_same(reference, ngram, "prefix caching on with ngram drafts");
}

}  // namespace
}  // namespace nibble::runtime
