#include "metrics/histogram_family.h"

#include <limits>

#include "metrics/exposition.h"

namespace nibble::metrics {

HistogramFamily::HistogramFamily(std::string name, std::string help,
                                 std::vector<std::string> label_names,
                                 std::vector<double> upper_bounds)
    : FamilyBase(MetricType::kHistogram, std::move(name), std::move(help), std::move(label_names)),
      escaped_help_(escape_help(this->help())),
      upper_bounds_(std::move(upper_bounds)) {}

Histogram& HistogramFamily::labels(const std::vector<std::string>& values) {
  std::lock_guard lock(mutex_);
  auto it = children_.find(values);
  if (it == children_.end()) {
    std::vector<prometheus::ClientMetric::Label> labels;
    for (const auto& [label, value] : label_set(values)) labels.push_back({label, value});
    it = children_.try_emplace(values, std::move(labels), upper_bounds_).first;
  }
  return it->second.histogram;
}

std::vector<prometheus::MetricFamily> HistogramFamily::Collect() const {
  std::lock_guard lock(mutex_);
  if (children_.empty()) return {};
  prometheus::MetricFamily family{name(), escaped_help_, prometheus::MetricType::Histogram, {}};
  family.metric.reserve(children_.size());
  for (const auto& [values, child] : children_) {
    const HistogramSnapshot snap = child.histogram.snapshot();
    prometheus::ClientMetric metric;
    metric.label = child.labels;
    metric.histogram.sample_count = snap.count();
    metric.histogram.sample_sum = snap.sum;
    for (std::size_t i = 0; i < snap.cumulative.size(); ++i) {
      const double bound = i < snap.upper_bounds.size() ? snap.upper_bounds[i]
                                                        : std::numeric_limits<double>::infinity();
      metric.histogram.bucket.push_back({snap.cumulative[i], bound});
    }
    family.metric.push_back(std::move(metric));
  }
  return {std::move(family)};
}

}  // namespace nibble::metrics
