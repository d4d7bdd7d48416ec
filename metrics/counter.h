#pragma once
// A monotonically increasing value (Prometheus counter): a handle on a prometheus::Counter
// owned by the registry. Negative and NaN increments throw, because they would break rate()
// (prometheus-cpp drops negative ones silently and lets NaN through).
#include <prometheus/counter.h>

#include <string>

#include "metrics/metrics_error.h"

namespace nibble::metrics {

class Counter {
 public:
  explicit Counter(prometheus::Counter& counter) : counter_(counter) {}

  void inc(double amount = 1.0) {
    if (!(amount >= 0.0)) {
      throw MetricsError("counter increment must be >= 0, got " + std::to_string(amount));
    }
    counter_.Increment(amount);
  }
  double value() const { return counter_.Value(); }

 private:
  prometheus::Counter& counter_;
};

}  // namespace nibble::metrics
