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
  for (const char* name :
       {"", "1abc", "with-dash", "has space", "uni\xc3\xa9", "dot.name", "__reserved"}) {
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

// The message of the MetricsError that checking this family throws; "" if it passes.
std::string rule_broken(MetricType type, std::string_view name,
                        const std::vector<std::string>& labels = {}) {
  try {
    check_family(type, name, "Help.", labels);
    return "";
  } catch (const MetricsError& e) {
    return e.what();
  }
}

TEST(ProjectRules, AcceptTheEnginesNames) {
  EXPECT_EQ(rule_broken(MetricType::kCounter, "nibble_generation_tokens_total"), "");
  EXPECT_EQ(rule_broken(MetricType::kGauge, "nibble_kv_cache_usage_ratio", {"model_name"}), "");
  EXPECT_EQ(
      rule_broken(MetricType::kHistogram, "nibble_time_to_first_token_seconds", {"model_name"}),
      "");
  EXPECT_EQ(rule_broken(MetricType::kHistogram, "nibble_request_prompt_tokens"), "");
}

TEST(ProjectRules, NameTheRuleABadNameBreaks) {
  const struct {
    MetricType type;
    const char* name;
    const char* expected;
  } cases[] = {
      {MetricType::kGauge, "requests_running", "start with 'nibble_'"},
      {MetricType::kGauge, "nibble_", "start with 'nibble_'"},
      {MetricType::kGauge, "nibble_bad-name", "invalid metric name"},
      {MetricType::kGauge, "nibble_job:requests", "reserved for recording rules"},
      {MetricType::kGauge, "nibble_requestsRunning", "snake_case"},
      {MetricType::kHistogram, "nibble_latency_milliseconds", "base unit seconds"},
      {MetricType::kHistogram, "nibble_latency_ms", "base unit seconds"},
      {MetricType::kGauge, "nibble_uptime_hours", "base unit seconds"},
      {MetricType::kGauge, "nibble_weights_megabytes", "base unit bytes"},
      {MetricType::kGauge, "nibble_kv_cache_usage_percent", "ratio (0-1)"},
      {MetricType::kCounter, "nibble_requests", "counter names end in '_total'"},
      {MetricType::kGauge, "nibble_requests_total", "only counter names end in '_total'"},
      {MetricType::kHistogram, "nibble_latency_seconds_count", "do not end in '_count'"},
      {MetricType::kHistogram, "nibble_latency_seconds_bucket", "do not end in '_bucket'"},
  };
  for (const auto& c : cases) {
    const std::string message = rule_broken(c.type, c.name);
    EXPECT_NE(message.find(c.expected), std::string::npos) << c.name << ": " << message;
    EXPECT_NE(message.find(c.name), std::string::npos) << message;
  }
}

TEST(ProjectRules, LabelRules) {
  EXPECT_NE(rule_broken(MetricType::kHistogram, "nibble_latency_seconds", {"le"}).find("reserved"),
            std::string::npos);
  EXPECT_EQ(rule_broken(MetricType::kGauge, "nibble_le_gauge", {"le"}), "");  // only histograms
  EXPECT_NE(rule_broken(MetricType::kGauge, "nibble_x", {"a", "a"}).find("appears twice"),
            std::string::npos);
  EXPECT_NE(rule_broken(MetricType::kGauge, "nibble_x", {"bad label"}).find("invalid label name"),
            std::string::npos);
  EXPECT_NE(rule_broken(MetricType::kGauge, "nibble_x", {"__name__"}).find("invalid label name"),
            std::string::npos);
}

TEST(Registration, InvalidNamesFailAtCreationAndLeaveNothingBehind) {
  Registry registry;
  try {
    registry.gauge("nibble_bad-name", "help");
    FAIL() << "expected MetricsError";
  } catch (const MetricsError& e) {
    EXPECT_NE(std::string(e.what()).find("nibble_bad-name"), std::string::npos);
  }
  EXPECT_THROW(registry.gauge("nibble_ok_name", "help", {"bad label"}), MetricsError);
  EXPECT_THROW(registry.counter("nibble_requests", "help"), MetricsError);  // no _total
  EXPECT_THROW(registry.counter("requests_total", "help"), MetricsError);   // no prefix
  EXPECT_THROW(registry.histogram("nibble_latency_seconds", "help", {1}, {"le"}), MetricsError);
  EXPECT_THROW(registry.histogram("nibble_latency_seconds", "help", {2, 1}), MetricsError);
  EXPECT_THROW(registry.gauge("nibble_no_help", ""), MetricsError);
  EXPECT_EQ(registry.render(), "");
  // The rejected names stayed free: registering them correctly now works.
  registry.gauge("nibble_ok_name", "help", {"good_label"});
  registry.histogram("nibble_latency_seconds", "help", {1, 2});
}

}  // namespace
}  // namespace nibble::metrics
