// Speculative decoding's mtp method on the CPU backend, on nibble-make-model's tiny qwen3_next
// (which carries an MTP module, mtp.*): the module loads beside the model and a checkpoint
// without one still loads; greedy tokens, finish reasons and logprobs are identical with and
// without mtp drafts at batch 1, 8 and 64 (mixed lengths, stop tokens landing mid-draft,
// max_tokens mid-draft; at 64 logprobs to rounding), and seeded sampled requests too; the drafter
// reads the target's own hidden states (against a direct forward pass); a module made to reproduce
// the target has every draft accepted, so the drafts are the module's predictions at the right
// positions.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <mutex>

#include "engine/backend/cpu/cpu_backend.h"
#include "engine/model/model_description.h"
#include "engine/model/model_error.h"
#include "engine/model/model_weights.h"
#include "engine/spec/hidden_state_drafter.h"
#include "tests/backend/tiny_models.h"
#include "tests/spec/recording_drafter.h"
#include "tests/spec/spec_harness.h"
#include "tests/support/child_process.h"
#include "tests/support/temp_dir.h"

namespace nibble::runtime {
namespace {

using testing::RecordingDrafter;
using testing::Request;
using testing::SpecRun;

constexpr int kStateSlots = 64;

class MtpSpecDecode : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new nibble::testing::TempDir();
    nibble::testing::make_tiny_models(dir_->path(), "qwen3_next", 47, {"bf16"});
    if (::testing::Test::HasFatalFailure()) return;
    model::ModelWeights w = model::load_model(dir_->path() / "bf16");
    module_ = new model::ModelWeights(model::take_mtp_module(w));
    backend_ = backend::make_cpu_backend(std::move(w), 2).release();
  }
  static void TearDownTestSuite() {
    delete backend_;
    delete module_;
    delete dir_;
  }
  static testing::SpecTarget target() { return {backend_, kStateSlots}; }
  static std::shared_ptr<spec::HiddenStateDrafter> drafter(const model::ModelWeights& module) {
    return std::make_shared<spec::HiddenStateDrafter>(
        backend::make_cpu_backend(module, 2),
        spec::HiddenStateDrafterOptions{.max_sequences = 64,
                                        .max_tokens_per_sequence = 256,
                                        .block_size = 4,
                                        .max_chunk_tokens = 64});
  }
  static std::shared_ptr<spec::HiddenStateDrafter> drafter() { return drafter(*module_); }

  static nibble::testing::TempDir* dir_;
  static model::ModelWeights* module_;
  static backend::Backend* backend_;
};
nibble::testing::TempDir* MtpSpecDecode::dir_ = nullptr;
model::ModelWeights* MtpSpecDecode::module_ = nullptr;
backend::Backend* MtpSpecDecode::backend_ = nullptr;

TEST_F(MtpSpecDecode, TheModuleLoadsAsTheModelsOwnLayer) {
  const model::ModelConfig& c = module_->config;
  EXPECT_TRUE(c.mtp_module);
  EXPECT_EQ(c.num_layers, 1);
  const model::ModelDescription d = model::describe_model(c);
  EXPECT_EQ(d.input, model::ModelInput::kEmbeddingAndHidden);
  ASSERT_EQ(d.layers.size(), 1u);
  EXPECT_EQ(d.layers[0].mixer, model::MixerKind::kAttention);
  EXPECT_TRUE(d.layers[0].attention.output_gate);
  EXPECT_EQ(d.layers[0].norm, model::NormKind::kRmsZeroCentred);
  EXPECT_EQ(d.layers[0].ffn.kind, model::FfnKind::kMoe);
  ASSERT_TRUE(module_->mtp.has_value());
  EXPECT_EQ(module_->mtp->fc.out_features, c.hidden_size);
  EXPECT_EQ(module_->mtp->fc.in_features, 2 * c.hidden_size);
  EXPECT_EQ(module_->layers[0].experts.size(), std::size_t(c.num_experts));
  EXPECT_EQ(module_->final_norm.size(), std::size_t(c.hidden_size));
  // The target keeps nothing of it once taken.
  EXPECT_EQ(backend_->config().num_layers, 4);
}

TEST_F(MtpSpecDecode, ACheckpointWithoutAModuleLoadsAsBefore) {
  nibble::testing::TempDir dir;
  const std::string cmd = std::string(NIBBLE_MAKE_MODEL) +
                          " --arch qwen3_next --preset tiny-interval2 --seed 3 --threads 2 "
                          "--no-tokenizer --dtype bf16 --output " +
                          (dir.path() / "m").string();
  const auto made = nibble::testing::run_command(cmd);
  ASSERT_EQ(made.exit_code, 0) << made.output;
  model::ModelWeights w = model::load_model(dir.path() / "m");
  EXPECT_FALSE(w.mtp.has_value());
  EXPECT_EQ(w.config.num_nextn_predict_layers, 0);
  try {
    (void)model::take_mtp_module(w);
    FAIL() << "a model without mtp.* weights has no module to take";
  } catch (const model::ModelError& e) {
    EXPECT_NE(std::string(e.what()).find("no multi-token-prediction module"), std::string::npos)
        << e.what();
  }
}

class MtpGreedy : public MtpSpecDecode, public ::testing::WithParamInterface<int> {};

TEST_P(MtpGreedy, TokensFinishReasonsAndLogprobsMatchWithoutSpeculation) {
  std::vector<Request> requests = testing::mixed_greedy_requests(GetParam());
  const auto refs = testing::greedy_references(target(), requests);
  testing::add_mid_draft_stops(requests, refs);
  const SpecRun baseline = testing::generate(target(), requests, nullptr, 0);
  // At batch 64 the runs preempt and split prompts into other prefill chunks than each other,
  // which moves a hybrid model's logprobs in the last bits (docs/models.md); tokens stay exact.
  const float tolerance = GetParam() > 8 ? 1e-4f : 0.0f;
  // k 1 and 3 (one draft: no chaining; three: chained on the module's own output); batch 64 with
  // k 3 only, the slow one on a shared CPU.
  for (int k : GetParam() > 8 ? std::vector<int>{3} : std::vector<int>{1, 3}) {
    const SpecRun mtp = testing::generate(target(), requests, drafter(), k);
    testing::expect_same(baseline, mtp, "mtp k " + std::to_string(k), tolerance);
    testing::expect_counters_add_up(mtp, k);
    EXPECT_GT(testing::spec_metric(mtp.metrics, "num_draft_tokens"), 0) << "k " << k;
  }
}

INSTANTIATE_TEST_SUITE_P(Batch, MtpGreedy, ::testing::Values(1, 8, 64));

TEST_F(MtpSpecDecode, SeededSampledRequestsGiveTheSameTokens) {
  // n = 2: two sequences of one prompt, a module slot each.
  const std::vector<Request> requests = testing::seeded_sampled_requests(8, 2000);
  const SpecRun baseline = testing::generate(target(), requests, nullptr, 0);
  const SpecRun mtp = testing::generate(target(), requests, drafter(), 2);
  testing::expect_same(baseline, mtp, "mtp sampled");
  testing::expect_counters_add_up(mtp, 2);
}

// The target's last hidden state (before the final norm) at every position of `tokens`, from
// one forward pass of its own.
std::vector<float> direct_hidden_states(backend::Backend& b, std::span<const int> tokens) {
  const int block = 4, blocks = int(tokens.size() + block - 1) / block;
  auto cache = b.new_kv_cache_with_state(blocks, block, 1);
  std::vector<int> table(static_cast<std::size_t>(blocks));
  for (int i = 0; i < blocks; ++i) table[std::size_t(i)] = i;
  std::vector<float> hidden(tokens.size() * std::size_t(b.config().hidden_size));
  backend::BatchItem item;
  item.tokens = tokens;
  item.block_table = table;
  item.state_slot = 0;
  item.hidden_out = hidden;
  b.forward_batch(*cache, std::span(&item, 1));
  return hidden;
}

TEST_F(MtpSpecDecode, TheDrafterReadsTheTargetsHiddenStatesOfKeptPositions) {
  std::vector<Request> requests = testing::mixed_greedy_requests(6);
  auto recording = std::make_shared<RecordingDrafter>(drafter());
  const SpecRun run = testing::generate(target(), requests, recording, 3);
  testing::expect_counters_add_up(run, 3);
  const auto observed = recording->observed();
  ASSERT_FALSE(observed.empty());
  const std::size_t H = std::size_t(backend_->config().hidden_size);
  int checked_rows = 0, after_verify = 0;
  for (const auto& o : observed) {
    const std::size_t rows = o.hidden.size() / H;
    ASSERT_LE(std::size_t(o.start) + rows, o.tokens.size());
    const auto direct =
        direct_hidden_states(*backend_, std::span(o.tokens).first(std::size_t(o.start) + rows));
    for (std::size_t r = 0; r < rows; ++r)
      for (std::size_t d = 0; d < H; ++d) {
        const float want = direct[(std::size_t(o.start) + r) * H + d];
        ASSERT_NEAR(o.hidden[r * H + d], want, 2e-4f * (1.0f + std::fabs(want)))
            << "position " << o.start + int(r) << " dim " << d;
      }
    checked_rows += int(rows);
    after_verify += o.start > 0;
  }
  EXPECT_GT(after_verify, 0) << "decode and verify steps were observed, not only prompts";
  RecordProperty("checked_rows", std::to_string(checked_rows));
}

// Every layer's output projection zeroed: the target's next token depends on its last token only
// (lm_head of the normed embedding). The module made to read only the embedding of the token it
// is given (fc = [I 0], its layer zeroed) then predicts exactly that: every draft is the
// target's own greedy token.
void zero_layer_outputs(model::LayerWeights& l) {
  const auto zero = [](model::Linear& m) { std::fill(m.dense.begin(), m.dense.end(), 0.0f); };
  zero(l.o);
  zero(l.linear_attention.out_proj);
  zero(l.down);
  zero(l.shared_down);
  for (auto& e : l.experts) zero(e.down);
}

TEST_F(MtpSpecDecode, AModuleThatReproducesTheTargetHasEveryDraftAccepted) {
  model::ModelWeights w = model::load_model(dir_->path() / "bf16");
  for (auto& l : w.layers) zero_layer_outputs(l);
  std::fill(w.final_norm.begin(), w.final_norm.end(), 0.0f);  // zero-centred: a scale of 1
  model::ModelWeights module = model::take_mtp_module(w);
  zero_layer_outputs(module.layers[0]);
  std::fill(module.final_norm.begin(), module.final_norm.end(), 0.0f);
  std::fill(module.mtp->embedding_norm.begin(), module.mtp->embedding_norm.end(), 0.0f);
  const std::int64_t H = module.config.hidden_size;
  model::Linear& fc = module.mtp->fc;
  std::fill(fc.dense.begin(), fc.dense.end(), 0.0f);
  for (std::int64_t i = 0; i < H; ++i) fc.dense[std::size_t(i * 2 * H + i)] = 1.0f;
  auto echo = backend::make_cpu_backend(std::move(w), 2);

  std::vector<Request> requests = testing::mixed_greedy_requests(8);
  const testing::SpecTarget t{echo.get(), kStateSlots};
  const SpecRun baseline = testing::generate(t, requests, nullptr, 0);
  const SpecRun mtp = testing::generate(t, requests, drafter(module), 3);
  testing::expect_same(baseline, mtp, "mtp on the echo model");
  testing::expect_counters_add_up(mtp, 3);
  const double drafted = testing::spec_metric(mtp.metrics, "num_draft_tokens");
  EXPECT_GT(drafted, 0);
  EXPECT_EQ(testing::spec_metric(mtp.metrics, "num_accepted_tokens"), drafted)
      << "the module predicts the target's own tokens: every draft is accepted";
}

}  // namespace
}  // namespace nibble::runtime
