// Tool calls and reasoning through the HTTP API, end to end: the fake model writes exactly a
// scripted text (one byte-level token per byte), so the answer's shape can be asserted whole,
// streamed and not.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tests/server/server_harness.h"

namespace nibble::server {
namespace {

using nlohmann::json;
using testing::HarnessOptions;
using testing::post;
using testing::ServerHarness;
using testing::stream;

const std::string kHermesCall =
    "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>";

json weather_tools() {
  return json::array(
      {{{"type", "function"},
        {"function",
         {{"name", "get_weather"},
          {"description", "Current weather"},
          {"parameters",
           {{"type", "object"},
            {"properties", {{"city", {{"type", "string"}}}}},
            {"required", {"city"}}}}}}},
       {{"type", "function"},
        {"function", {{"name", "get_time"}, {"parameters", {{"type", "object"}}}}}}});
}

HarnessOptions hermes_server(std::string script) {
  HarnessOptions o;
  o.scripted_output = std::move(script);
  o.chat_output.tool_call_format = tool_calls::ToolCallFormat::kHermes;
  o.chat_output.enable_auto_tool_choice = true;
  return o;
}

json chat_body(json extra = json::object()) {
  json body = {{"messages", {{{"role", "user"}, {"content", "Weather in Paris?"}}}},
               {"tools", weather_tools()}};
  body.update(extra);
  return body;
}

// The streamed chat deltas of choice 0, applied as a client applies them.
struct Assembled {
  std::string content, reasoning, finish_reason;
  json tool_calls = json::array();
  int chunks_with_markup = 0;
};

Assembled assemble(const std::vector<json>& events) {
  Assembled a;
  for (const json& e : events) {
    if (e == "[DONE]" || e["choices"].empty()) continue;
    const json& choice = e["choices"][0];
    const json& delta = choice["delta"];
    if (delta.contains("content")) {
      a.content += delta["content"].get<std::string>();
      if (delta["content"].get<std::string>().find("tool_call") != std::string::npos)
        ++a.chunks_with_markup;
    }
    if (delta.contains("reasoning_content"))
      a.reasoning += delta["reasoning_content"].get<std::string>();
    for (const json& call : delta.value("tool_calls", json::array())) {
      const std::size_t index = call["index"].get<std::size_t>();
      if (call.contains("id")) {
        EXPECT_EQ(index, a.tool_calls.size()) << "a new call's first delta";
        EXPECT_EQ(call["type"], "function");
        EXPECT_EQ(call["function"]["arguments"], "") << "the first delta has empty arguments";
        a.tool_calls.push_back(call);
      } else {
        EXPECT_FALSE(call["function"].contains("name")) << "the name is sent once";
        json& f = a.tool_calls[index]["function"];
        f["arguments"] =
            f["arguments"].get<std::string>() + call["function"]["arguments"].get<std::string>();
      }
    }
    if (!choice["finish_reason"].is_null()) a.finish_reason = choice["finish_reason"];
  }
  return a;
}

TEST(ChatTools, NonStreamedToolCall) {
  ServerHarness h(hermes_server("I'll look.\n" + kHermesCall));
  json r = post(h, "/v1/chat/completions", chat_body(), 200);
  const json& choice = r["choices"][0];
  EXPECT_EQ(choice["finish_reason"], "tool_calls");
  EXPECT_EQ(choice["message"]["content"], "I'll look.\n");
  ASSERT_EQ(choice["message"]["tool_calls"].size(), 1u);
  const json& call = choice["message"]["tool_calls"][0];
  EXPECT_EQ(call["type"], "function");
  EXPECT_TRUE(call["id"].get<std::string>().starts_with("call_")) << call;
  EXPECT_EQ(call["function"]["name"], "get_weather");
  EXPECT_EQ(json::parse(call["function"]["arguments"].get<std::string>()),
            json({{"city", "Paris"}}));
  EXPECT_EQ(r["usage"]["completion_tokens"], int(("I'll look.\n" + kHermesCall).size()) + 1);
}

TEST(ChatTools, OnlyTheCallGivesNullContent) {
  ServerHarness h(hermes_server(kHermesCall));
  json r = post(h, "/v1/chat/completions", chat_body(), 200);
  EXPECT_TRUE(r["choices"][0]["message"]["content"].is_null()) << r;
  EXPECT_EQ(r["choices"][0]["message"]["tool_calls"].size(), 1u);
}

TEST(ChatTools, StreamedToolCallNeverLeaksMarkup) {
  ServerHarness h(hermes_server("I'll look.\n" + kHermesCall + kHermesCall));
  const Assembled a = assemble(stream(h, "/v1/chat/completions", chat_body({{"stream", true}})));
  EXPECT_EQ(a.content, "I'll look.\n");
  EXPECT_EQ(a.chunks_with_markup, 0);
  ASSERT_EQ(a.tool_calls.size(), 2u);
  for (const json& call : a.tool_calls) {
    EXPECT_EQ(call["function"]["name"], "get_weather");
    EXPECT_EQ(call["function"]["arguments"], R"({"city": "Paris"})");
    EXPECT_EQ(call["id"].get<std::string>().size(), 29u);
  }
  EXPECT_NE(a.tool_calls[0]["id"], a.tool_calls[1]["id"]);
  EXPECT_EQ(a.finish_reason, "tool_calls");
}

TEST(ChatTools, ParallelToolCallsFalseKeepsTheFirst) {
  ServerHarness h(hermes_server(kHermesCall + kHermesCall));
  json r = post(h, "/v1/chat/completions", chat_body({{"parallel_tool_calls", false}}), 200);
  EXPECT_EQ(r["choices"][0]["message"]["tool_calls"].size(), 1u);
  const Assembled a = assemble(stream(
      h, "/v1/chat/completions", chat_body({{"parallel_tool_calls", false}, {"stream", true}})));
  EXPECT_EQ(a.tool_calls.size(), 1u);
}

TEST(ChatTools, ToolChoiceNoneLeavesMarkupAsText) {
  ServerHarness h(hermes_server(kHermesCall));
  json r = post(h, "/v1/chat/completions", chat_body({{"tool_choice", "none"}}), 200);
  EXPECT_EQ(r["choices"][0]["message"]["content"], kHermesCall);
  EXPECT_FALSE(r["choices"][0]["message"].contains("tool_calls"));
  EXPECT_EQ(r["choices"][0]["finish_reason"], "stop");
}

TEST(ChatTools, MalformedMarkupIsContentAndCounted) {
  const std::string broken = "<tool_call>\n{\"name\": get_weather}\n</tool_call>";
  ServerHarness h(hermes_server(broken));
  json r = post(h, "/v1/chat/completions", chat_body(), 200);
  EXPECT_EQ(r["choices"][0]["message"]["content"], broken);
  EXPECT_EQ(r["choices"][0]["finish_reason"], "stop");
  const Assembled a = assemble(stream(h, "/v1/chat/completions", chat_body({{"stream", true}})));
  EXPECT_EQ(a.content, broken);
  EXPECT_TRUE(a.tool_calls.empty());
  const std::string metrics = h.client().Get("/metrics")->body;
  EXPECT_NE(metrics.find("nibble_tool_calls_total{model_name=\"byte-model\",parser=\"hermes\","
                         "outcome=\"malformed\"} 2"),
            std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("nibble_tool_call_requests_total{model_name=\"byte-model\","
                         "tool_choice=\"auto\"} 2"),
            std::string::npos)
      << metrics;
}

TEST(ChatTools, ParsedCallsAreCounted) {
  ServerHarness h(hermes_server(kHermesCall + kHermesCall));
  post(h, "/v1/chat/completions", chat_body(), 200);
  const std::string metrics = h.client().Get("/metrics")->body;
  EXPECT_NE(metrics.find("nibble_tool_calls_total{model_name=\"byte-model\",parser=\"hermes\","
                         "outcome=\"parsed\"} 2"),
            std::string::npos)
      << metrics;
}

TEST(ChatTools, AutoWithoutTheFlagIsRefusedLikeVllm) {
  HarnessOptions o = hermes_server(kHermesCall);
  o.chat_output.enable_auto_tool_choice = false;
  ServerHarness h(o);
  json r = post(h, "/v1/chat/completions", chat_body(), 400);
  EXPECT_EQ(r["error"]["param"], "tool_choice");
  EXPECT_NE(r["error"]["message"].get<std::string>().find("--enable-auto-tool-choice"),
            std::string::npos);
  // That flag alone suffices where the template shows the format (issue 45 item 4).
  EXPECT_EQ(r["error"]["message"].get<std::string>().find("--tool-call-parser"), std::string::npos)
      << r["error"]["message"];
  // Without tools, or with tool_choice "none", nothing changes.
  post(h, "/v1/chat/completions", chat_body({{"tool_choice", "none"}}), 200);
}

TEST(ChatTools, BadToolFieldsGive400NamingTheField) {
  ServerHarness h(hermes_server("x"));
  struct Bad {
    json extra;
    const char* param;
  };
  const Bad cases[] = {
      {{{"tools", "get_weather"}}, "tools"},
      {{{"tools", {{{"type", "function"}}}}}, "tools"},
      {{{"tools", {{{"type", "code"}, {"function", {{"name", "f"}}}}}}}, "tools"},
      {{{"tools", {{{"type", "function"}, {"function", {{"name", "bad name!"}}}}}}}, "tools"},
      {{{"tools", {{{"type", "function"}, {"function", {{"name", "f"}, {"parameters", "x"}}}}}}},
       "tools"},
      {{{"tools",
         {{{"type", "function"}, {"function", {{"name", "f"}}}},
          {{"type", "function"}, {"function", {{"name", "f"}}}}}}},
       "tools"},
      {{{"tool_choice", "sometimes"}}, "tool_choice"},
      {{{"tool_choice", {{"type", "function"}, {"function", {{"name", "nope"}}}}}}, "tool_choice"},
      {{{"tool_choice", {{"type", "function"}}}}, "tool_choice"},
      {{{"tools", nullptr}, {"tool_choice", "required"}}, "tool_choice"},
      {{{"parallel_tool_calls", "yes"}}, "parallel_tool_calls"},
      {{{"messages",
         {{{"role", "assistant"},
           {"content", ""},
           {"tool_calls",
            {{{"id", "c1"},
              {"type", "function"},
              {"function", {{"name", "f"}, {"arguments", "{not json"}}}}}}}}}},
       "messages"},
      {{{"messages", {{{"role", "tool"}, {"content", "21"}}}}}, "messages"},
  };
  for (const Bad& c : cases) {
    json r = post(h, "/v1/chat/completions", chat_body(c.extra), 400);
    EXPECT_EQ(r["error"]["param"], c.param) << c.extra;
    EXPECT_EQ(r["error"]["type"], "invalid_request_error");
  }
}

TEST(ChatTools, ToolResultsRenderThroughTheTemplate) {
  ServerHarness h(hermes_server("It is sunny."));
  json messages = {
      {{"role", "user"}, {"content", "Weather in Paris?"}},
      {{"role", "assistant"},
       {"content", ""},
       {"tool_calls",
        {{{"id", "call_1"},
          {"type", "function"},
          {"function", {{"name", "get_weather"}, {"arguments", "{\"city\": \"Paris\"}"}}}}}}},
      {{"role", "tool"}, {"tool_call_id", "call_1"}, {"content", "sunny, 21"}}};
  json r = post(h, "/v1/chat/completions", chat_body({{"messages", messages}}), 200);
  EXPECT_EQ(r["choices"][0]["message"]["content"], "It is sunny.");
  EXPECT_EQ(r["choices"][0]["finish_reason"], "stop");
}

TEST(ChatTools, NamedFunctionAndRequiredShapes) {
  // The constraint (engine/structured) makes the model write these shapes; here it is scripted.
  ServerHarness named(hermes_server(R"({"city": "Paris"})"));
  json r = post(
      named, "/v1/chat/completions",
      chat_body({{"tool_choice", {{"type", "function"}, {"function", {{"name", "get_weather"}}}}}}),
      200);
  ASSERT_EQ(r["choices"][0]["message"]["tool_calls"].size(), 1u) << r;
  EXPECT_EQ(r["choices"][0]["message"]["tool_calls"][0]["function"]["name"], "get_weather");
  EXPECT_EQ(r["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"],
            R"({"city": "Paris"})");
  EXPECT_EQ(r["choices"][0]["finish_reason"], "stop");  // as OpenAI answers a named choice

  ServerHarness required(hermes_server(
      R"([{"name": "get_weather", "parameters": {"city": "Rome"}}, {"name": "get_time", "parameters": {}}])"));
  const Assembled a = assemble(stream(required, "/v1/chat/completions",
                                      chat_body({{"tool_choice", "required"}, {"stream", true}})));
  ASSERT_EQ(a.tool_calls.size(), 2u);
  EXPECT_EQ(a.tool_calls[0]["function"]["arguments"], R"({"city": "Rome"})");
  EXPECT_EQ(a.tool_calls[1]["function"]["name"], "get_time");
  EXPECT_EQ(a.content, "");
  EXPECT_EQ(a.finish_reason, "tool_calls");
}

HarnessOptions qwen3_reasoning(std::string script) {
  HarnessOptions o = hermes_server(std::move(script));
  o.chat_output.reasoning_format = reasoning::ReasoningFormat::kQwen3;
  return o;
}

TEST(ChatReasoning, ThinkingGoesToReasoningContent) {
  ServerHarness h(qwen3_reasoning("<think>\nThe user wants weather.\n</think>\n\nLet me check.\n" +
                                  kHermesCall));
  json r = post(h, "/v1/chat/completions", chat_body(), 200);
  const json& m = r["choices"][0]["message"];
  EXPECT_EQ(m["reasoning_content"], "The user wants weather.");
  EXPECT_EQ(m["content"], "Let me check.\n");
  EXPECT_EQ(m["tool_calls"].size(), 1u);
  const Assembled a = assemble(stream(h, "/v1/chat/completions", chat_body({{"stream", true}})));
  EXPECT_EQ(a.reasoning, "The user wants weather.");
  EXPECT_EQ(a.content, "Let me check.\n");
  EXPECT_EQ(a.tool_calls.size(), 1u);
  EXPECT_EQ(a.finish_reason, "tool_calls");
}

TEST(ChatReasoning, NoThinkBlockIsAllContent) {
  ServerHarness h(qwen3_reasoning("Plain answer."));
  json r = post(
      h, "/v1/chat/completions",
      chat_body({{"tools", nullptr}, {"chat_template_kwargs", {{"enable_thinking", false}}}}), 200);
  EXPECT_EQ(r["choices"][0]["message"]["content"], "Plain answer.");
  EXPECT_TRUE(r["choices"][0]["message"]["reasoning_content"].is_null());
}

// gpt-oss's harmony channels (the fake model spells the markers byte by byte; a gpt-oss
// tokenizer has them as special tokens, which the harmony plan keeps in the text).
HarnessOptions harmony_server(std::string script) {
  HarnessOptions o;
  o.scripted_output = std::move(script);
  o.chat_output.harmony = true;
  o.chat_output.enable_auto_tool_choice = true;
  return o;
}

const std::string kHarmonyAnswer =
    "<|channel|>analysis<|message|>User greets. Reply.<|end|><|start|>assistant<|channel|>final"
    "<|message|>Hello!<|return|>";
const std::string kHarmonyCall =
    "<|channel|>analysis<|message|>Need the weather.<|end|><|start|>assistant<|channel|>"
    "commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"Paris\"}"
    "<|call|>";

TEST(ChatHarmony, AnalysisIsReasoningAndFinalIsContent) {
  ServerHarness h(harmony_server(kHarmonyAnswer));
  json r = post(h, "/v1/chat/completions", chat_body({{"tools", nullptr}}), 200);
  const json& m = r["choices"][0]["message"];
  EXPECT_EQ(m["reasoning_content"], "User greets. Reply.");
  EXPECT_EQ(m["content"], "Hello!");
  EXPECT_FALSE(m.contains("tool_calls"));
  EXPECT_EQ(r["choices"][0]["finish_reason"], "stop");
  const Assembled a = assemble(
      stream(h, "/v1/chat/completions", chat_body({{"tools", nullptr}, {"stream", true}})));
  EXPECT_EQ(a.reasoning, "User greets. Reply.");
  EXPECT_EQ(a.content, "Hello!");
  EXPECT_EQ(a.finish_reason, "stop");
}

TEST(ChatHarmony, FunctionRecipientIsAToolCall) {
  ServerHarness h(harmony_server(kHarmonyCall));
  json r = post(h, "/v1/chat/completions", chat_body(), 200);
  const json& choice = r["choices"][0];
  EXPECT_EQ(choice["finish_reason"], "tool_calls");
  EXPECT_TRUE(choice["message"]["content"].is_null()) << choice;
  EXPECT_EQ(choice["message"]["reasoning_content"], "Need the weather.");
  ASSERT_EQ(choice["message"]["tool_calls"].size(), 1u);
  const json& call = choice["message"]["tool_calls"][0];
  EXPECT_EQ(call["function"]["name"], "get_weather");
  EXPECT_EQ(json::parse(call["function"]["arguments"].get<std::string>()),
            json({{"city", "Paris"}}));
  EXPECT_EQ(call["id"].get<std::string>().size(), 29u);

  const Assembled a = assemble(stream(h, "/v1/chat/completions", chat_body({{"stream", true}})));
  EXPECT_EQ(a.reasoning, "Need the weather.");
  EXPECT_EQ(a.content, "");
  ASSERT_EQ(a.tool_calls.size(), 1u);
  EXPECT_EQ(a.tool_calls[0]["function"]["name"], "get_weather");
  EXPECT_EQ(a.tool_calls[0]["function"]["arguments"], R"({"city": "Paris"})");
  EXPECT_EQ(a.finish_reason, "tool_calls");
  const std::string metrics = h.client().Get("/metrics")->body;
  EXPECT_NE(metrics.find("nibble_tool_calls_total{model_name=\"byte-model\",parser=\"openai\","
                         "outcome=\"parsed\"} 2"),
            std::string::npos)
      << metrics;
}

TEST(ChatHarmony, NoMarkerReachesTheStream) {
  ServerHarness h(harmony_server(kHarmonyAnswer));
  for (const json& e :
       stream(h, "/v1/chat/completions", chat_body({{"tools", nullptr}, {"stream", true}}))) {
    if (e == "[DONE]" || e["choices"].empty()) continue;
    EXPECT_EQ(e["choices"][0]["delta"].dump().find("<|"), std::string::npos) << e;
  }
}

TEST(ChatHarmony, ToolChoiceNoneGivesTheCallAsContent) {
  ServerHarness h(harmony_server(kHarmonyCall));
  json r = post(h, "/v1/chat/completions", chat_body({{"tool_choice", "none"}}), 200);
  EXPECT_EQ(r["choices"][0]["message"]["content"], R"({"city": "Paris"})");
  EXPECT_FALSE(r["choices"][0]["message"].contains("tool_calls"));
  EXPECT_EQ(r["choices"][0]["finish_reason"], "stop");
}

TEST(ChatHarmony, JunkFromRandomWeightsIsNeverAnError) {
  ServerHarness h(
      harmony_server("<|channel|>analysis<|start|><|message|><|channel|>"
                     "<|constrain|> to=functions.<|message|>{<|end|>"));
  json r = post(h, "/v1/chat/completions", chat_body(), 200);
  EXPECT_FALSE(r["choices"][0]["message"].contains("tool_calls")) << r;
  const Assembled a = assemble(stream(h, "/v1/chat/completions", chat_body({{"stream", true}})));
  EXPECT_TRUE(a.tool_calls.empty());
}

TEST(ChatHarmony, ReasoningEffortIsValidated) {
  ServerHarness h(harmony_server(kHarmonyAnswer));
  post(h, "/v1/chat/completions", chat_body({{"tools", nullptr}, {"reasoning_effort", "high"}}),
       200);
  json r = post(h, "/v1/chat/completions",
                chat_body({{"tools", nullptr}, {"reasoning_effort", "extreme"}}), 400);
  EXPECT_EQ(r["error"]["param"], "reasoning_effort");
}

}  // namespace
}  // namespace nibble::server
