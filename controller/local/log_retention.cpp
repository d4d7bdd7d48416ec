#include "controller/local/log_retention.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <vector>

namespace nibble::local {
namespace {

namespace fs = std::filesystem;

struct LogFile {
  fs::path path;
  fs::file_time_type written;
  std::uintmax_t bytes = 0;
  bool in_use = false;
};

// Every *.log in dir with its mtime and size; files that vanish meanwhile are skipped.
std::vector<LogFile> list_logs(const fs::path& dir, const std::set<fs::path>& in_use) {
  std::vector<LogFile> logs;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code file_ec;
    if (!it->is_regular_file(file_ec) || it->path().extension() != ".log") continue;
    LogFile log{it->path(), it->last_write_time(file_ec), 0, false};
    log.bytes = it->file_size(file_ec);
    if (file_ec) continue;
    log.in_use = in_use.contains(fs::weakly_canonical(log.path, file_ec));
    logs.push_back(std::move(log));
  }
  return logs;
}

bool remove_log(const LogFile& log, const char* why, PruneResult& result) {
  std::error_code ec;
  if (!fs::remove(log.path, ec)) {
    if (ec) spdlog::warn("cannot remove engine log {}: {}", log.path.string(), ec.message());
    return false;
  }
  spdlog::info("removed engine log {} ({} bytes, {})", log.path.string(), log.bytes, why);
  ++result.files_removed;
  result.bytes_removed += log.bytes;
  return true;
}

}  // namespace

std::set<fs::path> logs_in_use(const fs::path& state_dir) {
  std::set<fs::path> in_use;
  std::error_code ec;
  for (fs::directory_iterator it(state_dir / "replicas", ec), end; !ec && it != end;
       it.increment(ec)) {
    if (it->path().extension() != ".json") continue;
    std::ifstream in(it->path());
    const nlohmann::json record = nlohmann::json::parse(in, nullptr, false);
    if (!record.is_object() || !record.contains("log_file") || !record["log_file"].is_string()) {
      continue;
    }
    std::error_code path_ec;
    in_use.insert(fs::weakly_canonical(record["log_file"].get<std::string>(), path_ec));
  }
  return in_use;
}

PruneResult prune_engine_logs(const fs::path& state_dir, const LogRetention& retention,
                              fs::file_time_type now) {
  PruneResult result;
  std::vector<LogFile> logs = list_logs(state_dir / "logs", logs_in_use(state_dir));
  std::sort(logs.begin(), logs.end(),
            [](const LogFile& a, const LogFile& b) { return a.written < b.written; });
  std::uintmax_t total = 0;
  for (const LogFile& log : logs) total += log.bytes;

  std::vector<LogFile> kept;
  for (const LogFile& log : logs) {
    const bool too_old = retention.max_age.count() > 0 && log.written < now - retention.max_age;
    if (too_old && !log.in_use && remove_log(log, "older than --log-retention-hours", result)) {
      total -= log.bytes;
    } else {
      kept.push_back(log);
    }
  }
  // Oldest first, until the rest fit.
  for (const LogFile& log : kept) {
    if (retention.max_bytes == 0 || total <= retention.max_bytes) break;
    if (!log.in_use && remove_log(log, "over --log-retention-mib", result)) total -= log.bytes;
  }
  return result;
}

LogPruner::LogPruner(fs::path state_dir, LogRetention retention)
    : state_dir_(std::move(state_dir)), retention_(retention) {
  prune_engine_logs(state_dir_, retention_, fs::file_time_type::clock::now());
  thread_ = std::thread([this] { run(); });
}

LogPruner::~LogPruner() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void LogPruner::run() {
  std::unique_lock lock(mutex_);
  while (!wake_.wait_for(lock, retention_.interval, [this] { return stopping_; })) {
    lock.unlock();
    prune_engine_logs(state_dir_, retention_, fs::file_time_type::clock::now());
    lock.lock();
  }
}

}  // namespace nibble::local
