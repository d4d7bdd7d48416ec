// The controller's router against fake replicas (httplib servers on loopback): model lookup and
// OpenAI errors, least-in-flight balancing, unbuffered SSE passthrough, retry before the first
// byte only, client disconnects reaching the replica, holding requests for a scaled-to-zero
// recipe, and the router's metrics.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>

#include "controller/router/router.h"
#include "http/client_connection.h"
#include "http/server.h"
#include "metrics/registry.h"
#include "tests/support/external_tool.h"
#include "tests/support/slow_clients.h"
#include "tests/support/temp_dir.h"

namespace nibble::router {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

// A one-shot flag that threads wait on with a timeout.
class Latch {
 public:
  void open() {
    {
      std::lock_guard lock(mutex_);
      open_ = true;
    }
    changed_.notify_all();
  }
  bool wait(std::chrono::milliseconds timeout) {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, timeout, [&] { return open_; });
  }
  bool is_open() {
    std::lock_guard lock(mutex_);
    return open_;
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  bool open_ = false;
};

// A replica stand-in. By default it answers every model route with 200 and
// {"replica": name, "body": <the request body>}; `handler` replaces that.
class FakeUpstream {
 public:
  using Handler = std::function<void(const httplib::Request&, httplib::Response&)>;

  explicit FakeUpstream(std::string name, Handler handler = {})
      : name_(std::move(name)), handler_(std::move(handler)) {
    auto serve = [this](const httplib::Request& req, httplib::Response& res) {
      ++hits;
      if (handler_) return handler_(req, res);
      res.set_header("X-Replica", name_);
      res.set_content(json{{"replica", name_}, {"body", req.body}, {"target", req.target}}.dump(),
                      "application/json");
    };
    for (const char* path : {"/v1/chat/completions", "/v1/completions", "/tokenize"}) {
      server_.Post(path, serve);
    }
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    while (!server_.is_running()) std::this_thread::sleep_for(1ms);
  }
  ~FakeUpstream() {
    server_.stop();
    if (thread_.joinable()) thread_.join();
  }

  ReplicaEndpoint endpoint() const { return {.id = name_, .port = port_}; }
  // The replica dies: its port refuses connections from now on.
  void kill() { server_.stop(); }
  std::atomic<int> hits{0};

 private:
  std::string name_;
  Handler handler_;
  httplib::Server server_;
  std::thread thread_;
  int port_ = 0;
};

// A replica stand-in behind the engine's own HTTP layer (browser guards, client_disconnected()).
class GuardedUpstream {
 public:
  using Handler = std::function<void(const httplib::Request&, httplib::Response&)>;
  GuardedUpstream(std::string name, Handler handler) : name_(std::move(name)), server_(config()) {
    server_.routes().Post("/v1/chat/completions", std::move(handler));
    server_.start();
  }
  ReplicaEndpoint endpoint() const { return {.id = name_, .port = server_.port()}; }
  int port() const { return server_.port(); }

 private:
  static http::ServerConfig config() {
    http::ServerConfig c;
    c.name = "fake engine";
    c.threads = 4;
    return c;
  }
  std::string name_;
  http::Server server_;
};

// A replica that dies of every request: it reads the request whole, then closes the connection
// without a word, as an engine that crashed serving it would.
class CrashingUpstream {
 public:
  explicit CrashingUpstream(std::string name) : name_(std::move(name)) {
    listener_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(listener_, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    ::listen(listener_, 16);
    socklen_t len = sizeof addr;
    ::getsockname(listener_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] {
      for (;;) {
        const int fd = ::accept(listener_, nullptr, nullptr);
        if (fd < 0) return;
        std::string got;
        char buf[4096];
        // The head, then the body (its Content-Length is small here): wait for the JSON's end.
        while (got.find("\r\n\r\n") == std::string::npos || got.back() != '}') {
          const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
          if (n <= 0) break;
          got.append(buf, std::size_t(n));
        }
        ++crashes;
        ::close(fd);
      }
    });
  }
  ~CrashingUpstream() {
    ::shutdown(listener_, SHUT_RDWR);
    ::close(listener_);
    thread_.join();
  }
  ReplicaEndpoint endpoint() const { return {.id = name_, .port = port_}; }
  std::atomic<int> crashes{0};

 private:
  std::string name_;
  int listener_ = -1;
  int port_ = 0;
  std::thread thread_;
};

RouterConfig test_config() {
  RouterConfig config;
  config.host = "127.0.0.1";
  config.port = 0;
  config.hold_timeout = 1s;
  config.read_timeout = 10s;
  config.threads = 16;
  return config;
}

RouteEntry entry(std::string recipe, std::string model, std::vector<ReplicaEndpoint> ready) {
  return {.recipe = std::move(recipe),
          .served_model_name = std::move(model),
          .ready = std::move(ready)};
}

class RouterTest : public ::testing::Test {
 protected:
  void start(RouterConfig config = test_config()) {
    router_ = std::make_unique<Router>(routes_, registry_, config);
    ASSERT_TRUE(router_->start());
    ASSERT_GT(router_->port(), 0);
  }

  httplib::Client client() {
    httplib::Client c("127.0.0.1", router_->port());
    c.set_read_timeout(10, 0);
    return c;
  }

  httplib::Result chat(const std::string& model, const std::string& extra = "") {
    const std::string body =
        R"({"model":")" + model + R"(","messages":[{"role":"user","content":"hi"}])" + extra + "}";
    return client().Post("/v1/chat/completions", body, "application/json");
  }

  std::string metrics_page() {
    auto res = client().Get("/metrics");
    EXPECT_TRUE(res);
    return res ? res->body : std::string();
  }

  // The value of one sample line (name{labels}), or 0 when the page has no such line.
  double sample(const std::string& series) {
    std::istringstream lines(metrics_page());
    std::string line;
    while (std::getline(lines, line)) {
      if (line.rfind(series + " ", 0) == 0) return std::stod(line.substr(series.size() + 1));
    }
    return 0;
  }

  template <typename Predicate>
  static bool eventually(Predicate done, std::chrono::milliseconds timeout = 5s) {
    const auto deadline = Clock::now() + timeout;
    while (Clock::now() < deadline) {
      if (done()) return true;
      std::this_thread::sleep_for(10ms);
    }
    return done();
  }

  RouteTable routes_;
  metrics::Registry registry_;
  std::unique_ptr<Router> router_;
};

TEST_F(RouterTest, ModelsListsEveryServedNameAndHealthAnswers) {
  FakeUpstream a("a-0");
  routes_.publish(entry("recipe-a", "model-a", {a.endpoint()}));
  RouteEntry idle = entry("recipe-b", "model-b", {});
  idle.scale_from_zero = true;
  routes_.publish(idle);
  start();

  auto res = client().Get("/v1/models");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  const json models = json::parse(res->body);
  EXPECT_EQ(models["object"], "list");
  ASSERT_EQ(models["data"].size(), 2u);
  std::set<std::string> ids;
  for (const json& m : models["data"]) {
    ids.insert(m["id"].get<std::string>());
    EXPECT_EQ(m["object"], "model");
    EXPECT_EQ(m["owned_by"], "nibble");
    EXPECT_GT(m["created"].get<long long>(), 1'600'000'000);
  }
  EXPECT_EQ(ids, (std::set<std::string>{"model-a", "model-b"}));

  auto health = client().Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  EXPECT_EQ(health->body, "OK");
}

TEST_F(RouterTest, UnknownModelIs404InOpenAiShapeNamingServedModels) {
  FakeUpstream a("a-0");
  routes_.publish(entry("recipe-a", "model-a", {a.endpoint()}));
  start();

  auto res = chat("no-such-model");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 404);
  const json error = json::parse(res->body)["error"];
  EXPECT_EQ(error["type"], "invalid_request_error");
  EXPECT_EQ(error["code"], "model_not_found");
  EXPECT_EQ(error["param"], "model");
  EXPECT_NE(error["message"].get<std::string>().find("no-such-model"), std::string::npos);
  EXPECT_NE(error["message"].get<std::string>().find("model-a"), std::string::npos);
  EXPECT_EQ(a.hits, 0);
}

TEST_F(RouterTest, BodyThatIsNotJsonOrHasNoModelIs400) {
  FakeUpstream a("a-0"), b("b-0");
  routes_.publish(entry("recipe-a", "model-a", {a.endpoint()}));
  routes_.publish(entry("recipe-b", "model-b", {b.endpoint()}));
  start();

  auto bad = client().Post("/v1/chat/completions", "{not json", "application/json");
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 400);
  EXPECT_EQ(json::parse(bad->body)["error"]["type"], "invalid_request_error");

  // Two models served: which one is meant cannot be guessed.
  auto no_model = client().Post("/v1/completions", R"({"prompt":"hi"})", "application/json");
  ASSERT_TRUE(no_model);
  EXPECT_EQ(no_model->status, 400);
  const json error = json::parse(no_model->body)["error"];
  EXPECT_EQ(error["param"], "model");
  EXPECT_EQ(error["message"],
            "the request has no \"model\" and the router serves more than one; name one of the "
            "served models: model-a, model-b");

  auto not_string = client().Post("/tokenize", R"({"model":7,"prompt":"hi"})", "application/json");
  ASSERT_TRUE(not_string);
  EXPECT_EQ(not_string->status, 400);
  EXPECT_EQ(a.hits + b.hits, 0);
}

TEST_F(RouterTest, ARequestWithoutModelGoesToTheOneModelServedAsOnAnEngine) {
  FakeUpstream a("a-0");
  routes_.publish(entry("recipe-a", "model-a", {a.endpoint()}));
  RouteEntry broken = entry("recipe-b", "model-b", {});  // cannot serve: not counted
  broken.scale_from_zero = true;
  broken.unavailable = "its weights cannot be fetched: no such repository";
  routes_.publish(broken);
  start();

  const std::string body = R"({"prompt":"hi","max_tokens":3})";
  auto res = client().Post("/v1/completions", body, "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200) << res->body;
  EXPECT_EQ(json::parse(res->body)["body"], body);  // passed on as it is: the engine fills it in
  EXPECT_EQ(a.hits, 1);
  EXPECT_TRUE(eventually([&] {
    return sample(R"(nibble_controller_router_requests_total{model_name="model-a",code="200"})") ==
           1;
  }));
}

TEST_F(RouterTest, ModelsListsWhatCanServeWithTheEnginesRootAndMaxModelLen) {
  FakeUpstream a("a-0");
  RouteEntry ready = entry("recipe-a", "model-a", {a.endpoint()});
  ready.card = {"/models/a", 4096};
  routes_.publish(ready);
  RouteEntry cold = entry("recipe-b", "model-b", {});  // scaled to zero: a request wakes it
  cold.scale_from_zero = true;
  routes_.publish(cold);
  routes_.publish(entry("recipe-c", "model-c", {}));  // no replica and none coming
  RouteEntry crashing = entry("recipe-d", "model-d", {});
  crashing.starting = true;
  crashing.unavailable = "its replicas are in CrashLoopBackOff";
  routes_.publish(crashing);
  start();

  auto res = client().Get("/v1/models");
  ASSERT_TRUE(res);
  const json data = json::parse(res->body)["data"];
  ASSERT_EQ(data.size(), 2u) << data.dump(2);
  EXPECT_EQ(data[0]["id"], "model-a");
  EXPECT_EQ(data[0]["root"], "/models/a");
  EXPECT_EQ(data[0]["max_model_len"], 4096);
  EXPECT_EQ(data[1]["id"], "model-b");
  EXPECT_EQ(data[1]["root"], "model-b");  // not known yet: the served name, as engines say it
  EXPECT_FALSE(data[1].contains("max_model_len"));
}

TEST_F(RouterTest, OversizedBodyAndUnknownRouteAnswerInOpenAiShape) {
  FakeUpstream a("a-0");
  routes_.publish(entry("r", "m", {a.endpoint()}));
  RouterConfig config = test_config();
  config.max_body_bytes = 1024;
  start(config);

  const std::string big = R"({"model":"m","prompt":")" + std::string(2048, 'x') + R"("})";
  auto res = client().Post("/v1/completions", big, "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 413);
  EXPECT_NE(json::parse(res->body)["error"]["message"].get<std::string>().find("1024"),
            std::string::npos);

  res = client().Get("/v1/nothing-here");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 404);
  EXPECT_EQ(json::parse(res->body)["error"]["type"], "not_found_error");
  EXPECT_EQ(a.hits, 0);
}

TEST_F(RouterTest, ForwardsBodyTargetHeadersAndUpstreamErrorsAsTheyAre) {
  std::string seen_auth;
  FakeUpstream a("a-0", [&](const httplib::Request& req, httplib::Response& res) {
    seen_auth = req.get_header_value("Authorization");
    if (req.body.find("bad") != std::string::npos) {
      res.status = 400;
      res.set_content(R"({"error":{"message":"max_tokens too large"}})", "application/json");
      return;
    }
    res.status = 201;
    res.set_header("X-Replica", "a-0");
    res.set_content(json{{"body", req.body}, {"target", req.target}}.dump(), "application/json");
  });
  routes_.publish(entry("recipe-a", "model-a", {a.endpoint()}));
  start();

  const std::string body = R"({"model":"model-a","prompt":"hello"})";
  auto res = client().Post("/v1/completions?trace=1", {{"Authorization", "Bearer secret"}}, body,
                           "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 201);
  EXPECT_EQ(res->get_header_value("X-Replica"), "a-0");
  EXPECT_EQ(res->get_header_value("Content-Type"), "application/json");
  const json echoed = json::parse(res->body);
  EXPECT_EQ(echoed["body"], body);
  EXPECT_EQ(echoed["target"], "/v1/completions?trace=1");
  EXPECT_EQ(seen_auth, "") << "the client's credentials are the router's, not the engine's";

  // An engine's own error passes through untouched and is not retried.
  auto bad =
      client().Post("/v1/completions", R"({"model":"model-a","prompt":"bad"})", "application/json");
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 400);
  EXPECT_EQ(json::parse(bad->body)["error"]["message"], "max_tokens too large");
  EXPECT_EQ(a.hits, 2);
}

TEST_F(RouterTest, SendsEachRequestToTheReplicaWithFewestInFlight) {
  Latch release_slow;
  auto handler = [&](const std::string& name) {
    return [&, name](const httplib::Request& req, httplib::Response& res) {
      if (req.body.find("slow") != std::string::npos) release_slow.wait(10s);
      res.set_content(json{{"replica", name}}.dump(), "application/json");
    };
  };
  FakeUpstream a("a-0", handler("a-0"));
  FakeUpstream b("b-0", handler("b-0"));
  routes_.publish(entry("r", "m", {a.endpoint(), b.endpoint()}));
  start();

  std::thread slow([&] {
    auto res = chat("m", R"(,"user":"slow")");
    EXPECT_TRUE(res && res->status == 200);
  });
  ASSERT_TRUE(eventually([&] { return a.hits + b.hits == 1; }));
  FakeUpstream& busy = a.hits == 1 ? a : b;
  FakeUpstream& idle = a.hits == 1 ? b : a;
  EXPECT_EQ(router_->inflight("r"), 1);
  EXPECT_EQ(router_->replica_inflight("r", busy.endpoint().id), 1);
  EXPECT_EQ(router_->replica_inflight("r", idle.endpoint().id), 0);

  for (int i = 0; i < 4; ++i) {
    auto res = chat("m");
    ASSERT_TRUE(res);
    EXPECT_EQ(json::parse(res->body)["replica"], idle.endpoint().id);
  }
  EXPECT_EQ(busy.hits, 1);
  EXPECT_EQ(idle.hits, 4);

  release_slow.open();
  slow.join();
  EXPECT_TRUE(eventually([&] { return router_->inflight("r") == 0; }));
  EXPECT_EQ(router_->replica_inflight("r", busy.endpoint().id), 0);

  // Equally loaded replicas take turns.
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(chat("m"));
  EXPECT_EQ(a.hits + b.hits, 9);
  EXPECT_EQ(busy.hits, 3);
  EXPECT_EQ(idle.hits, 6);
  EXPECT_GT(router_->last_request("r").time_since_epoch().count(), 0);
}

TEST_F(RouterTest, StreamsEventsThroughAsTheReplicaWritesThem) {
  Latch client_got_first;
  std::atomic<bool> second_waited_for_client{false};
  FakeUpstream a("a-0", [&](const httplib::Request&, httplib::Response& res) {
    res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider(
        "text/event-stream", [&, step = 0](std::size_t, httplib::DataSink& sink) mutable {
          if (step++ == 0) {
            const std::string first = "data: {\"n\":1}\n\n";
            return sink.write(first.data(), first.size());
          }
          // A buffering router would hold the first event back, so this wait would time out.
          second_waited_for_client = client_got_first.wait(5s);
          const std::string rest = "data: {\"n\":2}\n\ndata: [DONE]\n\n";
          sink.write(rest.data(), rest.size());
          sink.done();
          return true;
        });
  });
  routes_.publish(entry("r", "m", {a.endpoint()}));
  start();

  std::string received;
  int status = 0;
  std::string content_type;
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/chat/completions";
  req.headers = {{"Content-Type", "application/json"}, {"Accept-Encoding", "gzip"}};
  req.body = R"({"model":"m","stream":true,"messages":[]})";
  req.response_handler = [&](const httplib::Response& r) {
    status = r.status;
    content_type = r.get_header_value("Content-Type");
    return true;
  };
  req.content_receiver = [&](const char* data, std::size_t size, std::uint64_t, std::uint64_t) {
    received.append(data, size);
    if (received.find("\"n\":1") != std::string::npos) client_got_first.open();
    return true;
  };
  auto res = client().send(req);
  ASSERT_TRUE(res) << httplib::to_string(res.error());
  EXPECT_EQ(status, 200);
  EXPECT_EQ(content_type, "text/event-stream");
  EXPECT_TRUE(second_waited_for_client) << "the first event reached the client only later";
  EXPECT_EQ(received, "data: {\"n\":1}\n\ndata: {\"n\":2}\n\ndata: [DONE]\n\n");
}

TEST_F(RouterTest, RetriesAnotherReplicaWhenOneRefusesConnections) {
  FakeUpstream good("good-0");
  const ReplicaEndpoint dead{.id = "dead-0", .port = testing::pick_free_port()};
  routes_.publish(entry("r", "m", {dead, good.endpoint()}));
  start();

  for (int i = 0; i < 4; ++i) {
    auto res = chat("m");
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 200);
    EXPECT_EQ(json::parse(res->body)["replica"], "good-0");
  }
  EXPECT_EQ(good.hits, 4);
  // Ties rotate over [dead, good], so requests 1 and 3 tried the dead one first.
  EXPECT_EQ(sample(R"(nibble_controller_router_retries_total{model_name="m"})"), 2);
  EXPECT_EQ(router_->replica_inflight("r", "dead-0"), 0);
}

TEST_F(RouterTest, RetriesAnotherReplicaWhenOneIsDraining) {
  FakeUpstream draining("draining-0", [](const httplib::Request&, httplib::Response& res) {
    res.status = 503;
    res.set_header("Retry-After", "1");
    res.set_content(R"({"error":{"message":"draining"}})", "application/json");
  });
  FakeUpstream good("good-0");
  routes_.publish(entry("r", "m", {draining.endpoint(), good.endpoint()}));
  start();

  for (int i = 0; i < 4; ++i) {
    auto res = chat("m");
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 200);
  }
  // Which replica a request tries first depends on in-flight counts that the previous
  // request's end may not have lowered yet (the client can be faster than the router's
  // bookkeeping), so the invariant is checked: every refusal was retried on the good replica.
  EXPECT_EQ(good.hits, 4);
  const int refused = draining.hits;
  EXPECT_GE(refused, 1);
  EXPECT_EQ(sample(R"(nibble_controller_router_retries_total{model_name="m"})"), refused);

  // Every replica refusing: the client gets a 503 it may retry.
  routes_.publish(entry("r", "m", {draining.endpoint()}));
  auto res = chat("m");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 503);
  EXPECT_EQ(res->get_header_value("Retry-After"), "1");
  EXPECT_EQ(draining.hits, refused + 1);
}

TEST_F(RouterTest, GivesUpWithoutRetryingOnceBytesReachedTheClient) {
  FakeUpstream breaking("breaking-0", [](const httplib::Request&, httplib::Response& res) {
    res.set_chunked_content_provider("text/event-stream",
                                     [](std::size_t offset, httplib::DataSink& sink) {
                                       if (offset > 0) return false;  // dies mid-stream
                                       const std::string first = "data: partial\n\n";
                                       return sink.write(first.data(), first.size());
                                     });
  });
  FakeUpstream good("good-0");
  routes_.publish(entry("r", "m", {breaking.endpoint(), good.endpoint()}));
  start();

  std::string received;
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/chat/completions";
  req.headers = {{"Content-Type", "application/json"}};
  req.body = R"({"model":"m","stream":true})";
  req.content_receiver = [&](const char* data, std::size_t size, std::uint64_t, std::uint64_t) {
    received.append(data, size);
    return true;
  };
  auto res = client().send(req);
  EXPECT_FALSE(res) << "a stream cut short must not look complete to the client";
  // The events that came, then an SSE error event saying the stream was cut.
  ASSERT_TRUE(received.starts_with("data: partial\n\nevent: error\ndata: ")) << received;
  const json error = json::parse(received.substr(received.find("{")));
  EXPECT_EQ(error["error"]["code"], 502);
  EXPECT_NE(error["error"]["message"].get<std::string>().find("ended it before its end"),
            std::string::npos);
  EXPECT_EQ(breaking.hits, 1);
  EXPECT_EQ(good.hits, 0);
  EXPECT_EQ(sample(R"(nibble_controller_router_retries_total{model_name="m"})"), 0);
}

TEST_F(RouterTest, ClientHangingUpClosesTheReplicaConnection) {
  std::atomic<bool> write_failed{false};
  std::atomic<Clock::rep> failed_at{0};
  FakeUpstream slow("slow-0", [&](const httplib::Request&, httplib::Response& res) {
    res.set_chunked_content_provider(
        "text/event-stream", [&](std::size_t, httplib::DataSink& sink) {
          std::this_thread::sleep_for(50ms);
          const std::string tick = "data: tick\n\n";
          if (!sink.write(tick.data(), tick.size())) {
            write_failed = true;
            failed_at = Clock::now().time_since_epoch().count();
            return false;
          }
          return true;  // streams until the write fails (or the server stops)
        });
  });
  routes_.publish(entry("r", "m", {slow.endpoint()}));
  start();

  Clock::time_point hung_up;
  {
    httplib::Client c = client();
    httplib::Request req;
    req.method = "POST";
    req.path = "/v1/chat/completions";
    req.headers = {{"Content-Type", "application/json"}};
    req.body = R"({"model":"m","stream":true})";
    req.content_receiver = [&](const char* data, std::size_t size, std::uint64_t, std::uint64_t) {
      return std::string(data, size).find("tick") == std::string::npos;  // hang up at once
    };
    auto res = c.send(req);
    EXPECT_FALSE(res);
    c.stop();
    hung_up = Clock::now();
  }
  ASSERT_TRUE(eventually([&] { return write_failed.load(); }, 5s))
      << "the replica kept streaming to a client that left";
  const auto took = Clock::time_point(Clock::duration(failed_at.load())) - hung_up;
  EXPECT_LT(took, 2s);
  EXPECT_TRUE(eventually([&] { return router_->inflight("r") == 0; }));
  EXPECT_EQ(router_->replica_inflight("r", "slow-0"), 0);
}

TEST_F(RouterTest, HoldsARequestUntilAReplicaIsPublished) {
  FakeUpstream a("a-0");
  RouteEntry cold = entry("r", "m", {});
  cold.scale_from_zero = true;
  routes_.publish(cold);
  RouterConfig config = test_config();
  config.hold_timeout = 5s;
  start(config);

  std::thread publisher;
  std::atomic<int> demands{0};
  std::atomic<int> held_at_demand{-1};
  std::string demanded;
  router_->set_demand_callback([&](const std::string& recipe) {
    demanded = recipe;
    held_at_demand = router_->held(recipe);
    ++demands;
    publisher = std::thread([&] {  // a replica becomes ready a little later
      std::this_thread::sleep_for(300ms);
      routes_.publish(entry("r", "m", {a.endpoint()}));
    });
  });

  const auto started = Clock::now();
  auto res = chat("m");
  const auto took = Clock::now() - started;
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(json::parse(res->body)["replica"], "a-0");
  EXPECT_GE(took, 250ms);
  EXPECT_LT(took, 4s);
  EXPECT_EQ(demands, 1);
  EXPECT_EQ(demanded, "r");
  EXPECT_EQ(held_at_demand, 1);
  EXPECT_EQ(router_->held("r"), 0);
  EXPECT_TRUE(eventually([&] { return router_->inflight("r") == 0; }));
  publisher.join();
}

TEST_F(RouterTest, HoldEndsIn503WithRetryAfterWhenNoReplicaComes) {
  RouteEntry cold = entry("r", "m", {});
  cold.scale_from_zero = true;
  routes_.publish(cold);
  routes_.publish(entry("r2", "m2", {}));  // no replica and none coming
  start();                                 // hold_timeout 1 s

  auto started = Clock::now();
  auto res = chat("m");
  auto took = Clock::now() - started;
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 503);
  EXPECT_FALSE(res->get_header_value("Retry-After").empty());
  EXPECT_EQ(json::parse(res->body)["error"]["type"], "service_unavailable");
  EXPECT_GE(took, 900ms);
  EXPECT_LT(took, 3s);
  EXPECT_EQ(router_->held("r"), 0);
  EXPECT_EQ(router_->inflight("r"), 0);

  started = Clock::now();
  res = chat("m2");
  took = Clock::now() - started;
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 503);
  EXPECT_FALSE(res->get_header_value("Retry-After").empty());
  EXPECT_LT(took, 500ms) << "a recipe that cannot start a replica must not hold requests";
}

TEST_F(RouterTest, ARecipeWhoseReplicasCannotComeFailsHeldAndNewRequestsSayingWhy) {
  RouteEntry cold = entry("r", "m", {});
  cold.scale_from_zero = true;
  routes_.publish(cold);
  RouterConfig config = test_config();
  config.hold_timeout = 30s;
  start(config);

  const std::string reason =
      "its replicas are in CrashLoopBackOff (none ready; next restart in 2 s): replica r-x "
      "exited with code 3 (log: /tmp/r-x.log); its last log lines: cannot load the model";
  std::thread publisher;
  router_->set_demand_callback([&](const std::string&) {
    publisher = std::thread([&] {  // the replica started for it exits a little later
      std::this_thread::sleep_for(300ms);
      RouteEntry failing = entry("r", "m", {});
      failing.scale_from_zero = true;
      failing.starting = true;
      failing.unavailable = reason;
      routes_.publish(failing);
    });
  });

  auto started = Clock::now();
  auto res = chat("m");
  auto took = Clock::now() - started;
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 503);
  EXPECT_EQ(res->get_header_value("Retry-After"), "5");
  EXPECT_EQ(json::parse(res->body)["error"]["message"], "model 'm' cannot serve: " + reason);
  EXPECT_GE(took, 250ms);
  EXPECT_LT(took, 2s) << "held until the hold timeout instead of failing when the replica did";
  EXPECT_EQ(router_->held("r"), 0);
  publisher.join();

  started = Clock::now();  // now known: refused at once
  res = chat("m");
  took = Clock::now() - started;
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 503);
  EXPECT_EQ(json::parse(res->body)["error"]["message"], "model 'm' cannot serve: " + reason);
  EXPECT_LT(took, 500ms);
}

TEST_F(RouterTest, StopEndsRequestsWaitingOnASilentReplica) {
  Latch release;
  FakeUpstream silent("silent-0", [&](const httplib::Request&, httplib::Response& res) {
    release.wait(10s);
    res.set_content("{}", "application/json");
  });
  routes_.publish(entry("r", "m", {silent.endpoint()}));
  start();

  std::thread waiting([&] { chat("m"); });
  ASSERT_TRUE(eventually([&] { return silent.hits == 1; }));
  const auto started = Clock::now();
  router_->stop();
  EXPECT_LT(Clock::now() - started, 2s);
  waiting.join();
  release.open();
}

TEST_F(RouterTest, MetricsCountRequestsByModelAndCode) {
  FakeUpstream a("a-0");
  routes_.publish(entry("r", "m", {a.endpoint()}));
  start();
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(chat("m"));
  ASSERT_TRUE(chat("unknown"));
  // A request is counted when its accounting ends, after its last byte went out, which can be
  // a moment after the client has read it.
  EXPECT_TRUE(eventually([&] {
    return sample(R"(nibble_controller_router_request_duration_seconds_count{model_name="m"})") ==
           3;
  }));

  const std::string page = metrics_page();
  for (const char* family : {"# TYPE nibble_controller_router_requests_total counter",
                             "# TYPE nibble_controller_router_request_duration_seconds histogram",
                             "# TYPE nibble_controller_router_inflight_requests gauge",
                             "# TYPE nibble_controller_router_retries_total counter"}) {
    EXPECT_NE(page.find(family), std::string::npos) << family;
  }
  EXPECT_EQ(sample(R"(nibble_controller_router_requests_total{model_name="m",code="200"})"), 3);
  EXPECT_EQ(sample(R"(nibble_controller_router_requests_total{model_name="",code="404"})"), 1);
  EXPECT_EQ(sample(R"(nibble_controller_router_request_duration_seconds_count{model_name="m"})"),
            3);
  EXPECT_EQ(
      sample(
          R"(nibble_controller_router_request_duration_seconds_bucket{model_name="m",le="+Inf"})"),
      3);
  EXPECT_EQ(sample(R"(nibble_controller_router_inflight_requests{model_name="m"})"), 0);
  EXPECT_NE(page.find("nibble_controller_router_retries_total{model_name=\"m\"} 0\n"),
            std::string::npos);

  // The page must also satisfy Prometheus' own checker where it is installed.
  NIBBLE_REQUIRE_TOOL(promtool, "promtool");
  testing::TempDir dir;
  const std::string path = (dir.path() / "metrics.txt").string();
  std::ofstream(path) << page;
  const std::string command = promtool + " check metrics < " + path + " 2>&1";
  std::FILE* out = popen(command.c_str(), "r");
  ASSERT_NE(out, nullptr);
  std::string report;
  char buffer[256];
  while (std::fgets(buffer, sizeof buffer, out)) report += buffer;
  EXPECT_EQ(pclose(out), 0) << report;
}

}  // namespace
}  // namespace nibble::router

namespace nibble::router {
namespace {

TEST_F(RouterTest, ApiKeysGuardModelRoutesButNotHealthOrMetrics) {
  FakeUpstream a("a-0");
  routes_.publish(entry("r", "m", {a.endpoint()}));
  RouterConfig config = test_config();
  config.api_keys = http::ApiKeys({"router-key"});
  start(config);

  auto missing = chat("m");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 401);
  EXPECT_EQ(json::parse(missing->body)["error"]["code"], "invalid_api_key");
  EXPECT_EQ(client().Get("/v1/models")->status, 401);
  EXPECT_EQ(a.hits, 0);
  const std::string body = R"({"model":"m","messages":[]})";
  auto ok = client().Post("/v1/chat/completions", {{"Authorization", "bearer router-key"}}, body,
                          "application/json");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
  EXPECT_EQ(client().Get("/health")->status, 200);
  EXPECT_EQ(client().Get("/metrics")->status, 200);
}

// Issue 23 item 3: the engine gets its replica's own key, never the client's; the client never
// sees the engine's key.
TEST_F(RouterTest, SendsTheReplicasOwnKeyUpstreamInsteadOfTheClients) {
  std::vector<std::string> seen;
  std::mutex seen_mutex;
  FakeUpstream a("a-0", [&](const httplib::Request& req, httplib::Response& res) {
    {
      std::lock_guard lock(seen_mutex);
      for (const auto& [name, value] : req.headers) {
        if (strcasecmp(name.c_str(), "Authorization") == 0) seen.push_back(value);
      }
    }
    res.set_content(R"({"ok":true})", "application/json");
  });
  ReplicaEndpoint keyed = a.endpoint();
  keyed.api_key = "engine-internal-key";
  routes_.publish(entry("r", "m", {keyed}));
  RouterConfig config = test_config();
  config.api_keys = http::ApiKeys({"router-key"});
  start(config);

  const std::string body = R"({"model":"m","messages":[]})";
  auto ok = client().Post("/v1/chat/completions", {{"Authorization", "Bearer router-key"}}, body,
                          "application/json");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
  EXPECT_EQ(ok->body.find("engine-internal-key"), std::string::npos);
  for (const auto& [name, value] : ok->headers)
    EXPECT_EQ(value.find("engine-internal-key"), std::string::npos) << name;
  std::lock_guard lock(seen_mutex);
  EXPECT_EQ(seen, std::vector<std::string>{"Bearer engine-internal-key"});
}

TEST_F(RouterTest, RouterErrorsCarryTheStatusAsCodeLikeTheEngine) {
  FakeUpstream a("a-0");
  routes_.publish(entry("r", "m", {a.endpoint()}));
  start();
  auto bad = client().Post("/v1/chat/completions", "{not json", "application/json");
  ASSERT_TRUE(bad);
  EXPECT_EQ(json::parse(bad->body)["error"]["code"], 400);
  auto text = client().Post("/v1/chat/completions", R"({"model":"m"})", "text/plain");
  ASSERT_TRUE(text);
  EXPECT_EQ(text->status, 415);
  EXPECT_EQ(a.hits, 0);
}

TEST_F(RouterTest, SlowlorisOfTwiceTheWorkersLeavesHealthAnswering) {
  RouterConfig config = test_config();
  config.threads = 4;
  start(config);
  nibble::testing::SlowClients slow(router_->port(), 8);
  ASSERT_EQ(slow.connected(), 8);
  std::this_thread::sleep_for(200ms);
  const auto health = nibble::testing::timed_get(router_->port(), "/health", 2000ms);
  EXPECT_EQ(health.status, 200);
  EXPECT_LT(health.took, 2000ms);
}

// A request that is on the wire when its replica dies gets 502 by design (never retried: it may
// be what killed the engine). Every request sent after the death, while the router still lists the
// dead replica and after its replacement, must be answered (the refused connection is retried).
TEST_F(RouterTest, AReplicaDyingWhileRequestsFlowCausesNo502) {
  FakeUpstream first("first-0");
  FakeUpstream replacement("second-0");
  routes_.publish(entry("r", "m", {first.endpoint()}));
  start();

  using Clock = std::chrono::steady_clock;
  std::atomic<bool> stop{false};
  std::mutex statuses_mutex;
  std::vector<std::pair<Clock::time_point, int>> statuses;  // (sent at, status)
  std::vector<std::thread> clients;
  for (int t = 0; t < 4; ++t) {
    clients.emplace_back([&] {
      while (!stop) {
        const Clock::time_point sent = Clock::now();
        auto res = chat("m");
        std::lock_guard lock(statuses_mutex);
        statuses.emplace_back(sent, res ? res->status : -1);
      }
    });
  }
  std::this_thread::sleep_for(200ms);
  first.kill();  // the engine dies; the controller notices and replaces it a little later
  const Clock::time_point dead = Clock::now();
  std::this_thread::sleep_for(500ms);
  routes_.publish(entry("r", "m", {replacement.endpoint()}));
  std::this_thread::sleep_for(300ms);
  stop = true;
  for (std::thread& c : clients) c.join();

  std::map<int, int> before, after;
  for (const auto& [sent, status] : statuses) ++(sent < dead ? before : after)[status];
  EXPECT_EQ(after.size(), 1u) << "sent after the death: " << json(after).dump();
  EXPECT_GT(after[200], 0);
  before.erase(200);
  EXPECT_LE(before[502], 4) << "at most the requests in flight at the death (4 clients)";
  before.erase(502);
  EXPECT_TRUE(before.empty()) << "sent before the death: " << json(before).dump();
  EXPECT_GT(replacement.hits, 0);
  // The last answers' leases end just after their bytes reached the clients.
  EXPECT_TRUE(eventually([&] { return router_->inflight("r") == 0; }, 2s));
}

TEST_F(RouterTest, FailoverWaitIsBoundedThen502) {
  const ReplicaEndpoint dead{.id = "dead-0", .port = testing::pick_free_port()};
  routes_.publish(entry("r", "m", {dead}));
  RouterConfig config = test_config();
  config.failover_timeout = 1s;
  start(config);
  const auto start_time = Clock::now();
  auto res = chat("m");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 502);
  EXPECT_EQ(json::parse(res->body)["error"]["code"], 502);
  EXPECT_GE(Clock::now() - start_time, 900ms);
  EXPECT_LT(Clock::now() - start_time, 3s);
}

TEST_F(RouterTest, AReplicaThatDiesServingARequestFailsItOnceAndIsReported) {
  CrashingUpstream crashing("crashing-0");
  FakeUpstream healthy("healthy-0");
  routes_.publish(entry("r", "m", {crashing.endpoint()}));
  RouterConfig config = test_config();
  config.failover_timeout = 3s;
  start(config);
  std::vector<ReplicaFailure> failures;
  std::mutex failures_mutex;
  router_->set_failure_callback([&](const ReplicaFailure& f) {
    std::lock_guard lock(failures_mutex);
    failures.push_back(f);
  });
  // The controller would put a restarted replica back; here a healthy one comes at once.
  std::thread replace([&] {
    std::this_thread::sleep_for(300ms);
    routes_.publish(entry("r", "m", {crashing.endpoint(), healthy.endpoint()}));
  });
  const auto started = Clock::now();
  auto res = chat("m");
  replace.join();
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 502);
  EXPECT_LT(Clock::now() - started, 1s) << "the router waited to retry a request that kills";
  EXPECT_EQ(crashing.crashes, 1);
  EXPECT_EQ(healthy.hits, 0);
  const std::string message = json::parse(res->body)["error"]["message"];
  EXPECT_NE(message.find("while serving this request"), std::string::npos) << message;
  EXPECT_EQ(message.find(std::to_string(crashing.endpoint().port)), std::string::npos)
      << "the replica's port leaked: " << message;
  std::lock_guard lock(failures_mutex);
  ASSERT_EQ(failures.size(), 1u);
  EXPECT_EQ(failures[0].recipe, "r");
  EXPECT_EQ(failures[0].replica_id, "crashing-0");
  EXPECT_EQ(sample(R"(nibble_controller_router_replica_failures_total{model_name="m"})"), 1);
}

TEST_F(RouterTest, TheClientsOriginIsCheckedByTheRouterAndNotForwarded) {
  std::atomic<bool> engine_saw_origin{false};
  GuardedUpstream engine("engine-0", [&](const httplib::Request& req, httplib::Response& res) {
    if (req.has_header("Origin")) engine_saw_origin = true;
    res.set_content(R"({"ok":true})", "application/json");
  });
  routes_.publish(entry("r", "m", {engine.endpoint()}));
  start();
  const std::string own_origin = "http://127.0.0.1:" + std::to_string(router_->port());
  auto same = client().Post("/v1/chat/completions", {{"Origin", own_origin}},
                            R"({"model":"m","messages":[]})", "application/json");
  ASSERT_TRUE(same);
  EXPECT_EQ(same->status, 200) << same->body;
  EXPECT_FALSE(engine_saw_origin);
  EXPECT_EQ(same->body.find(std::to_string(engine.port())), std::string::npos) << same->body;
  auto foreign = client().Post("/v1/chat/completions", {{"Origin", "http://evil.example"}},
                               R"({"model":"m","messages":[]})", "application/json");
  ASSERT_TRUE(foreign);
  EXPECT_EQ(foreign->status, 403);
  EXPECT_EQ(foreign->body.find(std::to_string(engine.port())), std::string::npos);
}

TEST_F(RouterTest, AllowedOriginsReachTheRouterWithCors) {
  FakeUpstream a("a-0");
  routes_.publish(entry("r", "m", {a.endpoint()}));
  RouterConfig config = test_config();
  config.allowed_origins = {"https://chat.example"};
  start(config);
  auto preflight = client().Options(
      "/v1/chat/completions",
      {{"Origin", "https://chat.example"}, {"Access-Control-Request-Method", "POST"}});
  ASSERT_TRUE(preflight);
  EXPECT_EQ(preflight->status, 204);
  EXPECT_EQ(preflight->get_header_value("Access-Control-Allow-Origin"), "https://chat.example");
  auto res = client().Post("/v1/chat/completions", {{"Origin", "https://chat.example"}},
                           R"({"model":"m","messages":[]})", "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->get_header_value("Access-Control-Allow-Origin"), "https://chat.example");
}

TEST_F(RouterTest, AClientLeavingANonStreamedRequestCancelsItOnTheReplica) {
  std::atomic<bool> engine_saw_leave{false};
  GuardedUpstream engine("engine-0", [&](const httplib::Request&, httplib::Response& res) {
    // A long non-streamed completion: the engine polls its client as openai_server does.
    const auto start = Clock::now();
    while (Clock::now() - start < 5s) {
      if (http::client_disconnected()) {
        engine_saw_leave = true;
        return;
      }
      std::this_thread::sleep_for(20ms);
    }
    res.set_content(R"({"done":true})", "application/json");
  });
  routes_.publish(entry("r", "m", {engine.endpoint()}));
  start();
  {
    httplib::Client c("127.0.0.1", router_->port());
    c.set_read_timeout(0, 300'000);  // gives up after 0.3 s
    EXPECT_FALSE(
        c.Post("/v1/chat/completions", R"({"model":"m","messages":[]})", "application/json"));
  }
  EXPECT_TRUE(eventually([&] { return engine_saw_leave.load(); }, 1500ms))
      << "the engine kept generating for a client that left the router";
  EXPECT_TRUE(eventually([&] { return router_->inflight("r") == 0; }));
}

}  // namespace
}  // namespace nibble::router
