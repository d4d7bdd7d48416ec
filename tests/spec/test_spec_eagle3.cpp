// Speculative decoding's eagle3 method on the CPU backend: nibble-make-model writes a random
// EAGLE-3 head in the public layout for a tiny Llama target (4 layers; the head names layers 0, 2
// and 3), load_eagle3_head loads it against the target, and greedy tokens, finish reasons and
// logprobs are identical with and without its drafts at batch 1, 8 and 64 (mixed lengths, stop
// tokens landing mid-draft, max_tokens mid-draft), seeded sampled requests too; the target hands
// the drafter the inputs of those layers (against a target cut after each layer); a malformed
// head (a tensor missing or of the wrong shape, d2t out of range, another target's sizes) is
// refused with a message naming what is wrong; the CUDA backend refuses both sides at load.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <mutex>

#include "engine/backend/cpu/cpu_backend.h"
#include "engine/model/eagle3_head.h"
#include "engine/model/model_description.h"
#include "engine/model/model_error.h"
#include "engine/model/safetensors.h"
#include "engine/model/safetensors_writer.h"
#include "engine/spec/hidden_state_drafter.h"
#include "engine/spec/speculative_config.h"
#include "tests/backend/random_model.h"
#include "tests/spec/recording_drafter.h"
#include "tests/spec/spec_harness.h"
#include "tests/support/child_process.h"
#include "tests/support/temp_dir.h"

namespace nibble::runtime {
namespace {

namespace fs = std::filesystem;
using testing::RecordingDrafter;
using testing::Request;
using testing::SpecRun;

constexpr int kTargetLayers = 4;

// The target's config.json, for nibble-make-model --target (the keys its tiny head reads).
void write_target_config(const fs::path& dir, const model::ModelConfig& c) {
  fs::create_directories(dir);
  const nlohmann::json j = {{"architectures", {"LlamaForCausalLM"}},
                            {"hidden_size", c.hidden_size},
                            {"intermediate_size", c.intermediate_size},
                            {"num_attention_heads", c.num_heads},
                            {"num_key_value_heads", c.num_kv_heads},
                            {"head_dim", c.head_dim},
                            {"num_hidden_layers", c.num_layers},
                            {"vocab_size", c.vocab_size},
                            {"max_position_embeddings", c.max_position_embeddings},
                            {"rms_norm_eps", c.rms_norm_eps}};
  std::ofstream(dir / "config.json") << j.dump(2);
}

class Eagle3SpecDecode : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new nibble::testing::TempDir();
    target_weights_ = new model::ModelWeights(
        backend::testing::random_model(testing::tiny_llama_config(kTargetLayers), 20261207));
    write_target_config(dir_->path() / "target", target_weights_->config);
    const std::string cmd = std::string(NIBBLE_MAKE_MODEL) +
                            " --arch llama_eagle3 --preset tiny --seed 11 --threads 2 --target " +
                            (dir_->path() / "target").string() + " --output " + head_dir().string();
    const auto made = nibble::testing::run_command(cmd);
    ASSERT_EQ(made.exit_code, 0) << cmd << "\n" << made.output;
    head_ = new model::ModelWeights(model::load_eagle3_head(head_dir(), *target_weights_));
    model::ModelWeights target = *target_weights_;
    target.config.hidden_state_layers =
        model::eagle3_target_layers(*head_->config.eagle3, kTargetLayers);
    backend_ = backend::make_cpu_backend(std::move(target), 2).release();
  }
  static void TearDownTestSuite() {
    delete backend_;
    delete head_;
    delete target_weights_;
    delete dir_;
  }
  static fs::path head_dir() { return dir_->path() / "head"; }
  static testing::SpecTarget target() { return {backend_, 0}; }
  static std::shared_ptr<spec::HiddenStateDrafter> drafter() {
    model::ModelWeights head = *head_;
    std::vector<int> d2t = head.eagle3->draft_to_target;
    return std::make_shared<spec::HiddenStateDrafter>(
        backend::make_cpu_backend(std::move(head), 2),
        spec::HiddenStateDrafterOptions{.max_sequences = 64,
                                        .max_tokens_per_sequence = 256,
                                        .block_size = 4,
                                        .max_chunk_tokens = 64},
        std::move(d2t));
  }

  static nibble::testing::TempDir* dir_;
  static model::ModelWeights* target_weights_;
  static model::ModelWeights* head_;
  static backend::Backend* backend_;
};
nibble::testing::TempDir* Eagle3SpecDecode::dir_ = nullptr;
model::ModelWeights* Eagle3SpecDecode::target_weights_ = nullptr;
model::ModelWeights* Eagle3SpecDecode::head_ = nullptr;
backend::Backend* Eagle3SpecDecode::backend_ = nullptr;

TEST_F(Eagle3SpecDecode, MakeModelsHeadLoadsInThePublicLayout) {
  const model::ModelConfig& c = head_->config;
  ASSERT_TRUE(c.eagle3.has_value());
  EXPECT_EQ(c.architecture, "LlamaForCausalLMEagle3");
  EXPECT_EQ(c.vocab_size, testing::kPromptVocab);
  EXPECT_EQ(c.eagle3->draft_vocab_size, testing::kPromptVocab / 2);
  EXPECT_EQ(c.eagle3->aux_layers, (std::vector<int>{0, 2, 3}));  // named: 4 layers are too few
  EXPECT_EQ(head_->eagle3->fc.in_features, 3 * 32);
  EXPECT_EQ(head_->layers[0].q.in_features, 2 * 32);
  EXPECT_EQ(head_->lm_head.out_features, c.eagle3->draft_vocab_size);
  // Draft id i is target id i * vocab / draft vocab (make-model's spread), read from d2t.
  const std::vector<int>& d2t = head_->eagle3->draft_to_target;
  ASSERT_EQ(d2t.size(), std::size_t(c.eagle3->draft_vocab_size));
  for (std::size_t i = 0; i < d2t.size(); ++i)
    EXPECT_EQ(d2t[i], int(i) * c.vocab_size / c.eagle3->draft_vocab_size) << i;
  // No embed_tokens of its own: the target's.
  EXPECT_EQ(head_->embed, target_weights_->embed);
  EXPECT_EQ(backend_->config().hidden_state_width(), 3 * 32);
  // A head is no model to serve.
  try {
    (void)model::load_model(head_dir());
    FAIL() << "load_model took an EAGLE-3 head";
  } catch (const model::ModelError& e) {
    EXPECT_NE(std::string(e.what()).find("is an EAGLE-3 draft head, not a model to serve"),
              std::string::npos)
        << e.what();
  }
}

// nibble-make-model's head presets refuse what they cannot write, saying why.
TEST_F(Eagle3SpecDecode, MakeModelRefusesHeadsItCannotWrite) {
  const auto make = [](const std::string& args) {
    return nibble::testing::run_command(std::string(NIBBLE_MAKE_MODEL) + " --threads 2 " + args +
                                        " 2>&1");
  };
  const std::string target = (dir_->path() / "target").string();
  const std::string out = " --output " + (dir_->path() / "refused").string();
  struct Case {
    std::string args;
    int exit_code;
    const char* message_part;
  };
  model::ModelConfig two_layers = testing::tiny_llama_config(2);
  write_target_config(dir_->path() / "two-layers", two_layers);
  const std::vector<Case> cases = {
      {"--arch llama_eagle3 --preset tiny" + out, 1, "takes its shapes from --target"},
      {"--arch llama_eagle3 --preset tiny --dtype nvfp4 --target " + target + out, 2,
       "writes a BF16 head"},
      {"--arch llama_eagle3 --preset llama-3.1-8b --target " + target + out, 1,
       "--target is another model"},
      {"--arch llama_eagle3 --preset tiny --target " + (dir_->path() / "two-layers").string() + out,
       1, "an EAGLE-3 head reads three different ones"},
      {"--arch llama --preset tiny --no-tokenizer --target " + target + out, 2,
       "--target is for --arch llama_eagle3"},
  };
  for (const Case& c : cases) {
    const auto r = make(c.args);
    EXPECT_EQ(r.exit_code, c.exit_code) << c.args << "\n" << r.output;
    EXPECT_NE(r.output.find(c.message_part), std::string::npos) << c.args << "\n" << r.output;
  }
}

class Eagle3Greedy : public Eagle3SpecDecode, public ::testing::WithParamInterface<int> {};

TEST_P(Eagle3Greedy, TokensFinishReasonsAndLogprobsMatchWithoutSpeculation) {
  std::vector<Request> requests = testing::mixed_greedy_requests(GetParam());
  const auto refs = testing::greedy_references(target(), requests);
  testing::add_mid_draft_stops(requests, refs);
  const SpecRun baseline = testing::generate(target(), requests, nullptr, 0);
  // k 1 (no chaining) and 3 (chained on the head's own pre-norm output); batch 64 with k 3 only.
  for (int k : GetParam() > 8 ? std::vector<int>{3} : std::vector<int>{1, 3}) {
    const SpecRun eagle3 = testing::generate(target(), requests, drafter(), k);
    testing::expect_same(baseline, eagle3, "eagle3 k " + std::to_string(k));
    testing::expect_counters_add_up(eagle3, k);
    EXPECT_GT(testing::spec_metric(eagle3.metrics, "num_draft_tokens"), 0) << "k " << k;
  }
}

INSTANTIATE_TEST_SUITE_P(Batch, Eagle3Greedy, ::testing::Values(1, 8, 64));

TEST_F(Eagle3SpecDecode, SeededSampledRequestsGiveTheSameTokens) {
  const std::vector<Request> requests = testing::seeded_sampled_requests(8, 3000);
  const SpecRun baseline = testing::generate(target(), requests, nullptr, 0);
  const SpecRun eagle3 = testing::generate(target(), requests, drafter(), 2);
  testing::expect_same(baseline, eagle3, "eagle3 sampled");
  testing::expect_counters_add_up(eagle3, 2);
}

// The last hidden state (before the final norm) of the target cut after its first `layers`
// layers at every position of `tokens`: the input of layer `layers` of the whole target.
std::vector<float> cut_target_hidden_states(const model::ModelWeights& target, int layers,
                                            std::span<const int> tokens) {
  model::ModelWeights cut = target;
  cut.config.num_layers = layers;
  cut.layers.resize(std::size_t(layers));
  auto b = backend::make_cpu_backend(std::move(cut), 1);
  const int block = 4, blocks = int(tokens.size() + block - 1) / block;
  auto cache = b->new_kv_cache(blocks, block);
  std::vector<int> table(static_cast<std::size_t>(blocks));
  for (int i = 0; i < blocks; ++i) table[std::size_t(i)] = i;
  std::vector<float> hidden(tokens.size() * std::size_t(target.config.hidden_size));
  backend::BatchItem item;
  item.tokens = tokens;
  item.block_table = table;
  item.hidden_out = hidden;
  b->forward_batch(*cache, std::span(&item, 1));
  return hidden;
}

TEST_F(Eagle3SpecDecode, TheDrafterReadsTheInputsOfTheHeadsLayers) {
  std::vector<Request> requests = testing::mixed_greedy_requests(4);
  auto recording = std::make_shared<RecordingDrafter>(drafter());
  const SpecRun run = testing::generate(target(), requests, recording, 3);
  testing::expect_counters_add_up(run, 3);
  const auto observed = recording->observed();
  ASSERT_FALSE(observed.empty());
  const std::size_t H = 32, W = 3 * H;
  const std::vector<int> layers = {0, 2, 3};
  int checked_rows = 0, after_verify = 0;
  for (const auto& o : observed) {
    const std::size_t rows = o.hidden.size() / W;
    ASSERT_EQ(o.hidden.size(), rows * W);
    const auto prefix = std::span(o.tokens).first(std::size_t(o.start) + rows);
    for (std::size_t j = 0; j < layers.size(); ++j) {
      // Layer 0's input is the embedding row; the others the target cut before them.
      const std::vector<float> want =
          layers[j] == 0 ? std::vector<float>()
                         : cut_target_hidden_states(*target_weights_, layers[j], prefix);
      for (std::size_t r = 0; r < rows; ++r)
        for (std::size_t d = 0; d < H; ++d) {
          const std::size_t p = std::size_t(o.start) + r;
          const float expected = layers[j] == 0
                                     ? target_weights_->embed[std::size_t(prefix[p]) * H + d]
                                     : want[p * H + d];
          ASSERT_NEAR(o.hidden[r * W + j * H + d], expected, 2e-4f * (1.0f + std::fabs(expected)))
              << "layer " << layers[j] << " position " << p << " dim " << d;
        }
    }
    checked_rows += int(rows);
    after_verify += o.start > 0;
  }
  EXPECT_GT(after_verify, 0) << "decode and verify steps were observed, not only prompts";
  RecordProperty("checked_rows", std::to_string(checked_rows));
}

// The head's first draft is its prediction at the sequence's second-to-last position (reading
// the last token and the target's hidden states one position before), through d2t.
TEST_F(Eagle3SpecDecode, TheFirstDraftIsTheHeadsPredictionAtTheLastKeptPosition) {
  const std::vector<int> tokens = {5, 17, 42, 8, 91, 3, 60};
  const int n = int(tokens.size());
  const int H = 32, W = 3 * H;
  // The target's hidden states of positions [0, n - 1), as the engine hands them after a prefill.
  std::vector<float> target_rows(std::size_t((n - 1) * W));
  {
    auto cache = backend_->new_kv_cache(2, 4);
    const std::vector<int> table = {0, 1};
    std::vector<float> hidden(std::size_t(n) * std::size_t(W));
    backend::BatchItem item;
    item.tokens = tokens;
    item.block_table = table;
    item.hidden_out = hidden;
    backend_->forward_batch(*cache, std::span(&item, 1));
    std::copy_n(hidden.begin(), target_rows.size(), target_rows.begin());
  }
  auto d = drafter();
  d->observe(1, tokens, 0, target_rows);
  std::vector<int> draft;
  d->propose_for(1, tokens, 1, draft);
  ASSERT_EQ(draft.size(), 1u);
  // The head run directly: positions [0, n - 1) read tokens [1, n).
  model::ModelWeights head = *head_;
  const std::vector<int> d2t = head.eagle3->draft_to_target;
  const int vd = head.config.logits_size();
  auto b = backend::make_cpu_backend(std::move(head), 1);
  auto cache = b->new_kv_cache(2, 4);
  const std::vector<int> table = {0, 1};
  std::vector<float> logits(static_cast<std::size_t>(vd));
  backend::BatchItem item;
  item.tokens = std::span(tokens).subspan(1);
  item.block_table = table;
  item.logits = logits;
  item.hidden_in = target_rows;
  b->forward_batch(*cache, std::span(&item, 1));
  const int best = int(std::ranges::max_element(logits) - logits.begin());
  EXPECT_EQ(draft[0], d2t[std::size_t(best)]);
}

// --- Malformed heads -------------------------------------------------------------------------

// A copy of the head at `to` with its tensors passed through `edit` (which may drop one, by
// returning false, or change its shape and bytes) and its config.json through `config_edit`.
void copy_head(const fs::path& from, const fs::path& to,
               const std::function<bool(model::TensorSpec&, std::vector<std::byte>&)>& edit,
               const std::function<void(nlohmann::json&)>& config_edit = {}) {
  fs::create_directories(to);
  auto file = model::SafetensorsFile::open(from / "model.safetensors");
  std::vector<model::WeightJob> jobs;
  for (const auto& [name, view] : file->tensors()) {
    model::TensorSpec spec{name, view.dtype, view.shape};
    std::vector<std::byte> bytes(view.bytes.begin(), view.bytes.end());
    if (!edit(spec, bytes)) continue;
    bytes.resize(spec.byte_size());
    jobs.push_back({{spec}, [bytes](std::vector<std::span<std::byte>>& out) {
                      std::memcpy(out[0].data(), bytes.data(), bytes.size());
                    }});
  }
  model::write_checkpoint(to, jobs, std::size_t(1) << 30, 1);
  nlohmann::json config;
  std::ifstream(from / "config.json") >> config;
  if (config_edit) config_edit(config);
  std::ofstream(to / "config.json") << config.dump(2);
}

std::string refusal(const fs::path& dir, const model::ModelWeights& target) {
  try {
    (void)model::load_eagle3_head(dir, target);
  } catch (const model::ModelError& e) {
    return e.what();
  }
  return "loaded";
}

TEST_F(Eagle3SpecDecode, MalformedHeadsAreRefusedByName) {
  const fs::path base = dir_->path() / "malformed";
  const auto keep = [](model::TensorSpec&, std::vector<std::byte>&) { return true; };
  struct Case {
    const char* what;
    std::function<bool(model::TensorSpec&, std::vector<std::byte>&)> edit;
    std::function<void(nlohmann::json&)> config_edit;
    const char* message_part;
  };
  const std::vector<Case> cases = {
      {"no hidden_norm",
       [](model::TensorSpec& t, std::vector<std::byte>&) {
         return t.name != "midlayer.hidden_norm.weight";
       },
       {},
       "midlayer.hidden_norm.weight"},
      {"no fc",
       [](model::TensorSpec& t, std::vector<std::byte>&) { return t.name != "fc.weight"; },
       {},
       "fc.weight"},
      {"fc over one hidden state",
       [](model::TensorSpec& t, std::vector<std::byte>&) {
         if (t.name == "fc.weight") t.shape = {32, 32};
         return true;
       },
       {},
       "fc"},
      {"q_proj over H, not 2H",
       [](model::TensorSpec& t, std::vector<std::byte>&) {
         if (t.name == "midlayer.self_attn.q_proj.weight") t.shape = {32, 32};
         return true;
       },
       {},
       "q_proj"},
      {"no lm_head",
       [](model::TensorSpec& t, std::vector<std::byte>&) { return t.name != "lm_head.weight"; },
       {},
       "lm_head"},
      {"no d2t",
       [](model::TensorSpec& t, std::vector<std::byte>&) { return t.name != "d2t"; },
       {},
       "missing tensor d2t"},
      {"d2t too short",
       [](model::TensorSpec& t, std::vector<std::byte>&) {
         if (t.name == "d2t") t.shape = {10};
         return true;
       },
       {},
       "tensor d2t: expected shape [48]"},
      {"d2t out of range",
       [](model::TensorSpec& t, std::vector<std::byte>& bytes) {
         if (t.name == "d2t") {
           const std::int64_t offset = 1000;
           std::memcpy(bytes.data() + 8, &offset, 8);
         }
         return true;
       },
       {},
       "draft id 1 maps to target id 1001"},
      {"another vocabulary", keep, [](nlohmann::json& c) { c["vocab_size"] = 128; },
       "vocab_size 128 is not its target's 97"},
      {"another target width", keep, [](nlohmann::json& c) { c["target_hidden_size"] = 64; },
       "hidden states of width 64"},
      {"not a head", keep, [](nlohmann::json& c) { c["architectures"] = {"LlamaForCausalLM"}; },
       "not an EAGLE-3 head"},
  };
  int i = 0;
  for (const Case& c : cases) {
    const fs::path dir = base / std::to_string(i++);
    copy_head(head_dir(), dir, c.edit, c.config_edit);
    const std::string message = refusal(dir, *target_weights_);
    EXPECT_NE(message.find(c.message_part), std::string::npos) << c.what << ": " << message;
  }
  // The unedited copy loads: the cases fail for their edit, not for the copying.
  copy_head(head_dir(), base / "same", keep);
  EXPECT_EQ(refusal(base / "same", *target_weights_), "loaded");
}

// A head for a target whose layers it cannot read, and a drafter on a model that is no head.
TEST_F(Eagle3SpecDecode, AHeadAndATargetThatDoNotFitAreRefused) {
  model::Eagle3HeadConfig e = *head_->config.eagle3;
  e.aux_layers = {0, 2, 4};
  EXPECT_THROW(model::eagle3_target_layers(e, kTargetLayers), model::ModelError);
  model::ModelWeights head = *head_;
  head.config.hidden_state_layers = {9};
  EXPECT_THROW(backend::make_cpu_backend(std::move(head), 1), backend::BackendError);
  model::ModelWeights plain = *target_weights_;
  EXPECT_THROW(
      spec::HiddenStateDrafter(backend::make_cpu_backend(std::move(plain), 1),
                               spec::HiddenStateDrafterOptions{.max_tokens_per_sequence = 64}),
      spec::SpeculativeConfigError);
  model::ModelWeights short_map = *head_;
  EXPECT_THROW(spec::HiddenStateDrafter(
                   backend::make_cpu_backend(std::move(short_map), 1),
                   spec::HiddenStateDrafterOptions{.max_tokens_per_sequence = 64}, {1, 2, 3}),
               spec::SpeculativeConfigError);
  model::ModelWeights no_map = *head_;  // 48 draft ids of 97, and nothing to map them
  EXPECT_THROW(
      spec::HiddenStateDrafter(backend::make_cpu_backend(std::move(no_map), 1),
                               spec::HiddenStateDrafterOptions{.max_tokens_per_sequence = 64}),
      spec::SpeculativeConfigError);
}

}  // namespace
}  // namespace nibble::runtime
