// UTF-8 repair (same U+FFFD count as JS TextDecoder), completeness for streaming, and NFC.
#include <gtest/gtest.h>

#include "engine/text/utf8.h"
#include "engine/tokenizer/byte_level.h"
#include "engine/tokenizer/unicode_nfc.h"

namespace nibble::tokenizer {
namespace {

const std::string kFffd = "\xEF\xBF\xBD";

TEST(SanitizeUtf8, KeepsValidText) {
  const std::string text = "héllo 中文 😀";
  EXPECT_EQ(nibble::text::sanitize_utf8(text), text);
}

TEST(SanitizeUtf8, ReplacesMaximalSubpartsLikeTextDecoder) {
  // Values from `new TextDecoder().decode(Uint8Array.of(...))` in node 20.
  EXPECT_EQ(nibble::text::sanitize_utf8("a\xFF"
                                        "b"),
            "a" + kFffd + "b");
  EXPECT_EQ(nibble::text::sanitize_utf8("\xE4\xB8"
                                        "x"),
            kFffd + "x");  // truncated 3-byte: one U+FFFD
  EXPECT_EQ(nibble::text::sanitize_utf8("\x80\x80"),
            kFffd + kFffd);  // lone continuations: one each
  EXPECT_EQ(nibble::text::sanitize_utf8("\xC0\xAF"),
            kFffd + kFffd);  // overlong lead is never valid
  EXPECT_EQ(nibble::text::sanitize_utf8("\xED\xA0\x80"),
            kFffd + kFffd + kFffd);                               // surrogate: ED then A0 rejected
  EXPECT_EQ(nibble::text::sanitize_utf8("\xF0\x9F\x98"), kFffd);  // truncated emoji at the end
  EXPECT_EQ(nibble::text::sanitize_utf8("\xF4\x90\x80\x80"),
            kFffd + kFffd + kFffd + kFffd);  // > U+10FFFF
}

TEST(CompleteUtf8Prefix, HoldsBackOnlyAnIncompleteTail) {
  EXPECT_EQ(nibble::text::complete_utf8_prefix("ab"), 2u);
  EXPECT_EQ(nibble::text::complete_utf8_prefix("ab\xE4\xB8"), 2u);
  EXPECT_EQ(nibble::text::complete_utf8_prefix("ab\xE4\xB8\xAD"), 5u);
  EXPECT_EQ(nibble::text::complete_utf8_prefix("\xF0\x9F\x98"), 0u);
  EXPECT_EQ(nibble::text::complete_utf8_prefix("\xFF"), 1u);  // can never complete: released
  EXPECT_EQ(nibble::text::complete_utf8_prefix("\xE4\xB8x"),
            3u);  // cut short by a bad byte: released
}

TEST(Nfc, ComposesReordersAndLeavesStableTextAlone) {
  EXPECT_EQ(to_nfc("e\xCC\x81"), "\xC3\xA9");                       // e + acute -> é
  EXPECT_EQ(to_nfc("\xE1\x84\x80\xE1\x85\xA1\xE1\x86\xA8"), "각");  // Hangul L V T -> syllable
  // o + dot below (ccc 220) + circumflex (230) and the reverse order both give U+1ED9.
  EXPECT_EQ(to_nfc("o\xCC\xA3\xCC\x82"), "\xE1\xBB\x99");
  EXPECT_EQ(to_nfc("o\xCC\x82\xCC\xA3"), "\xE1\xBB\x99");
  EXPECT_EQ(to_nfc("\xE2\x84\xAB"), "\xC3\x85");  // Angstrom sign is a singleton -> Å
  EXPECT_EQ(to_nfc("plain ascii"), "plain ascii");
  EXPECT_EQ(to_nfc("中文"), "中文");
}

TEST(ByteLevel, MapsEveryByteAndBack) {
  std::string all;
  for (int b = 0; b < 256; ++b) all.push_back(static_cast<char>(b));
  const std::string mapped = bytes_to_byte_level(all);
  EXPECT_EQ(byte_to_unicode(' '), "\xC4\xA0");  // Ġ
  EXPECT_EQ(byte_to_unicode('a'), "a");
  ASSERT_TRUE(byte_level_to_bytes(mapped).has_value());
  EXPECT_EQ(*byte_level_to_bytes(mapped), all);
  EXPECT_FALSE(byte_level_to_bytes("中").has_value());
}

}  // namespace
}  // namespace nibble::tokenizer
