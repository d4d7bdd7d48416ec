#pragma once
// The project's metric naming rules, checked when a family is registered so that a bad name
// fails at start-up with a message naming the rule:
// - Prometheus syntax (metric [a-zA-Z_:][a-zA-Z0-9_:]*, label [a-zA-Z_][a-zA-Z0-9_]*, "__"
//   reserved), checked by prometheus-cpp;
// - every family is named nibble_<subsystem>_<name>[_<unit>] in snake case, without ':'
//   (reserved for recording rules);
// - base units only: seconds not milliseconds, bytes not megabytes, ratios (0-1) not percent;
// - counters end in _total and nothing else does;
// - histograms do not end in _bucket, _sum or _count (the exposition adds them) and do not use
//   the label le (it names the bucket);
// - help text is not empty; label names are distinct.
#include <string>
#include <string_view>
#include <vector>

namespace nibble::metrics {

enum class MetricType { kCounter, kGauge, kHistogram };
const char* metric_type_name(MetricType type);

inline constexpr std::string_view kMetricPrefix = "nibble_";

// Prometheus data-model syntax only (what any Prometheus server accepts).
bool is_valid_metric_name(std::string_view name);
bool is_valid_label_name(std::string_view name);

// Every rule above; throws MetricsError naming the family and the rule it breaks.
void check_family(MetricType type, std::string_view name, std::string_view help,
                  const std::vector<std::string>& label_names);

}  // namespace nibble::metrics
