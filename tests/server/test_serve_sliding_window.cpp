// `nibble-engine serve` on a tiny gpt_oss (a sliding layer of window 8 beside a full-attention
// one, the real gpt-oss tokenizer): start-up logs the KV capacity counted with the window (tokens
// of context per GiB, full-length sequences at once) with prefix caching left on, a completion
// longer than the window runs, the same prompt again hits the prefix cache with the same text,
// and the usage gauge is back at 0 after them.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <thread>

#include "tests/server/serve_process.h"

namespace nibble::server {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;
using testing::ServeProcess;

TEST(ServeSlidingWindow, LogsTheCapacityWithTheWindow) {
  nibble::testing::TempDir dir;
  const std::string model = (dir.path() / "gpt_oss").string();
  REQUIRE_SERVED_MODEL("--arch gpt_oss --preset tiny --seed 5 --dtype bf16", "gptoss", model);
  const json config = json::parse(std::ifstream(model + "/config.json"));
  ASSERT_EQ(config["sliding_window"], 8);
  // The CPU backend's FP32 block: one layer of each group, keys and values, 16 positions.
  const double block_bytes =
      2.0 * 16 * config["num_key_value_heads"].get<double>() * config["head_dim"].get<double>() * 4;
  // 256 tokens: 16 full blocks, and min(16, ceil((8 - 1 + 64) / 16) + 1 = 6) sliding ones.
  const double per_sequence = 16 + 6;
  const double tokens_per_gib = 256.0 * double(1 << 30) / (per_sequence * block_bytes);
  const int blocks = 200;
  ServeProcess serve(model, {"--device", "cpu", "--max-model-len", "256", "--max-num-seqs", "64",
                             "--max-num-batched-tokens", "64", "--kv-cache-memory-bytes",
                             std::to_string(std::int64_t(blocks * block_bytes))});
  ASSERT_TRUE(serve.wait_ready()) << serve.log();
  const std::string log = serve.log();
  std::smatch m;
  ASSERT_TRUE(std::regex_search(log, m,
                                std::regex("KV capacity: ([0-9]+) tokens of context per GiB, "
                                           "([0-9]+) concurrent sequences of --max-model-len 256 "
                                           "tokens \\(sliding layers keep their last 8 tokens' "
                                           "blocks only\\)")))
      << log;
  EXPECT_NEAR(std::stod(m[1].str()), tokens_per_gib, 0.5);
  EXPECT_EQ(std::stoi(m[2].str()), blocks / int(per_sequence));
  EXPECT_EQ(log.find("prefix caching off"), std::string::npos) << log;  // windows keep it on

  httplib::Client c("127.0.0.1", serve.port);
  c.set_read_timeout(120, 0);
  const json body = {{"model", "tiny"},
                     // Past two 16-token blocks, so that a second request has blocks to hit.
                     {"prompt",
                      "one two three four five six seven eight nine ten eleven twelve "
                      "one two three four five six seven eight nine ten eleven twelve "
                      "one two three four five six seven eight nine ten eleven twelve"},
                     {"max_tokens", 40},
                     {"temperature", 0},
                     {"ignore_eos", true}};
  auto res = c.Post("/v1/completions", body.dump(), "application/json");
  ASSERT_TRUE(res) << serve.log();
  ASSERT_EQ(res->status, 200) << res->body;
  const json first = json::parse(res->body);
  EXPECT_EQ(first["usage"]["completion_tokens"], 40);
  // The same prompt again: its prefix comes from the cache (the window's sliding blocks still
  // cached), and the greedy text is the same.
  auto again = c.Post("/v1/completions", body.dump(), "application/json");
  ASSERT_TRUE(again) << serve.log();
  ASSERT_EQ(again->status, 200) << again->body;
  const json second = json::parse(again->body);
  const int prompt_tokens = second["usage"]["prompt_tokens"];
  ASSERT_GT(prompt_tokens, 32);
  // Every whole block but the one holding the last prompt token (whose logits are needed).
  EXPECT_EQ(second["usage"]["prompt_tokens_details"]["cached_tokens"],
            (prompt_tokens - 1) / 16 * 16)
      << again->body;
  EXPECT_EQ(second["choices"][0]["text"], first["choices"][0]["text"]);
  // The gauge is set after the step that finished the request: wait for it.
  double usage = 1;
  for (int i = 0; i < 50 && usage != 0; ++i) {
    usage = serve.metric("nibble_kv_cache_usage_ratio{model_name=\"tiny\"}");
    if (usage != 0) std::this_thread::sleep_for(100ms);
  }
  EXPECT_EQ(usage, 0) << "KV blocks still held after the request finished";
}

}  // namespace
}  // namespace nibble::server
