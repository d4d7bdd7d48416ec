// --engine-user: a controller running as root starts engines as an unprivileged user (uid, gid
// and supplementary groups dropped between fork and exec), and their log stays writable by it.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
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

// The start-up check of --engine-user against the engine binary, judged from mode bits, so it
// runs without root: a user that owns nothing here reaches only what "other" may.
TEST(EngineUser, EngineTheUserCannotReachIsNamedWithTheMissingPermission) {
  const EngineUser stranger{"stranger", 54321, 54321, {}};
  nibble::testing::TempDir dir;
  const auto bin = dir.path() / "bin";
  std::filesystem::create_directories(bin);
  const auto engine = bin / "nibble-engine";
  std::ofstream(engine) << "#!/bin/sh\n";
  chmod(engine.c_str(), 0755);
  chmod(bin.c_str(), 0755);
  chmod(dir.path().c_str(), 0755);
  if (const std::string above = engine_binary_access_problem(engine.string(), stranger);
      !above.empty()) {
    GTEST_SKIP() << "the temporary directory's parents are closed to other users: " << above;
  }
  // A build under a 0700 home: the directory and its mode are named.
  chmod(dir.path().c_str(), 0700);
  std::string problem = engine_binary_access_problem(engine.string(), stranger);
  EXPECT_NE(problem.find("--engine-user stranger (uid 54321) cannot run the engine " +
                         engine.string() + ": no search (x) permission on the directory " +
                         dir.path().string() + " (mode 0700"),
            std::string::npos)
      << problem;
  chmod(dir.path().c_str(), 0711);  // searchable is enough
  EXPECT_EQ(engine_binary_access_problem(engine.string(), stranger), "");
  chmod(engine.c_str(), 0754);  // executable by its owner and group only
  problem = engine_binary_access_problem(engine.string(), stranger);
  EXPECT_NE(problem.find("no execute (x) permission on the file (mode 0754"), std::string::npos)
      << problem;
  // ... unless the user is in the file's group.
  struct stat st {};
  ASSERT_EQ(stat(engine.c_str(), &st), 0);
  const EngineUser member{"member", 54321, 54321, {st.st_gid}};
  EXPECT_EQ(engine_binary_access_problem(engine.string(), member), "");
  // Through a symlink, the target's directories count.
  chmod(engine.c_str(), 0755);
  const auto open_dir = dir.path() / "open";
  std::filesystem::create_directories(open_dir);
  chmod(open_dir.c_str(), 0755);
  std::filesystem::create_symlink(engine, open_dir / "nibble-engine");
  chmod(bin.c_str(), 0700);
  problem = engine_binary_access_problem((open_dir / "nibble-engine").string(), stranger);
  EXPECT_NE(problem.find("on the directory " + bin.string()), std::string::npos) << problem;
  // A bare name is looked up on PATH, as the engine's exec does.
  EXPECT_EQ(engine_binary_access_problem("sh", stranger), "");
  EXPECT_NE(engine_binary_access_problem("no-such-engine-nibble", stranger).find("not on PATH"),
            std::string::npos);
}

}  // namespace
}  // namespace nibble::local
