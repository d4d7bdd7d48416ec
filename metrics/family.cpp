#include "metrics/family.h"

#include <set>

#include "metrics/exposition.h"
#include "metrics/metrics_error.h"
#include "metrics/names.h"

namespace nibble::metrics {
namespace {

LabelPairs zip_labels(const std::vector<std::string>& names,
                      const std::vector<std::string>& values) {
  LabelPairs pairs;
  pairs.reserve(names.size() + 1);
  for (std::size_t i = 0; i < names.size(); ++i) pairs.emplace_back(names[i], values[i]);
  return pairs;
}

void append_header(std::string& out, const FamilyBase& family) {
  out += "# HELP " + family.name() + " " + escape_help(family.help()) + "\n";
  out += "# TYPE " + family.name() + " " + metric_type_name(family.type()) + "\n";
}

}  // namespace

const char* metric_type_name(MetricType type) {
  switch (type) {
    case MetricType::kCounter:
      return "counter";
    case MetricType::kGauge:
      return "gauge";
    case MetricType::kHistogram:
      return "histogram";
  }
  return "untyped";
}

FamilyBase::FamilyBase(MetricType type, std::string name, std::string help,
                       std::vector<std::string> label_names)
    : type_(type),
      name_(std::move(name)),
      help_(std::move(help)),
      label_names_(std::move(label_names)) {
  check_metric_name(name_);
  if (help_.empty()) throw MetricsError("metric '" + name_ + "': help text must not be empty");
  if (type_ == MetricType::kCounter && !name_.ends_with("_total")) {
    throw MetricsError("counter '" + name_ + "': counter names must end in '_total'");
  }
  if (type_ == MetricType::kHistogram) {
    for (const char* suffix : {"_bucket", "_sum", "_count"}) {
      if (name_.ends_with(suffix)) {
        throw MetricsError("histogram '" + name_ + "': name must not end in '" + suffix +
                           "' (the exposition adds it)");
      }
    }
  }
  std::set<std::string> seen;
  for (const std::string& label : label_names_) {
    check_label_name(name_, label);
    if (type_ == MetricType::kHistogram && label == "le") {
      throw MetricsError("histogram '" + name_ + "': label name 'le' is reserved for buckets");
    }
    if (!seen.insert(label).second) {
      throw MetricsError("metric '" + name_ + "': label name '" + label + "' appears twice");
    }
  }
}

void FamilyBase::check_label_values(const std::vector<std::string>& values) const {
  if (values.size() != label_names_.size()) {
    throw MetricsError("metric '" + name_ + "': expected " + std::to_string(label_names_.size()) +
                       " label values, got " + std::to_string(values.size()));
  }
}

template <>
void Family<Counter>::render(std::string& out) const {
  std::lock_guard lock(mutex_);
  if (children_.empty()) return;
  append_header(out, *this);
  for (const auto& [values, counter] : children_) {
    append_sample(out, name(), zip_labels(label_names(), values), counter->value());
  }
}

template <>
void Family<Gauge>::render(std::string& out) const {
  std::lock_guard lock(mutex_);
  if (children_.empty()) return;
  append_header(out, *this);
  for (const auto& [values, gauge] : children_) {
    append_sample(out, name(), zip_labels(label_names(), values), gauge->value());
  }
}

template <>
void Family<Histogram>::render(std::string& out) const {
  std::lock_guard lock(mutex_);
  if (children_.empty()) return;
  append_header(out, *this);
  const std::string bucket_name = name() + "_bucket";
  for (const auto& [values, histogram] : children_) {
    const HistogramSnapshot snap = histogram->snapshot();
    LabelPairs labels = zip_labels(label_names(), values);
    labels.emplace_back("le", "");
    for (std::size_t i = 0; i < snap.cumulative.size(); ++i) {
      labels.back().second =
          i < snap.upper_bounds.size() ? format_value(snap.upper_bounds[i]) : "+Inf";
      append_sample(out, bucket_name, labels, static_cast<double>(snap.cumulative[i]));
    }
    labels.pop_back();
    append_sample(out, name() + "_sum", labels, snap.sum);
    append_sample(out, name() + "_count", labels, static_cast<double>(snap.count()));
  }
}

HistogramFamily::HistogramFamily(std::string name, std::string help,
                                 std::vector<std::string> label_names,
                                 std::vector<double> upper_bounds)
    : Family<Histogram>(MetricType::kHistogram, std::move(name), std::move(help),
                        std::move(label_names)),
      upper_bounds_(std::move(upper_bounds)) {
  check_bucket_bounds(upper_bounds_);
}

}  // namespace nibble::metrics
