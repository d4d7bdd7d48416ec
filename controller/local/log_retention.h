#pragma once
// Retention of engine logs (state_dir/logs/<replica>.log). A replica's log outlives it so that
// `nibble logs` can explain a crash, but logs of replicas that are gone (deleted recipes,
// restarts, rollouts) must not fill the disk: they are kept for a bounded time and total size.
// A log named by a replica record (state_dir/replicas/<id>.json, i.e. a live or adopted
// engine) is never deleted; it still counts towards the total size.
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <mutex>
#include <set>
#include <thread>

namespace nibble::local {

struct LogRetention {
  std::chrono::seconds max_age{std::chrono::hours(24 * 7)};  // 0: no age limit
  std::uintmax_t max_bytes = 100ull << 20;                   // all logs together; 0: no limit
  std::chrono::seconds interval{std::chrono::minutes(10)};   // between two prunes
};

struct PruneResult {
  std::size_t files_removed = 0;
  std::uintmax_t bytes_removed = 0;
};

// Logs that replica records in state_dir/replicas/ point at.
std::set<std::filesystem::path> logs_in_use(const std::filesystem::path& state_dir);

// Deletes the *.log files of state_dir/logs/ not in use that were last written before
// now - max_age, then the oldest of the rest until all logs fit in max_bytes. Errors on single
// files are logged and skipped; a missing logs/ directory is not an error.
PruneResult prune_engine_logs(const std::filesystem::path& state_dir, const LogRetention& retention,
                              std::filesystem::file_time_type now);

// Prunes at construction and then every retention.interval on its own thread, until destroyed.
class LogPruner {
 public:
  LogPruner(std::filesystem::path state_dir, LogRetention retention);
  ~LogPruner();
  LogPruner(const LogPruner&) = delete;
  LogPruner& operator=(const LogPruner&) = delete;

 private:
  void run();

  std::filesystem::path state_dir_;
  LogRetention retention_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace nibble::local
