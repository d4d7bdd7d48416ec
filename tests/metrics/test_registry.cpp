#include <gtest/gtest.h>

#include "metrics/metrics_error.h"
#include "metrics/registry.h"

namespace nibble::metrics {
namespace {

TEST(Registry, RendersEveryTypeExactly) {
  Registry r;
  r.counter("app_requests_total", "Requests served.", {"code"}).labels({"200"}).inc(3);
  r.gauge("app_temperature_celsius", "Line one\nline two \\ end").labels({}).set(-4.5);
  auto& h = r.histogram("app_latency_seconds", "Latency.", {0.1, 1}, {"path"});
  h.labels({"/a\"b"}).observe(0.05);
  h.labels({"/a\"b"}).observe(0.5);
  h.labels({"/a\"b"}).observe(3);
  EXPECT_EQ(r.render(),
            "# HELP app_latency_seconds Latency.\n"
            "# TYPE app_latency_seconds histogram\n"
            "app_latency_seconds_bucket{path=\"/a\\\"b\",le=\"0.1\"} 1\n"
            "app_latency_seconds_bucket{path=\"/a\\\"b\",le=\"1\"} 2\n"
            "app_latency_seconds_bucket{path=\"/a\\\"b\",le=\"+Inf\"} 3\n"
            "app_latency_seconds_sum{path=\"/a\\\"b\"} 3.55\n"
            "app_latency_seconds_count{path=\"/a\\\"b\"} 3\n"
            "# HELP app_requests_total Requests served.\n"
            "# TYPE app_requests_total counter\n"
            "app_requests_total{code=\"200\"} 3\n"
            "# HELP app_temperature_celsius Line one\\nline two \\\\ end\n"
            "# TYPE app_temperature_celsius gauge\n"
            "app_temperature_celsius -4.5\n");
}

TEST(Registry, UnlabelledMetricsAppearAtZeroLabelledOnesWhenUsed) {
  Registry r;
  r.counter("a_total", "A.");
  r.counter("b_total", "B.", {"kind"});
  const std::string text = r.render();
  EXPECT_NE(text.find("a_total 0\n"), std::string::npos);
  EXPECT_EQ(text.find("b_total"), std::string::npos);
}

TEST(Registry, SameRegistrationReturnsSameFamilyMismatchThrows) {
  Registry r;
  auto& a = r.counter("x_total", "X.", {"l"});
  auto& b = r.counter("x_total", "X.", {"l"});
  EXPECT_EQ(&a, &b);
  EXPECT_THROW(r.gauge("x_total", "X.", {"l"}), MetricsError);
  EXPECT_THROW(r.counter("x_total", "Other help.", {"l"}), MetricsError);
  EXPECT_THROW(r.counter("x_total", "X.", {"m"}), MetricsError);
  r.histogram("h_seconds", "H.", {1, 2});
  EXPECT_THROW(r.histogram("h_seconds", "H.", {1, 3}), MetricsError);
}

TEST(Registry, ChildReferencesAreStableAndLabelCountChecked) {
  Registry r;
  auto& family = r.gauge("g", "G.", {"a", "b"});
  Gauge& first = family.labels({"1", "2"});
  for (int i = 0; i < 100; ++i) family.labels({std::to_string(i), "x"});
  EXPECT_EQ(&first, &family.labels({"1", "2"}));
  EXPECT_THROW(family.labels({"only-one"}), MetricsError);
}

}  // namespace
}  // namespace nibble::metrics
