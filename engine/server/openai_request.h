#pragma once
// Parsing and validation of OpenAI /v1/completions and /v1/chat/completions bodies.
// Every type or range error is an ApiError 400 naming the parameter; fields the server does
// not know are ignored, as OpenAI-compatible servers do, so that clients' extras do not fail.
#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

#include "engine/runtime/sampling_params.h"
#include "engine/server/bounded_json.h"
#include "engine/server/tool_request.h"

namespace nibble::server {

struct RequestLimits {
  int max_n = 16;
  int max_logprobs = 20;
  int max_stop_strings = 16;
  int max_tools = 128;
  // Nesting of arrays and objects in a body and in the JSON texts inside it (tool-call
  // arguments, a schema as a string); the server bounds schema and regex nesting with it too.
  int max_json_depth = kDefaultMaxJsonDepth;
  // A prompt longer than max_model_len * this many bytes is refused before it is tokenized.
  int max_prompt_bytes_per_token = 32;
};

struct CompletionRequest {
  std::string model;                       // empty: the served model
  std::optional<std::string> prompt_text;  // exactly one of these two
  std::optional<std::vector<int>> prompt_ids;
  runtime::SamplingParams params;
  bool max_tokens_given = false;
  bool stream = false;
  bool include_usage = false;
  bool echo = false;
  bool add_special_tokens = true;
};

struct ChatCompletionRequest {
  std::string model;
  nlohmann::json messages;         // normalized by normalize_chat_messages (chat_messages.h)
  nlohmann::json tools = nullptr;  // tool_use.tools, rendered by the template
  ToolRequest tool_use;
  // chat_template_kwargs, plus reasoning_effort (low|medium|high) unless they name it
  nlohmann::json template_kwargs = nlohmann::json::object();
  bool add_generation_prompt = true;
  runtime::SamplingParams params;
  bool max_tokens_given = false;
  bool stream = false;
  bool include_usage = false;
  bool logprobs = false;  // then params.logprobs = top_logprobs
};

CompletionRequest parse_completion_request(const nlohmann::json& body, const RequestLimits& limits);
ChatCompletionRequest parse_chat_request(const nlohmann::json& body, const RequestLimits& limits);

}  // namespace nibble::server
