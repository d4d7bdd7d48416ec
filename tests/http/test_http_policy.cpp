// The HTTP layer's policy against careless and hostile clients, over real sockets on loopback:
// request heads bounded in bytes and lines before they are read whole, malformed and ambiguous
// headers refused, pipelined requests all answered, slow heads and bodies unable to lock out
// other local clients, strict loopback Host names, and CORS for explicitly allowed origins.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <thread>

#include "http/server.h"
#include "tests/support/slow_clients.h"

namespace nibble::http {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;
using testing::count_of;
using testing::RawConnection;

ServerConfig test_config() {
  ServerConfig c;
  c.name = "test";
  c.host = "127.0.0.1";
  c.port = 0;
  c.threads = 8;
  return c;
}

struct TestServer {
  explicit TestServer(ServerConfig config) : server(std::move(config)) {
    server.routes().Get("/health", [](const httplib::Request&, httplib::Response& res) {
      res.set_content("ok", "text/plain");
    });
    server.routes().Post("/v1/echo", [](const httplib::Request& req, httplib::Response& res) {
      res.set_content(req.body, "application/json");
    });
    server.start();
  }
  int port() const { return server.port(); }
  Server server;
};

int status_of(const std::string& answer) {
  if (!answer.starts_with("HTTP/1.1 ") || answer.size() < 12) return 0;
  return std::stoi(answer.substr(9, 3));
}

std::string exchange(int port, const std::string& request) {
  RawConnection c(port);
  c.send(request);
  return c.read(3s, "\r\n\r\n");
}

TEST(HttpPolicy, AHugeHeadIsRefusedWith431BeforeItIsReadWhole) {
  TestServer t(test_config());
  RawConnection c(t.port());
  ASSERT_TRUE(c.connected());
  std::string line = "X-Filler: " + std::string(1000, 'a') + "\r\n";
  std::string head = "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n";
  // 64 MB of header lines: the server must answer and close long before they are all sent.
  std::string chunk;
  for (int i = 0; i < 1000; ++i) chunk += line;
  bool sent_all = c.send(head, 1s);
  for (int i = 0; i < 64 && sent_all; ++i) sent_all = c.send(chunk, 2s);
  EXPECT_FALSE(sent_all) << "the server read 64 MB of header lines";
  const std::string answer = c.read(3s, "\r\n\r\n");
  EXPECT_EQ(status_of(answer), 431) << answer.substr(0, 200);
  EXPECT_NE(answer.find("32768 bytes"), std::string::npos) << answer;
}

TEST(HttpPolicy, MoreHeaderLinesThanTheLimitGet431) {
  TestServer t(test_config());
  std::string request = "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n";
  for (int i = 0; i < 101; ++i) request += "X-H" + std::to_string(i) + ": v\r\n";
  const std::string answer = exchange(t.port(), request + "\r\n");
  EXPECT_EQ(status_of(answer), 431) << answer;
  EXPECT_NE(answer.find("100 header lines"), std::string::npos) << answer;
}

TEST(HttpPolicy, NulInAValueOrALineWithoutColonIs400) {
  TestServer t(test_config());
  std::string with_nul = "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-A: a";
  with_nul += '\0';
  with_nul += "b\r\n\r\n";
  const std::string nul = exchange(t.port(), with_nul);
  EXPECT_EQ(status_of(nul), 400) << nul;
  EXPECT_NE(nul.find("control character"), std::string::npos) << nul;
  const std::string colonless =
      exchange(t.port(), "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nNoColonHere\r\n\r\n");
  EXPECT_EQ(status_of(colonless), 400) << colonless;
  EXPECT_NE(colonless.find("no colon"), std::string::npos) << colonless;
}

TEST(HttpPolicy, TwoAuthorizationHeadersAreRefused) {
  ServerConfig config = test_config();
  config.api_keys = ApiKeys({"the-right-key-0123456789"});
  TestServer t(config);
  const std::string answer = exchange(
      t.port(),
      "POST /v1/echo HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer the-right-key-0123456789"
      "\r\nAuthorization: Bearer other\r\nContent-Type: application/json\r\n"
      "Content-Length: 2\r\n\r\n{}");
  EXPECT_EQ(status_of(answer), 400) << answer;
  EXPECT_NE(answer.find("more than one Authorization"), std::string::npos) << answer;
}

TEST(HttpPolicy, PipelinedRequestsAreAllAnsweredInOrder) {
  TestServer t(test_config());
  RawConnection c(t.port());
  std::string five;
  for (int i = 0; i < 5; ++i) {
    const std::string body = "{\"n\":" + std::to_string(i) + "}";
    five +=
        "POST /v1/echo HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        "Content-Length: " +
        std::to_string(body.size()) + "\r\n\r\n" + body;
  }
  ASSERT_TRUE(c.send(five));
  const auto start = std::chrono::steady_clock::now();
  const std::string answers = c.read(3s, "}", 5);
  EXPECT_EQ(count_of(answers, "HTTP/1.1 200"), 5) << answers;
  EXPECT_LT(std::chrono::steady_clock::now() - start, 1s);
  std::size_t last = 0;
  for (int i = 0; i < 5; ++i) {
    const std::size_t at = answers.find("{\"n\":" + std::to_string(i) + "}");
    ASSERT_NE(at, std::string::npos) << i;
    EXPECT_GE(at, last);
    last = at;
  }
}

TEST(HttpPolicy, TwoSlowHeadsFromThisMachineDoNotLockOutItsOtherClients) {
  TestServer t(test_config());  // 8 workers: the old per-address cap was 2
  testing::SlowClients slow(t.port(), 2, "127.0.0.1");
  ASSERT_EQ(slow.connected(), 2);
  std::this_thread::sleep_for(700ms);  // past the budget's grace: both count as slow
  for (int i = 0; i < 5; ++i) {
    const testing::TimedAnswer health = testing::timed_get(t.port(), "/health", 2000ms);
    EXPECT_EQ(health.status, 200) << i;
  }
}

TEST(HttpPolicy, TrickledBodiesCannotTakeEveryWorker) {
  ServerConfig config = test_config();
  config.threads = 4;
  TestServer t(config);
  std::vector<std::unique_ptr<RawConnection>> slow;
  for (int i = 0; i < 8; ++i) {
    slow.push_back(std::make_unique<RawConnection>(t.port(), "127.0.0.2"));
    slow.back()->send(
        "POST /v1/echo HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        "Content-Length: 100000\r\n\r\n{");
  }
  // Each sends one more byte now and then, well inside the read timeout.
  std::atomic<bool> stop{false};
  std::thread trickle([&] {
    while (!stop) {
      for (auto& c : slow) c->send(" ", 100ms);
      std::this_thread::sleep_for(300ms);
    }
  });
  std::this_thread::sleep_for(700ms);
  const testing::TimedAnswer health = testing::timed_get(t.port(), "/health", 3000ms);
  stop = true;
  trickle.join();
  EXPECT_EQ(health.status, 200);
  EXPECT_LT(health.took, 1500ms);
}

TEST(HttpPolicy, ABodyTrickledPastTheBodyTimeoutGets408) {
  ServerConfig config = test_config();
  config.body_timeout = 1s;
  TestServer t(config);
  RawConnection c(t.port());
  c.send(
      "POST /v1/echo HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
      "Content-Length: 1000\r\n\r\n{");
  const auto start = std::chrono::steady_clock::now();
  std::string answer;
  for (int i = 0; i < 40 && !c.closed_by_server() && answer.empty(); ++i) {
    c.send(" ", 100ms);
    answer = c.read(200ms);
  }
  EXPECT_EQ(status_of(answer), 408) << answer;
  EXPECT_LT(std::chrono::steady_clock::now() - start, 3s);
}

TEST(HttpPolicy, LoopbackHostIsMatchedExactly) {
  TestServer t(test_config());
  auto host_status = [&](const std::string& host) {
    return status_of(exchange(t.port(), "GET /health HTTP/1.1\r\nHost: " + host + "\r\n\r\n"));
  };
  EXPECT_EQ(host_status("127.evil.example"), 403);
  EXPECT_EQ(host_status("127.0.0.1.evil.example:80"), 403);
  EXPECT_EQ(host_status("localhost.evil.example"), 403);
  EXPECT_EQ(host_status("127.0.0.1:" + std::to_string(t.port())), 200);
  EXPECT_EQ(host_status("127.1.2.3"), 200);
  EXPECT_EQ(host_status("localhost:8000"), 200);
  EXPECT_EQ(host_status("[::1]:8000"), 200);
}

TEST(HttpPolicy, AllowedOriginsGetCorsAndPreflightsOthersDoNot) {
  ServerConfig config = test_config();
  config.allowed_origins = {"http://app.example:3000"};
  config.api_keys = ApiKeys({"a-key-of-enough-length"});
  TestServer t(config);
  httplib::Client c("127.0.0.1", t.port());
  auto preflight = c.Options("/v1/echo", {{"Origin", "http://app.example:3000"},
                                          {"Access-Control-Request-Method", "POST"},
                                          {"Access-Control-Request-Headers", "authorization"}});
  ASSERT_TRUE(preflight);
  EXPECT_EQ(preflight->status, 204);
  EXPECT_EQ(preflight->get_header_value("Access-Control-Allow-Origin"), "http://app.example:3000");
  EXPECT_EQ(preflight->get_header_value("Access-Control-Allow-Headers"), "authorization");
  auto write = c.Post(
      "/v1/echo",
      {{"Origin", "http://app.example:3000"}, {"Authorization", "Bearer a-key-of-enough-length"}},
      "{}", "application/json");
  ASSERT_TRUE(write);
  EXPECT_EQ(write->status, 200);
  EXPECT_EQ(write->get_header_value("Access-Control-Allow-Origin"), "http://app.example:3000");
  auto foreign = c.Post(
      "/v1/echo",
      {{"Origin", "http://evil.example"}, {"Authorization", "Bearer a-key-of-enough-length"}}, "{}",
      "application/json");
  EXPECT_EQ(foreign->status, 403);
  EXPECT_FALSE(foreign->has_header("Access-Control-Allow-Origin"));
  // Simple (CSRF) requests from an allowed origin still need a JSON body.
  auto text = c.Post(
      "/v1/echo",
      {{"Origin", "http://app.example:3000"}, {"Authorization", "Bearer a-key-of-enough-length"}},
      "{}", "text/plain");
  EXPECT_EQ(text->status, 415);
}

}  // namespace
}  // namespace nibble::http
