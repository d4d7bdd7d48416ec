#pragma once
// A child process for integration tests: started with an argv, output to a log file,
// stopped with SIGTERM (then SIGKILL after a grace period) when the object goes away.
#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

namespace nibble::testing {

class ChildProcess {
 public:
  // Starts argv[0] (looked up on PATH) with stdout and stderr appended to log_path.
  ChildProcess(std::vector<std::string> argv, std::string log_path);
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }
  bool running();
  // SIGTERM, wait up to grace, then SIGKILL. Returns the exit status as from waitpid.
  int stop(std::chrono::milliseconds grace = std::chrono::seconds(10));
  std::string log() const;

 private:
  pid_t pid_ = -1;
  int status_ = 0;
  std::string log_path_;
};

// Runs a command to completion through the shell; returns its exit code and combined output.
struct CommandResult {
  int exit_code = -1;
  std::string output;
};
CommandResult run_command(const std::string& shell_command);

}  // namespace nibble::testing
