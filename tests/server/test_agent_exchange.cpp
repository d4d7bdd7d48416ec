// Issue 24's "done when": an agent-style exchange through the router with the official client.
// nibble-controller in local mode starts an engine for the tiny random-weight Qwen3 model
// (real tokenizer and chat template, tool calls detected from it); agent_exchange_check.mjs
// then offers tools, forces a streamed tool call, sends the tool's result back and reads the
// streamed answer, all through the router (see the script for the checks).
#include <gtest/gtest.h>

#include <fstream>

#include "tests/controller/controller_process.h"
#include "tests/server/serve_process.h"

namespace nibble::server {
namespace {

using namespace std::chrono_literals;

TEST(AgentExchange, ToolCallToolResultAnswerStreamedThroughTheRouter) {
  REQUIRE_TINY_MODEL(model);
  NIBBLE_REQUIRE_TOOL(node, "node");
  controller::testing::ControllerProcess c;
  ASSERT_TRUE(c.wait_api()) << c.log();
  const auto file = c.state_dir.path() / "agent.yaml";
  std::ofstream(file) << "apiVersion: nibble.dev/v1alpha1\nkind: ModelRecipe\nmetadata:\n"
                         "  name: agent\nspec:\n  model:\n    source: "
                      << model
                      << "\n    servedName: agent-chat\n  engine:\n    maxModelLen: 1024\n";
  const auto applied = c.nibble("apply -f " + file.string());
  ASSERT_EQ(applied.exit_code, 0) << applied.output;
  ASSERT_TRUE(controller::testing::eventually(
      [&] {
        const auto st = c.status("agent");
        return st.is_object() && st.value("phase", "") == "Ready";
      },
      90s))
      << c.status("agent").dump(2) << c.log();

  const auto r = nibble::testing::run_command(node + " " + std::string(NIBBLE_SOURCE_DIR) +
                                              "/tests/server/agent_exchange_check.mjs " +
                                              c.base_url() + "/v1 agent-chat 2>&1");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find(" passed, 0 failed"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace nibble::server
