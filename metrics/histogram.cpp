#include "metrics/histogram.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "metrics/metrics_error.h"

namespace nibble::metrics {

void check_bucket_bounds(const std::vector<double>& upper_bounds) {
  if (upper_bounds.empty()) throw MetricsError("histogram needs at least one bucket bound");
  for (std::size_t i = 0; i < upper_bounds.size(); ++i) {
    if (!std::isfinite(upper_bounds[i])) {
      throw MetricsError("histogram bucket bound " + std::to_string(i) +
                         " is not finite (+Inf is added automatically)");
    }
    if (i > 0 && !(upper_bounds[i] > upper_bounds[i - 1])) {
      throw MetricsError("histogram bucket bounds must be strictly increasing: bound " +
                         std::to_string(i) + " (" + std::to_string(upper_bounds[i]) +
                         ") <= bound " + std::to_string(i - 1) + " (" +
                         std::to_string(upper_bounds[i - 1]) + ")");
    }
  }
}

Histogram::Histogram(std::vector<double> upper_bounds)
    : upper_bounds_(std::move(upper_bounds)),
      bucket_counts_(new StripedCell<std::uint64_t>[upper_bounds_.size() + 1]) {
  check_bucket_bounds(upper_bounds_);
}

void Histogram::observe(double value) {
  // The first bucket whose bound is >= value ("le" semantics); NaN lands in +Inf.
  auto it = std::lower_bound(upper_bounds_.begin(), upper_bounds_.end(), value);
  bucket_counts_[static_cast<std::size_t>(it - upper_bounds_.begin())].add(1);
  sum_.add(value);
}

HistogramSnapshot Histogram::snapshot() const {
  HistogramSnapshot snap;
  snap.upper_bounds = upper_bounds_;
  snap.cumulative.resize(upper_bounds_.size() + 1);
  std::uint64_t running = 0;
  for (std::size_t i = 0; i <= upper_bounds_.size(); ++i) {
    running += bucket_counts_[i].sum();
    snap.cumulative[i] = running;
  }
  snap.sum = sum_.sum();
  return snap;
}

std::vector<double> linear_buckets(double start, double width, int count) {
  if (count < 1 || !(width > 0))
    throw MetricsError("linear_buckets needs count >= 1 and width > 0");
  std::vector<double> bounds;
  for (int i = 0; i < count; ++i) bounds.push_back(start + width * i);
  return bounds;
}

std::vector<double> exponential_buckets(double start, double factor, int count) {
  if (count < 1 || !(start > 0) || !(factor > 1)) {
    throw MetricsError("exponential_buckets needs count >= 1, start > 0 and factor > 1");
  }
  std::vector<double> bounds;
  double bound = start;
  for (int i = 0; i < count; ++i, bound *= factor) bounds.push_back(bound);
  return bounds;
}

}  // namespace nibble::metrics
