#include <gtest/gtest.h>

#include "metrics/metrics_error.h"
#include "metrics/names.h"
#include "metrics/registry.h"

namespace nibble::metrics {
namespace {

TEST(MetricNames, AcceptsPrometheusNames) {
  for (const char* name : {"a", "_x", "nibble_requests_total", "ns:sub_name", "A1_b2", ":colon"}) {
    EXPECT_TRUE(is_valid_metric_name(name)) << name;
  }
}

TEST(MetricNames, RejectsInvalidNames) {
  for (const char* name : {"", "1abc", "with-dash", "has space", "uni\xc3\xa9", "dot.name"}) {
    EXPECT_FALSE(is_valid_metric_name(name)) << name;
  }
}

TEST(LabelNames, RejectsReservedAndInvalid) {
  EXPECT_TRUE(is_valid_label_name("model_name"));
  EXPECT_TRUE(is_valid_label_name("_private"));
  EXPECT_FALSE(is_valid_label_name("__name__"));
  EXPECT_FALSE(is_valid_label_name("a:b"));  // colons are for metric names only
  EXPECT_FALSE(is_valid_label_name("9lives"));
  EXPECT_FALSE(is_valid_label_name(""));
}

TEST(Registration, InvalidNamesFailAtCreationWithAClearMessage) {
  Registry registry;
  try {
    registry.gauge("bad-name", "help");
    FAIL() << "expected MetricsError";
  } catch (const MetricsError& e) {
    EXPECT_NE(std::string(e.what()).find("bad-name"), std::string::npos);
  }
  EXPECT_THROW(registry.gauge("ok_name", "help", {"bad label"}), MetricsError);
  EXPECT_THROW(registry.gauge("ok_name2", "help", {"a", "a"}), MetricsError);
  EXPECT_THROW(registry.counter("requests", "help"), MetricsError);  // no _total
  EXPECT_THROW(registry.histogram("latency_seconds", "help", {1}, {"le"}), MetricsError);
  EXPECT_THROW(registry.histogram("latency_seconds_count", "help", {1}), MetricsError);
  EXPECT_THROW(registry.gauge("no_help", ""), MetricsError);
  // A failed registration leaves nothing behind.
  EXPECT_EQ(registry.render(), "");
}

}  // namespace
}  // namespace nibble::metrics
