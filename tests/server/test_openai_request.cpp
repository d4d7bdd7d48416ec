// Request validation, table-driven: each bad body gives a 400 naming the parameter.
#include <gtest/gtest.h>

#include "engine/server/api_error.h"
#include "engine/server/openai_request.h"

namespace nibble::server {
namespace {

using nlohmann::json;

struct BadCase {
  const char* body;
  const char* param;
};

TEST(OpenAiRequest, BadCompletionBodiesNameTheParameter) {
  const BadCase cases[] = {
      {R"({"max_tokens": 5})", "prompt"},
      {R"({"prompt": 5})", "prompt"},
      {R"({"prompt": ["a", "b"]})", "prompt"},
      {R"({"prompt": [1, -2]})", "prompt"},
      {R"({"prompt": "x", "max_tokens": "ten"})", "max_tokens"},
      {R"({"prompt": "x", "max_tokens": 0})", "max_tokens"},
      {R"({"prompt": "x", "temperature": 2.5})", "temperature"},
      {R"({"prompt": "x", "temperature": "hot"})", "temperature"},
      {R"({"prompt": "x", "top_p": 0})", "top_p"},
      {R"({"prompt": "x", "top_k": -2})", "top_k"},
      {R"({"prompt": "x", "min_p": 1.5})", "min_p"},
      {R"({"prompt": "x", "presence_penalty": 3})", "presence_penalty"},
      {R"({"prompt": "x", "frequency_penalty": -3})", "frequency_penalty"},
      {R"({"prompt": "x", "repetition_penalty": 0})", "repetition_penalty"},
      {R"({"prompt": "x", "seed": "abc"})", "seed"},
      {R"({"prompt": "x", "stop": 3})", "stop"},
      {R"({"prompt": "x", "stop": [""]})", "stop"},
      {R"({"prompt": "x", "stop_token_ids": [1.5]})", "stop_token_ids"},
      {R"({"prompt": "x", "n": 0})", "n"},
      {R"({"prompt": "x", "n": 1000})", "n"},
      {R"({"prompt": "x", "logprobs": 50})", "logprobs"},
      {R"({"prompt": "x", "stream": "yes"})", "stream"},
      {R"({"prompt": "x", "stream_options": {"include_usage": true}})", "stream_options"},
      {R"({"prompt": "x", "model": 7})", "model"},
      {R"({"prompt": "x", "echo": 1})", "echo"},
  };
  for (const BadCase& c : cases) {
    try {
      parse_completion_request(json::parse(c.body), {});
      ADD_FAILURE() << "accepted: " << c.body;
    } catch (const ApiError& e) {
      EXPECT_EQ(e.status(), 400) << c.body;
      EXPECT_EQ(e.body()["error"]["param"], c.param) << c.body << " -> " << e.what();
    }
  }
}

TEST(OpenAiRequest, BadChatBodiesNameTheParameter) {
  const BadCase cases[] = {
      {R"({})", "messages"},
      {R"({"messages": []})", "messages"},
      {R"({"messages": "hi"})", "messages"},
      {R"({"messages": [{"content": "no role"}]})", "messages"},
      {R"({"messages": [{"role": "user", "content": 5}]})", "messages"},
      {R"({"messages": [{"role": "user", "content": "x"}], "tools": {}})", "tools"},
      {R"({"messages": [{"role": "user", "content": "x"}], "top_logprobs": 3})", "top_logprobs"},
      {R"({"messages": [{"role": "user", "content": "x"}], "max_completion_tokens": -1})",
       "max_completion_tokens"},
      {R"({"messages": [{"role": "user", "content": "x"}], "chat_template_kwargs": []})",
       "chat_template_kwargs"},
      {R"({"messages": [{"role": "user", "content": "x"}], "reasoning_effort": "max"})",
       "reasoning_effort"},
      {R"({"messages": [{"role": "user", "content": "x"}], "reasoning_effort": 2})",
       "reasoning_effort"},
  };
  for (const BadCase& c : cases) {
    try {
      parse_chat_request(json::parse(c.body), {});
      ADD_FAILURE() << "accepted: " << c.body;
    } catch (const ApiError& e) {
      EXPECT_EQ(e.status(), 400) << c.body;
      EXPECT_EQ(e.body()["error"]["param"], c.param) << c.body << " -> " << e.what();
    }
  }
  EXPECT_THROW(parse_chat_request(json::array(), {}), ApiError);
}

TEST(OpenAiRequest, GoodBodiesMapToSamplingParams) {
  CompletionRequest c = parse_completion_request(
      json::parse(R"({"model": "m", "prompt": [[1, 2, 3]], "max_tokens": 7, "temperature": 0,
                     "top_k": -1, "seed": 9, "stop": "##", "stream": true,
                     "stream_options": {"include_usage": true}, "logprobs": 2, "n": 3,
                     "unknown_extra_field": {"ignored": true}})"),
      {});
  EXPECT_EQ(c.prompt_ids, (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(c.params.max_tokens, 7);
  EXPECT_TRUE(c.params.greedy());
  EXPECT_EQ(c.params.top_k, 0);
  EXPECT_EQ(c.params.seed, 9u);
  EXPECT_EQ(c.params.stop, (std::vector<std::string>{"##"}));
  EXPECT_TRUE(c.stream && c.include_usage);
  EXPECT_EQ(c.params.logprobs, 2);
  EXPECT_EQ(c.params.n, 3);

  ChatCompletionRequest chat = parse_chat_request(
      json::parse(R"({"messages": [{"role": "user", "content": "hi"}], "max_completion_tokens": 4,
                     "logprobs": true, "top_logprobs": 2})"),
      {});
  EXPECT_EQ(chat.params.max_tokens, 4);
  EXPECT_TRUE(chat.max_tokens_given);
  EXPECT_EQ(chat.params.logprobs, 2);
}

}  // namespace
}  // namespace nibble::server

namespace nibble::server {
namespace {

std::string error_of(const char* body) {
  try {
    parse_completion_request(json::parse(body), {});
  } catch (const ApiError& e) {
    return e.what();
  }
  return "";
}

// gpt-oss's template reads reasoning_effort as a template variable.
TEST(OpenAiRequest, ReasoningEffortReachesTheTemplate) {
  for (const char* effort : {"low", "medium", "high"}) {
    const ChatCompletionRequest chat = parse_chat_request(
        json{{"messages", {{{"role", "user"}, {"content", "x"}}}}, {"reasoning_effort", effort}},
        {});
    EXPECT_EQ(chat.template_kwargs["reasoning_effort"], effort);
  }
  const ChatCompletionRequest without =
      parse_chat_request(json::parse(R"({"messages": [{"role": "user", "content": "x"}],
                                         "reasoning_effort": null})"),
                         {});
  EXPECT_FALSE(without.template_kwargs.contains("reasoning_effort"));
  const ChatCompletionRequest kwargs_win = parse_chat_request(
      json::parse(R"({"messages": [{"role": "user", "content": "x"}], "reasoning_effort": "low",
                     "chat_template_kwargs": {"reasoning_effort": "high"}})"),
      {});
  EXPECT_EQ(kwargs_win.template_kwargs["reasoning_effort"], "high");
}

TEST(OpenAiRequest, IntegerErrorsShowTheValueSent) {
  EXPECT_EQ(error_of(R"({"prompt": "x", "max_tokens": 1e20})"),
            "'max_tokens' must be between 1 and 2147483647, got 1e+20");
  EXPECT_EQ(error_of(R"({"prompt": "x", "max_tokens": 18446744073709551615})"),
            "'max_tokens' must be between 1 and 2147483647, got 18446744073709551615");
  EXPECT_EQ(error_of(R"({"prompt": "x", "max_tokens": -9223372036854775808})"),
            "'max_tokens' must be between 1 and 2147483647, got -9223372036854775808");
  EXPECT_EQ(error_of(R"({"prompt": "x", "max_tokens": 0})"),
            "'max_tokens' must be between 1 and 2147483647, got 0");
  EXPECT_EQ(error_of(R"({"prompt": "x", "n": 1e300})"), "'n' must be between 1 and 16, got 1e+300");
  EXPECT_EQ(error_of(R"({"prompt": "x", "top_k": 2.5})"), "'top_k' must be an integer");
  EXPECT_EQ(error_of(R"({"prompt": "x", "logprobs": -1e19})"),
            "'logprobs' must be between 0 and 20, got -1e+19");
  EXPECT_EQ(error_of(R"({"prompt": [18446744073709551615]})"),
            "'prompt' must hold non-negative integer token ids");
  EXPECT_EQ(error_of(R"({"prompt": "x", "stop_token_ids": [2147483648]})"),
            "'stop_token_ids' must hold non-negative integer token ids");
  // Integral floats within range are integers, as in Python's JSON.
  EXPECT_EQ(parse_completion_request(json::parse(R"({"prompt": "x", "max_tokens": 12.0})"), {})
                .params.max_tokens,
            12);
}

TEST(OpenAiRequest, IncludeStopStrInOutputIsRead) {
  EXPECT_FALSE(parse_completion_request(json::parse(R"({"prompt": "x"})"), {})
                   .params.include_stop_str_in_output);
  EXPECT_TRUE(parse_completion_request(
                  json::parse(R"({"prompt": "x", "include_stop_str_in_output": true})"), {})
                  .params.include_stop_str_in_output);
  EXPECT_EQ(error_of(R"({"prompt": "x", "include_stop_str_in_output": "yes"})"),
            "'include_stop_str_in_output' must be a boolean");
}

}  // namespace
}  // namespace nibble::server
