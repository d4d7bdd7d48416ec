// Filters, tests and global functions, with Jinja2's semantics (transformers' tojson override:
// json.dumps with ensure_ascii=False, indent, separators, sort_keys).
#include "engine/chat/template_builtins.h"

#include <algorithm>
#include <cmath>
#include <ctime>

#include "engine/chat/python_string.h"
#include "engine/chat/template_args.h"
#include "engine/text/utf8.h"

namespace nibble::chat {

void fail_undefined(const Value& undefined, int line) {
  throw TemplateError(undefined.undefined_hint(), line);
}

int64_t python_len(const Value& v, int line) {
  switch (v.kind()) {
    case Value::Kind::Undefined:
      return 0;
    case Value::Kind::String:
      return static_cast<int64_t>(nibble::text::to_code_points(v.as_string()).size());
    case Value::Kind::List:
      return static_cast<int64_t>(v.as_list().size());
    case Value::Kind::Dict:
      return static_cast<int64_t>(v.as_dict().size());
    default:
      throw TemplateError("object of type '" + v.type_name() + "' has no len()", line);
  }
}

ValueList iterate(const Value& v, int line) {
  switch (v.kind()) {
    case Value::Kind::Undefined:
      return {};
    case Value::Kind::List:
      return v.as_list();
    case Value::Kind::Dict: {
      ValueList keys;
      for (const auto& [k, _] : v.as_dict()) keys.push_back(Value::string(k));
      return keys;
    }
    case Value::Kind::String: {
      ValueList chars;
      for (char32_t c : nibble::text::to_code_points(v.as_string()))
        chars.push_back(Value::string(nibble::text::from_code_points(std::u32string(1, c))));
      return chars;
    }
    default:
      throw TemplateError("'" + v.type_name() + "' object is not iterable", line);
  }
}

namespace {

// Jinja2's environment.getattr for filters like map(attribute=...): dict key, else undefined.
Value attribute_of(const Value& v, const std::string& path, int line) {
  Value cur = v;
  size_t start = 0;
  while (true) {
    const size_t dot = path.find('.', start);
    const std::string part = path.substr(start, dot == std::string::npos ? dot : dot - start);
    if (cur.is_undefined()) fail_undefined(cur, line);
    const Value* next = cur.find(part);
    cur =
        next ? *next
             : Value::undefined("'" + cur.type_name() + " object' has no attribute '" + part + "'");
    if (dot == std::string::npos) return cur;
    start = dot + 1;
  }
}

CallArgs tail_args(const CallArgs& args, size_t skip) {
  CallArgs out;
  for (size_t i = skip; i < args.positional.size(); ++i)
    out.positional.push_back(args.positional[i]);
  out.keyword = args.keyword;
  return out;
}

Value select_items(const std::string& name, const Value& seq, const CallArgs& args, int line) {
  const bool by_attr = name == "selectattr" || name == "rejectattr";
  const bool keep = name == "select" || name == "selectattr";
  size_t next = 0;
  std::string attr;
  if (by_attr) {
    if (args.positional.empty() || !args.positional[0].is_string())
      throw TemplateError(name + "() needs an attribute name", line);
    attr = args.positional[0].as_string();
    next = 1;
  }
  std::string test;
  if (args.positional.size() > next) {
    if (!args.positional[next].is_string())
      throw TemplateError(name + "() test name must be a string", line);
    test = args.positional[next].as_string();
  }
  const CallArgs test_args = tail_args(args, next + 1);
  ValueList out;
  for (const Value& item : iterate(seq, line)) {
    const Value subject = by_attr ? attribute_of(item, attr, line) : item;
    const bool passed = test.empty() ? truthy(subject) : apply_test(test, subject, test_args, line);
    if (passed == keep) out.push_back(item);
  }
  return Value::list(std::move(out));
}

Value map_items(const Value& seq, const CallArgs& args, int line) {
  ValueList out;
  if (args.positional.empty()) {
    BoundArgs a("map", args, {"attribute", "default"}, line);
    const std::string& attr = a.string_arg(0);
    for (const Value& item : iterate(seq, line)) {
      Value v = attribute_of(item, attr, line);
      if (v.is_undefined() && a.get(1)) v = *a.get(1);
      out.push_back(v);
    }
    return Value::list(std::move(out));
  }
  if (!args.positional[0].is_string())
    throw TemplateError("map() filter name must be a string", line);
  const CallArgs filter_args = tail_args(args, 1);
  for (const Value& item : iterate(seq, line))
    out.push_back(apply_filter(args.positional[0].as_string(), item, filter_args, line));
  return Value::list(std::move(out));
}

Value to_json(const Value& v, const CallArgs& args, int line) {
  BoundArgs a("tojson", args, {"ensure_ascii", "indent", "separators", "sort_keys"}, line);
  JsonDumpOptions opt;
  if (a.get(0)) opt.ensure_ascii = truthy(*a.get(0));
  if (const Value* indent = a.get(1); indent && !indent->is_none()) {
    if (indent->kind() == Value::Kind::Int)
      opt.indent = std::string(std::max<int64_t>(0, indent->as_int()), ' ');
    else if (indent->is_string())
      opt.indent = indent->as_string();
    else
      throw TemplateError("tojson indent must be an int or str", line);
  }
  if (const Value* sep = a.get(2); sep && !sep->is_none()) {
    if (!sep->is_list() || sep->as_list().size() != 2 || !sep->as_list()[0].is_string() ||
        !sep->as_list()[1].is_string())
      throw TemplateError("tojson separators must be a pair of strings", line);
    opt.separators = {sep->as_list()[0].as_string(), sep->as_list()[1].as_string()};
  }
  if (a.get(3)) opt.sort_keys = truthy(*a.get(3));
  try {
    return Value::string(json_dumps(v, opt));
  } catch (const std::invalid_argument& e) {
    throw TemplateError(std::string("tojson: ") + e.what(), line);
  }
}

Value int_filter(const Value& v, const CallArgs& args, int line) {
  BoundArgs a("int", args, {"default", "base"}, line);
  const Value fallback = a.get(0) ? *a.get(0) : Value::integer(0);
  switch (v.kind()) {
    case Value::Kind::Int:
      return v;
    case Value::Kind::Bool:
      return Value::integer(v.as_bool());
    case Value::Kind::Float:
      return Value::integer(static_cast<int64_t>(std::trunc(v.as_number())));
    case Value::Kind::String: {
      const std::string s = py_strip(v.as_string(), std::nullopt, StripSide::Both);
      try {
        size_t used = 0;
        const long long i = std::stoll(s, &used, 10);
        if (used == s.size()) return Value::integer(i);
        const double d = std::stod(s, &used);
        if (used == s.size()) return Value::integer(static_cast<int64_t>(std::trunc(d)));
      } catch (const std::exception&) {
      }
      return fallback;
    }
    default:
      return fallback;
  }
}

}  // namespace

Value apply_filter(const std::string& name, const Value& v, const CallArgs& args, int line) {
  auto soft_str = [&] { return to_str(v); };
  if (name == "tojson") return to_json(v, args, line);
  if (name == "safe") return v;
  if (name == "string") return Value::string(soft_str());
  if (name == "trim") {
    BoundArgs a(name, args, {"chars"}, line);
    std::optional<std::string> chars;
    if (a.get(0) && !a.get(0)->is_none()) chars = to_str(*a.get(0));
    return Value::string(py_strip(soft_str(), chars, StripSide::Both));
  }
  if (name == "length" || name == "count") return Value::integer(python_len(v, line));
  if (name == "upper" || name == "lower" || name == "capitalize") {
    const auto r = name == "upper"   ? ascii_upper(soft_str())
                   : name == "lower" ? ascii_lower(soft_str())
                                     : ascii_capitalize(soft_str());
    if (!r) throw TemplateError("unsupported: " + name + " filter on non-ASCII text", line);
    return Value::string(*r);
  }
  if (name == "items") {
    if (v.is_undefined()) return Value::list({});
    if (!v.is_dict())
      throw TemplateError("items filter: expected a mapping, got " + v.type_name(), line);
    return call_method(v, "items", {}, line);
  }
  if (name == "list") return Value::list(iterate(v, line));
  if (name == "first" || name == "last") {
    if (v.is_undefined()) return v;
    const ValueList items = iterate(v, line);
    if (items.empty()) return Value::undefined("No " + name + " item, sequence was empty.");
    return name == "first" ? items.front() : items.back();
  }
  if (name == "reverse") {
    if (v.is_string()) {
      std::u32string cps = nibble::text::to_code_points(v.as_string());
      std::reverse(cps.begin(), cps.end());
      return Value::string(nibble::text::from_code_points(cps));
    }
    ValueList items = iterate(v, line);
    std::reverse(items.begin(), items.end());
    return Value::list(std::move(items));
  }
  if (name == "default" || name == "d") {
    BoundArgs a(name, args, {"default_value", "boolean"}, line);
    const bool boolean = a.get(1) && truthy(*a.get(1));
    if (v.is_undefined() || (boolean && !truthy(v)))
      return a.get(0) ? *a.get(0) : Value::string("");
    return v;
  }
  if (name == "join") {
    BoundArgs a(name, args, {"d", "attribute"}, line);
    const std::string sep = a.get(0) ? to_str(*a.get(0)) : "";
    std::string out;
    bool first = true;
    for (const Value& item : iterate(v, line)) {
      if (!first) out += sep;
      out += to_str(a.get(1) ? attribute_of(item, a.string_arg(1), line) : item);
      first = false;
    }
    return Value::string(out);
  }
  if (name == "replace") {
    BoundArgs a(name, args, {"old", "new", "count"}, line);
    const long count =
        a.get(2) && !a.get(2)->is_none() ? static_cast<long>(a.get(2)->as_number()) : -1;
    return Value::string(
        py_replace(soft_str(), to_str(a.required(0)), to_str(a.required(1)), count));
  }
  if ((name == "int" || name == "float") && v.is_undefined()) fail_undefined(v, line);
  if (name == "int") return int_filter(v, args, line);
  if (name == "float") {
    if (v.is_number() || v.kind() == Value::Kind::Bool) return Value::floating(v.as_number());
    if (v.is_string()) {
      try {
        size_t used = 0;
        const std::string s = py_strip(v.as_string(), std::nullopt, StripSide::Both);
        const double d = std::stod(s, &used);
        if (used == s.size()) return Value::floating(d);
      } catch (const std::exception&) {
      }
    }
    return Value::floating(0.0);
  }
  if (name == "abs") {
    if (v.kind() == Value::Kind::Bool) return Value::integer(v.as_bool());
    if (v.kind() == Value::Kind::Int)
      return Value::integer(v.as_int() < 0 ? -v.as_int() : v.as_int());
    if (v.kind() == Value::Kind::Float) return Value::floating(std::fabs(v.as_number()));
    throw TemplateError("bad operand type for abs(): '" + v.type_name() + "'", line);
  }
  if (name == "select" || name == "reject" || name == "selectattr" || name == "rejectattr")
    return select_items(name, v, args, line);
  if (name == "map") return map_items(v, args, line);
  throw TemplateError("unsupported filter '" + name + "'", line);
}

bool apply_test(const std::string& name, const Value& v, const CallArgs& args, int line) {
  using K = Value::Kind;
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "string") return v.is_string();
  if (name == "number") return v.is_number() || v.kind() == K::Bool;
  if (name == "integer") return v.kind() == K::Int;
  if (name == "float") return v.kind() == K::Float;
  if (name == "boolean") return v.kind() == K::Bool;
  if (name == "true") return v.kind() == K::Bool && v.as_bool();
  if (name == "false") return v.kind() == K::Bool && !v.as_bool();
  if (name == "mapping") return v.is_dict();
  if (name == "iterable") return v.is_string() || v.is_list() || v.is_dict() || v.is_undefined();
  if (name == "sequence") return v.is_string() || v.is_list() || v.is_dict() || v.is_undefined();
  if (name == "callable") return false;
  if (name == "odd" || name == "even") {
    if (v.kind() != K::Int) throw TemplateError(name + " test needs an integer", line);
    return (v.as_int() % 2 != 0) == (name == "odd");
  }
  if (name == "divisibleby") {
    BoundArgs a(name, args, {"num"}, line);
    const Value& n = a.required(0);
    if (v.kind() != K::Int || n.kind() != K::Int || n.as_int() == 0)
      throw TemplateError("divisibleby needs non-zero integers", line);
    return v.as_int() % n.as_int() == 0;
  }
  if (name == "lower" || name == "upper") {
    const std::string s = to_str(v);
    const auto mapped = name == "lower" ? ascii_lower(s) : ascii_upper(s);
    if (!mapped) throw TemplateError("unsupported: " + name + " test on non-ASCII text", line);
    return *mapped == s;
  }
  BoundArgs a(name, args, {"other"}, line);
  if (name == "eq" || name == "equalto" || name == "==") return equals(v, a.required(0));
  if (name == "ne" || name == "!=") return !equals(v, a.required(0));
  if (name == "sameas") {
    const Value& o = a.required(0);
    if (v.kind() != o.kind()) return false;
    if (v.is_none() || v.kind() == K::Bool) return equals(v, o);
    throw TemplateError("unsupported: sameas test on " + v.type_name(), line);
  }
  if (name == "in") {
    const Value& c = a.required(0);
    if (c.is_string() && v.is_string())
      return c.as_string().find(v.as_string()) != std::string::npos;
    if (c.is_dict()) return v.is_string() && c.find(v.as_string());
    for (const Value& item : iterate(c, line))
      if (equals(item, v)) return true;
    return false;
  }
  if (name == "lt" || name == "<" || name == "le" || name == "<=" || name == "gt" || name == ">" ||
      name == "ge" || name == ">=") {
    const Value& o = a.required(0);
    const bool swap = name == "gt" || name == ">" || name == "le" || name == "<=";
    const auto r = swap ? less_than(o, v) : less_than(v, o);
    if (!r)
      throw TemplateError(
          "'" + name + "' not supported between " + v.type_name() + " and " + o.type_name(), line);
    return (name == "le" || name == "<=" || name == "ge" || name == ">=") ? !*r : *r;
  }
  throw TemplateError("unsupported test '" + name + "'", line);
}

bool is_global_function(const std::string& name) {
  return name == "namespace" || name == "range" || name == "dict" || name == "raise_exception" ||
         name == "strftime_now";
}

Value call_global(const std::string& name, const CallArgs& args, int line) {
  if (name == "raise_exception") {
    BoundArgs a(name, args, {"message"}, line);
    throw TemplateRaised(to_str(a.required(0)), line);
  }
  if (name == "namespace" || name == "dict") {
    ValueDict attrs;
    auto put = [&](const std::string& k, const Value& v) {
      for (auto& [key, val] : attrs)
        if (key == k) {
          val = v;
          return;
        }
      attrs.emplace_back(k, v);
    };
    if (args.positional.size() > 1)
      throw TemplateError(name + "() takes at most one positional argument", line);
    if (!args.positional.empty()) {
      if (!args.positional[0].is_dict())
        throw TemplateError(name + "() positional argument must be a mapping", line);
      for (const auto& [k, v] : args.positional[0].as_dict()) put(k, v);
    }
    for (const auto& [k, v] : args.keyword) put(k, v);
    return name == "dict" ? Value::dict(std::move(attrs)) : Value::new_namespace(std::move(attrs));
  }
  if (name == "range") {
    if (args.positional.empty() || args.positional.size() > 3 || !args.keyword.empty())
      throw TemplateError("range() takes 1 to 3 integer arguments", line);
    for (const Value& p : args.positional)
      if (p.kind() != Value::Kind::Int)
        throw TemplateError("range() arguments must be integers", line);
    int64_t start = 0, stop, step = 1;
    if (args.positional.size() == 1) {
      stop = args.positional[0].as_int();
    } else {
      start = args.positional[0].as_int();
      stop = args.positional[1].as_int();
      if (args.positional.size() == 3) step = args.positional[2].as_int();
    }
    if (step == 0) throw TemplateError("range() arg 3 must not be zero", line);
    ValueList out;
    for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
      out.push_back(Value::integer(i));
      if (out.size() > 100000) throw TemplateError("range() too large for a chat template", line);
    }
    return Value::list(std::move(out));
  }
  if (name == "strftime_now") {
    BoundArgs a(name, args, {"format"}, line);
    const std::time_t now = std::time(nullptr);
    std::tm tm{};
    localtime_r(&now, &tm);
    char buf[256];
    const size_t n = std::strftime(buf, sizeof buf, a.string_arg(0).c_str(), &tm);
    return Value::string(std::string(buf, n));
  }
  throw TemplateError("'" + name + "' is undefined", line);
}

}  // namespace nibble::chat
