// guided_regex: full-match semantics over UTF-8, the supported constructs, and refusals that
// name the construct.
#include <gtest/gtest.h>

#include "engine/structured/structured_error.h"
#include "tests/structured/grammar_test_util.h"

namespace nibble::structured {
namespace {

using testing::regex;

TEST(RegexGrammar, LiteralsClassesAndQuantifiers) {
  const auto phone = regex(R"(\(\d{3}\) \d{3}-\d{4})");
  EXPECT_TRUE(phone.accepts("(555) 123-4567"));
  EXPECT_FALSE(phone.accepts("(555) 123-456"));
  EXPECT_FALSE(phone.accepts("555 123-4567"));

  const auto word = regex("[A-Z][a-z]+( [A-Z][a-z]+)?");
  EXPECT_TRUE(word.accepts("Ada"));
  EXPECT_TRUE(word.accepts("Ada Lovelace"));
  EXPECT_FALSE(word.accepts("ada"));
  EXPECT_FALSE(word.accepts("A"));

  const auto counted = regex("a{2,}b{0,1}c{3}");
  EXPECT_TRUE(counted.accepts("aaccc"));
  EXPECT_TRUE(counted.accepts("aaaaabccc"));
  EXPECT_FALSE(counted.accepts("abccc"));
  EXPECT_FALSE(counted.accepts("aabbccc"));
}

TEST(RegexGrammar, AlternationGroupsAndAnchors) {
  const auto r = regex("^(?:yes|no|maybe)(?<bang>!)*$");
  EXPECT_TRUE(r.accepts("yes"));
  EXPECT_TRUE(r.accepts("maybe!!!"));
  EXPECT_FALSE(r.accepts("yesno"));
  EXPECT_FALSE(r.accepts("y"));
}

TEST(RegexGrammar, NegatedClassesAndDotCoverNonAscii) {
  const auto r = regex("[^a-z]+");
  EXPECT_TRUE(r.accepts("ÄÖ€😀"));
  EXPECT_FALSE(r.accepts("Äb"));
  const auto dot = regex("x.y");
  EXPECT_TRUE(dot.accepts("x€y"));
  EXPECT_FALSE(dot.accepts("x\ny"));
  // A character may arrive one byte at a time: prefixes inside a UTF-8 sequence are live.
  EXPECT_TRUE(dot.prefix("x\xe2"));
  EXPECT_TRUE(dot.prefix("x\xe2\x82"));
  EXPECT_FALSE(dot.prefix("x\x82"));
  const auto unicode = regex(R"([\u00e0-\u00ff]\x41)");
  EXPECT_TRUE(unicode.accepts("éA"));
  EXPECT_FALSE(unicode.accepts("eA"));
}

// The parser recurses once per group: 20,000 nested groups overflowed the stack (issue 44).
// Up to max_depth levels compile; one more is refused naming the limit.
TEST(RegexGrammar, GroupNestingIsBoundedByMaxDepth) {
  auto nested = [](int levels) {
    return std::string(std::size_t(levels), '(') + "a" + std::string(std::size_t(levels), ')');
  };
  EXPECT_TRUE(regex(nested(128)).accepts("a"));
  try {
    regex(nested(129));
    ADD_FAILURE() << "129 nested groups compiled";
  } catch (const StructuredError& e) {
    EXPECT_EQ(e.keyword(), "(");
    EXPECT_NE(std::string(e.what()).find("more than 128 levels"), std::string::npos) << e.what();
  }
  EXPECT_THROW(regex(nested(20000)), StructuredError);
  OutputSpec spec;
  spec.kind = OutputKind::kRegex;
  spec.regex = nested(200);
  JsonGrammarOptions deeper;
  deeper.max_depth = 256;
  EXPECT_TRUE(testing::compile(spec, deeper).accepts("a"));
}

// Found by tests/fuzz/fuzz_regex: "\\x||" reached std::stoul, whose std::invalid_argument
// escaped as a 500, and "\\x-1" parsed as a code point of 2^32 - 1.
TEST(RegexGrammar, HexEscapesTakeExactlyHexDigits) {
  EXPECT_TRUE(regex(R"(\x41\u00e9)").accepts("A\xc3\xa9"));
  EXPECT_EQ(testing::refused_keyword([] { regex(R"(\x||)"); }), "\\x");
  EXPECT_EQ(testing::refused_keyword([] { regex(R"(\x-1)"); }), "\\x");
  EXPECT_EQ(testing::refused_keyword([] { regex(R"(\u 12a)"); }), "\\u");
}

// A repeated group that can match nothing would repeat forever without input: refused when
// compiled (it was an expansion-budget error in the matcher before), not left to the matcher.
TEST(RegexGrammar, StarOfAnEmptyableGroupIsRefusedAtCompileTime) {
  EXPECT_EQ(testing::refused_keyword([] { regex("(a?)*b"); }), "left recursion");
}

TEST(RegexGrammar, UnsupportedConstructsNameThemselves) {
  auto keyword_of = [](const std::string& pattern) {
    return testing::refused_keyword([&] { regex(pattern); });
  };
  EXPECT_EQ(keyword_of(R"((a)\1)"), "\\1");
  EXPECT_EQ(keyword_of("a(?=b)"), "(?");
  EXPECT_EQ(keyword_of(R"(\bword)"), "\\b");
  EXPECT_EQ(keyword_of("a{5000}"), "{m,n}");
  EXPECT_EQ(keyword_of("(ab"), "(");
  EXPECT_EQ(keyword_of("*a"), "*");
  EXPECT_EQ(keyword_of("a^b"), "^");
  EXPECT_EQ(keyword_of("[z-a]"), "[z-a]");
}

}  // namespace
}  // namespace nibble::structured
