// `nibble-engine serve` as an operator starts and reads it (issue 45): the model as a positional
// argument or a Hub id from the model cache, the error that names `nibble pull` when the model
// is neither here nor reachable, the access and stats lines in its log, the KV cache cap logged,
// and nibble_build_info naming the model.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "tests/server/serve_process.h"

namespace nibble::server {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::ServeProcess;

// Waits until the server's log has a line containing `needle`; returns that line or "".
std::string wait_for_line(const ServeProcess& serve, const std::string& needle,
                          std::chrono::seconds limit = std::chrono::seconds(10)) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  do {
    std::istringstream lines(serve.log());
    for (std::string line; std::getline(lines, line);) {
      if (line.find(needle) != std::string::npos) return line;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  } while (std::chrono::steady_clock::now() < deadline);
  return "";
}

TEST(ServeOperator, PositionalModelAccessLogStatsLineKvCapAndBuildInfo) {
  REQUIRE_TINY_MODEL(model);
  // 1 GiB holds far more than 2 sequences of 2,048 tokens: the cap is logged.
  ServeProcess serve(ServeProcess::Positional{model},
                     {"--kv-cache-memory-bytes", "1073741824", "--max-num-seqs", "2",
                      "--log-stats-interval", "0.2"});
  ASSERT_TRUE(serve.wait_ready()) << serve.log();
  const std::string secret = "a prompt nobody else may read";
  auto res = serve.client().Post(
      "/v1/completions", json{{"prompt", secret}, {"max_tokens", 6}, {"ignore_eos", true}}.dump(),
      "application/json");
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
  const json answer = json::parse(res->body);

  // Served under its directory's name, as before.
  EXPECT_THAT(serve.log(), HasSubstr("serving 'tiny-qwen3'"));
  const std::string access = wait_for_line(serve, "\"POST /v1/completions\"");
  EXPECT_THAT(access, HasSubstr("\"POST /v1/completions\" 200 model=tiny-qwen3 id=" +
                                answer["id"].get<std::string>() +
                                " prompt_tokens=" + answer["usage"]["prompt_tokens"].dump() +
                                " output_tokens=6 ttft_ms="));
  EXPECT_THAT(access, HasSubstr("[info]"));
  const std::string stats = wait_for_line(serve, "Avg generation throughput");
  EXPECT_THAT(stats, HasSubstr("engine: Avg prompt throughput: "));
  EXPECT_THAT(stats, HasSubstr(" reqs, KV cache usage: "));
  // The tiny model's block of 16 tokens is 8 KiB; 2 sequences of 2,048 tokens fill 256.
  EXPECT_THAT(serve.log(),
              HasSubstr("KV cache: --kv-cache-memory-bytes of 1024 MiB holds 131072 blocks; "
                        "using 256 blocks (2 MiB), as many as --max-num-seqs 2 sequences of "
                        "--max-model-len 2048 tokens can fill"));
  EXPECT_THAT(serve.metrics(),
              ::testing::ContainsRegex("nibble_build_info\\{version=\"[0-9.]+\",backend=\"cpu\","
                                       "model_name=\"tiny-qwen3\"\\} 1"));
  serve.process->stop();
  EXPECT_THAT(serve.log(), Not(HasSubstr(secret)));
}

TEST(ServeOperator, HubIdFromTheModelCacheServesUnderThatId) {
  REQUIRE_TINY_MODEL(model);
  nibble::testing::TempDir cache;
  // What `nibble pull hf://test-org/tiny-qwen3` leaves (controller/source/model_downloader.h).
  const fs::path cached = cache.path() / "models--test-org--tiny-qwen3" / "main";
  fs::create_directories(cached);
  for (const auto& entry : fs::directory_iterator(model))
    fs::create_symlink(entry.path(), cached / entry.path().filename());
  std::ofstream(cached / ".nibble-download-complete") << "hf://test-org/tiny-qwen3\n";

  ServeProcess serve(ServeProcess::Positional{"test-org/tiny-qwen3"},
                     {"--download-dir", cache.path().string()});
  ASSERT_TRUE(serve.wait_ready()) << serve.log();
  auto res = serve.client().Get("/v1/models");
  ASSERT_TRUE(res);
  EXPECT_EQ(json::parse(res->body)["data"][0]["id"], "test-org/tiny-qwen3");
}

TEST(ServeOperator, ModelNeitherCachedNorReachableNamesNibblePull) {
  nibble::testing::TempDir cache;
  // Nothing listens on this port: the Hub cannot be reached.
  const int closed = nibble::testing::pick_free_port();
  for (const std::string model : {"some-org/some-model", "--model hf://some-org/some-model"}) {
    const auto r = nibble::testing::run_command(
        "HF_ENDPOINT=http://127.0.0.1:" + std::to_string(closed) + " " + NIBBLE_ENGINE + " serve " +
        model + " --download-dir " + cache.path().string() + " 2>&1");
    EXPECT_EQ(r.exit_code, 1) << r.output;
    EXPECT_THAT(r.output, HasSubstr("hf://some-org/some-model is not in the model cache " +
                                    cache.path().string()));
    EXPECT_THAT(r.output, HasSubstr("`nibble pull hf://some-org/some-model`"));
  }
  const auto missing =
      nibble::testing::run_command(std::string(NIBBLE_ENGINE) + " serve /no/such/model 2>&1");
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_THAT(missing.output, HasSubstr("no model directory '/no/such/model'"));
}

}  // namespace
}  // namespace nibble::server
