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
using testing::greedy_completion;
using testing::ServeProcess;

TEST(ServeProcess, MtpSpeculationServesTheSameCompletion) {
  nibble::testing::TempDir dir;
  const std::string model = (dir.path() / "qwen3_next").string();
  REQUIRE_SERVED_MODEL("--arch qwen3_next --preset tiny --seed 9 --dtype bf16", "qwen3", model);
  const std::vector<std::string> shape = {"--device",       "cpu", "--max-model-len", "256",
                                          "--max-num-seqs", "4"};

  std::vector<std::string> args = shape;
  args.insert(args.end(), {"--speculative-config",
                           json{{"method", "mtp"}, {"num_speculative_tokens", 2}}.dump()});
  json with_mtp, without;
  {
    ServeProcess serve(model, args);
    ASSERT_TRUE(serve.wait_ready(120s)) << serve.log();
    EXPECT_NE(serve.log().find("speculative decoding: mtp drafts of up to 2 tokens"),
              std::string::npos)
        << serve.log();
    with_mtp = greedy_completion(serve);
    ASSERT_FALSE(with_mtp.contains("error")) << with_mtp.dump() << serve.log();
    EXPECT_EQ(with_mtp["usage"]["completion_tokens"], 24);
    EXPECT_GT(serve.metric("nibble_spec_decode_num_draft_tokens_total{model_name=\"tiny\"}"), 0);
  }
  {
    ServeProcess serve(model, shape);
    ASSERT_TRUE(serve.wait_ready(120s)) << serve.log();
    without = greedy_completion(serve);
    ASSERT_FALSE(without.contains("error")) << without.dump();
  }
  EXPECT_EQ(with_mtp["choices"][0]["text"], without["choices"][0]["text"]);
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
