// Structured outputs end to end: `nibble-engine serve` with a tiny random Qwen3 model (real
// tokenizer) answers constrained requests; ajv (npm, not ours) validates every answer against
// its schema, through the official openai client; bad schemas get a 400 naming the keyword.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tests/server/serve_process.h"
#include "tests/support/external_tool.h"

namespace nibble::server {
namespace {

using nlohmann::json;

class StructuredOutputs : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    std::string why;
    const std::string dir = testing::tiny_model_dir(why);
    if (dir.empty()) return;
    server_ = new testing::ServeProcess(dir, {});
    if (!server_->wait_ready()) {
      delete server_;
      server_ = nullptr;
    }
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  static testing::ServeProcess* server_;
};
testing::ServeProcess* StructuredOutputs::server_ = nullptr;

json post(const testing::ServeProcess& s, const std::string& path, const json& body, int& status) {
  auto res = s.client().Post(path, body.dump(), "application/json");
  status = res ? res->status : 0;
  return res ? json::parse(res->body, nullptr, false) : json();
}

TEST_F(StructuredOutputs, OfficialClientAnswersValidateWithAjv) {
  REQUIRE_TINY_MODEL(dir);
  ASSERT_NE(server_, nullptr) << "the server did not start";
  NIBBLE_REQUIRE_TOOL(node, "node");
  const std::string root = NIBBLE_SOURCE_DIR;
  auto result = nibble::testing::run_command(
      node + " " + root + "/tests/oracle/structured/structured_check.mjs http://127.0.0.1:" +
      std::to_string(server_->port) + "/v1 tiny");
  EXPECT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find(" 0 failed"), std::string::npos) << result.output;
  // Every request above was counted by kind, and masks were timed.
  EXPECT_GE(server_->metric("nibble_structured_output_requests_total{model_name=\"tiny\",kind="
                            "\"json_schema\"}"),
            14);
  EXPECT_GE(server_->metric("nibble_structured_output_requests_total{model_name=\"tiny\",kind="
                            "\"tool_call\"}"),
            6);
  EXPECT_GT(server_->metric("nibble_structured_output_mask_seconds_count{model_name=\"tiny\"}"),
            50);
}

TEST_F(StructuredOutputs, UnsupportedSchemasAndFieldsAre400sNamingTheKeyword) {
  REQUIRE_TINY_MODEL(dir);
  ASSERT_NE(server_, nullptr);
  const json messages = json::array({{{"role", "user"}, {"content", "hi"}}});
  struct Case {
    json extra;
    std::string param, needle;
  };
  const std::vector<Case> cases = {
      {json::parse(R"({"response_format": {"type": "json_schema", "json_schema": {"name": "x",
          "schema": {"type": "number", "multipleOf": 0.01}}}})"),
       "response_format", "'multipleOf'"},
      {json::parse(R"({"response_format": {"type": "json_schema", "json_schema": {"name": "x",
          "schema": {"type": "integer", "minimum": 3, "maximum": 2}}}})"),
       "response_format", "no integer satisfies"},
      {json::parse(R"({"response_format": {"type": "json_schema", "json_schema": {"name": "x",
          "schema": {"oneOf": [{"type": "string"}]}}}})"),
       "response_format", "'oneOf'"},
      {json::parse(R"({"guided_regex": "(a)\\1"})"), "guided_regex", "backreferences"},
      {json::parse(R"({"guided_choice": []})"), "guided_choice", "non-empty"},
      {json::parse(R"({"guided_grammar": "root ::= \"a\""})"), "guided_grammar", "not supported"},
      {json::parse(R"({"response_format": {"type": "yaml"}})"), "response_format", "'yaml'"},
      {json::parse(R"({"guided_regex": "a", "guided_choice": ["b"]})"), "guided_choice",
       "cannot be combined"},
      {json::parse(R"({"tool_choice": {"type": "function", "function": {"name": "missing"}},
          "tools": [{"type": "function", "function": {"name": "f"}}]})"),
       "tool_choice", "'missing'"},
  };
  for (const Case& c : cases) {
    json body = {{"model", "tiny"}, {"messages", messages}, {"max_tokens", 4}};
    body.update(c.extra);
    int status = 0;
    const json answer = post(*server_, "/v1/chat/completions", body, status);
    EXPECT_EQ(status, 400) << body.dump() << " -> " << answer.dump();
    ASSERT_TRUE(answer.contains("error")) << answer.dump();
    EXPECT_EQ(answer["error"]["param"], c.param) << answer.dump();
    EXPECT_NE(answer["error"]["message"].get<std::string>().find(c.needle), std::string::npos)
        << answer.dump();
  }
}

TEST_F(StructuredOutputs, ChoiceIsExactAndGreedyRepeatsFromTheGrammarCache) {
  REQUIRE_TINY_MODEL(dir);
  ASSERT_NE(server_, nullptr);
  const json body = {{"model", "tiny"},
                     {"prompt", "Pick one:"},
                     {"temperature", 0},
                     {"max_tokens", 50},
                     {"guided_choice", json::array({"one", "two", "three"})}};
  int status = 0;
  const json first = post(*server_, "/v1/completions", body, status);
  ASSERT_EQ(status, 200) << first.dump();
  const json second = post(*server_, "/v1/completions", body, status);
  ASSERT_EQ(status, 200) << second.dump();
  const std::string text = first["choices"][0]["text"];
  EXPECT_TRUE(text == "one" || text == "two" || text == "three") << text;
  EXPECT_EQ(first["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(second["choices"][0]["text"], text);
}

// Token masks computed while the forward pass runs (the default) and before it
// (--token-mask-overlap false) give the same answers: seeded sampled requests whose n = 3
// constrained choices share each step (their masks computed in parallel).
TEST_F(StructuredOutputs, OverlappedMasksGiveTheSerialAnswers) {
  REQUIRE_TINY_MODEL(dir);
  ASSERT_NE(server_, nullptr);
  testing::ServeProcess serial(dir, {"--token-mask-overlap", "false"});
  ASSERT_TRUE(serial.wait_ready());
  const json messages = json::array({{{"role", "user"}, {"content", "Describe a person."}}});
  const json schema = json::parse(R"({"type": "object", "additionalProperties": false,
      "required": ["name", "age", "tags"], "properties": {"name": {"type": "string"},
      "age": {"type": "integer", "minimum": 0, "maximum": 150},
      "tags": {"type": "array", "maxItems": 3, "items": {"enum": ["a", "b", "c"]}}}})");
  const std::vector<json> constraints = {
      {{"response_format",
        {{"type", "json_schema"}, {"json_schema", {{"name", "p"}, {"schema", schema}}}}}},
      {{"guided_regex", "[a-z]{2,8}( [0-9]{1,3}){1,4}"}}};
  for (const json& constraint : constraints) {
    for (int seed : {11, 12}) {
      json body = {{"model", "tiny"},    {"messages", messages}, {"max_tokens", 48},
                   {"temperature", 1.0}, {"seed", seed},         {"n", 3}};
      body.update(constraint);
      int status_overlapped = 0, status_serial = 0;
      const json overlapped = post(*server_, "/v1/chat/completions", body, status_overlapped);
      const json serial_answer = post(serial, "/v1/chat/completions", body, status_serial);
      ASSERT_EQ(status_overlapped, 200) << overlapped.dump();
      ASSERT_EQ(status_serial, 200) << serial_answer.dump();
      ASSERT_EQ(overlapped["choices"].size(), 3u);
      ASSERT_EQ(serial_answer["choices"].size(), 3u);
      for (std::size_t i = 0; i < 3; ++i) {
        EXPECT_EQ(overlapped["choices"][i]["message"]["content"],
                  serial_answer["choices"][i]["message"]["content"])
            << constraint.dump() << " seed " << seed << " choice " << i;
      }
    }
  }
  EXPECT_GT(serial.metric("nibble_structured_output_mask_seconds_count{model_name=\"tiny\"}"), 20);
}

}  // namespace
}  // namespace nibble::server
