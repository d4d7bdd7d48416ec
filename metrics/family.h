#pragma once
// A metric family: one name, help text and label names, with one child metric per distinct
// set of label values. Families are created by Registry, which checks the naming rules first.
// Children are created on first use under the family's lock and never move, so callers keep
// the reference and update it without a lookup.
#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/metric_family.h>

#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "metrics/counter.h"
#include "metrics/gauge.h"
#include "metrics/names.h"

namespace nibble::metrics {

class FamilyBase {
 public:
  FamilyBase(MetricType type, std::string name, std::string help,
             std::vector<std::string> label_names);
  virtual ~FamilyBase() = default;

  MetricType type() const { return type_; }
  const std::string& name() const { return name_; }
  const std::string& help() const { return help_; }
  const std::vector<std::string>& label_names() const { return label_names_; }

  // Puts each series' labels of `collected` (this family, as prometheus-cpp collected it, labels
  // sorted by name) back in the order of label_names(), so the exposition reads as declared
  // (model_name first, as vLLM's does) and stays what it was before prometheus-cpp.
  void order_labels(prometheus::MetricFamily& collected) const;

 protected:
  // The label set of a child, pairing label_names() with these values; throws MetricsError
  // when the number of values differs.
  prometheus::Labels label_set(const std::vector<std::string>& values) const;

 private:
  MetricType type_;
  std::string name_;
  std::string help_;
  std::vector<std::string> label_names_;
};

// Counter and gauge families: the prometheus-cpp family owns the metrics (and renders them);
// this keeps one handle per child, so labels() on a known child allocates nothing.
template <typename Metric, typename PrometheusMetric>
class HandleFamily : public FamilyBase {
 public:
  HandleFamily(MetricType type, std::string name, std::string help,
               std::vector<std::string> label_names, prometheus::Family<PrometheusMetric>& family)
      : FamilyBase(type, std::move(name), std::move(help), std::move(label_names)),
        family_(family) {}

  // The child for these label values, in the order of label_names(); created if new.
  Metric& labels(const std::vector<std::string>& values) {
    std::lock_guard lock(mutex_);
    auto it = children_.find(values);
    if (it == children_.end()) {
      it = children_.try_emplace(values, family_.Add(label_set(values))).first;
    }
    return it->second;
  }

 private:
  prometheus::Family<PrometheusMetric>& family_;
  std::mutex mutex_;
  std::map<std::vector<std::string>, Metric> children_;
};

using CounterFamily = HandleFamily<Counter, prometheus::Counter>;
using GaugeFamily = HandleFamily<Gauge, prometheus::Gauge>;

}  // namespace nibble::metrics
