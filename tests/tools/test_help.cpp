// `--help` on every command of nibble-engine and on every tool binary exits 0 with its usage
// (issue 45): the engine's commands are read from its own command list, so a new one is covered
// the day it is added; `--help` after other arguments, even wrong ones, is still help.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "tests/support/child_process.h"

namespace nibble {
namespace {

using nibble::testing::run_command;
using ::testing::HasSubstr;
using ::testing::StartsWith;

const std::string kEngine = NIBBLE_ENGINE;

// The commands `nibble-engine --help` lists ("  name  summary" lines under "commands:").
std::vector<std::string> engine_commands() {
  const auto top = run_command(kEngine + " --help");
  EXPECT_EQ(top.exit_code, 0) << top.output;
  std::vector<std::string> commands;
  std::istringstream lines(top.output.substr(top.output.find("commands:")));
  std::string line;
  std::getline(lines, line);
  while (std::getline(lines, line) && line.starts_with("  ")) {
    std::istringstream words(line);
    std::string name;
    words >> name;
    commands.push_back(name);
  }
  return commands;
}

TEST(Help, EveryEngineCommandAnswersHelpWithItsUsage) {
  const std::vector<std::string> commands = engine_commands();
  EXPECT_THAT(commands,
              ::testing::IsSupersetOf({"generate", "render-chat", "serve", "tokenize", "version"}));
  for (const std::string& command : commands) {
    for (const std::string help : {"--help", "-h"}) {
      const auto r = run_command(kEngine + " " + command + " " + help + " 2>&1");
      EXPECT_EQ(r.exit_code, 0) << command << " " << help << ": " << r.output;
      EXPECT_THAT(r.output, StartsWith("usage: nibble-engine " + command))
          << command << " " << help;
    }
    // After other arguments, wrong ones included.
    const auto late = run_command(kEngine + " " + command + " --no-such-flag 1 --help 2>&1");
    EXPECT_EQ(late.exit_code, 0) << command << ": " << late.output;
    EXPECT_THAT(late.output, StartsWith("usage: nibble-engine " + command)) << command;
  }
  const auto late = run_command(kEngine + " serve --model /m --port not-a-port --help 2>&1");
  EXPECT_EQ(late.exit_code, 0) << late.output;
  EXPECT_THAT(late.output, HasSubstr("--log-stats-interval SECONDS"));
}

TEST(Help, EveryToolBinaryAnswersHelpWithItsUsage) {
  std::vector<std::string> tools = {NIBBLE_BENCH, NIBBLE_MAKE_MODEL, NIBBLE_QUANTIZE,
                                    NIBBLE_SPEC_BENCH, NIBBLE_NGRAM_BENCH};
#ifdef NIBBLE_KERNEL_BENCH
  tools.push_back(NIBBLE_KERNEL_BENCH);  // built with CUDA only
#endif
  for (const std::string& tool : tools) {
    const std::string name = tool.substr(tool.rfind('/') + 1);
    for (const std::string help : {"--help", "-h"}) {
      const auto r = run_command(tool + " " + help + " 2>&1");
      EXPECT_EQ(r.exit_code, 0) << name << " " << help << ": " << r.output;
      EXPECT_THAT(r.output, StartsWith("usage: " + name)) << name << " " << help;
    }
  }
}

}  // namespace
}  // namespace nibble
