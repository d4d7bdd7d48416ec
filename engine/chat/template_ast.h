#pragma once
// The parsed form of a chat template: expressions and statements, each with its source line
// so that evaluation errors can name it.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/chat/template_value.h"

namespace nibble::chat {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    Literal,      // value
    Name,         // name
    List,         // items
    Tuple,        // items (only as for-loop / set targets and parenthesised lists)
    Dict,         // items as key, value pairs (even, odd)
    Attribute,    // items[0].name
    Subscript,    // items[0][items[1]]
    Slice,        // items[0][items[1]:items[2]:items[3]]; absent parts are nullptr
    Call,         // items[0](items[1..]); kwarg_names/kwargs
    Filter,       // items[0] | name(items[1..], kwargs)
    Test,         // items[0] is [not] name(items[1..])
    Unary,        // op items[0]: "not", "-", "+"
    Binary,       // items[0] op items[1]: arithmetic, comparison, "in", "not in", "~", "and", "or"
    Compare,      // Python's chained comparison: items[0] ops[0] items[1] ops[1] items[2] ...
    Conditional,  // items[1] if items[0] else items[2] (items[2] may be nullptr)
  };
  Kind kind;
  int line;
  Value value;
  std::string name;  // name, attribute, filter/test name, operator
  bool negated = false;
  std::vector<ExprPtr> items;
  std::vector<std::string> kwarg_names;
  std::vector<ExprPtr> kwargs;
  std::vector<std::string> ops;  // Compare
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

struct Stmt {
  enum class Kind {
    Text,      // text
    Output,    // {{ expr }}
    If,        // conditions[i] -> bodies[i]; optional trailing else body (bodies.size() >
               // conditions.size())
    For,       // for targets in expr [if condition]: bodies[0]; else: bodies[1]
    Set,       // set target = expr; target may be "ns.attr" (namespace attribute) or several names
    SetBlock,  // set target %}...{% endset
    Break,
    Continue,
    Macro,  // macro targets[0](targets[1..] = conditions[i-1] defaults, nullptr if none): bodies[0]
  };
  Kind kind;
  int line;
  std::string text;
  ExprPtr expr;
  std::vector<std::string> targets;  // loop/set variable names
  std::string attribute;             // Set on a namespace: targets[0].attribute
  std::vector<ExprPtr> conditions;
  std::vector<Body> bodies;
};

}  // namespace nibble::chat
