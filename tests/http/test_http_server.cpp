// http::Server on loopback: slow clients, API keys and open paths, browser guards, limits,
// errors in one shape, bind failures, and seeing a client leave.
#include <gtest/gtest.h>

#include <atomic>
#include <nlohmann/json.hpp>
#include <thread>

#include "http/client_connection.h"
#include "http/metrics_endpoint.h"
#include "http/server.h"
#include "tests/support/slow_clients.h"

namespace nibble::http {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

ServerConfig test_config() {
  ServerConfig c;
  c.name = "test";
  c.host = "127.0.0.1";
  c.port = 0;
  c.threads = 4;
  return c;
}

// A server with /health, /metrics and an echoing POST /v1/echo, serving in the background.
struct TestServer {
  explicit TestServer(ServerConfig config) : server(std::move(config)) {
    server.routes().Get("/health", [](const httplib::Request&, httplib::Response& res) {
      res.set_content("ok", "text/plain");
    });
    serve_metrics(server.routes(), registry);
    server.routes().Post("/v1/echo", [](const httplib::Request& req, httplib::Response& res) {
      res.set_content(req.body, "application/json");
    });
    server.start();
  }
  httplib::Client client() const {
    httplib::Client c("127.0.0.1", server.port());
    c.set_read_timeout(5, 0);
    return c;
  }
  metrics::Registry registry;
  Server server;
};

TEST(HttpServer, SlowlorisOfTwiceTheWorkersLeavesHealthAnswering) {
  TestServer t(test_config());
  testing::SlowClients slow(t.server.port(), 2 * t.server.config().threads);
  ASSERT_EQ(slow.connected(), 8);
  std::this_thread::sleep_for(200ms);  // let the workers pick the slow connections up
  const testing::TimedAnswer health = testing::timed_get(t.server.port(), "/health", 2000ms);
  EXPECT_EQ(health.status, 200);
  EXPECT_LT(health.took, 2000ms);
  EXPECT_GE(t.server.yielded_connections(), 1u);
}

TEST(HttpServer, SlowClientsAreDroppedAfterTheReadTimeout) {
  ServerConfig config = test_config();
  config.read_timeout = 1s;
  config.max_pending_connections_per_client = 100;  // only the timeout protects here
  TestServer t(config);
  testing::SlowClients slow(t.server.port(), 4);
  const auto start = std::chrono::steady_clock::now();
  const testing::TimedAnswer health = testing::timed_get(t.server.port(), "/health", 5000ms);
  EXPECT_EQ(health.status, 200);
  // Every worker held a silent client; one came free after the 1 s read timeout.
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2500ms);
}

TEST(HttpServer, ApiKeysGuardEveryPathButTheOpenOnes) {
  ServerConfig config = test_config();
  config.api_keys = ApiKeys({"key-one", "key-two"});
  TestServer t(config);
  auto c = t.client();
  auto missing = c.Post("/v1/echo", "{}", "application/json");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 401);
  const json body = json::parse(missing->body);
  EXPECT_EQ(body["error"]["type"], "authentication_error");
  EXPECT_EQ(body["error"]["code"], "invalid_api_key");
  EXPECT_EQ(
      c.Post("/v1/echo", {{"Authorization", "bearer key-two"}}, "{}", "application/json")->status,
      200);
  EXPECT_EQ(
      c.Post("/v1/echo", {{"Authorization", "Bearer key-three"}}, "{}", "application/json")->status,
      401);
  EXPECT_EQ(c.Get("/health")->status, 200);
  EXPECT_EQ(c.Get("/metrics")->status, 200);
  EXPECT_EQ(c.Get("/nowhere")->status, 401);  // unknown paths tell nothing without a key

  config.open_paths = {"/health"};
  TestServer closed(config);
  auto cc = closed.client();
  EXPECT_EQ(cc.Get("/metrics")->status, 401);
  EXPECT_EQ(cc.Get("/metrics", {{"Authorization", "Bearer key-one"}})->status, 200);
}

TEST(HttpServer, BrowserGuardsRefuseForeignHostOriginAndContentType) {
  TestServer t(test_config());
  auto c = t.client();
  auto text = c.Post("/v1/echo", "{}", "text/plain");
  ASSERT_TRUE(text);
  EXPECT_EQ(text->status, 415);
  EXPECT_EQ(json::parse(text->body)["error"]["code"], 415);
  auto origin = c.Post("/v1/echo", {{"Origin", "http://evil.example"}}, "{}", "application/json");
  EXPECT_EQ(origin->status, 403);
  auto host = c.Post("/v1/echo", {{"Host", "evil.example:8001"}}, "{}", "application/json");
  EXPECT_EQ(host->status, 403);
  EXPECT_NE(json::parse(host->body)["error"]["message"].get<std::string>().find("rebinding"),
            std::string::npos);
  EXPECT_EQ(c.Post("/v1/echo", "{\"a\":1}", "application/json")->body, "{\"a\":1}");
}

TEST(HttpServer, LargeBodiesGet413AndUnknownRoutes404InOneShape) {
  ServerConfig config = test_config();
  config.max_body_bytes = 1000;
  TestServer t(config);
  auto c = t.client();
  auto big = c.Post("/v1/echo", std::string(2000, ' '), "application/json");
  ASSERT_TRUE(big);
  EXPECT_EQ(big->status, 413);
  const json too_big = json::parse(big->body);
  EXPECT_EQ(too_big["error"]["code"], 413);
  EXPECT_NE(too_big["error"]["message"].get<std::string>().find("1000 bytes"), std::string::npos);
  auto missing = c.Get("/v2/nothing");
  EXPECT_EQ(missing->status, 404);
  EXPECT_EQ(json::parse(missing->body)["error"]["code"], 404);
}

TEST(HttpServer, BindFailureNamesTheAddress) {
  TestServer first(test_config());
  ServerConfig config = test_config();
  config.port = first.server.port();
  Server second(config);
  try {
    second.bind();
    FAIL() << "bound a port in use";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot listen on 127.0.0.1:" +
                                         std::to_string(first.server.port())),
              std::string::npos)
        << e.what();
  }
}

TEST(HttpServer, HandlersSeeTheirClientLeave) {
  std::atomic<bool> saw_leave{false};
  std::atomic<long long> noticed_after_ms{-1};
  TestServer t(test_config());
  t.server.routes().Post("/v1/wait", [&](const httplib::Request&, httplib::Response& res) {
    const auto start = std::chrono::steady_clock::now();
    while (std::chrono::steady_clock::now() - start < 5s) {
      if (client_disconnected()) {
        saw_leave = true;
        noticed_after_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                               std::chrono::steady_clock::now() - start)
                               .count();
        return;
      }
      std::this_thread::sleep_for(20ms);
    }
    res.set_content("{}", "application/json");
  });
  {
    httplib::Client c("127.0.0.1", t.server.port());
    c.set_read_timeout(0, 300'000);  // gives up after 0.3 s
    EXPECT_FALSE(c.Post("/v1/wait", "{}", "application/json"));
  }
  for (int i = 0; i < 100 && !saw_leave; ++i) std::this_thread::sleep_for(20ms);
  EXPECT_TRUE(saw_leave);
  EXPECT_LT(noticed_after_ms.load(), 1500);
  // A client still waiting is not taken for gone.
  httplib::Client patient("127.0.0.1", t.server.port());
  patient.set_read_timeout(10, 0);
  saw_leave = false;
  auto res = patient.Post("/v1/wait", "{}", "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_FALSE(saw_leave);
}

}  // namespace
}  // namespace nibble::http
