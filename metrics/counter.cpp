#include "metrics/counter.h"

#include <string>

#include "metrics/metrics_error.h"

namespace nibble::metrics {

void Counter::inc(double amount) {
  if (!(amount >= 0.0)) {
    throw MetricsError("counter increment must be >= 0, got " + std::to_string(amount));
  }
  total_.add(amount);
}

}  // namespace nibble::metrics
