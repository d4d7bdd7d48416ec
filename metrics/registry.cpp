#include "metrics/registry.h"

#include "metrics/metrics_error.h"

namespace nibble::metrics {

FamilyBase* Registry::find_compatible(const std::string& name, MetricType type,
                                      const std::string& help,
                                      const std::vector<std::string>& label_names) const {
  auto it = families_.find(name);
  if (it == families_.end()) return nullptr;
  const FamilyBase& existing = *it->second;
  if (existing.type() != type || existing.help() != help || existing.label_names() != label_names) {
    throw MetricsError("metric '" + name + "' is already registered as a " +
                       metric_type_name(existing.type()) +
                       " with different help text or label names");
  }
  return it->second.get();
}

CounterFamily& Registry::counter(const std::string& name, const std::string& help,
                                 std::vector<std::string> label_names) {
  std::lock_guard lock(mutex_);
  if (auto* found = find_compatible(name, MetricType::kCounter, help, label_names)) {
    return static_cast<CounterFamily&>(*found);
  }
  auto family =
      std::make_unique<CounterFamily>(MetricType::kCounter, name, help, std::move(label_names));
  auto& ref = *family;
  families_.emplace(name, std::move(family));
  if (ref.label_names().empty()) ref.labels({});  // an unlabelled metric is exposed from the start
  return ref;
}

GaugeFamily& Registry::gauge(const std::string& name, const std::string& help,
                             std::vector<std::string> label_names) {
  std::lock_guard lock(mutex_);
  if (auto* found = find_compatible(name, MetricType::kGauge, help, label_names)) {
    return static_cast<GaugeFamily&>(*found);
  }
  auto family =
      std::make_unique<GaugeFamily>(MetricType::kGauge, name, help, std::move(label_names));
  auto& ref = *family;
  families_.emplace(name, std::move(family));
  if (ref.label_names().empty()) ref.labels({});
  return ref;
}

HistogramFamily& Registry::histogram(const std::string& name, const std::string& help,
                                     std::vector<double> upper_bounds,
                                     std::vector<std::string> label_names) {
  std::lock_guard lock(mutex_);
  if (auto* found = find_compatible(name, MetricType::kHistogram, help, label_names)) {
    auto& existing = static_cast<HistogramFamily&>(*found);
    if (existing.upper_bounds() != upper_bounds) {
      throw MetricsError("histogram '" + name + "' is already registered with other buckets");
    }
    return existing;
  }
  auto family = std::make_unique<HistogramFamily>(name, help, std::move(label_names),
                                                  std::move(upper_bounds));
  auto& ref = *family;
  families_.emplace(name, std::move(family));
  if (ref.label_names().empty()) ref.labels({});
  return ref;
}

std::string Registry::render() const {
  std::lock_guard lock(mutex_);
  std::string out;
  for (const auto& [name, family] : families_) family->render(out);
  return out;
}

Registry& default_registry() {
  static Registry registry;
  return registry;
}

}  // namespace nibble::metrics
