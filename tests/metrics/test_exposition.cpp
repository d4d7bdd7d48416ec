#include <gtest/gtest.h>

#include <limits>

#include "metrics/exposition.h"

namespace nibble::metrics {
namespace {

TEST(Exposition, EscapesHelpText) {
  EXPECT_EQ(escape_help("a\\b\nc \"quoted\""), "a\\\\b\\nc \"quoted\"");
}

prometheus::ClientMetric gauge_sample(std::string label_value, double value) {
  prometheus::ClientMetric metric;
  metric.label = {{"kind", std::move(label_value)}};
  metric.gauge.value = value;
  return metric;
}

TEST(Exposition, SortsFamiliesByNameAndSeriesByLabels) {
  std::vector<prometheus::MetricFamily> families = {
      {"nibble_b", "B.", prometheus::MetricType::Gauge, {gauge_sample("z", 1)}},
      {"nibble_a",
       "A.",
       prometheus::MetricType::Gauge,
       {gauge_sample("y\"q", 0.25), gauge_sample("x", -std::numeric_limits<double>::infinity())}},
  };
  EXPECT_EQ(serialize_text(families),
            "# HELP nibble_a A.\n"
            "# TYPE nibble_a gauge\n"
            "nibble_a{kind=\"x\"} -Inf\n"
            "nibble_a{kind=\"y\\\"q\"} 0.25\n"
            "# HELP nibble_b B.\n"
            "# TYPE nibble_b gauge\n"
            "nibble_b{kind=\"z\"} 1\n");
}

}  // namespace
}  // namespace nibble::metrics
