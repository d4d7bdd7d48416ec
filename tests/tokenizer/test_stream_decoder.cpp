// Streaming detokenization: chunks never end inside a UTF-8 character and concatenate to the
// full decode.
#include <gtest/gtest.h>

#include "engine/tokenizer/stream_decoder.h"
#include "tests/tokenizer/fixture_path.h"

namespace nibble::tokenizer {
namespace {

using testing::fixture;

TEST(StreamDecoder, HoldsBackSplitCharactersOfByteLevelTokens) {
  const auto tok = Tokenizer::from_file(fixture("byte_level_string_merges.json"));
  StreamDecoder stream(tok);
  EXPECT_EQ(stream.push(5), "abc");
  EXPECT_EQ(stream.push(8), "");  // "Ã" is byte C3: first half of é
  EXPECT_EQ(stream.push(9), "\xC3\xA9");
  EXPECT_EQ(stream.push(7), " ab");
  EXPECT_EQ(stream.flush(), "");
}

TEST(StreamDecoder, FlushReleasesAnIncompleteTailAsReplacement) {
  const auto tok = Tokenizer::from_file(fixture("byte_level_string_merges.json"));
  StreamDecoder stream(tok);
  EXPECT_EQ(stream.push(8), "");
  EXPECT_EQ(stream.flush(), "\xEF\xBF\xBD");
}

TEST(StreamDecoder, ByteFallbackTokensAndLeadingSpaceMatchFullDecode) {
  const auto tok = Tokenizer::from_file(fixture("sentencepiece_byte_fallback.json"));
  const std::vector<TokenId> ids{1, 9, 3, 4, 5, 8};
  StreamDecoder stream(tok, {.skip_special_tokens = true});
  std::vector<std::string> chunks;
  for (TokenId id : ids) chunks.push_back(stream.push(id));
  chunks.push_back(stream.flush());
  EXPECT_EQ(chunks, (std::vector<std::string>{"", "h", "", "\xC3\xA9", " ", "hi", ""}));
  std::string joined;
  for (const auto& c : chunks) joined += c;
  EXPECT_EQ(joined, tok.decode(ids, {.skip_special_tokens = true}));
}

}  // namespace
}  // namespace nibble::tokenizer
