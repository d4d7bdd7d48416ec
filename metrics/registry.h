#pragma once
// The set of metric families a process exposes, rendered as one /metrics page.
// Every family is created here: its name, help and labels are checked against the project's
// rules (metrics/names.h), then it is registered in a prometheus::Registry (counters, gauges)
// or added beside it as a collectable (histograms, metrics/histogram_family.h).
// Registering a name twice with the same type, help, labels (and buckets) returns the
// existing family, so independent components can share a registry; any mismatch throws.
#include <prometheus/metric_family.h>
#include <prometheus/registry.h>

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "metrics/family.h"
#include "metrics/histogram_family.h"

namespace nibble::metrics {

class Registry {
 public:
  CounterFamily& counter(const std::string& name, const std::string& help,
                         std::vector<std::string> label_names = {});
  GaugeFamily& gauge(const std::string& name, const std::string& help,
                     std::vector<std::string> label_names = {});
  HistogramFamily& histogram(const std::string& name, const std::string& help,
                             std::vector<double> upper_bounds,
                             std::vector<std::string> label_names = {});

  // Every family with at least one series, as prometheus-cpp data, labels in declared order.
  std::vector<prometheus::MetricFamily> collect() const;
  // The whole registry in the text exposition format 0.0.4, families sorted by name.
  std::string render() const;

 private:
  // The family registered under this name, if its type, help and labels match; throws if
  // they differ, nullptr if the name is new.
  FamilyBase* find_compatible(const std::string& name, MetricType type, const std::string& help,
                              const std::vector<std::string>& label_names) const;

  mutable std::mutex mutex_;
  prometheus::Registry registry_;
  std::map<std::string, std::unique_ptr<FamilyBase>> families_;
  std::vector<const HistogramFamily*> histograms_;
};

// The process-wide registry: the one piece of global mutable state the style allows.
Registry& default_registry();

}  // namespace nibble::metrics
