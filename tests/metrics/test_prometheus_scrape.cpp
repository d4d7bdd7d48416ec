// Oracle: a real Prometheus server scrapes a registry served over HTTP, and its query API
// must return the series and values we exposed.
#include <gtest/gtest.h>
#include <httplib.h>

#include <chrono>
#include <cmath>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <thread>

#include "http/metrics_endpoint.h"
#include "metrics/registry.h"
#include "tests/metrics/sample_registry.h"
#include "tests/support/child_process.h"
#include "tests/support/external_tool.h"
#include "tests/support/temp_dir.h"

namespace nibble::metrics {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

// Instant query; returns the result vector (empty until the first scrape lands).
json query(httplib::Client& client, const std::string& promql) {
  auto response = client.Get("/api/v1/query", httplib::Params{{"query", promql}}, {});
  if (!response || response->status != 200) return json::array();
  json body = json::parse(response->body, nullptr, false);
  if (body.is_discarded() || body.value("status", "") != "success") return json::array();
  return body["data"]["result"];
}

// The value of a query that must return exactly one sample; NaN (failing any comparison) if not.
double scalar(httplib::Client& client, const std::string& promql) {
  json result = query(client, promql);
  EXPECT_EQ(result.size(), 1u) << promql << " -> " << result.dump();
  if (result.size() != 1) return std::nan("");
  return std::stod(result[0]["value"][1].get<std::string>());
}

TEST(PrometheusScrape, SeriesAndValuesArrive) {
  NIBBLE_REQUIRE_TOOL(prometheus, "prometheus");
  Registry registry;
  testing::fill_sample_registry(registry);

  httplib::Server server;
  http::serve_metrics(server, registry);
  const int metrics_port = server.bind_to_any_port("127.0.0.1");
  ASSERT_GT(metrics_port, 0);
  std::jthread server_thread([&] { server.listen_after_bind(); });
  // Stops the server on every exit path, failed assertions included.
  std::unique_ptr<httplib::Server, void (*)(httplib::Server*)> stop_server(
      &server, [](httplib::Server* s) { s->stop(); });

  nibble::testing::TempDir dir;
  const auto config = dir.path() / "prometheus.yml";
  std::ofstream(config) << "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                        << "scrape_configs:\n  - job_name: nibble_test\n"
                        << "    static_configs:\n      - targets: ['127.0.0.1:" << metrics_port
                        << "']\n";
  const int prom_port = nibble::testing::pick_free_port();
  nibble::testing::ChildProcess prom(
      {prometheus, "--config.file=" + config.string(),
       "--storage.tsdb.path=" + (dir.path() / "data").string(),
       "--web.listen-address=127.0.0.1:" + std::to_string(prom_port), "--log.level=warn"},
      (dir.path() / "prometheus.log").string());

  httplib::Client client("127.0.0.1", prom_port);
  client.set_connection_timeout(1s);
  json requests;
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  while (std::chrono::steady_clock::now() < deadline) {
    requests = query(client, "nibble_test_requests_total");
    if (requests.size() == 3) break;
    ASSERT_TRUE(prom.running()) << "prometheus exited:\n" << prom.log();
    std::this_thread::sleep_for(250ms);
  }
  ASSERT_EQ(requests.size(), 3u) << "no scrape arrived within 60 s\n" << prom.log();

  EXPECT_EQ(scalar(client, "nibble_test_requests_total{finished_reason=\"length\"}"), 2);
  EXPECT_EQ(scalar(client, "sum(nibble_test_requests_total)"), 10);
  // The escaped label value must come back byte for byte.
  auto odd = query(client, "nibble_test_requests_total{model_name!=\"tiny\"}");
  ASSERT_EQ(odd.size(), 1u);
  EXPECT_EQ(odd[0]["metric"]["model_name"], "quote\"back\\slash\nnewline");
  EXPECT_EQ(scalar(client, "nibble_test_kv_cache_usage_ratio"), 0.25);
  EXPECT_EQ(scalar(client, "nibble_test_time_to_first_token_seconds_count"), 6);
  EXPECT_DOUBLE_EQ(scalar(client, "nibble_test_time_to_first_token_seconds_sum"), 56.055);
  EXPECT_EQ(scalar(client, "nibble_test_time_to_first_token_seconds_bucket{le=\"1\"}"), 4);
  // histogram_quantile works on our buckets: the median of 6 observations lies in (0.1, 1].
  const double median =
      scalar(client, "histogram_quantile(0.5, nibble_test_time_to_first_token_seconds_bucket)");
  EXPECT_GT(median, 0.1);
  EXPECT_LE(median, 1.0);
  // Prometheus itself saw the target as healthy.
  EXPECT_EQ(scalar(client, "up{job=\"nibble_test\"}"), 1);

  EXPECT_EQ(prom.stop(), 0) << prom.log();
}

}  // namespace
}  // namespace nibble::metrics
