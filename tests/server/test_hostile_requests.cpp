// Issue 44, items 1, 2 and two smaller ones: requests built to crash or stall an engine get a
// 400 that names the limit, and the server keeps serving. The crashing shapes of the report:
// left-recursive schemas in every structured-output field, 50,000 nested arrays wherever a body
// carries JSON, 20,000 nested regex groups; then the prompt's byte bound and /tokenize errors
// that must not show the chat template's insides.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <string>

#include "tests/server/server_harness.h"

namespace nibble::server {
namespace {

using nlohmann::json;
using testing::post;
using testing::ServerHarness;

// `levels` arrays inside one another, as text (building it as a json value and dumping it would
// recurse in the test itself).
std::string nested_arrays(int levels) {
  return std::string(std::size_t(levels), '[') + std::string(std::size_t(levels), ']');
}

// POSTs raw text; returns {status, parsed body}.
std::pair<int, json> post_raw(ServerHarness& h, const std::string& path, const std::string& body) {
  auto res = h.client().Post(path, body, "application/json");
  if (!res) return {0, nullptr};
  return {res->status, json::parse(res->body, nullptr, false)};
}

std::string error_message(const json& body) {
  return body.is_object() && body.contains("error") ? body["error"].value("message", "") : "";
}

void expect_still_serving(ServerHarness& h) {
  const json ok = post(h, "/v1/completions", {{"prompt", "a"}, {"max_tokens", 2}}, 200);
  EXPECT_EQ(ok["choices"][0]["text"], "bc");
}

TEST(HostileRequests, DeepNestingAnywhereInABodyIsRefusedNamingTheLimit) {
  ServerHarness h;
  const std::string deep = nested_arrays(50000);
  const std::string user = R"({"role": "user", "content": "hi"})";
  const std::string deep_string = json(deep).dump();  // the same, as a JSON string
  const std::pair<const char*, std::string> bodies[] = {
      {"message field",
       R"({"messages": [{"role": "user", "content": "hi", "name": )" + deep + "}]}"},
      {"chat_template_kwargs",
       R"({"messages": [)" + user + R"(], "chat_template_kwargs": {"x": )" + deep + "}}"},
      {"tool parameters", R"({"messages": [)" + user +
                              R"(], "tools": [{"type": "function", "function": {"name": "f",
          "parameters": {"type": "object", "properties": {"a": )" +
                              deep + "}}}}]}"},
      {"tool-call arguments (a string)",
       R"({"messages": [)" + user +
           R"(, {"role": "assistant", "content": null, "tool_calls": [{"id": "c1",
          "type": "function", "function": {"name": "f", "arguments": )" +
           deep_string + R"(}}]}, {"role": "tool", "tool_call_id": "c1", "content": "1"}]})"},
      {"schema annotations", R"({"messages": [)" + user +
                                 R"(], "response_format": {"type": "json_schema", "json_schema":
          {"name": "s", "schema": {"type": "string", "examples": )" +
                                 deep + "}}}}"},
      {"guided_json (a string)",
       R"({"messages": [)" + user + R"(], "guided_json": )" +
           json(R"({"type": "string", "description": )" + deep + "}").dump() + "}"},
  };
  for (const auto& [where, body] : bodies) {
    const auto [status, answer] = post_raw(h, "/v1/chat/completions", body);
    EXPECT_EQ(status, 400) << where;
    EXPECT_NE(error_message(answer).find("nests more than 128 levels"), std::string::npos)
        << where << ": " << answer;
  }
  EXPECT_EQ(post_raw(h, "/v1/completions", R"({"prompt": )" + deep + "}").first, 400);
  EXPECT_EQ(post_raw(h, "/tokenize", R"({"messages": )" + deep + "}").first, 400);
  EXPECT_EQ(post_raw(h, "/detokenize", R"({"tokens": )" + deep + "}").first, 400);
  expect_still_serving(h);
  // As deep as the limit is fine: the body, the kwargs object, then 126 arrays.
  const std::string at_limit = R"({"messages": [)" + user + R"(], "max_tokens": 1,
      "chat_template_kwargs": {"x": )" +
                               nested_arrays(126) + "}}";
  EXPECT_EQ(post_raw(h, "/v1/chat/completions", at_limit).first, 200);
  const std::string over = R"({"messages": [)" + user + R"(], "max_tokens": 1,
      "chat_template_kwargs": {"x": )" +
                           nested_arrays(127) + "}}";
  EXPECT_EQ(post_raw(h, "/v1/chat/completions", over).first, 400);
}

TEST(HostileRequests, LeftRecursiveSchemasAreRefusedInEveryField) {
  ServerHarness h;
  const json left = json::parse(R"({"anyOf": [{"$ref": "#"}, {"type": "string"}]})");
  const json in_items = json::parse(
      R"({"type": "array", "items": {"anyOf": [{"$ref": "#/items"}, {"type": "integer"}]}})");
  const json format = {{"type", "json_schema"}, {"json_schema", {{"name", "x"}, {"schema", left}}}};
  struct Case {
    std::string path;
    std::string field;
    json value;
  };
  const Case cases[] = {
      {"/v1/chat/completions", "response_format", format},
      {"/v1/chat/completions", "guided_json", left},
      {"/v1/chat/completions", "guided_json", left.dump()},
      {"/v1/chat/completions", "structured_outputs", {{"json", left}}},
      {"/v1/chat/completions", "guided_json", in_items},
      {"/v1/completions", "guided_json", left},
      {"/v1/completions", "structured_outputs", {{"json", in_items}}},
      {"/v1/completions", "response_format", format},
  };
  for (const Case& c : cases) {
    json body =
        c.path == "/v1/completions"
            ? json{{"prompt", "a"}, {"max_tokens", 4}}
            : json{{"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"max_tokens", 4}};
    body[c.field] = c.value;
    const json answer = post(h, c.path, body, 400);
    EXPECT_NE(error_message(answer).find("left-recursive"), std::string::npos)
        << c.path << " " << c.field << ": " << answer;
  }
  expect_still_serving(h);
}

TEST(HostileRequests, DeeplyNestedRegexGroupsAreRefusedNamingTheLimit) {
  ServerHarness h;
  const std::string groups = std::string(20000, '(') + "a" + std::string(20000, ')');
  const json answer = post(h, "/v1/completions",
                           {{"prompt", "a"}, {"max_tokens", 2}, {"guided_regex", groups}}, 400);
  EXPECT_EQ(answer["error"]["param"], "guided_regex");
  EXPECT_NE(error_message(answer).find("more than 128 levels"), std::string::npos);
  expect_still_serving(h);
}

// A prompt over max_model_len * max_prompt_bytes_per_token bytes is refused by its size, before
// the tokenizer runs (the harness: 256 tokens, the default 32 bytes per token: 8,192 bytes).
TEST(HostileRequests, PromptsAreBoundedByBytesBeforeTokenizing) {
  ServerHarness h;
  for (const char* path : {"/v1/completions", "/tokenize"}) {
    const json answer = post(h, path, {{"prompt", std::string(8193, 'a')}, {"max_tokens", 1}}, 400);
    EXPECT_NE(error_message(answer).find("8193 bytes"), std::string::npos) << path << answer;
    EXPECT_EQ(answer["error"]["param"], "prompt");
  }
  const json chat = post(
      h, "/v1/chat/completions",
      {{"messages", {{{"role", "user"}, {"content", std::string(9000, 'a')}}}}, {"max_tokens", 1}},
      400);
  EXPECT_NE(error_message(chat).find("bytes"), std::string::npos) << chat;
  // Under the byte bound, the token count still decides (one token per byte here).
  const json tokens = post(h, "/tokenize", {{"prompt", std::string(300, 'a')}}, 400);
  EXPECT_NE(error_message(tokens).find("300 tokens"), std::string::npos) << tokens;
}

// A template failing inside (here an int added to a string) shows the client that its messages
// could not be rendered, not the template's line or operand types (the /tokenize answer quoted
// them); a template's own raise_exception() message is for users and still reaches them.
TEST(HostileRequests, TemplateFailuresDoNotShowTheTemplatesInsides) {
  ServerHarness h;
  h.chat_template = chat::ChatTemplate(chat::ChatTemplateConfig{
      "{% if messages | length > 1 %}{{ raise_exception('one message only, please') }}{% endif "
      "%}{{ messages[0]['content'] + 1 }}",
      {}});
  const json one = {{{"role", "user"}, {"content", "hi"}}};
  const json two = {{{"role", "user"}, {"content", "hi"}}, {{"role", "user"}, {"content", "x"}}};
  for (const char* path : {"/tokenize", "/v1/chat/completions"}) {
    const json inside = post(h, path, {{"messages", one}, {"max_tokens", 1}}, 400);
    const std::string message = error_message(inside);
    EXPECT_NE(message.find("could not render these messages"), std::string::npos) << inside;
    EXPECT_EQ(message.find("line"), std::string::npos) << inside;
    EXPECT_EQ(message.find("operand"), std::string::npos) << inside;
    const json raised = post(h, path, {{"messages", two}, {"max_tokens", 1}}, 400);
    EXPECT_EQ(error_message(raised),
              "the chat template rejected the messages: one message only, please");
  }
  const json kind = post(h, "/tokenize", {{"prompt", "a"}, {"add_special_tokens", "yes"}}, 400);
  EXPECT_EQ(error_message(kind), "'add_special_tokens' must be a boolean");
}

}  // namespace
}  // namespace nibble::server
