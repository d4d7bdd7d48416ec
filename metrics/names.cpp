#include "metrics/names.h"

#include <string>

#include "metrics/metrics_error.h"

namespace nibble::metrics {
namespace {

bool is_alpha_or_underscore(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

}  // namespace

bool is_valid_metric_name(std::string_view name) {
  if (name.empty()) return false;
  if (!is_alpha_or_underscore(name[0]) && name[0] != ':') return false;
  for (char c : name.substr(1)) {
    if (!is_alpha_or_underscore(c) && !is_digit(c) && c != ':') return false;
  }
  return true;
}

bool is_valid_label_name(std::string_view name) {
  if (name.empty() || !is_alpha_or_underscore(name[0])) return false;
  if (name.starts_with("__")) return false;
  for (char c : name.substr(1)) {
    if (!is_alpha_or_underscore(c) && !is_digit(c)) return false;
  }
  return true;
}

void check_metric_name(std::string_view name) {
  if (!is_valid_metric_name(name)) {
    throw MetricsError("invalid metric name '" + std::string(name) +
                       "': must match [a-zA-Z_:][a-zA-Z0-9_:]*");
  }
}

void check_label_name(std::string_view metric, std::string_view label) {
  if (!is_valid_label_name(label)) {
    throw MetricsError("metric '" + std::string(metric) + "': invalid label name '" +
                       std::string(label) +
                       "': must match [a-zA-Z_][a-zA-Z0-9_]* and not start with '__'");
  }
}

}  // namespace nibble::metrics
