#pragma once
// A grammar bound to a vocabulary: the token masks of its states, computed on demand and
// cached per state (shared by every request with the same grammar), and the per-sequence
// constraint the engine loop drives.
//
// Mask computation walks the vocabulary's byte trie: the state after each prefix is kept per
// depth and reused by every token that shares the prefix, and a prefix the grammar rejects
// skips its whole subtree in one jump. States are numbered by a GrammarAutomaton whose byte
// transitions are memoized, and states repeat a lot (inside a string, the state after "abc"
// and after "abcd" is the same), so most trie nodes cost one array read.
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/structured/grammar.h"
#include "engine/structured/grammar_automaton.h"
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

  using Mask = std::shared_ptr<const std::vector<std::uint32_t>>;
  // The allowed next tokens in `state` (cached).
  Mask mask(const MatchState& state) const;
  // Masks cached, and matcher states numbered by the automaton.
  std::size_t cached_states() const;
  std::size_t automaton_states() const;

 private:
  // Walks the trie from `root`; nullptr if the automaton filled up on the way.
  Mask walk_automaton(GrammarAutomaton::StateId root) const;
  // The same walk on matcher states (no memo): for when the automaton cannot hold them.
  Mask walk_matcher(const MatchState& root) const;

  Grammar grammar_;
  GrammarMatcher matcher_;
  std::shared_ptr<const TokenVocabulary> vocabulary_;
  std::string kind_;
  std::size_t words_ = 0;
  std::size_t max_cached_states_;
  MatchState initial_;
  mutable std::mutex mutex_;  // guards the automaton and the masks; held during a walk
  mutable GrammarAutomaton automaton_;
  mutable std::vector<Mask> masks_;  // by automaton state id
  mutable std::size_t num_masks_ = 0;
};

}  // namespace nibble::structured
