// A whole agent exchange in the harmony format (gpt-oss's), driven by the official OpenAI client's
// own tool runner through nibble-controller's router: the model reasons, calls a tool, gets the
// result rendered back in harmony form, then answers on the final channel. The model is scripted
// by prompt (FakeModelRunner::replies): it answers the second turn only when the template wrote
// the tool call and its result as harmony messages, and the first only with the tools' namespace
// and the requested reasoning effort in the prompt, so a wrong rendering fails the exchange.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "controller/router/route_table.h"
#include "controller/router/router.h"
#include "metrics/registry.h"
#include "tests/server/npm_oracles.h"
#include "tests/server/server_harness.h"

namespace nibble::server {
namespace {

const char* const kCall =
    "<|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>"
    "{\"city\": \"Paris\"}<|call|>";

// The harmony template the test renders with: the checkpoint's own where one is given
// (NIBBLE_GPTOSS_MODEL_DIR, as tests/chat/test_chat_oracle.cpp reads it), else the fixture
// written from the format's description.
std::string harmony_template_dir() {
  if (const char* dir = std::getenv("NIBBLE_GPTOSS_MODEL_DIR"); dir && *dir) return dir;
  return std::string(NIBBLE_SOURCE_DIR) + "/tests/server/fixtures/harmony-template";
}

testing::HarnessOptions harmony_model() {
  testing::HarnessOptions o;
  o.chat_template_dir = harmony_template_dir();
  // As `serve --enable-auto-tool-choice --tool-call-parser openai`.
  o.chat_output.harmony = true;
  o.chat_output.enable_auto_tool_choice = true;
  o.max_model_len = 2048;
  o.replies = {
      {{kCall,
        "<|start|>functions.get_weather to=assistant<|channel|>commentary<|message|>"
        "{\"temperature_c\":21}<|end|>"},
       "<|channel|>analysis<|message|>The tool says 21.<|end|><|start|>assistant<|channel|>final"
       "<|message|>It is 21 C in Paris.<|return|>"},
      {{"Reasoning: low", "type get_weather", "<|start|>user<|message|>Weather in Paris?<|end|>"},
       "<|channel|>analysis<|message|>Ask the weather tool.<|end|>" + std::string(kCall)},
  };
  o.scripted_output = "no scripted reply matched the prompt";
  return o;
}

TEST(HarmonyAgentExchange, OfficialToolRunnerThroughTheRouter) {
  NIBBLE_REQUIRE_TOOL(node, "node");
  NIBBLE_REQUIRE_NPM_ORACLES();
  testing::ServerHarness engine(harmony_model());
  router::RouteTable routes;
  routes.publish({.recipe = "gpt-oss",
                  .served_model_name = "byte-model",
                  .ready = {{.id = "gpt-oss-0", .port = engine.port}}});
  metrics::Registry registry;
  router::RouterConfig config;
  config.host = "127.0.0.1";
  config.port = 0;
  router::Router front(routes, registry, config);
  ASSERT_TRUE(front.start());
  testing::expect_node_check(node, "harmony_agent_check.mjs", front.port(),
                             {{"name", "get_weather"},
                              {"arguments", {{"city", "Paris"}}},
                              {"result", {{"temperature_c", 21}}},
                              {"reasoning", {"Ask the weather tool.", "The tool says 21."}},
                              {"answer", "It is 21 C in Paris."}});
  // Both turns of both runs (whole and streamed) went through the router.
  EXPECT_NE(
      registry.render().find(
          "nibble_controller_router_requests_total{model_name=\"byte-model\",code=\"200\"} 4"),
      std::string::npos)
      << registry.render();
}

}  // namespace
}  // namespace nibble::server
