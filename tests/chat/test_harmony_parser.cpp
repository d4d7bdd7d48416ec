// The harmony parser on gpt-oss's output shapes, streamed in every chunk split: the deltas must
// add up to the whole-text parse, each channel lands in its field, a call's first delta carries
// id and name with empty arguments, and no marker reaches the client. Then junk: random
// marker/word streams must neither crash nor break the streamed == whole contract.
#include <gtest/gtest.h>

#include <random>

#include "engine/tool_calls/harmony_parser.h"
#include "tests/chat/chunk_splits.h"

namespace nibble::tool_calls {
namespace {

struct Call {
  std::string name;
  std::string arguments;
  bool operator==(const Call&) const = default;
};

struct Parsed {
  std::string reasoning;
  std::string content;
  std::vector<Call> calls;
  std::vector<std::string> ids;
};

// Applies deltas as a client does; checks the delta protocol on the way.
void apply(const HarmonyOutput& out, Parsed& p, const std::string& where) {
  p.reasoning += out.reasoning;
  p.content += out.content;
  for (const ToolCallDelta& d : out.calls) {
    if (!d.id.empty()) {
      ASSERT_EQ(d.index, int(p.calls.size())) << where << ": calls are announced in order";
      ASSERT_TRUE(d.id.starts_with("call_")) << where;
      ASSERT_EQ(d.id.size(), 29u) << where;
      ASSERT_FALSE(d.name.empty()) << where;
      ASSERT_TRUE(d.arguments.empty()) << where << ": the first delta has empty arguments";
      p.calls.push_back({d.name, ""});
      p.ids.push_back(d.id);
    } else {
      ASSERT_TRUE(d.name.empty()) << where;
      ASSERT_EQ(d.index, int(p.calls.size()) - 1) << where << ": arguments of the latest call";
      p.calls[std::size_t(d.index)].arguments += d.arguments;
    }
  }
}

Parsed parse(const std::vector<std::string>& chunks, bool calls_allowed = true,
             int* malformed = nullptr) {
  HarmonyParser parser(calls_allowed);
  Parsed p;
  for (const std::string& chunk : chunks) {
    HarmonyOutput out;
    parser.push(chunk, out);
    apply(out, p, "push");
  }
  HarmonyOutput out;
  parser.finish(out);
  apply(out, p, "finish");
  if (malformed) *malformed = parser.num_malformed();
  return p;
}

struct Case {
  const char* label;
  std::string text;  // what the model wrote after the prompt's "<|start|>assistant"
  std::string reasoning;
  std::string content;
  std::vector<Call> calls;
  int malformed = 0;
};

const std::vector<Case>& cases() {
  static const std::vector<Case> all = {
      {"analysis then final (stop token removed)",
       "<|channel|>analysis<|message|>User says hi. Reply.<|end|><|start|>assistant<|channel|>"
       "final<|message|>Hello! How can I help?",
       "User says hi. Reply.",
       "Hello! How can I help?",
       {}},
      {"final ended by <|return|> (stop token kept)",
       "<|channel|>final<|message|>42<|return|>ignored after the turn",
       "",
       "42",
       {}},
      {"tool call, recipient after the channel, json constraint",
       "<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant<|channel|>commentary"
       " to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"Paris\"}<|call|>",
       "Need weather.",
       "",
       {{"get_weather", "{\"city\": \"Paris\"}"}}},
      {"tool call, recipient before the channel (the template's form)",
       " to=functions.lookup<|channel|>commentary json<|message|>{\"q\": \"x<y\"}",
       "",
       "",
       {{"lookup", "{\"q\": \"x<y\"}"}}},
      {"commentary preamble is content, then a call",
       "<|channel|>commentary<|message|>Let me check.<|end|><|start|>assistant to=functions.f"
       "<|channel|>commentary json<|message|>{}<|call|>",
       "",
       "Let me check.",
       {{"f", "{}"}}},
      {"built-in tool recipient goes to reasoning",
       "<|channel|>analysis to=browser.search<|message|>{\"query\": \"q\"}<|call|>",
       "{\"query\": \"q\"}",
       "",
       {}},
      {"two analysis messages concatenate",
       "<|channel|>analysis<|message|>a<|end|><|start|>assistant<|channel|>analysis<|message|>b"
       "<|end|><|start|>assistant<|channel|>final<|message|>c<|return|>",
       "ab",
       "c",
       {}},
      {"missing <|end|>: a new channel opens a new message",
       "<|channel|>analysis<|message|>think<|channel|>final<|message|>done",
       "think",
       "done",
       {}},
      {"plain text without harmony markers is content",
       "Just text, <|no|> harmony.",
       "",
       "Just text, <|no|> harmony.",
       {}},
      {"text that merely starts like a marker is content", "<b>bold</b>", "", "<b>bold</b>", {}},
      {"unknown channel is dropped and counted",
       "<|channel|>secret<|message|>hidden<|end|><|start|>assistant<|channel|>final<|message|>ok",
       "",
       "ok",
       {},
       1},
      {"header without a channel is dropped",
       "<|message|>x<|end|><|start|>assistant<|channel|>final<|message|>y",
       "",
       "y",
       {},
       1},
      {"a function name with bad characters is not a call",
       "<|channel|>commentary to=functions.a/b<|message|>{}<|call|>",
       "",
       "",
       {},
       1},
      {"generation cut inside a header",
       "<|channel|>analysis<|message|>t<|end|><|start|>assi",
       "t",
       "",
       {},
       1},
      {"unicode bodies pass through",
       "<|channel|>analysis<|message|>日本語🎉<|end|><|start|>assistant<|channel|>final"
       "<|message|>é<|return|>",
       "日本語🎉",
       "é",
       {}},
  };
  return all;
}

TEST(HarmonyParser, EveryChannelWholeAndInEveryChunkSplit) {
  for (const Case& c : cases()) {
    int malformed = -1;
    const Parsed whole = parse({c.text}, true, &malformed);
    EXPECT_EQ(whole.reasoning, c.reasoning) << c.label;
    EXPECT_EQ(whole.content, c.content) << c.label;
    EXPECT_EQ(whole.calls, c.calls) << c.label;
    EXPECT_EQ(malformed, c.malformed) << c.label;
    for (const auto& chunks : nibble::testing::chunk_splits(c.text)) {
      const Parsed streamed = parse(chunks);
      ASSERT_EQ(streamed.reasoning, c.reasoning) << c.label << " in " << chunks.size();
      ASSERT_EQ(streamed.content, c.content) << c.label << " in " << chunks.size();
      ASSERT_EQ(streamed.calls, c.calls) << c.label << " in " << chunks.size();
    }
  }
}

TEST(HarmonyParser, MarkersNeverReachTheClientWhileStreamed) {
  const std::string text =
      "<|channel|>analysis<|message|>r<|end|><|start|>assistant<|channel|>final<|message|>c"
      "<|return|>";
  HarmonyParser parser;
  for (char ch : text) {
    HarmonyOutput out;
    parser.push(std::string(1, ch), out);
    EXPECT_EQ(out.reasoning.find('<'), std::string::npos) << out.reasoning;
    EXPECT_EQ(out.content.find('<'), std::string::npos) << out.content;
  }
}

TEST(HarmonyParser, CallsNotAllowedComeBackAsContent) {
  const Parsed p = parse({"<|channel|>commentary to=functions.f json<|message|>{\"a\": 1}<|call|>"},
                         /*calls_allowed=*/false);
  EXPECT_TRUE(p.calls.empty());
  EXPECT_EQ(p.content, "{\"a\": 1}");
}

TEST(HarmonyParser, TwoCallsGetTheirOwnIndexAndDistinctIds) {
  const Parsed p =
      parse({"<|channel|>commentary to=functions.a json<|message|>{}<|end|><|start|>assistant to="
             "functions.b<|channel|>commentary json<|message|>{\"x\":2}<|call|>"});
  ASSERT_EQ(p.calls.size(), 2u);
  EXPECT_EQ(p.calls[0], (Call{"a", "{}"}));
  EXPECT_EQ(p.calls[1], (Call{"b", "{\"x\":2}"}));
  EXPECT_NE(p.ids[0], p.ids[1]);
}

TEST(HarmonyParser, OverlongHeaderIsDroppedAndReadingResumes) {
  const std::string junk(3 * HarmonyParser::kMaxHeaderBytes, 'x');
  const std::string text = "<|channel|>" + junk +
                           "<|message|>lost<|end|><|start|>assistant<|channel|>final<|message|>"
                           "found";
  int malformed = 0;
  const Parsed whole = parse({text}, true, &malformed);
  EXPECT_EQ(whole.content, "found");
  EXPECT_EQ(malformed, 1);
  const Parsed bytewise = parse([&] {
    std::vector<std::string> chunks;
    for (char ch : text) chunks.emplace_back(1, ch);
    return chunks;
  }());
  EXPECT_EQ(bytewise.content, "found");
}

// Random weights emit any token: streams of markers, words and stray bytes, cut at random
// points, must give the whole-text parse and never crash. 2,000 streams, fixed seed.
TEST(HarmonyParser, RandomTokenStreamsNeverBreakTheContract) {
  const std::vector<std::string> pieces = {
      "<|start|>", "<|end|>", "<|message|>", "<|channel|>", "<|constrain|>", "<|return|>",
      "<|call|>", "assistant", "analysis", "final", "commentary", " to=functions.f",
      " to=functions.", " to=browser.search", "json", " ", "{", "}", "\"a\"", ":", "<", "|", ">",
      "<|", "|>", "hello", "é", "\n", "functions.g", "to=", "<|endoftext|>",
      // whole headers, so that well-formed messages occur among the junk
      "<|channel|>analysis<|message|>", "<|channel|>final<|message|>",
      "<|start|>assistant<|channel|>commentary to=functions.f json<|message|>",
      "<|end|><|start|>assistant",
      " to=functions.g<|channel|>commentary <|constrain|>json<|message|>"};
  const std::size_t first_header = pieces.size() - 5;
  std::mt19937 rng(1234);
  int total_calls = 0, total_content = 0, total_reasoning = 0;
  for (int round = 0; round < 2000; ++round) {
    std::string text;
    const int n = std::uniform_int_distribution<int>(0, 60)(rng);
    for (int k = 0; k < n; ++k) {
      // Half the outputs open as gpt-oss's do, with a header; the rest with anything.
      const std::size_t lo = (k == 0 && round % 2 == 0) ? first_header : 0;
      text += pieces[std::uniform_int_distribution<std::size_t>(lo, pieces.size() - 1)(rng)];
    }
    const Parsed whole = parse({text});
    std::vector<std::string> chunks;
    for (std::size_t i = 0; i < text.size();) {
      const std::size_t len = std::uniform_int_distribution<std::size_t>(1, 7)(rng);
      chunks.push_back(text.substr(i, len));
      i += len;
    }
    const Parsed streamed = parse(chunks);
    ASSERT_EQ(streamed.reasoning, whole.reasoning) << text;
    ASSERT_EQ(streamed.content, whole.content) << text;
    ASSERT_EQ(streamed.calls, whole.calls) << text;
    total_calls += int(whole.calls.size());
    total_content += whole.content.empty() ? 0 : 1;
    total_reasoning += whole.reasoning.empty() ? 0 : 1;
  }
  // The generator reaches every field (the test is not vacuous).
  EXPECT_GT(total_calls, 50);
  EXPECT_GT(total_content, 200);
  EXPECT_GT(total_reasoning, 50);
}

}  // namespace
}  // namespace nibble::tool_calls
