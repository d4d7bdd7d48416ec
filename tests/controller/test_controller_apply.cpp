// What apply refuses up front, against a real controller and the `nibble` CLI (issues 44.9 and
// 45.10): a servedName another recipe serves (409), recipes beyond --max-recipes (403), a
// relative model path sent to the API (422; `nibble apply` resolves it against its own
// directory); a -f file that reverts an applied change is warned about; a root controller whose
// --engine-user cannot run the engine refuses to start.
#include <gtest/gtest.h>
#include <pwd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <thread>

#include "tests/controller/controller_process.h"

namespace nibble::controller {
namespace {

using nlohmann::json;
using testing::ControllerProcess;
using testing::eventually;
using namespace std::chrono_literals;

std::string recipe(const std::string& name, const std::string& source,
                   const std::string& served = "") {
  return "apiVersion: nibble.dev/v1alpha1\nkind: ModelRecipe\nmetadata:\n  name: " + name +
         "\nspec:\n  model:\n    source: " + source + "\n" +
         (served.empty() ? "" : "    servedName: " + served + "\n") +
         "  replicas: {min: 0, max: 1}\n";
}

std::string write_file(const std::filesystem::path& path, const std::string& text) {
  std::ofstream(path) << text;
  return path.string();
}

TEST(ControllerApply, ServedNameOfAnotherRecipeIsRefusedWith409NamingIt) {
  ControllerProcess c;
  ASSERT_TRUE(c.wait_api()) << c.log();
  const auto dir = c.state_dir.path();
  auto first = c.nibble("apply -f " + write_file(dir / "a.yaml", recipe("qwen-a", "/m/a", "qwen")));
  ASSERT_EQ(first.exit_code, 0) << first.output;

  auto taken = c.nibble("apply -f " + write_file(dir / "b.yaml", recipe("qwen-b", "/m/b", "qwen")));
  EXPECT_EQ(taken.exit_code, 1) << taken.output;
  EXPECT_NE(taken.output.find("'qwen' is already served by recipe 'qwen-a'"), std::string::npos)
      << taken.output;
  EXPECT_NE(taken.output.find("(HTTP 409)"), std::string::npos) << taken.output;

  // The API's error body: status, code and the field in the details.
  auto res = c.api().Put("/api/v1/recipes", recipe("c", "/m/c", "qwen"), "application/yaml");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 409) << res->body;
  const json body = json::parse(res->body);
  EXPECT_EQ(body["error"]["code"], "Conflict");
  EXPECT_EQ(body["error"]["details"][0]["field"], "spec.model.servedName");
  EXPECT_EQ(body["error"]["details"][0]["name"], "c");
  // The default served name (metadata.name) counts too; a recipe's name is not its served
  // name when it sets one; nothing refused was stored.
  res = c.api().Put("/api/v1/recipes", recipe("d", "/m/d"), "application/yaml");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200) << res->body;
  res = c.api().Put("/api/v1/recipes", recipe("e", "/m/e", "d"), "application/yaml");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 409) << res->body;
  EXPECT_NE(res->body.find("'d' is already served by recipe 'd'"), std::string::npos) << res->body;
  res = c.api().Put("/api/v1/recipes", recipe("f", "/m/f", "qwen-a"), "application/yaml");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200) << res->body;  // qwen-a serves "qwen", not "qwen-a"
  EXPECT_EQ(c.api().Get("/api/v1/recipes/qwen-b")->status, 404);
  EXPECT_EQ(c.api().Get("/api/v1/recipes/e")->status, 404);
  // Re-applying the holder itself is not a conflict.
  EXPECT_EQ(c.nibble("apply -f " + (dir / "a.yaml").string()).exit_code, 0);
}

TEST(ControllerApply, RecipesBeyondMaxRecipesAreRefusedUpdatesAreNot) {
  ControllerProcess c({"--max-recipes", "2"});
  ASSERT_TRUE(c.wait_api()) << c.log();
  const auto dir = c.state_dir.path();
  ASSERT_EQ(c.nibble("apply -f " + write_file(dir / "a.yaml", recipe("a", "/m/a"))).exit_code, 0);
  ASSERT_EQ(c.nibble("apply -f " + write_file(dir / "b.yaml", recipe("b", "/m/b"))).exit_code, 0);
  auto third = c.nibble("apply -f " + write_file(dir / "c.yaml", recipe("c", "/m/c")));
  EXPECT_EQ(third.exit_code, 1) << third.output;
  EXPECT_NE(third.output.find("beyond its limit of 2 (nibble-controller --max-recipes)"),
            std::string::npos)
      << third.output;
  EXPECT_NE(third.output.find("(HTTP 403)"), std::string::npos) << third.output;
  EXPECT_EQ(c.api().Get("/api/v1/recipes/c")->status, 404);
  // An update of a stored recipe at the limit goes through; after a delete there is room.
  auto update = c.nibble("apply -f " + write_file(dir / "a.yaml", recipe("a", "/m/a2")));
  EXPECT_EQ(update.exit_code, 0) << update.output;
  EXPECT_NE(update.output.find("modelrecipe/a configured"), std::string::npos) << update.output;
  ASSERT_EQ(c.nibble("delete recipe b").exit_code, 0);
  EXPECT_EQ(c.nibble("apply -f " + (dir / "c.yaml").string()).exit_code, 0);
}

TEST(ControllerApply, RelativeModelPathIsTheAppliersDirectory) {
  ControllerProcess c;
  ASSERT_TRUE(c.wait_api()) << c.log();
  const auto work = c.state_dir.path() / "work";
  std::filesystem::create_directories(work);
  write_file(work / "rel.yaml", recipe("rel", "models/m"));
  // The CLI, run from `work`, sends the path made absolute against its own directory.
  auto applied = nibble::testing::run_command(
      "cd " + work.string() + " && " + NIBBLE_CLI +
      " --controller http://127.0.0.1:" + std::to_string(c.api_port) + " apply -f rel.yaml 2>&1");
  ASSERT_EQ(applied.exit_code, 0) << applied.output;
  auto res = c.api().Get("/api/v1/recipes/rel");
  ASSERT_TRUE(res);
  const std::string spec = json::parse(res->body)["spec"];
  EXPECT_NE(spec.find("source: " + (work / "models/m").string()), std::string::npos) << spec;
  // Sent to the API as it is, it is refused with the path the controller would have used.
  res = c.api().Put("/api/v1/recipes", recipe("rel2", "models/m"), "application/yaml");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 422) << res->body;
  EXPECT_NE(res->body.find("'models/m' is a relative path"), std::string::npos) << res->body;
  EXPECT_NE(res->body.find("give the absolute path"), std::string::npos) << res->body;
}

TEST(ControllerApply, RestartWithAFileThatRevertsAnAppliedChangeWarns) {
  nibble::testing::TempDir files;
  const std::string file = write_file(files.path() / "r.yaml", recipe("r", "/m/one"));
  ControllerProcess c({"-f", file});
  ASSERT_TRUE(c.wait_api()) << c.log();
  EXPECT_EQ(c.stop(), 0);
  // A restart with the file unchanged and nothing applied since: no warning.
  c.start();
  ASSERT_TRUE(c.wait_api()) << c.log();
  EXPECT_EQ(c.log().find("replaces that change"), std::string::npos) << c.log();
  std::this_thread::sleep_for(1100ms);  // a later modification time than the file's
  const std::string edit = write_file(files.path() / "edit.yaml", recipe("r", "/m/two"));
  ASSERT_EQ(c.nibble("apply -f " + edit).exit_code, 0);
  EXPECT_EQ(c.stop(), 0);
  c.start();
  ASSERT_TRUE(c.wait_api()) << c.log();
  EXPECT_NE(c.log().find("-f " + file + ": modelrecipe r was changed (nibble apply) after " + file +
                         " was last modified; the file's spec replaces that change"),
            std::string::npos)
      << c.log();
  auto res = c.api().Get("/api/v1/recipes/r");
  ASSERT_TRUE(res);
  EXPECT_NE(json::parse(res->body)["spec"].get<std::string>().find("/m/one"), std::string::npos);
}

TEST(ControllerApply, RootControllerRefusesAnEngineTheEngineUserCannotRun) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root: only a root controller drops to --engine-user";
  nibble::testing::TempDir home;  // as a build under a 0700 home directory
  chmod(home.path().c_str(), 0700);
  const auto engine = home.path() / "nibble-engine";
  std::filesystem::copy_file("/bin/true", engine);
  chmod(engine.c_str(), 0755);
  ControllerProcess c({"--engine-user", "nobody", "--engine", engine.string()});
  ASSERT_TRUE(
      eventually([&] { return c.log().find("cannot run the engine") != std::string::npos; }, 10s))
      << c.log();
  const int status = c.stop();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 2) << status << "\n" << c.log();
  EXPECT_NE(c.log().find("--engine-user nobody (uid " + std::to_string(getpwnam("nobody")->pw_uid) +
                         ") cannot run the engine " + engine.string() +
                         ": no search (x) permission on the directory " + home.path().string() +
                         " (mode 0700"),
            std::string::npos)
      << c.log();
}

}  // namespace
}  // namespace nibble::controller
