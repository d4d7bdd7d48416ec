#pragma once
// A grammar bound to a vocabulary: the token masks of its states, computed on demand and
// cached per state (shared by every request with the same grammar), and the per-sequence
// constraint the engine loop drives.
//
// Mask computation walks the vocabulary in byte order (a byte trie): the matcher state after
// each prefix is kept per depth and reused by every token that shares the prefix, and a
// prefix the grammar rejects skips all tokens under it. States repeat a lot (inside a string,
// the state after "abc" and after "abcd" is the same), so most tokens hit the cache.
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/structured/grammar.h"
#include "engine/structured/grammar_matcher.h"
#include "engine/structured/token_constraint.h"
#include "engine/structured/token_vocabulary.h"

namespace nibble::structured {

class CompiledGrammar : public TokenConstraintFactory,
                        public std::enable_shared_from_this<CompiledGrammar> {
 public:
  // Checks the grammar (a left-recursive one throws StructuredError) and computes the mask of
  // the initial state, so that the first token costs the engine thread nothing.
  CompiledGrammar(Grammar grammar, std::shared_ptr<const TokenVocabulary> vocabulary,
                  std::string kind, std::size_t max_cached_states = 4096);

  std::unique_ptr<TokenConstraint> start() const override;
  std::size_t mask_words() const override { return words_; }
  const std::string& kind() const override { return kind_; }

  const Grammar& grammar() const { return grammar_; }
  const GrammarMatcher& matcher() const { return matcher_; }
  const TokenVocabulary& vocabulary() const { return *vocabulary_; }
  const MatchState& initial_state() const { return initial_; }

  // The allowed next tokens in `state` (cached).
  std::shared_ptr<const std::vector<std::uint32_t>> mask(const MatchState& state) const;
  std::size_t cached_states() const;

 private:
  std::vector<std::uint32_t> compute_mask(const MatchState& state) const;

  Grammar grammar_;
  GrammarMatcher matcher_;
  std::shared_ptr<const TokenVocabulary> vocabulary_;
  std::string kind_;
  std::size_t words_ = 0;
  std::size_t max_cached_states_;
  MatchState initial_;
  mutable std::mutex mutex_;
  mutable std::unordered_map<MatchState, std::shared_ptr<const std::vector<std::uint32_t>>,
                             MatchStateHash>
      cache_;
};

}  // namespace nibble::structured
