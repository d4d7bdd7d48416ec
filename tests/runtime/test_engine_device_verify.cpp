// Speculative verify steps sampled on the device (ModelRunner::execute_sampled with drafts): a
// sequence with k drafts samples k + 1 rows on the device, row j with the penalties of the tokens
// so far and drafts [0, j) and the random stream j draws on, and the engine verifies the sampled
// tokens on the host. Greedy requests must give exactly the tokens of decoding without
// speculation; seeded sampled requests the same tokens and logprobs as the host verify path and
// as decoding without speculation (verify.h: each emitted token uses the draw it would have
// used).
#include <gtest/gtest.h>

#include <algorithm>

#include "engine/runtime/sampler.h"
#include "engine/spec/drafter.h"
#include "tests/runtime/hash_logits_runner.h"

namespace nibble::runtime {
namespace {

using test_support::HashLogitsRunner;
using test_support::Output;
using test_support::run;

constexpr int kVocab = 300;

// Proposes the raw-logits argmax continuation of HashLogitsRunner, but a wrong token where the
// argmax is a multiple of 5: drafts are accepted in runs of varied length, and rejected.
class HashDrafter : public spec::Drafter {
 public:
  std::string_view name() const override { return "hash"; }
  void propose(std::span<const int> tokens, int max_tokens,
               std::vector<int>& draft) const override {
    std::vector<int> context(tokens.begin(), tokens.end());
    for (int i = 0; i < max_tokens; ++i) {
      std::vector<float> logits;
      test_support::hash_logits(context, kVocab, logits);
      int t = int(std::max_element(logits.begin(), logits.end()) - logits.begin());
      if (t % 5 == 0) t = (t + 1) % kVocab;
      draft.push_back(t);
      context.push_back(t);
    }
  }
};

EngineConfig speculative(int k) {
  EngineConfig c;
  c.drafter = std::make_shared<HashDrafter>();
  c.num_speculative_tokens = k;
  return c;
}

GenerationRequest request(SamplingParams p, std::vector<int> prompt, int index) {
  GenerationRequest r;
  r.id = "r" + std::to_string(index);
  r.prompt = std::move(prompt);
  r.params = p;
  r.channel = std::make_shared<OutputChannel>();
  return r;
}

std::vector<GenerationRequest> greedy_requests() {
  SamplingParams plain;
  plain.max_tokens = 40;
  plain.temperature = 0;
  SamplingParams penalized = plain;
  penalized.repetition_penalty = 1.4f;
  penalized.frequency_penalty = 0.7f;
  penalized.presence_penalty = 0.3f;
  penalized.logprobs = 2;
  std::vector<GenerationRequest> out;
  out.push_back(request(plain, {1, 2, 3}, 0));
  out.push_back(request(penalized, {9, 8, 7, 6}, 1));
  out.push_back(request(plain, {50}, 2));
  return out;
}

std::vector<GenerationRequest> seeded_requests() {
  SamplingParams seeded;
  seeded.max_tokens = 30;
  seeded.temperature = 0.7f;
  seeded.top_k = 30;
  seeded.top_p = 0.95f;
  seeded.repetition_penalty = 1.2f;
  seeded.frequency_penalty = 0.4f;
  seeded.presence_penalty = 0.2f;
  seeded.logprobs = 3;
  seeded.seed = 77;
  seeded.n = 2;
  // Cold enough that the argmax drafts are often right: rows after accepted drafts are used.
  SamplingParams cold;
  cold.max_tokens = 30;
  cold.temperature = 0.15f;
  cold.min_p = 0.05f;
  cold.presence_penalty = 0.5f;
  cold.seed = 5;
  std::vector<GenerationRequest> out;
  out.push_back(request(seeded, {1, 2, 3, 4, 5}, 0));
  out.push_back(request(cold, {11, 12}, 1));
  return out;
}

std::size_t total_tokens(const Output& out) {
  std::size_t n = 0;
  for (const auto& t : out.tokens) n += t.size();
  return n;
}

TEST(EngineDeviceVerify, GreedyGivesTheTokensOfDecodingWithoutSpeculation) {
  HashLogitsRunner plain(kVocab, false), host(kVocab, false), device(kVocab, true);
  const Output a = run(plain, greedy_requests());
  const Output b = run(host, greedy_requests(), speculative(4));
  const Output c = run(device, greedy_requests(), speculative(4));
  ASSERT_EQ(a.tokens.size(), 3u);
  for (const auto& t : a.tokens) EXPECT_EQ(t.size(), 40u);
  EXPECT_EQ(a.tokens, b.tokens);
  EXPECT_EQ(a.tokens, c.tokens);
  EXPECT_EQ(b.logprobs, c.logprobs);
  EXPECT_EQ(device.host_steps, 0);
  EXPECT_GT(device.verify_steps, 10);
  // Drafts were accepted: fewer steps than tokens (the prefill steps included).
  EXPECT_LT(std::size_t(device.device_steps), total_tokens(c) * 2 / 3);
}

TEST(EngineDeviceVerify, SeededSampledGivesTheHostVerifyPathsTokens) {
  HashLogitsRunner plain(kVocab, false), host(kVocab, false), device(kVocab, true);
  const Output a = run(plain, seeded_requests());
  const Output b = run(host, seeded_requests(), speculative(3));
  const Output c = run(device, seeded_requests(), speculative(3));
  ASSERT_EQ(a.tokens.size(), 3u);
  EXPECT_EQ(b.tokens, c.tokens);
  EXPECT_EQ(b.logprobs, c.logprobs);
  for (std::size_t k = 0; k < b.top.size(); ++k)
    for (std::size_t t = 0; t < b.top[k].size(); ++t) {
      ASSERT_EQ(b.top[k][t].size(), c.top[k][t].size());
      for (std::size_t j = 0; j < b.top[k][t].size(); ++j)
        EXPECT_EQ(b.top[k][t][j].token, c.top[k][t][j].token);
    }
  // And the tokens of decoding without speculation: the same draw for each emitted token.
  EXPECT_EQ(a.tokens, c.tokens);
  EXPECT_NE(c.tokens[0], c.tokens[1]);  // the n choices draw their own streams
  EXPECT_EQ(device.host_steps, 0);
  EXPECT_GT(device.verify_steps, 10);
  EXPECT_LT(std::size_t(device.device_steps), total_tokens(c));
}

// Row j of a verify step: the random stream j draws past row 0, and row 0's penalty list with
// drafts [0, j) counted as output tokens.
TEST(EngineDeviceVerify, EachRowHasItsDraftsPenaltiesAndRandomPosition) {
  HashLogitsRunner device(kVocab, true);
  (void)run(device, seeded_requests(), speculative(4));
  ASSERT_GT(device.verify_rows.size(), 20u);
  int rows_with_new_entries = 0;
  for (const test_support::VerifyRow& row : device.verify_rows) {
    EXPECT_EQ(row.position, row.first_position + std::uint64_t(row.draft_position));
    auto count = [](const std::vector<kernels::SamplingPenalty>& list, int token) {
      for (const auto& e : list)
        if (e.token == token) return e.output_count;
      return -1;  // not listed
    };
    std::vector<int> seen;
    for (int d : row.drafts_before) {
      if (std::find(seen.begin(), seen.end(), d) != seen.end()) continue;
      seen.push_back(d);
      const int before = std::max(count(row.first_penalties, d), 0);
      const int drafted = int(std::count(row.drafts_before.begin(), row.drafts_before.end(), d));
      EXPECT_EQ(count(row.penalties, d), before + drafted);
      rows_with_new_entries += count(row.first_penalties, d) < 0;
    }
    // Every other token keeps row 0's count.
    for (const auto& e : row.first_penalties)
      if (std::find(seen.begin(), seen.end(), e.token) == seen.end()) {
        EXPECT_EQ(count(row.penalties, e.token), e.output_count);
      }
    EXPECT_EQ(row.penalties.size(),
              row.first_penalties.size() +
                  std::size_t(std::count_if(seen.begin(), seen.end(), [&](int d) {
                    return count(row.first_penalties, d) < 0;
                  })));
  }
  EXPECT_GT(rows_with_new_entries, 0);  // a draft not in the list yet gets an entry
}

// Proposes the greedy continuation of HashLogitsRunner under the request's penalties, computed
// as the host sampler does (one request of a known prompt length): every draft is the target's
// token only where each verify row sees the drafts before it in its penalty list.
class PenalizedOracle : public spec::Drafter {
 public:
  PenalizedOracle(SamplingParams params, int vocab, std::size_t prompt_len)
      : params_(params), vocab_(vocab), prompt_len_(prompt_len) {}
  std::string_view name() const override { return "penalized-oracle"; }
  void propose(std::span<const int> tokens, int max_tokens,
               std::vector<int>& draft) const override {
    std::vector<int> context(tokens.begin(), tokens.end());
    for (int i = 0; i < max_tokens; ++i) {
      std::vector<float> logits;
      test_support::hash_logits(context, vocab_, logits);
      const std::span<const int> all(context);
      SamplerRng rng(0);
      const int t =
          sample_token(logits, params_, all.first(prompt_len_), all.subspan(prompt_len_), rng)
              .token;
      draft.push_back(t);
      context.push_back(t);
    }
  }

 private:
  SamplingParams params_;
  int vocab_;
  std::size_t prompt_len_;
};

// A small vocabulary and a strong frequency penalty: the penalized greedy token often differs
// from the one a row would pick without its drafts' penalties, so a row that missed them would
// reject the oracle's draft and emit another token.
TEST(EngineDeviceVerify, PenaltiesOfEarlierDraftsApplyToEachRow) {
  constexpr int kSmallVocab = 16;
  SamplingParams p;
  p.max_tokens = 48;
  p.temperature = 0;
  p.frequency_penalty = 1.5f;
  const std::vector<int> prompt = {1, 2, 3};
  auto one = [&] { return std::vector<GenerationRequest>{request(p, prompt, 0)}; };
  HashLogitsRunner plain(kSmallVocab, false), device(kSmallVocab, true);
  const Output a = run(plain, one());
  EngineConfig c;
  c.drafter = std::make_shared<PenalizedOracle>(p, kSmallVocab, prompt.size());
  c.num_speculative_tokens = 4;
  const Output b = run(device, one(), c);
  ASSERT_EQ(a.tokens.size(), 1u);
  EXPECT_EQ(a.tokens[0].size(), 48u);
  EXPECT_EQ(a.tokens, b.tokens);
  EXPECT_EQ(device.host_steps, 0);
  // Every draft accepted: 48 tokens in about 48 / 5 verify steps, plus the prefill.
  EXPECT_LE(device.device_steps, 11);
}

// More top logprobs than the device returns: the verify steps sample on the host, alike.
TEST(EngineDeviceVerify, ManyTopLogprobsVerifyOnTheHost) {
  auto one = [] {
    std::vector<GenerationRequest> reqs = greedy_requests();
    reqs[1].params.logprobs = kernels::kMaxSampledTopLogprobs + 1;
    return std::vector<GenerationRequest>{std::move(reqs[1])};
  };
  HashLogitsRunner plain(kVocab, false), device(kVocab, true);
  const Output a = run(plain, one());
  const Output b = run(device, one(), speculative(2));
  EXPECT_EQ(a.tokens, b.tokens);
  EXPECT_GT(device.host_steps, 0);
  EXPECT_EQ(device.device_steps, 0);
  ASSERT_FALSE(b.top[0].empty());
  EXPECT_EQ(b.top[0][0].size(), std::size_t(kernels::kMaxSampledTopLogprobs + 1));
}

}  // namespace
}  // namespace nibble::runtime
