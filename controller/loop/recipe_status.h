#pragma once
// What `nibble get recipes` / `describe` show and status files hold, shaped like a
// Kubernetes status: phase, replica counts, generations, endpoint and conditions
// (Ready, Progressing, Degraded) with reason, message and transition time.
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace nibble::controller {

struct Condition {
  std::string type;    // Ready | Progressing | Degraded
  std::string status;  // "True" | "False"
  std::string reason;  // CamelCase, e.g. CrashLoopBackOff, InvalidSpec, RollingUpdate
  std::string message;
  std::string last_transition_time;  // RFC 3339, kept while status stays the same
};

struct EngineStatus {  // one replica's engine process
  std::string id;
  std::string phase;  // Starting | Ready | Exited | Draining
  int pid = 0;
  int port = 0;
  bool up_to_date = true;  // runs the current spec
  std::string log_file;
};

struct RecipeStatus {
  std::string name;
  std::string served_name;
  std::string
      phase;  // Invalid | Downloading | Pending | Progressing | Ready | Degraded | ScaledToZero
  int desired_replicas = 0;
  int replicas = 0;
  int ready_replicas = 0;
  std::int64_t generation = 0;
  std::int64_t observed_generation = 0;
  std::string endpoint;
  std::vector<Condition> conditions;
  std::string last_error;
  std::string autoscaler;  // the last decision and its inputs
  std::vector<EngineStatus> engines;
};

nlohmann::json to_json(const RecipeStatus& status);
RecipeStatus status_from_json(const nlohmann::json& j);

// Sets a condition, keeping its transition time when the status did not change.
void set_condition(std::vector<Condition>& conditions, Condition c,
                   const std::vector<Condition>& previous);
std::string rfc3339_now();

}  // namespace nibble::controller
