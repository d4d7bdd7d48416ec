// str and dict methods callable from templates (value.name(...)), with Python's semantics.
#include <algorithm>

#include "engine/chat/python_string.h"
#include "engine/chat/template_args.h"
#include "engine/chat/template_builtins.h"
#include "engine/text/utf8.h"

namespace nibble::chat {
namespace {

const char* const kStringMethods[] = {
    "startswith", "endswith", "strip",        "lstrip",       "rstrip",  "split",
    "rsplit",     "upper",    "lower",        "capitalize",   "replace", "find",
    "count",      "join",     "removeprefix", "removesuffix", "isdigit", "isspace"};
const char* const kDictMethods[] = {"items", "keys", "values", "get"};

std::optional<std::string> optional_chars(const BoundArgs& a, size_t i, int line) {
  const Value* v = a.get(i);
  if (!v || v->is_none()) return std::nullopt;
  if (!v->is_string()) throw TemplateError("strip arg must be None or str", line);
  return v->as_string();
}

long optional_int(const BoundArgs& a, size_t i, long fallback, int line) {
  const Value* v = a.get(i);
  if (!v) return fallback;
  if (v->kind() != Value::Kind::Int) throw TemplateError("expected an integer argument", line);
  return static_cast<long>(v->as_int());
}

Value string_list(const std::vector<std::string>& parts) {
  ValueList out;
  for (const auto& p : parts) out.push_back(Value::string(p));
  return Value::list(std::move(out));
}

// startswith/endswith accept a str or a tuple (list) of str.
bool affix_match(const std::string& s, const Value& affix, bool prefix, int line) {
  auto one = [&](const Value& a) {
    if (!a.is_string())
      throw TemplateError(std::string(prefix ? "startswith" : "endswith") +
                              " first arg must be str or a tuple of str, not " + a.type_name(),
                          line);
    return prefix ? s.starts_with(a.as_string()) : s.ends_with(a.as_string());
  };
  if (affix.is_list()) return std::any_of(affix.as_list().begin(), affix.as_list().end(), one);
  return one(affix);
}

Value case_mapped(const std::optional<std::string>& r, const std::string& name, int line) {
  if (!r) throw TemplateError("unsupported: " + name + "() of non-ASCII text", line);
  return Value::string(*r);
}

Value call_string_method(const std::string& s, const std::string& name, const CallArgs& args,
                         int line) {
  if (name == "startswith" || name == "endswith") {
    BoundArgs a(name, args, {"prefix"}, line);
    return Value::boolean(affix_match(s, a.required(0), name == "startswith", line));
  }
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    BoundArgs a(name, args, {"chars"}, line);
    const StripSide side = name == "strip"    ? StripSide::Both
                           : name == "lstrip" ? StripSide::Left
                                              : StripSide::Right;
    return Value::string(py_strip(s, optional_chars(a, 0, line), side));
  }
  if (name == "split" || name == "rsplit") {
    BoundArgs a(name, args, {"sep", "maxsplit"}, line);
    const long maxsplit = optional_int(a, 1, -1, line);
    std::optional<std::string> sep = optional_chars(a, 0, line);
    try {
      if (name == "rsplit" && sep) return string_list(py_rsplit(s, *sep, maxsplit));
      if (name == "rsplit" && maxsplit >= 0)
        throw TemplateError("unsupported: rsplit() on whitespace with maxsplit", line);
      return string_list(py_split(s, sep, maxsplit));
    } catch (const std::invalid_argument&) {
      throw TemplateError(name + "(): empty separator", line);
    }
  }
  if (name == "upper") return case_mapped(ascii_upper(s), name, line);
  if (name == "lower") return case_mapped(ascii_lower(s), name, line);
  if (name == "capitalize") return case_mapped(ascii_capitalize(s), name, line);
  if (name == "replace") {
    BoundArgs a(name, args, {"old", "new", "count"}, line);
    return Value::string(
        py_replace(s, a.string_arg(0), a.string_arg(1), optional_int(a, 2, -1, line)));
  }
  if (name == "find" || name == "count") {
    BoundArgs a(name, args, {"sub"}, line);
    const std::string& sub = a.string_arg(0);
    if (name == "find") {
      const size_t at = s.find(sub);
      if (at == std::string::npos) return Value::integer(-1);
      return Value::integer(
          static_cast<int64_t>(nibble::text::to_code_points(s.substr(0, at)).size()));
    }
    if (sub.empty())
      return Value::integer(static_cast<int64_t>(nibble::text::to_code_points(s).size()) + 1);
    int64_t n = 0;
    for (size_t at = s.find(sub); at != std::string::npos; at = s.find(sub, at + sub.size())) ++n;
    return Value::integer(n);
  }
  if (name == "join") {
    BoundArgs a(name, args, {"iterable"}, line);
    std::string out;
    bool first = true;
    for (const Value& item : iterate(a.required(0), line)) {
      if (!item.is_string())
        throw TemplateError("join(): expected str items, got " + item.type_name(), line);
      if (!first) out += s;
      out += item.as_string();
      first = false;
    }
    return Value::string(out);
  }
  if (name == "removeprefix" || name == "removesuffix") {
    BoundArgs a(name, args, {"affix"}, line);
    const std::string& affix = a.string_arg(0);
    if (name == "removeprefix" && s.starts_with(affix))
      return Value::string(s.substr(affix.size()));
    if (name == "removesuffix" && s.ends_with(affix) && !affix.empty())
      return Value::string(s.substr(0, s.size() - affix.size()));
    return Value::string(s);
  }
  if (name == "isdigit" || name == "isspace") {
    BoundArgs a(name, args, {}, line);
    const std::u32string cps = nibble::text::to_code_points(s);
    if (cps.empty()) return Value::boolean(false);
    for (char32_t c : cps) {
      const bool ok = name == "isspace" ? is_python_space(c) : (c >= '0' && c <= '9');
      if (!ok) {
        if (name == "isdigit" && c >= 0x80)
          throw TemplateError("unsupported: isdigit() of non-ASCII text", line);
        return Value::boolean(false);
      }
    }
    return Value::boolean(true);
  }
  throw TemplateError("unsupported str method '" + name + "'", line);
}

Value call_dict_method(const Value& d, const std::string& name, const CallArgs& args, int line) {
  if (name == "get") {
    BoundArgs a(name, args, {"key", "default"}, line);
    const Value& key = a.required(0);
    if (key.is_string())
      if (const Value* v = d.find(key.as_string())) return *v;
    return a.get(1) ? *a.get(1) : Value::none();
  }
  BoundArgs a(name, args, {}, line);
  ValueList out;
  for (const auto& [k, v] : d.as_dict()) {
    if (name == "items")
      out.push_back(Value::tuple({Value::string(k), v}));
    else if (name == "keys")
      out.push_back(Value::string(k));
    else
      out.push_back(v);
  }
  return Value::list(std::move(out));
}

}  // namespace

bool has_method(const Value& object, const std::string& name) {
  if (object.is_string())
    return std::find(std::begin(kStringMethods), std::end(kStringMethods), name) !=
           std::end(kStringMethods);
  if (object.is_dict())
    return std::find(std::begin(kDictMethods), std::end(kDictMethods), name) !=
           std::end(kDictMethods);
  return false;
}

Value call_method(const Value& object, const std::string& name, const CallArgs& args, int line) {
  if (object.is_string()) return call_string_method(object.as_string(), name, args, line);
  if (object.is_dict()) return call_dict_method(object, name, args, line);
  throw TemplateError("'" + object.type_name() + "' object has no method '" + name + "'", line);
}

}  // namespace nibble::chat
