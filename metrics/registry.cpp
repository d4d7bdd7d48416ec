#include "metrics/registry.h"

#include <prometheus/counter.h>
#include <prometheus/gauge.h>

#include "metrics/exposition.h"
#include "metrics/metrics_error.h"

namespace nibble::metrics {
namespace {

// Validates the family, registers it with prometheus-cpp through `build` and wraps it.
template <typename Family, typename Builder>
std::unique_ptr<Family> make_handle_family(MetricType type, Builder build,
                                           prometheus::Registry& registry, const std::string& name,
                                           const std::string& help,
                                           std::vector<std::string> label_names) {
  check_family(type, name, help, label_names);
  auto& family = build().Name(name).Help(escape_help(help)).Register(registry);
  return std::make_unique<Family>(type, name, help, std::move(label_names), family);
}

}  // namespace

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
  auto family = make_handle_family<CounterFamily>(MetricType::kCounter, prometheus::BuildCounter,
                                                  registry_, name, help, std::move(label_names));
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
  auto family = make_handle_family<GaugeFamily>(MetricType::kGauge, prometheus::BuildGauge,
                                                registry_, name, help, std::move(label_names));
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
  check_family(MetricType::kHistogram, name, help, label_names);
  check_bucket_bounds(upper_bounds);
  auto family = std::make_unique<HistogramFamily>(name, help, std::move(label_names),
                                                  std::move(upper_bounds));
  auto& ref = *family;
  families_.emplace(name, std::move(family));
  histograms_.push_back(&ref);
  if (ref.label_names().empty()) ref.labels({});
  return ref;
}

std::vector<prometheus::MetricFamily> Registry::collect() const {
  std::lock_guard lock(mutex_);
  std::vector<prometheus::MetricFamily> families = registry_.Collect();
  for (const HistogramFamily* histogram : histograms_) {
    for (prometheus::MetricFamily& family : histogram->Collect()) {
      families.push_back(std::move(family));
    }
  }
  for (prometheus::MetricFamily& family : families) {
    if (auto it = families_.find(family.name); it != families_.end()) {
      it->second->order_labels(family);
    }
  }
  return families;
}

std::string Registry::render() const {
  return serialize_text(collect());
}

Registry& default_registry() {
  static Registry registry;
  return registry;
}

}  // namespace nibble::metrics
