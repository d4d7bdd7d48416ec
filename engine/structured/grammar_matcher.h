#pragma once
// Byte-level matching of a Grammar by a set of pushdown stacks (all parses still alive at
// once, so ambiguity from anyOf or type arrays is fine). A stack holds grammar positions; its
// top always points at a byte set after normalization, or the stack is empty, which means the
// input so far is a complete sentence. Right recursion is a tail call (the finished frame is
// popped before the callee is pushed), so `x*`, long strings and long arrays keep stacks flat.
#include <cstdint>
#include <string_view>
#include <vector>

#include "engine/structured/grammar.h"

namespace nibble::structured {

using MatchStack = std::vector<std::int32_t>;

// Stacks sorted and unique, so equal states compare equal (they key the mask cache).
struct MatchState {
  std::vector<MatchStack> stacks;
  bool dead() const { return stacks.empty(); }
  // The bytes so far form a whole sentence of the grammar.
  bool accepting() const;
  bool operator==(const MatchState&) const = default;
};

struct MatchStateHash {
  std::size_t operator()(const MatchState& state) const;
};

class GrammarMatcher {
 public:
  explicit GrammarMatcher(const Grammar& grammar) : grammar_(grammar) {}

  MatchState initial() const;
  // The state after one more byte; dead() if the byte is not allowed.
  void advance(const MatchState& from, unsigned char byte, MatchState& to) const;
  MatchState advance(const MatchState& from, std::string_view bytes) const;
  // Whether `text` is a whole sentence of the grammar.
  bool accepts(std::string_view text) const;
  // Whether `text` is a prefix of some sentence.
  bool accepts_prefix(std::string_view text) const;
  // Bytes that may come next (for diagnostics and tests).
  ByteSet next_bytes(const MatchState& state) const;

 private:
  // Expands `stack` until its top is a byte set (or it is empty) into out[used...], reusing
  // the storage of the vectors already there.
  void normalize(MatchStack& stack, std::vector<MatchStack>& out, std::size_t& used,
                 int& budget) const;
  static void canonicalize(std::vector<MatchStack>& stacks);

  const Grammar& grammar_;
};

}  // namespace nibble::structured
