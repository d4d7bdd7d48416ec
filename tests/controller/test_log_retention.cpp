// Retention of engine logs: files with mtimes set in the past stand for old logs, replica
// records mark the logs of running engines, and the clock is passed in.
#include "controller/local/log_retention.h"

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/support/temp_dir.h"

namespace nibble::local {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

class LogRetentionTest : public ::testing::Test {
 protected:
  void SetUp() override { fs::create_directories(dir_.path() / "logs"); }

  // A log of `bytes` bytes last written `age` before now_.
  fs::path write_log(const std::string& name, std::size_t bytes, fs::file_time_type::duration age) {
    const fs::path path = dir_.path() / "logs" / name;
    std::ofstream(path) << std::string(bytes, 'x');
    fs::last_write_time(path, now_ - age);
    return path;
  }
  // A replica record, as the local backend writes it for a running engine.
  void write_record(const std::string& id, const fs::path& log) {
    fs::create_directories(dir_.path() / "replicas");
    std::ofstream(dir_.path() / "replicas" / (id + ".json"))
        << nlohmann::json{{"id", id}, {"pid", 1}, {"port", 1}, {"log_file", log.string()}}.dump();
  }

  // Which of the files are still there, in the order given.
  static std::vector<bool> present(std::initializer_list<fs::path> paths) {
    std::vector<bool> out;
    for (const fs::path& p : paths) out.push_back(fs::exists(p));
    return out;
  }

  nibble::testing::TempDir dir_;
  const fs::file_time_type now_ = fs::file_time_type::clock::now();
};

TEST_F(LogRetentionTest, OldLogsGoRecentAndRunningOnesStay) {
  const fs::path old_gone = write_log("deleted-recipe-1.log", 10, 8 * 24h);
  const fs::path old_running = write_log("running-1.log", 10, 30 * 24h);
  const fs::path recent = write_log("deleted-recipe-2.log", 10, 6 * 24h);
  const fs::path not_a_log = dir_.path() / "logs" / "notes.txt";
  std::ofstream(not_a_log) << "keep";
  fs::last_write_time(not_a_log, now_ - 100 * 24h);
  write_record("running-1", old_running);

  const PruneResult result = prune_engine_logs(dir_.path(), {168h, 0, 10min}, now_);
  EXPECT_EQ(result.files_removed, 1u);
  EXPECT_EQ(result.bytes_removed, 10u);
  EXPECT_EQ(present({old_gone, old_running, recent, not_a_log}),
            (std::vector<bool>{false, true, true, true}));
}

TEST_F(LogRetentionTest, OverTheSizeCapTheOldestGoFirst) {
  const fs::path oldest = write_log("a.log", 400, 3h);
  const fs::path running = write_log("b.log", 300, 2h);
  const fs::path middle = write_log("c.log", 300, 1h);
  const fs::path newest = write_log("d.log", 300, 1min);
  write_record("b", running);

  // 1300 bytes against a cap of 700: a (400) goes, b is running, c (300) goes, 600 left.
  const PruneResult result = prune_engine_logs(dir_.path(), {0s, 700, 10min}, now_);
  EXPECT_EQ(result.files_removed, 2u);
  EXPECT_EQ(result.bytes_removed, 700u);
  EXPECT_EQ(present({oldest, running, middle, newest}),
            (std::vector<bool>{false, true, false, true}));
}

TEST_F(LogRetentionTest, LimitsOfZeroKeepEverything) {
  write_log("a.log", 1000, 1000 * 24h);
  const PruneResult result = prune_engine_logs(dir_.path(), {0s, 0, 10min}, now_);
  EXPECT_EQ(result.files_removed, 0u);
}

TEST_F(LogRetentionTest, MissingLogsDirectoryIsNotAnError) {
  fs::remove_all(dir_.path() / "logs");
  EXPECT_EQ(prune_engine_logs(dir_.path(), {}, now_).files_removed, 0u);
}

TEST_F(LogRetentionTest, PrunerPrunesAtStartUp) {
  const fs::path old_gone = write_log("gone.log", 10, 8 * 24h);
  { LogPruner pruner(dir_.path(), {168h, 100 << 20, 1h}); }  // destroyed at once: stops its thread
  EXPECT_FALSE(fs::exists(old_gone));
}

}  // namespace
}  // namespace nibble::local
