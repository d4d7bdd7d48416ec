// The router as a real controller drives it (issue 45 items 1, 2 and the router's /v1/models):
// a request sent the moment an apply is answered is held, never a 404; a recipe whose replicas
// crash-loop or whose weights cannot be fetched fails its requests within seconds with the
// reason; /v1/models lists only models that can serve, with root and max_model_len; a request
// without "model" goes to the one model served. The engine is fake_engine.sh told to exit at
// once (exit code 3), so no model or engine build is needed.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include "tests/controller/controller_process.h"

namespace nibble::controller {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using testing::ControllerProcess;
using testing::eventually;
using ::testing::HasSubstr;
using Clock = std::chrono::steady_clock;

// The stand-in engine prints two lines ("... started", "fake engine exits") and exits 3.
struct ExitingEngine {
  ExitingEngine() { setenv("FAKE_ENGINE_TICKS", "0", 1); }
  ~ExitingEngine() { unsetenv("FAKE_ENGINE_TICKS"); }
};

std::string recipe_yaml(const std::string& name, const std::string& source,
                        const std::string& extra = "") {
  return "apiVersion: nibble.dev/v1alpha1\nkind: ModelRecipe\nmetadata:\n  name: " + name +
         "\nspec:\n  model:\n    source: " + source + "\n  replicas: {min: 0, max: 1}\n" + extra;
}

// A model directory the controller accepts (it starts engines for it; the engine is fake).
std::string model_dir(const ControllerProcess& c) {
  const auto model = c.state_dir.path() / "model";
  std::filesystem::create_directories(model);
  std::ofstream(model / "config.json") << "{}";
  return model.string();
}

httplib::Result apply_recipe(const ControllerProcess& c, const std::string& yaml) {
  return c.api().Put("/api/v1/recipes", yaml, "application/yaml");
}

httplib::Result chat(const ControllerProcess& c, const std::string& model_field) {
  return c.router().Post("/v1/chat/completions",
                         "{" + model_field + R"("messages":[{"role":"user","content":"hi"}]})",
                         "application/json");
}

std::string error_message(const httplib::Result& res) {
  const json body = json::parse(res->body, nullptr, false);
  return body.is_object() ? body["error"].value("message", "") : res->body;
}

TEST(RouterController, ARequestSentWhenApplyReturnsIsNeverA404) {
  ExitingEngine engine;
  ControllerProcess c;
  ASSERT_TRUE(c.wait_api()) << c.log();
  // Weights that cannot be fetched: once the controller has seen the recipe, its requests are
  // answered at once (503, saying why), so each round is quick; before, it is not found.
  for (int i = 0; i < 20; ++i) {
    const std::string name = "fresh-" + std::to_string(i);
    auto applied = apply_recipe(c, recipe_yaml(name, "/nonexistent/model-" + std::to_string(i)));
    ASSERT_TRUE(applied);
    ASSERT_EQ(applied->status, 200) << applied->body;
    const auto started = Clock::now();
    auto res = chat(c, R"("model":")" + name + R"(",)");
    ASSERT_TRUE(res) << "round " << i;
    EXPECT_NE(res->status, 404) << "round " << i << ": " << res->body;
    EXPECT_EQ(res->status, 503) << "round " << i << ": " << res->body;
    EXPECT_THAT(error_message(res), HasSubstr("/nonexistent/model-" + std::to_string(i)));
    EXPECT_LT(Clock::now() - started, 5s) << "round " << i;
  }
}

TEST(RouterController, AHeldRequestFailsWithinSecondsWhenTheReplicasCrashLoop) {
  ExitingEngine engine;
  ControllerProcess c;
  ASSERT_TRUE(c.wait_api()) << c.log();
  ASSERT_EQ(apply_recipe(c, recipe_yaml("crashy", model_dir(c)))->status, 200);
  ASSERT_TRUE(
      eventually([&] { return c.status("crashy").value("phase", "") == "ScaledToZero"; }, 10s))
      << c.status("crashy").dump(2);

  // Scaled to zero: the request wakes the recipe and is held while its engine starts, exits
  // and waits in back-off; it must not wait out the 60 s hold.
  auto started = Clock::now();
  auto res = chat(c, R"("model":"crashy",)");
  auto took = Clock::now() - started;
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 503) << res->body;
  EXPECT_FALSE(res->get_header_value("Retry-After").empty());
  EXPECT_LT(took, 10s);
  std::string message = error_message(res);
  EXPECT_THAT(message, HasSubstr("model 'crashy' cannot serve"));
  EXPECT_THAT(message, HasSubstr("CrashLoopBackOff"));
  EXPECT_THAT(message, HasSubstr("exited with code 3"));
  EXPECT_THAT(message, HasSubstr("fake engine exits"));  // its last log lines

  // Later requests learn the same within seconds, whether the engine is in back-off or being
  // started again.
  for (int i = 0; i < 3; ++i) {
    started = Clock::now();
    res = chat(c, R"("model":"crashy",)");
    took = Clock::now() - started;
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 503) << res->body;
    EXPECT_LT(took, 5s);
    EXPECT_THAT(error_message(res), HasSubstr("CrashLoopBackOff"));
  }
}

TEST(RouterController, WeightsThatCannotBeFetchedFailAtOnceSayingWhy) {
  ExitingEngine engine;
  ControllerProcess c;
  ASSERT_TRUE(c.wait_api()) << c.log();
  ASSERT_EQ(apply_recipe(c, recipe_yaml("missing", "/nonexistent/weights"))->status, 200);
  ASSERT_TRUE(eventually(
      [&] { return c.condition("missing", "Degraded") == "True/ModelUnavailable"; }, 10s));

  const auto started = Clock::now();
  auto res = chat(c, R"("model":"missing",)");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 503) << res->body;
  EXPECT_LT(Clock::now() - started, 1s);
  EXPECT_EQ(error_message(res),
            "model 'missing' cannot serve: its weights cannot be fetched: model directory "
            "/nonexistent/weights has no config.json (does it exist?)");
}

TEST(RouterController, ModelsListsWhatCanServeAndAMissingModelGoesToTheOneServed) {
  ExitingEngine engine;
  ControllerProcess c;
  ASSERT_TRUE(c.wait_api()) << c.log();
  ASSERT_EQ(
      apply_recipe(c, recipe_yaml("ok", model_dir(c), "  engine: {maxModelLen: 2048}\n"))->status,
      200);
  ASSERT_EQ(apply_recipe(c, recipe_yaml("broken", "/nonexistent/weights"))->status, 200);
  ASSERT_TRUE(eventually(
      [&] { return c.condition("broken", "Degraded") == "True/ModelUnavailable"; }, 10s));
  ASSERT_TRUE(eventually([&] { return c.status("ok").value("phase", "") == "ScaledToZero"; }, 10s));

  auto models = c.router().Get("/v1/models");
  ASSERT_TRUE(models);
  const json list = json::parse(models->body);
  ASSERT_EQ(list["data"].size(), 1u) << list.dump(2);  // not "broken": it cannot serve
  const json& ok = list["data"][0];
  EXPECT_EQ(ok["id"], "ok");
  EXPECT_EQ(ok["root"], "ok");  // as the engine says it: its served name
  EXPECT_EQ(ok["max_model_len"], 2048);
  EXPECT_EQ(ok["object"], "model");

  // No "model": the one model served takes it, as an engine would (here it wakes "ok", whose
  // engine crash-loops, so the answer names that).
  auto res = chat(c, "");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 503) << res->body;
  EXPECT_THAT(error_message(res), HasSubstr("model 'ok' cannot serve"));
}

}  // namespace
}  // namespace nibble::controller
