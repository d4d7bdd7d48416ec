// nibble-controller end to end on the CPU backend with a tiny model: the issue's whole flow.
// apply → ready → chat through the router (official openai npm client) → nibble-bench drives a
// scale-up → scale-down after the delay → kill -9 of an engine → restart → rolling update with
// traffic and no failed request → delete → no engine left. Invalid recipes of many kinds next
// to a running one; a controller killed and restarted; scale from zero and back.
#include <gtest/gtest.h>
#include <pwd.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <mutex>
#include <set>
#include <thread>

#include "controller/local/engine_process.h"
#include "tests/controller/controller_process.h"
#include "tests/server/serve_process.h"

namespace nibble::controller {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using testing::ControllerProcess;
using testing::eventually;
using testing::process_alive;

std::string recipe(const std::string& name, const std::string& model, const std::string& served,
                   const std::string& spec_extra) {
  return "apiVersion: nibble.dev/v1alpha1\nkind: ModelRecipe\nmetadata:\n  name: " + name +
         "\nspec:\n  model:\n    source: " + model + "\n    servedName: " + served +
         "\n  engine:\n    maxModelLen: 512\n" + spec_extra;
}

std::string write_file(const std::filesystem::path& path, const std::string& text) {
  std::ofstream(path) << text;
  return path.string();
}

std::string phase(const json& st) {
  return st.is_object() ? st.value("phase", "") : "";
}

// One chat completion through the router; true on HTTP 200 with an answer.
// "" when a chat request through the router succeeds, else what came back.
std::string chat_error(const ControllerProcess& c, const std::string& model, int max_tokens = 4) {
  const json body = {{"model", model},
                     {"messages", {{{"role", "user"}, {"content", "hello"}}}},
                     {"max_tokens", max_tokens}};
  auto res = c.router().Post("/v1/chat/completions", body.dump(), "application/json");
  if (!res) return "no answer: " + httplib::to_string(res.error());
  if (res->status == 200 && res->body.find("\"choices\"") != std::string::npos) return "";
  return std::to_string(res->status) + " " + res->body;
}

bool chat_ok(const ControllerProcess& c, const std::string& model, int max_tokens = 4) {
  return chat_error(c, model, max_tokens).empty();
}

// Issue 23 item 3: each engine has its own key, kept in a 0600 file of the state directory and
// never shown in status; the engine's port refuses requests without it while the router,
// which sends it upstream, serves them. /health and /metrics stay open (the controller scrapes
// /metrics for the autoscaler).
void expect_engines_keep_their_keys(const ControllerProcess& c, const std::string& recipe) {
  const json st = c.status(recipe);
  const json engines = st.value("engines", json::array());
  ASSERT_FALSE(engines.empty()) << st.dump(2);
  for (const json& e : engines) {
    const std::string id = e.value("id", "");
    const std::filesystem::path key_file = c.state_dir.path() / "keys" / (id + ".key");
    struct stat info {};
    ASSERT_EQ(stat(key_file.c_str(), &info), 0) << key_file;
    EXPECT_EQ(info.st_mode & 0777, 0600u) << key_file;
    std::ifstream in(key_file);
    std::string key;
    std::getline(in, key);
    EXPECT_EQ(key.size(), 64u);
    EXPECT_EQ(st.dump().find(key), std::string::npos) << "the status shows an engine key";

    httplib::Client engine("127.0.0.1", e.value("port", 0));
    engine.set_read_timeout(30, 0);
    const json body = {{"model", recipe},
                       {"messages", {{{"role", "user"}, {"content", "hello"}}}},
                       {"max_tokens", 2}};
    auto direct = engine.Post("/v1/chat/completions", body.dump(), "application/json");
    ASSERT_TRUE(direct);
    EXPECT_EQ(direct->status, 401) << direct->body;
    auto keyed = engine.Post("/v1/chat/completions", {{"Authorization", "Bearer " + key}},
                             body.dump(), "application/json");
    ASSERT_TRUE(keyed);
    EXPECT_EQ(keyed->status, 200) << keyed->body;
    EXPECT_EQ(engine.Get("/health")->status, 200);
    EXPECT_EQ(engine.Get("/metrics")->status, 200);
  }
  EXPECT_TRUE(chat_ok(c, recipe)) << "the router sends the engine's key";
}

TEST(ControllerE2E, ApplyServeScaleCrashRollDelete) {
  REQUIRE_TINY_MODEL(model);
  ControllerProcess c;
  ASSERT_TRUE(c.wait_api()) << c.log();
  const std::string autoscaling =
      "  replicas: {min: 1, max: 2}\n"
      "  autoscaling: {metric: inflight, targetPerReplica: 2, scaleDownDelaySeconds: 4}\n";
  const std::string file =
      write_file(c.state_dir.path() / "tiny.yaml",
                 recipe("tiny", model, "tiny-chat", "    maxNumSeqs: 16\n" + autoscaling));

  // apply → ready
  auto applied = c.nibble("apply -f " + file);
  EXPECT_EQ(applied.exit_code, 0) << applied.output;
  EXPECT_NE(applied.output.find("modelrecipe/tiny created"), std::string::npos) << applied.output;
  ASSERT_TRUE(eventually([&] { return phase(c.status("tiny")) == "Ready"; }, 90s))
      << c.status("tiny").dump(2) << c.log();
  auto got = c.nibble("get recipes");
  EXPECT_NE(got.output.find("tiny   tiny-chat   Ready   1/1"), std::string::npos) << got.output;
  EXPECT_NE(c.nibble("apply -f " + file).output.find("modelrecipe/tiny unchanged"),
            std::string::npos);
  // The whole log has the engine's serving line; --tail 3 only its last lines (the engine may
  // log more after serving: the access log, structured outputs being prepared).
  const auto logs = c.nibble("logs recipe/tiny --tail 1000");
  EXPECT_EQ(logs.exit_code, 0) << logs.output;
  EXPECT_NE(logs.output.find("] serving 'tiny-chat' on http://127.0.0.1:"), std::string::npos)
      << logs.output;
  const auto tail = c.nibble("logs recipe/tiny --tail 3");
  EXPECT_EQ(tail.exit_code, 0) << tail.output;
  EXPECT_EQ(std::count(tail.output.begin(), tail.output.end(), '\n'), 3) << tail.output;
  const auto later = c.nibble("logs recipe/tiny --tail 1000");
  EXPECT_NE(later.output.find(tail.output), std::string::npos)
      << "--tail 3 is not the end of the log:\n"
      << tail.output;
  EXPECT_EQ(c.nibble("logs recipe/missing").exit_code, 1);

  // chat through the router with the official client
  {
    NIBBLE_REQUIRE_TOOL(node, "node");
    auto r = nibble::testing::run_command(node + " " + std::string(NIBBLE_SOURCE_DIR) +
                                          "/tests/controller/router_client_check.mjs " +
                                          c.base_url() + "/v1 tiny-chat 2>&1");
    EXPECT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find(" passed, 0 failed"), std::string::npos) << r.output;
  }

  // load → scale up to max; load stops → scale down only after the delay
  std::atomic<bool> watching{true};
  std::atomic<int> max_desired{0}, max_ready{0};
  std::atomic<std::int64_t> scaled_down_at_ms{0}, lower_load_seen_ms{0};
  const auto t0 = std::chrono::steady_clock::now();
  auto ms_since_t0 = [&] {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                                 t0)
        .count();
  };
  std::thread watcher([&] {
    while (watching) {
      const json st = c.status("tiny");
      if (st.is_object()) {
        max_desired = std::max(max_desired.load(), st.value("desiredReplicas", 0));
        max_ready = std::max(max_ready.load(), st.value("readyReplicas", 0));
        // The autoscaler reports "would scale down ..., waiting" while the lower load lasts.
        if (max_desired == 2 && lower_load_seen_ms == 0 &&
            st.value("autoscaler", "").find("would scale down") != std::string::npos)
          lower_load_seen_ms = ms_since_t0();
        if (max_ready == 2 && st.value("desiredReplicas", 0) == 1 && scaled_down_at_ms == 0)
          scaled_down_at_ms = ms_since_t0();
      }
      std::this_thread::sleep_for(100ms);
    }
  });
  const auto bench = nibble::testing::run_command(
      std::string(NIBBLE_BENCH) + " --base-url " + c.base_url() +
      " --model tiny-chat --input-len 32 --output-len 48 --num-prompts 120 --max-concurrency 16"
      " --no-progress 2>&1");
  EXPECT_EQ(bench.exit_code, 0) << bench.output;
  EXPECT_NE(bench.output.find("Successful requests:"), std::string::npos) << bench.output;
  const bool scaled_down = eventually([&] { return scaled_down_at_ms != 0; }, 40s);
  watching = false;
  watcher.join();
  EXPECT_EQ(max_desired, 2) << c.log();
  EXPECT_EQ(max_ready, 2) << c.log();
  ASSERT_TRUE(scaled_down) << c.status("tiny").dump(2);
  // scaleDownDelaySeconds 4 from when the load fell (seen up to a pass late): at least 3 s.
  EXPECT_NE(lower_load_seen_ms, 0) << "the wait for the delay was never reported";
  EXPECT_GE(scaled_down_at_ms - lower_load_seen_ms, 3000) << "scaled down too early";
  EXPECT_TRUE(eventually([&] { return c.engine_pids("tiny").size() == 1; }, 30s));
  EXPECT_GE(
      c.metric(R"(nibble_controller_autoscaler_decisions_total{recipe="tiny",direction="up"})"), 1);
  EXPECT_GE(
      c.metric(R"(nibble_controller_autoscaler_decisions_total{recipe="tiny",direction="down"})"),
      1);
  EXPECT_GE(
      c.metric(R"(nibble_controller_router_requests_total{model_name="tiny-chat",code="200"})"),
      120);
  EXPECT_NE(c.log().find("scale down to 1 after 4 s"), std::string::npos);
  {
    // The controller's whole page (controller and router families) passes Prometheus' checker.
    NIBBLE_REQUIRE_TOOL(promtool, "promtool");
    auto page = c.api().Get("/metrics");
    ASSERT_TRUE(page);
    EXPECT_NE(page->body.find("nibble_controller_reconcile_pass_duration_seconds_bucket"),
              std::string::npos);
    const std::string path = (c.state_dir.path() / "metrics.txt").string();
    std::ofstream(path) << page->body;
    const auto check =
        nibble::testing::run_command(promtool + " check metrics < " + path + " 2>&1");
    EXPECT_EQ(check.exit_code, 0) << check.output;
  }

  // kill -9 of an engine → restarted, Ready again
  const std::vector<int> before_crash = c.engine_pids("tiny");
  ASSERT_EQ(before_crash.size(), 1u);
  ASSERT_EQ(kill(before_crash[0], SIGKILL), 0);
  ASSERT_TRUE(eventually(
      [&] {
        const auto pids = c.engine_pids("tiny");
        return phase(c.status("tiny")) == "Ready" && pids.size() == 1 && pids[0] != before_crash[0];
      },
      60s))
      << c.status("tiny").dump(2);
  EXPECT_FALSE(process_alive(before_crash[0]));
  EXPECT_GE(c.metric(R"(nibble_controller_replica_restarts_total{recipe="tiny"})"), 1);
  EXPECT_NE(c.status("tiny").value("lastError", "").find("killed by signal 9"), std::string::npos)
      << c.status("tiny").dump(2);

  // spec change → rolling update; requests keep succeeding throughout
  const std::vector<int> before_roll = c.engine_pids("tiny");
  std::atomic<bool> sending{true};
  std::atomic<int> sent{0}, failed{0};
  std::string first_failure;  // written by the traffic thread, read after it is joined
  std::thread traffic([&] {
    while (sending) {
      ++sent;
      const std::string error = chat_error(c, "tiny-chat");
      if (!error.empty() && failed++ == 0) first_failure = error;
    }
  });
  write_file(file, recipe("tiny", model, "tiny-chat", "    maxNumSeqs: 8\n" + autoscaling));
  applied = c.nibble("apply -f " + file);
  EXPECT_NE(applied.output.find("modelrecipe/tiny configured"), std::string::npos)
      << applied.output;
  const bool rolled = eventually(
      [&] {
        const json st = c.status("tiny");
        const auto pids = c.engine_pids("tiny");
        return phase(st) == "Ready" && st.value("observedGeneration", 0) == 2 && pids.size() == 1 &&
               pids[0] != before_roll[0];
      },
      90s);
  std::this_thread::sleep_for(1s);  // traffic after the old engine is gone
  sending = false;
  traffic.join();
  ASSERT_TRUE(rolled) << c.status("tiny").dump(2);
  EXPECT_GT(sent, 5);
  EXPECT_EQ(failed, 0) << "requests failed during the rolling update; the first: " << first_failure
                       << "\n"
                       << c.log();
  EXPECT_TRUE(eventually([&] { return !process_alive(before_roll[0]); }, 20s));

  // delete → no engine left
  const std::vector<int> last = c.recorded_engine_pids();
  auto deleted = c.nibble("delete recipe tiny");
  EXPECT_NE(deleted.output.find("modelrecipe/tiny deleted"), std::string::npos) << deleted.output;
  EXPECT_TRUE(eventually([&] { return c.status("tiny").is_null(); }, 30s));
  for (int pid : last) EXPECT_FALSE(process_alive(pid)) << pid;
  EXPECT_TRUE(c.recorded_engine_pids().empty());
  EXPECT_NE(c.nibble("get recipes").output.find("No recipes found."), std::string::npos);
  EXPECT_EQ(c.nibble("delete recipe tiny").exit_code, 1);
  EXPECT_EQ(c.stop(), 0);
}

TEST(ControllerE2E, InvalidRecipesGetConditionsAndLeaveRunningOnesAlone) {
  REQUIRE_TINY_MODEL(model);
  ControllerProcess c;
  ASSERT_TRUE(c.wait_api()) << c.log();
  const std::filesystem::path recipes = c.state_dir.path() / "recipes";
  const std::string good = recipe("good", model, "tiny-chat", "");
  auto applied = c.nibble("apply -f " + write_file(c.state_dir.path() / "good.yaml", good));
  ASSERT_EQ(applied.exit_code, 0) << applied.output;
  ASSERT_TRUE(eventually([&] { return phase(c.status("good")) == "Ready"; }, 90s)) << c.log();
  const std::vector<int> pids = c.engine_pids("good");

  // Rejected by the API: nothing stored.
  auto rejected = c.nibble(
      "apply -f " + write_file(c.state_dir.path() / "bad.yaml",
                               recipe("bad", model, "bad", "    maxNumSeqs: 0\n  replicaz: 2\n")));
  EXPECT_EQ(rejected.exit_code, 1);
  EXPECT_NE(rejected.output.find("spec.engine.maxNumSeqs"), std::string::npos) << rejected.output;
  EXPECT_NE(rejected.output.find("spec.replicaz"), std::string::npos) << rejected.output;
  EXPECT_TRUE(c.status("bad").is_null());
  // A recipe may not hand its engine a flag the controller sets itself.
  auto hijack = c.nibble("apply -f " + write_file(c.state_dir.path() / "hijack.yaml",
                                                  recipe("hijack", model, "hijack",
                                                         "    extraArgs: [--host, 127.0.0.2]\n")));
  EXPECT_EQ(hijack.exit_code, 1);
  EXPECT_NE(hijack.output.find("spec.engine.extraArgs[0]: '--host' is set by the controller"),
            std::string::npos)
      << hijack.output;
  EXPECT_TRUE(c.status("hijack").is_null());
  // One name twice in one apply: the whole file is refused, naming the name.
  auto twice =
      c.nibble("apply -f " + write_file(c.state_dir.path() / "twice.yaml",
                                        recipe("solo", model, "solo", "") + "---\n" +
                                            recipe("twice", model, "twice-a", "") + "---\n" +
                                            recipe("twice", model, "twice-b", "")));
  EXPECT_EQ(twice.exit_code, 1);
  EXPECT_NE(twice.output.find("metadata.name: 'twice' is also the name of document 2"),
            std::string::npos)
      << twice.output;
  EXPECT_TRUE(c.status("solo").is_null());
  EXPECT_TRUE(c.status("twice").is_null());

  // Written into the state directory by hand: each gets a condition that says why.
  write_file(recipes / "typo.yaml", recipe("typo", model, "typo", "  replicas: {min: 1, mx: 2}\n"));
  write_file(recipes / "garbage.yaml", "spec: [unclosed\n");
  write_file(recipes / "nomodel.yaml", recipe("nomodel", "/nonexistent/model", "nomodel", ""));
  write_file(recipes / "dup.yaml", recipe("dup", model, "tiny-chat", ""));
  write_file(recipes / "bounds.yaml",
             recipe("bounds", model, "bounds", "  replicas: {min: 3, max: 1}\n"));
  // Valid, but its engine exits at once (a model directory whose config.json is not a
  // model's): restarted with back-off, shown as CrashLoopBackOff.
  const std::filesystem::path broken_model = c.state_dir.path() / "broken-model";
  std::filesystem::create_directories(broken_model);
  write_file(broken_model / "config.json", "{}");
  write_file(recipes / "crashy.yaml", recipe("crashy", broken_model.string(), "crashy", ""));
  struct Expect {
    std::string name, phase, degraded, message;
  };
  const std::vector<Expect> expects = {
      {"typo", "Invalid", "True/InvalidSpec", "spec.replicas.mx"},
      {"garbage", "Invalid", "True/InvalidSpec", ""},
      {"nomodel", "Degraded", "True/ModelUnavailable", "/nonexistent/model"},
      {"dup", "Invalid", "True/InvalidSpec", "already served by recipe 'good'"},
      {"bounds", "Invalid", "True/InvalidSpec", "spec.replicas"},
      {"crashy", "Degraded", "True/CrashLoopBackOff", "exited with code 1 (log: "},
  };
  for (const Expect& e : expects) {
    EXPECT_TRUE(eventually([&] { return phase(c.status(e.name)) == e.phase; }, 20s))
        << e.name << ": " << c.status(e.name).dump(2);
    EXPECT_EQ(c.condition(e.name, "Degraded"), e.degraded) << e.name;
    EXPECT_EQ(c.condition(e.name, "Ready").rfind("False/", 0), 0u) << e.name;
    EXPECT_NE(c.status(e.name).value("lastError", "").find(e.message), std::string::npos)
        << e.name << ": " << c.status(e.name).dump(2);
    if (e.name != "crashy") {
      EXPECT_TRUE(c.engine_pids(e.name).empty()) << e.name;
    }
  }
  // The back-off grows (1 s, 2 s, 4 s, ...): from the first restart to the third takes
  // 2 + 4 s, where a fixed delay would take 2 s.
  auto restarts = [&] {
    return c.metric(R"(nibble_controller_replica_restarts_total{recipe="crashy"})");
  };
  ASSERT_TRUE(eventually([&] { return restarts() >= 1; }, 20s));
  const auto first_restart = std::chrono::steady_clock::now();
  ASSERT_TRUE(eventually([&] { return restarts() >= 3; }, 30s)) << restarts();
  EXPECT_GE(std::chrono::steady_clock::now() - first_restart, 4500ms);
  auto described = c.nibble("describe recipe typo");
  EXPECT_NE(described.output.find("InvalidSpec"), std::string::npos) << described.output;

  // An invalid edit of the running recipe: reported, the last valid spec keeps serving.
  write_file(recipes / "good.yaml", good + "  replicas: {min: 2, max: 1}\n");
  EXPECT_TRUE(
      eventually([&] { return c.condition("good", "Degraded") == "True/InvalidSpec"; }, 20s))
      << c.status("good").dump(2);
  EXPECT_EQ(c.engine_pids("good"), pids);
  EXPECT_TRUE(chat_ok(c, "tiny-chat"));
  // Fixed again: Ready, the same engine (the spec it runs did not change).
  write_file(recipes / "good.yaml", good);
  EXPECT_TRUE(eventually([&] { return phase(c.status("good")) == "Ready"; }, 20s))
      << c.status("good").dump(2) << c.log();
  EXPECT_EQ(c.condition("good", "Degraded"), "False/AsExpected");
  EXPECT_EQ(c.engine_pids("good"), pids);

  // The router lists only what can serve: not the crash-looping recipe, not the one whose weights
  // cannot be fetched (issue 45), and not the invalid ones it never learned.
  auto models = c.router().Get("/v1/models");
  ASSERT_TRUE(models);
  const json list = json::parse(models->body);
  std::set<std::string> ids;
  for (const auto& m : list["data"]) ids.insert(m.value("id", ""));
  EXPECT_EQ(ids, (std::set<std::string>{"tiny-chat"}));
  EXPECT_EQ(c.stop(), 0);
  for (int pid : pids) EXPECT_FALSE(process_alive(pid));
}

TEST(ControllerE2E, RestartedControllerAdoptsEnginesWithoutDuplicates) {
  REQUIRE_TINY_MODEL(model);
  ControllerProcess c;
  ASSERT_TRUE(c.wait_api()) << c.log();
  auto applied =
      c.nibble("apply -f " + write_file(c.state_dir.path() / "two.yaml",
                                        recipe("one", model, "one", "") + "---\n" +
                                            recipe("two", model, "two",
                                                   "  replicas: {min: 2, max: 2}\n"
                                                   "  autoscaling: {metric: running}\n")));
  ASSERT_EQ(applied.exit_code, 0) << applied.output;
  ASSERT_TRUE(eventually(
      [&] { return phase(c.status("one")) == "Ready" && phase(c.status("two")) == "Ready"; }, 90s))
      << c.log();
  std::vector<int> before = c.recorded_engine_pids();
  std::sort(before.begin(), before.end());
  ASSERT_EQ(before.size(), 3u);
  expect_engines_keep_their_keys(c, "one");

  c.kill_hard();
  for (int pid : before) EXPECT_TRUE(process_alive(pid)) << "engines outlive a controller crash";
  c.start();
  ASSERT_TRUE(c.wait_api()) << c.log();
  ASSERT_TRUE(eventually(
      [&] { return phase(c.status("one")) == "Ready" && phase(c.status("two")) == "Ready"; }, 30s))
      << c.log();
  std::this_thread::sleep_for(2s);  // a few more passes: still no new engine
  std::vector<int> after = c.recorded_engine_pids();
  std::sort(after.begin(), after.end());
  EXPECT_EQ(after, before);
  EXPECT_EQ(c.engine_pids("two").size(), 2u);
  // "two" decides on its engines' nibble_requests_running (idle: 0), not on router in-flight.
  EXPECT_EQ(c.status("two").value("autoscaler", "").rfind("running=0 ", 0), 0u)
      << c.status("two").dump(2);
  EXPECT_TRUE(chat_ok(c, "one"));
  EXPECT_TRUE(chat_ok(c, "two"));
  expect_engines_keep_their_keys(c, "two");  // adopted engines: keys read back from the state
  EXPECT_NE(c.log().find("adopted replica"), std::string::npos);
  EXPECT_EQ(c.stop(), 0);  // SIGTERM: engines drained and stopped
  for (int pid : before) EXPECT_FALSE(process_alive(pid)) << pid;
}

TEST(ControllerE2E, ScalesFromZeroOnARequestAndBackAfterIdling) {
  REQUIRE_TINY_MODEL(model);
  ControllerProcess c;
  ASSERT_TRUE(c.wait_api()) << c.log();
  auto applied = c.nibble(
      "apply -f " +
      write_file(c.state_dir.path() / "z.yaml",
                 recipe("z", model, "z",
                        "  replicas: {min: 0, max: 1}\n"
                        "  autoscaling: {scaleDownDelaySeconds: 1, idleSecondsBeforeZero: 3}\n")));
  ASSERT_EQ(applied.exit_code, 0) << applied.output;
  ASSERT_TRUE(eventually([&] { return phase(c.status("z")) == "ScaledToZero"; }, 20s))
      << c.status("z").dump(2);
  EXPECT_TRUE(c.engine_pids("z").empty());
  EXPECT_EQ(c.condition("z", "Ready"), "True/ScaledToZero");

  // The request is held while a replica starts, then answered.
  const auto started = std::chrono::steady_clock::now();
  EXPECT_TRUE(chat_ok(c, "z"));
  const auto waited = std::chrono::steady_clock::now() - started;
  const std::vector<int> pids = c.engine_pids("z");
  EXPECT_EQ(pids.size(), 1u);
  EXPECT_LT(waited, 60s);

  // Idle: back to zero after idleSecondsBeforeZero + scaleDownDelaySeconds.
  ASSERT_TRUE(eventually([&] { return phase(c.status("z")) == "ScaledToZero"; }, 30s))
      << c.status("z").dump(2);
  for (int pid : pids) EXPECT_TRUE(eventually([&] { return !process_alive(pid); }, 15s));
  EXPECT_EQ(c.stop(), 0);
}

// Issue 23, item 2: a root controller runs engines as --engine-user, and --model-root
// confines the recipes' model paths.
TEST(ControllerE2E, EnginesRunAsTheEngineUserAndModelsStayInsideTheRoot) {
  REQUIRE_TINY_MODEL(model);
  if (geteuid() != 0) GTEST_SKIP() << "needs root to run engines as another user";
  const std::filesystem::path model_root = std::filesystem::path(model).parent_path();
  // The engine user must be able to read the model (the test's temporary directory is 0700).
  std::filesystem::permissions(
      model_root, std::filesystem::perms::others_read | std::filesystem::perms::others_exec,
      std::filesystem::perm_options::add);
  // ... and to run the engine, wherever the build lives (a build under a 0700 home is out of
  // its reach, which the controller refuses at start-up): a copy beside the model's directory.
  nibble::testing::TempDir engine_dir;
  chmod(engine_dir.path().c_str(), 0755);
  const std::filesystem::path engine = engine_dir.path() / "nibble-engine";
  std::filesystem::copy_file(NIBBLE_ENGINE, engine);
  if (const std::string problem =
          local::engine_binary_access_problem(engine.string(), local::lookup_engine_user("nobody"));
      !problem.empty()) {
    GTEST_SKIP() << "the temporary directory is out of the engine user's reach: " << problem;
  }
  ControllerProcess c({"--engine-user", "nobody", "--model-root", model_root.string(), "--engine",
                       engine.string()});
  ASSERT_TRUE(c.wait_api()) << c.log();
  auto outside = c.nibble(
      "apply -f " + write_file(c.state_dir.path() / "etc.yaml", recipe("etc", "/etc", "etc", "")));
  EXPECT_EQ(outside.exit_code, 1);
  EXPECT_NE(outside.output.find("outside the controller's --model-root"), std::string::npos)
      << outside.output;
  auto applied = c.nibble("apply -f " + write_file(c.state_dir.path() / "tiny.yaml",
                                                   recipe("tiny", model, "tiny", "")));
  ASSERT_EQ(applied.exit_code, 0) << applied.output;
  ASSERT_TRUE(eventually([&] { return phase(c.status("tiny")) == "Ready"; }, 90s)) << c.log();
  const std::vector<int> pids = c.engine_pids("tiny");
  ASSERT_EQ(pids.size(), 1u);
  std::ifstream status("/proc/" + std::to_string(pids[0]) + "/status");
  std::string line, uid_line;
  while (std::getline(status, line)) {
    if (line.starts_with("Uid:")) uid_line = line;
  }
  const std::string nobody = std::to_string(getpwnam("nobody")->pw_uid);
  EXPECT_EQ(uid_line, "Uid:\t" + nobody + "\t" + nobody + "\t" + nobody + "\t" + nobody);
  EXPECT_EQ(c.stop(), 0);
}

}  // namespace
}  // namespace nibble::controller
