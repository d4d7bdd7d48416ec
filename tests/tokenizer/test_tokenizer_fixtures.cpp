// Encode/decode on hand-written tokenizer.json fixtures: merge order, both merges forms,
// added tokens, post-processor, byte fallback, unk fusion, and clear errors for bad files.
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "engine/tokenizer/tokenizer.h"
#include "tests/tokenizer/fixture_path.h"

namespace nibble::tokenizer {
namespace {

using testing::fixture;
using Ids = std::vector<TokenId>;

class ByteLevelFixture : public ::testing::TestWithParam<const char*> {
 protected:
  Tokenizer tok = Tokenizer::from_file(fixture(GetParam()));
};

TEST_P(ByteLevelFixture, MergesByRank) {
  EXPECT_EQ(tok.encode("abc"), (Ids{5}));
  // " ab" -> Ġ a b: "a b" (rank 0) goes before "Ġ a" (rank 2), and "Ġ ab" is no merge.
  EXPECT_EQ(tok.encode("abc ab"), (Ids{5, 3, 4}));
  EXPECT_EQ(tok.encode(" a"), (Ids{6}));
  EXPECT_EQ(tok.encode("cab"), (Ids{2, 4}));  // c stays alone: "c a" is no merge
  EXPECT_EQ(tok.encode("ba"), (Ids{1, 0}));
  EXPECT_EQ(tok.encode(""), Ids{});
}

TEST_P(ByteLevelFixture, LongWordMergesInLessThanQuadraticTime) {
  // One 200,000-character pre-token: a quadratic merge loop would need ~10^10 steps here.
  std::string word;
  for (int i = 0; i < 100000; ++i) word += "ab";
  const auto start = std::chrono::steady_clock::now();
  const auto ids = tok.encode(word);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(ids, Ids(100000, 4));
  EXPECT_LT(seconds, 2.0);
}

TEST_P(ByteLevelFixture, MapsBytesAndNormalizesToNfc) {
  EXPECT_EQ(tok.encode("\xC3\xA9"), Ids{10});   // é = C3 A9 = "Ã©"
  EXPECT_EQ(tok.encode("e\xCC\x81"), Ids{10});  // NFC first: e + U+0301 -> é
}

TEST_P(ByteLevelFixture, MatchesAddedTokensBeforeBpeLongestFirst) {
  EXPECT_EQ(tok.encode("ab<|end|>"), (Ids{4, 11}));
  EXPECT_EQ(tok.encode("ab<|end|>!a"), (Ids{4, 12, 0}));  // "<|end|>!" beats "<|end|>"
  EXPECT_EQ(tok.encode("a <pad> b"), (Ids{0, 14, 1}));    // lstrip/rstrip eat the spaces
}

TEST_P(ByteLevelFixture, AddsTemplateSpecialTokensOnlyWhenAsked) {
  EXPECT_EQ(tok.encode("ab", {.add_special_tokens = true}), (Ids{13, 4}));
  EXPECT_EQ(tok.encode("ab", {.add_special_tokens = false}), (Ids{4}));
}

TEST_P(ByteLevelFixture, DecodesAndSkipsSpecialTokens) {
  EXPECT_EQ(tok.decode({13, 5, 7, 11}), "<|begin|>abc ab<|end|>");  // 7 = "Ġab"
  EXPECT_EQ(tok.decode({13, 5, 7, 11}, {.skip_special_tokens = true}), "abc ab");
  EXPECT_EQ(tok.decode({12}, {.skip_special_tokens = true}), "<|end|>!");  // not special: kept
  EXPECT_EQ(tok.decode({8}), "\xEF\xBF\xBD");                              // lone C3 byte -> U+FFFD
  EXPECT_THROW(tok.decode({99}), TokenizerError);
}

INSTANTIATE_TEST_SUITE_P(BothMergeForms, ByteLevelFixture,
                         ::testing::Values("byte_level_string_merges.json",
                                           "byte_level_pair_merges.json"));

TEST(SentencePieceFixture, PrependsMetaspaceAndFallsBackToBytes) {
  const auto tok = Tokenizer::from_file(fixture("sentencepiece_byte_fallback.json"));
  EXPECT_EQ(tok.encode("hi"), (Ids{5, 8}));            // "h i" (rank 0) wins over "▁ h" (rank 1)
  EXPECT_EQ(tok.encode("h\xC3\xA9"), (Ids{9, 3, 4}));  // é not in vocab: <0xC3><0xA9>
  EXPECT_EQ(tok.encode("h\xE2\x88\x91\xE2\x88\x91"),
            (Ids{9, 0}));  // ∑ has no byte tokens: unk, fused
  EXPECT_EQ(tok.encode("hi", {.add_special_tokens = true}), (Ids{1, 5, 8}));
  EXPECT_EQ(tok.decode({1, 5, 8}, {.skip_special_tokens = true}),
            "hi");  // Strip drops the leading space
  EXPECT_EQ(tok.decode({9, 3, 4, 5, 8}), "h\xC3\xA9 hi");
}

TEST(MetaspaceFixture, SplitsOnMetaspaceAndPrependsOnlyToTheFirstSection) {
  const auto tok = Tokenizer::from_file(fixture("metaspace_pre_tokenizer.json"));
  EXPECT_EQ(tok.encode("hi hi"), (Ids{5, 8, 5, 8}));  // "▁hi" "▁hi", each h+i then no "▁ hi" merge
  // prepend_scheme "first": the span after an added token gets no ▁.
  EXPECT_EQ(tok.encode("hi</s>hi"), (Ids{5, 8, 2, 8}));
  EXPECT_EQ(tok.decode({5, 8, 5, 8}), "hi hi");  // the first token's leading space is dropped
  EXPECT_EQ(tok.decode({9, 3, 4}), "h\xC3\xA9");
}

struct MalformedCase {
  const char* file;
  const char* expected_fragment;
};

class MalformedFixture : public ::testing::TestWithParam<MalformedCase> {};

TEST_P(MalformedFixture, FailsWithAnErrorNamingTheField) {
  try {
    Tokenizer::from_file(fixture(GetParam().file));
    FAIL() << "loading " << GetParam().file << " should fail";
  } catch (const TokenizerError& e) {
    EXPECT_NE(std::string(e.what()).find(GetParam().expected_fragment), std::string::npos)
        << e.what();
  }
}

INSTANTIATE_TEST_SUITE_P(
    Errors, MalformedFixture,
    ::testing::Values(MalformedCase{"malformed_missing_vocab.json",
                                    "model.vocab: required field is missing"},
                      MalformedCase{"malformed_bad_merge.json",
                                    "model.merges[1]: expected \"a b\" or [\"a\", \"b\"], got 7"},
                      MalformedCase{"malformed_merge_outside_vocab.json",
                                    "model.merges[5]: merge 'c c' uses a token missing"},
                      MalformedCase{"malformed_unsupported_normalizer.json",
                                    "unsupported normalizer 'BertNormalizer'"},
                      MalformedCase{"malformed_bad_regex.json",
                                    "pretokenizers[0].pattern.Regex: regex does not compile"},
                      MalformedCase{"malformed_bad_added_id.json",
                                    "added_tokens[0].id: expected a non-negative integer"},
                      MalformedCase{"malformed_truncated.json", "not valid JSON"},
                      MalformedCase{"does_not_exist.json", "cannot open"}));

}  // namespace
}  // namespace nibble::tokenizer
