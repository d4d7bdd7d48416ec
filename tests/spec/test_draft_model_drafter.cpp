// The draft_model drafter on the CPU backend: greedy tokens, finish reasons and logprobs are the
// same with and without it (the target itself as draft: every draft accepted; a shallower model
// of the same vocabulary: some accepted), its draft KV is reused across steps and rolled back
// past rejected drafts (a rolled-back slot drafts what the draft model computes from scratch),
// its memory is the configured slots and evicting them changes no output, and a draft model
// of another vocabulary is refused.
#include "engine/spec/draft_model_drafter.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "engine/backend/cpu/cpu_backend.h"
#include "engine/spec/speculative_config.h"
#include "tests/backend/random_model.h"
#include "tests/spec/spec_harness.h"

namespace nibble::runtime {
namespace {

using namespace testing;
using spec::DraftModelDrafter;

constexpr int kVocab = 97;
constexpr int kBlockSize = 4;

model::ModelConfig target_config(int vocab = kVocab) {
  return runtime::testing::tiny_llama_config(3, vocab);
}

model::ModelWeights target_weights() {
  return backend::testing::random_model(target_config(), 20261207);
}

// The target without its last layer: another model of the same vocabulary, which agrees with
// the target on some tokens and not on others.
model::ModelWeights shallower_weights() {
  model::ModelWeights w = target_weights();
  w.layers.pop_back();
  w.config.num_layers -= 1;
  return w;
}

backend::Backend& target_backend() {
  static const std::unique_ptr<backend::Backend> b = backend::make_cpu_backend(target_weights(), 1);
  return *b;
}

SpecTarget target() {
  return {&target_backend()};
}

std::shared_ptr<DraftModelDrafter> drafter(model::ModelWeights weights, int max_sequences = 64) {
  return std::make_shared<DraftModelDrafter>(backend::make_cpu_backend(std::move(weights), 1),
                                             kVocab,
                                             spec::DraftModelOptions{.max_sequences = max_sequences,
                                                                     .max_tokens_per_sequence = 256,
                                                                     .block_size = kBlockSize});
}

// mixed_greedy_requests(batch) with stop tokens inside drafts, and their run without speculation.
struct Baseline {
  std::vector<Request> requests;
  SpecRun run;
};
Baseline baseline(int batch) {
  Baseline b;
  b.requests = mixed_greedy_requests(batch);
  add_mid_draft_stops(b.requests, greedy_references(target(), b.requests));
  b.run = generate(target(), b.requests, nullptr, 0);
  return b;
}

double tokens_in(const std::vector<Request>& requests) {
  double n = 0;
  for (const Request& r : requests) n += double(r.prompt.size());
  return n;
}

double tokens_out(const SpecRun& run) {
  double n = 0;
  for (const auto& request : run.outcomes)
    for (const Outcome& o : request) n += double(o.tokens.size());
  return n;
}

class DraftModelExactness : public ::testing::TestWithParam<int> {};

TEST_P(DraftModelExactness, TheTargetAsItsOwnDraftHasEveryDraftAccepted) {
  const Baseline base = baseline(GetParam());
  const auto d = drafter(target_weights());
  const SpecRun run = generate(target(), base.requests, d, 4);
  expect_same(base.run, run, "draft_model (the target)");
  expect_counters_add_up(run, 4);
  const double drafted = spec_metric(run.metrics, "num_draft_tokens");
  EXPECT_GT(drafted, 0);
  EXPECT_EQ(spec_metric(run.metrics, "num_accepted_tokens"), drafted);
  // The draft KV is kept across steps: each position of a prompt or an output runs once, each
  // draft token but the last of a step once more (fed to draft the next).
  const DraftModelDrafter::Stats s = d->stats();
  EXPECT_EQ(s.evictions, 0u);
  EXPECT_LE(double(s.computed_tokens), tokens_in(base.requests) + tokens_out(run) + drafted);
  if (GetParam() > 1) {  // batch 1's one request (7 tokens) drafts once
    EXPECT_GT(s.reused_tokens, 0u);
  }
}

TEST_P(DraftModelExactness, AShallowerDraftHasSomeDraftsAccepted) {
  const Baseline base = baseline(GetParam());
  const SpecRun run = generate(target(), base.requests, drafter(shallower_weights()), 3);
  expect_same(base.run, run, "draft_model (shallower)");
  expect_counters_add_up(run, 3);
  const double drafted = spec_metric(run.metrics, "num_draft_tokens");
  const double accepted = spec_metric(run.metrics, "num_accepted_tokens");
  EXPECT_GT(drafted, 0);
  EXPECT_LT(accepted, drafted) << "a different model should miss some drafts";
  if (GetParam() > 1) {
    EXPECT_GT(accepted, 0) << "and agree with the target on some";
  }
}

INSTANTIATE_TEST_SUITE_P(Batch, DraftModelExactness, ::testing::Values(1, 8, 64));

TEST(DraftModelDrafter, EvictingSlotsBeyondItsBoundChangesNoOutput) {
  const Baseline base = baseline(8);
  const auto d = drafter(shallower_weights(), /*max_sequences=*/2);
  EXPECT_EQ(d->max_sequences(), 2);
  EXPECT_EQ(d->kv_bytes(),
            2 * std::size_t(256 / kBlockSize) *
                backend::make_cpu_backend(shallower_weights(), 1)->kv_block_bytes(kBlockSize))
      << "the KV cache is the two slots of 256 positions";
  const SpecRun run = generate(target(), base.requests, d, 3);
  expect_same(base.run, run, "draft_model with 2 slots");
  expect_counters_add_up(run, 3);
  EXPECT_GT(d->stats().evictions, 0u);
}

// The draft model's greedy continuation of `tokens`, computed from scratch.
std::vector<int> greedy_from_scratch(const std::vector<int>& tokens, int n) {
  backend::Backend& b = target_backend();
  auto seq = b.new_sequence(256);
  std::vector<float> logits(kVocab);
  std::vector<int> out;
  std::vector<std::int32_t> feed(tokens.begin(), tokens.end());
  for (int i = 0; i < n; ++i) {
    b.forward(*seq, feed, logits);
    out.push_back(int(std::max_element(logits.begin(), logits.end()) - logits.begin()));
    feed = {out.back()};
  }
  return out;
}

TEST(DraftModelDrafter, RollsItsKvBackPastRejectedDrafts) {
  const auto d = drafter(target_weights());
  std::mt19937 gen(5);
  const std::vector<int> prompt = repeating_prompt(gen, 20);
  std::vector<int> first;
  d->propose(prompt, 4, first);
  ASSERT_EQ(first, greedy_from_scratch(prompt, 4));
  EXPECT_EQ(d->stats().computed_tokens, prompt.size() + 3);  // the last draft is not fed

  // The target accepted the first draft and chose another token than the second: the slot
  // holds the prompt and first[0..3), of which first[1] and first[2] are now wrong.
  std::vector<int> tokens = prompt;
  tokens.push_back(first[0]);
  tokens.push_back((first[1] + 1) % kVocab);
  std::vector<int> second;
  d->propose(tokens, 4, second);
  EXPECT_EQ(second, greedy_from_scratch(tokens, 4));
  const DraftModelDrafter::Stats s = d->stats();
  EXPECT_EQ(s.reused_tokens, prompt.size() + 1) << "the prompt and the accepted draft";
  EXPECT_EQ(s.computed_tokens, prompt.size() + 3 + 1 + 3);

  // Asked again for the same tokens (a sequence preempted and recomputed): the last token runs
  // again, nothing else.
  std::vector<int> again;
  d->propose(tokens, 2, again);
  EXPECT_EQ(again, greedy_from_scratch(tokens, 2));
  EXPECT_EQ(d->stats().reused_tokens, s.reused_tokens + tokens.size() - 1);
}

// The engine appends the accepted drafts and the target's token, so the first position that
// differs from the slot is the last one; here the tokens part from the slot three positions
// before their end (the first draft rejected, two steps without drafting since).
TEST(DraftModelDrafter, CutsItsKvBackToTheCommonPrefix) {
  const auto d = drafter(target_weights());
  std::mt19937 gen(8);
  const std::vector<int> prompt = repeating_prompt(gen, 20);
  std::vector<int> first;
  d->propose(prompt, 4, first);
  std::vector<int> tokens = prompt;
  for (int t : {(first[0] + 1) % kVocab, first[1], first[2]}) tokens.push_back(t);
  std::vector<int> second;
  d->propose(tokens, 4, second);
  EXPECT_EQ(second, greedy_from_scratch(tokens, 4));
  EXPECT_EQ(d->stats().reused_tokens, prompt.size());
}

TEST(DraftModelDrafter, RunsLongPrefixesInChunks) {
  const auto d =
      std::make_shared<DraftModelDrafter>(backend::make_cpu_backend(target_weights(), 1), kVocab,
                                          spec::DraftModelOptions{.max_chunk_tokens = 7});
  std::mt19937 gen(7);
  const std::vector<int> prompt = repeating_prompt(gen, 30);  // chunks of 7, 7, 7, 7, 2
  std::vector<int> draft;
  d->propose(prompt, 3, draft);
  EXPECT_EQ(draft, greedy_from_scratch(prompt, 3));
  EXPECT_EQ(d->stats().computed_tokens, 30u + 2);
}

TEST(DraftModelDrafter, ProposesNoMoreThanItsSlotHolds) {
  const auto d = drafter(target_weights());
  std::mt19937 gen(6);
  std::vector<int> draft;
  d->propose(repeating_prompt(gen, 254), 4, draft);  // positions 254, 255 left: 3 drafts
  EXPECT_EQ(draft.size(), 3u);
  draft.clear();
  d->propose(repeating_prompt(gen, 257), 4, draft);
  EXPECT_TRUE(draft.empty());
}

TEST(DraftModelDrafter, RefusesAnotherVocabularyOrBadOptions) {
  auto refusal = [](model::ModelWeights w, spec::DraftModelOptions o) -> std::string {
    try {
      const DraftModelDrafter d(backend::make_cpu_backend(std::move(w), 1), kVocab, o);
      (void)d;
    } catch (const spec::SpeculativeConfigError& e) {
      return e.what();
    }
    return "accepted";
  };
  EXPECT_EQ(refusal(backend::testing::random_model(target_config(98), 1), {}),
            "--speculative-config: draft_model: the draft model's vocabulary has 98 tokens, the "
            "target's 97; a draft model must share the target's tokenizer and vocabulary");
  EXPECT_NE(refusal(target_weights(), {.block_size = 0}).find("at least 1"), std::string::npos);
  EXPECT_NE(refusal(target_weights(), {.max_sequences = 0}).find("at least 1"), std::string::npos);
}

}  // namespace
}  // namespace nibble::runtime
