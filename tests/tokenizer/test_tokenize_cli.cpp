// `nibble-engine tokenize`: text -> ids, ids -> text, special tokens, usage errors.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "tests/support/child_process.h"
#include "tests/support/temp_dir.h"
#include "tests/tokenizer/fixture_path.h"

namespace nibble::tokenizer {
namespace {

class TokenizeCli : public ::testing::Test {
 protected:
  void SetUp() override {
    engine_ = NIBBLE_ENGINE_BINARY;  // the built nibble-engine, from CMake
    std::filesystem::copy_file(testing::fixture("byte_level_string_merges.json"),
                               dir_.path() / "tokenizer.json");
  }
  nibble::testing::CommandResult run(const std::string& stdin_text, const std::string& options) {
    const auto input = dir_.path() / "stdin.txt";
    std::ofstream(input, std::ios::binary) << stdin_text;
    return nibble::testing::run_command(engine_ + " tokenize --model " + dir_.path().string() +
                                        " " + options + " < " + input.string());
  }
  std::string engine_;
  nibble::testing::TempDir dir_;
};

TEST_F(TokenizeCli, EncodesStdinToAJsonArray) {
  auto r = run("abc ab", "");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output, "[5,3,4]\n");
  r = run("abc ab", "--add-special-tokens");
  EXPECT_EQ(r.output, "[13,5,3,4]\n");
}

TEST_F(TokenizeCli, DecodesAJsonArray) {
  auto r = run("[13, 5, 3, 4]", "--decode");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output, "<|begin|>abc ab");
  r = run("[13, 5, 3, 4]", "--decode --skip-special-tokens");
  EXPECT_EQ(r.output, "abc ab");
}

TEST_F(TokenizeCli, RejectsBadInputWithAMessage) {
  auto r = run("not json", "--decode");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("JSON array of integer token ids"), std::string::npos) << r.output;
  r = run("[999]", "--decode");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("token id 999 is outside the vocabulary"), std::string::npos) << r.output;
  r = nibble::testing::run_command(engine_ + " tokenize --model /nonexistent < /dev/null");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("/nonexistent/tokenizer.json: cannot open"), std::string::npos)
      << r.output;
  r = nibble::testing::run_command(engine_ + " tokenize < /dev/null");
  EXPECT_EQ(r.exit_code, 2);
  r = nibble::testing::run_command(engine_ + " tokenize --help");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.output.find("--add-special-tokens"), std::string::npos);
}

}  // namespace
}  // namespace nibble::tokenizer
