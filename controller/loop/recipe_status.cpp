#include "controller/loop/recipe_status.h"

#include <chrono>
#include <ctime>

namespace nibble::controller {

std::string rfc3339_now() {
  const std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

void apply_derived(RecipeStatus& st, const reconcile::DerivedStatus& derived,
                   const RecipeStatus& previous, const std::string& now) {
  st.phase = derived.phase;
  st.last_error = derived.last_error;
  st.conditions.clear();
  for (const reconcile::ConditionState& c : derived.conditions) {
    Condition out{c.type, c.status, c.reason, c.message, now, st.observed_generation};
    for (const Condition& p : previous.conditions) {
      if (p.type == c.type && p.status == c.status && !p.last_transition_time.empty())
        out.last_transition_time = p.last_transition_time;
    }
    st.conditions.push_back(std::move(out));
  }
}

const char* to_string(reconcile::ReplicaPhase phase) {
  switch (phase) {
    case reconcile::ReplicaPhase::kStarting:
      return "Starting";
    case reconcile::ReplicaPhase::kReady:
      return "Ready";
    case reconcile::ReplicaPhase::kExited:
      return "Exited";
    case reconcile::ReplicaPhase::kDraining:
      return "Draining";
  }
  return "Unknown";
}

nlohmann::json to_crd_status(const RecipeStatus& s) {
  nlohmann::json conditions = nlohmann::json::array();
  for (const Condition& c : s.conditions) {
    conditions.push_back({{"type", reconcile::to_string(c.type)},
                          {"status", c.status ? "True" : "False"},
                          {"reason", reconcile::to_string(c.reason)},
                          {"message", c.message},
                          {"lastTransitionTime", c.last_transition_time},
                          {"observedGeneration", c.observed_generation}});
  }
  return {{"phase", reconcile::to_string(s.phase)},
          {"desiredReplicas", s.desired_replicas},
          {"replicas", s.replicas},
          {"readyReplicas", s.ready_replicas},
          {"observedGeneration", s.observed_generation},
          {"endpoint", s.endpoint},
          {"conditions", conditions},
          {"lastError", s.last_error},
          {"autoscaler", s.autoscaler}};
}

nlohmann::json to_json(const RecipeStatus& s) {
  nlohmann::json j = to_crd_status(s);
  nlohmann::json engines = nlohmann::json::array();
  for (const EngineStatus& e : s.engines) {
    engines.push_back({{"id", e.id},
                       {"phase", to_string(e.phase)},
                       {"pid", e.pid},
                       {"host", e.host},
                       {"port", e.port},
                       {"upToDate", e.up_to_date},
                       {"restarts", e.restarts},
                       {"logFile", e.log_file}});
  }
  j["name"] = s.name;
  j["servedName"] = s.served_name;
  j["generation"] = s.generation;
  j["engines"] = engines;
  return j;
}

}  // namespace nibble::controller
