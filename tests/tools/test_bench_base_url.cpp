// nibble-bench against a server whose URL is written as OpenAI clients write it (ending in /v1),
// and what it says when the server has no /tokenize: the HTTP status it got, not a guess
// (issue 45 item 9).
#include <gtest/gtest.h>
#include <httplib.h>

#include <chrono>
#include <stdexcept>
#include <thread>

#include "tools/bench/bench_dataset.h"
#include "tools/bench/bench_options.h"
#include "tools/bench/bench_runner.h"

namespace nibble::bench {
namespace {

BenchOptions parse(std::vector<std::string> args) {
  args.insert(args.begin(), "nibble-bench");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  BenchOptions o;
  EXPECT_TRUE(parse_bench_options(int(argv.size()), argv.data(), o));
  return o;
}

TEST(BenchBaseUrl, WithOrWithoutV1GivesTheServerRoot) {
  for (const char* url : {"http://127.0.0.1:8000", "http://127.0.0.1:8000/",
                          "http://127.0.0.1:8000/v1", "http://127.0.0.1:8000/v1/"}) {
    EXPECT_EQ(parse({"--base-url", url}).base_url, "http://127.0.0.1:8000") << url;
  }
  EXPECT_EQ(server_root("localhost:9000/v1"), "localhost:9000");
  EXPECT_THROW(server_root("http://127.0.0.1:8000/api"), std::invalid_argument);
  EXPECT_THROW(server_root("http://127.0.0.1:8000/v1/v1"), std::invalid_argument);
}

// A server with /v1/models but no /tokenize, as some OpenAI-compatible servers are.
class NoTokenizeServer {
 public:
  NoTokenizeServer() {
    server_.Get("/v1/models", [](const httplib::Request&, httplib::Response& res) {
      res.set_content(R"({"object":"list","data":[{"id":"m1","object":"model"}]})",
                      "application/json");
    });
    server_.Post("/tokenize", [](const httplib::Request&, httplib::Response& res) {
      res.status = 404;
      res.set_content("no such route", "text/plain");
    });
    port_ = server_.bind_to_any_port("127.0.0.1");  // listening from here on
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    // stop() before the accept loop runs would be lost and join() would wait forever.
    while (!server_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ~NoTokenizeServer() {
    server_.stop();
    thread_.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

 private:
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
};

TEST(BenchBaseUrl, V1UrlReachesTheServerAndTheTokenizeStatusIsReported) {
  NoTokenizeServer server;
  BenchOptions o = parse({"--base-url", server.url() + "/v1", "--num-prompts", "2", "--input-len",
                          "8", "--no-progress"});
  EXPECT_EQ(o.base_url, server.url());
  o.model = first_model(o);  // was "connection failed": the client took /v1 for the host
  EXPECT_EQ(o.model, "m1");
  const Dataset d = make_dataset(o);
  EXPECT_FALSE(d.exact_lengths);
  ASSERT_EQ(d.prompts.size(), 2u);
  EXPECT_EQ(d.tokenize_failure, "POST /tokenize answered HTTP 404: no such route");
}

TEST(BenchBaseUrl, NoServerSaysThatNothingAnswered) {
  NoTokenizeServer server;
  BenchOptions o = parse({"--base-url", server.url(), "--num-prompts", "1", "--no-progress"});
  o.model = "m1";
  o.base_url = "http://127.0.0.1:1";  // nothing listens on port 1
  const Dataset d = make_dataset(o);
  EXPECT_FALSE(d.exact_lengths);
  EXPECT_EQ(d.tokenize_failure.rfind("POST /tokenize got no answer: ", 0), 0u)
      << d.tokenize_failure;
}

}  // namespace
}  // namespace nibble::bench
