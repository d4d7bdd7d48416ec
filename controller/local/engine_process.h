#pragma once
// One `nibble-engine serve` child of the controller: started in its own session (so a
// controller restart does not take it down and signals reach all of it), optionally as an
// unprivileged user, output appended to a log file, readiness from GET /health. A process the
// controller did not start itself (found in the state directory after a restart) is adopted: it can
// be probed and signalled, and its exit is seen when the pid stops existing.
#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace nibble::local {

// The unprivileged account engines run as when the controller runs as root (--engine-user).
// Looked up once, in the controller: the child between fork and exec may not use the user
// database.
struct EngineUser {
  std::string name;
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;  // supplementary groups from the group database
};
// NAME or a numeric uid; throws std::invalid_argument naming it when there is no such user.
EngineUser lookup_engine_user(const std::string& name);

// Why `user` could not run `binary` (a path, or a bare name looked up on $PATH as execvp
// does): the first directory on its path the user cannot search, or the file it cannot
// execute, named with the permission missing; "" when it can. Judged by the owner, group and
// other mode bits (POSIX ACLs are not read). A controller checks this at start-up: otherwise
// every replica would exit with 127, e.g. for a build under a 0700 home directory.
std::string engine_binary_access_problem(const std::string& binary, const EngineUser& user);

struct EngineLaunch {
  std::string binary;              // nibble-engine
  std::vector<std::string> args;   // after the binary: serve --model ... --port N ...
  std::filesystem::path log_file;  // stdout and stderr, appended
  // Set: the child gives the log file to this user, then drops to its groups, gid and uid
  // (setgroups, setgid, setuid) before exec, and exits with 126 if it cannot.
  std::optional<EngineUser> user;
};

class EngineProcess {
 public:
  // Throws std::runtime_error when fork fails; an exec failure shows as an exit with code 127.
  static std::unique_ptr<EngineProcess> start(const EngineLaunch& launch, int port);
  // A running engine found after a controller restart; nullptr if the pid is gone.
  static std::unique_ptr<EngineProcess> adopt(pid_t pid, int port);

  ~EngineProcess();  // reaps a child that exited; never kills
  EngineProcess(const EngineProcess&) = delete;
  EngineProcess& operator=(const EngineProcess&) = delete;

  pid_t pid() const { return pid_; }
  int port() const { return port_; }
  bool adopted() const { return adopted_; }

  // Exit status as from waitpid (children) or -1 (adopted: unknown), once it has exited.
  std::optional<int> exit_status();
  // GET /health answered 200 within `timeout`.
  bool healthy(std::chrono::milliseconds timeout = std::chrono::milliseconds(500)) const;
  void terminate();  // SIGTERM: the engine drains and exits 0
  void kill();       // SIGKILL

 private:
  EngineProcess(pid_t pid, int port, bool adopted) : pid_(pid), port_(port), adopted_(adopted) {}
  pid_t pid_;
  int port_;
  bool adopted_;
  std::optional<int> exit_status_;
};

// A free TCP port on 127.0.0.1 at the time of the call.
int pick_free_port();
// Describes a waitpid status for people ("exited with code 1", "killed by signal 9").
std::string describe_exit(int status);

}  // namespace nibble::local
