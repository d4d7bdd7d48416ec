#include <gtest/gtest.h>

#include "metrics/metrics_error.h"
#include "metrics/registry.h"

namespace nibble::metrics {
namespace {

TEST(Registry, RendersEveryTypeExactly) {
  Registry r;
  r.counter("nibble_app_requests_total", "Requests served.", {"code"}).labels({"200"}).inc(3);
  r.counter("nibble_app_requests_total", "Requests served.", {"code"}).labels({"500"}).inc(1);
  r.gauge("nibble_app_temperature_celsius", "Line one\nline two \\ end").labels({}).set(-4.5);
  auto& h = r.histogram("nibble_app_latency_seconds", "Latency.", {0.1, 1}, {"path", "method"});
  h.labels({"/a\"b", "GET"}).observe(0.05);
  h.labels({"/a\"b", "GET"}).observe(0.5);
  h.labels({"/a\"b", "GET"}).observe(3);
  // Labels in declared order (path before method), le last; prometheus-cpp's histogram order:
  // _count, _sum, then the buckets.
  EXPECT_EQ(r.render(),
            "# HELP nibble_app_latency_seconds Latency.\n"
            "# TYPE nibble_app_latency_seconds histogram\n"
            "nibble_app_latency_seconds_count{path=\"/a\\\"b\",method=\"GET\"} 3\n"
            "nibble_app_latency_seconds_sum{path=\"/a\\\"b\",method=\"GET\"} 3.55\n"
            "nibble_app_latency_seconds_bucket{path=\"/a\\\"b\",method=\"GET\",le=\"0.1\"} 1\n"
            "nibble_app_latency_seconds_bucket{path=\"/a\\\"b\",method=\"GET\",le=\"1\"} 2\n"
            "nibble_app_latency_seconds_bucket{path=\"/a\\\"b\",method=\"GET\",le=\"+Inf\"} 3\n"
            "# HELP nibble_app_requests_total Requests served.\n"
            "# TYPE nibble_app_requests_total counter\n"
            "nibble_app_requests_total{code=\"200\"} 3\n"
            "nibble_app_requests_total{code=\"500\"} 1\n"
            "# HELP nibble_app_temperature_celsius Line one\\nline two \\\\ end\n"
            "# TYPE nibble_app_temperature_celsius gauge\n"
            "nibble_app_temperature_celsius -4.5\n");
}

TEST(Registry, CounterAndGaugeLabelsKeepDeclaredOrder) {
  Registry r;
  r.counter("nibble_finished_total", "F.", {"model_name", "finished_reason"})
      .labels({"m", "stop"})
      .inc();
  r.gauge("nibble_phase", "P.", {"recipe", "phase"}).labels({"r", "Ready"}).set(1);
  const std::string text = r.render();
  EXPECT_NE(text.find("nibble_finished_total{model_name=\"m\",finished_reason=\"stop\"} 1\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("nibble_phase{recipe=\"r\",phase=\"Ready\"} 1\n"), std::string::npos) << text;
}

TEST(Registry, UnlabelledMetricsAppearAtZeroLabelledOnesWhenUsed) {
  Registry r;
  r.counter("nibble_a_total", "A.");
  r.counter("nibble_b_total", "B.", {"kind"});
  r.histogram("nibble_c_seconds", "C.", {1}, {"kind"});
  const std::string text = r.render();
  EXPECT_NE(text.find("nibble_a_total 0\n"), std::string::npos);
  EXPECT_EQ(text.find("nibble_b_total"), std::string::npos);
  EXPECT_EQ(text.find("nibble_c_seconds"), std::string::npos);
}

TEST(Registry, SameRegistrationReturnsSameFamilyMismatchThrows) {
  Registry r;
  auto& a = r.counter("nibble_x_total", "X.", {"l"});
  auto& b = r.counter("nibble_x_total", "X.", {"l"});
  EXPECT_EQ(&a, &b);
  EXPECT_THROW(r.gauge("nibble_x_total", "X.", {"l"}), MetricsError);
  EXPECT_THROW(r.counter("nibble_x_total", "Other help.", {"l"}), MetricsError);
  EXPECT_THROW(r.counter("nibble_x_total", "X.", {"m"}), MetricsError);
  auto& h = r.histogram("nibble_h_seconds", "H.", {1, 2});
  EXPECT_EQ(&h, &r.histogram("nibble_h_seconds", "H.", {1, 2}));
  EXPECT_THROW(r.histogram("nibble_h_seconds", "H.", {1, 3}), MetricsError);
  EXPECT_THROW(r.counter("nibble_h_seconds", "H."), MetricsError);
}

TEST(Registry, ChildReferencesAreStableAndLabelCountChecked) {
  Registry r;
  auto& family = r.gauge("nibble_g", "G.", {"a", "b"});
  Gauge& first = family.labels({"1", "2"});
  first.set(7);
  for (int i = 0; i < 100; ++i) family.labels({std::to_string(i), "x"});
  EXPECT_EQ(&first, &family.labels({"1", "2"}));
  EXPECT_EQ(family.labels({"1", "2"}).value(), 7);
  EXPECT_THROW(family.labels({"only-one"}), MetricsError);
  auto& histograms = r.histogram("nibble_h_seconds", "H.", {1}, {"a"});
  Histogram& h = histograms.labels({"x"});
  EXPECT_EQ(&h, &histograms.labels({"x"}));
  EXPECT_THROW(histograms.labels({"x", "y"}), MetricsError);
}

TEST(Registry, CollectsThroughPrometheusCpp) {
  Registry r;
  r.counter("nibble_c_total", "C.", {"k"}).labels({"v"}).inc(2);
  r.histogram("nibble_h_seconds", "H.", {1}).labels({}).observe(0.5);
  const auto families = r.collect();
  ASSERT_EQ(families.size(), 2u);
  for (const auto& family : families) {
    if (family.name == "nibble_c_total") {
      EXPECT_EQ(family.type, prometheus::MetricType::Counter);
      ASSERT_EQ(family.metric.size(), 1u);
      EXPECT_EQ(family.metric[0].counter.value, 2);
    } else {
      EXPECT_EQ(family.name, "nibble_h_seconds");
      EXPECT_EQ(family.type, prometheus::MetricType::Histogram);
      ASSERT_EQ(family.metric.size(), 1u);
      EXPECT_EQ(family.metric[0].histogram.sample_count, 1u);
      ASSERT_EQ(family.metric[0].histogram.bucket.size(), 2u);
      EXPECT_EQ(family.metric[0].histogram.bucket[0].cumulative_count, 1u);
    }
  }
}

}  // namespace
}  // namespace nibble::metrics
