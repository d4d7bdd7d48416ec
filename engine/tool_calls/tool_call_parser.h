#pragma once
// Turns a model's generated text into content and OpenAI tool calls, as the text streams in.
//
// Formats (vLLM's --tool-call-parser names):
//   hermes       Qwen2.5 / Qwen3 / Hermes: <tool_call>\n{"name": ..., "arguments":
//   {...}}\n</tool_call>,
//                any number of them; text before the first call is content
//   llama3_json  Llama 3.1 / 3.2: the output starts (after optional <|python_tag|>) with
//                {"name": ..., "parameters": {...}}; several are separated by ';'
//   mistral      [TOOL_CALLS][{"name": ..., "arguments": {...}}, ...] (tokenizers up to v7) or
//                [TOOL_CALLS]name[ARGS]{...} (v11 and later), repeated
// and the two shapes forced by tool_choice (the output is generated under a constraint):
//   required     [{"name": ..., "parameters": {...}}, ...]   (vLLM's shape)
//   named        the arguments object of the named function alone
//
// Streaming contract: push() returns only what is decided. Text that may be the start of a
// marker is held until the next bytes decide it; a call's first delta (index, id, name, empty
// arguments) goes out once its name is complete, then argument fragments as they are generated.
// Markup that turns out malformed before its first call was announced comes back as content,
// unchanged; the concatenation of all deltas is what a non-streamed parse of the whole text gives.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/tool_calls/json_call_scanner.h"

namespace nibble::tool_calls {

enum class ToolCallFormat { kHermes, kLlama3Json, kMistral };

// "hermes", "llama3_json", "mistral" (vLLM's names) → the format; nullopt for others.
std::optional<ToolCallFormat> tool_call_format_from_name(std::string_view name);
const char* tool_call_format_name(ToolCallFormat format);
// The names accepted by tool_call_format_from_name, for messages.
const char* tool_call_format_names();
// The format a chat template's own tool-call instructions use, if it shows one.
std::optional<ToolCallFormat> detect_tool_call_format(std::string_view chat_template);
// Whether the format's markers are special tokens that detokenization must keep.
bool format_needs_special_tokens(ToolCallFormat format);

enum class ToolCallMode { kAuto, kRequired, kNamed };

struct ToolCallDelta {
  int index = 0;
  std::string id;         // set on a call's first delta only, with name
  std::string name;       // set on a call's first delta only
  std::string arguments;  // a fragment of the arguments' JSON text
};

struct ToolCallOutput {
  std::string content;
  std::vector<ToolCallDelta> calls;
};

class ToolCallParser {
 public:
  // kAuto uses `format`; kNamed needs `function_name`. Mistral calls get Mistral's 9-character
  // ids (its templates reject others), the rest "call_" + 24 random characters.
  ToolCallParser(ToolCallMode mode, ToolCallFormat format, std::string function_name = {});

  // announce: send calls as soon as their names are known (streaming). A non-streamed answer
  // passes false, pushes the whole text once and calls finish(), so that markup that is broken
  // anywhere comes back entirely as content.
  void push(std::string_view text, ToolCallOutput& out, bool announce = true);
  // The end of generation: releases what was held, decides unfinished markup.
  void finish(ToolCallOutput& out);

  int num_calls() const { return num_calls_; }
  // Markup that started a tool call but was not one (returned as content).
  int num_malformed() const { return num_malformed_; }

 private:
  enum class State { kText, kMarkup, kMistralName, kAfterCall, kTextOnly };

  void run(ToolCallOutput& out);
  std::size_t text_step(std::size_t i, ToolCallOutput& out);
  std::size_t mistral_name_step(std::size_t i, ToolCallOutput& out);
  std::size_t after_call_step(std::size_t i);
  std::size_t markup_step(std::size_t i, ToolCallOutput& out);
  void begin_markup(JsonCallScanner::Shape shape, std::optional<std::string> name = std::nullopt);
  void end_markup(int calls);  // the markup is over; `calls` of its calls count
  void sync(ToolCallOutput& out);
  void abandon_markup(ToolCallOutput& out);
  void emit_content(std::string_view text, ToolCallOutput& out);
  std::string new_id();

  ToolCallMode mode_;
  ToolCallFormat format_;
  std::string function_name_;
  State state_ = State::kText;
  std::string input_;          // pushed, not yet consumed
  bool seen_content_ = false;  // llama3_json: calls only at the start
  bool after_call_ = false;    // drop whitespace that follows a call
  std::string markup_;         // since the marker: returned as content if malformed
  std::string mistral_name_;
  std::optional<JsonCallScanner> scanner_;
  std::optional<std::string> scanner_name_;  // the name when the scanner reads arguments only
  struct Announced {
    bool header = false;
    std::size_t arguments_sent = 0;
  };
  std::vector<Announced> announced_;  // per call of the current scanner
  int first_index_ = 0;               // global index of the current scanner's first call
  int num_calls_ = 0;
  int num_malformed_ = 0;
};

}  // namespace nibble::tool_calls
