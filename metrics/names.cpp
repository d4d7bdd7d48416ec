#include "metrics/names.h"

#include <prometheus/check_names.h>

#include <array>
#include <set>
#include <string>

#include "metrics/metrics_error.h"

namespace nibble::metrics {
namespace {

// A name part that is a scaled or non-base unit, with the base unit to use instead.
struct NonBaseUnit {
  std::string_view part;
  std::string_view use;
};
constexpr std::array kNonBaseUnits = {
    NonBaseUnit{"milliseconds", "seconds"},
    NonBaseUnit{"microseconds", "seconds"},
    NonBaseUnit{"nanoseconds", "seconds"},
    NonBaseUnit{"millis", "seconds"},
    NonBaseUnit{"ms", "seconds"},
    NonBaseUnit{"us", "seconds"},
    NonBaseUnit{"ns", "seconds"},
    NonBaseUnit{"sec", "seconds"},
    NonBaseUnit{"secs", "seconds"},
    NonBaseUnit{"minutes", "seconds"},
    NonBaseUnit{"hours", "seconds"},
    NonBaseUnit{"days", "seconds"},
    NonBaseUnit{"weeks", "seconds"},
    NonBaseUnit{"kilobytes", "bytes"},
    NonBaseUnit{"megabytes", "bytes"},
    NonBaseUnit{"gigabytes", "bytes"},
    NonBaseUnit{"terabytes", "bytes"},
    NonBaseUnit{"kb", "bytes"},
    NonBaseUnit{"mb", "bytes"},
    NonBaseUnit{"gb", "bytes"},
    NonBaseUnit{"kib", "bytes"},
    NonBaseUnit{"mib", "bytes"},
    NonBaseUnit{"gib", "bytes"},
    NonBaseUnit{"percent", "ratio (0-1)"},
    NonBaseUnit{"pct", "ratio (0-1)"},
};

[[noreturn]] void fail(MetricType type, std::string_view name, const std::string& rule) {
  throw MetricsError(std::string(metric_type_name(type)) + " '" + std::string(name) + "': " + rule);
}

void check_units(MetricType type, std::string_view name) {
  std::size_t start = 0;
  while (start <= name.size()) {
    std::size_t end = name.find('_', start);
    if (end == std::string_view::npos) end = name.size();
    const std::string_view part = name.substr(start, end - start);
    for (const NonBaseUnit& unit : kNonBaseUnits) {
      if (part == unit.part) {
        fail(type, name,
             "use the base unit " + std::string(unit.use) + " instead of '" + std::string(part) +
                 "'");
      }
    }
    start = end + 1;
  }
}

void check_suffixes(MetricType type, std::string_view name) {
  const bool ends_total = name.ends_with("_total");
  if (type == MetricType::kCounter && !ends_total)
    fail(type, name, "counter names end in '_total'");
  if (type != MetricType::kCounter && ends_total) {
    fail(type, name, "only counter names end in '_total'");
  }
  if (type != MetricType::kHistogram) return;
  for (std::string_view suffix : {"_bucket", "_sum", "_count"}) {
    if (name.ends_with(suffix)) {
      fail(type, name,
           "histogram names do not end in '" + std::string(suffix) + "' (the exposition adds it)");
    }
  }
}

void check_labels(MetricType type, std::string_view name,
                  const std::vector<std::string>& label_names) {
  std::set<std::string_view> seen;
  for (const std::string& label : label_names) {
    if (!is_valid_label_name(label)) {
      fail(type, name,
           "invalid label name '" + label +
               "': must match [a-zA-Z_][a-zA-Z0-9_]* and not start with '__'");
    }
    if (type == MetricType::kHistogram && label == "le") {
      fail(type, name, "label name 'le' is reserved for buckets");
    }
    if (!seen.insert(label).second) fail(type, name, "label name '" + label + "' appears twice");
  }
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

bool is_valid_metric_name(std::string_view name) {
  return prometheus::CheckMetricName(std::string(name));
}

bool is_valid_label_name(std::string_view name) {
  return prometheus::CheckLabelName(std::string(name));
}

void check_family(MetricType type, std::string_view name, std::string_view help,
                  const std::vector<std::string>& label_names) {
  if (!is_valid_metric_name(name)) {
    fail(type, name, "invalid metric name: must match [a-zA-Z_:][a-zA-Z0-9_:]*");
  }
  if (!name.starts_with(kMetricPrefix) || name.size() == kMetricPrefix.size()) {
    fail(type, name, "project metric names start with '" + std::string(kMetricPrefix) + "'");
  }
  for (char c : name) {
    if (c == ':') fail(type, name, "':' is reserved for recording rules");
    if (c >= 'A' && c <= 'Z') fail(type, name, "names are snake_case, without capitals");
  }
  check_units(type, name);
  check_suffixes(type, name);
  if (help.empty()) fail(type, name, "help text must not be empty");
  check_labels(type, name, label_names);
}

}  // namespace nibble::metrics
