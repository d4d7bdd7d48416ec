// The chat rendering API: tokenizer_config.json loading and the variables a template sees.
#include <gtest/gtest.h>

#include <fstream>

#include "engine/chat/chat_template.h"
#include "tests/support/temp_dir.h"

namespace nibble::chat {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

TEST(TokenizerConfig, ReadsStringAndAddedTokenSpecialTokens) {
  const auto cfg = parse_tokenizer_config(
      json::parse(R"({"chat_template": "x", "bos_token": {"__type": "AddedToken", "content": "<s>"},
                      "eos_token": "</s>", "pad_token": null})"),
      "cfg");
  EXPECT_EQ(cfg.chat_template, "x");
  ASSERT_EQ(cfg.special_tokens.size(), 2u);
  EXPECT_EQ(cfg.special_tokens[0], (std::pair<std::string, std::string>{"bos_token", "<s>"}));
  EXPECT_EQ(cfg.special_tokens[1], (std::pair<std::string, std::string>{"eos_token", "</s>"}));
}

TEST(TokenizerConfig, PicksTheDefaultOfNamedTemplates) {
  const auto cfg = parse_tokenizer_config(
      json::parse(R"({"chat_template": [{"name": "tool_use", "template": "T"},
                                        {"name": "default", "template": "D"}]})"),
      "cfg");
  EXPECT_EQ(cfg.chat_template, "D");
}

TEST(TokenizerConfig, RefusesMissingOrMistypedFieldsNamingThem) {
  try {
    parse_tokenizer_config(json::parse(R"({"eos_token": "x"})"), "m/tokenizer_config.json");
    FAIL();
  } catch (const TemplateError& e) {
    EXPECT_NE(std::string(e.what()).find("m/tokenizer_config.json: no \"chat_template\""),
              std::string::npos);
  }
  EXPECT_THROW(parse_tokenizer_config(json::parse(R"({"chat_template": 3})"), "c"), TemplateError);
  EXPECT_THROW(
      parse_tokenizer_config(json::parse(R"({"chat_template": "x", "bos_token": 1})"), "c"),
      TemplateError);
}

TEST(TokenizerConfig, LoadsFromADirectoryAndReportsBadJson) {
  nibble::testing::TempDir dir;
  EXPECT_THROW(load_tokenizer_config(dir.path()), TemplateError);
  std::ofstream(dir.path() / "tokenizer_config.json") << "{not json";
  try {
    load_tokenizer_config(dir.path());
    FAIL();
  } catch (const TemplateError& e) {
    EXPECT_NE(std::string(e.what()).find("invalid JSON"), std::string::npos) << e.what();
  }
  std::ofstream(dir.path() / "tokenizer_config.json") << R"({"chat_template": "{{ bos_token }}"})";
  EXPECT_EQ(load_tokenizer_config(dir.path()).chat_template, "{{ bos_token }}");
  std::ofstream(dir.path() / "chat_template.jinja") << "from the file";
  EXPECT_EQ(load_tokenizer_config(dir.path()).chat_template, "from the file");
}

TEST(ChatRequest, SplitsKnownFieldsFromExtraVariables) {
  const auto req = parse_chat_request(ordered_json::parse(
      R"({"messages": [{"role": "user", "content": "hi"}], "add_generation_prompt": true,
          "tools": [{"type": "function"}], "enable_thinking": false})"));
  EXPECT_TRUE(req.add_generation_prompt);
  EXPECT_EQ(req.messages.size(), 1u);
  EXPECT_EQ(req.tools.size(), 1u);
  EXPECT_EQ(req.extra, ordered_json::parse(R"({"enable_thinking": false})"));
}

TEST(ChatRequest, RejectsMalformedInput) {
  EXPECT_THROW(parse_chat_request(ordered_json::parse("[]")), TemplateError);
  EXPECT_THROW(parse_chat_request(ordered_json::parse(R"({"add_generation_prompt": true})")),
               TemplateError);
  EXPECT_THROW(parse_chat_request(ordered_json::parse(R"({"messages": "hi"})")), TemplateError);
  EXPECT_THROW(parse_chat_request(ordered_json::parse(R"({"messages": ["hi"]})")), TemplateError);
  EXPECT_THROW(
      parse_chat_request(ordered_json::parse(R"({"messages": [], "add_generation_prompt": 1})")),
      TemplateError);
  EXPECT_THROW(parse_chat_request(ordered_json::parse(R"({"messages": [], "tools": {}})")),
               TemplateError);
}

TEST(ChatTemplate, PassesTheVariablesTransformersPasses) {
  ChatTemplateConfig cfg;
  cfg.chat_template =
      "{{ bos_token }}|{{ eos_token }}|{{ tools is none }}|{{ documents is none }}|"
      "{{ add_generation_prompt }}|{{ enable_thinking is defined }}|{{ messages | length }}|"
      "{{ unk_token is defined }}";
  cfg.special_tokens = {{"bos_token", "<s>"}, {"eos_token", "</s>"}};
  const ChatTemplate tmpl(cfg);
  EXPECT_EQ(tmpl.render(parse_chat_request(ordered_json::parse(R"({"messages": [{}, {}]})"))),
            "<s>|</s>|True|True|False|False|2|False");
  EXPECT_EQ(
      tmpl.render(parse_chat_request(ordered_json::parse(
          R"({"messages": [], "tools": [], "add_generation_prompt": true, "enable_thinking": 1})"))),
      "<s>|</s>|False|True|True|True|0|False");
}

TEST(ChatTemplate, ExtraVariablesOverrideSpecialTokens) {
  ChatTemplateConfig cfg;
  cfg.chat_template = "{{ bos_token }}";
  cfg.special_tokens = {{"bos_token", "<s>"}};
  EXPECT_EQ(ChatTemplate(cfg).render(
                parse_chat_request(ordered_json::parse(R"({"messages": [], "bos_token": "B"})"))),
            "B");
}

TEST(ChatTemplate, ToolJsonKeepsKeyOrder) {
  ChatTemplateConfig cfg;
  cfg.chat_template = "{% for t in tools %}{{ t | tojson }}{% endfor %}";
  EXPECT_EQ(ChatTemplate(cfg).render(parse_chat_request(
                ordered_json::parse(R"({"messages": [], "tools": [{"z": 1, "a": "é"}]})"))),
            R"({"z": 1, "a": "é"})");
}

}  // namespace
}  // namespace nibble::chat
