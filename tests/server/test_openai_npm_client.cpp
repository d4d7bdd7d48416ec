// Oracle: the official OpenAI Node client, pinned in tests/oracle/npm, against the server.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tests/server/server_harness.h"
#include "tests/support/child_process.h"
#include "tests/support/external_tool.h"

namespace nibble::server {
namespace {

TEST(OpenAiNpmClient, OfficialClientWorksUnchanged) {
  NIBBLE_REQUIRE_TOOL(node, "node");
  const std::string root = NIBBLE_SOURCE_DIR;
  auto install = nibble::testing::run_command(root + "/tests/oracle/npm/install.sh");
  if (install.exit_code == 3 && !nibble::testing::tools_required()) GTEST_SKIP() << install.output;
  ASSERT_EQ(install.exit_code, 0) << install.output;

  testing::ServerHarness h;
  const nlohmann::json expect = {
      {"prompt", "a"}, {"completion4", "bcde"}, {"chat_prompt", "hi"}, {"chat3", "\x0b\x0c\r"}};
  auto result = nibble::testing::run_command(
      node + " " + root + "/tests/oracle/openai/client_check.mjs http://127.0.0.1:" +
      std::to_string(h.port) + "/v1 byte-model '" + expect.dump() + "'");
  EXPECT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find("0 failed"), std::string::npos) << result.output;
}

TEST(OpenAiNpmClient, ToolCallsThroughTheOfficialHelpers) {
  NIBBLE_REQUIRE_TOOL(node, "node");
  const std::string root = NIBBLE_SOURCE_DIR;
  auto install = nibble::testing::run_command(root + "/tests/oracle/npm/install.sh");
  if (install.exit_code == 3 && !nibble::testing::tools_required()) GTEST_SKIP() << install.output;
  ASSERT_EQ(install.exit_code, 0) << install.output;

  testing::HarnessOptions o;
  o.scripted_output =
      "Let me look.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
      "\"Paris\"}}\n</tool_call>";
  o.chat_output.tool_call_format = tool_calls::ToolCallFormat::kHermes;
  o.chat_output.enable_auto_tool_choice = true;
  testing::ServerHarness h(o);
  const nlohmann::json expect = {
      {"name", "get_weather"}, {"arguments", {{"city", "Paris"}}}, {"content", "Let me look.\n"}};
  auto result = nibble::testing::run_command(
      node + " " + root + "/tests/oracle/openai/tool_call_check.mjs http://127.0.0.1:" +
      std::to_string(h.port) + "/v1 byte-model '" + expect.dump() + "'");
  EXPECT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find("0 failed"), std::string::npos) << result.output;
}

}  // namespace
}  // namespace nibble::server
