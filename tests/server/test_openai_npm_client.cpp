// Oracle: the official OpenAI Node client, pinned in tests/oracle/npm, against the server.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tests/server/npm_oracles.h"
#include "tests/server/server_harness.h"

namespace nibble::server {
namespace {

TEST(OpenAiNpmClient, OfficialClientWorksUnchanged) {
  NIBBLE_REQUIRE_TOOL(node, "node");
  NIBBLE_REQUIRE_NPM_ORACLES();
  testing::ServerHarness h;
  testing::expect_node_check(
      node, "client_check.mjs", h.port,
      {{"prompt", "a"}, {"completion4", "bcde"}, {"chat_prompt", "hi"}, {"chat3", "\x0b\x0c\r"}});
}

TEST(OpenAiNpmClient, ToolCallsThroughTheOfficialHelpers) {
  NIBBLE_REQUIRE_TOOL(node, "node");
  NIBBLE_REQUIRE_NPM_ORACLES();
  testing::HarnessOptions o;
  o.scripted_output =
      "Let me look.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
      "\"Paris\"}}\n</tool_call>";
  o.chat_output.tool_call_format = tool_calls::ToolCallFormat::kHermes;
  o.chat_output.enable_auto_tool_choice = true;
  testing::ServerHarness h(o);
  testing::expect_node_check(
      node, "tool_call_check.mjs", h.port,
      {{"name", "get_weather"}, {"arguments", {{"city", "Paris"}}}, {"content", "Let me look.\n"}});
}

}  // namespace
}  // namespace nibble::server
