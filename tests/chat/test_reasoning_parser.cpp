// Reasoning parsers: thinking to reasoning_content, the answer to content, in every chunk split.
#include <gtest/gtest.h>

#include "engine/reasoning/reasoning_parser.h"
#include "tests/chat/chunk_splits.h"

namespace nibble::reasoning {
namespace {

struct Case {
  const char* label;
  ReasoningFormat format;
  ReasoningStart start;
  std::string text;
  std::string reasoning;
  std::string content;
};

std::vector<Case> cases() {
  using enum ReasoningFormat;
  using enum ReasoningStart;
  return {
      {"qwen3 think block", kQwen3, kOpen,
       "<think>\nThe user greets me.\n</think>\n\nHello! How can I help?", "The user greets me.",
       "Hello! How can I help?"},
      {"qwen3 no think block", kQwen3, kOpen, "Hello </thin there", "", "Hello </thin there"},
      {"qwen3 thinking disabled by the prompt", kQwen3, kAnswer, "\n\nJust the answer.", "",
       "Just the answer."},
      {"qwen3 prompt opened the thinking", kQwen3, kThinking, "Hmm, 2+2.\n</think>\n\n4",
       "Hmm, 2+2.", "4"},
      {"qwen3 thinking cut by max_tokens", kQwen3, kOpen, "<think>\nStill thinking <",
       "Still thinking <", ""},
      {"deepseek_r1 output starts inside thinking", kDeepSeekR1, kThinking,
       "Let me think.\n</think>\n\nThe answer is 4.", "Let me think.", "The answer is 4."},
      {"deepseek_r1 with its own think tag", kDeepSeekR1, kOpen, "<think>\nok\n</think>The answer.",
       "ok", "The answer."},
      {"deepseek_r1 without end is all reasoning", kDeepSeekR1, kOpen, "thinking...", "thinking...",
       ""},
      {"tags inside the answer stay", kQwen3, kOpen, "<think>a</think>b </think> c", "a",
       "b </think> c"},
  };
}

TEST(ReasoningParser, EveryChunkSplit) {
  for (const Case& c : cases()) {
    for (const auto& chunks : nibble::testing::chunk_splits(c.text)) {
      ReasoningParser parser(c.format, c.start);
      ReasoningOutput out;
      for (const std::string& chunk : chunks) {
        ReasoningOutput step;
        parser.push(chunk, step);
        EXPECT_EQ(step.reasoning.find("</think>"), std::string::npos) << c.label;
        out.reasoning += step.reasoning;
        out.content += step.content;
      }
      parser.finish(out);
      EXPECT_EQ(out.reasoning, c.reasoning) << c.label << " in " << chunks.size() << " chunks";
      EXPECT_EQ(out.content, c.content) << c.label << " in " << chunks.size() << " chunks";
      if (::testing::Test::HasFailure()) return;
    }
  }
}

TEST(ReasoningParser, StartFromThePromptsEnd) {
  EXPECT_EQ(reasoning_start_from_prompt("<|im_start|>assistant\n"), ReasoningStart::kOpen);
  EXPECT_EQ(reasoning_start_from_prompt("<|im_start|>assistant\n<think>\n"),
            ReasoningStart::kThinking);
  EXPECT_EQ(reasoning_start_from_prompt("<|im_start|>assistant\n<think>\n\n</think>\n\n"),
            ReasoningStart::kAnswer);
  EXPECT_EQ(reasoning_format_from_name("qwen3"), ReasoningFormat::kQwen3);
  EXPECT_EQ(reasoning_format_from_name("deepseek_r1"), ReasoningFormat::kDeepSeekR1);
  EXPECT_FALSE(reasoning_format_from_name("granite"));
}

}  // namespace
}  // namespace nibble::reasoning
