#pragma once
// The accounting of one client request for a known model: in flight for its recipe (tracker
// and the inflight gauge) from construction to destruction, then counted in
// requests_total{model_name,code} and observed in the duration histogram. A streamed answer
// keeps its scope alive inside the response's content provider, so the duration runs to the
// last byte.
#include <chrono>
#include <string>

#include "controller/router/inflight_tracker.h"
#include "controller/router/router_metrics.h"

namespace nibble::router {

class RequestScope {
 public:
  RequestScope(InflightTracker& tracker, RouterMetrics& metrics, std::string recipe,
               std::string model_name);
  ~RequestScope();
  RequestScope(const RequestScope&) = delete;
  RequestScope& operator=(const RequestScope&) = delete;

  const std::string& recipe() const { return recipe_; }
  const std::string& model_name() const { return model_name_; }
  // The status the client got (or gets); 0 until known.
  void set_status(int status) { status_ = status; }

 private:
  InflightTracker& tracker_;
  RouterMetrics& metrics_;
  std::string recipe_;
  std::string model_name_;
  std::chrono::steady_clock::time_point started_;
  int status_ = 0;
};

// One replica counted in flight for as long as this lives.
class ReplicaLease {
 public:
  ReplicaLease(InflightTracker& tracker, std::string recipe, std::string replica_id)
      : tracker_(&tracker), recipe_(std::move(recipe)), replica_id_(std::move(replica_id)) {}
  ~ReplicaLease() {
    if (tracker_ != nullptr) tracker_->release(recipe_, replica_id_);
  }
  ReplicaLease(ReplicaLease&& other) noexcept
      : tracker_(other.tracker_),
        recipe_(std::move(other.recipe_)),
        replica_id_(std::move(other.replica_id_)) {
    other.tracker_ = nullptr;
  }
  ReplicaLease(const ReplicaLease&) = delete;
  ReplicaLease& operator=(const ReplicaLease&) = delete;
  ReplicaLease& operator=(ReplicaLease&&) = delete;

 private:
  InflightTracker* tracker_;
  std::string recipe_;
  std::string replica_id_;
};

}  // namespace nibble::router
