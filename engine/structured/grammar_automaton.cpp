#include "engine/structured/grammar_automaton.h"

#include <algorithm>

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
  survival_.emplace_back();
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

bool GrammarAutomaton::survives(StateId from, int byte_class, const ByteSet& bytes, int length) {
  if (length <= 0) return true;
  const std::size_t c = std::size_t(byte_class);
  {
    const Survival& s = survival_[std::size_t(from)];
    if (length <= s.known_true[c]) return true;
    if (s.known_false[c] != 0 && length >= s.known_false[c]) return false;
  }
  // Depth-first: one byte, then the rest from the state it leads to. States repeat (a string's
  // state loops on itself), so the memo makes this about length x |bytes| transitions.
  for (int w = 0; w < 4; ++w) {
    for (std::uint64_t word = bytes.bits[std::size_t(w)]; word != 0; word &= word - 1) {
      const unsigned char b = (unsigned char)(w * 64 + __builtin_ctzll(word));
      const StateId to = next(from, b);
      if (to == kFull) return false;
      if (to == kDead || !survives(to, byte_class, bytes, length - 1)) {
        std::uint16_t& known_false = survival_[std::size_t(from)].known_false[c];
        if (known_false == 0 || length < known_false) known_false = std::uint16_t(length);
        return false;
      }
    }
  }
  std::uint8_t& known_true = survival_[std::size_t(from)].known_true[c];
  known_true = std::uint8_t(std::max<int>(known_true, std::min(length, 255)));
  return true;
}

void GrammarAutomaton::clear() {
  survival_.clear();
  states_.clear();
  accepting_.clear();
  rows_.clear();
  ids_.clear();
}

}  // namespace nibble::structured
