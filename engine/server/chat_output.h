#pragma once
// What a chat choice's generated text becomes in the response: reasoning_content, content and
// tool_calls, for the streamed deltas and for the whole message. The reasoning parser reads the
// text first; the tool-call parser reads the answer after the reasoning.
//
// Which parsers apply is decided per request (plan_chat_output) from the server's flags and the
// request's tool_choice, as vLLM decides it:
//   tool_choice none      no tool-call parsing: markup stays text
//   tool_choice auto      the --tool-call-parser format (or the one the template shows); only
//                         with --enable-auto-tool-choice, else a 400 like vLLM's
//   required / named      the shapes the structured-output constraint makes the model write
// A harmony model (gpt-oss: --reasoning-parser openai_gptoss, --tool-call-parser openai, or a
// template that writes <|channel|>) has one parser for all three fields
// (tool_calls/harmony_parser.h); its markers are special tokens, so they are kept in the text.
// Under a forced tool_choice the constraint writes the call as a harmony message too
// (structured/output_spec.h OutputSpec::harmony), so the same parser reads it.
#include <nlohmann/json.hpp>

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/reasoning/reasoning_parser.h"
#include "engine/server/tool_request.h"
#include "engine/tool_calls/harmony_parser.h"
#include "engine/tool_calls/tool_call_parser.h"

namespace nibble::server {

class ToolCallMetrics;

// The server's settings (serve flags).
struct ChatOutputConfig {
  std::optional<tool_calls::ToolCallFormat> tool_call_format;  // flag, or found in the template
  bool enable_auto_tool_choice = false;
  bool exclude_tools_when_tool_choice_none = false;
  std::optional<reasoning::ReasoningFormat> reasoning_format;
  bool harmony = false;  // gpt-oss's channels carry reasoning, content and tool calls
};

// One request's parsing, shared by its choices.
struct ChatOutputPlan {
  std::optional<reasoning::ReasoningFormat> reasoning;
  reasoning::ReasoningStart reasoning_start = reasoning::ReasoningStart::kOpen;
  bool harmony = false;  // the harmony parser reads the output (reasoning too)
  std::optional<tool_calls::ToolCallMode> tool_mode;  // nullopt: no tool-call parsing
  tool_calls::ToolCallFormat tool_format = tool_calls::ToolCallFormat::kHermes;
  std::string function_name;  // kNamed
  bool parallel_tool_calls = true;
  bool skip_special_tokens = true;           // false where the format's markers are special tokens
  std::shared_ptr<ToolCallMetrics> metrics;  // may be null
};

// Throws ApiError 400 when tool_choice "auto" meets a server without auto tool choice. prompt:
// the rendered prompt (its end says whether the thinking is already open). Counts the request
// in metrics (may be null) when it offers tools.
ChatOutputPlan plan_chat_output(const ChatOutputConfig& config, const ToolRequest& tools,
                                std::string_view prompt, std::shared_ptr<ToolCallMetrics> metrics);

// One choice of one request.
class ChatChoiceOutput {
 public:
  explicit ChatChoiceOutput(const ChatOutputPlan& plan);

  // Streaming: the `delta` objects this text adds, in order (none while text is held back).
  // final: generation ended; everything held is released.
  std::vector<nlohmann::json> stream(std::string_view text, bool final);
  // Not streaming: the text is collected and parsed whole in message().
  void append(std::string_view text) { whole_text_ += text; }
  nlohmann::json message();

  // "tool_calls" when the model ended its turn after calling tools (auto or required), else
  // the engine's reason.
  std::string finish_reason(const std::string& engine_reason) const;

 private:
  void parse(std::string_view text, bool final, bool announce, reasoning::ReasoningOutput& r,
             tool_calls::ToolCallOutput& t);
  void count_once();

  const ChatOutputPlan& plan_;
  std::optional<reasoning::ReasoningParser> reasoning_;
  std::optional<tool_calls::ToolCallParser> tools_;
  std::optional<tool_calls::HarmonyParser> harmony_;
  std::string whole_text_;
  int num_calls_ = 0;  // announced to the client (after parallel_tool_calls)
  bool counted_ = false;
};

// The `choices` entries of the SSE chunks one polled piece of text becomes, one chunk each:
// the deltas of output.stream(), with logprobs and the finish reason on the last. Empty when
// there is nothing to send yet.
std::vector<nlohmann::json> chat_stream_choices(ChatChoiceOutput& output, int index,
                                                std::string_view text,
                                                const std::optional<std::string>& finish_reason,
                                                nlohmann::json logprobs);

}  // namespace nibble::server
