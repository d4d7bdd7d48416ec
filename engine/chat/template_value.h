#pragma once
// The values a chat template computes with, modelled on the Python objects Jinja2 sees:
// undefined, None, bool, int, float, str (UTF-8), list, dict (insertion-ordered, string keys)
// and namespace (the one mutable object; shared by reference like in Python).
// The free functions give Python's semantics: truthiness, str(), repr(), ==, <, and
// json.dumps as transformers' tojson filter calls it (ensure_ascii=False).
#include <nlohmann/json.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace nibble::chat {

class Value;
using ValueList = std::vector<Value>;
using ValueDict = std::vector<std::pair<std::string, Value>>;

// Jinja2's default Undefined: prints as "", is falsy, iterates as empty; anything else raises
// with `hint` as the message ("'x' is undefined", "'dict object' has no attribute 'y'").
struct UndefinedValue {
  std::string hint;
};

class Value {
  struct ListBox {
    ValueList value;
  };
  struct MacroRef {
    const void* definition;
    std::string name;
  };
  struct ListData {
    std::shared_ptr<const ListBox> items;
    bool tuple = false;
  };

 public:
  enum class Kind { Undefined, None, Bool, Int, Float, String, List, Dict, Namespace, Macro };

  Value() : data_(UndefinedValue{"value is undefined"}) {}
  static Value undefined(std::string hint) { return Value(Data(UndefinedValue{std::move(hint)})); }
  static Value none() { return Value(Data(nullptr)); }
  static Value boolean(bool b) { return Value(Data(b)); }
  static Value integer(int64_t i) { return Value(Data(i)); }
  static Value floating(double d) { return Value(Data(d)); }
  static Value string(std::string s) { return Value(Data(std::move(s))); }
  static Value list(ValueList items);
  // A Python tuple: behaves as a list except in repr() ("(a, b)") and == against lists.
  static Value tuple(ValueList items);
  static Value dict(ValueDict items);
  static Value new_namespace(ValueDict attrs);
  // Object keys keep their order, as Python's json.loads does.
  // A {% macro %} defined by the template; `definition` is its statement, owned by the template.
  static Value macro(const void* definition, std::string name) {
    return Value(Data(MacroRef{definition, std::move(name)}));
  }
  static Value from_json(const nlohmann::ordered_json& j);

  Kind kind() const { return static_cast<Kind>(data_.index()); }
  bool is_undefined() const { return kind() == Kind::Undefined; }
  bool is_none() const { return kind() == Kind::None; }
  bool is_string() const { return kind() == Kind::String; }
  bool is_number() const { return kind() == Kind::Int || kind() == Kind::Float; }
  bool is_list() const { return kind() == Kind::List; }
  bool is_dict() const { return kind() == Kind::Dict; }
  bool is_namespace() const { return kind() == Kind::Namespace; }
  bool is_macro() const { return kind() == Kind::Macro; }

  bool as_bool() const { return std::get<bool>(data_); }
  int64_t as_int() const { return std::get<int64_t>(data_); }
  double as_number() const;  // int or float as double
  const std::string& as_string() const { return std::get<std::string>(data_); }
  const ValueList& as_list() const { return std::get<ListData>(data_).items->value; }
  bool is_tuple() const { return is_list() && std::get<ListData>(data_).tuple; }
  const ValueDict& as_dict() const { return *std::get<std::shared_ptr<const ValueDict>>(data_); }
  ValueDict& namespace_attrs() const { return *std::get<std::shared_ptr<ValueDict>>(data_); }
  const void* macro_definition() const { return std::get<MacroRef>(data_).definition; }
  const std::string& macro_name() const { return std::get<MacroRef>(data_).name; }
  const std::string& undefined_hint() const { return std::get<UndefinedValue>(data_).hint; }

  // Dict or namespace member by key; nullptr when absent.
  const Value* find(const std::string& key) const;

  // Python's type name for messages: "str", "dict", "NoneType", ...
  std::string type_name() const;

 private:
  using Data =
      std::variant<UndefinedValue, std::nullptr_t, bool, int64_t, double, std::string, ListData,
                   std::shared_ptr<const ValueDict>, std::shared_ptr<ValueDict>, MacroRef>;
  explicit Value(Data d) : data_(std::move(d)) {}
  Data data_;
};

bool truthy(const Value& v);
std::string to_str(const Value& v);  // Python str(); undefined -> ""
std::string repr(const Value& v);    // Python repr()
std::string float_repr(double d);    // Python repr(float)
bool equals(const Value& a, const Value& b);
// Python's a < b for numbers, strings and lists; nullopt when Python would raise TypeError.
std::optional<bool> less_than(const Value& a, const Value& b);

struct JsonDumpOptions {
  std::optional<std::string> indent;  // None: one line with ", " and ": "; else the indent unit
  bool sort_keys = false;
  bool ensure_ascii = false;
  std::optional<std::pair<std::string, std::string>> separators;  // (item, key)
};
// json.dumps. Throws std::invalid_argument for undefined or namespace values.
std::string json_dumps(const Value& v, const JsonDumpOptions& options);

}  // namespace nibble::chat
