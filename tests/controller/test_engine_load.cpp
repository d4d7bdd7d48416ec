// Small controller pieces: an engine's load from its /metrics page, the controller's command
// line, and the log tail behind `nibble logs`.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>

#include "controller/daemon/controller_options.h"
#include "controller/local/log_tail.h"
#include "controller/loop/engine_load.h"
#include "tests/support/temp_dir.h"

namespace nibble::controller {
namespace {

using local::lines_since;
using local::previous_replica_log;
using local::tail_lines;

TEST(EngineLoad, SumsRunningAndWaitingTakesTheLargestKvUsage) {
  const std::string page =
      "# HELP nibble_requests_running Requests whose sequences are in the running batch.\n"
      "# TYPE nibble_requests_running gauge\n"
      "nibble_requests_running{model_name=\"a\"} 3\n"
      "nibble_requests_running{model_name=\"b}\\\"x\"} 2\n"
      "nibble_requests_running_other 100\n"
      "nibble_requests_waiting{model_name=\"a\"} 5 1700000000000\n"
      "nibble_kv_cache_usage_ratio{model_name=\"a\"} 0.25\n"
      "nibble_kv_cache_usage_ratio{model_name=\"b\"} 0.5\n"
      "nibble_requests_waiting_total 9\n";
  const auto load = parse_engine_load(page);
  ASSERT_TRUE(load);
  EXPECT_DOUBLE_EQ(load->running, 5);
  EXPECT_DOUBLE_EQ(load->waiting, 5);
  EXPECT_DOUBLE_EQ(load->kv_cache_usage, 0.5);
}

TEST(EngineLoad, PagesWithoutTheGaugesAreNotEngines) {
  EXPECT_FALSE(parse_engine_load(""));
  EXPECT_FALSE(parse_engine_load("# TYPE x gauge\nx 1\nnibble_requests_running_x 4\n"));
  EXPECT_FALSE(parse_engine_load("nibble_requests_running{unterminated=\"} 3\n"));
  const auto only_waiting = parse_engine_load("nibble_requests_waiting 7\n");
  ASSERT_TRUE(only_waiting);
  EXPECT_DOUBLE_EQ(only_waiting->waiting, 7);
  EXPECT_DOUBLE_EQ(only_waiting->running, 0);
}

TEST(ControllerOptions, FlagsAndErrors) {
  ControllerOptions o;
  ASSERT_TRUE(
      parse_controller_options({"-f", "a.yaml", "--recipe=b.yaml", "--port", "9000", "--api-port=0",
                                "--engine-arg", "--threads", "--engine-arg=2", "--resync-seconds",
                                "0.5", "--keep-engines-on-exit", "--state-dir", "/tmp/s"},
                               o));
  EXPECT_EQ(o.recipe_files, (std::vector<std::string>{"a.yaml", "b.yaml"}));
  EXPECT_EQ(o.port, 9000);
  EXPECT_EQ(o.api_port, 0);
  EXPECT_EQ(o.engine_args, (std::vector<std::string>{"--threads", "2"}));
  EXPECT_EQ(o.resync, std::chrono::milliseconds(500));
  EXPECT_TRUE(o.keep_engines_on_exit);
  EXPECT_EQ(o.state_dir, "/tmp/s");

  auto error_of = [](std::vector<std::string> args) {
    ControllerOptions ignored;
    try {
      parse_controller_options(args, ignored);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(error_of({"--port", "70000"}).find("--port"), std::string::npos);
  EXPECT_NE(error_of({"--port", "80x"}).find("'80x'"), std::string::npos);
  EXPECT_NE(error_of({"--resync-seconds", "0"}).find("--resync-seconds"), std::string::npos);
  EXPECT_NE(error_of({"--log-level", "loud"}).find("--log-level"), std::string::npos);
  EXPECT_NE(error_of({"--bogus"}).find("unknown option '--bogus'"), std::string::npos);
  EXPECT_NE(error_of({"-f"}).find("missing value"), std::string::npos);

  ControllerOptions confined;
  ASSERT_TRUE(
      parse_controller_options({"--model-root", "/srv/models", "--engine-user=nibble"}, confined));
  EXPECT_EQ(confined.model_root, "/srv/models");
  EXPECT_EQ(confined.engine_user, "nibble");
  EXPECT_TRUE(o.model_root.empty() && o.engine_user.empty());
  EXPECT_EQ(error_of({"--engine-user="}), "--engine-user: expected a user name");
  EXPECT_EQ(error_of({"--model-root", ""}), "--model-root: expected a directory");
}

TEST(ControllerOptions, RouterFailoverTimeout) {
  ControllerOptions o;
  EXPECT_EQ(o.router_failover_timeout, std::chrono::seconds(30));
  ASSERT_TRUE(parse_controller_options({"--router-failover-timeout", "7"}, o));
  EXPECT_EQ(o.router_failover_timeout, std::chrono::seconds(7));
  EXPECT_THROW(parse_controller_options({"--router-failover-timeout", "-1"}, o),
               std::invalid_argument);
}

TEST(ControllerOptions, LogRetention) {
  ControllerOptions o;
  EXPECT_EQ(o.log_retention_hours, 168);
  EXPECT_EQ(o.log_retention_mib, 100);
  ASSERT_TRUE(parse_controller_options({"--log-retention-hours", "0", "--log-retention-mib=5"}, o));
  EXPECT_EQ(o.log_retention_hours, 0);
  EXPECT_EQ(o.log_retention_mib, 5);
  try {
    parse_controller_options({"--log-retention-hours", "-1"}, o);
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("--log-retention-hours"), std::string::npos);
  }
}

TEST(LogTail, LastLinesOfSmallAndLargeFiles) {
  nibble::testing::TempDir dir;
  const auto small = dir.path() / "small.log";
  std::ofstream(small) << "one\ntwo\nthree";  // no final newline
  EXPECT_EQ(tail_lines(small, 2), "two\nthree\n");
  EXPECT_EQ(tail_lines(small, 10), "one\ntwo\nthree\n");
  EXPECT_EQ(tail_lines(small, 0), "");
  EXPECT_EQ(tail_lines(dir.path() / "missing.log", 5), "");

  const auto large = dir.path() / "large.log";  // 3 MiB: only the last MiB is read
  {
    std::ofstream out(large);
    for (int i = 0; i < 100000; ++i) out << "line " << i << " " << std::string(24, 'x') << "\n";
  }
  const std::string last = tail_lines(large, 3);
  EXPECT_EQ(last.substr(0, 11), "line 99997 ");
  EXPECT_EQ(std::count(last.begin(), last.end(), '\n'), 3);
  const std::string many = tail_lines(large, 1000000);  // more than the window holds
  EXPECT_EQ(many.substr(0, 5), "line ");                // starts on a whole line
  EXPECT_LT(many.size(), (1u << 20) + 1);
}

// `nibble logs -f`: each call returns the complete lines written since the last one.
TEST(LogTail, LinesSinceAnOffsetFollowTheFile) {
  nibble::testing::TempDir dir;
  const auto log = dir.path() / "e.log";
  std::ofstream(log) << "one\ntwo\n";
  std::uintmax_t offset = 0;
  EXPECT_EQ(tail_lines(log, 1, &offset), "two\n");
  EXPECT_EQ(offset, 8u);
  EXPECT_EQ(lines_since(log, offset), "");
  std::ofstream(log, std::ios::app) << "three\nfo";  // "fo" is still being written
  EXPECT_EQ(lines_since(log, offset), "three\n");
  EXPECT_EQ(offset, 14u);
  std::ofstream(log, std::ios::app) << "ur\n";
  EXPECT_EQ(lines_since(log, offset), "four\n");
  std::ofstream(log) << "new\n";  // replaced by a shorter file: read from its start
  EXPECT_EQ(lines_since(log, offset), "new\n");
  std::uintmax_t none = 0;
  EXPECT_EQ(lines_since(dir.path() / "missing.log", none), "");
}

// `nibble logs --previous`: the newest log of this recipe's replicas that is not running.
TEST(LogTail, PreviousReplicaLogIsTheNewestGoneOne) {
  nibble::testing::TempDir dir;
  const auto at = [&](const std::string& name, int age_s) {
    const auto path = dir.path() / name;
    std::ofstream(path) << name << "\n";
    std::filesystem::last_write_time(
        path, std::filesystem::file_time_type::clock::now() - std::chrono::seconds(age_s));
    return path;
  };
  at("chat-bbbbb.log", 300);
  const auto older_gone = at("chat-ccccc.log", 200);
  const auto running = at("chat-ddddd.log", 10);
  at("chat-x-fffff.log", 1);  // recipe chat-x's
  at("chatty-ggggg.log", 1);  // recipe chatty's
  EXPECT_EQ(previous_replica_log(dir.path(), "chat", {running}), older_gone);
  EXPECT_EQ(previous_replica_log(dir.path(), "chat", {}), running);
  EXPECT_EQ(previous_replica_log(dir.path(), "other", {}), std::nullopt);
  EXPECT_EQ(previous_replica_log(dir.path() / "missing", "chat", {}), std::nullopt);
}

}  // namespace
}  // namespace nibble::controller
