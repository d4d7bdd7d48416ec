#pragma once
// The local backend: carries out reconcile actions as engine processes on this machine and
// reports what runs. Each replica gets a free port and a log file under the state directory,
// and a record (replicas/<id>.json: pid, port, spec hash) from which a restarted controller
// adopts the engines still running instead of starting duplicates.
#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "controller/local/engine_process.h"
#include "controller/recipe/model_recipe.h"
#include "controller/reconcile/reconcile.h"

namespace nibble::local {

struct LocalBackendConfig {
  std::string engine_binary = "nibble-engine";
  std::filesystem::path state_dir;
  std::chrono::seconds drain_timeout{30};      // SIGTERM, then SIGKILL after this
  std::vector<std::string> extra_engine_args;  // e.g. --threads 2 for tests
  std::optional<EngineUser> engine_user;       // --engine-user: engines run as this user
};

struct ReplicaInfo {  // for status and `nibble describe`
  std::string id, spec_hash, log_file;
  reconcile::ReplicaPhase phase = reconcile::ReplicaPhase::kStarting;
  int pid = 0, port = 0;
};

struct ReadyEndpoint {
  std::string replica_id;
  int port = 0;
};

class LocalBackend {
 public:
  explicit LocalBackend(LocalBackendConfig config);
  ~LocalBackend();  // leaves engines running: a restarted controller adopts them

  // Picks up engines recorded in the state directory that are still alive.
  void adopt_running();
  // Refreshes process state and health; returns what reconcile needs for one recipe.
  std::vector<reconcile::ObservedReplica> observe(const std::string& recipe,
                                                  reconcile::Clock::time_point now);
  // Carries out one action for the recipe. model_dir is the local model directory.
  void apply(const recipe::ModelRecipe& recipe, const std::string& spec_hash,
             const std::filesystem::path& model_dir, const reconcile::Action& action,
             reconcile::Clock::time_point now);
  std::vector<ReadyEndpoint> ready_endpoints(const std::string& recipe) const;
  std::vector<ReplicaInfo> replicas(const std::string& recipe) const;
  // Recipes that still have replicas (so deleted recipes get drained).
  std::vector<std::string> recipes() const;
  // The last exit of a replica of this recipe, for status messages ("" if none).
  std::string last_exit(const std::string& recipe) const;
  // Stops everything now (tests, and `nibble-controller --stop-engines-on-exit`).
  void stop_all(std::chrono::seconds grace);

 private:
  struct Replica {
    std::string id, recipe, spec_hash;
    std::filesystem::path log_file;
    std::unique_ptr<EngineProcess> process;
    reconcile::ReplicaPhase phase = reconcile::ReplicaPhase::kStarting;
    reconcile::Clock::time_point since{}, drain_deadline{};
    int consecutive_failures = 0;
  };
  void write_record(const Replica& r) const;
  void remove_record(const Replica& r) const;
  std::filesystem::path record_path(const std::string& id) const;

  LocalBackendConfig config_;
  std::map<std::string, Replica> replicas_;        // by id
  std::map<std::string, int> failures_by_recipe_;  // carried to the next start
  std::map<std::string, std::string> last_exit_by_recipe_;
  reconcile::BackoffPolicy backoff_;
};

}  // namespace nibble::local
