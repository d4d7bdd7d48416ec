#include "engine/structured/left_recursion.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/structured/structured_error.h"

namespace nibble::structured {
namespace {

// Rules that can match the empty string, by the worklist method: an alternative becomes
// nullable when its last not-yet-nullable rule does (each alternative is counted down once).
std::vector<bool> nullable_rules(const Grammar& g) {
  const std::size_t num_rules = g.rule_alternatives.size();
  std::vector<bool> nullable(num_rules, false);
  std::vector<int> pending;                          // per alternative: rules not yet nullable
  std::vector<int> owner;                            // per alternative: its rule
  std::vector<std::vector<int>> used_in(num_rules);  // rule -> alternatives that mention it
  std::vector<int> worklist;
  for (std::size_t r = 0; r < num_rules; ++r) {
    for (int start : g.rule_alternatives[r]) {
      const int alt = int(pending.size());
      int count = 0;
      bool has_bytes = false;
      for (std::size_t p = std::size_t(start); g.elements[p].kind != Element::Kind::kEnd; ++p) {
        if (g.elements[p].kind == Element::Kind::kBytes) {
          has_bytes = true;
        } else {
          used_in[std::size_t(g.elements[p].id)].push_back(alt);
          ++count;
        }
      }
      // An alternative with a byte set never matches the empty string: it never counts down.
      pending.push_back(has_bytes ? -1 : count);
      owner.push_back(int(r));
      if (!has_bytes && count == 0 && !nullable[r]) {
        nullable[r] = true;
        worklist.push_back(int(r));
      }
    }
  }
  while (!worklist.empty()) {
    const int r = worklist.back();
    worklist.pop_back();
    for (int alt : used_in[std::size_t(r)]) {
      // A rule mentioned twice in one alternative is listed twice, and counted twice.
      if (pending[std::size_t(alt)] <= 0 || --pending[std::size_t(alt)] != 0) continue;
      const int o = owner[std::size_t(alt)];
      if (!nullable[std::size_t(o)]) {
        nullable[std::size_t(o)] = true;
        worklist.push_back(o);
      }
    }
  }
  return nullable;
}

}  // namespace

void check_not_left_recursive(const Grammar& g) {
  const std::size_t num_rules = g.rule_alternatives.size();
  const std::vector<bool> nullable = nullable_rules(g);
  // left[r]: the rules r may expand first, before any byte (those after a nullable prefix too).
  std::vector<std::vector<int>> left(num_rules);
  for (std::size_t r = 0; r < num_rules; ++r) {
    for (int start : g.rule_alternatives[r]) {
      for (std::size_t p = std::size_t(start); g.elements[p].kind == Element::Kind::kRule; ++p) {
        left[r].push_back(g.elements[p].id);
        if (!nullable[std::size_t(g.elements[p].id)]) break;
      }
    }
  }
  // Depth-first search with an explicit stack; a rule met again while still on the path closes
  // a cycle.
  enum : std::uint8_t { kUnseen, kOnPath, kDone };
  std::vector<std::uint8_t> mark(num_rules, kUnseen);
  struct Frame {
    int rule;
    std::size_t next = 0;  // index into left[rule]
  };
  std::vector<Frame> path;
  for (std::size_t root = 0; root < num_rules; ++root) {
    if (mark[root] != kUnseen) continue;
    path.push_back({int(root)});
    mark[root] = kOnPath;
    while (!path.empty()) {
      Frame& top = path.back();
      const std::vector<int>& edges = left[std::size_t(top.rule)];
      if (top.next == edges.size()) {
        mark[std::size_t(top.rule)] = kDone;
        path.pop_back();
        continue;
      }
      const int callee = edges[top.next++];
      if (mark[std::size_t(callee)] == kDone) continue;
      if (mark[std::size_t(callee)] == kUnseen) {
        mark[std::size_t(callee)] = kOnPath;
        path.push_back({callee});
        continue;
      }
      // On the path: the cycle is the path from `callee` to here, then `callee` again.
      std::string cycle;
      bool through_ref = false;  // a JSON schema's $ref (rules named "ref <target>")
      const auto from =
          std::find_if(path.begin(), path.end(), [&](const Frame& f) { return f.rule == callee; });
      constexpr std::ptrdiff_t kShown = 8;  // a long cycle is shown by its first rules
      for (auto it = from; it != path.end(); ++it) {
        const std::string& name = g.rule_names[std::size_t(it->rule)];
        through_ref = through_ref || name.rfind("ref ", 0) == 0;
        if (it - from < kShown) cycle += "'" + name + "' -> ";
      }
      if (path.end() - from > kShown) cycle += "... -> ";
      cycle += "'" + g.rule_names[std::size_t(callee)] + "'";
      throw StructuredError(
          "the grammar is left-recursive: it can come back to the same rule without consuming "
          "input (" +
              cycle + "); " +
              (through_ref ? "a '$ref' or 'anyOf' option that refers back to its own schema must "
                             "sit inside an object property or an array item"
                           : "a repeated group must not match the empty string"),
          through_ref ? "$ref" : "left recursion");
    }
  }
}

}  // namespace nibble::structured
