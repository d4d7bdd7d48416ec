#include "engine/structured/grammar_matcher.h"

#include <algorithm>

#include "engine/structured/structured_error.h"

namespace nibble::structured {
namespace {

// Expansions of rule references per normalization: far above what any compiled schema needs,
// low enough that a left-recursive grammar fails fast instead of hanging the engine thread.
constexpr int kExpansionBudget = 200000;
constexpr std::size_t kMaxStackDepth = 4096;

}  // namespace

bool MatchState::accepting() const {
  for (const MatchStack& s : stacks) {
    if (s.empty()) return true;
  }
  return false;
}

std::size_t MatchStateHash::operator()(const MatchState& state) const {
  std::size_t h = 0xcbf29ce484222325ull;
  for (const MatchStack& s : state.stacks) {
    for (std::int32_t p : s) h = (h ^ std::size_t(std::uint32_t(p))) * 0x100000001b3ull;
    h = (h ^ 0xffffffffull) * 0x100000001b3ull;
  }
  return h;
}

void GrammarMatcher::normalize(MatchStack& stack, std::vector<MatchStack>& out, std::size_t& used,
                               int& budget) const {
  // Reuses the vectors already in `out` (the mask walk calls this for every vocabulary byte).
  auto emit = [&] {
    if (used < out.size()) {
      out[used].assign(stack.begin(), stack.end());
    } else {
      out.push_back(stack);
    }
    ++used;
  };
  // Alternatives not taken yet, each a stack of its own: expanded after the current one, so the
  // call stack stays flat whatever the grammar (a worklist, not recursion).
  std::vector<MatchStack> branches;
  while (true) {
    bool expanded = false;
    if (!stack.empty()) {
      const std::int32_t p = stack.back();
      const Element& e = grammar_.elements[std::size_t(p)];
      if (e.kind == Element::Kind::kEnd) {
        stack.pop_back();
        continue;
      }
      if (e.kind == Element::Kind::kRule) {
        if (--budget < 0 || stack.size() > kMaxStackDepth) {
          throw StructuredError("the grammar recurses without consuming input (rule '" +
                                grammar_.rule_names[std::size_t(e.id)] + "')");
        }
        // Return address: the element after the reference, unless that ends the alternative.
        if (grammar_.elements[std::size_t(p) + 1].kind == Element::Kind::kEnd) {
          stack.pop_back();
        } else {
          stack.back() = p + 1;
        }
        const std::vector<int>& alts = grammar_.rule_alternatives[std::size_t(e.id)];
        for (std::size_t i = 0; i + 1 < alts.size(); ++i) {
          branches.push_back(stack);
          branches.back().push_back(alts[i]);
        }
        stack.push_back(alts.back());
        expanded = true;
      }
    }
    if (expanded) continue;
    emit();  // empty (a whole sentence) or a byte set on top
    if (branches.empty()) return;
    stack = std::move(branches.back());
    branches.pop_back();
  }
}

void GrammarMatcher::canonicalize(std::vector<MatchStack>& stacks) {
  if (stacks.size() < 2) return;
  std::sort(stacks.begin(), stacks.end());
  stacks.erase(std::unique(stacks.begin(), stacks.end()), stacks.end());
}

MatchState GrammarMatcher::initial() const {
  MatchState state;
  int budget = kExpansionBudget;
  std::size_t used = 0;
  for (int start : grammar_.rule_alternatives[std::size_t(grammar_.root)]) {
    MatchStack stack = {start};
    normalize(stack, state.stacks, used, budget);
  }
  state.stacks.resize(used);
  canonicalize(state.stacks);
  return state;
}

void GrammarMatcher::advance(const MatchState& from, unsigned char byte, MatchState& to) const {
  thread_local MatchStack next;  // scratch, keeps its capacity across calls
  std::size_t used = 0;
  int budget = kExpansionBudget;
  for (const MatchStack& s : from.stacks) {
    if (s.empty()) continue;
    const Element& e = grammar_.elements[std::size_t(s.back())];
    if (!grammar_.byte_sets[std::size_t(e.id)].contains(byte)) continue;
    next.assign(s.begin(), s.end());
    next.back() += 1;
    normalize(next, to.stacks, used, budget);
  }
  to.stacks.resize(used);
  canonicalize(to.stacks);
}

MatchState GrammarMatcher::advance(const MatchState& from, std::string_view bytes) const {
  MatchState state = from, next;
  for (char c : bytes) {
    advance(state, (unsigned char)c, next);
    std::swap(state, next);
    if (state.dead()) break;
  }
  return state;
}

bool GrammarMatcher::accepts(std::string_view text) const {
  return advance(initial(), text).accepting();
}

bool GrammarMatcher::accepts_prefix(std::string_view text) const {
  return !advance(initial(), text).dead();
}

ByteSet GrammarMatcher::next_bytes(const MatchState& state) const {
  ByteSet set;
  for (const MatchStack& s : state.stacks) {
    if (s.empty()) continue;
    const ByteSet& b = grammar_.byte_sets[std::size_t(grammar_.elements[std::size_t(s.back())].id)];
    for (std::size_t w = 0; w < 4; ++w) set.bits[w] |= b.bits[w];
  }
  return set;
}

}  // namespace nibble::structured
