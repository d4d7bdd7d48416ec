// Oracle: every PromQL expression the install ships runs against a real Prometheus that
// scraped a running nibble-controller (router, reconcile loop, autoscaler) and the engine it
// started, after real requests, and returns data:
// - each dashboard panel query (Grafana variables at "All") returns at least one finite value;
// - each dashboard variable query finds label values;
// - Prometheus loads the alert rules and evaluates each without error, and every metric an
//   alert reads exists (whether an alert fires is tests/manifests/alerts_test.yaml's job).
// Targets carry the labels the PodMonitor and ServiceMonitor give them in a cluster
// (namespace, pod, recipe), so the queries see the same label sets.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <iostream>
#include <regex>
#include <set>

#include "tests/controller/controller_process.h"
#include "tests/manifests/monitoring_sources.h"
#include "tests/server/serve_process.h"

namespace nibble::manifests {
namespace {

using namespace std::chrono_literals;
using controller::testing::ControllerProcess;
using controller::testing::eventually;
using nlohmann::json;

// A Prometheus query API answer's `data`, or null when the call failed.
json prometheus_data(httplib::Client& prom, const std::string& path,
                     const httplib::Params& params) {
  auto res = prom.Get(path, params, {});
  if (!res || res->status != 200) return nullptr;
  json body = json::parse(res->body, nullptr, false);
  if (body.is_discarded() || body.value("status", "") != "success") return nullptr;
  return body["data"];
}

json instant(httplib::Client& prom, const std::string& promql) {
  json data = prometheus_data(prom, "/api/v1/query", {{"query", promql}});
  return data.is_object() ? data["result"] : json(nullptr);
}

// Waits until a one-sample query returns `value` (as Prometheus formats it).
bool becomes(httplib::Client& prom, const std::string& promql, const std::string& value) {
  return eventually(
      [&] {
        const json r = instant(prom, promql);
        return r.is_array() && r.size() == 1 && r[0]["value"][1] == value;
      },
      30s, 250ms);
}

bool has_finite_value(const json& result) {
  for (const auto& sample : result) {
    const double v = std::stod(sample["value"][1].get<std::string>());
    if (std::isfinite(v)) return true;
  }
  return false;
}

std::string write_config(const std::filesystem::path& dir, int router_port, int engine_port,
                         const std::string& engine_id) {
  std::ofstream(dir / "nibble.rules.yaml") << testing::rules_file_text();
  const auto config = dir / "prometheus.yml";
  std::ofstream(config) << "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                        << "rule_files: [" << (dir / "nibble.rules.yaml").string() << "]\n"
                        << "scrape_configs:\n"
                        << "  - job_name: nibble-controller\n    static_configs:\n"
                        << "      - targets: ['127.0.0.1:" << router_port << "']\n"
                        << "        labels: {namespace: nibble-system}\n"
                        << "  - job_name: nibble-engines\n    static_configs:\n"
                        << "      - targets: ['127.0.0.1:" << engine_port << "']\n"
                        << "        labels: {namespace: default, pod: " << engine_id
                        << ", recipe: tiny}\n";
  return config.string();
}

// Requests through the router: the same long prompt again and again, so the prefix cache hits.
void send_requests(const ControllerProcess& c, int count) {
  std::string prompt;
  for (int i = 0; i < 12; ++i) prompt += "the quick brown fox jumps over the lazy dog ";
  const json body = {{"model", "tiny-chat"},
                     {"messages", {{{"role", "user"}, {"content", prompt}}}},
                     {"max_tokens", 6}};
  for (int i = 0; i < count; ++i) {
    auto res = c.router().Post("/v1/chat/completions", body.dump(), "application/json");
    ASSERT_TRUE(res && res->status == 200) << (res ? res->body : "no answer");
  }
}

TEST(PromqlLive, EveryDashboardAndAlertExpressionReturnsData) {
  NIBBLE_REQUIRE_TOOL(prometheus, "prometheus");
  std::string why;
  const std::string model = nibble::server::testing::tiny_model_dir(why);
  if (model.empty()) {
    if (nibble::testing::tools_required()) FAIL() << why;
    GTEST_SKIP() << why;
  }

  ControllerProcess c;
  ASSERT_TRUE(c.wait_api()) << c.log();
  const auto recipe = c.state_dir.path() / "tiny.yaml";
  std::ofstream(recipe) << "apiVersion: nibble.dev/v1alpha1\nkind: ModelRecipe\n"
                        << "metadata: {name: tiny}\nspec:\n"
                        << "  model: {source: " << model
                        << ", servedName: tiny-chat}\n"
                        // Speculative decoding on (CPU: the backend that verifies drafts), so
                        // the dashboard's acceptance-length panel has its counters.
                        << "  engine: {maxModelLen: 512, maxNumSeqs: 8, device: cpu,\n"
                        << "    speculativeConfig: '{\"method\": \"ngram\", "
                           "\"num_speculative_tokens\": 3, \"prompt_lookup_min\": 1}'}\n"
                        << "  replicas: {min: 1, max: 1}\n";
  auto applied = c.nibble("apply -f " + recipe.string());
  ASSERT_EQ(applied.exit_code, 0) << applied.output;
  json engine;
  ASSERT_TRUE(eventually(
      [&] {
        const json st = c.status("tiny");
        if (!st.is_object() || st.value("phase", "") != "Ready") return false;
        engine = st["engines"][0];
        return true;
      },
      90s))
      << c.status("tiny").dump(2) << c.log();

  nibble::testing::TempDir dir;
  const std::string config =
      write_config(dir.path(), c.router_port, engine.value("port", 0), engine.value("id", ""));
  const int prom_port = nibble::testing::pick_free_port();
  nibble::testing::ChildProcess prom(
      {prometheus, "--config.file=" + config,
       "--storage.tsdb.path=" + (dir.path() / "data").string(),
       "--web.listen-address=127.0.0.1:" + std::to_string(prom_port), "--log.level=warn"},
      (dir.path() / "prometheus.log").string());
  httplib::Client client("127.0.0.1", prom_port);
  client.set_connection_timeout(1s);

  // Both targets up, then traffic, then scrapes that saw it on either side of the rate windows.
  ASSERT_TRUE(becomes(client, "sum(up)", "2")) << prom.log();
  send_requests(c, 4);
  ASSERT_TRUE(becomes(client, "sum(nibble_controller_router_requests_total)", "4")) << prom.log();
  std::this_thread::sleep_for(2s);

  const auto queries = testing::dashboard_queries();
  EXPECT_GE(queries.size(), 30u);
  for (const auto& q : queries) {
    const std::string promql = testing::substitute_variables(q.expr);
    const json result = instant(client, promql);
    ASSERT_TRUE(result.is_array()) << q.panel << ": query failed: " << promql;
    EXPECT_TRUE(has_finite_value(result))
        << q.panel << ": no finite value from " << promql << " -> " << result.dump();
  }

  // label_values(SELECTOR, LABEL) of the dashboard's variables.
  const std::regex label_values(R"(^label_values\((.*), *([a-z_]+)\)$)");
  int variables = 0;
  const json dashboard = testing::dashboard();
  for (const auto& var : dashboard["templating"]["list"]) {
    if (var.value("type", "") != "query") continue;
    ++variables;
    std::smatch m;
    const std::string query = var["definition"];
    ASSERT_TRUE(std::regex_match(query, m, label_values)) << query;
    const json series = prometheus_data(client, "/api/v1/series",
                                        {{"match[]", testing::substitute_variables(m[1])}});
    std::set<std::string> values;
    if (series.is_array())
      for (const auto& s : series)
        if (s.contains(m[2].str())) values.insert(s[m[2].str()]);
    EXPECT_FALSE(values.empty()) << var["name"] << ": no values for " << query;
  }
  EXPECT_EQ(variables, 4);

  // Every alert rule evaluated without error, and every metric it reads exposed by a target.
  // Counters of rare events (reconcile errors, engine restarts) have no series before the first
  // event, since families without children are not exposed: those must at least be documented
  // counters, so a misspelt name still fails.
  ASSERT_TRUE(eventually(
      [&] {
        const json rules = prometheus_data(client, "/api/v1/rules", {});
        if (!rules.is_object()) return false;
        std::size_t evaluated = 0;
        for (const auto& g : rules["groups"])
          for (const auto& r : g["rules"])
            if (r.value("health", "") == "ok") ++evaluated;
        return evaluated == testing::alert_rules().size();
      },
      20s, 250ms))
      << prometheus_data(client, "/api/v1/rules", {}).dump(2);
  const std::regex metric_name(R"(\bnibble_[a-z_]+\b)");
  const std::string documented = testing::read_text(testing::source_dir() + "/docs/metrics.md") +
                                 testing::read_text(testing::source_dir() + "/docs/controller.md");
  for (const auto& rule : testing::alert_rules()) {
    for (std::sregex_iterator it(rule.expr.begin(), rule.expr.end(), metric_name), end; it != end;
         ++it) {
      const std::string name = it->str();
      const json samples = instant(client, "count(" + name + ")");
      if (samples.is_array() && !samples.empty()) continue;
      const bool documented_counter =
          name.ends_with("_total") && documented.find("`" + name + "`") != std::string::npos;
      EXPECT_TRUE(documented_counter)
          << rule.name << " reads " << name << ", which no target exposes and no doc lists";
      if (documented_counter)
        std::cout << rule.name << ": " << name << " has no series before its first event\n";
    }
  }
  EXPECT_EQ(prom.stop(), 0) << prom.log();
}

}  // namespace
}  // namespace nibble::manifests
