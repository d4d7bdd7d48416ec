#include "controller/local/local_backend.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "controller/local/log_tail.h"
#include "controller/reconcile/engine_command.h"
#include "http/api_keys.h"

namespace nibble::local {
namespace {

using reconcile::ReplicaPhase;
namespace fs = std::filesystem;

// Log lines kept with an exit: enough for the error an engine prints before it stops.
constexpr int kExitLogLines = 5;

std::string new_replica_id(const std::string& recipe) {
  static std::mt19937_64 rng(std::random_device{}());
  static const char* const kAlphabet = "bcdfghjklmnpqrstvwxz2456789";  // as Kubernetes pod suffixes
  std::string suffix;
  for (int i = 0; i < 5; ++i) suffix += kAlphabet[rng() % 27];
  return recipe + "-" + suffix;
}

}  // namespace

LocalBackend::LocalBackend(LocalBackendConfig config) : config_(std::move(config)) {
  fs::create_directories(config_.state_dir / "replicas");
  fs::create_directories(config_.state_dir / "logs");
  fs::create_directories(config_.state_dir / "keys");
  // The engine user reads its own key file by path, so it must pass through the directories
  // (search only: x without r, it cannot list them); no one else may.
  const fs::perms traverse =
      config_.engine_user ? fs::perms::group_exec | fs::perms::others_exec : fs::perms::none;
  fs::permissions(config_.state_dir / "keys", fs::perms::owner_all | traverse);
  if (config_.engine_user) fs::permissions(config_.state_dir, traverse, fs::perm_options::add);
}

std::string LocalBackend::write_key_file(const fs::path& path) const {
  const std::string key = http::generate_api_key();
  std::error_code ec;
  fs::remove(path, ec);  // a fresh file, created 0600, rather than reusing an older one
  http::write_private_file(path.string(), key + "\n");
  if (config_.engine_user &&
      chown(path.c_str(), config_.engine_user->uid, config_.engine_user->gid) != 0) {
    throw std::runtime_error("cannot give the key file " + path.string() + " to " +
                             config_.engine_user->name);
  }
  return key;
}

LocalBackend::~LocalBackend() = default;

fs::path LocalBackend::record_path(const std::string& id) const {
  return config_.state_dir / "replicas" / (id + ".json");
}

void LocalBackend::write_record(const Replica& r) const {
  const nlohmann::json record = {{"id", r.id},
                                 {"recipe", r.recipe},
                                 {"spec_hash", r.spec_hash},
                                 {"pid", r.process->pid()},
                                 {"port", r.process->port()},
                                 {"log_file", r.log_file.string()},
                                 {"api_key_file", r.key_file.string()}};
  const fs::path path = record_path(r.id), tmp = path.string() + ".tmp";
  std::ofstream(tmp) << record.dump(2) << "\n";
  fs::rename(tmp, path);  // atomic: a crash leaves the old record or the new, never half of one
}

void LocalBackend::remove_record(const Replica& r) const {
  std::error_code ec;
  fs::remove(record_path(r.id), ec);
  if (!r.key_file.empty()) fs::remove(r.key_file, ec);
}

void LocalBackend::adopt_running() {
  for (const auto& entry : fs::directory_iterator(config_.state_dir / "replicas")) {
    if (entry.path().extension() != ".json") continue;
    std::ifstream in(entry.path());
    const nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
    if (!j.is_object() || !j.contains("pid") || !j.contains("id")) {
      spdlog::warn("ignoring unreadable replica record {}", entry.path().string());
      continue;
    }
    auto process = EngineProcess::adopt(j.value("pid", 0), j.value("port", 0));
    if (!process) {
      spdlog::info("replica {} is gone (pid {}); forgetting it", j.value("id", ""),
                   j.value("pid", 0));
      std::error_code ec;
      fs::remove(entry.path(), ec);
      continue;
    }
    Replica r;
    r.id = j.value("id", "");
    r.recipe = j.value("recipe", "");
    r.spec_hash = j.value("spec_hash", "");
    r.log_file = j.value("log_file", "");
    r.key_file = j.value("api_key_file", "");
    if (!r.key_file.empty()) {
      std::ifstream key_in(r.key_file);
      std::getline(key_in, r.api_key);
      if (r.api_key.empty())
        spdlog::warn("replica {}: cannot read its key file {}; requests to it will fail", r.id,
                     r.key_file.string());
    }
    r.process = std::move(process);
    r.since = reconcile::Clock::now();
    spdlog::info("adopted replica {} of {} (pid {}, port {})", r.id, r.recipe, r.process->pid(),
                 r.process->port());
    replicas_.emplace(r.id, std::move(r));
  }
}

void LocalBackend::record_exit(Replica& r, int status) {
  r.last_error = describe_exit(status);
  reconcile::ReplicaExit exit{
      r.id, "replica " + r.id + " " + r.last_error + " (log: " + r.log_file.string() + ")",
      std::chrono::system_clock::now(), tail_lines(r.log_file, kExitLogLines)};
  spdlog::warn("{}", exit.description);
  std::deque<reconcile::ReplicaExit>& exits = exits_by_recipe_[r.recipe];
  exits.push_back(std::move(exit));
  while (exits.size() > config_.exits_kept) exits.pop_front();
}

std::vector<reconcile::ObservedReplica> LocalBackend::refresh(const std::string& recipe,
                                                              reconcile::Clock::time_point now) {
  std::vector<reconcile::ObservedReplica> out;
  for (auto it = replicas_.begin(); it != replicas_.end();) {
    Replica& r = it->second;
    if (r.recipe != recipe) {
      ++it;
      continue;
    }
    const std::optional<int> exit = r.process->exit_status();
    switch (r.phase) {
      case ReplicaPhase::kDraining:
        if (exit) {  // drained: gone
          spdlog::info("replica {} stopped ({})", r.id, describe_exit(*exit));
          remove_record(r);
          it = replicas_.erase(it);
          continue;
        }
        if (r.terminate_at && now >= *r.terminate_at) {
          r.process->terminate();
          r.terminate_at.reset();
        }
        if (now >= r.drain_deadline) {
          spdlog::warn("replica {} did not drain within {} s: SIGKILL", r.id,
                       config_.drain_timeout.count());
          r.process->kill();
        }
        break;
      case ReplicaPhase::kExited:
        break;
      case ReplicaPhase::kStarting:
      case ReplicaPhase::kReady:
        if (exit) {
          // A ready stretch long enough resets the back-off; otherwise the failures add up.
          const bool stable =
              r.phase == ReplicaPhase::kReady && now - r.since >= backoff_.reset_after_ready;
          r.consecutive_failures = stable ? 1 : r.consecutive_failures + 1;
          record_exit(r, *exit);
          r.phase = ReplicaPhase::kExited;
          r.since = now;
        } else if (r.phase == ReplicaPhase::kStarting && r.process->healthy()) {
          spdlog::info("replica {} of {} is ready on port {}", r.id, recipe, r.process->port());
          r.phase = ReplicaPhase::kReady;
          r.since = now;
        } else if (r.phase == ReplicaPhase::kReady && !r.process->healthy()) {
          r.phase = ReplicaPhase::kStarting;  // draining on its own or stuck: not routable
          r.since = now;
        }
        break;
    }
    out.push_back({r.id, r.spec_hash, r.phase, r.since, r.consecutive_failures});
    ++it;
  }
  return out;
}

reconcile::RecipeObservation LocalBackend::sync(const reconcile::DesiredState& desired,
                                                reconcile::Clock::time_point now) {
  const std::string& name = desired.recipe.name;
  const auto observed = refresh(name, now);
  const reconcile::Plan plan = reconcile::plan_replicas(
      {name, desired.revision, desired.replicas, false}, observed, now, backoff_);
  const int restarted = carry_out(plan, &desired, now);
  reconcile::RecipeObservation out = observation(name, plan);
  out.restarted = restarted;
  return out;
}

reconcile::RecipeObservation LocalBackend::drain(const std::string& recipe,
                                                 reconcile::Clock::time_point now) {
  const auto observed = refresh(recipe, now);
  const reconcile::Plan plan =
      reconcile::plan_replicas({recipe, "", 0, true}, observed, now, backoff_);
  carry_out(plan, nullptr, now);
  reconcile::RecipeObservation out = observation(recipe, plan);
  if (out.replicas.empty()) {  // all gone: nothing to remember
    failures_by_recipe_.erase(recipe);
    exits_by_recipe_.erase(recipe);
  }
  return out;
}

int LocalBackend::carry_out(const reconcile::Plan& plan, const reconcile::DesiredState* desired,
                            reconcile::Clock::time_point now) {
  int restarted = 0;
  for (const reconcile::Action& action : plan.actions) {
    switch (action.kind) {
      case reconcile::ActionKind::kStart:
        if (desired != nullptr && !desired->hold_starts) start(*desired, action.reason, now);
        break;
      case reconcile::ActionKind::kDrain: {
        auto it = replicas_.find(action.replica_id);
        if (it == replicas_.end()) break;
        Replica& r = it->second;
        r.phase = ReplicaPhase::kDraining;
        r.drain_deadline = now + config_.deregistration_delay + config_.drain_timeout;
        if (config_.deregistration_delay.count() > 0) {
          r.terminate_at = now + config_.deregistration_delay;
        } else {
          r.process->terminate();
        }
        spdlog::info("draining replica {}: {}", action.replica_id, action.reason);
        break;
      }
      case reconcile::ActionKind::kRemoveExited: {
        auto it = replicas_.find(action.replica_id);
        if (it == replicas_.end()) break;
        failures_by_recipe_[it->second.recipe] = it->second.consecutive_failures;
        remove_record(it->second);
        replicas_.erase(it);
        ++restarted;
        break;
      }
    }
  }
  return restarted;
}

void LocalBackend::start(const reconcile::DesiredState& desired, const std::string& reason,
                         reconcile::Clock::time_point now) {
  const recipe::ModelRecipe& recipe = desired.recipe;
  Replica r;
  r.id = new_replica_id(recipe.name);
  r.recipe = recipe.name;
  r.spec_hash = desired.revision;
  r.log_file = config_.state_dir / "logs" / (r.id + ".log");
  r.key_file = config_.state_dir / "keys" / (r.id + ".key");
  r.api_key = write_key_file(r.key_file);
  const int port = pick_free_port();
  EngineLaunch launch{
      config_.engine_binary,
      reconcile::engine_serve_args(recipe, {desired.model_dir.string(), "127.0.0.1", port,
                                            desired.draft_model_dir.string()}),
      r.log_file, config_.engine_user};
  for (const std::string& a : config_.extra_engine_args) launch.args.push_back(a);
  launch.args.insert(launch.args.end(), {"--api-key-file", r.key_file.string()});
  r.process = EngineProcess::start(launch, port);
  r.since = now;
  r.consecutive_failures = failures_by_recipe_[recipe.name];
  write_record(r);
  spdlog::info("started replica {} of {} (pid {}, port {}): {}", r.id, recipe.name,
               r.process->pid(), port, reason);
  replicas_.emplace(r.id, std::move(r));
}

reconcile::RecipeObservation LocalBackend::observation(const std::string& recipe,
                                                       const reconcile::Plan& plan) const {
  reconcile::RecipeObservation out;
  out.replicas = replicas(recipe);
  out.crash_loop = plan.crash_loop;
  out.retry_at = plan.next_wake;
  auto it = exits_by_recipe_.find(recipe);
  if (it != exits_by_recipe_.end()) out.exits.assign(it->second.begin(), it->second.end());
  return out;
}

std::vector<reconcile::ReplicaView> LocalBackend::replicas(const std::string& recipe) const {
  std::vector<reconcile::ReplicaView> out;
  for (const auto& [id, r] : replicas_) {
    if (r.recipe != recipe) continue;
    out.push_back({id,
                   r.spec_hash,
                   r.phase,
                   {"127.0.0.1", r.process->port(), r.api_key},
                   r.consecutive_failures,
                   r.last_error,
                   r.process->pid(),
                   r.log_file.string()});
  }
  return out;
}

std::vector<std::string> LocalBackend::recipes() const {
  std::vector<std::string> out;
  for (const auto& [id, r] : replicas_) out.push_back(r.recipe);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

void LocalBackend::stop_all(std::chrono::seconds grace) {
  for (auto& [id, r] : replicas_) r.process->terminate();
  const auto deadline = reconcile::Clock::now() + grace;
  for (auto& [id, r] : replicas_) {
    while (!r.process->exit_status() && reconcile::Clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    if (!r.process->exit_status()) r.process->kill();
    for (int i = 0; i < 100 && !r.process->exit_status(); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    remove_record(r);
  }
  replicas_.clear();
}

}  // namespace nibble::local
