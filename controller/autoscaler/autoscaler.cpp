#include "controller/autoscaler/autoscaler.h"

#include <algorithm>
#include <cmath>
#include <sstream>

namespace nibble::autoscaler {

double load_signal(const recipe::Autoscaling& a, const Load& load) {
  if (a.metric == "running") return load.running;
  if (a.metric == "waiting") return load.waiting;
  if (a.metric == "kv_cache_usage") return load.kv_cache_usage;
  return load.inflight;
}

Decision decide(const recipe::ModelRecipe& recipe, const Load& load, ScaleState& state,
                Clock::time_point now) {
  const recipe::Replicas& bounds = recipe.replicas;
  const recipe::Autoscaling& a = recipe.autoscaling;
  // spec.replicas.desired is the count last published (by this autoscaler through the scale
  // subresource, or by whoever scales while it is off): a restarted controller resumes there.
  const int published =
      bounds.desired ? std::clamp(*bounds.desired, bounds.min, bounds.max) : bounds.min;
  if (state.desired < 0) state.desired = published;
  if (!a.enabled) {
    // Something else decides (kubectl scale, an HPA, KEDA): the built-in autoscaler stands aside.
    std::ostringstream held_why;
    held_why << "autoscaling.enabled=false: ";
    if (bounds.desired) {
      held_why << "spec.replicas.desired=" << *bounds.desired << " -> " << published
               << " (clamped to [" << bounds.min << ", " << bounds.max << "])";
    } else {
      held_why << "spec.replicas.desired unset -> min " << published;
    }
    held_why << "; the built-in autoscaler stands aside";
    state.desired = published;
    state.lower_since = {};
    return {published, held_why.str()};
  }
  const double signal = load_signal(a, load);
  std::ostringstream why;
  why << a.metric << "=" << signal << " target=" << a.target_per_replica
      << " current=" << state.desired;

  // kv_cache_usage is a mean per replica, the others are totals.
  int wanted = a.metric == "kv_cache_usage"
                   ? int(std::ceil(state.desired * signal / a.target_per_replica))
                   : int(std::ceil(signal / a.target_per_replica));
  if (signal > 0 || load.demand) wanted = std::max(wanted, 1);
  const bool idle = load.last_request == Clock::time_point{} ||
                    now - load.last_request >= std::chrono::seconds(a.idle_seconds_before_zero);
  if (wanted == 0 && !idle) wanted = 1;  // scale to zero only after the idle time
  wanted = std::clamp(wanted, bounds.min, bounds.max);

  if (wanted > state.desired) {
    why << " -> scale up to " << wanted;
    state.desired = wanted;
    state.lower_since = {};
  } else if (wanted < state.desired) {
    if (state.lower_since == Clock::time_point{}) state.lower_since = now;
    const auto waited = now - state.lower_since;
    if (waited >= std::chrono::seconds(a.scale_down_delay_seconds)) {
      why << " -> scale down to " << wanted << " after " << a.scale_down_delay_seconds
          << " s of lower load";
      state.desired = wanted;
      state.lower_since = {};
    } else {
      why << " -> would scale down to " << wanted << ", waiting "
          << std::chrono::duration_cast<std::chrono::seconds>(waited).count() << "/"
          << a.scale_down_delay_seconds << " s";
    }
  } else {
    state.lower_since = {};
    why << " -> keep";
  }
  // Bounds may have changed since the last pass.
  state.desired = std::clamp(state.desired, bounds.min, bounds.max);
  return {state.desired, why.str()};
}

}  // namespace nibble::autoscaler
