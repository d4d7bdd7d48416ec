#pragma once
// The matcher's states interned as numbered states with memoized byte transitions: a lazily
// built DFA over the pushdown matcher. A mask walk over the vocabulary trie advances one
// state per trie node; inside strings and numbers those are a handful of distinct states, so
// after the first visit a transition is one array read instead of a stack expansion.
//
// Memory is bounded: at most `max_states` states are interned; next() answers kFull beyond
// that and the owner clears the automaton (see CompiledGrammar). Not thread-safe: the owner
// locks.
#include <array>
#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "engine/structured/grammar_matcher.h"

namespace nibble::structured {

class GrammarAutomaton {
 public:
  using StateId = std::int32_t;
  static constexpr StateId kDead = -1;  // no parse survives the byte
  static constexpr StateId kFull = -2;  // the state is new and the table is full

  GrammarAutomaton(const GrammarMatcher& matcher, std::size_t max_states);

  // The id of `state` (dead states are not interned: kDead), or kFull.
  StateId intern(const MatchState& state);
  StateId next(StateId from, unsigned char byte);
  // Whether every string of 1..length bytes drawn from `bytes` keeps a parse alive from
  // `from` (memoized per state for up to kMaxByteClasses distinct `byte_class` indices, each
  // always passed with the same `bytes`; length at most 255). False when the table fills.
  static constexpr int kMaxByteClasses = 4;
  bool survives(StateId from, int byte_class, const ByteSet& bytes, int length);
  const MatchState& state(StateId id) const { return states_[std::size_t(id)]; }
  bool accepting(StateId id) const { return accepting_[std::size_t(id)]; }
  std::size_t size() const { return states_.size(); }
  void clear();

 private:
  static constexpr StateId kUnknown = -3;
  using Row = std::array<StateId, 256>;

  const GrammarMatcher& matcher_;
  std::size_t max_states_;
  std::vector<MatchState> states_;
  std::vector<bool> accepting_;
  std::vector<std::unique_ptr<Row>> rows_;  // allocated at a state's first transition
  std::unordered_map<MatchState, StateId, MatchStateHash> ids_;
  // Per state and byte class: the longest length known to survive, and the shortest known
  // not to (0: none known).
  struct Survival {
    std::array<std::uint8_t, kMaxByteClasses> known_true{};
    std::array<std::uint16_t, kMaxByteClasses> known_false{};
  };
  std::vector<Survival> survival_;
  MatchState scratch_;
};

}  // namespace nibble::structured
