#pragma once
// A metric family: one name, help text and label names, with one child metric per
// distinct set of label values. Children are created on first use under the family's
// lock and never move, so callers keep the reference and update it lock-free.
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <type_traits>
#include <vector>

#include "metrics/counter.h"
#include "metrics/gauge.h"
#include "metrics/histogram.h"

namespace nibble::metrics {

enum class MetricType { kCounter, kGauge, kHistogram };
const char* metric_type_name(MetricType type);

class FamilyBase {
 public:
  FamilyBase(MetricType type, std::string name, std::string help,
             std::vector<std::string> label_names);
  virtual ~FamilyBase() = default;

  MetricType type() const { return type_; }
  const std::string& name() const { return name_; }
  const std::string& help() const { return help_; }
  const std::vector<std::string>& label_names() const { return label_names_; }

  // Appends this family in the text exposition format; nothing if it has no children.
  virtual void render(std::string& out) const = 0;

 protected:
  void check_label_values(const std::vector<std::string>& values) const;

 private:
  MetricType type_;
  std::string name_;
  std::string help_;
  std::vector<std::string> label_names_;
};

template <typename Metric>
class Family : public FamilyBase {
 public:
  using FamilyBase::FamilyBase;

  // The child for these label values, in the order of label_names(); created if new.
  Metric& labels(const std::vector<std::string>& values) {
    check_label_values(values);
    std::lock_guard lock(mutex_);
    auto it = children_.find(values);
    if (it == children_.end()) it = children_.emplace(values, make_child()).first;
    return *it->second;
  }

  void render(std::string& out) const override;

 protected:
  // Histograms need their bucket bounds, so HistogramFamily overrides this.
  virtual std::unique_ptr<Metric> make_child() const {
    if constexpr (std::is_default_constructible_v<Metric>)
      return std::make_unique<Metric>();
    else
      return nullptr;
  }

  mutable std::mutex mutex_;
  std::map<std::vector<std::string>, std::unique_ptr<Metric>> children_;
};

// Rendering differs per metric type; defined in family.cpp.
template <>
void Family<Counter>::render(std::string& out) const;
template <>
void Family<Gauge>::render(std::string& out) const;
template <>
void Family<Histogram>::render(std::string& out) const;

using CounterFamily = Family<Counter>;
using GaugeFamily = Family<Gauge>;

class HistogramFamily : public Family<Histogram> {
 public:
  HistogramFamily(std::string name, std::string help, std::vector<std::string> label_names,
                  std::vector<double> upper_bounds);
  const std::vector<double>& upper_bounds() const { return upper_bounds_; }

 private:
  std::unique_ptr<Histogram> make_child() const override {
    return std::make_unique<Histogram>(upper_bounds_);
  }
  std::vector<double> upper_bounds_;
};

}  // namespace nibble::metrics
