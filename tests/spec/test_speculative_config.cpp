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

TEST(SpeculativeConfig, MethodsNotBuiltAreRefusedAsSuch) {
  for (const char* m : {"eagle3", "mtp", "draft_model"}) {
    const std::string json =
        std::string(R"({"method":")") + m + R"(","num_speculative_tokens":2,"model":"org/head"})";
    EXPECT_NE(refusal(json).find("is not built yet"), std::string::npos) << m;
  }
  // The test-only drafters are no user method.
  EXPECT_NE(refusal(R"({"method":"oracle","num_speculative_tokens":2})").find("unknown method"),
            std::string::npos);
}

}  // namespace
}  // namespace nibble::spec
