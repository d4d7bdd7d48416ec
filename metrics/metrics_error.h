#pragma once
// The one error type of metrics/: a metric or label that Prometheus would not accept.
#include <stdexcept>
#include <string>

namespace nibble::metrics {

class MetricsError : public std::invalid_argument {
 public:
  explicit MetricsError(const std::string& message) : std::invalid_argument(message) {}
};

}  // namespace nibble::metrics
