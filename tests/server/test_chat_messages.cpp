// Chat messages before templating: content parts joined as vLLM joins them, non-text parts and
// unknown roles refused by name, roles a template does not know mapped to the ones it does.
#include <gtest/gtest.h>

#include "engine/server/api_error.h"
#include "engine/server/chat_messages.h"

namespace nibble::server {
namespace {

using nlohmann::json;

std::string error_of(const char* messages) {
  try {
    normalize_chat_messages(json::parse(messages));
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400);
    EXPECT_EQ(e.body()["error"]["param"], "messages");
    return e.what();
  }
  return "";
}

TEST(ChatMessages, TextPartsAreJoinedWithNewlinesForEveryRole) {
  const json out = normalize_chat_messages(json::parse(R"([
    {"role": "system", "content": [{"type": "text", "text": "Be brief."}]},
    {"role": "user", "content": [{"type": "text", "text": "Hi"}, {"type": "text", "text": "there"}],
     "name": "ann"},
    {"role": "assistant", "content": [{"type": "refusal", "refusal": "No."}]},
    {"role": "assistant", "content": null, "tool_calls": []},
    {"role": "user", "content": []},
    {"role": "user", "content": "plain"}])"));
  EXPECT_EQ(out[0]["content"], "Be brief.");
  EXPECT_EQ(out[1]["content"], "Hi\nthere");
  EXPECT_EQ(out[1]["name"], "ann");
  EXPECT_EQ(out[2]["content"], "No.");
  // null (an assistant's tool call sent back by the official client) renders as "", as in
  // vLLM: Qwen3's template tests `'</think>' in message.content`, which fails on None.
  EXPECT_EQ(out[3]["content"], "");
  EXPECT_TRUE(out[3].contains("tool_calls"));
  EXPECT_EQ(out[4]["content"], "");
  EXPECT_EQ(out[5]["content"], "plain");
}

TEST(ChatMessages, NonTextPartsAreRefusedByType) {
  EXPECT_EQ(
      error_of(R"([{"role": "user", "content": [{"type": "text", "text": "What is this?"},
                  {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]}])"),
      "messages[0].content[1]: content parts of type 'image_url' are not supported: this model "
      "takes text only (send parts of type 'text')");
  EXPECT_EQ(error_of(R"([{"role": "user", "content": "a"}, {"role": "user", "content":
                  [{"type": "input_audio", "input_audio": {"data": "", "format": "wav"}}]}])"),
            "messages[1].content[0]: content parts of type 'input_audio' are not supported: this "
            "model takes text only (send parts of type 'text')");
  EXPECT_EQ(error_of(R"([{"role": "user", "content": [{"text": "no type"}]}])"),
            "messages[0].content[0].type must be a string such as \"text\"");
  EXPECT_EQ(error_of(R"([{"role": "user", "content": [{"type": "text", "text": 5}]}])"),
            "messages[0].content[0].text must be a string");
  EXPECT_EQ(error_of(R"([{"role": "user", "content": ["bare string"]}])"),
            "messages[0].content[0] must be an object with a 'type'");
  EXPECT_EQ(error_of(R"([{"role": "user", "content": 5}])"),
            "messages[0].content must be a string or an array of parts");
}

TEST(ChatMessages, UnknownRolesAreRefusedByName) {
  EXPECT_EQ(error_of(R"([{"role": "user", "content": "a"}, {"role": "wizard", "content": "b"}])"),
            "messages[1].role 'wizard' is not a chat role (use system, developer, user, "
            "assistant, tool or function)");
  EXPECT_EQ(error_of(R"([{"content": "no role"}])"), "messages[0].role must be a string");
  EXPECT_EQ(error_of(R"([7])"), "messages[0] must be an object");
  for (const char* role : {"system", "developer", "user", "assistant", "tool", "function"}) {
    EXPECT_EQ(normalize_chat_messages(json::array({{{"role", role}, {"content", "x"}}}))[0]["role"],
              role);
  }
}

TEST(ChatMessages, RolesTheTemplateDoesNotNameAreMapped) {
  const json messages = json::parse(R"([{"role": "developer", "content": "d"},
    {"role": "function", "name": "f", "content": "r"}, {"role": "user", "content": "u"}])");
  // A Qwen3-like template: knows system, user, assistant and tool only.
  const json qwen = adapt_roles_to_template(
      messages,
      "{%- if message.role == \"user\" or message.role == \"system\" %}...{%- elif "
      "message.role == \"tool\" %}");
  EXPECT_EQ(qwen[0]["role"], "system");
  EXPECT_EQ(qwen[1]["role"], "tool");
  EXPECT_EQ(qwen[1]["name"], "f");
  EXPECT_EQ(qwen[2]["role"], "user");
  // A template that names developer (as gpt-oss's does) gets it as it is.
  const json harmony =
      adapt_roles_to_template(messages, "{%- elif message.role == 'developer' %}{%- endif %}");
  EXPECT_EQ(harmony[0]["role"], "developer");
  EXPECT_EQ(harmony[1]["role"], "tool");
}

// gpt-oss's template keeps a tool call's analysis from message.thinking; clients send back what
// the server answered: reasoning_content.
TEST(ChatMessages, ReasoningContentBecomesThinkingForATemplateThatReadsIt) {
  const json messages = json::parse(R"([{"role": "user", "content": "u"},
    {"role": "assistant", "content": "", "reasoning_content": "r1"},
    {"role": "assistant", "content": "", "reasoning": "r2"},
    {"role": "assistant", "content": "", "reasoning_content": "r3", "thinking": "t3"}])");
  const json gptoss = adapt_roles_to_template(messages, "{{ message.thinking }}");
  EXPECT_FALSE(gptoss[0].contains("thinking"));
  EXPECT_EQ(gptoss[1]["thinking"], "r1");
  EXPECT_EQ(gptoss[2]["thinking"], "r2");
  EXPECT_EQ(gptoss[3]["thinking"], "t3");
  const json other = adapt_roles_to_template(messages, "{{ message.reasoning_content }}");
  EXPECT_FALSE(other[1].contains("thinking"));
}

// An answer sent back as the client received it has "tool_calls": null; gpt-oss's template
// tests `"tool_calls" in message` and would then index it.
TEST(ChatMessages, NullOrEmptyToolCallsAreNoCalls) {
  const json messages = json::parse(R"([{"role": "assistant", "content": "a", "tool_calls": null},
    {"role": "assistant", "content": "b", "tool_calls": []},
    {"role": "assistant", "content": "", "tool_calls": [{"id": "c"}]}])");
  const json adapted = adapt_roles_to_template(messages, "");
  EXPECT_FALSE(adapted[0].contains("tool_calls"));
  EXPECT_FALSE(adapted[1].contains("tool_calls"));
  EXPECT_EQ(adapted[2]["tool_calls"].size(), 1u);
}

}  // namespace
}  // namespace nibble::server
