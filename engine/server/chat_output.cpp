#include "engine/server/chat_output.h"

#include "engine/server/api_error.h"
#include "engine/server/tool_call_metrics.h"

namespace nibble::server {

using nlohmann::json;
using tool_calls::ToolCallMode;

ChatOutputPlan plan_chat_output(const ChatOutputConfig& config, const ToolRequest& tools,
                                std::string_view prompt, std::shared_ptr<ToolCallMetrics> metrics) {
  ChatOutputPlan plan;
  plan.reasoning = config.reasoning_format;
  if (plan.reasoning) plan.reasoning_start = reasoning::reasoning_start_from_prompt(prompt);
  plan.parallel_tool_calls = tools.parallel_tool_calls;
  plan.harmony = config.harmony;
  if (plan.harmony) plan.skip_special_tokens = false;
  switch (tools.choice) {
    case ToolChoice::kNone:
      break;
    case ToolChoice::kAuto:
      if (!config.enable_auto_tool_choice) {
        throw invalid_request(
            "\"auto\" tool choice requires the server to be started with --enable-auto-tool-choice",
            "tool_choice");
      }
      if (plan.harmony) {
        plan.tool_mode = ToolCallMode::kAuto;  // read by the harmony parser
        break;
      }
      if (!config.tool_call_format) {
        throw invalid_request(
            "\"auto\" tool choice needs a tool-call format: this model's chat template shows "
            "none, so the server must be started with --tool-call-parser (" +
                std::string(tool_calls::tool_call_format_names()) + ")",
            "tool_choice");
      }
      plan.tool_mode = ToolCallMode::kAuto;
      plan.tool_format = *config.tool_call_format;
      plan.skip_special_tokens = !tool_calls::format_needs_special_tokens(plan.tool_format);
      break;
    case ToolChoice::kRequired:
      plan.tool_mode = ToolCallMode::kRequired;
      break;
    case ToolChoice::kNamed:
      plan.tool_mode = ToolCallMode::kNamed;
      plan.function_name = tools.named_function;
      break;
  }
  if (metrics && !tools.tools.is_null()) metrics->count_request(tool_choice_name(tools.choice));
  plan.metrics = std::move(metrics);
  return plan;
}

ChatChoiceOutput::ChatChoiceOutput(const ChatOutputPlan& plan) : plan_(plan) {
  if (plan.harmony) {
    harmony_.emplace(/*calls_allowed=*/plan.tool_mode.has_value());
    return;
  }
  if (plan.reasoning) reasoning_.emplace(*plan.reasoning, plan.reasoning_start);
  if (plan.tool_mode) tools_.emplace(*plan.tool_mode, plan.tool_format, plan.function_name);
}

void ChatChoiceOutput::parse(std::string_view text, bool final, bool announce,
                             reasoning::ReasoningOutput& r, tool_calls::ToolCallOutput& t) {
  if (harmony_) {
    tool_calls::HarmonyOutput h;
    harmony_->push(text, h);
    if (final) harmony_->finish(h);
    r.reasoning += h.reasoning;
    t.content += h.content;
    for (tool_calls::ToolCallDelta& d : h.calls) t.calls.push_back(std::move(d));
    if (final) count_once();
    return;
  }
  std::string answer;
  if (reasoning_) {
    reasoning_->push(text, r);
    if (final) reasoning_->finish(r);
    answer = std::move(r.content);
    r.content.clear();
  } else {
    answer = text;
  }
  if (tools_) {
    tools_->push(answer, t, announce);
    if (final) tools_->finish(t);
  } else {
    t.content += answer;
  }
  if (final) count_once();
}

std::vector<json> ChatChoiceOutput::stream(std::string_view text, bool final) {
  reasoning::ReasoningOutput r;
  tool_calls::ToolCallOutput t;
  parse(text, final, /*announce=*/true, r, t);
  std::vector<json> deltas;
  if (!r.reasoning.empty()) deltas.push_back({{"reasoning_content", r.reasoning}});
  if (!t.content.empty()) deltas.push_back({{"content", t.content}});
  for (const tool_calls::ToolCallDelta& d : t.calls) {
    if (!plan_.parallel_tool_calls && d.index > 0) continue;
    json call = {{"index", d.index}};
    if (!d.id.empty()) {  // a call's first delta: OpenAI sends the name with empty arguments
      call["id"] = d.id;
      call["type"] = "function";
      call["function"] = {{"name", d.name}, {"arguments", ""}};
      ++num_calls_;
    } else {
      call["function"] = {{"arguments", d.arguments}};
    }
    deltas.push_back({{"tool_calls", json::array({call})}});
  }
  return deltas;
}

json ChatChoiceOutput::message() {
  reasoning::ReasoningOutput r;
  tool_calls::ToolCallOutput t;
  parse(whole_text_, /*final=*/true, /*announce=*/false, r, t);
  json calls = json::array();
  for (const tool_calls::ToolCallDelta& d : t.calls) {
    if (!plan_.parallel_tool_calls && d.index > 0) continue;
    if (!d.id.empty()) {
      calls.push_back({{"id", d.id},
                       {"type", "function"},
                       {"function", {{"name", d.name}, {"arguments", ""}}}});
    } else {
      calls[std::size_t(d.index)]["function"]["arguments"] =
          calls[std::size_t(d.index)]["function"]["arguments"].get<std::string>() + d.arguments;
    }
  }
  num_calls_ = int(calls.size());
  json m = {{"role", "assistant"}};
  const bool nothing_else = calls.empty() && r.reasoning.empty();
  m["content"] = t.content.empty() && !nothing_else ? json(nullptr) : json(t.content);
  if (plan_.reasoning || plan_.harmony) {
    m["reasoning_content"] = r.reasoning.empty() ? json(nullptr) : json(r.reasoning);
  }
  if (!calls.empty()) m["tool_calls"] = std::move(calls);
  return m;
}

std::string ChatChoiceOutput::finish_reason(const std::string& engine_reason) const {
  // OpenAI answers a named tool_choice with "stop"; a call the model chose ends in "tool_calls".
  if (num_calls_ > 0 && engine_reason == "stop" && plan_.tool_mode != ToolCallMode::kNamed) {
    return "tool_calls";
  }
  return engine_reason;
}

std::vector<json> chat_stream_choices(ChatChoiceOutput& output, int index, std::string_view text,
                                      const std::optional<std::string>& finish_reason,
                                      json logprobs) {
  std::vector<json> deltas = output.stream(text, finish_reason.has_value());
  if (deltas.empty() && (finish_reason || !logprobs.is_null())) deltas.push_back(json::object());
  std::vector<json> choices;
  for (json& delta : deltas) {
    choices.push_back({{"index", index},
                       {"delta", std::move(delta)},
                       {"logprobs", nullptr},
                       {"finish_reason", nullptr}});
  }
  if (!choices.empty()) {
    choices.back()["logprobs"] = std::move(logprobs);
    if (finish_reason) choices.back()["finish_reason"] = output.finish_reason(*finish_reason);
  }
  return choices;
}

void ChatChoiceOutput::count_once() {
  if (counted_ || !plan_.metrics || !plan_.tool_mode) return;
  if (harmony_) {
    counted_ = true;
    plan_.metrics->count_calls("openai", harmony_->num_calls(), harmony_->num_malformed());
    return;
  }
  if (!tools_) return;
  counted_ = true;
  const char* parser = plan_.tool_mode == ToolCallMode::kRequired ? "required"
                       : plan_.tool_mode == ToolCallMode::kNamed
                           ? "named"
                           : tool_calls::tool_call_format_name(plan_.tool_format);
  plan_.metrics->count_calls(parser, tools_->num_calls(), tools_->num_malformed());
}

}  // namespace nibble::server
