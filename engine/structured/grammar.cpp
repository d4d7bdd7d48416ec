#include "engine/structured/grammar.h"

#include "engine/structured/structured_error.h"

namespace nibble::structured {

int GrammarBuilder::new_rule(std::string name) {
  alternatives_.emplace_back();
  names_.push_back(std::move(name));
  return int(alternatives_.size()) - 1;
}

void GrammarBuilder::add_alternative(int rule, const std::vector<Symbol>& sequence) {
  alternatives_.at(std::size_t(rule)).push_back(sequence);
}

Symbol GrammarBuilder::byte_set(const ByteSet& set) {
  for (std::size_t i = 0; i < sets_.size(); ++i) {
    if (sets_[i] == set) return Symbol::bytes(int(i));
  }
  sets_.push_back(set);
  return Symbol::bytes(int(sets_.size()) - 1);
}

Symbol GrammarBuilder::byte(unsigned char b) {
  ByteSet set;
  set.add(b);
  return byte_set(set);
}

Symbol GrammarBuilder::literal(std::string_view text) {
  std::vector<Symbol> seq;
  for (char c : text) seq.push_back(byte((unsigned char)c));
  const int rule = new_rule("literal");
  add_alternative(rule, seq);
  return Symbol::rule(rule);
}

Symbol GrammarBuilder::choice(std::string name,
                              const std::vector<std::vector<Symbol>>& alternatives) {
  const int rule = new_rule(std::move(name));
  for (const auto& alt : alternatives) add_alternative(rule, alt);
  return Symbol::rule(rule);
}

Symbol GrammarBuilder::repeat(std::string name, Symbol item, int min, int max,
                              const std::vector<Symbol>& separator) {
  if (max >= 0 && max < min) {
    throw StructuredError(name + ": the maximum count " + std::to_string(max) +
                          " is below the minimum " + std::to_string(min));
  }
  // tail = what may follow an item that is already there: separator + item, repeated.
  std::vector<Symbol> sep_item = separator;
  sep_item.push_back(item);
  Symbol tail_symbol;
  bool has_tail = false;
  if (max < 0) {
    // (sep item)* as a right-recursive rule; the matcher treats the recursion as a tail call.
    const int star = new_rule(name + "*");
    std::vector<Symbol> again = sep_item;
    again.push_back(Symbol::rule(star));
    add_alternative(star, again);
    add_alternative(star, {});
    tail_symbol = Symbol::rule(star);
    has_tail = true;
  } else {
    // Optional items after the minimum, nested: (sep item (sep item (...)?)?)?
    const int optional_count = max - std::max(min, 1);
    for (int i = 0; i < optional_count; ++i) {
      const int opt = new_rule(name + "?");
      std::vector<Symbol> seq = sep_item;
      if (has_tail) seq.push_back(tail_symbol);
      add_alternative(opt, seq);
      add_alternative(opt, {});
      tail_symbol = Symbol::rule(opt);
      has_tail = true;
    }
  }
  const int rule = new_rule(name);
  if (max == 0) {
    add_alternative(rule, {});
    return Symbol::rule(rule);
  }
  std::vector<Symbol> seq = {item};
  for (int i = 1; i < min; ++i) seq.insert(seq.end(), sep_item.begin(), sep_item.end());
  if (has_tail) seq.push_back(tail_symbol);
  add_alternative(rule, seq);
  if (min == 0) add_alternative(rule, {});
  return Symbol::rule(rule);
}

Grammar GrammarBuilder::build(int root) const {
  Grammar g;
  g.byte_sets = sets_;
  g.rule_names = names_;
  g.root = root;
  g.rule_alternatives.resize(alternatives_.size());
  for (std::size_t r = 0; r < alternatives_.size(); ++r) {
    if (alternatives_[r].empty()) {
      throw StructuredError("grammar rule '" + names_[r] + "' has no alternatives");
    }
    for (const auto& alt : alternatives_[r]) {
      g.rule_alternatives[r].push_back(int(g.elements.size()));
      for (const Symbol& s : alt) {
        g.elements.push_back(
            {s.kind == Symbol::Kind::kBytes ? Element::Kind::kBytes : Element::Kind::kRule, s.id});
      }
      g.elements.push_back({Element::Kind::kEnd, 0});
    }
  }
  return g;
}

}  // namespace nibble::structured
