#include "engine/server/openai_request.h"

#include <cmath>
#include <cstdint>
#include <limits>

#include "engine/server/api_error.h"
#include "engine/server/chat_messages.h"

namespace nibble::server {
namespace {

using nlohmann::json;

const json* field(const json& body, const char* name) {
  auto it = body.find(name);
  return (it == body.end() || it->is_null()) ? nullptr : &*it;
}

double number_in(const json& body, const char* name, double lo, double hi, double fallback) {
  const json* v = field(body, name);
  if (!v) return fallback;
  if (!v->is_number()) throw invalid_request(std::string("'") + name + "' must be a number", name);
  const double x = v->get<double>();
  if (!(x >= lo && x <= hi)) {
    throw invalid_request(std::string("'") + name + "' must be between " + json(lo).dump() +
                              " and " + json(hi).dump() + ", got " + json(x).dump(),
                          name);
  }
  return x;
}

long long integer_in(const json& body, const char* name, long long lo, long long hi,
                     long long fallback) {
  const json* v = field(body, name);
  if (!v) return fallback;
  const bool integral_float = v->is_number_float() && std::isfinite(v->get<double>()) &&
                              std::floor(v->get<double>()) == v->get<double>();
  if (!v->is_number_integer() && !integral_float)
    throw invalid_request(std::string("'") + name + "' must be an integer", name);
  // Compare before converting: 1e20 or 2^64-1 do not fit a long long, and the error must show
  // what was sent rather than what a conversion made of it.
  const bool in_range =
      v->is_number_unsigned() ? (lo <= 0 || v->get<std::uint64_t>() >= std::uint64_t(lo)) &&
                                    (hi >= 0 && v->get<std::uint64_t>() <= std::uint64_t(hi))
      : v->is_number_integer() ? v->get<long long>() >= lo && v->get<long long>() <= hi
                               : v->get<double>() >= double(lo) && v->get<double>() <= double(hi);
  if (!in_range) {
    throw invalid_request(std::string("'") + name + "' must be between " + std::to_string(lo) +
                              " and " + std::to_string(hi) + ", got " + v->dump(),
                          name);
  }
  return v->is_number_integer() ? v->get<long long>() : (long long)v->get<double>();
}

bool boolean(const json& body, const char* name, bool fallback) {
  const json* v = field(body, name);
  if (!v) return fallback;
  if (!v->is_boolean())
    throw invalid_request(std::string("'") + name + "' must be a boolean", name);
  return v->get<bool>();
}

std::vector<int> token_ids(const json& v, const char* name) {
  std::vector<int> ids;
  for (const json& id : v) {
    constexpr auto kMaxId = std::uint64_t(std::numeric_limits<int>::max());
    const bool valid = id.is_number_unsigned()  ? id.get<std::uint64_t>() <= kMaxId
                       : id.is_number_integer() ? id.get<long long>() >= 0 &&
                                                      std::uint64_t(id.get<long long>()) <= kMaxId
                                                : false;
    if (!valid) {
      throw invalid_request(std::string("'") + name + "' must hold non-negative integer token ids",
                            name);
    }
    ids.push_back(id.get<int>());
  }
  return ids;
}

std::string model_of(const json& body) {
  const json* v = field(body, "model");
  if (!v) return {};
  if (!v->is_string()) throw invalid_request("'model' must be a string", "model");
  return v->get<std::string>();
}

// The sampling parameters both endpoints share.
void parse_sampling(const json& body, const RequestLimits& limits, runtime::SamplingParams& p,
                    bool& max_tokens_given) {
  constexpr long long kMaxInt = std::numeric_limits<int>::max();
  const char* max_name =
      field(body, "max_completion_tokens") ? "max_completion_tokens" : "max_tokens";
  max_tokens_given = field(body, max_name) != nullptr;
  p.max_tokens = int(integer_in(body, max_name, 1, kMaxInt, p.max_tokens));
  p.temperature = float(number_in(body, "temperature", 0, 2, 1));
  p.top_p = float(number_in(body, "top_p", 0, 1, 1));
  if (p.top_p <= 0.0f) throw invalid_request("'top_p' must be in (0, 1]", "top_p");
  p.top_k = int(integer_in(body, "top_k", -1, kMaxInt, 0));
  if (p.top_k < 0) p.top_k = 0;  // -1 means off, as in vLLM
  p.min_p = float(number_in(body, "min_p", 0, 1, 0));
  p.presence_penalty = float(number_in(body, "presence_penalty", -2, 2, 0));
  p.frequency_penalty = float(number_in(body, "frequency_penalty", -2, 2, 0));
  p.repetition_penalty = float(number_in(body, "repetition_penalty", 0, 2, 1));
  if (p.repetition_penalty <= 0.0f) {
    throw invalid_request("'repetition_penalty' must be in (0, 2]", "repetition_penalty");
  }
  if (const json* seed = field(body, "seed")) {
    if (!seed->is_number_integer()) throw invalid_request("'seed' must be an integer", "seed");
    p.seed = seed->is_number_unsigned() ? seed->get<std::uint64_t>()
                                        : std::uint64_t(seed->get<long long>());
  }
  if (const json* stop = field(body, "stop")) {
    if (stop->is_string()) {
      p.stop = {stop->get<std::string>()};
    } else if (stop->is_array()) {
      for (const json& s : *stop) {
        if (!s.is_string())
          throw invalid_request("'stop' must be a string or an array of strings", "stop");
        p.stop.push_back(s.get<std::string>());
      }
    } else {
      throw invalid_request("'stop' must be a string or an array of strings", "stop");
    }
    if (int(p.stop.size()) > limits.max_stop_strings) {
      throw invalid_request(
          "'stop' may hold at most " + std::to_string(limits.max_stop_strings) + " strings",
          "stop");
    }
    for (const std::string& s : p.stop) {
      if (s.empty()) throw invalid_request("'stop' strings must not be empty", "stop");
    }
  }
  if (const json* ids = field(body, "stop_token_ids")) {
    if (!ids->is_array())
      throw invalid_request("'stop_token_ids' must be an array of integers", "stop_token_ids");
    p.stop_token_ids = token_ids(*ids, "stop_token_ids");
  }
  p.include_stop_str_in_output = boolean(body, "include_stop_str_in_output", false);
  p.ignore_eos = boolean(body, "ignore_eos", false);
  p.n = int(integer_in(body, "n", 1, limits.max_n, 1));
}

void parse_stream(const json& body, bool& stream, bool& include_usage) {
  stream = boolean(body, "stream", false);
  if (const json* options = field(body, "stream_options")) {
    if (!options->is_object())
      throw invalid_request("'stream_options' must be an object", "stream_options");
    if (!stream)
      throw invalid_request("'stream_options' is only allowed when 'stream' is true",
                            "stream_options");
    include_usage = boolean(*options, "include_usage", false);
  }
}

}  // namespace

CompletionRequest parse_completion_request(const json& body, const RequestLimits& limits) {
  if (!body.is_object()) throw invalid_request("the request body must be a JSON object");
  CompletionRequest r;
  r.model = model_of(body);
  const json* prompt = field(body, "prompt");
  if (!prompt) throw invalid_request("'prompt' is required", "prompt");
  if (prompt->is_string()) {
    r.prompt_text = prompt->get<std::string>();
  } else if (prompt->is_array() && !prompt->empty() && (*prompt)[0].is_number()) {
    r.prompt_ids = token_ids(*prompt, "prompt");
  } else if (prompt->is_array() && prompt->size() == 1 && (*prompt)[0].is_string()) {
    r.prompt_text = (*prompt)[0].get<std::string>();
  } else if (prompt->is_array() && prompt->size() == 1 && (*prompt)[0].is_array()) {
    r.prompt_ids = token_ids((*prompt)[0], "prompt");
  } else {
    throw invalid_request(
        "'prompt' must be a string, an array of token ids, or a one-element array of either "
        "(several prompts per request are not supported; send one request each)",
        "prompt");
  }
  parse_sampling(body, limits, r.params, r.max_tokens_given);
  parse_stream(body, r.stream, r.include_usage);
  r.echo = boolean(body, "echo", false);
  r.add_special_tokens = boolean(body, "add_special_tokens", true);
  r.params.logprobs = int(integer_in(body, "logprobs", 0, limits.max_logprobs, -1));
  return r;
}

ChatCompletionRequest parse_chat_request(const json& body, const RequestLimits& limits) {
  if (!body.is_object()) throw invalid_request("the request body must be a JSON object");
  ChatCompletionRequest r;
  r.model = model_of(body);
  const json* messages = field(body, "messages");
  if (!messages || !messages->is_array() || messages->empty()) {
    throw invalid_request("'messages' must be a non-empty array", "messages");
  }
  r.messages = normalize_chat_messages(*messages);
  validate_tool_messages(r.messages, limits.max_json_depth);
  r.tool_use = parse_tool_request(body, limits.max_tools);
  r.tools = r.tool_use.tools;
  if (const json* kwargs = field(body, "chat_template_kwargs")) {
    if (!kwargs->is_object())
      throw invalid_request("'chat_template_kwargs' must be an object", "chat_template_kwargs");
    r.template_kwargs = *kwargs;
  }
  // gpt-oss's template reads reasoning_effort ("Reasoning: low" in its system message); others
  // ignore it. chat_template_kwargs, where it names one, wins, as a template variable.
  if (const json* effort = field(body, "reasoning_effort"); effort && !effort->is_null()) {
    if (!effort->is_string() || (*effort != "low" && *effort != "medium" && *effort != "high")) {
      throw invalid_request("'reasoning_effort' must be one of low, medium, high",
                            "reasoning_effort");
    }
    if (!r.template_kwargs.contains("reasoning_effort"))
      r.template_kwargs["reasoning_effort"] = *effort;
  }
  r.add_generation_prompt = boolean(body, "add_generation_prompt", true);
  parse_sampling(body, limits, r.params, r.max_tokens_given);
  parse_stream(body, r.stream, r.include_usage);
  r.logprobs = boolean(body, "logprobs", false);
  const int top = int(integer_in(body, "top_logprobs", 0, limits.max_logprobs, 0));
  if (field(body, "top_logprobs") && !r.logprobs) {
    throw invalid_request("'top_logprobs' requires 'logprobs' to be true", "top_logprobs");
  }
  r.params.logprobs = r.logprobs ? top : -1;
  return r;
}

}  // namespace nibble::server
