#include "metrics/exposition.h"

#include <prometheus/text_serializer.h>

#include <algorithm>
#include <sstream>

namespace nibble::metrics {

std::string escape_help(std::string_view help) {
  std::string out;
  out.reserve(help.size());
  for (char c : help) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

std::string serialize_text(std::vector<prometheus::MetricFamily> families) {
  std::sort(families.begin(), families.end(),
            [](const auto& a, const auto& b) { return a.name < b.name; });
  for (prometheus::MetricFamily& family : families) {
    std::sort(family.metric.begin(), family.metric.end(),
              [](const auto& a, const auto& b) { return a.label < b.label; });
  }
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, families);
  return std::move(out).str();
}

}  // namespace nibble::metrics
