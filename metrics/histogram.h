#pragma once
// A distribution of observations in cumulative buckets (Prometheus histogram).
// observe() is lock-free: one bucket count and the sum go to this thread's stripe.
// The count is derived from the buckets when read, so a scrape always sees
// _count == the +Inf bucket, even while observations are landing.
#include <cstdint>
#include <memory>
#include <vector>

#include "metrics/striped_cell.h"

namespace nibble::metrics {

struct HistogramSnapshot {
  std::vector<double> upper_bounds;       // finite bounds, ascending; +Inf is implicit
  std::vector<std::uint64_t> cumulative;  // size upper_bounds.size() + 1, last is +Inf
  double sum = 0.0;
  std::uint64_t count() const { return cumulative.empty() ? 0 : cumulative.back(); }
};

class Histogram {
 public:
  // Bounds must be finite and strictly increasing; the +Inf bucket is added here.
  explicit Histogram(std::vector<double> upper_bounds);

  void observe(double value);
  HistogramSnapshot snapshot() const;
  const std::vector<double>& upper_bounds() const { return upper_bounds_; }

 private:
  std::vector<double> upper_bounds_;
  // One cell per bucket (non-cumulative), the last one for values above every bound.
  std::unique_ptr<StripedCell<std::uint64_t>[]> bucket_counts_;
  StripedCell<double> sum_;
};

// Validates bounds (non-empty, finite, strictly increasing) and throws MetricsError otherwise.
void check_bucket_bounds(const std::vector<double>& upper_bounds);

// Bucket helpers in the style of the Prometheus client libraries.
std::vector<double> linear_buckets(double start, double width, int count);
std::vector<double> exponential_buckets(double start, double factor, int count);

}  // namespace nibble::metrics
