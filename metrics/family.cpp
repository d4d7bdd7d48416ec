#include "metrics/family.h"

#include <algorithm>

#include "metrics/metrics_error.h"

namespace nibble::metrics {

FamilyBase::FamilyBase(MetricType type, std::string name, std::string help,
                       std::vector<std::string> label_names)
    : type_(type),
      name_(std::move(name)),
      help_(std::move(help)),
      label_names_(std::move(label_names)) {}

void FamilyBase::order_labels(prometheus::MetricFamily& collected) const {
  auto position = [this](const prometheus::ClientMetric::Label& label) {
    return std::find(label_names_.begin(), label_names_.end(), label.name) - label_names_.begin();
  };
  for (prometheus::ClientMetric& metric : collected.metric) {
    std::stable_sort(metric.label.begin(), metric.label.end(),
                     [&](const auto& a, const auto& b) { return position(a) < position(b); });
  }
}

prometheus::Labels FamilyBase::label_set(const std::vector<std::string>& values) const {
  if (values.size() != label_names_.size()) {
    throw MetricsError("metric '" + name_ + "': expected " + std::to_string(label_names_.size()) +
                       " label values, got " + std::to_string(values.size()));
  }
  prometheus::Labels labels;
  for (std::size_t i = 0; i < values.size(); ++i) labels.emplace(label_names_[i], values[i]);
  return labels;
}

}  // namespace nibble::metrics
