#pragma once
// Validation of metric and label names against the Prometheus data model
// (metric: [a-zA-Z_:][a-zA-Z0-9_:]*, label: [a-zA-Z_][a-zA-Z0-9_]*, "__" prefix reserved).
#include <string_view>

namespace nibble::metrics {

bool is_valid_metric_name(std::string_view name);
bool is_valid_label_name(std::string_view name);

// Throw MetricsError naming the offending name and the rule it breaks.
void check_metric_name(std::string_view name);
void check_label_name(std::string_view metric, std::string_view label);

}  // namespace nibble::metrics
