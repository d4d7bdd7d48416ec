// Speculative decoding of a hybrid model on the CPU backend (nibble-make-model's tiny
// qwen3_next: Gated DeltaNet layers with a recurrent state per sequence, rolled back past
// rejected drafts): greedy tokens, finish reasons and logprobs identical with and without
// speculation for the ngram, oracle and always-wrong drafters, at batch 1 and 8 with mixed
// lengths and max_tokens and stop tokens landing mid-draft (spec_harness.h).
#include <gtest/gtest.h>

#include "engine/backend/cpu/cpu_backend.h"
#include "engine/model/model_weights.h"
#include "tests/backend/tiny_models.h"
#include "tests/spec/spec_harness.h"
#include "tests/support/temp_dir.h"

namespace nibble::runtime {
namespace {

class HybridSpecDecode : public ::testing::TestWithParam<int> {
 protected:
  static void SetUpTestSuite() {
    dir_ = new nibble::testing::TempDir();
    nibble::testing::make_tiny_models(dir_->path(), "qwen3_next", 43, {"bf16"});
    if (::testing::Test::HasFatalFailure()) return;
    backend_ = backend::make_cpu_backend(model::load_model(dir_->path() / "bf16"), 2).release();
  }
  static void TearDownTestSuite() {
    delete backend_;
    delete dir_;
  }
  static testing::SpecTarget target() { return {backend_, /*state_slots=*/64}; }
  static nibble::testing::TempDir* dir_;
  static backend::Backend* backend_;
};
nibble::testing::TempDir* HybridSpecDecode::dir_ = nullptr;
backend::Backend* HybridSpecDecode::backend_ = nullptr;

TEST_P(HybridSpecDecode, GreedyTokensMatchWithoutSpeculation) {
  // A random-weight model's greedy outputs need not repeat the prompt's phrases, so prompt
  // lookup's drafts may all be rejected; the oracle's show acceptance.
  testing::expect_greedy_exactness(target(), GetParam(), /*ngram_accepts=*/false);
}

INSTANTIATE_TEST_SUITE_P(Batch, HybridSpecDecode, ::testing::Values(1, 8));

}  // namespace
}  // namespace nibble::runtime
