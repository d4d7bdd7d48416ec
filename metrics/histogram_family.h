#pragma once
// Histogram families keep the project's striped Histogram (metrics/histogram.h) instead of
// prometheus::Histogram, whose Observe() takes a mutex and is several times slower under
// contention (numbers in docs/metrics.md). The family hands its series to the registry's
// exposition as a prometheus::Collectable, so the text format is prometheus-cpp's.
#include <prometheus/client_metric.h>
#include <prometheus/collectable.h>
#include <prometheus/metric_family.h>

#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "metrics/family.h"
#include "metrics/histogram.h"

namespace nibble::metrics {

class HistogramFamily : public FamilyBase, public prometheus::Collectable {
 public:
  // Bounds must already satisfy check_bucket_bounds (Registry checks them).
  HistogramFamily(std::string name, std::string help, std::vector<std::string> label_names,
                  std::vector<double> upper_bounds);

  // The child for these label values, in the order of label_names(); created if new.
  Histogram& labels(const std::vector<std::string>& values);
  const std::vector<double>& upper_bounds() const { return upper_bounds_; }

  // Every child's snapshot; nothing while the family has no child.
  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  struct Child {
    Child(std::vector<prometheus::ClientMetric::Label> labels, const std::vector<double>& bounds)
        : labels(std::move(labels)), histogram(bounds) {}
    std::vector<prometheus::ClientMetric::Label> labels;
    Histogram histogram;
  };

  std::string escaped_help_;
  std::vector<double> upper_bounds_;
  mutable std::mutex mutex_;
  std::map<std::vector<std::string>, Child> children_;
};

}  // namespace nibble::metrics
