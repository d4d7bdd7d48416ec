#pragma once
// The Prometheus text exposition format, version 0.0.4, written by prometheus-cpp's
// TextSerializer. https://prometheus.io/docs/instrumenting/exposition_formats/
#include <prometheus/metric_family.h>

#include <string>
#include <string_view>
#include <vector>

namespace nibble::metrics {

inline constexpr const char* kExpositionContentType = "text/plain; version=0.0.4; charset=utf-8";

// HELP text with backslash and newline escaped. prometheus-cpp 1.0.1 writes HELP verbatim, so
// families hand it escaped text (a raw newline would end the HELP line).
std::string escape_help(std::string_view help);

// The families in the text format, sorted by name and each family's series by labels, so that
// a page reads (and diffs) the same from scrape to scrape.
std::string serialize_text(std::vector<prometheus::MetricFamily> families);

}  // namespace nibble::metrics
