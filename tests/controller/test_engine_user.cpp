// --engine-user: a controller running as root starts engines as an unprivileged user (uid, gid
// and supplementary groups dropped between fork and exec), and their log stays writable by it.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "controller/local/engine_process.h"
#include "tests/support/temp_dir.h"

namespace nibble::local {
namespace {

// The "Uid:" or "Gid:" line of /proc/<pid>/status: real, effective, saved, filesystem ids.
std::string status_line(pid_t pid, const std::string& key) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.starts_with(key + ":")) return line.substr(key.size() + 1);
  }
  return "";
}

std::string four_times(unsigned id) {
  const std::string s = std::to_string(id);
  return "\t" + s + "\t" + s + "\t" + s + "\t" + s;
}

// Waits until the child has exec'd (its name is no longer the controller test's).
bool wait_for_exec(pid_t pid, const std::string& comm) {
  for (int i = 0; i < 200; ++i) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/comm");
    std::string name;
    if (std::getline(in, name) && name == comm) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

TEST(EngineUser, LookupByNameAndUid) {
  const EngineUser nobody = lookup_engine_user("nobody");
  EXPECT_EQ(nobody.name, "nobody");
  EXPECT_NE(nobody.uid, 0u);
  EXPECT_EQ(lookup_engine_user(std::to_string(nobody.uid)).name, "nobody");
  try {
    lookup_engine_user("no-such-user-nibble");
    ADD_FAILURE() << "accepted an unknown user";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "--engine-user: no user 'no-such-user-nibble' in the user database");
  }
}

TEST(EngineUser, ChildRunsAsTheUserAndOwnsItsLog) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to change users";
  const EngineUser nobody = lookup_engine_user("nobody");
  nibble::testing::TempDir dir;
  chmod(dir.path().c_str(), 0755);
  const auto log = dir.path() / "engine.log";
  auto process = EngineProcess::start({"sleep", {"30"}, log, nobody}, 0);
  ASSERT_TRUE(wait_for_exec(process->pid(), "sleep"));
  EXPECT_EQ(status_line(process->pid(), "Uid"), four_times(nobody.uid));
  EXPECT_EQ(status_line(process->pid(), "Gid"), four_times(nobody.gid));
  const std::string groups = status_line(process->pid(), "Groups");
  EXPECT_EQ(groups.find(" 0 "), std::string::npos) << groups;  // root's group is gone
  struct stat st {};
  ASSERT_EQ(stat(log.c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, nobody.uid);
  process->kill();
  for (int i = 0; i < 200 && !process->exit_status(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_TRUE(process->exit_status());

  // Without a user the child keeps the controller's.
  auto same = EngineProcess::start({"sleep", {"30"}, dir.path() / "root.log", std::nullopt}, 0);
  ASSERT_TRUE(wait_for_exec(same->pid(), "sleep"));
  EXPECT_EQ(status_line(same->pid(), "Uid"), four_times(0));
  same->kill();
  for (int i = 0; i < 200 && !same->exit_status(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
}

}  // namespace
}  // namespace nibble::local
