// Issue 42: the mtp method served end to end. nibble-make-model's tiny qwen3_next carries an MTP
// module; serve drafts with it (--speculative-config {"method":"mtp"}), answers a greedy
// completion with the tokens a server without speculation gives, and the speculative decoding
// counters move. A model without mtp.* weights is refused at start-up with a message naming it.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <nlohmann/json.hpp>

#include "tests/server/serve_process.h"

namespace nibble::server {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;
using testing::ServeProcess;

TEST(ServeProcess, MtpSpeculationServesTheSameCompletion) {
  nibble::testing::TempDir dir;
  const std::string model = (dir.path() / "qwen3_next").string();
  REQUIRE_SERVED_MODEL("--arch qwen3_next --preset tiny --seed 9 --dtype bf16", "qwen3", model);
  const std::vector<std::string> shape = {"--device",       "cpu", "--max-model-len", "256",
                                          "--max-num-seqs", "4"};

  testing::expect_same_completion_with_speculation(
      model, shape,
      {"--speculative-config", json{{"method", "mtp"}, {"num_speculative_tokens", 2}}.dump()},
      {"speculative decoding: mtp drafts of up to 2 tokens"});
}

TEST(ServeProcess, MtpOnAModelWithoutAModuleStopsServeAtStartUp) {
  REQUIRE_TINY_MODEL(model);  // a Qwen3: no mtp.* weights
  ServeProcess serve(model, {"--speculative-config",
                             json{{"method", "mtp"}, {"num_speculative_tokens", 2}}.dump()});
  EXPECT_FALSE(serve.wait_ready(30s));
  const int status = serve.process->stop();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 2) << status << serve.log();
  EXPECT_NE(serve.log().find("has no multi-token-prediction module"), std::string::npos)
      << serve.log();
}

}  // namespace
}  // namespace nibble::server
