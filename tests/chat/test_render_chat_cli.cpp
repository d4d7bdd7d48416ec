// `nibble-engine render-chat`: JSON on stdin -> the prompt on stdout, exit codes for errors.
#include <gtest/gtest.h>

#include <fstream>

#include "tests/support/child_process.h"
#include "tests/support/temp_dir.h"

namespace {

std::string engine_binary() {
  return NIBBLE_ENGINE_BINARY;
}

class RenderChatCli : public ::testing::Test {
 protected:
  void SetUp() override {
    std::ofstream(dir_.path() / "tokenizer_config.json") << R"({
      "bos_token": {"__type": "AddedToken", "content": "<s>"},
      "chat_template": "{{ bos_token }}{% for m in messages %}{% if m.role == 'user' %}U:{{ m.content }}\n{% else %}{{ raise_exception('only users here') }}{% endif %}{% endfor %}{% if add_generation_prompt %}A:{% endif %}{{ extra_var }}"
    })";
    std::ofstream(dir_.path() / "ok.json")
        << R"({"messages": [{"role": "user", "content": "héllo"}], "add_generation_prompt": true, "extra_var": "!"})";
    std::ofstream(dir_.path() / "raises.json")
        << R"({"messages": [{"role": "assistant", "content": "x"}]})";
    std::ofstream(dir_.path() / "broken.json") << R"({"messages": [)";
  }
  nibble::testing::CommandResult run(const std::string& input_file, const std::string& extra = "") {
    return nibble::testing::run_command(engine_binary() + " render-chat --model " +
                                        dir_.path().string() + extra + " < " +
                                        (dir_.path() / input_file).string() + " 2>&1");
  }
  nibble::testing::TempDir dir_;
};

TEST_F(RenderChatCli, PrintsTheRenderedPromptExactly) {
  const auto r = run("ok.json");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output, "<s>U:héllo\nA:!");
}

// The template's "\n" (a JSON escape) puts raise_exception on line 2.
TEST_F(RenderChatCli, TemplateErrorsExitNonZeroWithTheLine) {
  const auto r = run("raises.json");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("chat template line 2: only users here"), std::string::npos) << r.output;
}

TEST_F(RenderChatCli, MalformedJsonIsAUsageError) {
  const auto r = run("broken.json");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("stdin is not valid JSON"), std::string::npos) << r.output;
}

TEST_F(RenderChatCli, HelpAndMissingModel) {
  const auto help = nibble::testing::run_command(engine_binary() + " render-chat --help");
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.output.find("usage: nibble-engine render-chat --model DIR"), std::string::npos);
  EXPECT_EQ(
      nibble::testing::run_command(engine_binary() + " render-chat < /dev/null 2>&1").exit_code, 2);
}

}  // namespace
