#pragma once
// Reads gpt-oss's output (the harmony format) by channel, as the text streams in. The prompt
// ends with "<|start|>assistant", so the output is a sequence of messages
//   [<|start|>assistant][ to=RECIPIENT]<|channel|>CHANNEL[ to=RECIPIENT][ TYPE][<|constrain|>T]
//   <|message|>BODY (<|end|> | <|return|> | <|call|>)
// and each body goes to one field (vLLM's mapping, --reasoning-parser openai_gptoss and
// --tool-call-parser openai):
//   recipient functions.NAME (any channel)   a tool call NAME with BODY as its arguments
//   analysis, or another recipient           reasoning_content (built-in tools are not run here)
//   final, commentary without recipient      content
// <|return|> and <|call|> end the turn: nothing after them is read. A body also ends where the
// model opens a new message without <|end|> (<|start|> or <|channel|>).
//
// Robustness (random weights write anything): every step is linear in the bytes pushed, no
// recursion; a header longer than kMaxHeaderBytes or with no channel is dropped (counted in
// num_malformed) and reading resumes at the next <|start|>. Output that never opens a message
// (no harmony markers at its start) comes back as content, unchanged. Markers held back while
// they may still be arriving never reach the client; the concatenation of all deltas of a
// streamed parse equals the whole parse of the same text, however it was split.
#include <cstddef>
#include <string>
#include <string_view>

#include "engine/tool_calls/tool_call_parser.h"

namespace nibble::tool_calls {

// Whether a chat template writes the harmony format (gpt-oss's: <|start|> and <|channel|>).
bool is_harmony_template(std::string_view chat_template);

struct HarmonyOutput {
  std::string reasoning;
  std::string content;
  std::vector<ToolCallDelta> calls;  // first delta per call: index, id, name; then arguments
};

class HarmonyParser {
 public:
  static constexpr std::size_t kMaxHeaderBytes = 512;

  // calls_allowed false (no tools offered, or tool_choice "none"): a function call's arguments
  // come back as content rather than as a tool call.
  explicit HarmonyParser(bool calls_allowed = true) : calls_allowed_(calls_allowed) {}

  void push(std::string_view text, HarmonyOutput& out);
  void finish(HarmonyOutput& out);  // the end of generation: releases what was held

  int num_calls() const { return num_calls_; }
  int num_malformed() const { return num_malformed_; }

 private:
  enum class State {
    kStart,   // nothing decided yet: a header, or plain text
    kHeader,  // reading a message header up to <|message|>
    kBody,    // inside a message body
    kSkip,    // after a malformed header: dropping until <|start|>
    kPlain,   // the output is no harmony message: all content
    kDone,    // after <|return|> or <|call|>
  };
  enum class Target { kReasoning, kContent, kCall, kDrop };

  void run(HarmonyOutput& out, bool final);
  bool start_step(bool final);
  bool header_step(bool final, HarmonyOutput& out);
  bool body_step(HarmonyOutput& out, bool final);
  bool skip_step(bool final);
  void open_body(std::string_view header, HarmonyOutput& out);
  void emit(std::string_view text, HarmonyOutput& out);

  bool calls_allowed_;
  State state_ = State::kStart;
  std::string buffer_;  // pushed, not yet decided
  Target target_ = Target::kDrop;
  int num_calls_ = 0;
  int num_malformed_ = 0;
};

}  // namespace nibble::tool_calls
