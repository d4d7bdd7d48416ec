// Issue 42: the eagle3 method served end to end. nibble-make-model writes a random EAGLE-3 head
// for its tiny qwen3_next (4 layers: the head names layers 0, 2 and 3); serve loads it beside
// the model (--speculative-config {"method":"eagle3","model":DIR}), answers a greedy completion
// with the tokens a server without speculation gives, and the speculative decoding counters
// move. A directory that is no EAGLE-3 head stops serve at start-up with a message naming it.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <nlohmann/json.hpp>

#include "tests/server/serve_process.h"
#include "tests/support/child_process.h"

namespace nibble::server {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;
using testing::ServeProcess;

std::string eagle3_config(const std::string& head) {
  return json{{"method", "eagle3"}, {"model", head}, {"num_speculative_tokens", 2}}.dump();
}

TEST(ServeProcess, Eagle3SpeculationServesTheSameCompletion) {
  nibble::testing::TempDir dir;
  const std::string model = (dir.path() / "qwen3_next").string();
  REQUIRE_SERVED_MODEL("--arch qwen3_next --preset tiny --seed 9 --dtype bf16", "qwen3", model);
  const std::string head = (dir.path() / "head").string();
  const auto made = nibble::testing::run_command(
      std::string(NIBBLE_MAKE_MODEL) + " --arch llama_eagle3 --preset tiny --seed 4 --threads 2 " +
      "--target " + model + " --output " + head);
  ASSERT_EQ(made.exit_code, 0) << made.output;
  const std::vector<std::string> shape = {"--device",       "cpu", "--max-model-len", "256",
                                          "--max-num-seqs", "4"};

  testing::expect_same_completion_with_speculation(
      model, shape, {"--speculative-config", eagle3_config(head)},
      {"EAGLE-3: the head reads the inputs of the target's layers 0, 2 and 3",
       "speculative decoding: eagle3 drafts of up to 2 tokens"});
}

TEST(ServeProcess, Eagle3WithADirectoryThatIsNoHeadStopsServeAtStartUp) {
  REQUIRE_TINY_MODEL(model);  // a Qwen3, given as its own head
  ServeProcess serve(model, {"--device", "cpu", "--speculative-config", eagle3_config(model)});
  EXPECT_FALSE(serve.wait_ready(30s));
  const int status = serve.process->stop();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 2) << status << serve.log();
  EXPECT_NE(serve.log().find("not an EAGLE-3 head"), std::string::npos) << serve.log();
}

}  // namespace
}  // namespace nibble::server
