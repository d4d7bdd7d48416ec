#include "controller/router/request_scope.h"

namespace nibble::router {

RequestScope::RequestScope(InflightTracker& tracker, RouterMetrics& metrics, std::string recipe,
                           std::string model_name)
    : tracker_(tracker),
      metrics_(metrics),
      recipe_(std::move(recipe)),
      model_name_(std::move(model_name)),
      started_(std::chrono::steady_clock::now()) {
  tracker_.begin_request(recipe_);
  metrics_.inflight.labels({model_name_}).inc();
  metrics_.retries.labels({model_name_});  // the series exists (at 0) before the first retry
}

RequestScope::~RequestScope() {
  const std::chrono::duration<double> took = std::chrono::steady_clock::now() - started_;
  metrics_.inflight.labels({model_name_}).dec();
  metrics_.requests.labels({model_name_, std::to_string(status_)}).inc();
  metrics_.duration.labels({model_name_}).observe(took.count());
  tracker_.end_request(recipe_);
}

}  // namespace nibble::router
