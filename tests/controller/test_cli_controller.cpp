// The `nibble` commands that go through the controller's API (issue 45 item 5): scale,
// get -o json|yaml|name, get -w, logs -f and logs --previous. The engine is a stand-in
// (fake_engine.sh) that writes numbered lines and exits, so no model or engine build is needed.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <future>
#include <map>
#include <regex>

#include "tests/controller/controller_process.h"

namespace nibble::controller {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using testing::ControllerProcess;
using testing::eventually;
using ::testing::HasSubstr;

// A recipe whose replicas follow spec.replicas.desired (no autoscaler), 0 to 2 of them.
std::string write_recipe(const ControllerProcess& c, const std::string& name,
                         const std::string& extra = "  autoscaling: {enabled: false}\n") {
  const auto model = c.state_dir.path() / "model";
  std::filesystem::create_directories(model);
  std::ofstream(model / "config.json") << "{}";  // enough for the controller to start engines
  const auto file = c.state_dir.path() / (name + ".yaml");
  std::ofstream(file) << "apiVersion: nibble.dev/v1alpha1\nkind: ModelRecipe\nmetadata:\n  name: "
                      << name << "\nspec:\n  model:\n    source: " << model.string()
                      << "\n  replicas: {min: 0, max: 2}\n"
                      << extra;
  return file.string();
}

int desired_replicas(const ControllerProcess& c, const std::string& name) {
  const json st = c.status(name);
  return st.is_object() ? st.value("desiredReplicas", -1) : -1;
}

TEST(CliController, ScaleSetsTheDesiredCountWithinTheRecipesBounds) {
  ControllerProcess c;
  ASSERT_TRUE(c.wait_api()) << c.log();
  ASSERT_EQ(c.nibble("apply -f " + write_recipe(c, "small")).exit_code, 0);
  ASSERT_TRUE(eventually([&] { return desired_replicas(c, "small") == 0; }, 10s));

  auto r = c.nibble("scale recipe/small --replicas 2");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output, "modelrecipe/small scaled\n");
  EXPECT_TRUE(eventually([&] { return desired_replicas(c, "small") == 2; }, 10s))
      << c.status("small").dump(2);
  auto spec = c.api().Get("/api/v1/recipes/small");
  ASSERT_TRUE(spec);
  EXPECT_THAT(json::parse(spec->body).value("spec", ""), HasSubstr("desired: 2"));
  EXPECT_EQ(c.nibble("scale recipe small --replicas=2").output, "modelrecipe/small unchanged\n");
  EXPECT_EQ(c.nibble("scale recipe/small --replicas 0").exit_code, 0);
  EXPECT_TRUE(eventually([&] { return desired_replicas(c, "small") == 0; }, 10s));

  r = c.nibble("scale recipe/small --replicas 3");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.output, HasSubstr("replicas 3 is outside spec.replicas [min 0, max 2]"));
  r = c.nibble("scale recipe/missing --replicas 1");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.output, HasSubstr("not found"));
  EXPECT_EQ(c.nibble("scale recipe/small").exit_code, 2);
  EXPECT_EQ(c.nibble("scale recipe/small --replicas -1").exit_code, 2);

  // With the built-in autoscaler on, the count is stored and the CLI says who decides.
  ASSERT_EQ(c.nibble("apply -f " + write_recipe(c, "auto", "")).exit_code, 0);
  r = c.nibble("scale recipe/auto --replicas 1");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("autoscaler starts from 1 replicas and follows load"));
}

TEST(CliController, GetPrintsJsonYamlAndNames) {
  ControllerProcess c;
  ASSERT_TRUE(c.wait_api()) << c.log();
  ASSERT_EQ(c.nibble("apply -f " + write_recipe(c, "small")).exit_code, 0);
  ASSERT_TRUE(eventually([&] { return desired_replicas(c, "small") == 0; }, 10s));

  const auto as_json = c.nibble("get recipes -o json");
  ASSERT_EQ(as_json.exit_code, 0) << as_json.output;
  const json items = json::parse(as_json.output);
  ASSERT_EQ(items.size(), 1u);
  EXPECT_EQ(items[0]["name"], "small");
  EXPECT_EQ(items[0]["desiredReplicas"], 0);

  const auto as_yaml = c.nibble("get recipes small -o yaml");
  ASSERT_EQ(as_yaml.exit_code, 0) << as_yaml.output;
  EXPECT_EQ(as_yaml.output.rfind("- ", 0), 0u) << as_yaml.output;  // a list of one status
  EXPECT_THAT(as_yaml.output, HasSubstr("\n  name: small\n"));
  EXPECT_THAT(as_yaml.output, HasSubstr("  desiredReplicas: 0\n"));

  EXPECT_EQ(c.nibble("get recipes -o name").output, "modelrecipe/small\n");
  EXPECT_EQ(c.nibble("get recipes -o xml").exit_code, 2);
}

TEST(CliController, GetWatchPrintsARowForEachChange) {
  ControllerProcess c;
  ASSERT_TRUE(c.wait_api()) << c.log();
  ASSERT_EQ(c.nibble("apply -f " + write_recipe(c, "small")).exit_code, 0);
  ASSERT_TRUE(eventually([&] { return desired_replicas(c, "small") == 0; }, 10s));
  auto watch =
      std::async(std::launch::async, [&] { return c.nibble("get recipes -w & sleep 4; kill $!"); });
  std::this_thread::sleep_for(1500ms);
  ASSERT_EQ(c.nibble("scale recipe/small --replicas 1").exit_code, 0);
  const std::string out = watch.get().output;
  // The header once, the first row (ready/desired 0/0), then rows as the status changes.
  EXPECT_EQ(out.find("NAME"), 0u) << out;
  EXPECT_EQ(out.find("NAME", 1), std::string::npos) << out;
  EXPECT_THAT(out, HasSubstr("0/0"));
  EXPECT_THAT(out, HasSubstr("0/1"));
  EXPECT_GE(std::count(out.begin(), out.end(), '\n'), 3) << out;
}

TEST(CliController, LogsFollowAndPrevious) {
  ControllerProcess c;
  ASSERT_TRUE(c.wait_api()) << c.log();
  ASSERT_EQ(c.nibble("apply -f " + write_recipe(c, "small")).exit_code, 0);
  EXPECT_THAT(c.nibble("logs recipe/small --previous").output,
              HasSubstr("has no log of a previous replica"));
  ASSERT_EQ(c.nibble("scale recipe/small --replicas 1").exit_code, 0);
  ASSERT_TRUE(eventually([&] { return !c.engine_pids("small").empty(); }, 10s));

  // -f: the ticks as the engine writes them, each once and in order, prefixed with its id.
  const auto followed = c.nibble("logs recipe/small -f --tail 1 & sleep 2.5; kill $!");
  const std::regex tick(R"(\[(small-[a-z0-9]{5})\] tick (\d+)\n)");
  std::map<std::string, std::vector<int>> ticks;  // by engine: a restarted one counts anew
  std::size_t lines = 0;
  for (std::sregex_iterator it(followed.output.begin(), followed.output.end(), tick), end;
       it != end; ++it, ++lines)
    ticks[(*it)[1]].push_back(std::stoi((*it)[2]));
  EXPECT_GE(lines, 5u) << followed.output;
  for (const auto& [id, seen] : ticks)
    for (std::size_t i = 1; i < seen.size(); ++i)
      EXPECT_EQ(seen[i], seen[i - 1] + 1) << id << "\n" << followed.output;

  // Once that engine has exited, --previous shows its last lines.
  ASSERT_TRUE(eventually(
      [&] {
        return c.nibble("logs recipe/small --previous --tail 2").output.find("fake engine exits") !=
               std::string::npos;
      },
      15s))
      << c.log();
  const auto previous = c.nibble("logs recipe/small -p --tail 2");
  EXPECT_EQ(previous.exit_code, 0);
  const std::regex last_two(
      R"(\[small-[a-z0-9]{5}\] tick 15\n\[small-[a-z0-9]{5}\] fake engine exits\n)");
  EXPECT_TRUE(std::regex_match(previous.output, last_two)) << previous.output;
  EXPECT_EQ(c.nibble("logs recipe/small -f -p").exit_code, 2);
}

}  // namespace
}  // namespace nibble::controller
