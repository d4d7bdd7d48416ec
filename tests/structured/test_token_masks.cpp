// Token masks over a vocabulary: tokens that cross grammar boundaries, numbers and strings
// split anywhere, UTF-8 split across tokens, EOS only when complete, and the trie walk agreeing
// with a token-by-token check.
#include <gtest/gtest.h>

#include <random>

#include "engine/structured/compiled_grammar.h"
#include "engine/structured/token_bitmask.h"
#include "tests/structured/grammar_test_util.h"

namespace nibble::structured {
namespace {

// A small byte-level vocabulary: all 256 single bytes, some multi-byte pieces (one of them
// twice: tokenizers have ids with equal bytes), a special token (no bytes) and EOS.
std::shared_ptr<const TokenVocabulary> small_vocabulary(int& eos) {
  std::vector<std::optional<std::string>> bytes;
  for (int b = 0; b < 256; ++b) bytes.push_back(std::string(1, char(b)));
  for (const char* piece : {"{\"",          "\":",      "\",",        "\"}",
                            "12",           "3.",       ".5",         "e-",
                            "true",         "tr",       "ue",         " \"",
                            "name",         "\xe2\x82", "\xac\"",     "\xe2\x82\xac",
                            "\"\n",         "  ",       "\n\n\n",     "\"}]",
                            "}\n",          "12",       "abc",        "abcdef",
                            "ab",           "a b",      "\xc3\xa9",   "a\xe2\x82\xac\xe2\x82\xac",
                            "\xed\xa0\x80", "\xc3",     "\xc3\xa9\"}"}) {
    bytes.push_back(std::string(piece));
  }
  bytes.push_back(std::nullopt);  // a special token
  eos = int(bytes.size());
  bytes.push_back(std::string("<eos>"));
  return std::make_shared<const TokenVocabulary>(std::move(bytes), std::vector<int>{eos});
}

std::shared_ptr<const CompiledGrammar> compile(const std::string& schema_text,
                                               std::shared_ptr<const TokenVocabulary> vocab,
                                               std::size_t max_cached_states = 4096) {
  OutputSpec spec;
  spec.kind = OutputKind::kJsonSchema;
  spec.schema = nlohmann::ordered_json::parse(schema_text);
  return std::make_shared<const CompiledGrammar>(build_grammar(spec, {}), vocab, "json_schema",
                                                 max_cached_states);
}

int id_of(const TokenVocabulary& v, const std::string& text) {
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (v.bytes(int(i)) && *v.bytes(int(i)) == text) return int(i);
  }
  return -1;
}

TEST(TokenMasks, TokensMayCrossStringNumberAndUtf8Boundaries) {
  int eos = 0;
  auto vocab = small_vocabulary(eos);
  auto g = compile(R"({"type":"object","properties":{"name":{"type":"string"},
      "x":{"type":"number"}},"required":["name","x"],"additionalProperties":false})",
                   vocab);
  auto c = g->start();
  std::vector<std::uint32_t> mask(g->mask_words());
  auto step = [&](const std::string& token) {
    c->fill_mask(mask);
    const int id = id_of(*vocab, token);
    EXPECT_TRUE(bitmask_allows(mask, std::size_t(id))) << "token '" << token << "'";
    EXPECT_TRUE(c->advance(id)) << token;
  };
  c->fill_mask(mask);
  EXPECT_FALSE(bitmask_allows(mask, std::size_t(eos)));
  EXPECT_FALSE(bitmask_allows(mask, std::size_t(id_of(*vocab, "name"))));  // must open with {
  step("{\"");
  step("name");
  step("\":");
  step(" \"");
  step("\xe2\x82");  // the euro sign split across two tokens
  c->fill_mask(mask);
  EXPECT_FALSE(bitmask_allows(mask, std::size_t('a')));  // a continuation byte must follow
  step("\xac\"");
  step(",");
  step("\"");
  step("x");
  step("\":");
  step("12");
  step("3.");
  c->fill_mask(mask);
  EXPECT_FALSE(bitmask_allows(mask, std::size_t(id_of(*vocab, "}\n"))));  // "123." needs digits
  step("5");
  step("e-");
  step("3");
  EXPECT_FALSE(c->is_complete());
  step("}");
  EXPECT_TRUE(c->is_complete());
  c->fill_mask(mask);
  EXPECT_TRUE(bitmask_allows(mask, std::size_t(eos)));
  EXPECT_EQ(bitmask_count(mask), 1u);  // nothing may follow the object but EOS
  EXPECT_TRUE(c->advance(eos));
}

TEST(TokenMasks, SpecialTokensAndWhitespaceRunsAreNeverAllowedPastTheBound) {
  int eos = 0;
  auto vocab = small_vocabulary(eos);
  auto g = compile(R"({"type":"array","items":{"type":"boolean"}})", vocab);
  std::vector<std::uint32_t> mask(g->mask_words());
  auto c = g->start();
  c->fill_mask(mask);
  EXPECT_FALSE(bitmask_allows(mask, std::size_t(eos - 1)));  // the special token
  ASSERT_TRUE(c->advance('['));
  c->fill_mask(mask);
  EXPECT_TRUE(bitmask_allows(mask, std::size_t(id_of(*vocab, "  "))));
  EXPECT_FALSE(bitmask_allows(mask, std::size_t(id_of(*vocab, "\n\n\n"))));  // above 2
  ASSERT_TRUE(c->advance(id_of(*vocab, "  ")));
  c->fill_mask(mask);
  EXPECT_FALSE(bitmask_allows(mask, std::size_t(' ')));
  EXPECT_TRUE(bitmask_allows(mask, std::size_t(id_of(*vocab, "true"))));
  EXPECT_TRUE(bitmask_allows(mask, std::size_t(id_of(*vocab, "tr"))));
}

// The trie walk must allow exactly the tokens a direct per-token check allows, in every state
// along random walks through a recursive schema (strings unbounded, bounded and by pattern, so
// that whole subtrees are taken by their byte classes or refused): with room for every state in
// the automaton,
// and with a cache so small (4 automaton states) that walks overflow it and fall back to the
// matcher.
class TrieWalk : public ::testing::TestWithParam<std::size_t> {};

TEST_P(TrieWalk, MatchesPerTokenCheck) {
  int eos = 0;
  auto vocab = small_vocabulary(eos);
  auto g = compile(R"({"$defs":{"n":{"type":"object","properties":{"v":{"type":"integer"},
      "k":{"type":"array","items":{"$ref":"#/$defs/n"},"maxItems":2},
      "s":{"type":"string"},"t":{"type":"string","maxLength":3},"w":{"type":"string",
      "pattern":"^[a-z]{1,5}$"}},"required":["v","k"],"additionalProperties":false}},
      "$ref":"#/$defs/n"})",
                   vocab, GetParam());
  std::mt19937 rng(7);
  std::vector<std::uint32_t> mask(g->mask_words());
  for (int walk = 0; walk < 20; ++walk) {
    MatchState state = g->initial_state();
    auto c = g->start();
    for (int step = 0; step < 40; ++step) {
      c->fill_mask(mask);
      std::vector<int> allowed;
      for (std::size_t id = 0; id < vocab->size(); ++id) {
        bool expected = false;
        if (vocab->is_eos(int(id))) {
          expected = state.accepting();
        } else if (vocab->bytes(int(id)) && !vocab->bytes(int(id))->empty()) {
          expected = !g->matcher().advance(state, *vocab->bytes(int(id))).dead();
        }
        ASSERT_EQ(bitmask_allows(mask, id), expected) << "token " << id << " walk " << walk;
        if (expected && !vocab->is_eos(int(id))) allowed.push_back(int(id));
      }
      if (allowed.empty()) break;
      const int token = allowed[std::size_t(rng() % allowed.size())];
      ASSERT_TRUE(c->advance(token));
      state = g->matcher().advance(state, *vocab->bytes(token));
    }
  }
  if (GetParam() > 100) {
    EXPECT_GT(g->cached_states(), 10u);
    EXPECT_GT(g->automaton_states(), g->cached_states());
  } else {
    EXPECT_LE(g->automaton_states(), 4 * GetParam());
  }
}

INSTANTIATE_TEST_SUITE_P(CacheSizes, TrieWalk, ::testing::Values(4096, 1));

TEST(TokenBitmask, ApplyMasksDisallowedAndOutOfRangeLogits) {
  std::vector<float> logits(40, 1.0f);
  std::vector<std::uint32_t> mask(1, 0);
  bitmask_allow(mask, 3);
  bitmask_allow(mask, 31);
  apply_token_bitmask(logits, mask);
  for (std::size_t i = 0; i < logits.size(); ++i) {
    EXPECT_EQ(std::isinf(logits[i]), i != 3 && i != 31) << i;
  }
}

}  // namespace
}  // namespace nibble::structured
