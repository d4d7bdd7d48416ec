// The controller API against what a web page or another user could send (#23.1): a foreign
// Host (DNS rebinding) or Origin, a text/plain write, and the bearer token that the `nibble`
// CLI finds by itself.
#include <gtest/gtest.h>

#include <fstream>

#include "tests/controller/controller_process.h"

namespace nibble::controller {
namespace {

using testing::ControllerProcess;

TEST(ControllerApiSecurity, RefusesWritesAWebPageCouldSend) {
  ControllerProcess controller;
  ASSERT_TRUE(controller.wait_api()) << controller.log();
  auto api = controller.api();
  const std::string body = "apiVersion: nibble.dev/v1alpha1\nkind: ModelRecipe\n";

  auto text = api.Put("/api/v1/recipes", body, "text/plain");
  ASSERT_TRUE(text);
  EXPECT_EQ(text->status, 415);
  EXPECT_NE(text->body.find("UnsupportedMediaType"), std::string::npos) << text->body;

  auto origin =
      api.Put("/api/v1/recipes", {{"Origin", "http://evil.example"}}, body, "application/yaml");
  ASSERT_TRUE(origin);
  EXPECT_EQ(origin->status, 403);

  auto rebound =
      api.Put("/api/v1/recipes", {{"Host", "evil.example:8001"}}, body, "application/yaml");
  ASSERT_TRUE(rebound);
  EXPECT_EQ(rebound->status, 403);
  auto rebound_read = api.Get("/api/v1/recipes", {{"Host", "evil.example:8001"}});
  ASSERT_TRUE(rebound_read);
  EXPECT_EQ(rebound_read->status, 403);

  // The same write as the CLI sends it reaches validation (the recipe is incomplete: 422).
  auto yaml = api.Put("/api/v1/recipes?dryRun=true", body, "application/yaml");
  ASSERT_TRUE(yaml);
  EXPECT_EQ(yaml->status, 422) << yaml->body;
}

TEST(ControllerApiSecurity, TokenIsRequiredAndTheCliSendsIt) {
  nibble::testing::TempDir token_dir;
  const std::string token_file = (token_dir.path() / "api-token").string();
  ControllerProcess controller({"--api-token-file", token_file});
  ASSERT_TRUE(controller.wait_api()) << controller.log();
  std::ifstream in(token_file);
  std::string token;
  std::getline(in, token);
  ASSERT_EQ(token.size(), 64u);

  auto api = controller.api();
  auto missing = api.Get("/api/v1/recipes");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 401);
  EXPECT_NE(missing->body.find("Unauthorized"), std::string::npos) << missing->body;
  EXPECT_EQ(api.Get("/api/v1/recipes", {{"Authorization", "Bearer " + token}})->status, 200);
  EXPECT_EQ(api.Get("/healthz")->status, 200);

  // The CLI finds the token in its state directory, or in $NIBBLE_API_TOKEN.
  const std::string cli = std::string(NIBBLE_CLI) +
                          " --controller http://127.0.0.1:" + std::to_string(controller.api_port) +
                          " get recipes 2>&1";
  auto without =
      nibble::testing::run_command("env -u NIBBLE_API_TOKEN NIBBLE_STATE_DIR=/nonexistent " + cli);
  EXPECT_NE(without.exit_code, 0) << without.output;
  EXPECT_NE(without.output.find("401"), std::string::npos) << without.output;
  auto from_state = nibble::testing::run_command(
      "env -u NIBBLE_API_TOKEN NIBBLE_STATE_DIR=" + token_dir.path().string() + " " + cli);
  EXPECT_EQ(from_state.exit_code, 0) << from_state.output;
  auto from_env = nibble::testing::run_command(
      "env NIBBLE_STATE_DIR=/nonexistent NIBBLE_API_TOKEN=" + token + " " + cli);
  EXPECT_EQ(from_env.exit_code, 0) << from_env.output;
}

}  // namespace
}  // namespace nibble::controller
