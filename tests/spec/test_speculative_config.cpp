// --speculative-config: vLLM's keys parsed, defaults filled, every bad value refused by name.
#include "engine/spec/speculative_config.h"

#include <gtest/gtest.h>

#include <string>

namespace nibble::spec {
namespace {

std::string refusal(const std::string& json) {
  try {
    parse_speculative_config(json);
  } catch (const SpeculativeConfigError& e) {
    return e.what();
  }
  return "accepted";
}

TEST(SpeculativeConfig, ParsesVllmsNgramKeys) {
  const SpeculativeConfig c = parse_speculative_config(
      R"({"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_min": 2,
          "prompt_lookup_max": 6})");
  EXPECT_EQ(c.method, SpecMethod::kNgram);
  EXPECT_EQ(c.num_speculative_tokens, 4);
  EXPECT_EQ(c.prompt_lookup_min, 2);
  EXPECT_EQ(c.prompt_lookup_max, 6);
  EXPECT_EQ(make_drafter(c)->name(), "ngram");
}

TEST(SpeculativeConfig, LookupBoundsDefault) {
  auto c = parse_speculative_config(R"({"method":"ngram","num_speculative_tokens":3})");
  EXPECT_EQ(c.prompt_lookup_min, 5);
  EXPECT_EQ(c.prompt_lookup_max, 5);
  c = parse_speculative_config(
      R"({"method":"ngram","num_speculative_tokens":3,"prompt_lookup_max":4})");
  EXPECT_EQ(c.prompt_lookup_min, 4);
  EXPECT_EQ(c.prompt_lookup_max, 4);
  c = parse_speculative_config(
      R"({"method":"ngram","num_speculative_tokens":3,"prompt_lookup_min":2})");
  EXPECT_EQ(c.prompt_lookup_min, 2);
  EXPECT_EQ(c.prompt_lookup_max, 2);
}

TEST(SpeculativeConfig, RefusesWithTheKeyAndWhatItExpected) {
  EXPECT_NE(refusal("{").find("not valid JSON"), std::string::npos);
  EXPECT_NE(refusal("[1]").find("must be a JSON object"), std::string::npos);
  EXPECT_NE(refusal(R"({"num_speculative_tokens":2})").find("method must be a string"),
            std::string::npos);
  EXPECT_NE(refusal(R"({"method":"ngram"})").find("num_speculative_tokens is required"),
            std::string::npos);
  EXPECT_NE(refusal(R"({"method":"ngram","num_speculative_tokens":0})")
                .find("num_speculative_tokens must be in 1..32, got 0"),
            std::string::npos);
  EXPECT_NE(refusal(R"({"method":"ngram","num_speculative_tokens":"4"})")
                .find("num_speculative_tokens must be an integer"),
            std::string::npos);
  EXPECT_NE(refusal(R"({"method":"ngram","num_speculative_tokens":2,"prompt_lookup_min":4,)"
                    R"("prompt_lookup_max":3})")
                .find("prompt_lookup_min (4) must not exceed prompt_lookup_max (3)"),
            std::string::npos);
  EXPECT_NE(refusal(R"({"method":"ngram","num_speculative_tokens":2,"typo":1})")
                .find("unknown key \"typo\""),
            std::string::npos);
  EXPECT_NE(refusal(R"({"method":"ngram","num_speculative_tokens":2,"model":"x"})")
                .find("ngram takes none"),
            std::string::npos);
  EXPECT_NE(refusal(R"({"method":"medusa","num_speculative_tokens":2})")
                .find("unknown method \"medusa\""),
            std::string::npos);
}

TEST(SpeculativeConfig, ParsesVllmsDraftModelKeys) {
  const SpeculativeConfig c = parse_speculative_config(
      R"({"method": "draft_model", "model": "/models/Qwen3-0.6B", "num_speculative_tokens": 5})");
  EXPECT_EQ(c.method, SpecMethod::kDraftModel);
  EXPECT_STREQ(method_name(c.method), "draft_model");
  EXPECT_EQ(c.model, "/models/Qwen3-0.6B");
  EXPECT_EQ(c.num_speculative_tokens, 5);
  // Its drafter needs a loaded model: serve builds it (draft_model_drafter.h).
  EXPECT_THROW(make_drafter(c), SpeculativeConfigError);
}

TEST(SpeculativeConfig, DraftModelRefusals) {
  const std::string needs_model =
      "draft_model needs model: the draft model's directory or Hub id, a string";
  EXPECT_NE(refusal(R"({"method":"draft_model","num_speculative_tokens":2})").find(needs_model),
            std::string::npos);
  EXPECT_NE(refusal(R"({"method":"draft_model","num_speculative_tokens":2,"model":""})")
                .find(needs_model),
            std::string::npos);
  EXPECT_NE(
      refusal(R"({"method":"draft_model","num_speculative_tokens":2,"model":3})").find(needs_model),
      std::string::npos);
  EXPECT_NE(refusal(R"({"method":"draft_model","model":"/d"})")
                .find("num_speculative_tokens is required"),
            std::string::npos);
  EXPECT_NE(refusal(R"({"method":"draft_model","model":"/d","num_speculative_tokens":33})")
                .find("num_speculative_tokens must be in 1..32, got 33"),
            std::string::npos);
  EXPECT_NE(refusal(R"({"method":"draft_model","model":"/d","num_speculative_tokens":2,)"
                    R"("prompt_lookup_max":3})")
                .find("prompt_lookup_max is ngram's; draft_model takes none"),
            std::string::npos);
  EXPECT_NE(refusal(R"({"method":"draft_model","model":"/d","num_speculative_tokens":2,"x":1})")
                .find("unknown key \"x\""),
            std::string::npos);
}

TEST(SpeculativeConfig, MethodsNotBuiltAreRefusedAsSuch) {
  EXPECT_EQ(refusal(R"({"method":"eagle","num_speculative_tokens":2,"model":"org/head"})"),
            "--speculative-config: method \"eagle\" (EAGLE-1 heads) is not built in "
            "nibble-engine; ngram, draft_model, mtp and eagle3 are");
  EXPECT_NE(refusal(R"({"num_speculative_tokens":2})")
                .find("method must be a string: ngram, draft_model, mtp or eagle3"),
            std::string::npos);
  // The test-only drafters are no user method.
  EXPECT_NE(refusal(R"({"method":"oracle","num_speculative_tokens":2})").find("unknown method"),
            std::string::npos);
}

// eagle3: vLLM's keys, the head's directory or Hub id in model; no prompt lookup.
TEST(SpeculativeConfig, ParsesVllmsEagle3Keys) {
  const SpeculativeConfig c = parse_speculative_config(
      R"({"method": "eagle3", "model": "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B",
          "num_speculative_tokens": 3})");
  EXPECT_EQ(c.method, SpecMethod::kEagle3);
  EXPECT_STREQ(method_name(c.method), "eagle3");
  EXPECT_EQ(c.model, "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B");
  EXPECT_EQ(c.num_speculative_tokens, 3);
  // Its drafter runs the head on a backend: serve builds it (hidden_state_drafter.h).
  EXPECT_THROW(make_drafter(c), SpeculativeConfigError);
  EXPECT_EQ(refusal(R"({"method":"eagle3","num_speculative_tokens":2})"),
            "--speculative-config: eagle3 needs model: the EAGLE-3 head's directory or Hub id, "
            "a string");
  EXPECT_NE(refusal(R"({"method":"eagle3","num_speculative_tokens":2,"model":""})")
                .find("eagle3 needs model"),
            std::string::npos);
  EXPECT_NE(refusal(R"({"method":"eagle3","model":"/h","num_speculative_tokens":2,)"
                    R"("prompt_lookup_min":3})")
                .find("prompt_lookup_min is ngram's; eagle3 takes none"),
            std::string::npos);
  EXPECT_NE(
      refusal(R"({"method":"eagle3","model":"/h"})").find("num_speculative_tokens is required"),
      std::string::npos);
}

// mtp drafts with the served model's own module: k only, no model, no prompt lookup.
TEST(SpeculativeConfig, MtpTakesOnlyItsDraftCount) {
  const SpeculativeConfig c =
      parse_speculative_config(R"({"method":"mtp","num_speculative_tokens":3})");
  EXPECT_EQ(c.method, SpecMethod::kMtp);
  EXPECT_EQ(c.num_speculative_tokens, 3);
  EXPECT_STREQ(method_name(c.method), "mtp");
  EXPECT_EQ(refusal(R"({"method":"mtp","num_speculative_tokens":2,"model":"org/head"})"),
            "--speculative-config: mtp drafts with the served model's own MTP module; it takes "
            "no model");
  EXPECT_EQ(refusal(R"({"method":"mtp","num_speculative_tokens":2,"prompt_lookup_min":2})"),
            "--speculative-config: prompt_lookup_min is ngram's; mtp takes none");
  EXPECT_NE(refusal(R"({"method":"mtp"})").find("num_speculative_tokens is required"),
            std::string::npos);
  EXPECT_THROW(make_drafter(c), SpeculativeConfigError);
}

}  // namespace
}  // namespace nibble::spec
