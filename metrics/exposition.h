#pragma once
// The Prometheus text exposition format, version 0.0.4: escaping and number formatting.
// https://prometheus.io/docs/instrumenting/exposition_formats/
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace nibble::metrics {

inline constexpr const char* kExpositionContentType = "text/plain; version=0.0.4; charset=utf-8";

// HELP text: backslash and newline are escaped.
std::string escape_help(std::string_view help);
// Label values: backslash, double quote and newline are escaped.
std::string escape_label_value(std::string_view value);
// Shortest text that reads back as the same double; +Inf, -Inf and NaN as Prometheus spells them.
std::string format_value(double value);

using LabelPairs = std::vector<std::pair<std::string, std::string>>;

// Appends one sample line: name{l1="v1",...} value
void append_sample(std::string& out, std::string_view name, const LabelPairs& labels, double value);

}  // namespace nibble::metrics
