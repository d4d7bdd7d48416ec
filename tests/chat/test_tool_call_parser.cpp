// Tool-call parsers on each family's real output format, streamed in every chunk split: the
// deltas must add up to what the non-streamed parse of the whole text gives, a call's first
// delta carries id and name with empty arguments, and markup never reaches the content.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "engine/tool_calls/tool_call_parser.h"
#include "tests/chat/chunk_splits.h"

namespace nibble::tool_calls {
namespace {

struct Call {
  std::string name;
  std::string arguments;
  bool operator==(const Call&) const = default;
};

struct Parsed {
  std::string content;
  std::vector<Call> calls;
  std::vector<std::string> ids;
};

struct Case {
  const char* label;
  ToolCallMode mode;
  ToolCallFormat format;
  std::string text;
  std::string content;      // expected
  std::vector<Call> calls;  // expected
  int malformed = 0;
  std::string function_name = {};
  // False where a streamed answer has already announced a call before the markup broke (see
  // TruncatedCallAfterItsNameStaysACallWhenStreamed): only the whole-text parse is compared.
  bool same_when_streamed = true;
};

// Applies deltas as a client does; checks the delta protocol on the way.
void apply(const ToolCallOutput& out, Parsed& p, const std::string& where) {
  p.content += out.content;
  for (const ToolCallDelta& d : out.calls) {
    if (!d.id.empty()) {
      ASSERT_EQ(d.index, int(p.calls.size())) << where << ": calls are announced in order";
      ASSERT_FALSE(d.name.empty()) << where;
      ASSERT_TRUE(d.arguments.empty()) << where << ": the first delta has empty arguments";
      p.calls.push_back({d.name, ""});
      p.ids.push_back(d.id);
    } else {
      ASSERT_TRUE(d.name.empty()) << where;
      ASSERT_LT(d.index, int(p.calls.size())) << where << ": arguments before the call's name";
      p.calls[std::size_t(d.index)].arguments += d.arguments;
    }
  }
}

Parsed parse(const Case& c, const std::vector<std::string>& chunks, bool announce,
             int* malformed = nullptr) {
  ToolCallParser parser(c.mode, c.format, c.function_name);
  Parsed p;
  for (const std::string& chunk : chunks) {
    ToolCallOutput out;
    parser.push(chunk, out, announce);
    apply(out, p, c.label);
  }
  ToolCallOutput out;
  parser.finish(out);
  apply(out, p, c.label);
  EXPECT_EQ(parser.num_calls(), int(p.calls.size())) << c.label;
  if (malformed) *malformed = parser.num_malformed();
  return p;
}

const std::string kWeatherArgs = R"({"city": "Paris", "unit": "celsius"})";

std::vector<Case> cases() {
  using enum ToolCallFormat;
  const ToolCallMode kAuto = ToolCallMode::kAuto;
  return {
      // Qwen2.5 / Qwen3 (hermes): the template asks for exactly this layout.
      {"hermes one call",
       kAuto,
       kHermes,
       "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": " + kWeatherArgs +
           "}\n</tool_call>",
       "",
       {{"get_weather", kWeatherArgs}}},
      {"hermes text then two calls",
       kAuto,
       kHermes,
       "Let me check both.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
       "\"Paris\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": "
       "{\"tz\": \"Europe/Paris\"}}\n</tool_call>",
       "Let me check both.\n",
       {{"get_weather", R"({"city": "Paris"})"}, {"get_time", R"({"tz": "Europe/Paris"})"}}},
      {"hermes arguments as a JSON string, unicode",
       kAuto,
       kHermes,
       "<tool_call>\n{\"arguments\": \"{\\\"text\\\": \\\"h\\u00e9llo \xe6\x97\xa5\\\"}\", "
       "\"name\": \"say\"}\n</tool_call>",
       "",
       {{"say", "{\"text\": \"h\xc3\xa9llo \xe6\x97\xa5\"}"}}},
      {"hermes nested arguments and no end tag",
       kAuto,
       kHermes,
       "<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": [1, -2.5e3, true, null, {\"b\": "
       "\"}\"}]}}",
       "",
       {{"f", R"({"a": [1, -2.5e3, true, null, {"b": "}"}]})"}}},
      {"hermes call without arguments",
       kAuto,
       kHermes,
       "<tool_call>{\"name\": \"now\"}</tool_call>",
       "",
       {{"now", "{}"}}},
      {"hermes plain text with a lookalike",
       kAuto,
       kHermes,
       "a <tool and <tool_cal> b",
       "a <tool and <tool_cal> b",
       {}},
      {"hermes malformed JSON stays content",
       kAuto,
       kHermes,
       "<tool_call>\n{\"name\": get_weather}\n</tool_call>",
       "<tool_call>\n{\"name\": get_weather}\n</tool_call>",
       {},
       1},
      {"hermes object without name stays content",
       kAuto,
       kHermes,
       "ok <tool_call>{\"arguments\": {}}</tool_call>",
       "ok <tool_call>{\"arguments\": {}}</tool_call>",
       {},
       1},
      {"hermes name with a lone surrogate stays content",
       kAuto,
       kHermes,
       "<tool_call>{\"name\": \"f\\ud800\", \"arguments\": {}}</tool_call>",
       "<tool_call>{\"name\": \"f\\ud800\", \"arguments\": {}}</tool_call>",
       {},
       1},
      {"hermes text after a call",
       kAuto,
       kHermes,
       "<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>\n\nDone.",
       "Done.",
       {{"f", "{}"}}},
      // Llama 3.1 / 3.2 JSON tool calls.
      {"llama3 one call",
       kAuto,
       kLlama3Json,
       "{\"name\": \"get_weather\", \"parameters\": " + kWeatherArgs + "}",
       "",
       {{"get_weather", kWeatherArgs}}},
      {"llama3 python_tag and two calls",
       kAuto,
       kLlama3Json,
       "<|python_tag|>{\"name\": \"a\", \"parameters\": {}}; {\"name\": \"b\", \"parameters\": "
       "{\"x\": 1}}",
       "",
       {{"a", "{}"}, {"b", R"({"x": 1})"}}},
      {"llama3 leading whitespace",
       kAuto,
       kLlama3Json,
       " \n{\"name\": \"f\", \"parameters\": {\"q\": \"{;}\"}}",
       "",
       {{"f", R"({"q": "{;}"})"}}},
      {"llama3 a JSON answer is content",
       kAuto,
       kLlama3Json,
       "{\"answer\": 42}",
       "{\"answer\": 42}",
       {},
       1},
      {"llama3 text is content",
       kAuto,
       kLlama3Json,
       "The set {1, 2} has <|python two items.",
       "The set {1, 2} has <|python two items.",
       {}},
      // Mistral: the JSON list (tokenizer v3-v7) and name[ARGS] (v11+).
      {"mistral json list",
       kAuto,
       kMistral,
       "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": " + kWeatherArgs +
           "}, {\"name\": \"g\", \"arguments\": {\"x\": [1, 2]}}]",
       "",
       {{"get_weather", kWeatherArgs}, {"g", R"({"x": [1, 2]})"}}},
      {"mistral name args form",
       kAuto,
       kMistral,
       "Sure.[TOOL_CALLS]get_weather[ARGS]" + kWeatherArgs +
           "[TOOL_CALLS]add[ARGS]{\"a\": 1, \"b\": 2}",
       "Sure.",
       {{"get_weather", kWeatherArgs}, {"add", R"({"a": 1, "b": 2})"}}},
      {"mistral malformed stays content",
       kAuto,
       kMistral,
       "[TOOL_CALLS] not json",
       "[TOOL_CALLS] not json",
       {},
       1},
      {"mistral broken list stays content",
       kAuto,
       kMistral,
       "[TOOL_CALLS][{\"name\": \"f\", \"arguments\": {}}, 7]",
       "[TOOL_CALLS][{\"name\": \"f\", \"arguments\": {}}, 7]",
       {},
       1,
       "",
       false},
      // The shapes a constrained tool_choice produces.
      {"required list",
       ToolCallMode::kRequired,
       kHermes,
       "[{\"name\": \"f\", \"parameters\": {\"a\": 1}}, {\"name\": \"g\", \"parameters\": {}}]",
       "",
       {{"f", R"({"a": 1})"}, {"g", "{}"}}},
      {"named function",
       ToolCallMode::kNamed,
       kHermes,
       kWeatherArgs,
       "",
       {{"get_weather", kWeatherArgs}},
       0,
       "get_weather"},
  };
}

TEST(ToolCallParser, WholeTextParsesAsExpected) {
  for (const Case& c : cases()) {
    int malformed = -1;
    const Parsed p = parse(c, {c.text}, /*announce=*/false, &malformed);
    EXPECT_EQ(p.content, c.content) << c.label;
    EXPECT_EQ(p.calls, c.calls) << c.label;
    EXPECT_EQ(malformed, c.malformed) << c.label;
    for (std::size_t i = 0; i < p.calls.size(); ++i) {
      EXPECT_TRUE(nlohmann::json::accept(p.calls[i].arguments)) << c.label;
      if (c.format == ToolCallFormat::kMistral) {
        EXPECT_EQ(p.ids[i].size(), 9u) << c.label << ": Mistral's templates require 9 characters";
      } else {
        EXPECT_TRUE(p.ids[i].starts_with("call_")) << c.label;
        EXPECT_EQ(p.ids[i].size(), 29u) << c.label;
      }
    }
  }
}

TEST(ToolCallParser, EveryChunkSplitStreamsTheSameAnswer) {
  for (const Case& c : cases()) {
    if (!c.same_when_streamed) continue;
    for (const auto& chunks : nibble::testing::chunk_splits(c.text)) {
      const Parsed p = parse(c, chunks, /*announce=*/true);
      EXPECT_EQ(p.content, c.content) << c.label << " in " << chunks.size() << " chunks";
      EXPECT_EQ(p.calls, c.calls) << c.label << " in " << chunks.size() << " chunks";
      if (::testing::Test::HasFailure()) return;
    }
  }
}

TEST(ToolCallParser, StreamingAnnouncesTheNameBeforeTheArgumentsEnd) {
  ToolCallParser parser(ToolCallMode::kAuto, ToolCallFormat::kHermes);
  ToolCallOutput out;
  parser.push("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"ci", out);
  ASSERT_EQ(out.calls.size(), 2u);
  EXPECT_EQ(out.calls[0].name, "get_weather");
  EXPECT_EQ(out.calls[1].arguments, "{\"ci");
  EXPECT_TRUE(out.content.empty());
  out = {};
  parser.push("ty\": \"Paris\"}}\n</tool_call>", out);
  ASSERT_EQ(out.calls.size(), 1u);
  EXPECT_EQ(out.calls[0].arguments, "ty\": \"Paris\"}");
}

TEST(ToolCallParser, HeldMarkerPrefixIsReleasedWhenItIsNotAMarker) {
  ToolCallParser parser(ToolCallMode::kAuto, ToolCallFormat::kHermes);
  ToolCallOutput out;
  parser.push("x <tool_", out);
  EXPECT_EQ(out.content, "x ");
  parser.push("box", out);
  EXPECT_EQ(out.content, "x <tool_box");
  parser.push(" <tool", out);
  parser.finish(out);
  EXPECT_EQ(out.content, "x <tool_box <tool");
}

TEST(ToolCallParser, TruncatedCallAfterItsNameStaysACallWhenStreamed) {
  // max_tokens cut the arguments: the client already has the call, so it stays one; a
  // non-streamed answer sees the whole text and returns it as content.
  const std::string text = "<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": ";
  ToolCallParser streamed(ToolCallMode::kAuto, ToolCallFormat::kHermes);
  ToolCallOutput out;
  streamed.push(text, out);
  streamed.finish(out);
  EXPECT_EQ(streamed.num_calls(), 1);
  EXPECT_TRUE(out.content.empty());
  ToolCallParser whole(ToolCallMode::kAuto, ToolCallFormat::kHermes);
  ToolCallOutput all;
  whole.push(text, all, false);
  whole.finish(all);
  EXPECT_EQ(whole.num_calls(), 0);
  EXPECT_EQ(all.content, text);
}

TEST(ToolCallParser, FormatsByNameAndFromTemplates) {
  EXPECT_EQ(tool_call_format_from_name("hermes"), ToolCallFormat::kHermes);
  EXPECT_EQ(tool_call_format_from_name("llama3_json"), ToolCallFormat::kLlama3Json);
  EXPECT_EQ(tool_call_format_from_name("mistral"), ToolCallFormat::kMistral);
  EXPECT_FALSE(tool_call_format_from_name("pythonic"));
  // Fragments of the real templates' tool instructions.
  EXPECT_EQ(detect_tool_call_format(
                "For each function call, return a json object with function name and arguments "
                "within <tool_call></tool_call> XML tags:"),
            ToolCallFormat::kHermes);
  EXPECT_EQ(detect_tool_call_format("{{- '[TOOL_CALLS] [' }}"), ToolCallFormat::kMistral);
  EXPECT_EQ(detect_tool_call_format(
                "Respond in the format {\"name\": function name, \"parameters\": dictionary of "
                "argument name and its value}."),
            ToolCallFormat::kLlama3Json);
  EXPECT_FALSE(detect_tool_call_format("{% for m in messages %}{{ m.content }}{% endfor %}"));
  EXPECT_TRUE(format_needs_special_tokens(ToolCallFormat::kMistral));
  EXPECT_FALSE(format_needs_special_tokens(ToolCallFormat::kHermes));
}

}  // namespace
}  // namespace nibble::tool_calls
