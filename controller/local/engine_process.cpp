#include "controller/local/engine_process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <grp.h>
#include <httplib.h>
#include <netinet/in.h>
#include <pwd.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>

namespace nibble::local {
namespace {

bool is_zombie(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return false;
  const auto close = line.rfind(')');  // the command name may hold spaces and parentheses
  return close != std::string::npos && close + 2 < line.size() && line[close + 2] == 'Z';
}

}  // namespace

std::unique_ptr<EngineProcess> EngineProcess::start(const EngineLaunch& launch, int port) {
  std::vector<std::string> argv_storage = {launch.binary};
  argv_storage.insert(argv_storage.end(), launch.args.begin(), launch.args.end());
  std::vector<char*> argv;
  for (auto& a : argv_storage) argv.push_back(a.data());
  argv.push_back(nullptr);
  const std::string log = launch.log_file.string();
  const std::optional<EngineUser>& user = launch.user;

  const pid_t pid = fork();
  if (pid < 0) throw std::runtime_error(std::string("fork failed: ") + std::strerror(errno));
  if (pid == 0) {
    setsid();  // its own session: survives the controller, gets signals as a group
    const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd >= 0) {
      dup2(fd, STDOUT_FILENO);
      dup2(fd, STDERR_FILENO);
    }
    if (user) {
      // The log stays the engine's to write; then groups and gid first, as only root may
      // change them, and the uid last. Any failure ends the child: never run as root by mistake.
      if ((fd >= 0 && fchown(fd, user->uid, user->gid) != 0) ||
          setgroups(user->groups.size(), user->groups.data()) != 0 || setgid(user->gid) != 0 ||
          setuid(user->uid) != 0 || (user->uid != 0 && setuid(0) == 0)) {
        dprintf(STDERR_FILENO, "nibble-controller: cannot run the engine as %s: %s\n",
                user->name.c_str(), std::strerror(errno));
        _exit(126);
      }
    }
    const int null_fd = open("/dev/null", O_RDONLY);
    if (null_fd >= 0) dup2(null_fd, STDIN_FILENO);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none,
                nullptr);  // the controller may block signals; the engine must not
    execvp(argv[0], argv.data());
    dprintf(STDERR_FILENO, "nibble-controller: cannot run %s: %s\n", argv[0], std::strerror(errno));
    _exit(127);
  }
  return std::unique_ptr<EngineProcess>(new EngineProcess(pid, port, false));
}

EngineUser lookup_engine_user(const std::string& name) {
  std::vector<char> buffer(16384);
  passwd entry{};
  passwd* found = nullptr;
  getpwnam_r(name.c_str(), &entry, buffer.data(), buffer.size(), &found);
  if (found == nullptr && !name.empty() &&
      name.find_first_not_of("0123456789") == std::string::npos && name.size() < 10) {
    getpwuid_r(uid_t(std::stoul(name)), &entry, buffer.data(), buffer.size(), &found);
  }
  if (found == nullptr)
    throw std::invalid_argument("--engine-user: no user '" + name + "' in the user database");
  EngineUser user{found->pw_name, found->pw_uid, found->pw_gid, {}};
  int count = 64;
  user.groups.resize(std::size_t(count));
  if (getgrouplist(found->pw_name, found->pw_gid, user.groups.data(), &count) < 0) {
    user.groups.resize(std::size_t(count));  // count now holds the number needed
    getgrouplist(found->pw_name, found->pw_gid, user.groups.data(), &count);
  }
  user.groups.resize(std::size_t(std::max(count, 0)));
  return user;
}

namespace {

// Whether `user` has the permission of one class of bits (owner, group, other) on a file.
bool permitted(const struct stat& st, const EngineUser& user, mode_t owner, mode_t group,
               mode_t other) {
  if (user.uid == 0) return S_ISDIR(st.st_mode) || (st.st_mode & (owner | group | other)) != 0;
  if (st.st_uid == user.uid) return (st.st_mode & owner) != 0;
  if (st.st_gid == user.gid ||
      std::find(user.groups.begin(), user.groups.end(), st.st_gid) != user.groups.end())
    return (st.st_mode & group) != 0;
  return (st.st_mode & other) != 0;
}

std::string describe(const struct stat& st) {
  char mode[8];
  std::snprintf(mode, sizeof mode, "%04o", unsigned(st.st_mode & 07777));
  std::vector<char> buffer(16384);
  passwd entry{};
  passwd* owner = nullptr;
  getpwuid_r(st.st_uid, &entry, buffer.data(), buffer.size(), &owner);
  return std::string("mode ") + mode + ", owner " +
         (owner != nullptr ? std::string(owner->pw_name) : "uid " + std::to_string(st.st_uid));
}

// execvp's search: the first entry of $PATH holding an executable of that name.
std::string find_on_path(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::string dirs = path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin";
  std::size_t at = 0;
  while (at <= dirs.size()) {
    const std::size_t colon = std::min(dirs.find(':', at), dirs.size());
    const std::string dir = colon > at ? dirs.substr(at, colon - at) : ".";
    const std::string candidate = dir + "/" + name;
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
    at = colon + 1;
  }
  return "";
}

std::string path_problem(const std::filesystem::path& file, const EngineUser& user) {
  const std::string who = "--engine-user " + user.name + " (uid " + std::to_string(user.uid) + ")";
  std::filesystem::path dir = file.root_path();
  const std::filesystem::path below_root = file.relative_path();
  for (auto it = below_root.begin(); it != below_root.end(); ++it) {
    struct stat st {};
    if (stat(dir.c_str(), &st) != 0)
      return "cannot read " + dir.string() + ": " + std::strerror(errno);
    if (!permitted(st, user, S_IXUSR, S_IXGRP, S_IXOTH)) {
      return who + " cannot run the engine " + file.string() + ": no search (x) permission on " +
             "the directory " + dir.string() + " (" + describe(st) +
             "); put the engine where that user can reach it (--engine PATH) or grant it x on " +
             dir.string();
    }
    dir /= *it;
  }
  struct stat st {};
  if (stat(file.c_str(), &st) != 0)
    return "the engine " + file.string() + " cannot be read: " + std::strerror(errno);
  if (!S_ISREG(st.st_mode)) return "the engine " + file.string() + " is not a regular file";
  if (!permitted(st, user, S_IXUSR, S_IXGRP, S_IXOTH)) {
    return who + " cannot run the engine " + file.string() + ": no execute (x) permission on " +
           "the file (" + describe(st) + ")";
  }
  return "";
}

}  // namespace

std::string engine_binary_access_problem(const std::string& binary, const EngineUser& user) {
  std::string path = binary;
  if (binary.find('/') == std::string::npos) {
    path = find_on_path(binary);
    if (path.empty()) return "the engine '" + binary + "' is not on PATH (--engine PATH)";
  }
  const std::filesystem::path file = std::filesystem::absolute(path).lexically_normal();
  if (std::string problem = path_problem(file, user); !problem.empty()) return problem;
  // Through a symlink, the target's directories must be searchable too.
  std::error_code ec;
  const std::filesystem::path target = std::filesystem::canonical(file, ec);
  if (!ec && target != file) return path_problem(target, user);
  return "";
}

std::unique_ptr<EngineProcess> EngineProcess::adopt(pid_t pid, int port) {
  if (pid <= 0 || (::kill(pid, 0) != 0 && errno == ESRCH)) return nullptr;
  return std::unique_ptr<EngineProcess>(new EngineProcess(pid, port, true));
}

EngineProcess::~EngineProcess() {
  if (!adopted_ && !exit_status_) exit_status();  // reap if it already exited
}

std::optional<int> EngineProcess::exit_status() {
  if (exit_status_) return exit_status_;
  if (adopted_) {
    // It may still be our child (the backend was re-created in this process): reap it then.
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      exit_status_ = status;
    } else if ((::kill(pid_, 0) != 0 && errno == ESRCH) || is_zombie(pid_)) {
      exit_status_ = -1;  // gone, or dead and waiting for a parent that is not us
    }
    return exit_status_;
  }
  int status = 0;
  if (waitpid(pid_, &status, WNOHANG) == pid_) exit_status_ = status;
  return exit_status_;
}

bool EngineProcess::healthy(std::chrono::milliseconds timeout) const {
  httplib::Client client("127.0.0.1", port_);
  const auto secs = timeout.count() / 1000, usecs = (timeout.count() % 1000) * 1000;
  client.set_connection_timeout(secs, usecs);
  client.set_read_timeout(secs, usecs);
  auto res = client.Get("/health");
  return res && res->status == 200;
}

void EngineProcess::terminate() {
  if (!exit_status_) ::kill(pid_, SIGTERM);
}

void EngineProcess::kill() {
  if (exit_status_) return;
  if (::kill(-pid_, SIGKILL) != 0) ::kill(pid_, SIGKILL);  // its whole session, else the process
}

int pick_free_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  int port = -1;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  close(fd);
  return port;
}

std::string describe_exit(int status) {
  if (status < 0) return "exited (status unknown: adopted process)";
  if (WIFEXITED(status)) return "exited with code " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return "killed by signal " + std::to_string(WTERMSIG(status));
  return "stopped";
}

}  // namespace nibble::local
