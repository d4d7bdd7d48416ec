// libFuzzer: the grammar builder, the left-recursion check and the pushdown matcher on grammars
// decoded from the input: any shape of rules, alternatives, byte sets and references (left
// recursion, empty rules, cycles through nullable prefixes). Then the matcher runs over the
// input's tail. Only StructuredError may come out.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "engine/structured/grammar_matcher.h"
#include "engine/structured/left_recursion.h"
#include "engine/structured/structured_error.h"

namespace {

using namespace nibble::structured;

// Reads the input a byte at a time; zeros once it runs out.
struct Reader {
  const std::uint8_t* data;
  std::size_t size;
  std::size_t pos = 0;
  std::uint8_t next() { return pos < size ? data[pos++] : 0; }
  bool done() const { return pos >= size; }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  Reader in{data, size};
  GrammarBuilder b;
  const int num_rules = 1 + in.next() % 16;
  for (int r = 0; r < num_rules; ++r) b.new_rule("r" + std::to_string(r));
  for (int r = 0; r < num_rules; ++r) {
    const int num_alts = 1 + in.next() % 4;
    for (int a = 0; a < num_alts; ++a) {
      std::vector<Symbol> seq;
      const int length = in.next() % 5;
      for (int i = 0; i < length; ++i) {
        const std::uint8_t op = in.next();
        if (op & 1) {
          seq.push_back(Symbol::rule(op / 2 % num_rules));
        } else {
          const std::uint8_t lo = in.next();
          const std::uint8_t hi = in.next();
          ByteSet set;
          set.add_range(std::min(lo, hi), std::max(lo, hi));
          seq.push_back(b.byte_set(set));
        }
      }
      b.add_alternative(r, seq);
    }
  }
  // Repetition as the compilers use it, over a rule of the input's choosing.
  const int repeated = in.next() % num_rules;
  const int min = in.next() % 4;
  const int max = int(in.next() % 6) - 1;
  Symbol top = Symbol::rule(in.next() % num_rules);
  try {
    top = b.repeat("rep", Symbol::rule(repeated), min, max, {b.byte(',')});
  } catch (const StructuredError&) {
  }
  const int root = b.new_rule("root");
  b.add_alternative(root, {top});
  try {
    const Grammar g = b.build(root);
    // What build_grammar refuses never reaches a matcher (on a left-recursive grammar the
    // matcher's own guard holds, but only after its whole expansion budget: slow to fuzz).
    check_not_left_recursive(g);
    GrammarMatcher matcher(g);
    MatchState state = matcher.initial();
    // A short tail: each byte may expand many ambiguous parses.
    const std::string_view tail(reinterpret_cast<const char*>(data) + in.pos,
                                std::min<std::size_t>(size - in.pos, 64));
    state = matcher.advance(state, tail);
    (void)state.accepting();
  } catch (const StructuredError&) {
  }
  return 0;
}
