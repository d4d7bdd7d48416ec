#pragma once
// Replica counts from load: desired = ceil(load / targetPerReplica), clamped to [min, max].
// Up at once; down only after the lower load has lasted scaleDownDelaySeconds; to zero (when
// min is 0) only after idleSecondsBeforeZero without a request. The first decision resumes from
// spec.replicas.desired (the count last published) when set. With autoscaling.enabled false it
// stands aside: spec.replicas.desired clamped to [min, max], else min. Pure: the controller
// feeds it the load it measured (router in-flight counts, engines' /metrics) and the time.
#include <chrono>
#include <string>

#include "controller/recipe/model_recipe.h"

namespace nibble::autoscaler {

using Clock = std::chrono::steady_clock;

struct Load {
  double inflight = 0;               // router requests in flight + held, all replicas
  double running = 0;                // sum of nibble_requests_running
  double waiting = 0;                // sum of nibble_requests_waiting
  double kv_cache_usage = 0;         // mean of nibble_kv_cache_usage_ratio over ready replicas
  Clock::time_point last_request{};  // zero: never
  bool demand = false;               // a request is held for a recipe at zero replicas
};

// What the autoscaler remembers between passes for one recipe.
struct ScaleState {
  int desired = -1;                 // -1: not decided yet (starts at replicas.min)
  Clock::time_point lower_since{};  // since when the load has asked for fewer replicas
};

struct Decision {
  int desired = 0;
  std::string reason;  // logged with its inputs
};

Decision decide(const recipe::ModelRecipe& recipe, const Load& load, ScaleState& state,
                Clock::time_point now);

// The value of the recipe's metric in `load`.
double load_signal(const recipe::Autoscaling& autoscaling, const Load& load);

}  // namespace nibble::autoscaler
