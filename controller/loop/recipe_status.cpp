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

void set_condition(std::vector<Condition>& conditions, Condition c,
                   const std::vector<Condition>& previous) {
  c.last_transition_time = rfc3339_now();
  for (const Condition& p : previous) {
    if (p.type == c.type && p.status == c.status) c.last_transition_time = p.last_transition_time;
  }
  conditions.push_back(std::move(c));
}

nlohmann::json to_json(const RecipeStatus& s) {
  nlohmann::json conditions = nlohmann::json::array();
  for (const Condition& c : s.conditions) {
    conditions.push_back({{"type", c.type},
                          {"status", c.status},
                          {"reason", c.reason},
                          {"message", c.message},
                          {"lastTransitionTime", c.last_transition_time}});
  }
  nlohmann::json engines = nlohmann::json::array();
  for (const EngineStatus& e : s.engines) {
    engines.push_back({{"id", e.id},
                       {"phase", e.phase},
                       {"pid", e.pid},
                       {"port", e.port},
                       {"upToDate", e.up_to_date},
                       {"logFile", e.log_file}});
  }
  return {{"name", s.name},
          {"servedName", s.served_name},
          {"phase", s.phase},
          {"desiredReplicas", s.desired_replicas},
          {"replicas", s.replicas},
          {"readyReplicas", s.ready_replicas},
          {"generation", s.generation},
          {"observedGeneration", s.observed_generation},
          {"endpoint", s.endpoint},
          {"conditions", conditions},
          {"lastError", s.last_error},
          {"autoscaler", s.autoscaler},
          {"engines", engines}};
}

RecipeStatus status_from_json(const nlohmann::json& j) {
  RecipeStatus s;
  s.name = j.value("name", "");
  s.served_name = j.value("servedName", "");
  s.phase = j.value("phase", "");
  s.desired_replicas = j.value("desiredReplicas", 0);
  s.replicas = j.value("replicas", 0);
  s.ready_replicas = j.value("readyReplicas", 0);
  s.generation = j.value("generation", std::int64_t(0));
  s.observed_generation = j.value("observedGeneration", std::int64_t(0));
  s.endpoint = j.value("endpoint", "");
  s.last_error = j.value("lastError", "");
  s.autoscaler = j.value("autoscaler", "");
  if (j.contains("conditions") && j["conditions"].is_array()) {
    for (const auto& c : j["conditions"]) {
      s.conditions.push_back({c.value("type", ""), c.value("status", ""), c.value("reason", ""),
                              c.value("message", ""), c.value("lastTransitionTime", "")});
    }
  }
  if (j.contains("engines") && j["engines"].is_array()) {
    for (const auto& e : j["engines"]) {
      s.engines.push_back({e.value("id", ""), e.value("phase", ""), e.value("pid", 0),
                           e.value("port", 0), e.value("upToDate", true), e.value("logFile", "")});
    }
  }
  return s;
}

}  // namespace nibble::controller
