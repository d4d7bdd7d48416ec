#pragma once
// The local backend: a ReplicaBackend (controller/reconcile/replica_backend.h) whose replicas
// are engine processes on this machine. sync() plans with the pure reconcile core
// (start, drain, restart after back-off, rolling update) and carries the plan out. Each
// replica gets a free loopback port and a log file under the state directory, and a record
// (replicas/<id>.json: pid, port, spec hash) from which a restarted controller adopts the
// engines still running instead of starting duplicates.
//
// Each replica also gets its own API key (keys/<id>.key, mode 0600, owned by the engine's
// user), passed as --api-key-file: only the router, which sends it upstream, and the controller
// can use the engine's port. The record names the key file, so adopted engines keep working.
#include <chrono>
#include <deque>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "controller/local/engine_process.h"
#include "controller/recipe/model_recipe.h"
#include "controller/reconcile/reconcile.h"
#include "controller/reconcile/replica_backend.h"

namespace nibble::local {

struct LocalBackendConfig {
  std::string engine_binary = "nibble-engine";
  std::filesystem::path state_dir;
  std::chrono::seconds drain_timeout{30};      // SIGTERM, then SIGKILL after this
  std::vector<std::string> extra_engine_args;  // e.g. --threads 2 for tests
  std::optional<EngineUser> engine_user;       // --engine-user: engines run as this user
  std::size_t exits_kept = 10;                 // exit history per recipe
  // A drained replica gets SIGTERM only this long after it leaves the router's table: requests
  // the router sent it just before still find it accepting (as a Kubernetes preStop sleep does
  // while endpoints update), rather than a 503 with no other replica yet in the table.
  std::chrono::milliseconds deregistration_delay{1000};
};

class LocalBackend final : public reconcile::ReplicaBackend {
 public:
  explicit LocalBackend(LocalBackendConfig config);
  ~LocalBackend() override;  // leaves engines running: a restarted controller adopts them

  // Picks up engines recorded in the state directory that are still alive.
  void adopt_running();

  reconcile::RecipeObservation sync(const reconcile::DesiredState& desired,
                                    reconcile::Clock::time_point now) override;
  reconcile::RecipeObservation drain(const std::string& recipe,
                                     reconcile::Clock::time_point now) override;
  std::vector<reconcile::ReplicaView> replicas(const std::string& recipe) const override;
  std::vector<std::string> recipes() const override;

  // Stops everything now (tests, and the controller's exit without --keep-engines-on-exit).
  void stop_all(std::chrono::seconds grace);

 private:
  struct Replica {
    std::string id, recipe, spec_hash;
    std::filesystem::path log_file, key_file;
    std::string api_key;
    std::unique_ptr<EngineProcess> process;
    reconcile::ReplicaPhase phase = reconcile::ReplicaPhase::kStarting;
    reconcile::Clock::time_point since{}, drain_deadline{};
    std::optional<reconcile::Clock::time_point> terminate_at;  // draining, SIGTERM not sent yet
    int consecutive_failures = 0;
    std::string last_error;
  };
  // Refreshes process state and health of one recipe's replicas (forgets drained ones).
  std::vector<reconcile::ObservedReplica> refresh(const std::string& recipe,
                                                  reconcile::Clock::time_point now);
  // Carries out a plan; starts are skipped when `desired` holds them. Returns the restarts.
  int carry_out(const reconcile::Plan& plan, const reconcile::DesiredState* desired,
                reconcile::Clock::time_point now);
  void start(const reconcile::DesiredState& desired, const std::string& reason,
             reconcile::Clock::time_point now);
  reconcile::RecipeObservation observation(const std::string& recipe,
                                           const reconcile::Plan& plan) const;
  void record_exit(Replica& r, int status);
  void write_record(const Replica& r) const;
  void remove_record(const Replica& r) const;
  std::filesystem::path record_path(const std::string& id) const;
  // Writes a new random key for the replica where only its engine's user can read it.
  std::string write_key_file(const std::filesystem::path& path) const;

  LocalBackendConfig config_;
  std::map<std::string, Replica> replicas_;        // by id
  std::map<std::string, int> failures_by_recipe_;  // carried to the next start
  std::map<std::string, std::deque<reconcile::ReplicaExit>> exits_by_recipe_;
  reconcile::BackoffPolicy backoff_;
};

}  // namespace nibble::local
