#pragma once
// Splits a reasoning model's output into its thinking (reasoning_content) and its answer
// (content), as the text streams in. vLLM's --reasoning-parser names:
//   qwen3        <think>...</think> answer; no think block (enable_thinking false, or a model
//                that skipped it) means all content
//   deepseek_r1  the output starts inside the thinking (the template opened <think>), so
//                everything before </think> is reasoning, and all of it when </think> never comes
// Where the prompt already opened or closed the think block (Qwen3 thinking-only models,
// enable_thinking: false), reasoning_start_from_prompt says so and the parser starts there.
// Whitespace around the thinking and at the start of the answer is dropped; "</think>" is held
// back while it may still be arriving, so neither tag ever reaches the client.
#include <optional>
#include <string>
#include <string_view>

namespace nibble::reasoning {

enum class ReasoningFormat { kQwen3, kDeepSeekR1 };

std::optional<ReasoningFormat> reasoning_format_from_name(std::string_view name);
const char* reasoning_format_name(ReasoningFormat format);
const char* reasoning_format_names();

// What the end of the rendered prompt says about the output's first byte.
enum class ReasoningStart {
  kOpen,      // nothing said: the output may open <think> itself
  kThinking,  // the prompt ends with <think>: the output starts inside the thinking
  kAnswer,    // the prompt ends with </think> (thinking turned off): the output is the answer
};
ReasoningStart reasoning_start_from_prompt(std::string_view prompt);

struct ReasoningOutput {
  std::string reasoning;
  std::string content;
};

class ReasoningParser {
 public:
  ReasoningParser(ReasoningFormat format, ReasoningStart start);

  void push(std::string_view text, ReasoningOutput& out);
  void finish(ReasoningOutput& out);  // releases what was held

 private:
  enum class State { kStart, kThinking, kAnswer };
  void run(ReasoningOutput& out, bool final);
  void emit_answer(std::string_view text, ReasoningOutput& out);

  bool thinks_by_default_;
  State state_;
  std::string held_;
  bool reasoning_started_ = false;  // leading whitespace of the thinking is dropped
  bool answer_started_ = false;     // leading whitespace of the answer after </think> too
  bool strip_answer_ = false;
};

}  // namespace nibble::reasoning
