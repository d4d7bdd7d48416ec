#include "engine/chat/template_value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <stdexcept>

#include "engine/text/utf8.h"

namespace nibble::chat {

Value Value::list(ValueList items) {
  return Value(Data(ListData{std::make_shared<const ListBox>(ListBox{std::move(items)}), false}));
}
Value Value::tuple(ValueList items) {
  return Value(Data(ListData{std::make_shared<const ListBox>(ListBox{std::move(items)}), true}));
}
Value Value::dict(ValueDict items) {
  return Value(Data(std::make_shared<const ValueDict>(std::move(items))));
}
Value Value::new_namespace(ValueDict attrs) {
  return Value(Data(std::make_shared<ValueDict>(std::move(attrs))));
}

Value Value::from_json(const nlohmann::ordered_json& j) {
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null:
      return none();
    case nlohmann::ordered_json::value_t::boolean:
      return boolean(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer:
      return integer(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned:
      return integer(static_cast<int64_t>(j.get<uint64_t>()));
    case nlohmann::ordered_json::value_t::number_float:
      return floating(j.get<double>());
    case nlohmann::ordered_json::value_t::string:
      return string(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      ValueList items;
      for (const auto& e : j) items.push_back(from_json(e));
      return list(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      ValueDict items;
      for (auto it = j.begin(); it != j.end(); ++it) items.emplace_back(it.key(), from_json(*it));
      return dict(std::move(items));
    }
    default:
      throw std::invalid_argument("unsupported JSON value (binary or discarded)");
  }
}

double Value::as_number() const {
  if (kind() == Kind::Int) return static_cast<double>(as_int());
  if (kind() == Kind::Bool) return as_bool() ? 1.0 : 0.0;
  return std::get<double>(data_);
}

const Value* Value::find(const std::string& key) const {
  const ValueDict* d = is_dict() ? &as_dict() : is_namespace() ? &namespace_attrs() : nullptr;
  if (!d) return nullptr;
  for (const auto& [k, v] : *d)
    if (k == key) return &v;
  return nullptr;
}

std::string Value::type_name() const {
  switch (kind()) {
    case Kind::Undefined:
      return "Undefined";
    case Kind::None:
      return "NoneType";
    case Kind::Bool:
      return "bool";
    case Kind::Int:
      return "int";
    case Kind::Float:
      return "float";
    case Kind::String:
      return "str";
    case Kind::List:
      return is_tuple() ? "tuple" : "list";
    case Kind::Dict:
      return "dict";
    case Kind::Namespace:
      return "Namespace";
    case Kind::Macro:
      return "Macro";
  }
  return "?";
}

bool truthy(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::Undefined:
    case Value::Kind::None:
      return false;
    case Value::Kind::Bool:
      return v.as_bool();
    case Value::Kind::Int:
      return v.as_int() != 0;
    case Value::Kind::Float:
      return v.as_number() != 0.0;
    case Value::Kind::String:
      return !v.as_string().empty();
    case Value::Kind::List:
      return !v.as_list().empty();
    case Value::Kind::Dict:
      return !v.as_dict().empty();
    case Value::Kind::Namespace:
    case Value::Kind::Macro:
      return true;
  }
  return false;
}

std::string float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  // Shortest round-trip digits, then Python's layout: scientific when exp < -4 or exp >= 16.
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  const auto e_pos = sci.find('e');
  std::string mant = sci.substr(0, e_pos);
  const int exp = std::stoi(sci.substr(e_pos + 1));
  const bool negative = mant[0] == '-';
  if (negative) mant.erase(0, 1);
  std::string digits;
  for (char c : mant)
    if (c != '.') digits += c;
  std::string out = negative ? "-" : "";
  if (exp < -4 || exp >= 16) {
    out += digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char e[16];
    std::snprintf(e, sizeof e, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    return out + e;
  }
  if (exp < 0) return out + "0." + std::string(-exp - 1, '0') + digits;
  if (static_cast<int>(digits.size()) <= exp + 1)
    return out + digits + std::string(exp + 1 - digits.size(), '0') + ".0";
  return out + digits.substr(0, exp + 1) + "." + digits.substr(exp + 1);
}

namespace {

std::string repr_string(const std::string& s) {
  const bool has_single = s.find('\'') != std::string::npos;
  const bool has_double = s.find('"') != std::string::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  for (char32_t cp : nibble::text::to_code_points(s)) {
    if (cp == '\\')
      out += "\\\\";
    else if (cp == static_cast<char32_t>(quote))
      out += std::string("\\") + quote;
    else if (cp == '\n')
      out += "\\n";
    else if (cp == '\r')
      out += "\\r";
    else if (cp == '\t')
      out += "\\t";
    else if (cp < 0x20 || (cp >= 0x7F && cp < 0xA0)) {
      char b[8];
      std::snprintf(b, sizeof b, "\\x%02x", static_cast<unsigned>(cp));
      out += b;
    } else {
      nibble::text::append_utf8(out, cp);
    }
  }
  return out + quote;
}

std::string repr_items(const ValueDict& d) {
  std::string out = "{";
  for (size_t i = 0; i < d.size(); ++i) {
    if (i) out += ", ";
    out += repr_string(d[i].first) + ": " + repr(d[i].second);
  }
  return out + "}";
}

}  // namespace

std::string repr(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::Undefined:
      return "Undefined";
    case Value::Kind::String:
      return repr_string(v.as_string());
    case Value::Kind::List: {
      std::string out = v.is_tuple() ? "(" : "[";
      const auto& l = v.as_list();
      for (size_t i = 0; i < l.size(); ++i) out += (i ? ", " : "") + repr(l[i]);
      if (v.is_tuple()) return out + (l.size() == 1 ? ",)" : ")");
      return out + "]";
    }
    case Value::Kind::Dict:
      return repr_items(v.as_dict());
    case Value::Kind::Namespace:
      return "<Namespace " + repr_items(v.namespace_attrs()) + ">";
    case Value::Kind::Macro:
      return "<Macro '" + v.macro_name() + "'>";
    default:
      return to_str(v);
  }
}

std::string to_str(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::Undefined:
      return "";
    case Value::Kind::None:
      return "None";
    case Value::Kind::Bool:
      return v.as_bool() ? "True" : "False";
    case Value::Kind::Int:
      return std::to_string(v.as_int());
    case Value::Kind::Float:
      return float_repr(v.as_number());
    case Value::Kind::String:
      return v.as_string();
    default:
      return repr(v);
  }
}

namespace {
bool numeric(const Value& v) {
  return v.kind() == Value::Kind::Int || v.kind() == Value::Kind::Float ||
         v.kind() == Value::Kind::Bool;
}
}  // namespace

bool equals(const Value& a, const Value& b) {
  if (numeric(a) && numeric(b)) {
    if (a.kind() != Value::Kind::Float && b.kind() != Value::Kind::Float) {
      auto as_i = [](const Value& v) {
        return v.kind() == Value::Kind::Bool ? int64_t{v.as_bool()} : v.as_int();
      };
      return as_i(a) == as_i(b);
    }
    return a.as_number() == b.as_number();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Value::Kind::Undefined:
    case Value::Kind::None:
      return true;
    case Value::Kind::String:
      return a.as_string() == b.as_string();
    case Value::Kind::List: {
      const auto &x = a.as_list(), &y = b.as_list();
      if (x.size() != y.size() || a.is_tuple() != b.is_tuple()) return false;
      for (size_t i = 0; i < x.size(); ++i)
        if (!equals(x[i], y[i])) return false;
      return true;
    }
    case Value::Kind::Dict: {
      if (a.as_dict().size() != b.as_dict().size()) return false;
      for (const auto& [k, v] : a.as_dict()) {
        const Value* other = b.find(k);
        if (!other || !equals(v, *other)) return false;
      }
      return true;
    }
    case Value::Kind::Namespace:
      return &a.namespace_attrs() == &b.namespace_attrs();
    case Value::Kind::Macro:
      return a.macro_definition() == b.macro_definition();
    default:
      return false;
  }
}

std::optional<bool> less_than(const Value& a, const Value& b) {
  if (numeric(a) && numeric(b)) {
    if (a.kind() == Value::Kind::Int && b.kind() == Value::Kind::Int)
      return a.as_int() < b.as_int();
    return a.as_number() < b.as_number();
  }
  if (a.is_string() && b.is_string()) return a.as_string() < b.as_string();
  if (a.is_list() && b.is_list()) {
    const auto &x = a.as_list(), &y = b.as_list();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (equals(x[i], y[i])) continue;
      return less_than(x[i], y[i]);
    }
    return x.size() < y.size();
  }
  return std::nullopt;
}

namespace {

void dump_string(std::string& out, const std::string& s, bool ensure_ascii) {
  out += '"';
  for (char32_t cp : nibble::text::to_code_points(s)) {
    switch (cp) {
      case '"':
        out += "\\\"";
        continue;
      case '\\':
        out += "\\\\";
        continue;
      case '\n':
        out += "\\n";
        continue;
      case '\r':
        out += "\\r";
        continue;
      case '\t':
        out += "\\t";
        continue;
      case '\b':
        out += "\\b";
        continue;
      case '\f':
        out += "\\f";
        continue;
      default:
        break;
    }
    char b[16];
    if (cp < 0x20 || (ensure_ascii && cp > 0x7E && cp < 0x10000)) {
      std::snprintf(b, sizeof b, "\\u%04x", static_cast<unsigned>(cp));
      out += b;
    } else if (ensure_ascii && cp >= 0x10000) {
      const char32_t v = cp - 0x10000;
      std::snprintf(b, sizeof b, "\\u%04x\\u%04x", static_cast<unsigned>(0xD800 + (v >> 10)),
                    static_cast<unsigned>(0xDC00 + (v & 0x3FF)));
      out += b;
    } else {
      nibble::text::append_utf8(out, cp);
    }
  }
  out += '"';
}

struct Dumper {
  const JsonDumpOptions& opt;
  std::string item_sep, key_sep;
  std::string out;

  void newline(int level) {
    if (!opt.indent) return;
    out += '\n';
    for (int i = 0; i < level; ++i) out += *opt.indent;
  }

  void dump(const Value& v, int level) {
    switch (v.kind()) {
      case Value::Kind::None:
        out += "null";
        return;
      case Value::Kind::Bool:
        out += v.as_bool() ? "true" : "false";
        return;
      case Value::Kind::Int:
        out += std::to_string(v.as_int());
        return;
      case Value::Kind::Float: {
        const double d = v.as_number();
        out += std::isnan(d)   ? "NaN"
               : std::isinf(d) ? (d > 0 ? "Infinity" : "-Infinity")
                               : float_repr(d);
        return;
      }
      case Value::Kind::String:
        dump_string(out, v.as_string(), opt.ensure_ascii);
        return;
      case Value::Kind::List: {
        const auto& l = v.as_list();
        if (l.empty()) {
          out += "[]";
          return;
        }
        out += '[';
        for (size_t i = 0; i < l.size(); ++i) {
          if (i) out += item_sep;
          newline(level + 1);
          dump(l[i], level + 1);
        }
        newline(level);
        out += ']';
        return;
      }
      case Value::Kind::Dict: {
        ValueDict d = v.as_dict();
        if (d.empty()) {
          out += "{}";
          return;
        }
        if (opt.sort_keys)
          std::stable_sort(d.begin(), d.end(),
                           [](const auto& a, const auto& b) { return a.first < b.first; });
        out += '{';
        for (size_t i = 0; i < d.size(); ++i) {
          if (i) out += item_sep;
          newline(level + 1);
          dump_string(out, d[i].first, opt.ensure_ascii);
          out += key_sep;
          dump(d[i].second, level + 1);
        }
        newline(level);
        out += '}';
        return;
      }
      default:
        throw std::invalid_argument("Object of type " + v.type_name() +
                                    " is not JSON serializable");
    }
  }
};

}  // namespace

std::string json_dumps(const Value& v, const JsonDumpOptions& options) {
  Dumper d{options, options.indent ? "," : ", ", ": ", ""};
  if (options.separators) {
    d.item_sep = options.separators->first;
    d.key_sep = options.separators->second;
  }
  d.dump(v, 0);
  return d.out;
}

}  // namespace nibble::chat
