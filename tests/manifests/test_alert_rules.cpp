// Oracle: the alert rules of the PrometheusRule pass `promtool check rules`, and
// `promtool test rules` with tests/manifests/alerts_test.yaml shows when each fires and when
// it stays quiet; every alert has such a test, a severity and a summary and description.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "tests/manifests/monitoring_sources.h"
#include "tests/support/temp_dir.h"

namespace nibble::manifests {
namespace {

using testing::alert_rules;
using testing::source_dir;

TEST(AlertRules, PromtoolChecksAndUnitTestsThem) {
  NIBBLE_REQUIRE_TOOL(promtool, "promtool");
  nibble::testing::TempDir dir;
  std::ofstream(dir.path() / "nibble.rules.yaml") << testing::rules_file_text();
  std::filesystem::copy_file(source_dir() + "/tests/manifests/alerts_test.yaml",
                             dir.path() / "alerts_test.yaml");

  auto check = nibble::testing::run_command(promtool + " check rules " +
                                            (dir.path() / "nibble.rules.yaml").string() + " 2>&1");
  EXPECT_EQ(check.exit_code, 0) << check.output;
  EXPECT_NE(check.output.find("SUCCESS: " + std::to_string(alert_rules().size()) + " rules found"),
            std::string::npos)
      << check.output;

  auto test = nibble::testing::run_command("cd " + dir.path().string() + " && " + promtool +
                                           " test rules alerts_test.yaml 2>&1");
  EXPECT_EQ(test.exit_code, 0) << test.output;
  EXPECT_NE(test.output.find("SUCCESS"), std::string::npos) << test.output;
}

TEST(AlertRules, EveryAlertIsUnitTestedAndDescribed) {
  const auto tests = YAML::LoadFile(source_dir() + "/tests/manifests/alerts_test.yaml");
  std::set<std::string> firing_in_a_test;
  for (const auto& t : tests["tests"])
    for (const auto& a : t["alert_rule_test"])
      if (a["exp_alerts"].size() > 0) firing_in_a_test.insert(a["alertname"].as<std::string>());

  const auto rules = alert_rules();
  ASSERT_GE(rules.size(), 5u);
  std::set<std::string> names;
  for (const auto& r : rules) {
    names.insert(r.name);
    EXPECT_TRUE(firing_in_a_test.count(r.name)) << r.name << " never fires in alerts_test.yaml";
    const std::string severity = r.node["labels"]["severity"].as<std::string>("");
    EXPECT_TRUE(severity == "critical" || severity == "warning") << r.name;
    EXPECT_FALSE(r.node["annotations"]["summary"].as<std::string>("").empty()) << r.name;
    EXPECT_FALSE(r.node["annotations"]["description"].as<std::string>("").empty()) << r.name;
  }
  // The list: no ready replica, TTFT p95 high, KV cache saturated, queue growing,
  // crash looping.
  for (const char* required :
       {"NibbleModelNoReadyReplica", "NibbleTimeToFirstTokenHigh", "NibbleKvCacheSaturated",
        "NibbleRequestQueueGrowing", "NibbleEngineCrashLooping"})
    EXPECT_TRUE(names.count(required)) << required;
}

}  // namespace
}  // namespace nibble::manifests
