// The byte-level pushdown matcher on hand-built grammars: alternatives, repetition, tail
// recursion keeping stacks flat, and left recursion refused instead of hanging.
#include <gtest/gtest.h>

#include "engine/structured/grammar_matcher.h"
#include "engine/structured/structured_error.h"
#include "engine/structured/utf8_ranges.h"

namespace nibble::structured {
namespace {

TEST(GrammarMatcher, RepeatBoundsAreExact) {
  GrammarBuilder b;
  const Symbol items = b.repeat("x", b.byte('x'), 2, 4, {b.byte(',')});
  const int root = b.new_rule("root");
  b.add_alternative(root, {items});
  const Grammar g = b.build(root);
  GrammarMatcher m(g);
  EXPECT_FALSE(m.accepts("x"));
  EXPECT_TRUE(m.accepts("x,x"));
  EXPECT_TRUE(m.accepts("x,x,x"));
  EXPECT_TRUE(m.accepts("x,x,x,x"));
  EXPECT_FALSE(m.accepts_prefix("x,x,x,x,"));
  EXPECT_FALSE(m.accepts("xx"));
  EXPECT_TRUE(m.accepts_prefix("x,"));
  EXPECT_FALSE(m.accepts("x,"));
}

TEST(GrammarMatcher, UnboundedRepetitionKeepsOneFlatStack) {
  GrammarBuilder b;
  const Symbol star = b.repeat("a", b.byte('a'), 0, -1);
  const int root = b.new_rule("root");
  b.add_alternative(root, {b.byte('<'), star, b.byte('>')});
  const Grammar g = b.build(root);
  GrammarMatcher m(g);
  MatchState s = m.advance(m.initial(), "<" + std::string(10000, 'a'));
  ASSERT_EQ(s.stacks.size(), 2u);  // one more 'a', or '>'
  for (const MatchStack& stack : s.stacks) EXPECT_LE(stack.size(), 3u);
  EXPECT_TRUE(m.advance(s, ">").accepting());
  // The state after 10000 a's equals the state after one: this is what makes masks cacheable.
  EXPECT_EQ(s, m.advance(m.initial(), "<a"));
}

TEST(GrammarMatcher, LeftRecursionIsAnErrorNotAHang) {
  GrammarBuilder b;
  const int r = b.new_rule("r");
  b.add_alternative(r, {Symbol::rule(r), b.byte('a')});
  b.add_alternative(r, {b.byte('a')});
  const Grammar g = b.build(r);
  GrammarMatcher m(g);
  EXPECT_THROW(m.initial(), StructuredError);
}

// r -> r | 'a': the reference is a whole alternative, so the stack never grows and only the
// expansion budget stops it. Its recursive expansion took 200,000 frames and overflowed the
// stack (issue 44); the worklist keeps the call stack flat.
TEST(GrammarMatcher, LeftRecursionWithoutAReturnAddressIsAnErrorNotACrash) {
  GrammarBuilder b;
  const int r = b.new_rule("r");
  b.add_alternative(r, {Symbol::rule(r)});
  b.add_alternative(r, {b.byte('a')});
  const Grammar g = b.build(r);
  GrammarMatcher m(g);
  EXPECT_THROW(m.initial(), StructuredError);
}

TEST(Utf8Ranges, EncodeExactlyTheRange) {
  GrammarBuilder b;
  std::vector<std::vector<Symbol>> alts;
  utf8_sequences(b, 0x7F, 0x10000, alts);  // spans 1-, 2-, 3- and 4-byte encodings
  const int root = b.new_rule("root");
  for (auto& a : alts) b.add_alternative(root, a);
  const Grammar g = b.build(root);
  GrammarMatcher m(g);
  EXPECT_TRUE(m.accepts("\x7f"));
  EXPECT_FALSE(m.accepts("~"));
  EXPECT_TRUE(m.accepts("\xc2\x80"));           // U+0080
  EXPECT_TRUE(m.accepts("\xe2\x82\xac"));       // U+20AC
  EXPECT_FALSE(m.accepts("\xed\xa0\x80"));      // U+D800, a surrogate
  EXPECT_TRUE(m.accepts("\xef\xbf\xbf"));       // U+FFFF
  EXPECT_TRUE(m.accepts("\xf0\x90\x80\x80"));   // U+10000
  EXPECT_FALSE(m.accepts("\xf0\x90\x80\x81"));  // U+10001
  EXPECT_FALSE(m.accepts("\xc0\x80"));          // overlong
}

}  // namespace
}  // namespace nibble::structured
