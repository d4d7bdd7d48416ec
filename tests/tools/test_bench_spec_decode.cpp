// nibble-bench's speculative decoding report: the server's counters read from /metrics text,
// differenced over a run, and turned into vllm bench serve's acceptance rate and length.
#include "tools/bench/spec_decode_stats.h"

#include <gtest/gtest.h>

namespace nibble::bench {
namespace {

std::string exposition(double drafts, double drafted, double accepted, double pos0, double pos1) {
  const std::string m = "{model_name=\"m\"}";
  return "# HELP nibble_spec_decode_num_drafts_total Drafts verified.\n"
         "nibble_spec_decode_num_drafts_total" +
         m + " " + std::to_string(drafts) + "\n" + "nibble_spec_decode_num_draft_tokens_total" + m +
         " " + std::to_string(drafted) + "\n" + "nibble_spec_decode_num_accepted_tokens_total" + m +
         " " + std::to_string(accepted) + "\n" +
         "nibble_spec_decode_num_accepted_tokens_per_pos_total{model_name=\"m\",position=\"0\"} " +
         std::to_string(pos0) + "\n" +
         "nibble_spec_decode_num_accepted_tokens_per_pos_total{model_name=\"m\",position=\"1\"} " +
         std::to_string(pos1) + "\n";
}

TEST(BenchSpecDecode, AcceptanceOverTheRun) {
  // Before: 10 drafts; after: 110 drafts of 2 tokens, 150 of the 200 new ones accepted.
  const auto s =
      spec_decode_between(exposition(10, 20, 5, 4, 1), exposition(110, 220, 155, 94, 61));
  ASSERT_TRUE(s.has_value());
  EXPECT_DOUBLE_EQ(s->drafts, 100);
  EXPECT_DOUBLE_EQ(s->draft_tokens, 200);
  EXPECT_DOUBLE_EQ(s->accepted_tokens, 150);
  EXPECT_DOUBLE_EQ(s->acceptance_rate(), 0.75);
  EXPECT_DOUBLE_EQ(s->acceptance_length(), 2.5);
  ASSERT_EQ(s->accepted_per_position.size(), 2u);
  EXPECT_DOUBLE_EQ(s->accepted_per_position[0], 90);
  EXPECT_DOUBLE_EQ(s->accepted_per_position[1], 60);
  const std::string text = format_spec_decode(*s);
  EXPECT_NE(text.find("Acceptance length:"), std::string::npos) << text;
  EXPECT_NE(text.find("2.50"), std::string::npos) << text;
  EXPECT_NE(text.find("90.0, 60.0"), std::string::npos) << text;
  EXPECT_DOUBLE_EQ(spec_decode_json(*s)["acceptance_length"].get<double>(), 2.5);
}

TEST(BenchSpecDecode, NothingWithoutTheCounters) {
  EXPECT_FALSE(spec_decode_between("", "").has_value());
  EXPECT_FALSE(spec_decode_between("", "nibble_generation_tokens_total 5\n").has_value());
  // Counters that appeared during the run started at zero.
  const auto s = spec_decode_between("", exposition(4, 8, 4, 3, 1));
  ASSERT_TRUE(s.has_value());
  EXPECT_DOUBLE_EQ(s->acceptance_length(), 2.0);
}

}  // namespace
}  // namespace nibble::bench
