// The ngram (prompt lookup) drafter and the test-only reference drafters, on hand-made histories.
#include <gtest/gtest.h>

#include <vector>

#include "engine/spec/ngram_drafter.h"
#include "engine/spec/reference_drafter.h"
#include "engine/spec/verify.h"

namespace nibble::spec {
namespace {

std::vector<int> propose(const Drafter& d, const std::vector<int>& tokens, int k) {
  std::vector<int> draft;
  d.propose(tokens, k, draft);
  return draft;
}

TEST(NgramDrafter, ProposesWhatFollowedTheLongestMatchingSuffix) {
  const NgramDrafter d(1, 3);
  // Suffix [7, 8, 9] occurred at 1; what followed it was 4, 5, 6.
  EXPECT_EQ(propose(d, {0, 7, 8, 9, 4, 5, 6, 2, 8, 9, 1, 7, 8, 9}, 3), (std::vector{4, 5, 6}));
  // The length-3 suffix [2, 8, 9] is not earlier, [8, 9] is: at 2 (the earliest), then 4 5.
  EXPECT_EQ(propose(d, {0, 7, 8, 9, 4, 5, 6, 2, 8, 9}, 2), (std::vector{4, 5}));
  // Fewer tokens than asked follow the match: all of them.
  EXPECT_EQ(propose(d, {3, 1, 2, 3}, 5), (std::vector{1, 2, 3}));
  // A repeated token matches overlapping itself (the 2-token match, one token after it).
  EXPECT_EQ(propose(d, {5, 5, 5}, 4), (std::vector{5}));
}

TEST(NgramDrafter, RespectsTheMinimumAndTheBudget) {
  const NgramDrafter d(2, 4);
  EXPECT_TRUE(propose(d, {1, 2, 3, 9, 3}, 3).empty());  // only a 1-token match: below min
  EXPECT_EQ(propose(d, {1, 2, 3, 9, 2, 3}, 3), (std::vector{9, 2, 3}));
  EXPECT_TRUE(propose(d, {1, 2, 3, 1, 2}, 0).empty());
  EXPECT_TRUE(propose(d, {4}, 3).empty());
  EXPECT_THROW(NgramDrafter(0, 2), std::invalid_argument);
  EXPECT_THROW(NgramDrafter(3, 2), std::invalid_argument);
}

TEST(ReferenceDrafter, OracleProposesTheReferenceAndWrongNeverDoes) {
  const std::vector<std::vector<int>> refs = {{1, 2, 3, 4, 5, 6}, {7, 8, 9}};
  const ReferenceDrafter oracle(ReferenceDrafter::Mode::kOracle, refs, 10);
  const ReferenceDrafter wrong(ReferenceDrafter::Mode::kWrong, refs, 10);
  EXPECT_EQ(propose(oracle, {1, 2}, 3), (std::vector{3, 4, 5}));
  EXPECT_EQ(propose(oracle, {1, 2, 3, 4, 5}, 3), (std::vector{6}));
  EXPECT_EQ(propose(wrong, {7, 8}, 3), (std::vector{0}));  // 9 + 1 mod 10
  EXPECT_TRUE(propose(oracle, {1, 3}, 3).empty());         // left the reference
  EXPECT_TRUE(propose(oracle, {1, 2, 3, 4, 5, 6}, 3).empty());
}

TEST(AcceptDrafts, AcceptsTheMatchingPrefixThenTheTargetsToken) {
  const std::vector<int> target = {4, 5, 6, 7};
  std::vector<int> calls;
  const auto token = [&](int j) {
    calls.push_back(j);
    return target[std::size_t(j)];
  };
  EXPECT_EQ(accept_drafts(std::vector{4, 5, 9}, token), 2);
  EXPECT_EQ(calls, (std::vector{0, 1, 2}));  // emits 4, 5 and the target's 6
  calls.clear();
  EXPECT_EQ(accept_drafts(std::vector{4, 5, 6}, token), 3);
  EXPECT_EQ(calls, (std::vector{0, 1, 2, 3}));  // all accepted, then the bonus token 7
  calls.clear();
  EXPECT_EQ(accept_drafts(std::vector<int>{}, token), 0);
  EXPECT_EQ(calls, (std::vector{0}));  // no draft: a plain decode
}

}  // namespace
}  // namespace nibble::spec
