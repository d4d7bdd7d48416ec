#pragma once
// A context-free grammar over bytes, the common target of JSON Schema, regex and choice
// compilation. A rule is a list of alternatives; an alternative is a sequence of symbols; a
// symbol is either a set of bytes (one byte of input) or a reference to a rule. Matching on
// bytes, not characters, lets a token end in the middle of a UTF-8 sequence.
//
// Stored flattened for the matcher: every alternative is a run of `elements` ending in a kEnd
// element, so "a position in the grammar" is one int. Grammars must not be left-recursive:
// build_grammar refuses them (left_recursion.h), and the matcher guards against it anyway.
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace nibble::structured {

// 256 bits: which bytes one input position may take.
struct ByteSet {
  std::array<std::uint64_t, 4> bits{};
  void add(unsigned char b) { bits[b >> 6] |= std::uint64_t(1) << (b & 63); }
  void add_range(unsigned char lo, unsigned char hi) {
    for (unsigned b = lo; b <= hi; ++b) add((unsigned char)b);
  }
  bool contains(unsigned char b) const { return (bits[b >> 6] >> (b & 63)) & 1; }
  bool empty() const { return !(bits[0] | bits[1] | bits[2] | bits[3]); }
  bool operator==(const ByteSet&) const = default;
};

struct Symbol {
  enum class Kind : std::uint8_t { kBytes, kRule };
  Kind kind = Kind::kBytes;
  int id = 0;  // index into Grammar::byte_sets or rule id
  static Symbol bytes(int set) { return {Kind::kBytes, set}; }
  static Symbol rule(int r) { return {Kind::kRule, r}; }
};

struct Element {
  enum class Kind : std::uint8_t { kBytes, kRule, kEnd };
  Kind kind = Kind::kEnd;
  int id = 0;
};

struct Grammar {
  std::vector<ByteSet> byte_sets;
  std::vector<Element> elements;                    // alternatives, each ended by kEnd
  std::vector<std::vector<int>> rule_alternatives;  // rule -> start positions in elements
  std::vector<std::string> rule_names;              // for diagnostics
  int root = 0;
};

// Builds a Grammar. Rules may be created before their alternatives are known, so that
// recursive definitions ($ref cycles) can refer to themselves.
class GrammarBuilder {
 public:
  int new_rule(std::string name);
  void add_alternative(int rule, const std::vector<Symbol>& sequence);
  Symbol byte_set(const ByteSet& set);
  Symbol byte(unsigned char b);
  // A rule matching exactly `text` (bytes as they are).
  Symbol literal(std::string_view text);
  // A rule matching any one of `symbols`.
  Symbol choice(std::string name, const std::vector<std::vector<Symbol>>& alternatives);
  // item{min,max} with `separator` (may be empty) between items; max < 0: unbounded.
  // Bounded repetitions are unrolled as nested optionals, so the grammar stays unambiguous.
  Symbol repeat(std::string name, Symbol item, int min, int max,
                const std::vector<Symbol>& separator = {});
  int num_rules() const { return int(alternatives_.size()); }
  Grammar build(int root) const;

 private:
  std::vector<std::vector<std::vector<Symbol>>> alternatives_;
  std::vector<std::string> names_;
  std::vector<ByteSet> sets_;
};

}  // namespace nibble::structured
