// Every binary's command line as kubectl and vLLM users expect it (issue 45 item 5): --help on
// every command exits 0 with its usage, --version everywhere, and `nibble completion bash`.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/support/child_process.h"
#include "tests/support/temp_dir.h"

namespace nibble {
namespace {

using nibble::testing::run_command;
using ::testing::HasSubstr;
using ::testing::StartsWith;

const std::string kNibble = NIBBLE_CLI;

TEST(Cli, HelpOnEveryNibbleCommandExitsZeroWithItsUsage) {
  for (const std::string command :
       {"apply", "get", "describe", "delete", "scale", "wait", "logs", "import", "validate",
        "render", "pull", "completion", "version"}) {
    for (const std::string flag : {"--help", "-h"}) {
      const auto r = run_command(kNibble + " " + command + " " + flag);
      EXPECT_EQ(r.exit_code, 0) << command << " " << flag << ": " << r.output;
      EXPECT_THAT(r.output, StartsWith("usage: nibble " + command)) << command;
    }
  }
  // After other arguments too, as kubectl takes it.
  const auto r = run_command(kNibble + " get recipes -o json --help");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_THAT(r.output, HasSubstr("--watch"));
  const auto top = run_command(kNibble + " --help");
  EXPECT_EQ(top.exit_code, 0);
  for (const char* command : {"scale recipe/NAME --replicas N", "logs recipe/NAME", "completion"})
    EXPECT_THAT(top.output, HasSubstr(command));
  EXPECT_EQ(run_command(kNibble + " frobnicate 2>&1").exit_code, 2);
  EXPECT_EQ(run_command(kNibble + " 2>&1").exit_code, 2);
}

TEST(Cli, EveryBinaryHasHelpAndVersion) {
  struct Binary {
    std::string path, name;
  };
  const std::vector<Binary> binaries = {{NIBBLE_CLI, "nibble"},
                                        {NIBBLE_CONTROLLER, "nibble-controller"},
                                        {NIBBLE_ENGINE, "nibble-engine"},
                                        {NIBBLE_BENCH, "nibble-bench"},
                                        {NIBBLE_MAKE_MODEL, "nibble-make-model"},
                                        {NIBBLE_QUANTIZE, "nibble-quantize"}};
  for (const Binary& b : binaries) {
    const auto version = run_command(b.path + " --version");
    EXPECT_EQ(version.exit_code, 0) << b.name << ": " << version.output;
    EXPECT_THAT(version.output, StartsWith(b.name + " 0.")) << b.name;
    const auto help = run_command(b.path + " --help");
    EXPECT_EQ(help.exit_code, 0) << b.name << ": " << help.output;
    EXPECT_THAT(help.output, HasSubstr("usage")) << b.name;
  }
  for (const std::string command : {"serve", "generate", "tokenize", "render-chat"}) {
    const auto r = run_command(std::string(NIBBLE_ENGINE) + " " + command + " --help");
    EXPECT_EQ(r.exit_code, 0) << command << ": " << r.output;
    EXPECT_THAT(r.output, HasSubstr("usage")) << command;
  }
}

// Runs bash's completion function as the shell would for the words typed so far.
std::string complete(const std::string& words, int cword) {
  nibble::testing::TempDir dir;
  const std::string script = (dir.path() / "completion.bash").string();
  const auto made = run_command(kNibble + " completion bash > " + script);
  EXPECT_EQ(made.exit_code, 0);
  return run_command("bash -c 'source " + script + " && COMP_WORDS=(" + words + ") && COMP_CWORD=" +
                     std::to_string(cword) + "; _nibble; echo \"${COMPREPLY[*]}\"'")
      .output;
}

TEST(Cli, BashCompletionOffersCommandsFlagsAndFormats) {
  const auto r = run_command(kNibble + " completion bash");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_THAT(r.output, HasSubstr("complete -F _nibble nibble"));
  EXPECT_EQ(run_command(kNibble + " completion bash | bash -n").exit_code, 0);
  EXPECT_EQ(run_command(kNibble + " completion zsh 2>&1").exit_code, 2);

  EXPECT_EQ(complete("nibble sc", 1), "scale\n");
  EXPECT_EQ(complete("nibble lo", 1), "logs\n");
  EXPECT_EQ(complete("nibble logs recipe/x --f", 3), "--follow\n");
  EXPECT_EQ(complete("nibble scale recipe/x --r", 3), "--replicas\n");
  EXPECT_EQ(complete("nibble get recipes -o y", 4), "yaml\n");
  EXPECT_EQ(complete("nibble get recipes --w", 3), "--watch\n");
  EXPECT_EQ(complete("nibble --controller http://h:1 ge", 3), "get\n");
  EXPECT_EQ(complete("nibble get r", 2), "recipes recipe\n");
}

}  // namespace
}  // namespace nibble
