#pragma once
// The filters, tests, methods and global functions chat templates call, with Jinja2's and
// Python's semantics for the arguments they accept. An unknown name or an argument Python would
// reject throws TemplateError with the caller's line.
#include <string>
#include <utility>
#include <vector>

#include "engine/chat/template_value.h"

namespace nibble::chat {

struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
};

// {{ value | name(args) }}
Value apply_filter(const std::string& name, const Value& value, const CallArgs& args, int line);
// {% if value is name(args) %}
bool apply_test(const std::string& name, const Value& value, const CallArgs& args, int line);
// value.name(args): str and dict methods.
bool has_method(const Value& object, const std::string& name);
Value call_method(const Value& object, const std::string& name, const CallArgs& args, int line);
// name(args): namespace, range, dict, raise_exception, strftime_now.
bool is_global_function(const std::string& name);
Value call_global(const std::string& name, const CallArgs& args, int line);

// Shared with the evaluator: raise Jinja2's UndefinedError for an undefined operand.
[[noreturn]] void fail_undefined(const Value& undefined, int line);
// Python's len(); throws TemplateError for values without a length.
int64_t python_len(const Value& v, int line);
// Python's iter() as a list of items (dict -> keys, str -> characters, undefined -> empty).
ValueList iterate(const Value& v, int line);

}  // namespace nibble::chat
