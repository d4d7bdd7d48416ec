#pragma once
// The set of metric families a process exposes, rendered as one /metrics page.
// Registering a name twice with the same type, help, labels (and buckets) returns the
// existing family, so independent components can share a registry; any mismatch throws.
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "metrics/family.h"

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

  // The whole registry in the text exposition format 0.0.4, families sorted by name.
  std::string render() const;

 private:
  FamilyBase* find_compatible(const std::string& name, MetricType type, const std::string& help,
                              const std::vector<std::string>& label_names) const;

  mutable std::mutex mutex_;
  std::map<std::string, std::unique_ptr<FamilyBase>> families_;
};

// The process-wide registry: the one piece of global mutable state the style allows.
Registry& default_registry();

}  // namespace nibble::metrics
