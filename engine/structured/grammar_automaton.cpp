#include "engine/structured/grammar_automaton.h"

namespace nibble::structured {

GrammarAutomaton::GrammarAutomaton(const GrammarMatcher& matcher, std::size_t max_states)
    : matcher_(matcher), max_states_(max_states) {}

GrammarAutomaton::StateId GrammarAutomaton::intern(const MatchState& state) {
  if (state.dead()) return kDead;
  if (auto it = ids_.find(state); it != ids_.end()) return it->second;
  if (states_.size() >= max_states_) return kFull;
  const StateId id = StateId(states_.size());
  states_.push_back(state);
  accepting_.push_back(state.accepting());
  rows_.emplace_back();
  ids_.emplace(state, id);
  return id;
}

GrammarAutomaton::StateId GrammarAutomaton::next(StateId from, unsigned char byte) {
  if (!rows_[std::size_t(from)]) {
    rows_[std::size_t(from)] = std::make_unique<Row>();
    rows_[std::size_t(from)]->fill(kUnknown);
  }
  // The Row does not move when intern() grows rows_.
  StateId& to = (*rows_[std::size_t(from)])[byte];
  if (to != kUnknown) return to;
  matcher_.advance(states_[std::size_t(from)], byte, scratch_);
  const StateId id = intern(scratch_);
  if (id != kFull) to = id;
  return id;
}

void GrammarAutomaton::clear() {
  states_.clear();
  accepting_.clear();
  rows_.clear();
  ids_.clear();
}

}  // namespace nibble::structured
