// Stop strings across token boundaries, with the byte-level fixture tokenizer (token i = byte i).
#include <gtest/gtest.h>

#include "engine/server/choice_text.h"

namespace nibble::server {
namespace {

const tokenizer::Tokenizer& byte_tokenizer() {
  static const tokenizer::Tokenizer t = tokenizer::Tokenizer::from_directory(
      std::string(NIBBLE_SOURCE_DIR) + "/tests/server/fixtures/byte-model");
  return t;
}

std::string run(ChoiceText& text, const std::string& bytes, bool& stopped) {
  std::string out;
  for (unsigned char c : bytes) {
    out += text.push(c);
    if (text.stopped()) break;
  }
  stopped = text.stopped();
  if (!stopped) out += text.finish();
  return out;
}

TEST(ChoiceText, StopStringSpanningTokensIsCutAndNotEmitted) {
  ChoiceText text(byte_tokenizer(), {"END"});
  bool stopped = false;
  EXPECT_EQ(run(text, "hello ENDworld", stopped), "hello ");
  EXPECT_TRUE(stopped);
}

TEST(ChoiceText, EarliestOfSeveralStopsWins) {
  ChoiceText text(byte_tokenizer(), {"xyz", "b"});
  bool stopped = false;
  EXPECT_EQ(run(text, "aaxyzb", stopped), "aa");
}

TEST(ChoiceText, HeldBackTextIsReleasedWhenNoStopMatches) {
  ChoiceText text(byte_tokenizer(), {"STOP"});
  std::string streamed;
  for (unsigned char c : std::string("ST ST")) streamed += text.push(c);
  EXPECT_EQ(streamed, "ST");  // "ST" could still start "STOP": held back
  streamed += text.finish();
  EXPECT_EQ(streamed, "ST ST");
}

TEST(ChoiceText, MultiByteCharactersAreNeverSplit) {
  ChoiceText text(byte_tokenizer(), {});
  const std::string s = "é😀";
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    std::string piece = text.push(static_cast<unsigned char>(s[i]));
    if (!piece.empty()) {
      EXPECT_NE(static_cast<unsigned char>(piece.back()) & 0xC0, 0xC0u)
          << "chunk ends on a lead byte";
    }
    out += piece;
  }
  out += text.finish();
  EXPECT_EQ(out, s);
}

TEST(ChoiceText, SpecialTokensAreSkipped) {
  ChoiceText text(byte_tokenizer(), {});
  std::string out = text.push('a');
  out += text.push(257);  // <|im_start|>
  out += text.push('b');
  out += text.finish();
  EXPECT_EQ(out, "ab");
}

}  // namespace
}  // namespace nibble::server

namespace nibble::server {
namespace {

TEST(ChoiceText, IncludedStopStringEndsTheText) {
  ChoiceText text(byte_tokenizer(), {"xyz", "END"}, true, /*include_stop=*/true);
  bool stopped = false;
  EXPECT_EQ(run(text, "hello ENDworld", stopped), "hello END");
  EXPECT_TRUE(stopped);
  // The earliest match is the one kept, whatever the list order.
  ChoiceText first(byte_tokenizer(), {"b", "xyz"}, true, true);
  EXPECT_EQ(run(first, "aaxyzb", stopped), "aaxyz");
}

}  // namespace
}  // namespace nibble::server
